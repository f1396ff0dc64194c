"""Topics and their partition logs: create, adopt, grow, reconfigure, delete, look up.

`TopicStore` (metadata.py) keeps the names, ids, partition counts and overrides on disk;
`LogManager` owns the open partition logs. This registry keeps the two in step, and a
partition is served only while its topic lists it (a directory left on disk by a deleted
topic is never served). Runs on the event loop; log creation is short file I/O.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterable, Mapping

from tidelog.broker.config import BrokerConfig
from tidelog.broker.internal_topics import INTERNAL_TOPICS
from tidelog.broker.metadata import TopicInfo, TopicStore
from tidelog.errors import ErrorCode, KafkaError
from tidelog.storage.config import LogConfig
from tidelog.storage.log import PartitionLog
from tidelog.storage.manager import LogManager
from tidelog.types import TopicPartition

log = logging.getLogger("tidelog.broker")
_ZERO_UUID = uuid.UUID(int=0)


class TopicRegistry:
    def __init__(self, config: BrokerConfig, store: TopicStore, logs: LogManager) -> None:
        self._config = config
        self._store = store
        self._logs = logs
        for info in store.all():
            self._open_partitions(info, 0)

    # --- reading -------------------------------------------------------------------------
    def get(self, name: str) -> TopicInfo | None:
        return self._store.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._store.by_id(topic_id)

    def all(self) -> list[TopicInfo]:
        return self._store.all()

    def local_logs(self) -> Iterable[PartitionLog]:
        """Every partition log open on this broker (DescribeLogDirs)."""
        return self._logs.logs()

    def partition_log(self, topic: str, partition: int) -> PartitionLog:
        info = self._store.get(topic)
        partition_log = None
        if info is not None and 0 <= partition < info.partitions:
            partition_log = self._logs.get(TopicPartition(topic, partition))
        if partition_log is None:
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no partition {topic}-{partition}"
            )
        return partition_log

    def log_config_for(self, topic: TopicInfo) -> LogConfig:
        """Broker log.* defaults overlaid with the topic's own overrides."""
        if not topic.configs:
            return self._config.log
        return LogConfig.from_properties(topic.configs, base=self._config.log)

    # --- changing ------------------------------------------------------------------------
    def _open_partitions(self, info: TopicInfo, first: int) -> None:
        log_config = self.log_config_for(info)
        for partition in range(first, info.partitions):
            self._logs.create(TopicPartition(info.name, partition), log_config)

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
        info = self._store.create(name, partitions, configs, internal=internal)
        self._open_partitions(info, 0)
        log.info("created topic %s with %d partitions", name, partitions)
        return info

    def adopt_topic(
        self, name: str, topic_id: uuid.UUID, partitions: int, configs: Mapping[str, str]
    ) -> TopicInfo:
        """Cluster mode: mirror a topic created through ZooKeeper (same id), open its logs."""
        info = self._store.get(name)
        if info is None:
            info = self._store.create(
                name, partitions, configs, topic_id=topic_id, internal=name in INTERNAL_TOPICS
            )
            self._open_partitions(info, 0)
        elif info.partitions < partitions:
            info = self.add_partitions(name, partitions)
        return info

    def delete_topic(self, name: str) -> None:
        info = self._store.get(name)
        if info is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}")
        self._store.delete(name)
        for partition in range(info.partitions):
            self._logs.delete(TopicPartition(name, partition))
        log.info("deleted topic %s", name)

    def reset_partition(self, topic: str, partition: int) -> None:
        """Cluster mode, a replica reassigned away: delete the partition's log and open an
        empty one in its place (every broker opens each partition of a topic it knows; an
        empty log is what a broker that is no replica holds)."""
        info = self._store.get(topic)
        if info is None or not 0 <= partition < info.partitions:
            return
        tp = TopicPartition(topic, partition)
        self._logs.delete(tp)
        self._logs.create(tp, self.log_config_for(info))
        log.info("deleted the log of %s: no longer a replica here", tp)

    def check_partition_budget(self, added: int) -> None:
        """Refuse partitions past max.broker.partitions: each holds open files, and a broker
        out of file descriptors can neither accept connections nor roll segments."""
        limit = self._config.max_broker_partitions
        current = sum(info.partitions for info in self._store.all())
        if current + added > limit:
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS,
                f"{added} more partitions would exceed max.broker.partitions={limit} "
                f"({current} exist)",
            )

    def add_partitions(self, name: str, count: int) -> TopicInfo:
        before = self._store.get(name)
        self.check_partition_budget(count - (before.partitions if before else 0))
        info = self._store.set_partitions(name, count)
        self._open_partitions(info, before.partitions if before else 0)
        return info

    def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> TopicInfo:
        """Replace a topic's overrides and apply them to its open logs."""
        current = self._store.get(name)
        if current is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}")
        probe = TopicInfo(name, current.topic_id, current.partitions, configs)
        log_config = self.log_config_for(probe)
        info = self._store.set_configs(name, configs)
        for partition in range(info.partitions):
            self._logs.update_config(TopicPartition(name, partition), log_config)
        return info

    def auto_create(self, name: str) -> TopicInfo | None:
        """Create `name` with num.partitions if auto.create.topics.enable; else None."""
        if not self._config.auto_create_topics:
            return None
        return self.create_topic(name, self._config.num_partitions, {})

    # --- durability ----------------------------------------------------------------------
    async def wait_durable(self, partition_log: PartitionLog, end_offset: int) -> None:
        """Sync durability: return once offsets below `end_offset` are fsynced (group commit
        on the LogManager's fsync thread, handed back with `call_soon_threadsafe`)."""
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

        self._logs.request_sync(partition_log, end_offset, on_fsync_thread)
        await future
