"""The narrow interfaces handlers depend on, with their single-node implementations.

A handler names what it may touch by the types of its dependencies (see `handlers/`); these
are the shared ones that are not a concrete class already:

- `Metrics`: what handlers and the router record. `NULL_METRICS` when metrics are off, so
  the hot path calls a no-op instead of testing for None.
- `PartitionReplication`: what Produce, Fetch and ListOffsets ask of replication.
  `SingleNodeReplication` answers as a lone leader (high watermark = log end offset);
  `replication.Replication` is the cluster implementation.
- `ClusterIdentity`: the cluster id, which changes once when a broker joins a cluster.
- `Lifecycle`: whether the broker is shutting down (parked fetches then answer at once).
- `PartitionRoleListener`: what replication tells the group coordinator.

Runs on the event loop; nothing here blocks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from tidelog.cluster.placement import check_leader_epoch
from tidelog.errors import ErrorCode
from tidelog.protocol.wire import FetchTopicData
from tidelog.storage.leader_epochs import end_offset_for_epoch
from tidelog.storage.log import PartitionLog
from tidelog.types import TopicPartition


class FetchedPartition(Protocol):
    """One partition a Fetch asked for, as metrics count what it served."""

    @property
    def name(self) -> str: ...

    @property
    def partition(self) -> int: ...

    @property
    def fetch_offset(self) -> int: ...


class Metrics(Protocol):
    def record_request(self, api_key: int, latency_s: float, error: str | None = None) -> None: ...

    def record_error(self, api_key: int, error: str) -> None: ...

    def record_produce(self, topic: str, partition: int, records: int, size: int) -> None: ...

    def record_fetch_response(
        self, wanted: Iterable[FetchedPartition], topics: Iterable[FetchTopicData]
    ) -> None: ...

    def record_fetch_parked(self, delta: int) -> None: ...

    def record_fetch_session(self, kind: str) -> None: ...

    def record_fsync(self, latency_s: float) -> None: ...


class NullMetrics:
    """Metrics off: every record is a no-op."""

    __slots__ = ()

    def record_request(self, api_key: int, latency_s: float, error: str | None = None) -> None:
        pass

    def record_error(self, api_key: int, error: str) -> None:
        pass

    def record_produce(self, topic: str, partition: int, records: int, size: int) -> None:
        pass

    def record_fetch_response(
        self, wanted: Iterable[FetchedPartition], topics: Iterable[FetchTopicData]
    ) -> None:
        pass

    def record_fetch_parked(self, delta: int) -> None:
        pass

    def record_fetch_session(self, kind: str) -> None:
        pass

    def record_fsync(self, latency_s: float) -> None:
        pass


NULL_METRICS = NullMetrics()


class PartitionReplication(Protocol):
    """Replication as the data handlers see it. Every method raises KafkaError
    (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, ...) when this broker may not answer."""

    def check_produce(self, tp: TopicPartition, acks: int) -> int:
        """Before an append: the leader epoch to stamp on the batch."""
        ...

    def after_leader_append(self, tp: TopicPartition) -> None: ...

    async def wait_for_high_watermark(
        self, tp: TopicPartition, end_offset: int, timeout_ms: int
    ) -> ErrorCode: ...

    def fetch_bounds(
        self, tp: TopicPartition, replica_id: int, fetch_offset: int, current_leader_epoch: int
    ) -> tuple[int, int]:
        """(high watermark, the offset a reader may read up to)."""
        ...

    def high_watermark(self, tp: TopicPartition, current_leader_epoch: int = -1) -> int: ...

    def leader_epoch(self, tp: TopicPartition) -> int: ...

    def end_offset_for_epoch(
        self, tp: TopicPartition, epoch: int, current_leader_epoch: int = -1
    ) -> tuple[int, int]:
        """OffsetForLeaderEpoch on the leader: (epoch found, its end offset)."""
        ...


class PartitionLogs(Protocol):
    def partition_log(self, topic: str, partition: int) -> PartitionLog: ...


class SingleNodeReplication:
    """A lone broker leads every partition at epoch 0 (its leader-epoch cache is the one entry
    epoch 0 from offset 0); its high watermark is the log end offset, and acks=all is answered
    after the local append (and fsync in sync mode). A request's current_leader_epoch is
    checked against 0 as Kafka's Partition.checkCurrentLeaderEpoch does (KIP-320)."""

    __slots__ = ("_logs",)

    EPOCHS = ((0, 0),)

    def __init__(self, logs: PartitionLogs) -> None:
        self._logs = logs

    def _leader_log(self, tp: TopicPartition, current_leader_epoch: int) -> PartitionLog:
        partition_log = self._logs.partition_log(tp.topic, tp.partition)
        check_leader_epoch(tp, current_leader_epoch, 0)
        return partition_log

    def check_produce(self, tp: TopicPartition, acks: int) -> int:
        return 0

    def after_leader_append(self, tp: TopicPartition) -> None:
        pass

    async def wait_for_high_watermark(
        self, tp: TopicPartition, end_offset: int, timeout_ms: int
    ) -> ErrorCode:
        return ErrorCode.NONE

    def fetch_bounds(
        self, tp: TopicPartition, replica_id: int, fetch_offset: int, current_leader_epoch: int
    ) -> tuple[int, int]:
        log_end_offset = self._leader_log(tp, current_leader_epoch).log_end_offset
        return log_end_offset, log_end_offset

    def high_watermark(self, tp: TopicPartition, current_leader_epoch: int = -1) -> int:
        return self._leader_log(tp, current_leader_epoch).log_end_offset

    def leader_epoch(self, tp: TopicPartition) -> int:
        return 0

    def end_offset_for_epoch(
        self, tp: TopicPartition, epoch: int, current_leader_epoch: int = -1
    ) -> tuple[int, int]:
        log_end_offset = self._leader_log(tp, current_leader_epoch).log_end_offset
        return end_offset_for_epoch(self.EPOCHS, epoch, log_end_offset)


@dataclass(slots=True)
class ClusterIdentity:
    """Mutable on purpose: a broker joining a ZooKeeper cluster adopts the cluster's id."""

    cluster_id: str


@dataclass(slots=True)
class Lifecycle:
    closing: bool = False  # set at shutdown: parked fetches answer at once


class PartitionRoleListener(Protocol):
    """The group coordinator as replication sees it (leadership of offsets partitions)."""

    def on_partition_role(self, partition: int, is_leader: bool) -> None: ...


class DurableWaits(Protocol):
    async def wait_durable(self, partition_log: PartitionLog, end_offset: int) -> None: ...


class LeaderEpochs(Protocol):
    """A partition's leader-epoch cache (storage's LeaderEpochCache), as a fetcher uses it."""

    @property
    def latest_epoch(self) -> int: ...

    def assign(self, epoch: int, start_offset: int) -> None: ...

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]: ...

    def truncate_from_end(self, end_offset: int) -> None: ...


class FollowedPartition(Protocol):
    """A partition this broker follows, as its replica fetcher sees it
    (replication.ReplicaState)."""

    @property
    def tp(self) -> TopicPartition: ...

    @property
    def log(self) -> PartitionLog: ...

    @property
    def epochs(self) -> LeaderEpochs: ...

    high_watermark: int  # the fetcher adopts the leader's
    @property
    def fetcher(self) -> object | None:
        """The current fetcher: a replaced one exits before touching the log."""


class FetcherSettings(Protocol):
    @property
    def acks_all_fsync(self) -> bool: ...


class FetcherOwner(Protocol):
    """Replication as a replica fetcher sees it (replication.Replication); a Protocol so the
    fetcher need not import the module that starts it."""

    @property
    def node_id(self) -> int: ...

    @property
    def settings(self) -> FetcherSettings: ...

    @property
    def broker(self) -> DurableWaits: ...

    @property
    def peer_security(self) -> Any: ...  # a peer_client.PeerSecurity (a sibling leaf)

    def leader_endpoint(self, broker_id: int) -> tuple[str, int] | None: ...

    async def wait_for_view(
        self, predicate: Callable[[Any], bool], timeout_ms: int  # Any: a ClusterView (a layer up)
    ) -> bool: ...

    def set_follower_high_watermark(
        self, state: Any, leader_high_watermark: int
    ) -> None: ...

    def follower_quota(self, state: Any) -> Any: ...  # a throttle.ReplicationQuota or None
