"""``KafkaDataSource``: kafkalite (or any Kafka) as a PySpark Python data source, batch and
streaming, reader and writer, with the options and schema of Spark's Kafka connector.

    from kafkalite.spark import KafkaDataSource
    spark.dataSource.register(KafkaDataSource)
    df = (spark.read.format("kafkalite")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events").load())

Planning (partitions, offsets) runs on the driver; each Spark task reads one offset range of
one Kafka partition and hands Spark pyarrow record batches, or produces the record batches of
its rows. The streaming reader keeps its offsets in Spark's checkpoint (Spark's
KafkaSourceOffset JSON: ``{"topic": {"0": 42}}``), so a restarted query resumes where the last
committed micro-batch ended.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from . import options as opt
from . import values
from .kafka import (
    DEFAULT_POLL_TIMEOUT_S,
    DataLossError,
    KafkaError,
    OffsetReader,
    TaskProducer,
    TransactionalTaskWrite,
    data_loss_message,
    read_range,
    resolve,
)
from .options import EARLIEST, LATEST, OffsetRange, OffsetSpec, OptionError, TopicPartition

log = logging.getLogger(__name__)

HEADERS_TYPE = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)


def read_schema(include_headers: bool) -> StructType:
    """Spark's Kafka source schema."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


class KafkaDataSource(DataSource):
    """``format("kafkalite")``: Spark's Kafka source and sink options (see
    kafkalite.spark.options), over confluent-kafka."""

    @classmethod
    def name(cls) -> str:
        return "kafkalite"

    def schema(self) -> StructType:
        base = read_schema(opt.get_bool(self.options, "includeHeaders", False))
        settings = values.settings_of(self.options)
        if settings is None:
            return base
        # valueFormat: the value's fields as columns, from the subject's latest version now
        latest = values.latest_schema(settings)
        return values.decoded_schema(base, values.value_fields(settings, latest))

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaBatchReader(dict(self.options), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KafkaStreamReader(dict(self.options), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        return KafkaBatchWriter(dict(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamArrowWriter:
        return KafkaStreamWriter(dict(self.options), schema)


# ------------------------------------------------------------------------------ reading


class KafkaInputPartition(InputPartition):
    """One Spark task: the records [start, end) of one Kafka partition."""

    def __init__(self, r: OffsetRange) -> None:
        super().__init__(r)
        self.range = r


class _ReaderBase:
    """What the batch and streaming readers share: options, the driver's offset reader (not
    pickled to the executors), resolving offset specs, reading a range."""

    streaming = False

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.options = dict(options)
        self.schema = schema
        self.params = opt.kafka_params(options)
        self.subscription = opt.subscription(options)
        self.fail_on_data_loss = opt.get_bool(options, "failOnDataLoss", True)
        self.min_partitions = opt.get_positive_int(options, "minPartitions")
        self.strategy = opt.by_timestamp_strategy(options)
        poll_ms = opt.get_positive_int(options, "kafkaConsumer.pollTimeoutMs")
        self.poll_timeout_s = poll_ms / 1000 if poll_ms else DEFAULT_POLL_TIMEOUT_S
        self.starting = opt.offset_spec(options, "starting", streaming=self.streaming)
        self._offset_reader: OffsetReader | None = None
        self.registry = values.settings_of(options)
        self.raw_schema = schema
        self.planned: values.WriterSchema | None = None
        self.value_fields: list[StructField] = []
        if self.registry is not None:
            self.raw_schema = read_schema(opt.get_bool(options, "includeHeaders", False))
            self.planned, self.value_fields = self._planned_schema(self.registry, schema)

    def _planned_schema(
        self, settings: values.RegistrySettings, schema: StructType
    ) -> tuple[values.WriterSchema, list[StructField]]:
        """The subject's version whose fields are the columns of `schema` (planned by
        KafkaDataSource.schema from the latest version: the latest unless a version was
        registered since, or the caller gave the schema)."""
        latest = values.latest_schema(settings)
        fields = values.value_fields(settings, latest)
        if values.decoded_schema(self.raw_schema, fields) == schema:
            return latest, fields
        subject = values.urllib.parse.quote(settings.subject, safe="")
        versions = values._get(settings, f"/subjects/{subject}/versions", cached=False)
        for version in sorted(versions, reverse=True):
            answer = values._get(settings, f"/subjects/{subject}/versions/{version}", cached=False)
            candidate = values.WriterSchema(
                int(answer["id"]),
                str(answer.get("schemaType") or "AVRO"),
                str(answer["schema"]),
                tuple(
                    (str(r["name"]), str(r["subject"]), int(r["version"]))
                    for r in answer.get("references") or ()
                ),
            )
            fields = values.value_fields(settings, candidate)
            if values.decoded_schema(self.raw_schema, fields) == schema:
                return candidate, fields
        raise OptionError(
            f"valueFormat: no version of subject {settings.subject} gives the columns "
            f"{schema.simpleString()}"
        )

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_offset_reader"] = None
        return state

    @property
    def offset_reader(self) -> OffsetReader:
        if self._offset_reader is None:
            self._offset_reader = OffsetReader(self.params)
        return self._offset_reader

    def close(self) -> None:
        if self._offset_reader is not None:
            self._offset_reader.close()
            self._offset_reader = None

    def current_partitions(self) -> list[TopicPartition]:
        return self.subscription.select(self.offset_reader.partition_counts())

    def resolve_spec(
        self,
        spec: OffsetSpec,
        partitions: Sequence[TopicPartition],
        marks: Mapping[TopicPartition, tuple[int, int]],
        *,
        ending: bool,
    ) -> dict[TopicPartition, int]:
        """Concrete offsets of ``spec`` for ``partitions`` (Spark's rules: per-partition JSON
        must name exactly the partitions read; no record at or after an ending timestamp means
        the latest offset)."""
        latest = {tp: marks[tp][1] for tp in partitions}
        if spec.kind == "earliest":
            return {tp: marks[tp][0] for tp in partitions}
        if spec.kind == "latest":
            return latest
        if spec.kind == "offsets":
            given = spec.offsets or {}
            self._check_named(given, partitions, "Offsets")
            return resolve({tp: given[tp] for tp in partitions}, marks)
        if spec.kind == "timestamp":
            timestamps = {tp: spec.timestamp or 0 for tp in partitions}
        else:
            given = spec.timestamps or {}
            self._check_named(given, partitions, "OffsetsByTimestamp")
            timestamps = {tp: given[tp] for tp in partitions}
        strategy = "latest" if ending else self.strategy
        return self.offset_reader.offsets_for_times(timestamps, strategy=strategy, latest=latest)

    @staticmethod
    def _check_named(given: Mapping[TopicPartition, int], partitions: Sequence[TopicPartition],
                     what: str) -> None:  # fmt: skip
        if set(given) != set(partitions):
            names = sorted(f"{tp.topic}-{tp.partition}" for tp in partitions)
            raise OptionError(
                f"if the {what} options name specific partitions they must name every partition "
                f"read ({', '.join(names)}); use -1 for latest, -2 for earliest"
            )

    def data_loss(self, what: str) -> None:
        if self.fail_on_data_loss:
            raise DataLossError(data_loss_message(what))
        log.warning(data_loss_message(what))

    def checked_range(
        self, tp: TopicPartition, start: int, end: int, low: int
    ) -> OffsetRange | None:
        """The range to read, after the data-loss rules: a start below the log start loses the
        records in between (fail, or read from the log start); an end before the start means
        the partition was recreated or truncated (fail, or skip)."""
        if start < low:
            self.data_loss(
                f"offsets {start} to {low} of {tp.topic}-{tp.partition} are below its log start "
                f"offset {low}"
            )
            start = low
        if end < start:
            self.data_loss(f"{tp.topic}-{tp.partition}: the end offset {end} is before {start}")
            return None
        return OffsetRange(tp.topic, tp.partition, start, end)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        from pyspark.sql.pandas.types import to_arrow_schema

        r = getattr(partition, "range", None)
        if r is None:  # Spark plans one empty partition when there is nothing to read
            return
        arrow_schema = to_arrow_schema(self.raw_schema, timezone="UTC")
        batches = read_range(
            r,
            self.params,
            arrow_schema,
            fail_on_data_loss=self.fail_on_data_loss,
            poll_timeout_s=self.poll_timeout_s,
        )
        if self.registry is None:
            yield from batches
            return
        yield from self._decoded(batches, r)

    def _decoded(self, batches: Iterator[Any], r: OffsetRange) -> Iterator[Any]:
        """valueFormat: each batch with its value column replaced by the value's fields."""
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_schema

        assert self.registry is not None and self.planned is not None
        out_schema = to_arrow_schema(self.schema, timezone="UTC")
        decoder = values.ValueDecoder(self.registry, self.planned, self.value_fields)
        rest = [name for name in self.raw_schema.names if name != "value"]
        for batch in batches:
            offsets = batch.column("offset")

            def where(i: int, offsets: Any = offsets) -> str:
                return f"{r.topic}-{r.partition} offset {offsets[i].as_py()}"

            columns = decoder.columns(batch.column("value"), where)
            arrays = [
                pa.array(column, out_schema.field(j).type) for j, column in enumerate(columns)
            ]
            arrays += [batch.column(name) for name in rest]
            yield pa.RecordBatch.from_arrays(arrays, schema=out_schema)


class KafkaBatchReader(_ReaderBase, DataSourceReader):
    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        super().__init__(options, schema)
        self.ending = opt.offset_spec(options, "ending", streaming=False)

    def partitions(self) -> Sequence[InputPartition]:
        try:
            tps = self.current_partitions()
            marks = self.offset_reader.watermarks(tps)
            start = self.resolve_spec(self.starting, tps, marks, ending=False)
            end = self.resolve_spec(self.ending, tps, marks, ending=True)
        finally:
            self.close()
        ranges = []
        for tp in tps:
            if start[tp] > end[tp]:
                raise OptionError(
                    f"the starting offset {start[tp]} of {tp.topic}-{tp.partition} is after its "
                    f"ending offset {end[tp]}"
                )
            checked = self.checked_range(tp, start[tp], end[tp], marks[tp][0])
            if checked is not None:
                ranges.append(checked)
        return [KafkaInputPartition(r) for r in opt.split_ranges(ranges, self.min_partitions)]


class KafkaStreamReader(_ReaderBase, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader. An offset is Spark's KafkaSourceOffset JSON; partitions that appear
    later (a topic gains partitions, a new topic matches the pattern) are read from their
    earliest offset, as Spark does."""

    streaming = True

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        opt.check_streaming_options(options)
        super().__init__(options, schema)
        self.max_offsets = opt.get_positive_int(options, "maxOffsetsPerTrigger")
        self.available_now: dict[TopicPartition, int] | None = None
        self.latest_seen: dict[TopicPartition, int] | None = None

    def initialOffset(self) -> dict:
        tps = self.current_partitions()
        marks = self.offset_reader.watermarks(tps)
        return opt.offsets_to_json(self.resolve_spec(self.starting, tps, marks, ending=False))

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_offsets) if self.max_offsets else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        tps = self.current_partitions()
        self.available_now = {
            tp: high for tp, (_, high) in self.offset_reader.watermarks(tps).items()
        }

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = opt.offsets_from_json(start)
        tps = self.current_partitions()
        marks = self.offset_reader.watermarks(tps)
        latest = {tp: marks[tp][1] for tp in tps}
        if self.available_now is not None:
            latest = {tp: min(v, self.available_now.get(tp, begin.get(tp, marks[tp][0])))
                      for tp, v in latest.items()}  # fmt: skip
        self.latest_seen = dict(latest)
        if isinstance(limit, ReadMaxRows):
            from_offsets = {tp: begin.get(tp, marks[tp][0]) for tp in tps}
            latest = opt.rate_limit(from_offsets, latest, limit.max_rows)
        # a partition that vanished keeps its offset: partitions() reports the loss
        end = {**{tp: o for tp, o in begin.items() if tp not in latest}, **latest}
        return opt.offsets_to_json(end)

    def reportLatestOffset(self) -> dict | None:
        return None if self.latest_seen is None else opt.offsets_to_json(self.latest_seen)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin = opt.offsets_from_json(start)
        until = opt.offsets_from_json(end)
        counts = self.offset_reader.partition_counts()
        existing = [tp for tp in until if tp.partition < counts.get(tp.topic, 0)]
        marks = self.offset_reader.watermarks(existing)
        ranges = []
        for tp, end_offset in until.items():
            if tp not in marks:
                self.data_loss(f"{tp.topic}-{tp.partition} is gone (topic deleted?)")
                continue
            low = marks[tp][0]
            checked = self.checked_range(tp, begin.get(tp, low), end_offset, low)
            if checked is not None:
                ranges.append(checked)
        return [KafkaInputPartition(r) for r in opt.split_ranges(ranges, self.min_partitions)]

    def commit(self, end: dict) -> None:
        """Nothing to do: Spark's checkpoint holds the offsets (Kafka's group offsets are not
        used, as with Spark's own Kafka source)."""

    def stop(self) -> None:
        self.close()


# ------------------------------------------------------------------------------ writing


@dataclass
class KafkaCommitMessage(WriterCommitMessage):
    records: int
    skipped: bool = False  # exactly-once: an earlier attempt of the task had committed


# local properties Spark's MicroBatchExecution / StreamExecution give the tasks of a micro-batch
MICRO_BATCH_ID = "streaming.sql.batchId"
QUERY_ID = "sql.streaming.queryId"


def check_write_schema(schema: StructType, topic_option: str | None) -> None:
    """Spark's KafkaWriter.validateQuery: the columns a write may have, and their types."""
    fields = {f.name.lower(): f.dataType for f in schema.fields}

    def check(name: str, allowed: tuple[type[DataType], ...], what: str) -> None:
        if name in fields and not isinstance(fields[name], allowed):
            raise OptionError(
                f"{name} attribute type must be {what}, got {fields[name].simpleString()}"
            )

    if "value" not in fields:
        raise OptionError("Required attribute 'value' not found")
    check("value", (StringType, BinaryType), "a string or binary")
    check("key", (StringType, BinaryType), "a string or binary")
    check("topic", (StringType,), "a string")
    check("partition", (IntegerType,), "an int")
    if "headers" in fields and fields["headers"] != HEADERS_TYPE:
        raise OptionError(f"headers attribute type must be {HEADERS_TYPE.simpleString()}")
    if topic_option is None and "topic" not in fields:
        raise OptionError(
            "topic option required when no 'topic' attribute is present. Use the topic option "
            "for setting a topic."
        )


class _WriterBase:
    """Each task produces its rows and waits for every acknowledgement; a delivery error (the
    Kafka error named) fails the task.

    ``deliveryGuarantee`` = ``at-least-once`` (the default, as Spark's Kafka sink): the
    idempotent producer; Spark retries a failed task (or re-runs a micro-batch after a restart)
    with all its rows, and what the failed attempt wrote stays written.

    ``exactly-once`` (Flink's KafkaSink option): each task writes in one Kafka transaction
    (kafka.TransactionalTaskWrite) whose transactional.id is ``<transactionalIdPrefix>-<Spark
    partition id>``; the prefix defaults to ``kafkalite-spark-<query id>`` for a stream (the id
    kept in the checkpoint, so a restarted query fences and finds its earlier attempts) and to
    ``kafkalite-spark-<random id of the write>`` for a batch write. Spark's driver-side commit
    has nothing left to do: a Kafka transaction cannot be handed from the task to the driver."""

    streaming = False

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.params = opt.kafka_params(options)
        if "transactional.id" in self.params:
            raise OptionError(
                "Kafka option 'transactional.id' is not supported: set deliveryGuarantee="
                "exactly-once (and optionally transactionalIdPrefix); each task then writes "
                "in a transaction of its own"
            )
        self.topic = opt.get(options, "topic")
        check_write_schema(schema, self.topic)
        guarantee = (opt.get(options, "deliveryGuarantee") or "at-least-once").strip().lower()
        if guarantee not in ("at-least-once", "exactly-once"):
            raise OptionError(
                f"option deliveryGuarantee must be at-least-once or exactly-once, got {guarantee!r}"
            )
        self.exactly_once = guarantee == "exactly-once"
        self.txn_prefix = opt.get(options, "transactionalIdPrefix")
        if self.txn_prefix is not None and not self.exactly_once:
            raise OptionError("option transactionalIdPrefix needs deliveryGuarantee=exactly-once")
        # made on the driver and pickled to the tasks: every attempt of a batch write shares it
        self.write_id = uuid.uuid4().hex

    def write(self, iterator: Iterator[Any]) -> KafkaCommitMessage:
        if self.exactly_once:
            return self._write_in_transaction(iterator)
        producer = TaskProducer(self.params)
        try:
            for batch in iterator:
                producer.produce_batch(batch, self.topic)
            return KafkaCommitMessage(producer.commit())
        except BaseException:
            producer.abort()
            raise

    def _task_identity(self) -> tuple[str, int]:
        """(transactional.id of this task, its batch id: the micro-batch's, 0 for a batch
        write)."""
        from pyspark import TaskContext

        context = TaskContext.get()
        if context is None:
            raise RuntimeError("deliveryGuarantee=exactly-once: no Spark task context")
        batch_id = 0
        prefix = self.txn_prefix or f"kafkalite-spark-{self.write_id}"
        if self.streaming:
            batch_id = int(context.getLocalProperty(MICRO_BATCH_ID) or 0)
            query_id = context.getLocalProperty(QUERY_ID)
            if self.txn_prefix is None and query_id:
                prefix = f"kafkalite-spark-{query_id}"
        return f"{prefix}-{context.partitionId()}", batch_id

    def _write_in_transaction(self, iterator: Iterator[Any]) -> KafkaCommitMessage:
        batches = (b for b in iterator if b.num_rows)
        first = next(batches, None)
        if first is None:
            return KafkaCommitMessage(0)
        marker_topic = self.topic or first.column(first.schema.names.index("topic"))[0].as_py()
        if marker_topic is None:
            raise KafkaError("writing failed: a row has a null topic and no topic option is set")
        transactional_id, batch_id = self._task_identity()
        txn = TransactionalTaskWrite(self.params, transactional_id, marker_topic)
        try:
            done = txn.committed_batch()
            if done is not None and done >= batch_id:
                log.info("%s: batch %d was committed by an earlier attempt", transactional_id,
                         batch_id)  # fmt: skip
                return KafkaCommitMessage(0, skipped=True)
            txn.begin()
            txn.produce_batch(first, self.topic)
            for batch in batches:
                txn.produce_batch(batch, self.topic)
            return KafkaCommitMessage(txn.commit(batch_id))
        except BaseException:
            txn.abort()
            raise
        finally:
            txn.close()


class KafkaBatchWriter(_WriterBase, DataSourceArrowWriter):
    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        pass

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        pass


class KafkaStreamWriter(_WriterBase, DataSourceStreamArrowWriter):
    streaming = True

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass


__all__ = [
    "EARLIEST",
    "LATEST",
    "KafkaDataSource",
    "KafkaError",
    "read_schema",
]
