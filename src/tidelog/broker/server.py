"""The listener and the process lifecycle: start, serve, shut down gracefully.

One asyncio event loop (the stdlib loop: it implements `loop.sendfile` natively, which uvloop
does not; ARCHITECTURE D5/D6). Shutdown order on SIGTERM/SIGINT: stop accepting, stop reading
new requests, answer parked fetches and finish in-flight requests (bounded wait), close the
connections, then `LogManager.close(clean=True)` (flush + clean-shutdown marker).

This is the wiring: it builds the handler table of this broker instance, giving each handler
family only the services it uses (`handler_table`), and hands it to the listener (`net/`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import resource
import signal
import sys
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from tidelog.broker.config import BrokerConfig, ConfigError, advertised_endpoint
from tidelog.broker.groups import service as group_service
from tidelog.broker.handlers import (
    acls,
    admin,
    api_versions,
    client_quotas,
    describe_topic_partitions,
    elect_leaders,
    fetch,
    groups,
    list_offsets,
    log_dirs,
    metadata,
    partition_reassignments,
    produce,
    producer,
    sasl,
    scram_users,
    share_fetch,
    share_groups,
    share_offsets,
    share_state,
    telemetry,
    transactions,
    transactions_admin,
)
from tidelog.broker.handlers.admin_common import AdminDeps
from tidelog.broker.handlers.context import Handler, HandlerTable, RequestContext
from tidelog.broker.handlers.groups_common import CoordinatorLocator, GroupDeps
from tidelog.broker.handlers.quota_throttle import with_request_quota
from tidelog.broker.handlers.share_common import ShareDeps
from tidelog.broker.internal_topics import TRANSACTION_STATE_TOPIC
from tidelog.broker.listener_config import ListenerSpec
from tidelog.broker.metrics.http import MetricsAddressError, start_metrics
from tidelog.broker.net.connection import Connection, ConnectionLimits
from tidelog.broker.net.listener import Listener
from tidelog.broker.net.router import Router
from tidelog.broker.net.tls import KeyStoreWatch, key_store_watch, listener_security
from tidelog.broker.services import PartitionReplication, SingleNodeReplication
from tidelog.broker.share import service as share_service
from tidelog.broker.state import Broker
from tidelog.broker.timers import service as timer_service
from tidelog.broker.transactions import service as transaction_service
from tidelog.errors import ErrorCode, KafkaError
from tidelog.protocol.api_keys import ApiKey
from tidelog.records.batch import RecordBatch
from tidelog.security.scram_bootstrap import missing_credentials, parse_bootstrap_users
from tidelog.security.scram_credentials import read_store, write_store
from tidelog.storage.log import PartitionLog
from tidelog.storage.timer_records import TIMER_TOPIC
from tidelog.types import TopicPartition

if TYPE_CHECKING:
    from tidelog.broker.handlers.cluster_admin import ClusterProducerIds
    from tidelog.broker.replication.cluster_agent import ClusterSettings
    from tidelog.broker.replication.replica_manager import Replication
    from tidelog.broker.share.state_coordinator import ShareStateCoordinator
    from tidelog.security.authorizer import Authorizer

log = logging.getLogger("tidelog.broker.server")
DRAIN_TIMEOUT_S = 6.0  # leaves margin inside the 10 s a supervisor gives SIGTERM


def handler_table(broker: Broker, replication: Replication | None = None) -> HandlerTable:
    """This broker's handlers, each family bound to the services it uses. `replication`:
    cluster mode (the cluster handlers replace the single-node ones of the same keys)."""
    config = broker.config
    topics = broker.topics
    partition_replication: PartitionReplication = (
        SingleNodeReplication(topics) if replication is None else replication
    )
    # The ACL authorizer (None unless authorizer.class.name is set): every family that checks
    # ACLs gets it as a dependency (handlers/authorization.py says what each API needs).
    authorizer = broker.authorizer
    load_transactions = partial(transaction_service.service, broker)
    load_groups = partial(group_service.service, broker)
    txn_deps = transactions.TransactionDeps(
        topics, load_transactions, load_groups, broker.producer_ids.allocate, authorizer
    )
    if replication is not None:
        txn_deps = replace(
            txn_deps, replication=replication,
            cluster_producer_id=partial(_cluster_producer_ids().allocate, replication),
        )
    table: HandlerTable = {}
    table |= api_versions.handlers(  # reads the finished table per request
        table,
        api_versions.SINGLE_NODE_FEATURES if replication is None else api_versions.CLUSTER_FEATURES,
    )
    table |= metadata.handlers(metadata.MetadataDeps(config, broker.identity, topics, authorizer))
    table |= produce.handlers(
        produce.ProduceDeps(
            topics,
            partition_replication,
            broker.append_waiters,
            broker.metrics,
            acks_all_waits_for_replicas=replication is not None,
            authorizer=authorizer,
            verify_transaction=transactions.verifier(
                load_transactions, cluster=replication is not None
            ),
            add_to_transaction=transactions.adder(
                load_transactions, cluster=replication is not None
            ),
            divert=(partial(_divert, broker) if replication is None
                    else partial(_cluster_divert, broker, replication)),
            quotas=broker.quotas,
            inter_broker=(None if replication is None
                          else partial(_is_inter_broker, broker, authorizer)),
        )
    )
    table |= fetch.handlers(
        fetch.FetchDeps(
            topics,
            partition_replication,
            broker.append_waiters,
            broker.metrics,
            broker.lifecycle,
            authorizer,
            broker.quotas,
            broker.fetch_sessions,
        )
    )
    table |= list_offsets.handlers(
        list_offsets.ListOffsetsDeps(topics, partition_replication, authorizer)
    )
    table |= producer.handlers(producer.ProducerIdDeps(
        broker.producer_ids, authorizer, txn_deps if replication is None else None
    ))
    table |= sasl.handlers()
    table |= admin.handlers(AdminDeps(config, broker.identity, topics, authorizer))
    table |= acls.handlers(acls.AclDeps(authorizer, broker.acl_store))
    table |= client_quotas.handlers(
        client_quotas.ClientQuotaDeps(authorizer, broker.quota_store, broker.quotas)
    )
    table |= log_dirs.handlers(log_dirs.LogDirsDeps(config.data_dir, topics, authorizer))
    locator = _coordinator_locator(broker, replication)
    table |= groups.handlers(GroupDeps(
        topics, load_groups, locator, authorizer, _transaction_locator(broker, replication),
        _share_state_locator(broker, replication),
    ))
    table |= transactions.handlers(txn_deps)
    table |= transactions_admin.handlers(
        transactions_admin.TransactionAdminDeps(topics, load_transactions, authorizer, replication)
    )
    if replication is None:
        # Single node: users in the data directory (a cluster: in ZooKeeper, below).
        table |= scram_users.handlers(scram_users.ScramUsersDeps(config.data_dir, authorizer))
        # Share groups (KIP-932): single node only for now (docs/groups.md).
        load_shares = partial(share_service.service, broker)
        share_deps = ShareDeps(
            topics, partition_replication, broker.append_waiters, broker.lifecycle,
            load_shares, config.node_id, authorizer,
        )
        table |= share_fetch.handlers(share_deps)
        table |= share_offsets.handlers(share_deps)
        table |= share_groups.handlers(share_groups.ShareGroupDeps(
            topics, load_shares, partial(share_service.started, broker),
            partial(_is_other_group, broker), authorizer,
        ), table)
        # Single node: every partition led here (a cluster's would need the cluster view).
        table |= elect_leaders.handlers(elect_leaders.ElectLeadersDeps(topics, authorizer))
        table |= partition_reassignments.handlers(
            partition_reassignments.SingleNodeReassignmentDeps(config.node_id, topics, authorizer)
        )
        table |= describe_topic_partitions.handlers(
            describe_topic_partitions.DescribeTopicPartitionsDeps(
                config.node_id, topics, authorizer
            )
        )
    else:
        from tidelog.broker.handlers import (
            cluster,
            cluster_admin,
            cluster_elect,
            cluster_reassignments,
            cluster_view,
        )
        from tidelog.broker.handlers.cluster_common import ClusterDeps

        deps = ClusterDeps(
            config, broker.identity, topics, replication, broker.append_waiters, authorizer
        )
        table |= cluster.handlers(deps)
        table |= cluster_admin.handlers(deps)
        table |= cluster_reassignments.handlers(deps)
        table |= cluster_elect.handlers(deps)  # ElectLeaders through the controller
        # DescribeCluster: every live broker and the controller; DescribeTopicPartitions:
        # leaders and ISRs from the cluster view (both answered by any broker).
        table[ApiKey.DESCRIBE_CLUSTER] = partial(admin.handle_describe_cluster, AdminDeps(
            config, broker.identity, topics, authorizer,
            live_brokers=partial(cluster_view.live_brokers, replication),
        ))
        table |= describe_topic_partitions.handlers(
            describe_topic_partitions.DescribeTopicPartitionsDeps(
                config.node_id, topics, authorizer,
                partition_rows=partial(cluster_view.partition_row, replication),
            )
        )
        # InitProducerId: idempotent producers as cluster_admin answers, transactional ids
        # through the transaction coordinator.
        table[ApiKey.INIT_PRODUCER_ID] = partial(
            _init_producer_id, table[ApiKey.INIT_PRODUCER_ID],
            producer.handlers(producer.ProducerIdDeps(
                broker.producer_ids, authorizer, txn_deps))[ApiKey.INIT_PRODUCER_ID],
        )
        _share_cluster_handlers(broker, replication, table, locator, partition_replication)
        if broker.user_store is not None:  # SCRAM users in ZooKeeper, as Kafka's ZK mode
            table |= scram_users.handlers(scram_users.ScramUsersDeps(
                config.data_dir, authorizer, store=broker.user_store,
                on_change=broker.credentials.replace,
            ))
    # Client telemetry (KIP-714) and CLIENT_METRICS config resources, in both modes.
    telemetry_deps = telemetry.TelemetryDeps(
        broker.telemetry, authorizer, lambda: [info.name for info in topics.all()],
        partial(_broker_ids, broker, replication),
    )
    table |= telemetry.handlers(telemetry_deps)
    telemetry.wrap_config_handlers(table, telemetry_deps)
    with_request_quota(table, broker.quotas)  # request_percentage around every handler
    return table


def _share_cluster_handlers(
    broker: Broker, replication: Replication, table: HandlerTable, locator: CoordinatorLocator,
    partition_replication: PartitionReplication,
) -> None:
    """Share groups in a cluster (docs/groups.md): ShareFetch/ShareAcknowledge on partition
    leaders, membership on the group coordinator, the share coordinator's APIs (83-87)."""
    config = broker.config
    load_shares = partial(share_service.service, broker)

    def current_leader(tp: TopicPartition) -> tuple[int, int]:
        view = replication.view
        versioned = None if view is None else view.states.get(tp)
        if versioned is None:
            return -1, -1
        return versioned.state.leader, versioned.state.leader_epoch

    def coordinator(group_id: str, listener_name: str) -> tuple[ErrorCode, int]:
        error, where = locator(group_id, listener_name)
        return error, where[0]

    async def forward_configs(request: Any, version: int, client_id: str) -> None:
        persister = load_shares().persister
        if persister is not None:
            await persister.forward_configs(request, version, client_id)

    share_deps = ShareDeps(
        broker.topics, partition_replication, broker.append_waiters, broker.lifecycle,
        load_shares, config.node_id, broker.authorizer, current_leader=current_leader,
        group_coordinator=coordinator,
    )
    table |= share_fetch.handlers(share_deps)
    table |= share_offsets.handlers(share_deps)
    table |= share_groups.handlers(share_groups.ShareGroupDeps(
        broker.topics, load_shares, partial(share_service.started, broker),
        partial(_is_other_group, broker), broker.authorizer, coordinator=coordinator,
        node_id=config.node_id, forward_configs=forward_configs,
    ), table)

    def state_coordinator() -> ShareStateCoordinator:
        found = load_shares().state_coordinator
        assert found is not None
        return found

    table |= share_state.handlers(share_state.ShareStateDeps(state_coordinator,
                                                             broker.authorizer))


def _broker_ids(broker: Broker, replication: Replication | None) -> list[int]:
    """Live brokers (a single node: itself)."""
    view = None if replication is None else replication.view
    return [broker.config.node_id] if view is None else sorted(view.brokers)


async def _init_producer_id(
    idempotent: Handler, transactional: Handler, context: RequestContext, request: Any
) -> Any:
    handler = transactional if request.transactional_id is not None else idempotent
    return await handler(context, request)


def _cluster_producer_ids() -> ClusterProducerIds:
    from tidelog.broker.handlers.cluster_admin import ClusterProducerIds

    return ClusterProducerIds()


def _transaction_locator(
    broker: Broker, replication: Replication | None
) -> CoordinatorLocator | None:
    """FindCoordinator key_type 1: None on a single node (this broker, as for groups)."""
    if replication is None:
        return None
    from tidelog.broker.transactions.cluster import find_transaction_coordinator

    def locate(txn_id: str, listener_name: str) -> tuple[ErrorCode, tuple[int, str, int]]:
        service = transaction_service.service(broker)
        assert service.creator is not None
        return find_transaction_coordinator(
            broker, replication, service.creator, txn_id, listener_name
        )

    return locate


def _share_state_locator(
    broker: Broker, replication: Replication | None
) -> CoordinatorLocator | None:
    """FindCoordinator key_type 2 ("group:topicId:partition"): the leader of the key's
    `__share_group_state` partition; cluster mode only."""
    if replication is None:
        return None
    from tidelog.coordinator.share_state import parse_coordinator_key

    def locate(key: str, listener_name: str) -> tuple[ErrorCode, tuple[int, str, int]]:
        parsed = parse_coordinator_key(key)
        if parsed is None:
            return ErrorCode.INVALID_REQUEST, (-1, "", -1)
        state_coordinator = share_service.service(broker).state_coordinator
        assert state_coordinator is not None
        leader = state_coordinator.leader_of(parsed)
        view = replication.view
        endpoint = None if leader is None or view is None else view.endpoint(
            leader, listener_name)
        if leader is None or endpoint is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, (-1, "", -1)
        return ErrorCode.NONE, (leader, endpoint[0], endpoint[1])

    return locate


def _divert(
    broker: Broker, partition_log: PartitionLog, tp: TopicPartition,
    batches: list[RecordBatch], now_ms: int,
) -> timer_service.Diverted:
    """Delayed delivery's produce hook; the timer service starts on the first use."""
    return timer_service.service(broker).divert(partition_log, tp, batches, now_ms)


def _cluster_divert(
    broker: Broker, replication: Replication, partition_log: PartitionLog, tp: TopicPartition,
    batches: list[RecordBatch], now_ms: int,
) -> timer_service.Diverted:
    """Cluster mode: the timer batch goes to its `__tidelog_timer` partition's leader."""
    from tidelog.broker.timers import cluster as timer_cluster

    return timer_cluster.service(broker, replication).divert(partition_log, tp, batches, now_ms)


def _is_inter_broker(
    broker: Broker, authorizer: Authorizer | None, context: RequestContext,
) -> bool:
    """A request another broker sent as a broker: on the inter-broker listener and, with an
    authorizer, allowed CLUSTER_ACTION on the cluster (Kafka's rule for broker requests)."""
    config = broker.config
    if config.listeners:
        from tidelog.broker.net.inter_broker import inter_broker_listener

        if context.listener_name != inter_broker_listener(config).name:
            return False
    if authorizer is None:
        return True
    from tidelog.broker.handlers.authorization import cluster_allowed
    from tidelog.security.acl import AclOperation

    return cluster_allowed(authorizer, context, AclOperation.CLUSTER_ACTION)


def _is_other_group(broker: Broker, group_id: str) -> bool:
    """A classic or consumer group holds this id (share groups live apart, docs/groups.md)."""
    try:
        return group_id in group_service.service(broker).shard_of(group_id).groups
    except KafkaError:  # the group coordinator is not loaded here
        return False


def _coordinator_locator(broker: Broker, replication: Replication | None) -> CoordinatorLocator:
    if replication is None:
        config = broker.config

        def here(_group_id: str, listener_name: str) -> tuple[ErrorCode, tuple[int, str, int]]:
            host, port = advertised_endpoint(config, listener_name)
            return ErrorCode.NONE, (config.node_id, host, port)

        return here

    from tidelog.broker.groups.cluster import find_coordinator

    def locate(group_id: str, listener_name: str) -> tuple[ErrorCode, tuple[int, str, int]]:
        creator = group_service.service(broker).creator
        return find_coordinator(broker, replication, creator, group_id, listener_name)

    return locate


def add_bootstrap_users(config: BrokerConfig) -> None:
    """tidelog.scram.bootstrap.users: the users the data directory's store lacks are added
    before the first connection (a cluster also looks there for users ZooKeeper lacks)."""
    users = parse_bootstrap_users(config.scram_bootstrap_users)
    if not users:
        return
    store = read_store(config.data_dir)
    added = missing_credentials(users, store)
    if not added:
        return
    for name, mechanisms in added.items():
        store.setdefault(name, {}).update(mechanisms)
        log.info("bootstrap SCRAM user %s added (%s)", name, ", ".join(sorted(mechanisms)))
    write_store(config.data_dir, store)


class BrokerServer:
    """One broker's listener, handler table and periodic work, started and stopped in order."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        config = broker.config
        self.router = Router({}, broker.metrics)
        self._limits = ConnectionLimits(
            config.socket_request_max_bytes, config.max_in_flight_per_connection
        )
        self._connections: set[Connection] = set()  # every listener's (max.connections)
        self.listeners: list[Listener] = []
        self._key_stores: list[KeyStoreWatch] = []  # TLS listeners' files, polled per tick
        self._tick_handle: asyncio.TimerHandle | None = None

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    async def _bind_listeners(self) -> tuple[str, int]:
        """One Listener per `listeners` entry, bound (not yet accepting); the config then
        carries the real ports (port 0 picks one)."""
        config = self.broker.config
        credentials = self.broker.credentials
        bound: list[ListenerSpec] = []
        addresses: list[tuple[str, int]] = []
        for spec in config.listeners:
            security, ssl_context, handshake_timeout_s = listener_security(
                config, spec, credentials
            )
            listener = Listener(
                self.router, self._limits, config.max_connections, security=security,
                ssl_context=ssl_context, handshake_timeout_s=handshake_timeout_s,
                connections=self._connections,
            )
            self.listeners.append(listener)
            watch = key_store_watch(config, spec, ssl_context)
            if watch is not None:
                self._key_stores.append(watch)
            host, port = await listener.bind(spec.host, spec.port)
            addresses.append((host, port))
            bound.append(replace(spec, port=port,
                                 advertised_port=spec.advertised_port or port))
            log.info("listener %s (%s) on %s:%d", spec.name, spec.security_protocol.value,
                     host, port)
        first = bound[0]
        self.broker.config = replace(
            config, listeners=tuple(bound), listen_port=first.port,
            advertised_port=first.advertised_port,
        )
        return addresses[0]

    def use_cluster_handlers(self, replication: Replication) -> None:
        """Cluster mode: from the next request on, answer with the cluster handlers."""
        self.router.table = handler_table(self.broker, replication)

    async def start(self, load_groups: bool = True) -> tuple[str, int]:
        """Listen; returns the bound (host, port) (the real port when asked for port 0).
        `load_groups=False` in cluster mode: the group service starts once the cluster is
        joined (its `__consumer_offsets` is replicated, not created locally)."""
        add_bootstrap_users(self.broker.config)
        host, port = await self._bind_listeners()
        # Built once the port is known (Metadata and FindCoordinator advertise it) and the
        # metrics are attached, before the first connection is accepted.
        self.router.metrics = self.broker.metrics
        self.router.table = handler_table(self.broker)
        for listener in self.listeners:
            await listener.start_serving()
        # Load the group coordinator now (create and replay __consumer_offsets) rather than on
        # the first group request, so a restart's replay cost is paid before `ready`.
        if load_groups:
            group_service.service(self.broker)
            # Transactions left open by the previous run time out or complete from now on.
            if self.broker.topics.get(TRANSACTION_STATE_TOPIC) is not None:
                transaction_service.service(self.broker)
            # Pending delayed records are delivered from now on (and those a crash left
            # half-delivered are found) before the broker says it is ready.
            if self.broker.topics.get(TIMER_TOPIC) is not None:
                timer_service.service(self.broker)
        self._schedule_tick()
        return host, port

    def _schedule_tick(self) -> None:
        interval_s = self.broker.config.log_tick_interval_ms / 1000
        self._tick_handle = asyncio.get_running_loop().call_later(interval_s, self._tick)

    def _tick(self) -> None:
        try:
            self.broker.tick()
        except OSError:
            log.exception("log maintenance failed; retrying at the next tick")
        config = self.broker.config
        for listener in self.listeners:
            listener.check_idle(config.log_tick_interval_ms, config.connections_max_idle_ms)
        for key_store in self._key_stores:
            key_store.poll()
        self._schedule_tick()

    async def shutdown(self) -> None:
        if self._tick_handle is not None:
            self._tick_handle.cancel()
        stopping = [(listener, listener.stop_accepting()) for listener in self.listeners]
        self.broker.closing = True
        self.broker.append_waiters.wake_all()
        await asyncio.gather(*(listener.close(connections, DRAIN_TIMEOUT_S)
                               for listener, connections in stopping))
        self.broker.close()


def _raise_open_files_limit() -> None:
    """Lift the soft open-files limit to the hard one, as the JVM does for Kafka: partitions
    and connections each hold descriptors, and the soft default is often 1024."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


async def serve(
    config: BrokerConfig,
    *,
    metrics_address: tuple[str, int] | None = None,
    metrics_required: bool = False,
    cluster: ClusterSettings | None = None,
) -> None:
    """Run a broker until SIGTERM or SIGINT; prints the ready line once it accepts connections.

    `metrics_address`: where /metrics and /health listen (None: no metrics are kept).
    `cluster`: join a ZooKeeper cluster (None: a single node, nothing else changes)."""
    _raise_open_files_limit()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    broker = Broker(config)
    server = BrokerServer(broker)
    try:
        metrics_server = await start_metrics(
            broker, lambda: server.connection_count, metrics_address, required=metrics_required
        )
        host, port = await server.start(load_groups=cluster is None)
    except (OSError, MetricsAddressError, ConfigError):
        broker.close()
        raise
    link = None
    if cluster is not None:
        from tidelog.broker.cluster_link import join_cluster

        try:
            link = await join_cluster(broker, cluster, server.use_cluster_handlers)
        except BaseException:
            await server.shutdown()
            raise
    sys.stdout.write(f"tidelog ready on {host}:{port}\n")
    sys.stdout.flush()
    log.info(
        "node %d, cluster %s, data in %s, advertising %s:%d",
        config.node_id,
        broker.cluster_id,
        config.data_dir,
        broker.config.advertised_host,
        broker.config.advertised_port,
    )
    await stop.wait()
    log.info("shutting down")
    if link is not None:
        await link.leave()
    if metrics_server is not None:
        await metrics_server.close()
    await server.shutdown()
    log.info("stopped cleanly")
