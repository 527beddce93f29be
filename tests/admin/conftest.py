"""A broker subprocess with its admin API on a free port, shared by the tests of a module, and
a tiny synchronous HTTP client for it (the tests cross-check what the API says with what Kafka
clients see)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

import pytest

from kafkalite.testing import Broker, free_port
from tests.admin.support import wait_for


@dataclass
class Answer:
    status: int
    body: Any
    content_type: str


class AdminClient:
    def __init__(self, url: str) -> None:
        self.url = url

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> Answer:
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        request = urllib.request.Request(self.url + path, method=method, data=data)
        for name, value in (headers or {}).items():
            request.add_header(name, value)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status, payload, ctype = (
                    response.status,
                    response.read(),
                    response.headers.get("Content-Type", ""),
                )
        except urllib.error.HTTPError as e:
            status, payload, ctype = e.code, e.read(), e.headers.get("Content-Type", "")
        except urllib.error.URLError as e:  # not listening (yet)
            return Answer(0, str(e.reason), "")
        if ctype.startswith("application/json"):
            return Answer(status, json.loads(payload), ctype)
        return Answer(status, payload.decode(), ctype)

    def get(self, path: str) -> Answer:
        return self.call("GET", path)

    def post(self, path: str, body: Any = None) -> Answer:
        return self.call("POST", path, body)

    def wait_for(self, predicate, what: str, timeout: float = 20.0) -> Any:
        """Poll `predicate()` until it returns a truthy value (a deadline, not a sleep)."""
        return wait_for(predicate, what, timeout)


def admin_broker_process(data_dir, **config: str):
    """A subprocess broker with its admin API on a free port and one partition per new topic
    (`config` adds or overrides settings), stopped, or killed if it will not stop, at the end."""
    b = Broker(
        data_dir=data_dir,
        config={
            "admin.listener": f"http://127.0.0.1:{free_port()}",
            "num.partitions": "1",
            **{key.replace("_", "."): value for key, value in config.items()},
        },
        subprocess=True,
    )
    b.start()
    yield b
    if b.running:
        try:
            b.stop()
        except TimeoutError:
            b.kill()


@pytest.fixture(scope="module")
def admin_broker(tmp_path_factory):
    # Kafka's 50 offsets partitions (kafkalite.testing makes 1): the fuzzing's stateful
    # sequences depend on the topics listed, and were settled with these
    yield from admin_broker_process(
        tmp_path_factory.mktemp("admin-broker"), offsets_topic_num_partitions="50"
    )


@pytest.fixture(scope="module")
def admin(admin_broker) -> AdminClient:
    client = AdminClient(admin_broker.admin_url)
    client.wait_for(lambda: client.get("/ready").status == 200, "the admin API to be ready")
    # the Schema Registry's store (`_schemas`, created at its first read) exists before a test
    # starts, as a broker in use has it
    client.wait_for(lambda: client.get("/schemas").status == 200, "the Schema Registry's store")
    return client


def produce(bootstrap: str, topic: str, count: int, partition: int = 0) -> None:
    """Produce `count` records to one partition with confluent-kafka; every one acknowledged."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    delivered: list[object] = []
    for i in range(count):
        producer.produce(
            topic,
            value=f"v{i}".encode(),
            partition=partition,
            on_delivery=lambda err, msg: delivered.append(err),
        )
    assert producer.flush(30) == 0
    assert delivered == [None] * count


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """One headless chromium for a test module (tests/admin/browser.py)."""
    from tests.admin.browser import start_browser

    driver = start_browser(tmp_path_factory.mktemp("chromium-profile"))
    yield driver
    driver.quit()
