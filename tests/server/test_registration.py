"""The broker in the coordination store (kafkalite/server/registration.py) on the in-memory
embedded store: the cluster id, the ephemeral registration and its broker epoch, the SCRAM
secret shared by the cluster."""

from __future__ import annotations

import json

import pytest

from kafkalite.config import BrokerConfig, Endpoint
from kafkalite.coord.embedded import EmbeddedStore
from kafkalite.security.listeners import ListenerSecurity
from kafkalite.server import StartupError
from kafkalite.server.registration import (
    get_or_create_cluster_id,
    new_cluster_id,
    register_broker,
    scram_unknown_user_secret,
)

CONFIG = BrokerConfig.load(
    overrides={"listeners": "PLAINTEXT://127.0.0.1:9092", "broker.rack": "r1"}, environ={}
)
ENDPOINTS = [Endpoint("PLAINTEXT", "127.0.0.1", 9092)]


@pytest.fixture
async def store():
    store = EmbeddedStore(None)
    yield store
    await store.close()


def test_a_new_cluster_id_is_kafkas_uuid_text() -> None:
    cluster_id = new_cluster_id()
    assert len(cluster_id) == 22 and "=" not in cluster_id
    assert cluster_id != new_cluster_id()


async def test_the_first_broker_creates_the_cluster_id_and_the_others_read_it(store):
    first, second = await store.open_session(), await store.open_session()
    cluster_id = await get_or_create_cluster_id(first)
    assert await get_or_create_cluster_id(second) == cluster_id


async def test_a_broker_registers_once_per_id(store):
    session = await store.open_session()
    epoch = await register_broker(session, CONFIG, 3, ENDPOINTS)
    stat = await session.exists("/brokers/ids/3")
    assert stat.ephemeral_owner == session.session_id and epoch == stat.czxid
    data, _ = await session.get_data("/brokers/ids/3")
    assert json.loads(data)["rack"] == "r1"
    with pytest.raises(StartupError, match="broker.id 3 is already registered"):
        await register_broker(await store.open_session(), CONFIG, 3, ENDPOINTS)


async def test_the_scram_secret_is_made_once_for_the_cluster(store):
    plaintext = {"PLAINTEXT": ListenerSecurity("PLAINTEXT", "PLAINTEXT")}
    scram = {"SASL": ListenerSecurity("SASL", "SASL_PLAINTEXT", mechanisms=("SCRAM-SHA-256",))}
    first, second = await store.open_session(), await store.open_session()
    assert await scram_unknown_user_secret(first, plaintext) is None
    secret = await scram_unknown_user_secret(first, scram)
    assert len(secret) == 32
    assert await scram_unknown_user_secret(second, scram) == secret
