"""Verification of a load run, in Spark: what the producers had acknowledged against what the
consumers read back.

Inputs are two DataFrames with the schemas below (rows of spark_tasks.ACK_FIELDS and
spark_tasks.RECEIVED_FIELDS). The data set is a function of `seq` (spark_tasks module docstring),
so every received record can also be checked against what it should be.

Checks (each a count, with up to `sample` offending rows kept for the report):

- missing: an acknowledged seq that no consumer received. Fails the run.
- misplaced: an acknowledged seq received, but not at the partition/offset of its acknowledgement
  (acks with offset -1, the Redis peer's, are checked for partition only). Fails the run.
- duplicate_offsets: a (partition, offset) delivered more than once. Fails the run.
- duplicate_sequences: a seq stored at more than one offset. Fails the run unless duplicates are
  allowed (a non-idempotent producer may legitimately write a retried batch twice).
- reordered: within a (partition, key), a record whose seq is lower than the one at the previous
  offset: per-key order was not preserved. Fails the run.
- corrupt: a received record that is not what the data set says (foreign value, key, partition,
  producer or value size disagreeing with its seq). Fails the run.
- unacknowledged_present: received but never acknowledged (the producer saw an error or a
  timeout, yet the write landed). Reported, not a failure: Kafka allows it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StructField, StructType

ACKED_SCHEMA = StructType(
    [
        StructField("producer", IntegerType(), False),
        StructField("seq", LongType(), False),
        StructField("partition", IntegerType(), False),
        StructField("offset", LongType(), False),
        StructField("send_ns", LongType(), False),
        StructField("ack_ns", LongType(), False),
    ]
)

RECEIVED_SCHEMA = StructType(
    [
        StructField("consumer", IntegerType(), False),
        StructField("partition", IntegerType(), False),
        StructField("offset", LongType(), False),
        StructField("key_index", LongType(), False),
        StructField("seq", LongType(), False),
        StructField("producer", IntegerType(), False),
        StructField("send_ns", LongType(), False),
        StructField("recv_ns", LongType(), False),
        StructField("value_len", IntegerType(), False),
    ]
)

FAILING_CHECKS = (
    "missing",
    "misplaced",
    "duplicate_offsets",
    "duplicate_sequences",
    "reordered",
    "corrupt",
)


@dataclass
class Verification:
    acknowledged: int
    received: int
    missing: int
    misplaced: int
    duplicate_offsets: int
    duplicate_sequences: int
    reordered: int
    corrupt: int
    unacknowledged_present: int
    duplicates_allowed: bool = False
    samples: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def failures(self) -> list[str]:
        out = []
        for name in FAILING_CHECKS:
            count = getattr(self, name)
            if name == "duplicate_sequences" and self.duplicates_allowed:
                continue
            if count:
                out.append(f"{count} {name.replace('_', ' ')}")
        return out

    @property
    def ok(self) -> bool:
        return not self.failures()

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["ok"] = self.ok
        out["failures"] = self.failures()
        return out


def _sample(df: DataFrame, sample: int) -> list[dict[str, Any]]:
    return [r.asDict() for r in df.limit(sample).collect()]


def verify(
    acked: DataFrame,
    received: DataFrame,
    *,
    keys: int,
    partitions: int,
    producers: int,
    value_size: int,
    duplicates_allowed: bool = False,
    sample: int = 5,
) -> Verification:
    """Run every check; see the module docstring.

    Two Spark jobs count everything (one over acked joined with received by seq, one over
    received alone); only a check that found something runs a third to fetch sample rows.
    Cache the inputs first (spark_load does)."""
    acked = acked.select("seq", "partition", "offset")
    data_seq = F.when(F.col("seq") >= 0, F.col("seq"))

    # --- acked x received, one row per seq
    places = received.groupBy("seq").agg(
        F.count("*").alias("copies"),
        F.collect_list(F.struct("partition", "offset")).alias("places"),
    )
    joined = acked.alias("a").join(
        places.alias("r"), F.col("a.seq") == F.col("r.seq"), "full_outer"
    )
    a_seq, r_seq = F.col("a.seq"), F.col("r.seq")
    is_placed = F.exists(
        F.col("r.places"),
        lambda place: (
            (place["partition"] == F.col("a.partition"))
            & ((F.col("a.offset") < 0) | (place["offset"] == F.col("a.offset")))
        ),
    )
    missing_c = a_seq.isNotNull() & r_seq.isNull()
    misplaced_c = a_seq.isNotNull() & r_seq.isNotNull() & ~is_placed
    duplicate_seq_c = (r_seq >= 0) & (F.col("r.copies") > 1)
    unacknowledged_c = a_seq.isNull() & (r_seq >= 0)
    totals = joined.agg(
        F.count(a_seq).alias("acknowledged"),
        F.sum(missing_c.cast("long")).alias("missing"),
        F.sum(misplaced_c.cast("long")).alias("misplaced"),
        F.sum(duplicate_seq_c.cast("long")).alias("duplicate_sequences"),
        F.sum(unacknowledged_c.cast("long")).alias("unacknowledged_present"),
    ).first()

    # --- received alone: per-offset copies, per-key order, data-set conformance
    same_offset = Window.partitionBy("partition", "offset")
    earlier_of_key = (
        Window.partitionBy("partition", "key_index")
        .orderBy("offset")
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    key_index = F.col("seq") % F.lit(keys)
    wrong = (
        (F.col("seq") < 0)
        | (F.col("key_index") != key_index)
        | (F.col("partition") != key_index % F.lit(partitions))
        | (F.col("producer") != key_index % F.lit(producers))
        | (F.col("value_len") != F.lit(value_size))
    )
    checked = (
        received.withColumn("copies", F.count("*").over(same_offset))
        .withColumn("copy", F.row_number().over(same_offset.orderBy("consumer", "recv_ns")))
        .withColumn("previous_seq", F.max(data_seq).over(earlier_of_key))
        .withColumn("reordered", (F.col("seq") >= 0) & (F.col("seq") < F.col("previous_seq")))
        .withColumn("corrupt", wrong)
    )
    counts = checked.agg(
        F.count("*").alias("received"),
        F.sum(((F.col("copies") > 1) & (F.col("copy") == 1)).cast("long")).alias("dup_offsets"),
        F.sum(F.coalesce(F.col("reordered"), F.lit(False)).cast("long")).alias("reordered"),
        F.sum(F.col("corrupt").cast("long")).alias("corrupt"),
    ).first()

    result = Verification(
        acknowledged=totals["acknowledged"],
        received=counts["received"],
        missing=totals["missing"] or 0,
        misplaced=totals["misplaced"] or 0,
        duplicate_offsets=counts["dup_offsets"] or 0,
        duplicate_sequences=totals["duplicate_sequences"] or 0,
        reordered=counts["reordered"] or 0,
        corrupt=counts["corrupt"] or 0,
        unacknowledged_present=totals["unacknowledged_present"] or 0,
        duplicates_allowed=duplicates_allowed,
    )
    row_cols = ["partition", "offset", "key_index", "seq", "producer", "value_len"]
    examples = {
        "missing": lambda: joined.filter(missing_c).select("a.*"),
        "misplaced": lambda: joined.filter(misplaced_c).select("a.*", "r.places"),
        "duplicate_sequences": lambda: joined.filter(duplicate_seq_c).select("r.*"),
        "unacknowledged_present": lambda: joined.filter(unacknowledged_c).select("r.*"),
        "duplicate_offsets": lambda: checked.filter(F.col("copies") > 1).select(*row_cols),
        "reordered": lambda: checked.filter(F.col("reordered")).select(*row_cols, "previous_seq"),
        "corrupt": lambda: checked.filter(F.col("corrupt")).select(*row_cols),
    }
    for name, frame in examples.items():
        if getattr(result, name):
            result.samples[name] = _sample(frame(), sample)
    return result
