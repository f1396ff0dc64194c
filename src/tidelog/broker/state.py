"""The wired broker: config, the topic registry, the log manager and the services.

This is wiring for the services (`group_service`, `replication`, `metrics_http`); handlers
never see it: `server.py` hands each handler family only the parts it uses (`handlers/`).
Runs on the event loop. Storage calls are synchronous and short (page-cache writes); the one
slow thing, fsync in sync durability mode, completes on the LogManager's fsync thread and is
handed back to the loop with `call_soon_threadsafe` (ARCHITECTURE D5, D7).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from typing import Any

from tidelog.broker import clock
from tidelog.broker.acl_store import AclStore, FileAclStore
from tidelog.broker.config import BrokerConfig
from tidelog.broker.delayed import AppendWaiters
from tidelog.broker.fetch_session import FetchSessionCache
from tidelog.broker.metadata import TopicInfo, TopicStore, load_or_create_cluster_id
from tidelog.broker.producer_ids import ProducerIdAllocator
from tidelog.broker.quotas.manager import QuotaManager
from tidelog.broker.quotas.store import FileQuotaStore, QuotaStore
from tidelog.broker.services import (
    NULL_METRICS,
    ClusterIdentity,
    Lifecycle,
    Metrics,
    PartitionReplication,
    PartitionRoleListener,
)
from tidelog.broker.telemetry.service import TelemetryService
from tidelog.broker.telemetry.store import FileClientMetricsStore
from tidelog.broker.topic_registry import TopicRegistry
from tidelog.security.authorizer import Authorizer
from tidelog.security.quota_rate import QuotaWindow
from tidelog.security.scram_credentials import CredentialCache
from tidelog.storage.log import PartitionLog
from tidelog.storage.manager import LogManager

log = logging.getLogger("tidelog.broker")


class Broker:
    """The parts of one broker process. `metrics` is `NULL_METRICS` until the metrics endpoint
    attaches real ones; `replication` is set in cluster mode (--zookeeper); `groups` once the
    group coordinator is loaded."""

    def __init__(self, config: BrokerConfig) -> None:
        config.data_dir.mkdir(parents=True, exist_ok=True)
        self.config = config
        self.identity = ClusterIdentity(load_or_create_cluster_id(config.data_dir, config.node_id))
        self.logs = LogManager(
            config.data_dir,
            config.log,
            now_ms=clock.now_ms(),
            retention_check_interval_ms=config.log_retention_check_interval_ms,
            producer_id_expiration_ms=config.producer_id_expiration_ms,
            producer_id_expiration_check_interval_ms=(
                config.producer_id_expiration_check_interval_ms
            ),
            cleaner_backoff_ms=config.log_cleaner_backoff_ms,
            fsync_observer=self._observe_fsync,
            clock_s=clock.monotonic_s,
        )
        self.topics = TopicRegistry(config, TopicStore(config.data_dir), self.logs)
        self.producer_ids = ProducerIdAllocator(config.data_dir)
        # ACLs: stored always (CreateAcls answers SECURITY_DISABLED without an authorizer, as
        # Kafka does), enforced only when `authorizer.class.name` is set.
        self.acl_store: AclStore = FileAclStore(config.data_dir)
        self.authorizer: Authorizer | None = None
        if config.authorizer_enabled:
            self.authorizer = Authorizer(
                config.super_users, config.allow_everyone_if_no_acl_found, self.acl_store.load()
            )
        # Client quotas (Describe/AlterClientQuotas), applied to Produce and Fetch.
        self.quota_store: QuotaStore = FileQuotaStore(config.data_dir)
        self.quotas = QuotaManager(
            self.quota_store.load(),
            QuotaWindow(config.quota_window_num, config.quota_window_size_seconds * 1000),
            clock.monotonic_ms,
        )
        # Client telemetry (KIP-714): CLIENT_METRICS subscriptions (client-metrics.json here;
        # ZooKeeper's /config/client-metrics in a cluster) and the metrics clients push.
        self.telemetry = TelemetryService(
            FileClientMetricsStore(config.data_dir), config.telemetry_max_bytes, clock.now_ms
        )
        # SCRAM users as SASL sees them: the data directory's file on a single node; in a
        # cluster, ZooKeeper's /config/users (`user_store`, a cluster/zk_scram.ZkScramStore).
        self.credentials = CredentialCache(config.data_dir)
        self.user_store: Any = None
        self.append_waiters = AppendWaiters()
        # Kept here, not in the handler table, so sessions survive the switch to cluster mode.
        self.fetch_sessions = FetchSessionCache(
            config.max_incremental_fetch_session_cache_slots,
            config.min_incremental_fetch_session_eviction_ms,
            max_partitions=config.max_broker_partitions,
        )
        self.lifecycle = Lifecycle()
        self.metrics: Metrics = NULL_METRICS
        # Typed by the interfaces the services use of each other, so this module need not
        # import the services that import it (replication.Replication, group_service).
        self.replication: PartitionReplication | None = None
        self.groups: PartitionRoleListener | None = None
        self.transactions: object | None = None  # TransactionService, once started
        self.timers: object | None = None  # timers.service.TimerService, once started
        self.share_service: object | None = None  # ShareService, once started

    @property
    def cluster_id(self) -> str:
        return self.identity.cluster_id

    @cluster_id.setter
    def cluster_id(self, value: str) -> None:  # a broker joining a cluster adopts its id
        self.identity.cluster_id = value

    @property
    def closing(self) -> bool:
        return self.lifecycle.closing

    @closing.setter
    def closing(self, value: bool) -> None:
        self.lifecycle.closing = value

    # --- the registry's operations, for the services ---------------------------------------
    def create_topic(
        self, name: str, partitions: int, configs: Mapping[str, str], *, internal: bool = False
    ) -> TopicInfo:
        return self.topics.create_topic(name, partitions, configs, internal=internal)

    def adopt_topic(
        self, name: str, topic_id: uuid.UUID, partitions: int, configs: Mapping[str, str]
    ) -> TopicInfo:
        return self.topics.adopt_topic(name, topic_id, partitions, configs)

    def delete_topic(self, name: str) -> None:
        self.topics.delete_topic(name)

    def add_partitions(self, name: str, count: int) -> TopicInfo:
        return self.topics.add_partitions(name, count)

    def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> TopicInfo:
        return self.topics.set_topic_configs(name, configs)

    def partition_log(self, topic: str, partition: int) -> PartitionLog:
        return self.topics.partition_log(topic, partition)

    async def wait_durable(self, partition_log: PartitionLog, end_offset: int) -> None:
        await self.topics.wait_durable(partition_log, end_offset)

    # --- lifecycle -------------------------------------------------------------------------
    def _observe_fsync(self, seconds: float) -> None:
        """Runs on the fsync thread, the fsync histogram's only writer."""
        self.metrics.record_fsync(seconds)

    def tick(self) -> None:
        """Periodic storage work (retention, flush.ms, checkpoints); cheap when nothing is due."""
        self.logs.tick(clock.now_ms())
        self.quotas.expire()

    def close(self) -> None:
        """Flush everything and write the clean-shutdown marker."""
        self.lifecycle.closing = True
        self.append_waiters.wake_all()
        close_transactions = getattr(self.transactions, "close", None)
        if close_transactions is not None:
            close_transactions()
        close_timers = getattr(self.timers, "close", None)
        if close_timers is not None:
            close_timers()
        close_shares = getattr(self.share_service, "close", None)
        if close_shares is not None:
            close_shares()
        self.logs.close(clean=True)
