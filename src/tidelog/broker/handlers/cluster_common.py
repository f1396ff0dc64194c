"""Dependencies and checks shared by the cluster-mode handlers (cluster.py, cluster_admin.py)."""

from __future__ import annotations

from dataclasses import dataclass

from tidelog.broker.config import BrokerConfig
from tidelog.broker.delayed import AppendWaiters
from tidelog.broker.replication.replica_manager import Replication
from tidelog.broker.services import ClusterIdentity
from tidelog.broker.topic_registry import TopicRegistry
from tidelog.errors import ErrorCode, KafkaError
from tidelog.security.authorizer import Authorizer


@dataclass(frozen=True, slots=True)
class ClusterDeps:
    config: BrokerConfig
    identity: ClusterIdentity
    topics: TopicRegistry
    replication: Replication
    append_waiters: AppendWaiters
    authorizer: Authorizer | None = None  # None: no ACL checks (authorizer.class.name unset)


def joined(deps: ClusterDeps) -> Replication:
    """The replication service once it has a cluster view and a ZooKeeper agent."""
    replication = deps.replication
    if replication.view is None or replication.agent is None:
        raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "not joined to the cluster yet")
    return replication


def check_replication_config(name: str, value: str | None) -> None:
    """min.insync.replicas and unclean.leader.election.enable (kept out of LogConfig)."""
    if name == "min.insync.replicas" and (value is None or not value.isdigit()
                                          or int(value) < 1):
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"{name}={value!r}")
    if name == "unclean.leader.election.enable" and value not in ("true", "false"):
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"{name}={value!r}")
