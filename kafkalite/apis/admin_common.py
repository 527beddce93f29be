"""Helpers shared by the admin handlers: waiting for the controller, topic configs.

Admin writes (CreateTopics, DeleteTopics, CreatePartitions) go to the coordination store, where
the controller's watches pick them up (Kafka's AdminZkClient path). Like Kafka's
DelayedCreatePartitions / DelayedDeleteTopics, the handler then waits, up to the request's
timeout, until this broker's MetadataCache shows the outcome (leaders elected, topic gone);
past the deadline the topic is answered REQUEST_TIMED_OUT (the operation goes on regardless).

Topic configs are storage's (storage/config.py), with Kafka 3.9's deprecated ones that a 3.x
broker accepts and ignores (DEPRECATED_TOPIC_CONFIGS there: message.format.version,
message.downconversion.enable).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kafkalite.apis.base import RequestContext
from kafkalite.storage.config import DEPRECATED_TOPIC_CONFIGS

POLL_INTERVAL_S = 0.01

# DescribeConfigs config_source values (Kafka's ConfigSource).
SOURCE_TOPIC_CONFIG = 1
SOURCE_DYNAMIC_BROKER_CONFIG = 2
SOURCE_STATIC_BROKER_CONFIG = 4
SOURCE_DEFAULT_CONFIG = 5

# Config resource types.
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4


async def wait_until(condition: Callable[[], bool], timeout_ms: int) -> bool:
    """Poll `condition` until true or `timeout_ms` passes; whether it became true."""
    return (await wait_for_all([condition], timeout_ms))[0]


async def wait_for_all(conditions: Sequence[Callable[[], bool]], timeout_ms: int) -> list[bool]:
    """Poll every condition until all hold or ``timeout_ms`` passes, one deadline for the whole
    request (Kafka's single DelayedOperation per admin request); which ones held."""
    deadline = time.monotonic() + max(0, timeout_ms) / 1000
    held = [False] * len(conditions)
    first = 0  # conditions before it all held
    while True:
        final = time.monotonic() >= deadline
        # A poll stops at the first condition that does not hold yet (the outcomes arrive
        # roughly in order: polling all 1,000 topics of a request every 10 ms was a quarter
        # of its handling); the last poll checks every one.
        for i in range(first, len(conditions)):
            if not held[i]:
                held[i] = conditions[i]()
                if not held[i] and not final:
                    break
            if held[i] and i == first:
                first += 1
        if first == len(conditions) or final:
            return held
        await asyncio.sleep(POLL_INTERVAL_S)


async def results_without_leaders(
    ctx: RequestContext, pending: Sequence[tuple[dict[str, Any], int]], timeout_ms: int
) -> list[dict[str, Any]]:
    """Of ``pending`` (a topic's result entry, its partition count), the entries whose topic
    did not get leaders for every partition within the request's one timeout."""
    done = await wait_for_all(
        [
            lambda r=result, n=count: topic_has_leaders(ctx, r["name"], n)
            for result, count in pending
        ],
        timeout_ms,
    )
    return [
        result for (result, _), has_leaders in zip(pending, done, strict=True) if not has_leaders
    ]


def topic_has_leaders(ctx: RequestContext, topic: str, partitions: int | None = None) -> bool:
    cache = ctx.services.metadata_cache
    if topic not in cache.get_all_topics():
        return False
    states = list(cache.get_partition_infos(topic))
    if partitions is not None and len(states) < partitions:
        return False
    return bool(states) and all(s.leader >= 0 for s in states)


def topic_absent(ctx: RequestContext, topic: str) -> bool:
    return topic not in ctx.services.metadata_cache.get_all_topics()


def broker_topic_defaults(ctx: RequestContext) -> dict[str, str]:
    """Every topic config kafkalite accepts, valued by the broker's default (the deprecated
    no-op ones by Kafka 3.9's)."""
    return {
        **ctx.services.config.topic_config_defaults(),
        **{name: d.default for name, d in DEPRECATED_TOPIC_CONFIGS.items()},
    }


def statically_set_topic_defaults(ctx: RequestContext) -> dict[str, str]:
    """Topic config name -> the broker property (server.properties, environment or
    --override) that sets its default explicitly: DescribeConfigs and CreateTopics report those
    as STATIC_BROKER_CONFIG, the others as DEFAULT_CONFIG (Kafka's config sources)."""
    from kafkalite.config import property_name
    from kafkalite.storage.config import BROKER_CONFIG_FIELDS, TOPIC_CONFIG_FIELDS

    explicit = {property_name(f) for f in getattr(ctx.services.config, "model_fields_set", ())}
    out = {}
    for topic_name, field in TOPIC_CONFIG_FIELDS.items():
        for broker_name, (broker_field, _unit) in BROKER_CONFIG_FIELDS.items():
            if broker_field == field and broker_name in explicit:
                out[topic_name] = broker_name
                break
    return out


def default_source(name: str, static: Mapping[str, str]) -> int:
    return SOURCE_STATIC_BROKER_CONFIG if name in static else SOURCE_DEFAULT_CONFIG


def topic_config_names() -> list[str]:
    from kafkalite.storage.config import TOPIC_CONFIG_FIELDS

    return [*TOPIC_CONFIG_FIELDS, *DEPRECATED_TOPIC_CONFIGS]


async def read_topic_config_overrides(ctx: RequestContext, topic: str) -> dict[str, str]:
    """The topic's overrides from `/config/topics/<t>`; empty when the node is absent."""
    from kafkalite.zk import client as zk_data

    return await zk_data.get_topic_config(ctx.services.store, topic)


# Kafka's ConfigDef types for DescribeConfigs v3+ (ConfigType: 1 BOOLEAN, 2 STRING, 3 INT,
# 5 LONG, 6 DOUBLE, 7 LIST).
CONFIG_TYPES = {
    "segment.bytes": 3,
    "segment.ms": 5,
    "segment.jitter.ms": 5,
    "segment.index.bytes": 3,
    "index.interval.bytes": 3,
    "retention.ms": 5,
    "retention.bytes": 5,
    "flush.messages": 5,
    "flush.ms": 5,
    "max.message.bytes": 3,
    "message.timestamp.type": 2,
    "message.timestamp.difference.max.ms": 5,
    "cleanup.policy": 7,
    "min.insync.replicas": 3,
    "unclean.leader.election.enable": 1,
    "delete.retention.ms": 5,
    "min.compaction.lag.ms": 5,
    "max.compaction.lag.ms": 5,
    "min.cleanable.dirty.ratio": 6,
    "file.delete.delay.ms": 5,
    "preallocate": 1,
    "compression.type": 2,
    **{name: d.config_type for name, d in DEPRECATED_TOPIC_CONFIGS.items()},
}
LIST_CONFIGS = frozenset(name for name, kind in CONFIG_TYPES.items() if kind == 7)


def topic_config_from_broker_name() -> dict[str, str]:
    """Topic config name -> the broker property that sets its default (for synonyms)."""
    return {
        "segment.bytes": "log.segment.bytes",
        "segment.ms": "log.roll.ms",
        "segment.index.bytes": "log.index.size.max.bytes",
        "index.interval.bytes": "log.index.interval.bytes",
        "retention.ms": "log.retention.ms",
        "retention.bytes": "log.retention.bytes",
        "flush.messages": "log.flush.interval.messages",
        "flush.ms": "log.flush.interval.ms",
        "max.message.bytes": "message.max.bytes",
        "message.timestamp.type": "log.message.timestamp.type",
        "cleanup.policy": "log.cleanup.policy",
        "min.insync.replicas": "min.insync.replicas",
        "unclean.leader.election.enable": "unclean.leader.election.enable",
        "compression.type": "compression.type",
        "preallocate": "log.preallocate",
        "file.delete.delay.ms": "log.segment.delete.delay.ms",
        "delete.retention.ms": "log.cleaner.delete.retention.ms",
        "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
        "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
        "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
        **{name: d.broker_name for name, d in DEPRECATED_TOPIC_CONFIGS.items()},
    }
