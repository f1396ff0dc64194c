"""The leader's ISR and high-watermark rules (broker/replication/isr.py), no loop or brokers."""

from __future__ import annotations

from tidelog.broker.replication import isr
from tidelog.cluster.placement import FollowerState
from tidelog.errors import ErrorCode

LEADER = 1


def _leader(isr_members: tuple[int, ...] = (1, 2, 3), high_watermark: int = 0) -> isr.LeaderIsr:
    state = isr.LeaderIsr(replicas=(1, 2, 3), isr=isr_members, high_watermark=high_watermark)
    isr.become_leader(state, LEADER, log_end_offset=10, now_ms=1000)
    return state


def test_become_leader_clamps_the_mark_and_seeds_followers_at_it() -> None:
    state = isr.LeaderIsr(replicas=(1, 2, 3), isr=(1, 2, 3), high_watermark=12,
                          pending_isr=(1, 2))
    isr.become_leader(state, LEADER, log_end_offset=10, now_ms=1000)
    assert state.high_watermark == 10 and state.pending_isr is None
    assert state.followers == {2: FollowerState(2, 10, 1000), 3: FollowerState(3, 10, 1000)}


def test_high_watermark_is_the_lowest_end_over_the_isr_and_only_moves_up() -> None:
    state = _leader()
    assert isr.next_high_watermark(state, LEADER, 10) is None  # followers hold it at 0
    isr.follower_fetched(state, 2, 7, 10, now_ms=1100, epoch_start_offset=0)
    assert isr.next_high_watermark(state, LEADER, 10) is None  # follower 3 still at 0
    isr.follower_fetched(state, 3, 5, 10, now_ms=1100, epoch_start_offset=0)
    assert isr.next_high_watermark(state, LEADER, 10) == 5
    state.high_watermark = 5
    assert isr.next_high_watermark(state, LEADER, 4) is None  # never backwards


def test_a_pending_expansion_holds_the_mark_for_the_joining_member() -> None:
    state = _leader(isr_members=(1, 2))
    isr.follower_fetched(state, 2, 10, 10, now_ms=1100, epoch_start_offset=0)
    assert isr.next_high_watermark(state, LEADER, 10) == 10
    state.pending_isr = (1, 2, 3)  # maximal ISR: 3 counts before the write commits
    assert isr.next_high_watermark(state, LEADER, 10) is None


def test_a_follower_joins_once_it_holds_the_mark_and_the_epoch_start() -> None:
    state = _leader(isr_members=(1, 2), high_watermark=8)
    assert isr.follower_fetched(state, 3, 7, 10, now_ms=1100, epoch_start_offset=0) is None
    assert isr.follower_fetched(state, 3, 8, 10, now_ms=1100, epoch_start_offset=9) is None
    assert isr.follower_fetched(state, 3, 9, 10, now_ms=1100, epoch_start_offset=9) == (1, 2, 3)
    state.pending_isr = (1, 2, 3)  # one change in flight at a time
    assert isr.follower_fetched(state, 3, 10, 10, now_ms=1200, epoch_start_offset=9) is None


def test_a_member_not_caught_up_within_the_lag_time_is_shrunk() -> None:
    state = _leader()
    isr.follower_fetched(state, 2, 10, 10, now_ms=3000, epoch_start_offset=0)
    assert isr.shrink_candidate(state, LEADER, now_ms=3500, replica_lag_time_max_ms=2000) == (
        1, 2)  # 3 last caught up at 1000 (its seed)
    assert isr.shrink_candidate(state, LEADER, now_ms=2500, replica_lag_time_max_ms=2000) is None
    state.pending_isr = (1, 2, 3)
    assert isr.shrink_candidate(state, LEADER, now_ms=9000, replica_lag_time_max_ms=2000) is None


def test_acks_outcome_and_follower_mark() -> None:
    assert isr.acks_outcome(2, 2) == ErrorCode.NONE
    assert isr.acks_outcome(1, 2) == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    assert isr.follower_high_watermark(5, 9, 7) == 7  # not past its own log end
    assert isr.follower_high_watermark(5, 3, 7) == 5  # never backwards
