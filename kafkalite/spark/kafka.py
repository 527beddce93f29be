"""Kafka access of the data source, through confluent-kafka (librdkafka): offsets and metadata
on the driver, offset ranges read into Arrow record batches and rows produced from Arrow record
batches on the executors.

Why confluent-kafka rather than kafkalite's own client (measured by bench/spark_source.py): the
per-record work (decoding record batches, batching produced records, decompression) is done in C
by librdkafka, which also follows leader changes, retries and keeps the idempotent producer's
sequences; kafkalite's client is a request/response asyncio client whose record decoding runs in
Python.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from .options import EARLIEST, LATEST, OffsetRange, TopicPartition

DEFAULT_TIMEOUT_S = 30.0
# Spark's kafkaConsumer.pollTimeoutMs default: a range that yields nothing for this long fails
# its task (Spark retries it).
DEFAULT_POLL_TIMEOUT_S = 120.0
BATCH_RECORDS = 32768
# How long the driver retries offsets and metadata through a broker failure (Spark's offset
# reader: an admin client call of up to default.api.timeout.ms, 60 s, retried 3 times)
OFFSETS_TIMEOUT_S = 120.0

# librdkafka timestamp types -> Kafka's TimestampType ids (Spark's timestampType column)
TIMESTAMP_TYPE_IDS = {0: -1, 1: 0, 2: 1}


class DataLossError(RuntimeError):
    """Offsets the query needs are gone (below the log start after retention, or a partition
    that vanished) and failOnDataLoss is true."""


def data_loss_message(what: str) -> str:
    return (
        f"{what}. Some data may have been lost because they are not available in Kafka any "
        "more; either the data was aged out by Kafka or the topic may have been deleted before "
        "all the data in the topic was processed. If you don't want your query to fail in such "
        'cases, set the source option "failOnDataLoss" to "false".'
    )


def _kafka() -> Any:
    import confluent_kafka

    return confluent_kafka


def consumer_config(params: Mapping[str, str]) -> dict[str, Any]:
    config: dict[str, Any] = {
        "group.id": f"kafkalite-spark-{uuid.uuid4().hex}",
        "enable.auto.commit": False,
        # a range may end with records a read_committed reader never gets (a transaction's
        # commit or abort marker, aborted records): the end-of-partition event tells where the
        # fetch position is, past them
        "enable.partition.eof": True,
        "auto.offset.reset": "error",
        # librdkafka stops fetching for fetch.queue.backoff.ms (default 1 s) whenever its queue
        # holds queued.min.messages (100k): a range reader drains 100k records in a fraction of
        # that and then waited, idle (1M records: 7.5 s with the default, 1.7 s with 10 ms)
        "fetch.queue.backoff.ms": 10,
        # what exactly-once writes need (librdkafka's default too; Spark's connector inherits
        # the Java client's read_uncommitted): kafka.isolation.level overrides it
        "isolation.level": "read_committed",
        "log_level": 3,
    }
    config.update(params)
    return config


RETRY_BACKOFF_S = 0.5
ATTEMPT_TIMEOUT_S = 5.0


def _retriable(error: Any) -> bool:
    ck = _kafka()
    return bool(error.retriable()) or error.code() in (
        ck.KafkaError._TRANSPORT,
        ck.KafkaError._TIMED_OUT,
        ck.KafkaError.REQUEST_TIMED_OUT,
        ck.KafkaError.LEADER_NOT_AVAILABLE,
        ck.KafkaError.NOT_LEADER_FOR_PARTITION,
        ck.KafkaError._ALL_BROKERS_DOWN,
    )


class KafkaError(RuntimeError):
    """A Kafka error that fails the Spark task or query, with its name and text."""

    @classmethod
    def of(cls, what: str, error: Any) -> KafkaError:
        return cls(f"{what}: {error.name()} ({error.str()})")


class OffsetReader:
    """Driver-side metadata and offsets for one query: partitions of a subscription,
    watermarks, offsets by timestamp."""

    def __init__(self, params: Mapping[str, str], timeout_s: float = OFFSETS_TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        self.params = dict(params)
        self.consumer = _kafka().Consumer(consumer_config(params))

    def close(self) -> None:
        self.consumer.close()

    def _retrying(self, what: str, call: Any) -> Any:
        """``call(timeout)`` until it answers; retriable errors (a broker that died, a leader
        being replaced) are retried for ``timeout_s`` with attempts of at most
        ATTEMPT_TIMEOUT_S (librdkafka then asks another broker), as Spark's offset reader
        retries: a broker failure does not fail the query."""
        ck = _kafka()
        deadline = time.monotonic() + self.timeout_s
        while True:
            attempt = min(ATTEMPT_TIMEOUT_S, max(1.0, deadline - time.monotonic()))
            try:
                return call(attempt)
            except ck.KafkaException as e:
                error = e.args[0]
                if time.monotonic() >= deadline or not _retriable(error):
                    raise KafkaError.of(what, error) from e
                # a new consumer starts from fresh metadata rather than a dead leader's
                self.consumer.close()
                self.consumer = _kafka().Consumer(consumer_config(self.params))
                time.sleep(RETRY_BACKOFF_S)  # back-off before asking again

    def partition_counts(self) -> dict[str, int]:
        metadata = self._retrying(
            "cannot read the cluster metadata",
            lambda timeout: self.consumer.list_topics(timeout=timeout),
        )
        return {
            name: len(t.partitions)
            for name, t in metadata.topics.items()
            if t.error is None and t.partitions
        }

    def watermarks(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, tuple[int, int]]:
        """(log start, high watermark) of each partition."""
        ck = _kafka()
        return {
            tp: self._retrying(
                f"cannot read the offsets of {tp.topic}-{tp.partition}",
                lambda timeout, tp=tp: self.consumer.get_watermark_offsets(
                    ck.TopicPartition(tp.topic, tp.partition), timeout=timeout, cached=False
                ),
            )
            for tp in partitions
        }

    def offsets_for_times(
        self,
        timestamps: Mapping[TopicPartition, int],
        *,
        strategy: str,
        latest: Mapping[TopicPartition, int],
    ) -> dict[TopicPartition, int]:
        """The first offset at or after each timestamp; a partition with none: its latest
        offset (strategy ``latest``) or an error (``error``, Spark's default)."""
        ck = _kafka()
        asked = [ck.TopicPartition(tp.topic, tp.partition, ts) for tp, ts in timestamps.items()]
        if not asked:
            return {}
        try:
            found = self.consumer.offsets_for_times(asked, timeout=self.timeout_s)
        except ck.KafkaException as e:
            raise KafkaError.of("cannot look offsets up by timestamp", e.args[0]) from e
        out = {}
        for tp in found:
            key = TopicPartition(tp.topic, tp.partition)
            if tp.error is not None:
                raise KafkaError.of(f"offset by timestamp of {tp.topic}-{tp.partition}", tp.error)
            if tp.offset < 0:
                if strategy != "latest":
                    raise KafkaError(
                        f"No offset matched from request of topic-partition {tp.topic}-"
                        f"{tp.partition} and timestamp {timestamps[key]} (set "
                        "startingOffsetsByTimestampStrategy=latest to start at the latest offset)"
                    )
                out[key] = latest[key]
            else:
                out[key] = tp.offset
        return out


def resolve(
    spec_offsets: Mapping[TopicPartition, int], marks: Mapping[TopicPartition, tuple[int, int]]
) -> dict[TopicPartition, int]:
    """EARLIEST / LATEST placeholders replaced by the partition's watermarks."""
    out = {}
    for tp, offset in spec_offsets.items():
        low, high = marks[tp]
        out[tp] = low if offset == EARLIEST else high if offset == LATEST else offset
    return out


# ------------------------------------------------------------------------------ executor: read


def _new_consumer(params: Mapping[str, str], topic: str, partition: int, offset: int) -> Any:
    """A consumer of one range, assigned at its start. Not kept for the next range: a kept
    consumer, paused and resumed (as Spark's Kafka source caches its consumers), now and then
    never fetched again after resuming, and its range waited out the whole poll timeout
    (minPartitions splitting a partition into ranges read one after another by one worker)."""
    ck = _kafka()
    consumer = ck.Consumer(consumer_config(params))
    consumer.assign([ck.TopicPartition(topic, partition, offset)])
    return consumer


def read_range(
    r: OffsetRange,
    params: Mapping[str, str],
    arrow_schema: Any,
    *,
    fail_on_data_loss: bool,
    poll_timeout_s: float = DEFAULT_POLL_TIMEOUT_S,
    batch_records: int = BATCH_RECORDS,
) -> Iterator[Any]:
    """The records [r.start, r.end) of one partition as pyarrow RecordBatches of
    ``arrow_schema`` (Spark's Kafka schema, with ``headers`` when the schema has it).

    Offsets that are gone (below the log start) fail the task with failOnDataLoss, else the
    read goes on from the log start. Gaps inside the range (compaction, transaction markers)
    are normal. No record for ``poll_timeout_s`` fails the task (Spark then retries it)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    ck = _kafka()
    with_headers = "headers" in arrow_schema.names
    consumer = _new_consumer(params, r.topic, r.partition, r.start)
    try:
        next_offset = r.start
        ended_at = -1
        last_progress = time.monotonic()
        cols: dict[str, list[Any]] = {
            "key": [],
            "value": [],
            "offset": [],
            "ts": [],
            "tst": [],
            "headers": [],
        }

        def flush() -> Any:
            n = len(cols["offset"])
            ts = pa.array(cols["ts"], pa.int64())
            arrays = {
                "key": pa.array(cols["key"], pa.binary()),
                "value": pa.array(cols["value"], pa.binary()),
                "topic": pa.repeat(pa.scalar(r.topic, pa.string()), n),
                "partition": pa.repeat(pa.scalar(r.partition, pa.int32()), n),
                "offset": pa.array(cols["offset"], pa.int64()),
                "timestamp": pc.multiply(ts, 1000).cast(arrow_schema.field("timestamp").type),
                "timestampType": pa.array(cols["tst"], pa.int32()),
            }
            if with_headers:
                arrays["headers"] = pa.array(cols["headers"], arrow_schema.field("headers").type)
            for values in cols.values():
                values.clear()
            return pa.RecordBatch.from_arrays(
                [arrays[name] for name in arrow_schema.names], schema=arrow_schema
            )

        while next_offset < r.end:
            # consume() waits until it has num_messages or the timeout passed: take what is
            # queued without waiting, and wait for one record only when nothing is
            want = min(10000, r.end - next_offset)
            messages = consumer.consume(num_messages=want, timeout=0) or consumer.consume(
                num_messages=1, timeout=0.2
            )
            if not messages:
                if time.monotonic() - last_progress > poll_timeout_s:
                    raise TimeoutError(
                        f"Failed to get records for {r.topic}-{r.partition} {next_offset} after "
                        f"polling for {poll_timeout_s * 1000:.0f} ms"
                    )
                continue
            # the fetch position at the end of the partition (past any control records)
            eof_at = max((m.offset() for m in messages if m.error() is not None
                          and m.error().code() == ck.KafkaError._PARTITION_EOF), default=-1)  # fmt: skip
            if eof_at >= 0:
                messages = [m for m in messages if m.error() is None
                            or m.error().code() != ck.KafkaError._PARTITION_EOF]  # fmt: skip
                if eof_at >= r.end:
                    ended_at = eof_at
                if not messages:
                    if eof_at >= r.end:
                        next_offset = r.end
                    continue
            failed = [m for m in messages if m.error() is not None]
            if failed:
                error = failed[0].error()
                if error.code() != ck.KafkaError._AUTO_OFFSET_RESET:
                    raise KafkaError.of(f"reading {r.topic}-{r.partition}", error)
                what = f"offset {next_offset} of {r.topic}-{r.partition} is out of range"
                if fail_on_data_loss:
                    raise DataLossError(data_loss_message(what))
                low, _high = consumer.get_watermark_offsets(
                    ck.TopicPartition(r.topic, r.partition), timeout=DEFAULT_TIMEOUT_S, cached=False
                )
                if low <= next_offset:
                    raise KafkaError.of(f"reading {r.topic}-{r.partition}", error)
                next_offset = low
                consumer.assign([ck.TopicPartition(r.topic, r.partition, next_offset)])
                continue
            last_progress = time.monotonic()
            offsets = [m.offset() for m in messages]
            beyond = offsets[-1] >= r.end  # a record past the range: the range is done
            if offsets[0] < next_offset or beyond:
                keep = [i for i, o in enumerate(offsets) if next_offset <= o < r.end]
                messages = [messages[i] for i in keep]
                offsets = [offsets[i] for i in keep]
            if messages:
                next_offset = offsets[-1] + 1
            if beyond:
                next_offset = r.end
            if ended_at >= r.end:  # the end of the partition was past the range's end
                next_offset = r.end
            if not messages:
                continue
            cols["offset"] += offsets
            cols["key"] += [m.key() for m in messages]
            cols["value"] += [m.value() for m in messages]
            stamps = [m.timestamp() for m in messages]
            cols["ts"] += [s[1] for s in stamps]
            cols["tst"] += [TIMESTAMP_TYPE_IDS.get(s[0], -1) for s in stamps]
            if with_headers:
                cols["headers"] += [
                    None if h is None else [{"key": k, "value": v} for k, v in h]
                    for h in (m.headers() for m in messages)
                ]
            if len(cols["offset"]) >= batch_records:
                yield flush()
        if cols["offset"]:
            yield flush()
    finally:
        consumer.close()


# ------------------------------------------------------------------------------ executor: write


def producer_config(params: Mapping[str, str]) -> dict[str, Any]:
    config: dict[str, Any] = {
        "enable.idempotence": True,  # acks=all, retries without duplicates or reordering
        "linger.ms": 5,
        "batch.size": 1_000_000,
        # Java's partitioner (murmur2 of the key), as Spark's Kafka sink (a Java producer) uses
        "partitioner": "murmur2_random",
        "log_level": 3,
    }
    config.update(params)
    config["delivery.report.only.error"] = True  # the callback runs for failures only
    return config


_producers: dict[tuple[Any, ...], tuple[Any, _DeliveryRouter]] = {}


class _DeliveryRouter:
    """The producer's delivery callback (failures only): records them for the task using the
    producer now."""

    def __init__(self) -> None:
        self.errors: list[Any] = []

    def __call__(self, error: Any, message: Any) -> None:
        if error is not None and len(self.errors) < 10:
            self.errors.append((message.topic(), message.partition(), error))


class TaskProducer:
    """The producer of one Spark write task: at least once.

    A task that fails after some of its records were acknowledged is retried by Spark with all
    its rows, so those records are written again (the idempotent producer removes the
    duplicates of its own retries, not those of a new task attempt). Exactly once:
    TransactionalTaskWrite, which produces through one of these with a transactional.id."""

    def __init__(
        self,
        params: Mapping[str, str],
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        transactional_id: str | None = None,
    ) -> None:
        self.timeout_s = timeout_s
        self.errors: list[Any] = []
        self.key = tuple(sorted(params.items()))
        self.reusable = transactional_id is None
        # a reused Python worker keeps its producer (connections, metadata) for the next task;
        # a transactional one is not kept: another worker may run its task id next and fence it
        cached = _producers.pop(self.key, None) if self.reusable else None
        if cached is None:
            router = _DeliveryRouter()
            config = producer_config(params)
            config["on_delivery"] = router
            if transactional_id is not None:
                config["transactional.id"] = transactional_id
            cached = (_kafka().Producer(config), router)
        self.producer, self.router = cached
        self.router.errors = self.errors
        self.checked_topics: set[str] = set()
        self.records = 0

    def _raise_if_failed(self) -> None:
        if self.errors:
            topic, partition, error = self.errors[0]
            where = topic if partition is None or partition < 0 else f"{topic}-{partition}"
            raise KafkaError.of(f"writing to {where} failed", error)

    def check_topic(self, topic: str) -> None:
        """Fail at once on a topic the broker neither has nor creates (rather than after
        librdkafka's metadata propagation wait)."""
        if topic in self.checked_topics:
            return
        ck = _kafka()
        metadata = self.producer.list_topics(topic, timeout=self.timeout_s)
        found = metadata.topics.get(topic)
        if found is not None and found.error is not None:
            if found.error.code() in (
                ck.KafkaError.UNKNOWN_TOPIC_OR_PART,
                ck.KafkaError._UNKNOWN_TOPIC,
            ):
                raise KafkaError.of(f"writing to topic {topic} failed", found.error)
        self.checked_topics.add(topic)

    def produce_batch(self, batch: Any, default_topic: str | None) -> None:
        names = batch.schema.names
        n = batch.num_rows
        values = batch.column(names.index("value")).to_pylist()
        keys = batch.column(names.index("key")).to_pylist() if "key" in names else None
        if default_topic is not None:
            topics = None
            self.check_topic(default_topic)
        else:
            topics = batch.column(names.index("topic")).to_pylist()
            for t in set(topics):
                if t is None:
                    raise KafkaError(
                        "writing failed: a row has a null topic and no topic option is set"
                    )
                self.check_topic(t)
        partitions = (
            batch.column(names.index("partition")).to_pylist() if "partition" in names else None
        )
        headers = batch.column(names.index("headers")).to_pylist() if "headers" in names else None
        produce = self.producer.produce
        for i in range(n):
            kwargs: dict[str, Any] = {}
            if keys is not None and keys[i] is not None:
                kwargs["key"] = keys[i]
            if partitions is not None and partitions[i] is not None:
                kwargs["partition"] = partitions[i]
            if headers is not None and headers[i]:
                kwargs["headers"] = [(h["key"], h["value"]) for h in headers[i]]
            topic = default_topic if topics is None else topics[i]
            while True:
                try:
                    produce(topic, values[i], **kwargs)
                    break
                except BufferError:  # local queue full: serve delivery reports, then retry
                    self.producer.poll(0.05)
                    self._raise_if_failed()
        self.records += n
        self.producer.poll(0)
        self._raise_if_failed()

    def commit(self) -> int:
        """Wait for every record's acknowledgement; the first delivery error fails the
        task."""
        deadline = time.monotonic() + max(self.timeout_s, 60.0)
        while self.producer.flush(1.0) > 0:
            self._raise_if_failed()
            if time.monotonic() > deadline:
                raise KafkaError(
                    f"writing failed: {len(self.producer)} records not acknowledged in time"
                )
        self._raise_if_failed()
        if self.reusable:
            _producers[self.key] = (self.producer, self.router)
        return self.records

    def abort(self) -> None:
        """Without transactions, what was acknowledged stays written. The producer is not
        reused."""
        self.producer.purge()
        self.producer.flush(0)


class TransactionalTaskWrite:
    """The write of one Spark task in one Kafka transaction (``deliveryGuarantee`` =
    ``exactly-once``), as Flink's exactly-once KafkaSink and Kafka Streams do it, within what
    a Python data source allows (a Kafka transaction cannot be handed from an executor to the
    driver, so each task commits its own).

    ``transactional_id`` is the same for every attempt of a task (the query or job, and the
    Spark partition id): ``init_transactions`` of a new attempt fences the attempt before it
    (a zombie's open transaction is aborted, its later commit fails with PRODUCER_FENCED).

    A task commits, in the same transaction as its records, the offset ``batch_id + 1`` of
    partition 0 of ``marker_topic`` for the consumer group named ``transactional_id``: an
    attempt that finds its batch committed there already (the task committed, then its stage
    or the query failed, and Spark runs it again) writes nothing. The records and the marker are
    committed together or not at all, so a read_committed reader sees each task's records once,
    provided a re-run task gets the same rows (what Spark's re-planned micro-batch of a
    deterministic query gives)."""

    def __init__(
        self,
        params: Mapping[str, str],
        transactional_id: str,
        marker_topic: str,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        ck = _kafka()
        self.timeout_s = max(timeout_s, 60.0)
        self.transactional_id = transactional_id
        self.marker = ck.TopicPartition(marker_topic, 0)
        self.task = TaskProducer(params, timeout_s=timeout_s, transactional_id=transactional_id)
        self.consumer = ck.Consumer(
            {
                "bootstrap.servers": params["bootstrap.servers"],
                **{k: v for k, v in params.items() if k.startswith(("security.", "sasl.", "ssl."))},
                "group.id": transactional_id,
                "enable.auto.commit": False,
                "isolation.level": "read_committed",  # the committed offset must be stable
                "log_level": 3,
            }
        )
        self.open = False

    def _call(self, what: str, call: Any) -> Any:
        ck = _kafka()
        try:
            return call()
        except ck.KafkaException as e:
            raise KafkaError.of(f"{what} ({self.transactional_id})", e.args[0]) from e

    def committed_batch(self) -> int | None:
        """Fences the attempts before this one, then the last batch id this task committed
        (None: none)."""
        producer = self.task.producer
        self._call("init_transactions", lambda: producer.init_transactions(self.timeout_s))
        found = self._call(
            "reading the committed batch",
            lambda: self.consumer.committed([self.marker], timeout=self.timeout_s),
        )
        offset = found[0].offset
        return offset - 1 if offset > 0 else None

    def begin(self) -> None:
        self._call("begin_transaction", self.task.producer.begin_transaction)
        self.open = True

    def produce_batch(self, batch: Any, default_topic: str | None) -> None:
        self.task.produce_batch(batch, default_topic)

    def commit(self, batch_id: int) -> int:
        """Every record acknowledged (the first delivery error fails the task), the batch
        marker added, the transaction committed."""
        ck = _kafka()
        producer = self.task.producer
        self.task.commit()  # every record acknowledged, or the first delivery error
        marker = ck.TopicPartition(self.marker.topic, 0, batch_id + 1)
        metadata = self.consumer.consumer_group_metadata()
        self._call(
            "send_offsets_to_transaction",
            lambda: producer.send_offsets_to_transaction([marker], metadata, self.timeout_s),
        )
        self._call("commit_transaction", lambda: producer.commit_transaction(self.timeout_s))
        self.open = False
        return self.task.records

    def abort(self) -> None:
        """Abort the open transaction (best effort: a fenced producer cannot, and its
        transaction is aborted by the attempt that fenced it or by the coordinator's timeout)."""
        ck = _kafka()
        if self.open:
            try:
                self.task.producer.abort_transaction(self.timeout_s)
            except ck.KafkaException:
                pass
            self.open = False

    def close(self) -> None:
        """The consumer closed; the producer dropped (a fenced one raises its fatal error on
        any call, flush included)."""
        self.consumer.close()
        self.task.producer.purge()
