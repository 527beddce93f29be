"""bench/phase_load.py: the per-phase figures of the producer and consumer that run through
bench/scale_cluster.py's phases, from recorded samples and from a short run on a real broker."""

from __future__ import annotations

import math

import phase_load
from confluent_kafka.admin import AdminClient, NewTopic
from hypothesis import given
from hypothesis import strategies as st

from kafkalite.testing import wait_for


@given(st.lists(st.floats(0, 10, allow_nan=False), min_size=1, max_size=200), st.floats(0.01, 1))
def test_percentile_is_a_sample_with_that_share_at_or_below_it(samples, fraction):
    value = phase_load.percentile(samples, fraction)
    assert value in samples
    at_or_below = sum(1 for s in samples if s <= value)
    assert at_or_below >= fraction * len(samples)
    # the nearest rank: one rank lower would not cover the share
    below = sum(1 for s in samples if s < value)
    assert below < fraction * len(samples)


def test_percentile_of_nothing_is_none():
    assert phase_load.percentile([], 0.99) is None


def test_records_belong_to_the_phase_they_were_sent_in_and_losses_are_counted():
    recorder = phase_load.LoadRecorder()
    recorder.sent(0, "kill", 10.0)
    recorder.sent(1, "kill", 10.1)
    recorder.sent(2, "restart", 11.0)
    recorder.sent(3, "restart", 11.5)
    # acknowledged after the phase changed: still the phase it was sent in
    recorder.delivered(0, None, 10.05)
    recorder.delivered(1, None, 12.1)
    recorder.delivered(2, None, 11.2)
    recorder.delivered(3, "_MSG_TIMED_OUT", 20.0)
    recorder.received(0, 10.0, 10.5)
    recorder.received(0, 10.0, 10.6)  # read twice: one duplicate, one record
    recorder.received(2, 11.0, 11.3)

    report = recorder.report()
    kill, restart = report["by_phase"]["kill"], report["by_phase"]["restart"]
    assert (kill["sent"], kill["acknowledged"], kill["failed"]) == (2, 2, {})
    assert kill["produce"] == {"p50_ms": 50.0, "p99_ms": 2000.0, "max_ms": 2000.0}
    assert kill["end_to_end"] == {"p50_ms": 500.0, "p99_ms": 500.0, "max_ms": 500.0}
    assert (restart["sent"], restart["acknowledged"]) == (2, 1)
    assert restart["failed"] == {"_MSG_TIMED_OUT": 1}
    assert report["duplicates_consumed"] == 1
    # sequence 1 was acknowledged and never read; 3 failed, so it is not a loss
    assert report["acknowledged_lost"] == 1 and report["lost_sample"] == [1]
    assert list(report["by_phase"]) == ["kill", "restart"]
    # the slowest first, with the second of the phase each was sent in
    assert kill["slowest_sends"] == [[0.1, 2000.0], [0.0, 50.0]]


def test_a_value_carries_its_sequence_and_send_time():
    assert phase_load.decode(phase_load.encode(42, 1234.5)) == (42, 1234.5)


@given(
    st.floats(min_value=-1.0, max_value=0.02, allow_nan=False),
    st.sampled_from([0.001, 0.005, 0.01]),
)
def test_a_poll_waits_whole_milliseconds_unless_a_send_is_due(until_next, interval):
    timeout = phase_load.poll_timeout_s(until_next, interval)
    # what confluent-kafka makes of it: the timeout truncated to whole milliseconds
    waited_ms = int(timeout * 1000)
    if until_next <= 0:
        assert timeout == 0.0
    else:
        # never a poll that returns at once while the send is not due (the loop would spin)
        assert waited_ms >= 1
        assert waited_ms == math.ceil(min(interval, until_next) * 1000)


def test_a_short_run_on_a_real_broker_loses_nothing_and_reports_each_phase(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("load", 2, 1)])["load"].result(30)
    phase = ["first"]
    load = phase_load.PhaseLoad(broker.bootstrap, "load", lambda: phase[0], rate=200).start()

    def wait_for_acknowledged(count: int) -> None:
        wait_for(lambda: len(load.recorder.acknowledged) >= count, f"{count} acknowledged", 60)

    wait_for_acknowledged(20)
    phase[0] = "second"
    acknowledged_in_first = len(load.recorder.acknowledged)
    wait_for_acknowledged(acknowledged_in_first + 20)
    report = load.finish(60)

    assert report["errors"] == []
    assert report["acknowledged_lost"] == 0
    assert report["acknowledged"] == report["sent"] == report["consumed"]
    assert set(report["by_phase"]) == {"first", "second"}
    for figures in report["by_phase"].values():
        assert figures["acknowledged"] > 0 and figures["failed"] == {}
        assert figures["produce"]["p99_ms"] is not None
        assert figures["end_to_end"]["p99_ms"] is not None
