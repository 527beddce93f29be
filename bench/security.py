"""What security costs: TLS and SASL_SSL throughput against plaintext, handshakes per second,
and the authorizer's cost per check with 10,000 ACLs.

    PYTHONPATH=. .venv/bin/python bench/security.py [--mib 64] [--seconds 3]

One `kafkalite serve` subprocess with four listeners (PLAINTEXT, SSL, SASL_SSL with
SCRAM-SHA-512, SASL_SSL with PLAIN), certificates made here by trustme. In the same run:

1. produce `--mib` MiB of 1 KiB records with confluent-kafka (acks=1, lz4 off, linger 5 ms) to
   a topic of its own over each listener, then consume them back; MB/s of each, and each
   secure listener as a share of plaintext (target: >= 70%);
2. for `--seconds`, open connections one after the other (kafkalite's own client: TCP, TLS
   handshake, ApiVersions, SaslHandshake + SaslAuthenticate) and count the completed ones per
   second, per listener;
3. in this process, an AclCache with 10,000 ACLs (literal and prefixed topics of 1,000
   principals) and the cost of one authorize() call (target: <= 5 us), for an allowed and a
   refused principal, and a quota record() for comparison.

A throttled producer's rate over 10 s is printed too (`quota.window.num` default 11, a 1 MB/s
producer_byte_rate on a client id): how close Kafka's own windowing keeps a greedy client to
its quota. Figures are printed as JSON, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import ssl
import sys
import tempfile
import time
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Consumer, Producer  # noqa: E402

from kafkalite.client.connection import KafkaConnection  # noqa: E402
from kafkalite.protocol.acl import AclOperation, ResourceType  # noqa: E402
from kafkalite.security.acl import (  # noqa: E402
    AclCache,
    AclEntry,
    PatternType,
    PermissionType,
    ResourcePattern,
)
from kafkalite.security.listeners import ClientSecurity  # noqa: E402
from kafkalite.security.quotas import QuotaManager, entity_of  # noqa: E402
from kafkalite.testing import (
    Broker,  # noqa: E402
    free_port,  # noqa: E402
)
from tests.security.support import (  # noqa: E402
    PLAIN_USERS,
    SCRAM_PASSWORD,
    SCRAM_USER,
    add_scram_user,
    make_pki,
    plain_jaas,
)

RECORD = b"x" * 1024


def start_broker(root: Path):
    pki = make_pki(root / "pki")
    port, ssl_port, scram_port, plain_port = (free_port() for _ in range(4))
    broker = Broker(
        data_dir=root / "broker",
        port=port,
        config={
            "listeners": (
                f"PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{ssl_port},"
                f"SASL_SSL://127.0.0.1:{scram_port},PLAINSSL://127.0.0.1:{plain_port}"
            ),
            "listener.security.protocol.map": (
                "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,PLAINSSL:SASL_SSL"
            ),
            "inter.broker.listener.name": "PLAINTEXT",
            "ssl.keystore.location": str(pki.server_file),
            "ssl.truststore.location": str(pki.ca_file),
            "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "listener.name.plainssl.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.plainssl.plain.sasl.jaas.config": plain_jaas(PLAIN_USERS),
            "sasl.enabled.mechanisms": "PLAIN",
            "log.segment.bytes": str(256 << 20),
        },
        subprocess=True,
        admin=False,
    )
    broker.start()
    asyncio.run(add_scram_user(broker.bootstrap, SCRAM_USER, SCRAM_PASSWORD))
    ca = {"ssl.ca.location": str(pki.ca_file)}
    confs = {
        "PLAINTEXT": {"bootstrap.servers": f"127.0.0.1:{port}"},
        "SSL": {"bootstrap.servers": f"127.0.0.1:{ssl_port}", "security.protocol": "SSL", **ca},
        "SASL_SSL/SCRAM-SHA-512": {
            "bootstrap.servers": f"127.0.0.1:{scram_port}",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": SCRAM_USER,
            "sasl.password": SCRAM_PASSWORD,
            **ca,
        },
        "SASL_SSL/PLAIN": {
            "bootstrap.servers": f"127.0.0.1:{plain_port}",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": PLAIN_USERS["alice"],
            **ca,
        },
    }
    ports = {
        "PLAINTEXT": port,
        "SSL": ssl_port,
        "SASL_SSL/SCRAM-SHA-512": scram_port,
        "SASL_SSL/PLAIN": plain_port,
    }
    return broker, pki, confs, ports


def throughput(conf: dict, topic: str, mib: int) -> dict:
    count = mib * 1024
    producer = Producer({**conf, "linger.ms": 5, "batch.size": 1 << 20, "acks": 1})
    started = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, RECORD)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    producer.flush(120)
    produce_s = time.perf_counter() - started
    consumer = Consumer(
        {
            **conf,
            "group.id": f"bench-{topic}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "fetch.max.bytes": 50 << 20,
        }
    )
    consumer.subscribe([topic])
    got = 0
    started = None
    deadline = time.monotonic() + 120
    while got < count and time.monotonic() < deadline:
        messages = consumer.consume(10000, 1.0)
        if messages and started is None:
            started = time.perf_counter()
        got += sum(1 for m in messages if m.error() is None)
    consume_s = time.perf_counter() - (started or time.perf_counter())
    consumer.close()
    return {
        "produce_MBps": round(mib * 1.048576 / produce_s, 1),
        "consume_MBps": round(mib * 1.048576 / consume_s, 1) if got >= count else None,
        "consumed": got,
    }


def security_of(name: str, pki) -> ClientSecurity | None:
    if name == "PLAINTEXT":
        return None
    context = ssl.create_default_context(cafile=str(pki.ca_file))
    if name == "SSL":
        return ClientSecurity("SSL", context)
    if name.endswith("SCRAM-SHA-512"):
        return ClientSecurity("SASL_SSL", context, "SCRAM-SHA-512", SCRAM_USER, SCRAM_PASSWORD)
    return ClientSecurity("SASL_SSL", context, "PLAIN", "alice", PLAIN_USERS["alice"])


async def handshakes(port: int, security: ClientSecurity | None, seconds: float) -> float:
    done = 0
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        conn = KafkaConnection("127.0.0.1", port, security=security)
        await conn.connect()
        await conn.close()
        done += 1
    return round(done / (time.perf_counter() - started), 1)


def authorizer_cost() -> dict:
    cache = AclCache(super_users=["User:admin"])
    for i in range(5000):
        cache.set(
            ResourcePattern(ResourceType.TOPIC, f"topic-{i}"),
            [AclEntry(f"User:u{i % 1000}", "*", AclOperation.READ, PermissionType.ALLOW)],
        )
        cache.set(
            ResourcePattern(ResourceType.TOPIC, f"team{i}-", PatternType.PREFIXED),
            [AclEntry(f"User:u{i % 1000}", "*", AclOperation.WRITE, PermissionType.ALLOW)],
        )
    n = 200_000
    allowed = timeit.timeit(
        lambda: cache.authorize(
            "User:u7", "10.0.0.1", AclOperation.READ, ResourceType.TOPIC, "topic-7"
        ),
        number=n,
    )
    prefixed = timeit.timeit(
        lambda: cache.authorize(
            "User:u7", "10.0.0.1", AclOperation.WRITE, ResourceType.TOPIC, "team7-orders-eu"
        ),
        number=n,
    )
    refused = timeit.timeit(
        lambda: cache.authorize(
            "User:u8", "10.0.0.1", AclOperation.READ, ResourceType.TOPIC, "topic-7"
        ),
        number=n,
    )
    quotas = QuotaManager()
    quotas.set_entity(entity_of(None, "c"), {"producer_byte_rate": "1e12"})
    quota = timeit.timeit(lambda: quotas.record("producer_byte_rate", "u", "c", 1000), number=n)
    return {
        "acls": len(cache),
        "authorize_literal_allowed_us": round(allowed / n * 1e6, 2),
        "authorize_prefixed_allowed_us": round(prefixed / n * 1e6, 2),
        "authorize_refused_us": round(refused / n * 1e6, 2),
        "quota_record_us": round(quota / n * 1e6, 2),
        "target_us": 5,
    }


def quota_check(broker, seconds: float = 10.0, quota: int = 1_000_000) -> dict:
    from tests.security.support import set_quota

    asyncio.run(set_quota(broker.bootstrap, "bench-throttled", quota))
    acked = []
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "client.id": "bench-throttled", "linger.ms": 5}
    )
    started = time.monotonic()

    def delivered(err, msg):
        if err is None:
            acked.append((time.monotonic() - started, len(msg.value())))

    warm_up = 12.0  # Kafka's default 11 one-second samples let a new client burst first
    while time.monotonic() - started < warm_up + seconds:
        try:
            producer.produce("quota-bench", RECORD, on_delivery=delivered)
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    producer.flush(0)
    measured = sum(size for at, size in acked if warm_up <= at < warm_up + seconds) / seconds
    asyncio.run(set_quota(broker.bootstrap, "bench-throttled", None))
    return {
        "quota_Bps": quota,
        "measured_Bps": round(measured),
        "ratio": round(measured / quota, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--skip-quota", action="store_true")
    args = parser.parse_args()
    out: dict = {"authorizer": authorizer_cost()}
    with tempfile.TemporaryDirectory(prefix="kafkalite-security-bench-") as tmp:
        broker, pki, confs, ports = start_broker(Path(tmp))
        try:
            results = {}
            for name, conf in confs.items():
                topic = "bench-" + name.replace("/", "-").lower()
                results[name] = throughput(conf, topic, args.mib)
            base = results["PLAINTEXT"]
            for r in results.values():
                r["produce_vs_plaintext"] = round(r["produce_MBps"] / base["produce_MBps"], 2)
                if r["consume_MBps"] and base["consume_MBps"]:
                    r["consume_vs_plaintext"] = round(r["consume_MBps"] / base["consume_MBps"], 2)
            out["throughput"] = results
            out["handshakes_per_s"] = {
                name: asyncio.run(handshakes(port, security_of(name, pki), args.seconds))
                for name, port in ports.items()
            }
            if not args.skip_quota:
                out["quota_10s"] = quota_check(broker)
        finally:
            broker.stop()
    out["cpu_count"] = os.cpu_count()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
