"""Capture raw request frames from real Kafka clients, as test data for the codec.

Run by hand (not collected by pytest):

    .venv/bin/python tests/protocol/capture_frames.py

A fake broker on a loopback port answers just enough for each client to get going: ApiVersions
(our own encoder, with every API we can speak), Metadata (one broker, itself, leading every
requested topic), InitProducerId, Produce (offset 0), ListOffsets (0) and Fetch (no records).
Every request frame it receives (size prefix included) is written to
``tests/protocol/frames/<client>-<api>-v<version>.bin`` (first frame per client/api/version).
Clients: confluent-kafka (librdkafka) producer and consumer, kafka-python producer and consumer,
aiokafka producer and consumer, and kcat when installed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import shutil
import struct
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

from kafkalite.client.messages import build_message
from kafkalite.protocol.api import (
    DEFAULT_ENABLED_KEYS,
    GROUP_KEYS,
    ApiKey,
    response_class,
    supported_versions,
)
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.frames import (
    RequestHeader,
    api_versions_fallback,
    api_versions_response,
    decode_request,
    encode_response,
    is_api_versions_above,
    parse_request_header,
)

OUT = Path(__file__).resolve().parent / "frames"
TOPIC = "capture"
VERSIONS = supported_versions(DEFAULT_ENABLED_KEYS | GROUP_KEYS)


def build(cls: type, **values: Any) -> Any:
    """An instance of a kio dataclass from the values it has fields for; required fields not
    given get a neutral value (0, empty, None)."""
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in values:
            kwargs[f.name] = values[f.name]
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            kwargs[f.name] = neutral(f)
    return cls(**kwargs)


def neutral(f: dataclasses.Field) -> Any:
    kafka_type = f.metadata.get("kafka_type")
    annotation = str(f.type)
    if annotation.startswith("tuple"):
        return ()
    if kafka_type == "error_code":
        return ErrorCode.NONE
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(0)
    if kafka_type in ("int8", "int16", "int32", "int64", "uint16", "float64"):
        return 0
    if kafka_type == "bool":
        return False
    if kafka_type == "uuid":
        return None
    if kafka_type in ("string", "bytes", "records"):
        return None if "None" in annotation else ""
    raise TypeError(f"no neutral value for {f.name}: {annotation}")


def nested(response_cls: type, name: str) -> type:
    return getattr(sys.modules[response_cls.__module__], name)


class FakeBroker:
    def __init__(self, label: str) -> None:
        self.label = label
        self.port = 0
        self.seen: set[tuple[int, int]] = set()
        self.server: asyncio.Server | None = None

    async def shutdown(self) -> None:
        if self.server is not None:
            self.server.close()
        current = asyncio.current_task()
        tasks = [t for t in asyncio.all_tasks() if t is not current]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def answer(self, header: RequestHeader, request: Any) -> bytes | None:
        key, version = header.api_key, header.api_version
        cls = response_class(key, version)
        if key == ApiKey.API_VERSIONS:
            return encode_response(header, api_versions_response(version, VERSIONS))
        if key == ApiKey.METADATA:
            broker = build(
                nested(cls, "MetadataResponseBroker"), node_id=0, host="127.0.0.1", port=self.port
            )
            names = [t.name for t in (request.topics or ())] or [TOPIC]
            partition_cls = nested(cls, "MetadataResponsePartition")
            topics = tuple(
                build(
                    nested(cls, "MetadataResponseTopic"),
                    name=name,
                    topic_id=uuid.UUID(int=0),
                    partitions=(
                        build(
                            partition_cls,
                            partition_index=0,
                            leader_id=0,
                            leader_epoch=0,
                            replica_nodes=(0,),
                            isr_nodes=(0,),
                        ),
                    ),
                )
                for name in names
            )
            return encode_response(
                header,
                build(cls, brokers=(broker,), cluster_id="capture", controller_id=0, topics=topics),
            )
        if key == ApiKey.INIT_PRODUCER_ID:
            return encode_response(header, build(cls, producer_id=1000, producer_epoch=0))
        if key == ApiKey.PRODUCE:
            if request.acks == 0:
                return None
            part_cls = nested(cls, "PartitionProduceResponse")
            topic_cls = nested(cls, "TopicProduceResponse")
            responses = tuple(
                build(
                    topic_cls,
                    name=t.name,
                    partition_responses=tuple(
                        build(part_cls, index=p.index, base_offset=0) for p in t.partition_data
                    ),
                )
                for t in request.topic_data
            )
            return encode_response(header, build(cls, responses=responses))
        if key == ApiKey.LIST_OFFSETS:
            part_cls = nested(cls, "ListOffsetsPartitionResponse")
            topic_cls = nested(cls, "ListOffsetsTopicResponse")
            topics = tuple(
                build(
                    topic_cls,
                    name=t.name,
                    partitions=tuple(
                        build(
                            part_cls,
                            partition_index=p.partition_index,
                            timestamp=-1,
                            offset=0,
                            leader_epoch=0,
                        )
                        for p in t.partitions
                    ),
                )
                for t in request.topics
            )
            return encode_response(header, build(cls, topics=topics))
        if key == ApiKey.FETCH:
            part_cls = nested(cls, "PartitionData")
            topic_cls = nested(cls, "FetchableTopicResponse")
            responses = tuple(
                build(
                    topic_cls,
                    topic=t.topic,
                    partitions=tuple(
                        build(
                            part_cls,
                            partition_index=p.partition,
                            high_watermark=0,
                            last_stable_offset=0,
                            preferred_read_replica=-1,
                            records=b"",
                        )
                        for p in t.partitions
                    ),
                )
                for t in request.topics
            )
            return encode_response(header, build(cls, responses=responses))
        return self.answer_group(header, request, cls)

    def answer_group(self, header: RequestHeader, request: Any, cls: type) -> bytes | None:
        """Consumer-group APIs: one member, which leads and gets what it assigns itself.
        Values for fields a version lacks are dropped by build_message."""
        key = header.api_key
        if key == ApiKey.FIND_COORDINATOR:
            keys = list(getattr(request, "coordinator_keys", ()) or [getattr(request, "key", "")])
            response = build_message(
                cls,
                node_id=0,
                host="127.0.0.1",
                port=self.port,
                coordinators=[
                    {"key": k, "node_id": 0, "host": "127.0.0.1", "port": self.port} for k in keys
                ],
            )
        elif key == ApiKey.JOIN_GROUP:
            member_id = request.member_id or f"{self.label}-member-1"
            protocol = request.protocols[0]
            response = build_message(
                cls,
                generation_id=1,
                protocol_type="consumer",
                protocol_name=protocol.name,
                leader=member_id,
                member_id=member_id,
                members=[{"member_id": member_id, "metadata": protocol.metadata}],
            )
        elif key == ApiKey.SYNC_GROUP:
            mine = [a.assignment for a in request.assignments if a.member_id == request.member_id]
            response = build_message(
                cls,
                protocol_type="consumer",
                protocol_name=getattr(request, "protocol_name", None),
                assignment=mine[0] if mine else b"",
            )
        elif key == ApiKey.HEARTBEAT:
            response = build_message(cls)
        elif key == ApiKey.LEAVE_GROUP:
            members = getattr(request, "members", ())
            response = build_message(
                cls,
                members=[
                    {"member_id": m.member_id, "group_instance_id": m.group_instance_id}
                    for m in members
                ],
            )
        elif key == ApiKey.OFFSET_COMMIT:
            response = build_message(
                cls,
                topics=[
                    {
                        "name": t.name,
                        "partitions": [
                            {"partition_index": p.partition_index} for p in t.partitions
                        ],
                    }
                    for t in request.topics
                ],
            )
        elif key == ApiKey.OFFSET_FETCH:
            groups = getattr(request, "groups", None) or [request]

            def topics_of(group: Any) -> list[dict[str, Any]]:
                return [
                    {
                        "name": t.name,
                        "partitions": [
                            {
                                "partition_index": i,
                                "committed_offset": -1,
                                "committed_leader_epoch": -1,
                                "metadata": "",
                            }
                            for i in t.partition_indexes
                        ],
                    }
                    for t in (group.topics or ())
                ]

            response = build_message(
                cls,
                topics=topics_of(groups[0]),
                groups=[{"group_id": g.group_id, "topics": topics_of(g)} for g in groups],
            )
        else:
            return None
        return encode_response(header, response)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                size_bytes = await reader.readexactly(4)
                (size,) = struct.unpack(">i", size_bytes)
                payload = await reader.readexactly(size)
                header, offset = parse_request_header(payload)
                name = ApiKey(header.api_key).name.lower()
                if (header.api_key, header.api_version) not in self.seen:
                    self.seen.add((header.api_key, header.api_version))
                    path = OUT / f"{self.label}-{name}-v{header.api_version}.bin"
                    path.write_bytes(size_bytes + payload)
                    print(f"  {path.name} ({size} bytes, client_id={header.client_id!r})")
                if is_api_versions_above(header):
                    writer.write(api_versions_fallback(header.correlation_id, VERSIONS))
                    await writer.drain()
                    continue
                request = decode_request(header, payload, offset)
                reply = self.answer(header, request)
                if reply is not None:
                    writer.write(reply)
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()


def serve_in_thread(broker: FakeBroker) -> tuple[asyncio.AbstractEventLoop, threading.Thread]:
    loop = asyncio.new_event_loop()
    started = threading.Event()

    async def start() -> None:
        server = await asyncio.start_server(broker.handle, "127.0.0.1", 0)
        broker.server = server
        broker.port = server.sockets[0].getsockname()[1]
        started.set()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    started.wait(5)
    return loop, thread


def run_confluent(port: int) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer(
        {"bootstrap.servers": f"127.0.0.1:{port}", "client.id": "librdkafka", "linger.ms": 0}
    )
    producer.produce(TOPIC, key=b"key", value=b"value from librdkafka", headers={"h": b"1"})
    producer.flush(10)
    consumer = Consumer(
        {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "client.id": "librdkafka",
            "group.id": "capture",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    for _ in range(5):
        consumer.poll(0.5)
    consumer.close()
    group = Consumer(
        {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "client.id": "librdkafka",
            "group.id": "capture-group",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
        }
    )
    group.subscribe([TOPIC])
    for _ in range(8):
        group.poll(0.5)
        if group.assignment():
            break
    group.commit(offsets=[TopicPartition(TOPIC, 0, 1)], asynchronous=False)
    group.close()


def run_kafka_python(port: int) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{port}", client_id="kafka-python")
    producer.send(TOPIC, key=b"key", value=b"value from kafka-python").get(timeout=10)
    producer.close(timeout=5)
    consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", client_id="kafka-python")
    consumer.assign([TopicPartition(TOPIC, 0)])
    consumer.seek(TopicPartition(TOPIC, 0), 0)
    consumer.poll(timeout_ms=1500)
    consumer.close()
    from kafka.structs import OffsetAndMetadata

    group = KafkaConsumer(
        TOPIC,
        bootstrap_servers=f"127.0.0.1:{port}",
        client_id="kafka-python",
        group_id="capture-group",
        enable_auto_commit=False,
    )
    for _ in range(5):
        group.poll(timeout_ms=500)
        if group.assignment():
            break
    group.commit({TopicPartition(TOPIC, 0): OffsetAndMetadata(1, "", -1)})
    group.close()


def run_aiokafka(port: int) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition

    async def go() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=f"127.0.0.1:{port}", client_id="aiokafka")
        await producer.start()
        try:
            await asyncio.wait_for(
                producer.send_and_wait(TOPIC, key=b"key", value=b"value from aiokafka"), 10
            )
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", client_id="aiokafka")
        await consumer.start()
        try:
            consumer.assign([TopicPartition(TOPIC, 0)])
            consumer.seek(TopicPartition(TOPIC, 0), 0)
            await consumer.getmany(timeout_ms=1500)
        finally:
            await consumer.stop()
        group = AIOKafkaConsumer(
            TOPIC,
            bootstrap_servers=f"127.0.0.1:{port}",
            client_id="aiokafka",
            group_id="capture-group",
            enable_auto_commit=False,
        )
        await group.start()
        try:
            for _ in range(5):
                await group.getmany(timeout_ms=500)
                if group.assignment():
                    break
            await group.commit({TopicPartition(TOPIC, 0): 1})
        finally:
            await group.stop()

    asyncio.run(go())


def run_kcat(port: int) -> None:
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        print("  kcat not installed; skipped (apt-get install kcat)")
        return
    subprocess.run(
        [kcat, "-b", f"127.0.0.1:{port}", "-P", "-t", TOPIC, "-X", "client.id=kcat"],
        input=b"value from kcat\n",
        timeout=20,
        check=False,
    )


def main() -> None:
    OUT.mkdir(exist_ok=True)
    for label, run in [
        ("librdkafka", run_confluent),
        ("kafka-python", run_kafka_python),
        ("aiokafka", run_aiokafka),
        ("kcat", run_kcat),
    ]:
        print(label)
        broker = FakeBroker(label)
        loop, _thread = serve_in_thread(broker)
        try:
            run(broker.port)
        except Exception as e:  # a client giving up still leaves the frames it sent
            print(f"  {label} stopped: {e!r}")
        asyncio.run_coroutine_threadsafe(broker.shutdown(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)


if __name__ == "__main__":
    main()
