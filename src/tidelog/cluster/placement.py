"""Replica placement, leader election and ISR rules: pure functions, Kafka's algorithms.

No I/O and no clock: callers pass broker ids, offsets and `now_ms`.

- `assign_replicas`: Kafka's rack-unaware assignment (AdminUtils.assignReplicasToBrokers).
  Partition p's first replica (its preferred leader) is broker `(p + start_index) % n` of the
  sorted broker list, so leaders go round-robin; the followers are the brokers at distance
  `1 + (shift + j) % (n - 1)` after it, and `shift` grows by one every n partitions, so the
  follower sets differ between rounds and a dead broker's load spreads over all others.
- Elections (PartitionLeaderElectionAlgorithms): offline election takes the first replica in
  assignment order that is live and in the ISR; only with unclean election enabled may a live
  out-of-sync replica lead. Preferred election moves leadership back to the first replica.
- `reconcile_partition`: what the controller writes for one partition when the set of live
  brokers changes (a leader_epoch bump with each change, as in Kafka's ZooKeeper mode).
- Leader-side ISR rules (Partition/Replica): a follower is caught up when it fetched up to the
  leader's log end offset; it leaves the ISR after `replica.lag.time.max.ms` without catching
  up, and rejoins once its log end offset reaches the high watermark and the leader's current
  epoch start offset. The high watermark is the lowest log end offset in the ISR and never
  moves back.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from tidelog.cluster.zk_layout import NO_LEADER, PartitionState
from tidelog.errors import ErrorCode, KafkaError
from tidelog.types import TopicPartition

MAX_PARTITIONS_PER_TOPIC = 4096  # same bound as the single-node admin handler


def assign_replicas(
    broker_ids: Iterable[int],
    partition_count: int,
    replication_factor: int,
    *,
    start_index: int,
    replica_shift: int,
    first_partition: int = 0,
) -> dict[int, tuple[int, ...]]:
    """Replicas per partition, preferred leader first.

    Kafka picks `start_index` and `replica_shift` at random in [0, n); the caller does the
    same (or passes 0 for a deterministic layout). `first_partition` > 0 places partitions
    added to an existing topic.
    """
    brokers = sorted(set(broker_ids))
    if partition_count <= 0 or partition_count > MAX_PARTITIONS_PER_TOPIC:
        raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"{partition_count} partitions")
    if replication_factor <= 0:
        raise KafkaError(
            ErrorCode.INVALID_REPLICATION_FACTOR, f"replication factor {replication_factor}"
        )
    if replication_factor > len(brokers):
        raise KafkaError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"replication factor {replication_factor} larger than {len(brokers)} live brokers",
        )
    if start_index < 0 or replica_shift < 0 or first_partition < 0:
        raise ValueError("start_index, replica_shift and first_partition must be >= 0")
    n = len(brokers)
    shift = replica_shift
    assignment: dict[int, tuple[int, ...]] = {}
    for partition in range(first_partition, first_partition + partition_count):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start_index) % n
        replicas = [brokers[first]]
        for j in range(replication_factor - 1):
            replicas.append(brokers[(first + 1 + (shift + j) % (n - 1)) % n])
        assignment[partition] = tuple(replicas)
    return assignment


# ---------------------------------------------------------------- elections


def offline_leader(
    replicas: Sequence[int],
    isr: Collection[int],
    live: Collection[int],
    *,
    unclean_leader_election_enable: bool = False,
) -> int | None:
    """The new leader when the current one is gone, or None if nobody may lead."""
    for broker in replicas:
        if broker in live and broker in isr:
            return broker
    if unclean_leader_election_enable:
        for broker in replicas:
            if broker in live:
                return broker
    return None


def preferred_leader(
    replicas: Sequence[int], isr: Collection[int], live: Collection[int]
) -> int | None:
    """The first assigned replica, if it is live and in sync."""
    if replicas and replicas[0] in live and replicas[0] in isr:
        return replicas[0]
    return None


def controlled_shutdown_leader(
    replicas: Sequence[int],
    isr: Collection[int],
    live: Collection[int],
    shutting_down: Collection[int],
) -> int | None:
    """A leader for a partition whose leader is shutting down cleanly."""
    for broker in replicas:
        if broker in live and broker in isr and broker not in shutting_down:
            return broker
    return None


def reconcile_partition(
    state: PartitionState,
    replicas: Sequence[int],
    live: Collection[int],
    *,
    controller_epoch: int,
    unclean_leader_election_enable: bool = False,
) -> PartitionState | None:
    """The controller's new state for a partition after brokers died or returned; None if
    nothing changes.

    - Leader live: dead brokers leave the ISR (the leader itself stays).
    - Leader dead or NO_LEADER: elect from the live ISR in assignment order; the ISR becomes
      its live members. With unclean election and no live ISR member, a live replica leads
      alone (its log may lack acknowledged records: that is what "unclean" means).
    - Nobody may lead: leader -1, and the ISR keeps one member (Kafka keeps the last one) so
      that broker can lead cleanly when it returns.
    """
    isr_live = tuple(b for b in state.isr if b in live)
    if state.leader != NO_LEADER and state.leader in live:
        if isr_live == state.isr:
            return None
        return _next(state, state.leader, isr_live, controller_epoch)
    leader = offline_leader(replicas, state.isr, live)
    if leader is not None:
        return _next(state, leader, isr_live, controller_epoch)
    if unclean_leader_election_enable:
        leader = offline_leader(replicas, (), live, unclean_leader_election_enable=True)
        if leader is not None:
            return _next(state, leader, (leader,), controller_epoch)
    # Keep one member (the old leader if it was in sync: it has the most) rather than none.
    remaining = isr_live or ((state.leader,) if state.leader in state.isr else state.isr[:1])
    if state.leader == NO_LEADER and remaining == state.isr:
        return None
    return _next(state, NO_LEADER, remaining, controller_epoch)


def elect_preferred(
    state: PartitionState,
    replicas: Sequence[int],
    live: Collection[int],
    *,
    controller_epoch: int,
) -> PartitionState | None:
    """Move leadership to the preferred replica; None if it already leads or cannot."""
    leader = preferred_leader(replicas, state.isr, live)
    if leader is None or leader == state.leader:
        return None
    return _next(state, leader, state.isr, controller_epoch)


def _next(
    state: PartitionState, leader: int, isr: tuple[int, ...], controller_epoch: int
) -> PartitionState:
    return PartitionState(
        leader=leader,
        leader_epoch=state.leader_epoch + 1,
        isr=isr,
        controller_epoch=controller_epoch,
    )


def initial_state(
    replicas: Sequence[int], live: Collection[int], *, controller_epoch: int
) -> PartitionState:
    """A new partition: the first live replica leads, the live replicas form the ISR."""
    live_replicas = tuple(b for b in replicas if b in live)
    if not live_replicas:
        raise KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, f"no live replica among {replicas}")
    return PartitionState(live_replicas[0], 0, live_replicas, controller_epoch)


# ---------------------------------------------------------------- leader-side ISR


@dataclass(frozen=True, slots=True)
class FollowerState:
    """What a leader knows about one follower, updated on each of its fetches."""

    broker_id: int
    log_end_offset: int = 0
    last_caught_up_time_ms: int = 0
    last_fetch_leader_log_end_offset: int = 0
    last_fetch_time_ms: int = 0


def update_follower_fetch(
    follower: FollowerState, fetch_offset: int, leader_log_end_offset: int, now_ms: int
) -> FollowerState:
    """Record a follower fetch at `fetch_offset` (= its log end offset).

    Caught up now if it reached the leader's current end; or caught up as of its previous
    fetch if it reached the end the leader had then (Kafka's Replica.updateFetchState), so a
    follower that always trails by one in-flight batch under steady load stays in sync.
    """
    caught_up = follower.last_caught_up_time_ms
    if fetch_offset >= leader_log_end_offset:
        caught_up = max(caught_up, now_ms)
    elif fetch_offset >= follower.last_fetch_leader_log_end_offset:
        caught_up = max(caught_up, follower.last_fetch_time_ms)
    return replace(
        follower,
        log_end_offset=fetch_offset,
        last_caught_up_time_ms=caught_up,
        last_fetch_leader_log_end_offset=leader_log_end_offset,
        last_fetch_time_ms=now_ms,
    )


def out_of_sync_replicas(
    leader_id: int,
    isr: Iterable[int],
    followers: Mapping[int, FollowerState],
    *,
    now_ms: int,
    replica_lag_time_max_ms: int,
) -> frozenset[int]:
    """ISR members to drop: followers not caught up within `replica_lag_time_max_ms`.

    The leader is never out of sync with itself; an ISR member the leader has no state for
    (it never fetched since this broker became leader) is measured from the last caught-up
    time the caller seeded it with.
    """
    lagging = set()
    for broker in isr:
        if broker == leader_id:
            continue
        follower = followers.get(broker)
        last = follower.last_caught_up_time_ms if follower is not None else 0
        if now_ms - last > replica_lag_time_max_ms:
            lagging.add(broker)
    return frozenset(lagging)


def shrunk_isr(isr: Sequence[int], out_of_sync: Collection[int]) -> tuple[int, ...]:
    return tuple(b for b in isr if b not in out_of_sync)


def may_join_isr(
    follower: FollowerState, *, high_watermark: int, leader_epoch_start_offset: int
) -> bool:
    """A follower outside the ISR rejoins once it holds everything up to the high watermark
    and everything of the leader's current epoch before it (so it has no divergent tail)."""
    return (
        follower.log_end_offset >= high_watermark
        and follower.log_end_offset >= leader_epoch_start_offset
    )


def expanded_isr(isr: Sequence[int], broker_id: int, replicas: Sequence[int]) -> tuple[int, ...]:
    """The ISR with `broker_id` added, kept in assignment order."""
    members = set(isr) | {broker_id}
    if broker_id not in replicas:
        raise ValueError(f"broker {broker_id} is not a replica of {replicas}")
    return tuple(b for b in replicas if b in members)


def high_watermark(
    current_high_watermark: int,
    leader_id: int,
    leader_log_end_offset: int,
    isr: Iterable[int],
    followers: Mapping[int, FollowerState],
) -> int:
    """min(log end offset over the ISR), never below the current high watermark.

    An ISR member without follower state counts as having nothing beyond the current high
    watermark, so it holds the mark where it is.
    """
    lowest = leader_log_end_offset
    for broker in isr:
        if broker == leader_id:
            continue
        follower = followers.get(broker)
        lowest = min(lowest, follower.log_end_offset if follower else current_high_watermark)
    return max(current_high_watermark, lowest)


def check_min_insync(isr_size: int, min_insync_replicas: int) -> ErrorCode:
    """acks=all is refused (NOT_ENOUGH_REPLICAS) while the ISR is below min.insync.replicas."""
    return ErrorCode.NONE if isr_size >= min_insync_replicas else ErrorCode.NOT_ENOUGH_REPLICAS


def check_leader_epoch(tp: TopicPartition, asked: int, current: int) -> None:
    """KIP-320: a request naming an older leader epoch is fenced, a newer one is unknown yet
    (this broker has not seen that leadership change); -1 asks for no check."""
    if 0 <= asked < current:
        raise KafkaError(ErrorCode.FENCED_LEADER_EPOCH, f"{tp}: epoch {asked} < {current}")
    if asked > current:
        raise KafkaError(ErrorCode.UNKNOWN_LEADER_EPOCH, f"{tp}: epoch {asked} > {current}")
