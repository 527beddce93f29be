"""TimerQueue against a dict oracle under hypothesis-generated set/cancel/pop sequences."""

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.group.timers import TimerQueue

ops = st.lists(
    st.one_of(
        st.tuples(st.just("set"), st.integers(0, 6), st.integers(0, 50)),
        st.tuples(st.just("cancel"), st.integers(0, 6), st.just(0)),
        st.tuples(st.just("pop"), st.just(0), st.integers(0, 50)),
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(ops)
def test_timer_queue_matches_oracle(operations):
    q = TimerQueue()
    oracle: dict[int, tuple[int, int]] = {}  # key -> (deadline, set order)
    order = 0
    for op, key, value in operations:
        if op == "set":
            q.set(key, value)
            oracle[key] = (value, order)
            order += 1
        elif op == "cancel":
            q.cancel(key)
            oracle.pop(key, None)
        else:
            due = sorted((d, o, k) for k, (d, o) in oracle.items() if d <= value)
            assert q.pop_due(value) == [k for _, _, k in due]
            for _, _, k in due:
                del oracle[k]
        assert len(q) == len(oracle)
        expected_next = min((d for d, _ in oracle.values()), default=None)
        assert q.next_deadline() == expected_next
        for k in range(7):
            assert (k in q) == (k in oracle)
            assert q.deadline(k) == (oracle[k][0] if k in oracle else None)


def test_many_resets_keep_the_heap_small():
    q = TimerQueue()
    for i in range(10_000):
        q.set("k", i)
    assert len(q._heap) < 300
    assert q.pop_one_due(5) is None
    assert q.pop_one_due(9_999) == "k"
    assert q.next_deadline() is None
