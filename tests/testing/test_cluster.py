"""The same controller and replication scenario on the embedded multi-broker cluster and on
ZooKeeper (a real one, Debian's package, through kafkalite.testing.ZooKeeperServer): both must
behave alike."""

from __future__ import annotations

import uuid

import pytest

from kafkalite.testing import Cluster, ZooKeeperServer


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory):
    """One real ZooKeeper for the module; each cluster uses a chroot of its own."""
    with ZooKeeperServer(tmp_path_factory.mktemp("zk")) as server:
        yield server


@pytest.fixture(params=["embedded", "zookeeper"])
def cluster(request, tmp_path):
    connect = None
    if request.param == "zookeeper":
        zookeeper = request.getfixturevalue("zookeeper")
        connect = zookeeper.connect_string(f"/{tmp_path.name}")
    with Cluster(brokers=3, zookeeper_connect=connect, data_dir=tmp_path / "c") as c:
        yield c


def test_leader_and_controller_failover_keep_every_acknowledged_record(cluster):
    topic = cluster.create_topic(
        f"t-{uuid.uuid4().hex[:6]}", 2, 3, config={"min.insync.replicas": "2"}
    )
    states = cluster.wait_for_leaders(topic, full_isr=True)
    assert all(sorted(s.replicas) == [1, 2, 3] for s in states.values())
    written = [f"r{i}".encode() for i in range(3)]
    cluster.produce(topic, written)

    # the leader dies: a replica of the ISR leads, the ISR shrinks to the living
    leader = cluster.partitions(topic)[0].leader
    cluster.kill(leader)
    after_kill = cluster.partitions(topic)
    assert after_kill[0].leader not in (leader, -1)
    assert all(leader not in s.isr and len(s.isr) == 2 for s in after_kill.values())
    cluster.produce(topic, [b"while-down"])  # acks=all with min.insync.replicas=2: accepted
    written.append(b"while-down")

    # the controller dies: another broker takes over and elects what it must
    controller = cluster.controller()
    cluster.kill(controller)
    new_controller = cluster.controller()
    assert new_controller not in (controller, leader)
    survivor = cluster.partitions(topic)
    assert all(s.leader == new_controller and s.isr == (new_controller,) for s in survivor.values())

    # both come back: they catch up and the ISRs are full again
    cluster.restart(leader)
    cluster.restart(controller)
    states = cluster.wait_for_leaders(topic, full_isr=True)
    assert all(sorted(s.isr) == [1, 2, 3] for s in states.values())
    assert [m.value for m in cluster.consume_all(topic) if m.partition == 0] == written


def test_subprocess_cluster_on_zookeeper_freezes_and_cuts_off_for_real(zookeeper, tmp_path):
    """Brokers as `python -m kafkalite serve` processes: pause is SIGSTOP, and isolate cuts the
    broker's own way to ZooKeeper (its session expires on the server)."""
    with Cluster(
        brokers=2,  # (each broker is a process: two keep the test short)
        zookeeper_connect=zookeeper.connect_string(f"/{tmp_path.name}"),
        subprocess=True,
        data_dir=tmp_path / "c",
        admin=False,
        session_timeout_ms=2000,
    ) as cluster:
        assert sorted(b.process.pid > 0 for b in cluster.processes.values()) == [True] * 2
        topic = cluster.create_topic("frozen", 1, 2)
        cluster.produce(topic, [b"a"])

        leader = cluster.partitions(topic)[0].leader
        cluster.pause(leader, seconds=60)  # SIGSTOP: its ZooKeeper session expires
        assert cluster.processes[leader].process.poll() is None
        states = cluster.wait_for_leaders(topic, not_on=[leader])
        assert leader not in next(iter(states.values())).isr
        cluster.produce(topic, [b"b"])
        cluster.resume(leader)  # SIGCONT: the zombie registers again and catches up
        cluster.wait_for_leaders(topic, full_isr=True)

        leader = cluster.partitions(topic)[0].leader
        cluster.isolate(leader)  # returns once its session expired and another leads
        assert cluster.partitions(topic)[0].leader != leader
        cluster.produce(topic, [b"c"])
        cluster.heal()
        cluster.wait_for_leaders(topic, full_isr=True)
        assert [m.value for m in cluster.consume_all(topic)] == [b"a", b"b", b"c"]
