"""One hosted partition as this broker sees it (role, ISR, high watermark, waiters).

Owned by the event loop (replication.py, leader_requests.py, replica_fetcher.py); it satisfies
`isr.IsrFields`, so the pure ISR and high-watermark rules apply to it directly.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tidelog.cluster import placement
from tidelog.cluster.zk_layout import NO_LEADER
from tidelog.errors import ErrorCode
from tidelog.storage.leader_epochs import LeaderEpochCache
from tidelog.storage.log import PartitionLog
from tidelog.types import TopicPartition

if TYPE_CHECKING:
    from tidelog.broker.replication.replica_fetcher import ReplicaFetcher


@dataclass(eq=False)
class ReplicaState:
    """One hosted partition as this broker sees it."""

    tp: TopicPartition
    log: PartitionLog
    epochs: LeaderEpochCache
    replicas: tuple[int, ...] = ()
    leader: int = NO_LEADER
    leader_epoch: int = -1
    controller_epoch: int = 0
    isr: tuple[int, ...] = ()
    zk_version: int = -1
    high_watermark: int = 0
    followers: dict[int, placement.FollowerState] = field(default_factory=dict)
    pending_isr: tuple[int, ...] | None = None
    fetcher: ReplicaFetcher | None = None
    waiters: list[tuple[int, asyncio.Future[ErrorCode]]] = field(default_factory=list)
    # follower id -> fetches served while leader; futures woken by the next follower fetch
    fetch_counts: dict[int, int] = field(default_factory=dict)
    fetch_watchers: list[asyncio.Future[None]] = field(default_factory=list)

