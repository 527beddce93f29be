"""bench/spark_verify.py on synthetic runs (no broker): a clean run passes, each kind of damage
is caught, and every count agrees with a plain-Python oracle of the same checks."""

from __future__ import annotations

import random
from collections import Counter, defaultdict

import pytest
from spark_verify import ACKED_SCHEMA, RECEIVED_SCHEMA, Verification, verify

KEYS, PARTITIONS, PRODUCERS, VALUE_SIZE = 12, 3, 2, 64


def clean_run(records: int = 400) -> tuple[list[tuple], list[tuple]]:
    """Acked and received rows of a perfect run: offsets assigned in seq order per partition."""
    acked, received = [], []
    next_offset = defaultdict(int)
    for seq in range(records):
        k = seq % KEYS
        partition, producer = k % PARTITIONS, k % PRODUCERS
        offset = next_offset[partition]
        next_offset[partition] += 1
        send = 1_000_000 * seq
        acked.append((producer, seq, partition, offset, send, send + 500_000))
        received.append((partition % 2, partition, offset, k, seq, producer, send,
                         send + 2_000_000, VALUE_SIZE))  # fmt: skip
    return acked, received


def oracle(acked: list[tuple], received: list[tuple], duplicates_allowed: bool) -> dict:
    """The checks of spark_verify, in plain Python over lists."""
    ack_seqs = {a[1] for a in acked}
    got = [(r[1], r[2], r[3], r[4], r[5], r[8]) for r in received]  # p, o, key, seq, prod, len
    got_seqs = {g[3] for g in got}
    got_at = {(g[3], g[0], g[1]) for g in got}
    got_partition = {(g[3], g[0]) for g in got}
    missing = sum(1 for a in acked if a[1] not in got_seqs)
    misplaced = 0
    for _, seq, partition, offset, *_ in acked:
        if seq not in got_seqs:
            continue
        if offset < 0:
            misplaced += (seq, partition) not in got_partition
        else:
            misplaced += (seq, partition, offset) not in got_at
    per_offset = Counter((g[0], g[1]) for g in got)
    data = [g for g in got if g[3] >= 0]
    per_seq = Counter(g[3] for g in data)
    reordered = 0
    previous: dict[tuple[int, int], int] = {}
    for p, _o, key, seq, _prod, _len in sorted(data, key=lambda g: (g[0], g[1])):
        if (p, key) in previous and seq < previous[(p, key)]:
            reordered += 1
        previous[(p, key)] = seq
    corrupt = 0
    for p, _o, key, seq, prod, length in got:
        k = seq % KEYS
        corrupt += (seq < 0 or key != k or p != k % PARTITIONS or prod != k % PRODUCERS
                    or length != VALUE_SIZE)  # fmt: skip
    return {
        "acknowledged": len(acked),
        "received": len(received),
        "missing": missing,
        "misplaced": misplaced,
        "duplicate_offsets": sum(1 for c in per_offset.values() if c > 1),
        "duplicate_sequences": sum(1 for c in per_seq.values() if c > 1),
        "reordered": reordered,
        "corrupt": corrupt,
        "unacknowledged_present": len({g[3] for g in data} - ack_seqs),
    }


def mutate(kind: str, acked: list[tuple], received: list[tuple], rng: random.Random):
    acked, received = list(acked), list(received)
    if kind in ("drop", "all"):  # records lost between produce and verify
        for _ in range(5):
            received.pop(rng.randrange(len(received)))
    if kind in ("duplicate_offset", "all"):  # the same offset delivered twice
        received.append(received[rng.randrange(len(received))])
    if kind in ("reorder", "all"):  # two records of one key swap places in the log
        i = rng.randrange(len(received) - KEYS)
        j = i + KEYS  # the next record of the same key (same partition)
        a, b = received[i], received[j]
        received[i] = a[:4] + (b[4],) + a[5:]
        received[j] = b[:4] + (a[4],) + b[5:]
    if kind in ("corrupt", "all"):  # wrong key, and a foreign record
        i = rng.randrange(len(received))
        r = received[i]
        received[i] = r[:3] + ((r[3] + 1) % KEYS,) + r[4:]
        received.append((0, 0, 10_000, -1, -1, -1, 0, 0, 3))
    if kind in ("misplace", "all"):  # acknowledged at one offset, found at another
        i = rng.randrange(len(acked))
        a = acked[i]
        acked[i] = a[:3] + (a[3] + 7,) + a[4:]
    if kind in ("unacked", "all"):  # written although the producer saw no ack
        acked.pop(rng.randrange(len(acked)))
    if kind in ("duplicate_seq", "all"):  # a retried batch stored twice
        r = received[rng.randrange(len(received))]
        received.append(r[:2] + (20_000,) + r[3:])
    return acked, received


# What each kind of damage must fail (at least); "all" applies every kind at once.
FAILS = {
    "drop": ["missing"],
    "duplicate_offset": ["duplicate_offsets", "duplicate_sequences"],
    "reorder": ["misplaced", "reordered"],
    "corrupt": ["corrupt"],
    "misplace": ["misplaced"],
    "duplicate_seq": ["duplicate_sequences"],
}


@pytest.mark.parametrize("kind", ["none", "drop", "all"])
def test_verification_matches_the_oracle(spark, kind):
    rng = random.Random(f"verify-{kind}")
    acked, received = mutate(kind, *clean_run(), rng)
    result = verify(
        spark.createDataFrame(acked, ACKED_SCHEMA),
        spark.createDataFrame(received, RECEIVED_SCHEMA),
        keys=KEYS,
        partitions=PARTITIONS,
        producers=PRODUCERS,
        value_size=VALUE_SIZE,
    )
    expected = oracle(acked, received, duplicates_allowed=False)
    got = {name: getattr(result, name) for name in expected}
    assert got == expected
    failing = (
        {name for kinds in FAILS.values() for name in kinds}
        if kind == "all"
        else set(FAILS.get(kind, []))
    )
    assert all(got[name] > 0 for name in failing), got
    assert result.ok is (not failing)
    assert set(result.samples) >= failing
    if kind == "all":
        assert got["unacknowledged_present"] >= 1  # reported, but not among the failures
        assert not any("unacknowledged" in f for f in result.failures())


@pytest.mark.parametrize("kind", sorted(FAILS))
def test_each_kind_of_damage_is_seen_by_the_oracle(kind):
    # The oracle itself (plain Python) flags each kind alone; test_verification_matches_the_oracle
    # holds Spark to the oracle on the combined damage.
    acked, received = mutate(kind, *clean_run(), random.Random(f"verify-{kind}"))
    found = oracle(acked, received, duplicates_allowed=False)
    assert all(found[name] > 0 for name in FAILS[kind]), found
    clean = oracle(*clean_run(), duplicates_allowed=False)
    assert all(clean[name] == 0 for name in FAILS[kind])


def test_allowed_duplicates_do_not_fail_a_run():
    counts = dict(acknowledged=10, received=11, missing=0, misplaced=0, duplicate_offsets=0,
                  duplicate_sequences=1, reordered=0, corrupt=0, unacknowledged_present=0)  # fmt: skip
    strict = Verification(**counts)
    lenient = Verification(**counts, duplicates_allowed=True)
    assert strict.failures() == ["1 duplicate sequences"] and not strict.ok
    assert lenient.ok and lenient.to_dict()["ok"] is True and lenient.to_dict()["failures"] == []
