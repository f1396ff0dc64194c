"""The wired broker: config, topic metadata, the log manager and the services handlers share.

Runs on the event loop. Storage calls are synchronous and short (page-cache writes); the one
slow thing, fsync in sync durability mode, completes on the LogManager's fsync thread and is
handed back to the loop with `call_soon_threadsafe` (ARCHITECTURE D5, D7).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tidelog.broker import clock
from tidelog.broker.config import BrokerConfig
from tidelog.broker.delayed import AppendWaiters
from tidelog.broker.metadata import TopicInfo, TopicStore, load_or_create_cluster_id
from tidelog.broker.producer_ids import ProducerIdAllocator
from tidelog.errors import ErrorCode, KafkaError
from tidelog.storage.config import LogConfig
from tidelog.storage.log import PartitionLog
from tidelog.storage.manager import LogManager
from tidelog.types import TopicPartition

if TYPE_CHECKING:
    from tidelog.broker.replication import Replication

log = logging.getLogger("tidelog.broker")
_ZERO_UUID = uuid.UUID(int=0)


class Broker:
    """Everything a handler may touch. Groups add `groups`; metrics add `metrics`."""

    groups: Any
    metrics: Any

    def __init__(self, config: BrokerConfig) -> None:
        config.data_dir.mkdir(parents=True, exist_ok=True)
        self.config = config
        self.cluster_id = load_or_create_cluster_id(config.data_dir, config.node_id)
        self.topics = TopicStore(config.data_dir)
        self.logs = LogManager(
            config.data_dir,
            config.log,
            now_ms=clock.now_ms(),
            retention_check_interval_ms=config.log_retention_check_interval_ms,
            fsync_observer=self._observe_fsync,
            clock_s=clock.monotonic_s,
        )
        self.producer_ids = ProducerIdAllocator(config.data_dir)
        self.append_waiters = AppendWaiters()
        self.groups = None
        self.closing = False  # set at shutdown: parked fetches answer at once
        self.metrics = None
        self.replication: Replication | None = None  # set in cluster mode (--zookeeper)
        self._partition_logs: dict[TopicPartition, PartitionLog] = {}
        for info in self.topics.all():
            self._open_partitions(info, 0)

    # --- topics --------------------------------------------------------------------------
    def log_config_for(self, topic: TopicInfo) -> LogConfig:
        """Broker log.* defaults overlaid with the topic's own overrides."""
        if not topic.configs:
            return self.config.log
        return LogConfig.from_properties(topic.configs, base=self.config.log)

    def _open_partitions(self, info: TopicInfo, first: int) -> None:
        log_config = self.log_config_for(info)
        for partition in range(first, info.partitions):
            topic_partition = TopicPartition(info.name, partition)
            self._partition_logs[topic_partition] = self.logs.create(topic_partition, log_config)

    def create_topic(
        self,
        name: str,
        partitions: int,
        configs: Mapping[str, str],
        *,
        internal: bool = False,
    ) -> TopicInfo:
        """Validate (name, configs), record the topic, create its partition logs."""
        probe = TopicInfo(name, topic_id=_ZERO_UUID, partitions=partitions, configs=configs)
        self.log_config_for(probe)  # invalid config -> KafkaError(INVALID_CONFIG) before writing
        self.check_partition_budget(partitions)
        info = self.topics.create(name, partitions, configs, internal=internal)
        self._open_partitions(info, 0)
        log.info("created topic %s with %d partitions", name, partitions)
        return info

    def adopt_topic(
        self, name: str, topic_id: uuid.UUID, partitions: int, configs: Mapping[str, str]
    ) -> TopicInfo:
        """Cluster mode: mirror a topic created through ZooKeeper (same id), open its logs."""
        info = self.topics.get(name)
        if info is None:
            internal = name in ("__consumer_offsets", "__transaction_state")  # Kafka's internal
            info = self.topics.create(
                name, partitions, configs, topic_id=topic_id, internal=internal
            )
            self._open_partitions(info, 0)
        elif info.partitions < partitions:
            info = self.add_partitions(name, partitions)
        return info

    def delete_topic(self, name: str) -> None:
        info = self.topics.get(name)
        if info is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}")
        self.topics.delete(name)
        for partition in range(info.partitions):
            topic_partition = TopicPartition(name, partition)
            self._partition_logs.pop(topic_partition, None)
            self.logs.delete(topic_partition)
        log.info("deleted topic %s", name)

    def check_partition_budget(self, added: int) -> None:
        """Refuse partitions past max.broker.partitions: each holds open files, and a broker
        out of file descriptors can neither accept connections nor roll segments."""
        limit = self.config.max_broker_partitions
        current = sum(info.partitions for info in self.topics.all())
        if current + added > limit:
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS,
                f"{added} more partitions would exceed max.broker.partitions={limit} "
                f"({current} exist)",
            )

    def add_partitions(self, name: str, count: int) -> TopicInfo:
        before = self.topics.get(name)
        self.check_partition_budget(count - (before.partitions if before else 0))
        info = self.topics.set_partitions(name, count)
        self._open_partitions(info, before.partitions if before else 0)
        return info

    def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> TopicInfo:
        """Replace a topic's overrides and apply them to its open logs."""
        current = self.topics.get(name)
        if current is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}")
        probe = TopicInfo(name, current.topic_id, current.partitions, configs)
        log_config = self.log_config_for(probe)
        info = self.topics.set_configs(name, configs)
        for partition in range(info.partitions):
            self.logs.update_config(TopicPartition(name, partition), log_config)
        return info

    def partition_log(self, topic: str, partition: int) -> PartitionLog:
        partition_log = self._partition_logs.get(TopicPartition(topic, partition))
        if partition_log is None:
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no partition {topic}-{partition}"
            )
        return partition_log

    def auto_create(self, name: str) -> TopicInfo | None:
        """Create `name` with num.partitions if auto.create.topics.enable; else None."""
        if not self.config.auto_create_topics:
            return None
        return self.create_topic(name, self.config.num_partitions, {})

    # --- durability ----------------------------------------------------------------------
    async def wait_durable(self, partition_log: PartitionLog, end_offset: int) -> None:
        """Sync durability: return once offsets below `end_offset` are fsynced (group commit)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()

        def settle(error: BaseException | None) -> None:
            if future.done():
                return
            if error is None:
                future.set_result(None)
            else:
                future.set_exception(
                    KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"fsync failed: {error}")
                )

        def on_fsync_thread(error: BaseException | None) -> None:
            loop.call_soon_threadsafe(settle, error)

        self.logs.request_sync(partition_log, end_offset, on_fsync_thread)
        await future

    def _observe_fsync(self, seconds: float) -> None:
        """Runs on the fsync thread, the fsync histogram's only writer."""
        if self.metrics is not None:
            self.metrics.record_fsync(seconds)

    def tick(self) -> None:
        """Periodic storage work (retention, flush.ms, checkpoints); cheap when nothing is due."""
        self.logs.tick(clock.now_ms())

    def close(self) -> None:
        """Flush everything and write the clean-shutdown marker."""
        self.closing = True
        self.append_waiters.wake_all()
        self.logs.close(clean=True)
