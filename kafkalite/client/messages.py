"""Build version-specific request messages from plain values.

kio (and kafkalite.protocol.messages) have one dataclass per API version. Code that does not care
which version the broker negotiated (the CLI, the controller channel) describes a request once,
as keyword values with nested dicts for nested structs, and ``build_message`` turns it into the
dataclass of the chosen version:

    build_message(request_class(ApiKey.CREATE_TOPICS, 7),
                  topics=[{"name": "t", "num_partitions": 3, "replication_factor": 1}],
                  timeout=datetime.timedelta(seconds=30))

Rules, as Kafka's "ignorable" fields: values for fields this version does not have are dropped;
fields not given take their schema default, or a neutral value (0, empty, None, False,
ErrorCode.NONE) when the schema has none.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import types
import typing
from collections.abc import Mapping
from typing import Any

from kafkalite.protocol.errors import ErrorCode


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _entity_of(annotation: Any) -> type | None:
    """The dataclass type inside ``X``, ``X | None`` or ``tuple[X, ...]``, else None."""
    origin = typing.get_origin(annotation)
    if origin is tuple:
        args = typing.get_args(annotation)
        return _entity_of(args[0]) if args else None
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = _entity_of(arg)
            if found is not None:
                return found
        return None
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        return annotation
    return None


def _is_tuple(annotation: Any) -> bool:
    if typing.get_origin(annotation) is tuple:
        return True
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return any(typing.get_origin(a) is tuple for a in typing.get_args(annotation))
    return False


def _neutral(field: dataclasses.Field, annotation: Any) -> Any:
    kafka_type = field.metadata.get("kafka_type")
    nullable = typing.get_origin(annotation) in (typing.Union, types.UnionType) and type(
        None
    ) in typing.get_args(annotation)
    if _is_tuple(annotation):
        return ()
    if nullable:
        return None
    if kafka_type == "error_code":
        return ErrorCode.NONE
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(0)
    if kafka_type == "bool":
        return False
    if kafka_type in ("string", "bytes", "records"):
        return "" if kafka_type == "string" else b""
    if kafka_type == "uuid":
        return None
    return 0


def _convert(value: Any, annotation: Any) -> Any:
    entity = _entity_of(annotation)
    if entity is None:
        if _is_tuple(annotation) and isinstance(value, list):
            return tuple(value)
        return value
    if _is_tuple(annotation):
        if value is None:
            return None
        return tuple(_one(entity, item) for item in value)
    return None if value is None else _one(entity, value)


def _one(entity: type, value: Any) -> Any:
    if isinstance(value, entity):
        return value
    if isinstance(value, Mapping):
        return build_message(entity, **value)
    raise TypeError(f"{entity.__name__} expects a mapping, got {type(value).__name__}")


def build_message(cls: type, **values: Any) -> Any:
    """An instance of ``cls`` (a kio-style message dataclass) from ``values``."""
    hints = _hints(cls)
    kwargs = {}
    for field in dataclasses.fields(cls):
        annotation = hints[field.name]
        if field.name in values:
            value = values[field.name]
            if field.metadata.get("kafka_type") == "error_code" and not isinstance(
                value, ErrorCode
            ):
                value = ErrorCode.of(value)  # kio's writer wants an enum member
            kwargs[field.name] = _convert(value, annotation)
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            kwargs[field.name] = _neutral(field, annotation)
    return cls(**kwargs)
