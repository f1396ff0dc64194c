"""One broker's membership in a ZooKeeper cluster, and the controller role it may win.

Blocking (kazoo, synchronous); run on a thread of its own, never on the event loop.

Event flow: kazoo calls our watchers on its own thread; they only mark an event pending in an
`events.EventInbox`. `process_events()` runs the handlers on the caller's thread, which makes
every step testable without timing games.

Controller duties (Kafka's KafkaController in ZooKeeper mode):
- election: `/controller` (ephemeral) created and `/controller_epoch` bumped in one multi-op;
- failover: load brokers, topics and partition states; elect leaders for partitions whose
  leader is gone; create states of topics that only have an assignment;
- broker change: reconcile every partition with the live set (placement.reconcile_partition);
- ISR change notifications: refresh the cached states; topic deletions: delete the znodes.
Every controller write is fenced by `/controller_epoch`'s version (zk_store.ControllerFence).
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
    NoNodeError,
    SessionExpiredError,
)
from kazoo.protocol.states import KazooState, WatchedEvent

from tidelog.cluster import placement
from tidelog.cluster import zk_layout as layout
from tidelog.cluster.events import ControllerEvent, EventInbox, PartitionChange
from tidelog.cluster.zk_layout import (
    BrokerRegistration,
    PartitionState,
    TopicAssignment,
    ZkLayoutError,
    new_topic_id,
)
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
    ) -> None:
        self.broker_id = registration.broker_id
        self.store = ZkStore(client)
        self._registration = registration
        self._unclean = unclean_leader_election_enable
        self._rng = rng or random.Random()
        self._clock_ms = clock_ms
        self._inbox = EventInbox()
        self._fence: ControllerFence | None = None
        self._broker_epoch: int | None = None
        self._live: dict[int, LiveBroker] = {}
        self._assignments: dict[str, TopicAssignment] = {}
        self._states: dict[TopicPartition, VersionedState] = {}
        self._watched_topics: set[str] = set()  # topic znodes with a data watch

    # ------------------------------------------------------------ lifecycle

    def start(self) -> list[PartitionChange]:
        """Register this broker, watch ZooKeeper, and stand for controller; returns the
        partition states written if this broker won and repaired the cluster on failover."""
        self.store.ensure_paths()
        self._broker_epoch = self.store.register_broker(self._registration)
        client = self.store.client
        client.add_listener(self._on_session_state)
        client.DataWatch(layout.CONTROLLER_PATH, self._on_controller_znode)
        for path, event in (
            (layout.BROKER_IDS_PATH, ControllerEvent.BROKER_CHANGE),
            (layout.TOPICS_PATH, ControllerEvent.TOPIC_CHANGE),
            (layout.ISR_CHANGE_NOTIFICATION_PATH, ControllerEvent.ISR_CHANGE),
            (layout.DELETE_TOPICS_PATH, ControllerEvent.TOPIC_DELETION),
        ):
            client.ChildrenWatch(path, self._children_watcher(event), send_event=True)
        return self._elect()

    def _on_session_state(self, state: KazooState) -> None:
        if state == KazooState.LOST:
            self._inbox.put(ControllerEvent.SESSION_LOST)

    def _on_controller_znode(
        self, data: bytes | None, stat: object, event: WatchedEvent | None = None
    ) -> None:
        self._inbox.put(ControllerEvent.CONTROLLER_CHANGE)

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
        return self._fence is not None

    @property
    def controller_epoch(self) -> int | None:
        return self._fence.epoch if self._fence is not None else None

    @property
    def fence(self) -> ControllerFence | None:
        return self._fence

    def cached_state(self, tp: TopicPartition) -> VersionedState | None:
        """The controller's view of a partition (None when not controller or unknown)."""
        return self._states.get(tp)

    def live_broker_ids(self) -> frozenset[int]:
        return frozenset(self._live)

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
            if self._fence is not None and self.store.controller_id() != self.broker_id:
                self._resign()
            return self._elect()
        if self._fence is None:
            return []  # the other events are the controller's business
        if event is ControllerEvent.BROKER_CHANGE:
            return self._on_broker_change()
        if event is ControllerEvent.TOPIC_CHANGE:
            return self._on_topic_change()
        if event is ControllerEvent.ISR_CHANGE:
            self._on_isr_change()
            return []
        if event is ControllerEvent.PARTITION_MODIFICATION:
            return self._on_partition_modification()
        self._on_topic_deletion()
        return []

    # ------------------------------------------------------------ election and failover

    def _elect(self) -> list[PartitionChange]:
        if self._fence is not None:
            return []
        active = self.store.controller_id()
        if active == self.broker_id:
            # Our /controller znode (this session's) but no fence: the election's reply was
            # lost with the connection. /controller and the epoch bump are created together
            # and nobody else can bump while the znode exists, so the current epoch is ours.
            current = self.store.controller_epoch()
            if current is None:
                return []
            self._fence = ControllerFence(self.broker_id, *current)
            return self._on_failover()
        if active is not None:
            return []
        try:
            self._fence = self.store.register_controller(self.broker_id, self._clock_ms())
        except ControllerMovedError:
            return []
        return self._on_failover()

    def _resign(self) -> None:
        if self._fence is not None:
            _log.warning("broker %d resigned as controller (epoch %d)",
                         self.broker_id, self._fence.epoch)
        self._fence = None
        self._live.clear()
        self._assignments.clear()
        self._states.clear()

    def _on_failover(self) -> list[PartitionChange]:
        """Kafka's onControllerFailover: load the cluster, then repair what the previous
        controller could not (leaders on dead brokers, topics without states)."""
        self._live = self.store.live_brokers()
        self._assignments.clear()
        self._states.clear()
        changes = self._on_topic_change()
        self._on_isr_change()
        self._on_topic_deletion()
        return changes + self._reconcile(self._states.keys())

    def _on_broker_change(self) -> list[PartitionChange]:
        before = self._live
        self._live = self.store.live_brokers()
        # A broker that came back with a new epoch has lost its in-memory state: treat it
        # as dead first so leadership moves away, then as live (Kafka's KIP-380 bounce).
        bounced = {
            b
            for b, live in self._live.items()
            if b in before and before[b].broker_epoch != live.broker_epoch
        }
        changes = self._reconcile(self._states.keys(), exclude=bounced) if bounced else []
        return changes + self._reconcile(self._states.keys())

    def _reconcile(
        self, partitions: Collection[TopicPartition], exclude: Collection[int] = ()
    ) -> list[PartitionChange]:
        live = set(self._live) - set(exclude)
        changes = []
        for tp in sorted(partitions):
            replicas = self._replicas(tp)

            def decide(current: VersionedState, replicas: tuple[int, ...] = replicas) -> State:
                return placement.reconcile_partition(
                    current.state,
                    replicas,
                    live,
                    controller_epoch=self._epoch(),
                    unclean_leader_election_enable=self._unclean,
                )

            change = self._write_with_retry(tp, decide)
            if change is not None:
                changes.append(change)
        return changes

    def _write_with_retry(
        self,
        tp: TopicPartition,
        decide: Callable[[VersionedState], State],
    ) -> PartitionChange | None:
        """Decide on the cached state and write conditionally; on a version conflict (a
        leader changed the ISR meanwhile) re-read and decide again."""
        fence = self._require_fence()
        for _ in range(MAX_WRITE_ATTEMPTS):
            current = self._states.get(tp) or self.store.partition_state(tp)
            if current is None:
                return None
            new_state = decide(current)
            if new_state is None:
                return None
            try:
                version = self.store.write_partition_state(fence, tp, new_state, current.zk_version)
            except ControllerMovedError:
                self._resign()
                raise
            if version is not None:
                written = VersionedState(new_state, version)
                self._states[tp] = written
                return PartitionChange(tp, written)
            fresh = self.store.partition_state(tp)
            if fresh is None:
                self._states.pop(tp, None)
                return None
            self._states[tp] = fresh
        raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"{tp}: state kept changing")

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
        fence = self._require_fence()
        live = self.store.live_brokers()
        self._live = live
        n = len(live)
        assignment = TopicAssignment(
            topic,
            topic_id or new_topic_id(),
            placement.assign_replicas(
                live,
                partition_count,
                replication_factor,
                start_index=self._rng.randrange(n) if n else 0,
                replica_shift=self._rng.randrange(n) if n else 0,
            ),
        )
        states = {
            p: placement.initial_state(replicas, live, controller_epoch=fence.epoch)
            for p, replicas in assignment.partitions.items()
        }
        try:
            written = self.store.create_topic(fence, assignment, states)
        except ControllerMovedError:
            self._resign()
            raise
        self._assignments[topic] = assignment
        for p, state in written.items():
            self._states[TopicPartition(topic, p)] = state
        return assignment

    def _on_topic_change(self) -> list[PartitionChange]:
        """Load new topics; create partition states for those an admin only assigned."""
        fence = self._require_fence()
        changes = []
        topics = set(self.store.topics())
        for gone in set(self._assignments) - topics:
            self._forget_topic(gone)
        for topic in sorted(topics - set(self._assignments)):
            try:
                changes.extend(self._load_topic(fence, topic))
            except NoNodeError:
                continue  # deleted while we read it
            except ZkLayoutError as exc:
                # One unreadable topic must not keep the others from being served.
                _log.error("topic %s skipped: %s", topic, exc)
        return changes

    def _on_partition_modification(self) -> list[PartitionChange]:
        """Kafka's PartitionModifications: states for partitions an admin added."""
        fence = self._require_fence()
        changes = []
        for topic, known in list(self._assignments.items()):
            fresh = self.store.topic_assignment(topic)
            if fresh is not None and set(fresh.partitions) != set(known.partitions):
                changes.extend(self._load_topic(fence, topic))
        return changes

    def _watch_topic(self, topic: str) -> None:
        if topic in self._watched_topics:
            return
        self._watched_topics.add(topic)

        def watcher(data: bytes | None, stat: object) -> None:
            self._inbox.put(ControllerEvent.PARTITION_MODIFICATION)

        self.store.client.DataWatch(layout.topic_path(topic), watcher)

    def _load_topic(self, fence: ControllerFence, topic: str) -> list[PartitionChange]:
        self._watch_topic(topic)
        assignment = self.store.topic_assignment(topic)
        if assignment is None:
            return []
        missing = {}
        loaded = {}
        for p, replicas in assignment.partitions.items():
            tp = TopicPartition(topic, p)
            current = self.store.partition_state(tp)
            if current is not None:
                loaded[tp] = current
            elif set(replicas) & set(self._live):
                missing[p] = placement.initial_state(
                    replicas, self._live, controller_epoch=fence.epoch
                )
        written = self.store.create_partition_states(fence, topic, missing) if missing else {}
        self._assignments[topic] = assignment
        self._states.update(loaded)
        changes = []
        for p, state in written.items():
            self._states[TopicPartition(topic, p)] = state
            changes.append(PartitionChange(TopicPartition(topic, p), state))
        return changes

    def _on_isr_change(self) -> None:
        for name in self.store.isr_change_notifications():
            for tp in self.store.take_isr_change(name):
                fresh = self.store.partition_state(tp)
                if fresh is not None and tp.topic in self._assignments:
                    self._states[tp] = fresh

    def _on_topic_deletion(self) -> None:
        fence = self._require_fence()
        for topic in self.store.topics_to_delete():
            self.store.delete_topic(fence, topic)
            self._forget_topic(topic)

    def _forget_topic(self, topic: str) -> None:
        self._assignments.pop(topic, None)
        for tp in [tp for tp in self._states if tp.topic == topic]:
            del self._states[tp]

    # ------------------------------------------------------------ leadership

    def elect_preferred_leaders(
        self, partitions: Collection[TopicPartition] | None = None
    ) -> list[PartitionChange]:
        """Move leadership back to each partition's first replica where it can lead."""
        live = set(self._live)
        targets = sorted(self._states) if partitions is None else sorted(partitions)
        changes = []
        for tp in targets:
            replicas = self._replicas(tp)

            def decide(current: VersionedState, replicas: tuple[int, ...] = replicas) -> State:
                return placement.elect_preferred(
                    current.state, replicas, live, controller_epoch=self._epoch()
                )

            change = self._write_with_retry(tp, decide)
            if change is not None:
                changes.append(change)
        return changes

    def _replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        assignment = self._assignments.get(tp.topic)
        if assignment is None or tp.partition not in assignment.partitions:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, str(tp))
        return assignment.partitions[tp.partition]

    def _require_fence(self) -> ControllerFence:
        if self._fence is None:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, f"broker {self.broker_id}")
        return self._fence

    def _epoch(self) -> int:
        return self._require_fence().epoch
