"""`kafkalite schemas`: the Schema Registry (Confluent's REST API, served by every broker on
schema.registry.listeners; docs/schema-registry.md).

    kafkalite schemas list [--deleted]                              subjects
    kafkalite schemas get SUBJECT [--version V]                     a version (default latest)
    kafkalite schemas register SUBJECT FILE [--type AVRO|JSON|PROTOBUF]
    kafkalite schemas check SUBJECT FILE [--type T] [--version V]   compatibility, with reasons
    kafkalite schemas delete SUBJECT [--version V] [--permanent]
    kafkalite schemas config [SUBJECT] [--set LEVEL]                compatibility level

``--registry-url`` (default http://127.0.0.1:8081, or KAFKALITE_SCHEMA_REGISTRY_URL) and
``--json`` come after the subcommand. A registry error is printed with Confluent's error code,
exit 1; a file that cannot be read is exit 2.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import click

from kafkalite.cli.admin_api import console, emit_json, fail, new_table
from kafkalite.cli.common import Group

DEFAULT_REGISTRY_URL = "http://127.0.0.1:8081"
MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"
TIMEOUT_S = 60.0

registry_url_option = click.option(
    "--registry-url",
    envvar="KAFKALITE_SCHEMA_REGISTRY_URL",
    default=DEFAULT_REGISTRY_URL,
    show_default=True,
    help="the broker's schema.registry.listeners URL",
)
json_option = click.option(
    "--json", "as_json", is_flag=True, help="print the registry's JSON answer"
)
schema_type_option = click.option(
    "--type", "schema_type", default="", help="AVRO, JSON or PROTOBUF (default: from the file name)"
)


@click.group("schemas", cls=Group)
def schemas_app() -> None:
    """Schema Registry: subjects, versions, register, check, delete, config."""


def call(url: str, method: str, path: str, body: Any = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        url.rstrip("/") + path,
        data=data,
        method=method,
        headers={"Content-Type": MEDIA_TYPE, "Accept": MEDIA_TYPE},
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:
            text = answer.read()
    except urllib.error.HTTPError as e:
        try:
            error = json.loads(e.read())
            fail(f"{error.get('error_code')} (HTTP {e.code}): {error.get('message')}")
        except ValueError:
            fail(f"HTTP {e.code}: {e.reason}")
    except (urllib.error.URLError, OSError) as e:
        fail(f"cannot reach the schema registry at {url}: {getattr(e, 'reason', e)}")
    return json.loads(text) if text else None


def subject_path(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")


def read_schema(path: str, schema_type: str | None) -> dict[str, Any]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        fail(f"cannot read {path}: {e.strerror}", 2)
    kind = (schema_type or "").upper() or {
        ".proto": "PROTOBUF",
        ".json": "JSON",
    }.get(Path(path).suffix.lower(), "AVRO")
    if kind not in ("AVRO", "JSON", "PROTOBUF"):
        fail(f"--type: {schema_type!r} is not AVRO, JSON or PROTOBUF", 2)
    body: dict[str, Any] = {"schema": text}
    if kind != "AVRO":
        body["schemaType"] = kind
    return body


@schemas_app.command("list")
@click.option("--deleted", is_flag=True, help="soft-deleted ones too")
@registry_url_option
@json_option
def schemas_list(deleted: bool, registry_url: str, as_json: bool) -> None:
    """The subjects, each with its versions."""
    subjects = call(registry_url, "GET", f"/subjects?deleted={str(deleted).lower()}")
    rows = []
    for subject in subjects:
        versions = call(
            registry_url,
            "GET",
            f"/subjects/{subject_path(subject)}/versions?deleted={str(deleted).lower()}",
        )
        rows.append({"subject": subject, "versions": versions})
    if as_json:
        emit_json(rows)
        return
    table = new_table("subject", "versions")
    for row in rows:
        table.add_row(row["subject"], ", ".join(str(v) for v in row["versions"]))
    console().print(table)


@schemas_app.command("get")
@click.argument("subject")
@click.option("--version", default="latest", show_default=True, help="a version number or latest")
@registry_url_option
@json_option
def schemas_get(subject: str, version: str, registry_url: str, as_json: bool) -> None:
    """A version of a subject: its id, type and schema text."""
    answer = call(registry_url, "GET", f"/subjects/{subject_path(subject)}/versions/{version}")
    if as_json:
        emit_json(answer)
        return
    kind = answer.get("schemaType", "AVRO")
    click.echo(
        f"subject {answer['subject']} version {answer['version']} id {answer['id']} ({kind})"
    )
    click.echo(answer["schema"])


@schemas_app.command("register")
@click.argument("subject")
@click.argument("file")
@schema_type_option
@registry_url_option
@json_option
def schemas_register(
    subject: str, file: str, schema_type: str, registry_url: str, as_json: bool
) -> None:
    """Register the schema in FILE under SUBJECT (the same schema again: the same id)."""
    answer = call(
        registry_url,
        "POST",
        f"/subjects/{subject_path(subject)}/versions",
        read_schema(file, schema_type or None),
    )
    if as_json:
        emit_json(answer)
        return
    click.echo(f"registered under {subject}: id {answer['id']}")


@schemas_app.command("check")
@click.argument("subject")
@click.argument("file")
@schema_type_option
@click.option("--version", default="", help="one version (default: as the level says)")
@registry_url_option
@json_option
def schemas_check(
    subject: str, file: str, schema_type: str, version: str, registry_url: str, as_json: bool
) -> None:
    """Whether FILE may follow SUBJECT's versions under its compatibility level (exit 1 when
    not, with the reasons)."""
    where = f"/versions/{version}" if version else "/versions"
    answer = call(
        registry_url,
        "POST",
        f"/compatibility/subjects/{subject_path(subject)}{where}?verbose=true",
        read_schema(file, schema_type or None),
    )
    if as_json:
        emit_json(answer)
    elif answer["is_compatible"]:
        click.echo("compatible")
    else:
        click.echo("incompatible:")
        for message in answer.get("messages") or ():
            click.echo(f"  {message}")
    if not answer["is_compatible"]:
        raise SystemExit(1)


@schemas_app.command("delete")
@click.argument("subject")
@click.option("--version", default="", help="one version (default: the whole subject)")
@click.option("--permanent", is_flag=True, help="hard delete (after a soft delete)")
@registry_url_option
@json_option
def schemas_delete(
    subject: str, version: str, permanent: bool, registry_url: str, as_json: bool
) -> None:
    """Soft-delete SUBJECT (or one --version); --permanent removes a soft-deleted one."""
    path = f"/subjects/{subject_path(subject)}" + (f"/versions/{version}" if version else "")
    answer = call(registry_url, "DELETE", f"{path}?permanent={str(permanent).lower()}")
    if as_json:
        emit_json(answer)
        return
    versions = answer if isinstance(answer, list) else [answer]
    click.echo(f"deleted {subject} versions {', '.join(str(v) for v in versions)}")


@schemas_app.command("config")
@click.argument("subject", default="", required=False)
@click.option(
    "--set", "set_level", default="", help="NONE, BACKWARD(_TRANSITIVE), FORWARD(...), FULL(...)"
)
@registry_url_option
@json_option
def schemas_config(subject: str, set_level: str, registry_url: str, as_json: bool) -> None:
    """Show (or --set) the compatibility level, global or of SUBJECT."""
    path = f"/config/{subject_path(subject)}" if subject else "/config"
    if set_level:
        answer = call(registry_url, "PUT", path, {"compatibility": set_level.upper()})
        level = answer["compatibility"]
    else:
        answer = call(registry_url, "GET", path + ("?defaultToGlobal=true" if subject else ""))
        level = answer["compatibilityLevel"]
    if as_json:
        emit_json(answer)
        return
    click.echo(level)
