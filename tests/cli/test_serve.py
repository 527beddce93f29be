"""`kafkalite serve` (cli/serve.py, and the short way of kafkalite/__main__.py): a broker that
cannot start says why in one line."""

import pytest

from tests.cli.support import kafkalite, one_line_error


@pytest.mark.parametrize(
    "override, key",
    [
        ("num.partitions=0", "num.partitions"),
        ("no.such.key=1", "no.such.key"),
        ("listeners=oops", "listeners"),
    ],
)
def test_serve_refuses_a_bad_config_naming_the_key(override, key, tmp_path):
    result = kafkalite("serve", "--override", f"log.dirs={tmp_path}", "--override", override)
    assert result.returncode == 2
    assert key in result.stderr


def test_serve_refuses_an_unreadable_config_file(tmp_path):
    result = kafkalite("serve", "--config", str(tmp_path / "missing.properties"))
    assert result.returncode == 2
    assert "missing.properties" in result.stderr


def one_error_line_among_the_logs(result, *needles: str) -> None:
    """`serve` logs as it starts; its failure is one log line naming the problem."""
    assert result.returncode != 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if '"level": "error"' in line]
    assert len(errors) == 1, result.stderr
    for needle in needles:
        assert needle in errors[0], result.stderr


def serve_args(tmp_path, *overrides: str) -> list[str]:
    from kafkalite.testing import free_port

    settings = {
        "log.dirs": str(tmp_path / "logs"),
        "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}",
        "admin.listener": "",
    }
    settings.update(item.split("=", 1) for item in overrides)
    return ["serve", *(a for k, v in settings.items() for a in ("--override", f"{k}={v}"))]


def test_serve_refuses_a_listener_port_in_use_in_one_line(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = kafkalite(*serve_args(tmp_path, f"listeners=PLAINTEXT://127.0.0.1:{port}"))
    one_error_line_among_the_logs(result, "listeners", "address already in use")


@pytest.mark.parametrize("where", ["file", "below-a-file"])
def test_serve_refuses_a_log_dir_that_is_a_file_in_one_line(tmp_path, where):
    afile = tmp_path / "afile"
    afile.write_text("not a directory")
    log_dir = afile if where == "file" else afile / "logs"
    result = kafkalite(*serve_args(tmp_path, f"log.dirs={log_dir}"))
    one_error_line_among_the_logs(result, "log.dirs", str(log_dir))


def test_serve_refuses_a_config_file_that_is_not_utf8_in_one_line(tmp_path):
    config = tmp_path / "latin1.properties"
    config.write_bytes(f"log.dirs={tmp_path}/logs\n# caf\xe9\n".encode("latin-1"))
    result = kafkalite("serve", "--config", str(config))
    assert result.returncode == 2
    one_line_error(result, "--config", "latin1.properties", "UTF-8")
