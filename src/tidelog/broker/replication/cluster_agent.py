"""A broker's link to ZooKeeper: membership, controller duties and the cluster view.

Blocking (kazoo is synchronous), so it runs on a thread of its own; the event loop never
waits on it. The thread owns a `ClusterMember` (registration, controller election, the
controller's reactions) and keeps a `ClusterView`: live brokers, topic assignments, topic
configs and every partition state with its znode version. Kazoo watches only mark the view
dirty (or, the member's, queue a controller event) and wake the thread; it re-reads the view
and hands the new snapshot to the event loop with `call_soon_threadsafe` (Kafka's
LeaderAndIsr/UpdateMetadata, learned from watches instead of an RPC). The thread sleeps until
woken: no polling.

Every write goes through the member's `ZkStore` (topic configs, producer id blocks, the
cluster id: `cluster/zk_admin.py`); this module only places replicas and decides.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import random
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KazooState

from tidelog.cluster import placement
from tidelog.cluster import zk_layout as layout
from tidelog.cluster.controller_zk import ClusterMember
from tidelog.cluster.events import ControllerEvent, EventInbox
from tidelog.cluster.zk_acls import CHANGE_PATHS, AclChanges, ZkAclError, ZkAclStore
from tidelog.cluster.zk_admin import (
    CONFIG_CHANGE_PREFIX,
    CONFIG_TOPICS_PATH,
    DEFAULT_BROKER,
    PRODUCER_ID_BLOCK_PATH,
    broker_config_path,
    topic_config_path,
)
from tidelog.cluster.zk_client_metrics import ZkClientMetricsError, ZkClientMetricsStore
from tidelog.cluster.zk_layout import BrokerRegistration, TopicAssignment, ZkLayoutError
from tidelog.cluster.zk_quotas import CHANGES_PATH, ZkQuotaError, ZkQuotaStore
from tidelog.cluster.zk_scram import ZkScramError, ZkScramStore
from tidelog.cluster.zk_store import VersionedState
from tidelog.errors import ErrorCode, KafkaError
from tidelog.security.acl import AclBinding
from tidelog.security.quota_entity import ClientQuotas
from tidelog.security.scram_credentials import Users
from tidelog.types import TopicPartition

log = logging.getLogger("tidelog.broker.cluster")
__all__ = ["CONFIG_CHANGE_PREFIX", "CONFIG_TOPICS_PATH", "PRODUCER_ID_BLOCK_PATH",
           "ClusterAgent", "ClusterSettings", "ClusterView", "topic_uuid"]
RETRY_BACKOFF_S = 0.2  # after a failed ZooKeeper round (connection loss): not a poll


def topic_uuid(topic_id: str) -> uuid.UUID:
    """Kafka's base64url (unpadded) topic id as a UUID."""
    return uuid.UUID(bytes=base64.urlsafe_b64decode(topic_id + "=" * (-len(topic_id) % 4)))


@dataclass(frozen=True, slots=True)
class ClusterSettings:
    zookeeper: str  # host:port[/chroot]
    session_timeout_ms: int = 6000
    min_insync_replicas: int = 1
    replica_lag_time_max_ms: int = 30_000
    hw_checkpoint_interval_ms: int = 5_000
    unclean_leader_election_enable: bool = False
    # D7: an acks=all write is acknowledged only once fsynced on the leader and on every ISR
    # member (a follower fetches past its data only after fsyncing it).
    acks_all_fsync: bool = True


@dataclass(frozen=True, slots=True)
class ClusterView:
    """One consistent-enough read of the cluster (each znode read once, in order)."""

    controller_id: int
    brokers: Mapping[int, tuple[str, int]]  # live brokers' inter-broker endpoints
    topics: Mapping[str, TopicAssignment]
    configs: Mapping[str, Mapping[str, str]]
    states: Mapping[TopicPartition, VersionedState] = field(default_factory=dict)
    # live brokers' endpoints by listener name: what Metadata answers on each listener
    listeners: Mapping[int, Mapping[str, tuple[str, int]]] = field(default_factory=dict)
    # this broker's dynamic configs: /config/brokers/<default> overlaid with /<id>
    broker_configs: Mapping[str, str] = field(default_factory=dict)

    def endpoint(self, broker_id: int, listener: str) -> tuple[str, int] | None:
        """A live broker's address on `listener` (None: not live, or no such listener there;
        before per-listener registrations, the inter-broker endpoint serves every name)."""
        by_name = self.listeners.get(broker_id)
        if by_name is None:
            return self.brokers.get(broker_id)
        return by_name.get(listener)


class _WakingInbox(EventInbox):
    """The member's controller-event inbox, which also wakes the agent's thread."""

    def __init__(self, wake: threading.Event) -> None:
        super().__init__()
        self._wake = wake

    def put(self, event: ControllerEvent) -> None:
        super().put(event)
        self._wake.set()


class _AgentMember(ClusterMember):
    """A ClusterMember whose events wake the agent thread instead of being polled for."""

    def __init__(self, client: KazooClient, registration: BrokerRegistration,
                 wake: threading.Event, unclean_leader_election_enable: bool) -> None:
        super().__init__(client, registration,
                         unclean_leader_election_enable=unclean_leader_election_enable,
                         inbox=_WakingInbox(wake))


class ClusterAgent:
    """Owns the KazooClient and the ClusterMember; publishes views to the event loop."""

    def __init__(
        self,
        settings: ClusterSettings,
        registration: BrokerRegistration,
        loop: asyncio.AbstractEventLoop,
        on_view: Callable[[ClusterView], None],
        proposed_cluster_id: str = "",
        on_acls: Callable[[frozenset[AclBinding]], None] | None = None,
        on_quotas: Callable[[ClientQuotas], None] | None = None,
        on_users: Callable[[Users], None] | None = None,
        on_client_metrics: Callable[[dict[str, dict[str, str]]], None] | None = None,
    ) -> None:
        self.settings = settings
        self.broker_id = registration.broker_id
        self._registration = registration
        self._loop = loop
        self._on_view = on_view
        self._client = KazooClient(
            hosts=settings.zookeeper, timeout=settings.session_timeout_ms / 1000
        )
        self._wake = threading.Event()  # set by every watch and controller event
        self._member = _AgentMember(
            self._client, registration, self._wake,
            settings.unclean_leader_election_enable,
        )
        self._store = self._member.store  # every write goes through it
        self._proposed_cluster_id = proposed_cluster_id
        self.joined_cluster_id = proposed_cluster_id
        self._dirty = threading.Event()  # the view must be re-read
        self._stopping = threading.Event()
        self._watched: set[str] = set()
        self._thread: threading.Thread | None = None
        # ACLs (with an authorizer): the change notices mark them dirty; the thread reloads
        # them and hands the whole set to `on_acls` on the event loop.
        self.acl_store = ZkAclStore(self._client)
        self._acl_changes = AclChanges(self.acl_store)
        self._on_acls = on_acls
        self._acls_dirty = threading.Event()  # new notices to process
        self._acls_stale = threading.Event()  # reconnected: notices may have been missed
        # Client quotas: any /config/changes notice (or a reconnection) reloads them all.
        self.quota_store = ZkQuotaStore(self._client)
        self._on_quotas = on_quotas
        self._quotas_dirty = threading.Event()
        # SCRAM users (the same notices): reloaded whole, handed to the credential cache.
        self.scram_store = ZkScramStore(self._client)
        self._on_users = on_users
        # KIP-714 client-metrics subscriptions (the same notices): reloaded whole.
        self.client_metrics_store = ZkClientMetricsStore(self._client)
        self._on_client_metrics = on_client_metrics

    # ------------------------------------------------------------ lifecycle (blocking)

    def cluster_id(self, proposed: str) -> str:
        """The cluster's id from `/cluster/id`; the first broker writes `proposed`."""
        return self._store.ensure_cluster_id(proposed)

    def start(self, timeout_s: float = 30.0) -> None:
        """Connect and register; a registration left by our previous (killed) process is
        waited out until its session expires. Then the agent thread runs."""
        self._client.start(timeout=timeout_s)
        self._store.ensure_config_paths()
        self.joined_cluster_id = self.cluster_id(self._proposed_cluster_id)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self._member.start()
                break
            except KafkaError as error:
                if error.code != ErrorCode.DUPLICATE_BROKER_REGISTRATION:
                    raise
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise
                self._wait_registration_gone(remaining)
        self._client.ChildrenWatch(layout.BROKER_IDS_PATH, self._children_changed)
        self._client.ChildrenWatch(layout.TOPICS_PATH, self._children_changed)
        self._client.DataWatch(layout.CONTROLLER_PATH, self._data_changed)
        if self._on_acls is not None:
            # Loaded here, before the broker says ready; then every notice reloads them.
            self.acl_store.ensure_change_paths()
            self._publish(self._acl_changes.reload())
            for path in CHANGE_PATHS:
                self._client.ChildrenWatch(path, self._acl_notices)
            self._client.add_listener(self._acl_session_state)
        if self._config_listeners():
            # Loaded before the broker says ready, like the ACLs.
            self.quota_store.ensure_paths()
            self._refresh_quotas()
            self._client.ChildrenWatch(CHANGES_PATH, self._quota_notices)
            self._client.add_listener(self._quota_session_state)
        self._mark_dirty()
        self._thread = threading.Thread(target=self._run, name="zookeeper-agent", daemon=True)
        self._thread.start()
        log.info("broker %d joined the cluster at %s", self.broker_id, self.settings.zookeeper)

    def _wait_registration_gone(self, timeout_s: float) -> None:
        """Until our previous process's `/brokers/ids/<id>` goes (its session expires): a
        watch on the znode wakes us, no polling."""
        gone = threading.Event()
        path = layout.broker_path(self.broker_id)
        if self._client.exists(path, watch=lambda event: gone.set()) is not None:
            gone.wait(timeout_s)

    def stop(self) -> None:
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        try:
            self._client.stop()
            self._client.close()
        except KazooException:
            log.warning("closing the ZooKeeper client failed", exc_info=True)

    # ------------------------------------------------------------ watches (kazoo's thread)

    def _mark_dirty(self) -> None:
        self._dirty.set()
        self._wake.set()

    def _children_changed(self, children: list[str]) -> None:
        self._mark_dirty()

    def _data_changed(self, data: bytes | None, stat: object) -> None:
        self._mark_dirty()

    def _acl_notices(self, children: list[str]) -> None:
        self._acls_dirty.set()
        self._wake.set()

    def _acl_session_state(self, state: KazooState) -> None:
        if state == KazooState.CONNECTED:  # after a suspension or a new session
            self._acls_stale.set()
            self._acls_dirty.set()
            self._wake.set()

    def _quota_notices(self, children: list[str]) -> None:
        self._quotas_dirty.set()
        self._wake.set()

    def _quota_session_state(self, state: KazooState) -> None:
        if state == KazooState.CONNECTED:
            self._quotas_dirty.set()
            self._wake.set()

    # ------------------------------------------------------------ the agent thread

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._wake.wait()
            self._wake.clear()  # before the work: a change meanwhile wakes us again
            if self._stopping.is_set():
                return
            try:
                self._member.process_events()
                if self._dirty.is_set():
                    self._dirty.clear()
                    view = self._read_view()
                    self._loop.call_soon_threadsafe(self._on_view, view)
                if self._acls_dirty.is_set():
                    self._acls_dirty.clear()
                    self._refresh_acls()
                if self._quotas_dirty.is_set():
                    self._quotas_dirty.clear()
                    self._refresh_quotas()
            except (KazooException, KazooTimeoutError, ZkLayoutError, KafkaError) as error:
                log.warning("cluster view refresh failed (%s); retrying", error)
                self._mark_dirty()
                if self._on_acls is not None:
                    self._acls_dirty.set()
                if self._config_listeners():
                    self._quotas_dirty.set()
                self._stopping.wait(RETRY_BACKOFF_S)
                continue
            if self._member.wait_for_events(0):
                # Events came back (process_events requeues one on a connection loss) or
                # arrived meanwhile: handled next round, after a pause so a lost connection
                # does not spin.
                self._stopping.wait(RETRY_BACKOFF_S / 4)

    def _refresh_acls(self) -> None:
        """Apply new change notices (only the patterns they name are read again; after a
        reconnect, everything), then purge expired notices."""
        try:
            if self._acls_stale.is_set():
                self._acls_stale.clear()
                self._publish(self._acl_changes.reload())
            else:
                bindings = self._acl_changes.process()
                if bindings is not None:
                    self._publish(bindings)
            self.acl_store.purge_notices(int(time.time() * 1000))
        except ZkAclError as error:
            # A znode Kafka would not write: keep the last good ACLs (dropping a DENY would
            # be a wrongful grant) and say so; the next notice tries again.
            log.error("ACLs in ZooKeeper cannot be read (%s); keeping the previous ones", error)

    def _config_listeners(self) -> bool:
        return any(
            listener is not None
            for listener in (self._on_quotas, self._on_users, self._on_client_metrics)
        )

    def _refresh_quotas(self) -> None:
        """After a /config/changes notice: client quotas, SCRAM users and client-metrics
        subscriptions, read whole."""
        if self._on_quotas is not None:
            try:
                quotas = self.quota_store.load()
            except ZkQuotaError as error:
                log.error("client quotas in ZooKeeper cannot be read (%s); keeping the "
                          "previous ones", error)
            else:
                self._loop.call_soon_threadsafe(self._on_quotas, quotas)
        if self._on_users is not None:
            try:
                users = self.scram_store.read()
            except ZkScramError as error:
                log.error("SCRAM users in ZooKeeper cannot be read (%s); keeping the previous "
                          "ones", error)
            else:
                self._loop.call_soon_threadsafe(self._on_users, users)
        if self._on_client_metrics is not None:
            try:
                subscriptions = self.client_metrics_store.load()
            except ZkClientMetricsError as error:
                log.error("client-metrics subscriptions in ZooKeeper cannot be read (%s); "
                          "keeping the previous ones", error)
            else:
                self._loop.call_soon_threadsafe(self._on_client_metrics, subscriptions)
        self.quota_store.purge_notices(int(time.time() * 1000))

    def _publish(self, bindings: frozenset[AclBinding]) -> None:
        assert self._on_acls is not None
        self._loop.call_soon_threadsafe(self._on_acls, bindings)

    def _read_view(self) -> ClusterView:
        store = self._member.store
        # Peers replicate through the listener named like our own first endpoint (Kafka's
        # inter.broker.listener.name is the same on every broker).
        inter_broker = self._registration.listener
        brokers: dict[int, tuple[str, int]] = {}
        listeners: dict[int, dict[str, tuple[str, int]]] = {}
        for broker_id, live in store.live_brokers().items():
            registration = live.registration
            endpoint = registration.endpoint(inter_broker) or registration.endpoints[0]
            brokers[broker_id] = (endpoint.host, endpoint.port)
            listeners[broker_id] = {e.listener: (e.host, e.port) for e in registration.endpoints}
        topics: dict[str, TopicAssignment] = {}
        configs: dict[str, dict[str, str]] = {}
        states: dict[TopicPartition, VersionedState] = {}
        for topic in store.topics():
            topic_path = layout.topic_path(topic)
            if topic_path not in self._watched:  # partitions added (CreatePartitions)
                self._watched.add(topic_path)
                self._client.DataWatch(topic_path, self._data_changed)
            assignment = store.topic_assignment(topic)
            if assignment is None:
                continue
            topics[topic] = assignment
            config_path = topic_config_path(topic)
            if config_path not in self._watched:  # AlterConfigs on any broker
                self._watched.add(config_path)
                self._client.DataWatch(config_path, self._data_changed)
            configs[topic] = self._topic_config(topic)
            for partition in assignment.partitions:
                tp = TopicPartition(topic, partition)
                path = layout.partition_state_path(tp)
                if path not in self._watched:
                    self._watched.add(path)
                    self._client.DataWatch(path, self._data_changed)
                state = store.partition_state(tp)
                if state is not None:
                    states[tp] = state
        controller = store.controller_id()
        return ClusterView(
            controller if controller is not None else -1, brokers, topics, configs, states,
            listeners, self._broker_configs(),
        )

    def _broker_configs(self) -> dict[str, str]:
        merged: dict[str, str] = {}
        for entity in (DEFAULT_BROKER, str(self.broker_id)):
            path = broker_config_path(entity)
            if path not in self._watched:  # IncrementalAlterConfigs of a BROKER resource
                self._watched.add(path)
                self._client.DataWatch(path, self._data_changed)
            config = self._store.broker_config(entity)
            if config is None:
                log.error("%s: malformed broker config znode ignored", path)
                continue
            merged.update(config)
        return merged

    def _topic_config(self, topic: str) -> dict[str, str]:
        config = self._store.topic_config(topic)
        if config is None:
            log.error("topic %s: malformed config znode ignored", topic)
            return {}
        return config

    # ------------------------------------------------------------ writes (any thread)

    def create_topic(
        self, topic: str, partitions: int, replication_factor: int, configs: Mapping[str, str]
    ) -> TopicAssignment:
        """Blocking: place replicas over the live brokers and write the assignment (Kafka's
        AdminZkClient path); the controller then creates the partition states."""
        layout.validate_topic_name(topic)
        store = self._member.store
        if store.topic_assignment(topic) is not None:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {topic} exists")
        live = sorted(store.live_brokers())
        n = len(live)
        replicas = placement.assign_replicas(
            live,
            partitions,
            replication_factor,
            start_index=random.randrange(n) if n else 0,
            replica_shift=random.randrange(n) if n else 0,
        )
        assignment = TopicAssignment(topic, layout.new_topic_id(), replicas)
        store.create_topic_config(topic, configs)
        store.create_topic_assignment(assignment)
        return assignment

    def set_topic_config(self, topic: str, configs: Mapping[str, str]) -> None:
        """Blocking: replace `/config/topics/<t>` (Kafka's AdminZkClient.changeTopicConfig)
        and leave Kafka's change notification; every broker's data watch applies it."""
        if self._store.topic_assignment(topic) is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {topic}")
        self._store.change_topic_config(topic, configs)

    def set_broker_config(self, broker: str, configs: Mapping[str, str]) -> None:
        """Blocking: replace `/config/brokers/<broker>` (an id or `<default>`); every broker's
        data watch applies it."""
        self._store.change_broker_config(broker, configs)

    def broker_config(self, broker: str) -> dict[str, str]:
        """Blocking: the dynamic configs stored for `broker` (an id or `<default>`)."""
        return self._store.broker_config(broker) or {}

    def claim_producer_id_block(self, size: int) -> tuple[int, int]:
        """Blocking: reserve the next `size` producer ids for this broker, `[start, end)`
        (Kafka's `/latest_producer_id_block`, version-conditional; ZkStore)."""
        return self._store.claim_producer_id_block(self.broker_id, size)

    def request_topic_deletion(self, topic: str) -> None:
        """Blocking: `/admin/delete_topics/<t>`; the controller deletes the topic's znodes."""
        store = self._member.store
        if store.topic_assignment(topic) is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {topic}")
        store.request_topic_deletion(topic)

    def request_reassignment(self, targets: Mapping[TopicPartition, tuple[int, ...]]) -> bool:
        """Blocking: write `/admin/reassign_partitions` for the controller; False while an
        earlier request is still there."""
        return self._member.store.request_reassignment(targets)

    def request_preferred_election(self, partitions: list[TopicPartition]) -> bool:
        """Blocking: `/admin/preferred_replica_election` for the controller; False while an
        earlier request is pending."""
        return self._member.store.request_preferred_election(partitions)

    def add_partitions(self, topic: str, count: int, validate_only: bool = False) -> None:
        """Blocking: place `count - current` new partitions over the live brokers (same
        replication factor) and write the grown assignment; the controller creates states."""
        store = self._member.store
        assignment = store.topic_assignment(topic)
        if assignment is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {topic}")
        current = len(assignment.partitions)
        if count <= current:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"topic has {current} partitions; partitions can only be added")
        factor = len(assignment.replicas(0))
        live = sorted(store.live_brokers())
        n = max(len(live), 1)  # assign_replicas refuses a factor above the live brokers
        added = placement.assign_replicas(
            live, count - current, factor, start_index=random.randrange(n),
            replica_shift=random.randrange(n), first_partition=current,
        )
        if not validate_only:
            store.add_partitions(topic, added)

    def update_isr(
        self, tp: TopicPartition, state: layout.PartitionState, version: int
    ) -> int | None:
        """Blocking: a leader's conditional ISR write; None if the state moved meanwhile."""
        return self._member.store.leader_update_isr(tp, state, version)
