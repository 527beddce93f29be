"""The admin handlers' shared waits, and what DeleteTopics asks the store."""

import datetime
from types import SimpleNamespace

from kafkalite.apis import admin_common
from kafkalite.apis.admin_common import wait_for_all, wait_until
from kafkalite.broker.metadata_cache import MetadataCache
from kafkalite.config import BrokerConfig
from kafkalite.coord.embedded import EmbeddedStore
from kafkalite.protocol.api import ApiKey, request_class
from kafkalite.protocol.errors import ErrorCode
from kafkalite.zk import data as paths


def after(calls: int):
    """A condition that holds from its ``calls``-th poll on; counts its polls."""
    polls = []

    def condition() -> bool:
        polls.append(None)
        return len(polls) >= calls

    condition.polls = polls
    return condition


async def test_one_deadline_for_every_condition_of_a_request(monkeypatch):
    """Each condition is polled until it holds (then no more); those that never do are
    reported False once the request's single deadline passes, not after one timeout each.
    The clock is the test's: only the waits between polls move it, so a loaded machine cannot
    make a poll late."""
    now = [0.0]

    async def sleep(seconds: float) -> None:
        now[0] += seconds

    monkeypatch.setattr(admin_common, "time", SimpleNamespace(monotonic=lambda: now[0]))
    monkeypatch.setattr(admin_common, "asyncio", SimpleNamespace(sleep=sleep))
    quick, slow, never = after(1), after(3), after(10**9)
    assert await wait_for_all([quick, slow, never], timeout_ms=50) == [True, True, False]
    assert len(quick.polls) == 1 and len(slow.polls) == 3
    assert await wait_for_all([after(2), after(4)], timeout_ms=60_000) == [True, True]
    assert await wait_until(after(2), timeout_ms=60_000) is True
    assert await wait_for_all([], timeout_ms=0) == []
    assert now[0] < 60.0  # the last waits ended when their conditions held, not at the deadline


async def test_a_poll_stops_at_the_first_condition_still_pending(monkeypatch):
    """The outcomes of a request arrive about in order (topics are led in the order they were
    created): a poll stops at the first condition that does not hold yet instead of polling
    all of them every 10 ms; the last poll, at the deadline, checks every one."""
    now = [0.0]

    async def sleep(seconds: float) -> None:
        now[0] += seconds

    monkeypatch.setattr(admin_common, "time", SimpleNamespace(monotonic=lambda: now[0]))
    monkeypatch.setattr(admin_common, "asyncio", SimpleNamespace(sleep=sleep))
    calls = []

    def led_at(t: float):
        return lambda: calls.append(t) or now[0] >= t

    conditions = [led_at(0.1 + i / 1000) for i in range(1000)]
    assert await wait_for_all(conditions, timeout_ms=60_000) == [True] * 1000
    assert len(calls) < 2 * len(conditions)  # polling every one each time: about 10,000
    calls.clear()
    late = [led_at(0.0), led_at(10**9), led_at(0.0)]
    assert await wait_for_all(late, timeout_ms=50) == [True, False, True]


async def test_delete_topics_when_deletion_is_disabled(call, services):
    """Kafka answers TOPIC_DELETION_DISABLED from v3 on, INVALID_REQUEST to older clients."""
    services.config = BrokerConfig.load(overrides={"delete.topic.enable": "false"}, environ={})
    services.metadata_cache = MetadataCache(0)
    for version, expected in (
        (1, ErrorCode.INVALID_REQUEST),
        (4, ErrorCode.TOPIC_DELETION_DISABLED),
    ):
        request = request_class(ApiKey.DELETE_TOPICS, version)(
            topic_names=("t",), timeout=datetime.timedelta(seconds=1)
        )
        response = await call(ApiKey.DELETE_TOPICS, version, request)
        assert [r.error_code.value for r in response.responses] == [expected.value], version


async def test_delete_topics_asks_the_store_for_a_topic_this_broker_was_not_told_of_yet(
    call, services
):
    """A topic the controller created but whose UpdateMetadata has not reached this broker
    yet is marked for deletion (the store decides); one in neither is unknown, and so is a
    name no topic can have, which is not looked up in the store (its path would be invalid)."""
    store = EmbeddedStore(None)
    session = await store.open_session()
    try:
        await session.ensure_path(paths.topic_path("fresh"))
        services.store = session
        services.metadata_cache = MetadataCache(0)  # told of no topic
        request = request_class(ApiKey.DELETE_TOPICS, 4)(
            topic_names=("fresh", "never", "", "a/b", ".."), timeout=datetime.timedelta(seconds=1)
        )
        response = await call(ApiKey.DELETE_TOPICS, 4, request)
        answers = {r.name: r.error_code.value for r in response.responses}
        unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.value
        assert answers == {"fresh": ErrorCode.NONE.value, "never": unknown} | {
            name: unknown for name in ("", "a/b", "..")
        }
        assert await session.exists(paths.delete_topic_path("fresh")) is not None
        assert await session.exists(paths.delete_topic_path("never")) is None
    finally:
        await store.close()
