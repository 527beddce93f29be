"""kafkalite.spark.options: Spark's Kafka source options, parsed and planned without Spark."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalite.spark import options as opt
from kafkalite.spark.options import EARLIEST, LATEST, OffsetRange, OptionError, TopicPartition

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


def test_exactly_one_subscription_option():
    with pytest.raises(OptionError, match="exactly one of .* must be specified"):
        opt.subscription({})
    with pytest.raises(OptionError, match="not several"):
        opt.subscription({"subscribe": "a", "assign": '{"a":[0]}'})
    assert opt.subscription({"Subscribe": "a, b"}).topics == ("a", "b")  # case-insensitive
    assign = opt.subscription({"assign": '{"a":[0,2],"b":[1]}'})
    assert assign.select({}) == [
        TopicPartition("a", 0),
        TopicPartition("a", 2),
        TopicPartition("b", 1),
    ]
    with pytest.raises(OptionError, match="option assign must be JSON"):
        opt.subscription({"assign": "a:0"})


def test_pattern_matches_whole_names_and_skips_internal_topics():
    sub = opt.subscription({"subscribePattern": "ev.*"})
    counts = {"events": 2, "xevents": 1, "ev": 1, "__consumer_offsets": 50}
    assert sub.select(counts) == [
        TopicPartition("ev", 0), TopicPartition("events", 0), TopicPartition("events", 1),
    ]  # fmt: skip
    assert opt.subscription({"subscribePattern": "__.*"}).select(counts) == []
    with pytest.raises(OptionError, match="not a regular expression"):
        opt.subscription({"subscribePattern": "("})


def test_offset_specs_follow_sparks_rules():
    assert opt.offset_spec({}, "starting", streaming=False).kind == "earliest"
    assert opt.offset_spec({}, "starting", streaming=True).kind == "latest"
    assert opt.offset_spec({}, "ending", streaming=False).kind == "latest"
    with pytest.raises(OptionError, match="starting offset can't be latest for batch"):
        opt.offset_spec({"startingOffsets": "latest"}, "starting", streaming=False)
    with pytest.raises(OptionError, match="ending offset can't be earliest for batch"):
        opt.offset_spec({"endingOffsets": "earliest"}, "ending", streaming=False)
    with pytest.raises(OptionError, match="t-1 can't be latest"):
        opt.offset_spec({"startingOffsets": '{"t":{"0":-2,"1":-1}}'}, "starting", streaming=False)
    spec = opt.offset_spec({"startingOffsets": '{"t":{"0":5,"1":-1}}'}, "starting", streaming=True)
    assert spec.offsets == {TP0: 5, TP1: LATEST}
    both = {"startingTimestamp": "1000", "startingOffsetsByTimestamp": '{"t":{"0":5}}',
            "startingOffsets": "earliest"}  # fmt: skip
    assert opt.offset_spec(both, "starting", streaming=False).kind == "timestamp"
    del both["startingTimestamp"]
    assert opt.offset_spec(both, "starting", streaming=False).timestamps == {TP0: 5}
    with pytest.raises(OptionError, match="startingOffsets must be earliest, latest or JSON"):
        opt.offset_spec({"startingOffsets": "first"}, "starting", streaming=False)
    with pytest.raises(OptionError, match="endingOffsets is not supported for streaming"):
        opt.check_streaming_options({"endingOffsets": "latest"})
    with pytest.raises(OptionError, match="must be error or latest"):
        opt.by_timestamp_strategy({"startingOffsetsByTimestampStrategy": "earliest"})
    assert EARLIEST == -2 and LATEST == -1


def test_kafka_params_strip_the_prefix_and_refuse_owned_settings():
    params = opt.kafka_params({"kafka.bootstrap.servers": "h:1", "kafka.client.id": "x", "a": "b"})
    assert params == {"bootstrap.servers": "h:1", "client.id": "x"}
    with pytest.raises(OptionError, match="kafka.bootstrap.servers must be set"):
        opt.kafka_params({"subscribe": "t"})
    with pytest.raises(OptionError, match="'auto.offset.reset' is not supported"):
        opt.kafka_params({"kafka.bootstrap.servers": "h:1", "kafka.auto.offset.reset": "none"})
    with pytest.raises(OptionError, match="minPartitions must be a positive integer"):
        opt.get_positive_int({"minPartitions": "0"}, "minPartitions")
    with pytest.raises(OptionError, match="failOnDataLoss must be true or false"):
        opt.get_bool({"failOnDataLoss": "yes"}, "failOnDataLoss", True)


def test_min_partitions_split_like_spark():
    ranges = [OffsetRange("t", p, 0, 1000) for p in range(4)]
    assert opt.split_ranges(ranges, None) == ranges
    assert opt.split_ranges(ranges, 3) == ranges
    split = opt.split_ranges(ranges, 16)
    assert len(split) == 16 and all(r.size == 250 for r in split)
    # a small range stays whole and counts as one task; the big ones share the rest
    skewed = [OffsetRange("t", 0, 1, 500), OffsetRange("t", 1, 1, 2)]
    assert opt.split_ranges(skewed, 3) == [
        OffsetRange("t", 0, 1, 250), OffsetRange("t", 0, 250, 500), OffsetRange("t", 1, 1, 2),
    ]  # fmt: skip
    assert opt.split_ranges([OffsetRange("t", 0, 5, 5)], 4) == []  # empty ranges dropped


@given(
    sizes=st.lists(st.integers(0, 10_000), min_size=1, max_size=8),
    min_partitions=st.none() | st.integers(1, 64),
)
def test_split_ranges_cover_each_range_exactly(sizes, min_partitions):
    ranges = [OffsetRange("t", p, 100, 100 + size) for p, size in enumerate(sizes)]
    split = opt.split_ranges(ranges, min_partitions)
    for r in ranges:
        pieces = [s for s in split if s.partition == r.partition]
        assert all(s.size > 0 for s in pieces)
        if r.size == 0:
            assert pieces == []
            continue
        assert pieces[0].start == r.start and pieces[-1].end == r.end
        assert all(a.end == b.start for a, b in zip(pieces, pieces[1:], strict=False))


def test_rate_limit_shares_the_limit_in_proportion():
    start = {TP0: 0, TP1: 100}
    end = {TP0: 900, TP1: 200}
    assert opt.rate_limit(start, end, 100) == {TP0: 90, TP1: 110}
    assert opt.rate_limit(start, end, 10_000) == end
    # a partition with a tiny share still gets one record
    assert opt.rate_limit({TP0: 0, TP1: 0}, {TP0: 10_000, TP1: 1}, 10) == {TP0: 9, TP1: 1}
    assert opt.rate_limit({TP0: 5}, {TP0: 5}, 10) == {TP0: 5}


def test_offsets_json_round_trip():
    offsets = {TP1: 7, TP0: 3, TopicPartition("a", 0): 1}
    data = opt.offsets_to_json(offsets)
    assert data == {"a": {"0": 1}, "t": {"0": 3, "1": 7}}
    assert opt.offsets_from_json(data) == offsets
