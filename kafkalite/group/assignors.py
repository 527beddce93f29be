"""Server-side partition assignors of the consumer group protocol (KIP-848): ``uniform`` and
``range``, as Kafka's ``group.consumer.assignors`` names them.

An assignor is a pure function from the group's view to a *target assignment*:

- ``members``: member id -> the topic ids it subscribes to (already resolved from names and
  regular expressions);
- ``topics``: topic id -> number of partitions (only topics some member subscribes to);
- ``current``: the previous target assignment, member id -> {topic id: partitions}, used to keep
  partitions where they are (stickiness).

Invariants of every result (checked by tests/group/test_assignors.py):

- every partition of a subscribed topic is assigned to exactly one member subscribed to it;
- a member gets only partitions of topics it subscribes to;
- the result depends only on the inputs (member ids are sorted wherever an order matters).

``uniform`` (the default, Kafka's UniformAssignor's goals): balance first (the counts of any two
members that could trade a partition differ by at most one), then stickiness (a partition stays
with its current owner unless balance requires moving it). Kafka's algorithm is its own; this one
keeps the still-valid previous assignment, hands unassigned partitions to the least loaded
eligible member, then moves partitions from the most to the least loaded member while that
narrows the gap. ``range`` (Kafka's server-side RangeAssignor): per topic, the subscribed
members sorted by id get contiguous ranges, the first ``partitions % members`` one extra.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Set

TopicId = uuid.UUID
Assignment = dict[TopicId, frozenset[int]]
MemberSubscriptions = Mapping[str, Set[TopicId]]
AssignorFn = Callable[[MemberSubscriptions, Mapping[TopicId, int], Mapping[str, Assignment]], dict]

UNIFORM = "uniform"
RANGE = "range"

#: Kafka's class names for the same assignors, accepted in ``group.consumer.assignors``
CLASS_NAMES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": UNIFORM,
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": RANGE,
}


def _freeze(raw: dict[str, dict[TopicId, set[int]]]) -> dict[str, Assignment]:
    return {m: {t: frozenset(ps) for t, ps in topics.items() if ps} for m, topics in raw.items()}


def uniform_assign(
    members: MemberSubscriptions,
    topics: Mapping[TopicId, int],
    current: Mapping[str, Assignment],
) -> dict[str, Assignment]:
    member_ids = sorted(members)
    result: dict[str, dict[TopicId, set[int]]] = {m: {} for m in member_ids}
    count = dict.fromkeys(member_ids, 0)
    owner: dict[tuple[TopicId, int], str] = {}
    eligible: dict[TopicId, list[str]] = {
        t: [m for m in member_ids if t in members[m]] for t in sorted(topics, key=str)
    }
    # 1. keep what is still valid
    for m in member_ids:
        for t, parts in sorted(current.get(m, {}).items(), key=lambda kv: str(kv[0])):
            if t not in topics or t not in members[m]:
                continue
            for p in sorted(parts):
                if p < topics[t] and (t, p) not in owner:
                    owner[t, p] = m
                    result[m].setdefault(t, set()).add(p)
                    count[m] += 1
    # 2. unassigned partitions to the least loaded eligible member (scarce topics first)
    for t in sorted(topics, key=lambda t: (len(eligible[t]), str(t))):
        if not eligible[t]:
            continue
        for p in range(topics[t]):
            if (t, p) in owner:
                continue
            m = min(eligible[t], key=lambda m: (count[m], m))
            owner[t, p] = m
            result[m].setdefault(t, set()).add(p)
            count[m] += 1
    # 3. balance: move from the most loaded to a less loaded member that may take it
    while True:
        moved = False
        for src in sorted(member_ids, key=lambda m: (-count[m], m)):
            best: tuple[int, str, TopicId, int] | None = None
            for t, parts in sorted(result[src].items(), key=lambda kv: str(kv[0])):
                if not parts:
                    continue
                for dst in eligible[t]:
                    if count[dst] + 1 < count[src] and (
                        best is None or (count[dst], dst) < (best[0], best[1])
                    ):
                        best = (count[dst], dst, t, max(parts))
            if best is not None:
                _, dst, t, p = best
                result[src][t].discard(p)
                result[dst].setdefault(t, set()).add(p)
                count[src] -= 1
                count[dst] += 1
                moved = True
                break
        if not moved:
            break
    return _freeze(result)


def range_assign(
    members: MemberSubscriptions,
    topics: Mapping[TopicId, int],
    current: Mapping[str, Assignment],
) -> dict[str, Assignment]:
    result: dict[str, dict[TopicId, set[int]]] = {m: {} for m in members}
    for t, n in topics.items():
        subscribers = sorted(m for m in members if t in members[m])
        if not subscribers:
            continue
        quota, extra = divmod(n, len(subscribers))
        start = 0
        for i, m in enumerate(subscribers):
            size = quota + (1 if i < extra else 0)
            if size:
                result[m][t] = set(range(start, start + size))
            start += size
    return _freeze(result)


ASSIGNORS: dict[str, AssignorFn] = {UNIFORM: uniform_assign, RANGE: range_assign}


def parse_assignors(value: str) -> tuple[str, ...]:
    """``group.consumer.assignors``: a comma-separated list of ``uniform``/``range`` (or Kafka's
    class names); the first is the default. Raises ValueError naming what is wrong."""
    names = []
    for raw in value.split(","):
        name = raw.strip()
        if not name:
            continue
        name = CLASS_NAMES.get(name, name)
        if name not in ASSIGNORS:
            raise ValueError(f"unknown assignor {raw.strip()!r}: expected uniform or range")
        if name not in names:
            names.append(name)
    if not names:
        raise ValueError("at least one assignor is required")
    return tuple(names)
