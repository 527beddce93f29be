"""Executor-side half of the Spark load job: the generated data set and the producer/consumer tasks.

Nothing here imports pyspark at module level, so the data-set functions are plain Python that the
driver, the tests and the Spark tasks share. Spark ships this file to the executors
(`SparkContext.addPyFile`); the job runs `run_task` in one *barrier* stage of
`producers + consumers` tasks, so all of them are scheduled together.

Data set (a pure function of `seq`, the record's unique sequence number in [0, records)):

    key index   k         = seq % keys
    key         b"key-%08d" % k
    partition   k % partitions          (set explicitly, so Kafka and the Redis peer agree)
    producer    k % producers           (one producer owns each key, so per-key order is that
                                         producer's send order)
    value       VALUE_HEADER + payload, exactly value_size bytes

    VALUE_HEADER = struct ">IBhqq": magic 0x6B4C4231 ("kLB1"), kind (0 data, 1 end marker),
                   producer task, seq (-1 for markers), send time (ns since the epoch)

Producer task p sends its records in increasing seq order, waits for every acknowledgement
(flush), then appends one end marker to every partition. A consumer task owns a contiguous range
of partitions (manual assignment, no group management) and stops when each of its partitions has
shown an end marker from every producer: a marker follows all of that producer's acknowledged
records in the partition, because it is sent after they were acknowledged. An idle timeout ends a
consumer that stops hearing anything (a producer died before its markers), and the task reports it.

Every task yields tagged tuples (see ACK_FIELDS, RECEIVED_FIELDS) and one ("task", json) row
with its own figures. Times are `time.time_ns()` on the task's host: end-to-end latency
(receive - send) assumes producer and consumer clocks agree, exact on `local[N]`.

Barriers: every task sets up (producer: client + topic metadata; consumer: assignment and a first
poll), then waits at barrier 1 so no record is sent before the consumers are ready. In sequential
mode the consumers also wait at barrier 2, which the producers reach after their markers: the
consume phase then reads a finished log at full speed (its latency figures measure the wait, not
the path).
"""

from __future__ import annotations

import json
import random
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

VALUE_HEADER = struct.Struct(">IBhqq")
MAGIC = 0x6B4C4231
KIND_DATA = 0
KIND_MARKER = 1
KEY_PREFIX = b"key-"
PAYLOAD_POOL = 4096

# Row layouts yielded by the tasks (after the tag).
ACK_FIELDS = ("producer", "seq", "partition", "offset", "send_ns", "ack_ns")
RECEIVED_FIELDS = (
    "consumer",
    "partition",
    "offset",
    "key_index",
    "seq",
    "producer",
    "send_ns",
    "recv_ns",
    "value_len",
)
TAG_ACK = "ack"
TAG_RECEIVED = "rcv"
TAG_TASK = "task"


@dataclass(frozen=True)
class LoadSpec:
    """Everything a task needs; pickled to the executors."""

    transport: str  # "kafka" or "redis"
    address: str  # kafka bootstrap servers, or redis host:port
    topic: str  # kafka topic, or redis stream prefix
    records: int
    value_size: int
    keys: int
    partitions: int
    producers: int
    consumers: int
    acks: str = "all"
    compression: str = "none"
    linger_ms: float = 5.0
    batch_size: int = 1_000_000
    idempotence: bool = True
    sequential: bool = False
    start_offsets: tuple[int, ...] = ()
    idle_timeout_s: float = 30.0
    seed: int = 1
    redis_pipeline: int = 500
    rate: float = 0.0  # records/s over all producers; 0 = as fast as they go
    run_id: str = "run"
    extra_producer_config: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if self.value_size < VALUE_HEADER.size:
            raise ValueError(f"value size must be at least {VALUE_HEADER.size} bytes")
        if self.keys < self.producers:
            raise ValueError("need at least one key per producer (keys >= producers)")
        if self.consumers > self.partitions:
            raise ValueError("need at least one partition per consumer (consumers <= partitions)")
        if self.transport not in ("kafka", "redis"):
            raise ValueError(f"unknown transport {self.transport!r}")

    @property
    def tasks(self) -> int:
        return self.producers + self.consumers

    def start_offset(self, partition: int) -> int:
        return self.start_offsets[partition] if self.start_offsets else 0


# ------------------------------------------------------------------------------ data set


def key_index_of(seq: int, keys: int) -> int:
    return seq % keys


def key_of(key_index: int) -> bytes:
    return b"key-%08d" % key_index


def key_index_from(key: bytes | None) -> int:
    """Inverse of key_of; -1 for a key this job did not write."""
    if not key or not key.startswith(KEY_PREFIX):
        return -1
    try:
        return int(key[len(KEY_PREFIX) :])
    except ValueError:
        return -1


def partition_of(seq: int, keys: int, partitions: int) -> int:
    return key_index_of(seq, keys) % partitions


def producer_of(seq: int, keys: int, producers: int) -> int:
    return key_index_of(seq, keys) % producers


def slice_of(producer: int, records: int, keys: int, producers: int) -> Iterator[int]:
    """The sequence numbers producer `producer` sends, in increasing order."""
    mine = [k for k in range(producer, keys, producers)]
    for base in range(0, records, keys):
        for k in mine:
            seq = base + k
            if seq >= records:
                break
            yield seq


def slice_size(producer: int, records: int, keys: int, producers: int) -> int:
    full, rest = divmod(records, keys)
    mine_full = len(range(producer, keys, producers))
    return full * mine_full + len(range(producer, rest, producers))


def partitions_of_consumer(consumer: int, partitions: int, consumers: int) -> range:
    """Contiguous partition range owned by consumer task `consumer`."""
    return range(consumer * partitions // consumers, (consumer + 1) * partitions // consumers)


def payload_pool(value_size: int, seed: int) -> bytes:
    """Random (so compression sees realistic data) bytes that payloads are sliced from."""
    rng = random.Random(seed)
    return rng.randbytes(value_size + PAYLOAD_POOL)


def make_value(
    pool: bytes, producer: int, seq: int, send_ns: int, value_size: int, kind: int = KIND_DATA
) -> bytes:
    start = (seq * 131) % PAYLOAD_POOL if seq >= 0 else 0
    pad = value_size - VALUE_HEADER.size
    return VALUE_HEADER.pack(MAGIC, kind, producer, seq, send_ns) + pool[start : start + pad]


def parse_value(value: bytes | None) -> tuple[int, int, int, int] | None:
    """(kind, producer, seq, send_ns), or None for a value this job did not write."""
    if value is None or len(value) < VALUE_HEADER.size:
        return None
    magic, kind, producer, seq, send_ns = VALUE_HEADER.unpack_from(value)
    if magic != MAGIC:
        return None
    return kind, producer, seq, send_ns


# ------------------------------------------------------------------------------ task entry


def run_task(spec: LoadSpec, index: int, _rows: Iterator[Any]) -> Iterator[tuple]:
    """mapPartitionsWithIndex body of the barrier stage: task `index` is a producer or consumer."""
    from pyspark import BarrierTaskContext

    context = BarrierTaskContext.get()
    return run_role(spec, index, context.barrier)


def run_role(spec: LoadSpec, index: int, barrier: Callable[[], Any]) -> Iterator[tuple]:
    """The task body without Spark (tests drive it with a threading.Barrier)."""
    if index < spec.producers:
        role: _Role = _PRODUCERS[spec.transport](spec, index)
    else:
        role = _CONSUMERS[spec.transport](spec, index - spec.producers)
    rows: list[tuple] = []
    try:
        role.setup()
    except Exception as e:  # reported as data; the barrier still has to be reached
        role.stats["errors"].append(f"setup: {e!r}")
    barrier()
    if spec.sequential and isinstance(role, _Consumer):
        barrier()
    if not role.stats["errors"]:
        try:
            role.run(rows)
        except Exception as e:
            role.stats["errors"].append(f"run: {e!r}")
    if spec.sequential and isinstance(role, _Producer):
        barrier()
    role.close()
    rows.append((TAG_TASK, json.dumps(role.stats)))
    return iter(rows)


class _Role:
    kind = ""

    def __init__(self, spec: LoadSpec, number: int) -> None:
        self.spec = spec
        self.number = number
        self.stats: dict[str, Any] = {
            "role": self.kind,
            "task": number,
            "transport": spec.transport,
            "records": 0,
            "bytes": 0,
            "errors": [],
            "start_ns": 0,
            "first_ns": 0,
            "last_ns": 0,
        }

    def setup(self) -> None:
        raise NotImplementedError

    def run(self, rows: list[tuple]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


class _Producer(_Role):
    kind = "producer"

    def __init__(self, spec: LoadSpec, number: int) -> None:
        super().__init__(spec, number)
        self.pool = payload_pool(spec.value_size, spec.seed)
        self.stats.update(attempted=0, failed=0, markers_sent=0)

    def note_ack(self, rows: list[tuple], seq: int, partition: int, offset: int, send_ns: int):
        now = time.time_ns()
        rows.append((TAG_ACK, self.number, seq, partition, offset, send_ns, now))
        self.stats["records"] += 1
        self.stats["bytes"] += self.spec.value_size + len(key_of(key_index_of(seq, self.spec.keys)))
        self.stats["last_ns"] = now

    def note_failure(self, error: object) -> None:
        self.stats["failed"] += 1
        if len(self.stats["errors"]) < 5:
            self.stats["errors"].append(str(error))


class Throttle:
    """Keeps a producer at `rate` records/s (0: no limit) by sleeping when ahead of schedule."""

    CHECK_EVERY = 50

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.started = time.monotonic()
        self.sent = 0

    def tick(self) -> None:
        self.sent += 1
        if self.rate <= 0 or self.sent % self.CHECK_EVERY:
            return
        ahead = self.sent / self.rate - (time.monotonic() - self.started)
        if ahead > 0:
            time.sleep(ahead)


class _Consumer(_Role):
    kind = "consumer"

    def __init__(self, spec: LoadSpec, number: int) -> None:
        super().__init__(spec, number)
        self.partitions = partitions_of_consumer(number, spec.partitions, spec.consumers)
        self.markers: dict[int, set[int]] = {p: set() for p in self.partitions}
        self.stats.update(partitions=list(self.partitions), foreign=0, timed_out=False)

    def done(self) -> bool:
        return all(len(seen) >= self.spec.producers for seen in self.markers.values())

    def note_received(
        self, rows: list[tuple], partition: int, offset: int, key: bytes | None, value, now: int
    ) -> None:
        parsed = parse_value(value)
        if parsed is None:
            self.stats["foreign"] += 1
            rows.append(
                (TAG_RECEIVED, self.number, partition, offset, key_index_from(key), -1, -1, 0,
                 now, len(value or b""))
            )  # fmt: skip
            return
        kind, producer, seq, send_ns = parsed
        if kind == KIND_MARKER:
            self.markers[partition].add(producer)
            return
        rows.append(
            (TAG_RECEIVED, self.number, partition, offset, key_index_from(key), seq, producer,
             send_ns, now, len(value))
        )  # fmt: skip
        self.stats["records"] += 1
        self.stats["bytes"] += len(value) + len(key or b"")
        if not self.stats["first_ns"]:
            self.stats["first_ns"] = now
        self.stats["last_ns"] = now

    def consume_until_markers(self, rows: list[tuple], poll: Callable[[], int]) -> None:
        """Call poll() (which returns how many records it saw) until done or idle too long."""
        self.stats["start_ns"] = time.time_ns()
        idle_since = time.monotonic()
        while not self.done():
            if poll():
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since > self.spec.idle_timeout_s:
                self.stats["timed_out"] = True
                missing = {p: sorted(set(range(self.spec.producers)) - seen)
                           for p, seen in self.markers.items() if len(seen) < self.spec.producers}  # fmt: skip
                self.stats["errors"].append(
                    f"idle for {self.spec.idle_timeout_s}s without end markers from "
                    f"producers {missing} (partition: producers)"
                )
                return


# ------------------------------------------------------------------------------ kafka


class KafkaProducerTask(_Producer):
    """confluent-kafka producer over this task's slice; acks recorded by the delivery callback."""

    def producer_config(self) -> dict[str, Any]:
        spec = self.spec
        config: dict[str, Any] = {
            "bootstrap.servers": spec.address,
            "client.id": f"spark-load-{spec.run_id}-p{self.number}",
            "acks": spec.acks,
            "compression.type": spec.compression,
            "linger.ms": spec.linger_ms,
            "batch.size": spec.batch_size,
            "enable.idempotence": spec.idempotence,
            "queue.buffering.max.messages": 200_000,
            "message.timeout.ms": 60_000,
            "log_level": 3,  # errors only: the task reports what went wrong in its figures
        }
        config.update(dict(spec.extra_producer_config))
        return config

    def setup(self) -> None:
        from confluent_kafka import Producer

        self.producer = Producer(self.producer_config())
        metadata = self.producer.list_topics(self.spec.topic, timeout=10)
        topic = metadata.topics.get(self.spec.topic)
        if topic is None or topic.error is not None:
            raise RuntimeError(f"topic {self.spec.topic} unavailable: {topic and topic.error}")

    def run(self, rows: list[tuple]) -> None:
        from confluent_kafka import KafkaError

        spec = self.spec
        producer = self.producer
        stats = self.stats
        header = VALUE_HEADER

        def on_delivery(err: KafkaError | None, msg: Any) -> None:
            value = msg.value()
            _, _, _, seq, send_ns = header.unpack_from(value)
            if err is not None:
                self.note_failure(err)
                return
            if seq >= 0:
                self.note_ack(rows, seq, msg.partition(), msg.offset(), send_ns)

        stats["start_ns"] = stats["first_ns"] = time.time_ns()
        pool, size, keys, partitions = self.pool, spec.value_size, spec.keys, spec.partitions
        sent = 0
        throttle = Throttle(spec.rate / spec.producers)
        for seq in slice_of(self.number, spec.records, keys, spec.producers):
            throttle.tick()
            k = seq % keys
            value = make_value(pool, self.number, seq, time.time_ns(), size)
            while True:
                try:
                    producer.produce(
                        spec.topic, value, key_of(k), partition=k % partitions,
                        on_delivery=on_delivery,
                    )  # fmt: skip
                    break
                except BufferError:
                    producer.poll(0.01)
            sent += 1
            if sent % 500 == 0:
                producer.poll(0)
        stats["attempted"] = sent
        self._flush()
        for partition in range(partitions):
            marker = make_value(pool, self.number, -1, time.time_ns(), size, KIND_MARKER)
            producer.produce(spec.topic, marker, None, partition=partition, on_delivery=on_delivery)
        self._flush()
        stats["markers_sent"] = partitions

    def _flush(self) -> None:
        remaining = self.producer.flush(self.spec.idle_timeout_s * 2)
        if remaining:
            raise RuntimeError(f"{remaining} records still unacknowledged after flush")


class KafkaConsumerTask(_Consumer):
    """confluent-kafka consumer with manual assignment of this task's partition range."""

    def setup(self) -> None:
        from confluent_kafka import Consumer, TopicPartition

        spec = self.spec
        self.consumer = Consumer(
            {
                "bootstrap.servers": spec.address,
                "client.id": f"spark-load-{spec.run_id}-c{self.number}",
                "group.id": f"spark-load-{spec.run_id}",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "fetch.wait.max.ms": 50,
                "enable.partition.eof": False,
                "log_level": 3,
            }
        )
        self.consumer.assign(
            [TopicPartition(spec.topic, p, spec.start_offset(p)) for p in self.partitions]
        )
        self.consumer.list_topics(spec.topic, timeout=10)

    def run(self, rows: list[tuple]) -> None:
        consumer = self.consumer

        def poll() -> int:
            messages = consumer.consume(1000, 0.1)
            now = time.time_ns()
            for m in messages:
                if m.error() is not None:
                    if len(self.stats["errors"]) < 5:
                        self.stats["errors"].append(str(m.error()))
                    continue
                self.note_received(rows, m.partition(), m.offset(), m.key(), m.value(), now)
            return len(messages)

        self.consume_until_markers(rows, poll)

    def close(self) -> None:
        consumer = getattr(self, "consumer", None)
        if consumer is not None:
            consumer.close()


# ------------------------------------------------------------------------------ redis streams


def stream_name(topic: str, partition: int) -> str:
    return f"{topic}:{partition}"


class RedisProducerTask(_Producer):
    """XADD through pipelines of up to `redis_pipeline` entries, sent when full or when the oldest
    entry is linger_ms old (as librdkafka batches); a pipeline's reply acknowledges it.

    Redis stream ids are not offsets, so acks carry offset -1 (the consumer numbers entries)."""

    def setup(self) -> None:
        import redis

        host, _, port = self.spec.address.rpartition(":")
        self.client = redis.Redis(host=host, port=int(port), socket_timeout=30)
        self.client.ping()

    def run(self, rows: list[tuple]) -> None:
        spec = self.spec
        stats = self.stats
        pool, size, keys, partitions = self.pool, spec.value_size, spec.keys, spec.partitions
        streams = [stream_name(spec.topic, p) for p in range(partitions)]
        pipe = self.client.pipeline(transaction=False)
        pending: list[tuple[int, int, int]] = []
        stats["start_ns"] = stats["first_ns"] = time.time_ns()
        throttle = Throttle(spec.rate / spec.producers)
        linger_ns = int(spec.linger_ms * 1e6)

        def execute() -> None:
            replies = pipe.execute(raise_on_error=False)
            for (seq, partition, send_ns), reply in zip(pending, replies, strict=True):
                if isinstance(reply, Exception):
                    self.note_failure(reply)
                else:
                    self.note_ack(rows, seq, partition, -1, send_ns)
            pending.clear()

        for seq in slice_of(self.number, spec.records, keys, spec.producers):
            throttle.tick()
            k = seq % keys
            send_ns = time.time_ns()
            partition = k % partitions
            pipe.xadd(streams[partition], {b"k": key_of(k), b"v": make_value(pool, self.number, seq, send_ns, size)})  # fmt: skip
            pending.append((seq, partition, send_ns))
            stats["attempted"] += 1
            # Like librdkafka's batch.num.messages / linger.ms: send when full or old enough.
            if len(pending) >= spec.redis_pipeline or send_ns - pending[0][2] >= linger_ns:
                execute()
        if pending:
            execute()
        for stream in streams:
            marker = make_value(pool, self.number, -1, time.time_ns(), size, KIND_MARKER)
            self.client.xadd(stream, {b"k": b"", b"v": marker})
        stats["markers_sent"] = partitions

    def close(self) -> None:
        client = getattr(self, "client", None)
        if client is not None:
            client.close()


class RedisConsumerTask(_Consumer):
    """XREAD BLOCK over this task's streams; offset = the entry's position in its stream."""

    def setup(self) -> None:
        import redis

        host, _, port = self.spec.address.rpartition(":")
        self.client = redis.Redis(host=host, port=int(port), socket_timeout=30)
        self.client.ping()
        self.positions = {stream_name(self.spec.topic, p): b"0-0" for p in self.partitions}
        self.next_offset = {p: 0 for p in self.partitions}
        self.partition_of_stream = {stream_name(self.spec.topic, p): p for p in self.partitions}

    def run(self, rows: list[tuple]) -> None:
        client = self.client

        def poll() -> int:
            streams = client.xread(self.positions, count=1000, block=100)
            now = time.time_ns()
            seen = 0
            for stream, entries in streams or ():
                name = stream.decode() if isinstance(stream, bytes) else stream
                partition = self.partition_of_stream[name]
                for entry_id, fields in entries:
                    offset = self.next_offset[partition]
                    self.next_offset[partition] = offset + 1
                    key = fields.get(b"k") or None
                    self.note_received(rows, partition, offset, key, fields.get(b"v"), now)
                    self.positions[name] = entry_id
                    seen += 1
            return seen

        self.consume_until_markers(rows, poll)

    def close(self) -> None:
        client = getattr(self, "client", None)
        if client is not None:
            client.close()


_PRODUCERS: dict[str, type[_Producer]] = {"kafka": KafkaProducerTask, "redis": RedisProducerTask}
_CONSUMERS: dict[str, type[_Consumer]] = {"kafka": KafkaConsumerTask, "redis": RedisConsumerTask}


def is_tag(tag: str, row: tuple) -> bool:
    return row[0] == tag


def untagged(row: tuple) -> tuple:
    return row[1:]


def spec_dict(spec: LoadSpec) -> dict[str, Any]:
    out = asdict(spec)
    out["start_offsets"] = list(spec.start_offsets)
    out["extra_producer_config"] = dict(spec.extra_producer_config)
    return out
