"""Kafka 4.3's assignment batching and offload (KIP-1263) on the group coordinator core: a
consumer group's target is recomputed at most once per ``group.consumer.assignment.interval.ms``
and, with ``group.consumer.assignor.offload.enable``, off the heartbeat path, so the heartbeat
that changed the group is answered with the previous target."""

from __future__ import annotations

import pytest

from kafkalite.group.config import GroupConfig, OffsetConfig, from_properties
from kafkalite.group.consumer_group import ConsumerGroup, ConsumerGroupLoader
from kafkalite.group.core import HeartbeatResult
from kafkalite.group.records import (
    ConsumerGroupTargetAssignmentMetadataValue,
    consumer_group_record,
    decode_record,
)
from kafkalite.protocol.errors import ErrorCode
from kafkalite.share.group_configs import GroupConfigBounds, validate

from .cg_support import Topics
from .harness import NUM_PARTITIONS, Harness

INTERVAL_MS = 1000


def harness(**config) -> Harness:
    return Harness(
        group_config=GroupConfig(
            group_initial_rebalance_delay_ms=0,
            group_consumer_session_timeout_ms=45_000,
            group_consumer_heartbeat_interval_ms=500,
            **config,
        ),
        offset_config=OffsetConfig(offsets_topic_num_partitions=NUM_PARTITIONS),
    )


def heartbeat(h: Harness, topics, member, epoch, group="g", **kw) -> HeartbeatResult:
    t = h.token()
    if epoch == 0:
        kw.setdefault("subscribed_topic_names", ["t"])
        kw.setdefault("rebalance_timeout_ms", 30000)
        kw.setdefault("owned", {})
    h.apply(h.core.consumer_group_heartbeat(t, group, member, epoch, topics=topics, **kw))
    result = h.response(t)
    assert result is not None and result.error is ErrorCode.NONE, result
    return result


def partitions(result: HeartbeatResult, topics: Topics, name: str = "t") -> set[int]:
    return set((result.assignment or {}).get(topics.ids[name], ()))


def test_kafkas_defaults():
    gc = GroupConfig()
    assert gc.group_consumer_assignment_interval_ms == 1000
    assert gc.group_consumer_min_assignment_interval_ms == 0
    assert gc.group_consumer_max_assignment_interval_ms == 15000
    assert gc.group_consumer_assignor_offload_enable is True


def test_a_new_groups_first_member_gets_the_empty_epoch_then_its_assignment():
    h = harness()  # Kafka's defaults: 1 s interval, assignor offloaded
    topics = Topics(t=4)
    first = heartbeat(h, topics, "a", 0)
    # the join is answered with the target before the assignor ran: epoch 1's empty one
    # (never the joining epoch 0); the offloaded assignor ran right after the answer
    assert first.member_epoch == 1 and first.assignment == {}
    assert h.core.groups["g"].consumer.assignment_epoch == 2
    second = heartbeat(h, topics, "a", 1, owned={})
    assert second.member_epoch == 2 and partitions(second, topics) == {0, 1, 2, 3}


def test_the_heartbeat_changing_the_subscription_does_not_carry_the_new_target():
    h = harness()
    topics = Topics(t=2, u=2)
    heartbeat(h, topics, "a", 0)
    stable = heartbeat(h, topics, "a", 1, owned={})
    owned = {topics.ids["t"]: frozenset({0, 1})}
    assert partitions(stable, topics) == {0, 1}
    h.advance(INTERVAL_MS)
    # a subscription change bumps the group epoch; the answer keeps the previous target (no
    # revocation in it), the assignor runs off the heartbeat path
    changed = heartbeat(h, topics, "a", 2, subscribed_topic_names=["u"], owned=owned)
    group = h.core.groups["g"].consumer
    assert changed.member_epoch == 2 and changed.assignment is None
    assert group.group_epoch == group.assignment_epoch == 3
    revoke = heartbeat(h, topics, "a", 2, owned=owned)
    assert revoke.member_epoch == 2 and revoke.assignment == {}  # t's partitions go first
    done = heartbeat(h, topics, "a", 2, owned={})
    assert done.member_epoch == 3 and partitions(done, topics, "u") == {0, 1}


def test_changes_within_the_interval_are_assigned_together_once_it_passed():
    h = harness(group_consumer_assignor_offload_enable=False)
    topics = Topics(t=4)
    heartbeat(h, topics, "a", 0)  # a new group: the interval counts from no run at all
    group = h.core.groups["g"].consumer
    assert group.assignment_epoch == 2
    h.advance(100)
    b = heartbeat(h, topics, "b", 0)
    h.advance(100)
    c = heartbeat(h, topics, "c", 0)
    # within the interval: both joined at the previous target (nothing for them yet)
    assert b.assignment == {} and c.assignment == {}
    assert (group.group_epoch, group.assignment_epoch) == (4, 2)
    h.advance(INTERVAL_MS - 201)
    heartbeat(h, topics, "b", 2, owned={})
    assert group.assignment_epoch == 2  # nothing runs before the interval has passed
    h.advance(1)
    # the next heartbeat runs the assignor once, for both joins, and gets its target
    b = heartbeat(h, topics, "b", 2, owned={})
    assert group.assignment_epoch == 4 and b.member_epoch == 4
    assert sorted(len(group.target[m][topics.ids["t"]]) for m in "abc") == [1, 1, 2]


def test_without_offload_a_due_assignment_is_computed_in_the_heartbeat():
    h = harness(group_consumer_assignor_offload_enable=False)
    topics = Topics(t=2)
    a = heartbeat(h, topics, "a", 0)
    assert a.member_epoch == 2 and partitions(a, topics) == {0, 1}


def test_the_group_level_settings_override_the_brokers():
    h = harness()
    topics = Topics(t=2)
    a = heartbeat(h, topics, "a", 0, assignment_interval_ms=0, assignor_offload=False)
    assert a.member_epoch == 2 and partitions(a, topics) == {0, 1}


def test_the_group_level_session_timeout_and_heartbeat_interval_override_the_brokers():
    """consumer.session.timeout.ms and consumer.heartbeat.interval.ms of a group (GROUP config
    resources) replace the broker's group.consumer.* settings for that group only, as Kafka's
    consumerGroupSessionTimeoutMs / consumerGroupHeartbeatIntervalMs read them."""
    h = harness()  # the broker's: 45 s session, 500 ms heartbeat interval
    topics = Topics(t=2)
    own = dict(session_timeout_ms=60_000, heartbeat_interval_ms=7_000)
    heartbeat(h, topics, "a", 0, group="own", **own)
    heartbeat(h, topics, "b", 0, group="brokers")
    assert h.core.consumer_heartbeat_interval_ms("own") == 7_000
    assert h.core.consumer_heartbeat_interval_ms("brokers") == 500
    h.advance(50_000)  # past the broker's session timeout, within the group's own
    assert "a" in h.core.groups["own"].consumer.members
    assert "b" not in h.core.groups["brokers"].consumer.members
    h.advance(10_001)
    assert "a" not in h.core.groups["own"].consumer.members


def test_a_deleted_group_leaves_no_settings_behind():
    h = harness()
    topics = Topics(t=2)
    heartbeat(h, topics, "a", 0, group="gone", session_timeout_ms=50_000)
    assert h.core.consumer_session_timeout_ms("gone") == 50_000
    heartbeat(h, topics, "a", -1, group="gone")  # leaves: the group is empty
    t = h.token()
    h.apply(h.core.delete_groups(t, ["gone"]))
    assert h.response(t) == {"gone": ErrorCode.NONE}
    assert h.core.consumer_session_timeout_ms("gone") == 45_000  # the broker's again
    assert "gone" not in h.core._session_overrides
    assert "gone" not in h.core._assignment_overrides


def test_a_member_leaving_leaves_the_target_to_the_next_run():
    h = harness(group_consumer_assignor_offload_enable=False)
    topics = Topics(t=2)
    heartbeat(h, topics, "a", 0)
    h.advance(INTERVAL_MS)
    heartbeat(h, topics, "b", 0)
    group = h.core.groups["g"].consumer
    h.advance(INTERVAL_MS)
    heartbeat(h, topics, "b", -1)
    assert group.group_epoch > group.assignment_epoch
    h.advance(INTERVAL_MS)
    assert group.group_epoch > group.assignment_epoch  # runs only at a heartbeat
    a = group.members["a"]
    heartbeat(h, topics, "a", a.member_epoch, owned=dict(a.assigned))
    assert group.group_epoch == group.assignment_epoch
    # the last member leaving: the empty group's assignment epoch catches up at once
    last = group.members["a"]
    heartbeat(h, topics, "a", -1, owned=dict(last.assigned))
    assert group.is_empty() and group.group_epoch == group.assignment_epoch


def test_the_assignment_timestamp_is_written_and_replayed():
    g = ConsumerGroup("g")
    topics = Topics(t=1)
    _, records = g.heartbeat(
        topics,
        "a",
        0,
        rebalance_timeout_ms=1,
        subscribed_topic_names=["t"],
        owned={},
        now_ms=123_456,
    )
    values = [decode_record(k, v)[1] for k, v in records]
    metadata = [v for v in values if isinstance(v, ConsumerGroupTargetAssignmentMetadataValue)]
    # epoch 1's placeholder (never computed: timestamp 0), then the first run's
    assert metadata == [
        ConsumerGroupTargetAssignmentMetadataValue(1, 0),
        ConsumerGroupTargetAssignmentMetadataValue(2, 123_456),
    ]
    loader = ConsumerGroupLoader("g")
    for k, v in records:
        key, value = decode_record(k, v)
        loader.apply(key, value)
    rebuilt = loader.build("uniform")
    assert rebuilt is not None and rebuilt.assignment_timestamp_ms == 123_456


def test_the_timestamp_is_kafkas_tagged_field_zero():
    _, value = consumer_group_record("g", ConsumerGroupTargetAssignmentMetadataValue(7, 5))
    # version 0, epoch 7, one tagged field: tag 0, 8 bytes, int64 5
    assert value == bytes.fromhex("0000" + "00000007" + "01" + "00" + "08" + "0000000000000005")
    # without it (a Kafka before 4.3, or timestamp 0) the record is the plain epoch
    _, plain = consumer_group_record("g", ConsumerGroupTargetAssignmentMetadataValue(7))
    assert plain == bytes.fromhex("0000" + "00000007" + "00")
    assert decode_record(b"\x00\x06\x00\x01g", plain)[1] == (
        ConsumerGroupTargetAssignmentMetadataValue(7, 0)
    )


def test_a_classic_member_rejoins_only_once_a_newer_target_exists():
    g = ConsumerGroup("g")
    topics = Topics(t=2)
    g.heartbeat(topics, "a", 0, rebalance_timeout_ms=1, subscribed_topic_names=["t"], owned={})
    member = g.members["a"]
    # the group epoch moves (another member joins) but the target lags behind it
    g.heartbeat(
        topics,
        "b",
        0,
        rebalance_timeout_ms=1,
        subscribed_topic_names=["t"],
        owned={},
        defer_assignment=True,
    )
    assert g.group_epoch > g.assignment_epoch == member.member_epoch
    assert not g.classic_must_rejoin(member)
    g.assign(topics, 1)
    assert g.classic_must_rejoin(member)


@pytest.mark.parametrize(
    ("props", "key"),
    [
        ({"group.consumer.assignment.interval.ms": "-1"}, "group.consumer.assignment.interval.ms"),
        (
            {"group.consumer.assignment.interval.ms": "20000"},
            "group.consumer.assignment.interval.ms",
        ),
        (
            {"group.consumer.min.assignment.interval.ms": "2000"},
            "group.consumer.assignment.interval.ms",
        ),
        (
            {
                "group.consumer.min.assignment.interval.ms": "5",
                "group.consumer.max.assignment.interval.ms": "4",
                "group.consumer.assignment.interval.ms": "4",
            },
            "group.consumer.max.assignment.interval.ms",
        ),
        ({"group.consumer.assignor.offload.enable": "maybe"}, "group.consumer.assignor"),
    ],
)
def test_bad_settings_name_their_key(props, key):
    with pytest.raises(ValueError) as e:
        from_properties(props)
    assert key in str(e.value)


def test_properties_parse():
    gc, _ = from_properties(
        {
            "group.consumer.assignment.interval.ms": "0",
            "group.consumer.assignor.offload.enable": "false",
        }
    )
    assert gc.group_consumer_assignment_interval_ms == 0
    assert gc.group_consumer_assignor_offload_enable is False


def test_the_group_level_keys_are_validated_against_the_brokers_bounds():
    defaults = {
        "consumer.session.timeout.ms": "45000",
        "consumer.heartbeat.interval.ms": "5000",
        "consumer.assignment.interval.ms": "1000",
        "consumer.assignor.offload.enable": "true",
        "share.session.timeout.ms": "45000",
        "share.heartbeat.interval.ms": "5000",
        "share.record.lock.duration.ms": "30000",
        "share.auto.offset.reset": "latest",
        "share.isolation.level": "read_uncommitted",
    }
    bounds = GroupConfigBounds()
    assert validate({"consumer.assignment.interval.ms": "0"}, defaults, bounds) is None
    assert validate({"consumer.assignor.offload.enable": "false"}, defaults, bounds) is None
    too_long = validate({"consumer.assignment.interval.ms": "15001"}, defaults, bounds)
    assert too_long is not None and "group.consumer.max.assignment.interval.ms" in too_long
    negative = validate({"consumer.assignment.interval.ms": "-1"}, defaults, bounds)
    assert negative is not None and "at least 0" in negative
    not_bool = validate({"consumer.assignor.offload.enable": "yes"}, defaults, bounds)
    assert not_bool is not None and "consumer.assignor.offload.enable" in not_bool


def test_with_offload_a_change_within_the_interval_waits_for_it():
    h = harness()
    topics = Topics(t=2)
    heartbeat(h, topics, "a", 0)
    group = h.core.groups["g"].consumer
    h.advance(10)
    b = heartbeat(h, topics, "b", 0)
    assert b.assignment == {} and group.group_epoch == group.assignment_epoch + 1
    h.advance(INTERVAL_MS - 11)
    b = heartbeat(h, topics, "b", 2, owned={})
    assert group.state == "Assigning"
    h.advance(1)
    # the heartbeat after the interval starts the assignor, after its own answer
    b = heartbeat(h, topics, "b", 2, owned={})
    assert b.assignment is None and b.member_epoch == 2
    assert group.state == "Reconciling" and set(group.target) == {"a", "b"}


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("group.consumer.assignment.interval.ms=-1", "group.consumer.assignment.interval.ms"),
        ("group.consumer.assignment.interval.ms=20000", "group.consumer.assignment.interval.ms"),
        (
            "group.consumer.max.assignment.interval.ms=-5",
            "group.consumer.max.assignment.interval.ms",
        ),
        ("group.consumer.assignor.offload.enable=maybe", "group.consumer.assignor.offload.enable"),
    ],
)
def test_the_broker_refuses_to_start_on_a_bad_value_naming_the_key(override, key):
    from kafkalite.config import BrokerConfig, ConfigError

    with pytest.raises(ConfigError) as info:
        BrokerConfig.load(overrides=[override], environ={})
    assert key in str(info.value)


def test_the_broker_config_reaches_the_coordinator():
    from kafkalite.config import BrokerConfig
    from kafkalite.group.config import from_broker_config

    config = BrokerConfig.load(
        overrides=[
            "group.consumer.assignment.interval.ms=250",
            "group.consumer.assignor.offload.enable=false",
        ],
        environ={},
    )
    gc, _ = from_broker_config(config)
    assert gc.group_consumer_assignment_interval_ms == 250
    assert gc.group_consumer_assignor_offload_enable is False
