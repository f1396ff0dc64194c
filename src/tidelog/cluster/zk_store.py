"""Typed reads and conditional writes of Kafka's znodes over one kazoo client.

Blocking network calls: run on a thread, never on the event loop. Layouts are in
`zk_layout`. Writes a controller makes go through `ControllerFence`: each is a ZooKeeper
multi-op whose first operation checks `/controller_epoch`'s version, so once another broker
has become controller (and bumped that version) every write of the old one fails as a whole
with `ControllerMovedError`.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    RuntimeInconsistency,
)
from kazoo.protocol.states import WatchedEvent

from tidelog.cluster import zk_layout as layout
from tidelog.cluster.zk_admin import AdminZnodes
from tidelog.cluster.zk_layout import (
    BrokerRegistration,
    ControllerRegistration,
    PartitionState,
    TopicAssignment,
    ZkLayoutError,
)
from tidelog.errors import ErrorCode, KafkaError
from tidelog.types import TopicPartition

Watch = Callable[[WatchedEvent], None]
REGISTER_ATTEMPTS = 3  # create/read rounds when a stale registration expires meanwhile
MAX_ELECTION_PARTITIONS = 100_000  # partitions read from one election request


class ControllerMovedError(KafkaError):
    """This broker's controller epoch is stale: another broker is (or was) elected since."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.NOT_CONTROLLER, message)


@dataclass(frozen=True, slots=True)
class LiveBroker:
    """A registered broker and its epoch (the czxid of its ephemeral znode)."""

    registration: BrokerRegistration
    broker_epoch: int

    @property
    def broker_id(self) -> int:
        return self.registration.broker_id


@dataclass(frozen=True, slots=True)
class VersionedState:
    """A partition state and the znode version a conditional write must name."""

    state: PartitionState
    zk_version: int


@dataclass(frozen=True, slots=True)
class ControllerFence:
    """Proof of election: the epoch this controller owns and `/controller_epoch`'s version."""

    controller_id: int
    epoch: int
    epoch_zk_version: int


class ZkStore(AdminZnodes):
    """Kafka's znodes read and written through `client` (already started): every ZooKeeper
    write of a broker goes through here (cluster id, topic configs and producer id blocks in
    `zk_admin.AdminZnodes`)."""

    def __init__(self, client: KazooClient) -> None:
        self.client = client

    def ensure_paths(self) -> None:
        for path in layout.PERSISTENT_PATHS:
            self.client.ensure_path(path)

    # ------------------------------------------------------------ brokers

    def register_broker(self, registration: BrokerRegistration) -> int:
        """Create `/brokers/ids/<id>` (ephemeral) and return the broker epoch (its czxid).

        A znode left by this same session (a retried create) is accepted; one owned by
        another session means the id is taken: DUPLICATE_BROKER_REGISTRATION. A znode that
        vanishes between our create and our read (the previous owner's session expired just
        then: a restarted broker) is created again.
        """
        path = layout.broker_path(registration.broker_id)
        for _ in range(REGISTER_ATTEMPTS):
            try:
                _, stat = self.client.create(
                    path, registration.encode(), ephemeral=True, include_data=True
                )
                break
            except NodeExistsError:
                try:
                    _, stat = self.client.get(path)
                except NoNodeError:
                    continue  # expired in between: ours to create now
                if stat.ephemeralOwner != self.client.client_id[0]:
                    raise KafkaError(
                        ErrorCode.DUPLICATE_BROKER_REGISTRATION,
                        f"broker {registration.broker_id} is registered by another session",
                    ) from None
                break
        else:
            raise KafkaError(ErrorCode.DUPLICATE_BROKER_REGISTRATION,
                             f"broker {registration.broker_id}: registration kept vanishing")
        czxid: int = stat.czxid
        return czxid

    def live_brokers(self, watch: Watch | None = None) -> dict[int, LiveBroker]:
        brokers: dict[int, LiveBroker] = {}
        for child in self.client.get_children(layout.BROKER_IDS_PATH, watch=watch):
            if not child.isascii() or not child.isdigit():
                continue  # not a broker id; Kafka ignores such children too
            broker_id = int(child)
            try:
                data, stat = self.client.get(layout.broker_path(broker_id))
            except NoNodeError:
                continue  # died between the listing and the read
            brokers[broker_id] = LiveBroker(BrokerRegistration.decode(broker_id, data), stat.czxid)
        return brokers

    # ------------------------------------------------------------ controller

    def controller_id(self, watch: Watch | None = None) -> int | None:
        try:
            data, _ = self.client.get(layout.CONTROLLER_PATH, watch=watch)
        except NoNodeError:
            return None
        return ControllerRegistration.decode(data).broker_id

    def controller_epoch(self) -> tuple[int, int] | None:
        """(epoch, znode version) of `/controller_epoch`, None before the first election."""
        try:
            data, stat = self.client.get(layout.CONTROLLER_EPOCH_PATH)
        except NoNodeError:
            return None
        return layout.decode_controller_epoch(data), stat.version

    def register_controller(self, broker_id: int, now_ms: int) -> ControllerFence:
        """Kafka's registerControllerAndIncrementControllerEpoch: in one multi-op, create the
        ephemeral `/controller` and set `/controller_epoch` to epoch+1 on the version read.

        Raises ControllerMovedError if another broker won.
        """
        current = self.controller_epoch()
        if current is None:
            current = self._create_controller_epoch()
        epoch, version = current
        new_epoch = epoch + 1
        transaction = self.client.transaction()
        transaction.create(
            layout.CONTROLLER_PATH,
            ControllerRegistration(broker_id, now_ms).encode(),
            ephemeral=True,
        )
        transaction.set_data(
            layout.CONTROLLER_EPOCH_PATH, layout.encode_controller_epoch(new_epoch), version
        )
        results = transaction.commit()
        if not _failed(results):
            return ControllerFence(broker_id, new_epoch, results[1].version)
        # Lost the race, or our own earlier attempt succeeded before a connection loss.
        if self.controller_id() == broker_id:
            again = self.controller_epoch()
            if again is not None and again[0] == new_epoch:
                return ControllerFence(broker_id, new_epoch, again[1])
        raise ControllerMovedError(f"broker {broker_id} lost the controller election")

    def _create_controller_epoch(self) -> tuple[int, int]:
        try:
            self.client.create(
                layout.CONTROLLER_EPOCH_PATH,
                layout.encode_controller_epoch(layout.INITIAL_CONTROLLER_EPOCH),
            )
        except NodeExistsError:
            current = self.controller_epoch()
            if current is not None:
                return current
        return layout.INITIAL_CONTROLLER_EPOCH, 0

    # ------------------------------------------------------------ topics

    def topics(self, watch: Watch | None = None) -> list[str]:
        return sorted(self.client.get_children(layout.TOPICS_PATH, watch=watch))

    def topic_assignment(self, topic: str) -> TopicAssignment | None:
        try:
            data, _ = self.client.get(layout.topic_path(topic))
        except NoNodeError:
            return None
        return TopicAssignment.decode(topic, data)

    def partition_state(
        self, tp: TopicPartition, watch: Watch | None = None
    ) -> VersionedState | None:
        try:
            data, stat = self.client.get(layout.partition_state_path(tp), watch=watch)
        except NoNodeError:
            return None
        return VersionedState(PartitionState.decode(data), stat.version)

    def create_topic(
        self,
        fence: ControllerFence,
        assignment: TopicAssignment,
        states: dict[int, PartitionState],
    ) -> dict[int, VersionedState]:
        """Create the assignment, partition znodes and initial states in one fenced multi-op.

        TOPIC_ALREADY_EXISTS if the topic znode exists.
        """
        transaction = self.client.transaction()
        transaction.check(layout.CONTROLLER_EPOCH_PATH, fence.epoch_zk_version)
        transaction.create(layout.topic_path(assignment.topic), assignment.encode())
        return self._commit_partition_states(transaction, fence, assignment.topic, states, True)

    def create_topic_assignment(self, assignment: TopicAssignment) -> None:
        """What any broker's CreateTopics handler writes (Kafka's AdminZkClient): only the
        assignment; the controller sees the new child of /brokers/topics and creates the
        partition states. TOPIC_ALREADY_EXISTS if it exists."""
        try:
            self.client.create(layout.topic_path(assignment.topic), assignment.encode())
        except NodeExistsError:
            raise KafkaError(
                ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {assignment.topic} exists"
            ) from None

    def create_partition_states(
        self, fence: ControllerFence, topic: str, states: dict[int, PartitionState]
    ) -> dict[int, VersionedState]:
        """Controller: create missing partition znodes and initial states of `topic`."""
        transaction = self.client.transaction()
        transaction.check(layout.CONTROLLER_EPOCH_PATH, fence.epoch_zk_version)
        has_parent = self.client.exists(layout.partitions_path(topic)) is not None
        return self._commit_partition_states(transaction, fence, topic, states, not has_parent)

    def _commit_partition_states(
        self,
        transaction: Any,
        fence: ControllerFence,
        topic: str,
        states: dict[int, PartitionState],
        create_parent: bool,
    ) -> dict[int, VersionedState]:
        if create_parent:
            transaction.create(layout.partitions_path(topic), b"")
        for partition in sorted(states):
            tp = TopicPartition(topic, partition)
            transaction.create(layout.partition_path(tp), b"")
            transaction.create(layout.partition_state_path(tp), states[partition].encode())
        results = transaction.commit()
        failure = _failed(results)
        if failure is not None:
            self._raise_if_fenced(results, fence)
            if isinstance(failure, NodeExistsError):
                raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {topic} exists")
            raise failure
        return {p: VersionedState(s, 0) for p, s in states.items()}

    def write_partition_state(
        self, fence: ControllerFence, tp: TopicPartition, state: PartitionState, zk_version: int
    ) -> int | None:
        """Controller write: set the state if the znode is still at `zk_version`.

        Returns the new version, or None if the state changed meanwhile (re-read and decide
        again). Raises ControllerMovedError if this controller is fenced.
        """
        transaction = self.client.transaction()
        transaction.check(layout.CONTROLLER_EPOCH_PATH, fence.epoch_zk_version)
        transaction.set_data(layout.partition_state_path(tp), state.encode(), zk_version)
        results = transaction.commit()
        failure = _failed(results)
        if failure is None:
            new_version: int = results[1].version
            return new_version
        self._raise_if_fenced(results, fence)
        if isinstance(failure, BadVersionError | NoNodeError):
            return None
        raise failure

    def delete_topic(self, fence: ControllerFence, topic: str) -> bool:
        """Delete a topic's znodes (and its deletion request) in one fenced multi-op."""
        assignment = self.topic_assignment(topic)
        transaction = self.client.transaction()
        transaction.check(layout.CONTROLLER_EPOCH_PATH, fence.epoch_zk_version)
        if assignment is not None:
            for partition in sorted(assignment.partitions):
                tp = TopicPartition(topic, partition)
                transaction.delete(layout.partition_state_path(tp))
                transaction.delete(layout.partition_path(tp))
            transaction.delete(layout.partitions_path(topic))
            transaction.delete(layout.topic_path(topic))
        if self.client.exists(layout.delete_topic_path(topic)) is not None:
            transaction.delete(layout.delete_topic_path(topic))
        results = transaction.commit()
        if _failed(results) is not None:
            self._raise_if_fenced(results, fence)
            return False
        return assignment is not None

    def add_partitions(self, topic: str, additions: Mapping[int, tuple[int, ...]]) -> None:
        """What a CreatePartitions handler writes (Kafka's AdminZkClient.addPartitions): the
        assignment with new partitions, conditional on the version read; the controller sees
        the data change and creates their states. UNKNOWN_TOPIC_OR_PARTITION if it is gone,
        INVALID_PARTITIONS if a partition exists or the assignment moved meanwhile."""
        try:
            data, stat = self.client.get(layout.topic_path(topic))
        except NoNodeError:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {topic}") from None
        current = TopicAssignment.decode(topic, data)
        if set(additions) & set(current.partitions):
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"{topic}: partition exists")
        merged = TopicAssignment(
            topic, current.topic_id, {**current.partitions, **additions},
            current.adding_replicas, current.removing_replicas,
        )
        try:
            self.client.set(layout.topic_path(topic), merged.encode(), version=stat.version)
        except (BadVersionError, NoNodeError):
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS, f"{topic}: assignment changed meanwhile"
            ) from None

    def request_topic_deletion(self, topic: str) -> None:
        """What an admin (DeleteTopics handler) writes; the controller does the deleting."""
        with contextlib.suppress(NodeExistsError):  # already requested: nothing more to do
            self.client.create(layout.delete_topic_path(topic), b"")

    def request_preferred_election(self, partitions: list[TopicPartition]) -> bool:
        """What an admin (ElectLeaders handler) writes; False while an earlier request is
        still pending (Kafka: "preferred replica leader election currently in progress")."""
        document = {"version": 1, "partitions": [
            {"topic": tp.topic, "partition": tp.partition} for tp in partitions
        ]}
        try:
            self.client.create(
                layout.PREFERRED_REPLICA_ELECTION_PATH, json.dumps(document).encode("utf-8"),
                makepath=True,
            )
        except NodeExistsError:
            return False
        return True

    def preferred_election_pending(self) -> bool:
        return self.client.exists(layout.PREFERRED_REPLICA_ELECTION_PATH) is not None

    def take_preferred_election(self) -> list[TopicPartition] | None:
        """The controller's side: the requested partitions (None: no request), the znode
        deleted. A payload that does not parse is deleted and ignored (ZkLayoutError)."""
        try:
            data, _ = self.client.get(layout.PREFERRED_REPLICA_ELECTION_PATH)
        except NoNodeError:
            return None
        with contextlib.suppress(NoNodeError):
            self.client.delete(layout.PREFERRED_REPLICA_ELECTION_PATH)
        try:
            document = json.loads(data)
            return [TopicPartition(str(item["topic"]), int(item["partition"]))
                    for item in document["partitions"][:MAX_ELECTION_PARTITIONS]]
        except (ValueError, KeyError, TypeError) as error:
            raise ZkLayoutError(f"{layout.PREFERRED_REPLICA_ELECTION_PATH}: {error}") from None

    def topics_to_delete(self, watch: Watch | None = None) -> list[str]:
        return sorted(self.client.get_children(layout.DELETE_TOPICS_PATH, watch=watch))

    # ------------------------------------------------------------ reassignments

    def topic_assignment_versioned(self, topic: str) -> tuple[TopicAssignment, int] | None:
        try:
            data, stat = self.client.get(layout.topic_path(topic))
        except NoNodeError:
            return None
        return TopicAssignment.decode(topic, data), stat.version

    def write_topic_assignment(
        self, fence: ControllerFence, assignment: TopicAssignment, zk_version: int
    ) -> int | None:
        """Controller write of a topic's assignment (a reassignment's start or end), fenced
        and conditional on the version read; None if it changed meanwhile (CreatePartitions)."""
        transaction = self.client.transaction()
        transaction.check(layout.CONTROLLER_EPOCH_PATH, fence.epoch_zk_version)
        transaction.set_data(layout.topic_path(assignment.topic), assignment.encode(), zk_version)
        results = transaction.commit()
        failure = _failed(results)
        if failure is None:
            new_version: int = results[1].version
            return new_version
        self._raise_if_fenced(results, fence)
        if isinstance(failure, BadVersionError | NoNodeError):
            return None
        raise failure

    def request_reassignment(self, targets: Mapping[TopicPartition, tuple[int, ...]]) -> bool:
        """What an admin writes (Kafka's `/admin/reassign_partitions`); False while an earlier
        request is still there (the controller deletes each once it has started it)."""
        try:
            self.client.create(layout.REASSIGN_PARTITIONS_PATH, layout.encode_reassignment(targets))
        except NodeExistsError:
            return False
        return True

    def reassignment_request(
        self, watch: Watch | None = None
    ) -> dict[TopicPartition, tuple[int, ...]] | None:
        """The pending request (None: none). A malformed one raises ZkLayoutError."""
        try:
            data, _ = self.client.get(layout.REASSIGN_PARTITIONS_PATH, watch=watch)
        except NoNodeError:
            return None
        return layout.decode_reassignment(data)

    def delete_reassignment_request(self) -> None:
        with contextlib.suppress(NoNodeError):
            self.client.delete(layout.REASSIGN_PARTITIONS_PATH)

    # ------------------------------------------------------------ ISR changes by leaders

    def leader_update_isr(
        self, tp: TopicPartition, state: PartitionState, zk_version: int
    ) -> int | None:
        """A partition leader shrinks or expands its ISR (Kafka's ZooKeeper-mode path).

        Conditional on the version the leader last saw: if the controller changed the state
        meanwhile (new leader epoch), the write fails (None) and the leader must re-read.
        On success an ISR-change notification tells the controller to refresh.
        """
        try:
            stat = self.client.set(layout.partition_state_path(tp), state.encode(), zk_version)
        except (BadVersionError, NoNodeError):
            return None
        self.client.create(
            f"{layout.ISR_CHANGE_NOTIFICATION_PATH}/{layout.ISR_CHANGE_PREFIX}",
            layout.encode_isr_change([tp]),
            sequence=True,
        )
        new_version: int = stat.version
        return new_version

    def isr_change_notifications(self, watch: Watch | None = None) -> list[str]:
        children = self.client.get_children(layout.ISR_CHANGE_NOTIFICATION_PATH, watch=watch)
        return sorted(c for c in children if c.startswith(layout.ISR_CHANGE_PREFIX))

    def take_isr_change(self, name: str) -> list[TopicPartition]:
        """Read and delete one notification; a vanished one yields nothing."""
        path = f"{layout.ISR_CHANGE_NOTIFICATION_PATH}/{name}"
        try:
            data, _ = self.client.get(path)
            self.client.delete(path)
        except NoNodeError:
            return []
        return layout.decode_isr_change(data)

    # ------------------------------------------------------------ helpers

    def _raise_if_fenced(self, results: Sequence[Any], fence: ControllerFence) -> None:
        if isinstance(results[0], BadVersionError | NoNodeError):
            raise ControllerMovedError(
                f"controller {fence.controller_id} epoch {fence.epoch} is fenced"
            )


def _failed(results: Sequence[Any]) -> Exception | None:
    """The operation that failed a multi-op: the ones before it come back as RolledBackError,
    the ones after it as RuntimeInconsistency."""
    for result in results:
        if isinstance(result, Exception) and not isinstance(
            result, RolledBackError | RuntimeInconsistency
        ):
            return result
    return None
