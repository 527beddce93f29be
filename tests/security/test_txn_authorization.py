"""The transaction APIs behind the ACL authorizer, attacked as a tenant would, and the audit of every API the broker advertises against its authorization rules.

One broker for the module with ``kafka.security.authorizer.AclAuthorizer`` and
``allow.everyone.if.no.acl.found=false``: a PLAINTEXT listener whose ANONYMOUS principal is a
super user (the victim and the test's set-up) and a SASL_PLAINTEXT listener with PLAIN users
and a SCRAM user. ``victim-tx`` (a confluent-kafka transactional producer) holds a transaction
open on ``victim-topic`` and ``hidden-topic``; ``victim-group`` has an offset committed.

- mallory (SCRAM, no ACL at all) cannot list, describe, abort (EndTxn), write markers,
  add partitions to, or describe the producers of anything, and gets Kafka's error codes;
  DescribeProducers says TOPIC_AUTHORIZATION_FAILED for a topic that does not exist too.
- alice (WRITE on ``alice-tx`` and ``alice-topic``, READ on ``victim-topic`` and on
  ``alice-group``) cannot move ``victim-group``'s offset through AddOffsetsToTxn /
  TxnOffsetCommit (GROUP_AUTHORIZATION_FAILED), cannot commit offsets of a topic she may not
  READ, nor add a topic she may not WRITE to her transaction.
- carol (DESCRIBE on ``victim-tx`` and ``victim-topic``) lists only ``victim-tx`` and sees only
  ``victim-topic`` among its partitions.
- The victim's transaction then commits, and the refusals are in the broker's log.
"""

from __future__ import annotations

import asyncio
import datetime
import time
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka import TopicPartition as CTopicPartition

from kafkalite.protocol.acl import AclOperation, ResourceType
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode
from tests.security.support import (
    MALLORY,
    MALLORY_PASSWORD,
    USERS,
    Secured,
    add_scram_user,
)

DEADLINE_S = 30.0

TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
CLUSTER_DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
TXN_DENIED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

UNCHECKED = {"API_VERSIONS", "SASL_HANDSHAKE", "SASL_AUTHENTICATE", "DESCRIBE_CLUSTER"}
"""The APIs Kafka's KafkaApis serves without an authorization check."""


async def create_acls(secured: Secured, acls: list[tuple[str, ResourceType, str, AclOperation]]):
    creations = [
        {
            "resource_type": int(rtype),
            "resource_name": name,
            "resource_pattern_type": 3,  # LITERAL
            "principal": f"User:{user}",
            "host": "*",
            "operation": int(op),
            "permission_type": 3,  # ALLOW
        }
        for user, rtype, name, op in acls
    ]
    response = await secured.send(None, ApiKey.CREATE_ACLS, {"creations": creations})
    assert [int(r.error_code) for r in response.results] == [0] * len(acls)


async def create_topics(secured: Secured, names: list[str]) -> None:
    response = await secured.send(
        None,
        ApiKey.CREATE_TOPICS,
        {
            "topics": [
                {
                    "name": n,
                    "num_partitions": 1,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                }
                for n in names
            ],
            "timeout": datetime.timedelta(seconds=10),
            "validate_only": False,
        },
    )
    assert {t.name: int(t.error_code) for t in response.topics} == dict.fromkeys(names, 0)


async def set_up(secured: Secured) -> None:
    await add_scram_user(secured.broker.bootstrap, MALLORY, MALLORY_PASSWORD)
    await create_topics(secured, ["victim-topic", "hidden-topic", "alice-topic", "secret-topic"])
    T, Op = ResourceType, AclOperation
    await create_acls(
        secured,
        [
            ("alice", T.TRANSACTIONAL_ID, "alice-tx", Op.WRITE),
            ("alice", T.TOPIC, "alice-topic", Op.WRITE),
            ("alice", T.TOPIC, "victim-topic", Op.READ),
            ("alice", T.GROUP, "alice-group", Op.READ),
            ("carol", T.TRANSACTIONAL_ID, "victim-tx", Op.DESCRIBE),
            ("carol", T.TOPIC, "victim-topic", Op.DESCRIBE),
        ],
    )


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    with Secured.started(tmp_path_factory.mktemp("txn-authz")) as secured:
        asyncio.run(set_up(secured))
        yield secured


@pytest.fixture(scope="module")
def victim(secured):
    """victim-tx: a transaction open on victim-topic and hidden-topic; victim-group has
    offset 5 committed for victim-topic/0."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": secured.broker.bootstrap, "group.id": "victim-group"})
    consumer.commit(offsets=[CTopicPartition("victim-topic", 0, 5)], asynchronous=False)
    consumer.close()
    producer = Producer(
        {"bootstrap.servers": secured.broker.bootstrap, "transactional.id": "victim-tx"}
    )
    producer.init_transactions(DEADLINE_S)
    producer.begin_transaction()
    producer.produce("victim-topic", b"v1")
    producer.produce("hidden-topic", b"h1")
    assert producer.flush(DEADLINE_S) == 0
    state = asyncio.run(describe(secured, None, ["victim-tx"]))[0]
    assert state.error_code == 0 and state.transaction_state == "Ongoing", state
    yield producer, state.producer_id, state.producer_epoch


async def describe(secured: Secured, user: str | None, ids: list[str]):
    response = await secured.send(user, ApiKey.DESCRIBE_TRANSACTIONS, {"transactional_ids": ids})
    return response.transaction_states


def partition_codes(topics, name="name", field="error_code") -> dict:
    return {
        (getattr(t, name), p.partition_index): int(getattr(p, field))
        for t in topics
        for p in (t.partitions if hasattr(t, "partitions") else t.results_by_partition)
    }


# ---------------------------------------------------------------------- the audit


async def test_every_advertised_api_has_an_authorization_rule(secured):
    """Every API key the authorizer-enabled broker advertises in ApiVersions has a rule (Kafka
    checks nothing for exactly the NO_CHECK ones), and guard refuses a handler without one."""
    from kafkalite.apis.authorization import NO_CHECK, RULES, MissingRuleError, guard

    async with secured.connect(MALLORY) as conn:
        advertised = set(conn.api_versions)
    assert ApiKey.DESCRIBE_TRANSACTIONS in advertised
    missing = sorted(ApiKey(k).name for k in advertised if k not in RULES)
    assert missing == []
    unchecked = {ApiKey(k).name for k in advertised if RULES[k].startswith(NO_CHECK)}
    assert unchecked == UNCHECKED
    with pytest.raises(MissingRuleError):
        guard(9999, lambda ctx, request: None)


# ---------------------------------------------------------------------- mallory, no ACL


async def test_a_user_without_acls_lists_and_describes_no_transaction(secured, victim):
    response = await secured.send(
        MALLORY,
        ApiKey.LIST_TRANSACTIONS,
        {"state_filters": [], "producer_id_filters": [], "duration_filter": -1},
    )
    assert response.error_code == 0
    assert [t.transactional_id for t in response.transaction_states] == []
    (state,) = await describe(secured, MALLORY, ["victim-tx"])
    assert (state.transactional_id, int(state.error_code)) == ("victim-tx", TXN_DENIED)
    assert (state.producer_id, state.producer_epoch, state.topics) == (-1, -1, ())
    # an id that does not exist is refused the same way: no existence oracle
    (state,) = await describe(secured, MALLORY, ["no-such-tx"])
    assert int(state.error_code) == TXN_DENIED


async def test_a_user_without_acls_cannot_end_or_mark_another_transaction(secured, victim):
    _, pid, epoch = victim
    for committed in (False, True):
        response = await secured.send(
            MALLORY,
            ApiKey.END_TXN,
            {
                "transactional_id": "victim-tx",
                "producer_id": pid,
                "producer_epoch": epoch,
                "committed": committed,
            },
        )
        assert int(response.error_code) == TXN_DENIED
    marker = {
        "producer_id": pid,
        "producer_epoch": epoch,
        "transaction_result": True,
        "topics": [{"name": "victim-topic", "partition_indexes": [0]}],
        "coordinator_epoch": 0,
    }
    response = await secured.send(MALLORY, ApiKey.WRITE_TXN_MARKERS, {"markers": [marker]})
    (result,) = response.markers
    assert result.producer_id == pid
    assert partition_codes(result.topics) == {("victim-topic", 0): CLUSTER_DENIED}
    response = await secured.send(
        MALLORY,
        ApiKey.ADD_PARTITIONS_TO_TXN,
        {
            "v3_and_below_transactional_id": "victim-tx",
            "v3_and_below_producer_id": pid,
            "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [{"name": "secret-topic", "partitions": [0]}],
        },
        3,
    )
    codes = partition_codes(response.results_by_topic_v3_and_below, field="partition_error_code")
    assert codes == {("secret-topic", 0): TXN_DENIED}
    # the victim's transaction was left alone
    (state,) = await describe(secured, None, ["victim-tx"])
    assert state.transaction_state == "Ongoing"
    assert sorted(t.topic for t in state.topics) == ["hidden-topic", "victim-topic"]


async def test_describe_producers_is_authorised_before_existence(secured, victim):
    response = await secured.send(
        MALLORY,
        ApiKey.DESCRIBE_PRODUCERS,
        {
            "topics": [
                {"name": "victim-topic", "partition_indexes": [0]},
                {"name": "no-such-topic", "partition_indexes": [0]},
            ]
        },
    )
    assert partition_codes(response.topics) == {
        ("victim-topic", 0): TOPIC_DENIED,
        ("no-such-topic", 0): TOPIC_DENIED,
    }
    assert all(p.active_producers == () for t in response.topics for p in t.partitions)
    # an illegal name is answered as such first, as Kafka does (it names no topic)
    response = await secured.send(
        MALLORY,
        ApiKey.DESCRIBE_PRODUCERS,
        {"topics": [{"name": "bad/name", "partition_indexes": [0]}]},
    )
    assert partition_codes(response.topics) == {("bad/name", 0): ErrorCode.INVALID_TOPIC_EXCEPTION}
    # the super user sees the victim's producer (and that the other topic does not exist)
    response = await secured.send(
        None,
        ApiKey.DESCRIBE_PRODUCERS,
        {
            "topics": [
                {"name": "victim-topic", "partition_indexes": [0]},
                {"name": "no-such-topic", "partition_indexes": [0]},
            ]
        },
    )
    assert partition_codes(response.topics) == {
        ("victim-topic", 0): 0,
        ("no-such-topic", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    _, pid, _ = victim
    assert pid in [p.producer_id for p in response.topics[0].partitions[0].active_producers]


# ---------------------------------------------------------------------- alice, narrow ACLs


async def committed_offset(secured: Secured, group: str) -> tuple[int, str]:
    response = await secured.send(
        None,
        ApiKey.OFFSET_FETCH,
        {
            "group_id": group,
            "topics": [{"name": "victim-topic", "partition_indexes": [0]}],
            "require_stable": False,
        },
        7,
    )
    p = response.topics[0].partitions[0]
    return p.committed_offset, p.metadata


async def test_a_transaction_cannot_move_another_groups_offsets(secured, victim):
    assert await committed_offset(secured, "victim-group") == (5, "")
    async with secured.connect("alice") as conn:
        init = await conn.send(
            ApiKey.INIT_PRODUCER_ID,
            {
                "transactional_id": "alice-tx",
                "transaction_timeout": datetime.timedelta(seconds=60),
                "producer_id": -1,
                "producer_epoch": -1,
            },
        )
        assert init.error_code == 0
        pid, epoch = init.producer_id, init.producer_epoch
        response = await conn.send(
            ApiKey.ADD_OFFSETS_TO_TXN,
            {
                "transactional_id": "alice-tx",
                "producer_id": pid,
                "producer_epoch": epoch,
                "group_id": "victim-group",
            },
        )
        assert int(response.error_code) == GROUP_DENIED

        def offsets(group: str, topics: list[str]) -> dict:
            return {
                "transactional_id": "alice-tx",
                "group_id": group,
                "producer_id": pid,
                "producer_epoch": epoch,
                "generation_id": -1,
                "member_id": "",
                "group_instance_id": None,
                "topics": [
                    {
                        "name": t,
                        "partitions": [
                            {
                                "partition_index": 0,
                                "committed_offset": 19,
                                "committed_leader_epoch": -1,
                                "committed_metadata": "mallory",
                            }
                        ],
                    }
                    for t in topics
                ],
            }

        response = await conn.send(
            ApiKey.TXN_OFFSET_COMMIT, offsets("victim-group", ["victim-topic"]), 3
        )
        assert partition_codes(response.topics) == {("victim-topic", 0): GROUP_DENIED}
        # her own group, a topic she may not READ (and one that does not exist): refused
        response = await conn.send(
            ApiKey.TXN_OFFSET_COMMIT,
            offsets("alice-group", ["secret-topic", "no-such-topic"]),
            3,
        )
        assert partition_codes(response.topics) == {
            ("secret-topic", 0): TOPIC_DENIED,
            ("no-such-topic", 0): TOPIC_DENIED,
        }
        # someone else's transactional id: refused before the group is looked at
        response = await conn.send(
            ApiKey.ADD_OFFSETS_TO_TXN,
            {
                "transactional_id": "victim-tx",
                "producer_id": victim[1],
                "producer_epoch": victim[2],
                "group_id": "alice-group",
            },
        )
        assert int(response.error_code) == TXN_DENIED
        response = await conn.send(
            ApiKey.TXN_OFFSET_COMMIT,
            {**offsets("alice-group", ["victim-topic"]), "transactional_id": "victim-tx"},
            3,
        )
        assert partition_codes(response.topics) == {("victim-topic", 0): TXN_DENIED}
        # a topic she may only READ cannot join her transaction; nothing is added
        response = await conn.send(
            ApiKey.ADD_PARTITIONS_TO_TXN,
            {
                "v3_and_below_transactional_id": "alice-tx",
                "v3_and_below_producer_id": pid,
                "v3_and_below_producer_epoch": epoch,
                "v3_and_below_topics": [
                    {"name": "victim-topic", "partitions": [0]},
                    {"name": "alice-topic", "partitions": [0]},
                ],
            },
            3,
        )
        codes = partition_codes(
            response.results_by_topic_v3_and_below, field="partition_error_code"
        )
        assert codes == {
            ("victim-topic", 0): TOPIC_DENIED,
            ("alice-topic", 0): ErrorCode.OPERATION_NOT_ATTEMPTED,
        }
        await conn.send(
            ApiKey.END_TXN,
            {
                "transactional_id": "alice-tx",
                "producer_id": pid,
                "producer_epoch": epoch,
                "committed": True,
            },
        )
    assert await committed_offset(secured, "victim-group") == (5, "")
    (state,) = await describe(secured, None, ["alice-tx"])
    assert state.topics == ()


# ---------------------------------------------------------------------- carol, DESCRIBE only


async def test_describe_lists_only_what_the_principal_may_describe(secured, victim):
    response = await secured.send(
        "carol",
        ApiKey.LIST_TRANSACTIONS,
        {"state_filters": [], "producer_id_filters": [], "duration_filter": -1},
    )
    assert [t.transactional_id for t in response.transaction_states] == ["victim-tx"]
    states = await describe(secured, "carol", ["victim-tx", "alice-tx"])
    assert [(s.transactional_id, int(s.error_code)) for s in states] == [
        ("victim-tx", 0),
        ("alice-tx", TXN_DENIED),
    ]
    assert states[0].producer_id == victim[1]
    assert [t.topic for t in states[0].topics] == ["victim-topic"]  # not hidden-topic
    # FindCoordinator v4 answers each key of a batch on its own, as Kafka does
    response = await secured.send(
        "carol",
        ApiKey.FIND_COORDINATOR,
        {"key_type": 1, "coordinator_keys": ["victim-tx", "alice-tx"]},
        4,
    )
    found = {c.key: (int(c.error_code), c.error_message, c.node_id) for c in response.coordinators}
    assert found == {"victim-tx": (0, None, 0), "alice-tx": (TXN_DENIED, None, -1)}


# ---------------------------------------------------------------------- every API, probed


def _probes(pid: int, epoch: int) -> dict[int, tuple[int, dict, object]]:
    """api -> (version, a request by a principal with no ACL, what proves the refusal): an
    error code the answer must carry, or a predicate on the answer (listings filtered)."""
    from kafkalite.protocol.records import Record, build_batch

    K, T, Op = ApiKey, ResourceType, AclOperation
    seconds = datetime.timedelta(seconds=5)
    victim_tp = [{"name": "victim-topic", "partitions": [{"partition_index": 0}]}]
    partition_states = {
        "partition_index": 0,
        "controller_epoch": 1,
        "leader": 0,
        "leader_epoch": 99,
        "isr": [0],
        "zk_version": 0,
        "replicas": [0],
    }
    configs = [{"resource_type": 2, "resource_name": "victim-topic", "configs": []}]
    group_members = {"group_id": "victim-group", "member_id": "m", "group_instance_id": None}

    def share_state(partitions: list[dict]) -> dict:
        return {
            "group_id": "victim-group",
            "topics": [{"topic_id": uuid.UUID(int=7), "partitions": partitions}],
        }

    return {
        K.PRODUCE: (
            9,
            {
                "transactional_id": None,
                "acks": -1,
                "timeout": seconds,
                "topic_data": [
                    {
                        "name": "victim-topic",
                        "partition_data": [
                            {"index": 0, "records": build_batch([Record(value=b"x")])}
                        ],
                    }
                ],
            },
            TOPIC_DENIED,
        ),
        K.FETCH: (
            12,
            {
                "replica_id": -1,
                "max_wait": datetime.timedelta(0),
                "min_bytes": 1,
                "max_bytes": 1 << 20,
                "isolation_level": 0,
                "session_id": 0,
                "session_epoch": -1,
                "topics": [
                    {
                        "topic": "victim-topic",
                        "partitions": [
                            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
                        ],
                    }
                ],
                "forgotten_topics_data": [],
                "rack_id": "",
            },
            TOPIC_DENIED,
        ),
        K.LIST_OFFSETS: (
            7,
            {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [
                    {
                        "name": "victim-topic",
                        "partitions": [{"partition_index": 0, "timestamp": -1}],
                    }
                ],
            },
            TOPIC_DENIED,
        ),
        K.METADATA: (
            12,
            {"topics": None, "allow_auto_topic_creation": False},
            lambda r: [t.name for t in r.topics] == [],
        ),
        K.LEADER_AND_ISR: (
            7,
            {
                "controller_id": 0,
                "controller_epoch": 1,
                "broker_epoch": -1,
                "type": 0,
                "topic_states": [
                    {"topic_name": "victim-topic", "partition_states": [partition_states]}
                ],
                "live_leaders": [],
            },
            CLUSTER_DENIED,
        ),
        K.STOP_REPLICA: (
            4,
            {
                "controller_id": 0,
                "controller_epoch": 1,
                "broker_epoch": -1,
                "topic_states": [
                    {
                        "topic_name": "victim-topic",
                        "partition_states": [
                            {"partition_index": 0, "leader_epoch": 99, "delete_partition": True}
                        ],
                    }
                ],
            },
            CLUSTER_DENIED,
        ),
        K.UPDATE_METADATA: (
            7,
            {
                "controller_id": 0,
                "controller_epoch": 1,
                "broker_epoch": -1,
                "topic_states": [],
                "live_brokers": [],
            },
            CLUSTER_DENIED,
        ),
        K.CONTROLLED_SHUTDOWN: (3, {"broker_id": 0, "broker_epoch": -1}, CLUSTER_DENIED),
        K.OFFSET_COMMIT: (
            8,
            {
                "group_id": "victim-group",
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "group_instance_id": None,
                "topics": [
                    {
                        "name": "victim-topic",
                        "partitions": [{"partition_index": 0, "committed_offset": 19}],
                    }
                ],
            },
            GROUP_DENIED,
        ),
        K.OFFSET_FETCH: (
            8,
            {"groups": [{"group_id": "victim-group", "topics": None}], "require_stable": False},
            GROUP_DENIED,
        ),
        K.FIND_COORDINATOR: (4, {"key_type": 1, "coordinator_keys": ["victim-tx"]}, TXN_DENIED),
        K.JOIN_GROUP: (
            9,
            {
                "group_id": "victim-group",
                "session_timeout": datetime.timedelta(seconds=10),
                "rebalance_timeout": datetime.timedelta(seconds=10),
                "member_id": "",
                "group_instance_id": None,
                "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b""}],
                "reason": None,
            },
            GROUP_DENIED,
        ),
        K.HEARTBEAT: (4, {**group_members, "generation_id": 1}, GROUP_DENIED),
        K.LEAVE_GROUP: (
            5,
            {
                "group_id": "victim-group",
                "members": [{"member_id": "m", "group_instance_id": None, "reason": None}],
            },
            GROUP_DENIED,
        ),
        K.SYNC_GROUP: (
            5,
            {
                **group_members,
                "generation_id": 1,
                "protocol_type": None,
                "protocol_name": None,
                "assignments": [],
            },
            GROUP_DENIED,
        ),
        K.DESCRIBE_GROUPS: (
            5,
            {"groups": ["victim-group"], "include_authorized_operations": False},
            GROUP_DENIED,
        ),
        K.LIST_GROUPS: (
            4,
            {"states_filter": []},
            lambda r: [g.group_id for g in r.groups] == [],
        ),
        K.CREATE_TOPICS: (
            7,
            {
                "topics": [
                    {
                        "name": "mallory-topic",
                        "num_partitions": 1,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                "timeout": seconds,
                "validate_only": False,
            },
            TOPIC_DENIED,
        ),
        K.DELETE_TOPICS: (
            6,
            {"topics": [{"name": "victim-topic", "topic_id": None}], "timeout": seconds},
            TOPIC_DENIED,
        ),
        K.DELETE_RECORDS: (
            2,
            {
                "topics": [
                    {"name": "victim-topic", "partitions": [{"partition_index": 0, "offset": 1}]}
                ],
                "timeout": seconds,
            },
            TOPIC_DENIED,
        ),
        K.INIT_PRODUCER_ID: (
            4,
            {
                "transactional_id": "victim-tx",
                "transaction_timeout": datetime.timedelta(seconds=60),
                "producer_id": -1,
                "producer_epoch": -1,
            },
            TXN_DENIED,
        ),
        K.OFFSET_FOR_LEADER_EPOCH: (
            4,
            {
                "replica_id": -1,
                "topics": [
                    {
                        "topic": "victim-topic",
                        "partitions": [
                            {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}
                        ],
                    }
                ],
            },
            TOPIC_DENIED,
        ),
        K.ADD_PARTITIONS_TO_TXN: (
            3,
            {
                "v3_and_below_transactional_id": "victim-tx",
                "v3_and_below_producer_id": pid,
                "v3_and_below_producer_epoch": epoch,
                "v3_and_below_topics": [{"name": "victim-topic", "partitions": [0]}],
            },
            TXN_DENIED,
        ),
        K.ADD_OFFSETS_TO_TXN: (
            3,
            {
                "transactional_id": "victim-tx",
                "producer_id": pid,
                "producer_epoch": epoch,
                "group_id": "victim-group",
            },
            TXN_DENIED,
        ),
        K.END_TXN: (
            3,
            {
                "transactional_id": "victim-tx",
                "producer_id": pid,
                "producer_epoch": epoch,
                "committed": False,
            },
            TXN_DENIED,
        ),
        K.WRITE_TXN_MARKERS: (
            1,
            {
                "markers": [
                    {
                        "producer_id": pid,
                        "producer_epoch": epoch,
                        "transaction_result": False,
                        "topics": [{"name": "victim-topic", "partition_indexes": [0]}],
                        "coordinator_epoch": 0,
                    }
                ]
            },
            CLUSTER_DENIED,
        ),
        K.TXN_OFFSET_COMMIT: (
            3,
            {
                "transactional_id": "victim-tx",
                "group_id": "victim-group",
                "producer_id": pid,
                "producer_epoch": epoch,
                "generation_id": -1,
                "member_id": "",
                "group_instance_id": None,
                "topics": [
                    {
                        "name": "victim-topic",
                        "partitions": [{"partition_index": 0, "committed_offset": 19}],
                    }
                ],
            },
            TXN_DENIED,
        ),
        K.DESCRIBE_ACLS: (
            3,
            {
                "resource_type_filter": 1,
                "resource_name_filter": None,
                "pattern_type_filter": 1,
                "principal_filter": None,
                "host_filter": None,
                "operation": 1,
                "permission_type": 1,
            },
            CLUSTER_DENIED,
        ),
        K.CREATE_ACLS: (
            3,
            {
                "creations": [
                    {
                        "resource_type": int(T.TOPIC),
                        "resource_name": "victim-topic",
                        "resource_pattern_type": 3,
                        "principal": "User:mallory",
                        "host": "*",
                        "operation": int(Op.ALL),
                        "permission_type": 3,
                    }
                ]
            },
            CLUSTER_DENIED,
        ),
        K.DELETE_ACLS: (
            3,
            {
                "filters": [
                    {
                        "resource_type_filter": 1,
                        "resource_name_filter": None,
                        "pattern_type_filter": 1,
                        "principal_filter": None,
                        "host_filter": None,
                        "operation": 1,
                        "permission_type": 1,
                    }
                ]
            },
            CLUSTER_DENIED,
        ),
        K.DESCRIBE_CONFIGS: (
            4,
            {"resources": [{**configs[0], "configuration_keys": None}]},
            TOPIC_DENIED,
        ),
        K.ALTER_CONFIGS: (2, {"resources": configs, "validate_only": True}, TOPIC_DENIED),
        K.DESCRIBE_LOG_DIRS: (4, {"topics": None}, CLUSTER_DENIED),
        K.CREATE_PARTITIONS: (
            3,
            {
                "topics": [{"name": "victim-topic", "count": 2, "assignments": None}],
                "timeout": seconds,
                "validate_only": True,
            },
            TOPIC_DENIED,
        ),
        K.DELETE_GROUPS: (2, {"groups_names": ["victim-group"]}, GROUP_DENIED),
        K.ELECT_LEADERS: (
            2,
            {"election_type": 0, "topic_partitions": None, "timeout": seconds},
            CLUSTER_DENIED,
        ),
        K.INCREMENTAL_ALTER_CONFIGS: (
            1,
            {"resources": configs, "validate_only": True},
            TOPIC_DENIED,
        ),
        K.ALTER_PARTITION_REASSIGNMENTS: (
            0,
            {
                "timeout": seconds,
                "topics": [
                    {
                        "name": "victim-topic",
                        "partitions": [{"partition_index": 0, "replicas": [0]}],
                    }
                ],
            },
            CLUSTER_DENIED,
        ),
        K.LIST_PARTITION_REASSIGNMENTS: (0, {"timeout": seconds, "topics": None}, CLUSTER_DENIED),
        K.OFFSET_DELETE: (
            0,
            {"group_id": "victim-group", "topics": victim_tp},
            GROUP_DENIED,
        ),
        K.DESCRIBE_CLIENT_QUOTAS: (1, {"components": [], "strict": False}, CLUSTER_DENIED),
        K.ALTER_CLIENT_QUOTAS: (
            1,
            {
                "entries": [
                    {
                        "entity": [{"entity_type": "user", "entity_name": "mallory"}],
                        "ops": [{"key": "producer_byte_rate", "value": 1e9, "remove": False}],
                    }
                ],
                "validate_only": True,
            },
            CLUSTER_DENIED,
        ),
        K.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, {"users": None}, CLUSTER_DENIED),
        K.ALTER_USER_SCRAM_CREDENTIALS: (
            0,
            {"deletions": [{"name": "admin", "mechanism": 1}], "upsertions": []},
            CLUSTER_DENIED,
        ),
        K.DESCRIBE_PRODUCERS: (
            0,
            {"topics": [{"name": "victim-topic", "partition_indexes": [0]}]},
            TOPIC_DENIED,
        ),
        K.DESCRIBE_TRANSACTIONS: (0, {"transactional_ids": ["victim-tx"]}, TXN_DENIED),
        K.LIST_TRANSACTIONS: (
            1,
            {"state_filters": [], "producer_id_filters": [], "duration_filter": -1},
            lambda r: list(r.transaction_states) == [],
        ),
        # KIP-848 consumer groups
        K.CONSUMER_GROUP_HEARTBEAT: (
            0,
            {
                "group_id": "victim-group",
                "member_id": "m",
                "member_epoch": 0,
                "rebalance_timeout": datetime.timedelta(seconds=30),
                "subscribed_topic_names": ["victim-topic"],
                "topic_partitions": [],
            },
            GROUP_DENIED,
        ),
        K.CONSUMER_GROUP_DESCRIBE: (
            0,
            {"group_ids": ["victim-group"], "include_authorized_operations": False},
            GROUP_DENIED,
        ),
        # KIP-932 share groups, and the share coordinator's inter-broker state APIs
        K.SHARE_GROUP_HEARTBEAT: (
            1,
            {
                "group_id": "victim-group",
                "member_id": "m",
                "member_epoch": 0,
                "subscribed_topic_names": ["victim-topic"],
            },
            GROUP_DENIED,
        ),
        K.SHARE_GROUP_DESCRIBE: (1, {"group_ids": ["victim-group"]}, GROUP_DENIED),
        K.SHARE_FETCH: (
            1,
            {
                "group_id": "victim-group",
                "member_id": "m",
                "share_session_epoch": 0,
                "max_wait": datetime.timedelta(0),
                "min_bytes": 1,
                "max_bytes": 1 << 20,
                "max_records": 10,
                "batch_size": 10,
                "topics": [],
            },
            GROUP_DENIED,
        ),
        K.SHARE_ACKNOWLEDGE: (
            1,
            {"group_id": "victim-group", "member_id": "m", "share_session_epoch": 1, "topics": []},
            GROUP_DENIED,
        ),
        K.INITIALIZE_SHARE_GROUP_STATE: (
            0,
            share_state([{"partition": 0, "state_epoch": 1, "start_offset": 0}]),
            CLUSTER_DENIED,
        ),
        K.READ_SHARE_GROUP_STATE: (
            0,
            share_state([{"partition": 0, "leader_epoch": 0}]),
            CLUSTER_DENIED,
        ),
        K.WRITE_SHARE_GROUP_STATE: (
            0,
            share_state(
                [
                    {
                        "partition": 0,
                        "state_epoch": 1,
                        "leader_epoch": 0,
                        "start_offset": 0,
                        "state_batches": [],
                    }
                ]
            ),
            CLUSTER_DENIED,
        ),
        K.DELETE_SHARE_GROUP_STATE: (0, share_state([{"partition": 0}]), CLUSTER_DENIED),
        K.READ_SHARE_GROUP_STATE_SUMMARY: (
            0,
            share_state([{"partition": 0, "leader_epoch": 0}]),
            CLUSTER_DENIED,
        ),
        K.DESCRIBE_SHARE_GROUP_OFFSETS: (
            0,
            {"groups": [{"group_id": "victim-group", "topics": None}]},
            GROUP_DENIED,
        ),
        K.ALTER_SHARE_GROUP_OFFSETS: (0, {"group_id": "victim-group", "topics": []}, GROUP_DENIED),
        K.DELETE_SHARE_GROUP_OFFSETS: (0, {"group_id": "victim-group", "topics": []}, GROUP_DENIED),
    }


def _codes(value) -> set[int]:
    import dataclasses

    out: set[int] = set()
    if dataclasses.is_dataclass(value):
        for f in dataclasses.fields(value):
            if f.name in ("error_code", "partition_error_code"):
                out.add(int(getattr(value, f.name)))
            else:
                out |= _codes(getattr(value, f.name))
    elif isinstance(value, tuple):
        for item in value:
            out |= _codes(item)
    return out


async def test_every_advertised_api_refuses_a_user_without_acls(secured, victim):
    """The rules are enforced, not just written down: a principal with no ACL at all sends each
    advertised API (but those Kafka does not check) a request about the victim's resources and
    is refused with the rule's error code, or sees nothing in a listing. A new API must bring
    its probe."""
    _, pid, epoch = victim
    probes = _probes(pid, epoch)
    async with secured.connect(MALLORY) as conn:
        advertised = sorted(conn.api_versions)
        unprobed = {ApiKey(k).name for k in advertised if k not in probes}
        assert unprobed == UNCHECKED  # DescribeCluster's authorized operations: below
        not_refused = {}
        for key in advertised:
            if key not in probes:
                continue
            version, body, expected = probes[key]
            response = await conn.send(key, body, version)
            if callable(expected):
                ok = expected(response)
            else:
                ok = int(expected) in _codes(response)
            if not ok:
                not_refused[ApiKey(key).name] = response
        cluster = await conn.send(
            ApiKey.DESCRIBE_CLUSTER, {"include_cluster_authorized_operations": True}, 0
        )
        assert cluster.cluster_authorized_operations == 0
    assert not_refused == {}


# ---------------------------------------------------------------------- the end of it


async def test_the_victim_commits_and_the_refusals_are_logged(secured, victim):
    # after every other test of the module: pytest runs them in file order
    producer, pid, epoch = victim
    # one refusal of each kind checked below, made here too: under xdist's per-test
    # distribution the module's other tests may run on another worker's broker
    (state,) = await describe(secured, MALLORY, ["victim-tx"])
    assert int(state.error_code) == TXN_DENIED
    marker = {
        "producer_id": pid,
        "producer_epoch": epoch,
        "transaction_result": True,
        "topics": [{"name": "victim-topic", "partition_indexes": [0]}],
        "coordinator_epoch": 0,
    }
    response = await secured.send(MALLORY, ApiKey.WRITE_TXN_MARKERS, {"markers": [marker]})
    assert partition_codes(response.markers[0].topics) == {("victim-topic", 0): CLUSTER_DENIED}
    response = await secured.send(
        "alice",
        ApiKey.OFFSET_FETCH,
        {
            "group_id": "victim-group",
            "topics": [{"name": "victim-topic", "partition_indexes": [0]}],
        },
        7,
    )
    assert int(response.error_code) == GROUP_DENIED
    await asyncio.to_thread(producer.commit_transaction, DEADLINE_S)
    # commit_transaction returns once PrepareCommit is written; the markers, then
    # CompleteCommit, follow
    deadline = time.monotonic() + DEADLINE_S
    (state,) = await describe(secured, None, ["victim-tx"])
    while state.transaction_state == "PrepareCommit" and time.monotonic() < deadline:
        await asyncio.sleep(0.05)  # polling interval: the assertion below fails at the deadline
        (state,) = await describe(secured, None, ["victim-tx"])
    assert (state.transaction_state, state.producer_id) == ("CompleteCommit", pid)
    log = secured.broker.log_text()
    denied = [line for line in log.splitlines() if "operation denied" in line]
    assert any("User:mallory" in line and "TRANSACTIONAL_ID" in line for line in denied)
    assert any("User:mallory" in line and "CLUSTER_ACTION" in line for line in denied)
    assert any("User:alice" in line and "GROUP" in line for line in denied)
    assert MALLORY_PASSWORD not in log and USERS["alice"] not in log
