"""The record browser behind GET /topics/{name}/records: records read with a plain Fetch (as a
consumer reads them, from the partition's leader, up to the high watermark) and their keys,
values and header values shown as JSON, UTF-8 text or hex, whichever the bytes are (text with control characters other than tab and line
breaks is shown as hex). Records framed for the Schema Registry are decoded with their schema
instead (admin/schemas.py), when this broker runs the registry and holds the schema."""

from __future__ import annotations

import json
import re
from typing import Any

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

MAX_SHOWN_BYTES = 64 * 1024
"""Longer keys and values are cut (and marked truncated): a page of records stays small."""


def decoded(data: bytes | None) -> dict[str, Any] | None:
    """{"encoding": json|utf8|hex, "text", "size", "truncated"} for `data`; None for null."""
    if data is None:
        return None
    shown = data[:MAX_SHOWN_BYTES]
    truncated = len(shown) < len(data)
    try:
        text = shown.decode("utf-8")
    except UnicodeDecodeError:
        if truncated:  # a multi-byte character cut at the limit is still text
            try:
                text = shown[:-3].decode("utf-8", errors="strict")
            except UnicodeDecodeError:
                text = None
        else:
            text = None
    if text is None or _CONTROL.search(text):  # not text, or not text a person reads
        encoding, text = "hex", shown.hex()
    else:
        encoding = "utf8"
        if not truncated and text.lstrip()[:1] in ("{", "["):  # a JSON object or array
            try:
                json.loads(text)
                encoding = "json"
            except (ValueError, RecursionError):
                pass
    return {"encoding": encoding, "text": text, "size": len(data), "truncated": truncated}


def records_of(
    raw: bytes, start: int, limit: int, partition: int, *, keep_raw: bool = False
) -> tuple[list[dict], int]:
    """The first `limit` data records at or after `start` in fetched `raw` batches (control
    batches skipped), and the offset to continue from. With `keep_raw` each record also holds
    its key and value bytes ("raw_key", "raw_value") for the schema decoding, which removes
    them."""
    from kafkalite.protocol.records import iter_batches, record_timestamp

    out: list[dict[str, Any]] = []
    position = start
    for header, records in iter_batches(raw):
        if header.is_control:
            position = max(position, header.next_offset)
            continue
        for record in records:
            offset = header.base_offset + record.offset_delta
            if offset < start:
                continue
            if len(out) >= limit:
                return out, position
            shown: dict[str, Any] = {
                "partition": partition,
                "offset": offset,
                "timestamp": record_timestamp(header, record),
                "timestamp_type": "LogAppendTime" if header.timestamp_type else "CreateTime",
                "key": decoded(record.key),
                "value": decoded(record.value),
                "headers": [{"key": h.key, "value": decoded(h.value)} for h in record.headers],
            }
            if keep_raw:
                shown["raw_key"], shown["raw_value"] = record.key, record.value
            out.append(shown)
            position = offset + 1
        if len(out) < limit:
            position = max(position, header.next_offset)
    return out, position
