"""Placement, elections and ISR rules: Kafka's own examples plus properties over random input."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from tidelog.cluster import placement
from tidelog.cluster.placement import FollowerState
from tidelog.cluster.zk_layout import NO_LEADER, PartitionState
from tidelog.errors import ErrorCode, KafkaError


def test_matches_kafkas_rack_unaware_example() -> None:
    # AdminZkClientTest.testReplicaAssignment: 5 brokers, 10 partitions, RF 3, fixed start 0.
    assert placement.assign_replicas(range(5), 10, 3, start_index=0, replica_shift=0) == {
        0: (0, 1, 2),
        1: (1, 2, 3),
        2: (2, 3, 4),
        3: (3, 4, 0),
        4: (4, 0, 1),
        5: (0, 2, 3),
        6: (1, 3, 4),
        7: (2, 4, 0),
        8: (3, 0, 1),
        9: (4, 1, 2),
    }


@pytest.mark.parametrize(
    ("brokers", "partitions", "rf", "code"),
    [
        ([1, 2], 1, 3, ErrorCode.INVALID_REPLICATION_FACTOR),
        ([1, 2], 1, 0, ErrorCode.INVALID_REPLICATION_FACTOR),
        ([], 1, 1, ErrorCode.INVALID_REPLICATION_FACTOR),
        ([1], 0, 1, ErrorCode.INVALID_PARTITIONS),
        ([1], 5000, 1, ErrorCode.INVALID_PARTITIONS),
    ],
)
def test_impossible_assignments_are_refused(
    brokers: list[int], partitions: int, rf: int, code: ErrorCode
) -> None:
    with pytest.raises(KafkaError) as refused:
        placement.assign_replicas(brokers, partitions, rf, start_index=0, replica_shift=0)
    assert refused.value.code is code


@given(
    brokers=st.sets(st.integers(0, 1000), min_size=1, max_size=12),
    partitions=st.integers(1, 60),
    data=st.data(),
)
def test_assignment_properties(brokers: set[int], partitions: int, data: st.DataObject) -> None:
    rf = data.draw(st.integers(1, len(brokers)))
    start = data.draw(st.integers(0, len(brokers) - 1))
    shift = data.draw(st.integers(0, len(brokers) - 1))
    assignment = placement.assign_replicas(
        brokers, partitions, rf, start_index=start, replica_shift=shift
    )
    assert sorted(assignment) == list(range(partitions))
    for replicas in assignment.values():
        assert len(replicas) == rf == len(set(replicas))
        assert set(replicas) <= brokers
    # Leaders go round-robin: no broker leads more than one partition more than another.
    leaders = Counter(r[0] for r in assignment.values())
    counts = [leaders.get(b, 0) for b in brokers]
    assert max(counts) - min(counts) <= 1
    # Every broker carries a fair share of replicas once partitions fill whole rounds.
    if partitions % len(brokers) == 0:
        load = Counter(b for r in assignment.values() for b in r)
        assert set(load.values()) == {partitions * rf // len(brokers)}


replica_lists = st.lists(st.integers(0, 9), min_size=1, max_size=5, unique=True)


@given(replicas=replica_lists, data=st.data(), unclean=st.booleans())
def test_offline_election_properties(
    replicas: list[int], data: st.DataObject, unclean: bool
) -> None:
    isr = data.draw(st.sets(st.sampled_from(replicas), min_size=1))
    live = data.draw(st.sets(st.integers(0, 9)))
    leader = placement.offline_leader(replicas, isr, live, unclean_leader_election_enable=unclean)
    clean_candidates = [b for b in replicas if b in live and b in isr]
    if clean_candidates:
        assert leader == clean_candidates[0]
    elif unclean and any(b in live for b in replicas):
        assert leader == next(b for b in replicas if b in live)
    else:
        assert leader is None


@given(replicas=replica_lists, data=st.data(), unclean=st.booleans())
def test_reconcile_never_elects_out_of_sync_replica_unless_unclean(
    replicas: list[int], data: st.DataObject, unclean: bool
) -> None:
    isr = tuple(
        data.draw(
            st.permutations(sorted(data.draw(st.sets(st.sampled_from(replicas), min_size=1))))
        )
    )
    old_leader = data.draw(st.sampled_from([*isr, NO_LEADER]))
    live = data.draw(st.sets(st.sampled_from(replicas)))
    state = PartitionState(old_leader, 4, isr, 1)
    new = placement.reconcile_partition(
        state, replicas, live, controller_epoch=2, unclean_leader_election_enable=unclean
    )
    if new is None:
        # Nothing to change: the leader is live with a live ISR, or nobody can lead at all.
        assert (old_leader in live and set(isr) <= live) or (
            old_leader == NO_LEADER and not (live & set(isr)) and not (unclean and live)
        )
        return
    assert new.leader_epoch == state.leader_epoch + 1
    assert new.controller_epoch == 2
    assert new.isr
    if new.leader == NO_LEADER:
        assert not (live & set(isr)) and not (unclean and live)
    elif new.leader in isr:
        assert new.leader in live
        assert set(new.isr) == set(isr) & live
        if old_leader not in live:
            assert new.leader == next(b for b in replicas if b in live and b in isr)
    else:
        assert unclean and new.leader in live and new.isr == (new.leader,)
        assert not (live & set(isr))


def test_leaderless_partition_keeps_its_last_leader_in_the_isr() -> None:
    state = PartitionState(2, 5, (2, 3), 1)
    new = placement.reconcile_partition(state, (1, 2, 3), {1}, controller_epoch=1)
    assert new == PartitionState(NO_LEADER, 6, (2,), 1)
    assert placement.reconcile_partition(new, (1, 2, 3), {1}, controller_epoch=1) is None
    back = placement.reconcile_partition(new, (1, 2, 3), {1, 2}, controller_epoch=1)
    assert back == PartitionState(2, 7, (2,), 1)


def test_preferred_election() -> None:
    state = PartitionState(2, 3, (2, 1), 1)
    assert placement.elect_preferred(state, (1, 2), {1, 2}, controller_epoch=5) == PartitionState(
        1, 4, (2, 1), 5
    )
    assert placement.elect_preferred(state, (1, 2), {2}, controller_epoch=5) is None
    assert (
        placement.elect_preferred(PartitionState(2, 3, (2,), 1), (1, 2), {1, 2}, controller_epoch=5)
        is None
    )
    assert placement.controlled_shutdown_leader((1, 2, 3), {1, 2, 3}, {1, 2, 3}, {1}) == 2


def test_follower_leaves_isr_after_lag_time_and_rejoins_when_caught_up() -> None:
    lag_ms = 30_000
    follower = FollowerState(2)
    follower = placement.update_follower_fetch(follower, 100, 100, now_ms=1_000)
    assert follower.last_caught_up_time_ms == 1_000
    # Trailing by the batch appended since its last fetch still counts as caught up then.
    follower = placement.update_follower_fetch(follower, 100, 150, now_ms=2_000)
    assert follower.last_caught_up_time_ms == 1_000
    follower = placement.update_follower_fetch(follower, 150, 200, now_ms=3_000)
    assert follower.last_caught_up_time_ms == 2_000
    followers = {2: follower}
    kwargs = {"replica_lag_time_max_ms": lag_ms}
    assert placement.out_of_sync_replicas(1, (1, 2), followers, now_ms=32_000, **kwargs) == set()
    assert placement.out_of_sync_replicas(1, (1, 2), followers, now_ms=32_001, **kwargs) == {2}
    assert placement.shrunk_isr((1, 2, 3), {2}) == (1, 3)
    assert not placement.may_join_isr(follower, high_watermark=200, leader_epoch_start_offset=0)
    caught = placement.update_follower_fetch(follower, 200, 200, now_ms=40_000)
    assert placement.may_join_isr(caught, high_watermark=200, leader_epoch_start_offset=180)
    assert not placement.may_join_isr(caught, high_watermark=200, leader_epoch_start_offset=201)
    assert placement.expanded_isr((3, 1), 2, (1, 2, 3)) == (1, 2, 3)


@given(
    leader_leo=st.integers(0, 10_000),
    follower_leos=st.dictionaries(st.integers(2, 6), st.integers(0, 10_000), max_size=5),
    current=st.integers(0, 10_000),
)
def test_high_watermark_is_min_isr_leo_and_never_moves_back(
    leader_leo: int, follower_leos: dict[int, int], current: int
) -> None:
    assume(current <= leader_leo)
    followers = {b: FollowerState(b, log_end_offset=leo) for b, leo in follower_leos.items()}
    isr = [1, *follower_leos]
    hw = placement.high_watermark(current, 1, leader_leo, isr, followers)
    assert hw == max(current, min([leader_leo, *follower_leos.values()]))
    assert current <= hw <= leader_leo


def test_min_insync_replicas() -> None:
    assert placement.check_min_insync(2, 2) is ErrorCode.NONE
    assert placement.check_min_insync(1, 2) is ErrorCode.NOT_ENOUGH_REPLICAS
