"""What the share handler modules (share_fetch.py, share_offsets.py) get: their dependencies."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tidelog.broker.delayed import AppendWaiters
from tidelog.broker.services import Lifecycle, PartitionReplication
from tidelog.broker.share.service import ShareService
from tidelog.broker.topic_registry import TopicRegistry
from tidelog.errors import ErrorCode
from tidelog.security.authorizer import Authorizer
from tidelog.types import TopicPartition


@dataclass(frozen=True, slots=True)
class ShareDeps:
    topics: TopicRegistry
    replication: PartitionReplication
    append_waiters: AppendWaiters
    lifecycle: Lifecycle
    shares: Callable[[], ShareService]  # started on first use
    node_id: int
    authorizer: Authorizer | None = None
    # Cluster mode: (leader id, leader epoch) of a partition led elsewhere (-1 unknown).
    current_leader: Callable[[TopicPartition], tuple[int, int]] | None = None
    # Cluster mode: (error, coordinator id) of a group on a listener (the offsets admin APIs
    # are served by the group's coordinator, as Kafka's).
    group_coordinator: Callable[[str, str], tuple[ErrorCode, int]] | None = None


def not_coordinator(deps: ShareDeps, listener_name: str, group_id: str) -> ErrorCode | None:
    """NOT_COORDINATOR (or the lookup's error) when another broker coordinates the group."""
    if deps.group_coordinator is None:
        return None
    error, node = deps.group_coordinator(group_id, listener_name)
    if error is not ErrorCode.NONE:
        return error
    return None if node == deps.node_id else ErrorCode.NOT_COORDINATOR
