"""`python -m kafkalite serve` takes a short way past click only for a plain serve command."""

import pytest

from kafkalite.__main__ import serve_arguments


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["serve"], (None, [])),
        (["serve", "--override", "a=1", "--override=b=2"], (None, ["a=1", "b=2"])),
        (["serve", "-c", "f.properties", "--override", "x=y=z"], ("f.properties", ["x=y=z"])),
        (["serve", "--config=one", "--config", "two"], ("two", [])),
    ],
)
def test_a_plain_serve_is_parsed_here(argv, expected):
    assert serve_arguments(argv) == expected


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["topics", "list"],
        ["serve", "--help"],
        ["serve", "--override"],
        ["serve", "--verbose"],
        ["serve", "extra"],
    ],
)
def test_anything_else_goes_to_the_full_command_line(argv):
    assert serve_arguments(argv) is None
