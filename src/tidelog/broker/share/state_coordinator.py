"""The share coordinator in cluster mode (KIP-932): `__share_group_state`, replicated, and the
state of the share partitions whose keys fall in the partitions this broker leads.

Runs on the event loop; the topic is created through ZooKeeper (`InternalTopicCreator`).

- `__share_group_state`: share.coordinator.state.topic.num.partitions partitions (Kafka: 50),
  replication factor min(share.coordinator.state.topic.replication.factor, live brokers),
  min.insync.replicas = share.coordinator.state.topic.min.isr (capped at the factor),
  compacted, Kafka's settings.
- A key (group, topic id, partition) lives in partition `partition_for("group:topicId:
  partition")` (Kafka's ShareCoordinatorService); its coordinator is that partition's
  leader (FindCoordinator key_type 2). Like the transaction coordinator (D14), a partition's
  `ShareStateStore` (coordinator/share_state.py, pure) is loaded by replaying the partition
  when this broker becomes its leader (a role listener; COORDINATOR_LOAD_IN_PROGRESS
  meanwhile, NOT_COORDINATOR elsewhere) and dropped when it stops leading.
- Each operation runs under the partition's lock: the store returns records, they are
  appended with the leader epoch and answered once the high watermark passes them
  (acks=all), and only then replayed; a failed append changes no state and the partition
  leader retries.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from tidelog.broker import clock
from tidelog.broker.internal_topics import SHARE_GROUP_STATE_TOPIC
from tidelog.broker.replication.internal_topic import InternalTopicCreator, partition_count
from tidelog.coordinator.coordinator import partition_for
from tidelog.coordinator.share_records import ShareStateRecord, decode_share_record
from tidelog.coordinator.share_state import ShareStateStore, coordinator_key
from tidelog.errors import CorruptRecordError, ErrorCode, KafkaError
from tidelog.records.batch import RecordBatch
from tidelog.records.builder import NewRecord, build_batch
from tidelog.records.record import iter_records
from tidelog.storage.log_scan import iter_batches_from
from tidelog.types import TopicPartition

if TYPE_CHECKING:
    from tidelog.broker.replication.replica_manager import Replication
    from tidelog.broker.state import Broker

log = logging.getLogger("tidelog.broker.share.state_coordinator")
SEGMENT_BYTES = 100 * 1024 * 1024  # Kafka's share.coordinator.state.topic.segment.bytes
Key = tuple[str, uuid.UUID, int]
T = TypeVar("T")


class ShareStateCreator(InternalTopicCreator):
    def __init__(self, broker: Broker, replication: Replication) -> None:
        self.broker = broker
        super().__init__(replication, SHARE_GROUP_STATE_TOPIC, self._layout)

    def _layout(self, live_brokers: int) -> tuple[int, int, dict[str, str]]:
        config = self.broker.config
        factor = max(1, min(config.share_coordinator_state_topic_replication_factor,
                            live_brokers))
        min_isr = max(1, min(config.share_coordinator_state_topic_min_isr, factor))
        configs = {"cleanup.policy": "compact", "segment.bytes": str(SEGMENT_BYTES),
                   "min.insync.replicas": str(min_isr)}
        return max(1, config.share_coordinator_state_topic_num_partitions), factor, configs


class ShareStateCoordinator:
    def __init__(self, broker: Broker, replication: Replication) -> None:
        self.broker = broker
        self.replication = replication
        self.creator = ShareStateCreator(broker, replication)
        self.stores: dict[int, ShareStateStore] = {}
        self.epochs: dict[int, int] = {}
        self._loading: dict[int, object] = {}
        self._locks: dict[int, asyncio.Lock] = {}
        self._background: set[asyncio.Task[None]] = set()
        replication.role_listeners.append(self._on_role)
        for tp, state in list(replication.partitions.items()):
            if tp.topic == SHARE_GROUP_STATE_TOPIC and state.leader == broker.config.node_id:
                self._on_role(tp, True)

    # ------------------------------------------------------------------ routing
    def partition_count(self) -> int:
        return partition_count(self.replication, SHARE_GROUP_STATE_TOPIC,
                               self.broker.config.share_coordinator_state_topic_num_partitions)

    def partition_of(self, key: Key) -> int:
        return partition_for(coordinator_key(*key), self.partition_count())

    def leader_of(self, key: Key) -> int | None:
        """The coordinator's broker id for the key (None: no topic or no leader yet)."""
        view = self.replication.view
        if view is None or SHARE_GROUP_STATE_TOPIC not in view.topics:
            self.creator.ensure()
            return None
        versioned = view.states.get(TopicPartition(SHARE_GROUP_STATE_TOPIC,
                                                   self.partition_of(key)))
        if versioned is None or versioned.state.leader not in view.brokers:
            return None
        return versioned.state.leader

    # ------------------------------------------------------------------ load and unload
    def _on_role(self, tp: TopicPartition, is_leader: bool) -> None:
        if tp.topic != SHARE_GROUP_STATE_TOPIC:
            return
        state = self.replication.partitions.get(tp)
        partition = tp.partition
        if not is_leader or state is None:
            self._unload(partition)
            return
        if self.epochs.get(partition) == state.leader_epoch:
            return
        self._unload(partition)
        token = object()
        self._loading[partition] = token
        task = asyncio.ensure_future(self._load(partition, state.leader_epoch, token))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _load(self, partition: int, epoch: int, token: object) -> None:
        await asyncio.sleep(0)  # the stopped replica fetcher finishes first
        try:
            records = await asyncio.to_thread(self._read_partition, partition)
        except (OSError, KafkaError, ValueError) as error:
            log.error("loading share state of partition %d failed: %s", partition, error)
            if self._loading.get(partition) is token:
                del self._loading[partition]
            return
        if self._loading.get(partition) is not token:
            return  # leadership moved while reading
        del self._loading[partition]
        store = ShareStateStore()
        for record in records:
            store.replay(record)
        self.stores[partition] = store
        self.epochs[partition] = epoch
        log.info("share coordinator for partition %d at epoch %d: %d keys",
                 partition, epoch, len(store.entries))

    def _read_partition(self, partition: int) -> list[ShareStateRecord]:
        """Every record of the partition (blocking reads, on a worker thread)."""
        partition_log = self.broker.partition_log(SHARE_GROUP_STATE_TOPIC, partition)
        found: list[ShareStateRecord] = []
        for batch in iter_batches_from(partition_log, partition_log.log_start_offset):
            if batch.is_control:
                continue
            for record in iter_records(batch):
                if record.key is None:
                    raise CorruptRecordError("__share_group_state record without key")
                found.append(decode_share_record(record.key, record.value))
        return found

    def _unload(self, partition: int) -> None:
        self._loading.pop(partition, None)
        self.epochs.pop(partition, None)
        if self.stores.pop(partition, None) is not None:
            log.info("share coordinator for partition %d moved", partition)

    # ------------------------------------------------------------------ operations
    async def run(self, key: Key,
                  operation: Callable[[ShareStateStore, int], tuple[T, list[ShareStateRecord]]]
                  ) -> T:
        """Run `operation(store, now_ms)` on the key's store under the partition's lock,
        append its records, and replay them once replicated; returns its result. Raises
        NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS / COORDINATOR_NOT_AVAILABLE."""
        partition = self.partition_of(key)
        lock = self._locks.setdefault(partition, asyncio.Lock())
        async with lock:
            store, epoch = self._loaded(partition)
            result, records = operation(store, clock.now_ms())
            if records:
                await self._append(partition, epoch, records)
                store, _ = self._loaded(partition)
                if self.epochs.get(partition) != epoch:
                    raise KafkaError(ErrorCode.NOT_COORDINATOR, f"partition {partition} moved")
                for record in records:
                    store.replay(record)
            return result

    def _loaded(self, partition: int) -> tuple[ShareStateStore, int]:
        store = self.stores.get(partition)
        if store is None:
            if partition in self._loading:
                raise KafkaError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, f"loading {partition}")
            raise KafkaError(ErrorCode.NOT_COORDINATOR, f"not leading partition {partition}")
        return store, self.epochs[partition]

    async def _append(self, partition: int, epoch: int, records: list[ShareStateRecord]) -> None:
        from tidelog.broker.groups.cluster import append_leader_epoch, replicated

        tp = TopicPartition(SHARE_GROUP_STATE_TOPIC, partition)
        leader_epoch = append_leader_epoch(self.replication, tp)
        if leader_epoch != epoch:
            raise KafkaError(ErrorCode.NOT_COORDINATOR, f"{tp} at epoch {leader_epoch}")
        partition_log = self.broker.partition_log(SHARE_GROUP_STATE_TOPIC, partition)
        now_ms = clock.now_ms()
        buffer = build_batch(
            [NewRecord(value=r.value_bytes(), key=r.key_bytes()) for r in records], now_ms=now_ms
        )
        try:
            appended = partition_log.append(
                [RecordBatch(memoryview(buffer))], now_ms=now_ms, leader_epoch=leader_epoch
            )
        except OSError as error:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, str(error)) from None
        end_offset = appended.last_offset + 1
        self.broker.append_waiters.notify(tp)
        self.replication.after_leader_append(tp)
        fsync = (self.broker.wait_durable(partition_log, end_offset)
                 if partition_log.config.durability == "sync" else None)
        await replicated(self.replication, tp, end_offset, fsync)

    def close(self) -> None:
        for task in self._background:
            task.cancel()
