"""The HTTP admin API as the `cluster`, `groups` and `transactions` commands use it: thin
clients, one HTTP call each, then a table.

`--admin-url` defaults to $KAFKALITE_ADMIN_URL, else http://127.0.0.1:9644 (the broker's
`admin.listener`). `--json` prints the API's JSON answer as is. Exit status: 0 on success, 1 when
the API answered an error (its code and message are printed) or cannot be reached, 2 on usage
errors.
"""

from __future__ import annotations

from typing import Any

import click

from kafkalite.cli.common import LazyConsole, new_table, without_error_name

DEFAULT_ADMIN_URL = "http://127.0.0.1:9644"
TIMEOUT_S = 60.0

__all__ = ["new_table"]


def console() -> Any:
    """A console on the current stdout: the terminal's width there, else as wide as the
    content (common.PIPE_WIDTH)."""
    return LazyConsole()


def checked_admin_url(ctx: Any, param: Any, value: str | None) -> str | None:
    """``--admin-url`` must be http(s)://host[:port][/prefix]; anything else is a usage error
    naming the option (urllib's own messages, 'unknown url type', 'nonnumeric port', said
    nothing about where the bad value came from)."""
    if value is None:
        return value
    import urllib.parse

    problem = None
    try:
        parts = urllib.parse.urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
    except ValueError as e:
        problem = str(e)
    else:
        if parts.scheme not in ("http", "https"):
            problem = "expected http://host:port"
        elif not parts.hostname:
            problem = "no host"
        elif parts.query or parts.fragment:
            problem = "a base URL takes no query or fragment"
    if problem is not None:
        fail(
            f"--admin-url: {value!r} is not an admin API URL ({problem}), e.g. {DEFAULT_ADMIN_URL}",
            2,
        )
    return value


admin_url_option = click.option(
    "--admin-url",
    "admin_url",
    metavar="URL",
    default=DEFAULT_ADMIN_URL,
    show_default=True,
    envvar="KAFKALITE_ADMIN_URL",
    show_envvar=True,
    help="base URL of any broker's admin API (admin.listener)",
    callback=checked_admin_url,
)
json_option = click.option("--json", "as_json", is_flag=True, help="print the API's JSON answer")


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.status = status
        self.code = code
        self.message = message


def call(admin_url: str, method: str, path: str, body: Any = None) -> Any:
    """One request to the admin API; the decoded JSON answer. Raises ApiError or exits 1."""
    import json
    import urllib.error
    import urllib.request

    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(admin_url.rstrip("/") + path, method=method, data=data)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            return json.loads(response.read() or b"null")
    except urllib.error.HTTPError as e:
        payload = e.read()
        try:
            answer = json.loads(payload)
            raise ApiError(e.code, answer.get("error", str(e.code)), answer.get("message", ""))
        except (json.JSONDecodeError, AttributeError):
            raise ApiError(e.code, str(e.code), payload.decode(errors="replace")[:200]) from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        fail(f"cannot reach the admin API at {admin_url}: {reason}")


def fail(message: str, code: int = 1) -> None:
    """One line on stderr, ``error: ...`` (red on a terminal), and exit ``code``."""
    click.echo(f"{click.style('error:', fg='red')} {message}", err=True)
    raise SystemExit(code)


def run(admin_url: str, method: str, path: str, body: Any = None) -> Any:
    try:
        return call(admin_url, method, path, body)
    except ApiError as e:
        fail(f"{e.code} (HTTP {e.status}): {without_error_name(e.message, e.code) or ''}")


def quote(name: str) -> str:
    """``name`` as one segment of an admin API path."""
    import urllib.parse

    return urllib.parse.quote(name, safe="")


def emit_json(answer: Any) -> None:
    import json

    click.echo(json.dumps(answer, indent=2))


def or_dash(value: Any) -> str:
    return "-" if value is None else str(value)


def parse_partition(text: str) -> tuple[str, int]:
    topic, sep, partition = text.rpartition(":")
    if not sep or not topic:
        fail(f"expected TOPIC:PARTITION, got {text!r}", 2)
    try:
        return topic, int(partition)
    except ValueError:
        fail(f"partition must be an integer in {text!r}", 2)
    raise AssertionError  # unreachable


def parse_assignment(text: str, what: str) -> tuple[str, int, str]:
    left, sep, right = text.partition("=")
    if not sep:
        fail(f"{what} expects TOPIC:PARTITION=VALUE, got {text!r}", 2)
    topic, partition = parse_partition(left)
    return topic, partition, right
