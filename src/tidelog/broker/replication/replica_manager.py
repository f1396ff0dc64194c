"""Leaders and followers on one broker: roles from the cluster view, ISR, high watermark.

Runs on the event loop; must not block (ZooKeeper writes go through `asyncio.to_thread`).

- Roles: each partition state in the view (leader, leader_epoch, isr, znode version) makes this
  broker the partition's leader or a follower. A new leader epoch is a leadership change:
  the leader records `(epoch, log_end_offset)` in its leader-epoch cache and forgets follower
  positions; a follower (re)starts its replica fetcher, which truncates first (KIP-101).
- Leader bookkeeping: the rules are pure, in `isr.py` (follower fetch state, ISR expand and
  shrink, the high watermark over the maximal ISR); this module applies them: ISR changes are
  written to ZooKeeper first and applied locally only once written.
- Listeners: `view_listeners` run on each new view before partition states apply (the topic
  mirror, topic_mirror.py); `role_listeners` hear a partition's leadership gained or lost
  (the group coordinator subscribes for `__consumer_offsets`).
- acks=all: a produce parks in `wait_for_high_watermark` until the high watermark passes its
  last offset (NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below min.insync.replicas
  meanwhile, NOT_LEADER_OR_FOLLOWER if leadership moved, REQUEST_TIMED_OUT at the timeout).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from tidelog.broker import clock
from tidelog.broker.peer_client import PeerSecurity
from tidelog.broker.replication import isr
from tidelog.broker.replication.cluster_agent import ClusterAgent, ClusterSettings, ClusterView
from tidelog.broker.replication.hw_checkpointer import HighWatermarkCheckpointer
from tidelog.broker.replication.leader_requests import LeaderRequests
from tidelog.broker.replication.replica_state import ReplicaState
from tidelog.broker.replication.throttle import (
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
    ReplicationQuota,
    quota_for,
    throttles,
)
from tidelog.broker.replication.topic_mirror import (
    MIN_INSYNC_REPLICAS,
    REPLICATION_TOPIC_CONFIGS,
    UNCLEAN_LEADER_ELECTION,
    TopicMirror,
)
from tidelog.cluster.zk_layout import NO_LEADER, PartitionState
from tidelog.cluster.zk_store import VersionedState
from tidelog.errors import ErrorCode, KafkaError
from tidelog.storage.leader_epochs import LeaderEpochCache
from tidelog.types import TopicPartition

if TYPE_CHECKING:
    from tidelog.broker.replication.replica_fetcher import ReplicaFetcher
    from tidelog.broker.state import Broker

log = logging.getLogger("tidelog.broker.replication.replica_manager")
__all__ = [
    "MIN_INSYNC_REPLICAS", "REPLICATION_TOPIC_CONFIGS", "UNCLEAN_LEADER_ELECTION",
    "ReplicaState", "Replication", "RoleListener", "ViewListener",
]
# (view, previous view) -> topics that cannot be hosted here (their states are skipped)
ViewListener = Callable[[ClusterView, "ClusterView | None"], set[str]]
RoleListener = Callable[[TopicPartition, bool], None]  # (partition, is leader here now)


class Replication(LeaderRequests):
    """Every hosted partition's role and replication state; fed by the ClusterAgent."""

    def __init__(self, broker: Broker, settings: ClusterSettings) -> None:
        self.broker = broker
        self.settings = settings
        self.node_id = broker.config.node_id
        self.view: ClusterView | None = None
        self.partitions: dict[TopicPartition, ReplicaState] = {}
        self.agent: ClusterAgent | None = None
        self.peer_security = PeerSecurity()  # the inter-broker listener's (cluster_link)
        self.first_view = asyncio.Event()
        self._view_changed = asyncio.Event()  # set and replaced on every new view
        self._isr_task: asyncio.Task[None] | None = None
        self.checkpointer = HighWatermarkCheckpointer(
            broker.config.data_dir, settings.hw_checkpoint_interval_ms,
            lambda: {tp: state.high_watermark for tp, state in self.partitions.items()},
        )
        self._background: set[asyncio.Task[None]] = set()
        self.closing = False
        self.leader_throttle: ReplicationQuota | None = None
        self.follower_throttle: ReplicationQuota | None = None
        self.view_listeners: list[ViewListener] = [TopicMirror(broker).on_view]
        self.role_listeners: list[RoleListener] = []

    # ------------------------------------------------------------ lifecycle

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._isr_task = loop.create_task(self._isr_loop())
        self.checkpointer.start()

    async def stop(self) -> None:
        self.closing = True
        if self._isr_task is not None:
            self._isr_task.cancel()
        self.checkpointer.cancel()
        for state in self.partitions.values():
            self._fail_waiters(state, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            if state.fetcher is not None:
                await state.fetcher.stop()
                state.fetcher = None
        await self.checkpoint_high_watermarks()

    async def checkpoint_high_watermarks(self) -> None:
        await self.checkpointer.checkpoint()

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # ------------------------------------------------------------ the view

    def on_view(self, view: ClusterView) -> None:
        """A fresh read of ZooKeeper (called on the loop by the agent)."""
        if self.closing:
            return
        previous = self.view
        self.view = view
        self.leader_throttle = quota_for(self.leader_throttle, view.broker_configs, LEADER_RATE)
        self.follower_throttle = quota_for(
            self.follower_throttle, view.broker_configs, FOLLOWER_RATE
        )
        if previous is not None:
            for topic in set(previous.topics) - set(view.topics):
                self._drop_topic(topic)  # before a listener deletes its logs
        unhostable: set[str] = set()
        for listener in self.view_listeners:
            unhostable |= listener(view, previous)
        for topic, assignment in view.topics.items():
            if topic in unhostable:
                continue
            for partition, replicas in assignment.partitions.items():
                tp = TopicPartition(topic, partition)
                versioned = view.states.get(tp)
                if self.node_id in replicas and versioned is not None:
                    self._apply_state(tp, replicas, versioned)
        for tp in list(self.partitions):
            moved = view.topics.get(tp.topic)
            if (moved is not None and tp.topic not in unhostable
                    and self.node_id not in moved.partitions.get(tp.partition, ())):
                self._drop_replica(tp)  # reassigned away (or the partition is unknown)
        self.first_view.set()
        changed, self._view_changed = self._view_changed, asyncio.Event()
        changed.set()

    async def wait_for_view(
        self, predicate: Callable[[ClusterView], bool], timeout_ms: int
    ) -> bool:
        """Until a view satisfies `predicate` (True) or the timeout (False): woken by each
        new view, never polled. E.g. DeleteTopics waits for its topics to leave the view."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        while self.view is None or not predicate(self.view):
            remaining = deadline - loop.time()
            if remaining <= 0 or self.closing:
                return False
            try:
                # asyncio.timeout, not wait_for: in 3.11 wait_for swallows a cancellation that
                # arrives as the view event fires, and a replica fetcher cancelled by that very
                # view (a new leader) then lived on (it truncated a new leader's log).
                async with asyncio.timeout(remaining):
                    await self._view_changed.wait()
            except TimeoutError:
                return False
        return True

    def _drop_topic(self, topic: str) -> None:
        """The topic left ZooKeeper: stop replicating it (its logs are deleted next)."""
        for tp in [tp for tp in self.partitions if tp.topic == topic]:
            fetcher = self._stop_replica(tp)
            if fetcher is not None:
                fetcher.cancel()

    def _stop_replica(self, tp: TopicPartition) -> ReplicaFetcher | None:
        state = self.partitions.pop(tp)
        self._fail_waiters(state, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        self._tell_role(state, is_leader=False)
        self._wake_fetch_watchers(state)
        fetcher, state.fetcher = state.fetcher, None
        return fetcher

    def _drop_replica(self, tp: TopicPartition) -> None:
        """A reassignment removed this broker from the partition's replicas (Kafka's
        StopReplica with deletePartition): stop following, then delete the log."""
        fetcher = self._stop_replica(tp)
        log.info("%s: no longer a replica here; deleting its log", tp)

        async def delete() -> None:
            if fetcher is not None:
                await fetcher.stop()  # no append may land in the log being deleted
            if tp not in self.partitions and not self.closing:  # not reassigned back meanwhile
                self.broker.topics.reset_partition(tp.topic, tp.partition)

        self._spawn(delete())

    def _tell_role(self, state: ReplicaState, is_leader: bool) -> None:
        """Leadership of a partition gained or lost here (Kafka's onElection /
        onResignation for the coordinators)."""
        for listener in self.role_listeners:
            listener(state.tp, is_leader)

    def _state_for(self, tp: TopicPartition, replicas: tuple[int, ...]) -> ReplicaState:
        state = self.partitions.get(tp)
        if state is None:
            partition_log = self.broker.partition_log(tp.topic, tp.partition)
            state = ReplicaState(tp, partition_log, LeaderEpochCache(partition_log.directory))
            checkpointed = self.checkpointer.initial(tp, partition_log.log_end_offset)
            if checkpointed > 0:
                state.high_watermark = checkpointed
                log.info("%s: high watermark %d from the checkpoint", tp, checkpointed)
            self.partitions[tp] = state
        state.replicas = replicas
        return state

    def _apply_state(
        self, tp: TopicPartition, replicas: tuple[int, ...], versioned: VersionedState
    ) -> None:
        state = self._state_for(tp, replicas)
        new = versioned.state
        if new.leader_epoch < state.leader_epoch:
            return  # a view older than what we already acted on
        if new.leader_epoch > state.leader_epoch or new.leader != state.leader:
            state.leader = new.leader
            state.leader_epoch = new.leader_epoch
            state.controller_epoch = new.controller_epoch
            state.isr = new.isr
            state.zk_version = versioned.zk_version
            state.pending_isr = None
            if new.leader == self.node_id:
                self._become_leader(state)
            else:
                self._become_follower(state)
        elif versioned.zk_version > state.zk_version:
            state.isr = new.isr
            state.zk_version = versioned.zk_version
            state.controller_epoch = new.controller_epoch
            if state.leader == self.node_id:
                self._advance_high_watermark(state)

    def _become_leader(self, state: ReplicaState) -> None:
        log.info("%s: leader at epoch %d, isr %s", state.tp, state.leader_epoch, state.isr)
        if state.fetcher is not None:
            self._spawn(state.fetcher.stop())
            state.fetcher = None
        log_end_offset = state.log.log_end_offset
        state.epochs.assign(state.leader_epoch, log_end_offset)
        isr.become_leader(state, self.node_id, log_end_offset, clock.now_ms())
        self._advance_high_watermark(state)
        self._tell_role(state, is_leader=True)

    def _become_follower(self, state: ReplicaState) -> None:
        from tidelog.broker.replication.replica_fetcher import ReplicaFetcher

        log.info("%s: follower of %d at epoch %d", state.tp, state.leader, state.leader_epoch)
        self._fail_waiters(state, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        self._tell_role(state, is_leader=False)
        state.followers = {}
        self._wake_fetch_watchers(state)  # wait_for_isr_fetches sees the lost leadership
        if state.fetcher is not None:
            self._spawn(state.fetcher.stop())
            state.fetcher = None
        if state.leader != NO_LEADER:
            state.fetcher = ReplicaFetcher(self, state, state.leader, state.leader_epoch)
            state.fetcher.start()

    # ------------------------------------------------------------ throttles (KIP-73)

    def _throttled(self, tp: TopicPartition, name: str) -> bool:
        configs = self.view.configs.get(tp.topic, {}) if self.view is not None else {}
        return throttles(configs.get(name), tp.partition, self.node_id)

    def leader_quota(self, state: ReplicaState, replica_id: int) -> ReplicationQuota | None:
        quota = self.leader_throttle
        if quota is None or replica_id in state.isr:
            return None
        return quota if self._throttled(state.tp, LEADER_REPLICAS) else None

    def follower_quota(self, state: ReplicaState) -> ReplicationQuota | None:
        """The follower throttle if it applies to our fetches of `state` (out of the ISR)."""
        quota = self.follower_throttle
        if quota is None or self.node_id in state.isr:
            return None
        return quota if self._throttled(state.tp, FOLLOWER_REPLICAS) else None

    def leader_endpoint(self, broker_id: int) -> tuple[str, int] | None:
        return self.view.brokers.get(broker_id) if self.view is not None else None

    # ------------------------------------------------------------ ISR writes

    def _write_isr(self, state: ReplicaState, new_isr: tuple[int, ...]) -> None:
        agent = self.agent
        if agent is None or new_isr == state.isr:
            return
        state.pending_isr = new_isr
        epoch = state.leader_epoch
        new_state = PartitionState(self.node_id, epoch, new_isr, state.controller_epoch)
        log.info("%s: isr %s -> %s", state.tp, state.isr, new_isr)

        async def write() -> None:
            try:
                version = await asyncio.to_thread(
                    agent.update_isr, state.tp, new_state, state.zk_version
                )
            except (KazooException, KazooTimeoutError, KafkaError, OSError) as error:
                log.warning("%s: isr write failed: %s", state.tp, error)
                version = None
            if state.leader != self.node_id or state.leader_epoch != epoch:
                return  # leadership moved meanwhile: the view already reset this state
            state.pending_isr = None
            if version is not None and version > state.zk_version:
                state.isr = new_isr
                state.zk_version = version
            self._advance_high_watermark(state)

        self._spawn(write())

    async def _isr_loop(self) -> None:
        interval_s = max(self.settings.replica_lag_time_max_ms / 2, 50) / 1000
        while True:
            # Kafka's isr-expiration task: lag is a matter of time passing, so a periodic
            # check (not a poll of state another task changes).
            await asyncio.sleep(interval_s)
            now_ms = clock.now_ms()
            for state in list(self.partitions.values()):
                if state.leader != self.node_id:
                    continue
                shrunk = isr.shrink_candidate(
                    state, self.node_id, now_ms, self.settings.replica_lag_time_max_ms
                )
                if shrunk is not None:
                    self._write_isr(state, shrunk)
