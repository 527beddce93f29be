"""The options of Spark's Kafka source and sink, parsed and checked (no Spark, no Kafka here).

Names, defaults and rules follow Spark's `KafkaSourceProvider` (connector/kafka-0-10-sql), so
that a job written for Spark's Kafka connector runs with ``format("kafkalite")``:

- exactly one of ``subscribe`` (comma-separated topics), ``subscribePattern`` (a regular
  expression matched against the whole topic name) and ``assign`` (``{"t":[0,1]}``);
- ``startingOffsets`` / ``endingOffsets``: ``earliest``, ``latest`` or per-partition JSON
  ``{"t":{"0":23,"1":-2}}`` (-2 earliest, -1 latest); a batch query may not start at latest nor
  end at earliest; streaming queries have no ending offsets;
- ``startingTimestamp`` (one timestamp for every partition) takes precedence over
  ``startingOffsetsByTimestamp`` (``{"t":{"0":1700000000000}}``), which takes precedence over
  ``startingOffsets``; ``endingTimestamp`` / ``endingOffsetsByTimestamp`` likewise for the end;
  ``startingOffsetsByTimestampStrategy``: ``error`` (default: no record at or after the
  timestamp fails the query) or ``latest``;
- ``minPartitions`` splits large offset ranges (Spark's KafkaOffsetRangeCalculator);
  ``maxOffsetsPerTrigger`` caps a micro-batch, shared among partitions in proportion to what
  each has waiting (Spark's rateLimit);
- ``failOnDataLoss`` (default true), ``includeHeaders`` (default false);
- ``kafka.<name>`` goes to the client with the prefix removed, except the settings the data
  source owns (Spark refuses the same ones).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

EARLIEST = -2
LATEST = -1

# Kafka consumer and producer settings the data source sets itself (Spark refuses them too:
# offsets come from the options and the checkpoint, records are bytes).
OWNED_SETTINGS = {
    "auto.offset.reset": "set startingOffsets instead",
    "enable.auto.commit": "offsets are tracked by Spark, not committed to Kafka",
    "key.deserializer": "keys are always read as bytes",
    "value.deserializer": "values are always read as bytes",
    "key.serializer": "keys are written as bytes or strings",
    "value.serializer": "values are written as bytes or strings",
    "interceptor.classes": "not supported",
}


class OptionError(ValueError):
    """A bad option: the message names it, as Spark's IllegalArgumentException does."""


@dataclass(frozen=True, slots=True)
class TopicPartition:
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Records [start, end) of one Kafka partition: one Spark task reads one range."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


# ------------------------------------------------------------------------------ basics


def get(options: Mapping[str, str], name: str, default: str | None = None) -> str | None:
    """Case-insensitive option lookup (Spark's option names are case-insensitive)."""
    lowered = name.lower()
    for key, value in options.items():
        if key.lower() == lowered:
            return value
    return default


def get_bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    text = get(options, name)
    if text is None:
        return default
    if text.strip().lower() in ("true", "false"):
        return text.strip().lower() == "true"
    raise OptionError(f"option {name} must be true or false, got {text!r}")


def get_positive_int(options: Mapping[str, str], name: str) -> int | None:
    text = get(options, name)
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise OptionError(f"option {name} must be a positive integer, got {text!r}")
    return value


def kafka_params(options: Mapping[str, str]) -> dict[str, str]:
    """``kafka.*`` options with the prefix removed, checked against the owned settings."""
    params = {}
    for key, value in options.items():
        if not key.lower().startswith("kafka."):
            continue
        name = key[len("kafka.") :].lower()
        if name in OWNED_SETTINGS:
            raise OptionError(f"Kafka option '{name}' is not supported: {OWNED_SETTINGS[name]}")
        params[name] = value
    if not params.get("bootstrap.servers"):
        raise OptionError("option kafka.bootstrap.servers must be set")
    return params


# ------------------------------------------------------------------------------ subscription


@dataclass(frozen=True, slots=True)
class Subscription:
    """Which partitions a query reads: ``kind`` is subscribe, subscribePattern or assign."""

    kind: str
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[TopicPartition, ...] = ()

    def select(self, partitions_by_topic: Mapping[str, int]) -> list[TopicPartition]:
        """The partitions this subscription reads, given each existing topic's partition
        count; internal topics (``__*``) are never matched by a pattern."""
        if self.kind == "assign":
            return list(self.assigned)
        if self.kind == "subscribe":
            names = [t for t in self.topics if t in partitions_by_topic]
        else:
            regex = re.compile(self.pattern or "")
            names = sorted(
                t for t in partitions_by_topic if not t.startswith("__") and regex.fullmatch(t)
            )
        return [TopicPartition(t, p) for t in names for p in range(partitions_by_topic[t])]


def subscription(options: Mapping[str, str]) -> Subscription:
    given = {
        name: value
        for name in ("subscribe", "subscribePattern", "assign")
        if (value := get(options, name)) is not None
    }
    if len(given) != 1:
        which = "must be specified" if not given else "can be specified, not several"
        raise OptionError(f"exactly one of the options subscribe, subscribePattern, assign {which}")
    ((kind, text),) = given.items()
    if kind == "subscribe":
        topics = tuple(t.strip() for t in text.split(",") if t.strip())
        if not topics:
            raise OptionError(f"no topics to subscribe to in subscribe={text!r}")
        return Subscription(kind, topics=topics)
    if kind == "subscribePattern":
        if not text.strip():
            raise OptionError("pattern to subscribe is empty")
        try:
            re.compile(text)
        except re.error as e:
            raise OptionError(f"option subscribePattern is not a regular expression: {e}") from e
        return Subscription(kind, pattern=text)
    try:
        parsed = json.loads(text)
        assigned = tuple(
            TopicPartition(str(topic), int(p)) for topic, parts in parsed.items() for p in parts
        )
    except (ValueError, TypeError, AttributeError) as e:
        raise OptionError(
            f'option assign must be JSON like {{"topicA":[0,1],"topicB":[2,4]}}, got {text!r}'
        ) from e
    if not assigned:
        raise OptionError(f"no partitions to assign in assign={text!r}")
    return Subscription(kind, assigned=assigned)


# ------------------------------------------------------------------------------ offsets


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """Where to start or end: ``earliest``, ``latest``, per-partition ``offsets``
    (EARLIEST/LATEST allowed as values), one ``timestamp`` for all, or per-partition
    ``timestamps``."""

    kind: str
    offsets: Mapping[TopicPartition, int] | None = None
    timestamp: int | None = None
    timestamps: Mapping[TopicPartition, int] | None = None


def _per_partition_json(name: str, text: str) -> dict[TopicPartition, int]:
    try:
        parsed = json.loads(text)
        return {
            TopicPartition(str(topic), int(p)): int(value)
            for topic, parts in parsed.items()
            for p, value in parts.items()
        }
    except (ValueError, TypeError, AttributeError) as e:
        raise OptionError(
            f'option {name} must be earliest, latest or JSON like {{"topicA":{{"0":23,"1":-1}}}}'
            f", got {text!r}"
        ) from e


def offset_spec(options: Mapping[str, str], which: str, *, streaming: bool) -> OffsetSpec:
    """The starting (``which="starting"``) or ending offsets of a query, by Spark's rules."""
    timestamp = get(options, f"{which}Timestamp")
    if timestamp is not None:
        try:
            return OffsetSpec("timestamp", timestamp=int(timestamp))
        except ValueError:
            raise OptionError(f"option {which}Timestamp must be a number of ms, got {timestamp!r}")  # noqa: B904
    by_timestamp = get(options, f"{which}OffsetsByTimestamp")
    if by_timestamp is not None:
        return OffsetSpec(
            "timestamps", timestamps=_per_partition_json(f"{which}OffsetsByTimestamp", by_timestamp)
        )
    name = f"{which}Offsets"
    default = "latest" if which == "ending" or streaming else "earliest"
    text = (get(options, name) or default).strip()
    if text.lower() in ("earliest", "latest"):
        spec = OffsetSpec(text.lower())
    else:
        spec = OffsetSpec("offsets", offsets=_per_partition_json(name, text))
    if not streaming:
        forbidden = "latest" if which == "starting" else "earliest"
        forbidden_value = LATEST if which == "starting" else EARLIEST
        if spec.kind == forbidden:
            raise OptionError(f"{which} offset can't be {forbidden} for batch queries on Kafka")
        for tp, offset in (spec.offsets or {}).items():
            if offset == forbidden_value:
                raise OptionError(
                    f"{name} for {tp.topic}-{tp.partition} can't be {forbidden} for batch "
                    "queries on Kafka"
                )
    return spec


def by_timestamp_strategy(options: Mapping[str, str]) -> str:
    text = (get(options, "startingOffsetsByTimestampStrategy") or "error").strip().lower()
    if text not in ("error", "latest"):
        raise OptionError(
            f"option startingOffsetsByTimestampStrategy must be error or latest, got {text!r}"
        )
    return text


def check_streaming_options(options: Mapping[str, str]) -> None:
    for name in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"):
        if get(options, name) is not None:
            raise OptionError(f"option {name} is not supported for streaming queries")


# ------------------------------------------------------------------------------ planning


def split_ranges(ranges: Iterable[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Spark's KafkaOffsetRangeCalculator.getRanges: empty ranges dropped; with
    ``min_partitions`` above the number of ranges, the large ranges are split so that about
    ``min_partitions`` tasks read them (small ranges stay whole, the last piece of a split
    range takes the rounding)."""
    ranges = [r for r in ranges if r.size > 0]
    if min_partitions is None or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)

    def parts_of(size: int, total: int, parts: int) -> int:
        return max(_round_half_up(size / total * parts), 1)

    unsplit = {
        (r.topic, r.partition) for r in ranges if parts_of(r.size, total, min_partitions) == 1
    }
    split_total = total - sum(r.size for r in ranges if (r.topic, r.partition) in unsplit)
    split_min = max(min_partitions - len(unsplit), 1)
    out = []
    for r in ranges:
        parts = 1 if (r.topic, r.partition) in unsplit else parts_of(r.size, split_total, split_min)
        remaining, start = r.size, r.start
        for part in range(parts):
            this = remaining // (parts - part)
            remaining -= this
            end = min(start + this, r.end)
            if end > start:
                out.append(OffsetRange(r.topic, r.partition, start, end))
            start = end
    return out


def _round_half_up(x: float) -> int:
    """Java's Math.round (half up), not Python's banker's rounding."""
    return math.floor(x + 0.5)


def rate_limit(
    start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int], limit: int
) -> dict[TopicPartition, int]:
    """Spark's KafkaMicroBatchStream.rateLimit: at most about ``limit`` records in total, each
    partition getting its share in proportion to what it has waiting (at least one record when
    it has any, so small partitions are not starved)."""
    sizes = {tp: e - start[tp] for tp, e in end.items() if tp in start and e - start[tp] > 0}
    total = sum(sizes.values())
    if total < 1:
        return dict(end)
    out = {}
    for tp, e in end.items():
        if tp not in sizes:
            out[tp] = e
            continue
        share = limit * (sizes[tp] / total)
        share_int = math.ceil(share) if share < 1 else math.floor(share)
        out[tp] = min(e, start[tp] + share_int)
    return out


# ------------------------------------------------------------------------------ offsets as JSON


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Spark's KafkaSourceOffset JSON shape: ``{"topic": {"0": 23}}`` (what the checkpoint
    keeps)."""
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets, key=lambda t: (t.topic, t.partition)):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return out


def offsets_from_json(data: Mapping[str, Any]) -> dict[TopicPartition, int]:
    return {
        TopicPartition(topic, int(p)): int(offset)
        for topic, parts in data.items()
        for p, offset in parts.items()
    }
