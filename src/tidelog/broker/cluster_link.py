"""Joining and leaving a ZooKeeper cluster: the one place server.py calls in cluster mode.

Runs on the event loop; the blocking ZooKeeper connect and registration run on a worker
thread (`asyncio.to_thread`), then the agent's own thread takes over.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from tidelog.broker.config import BrokerConfig
from tidelog.broker.groups import service as group_service
from tidelog.broker.net.inter_broker import inter_broker_listener, inter_broker_security
from tidelog.broker.replication.cluster_agent import ClusterAgent, ClusterSettings
from tidelog.broker.replication.replica_manager import Replication
from tidelog.broker.share import service as share_service
from tidelog.broker.state import Broker
from tidelog.broker.timers import cluster as timer_cluster
from tidelog.broker.transactions import service as transaction_service
from tidelog.cluster.zk_layout import BrokerEndpoint, BrokerRegistration

log = logging.getLogger("tidelog.broker.cluster_link")
FIRST_VIEW_TIMEOUT_S = 30.0


class ClusterLink:
    def __init__(self, broker: Broker, replication: Replication, agent: ClusterAgent) -> None:
        self.broker = broker
        self.replication = replication
        self.agent = agent

    async def leave(self) -> None:
        """Stop fetching, then close the ZooKeeper session (our registration goes at once,
        so the controller moves leadership without waiting for a session timeout)."""
        await self.replication.stop()
        await asyncio.to_thread(self.agent.stop)


def _registration(config: BrokerConfig) -> BrokerRegistration:
    """Every advertised listener, the inter-broker one first (peers replicate from it)."""
    first = inter_broker_listener(config)
    others = tuple(
        BrokerEndpoint(spec.name, spec.security_protocol.value, spec.advertised_host,
                       spec.advertised_port)
        for spec in config.listeners if spec.name != first.name
    )
    if not config.listeners:  # a config built without listeners (tests): --listen only
        return BrokerRegistration(config.node_id, config.advertised_host,
                                  config.advertised_port, time.time_ns() // 1_000_000)
    return BrokerRegistration(
        config.node_id, first.advertised_host, first.advertised_port,
        time.time_ns() // 1_000_000, listener=first.name,
        security_protocol=first.security_protocol.value, other_endpoints=others,
    )


async def join_cluster(
    broker: Broker,
    settings: ClusterSettings,
    use_cluster_handlers: Callable[[Replication], None],
) -> ClusterLink:
    """Register this broker (its advertised listener), start the agent and replication, and
    return once the first cluster view has been applied. `use_cluster_handlers` switches the
    server's handler table to the cluster handlers."""
    config = broker.config
    registration = _registration(config)
    replication = Replication(broker, settings)
    if config.listeners:
        replication.peer_security = inter_broker_security(config, inter_broker_listener(config))
    broker.replication = replication
    authorizer = broker.authorizer
    agent = ClusterAgent(
        settings, registration, asyncio.get_running_loop(), replication.on_view, broker.cluster_id,
        on_acls=None if authorizer is None else authorizer.replace_acls,
        on_quotas=broker.quotas.replace,
        on_users=broker.credentials.replace,
        on_client_metrics=broker.telemetry.replace_subscriptions,
    )
    # Client quotas and SCRAM users likewise: ZooKeeper's /config/users and /config/clients,
    # not the data directory.
    broker.quota_store = agent.quota_store
    broker.user_store = agent.scram_store
    broker.telemetry.store = agent.client_metrics_store  # KIP-714 subscriptions likewise
    # The cluster's ACLs are ZooKeeper's (Kafka's ZK-mode AclAuthorizer), never acls.json:
    # nothing but super users until they are loaded (agent.start, before ready).
    broker.acl_store = agent.acl_store
    if authorizer is not None:
        authorizer.replace_acls(frozenset())
    use_cluster_handlers(replication)
    replication.agent = agent
    timeout_s = max(FIRST_VIEW_TIMEOUT_S, 3 * settings.session_timeout_ms / 1000)
    await asyncio.to_thread(agent.start, timeout_s)
    broker.cluster_id = agent.joined_cluster_id  # every broker answers the same id
    replication.start()
    await asyncio.wait_for(replication.first_view.wait(), FIRST_VIEW_TIMEOUT_S)
    group_service.service(broker)  # loads the offsets partitions this broker leads
    transaction_service.service(broker)  # likewise the __transaction_state partitions
    share_service.service(broker)  # likewise the __share_group_state partitions
    timer_cluster.service(broker, replication)  # and the __tidelog_timer partitions
    return ClusterLink(broker, replication, agent)
