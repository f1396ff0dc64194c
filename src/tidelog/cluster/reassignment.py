"""A partition reassignment's decisions (Kafka's KIP-455 ReplicaAssignment), pure.

A reassignment moves a partition from its origin replicas (ORS) to target replicas (TRS):
1. start: the assignment lists TRS + ORS (target first, duplicates once), with
   `adding_replicas` = TRS - ORS and `removing_replicas` = ORS - TRS; the new replicas see
   themselves assigned and start fetching from the leader, which lets them join the ISR;
2. complete, once every target replica is in the ISR: the leader stays if it is a live target
   replica (its epoch is bumped, as Kafka's controller does), else the first target replica
   in the live ISR leads; the ISR shrinks to the target replicas and the assignment becomes
   TRS alone. The removed replicas stop following and delete their logs.
A reassignment of a partition already being reassigned keeps the original ORS; a
cancellation is a reassignment back to ORS (Kafka's `originReplicas`).
No I/O, no clock; `tests/cluster/test_reassignment.py`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace

from tidelog.cluster.zk_payloads import PartitionState, TopicAssignment


def start(assignment: TopicAssignment, partition: int, target: Sequence[int]) -> TopicAssignment:
    """The assignment with `partition` moving to `target` (replacing any move in flight)."""
    origin = assignment.origin_replicas(partition)
    full = tuple(dict.fromkeys([*target, *origin]))
    adding = tuple(b for b in target if b not in origin)
    removing = tuple(b for b in origin if b not in target)
    return _with(assignment, partition, full, adding, removing)


def finish(assignment: TopicAssignment, partition: int) -> TopicAssignment:
    """The assignment once `partition` has moved: its target replicas alone."""
    return _with(assignment, partition, assignment.target_replicas(partition), (), ())


def completed_state(
    state: PartitionState,
    target: Sequence[int],
    live: Collection[int],
    *,
    controller_epoch: int,
) -> PartitionState | None:
    """The partition state that completes the move; None while a target replica is not in
    the ISR yet (or no target replica can lead)."""
    if not set(target) <= set(state.isr):
        return None
    if state.leader in target and state.leader in live:
        leader = state.leader
    else:
        candidates = [b for b in target if b in state.isr and b in live]
        if not candidates:
            return None
        leader = candidates[0]
    return PartitionState(
        leader=leader,
        leader_epoch=state.leader_epoch + 1,
        isr=tuple(b for b in state.isr if b in target),
        controller_epoch=controller_epoch,
    )


def _with(
    assignment: TopicAssignment,
    partition: int,
    replicas: tuple[int, ...],
    adding: tuple[int, ...],
    removing: tuple[int, ...],
) -> TopicAssignment:
    Lists = dict[int, tuple[int, ...]]

    def put(lists: Lists, value: tuple[int, ...]) -> Lists:
        lists = dict(lists)
        if value:
            lists[partition] = value
        else:
            lists.pop(partition, None)
        return lists

    return replace(
        assignment,
        partitions={**assignment.partitions, partition: replicas},
        adding_replicas=put(dict(assignment.adding_replicas), adding),
        removing_replicas=put(dict(assignment.removing_replicas), removing),
    )
