"""The root command (cli/root.py and cli/common.py): --version, the help of every command, the
check of --bootstrap-server, and the one-line report of an unexpected failure."""

import subprocess
import sys

import pytest

from tests.cli.support import kafkalite, one_line_error


def test_version_and_help_text_of_every_subcommand():
    from kafkalite import __version__
    from kafkalite.cli import app

    result = kafkalite("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"kafkalite {__version__}"

    def walk(command, path):
        yield path, command
        if hasattr(command, "list_commands"):  # a group
            ctx = type(command).context_class(command)
            for name in command.list_commands(ctx):
                yield from walk(command.get_command(ctx, name), [*path, name])

    commands = list(walk(app, []))
    assert len(commands) > 15
    for path, command in commands:
        assert (command.help or "").strip(), f"kafkalite {' '.join(path)} has no help text"


def test_an_unexpected_failure_is_one_line_with_the_path_of_a_full_report():
    """The rule: what the CLI cannot explain is a bug, reported in one line that names a file
    holding the traceback."""
    boom = (
        "import sys\n"
        "import kafkalite.cli\n"
        "import kafkalite.cli.topics as topics\n"
        "async def broken(bootstrap):\n"
        "    raise RuntimeError('boom in the client')\n"
        "topics.open_client = broken\n"
        "sys.argv = ['kafkalite', 'topics', 'list']\n"
        "kafkalite.cli.main()\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", boom], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert "unexpected RuntimeError: boom in the client" in lines[0]
    report = lines[0].rsplit("full report in ", 1)[1].rstrip(")")
    try:
        with open(report) as f:
            text = f.read()
        assert "Traceback" in text and "boom in the client" in text and "topics list" in text
    finally:
        import os

        os.unlink(report)


@pytest.mark.parametrize("bootstrap", ["127.0.0.1:abc", "127.0.0.1:70000", ":9092", " , "])
def test_a_bad_bootstrap_server_names_the_option(bootstrap):
    result = kafkalite("topics", "list", "--bootstrap-server", bootstrap)
    assert result.returncode == 2
    one_line_error(result, "--bootstrap-server")
    assert "invalid literal" not in result.stderr
