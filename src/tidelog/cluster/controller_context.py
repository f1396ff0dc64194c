"""What the active controller knows, and its fenced partition-state writes.

Kafka's ControllerContext (live brokers, topic assignments, partition states, cached from
ZooKeeper on failover and kept current by the controller's events) plus the part of its
PartitionStateMachine that writes a state: decide on the cached state, write it conditionally
on the znode version, and on a conflict (a leader changed the ISR meanwhile) re-read and decide
again. Every write is fenced by `/controller_epoch`'s version (zk_store.ControllerFence); a
write fenced by a newer controller resigns (clears everything) and re-raises.

Blocking (kazoo, synchronous); used only from the member's own thread (controller_zk.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from tidelog.cluster.events import PartitionChange
from tidelog.cluster.zk_layout import PartitionState, TopicAssignment
from tidelog.cluster.zk_store import (
    ControllerFence,
    ControllerMovedError,
    LiveBroker,
    VersionedState,
    ZkStore,
)
from tidelog.errors import ErrorCode, KafkaError
from tidelog.types import TopicPartition

_log = logging.getLogger(__name__)
State = PartitionState | None
MAX_WRITE_ATTEMPTS = 5
"""Re-read-and-retry bound when a leader's ISR write races the controller's."""


class ControllerContext:
    """The controller's cache of the cluster; empty (and `fence` None) unless controller."""

    def __init__(self, broker_id: int, store: ZkStore) -> None:
        self.broker_id = broker_id
        self.store = store
        self.fence: ControllerFence | None = None
        self.live: dict[int, LiveBroker] = {}
        self.assignments: dict[str, TopicAssignment] = {}
        self.states: dict[TopicPartition, VersionedState] = {}

    def resign(self) -> None:
        if self.fence is not None:
            _log.warning("broker %d resigned as controller (epoch %d)",
                         self.broker_id, self.fence.epoch)
        self.fence = None
        self.live.clear()
        self.assignments.clear()
        self.states.clear()

    def require_fence(self) -> ControllerFence:
        if self.fence is None:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, f"broker {self.broker_id}")
        return self.fence

    def epoch(self) -> int:
        return self.require_fence().epoch

    def replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        assignment = self.assignments.get(tp.topic)
        if assignment is None or tp.partition not in assignment.partitions:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, str(tp))
        return assignment.partitions[tp.partition]

    def forget_topic(self, topic: str) -> None:
        self.assignments.pop(topic, None)
        for tp in [tp for tp in self.states if tp.topic == topic]:
            del self.states[tp]

    def write_with_retry(
        self,
        tp: TopicPartition,
        decide: Callable[[VersionedState], State],
    ) -> PartitionChange | None:
        """Decide on the cached state and write conditionally; on a version conflict (a
        leader changed the ISR meanwhile) re-read and decide again."""
        fence = self.require_fence()
        for _ in range(MAX_WRITE_ATTEMPTS):
            current = self.states.get(tp) or self.store.partition_state(tp)
            if current is None:
                return None
            new_state = decide(current)
            if new_state is None:
                return None
            try:
                version = self.store.write_partition_state(fence, tp, new_state, current.zk_version)
            except ControllerMovedError:
                self.resign()
                raise
            if version is not None:
                written = VersionedState(new_state, version)
                self.states[tp] = written
                return PartitionChange(tp, written)
            fresh = self.store.partition_state(tp)
            if fresh is None:
                self.states.pop(tp, None)
                return None
            self.states[tp] = fresh
        raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"{tp}: state kept changing")
