"""Protobuf's wire rules per level, pairs in both directions (protoc is a child process: the
integration tier)."""

from __future__ import annotations

import pytest

from kafkalite.schema_registry.compatibility import check
from kafkalite.schema_registry.formats import parse

pytestmark = pytest.mark.integration

BASE = 'syntax = "proto3"; message M { int32 a = 1; string b = 2; }'


def proto(text):
    return parse("PROTOBUF", text)


@pytest.mark.parametrize(
    "new, backward, forward",
    [
        ('syntax = "proto3"; message M { int32 a = 1; string b = 2; int64 c = 3; }', True, True),
        ('syntax = "proto3"; message M { int32 a = 1; }', True, True),  # a removed field
        ('syntax = "proto3"; message M { int64 a = 1; string b = 2; }', True, True),  # varints
        ('syntax = "proto3"; message M { string a = 1; string b = 2; }', False, False),
        ('syntax = "proto3"; message M { repeated int32 a = 1; string b = 2; }', False, False),
        ('syntax = "proto3"; message N { int32 a = 1; }', False, False),  # M renamed away
        ('syntax = "proto3"; message M { int32 a = 1; bytes b = 2; }', True, True),
    ],
)
def test_protobuf_pairs_both_directions(new, backward, forward):
    old, new_schema = proto(BASE), proto(new)
    assert (check("BACKWARD", new_schema, [old]) == []) is backward
    assert (check("FORWARD", new_schema, [old]) == []) is forward


def test_reusing_a_reserved_number_is_refused():
    old = proto('syntax = "proto3"; message M { reserved 2; int32 a = 1; }')
    new = proto('syntax = "proto3"; message M { int32 a = 1; string c = 2; }')
    assert any("RESERVED" in m for m in check("BACKWARD", new, [old]))
