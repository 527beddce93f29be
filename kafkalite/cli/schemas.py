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
from typing import Annotated, Any

import typer
from rich.table import Table

from kafkalite.cli.admin_api import console, emit_json, fail

DEFAULT_REGISTRY_URL = "http://127.0.0.1:8081"
MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"
TIMEOUT_S = 60.0

RegistryUrl = Annotated[
    str,
    typer.Option(
        "--registry-url",
        envvar="KAFKALITE_SCHEMA_REGISTRY_URL",
        help="the broker's schema.registry.listeners URL",
    ),
]
JsonOutput = Annotated[bool, typer.Option("--json", help="print the registry's JSON answer")]
Version = Annotated[str, typer.Option("--version", help="a version number or latest")]
SchemaType = Annotated[
    str, typer.Option("--type", help="AVRO, JSON or PROTOBUF (default: from the file name)")
]

schemas_app = typer.Typer(
    help="Schema Registry: subjects, versions, register, check, delete, config",
    no_args_is_help=True,
)


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
def schemas_list(
    deleted: Annotated[bool, typer.Option("--deleted", help="soft-deleted ones too")] = False,
    registry_url: RegistryUrl = DEFAULT_REGISTRY_URL,
    as_json: JsonOutput = False,
) -> None:
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
    table = Table("subject", "versions")
    for row in rows:
        table.add_row(row["subject"], ", ".join(str(v) for v in row["versions"]))
    console().print(table)


@schemas_app.command("get")
def schemas_get(
    subject: str,
    version: Version = "latest",
    registry_url: RegistryUrl = DEFAULT_REGISTRY_URL,
    as_json: JsonOutput = False,
) -> None:
    """A version of a subject: its id, type and schema text."""
    answer = call(registry_url, "GET", f"/subjects/{subject_path(subject)}/versions/{version}")
    if as_json:
        emit_json(answer)
        return
    kind = answer.get("schemaType", "AVRO")
    typer.echo(
        f"subject {answer['subject']} version {answer['version']} id {answer['id']} ({kind})"
    )
    typer.echo(answer["schema"])


@schemas_app.command("register")
def schemas_register(
    subject: str,
    file: str,
    schema_type: SchemaType = "",
    registry_url: RegistryUrl = DEFAULT_REGISTRY_URL,
    as_json: JsonOutput = False,
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
    typer.echo(f"registered under {subject}: id {answer['id']}")


@schemas_app.command("check")
def schemas_check(
    subject: str,
    file: str,
    schema_type: SchemaType = "",
    version: Version = "",
    registry_url: RegistryUrl = DEFAULT_REGISTRY_URL,
    as_json: JsonOutput = False,
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
        typer.echo("compatible")
    else:
        typer.echo("incompatible:")
        for message in answer.get("messages") or ():
            typer.echo(f"  {message}")
    if not answer["is_compatible"]:
        raise typer.Exit(1)


@schemas_app.command("delete")
def schemas_delete(
    subject: str,
    version: Version = "",
    permanent: Annotated[
        bool, typer.Option("--permanent", help="hard delete (after a soft delete)")
    ] = False,
    registry_url: RegistryUrl = DEFAULT_REGISTRY_URL,
    as_json: JsonOutput = False,
) -> None:
    """Soft-delete SUBJECT (or one --version); --permanent removes a soft-deleted one."""
    path = f"/subjects/{subject_path(subject)}" + (f"/versions/{version}" if version else "")
    answer = call(registry_url, "DELETE", f"{path}?permanent={str(permanent).lower()}")
    if as_json:
        emit_json(answer)
        return
    versions = answer if isinstance(answer, list) else [answer]
    typer.echo(f"deleted {subject} versions {', '.join(str(v) for v in versions)}")


@schemas_app.command("config")
def schemas_config(
    subject: Annotated[str, typer.Argument(help="a subject (default: the global level)")] = "",
    set_level: Annotated[
        str, typer.Option("--set", help="NONE, BACKWARD(_TRANSITIVE), FORWARD(...), FULL(...)")
    ] = "",
    registry_url: RegistryUrl = DEFAULT_REGISTRY_URL,
    as_json: JsonOutput = False,
) -> None:
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
    typer.echo(level)
