"""A partition leader's ISR and high-watermark rules (Kafka's Partition: maybeExpandIsr,
maybeShrinkIsr, maybeIncrementLeaderHW). Pure: no event loop, no clock, no I/O; time and
offsets are passed in and decisions are returned. `replication.py` applies them: it writes an
ISR change to ZooKeeper first (and to its state only once written) and wakes acks=all waiters.

- The high watermark is the lowest log end offset over the *maximal* ISR: the ISR plus a
  pending expansion, and the members of a shrink not yet committed, so an acknowledged offset
  is on every replica ZooKeeper may elect (KIP-497's "maximal ISR").
- A follower outside the ISR joins once it holds the high watermark and the leader's current
  epoch start (no divergent tail); an ISR member leaves when not caught up within
  replica.lag.time.max.ms. One ISR change is in flight at a time (`pending_isr`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from tidelog.cluster import placement
from tidelog.errors import ErrorCode


class IsrFields(Protocol):
    """The part of a hosted partition these rules read and change (replication.ReplicaState
    has it; tests use `LeaderIsr`)."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    high_watermark: int
    pending_isr: tuple[int, ...] | None
    followers: dict[int, placement.FollowerState]


@dataclass(slots=True)
class LeaderIsr:
    """The bare ISR state of one partition: IsrFields as a value of its own."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    high_watermark: int = 0
    pending_isr: tuple[int, ...] | None = None
    followers: dict[int, placement.FollowerState] = field(default_factory=dict)


def become_leader(state: IsrFields, node_id: int, log_end_offset: int, now_ms: int) -> None:
    """A new leadership: the mark never exceeds our log end; followers get a fresh lag
    allowance and hold the high watermark until they fetch; no ISR change is in flight."""
    state.high_watermark = min(state.high_watermark, log_end_offset)
    state.pending_isr = None
    state.followers = {
        b: placement.FollowerState(b, state.high_watermark, now_ms)
        for b in state.replicas if b != node_id
    }


def maximal_isr(isr: tuple[int, ...], pending_isr: tuple[int, ...] | None) -> set[int]:
    return set(isr) | set(pending_isr or ())


def next_high_watermark(state: IsrFields, node_id: int, log_end_offset: int) -> int | None:
    """The new high watermark if it moves up (Kafka's maybeIncrementLeaderHW), else None."""
    new = placement.high_watermark(
        state.high_watermark, node_id, log_end_offset,
        maximal_isr(state.isr, state.pending_isr), state.followers,
    )
    new = min(new, log_end_offset)
    return new if new > state.high_watermark else None


def follower_fetched(
    state: IsrFields, replica_id: int, fetch_offset: int, log_end_offset: int,
    now_ms: int, epoch_start_offset: int,
) -> tuple[int, ...] | None:
    """Record a follower's fetch; the expanded ISR to write if it may now join (else None)."""
    follower = state.followers.get(replica_id) or placement.FollowerState(replica_id)
    follower = placement.update_follower_fetch(follower, fetch_offset, log_end_offset, now_ms)
    state.followers[replica_id] = follower
    if (
        replica_id not in state.isr
        and state.pending_isr is None
        and placement.may_join_isr(
            follower, high_watermark=state.high_watermark,
            leader_epoch_start_offset=epoch_start_offset,
        )
    ):
        return placement.expanded_isr(state.isr, replica_id, state.replicas)
    return None


def shrink_candidate(
    state: IsrFields, node_id: int, now_ms: int, replica_lag_time_max_ms: int
) -> tuple[int, ...] | None:
    """The shrunk ISR to write if some member lags (Kafka's maybeShrinkIsr), else None."""
    if state.pending_isr is not None:
        return None
    lagging = placement.out_of_sync_replicas(
        node_id, state.isr, state.followers,
        now_ms=now_ms, replica_lag_time_max_ms=replica_lag_time_max_ms,
    )
    return placement.shrunk_isr(state.isr, lagging) if lagging else None


def acks_outcome(isr_size: int, min_insync_replicas: int) -> ErrorCode:
    """The answer to an acks=all write the high watermark passed: the ISR may have shrunk
    below min.insync.replicas meanwhile (Kafka's NOT_ENOUGH_REPLICAS_AFTER_APPEND)."""
    if isr_size < min_insync_replicas:
        return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    return ErrorCode.NONE


def follower_high_watermark(current: int, leader_high_watermark: int, log_end_offset: int) -> int:
    """A follower adopts the leader's mark up to its own log end, never moving back."""
    return max(current, min(leader_high_watermark, log_end_offset))
