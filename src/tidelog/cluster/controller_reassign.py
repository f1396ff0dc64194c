"""The controller's partition reassignments (Kafka's KafkaController.onPartitionReassignment).

- request: `/admin/reassign_partitions` (written by any broker's AlterPartitionReassignments
  handler, or by hand as with Kafka's ZooKeeper tools) is read, each partition's move started
  in its topic's znode (`adding_replicas` / `removing_replicas`, reassignment.start), then the
  request is deleted;
- progress: after each ISR change notification (a new replica joined), on broker changes and
  on failover, a partition whose target replicas are all in the ISR is completed: leadership
  moved if needed and the ISR shrunk (one fenced state write), then the assignment narrowed to
  the target (one fenced, version-conditional topic write). Brokers follow the view.

Blocking (kazoo, synchronous); run on the member's own thread (controller_zk.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from tidelog.cluster import reassignment
from tidelog.cluster.controller_context import ControllerContext, State
from tidelog.cluster.events import PartitionChange
from tidelog.cluster.zk_layout import TopicAssignment, ZkLayoutError
from tidelog.cluster.zk_store import ControllerMovedError, VersionedState
from tidelog.types import TopicPartition

_log = logging.getLogger(__name__)
MAX_TOPIC_WRITE_ATTEMPTS = 5  # a CreatePartitions may race the controller's topic write


class Reassignments:
    def __init__(self, context: ControllerContext) -> None:
        self._context = context

    def on_request(self) -> list[PartitionChange]:
        """Start every move `/admin/reassign_partitions` asks for, then delete it."""
        context = self._context
        context.require_fence()
        try:
            targets = context.store.reassignment_request()
        except ZkLayoutError as exc:
            _log.error("reassignment request dropped: %s", exc)
            context.store.delete_reassignment_request()
            return []
        if targets is None:
            return []
        by_topic: dict[str, dict[int, tuple[int, ...]]] = {}
        for tp, replicas in targets.items():
            by_topic.setdefault(tp.topic, {})[tp.partition] = replicas
        started: list[TopicPartition] = []
        for topic, moves in sorted(by_topic.items()):

            def edit(
                assignment: TopicAssignment, moves: dict[int, tuple[int, ...]] = moves
            ) -> TopicAssignment:
                for partition, replicas in sorted(moves.items()):
                    if partition not in assignment.partitions:
                        _log.error("reassignment of unknown partition %s-%d",
                                   assignment.topic, partition)
                        continue
                    assignment = reassignment.start(assignment, partition, replicas)
                return assignment

            if self._edit_topic(topic, edit):
                started.extend(TopicPartition(topic, p) for p in moves)
                _log.info("reassignment of %s started: %s", topic, moves)
        context.store.delete_reassignment_request()
        return self.progress(started)

    def progress(self, partitions: Iterable[TopicPartition] | None = None) -> list[PartitionChange]:
        """Complete the moves (of `partitions`, or all) whose target replicas are in sync."""
        context = self._context
        if partitions is None:
            partitions = [
                TopicPartition(topic, p)
                for topic, assignment in context.assignments.items()
                for p in assignment.partitions
                if assignment.is_reassigning(p)
            ]
        changes = []
        for tp in sorted(set(partitions)):
            change = self._maybe_complete(tp)
            if change is not None:
                changes.append(change)
        return changes

    def _maybe_complete(self, tp: TopicPartition) -> PartitionChange | None:
        context = self._context
        assignment = context.assignments.get(tp.topic)
        if assignment is None or not assignment.is_reassigning(tp.partition):
            return None
        target = assignment.target_replicas(tp.partition)
        live = set(context.live)

        def decide(current: VersionedState) -> State:
            return reassignment.completed_state(
                current.state, target, live, controller_epoch=context.epoch()
            )

        change = context.write_with_retry(tp, decide)
        if change is None:
            return None
        self._edit_topic(tp.topic, lambda a: reassignment.finish(a, tp.partition))
        _log.info("reassignment of %s completed: replicas %s, leader %d",
                  tp, target, change.state.state.leader)
        return change

    def _edit_topic(self, topic: str, edit: Callable[[TopicAssignment], TopicAssignment]) -> bool:
        """Rewrite a topic's assignment through `edit`, re-reading on a version conflict."""
        context = self._context
        fence = context.require_fence()
        for _ in range(MAX_TOPIC_WRITE_ATTEMPTS):
            read = context.store.topic_assignment_versioned(topic)
            if read is None:
                _log.error("reassignment of unknown topic %s", topic)
                return False
            current, version = read
            updated = edit(current)
            if updated == current:
                context.assignments[topic] = current
                return True
            try:
                written = context.store.write_topic_assignment(fence, updated, version)
            except ControllerMovedError:
                context.resign()
                raise
            if written is not None:
                context.assignments[topic] = updated
                return True
        _log.error("topic %s kept changing; reassignment not written", topic)
        return False
