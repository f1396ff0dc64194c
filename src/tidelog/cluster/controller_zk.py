"""One broker's membership in a ZooKeeper cluster, and the controller role it may win.

Blocking (kazoo, synchronous); run on a thread of its own, never on the event loop.

Event flow: kazoo calls our watchers on its own thread; they only mark an event pending in an
`events.EventInbox`. `process_events()` runs the handlers on the caller's thread, which makes
every step testable without timing games.

Controller duties (Kafka's KafkaController in ZooKeeper mode), this module:
- election: `/controller` (ephemeral) created and `/controller_epoch` bumped in one multi-op;
- failover: load brokers, topics and partition states; elect leaders for partitions whose
  leader is gone; create states of topics that only have an assignment;
- broker change: reconcile every partition with the live set (placement.reconcile_partition);
- preferred leader election.
Topic creation, topic and partition changes, ISR change notifications and deletions are in
`controller_topics.py`; the cache they share and the fenced, retried partition-state writes
in `controller_context.py`. Every controller write is fenced by `/controller_epoch`'s version
(zk_store.ControllerFence).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Collection

from kazoo.client import KazooClient
from kazoo.exceptions import (
    ConnectionClosedError,
    ConnectionLoss,
    SessionExpiredError,
)
from kazoo.protocol.states import KazooState, WatchedEvent

from tidelog.cluster import placement
from tidelog.cluster import zk_layout as layout
from tidelog.cluster.controller_context import ControllerContext, State
from tidelog.cluster.controller_reassign import Reassignments
from tidelog.cluster.controller_topics import TopicChanges
from tidelog.cluster.events import ControllerEvent, EventInbox, PartitionChange
from tidelog.cluster.zk_layout import (
    BrokerRegistration,
    TopicAssignment,
    ZkLayoutError,
)
from tidelog.cluster.zk_store import (
    ControllerFence,
    ControllerMovedError,
    VersionedState,
    ZkStore,
)
from tidelog.types import TopicPartition

_log = logging.getLogger(__name__)


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class ClusterMember:
    """A broker's registration plus controller candidacy over one started KazooClient.

    The caller owns the client (starts and stops it) and calls `process_events()` whenever
    `wait_for_events()` says something changed. Call every method from one thread (the
    member's own); only the kazoo watchers run elsewhere, and they touch just the inbox.
    """

    def __init__(
        self,
        client: KazooClient,
        registration: BrokerRegistration,
        *,
        unclean_leader_election_enable: bool = False,
        rng: random.Random | None = None,
        clock_ms: Callable[[], int] = _wall_clock_ms,
        inbox: EventInbox | None = None,
    ) -> None:
        self.broker_id = registration.broker_id
        self.store = ZkStore(client)
        self._registration = registration
        self._unclean = unclean_leader_election_enable
        self._clock_ms = clock_ms
        # One inbox for every watch this member and its TopicChanges set (an owner may pass
        # one that also wakes its thread).
        self._inbox = inbox if inbox is not None else EventInbox()
        self._broker_epoch: int | None = None
        self._context = ControllerContext(self.broker_id, self.store)
        self._topics = TopicChanges(self._context, self._inbox, rng or random.Random())
        self._reassignments = Reassignments(self._context)

    # ------------------------------------------------------------ lifecycle

    def start(self) -> list[PartitionChange]:
        """Register this broker, watch ZooKeeper, and stand for controller; returns the
        partition states written if this broker won and repaired the cluster on failover."""
        self.store.ensure_paths()
        self._broker_epoch = self.store.register_broker(self._registration)
        client = self.store.client
        client.add_listener(self._on_session_state)
        client.DataWatch(layout.CONTROLLER_PATH, self._on_controller_znode)
        client.DataWatch(layout.REASSIGN_PARTITIONS_PATH, self._on_reassign_znode)
        for path, event in (
            (layout.BROKER_IDS_PATH, ControllerEvent.BROKER_CHANGE),
            (layout.TOPICS_PATH, ControllerEvent.TOPIC_CHANGE),
            (layout.ISR_CHANGE_NOTIFICATION_PATH, ControllerEvent.ISR_CHANGE),
            (layout.DELETE_TOPICS_PATH, ControllerEvent.TOPIC_DELETION),
        ):
            client.ChildrenWatch(path, self._children_watcher(event), send_event=True)
        client.DataWatch(layout.PREFERRED_REPLICA_ELECTION_PATH, self._on_election_znode)
        return self._elect()

    def _on_session_state(self, state: KazooState) -> None:
        if state == KazooState.LOST:
            self._inbox.put(ControllerEvent.SESSION_LOST)

    def _on_controller_znode(
        self, data: bytes | None, stat: object, event: WatchedEvent | None = None
    ) -> None:
        self._inbox.put(ControllerEvent.CONTROLLER_CHANGE)

    def _on_reassign_znode(
        self, data: bytes | None, stat: object, event: WatchedEvent | None = None
    ) -> None:
        if data is not None:
            self._inbox.put(ControllerEvent.PARTITION_REASSIGNMENT)

    def _on_election_znode(
        self, data: bytes | None, stat: object, event: WatchedEvent | None = None
    ) -> None:
        if data is not None:
            self._inbox.put(ControllerEvent.PREFERRED_REPLICA_ELECTION)

    def _children_watcher(
        self, event: ControllerEvent
    ) -> Callable[[list[str], WatchedEvent | None], None]:
        def watcher(children: list[str], watched: WatchedEvent | None) -> None:
            self._inbox.put(event)

        return watcher

    # ------------------------------------------------------------ queries

    @property
    def broker_epoch(self) -> int | None:
        """The czxid of our `/brokers/ids/<id>` znode (new after each session loss)."""
        return self._broker_epoch

    @property
    def is_controller(self) -> bool:
        return self._context.fence is not None

    @property
    def controller_epoch(self) -> int | None:
        return self._context.fence.epoch if self._context.fence is not None else None

    @property
    def fence(self) -> ControllerFence | None:
        return self._context.fence

    def cached_state(self, tp: TopicPartition) -> VersionedState | None:
        """The controller's view of a partition (None when not controller or unknown)."""
        return self._context.states.get(tp)

    def live_broker_ids(self) -> frozenset[int]:
        return frozenset(self._context.live)

    # ------------------------------------------------------------ events

    def wait_for_events(self, timeout_s: float) -> bool:
        """Block until an event is pending or `timeout_s` passes; True if one is pending."""
        return self._inbox.wait(timeout_s)

    def process_events(self) -> list[PartitionChange]:
        """Handle every pending event; returns the partition states written meanwhile.

        A ZooKeeper connection problem puts the event back for the next call.
        """
        changes: list[PartitionChange] = []
        for event in self._inbox.take_all():
            try:
                changes.extend(self._handle(event))
            except (ConnectionLoss, SessionExpiredError):
                self._inbox.put(event)
            except ControllerMovedError:
                _log.warning("broker %d: controller write fenced by a newer controller epoch",
                             self.broker_id)
                self._resign()
            except ConnectionClosedError:
                self._resign()  # the owner stopped the client: this broker is leaving
                break
            except ZkLayoutError as exc:
                # A malformed znode (written by hand or by a foreign tool): retrying cannot
                # fix it, and the controller must keep serving the other partitions.
                _log.error("controller event %s skipped: %s", event.name, exc)
        return changes

    def _handle(self, event: ControllerEvent) -> list[PartitionChange]:
        if event is ControllerEvent.SESSION_LOST:
            self._resign()
            self._broker_epoch = self.store.register_broker(self._registration)
            return self._elect()
        if event is ControllerEvent.CONTROLLER_CHANGE:
            if self._context.fence is not None and self.store.controller_id() != self.broker_id:
                self._resign()
            return self._elect()
        if self._context.fence is None:
            return []  # the other events are the controller's business
        if event is ControllerEvent.BROKER_CHANGE:
            return self._on_broker_change() + self._reassignments.progress()
        if event is ControllerEvent.TOPIC_CHANGE:
            return self._topics.on_topic_change()
        if event is ControllerEvent.ISR_CHANGE:
            return self._reassignments.progress(self._topics.on_isr_change())
        if event is ControllerEvent.PARTITION_REASSIGNMENT:
            return self._reassignments.on_request()
        if event is ControllerEvent.PARTITION_MODIFICATION:
            return self._topics.on_partition_modification()
        if event is ControllerEvent.PREFERRED_REPLICA_ELECTION:
            requested = self.store.take_preferred_election()
            if not requested:
                return []
            known = [tp for tp in requested if tp in self._context.states]
            for tp in known:  # an admin's request is rare: decide on ZooKeeper's state
                fresh = self.store.partition_state(tp)
                if fresh is not None:
                    self._context.states[tp] = fresh
            changes = self.elect_preferred_leaders(known)
            _log.info("preferred leader election of %d partitions: %d moved",
                      len(known), len(changes))
            return changes
        self._topics.on_topic_deletion()
        return []

    # ------------------------------------------------------------ election and failover

    def _elect(self) -> list[PartitionChange]:
        if self._context.fence is not None:
            return []
        active = self.store.controller_id()
        if active == self.broker_id:
            # Our /controller znode (this session's) but no fence: the election's reply was
            # lost with the connection. /controller and the epoch bump are created together
            # and nobody else can bump while the znode exists, so the current epoch is ours.
            current = self.store.controller_epoch()
            if current is None:
                return []
            self._context.fence = ControllerFence(self.broker_id, *current)
            return self._on_failover()
        if active is not None:
            return []
        try:
            self._context.fence = self.store.register_controller(self.broker_id, self._clock_ms())
        except ControllerMovedError:
            return []
        return self._on_failover()

    def _resign(self) -> None:
        self._context.resign()

    def _on_failover(self) -> list[PartitionChange]:
        """Kafka's onControllerFailover: load the cluster, then repair what the previous
        controller could not (leaders on dead brokers, topics without states)."""
        self._context.live = self.store.live_brokers()
        self._context.assignments.clear()
        self._context.states.clear()
        changes = self._topics.on_topic_change()
        self._topics.on_isr_change()
        self._topics.on_topic_deletion()
        changes += self._reconcile(self._context.states.keys())
        # An election request the previous controller did not get to.
        self._inbox.put(ControllerEvent.PREFERRED_REPLICA_ELECTION)
        # Moves a previous controller started, then any request it left unread.
        return changes + self._reassignments.progress() + self._reassignments.on_request()

    def _on_broker_change(self) -> list[PartitionChange]:
        before = self._context.live
        self._context.live = self.store.live_brokers()
        # A broker that came back with a new epoch has lost its in-memory state: treat it
        # as dead first so leadership moves away, then as live (Kafka's KIP-380 bounce).
        bounced = {
            b
            for b, live in self._context.live.items()
            if b in before and before[b].broker_epoch != live.broker_epoch
        }
        changes = self._reconcile(self._context.states.keys(), exclude=bounced) if bounced else []
        return changes + self._reconcile(self._context.states.keys())

    def _reconcile(
        self, partitions: Collection[TopicPartition], exclude: Collection[int] = ()
    ) -> list[PartitionChange]:
        live = set(self._context.live) - set(exclude)
        changes = []
        for tp in sorted(partitions):
            replicas = self._context.replicas(tp)

            def decide(current: VersionedState, replicas: tuple[int, ...] = replicas) -> State:
                return placement.reconcile_partition(
                    current.state,
                    replicas,
                    live,
                    controller_epoch=self._context.epoch(),
                    unclean_leader_election_enable=self._unclean,
                )

            change = self._context.write_with_retry(tp, decide)
            if change is not None:
                changes.append(change)
        return changes

    # ------------------------------------------------------------ topics

    def create_topic(
        self,
        topic: str,
        partition_count: int,
        replication_factor: int,
        *,
        topic_id: str | None = None,
    ) -> TopicAssignment:
        """Place replicas over the live brokers and create the topic (controller only)."""
        return self._topics.create_topic(
            topic, partition_count, replication_factor, topic_id=topic_id
        )

    # ------------------------------------------------------------ leadership

    def elect_preferred_leaders(
        self, partitions: Collection[TopicPartition] | None = None
    ) -> list[PartitionChange]:
        """Move leadership back to each partition's first replica where it can lead."""
        live = set(self._context.live)
        targets = sorted(self._context.states) if partitions is None else sorted(partitions)
        changes = []
        for tp in targets:
            replicas = self._context.replicas(tp)

            def decide(current: VersionedState, replicas: tuple[int, ...] = replicas) -> State:
                return placement.elect_preferred(
                    current.state, replicas, live, controller_epoch=self._context.epoch()
                )

            change = self._context.write_with_retry(tp, decide)
            if change is not None:
                changes.append(change)
        return changes
