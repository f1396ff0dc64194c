"""The timing wheel against a plain model: nothing early, nothing later than one tick, nothing
lost or repeated, whatever the delays, clock jumps and the wheel's block boundaries."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tidelog.storage.timer_wheel import LEVELS, WHEEL_BITS, TimingWheel

TICK_MS = 100
# Delays from "already due" to past the level-3 span; steps from none to hours.
delays = st.one_of(
    st.integers(-1_000, 2_000), st.integers(0, 10**6), st.integers(0, 10**9)
)
steps = st.sampled_from([0, 1, 50, 99, 100, 101, 1_000, 6_400, 100_000, 10**7])


@given(
    start_ms=st.integers(0, 10**13),
    script=st.lists(st.tuples(st.lists(delays, max_size=6), steps), max_size=60),
)
def test_wheel_matches_model(start_ms: int, script: list[tuple[list[int], int]]) -> None:
    wheel = TimingWheel(start_ms, TICK_MS)
    pending: dict[int, int] = {}
    now_ms = start_ms
    next_id = 0
    for added, step in script:
        for delay in added:
            wheel.add(now_ms + delay, next_id, next_id % 3)
            pending[next_id] = now_ms + delay
            next_id += 1
        now_ms += step
        for due_ms, timer_id, tag in wheel.advance(now_ms):
            assert due_ms <= now_ms, "expired early"
            assert pending.pop(timer_id) == due_ms, "unknown or repeated entry"
            assert tag == timer_id % 3
        last_expired_tick = (now_ms + 1) // TICK_MS - 1
        # Everything still pending is due after the last expired tick: at most one tick late.
        assert all(due // TICK_MS > last_expired_tick for due in pending.values())
        assert len(wheel) == len(pending)
    assert sorted(t for _, t, _ in wheel.entries()) == sorted(pending)
    assert wheel.min_timer_id() == (min(pending) if pending else None)
    assert wheel.next_due_ms() == (min(pending.values()) if pending else None)
    per_tag: dict[int, int] = {}
    for timer_id, due_ms in pending.items():
        per_tag[timer_id % 3] = min(due_ms, per_tag.get(timer_id % 3, due_ms))
    assert wheel.next_due_per_tag(set(per_tag)) == per_tag


def test_top_block_boundary_is_crossed_on_time() -> None:
    """An entry past the 2^30-tick boundary waits in the overflow slot and still expires on
    its tick."""
    boundary_tick = 1 << (WHEEL_BITS * LEVELS)
    start_ms = (boundary_tick - 10) * TICK_MS
    wheel = TimingWheel(start_ms, TICK_MS)
    due_ms = (boundary_tick + 100) * TICK_MS + 7
    wheel.add(due_ms, 1)
    assert not wheel.advance(due_ms - 1)
    assert [t for _, t, _ in wheel.advance(due_ms + TICK_MS)] == [1]


def test_far_entries_and_a_long_jump() -> None:
    """A day of 100 ms ticks with entries spread over it is crossed in one call."""
    wheel = TimingWheel(0, TICK_MS)
    for index in range(1_000):
        wheel.add(index * 86_400, index)
    expired = wheel.advance(86_400_000)
    assert sorted(expired.timer_ids) == list(range(1_000))
    assert len(wheel) == 0
