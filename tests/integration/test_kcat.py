"""kcat (Debian's /usr/bin/kcat, librdkafka) against kafkalite.

kcat has no admin commands: the topic is created by producing to it (auto.create.topics.enable,
Kafka's default; num.partitions=4 for this broker) and described with `-L`. kcat sets one header
per invocation (-H), so each (codec, partition) run carries `codec=<codec>` and every record's
sequence number is in its key.
"""

import json
import shutil
import subprocess
import time

import pytest

from kafkalite.testing import Broker
from tests.integration.common import (
    CODECS,
    MESSAGES,
    PARTITIONS,
    Received,
    check_consumed,
    messages,
)

KCAT = shutil.which("kcat") or "/usr/bin/kcat"


def kcat(*args, input=None, timeout=60):
    try:
        return subprocess.run(
            [KCAT, *args], input=input, capture_output=True, timeout=timeout, check=True
        )
    except FileNotFoundError:
        raise AssertionError("kcat is missing: apt-get install kcat") from None


@pytest.fixture(scope="module")
def kcat_broker(tmp_path_factory):
    with Broker(
        {"num.partitions": PARTITIONS},
        subprocess=True,
        data_dir=tmp_path_factory.mktemp("kcat-broker"),
        admin=False,
    ) as broker:
        yield broker


def produce(broker, topic, batch, codec, partition):
    lines = b"".join(s.key + b"\t" + s.value + b"\n" for s in batch)
    kcat(
        "-b",
        broker.bootstrap_servers,
        "-P",
        "-t",
        topic,
        "-p",
        str(partition),
        "-K",
        "\t",
        "-z",
        codec,
        "-H",
        f"codec={codec}",
        "-X",
        "enable.idempotence=true",
        input=lines,
    )


def test_produce_consume_and_offsets_by_time(kcat_broker):
    topic = "kcat-data"
    sent = []
    per_codec = MESSAGES // len(CODECS)
    boundary_ms = None
    for n, codec in enumerate(CODECS):
        batch = messages(codec, per_codec, start=n * per_codec)
        for p in range(PARTITIONS):
            produce(kcat_broker, topic, [s for s in batch if s.partition == p], codec, p)
        sent += batch
        if n == 0:
            # every later record is created after this millisecond
            first = time.time_ns() // 1_000_000 + 2
            while time.time_ns() // 1_000_000 < first:
                pass
            boundary_ms = first

    received = []
    for p in range(PARTITIONS):
        out = kcat(
            "-b",
            kcat_broker.bootstrap_servers,
            "-C",
            "-t",
            topic,
            "-p",
            str(p),
            "-o",
            "beginning",
            "-e",
            "-q",
            "-f",
            "%o\\t%k\\t%h\\t%s\\n",
        ).stdout
        for line in out.splitlines():
            offset, key, headers, value = line.split(b"\t", 3)
            name, _, codec = headers.partition(b"=")
            received.append(Received(p, int(offset), key, value, ((name.decode(), codec),)))
    # kcat cannot set per-record headers: expect the per-run codec header instead
    sent_with_codec_header = [
        type(s)(
            s.seq, s.partition, s.key, s.value, (("codec", s.value.split(b"-")[0]),), s.timestamp
        )
        for s in sent
    ]
    check_consumed(sent_with_codec_header, received, check_timestamps=False)

    per_partition = per_codec // PARTITIONS
    for p in range(PARTITIONS):
        out = kcat(
            "-b", kcat_broker.bootstrap_servers, "-Q", "-t", f"{topic}:{p}:{boundary_ms}"
        ).stdout
        assert (
            f"[{p}]  offset {per_partition}".encode() in out.replace(b"\t", b" ")
            or out.split()[-1] == str(per_partition).encode()
        ), out


def test_metadata_listing(kcat_broker):
    produce(kcat_broker, "kcat-meta", messages("gzip", 4), "gzip", 0)
    meta = json.loads(kcat("-b", kcat_broker.bootstrap_servers, "-L", "-J").stdout)
    assert [b["id"] for b in meta["brokers"]] == [0]
    (topic,) = [t for t in meta["topics"] if t["topic"] == "kcat-meta"]
    assert len(topic["partitions"]) == PARTITIONS
    assert all(p["leader"] == 0 and p["isrs"] == [{"id": 0}] for p in topic["partitions"])
