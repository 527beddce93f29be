"""Confluent's compatibility rules per level, with pairs of schemas in both directions (Avro and
JSON Schema here; Protobuf needs protoc, a child process, so its pairs are in
test_protobuf_compatibility.py), and the view's first-writer-wins rule."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalite.schema_registry.compatibility import LEVELS, check
from kafkalite.schema_registry.formats import parse
from kafkalite.schema_registry.view import SchemaView, StoredSchema, schema_key, schema_value


def avro(fields):
    return parse("AVRO", json.dumps({"type": "record", "name": "R", "fields": fields}))


OLD = avro([{"name": "a", "type": "int"}])
WITH_DEFAULT = avro([{"name": "a", "type": "int"}, {"name": "b", "type": "string", "default": ""}])
WITHOUT_DEFAULT = avro([{"name": "a", "type": "int"}, {"name": "b", "type": "string"}])
PROMOTED = avro([{"name": "a", "type": "long"}])
EMPTY = avro([])

# (level, old, new) -> compatible?
CASES = [
    ("BACKWARD", OLD, WITH_DEFAULT, True),
    ("BACKWARD", OLD, WITHOUT_DEFAULT, False),  # new reads old data: b missing, no default
    ("FORWARD", OLD, WITHOUT_DEFAULT, True),  # old reads new data: b ignored
    ("FORWARD", WITHOUT_DEFAULT, OLD, False),  # old (reader) needs b, new does not write it
    ("BACKWARD", WITHOUT_DEFAULT, OLD, True),  # new drops b: it reads old data fine
    ("FULL", OLD, WITH_DEFAULT, True),
    ("FULL", OLD, WITHOUT_DEFAULT, False),
    ("BACKWARD", OLD, PROMOTED, True),  # int promotes to long
    ("FORWARD", OLD, PROMOTED, False),  # long does not demote to int
    ("NONE", OLD, EMPTY, True),
    ("BACKWARD", OLD, EMPTY, True),
    ("FORWARD", OLD, EMPTY, False),
]


@pytest.mark.parametrize("level, old, new, compatible", CASES)
def test_avro_levels_both_directions(level, old, new, compatible):
    assert (check(level, new, [old]) == []) is compatible


def test_transitive_levels_check_every_version():
    # v1 has b without default, v2 drops b, v3 adds b back without default: v3 reads v2's
    # data? no (b missing, no default); BACKWARD checks v2 only, BACKWARD_TRANSITIVE all
    v1, v2 = WITHOUT_DEFAULT, OLD
    v3 = avro([{"name": "a", "type": "int"}, {"name": "c", "type": "int", "default": 1}])
    assert check("BACKWARD", v3, [v1, v2]) == []
    narrowing = avro([{"name": "a", "type": "int"}, {"name": "b", "type": "string"}])
    assert check("FORWARD", narrowing, [v1, v2]) == []
    assert check("FORWARD_TRANSITIVE", v2, [v1, v2]) != []  # v1 needs b, which v2 lacks
    assert check("FORWARD", v2, [v2]) == []


def test_unions_enums_and_names():
    enum_ab = parse("AVRO", json.dumps({"type": "enum", "name": "E", "symbols": ["A", "B"]}))
    enum_a = parse("AVRO", json.dumps({"type": "enum", "name": "E", "symbols": ["A"]}))
    assert check("BACKWARD", enum_ab, [enum_a]) == []
    assert check("BACKWARD", enum_a, [enum_ab]) != []
    union = parse("AVRO", json.dumps(["null", "int"]))
    plain = parse("AVRO", json.dumps("int"))
    assert check("BACKWARD", union, [plain]) == []
    assert check("FORWARD", union, [plain]) != []  # null cannot be read as int
    other_name = parse(
        "AVRO",
        json.dumps({"type": "record", "name": "S", "fields": [{"name": "a", "type": "int"}]}),
    )
    assert check("BACKWARD", other_name, [OLD]) != []


@given(
    st.lists(st.sampled_from(["int", "long", "string", "double", "boolean"]), max_size=5),
    st.sampled_from(["int", "long", "string", "double", "boolean"]),
)
def test_adding_a_field_is_backward_only_with_a_default(types, added):
    fields = [{"name": f"f{i}", "type": t} for i, t in enumerate(types)]
    old = avro(fields)
    default = {"int": 0, "long": 0, "string": "", "double": 0.0, "boolean": False}[added]
    with_default = avro([*fields, {"name": "new", "type": added, "default": default}])
    without = avro([*fields, {"name": "new", "type": added}])
    assert check("BACKWARD", with_default, [old]) == []
    assert check("FULL", with_default, [old]) == []
    assert check("BACKWARD", without, [old]) != []
    assert check("FORWARD", without, [old]) == []
    for level in LEVELS:
        assert check(level, old, [old]) == []  # a schema is compatible with itself


def js(document):
    return parse("JSON", json.dumps(document))


OPEN = js({"type": "object", "properties": {"a": {"type": "integer"}}})
CLOSED = js(
    {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": False}
)
JSON_CASES = [
    # (old, new, BACKWARD-compatible?, FORWARD-compatible?)
    (OPEN, CLOSED, False, True),  # closing: old data may hold anything else
    (CLOSED, OPEN, True, False),
    # dropping a property from an open model: backward only (the new writer may put anything
    # there, which the old reader types)
    (OPEN, js({"type": "object"}), True, False),
    (
        CLOSED,
        js(
            {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
                "additionalProperties": False,
            }
        ),
        True,
        False,
    ),
    (js({"type": "integer"}), js({"type": "number"}), True, False),  # widening
    (js({"type": "string", "maxLength": 10}), js({"type": "string", "maxLength": 5}), False, True),
    (js({"enum": ["a", "b"]}), js({"enum": ["a"]}), False, True),
    (
        OPEN,
        js({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}),
        False,
        True,
    ),
]


@pytest.mark.parametrize("old, new, backward, forward", JSON_CASES)
def test_json_schema_content_models_both_directions(old, new, backward, forward):
    assert (check("BACKWARD", new, [old]) == []) is backward
    assert (check("FORWARD", new, [old]) == []) is forward
    assert (check("FULL", new, [old]) == []) is (backward and forward)


def test_the_first_writer_of_an_id_or_version_wins():
    view = SchemaView()
    a, b = StoredSchema("AVRO", '"int"'), StoredSchema("AVRO", '"long"')
    view.apply(0, schema_key("s", 1), schema_value("s", 1, 1, a, False))
    # another broker raced: the same id for another schema, the same version for another id
    view.apply(1, schema_key("t", 1), schema_value("t", 1, 1, b, False))
    view.apply(2, schema_key("s", 1), schema_value("s", 1, 2, b, False))
    assert view.schemas == {1: a}
    assert [v.id for v in view.versions("s")] == [1]
    assert "t" not in view.subjects
    assert view.ignored == 2
    # a retry of the same record is harmless; a soft delete and a tombstone apply
    view.apply(3, schema_key("s", 1), schema_value("s", 1, 1, a, False))
    view.apply(4, schema_key("s", 1), schema_value("s", 1, 1, a, True))
    assert view.versions("s") == [] and len(view.versions("s", deleted=True)) == 1
    view.apply(5, schema_key("s", 1), None)
    assert view.subjects == {} and view.next_offset == 6
