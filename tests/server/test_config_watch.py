"""Dynamic configs from the coordination store (kafkalite/server/config_watch.py) on the
in-memory embedded store: topic overrides read at start and followed through change
notifications; user and client quotas set again, and a user's cached credentials dropped."""

from __future__ import annotations

import asyncio

import pytest

from kafkalite.coord.embedded import EmbeddedStore
from kafkalite.security.quotas import QuotaManager
from kafkalite.server.config_watch import TopicConfigs, load_quotas, watch_entity_configs
from kafkalite.storage.config import LogConfig
from kafkalite.zk import data as paths
from kafkalite.zk.security import alter_entity_config
from tests.controller.shell_support import eventually
from tests.server.support import running


@pytest.fixture
async def session():
    store = EmbeddedStore(None)
    session = await store.open_session()
    yield session
    await store.close()


async def set_topic_config(session, topic: str, config: dict[str, str], *, announce=True):
    path = paths.topic_config_path(topic)
    data = paths.encode_entity_config(config)
    if await session.exists(path) is None:
        await session.create(path, data, makepath=True)
    else:
        await session.set_data(path, data, -1)
    if announce:
        await session.ensure_path(paths.CONFIG_CHANGES)
        await session.create(
            paths.config_change_sequence_path(),
            paths.encode_config_change(f"topics/{topic}"),
            sequential=True,
        )


async def test_topic_overrides_are_read_at_start_and_followed(session):
    await set_topic_config(session, "a", {"retention.ms": "1000"}, announce=False)
    defaults = LogConfig()
    configs = TopicConfigs(session, defaults)
    await configs.load()
    assert configs.for_topic("a").retention_ms == 1000
    assert configs.for_topic("unknown") is defaults

    applied = []
    async with running(configs.watch(lambda topic, config: applied.append((topic, config)))):
        await set_topic_config(session, "a", {"retention.ms": "2000"})
        await eventually(lambda: applied, message="the change applied")
    assert [(t, c.retention_ms) for t, c in applied] == [("a", 2000)]
    assert configs.configs["a"].retention_ms == 2000


async def test_notifications_older_than_the_load_are_not_applied_again(session, monkeypatch):
    await set_topic_config(session, "a", {"retention.ms": "1000"})  # with its notification
    await set_topic_config(session, "b", {"retention.ms": "1000"}, announce=False)
    configs = TopicConfigs(session, LogConfig())
    await configs.load()
    old = await session.get_children(paths.CONFIG_CHANGES)
    reloads: list[str] = []
    reload = configs.reload

    async def counted(topic):
        reloads.append(topic)
        return await reload(topic)

    monkeypatch.setattr(configs, "reload", counted)
    listings = asyncio.Queue()

    async def watch_children(path):  # the store's listings, one after another, as they come
        while True:
            yield await listings.get()

    monkeypatch.setattr(session, "watch_children", watch_children)
    applied = []
    async with running(configs.watch(lambda topic, config: applied.append(topic))):
        await listings.put(list(old))  # the first listing: only what load() had read
        await set_topic_config(session, "b", {"retention.ms": "2000"})
        await listings.put(await session.get_children(paths.CONFIG_CHANGES))
        await eventually(lambda: applied, message="the new change applied")
    assert applied == ["b"]
    assert sorted(reloads) == ["a", "b"]  # one pass over the topics, for the new notification


async def test_an_unreadable_topic_config_keeps_the_previous_one(session):
    configs = TopicConfigs(session, LogConfig())
    await set_topic_config(session, "a", {"retention.ms": "1000"}, announce=False)
    await configs.load()
    await session.set_data(paths.topic_config_path("a"), b"{not json", -1)
    assert await configs.reload("a") is False
    assert configs.for_topic("a").retention_ms == 1000


async def test_the_load_reads_the_topics_in_bulk_reads(session, monkeypatch):
    from kafkalite.server import config_watch

    monkeypatch.setattr(config_watch, "TOPIC_CONFIG_READ_BATCH", 2)  # several batches
    await set_topic_config(session, "plain", {}, announce=False)
    await set_topic_config(session, "kept", {"retention.ms": "1000"}, announce=False)
    await set_topic_config(session, "unknown-key", {"no.such.key": "1"}, announce=False)
    await set_topic_config(session, "bad", {}, announce=False)
    await session.set_data(paths.topic_config_path("bad"), b"{not json", -1)
    await set_topic_config(session, "compact", {"cleanup.policy": "compact"}, announce=False)
    single_reads = []

    async def get_data(path, *args, **kwargs):
        single_reads.append(path)
        raise AssertionError("a read per topic")

    monkeypatch.setattr(session, "get_data", get_data)
    defaults = LogConfig()
    configs = TopicConfigs(session, defaults)
    await configs.load()
    assert single_reads == []
    assert configs.for_topic("plain") is defaults  # no override: the defaults themselves
    assert configs.for_topic("unknown-key") is defaults
    assert configs.for_topic("kept").retention_ms == 1000
    assert configs.for_topic("compact").compact
    assert configs.for_topic("bad") is defaults  # unreadable: nothing to keep yet
    assert configs.overrides == {
        "plain": {},
        "kept": {"retention.ms": "1000"},
        "unknown-key": {"no.such.key": "1"},
        "compact": {"cleanup.policy": "compact"},
    }


class Credentials:
    """The parts of security/scram.py's CredentialCache the watcher calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    def clear(self) -> None:
        self.calls.append(("clear",))

    def invalidate(self, user: str) -> None:
        self.calls.append(("invalidate", user))


async def test_user_and_client_quotas_follow_their_notifications(session):
    await alter_entity_config(session, "users", "alice", {"producer_byte_rate": "1024"})
    quotas = QuotaManager()
    await load_quotas(session, quotas)
    assert quotas.quota("producer_byte_rate", "alice", "app") == ((("user", "alice"),), 1024.0)

    credentials = Credentials()
    async with running(watch_entity_configs(session, quotas, lambda: credentials)):
        await eventually(lambda: credentials.calls == [("clear",)], message="the cache cleared")
        await alter_entity_config(session, "users", "alice", {"producer_byte_rate": "2048"})
        await alter_entity_config(session, "clients", "app", {"consumer_byte_rate": "10"})
        await eventually(
            lambda: quotas.quota("consumer_byte_rate", "bob", "app") is not None,
            message="the client quota set",
        )
    assert quotas.quota("producer_byte_rate", "alice", "app") == ((("user", "alice"),), 2048.0)
    assert quotas.quota("consumer_byte_rate", "bob", "app") == ((("client-id", "app"),), 10.0)
    assert credentials.calls == [("clear",), ("invalidate", "alice")]
