"""kafkalite.testing's helpers retry what a loaded machine makes slow, without hiding real errors."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from kafkalite.client.errors import KafkaError, KafkaTimeoutError
from kafkalite.protocol.errors import ErrorCode
from kafkalite.testing import _ops


class FakeClient:
    """Creates the topic on the first CreateTopics; the first answer can be lost (a timeout)."""

    def __init__(self, existing: set[str], lose_first_answer: bool, calls: list[str]):
        self.existing = existing
        self.lose_first_answer = lose_first_answer
        self.calls = calls

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass

    async def create_topics(self, topics, timeout_ms):
        name = topics[0]["name"]
        self.calls.append(name)
        code = ErrorCode.TOPIC_ALREADY_EXISTS if name in self.existing else ErrorCode.NONE
        self.existing.add(name)
        if self.lose_first_answer and len(self.calls) == 1:
            raise KafkaTimeoutError("the answer did not come in time")
        return SimpleNamespace(topics=[SimpleNamespace(error_code=int(code), error_message=None)])


@pytest.fixture
def fake(monkeypatch):
    def install(existing: set[str], lose_first_answer: bool) -> list[str]:
        calls: list[str] = []
        monkeypatch.setattr(
            _ops, "_client", lambda bootstrap: FakeClient(existing, lose_first_answer, calls)
        )

        async def led(bootstrap, topics, timeout):
            return {}

        monkeypatch.setattr(_ops, "wait_for_leaders", led)
        monkeypatch.setattr(_ops, "RETRY_BACKOFF_S", 0.0)
        return calls

    return install


def test_a_retry_after_a_lost_answer_accepts_that_the_topic_exists(fake):
    calls = fake(existing=set(), lose_first_answer=True)
    assert asyncio.run(_ops.create_topic("x:1", "t", timeout=5)) == "t"
    assert calls == ["t", "t"]


def test_a_topic_that_existed_before_is_still_an_error(fake):
    calls = fake(existing={"t"}, lose_first_answer=False)
    with pytest.raises(KafkaError, match="TOPIC_ALREADY_EXISTS"):
        asyncio.run(_ops.create_topic("x:1", "t", timeout=5))
    assert calls == ["t"]


def test_a_setting_given_none_is_left_out(tmp_path):
    from kafkalite.testing import Broker

    broker = Broker({"schema.registry.listeners": None, "num.partitions": 3}, data_dir=tmp_path)
    settings = broker.settings()
    assert "schema.registry.listeners" not in settings
    assert settings["num.partitions"] == "3"
    assert Broker(data_dir=tmp_path).settings()["schema.registry.listeners"] == "http://127.0.0.1:0"
