"""Controller events: what changed in ZooKeeper, queued by kazoo's thread for the caller's.

Kazoo runs watchers on its own thread; they only mark an event pending here. The inbox is a
set, so it is bounded (one slot per kind) and repeated triggers coalesce: every event means
"re-read that part of ZooKeeper", never "apply this delta".
"""

from __future__ import annotations

import enum
import threading
from dataclasses import dataclass

from tidelog.cluster.zk_store import VersionedState
from tidelog.types import TopicPartition


class ControllerEvent(enum.Enum):
    """What changed in ZooKeeper; handled in this (declaration) order."""

    SESSION_LOST = "our session expired: ephemerals are gone, register again"
    CONTROLLER_CHANGE = "/controller was created or deleted"
    BROKER_CHANGE = "children of /brokers/ids changed"
    TOPIC_CHANGE = "children of /brokers/topics changed"
    PARTITION_MODIFICATION = "a topic's assignment changed (partitions added)"
    ISR_CHANGE = "a leader wrote an ISR change notification"
    TOPIC_DELETION = "a topic deletion was requested"
    PARTITION_REASSIGNMENT = "/admin/reassign_partitions was written"
    PREFERRED_REPLICA_ELECTION = "an admin asked for preferred leader elections"


@dataclass(frozen=True, slots=True)
class PartitionChange:
    """A partition state this controller wrote (what brokers must act on)."""

    tp: TopicPartition
    state: VersionedState


class EventInbox:
    """Pending events, coalesced. Filled by kazoo's thread, drained by process_events()."""

    def __init__(self) -> None:
        self._pending: set[ControllerEvent] = set()
        self._ready = threading.Condition()

    def put(self, event: ControllerEvent) -> None:
        with self._ready:
            self._pending.add(event)
            self._ready.notify_all()

    def take_all(self) -> list[ControllerEvent]:
        with self._ready:
            events = [e for e in ControllerEvent if e in self._pending]
            self._pending.clear()
            return events

    def wait(self, timeout_s: float) -> bool:
        with self._ready:
            return self._ready.wait_for(lambda: bool(self._pending), timeout_s)
