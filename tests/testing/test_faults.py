"""Fault injection on kafkalite.testing.Cluster, checked against what clients and the cluster
observe. One cluster for the module; each test uses a topic of its own and leaves the cluster
whole (healed, every broker running)."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Producer

from kafkalite.testing import Cluster

SESSION_TIMEOUT_MS = 3500  # the isolate test needs it well above its 1 s message timeout


@pytest.fixture(scope="module")
def cluster():
    with Cluster(brokers=3, session_timeout_ms=SESSION_TIMEOUT_MS) as c:
        yield c


@pytest.fixture
def topic(cluster):
    name = cluster.create_topic(
        f"f-{uuid.uuid4().hex[:6]}", 1, 3, config={"min.insync.replicas": "2"}
    )
    cluster.wait_for_leaders(name, full_isr=True)
    yield name
    for broker_id in cluster.broker_ids:
        if broker_id not in cluster.running_brokers:
            cluster.restart(broker_id)
    cluster.heal()


def delivered(producer: Producer, value: bytes, topic: str) -> list:
    """Produce one record and flush; the delivery errors (empty when it was acknowledged)."""
    errors: list = []
    producer.produce(topic, value, on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(30)
    assert len(errors) == 1
    return [e for e in errors if e is not None]


def test_isolated_leader_fails_producers_until_a_new_leader_is_elected_and_heal_fills_the_isr(
    cluster, topic
):
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "acks": "all",
            # shorter than the session timeout: no new leader can exist before it expires
            "message.timeout.ms": 1000,
        }
    )
    assert delivered(producer, b"before", topic) == []
    leader = cluster.partitions(topic)[0].leader

    cluster.isolate(leader, wait=False)
    errors = delivered(producer, b"lost", topic)
    assert errors and errors[0].name() in ("_MSG_TIMED_OUT", "_TIMED_OUT", "_TRANSPORT")

    states = cluster.wait_for_leaders(topic, not_on=[leader])
    assert leader not in states[next(iter(states))].isr
    deadline = time.monotonic() + 30
    while delivered(producer, b"after", topic):  # until the producer's metadata moved on
        assert time.monotonic() < deadline
    cluster.heal()
    states = cluster.wait_for_leaders(topic, full_isr=True)
    assert sorted(next(iter(states.values())).isr) == [1, 2, 3]
    assert [m.value for m in cluster.consume_all(topic)][0] == b"before"
    assert b"lost" not in [m.value for m in cluster.consume_all(topic)]


def test_paused_leader_is_replaced_then_rejoins_as_a_follower(cluster, topic):
    cluster.produce(topic, [b"a"])
    leader = cluster.partitions(topic)[0].leader
    session = cluster.servers[leader].session.session_id
    cluster.pause(leader, seconds=60)  # frozen; its session expires after the timeout
    states = cluster.wait_for_leaders(topic, not_on=[leader])
    assert leader not in next(iter(states.values())).isr
    cluster.produce(topic, [b"b"])
    cluster.resume(leader)  # the zombie finds out it was replaced: a new session, a follower
    states = cluster.wait_for_leaders(topic, full_isr=True)
    assert cluster.servers[leader].session.session_id != session
    assert [m.value for m in cluster.consume_all(topic)] == [b"a", b"b"]


def test_a_kill_while_another_broker_is_paused_is_observed_by_the_rest(cluster, topic):
    """A paused broker cannot answer Metadata: the kill of another returns once the brokers
    that can answer observed it (it does not wait on the paused one)."""
    paused, killed, survivor = cluster.broker_ids
    cluster.pause(paused, seconds=60)
    try:
        cluster.kill(killed, timeout=30)
        assert cluster.wait_for_leaders(topic, not_on=[killed, paused])
        assert killed not in cluster.running_brokers
    finally:
        cluster.resume(paused)


def test_partition_moves_leadership_to_the_larger_side(cluster, topic):
    leader = cluster.partitions(topic)[0].leader
    others = [b for b in cluster.broker_ids if b != leader]
    cluster.partition({leader}, set(others))
    assert cluster.partitions(topic)[0].leader in others
    cluster.produce(topic, [b"majority"])
    cluster.heal()
    states = cluster.wait_for_leaders(topic, full_isr=True)
    assert sorted(next(iter(states.values())).isr) == [1, 2, 3]


def test_slow_broker_answers_after_the_latency(cluster, topic):
    import asyncio

    leader = cluster.partitions(topic)[0].leader

    def metadata_round_trip() -> float:
        began = time.monotonic()
        asyncio.run(cluster.view_from(leader))
        return time.monotonic() - began

    cluster.slow(leader, 100)
    try:
        # connect + ApiVersions + Metadata: each chunk each way waits 100 ms
        assert metadata_round_trip() >= 0.1
        cluster.produce(topic, [b"slow but there"])
    finally:
        cluster.slow(leader, 0)
    assert [m.value for m in cluster.consume_all(topic)] == [b"slow but there"]


def test_failed_log_dir_moves_leadership_and_the_broker_stays_registered(cluster, topic):
    leader = cluster.partitions(topic)[0].leader
    cluster.fail_log_dir(leader)
    state = cluster.partitions(topic)[0]
    assert state.leader != leader and leader not in state.isr
    cluster.produce(topic, [b"elsewhere"])
    # still a live broker (only its directory is gone), until restarted on a healthy disk
    assert leader in asyncio_view(cluster, state.leader).brokers
    cluster.kill(leader)
    cluster.restart(leader)
    cluster.wait_for_leaders(topic, full_isr=True)


def test_expired_session_registers_again_and_the_cluster_keeps_working(cluster, topic):
    broker_id = cluster.controller()
    old_session = cluster.servers[broker_id].session.session_id
    cluster.expire_session(broker_id)
    assert cluster.servers[broker_id].session.session_id != old_session
    again = cluster.create_topic(f"after-expiry-{uuid.uuid4().hex[:6]}", 1, 3)
    assert cluster.wait_for_leaders(again, full_isr=True)


def asyncio_view(cluster: Cluster, broker_id: int):
    import asyncio

    return asyncio.run(cluster.view_from(broker_id))
