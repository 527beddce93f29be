"""The admin handlers' shared waits."""

from kafkalite.apis.admin_common import wait_for_all, wait_until


def after(calls: int):
    """A condition that holds from its ``calls``-th poll on; counts its polls."""
    polls = []

    def condition() -> bool:
        polls.append(None)
        return len(polls) >= calls

    condition.polls = polls
    return condition


async def test_one_deadline_for_every_condition_of_a_request():
    """Each condition is polled until it holds (then no more); those that never do are
    reported False once the request's single deadline passes, not after one timeout each."""
    quick, slow, never = after(1), after(3), after(10**9)
    assert await wait_for_all([quick, slow, never], timeout_ms=50) == [True, True, False]
    assert len(quick.polls) == 1 and len(slow.polls) == 3
    assert await wait_for_all([after(2), after(4)], timeout_ms=60_000) == [True, True]
    assert await wait_until(after(2), timeout_ms=60_000) is True
    assert await wait_for_all([], timeout_ms=0) == []
