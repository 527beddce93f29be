"""Schema and range checks of a decoded request, before any handler sees it.

kio's native reader accepts a null (length -1) for any array, nullable or not, and an int8
"enum" or an int32 size is just a number: a request can decode and still be impossible under
Kafka's schema. (The nulls are noted by the structural walk of validator.py, which reads every
length before decoding anyway; ``null_field`` walks a decoded message, for tests and for
messages built in memory.) Kafka's generated readers refuse a null where the JSON schema gives no
``nullableVersions`` ("non-nullable field topics was serialized as null"), and its handlers
refuse out-of-range values (IsolationLevel.forId, a negative fetch size). Here both are checked
once, where requests are decoded, so handlers may iterate every non-nullable array and trust the
ranges below:

- nullability: every field a version's schema does not declare nullable (kio's generated class
  types it without ``None``) must not be None, at any depth; tagged fields are exempt (absent
  means their default);
- ranges (``RANGE_CHECKS``): Fetch isolation_level 0/1, max_bytes and every
  partition_max_bytes >= 0; ListOffsets isolation_level 0/1; Metadata v10-11 topics named (only
  v12 may ask by topic id).

A violation raises ``InvalidRequestFieldError`` (INVALID_REQUEST) carrying the decoded request,
so the broker can answer with the API's error response (``error_response.py``) instead of
closing the connection: the client gets a clear, non-retriable error for what it asked.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)

from .api import ApiKey
from .errors import InvalidRequestError


class InvalidRequestFieldError(InvalidRequestError):
    """A request that decodes but breaks its schema's nullability or a range; ``request`` is
    the decoded message (an error response can name what it asked about)."""

    def __init__(self, message: str, request: Any) -> None:
        super().__init__(message)
        self.request = request


@dataclasses.dataclass(frozen=True, slots=True)
class _Plan:
    name: str
    nullable: bool
    entity: type | None
    many: bool


@functools.cache
def _plan(cls: type) -> tuple[_Plan, ...]:
    plans = []
    for f in dataclasses.fields(cls):
        if get_field_tag(f) is not None:
            continue
        kind = classify_field(f)
        entity = kind.type_ if isinstance(kind, EntityField | EntityTupleField) else None
        plans.append(_Plan(f.name, is_optional(f), entity, isinstance(kind, EntityTupleField)))
    return tuple(plans)


def null_field(message: Any, path: str = "") -> str | None:
    """The path of the first field holding None where the schema allows no null, or None."""
    for plan in _plan(type(message)):
        value = getattr(message, plan.name)
        where = f"{path}{plan.name}"
        if value is None:
            if not plan.nullable:
                return where
            continue
        if plan.entity is None:
            continue
        if plan.many:
            for i, item in enumerate(value):
                found = null_field(item, f"{where}[{i}].")
                if found is not None:
                    return found
        else:
            found = null_field(value, f"{where}.")
            if found is not None:
                return found
    return None


ISOLATION_LEVELS = (0, 1)  # READ_UNCOMMITTED, READ_COMMITTED


def _fetch_ranges(request: Any) -> str | None:
    level = getattr(request, "isolation_level", 0)
    if level not in ISOLATION_LEVELS:
        return f"isolation_level {level} is neither 0 (read_uncommitted) nor 1 (read_committed)"
    max_bytes = getattr(request, "max_bytes", 0)
    if max_bytes < 0:
        return f"max_bytes {max_bytes} is negative"
    for topic in request.topics or ():
        for partition in topic.partitions or ():
            if partition.partition_max_bytes < 0:
                return f"partition_max_bytes {partition.partition_max_bytes} is negative"
    return None


def _list_offsets_ranges(request: Any) -> str | None:
    level = getattr(request, "isolation_level", 0)
    if level not in ISOLATION_LEVELS:
        return f"isolation_level {level} is neither 0 (read_uncommitted) nor 1 (read_committed)"
    return None


def _metadata_names(request: Any) -> str | None:
    # v10-11 carry a nullable name and a topic id, but only v12 may ask by id (KafkaApis:
    # "Topic name can not be null for version 10").
    version = type(request).__version__
    if version in (10, 11):
        for topic in request.topics or ():
            if topic.name is None:
                return f"topic name can not be null for version {version}"
            if topic.topic_id is not None and topic.topic_id.int != 0:
                return f"topic ids are not supported in requests for version {version}"
    return None


RANGE_CHECKS: dict[int, Callable[[Any], str | None]] = {
    ApiKey.FETCH: _fetch_ranges,
    ApiKey.LIST_OFFSETS: _list_offsets_ranges,
    ApiKey.METADATA: _metadata_names,
}


def check_request(api_key: int, request: Any, nulls: list[str] | None = None) -> None:
    """Raise ``InvalidRequestFieldError`` when a decoded kio request breaks its schema's
    nullability or a range (see the module docstring). ``nulls``: the forbidden nulls the
    validator noted while walking the frame (frames.decode_request); without it the decoded
    request is walked (``null_field``, slower)."""
    where = null_field(request) if nulls is None else (nulls[0] if nulls else None)
    if where is not None:
        name = ApiKey(api_key).name
        raise InvalidRequestFieldError(
            f"malformed {name} request: {where} is null, which its schema does not allow",
            request,
        )
    check = RANGE_CHECKS.get(api_key)
    if check is not None:
        reason = check(request)
        if reason is not None:
            raise InvalidRequestFieldError(
                f"malformed {ApiKey(api_key).name} request: {reason}", request
            )
