"""Leaders and followers on one broker: roles from the cluster view, ISR, high watermark.

Runs on the event loop; must not block (ZooKeeper writes go through `asyncio.to_thread`).

- Roles: each partition state in the view (leader, leader_epoch, isr, znode version) makes this
  broker the partition's leader or a follower. A new leader epoch is a leadership change:
  the leader records `(epoch, log_end_offset)` in its leader-epoch cache and forgets follower
  positions; a follower (re)starts its replica fetcher, which truncates first (KIP-101).
- Leader bookkeeping (placement's rules): every follower fetch updates that follower's
  `FollowerState`; the high watermark is the lowest log end offset over the *maximal* ISR
  (the ISR plus a pending expansion, or before a shrink is committed), so an acknowledged
  offset is on every replica ZooKeeper may elect. ISR changes are written to ZooKeeper first
  and applied locally only once written.
- acks=all: a produce parks in `wait_for_high_watermark` until the high watermark passes its
  last offset (NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below min.insync.replicas
  meanwhile, NOT_LEADER_OR_FOLLOWER if leadership moved, REQUEST_TIMED_OUT at the timeout).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from tidelog.broker import clock
from tidelog.broker.cluster_agent import ClusterAgent, ClusterSettings, ClusterView, topic_uuid
from tidelog.broker.internal_topics import OFFSETS_TOPIC
from tidelog.cluster import placement
from tidelog.cluster.zk_layout import NO_LEADER, PartitionState
from tidelog.cluster.zk_store import VersionedState
from tidelog.errors import ErrorCode, KafkaError
from tidelog.storage.hw_checkpoint import read_high_watermarks, write_high_watermarks
from tidelog.storage.leader_epochs import LeaderEpochCache
from tidelog.storage.log import PartitionLog
from tidelog.types import TopicPartition

if TYPE_CHECKING:
    from tidelog.broker.replica_fetcher import ReplicaFetcher
    from tidelog.broker.state import Broker

log = logging.getLogger("tidelog.broker.replication")
MIN_INSYNC_REPLICAS = "min.insync.replicas"
UNCLEAN_LEADER_ELECTION = "unclean.leader.election.enable"
REPLICATION_TOPIC_CONFIGS = frozenset({MIN_INSYNC_REPLICAS, UNCLEAN_LEADER_ELECTION})


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


class Replication:
    """Every hosted partition's role and replication state; fed by the ClusterAgent."""

    def __init__(self, broker: Broker, settings: ClusterSettings) -> None:
        self.broker = broker
        self.settings = settings
        self.node_id = broker.config.node_id
        self.view: ClusterView | None = None
        self.partitions: dict[TopicPartition, ReplicaState] = {}
        self.agent: ClusterAgent | None = None
        self.first_view = asyncio.Event()
        self._isr_task: asyncio.Task[None] | None = None
        self._checkpoint_task: asyncio.Task[None] | None = None
        # High watermarks from the last run's replication-offset-checkpoint, consumed as each
        # partition is first hosted, so a restarted broker does not start at 0.
        self._checkpointed = read_high_watermarks(broker.config.data_dir)
        self._written: dict[TopicPartition, int] = dict(self._checkpointed)
        self._background: set[asyncio.Task[None]] = set()
        self.closing = False

    # ------------------------------------------------------------ lifecycle

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._isr_task = loop.create_task(self._isr_loop())
        self._checkpoint_task = loop.create_task(self._checkpoint_loop())

    async def stop(self) -> None:
        self.closing = True
        for task in (self._isr_task, self._checkpoint_task):
            if task is not None:
                task.cancel()
        for state in self.partitions.values():
            self._fail_waiters(state, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            if state.fetcher is not None:
                await state.fetcher.stop()
                state.fetcher = None
        await self.checkpoint_high_watermarks()

    async def checkpoint_high_watermarks(self) -> None:
        """Write replication-offset-checkpoint if a high watermark moved since the last write."""
        current = {tp: state.high_watermark for tp, state in self.partitions.items()}
        if current == self._written:
            return
        try:
            await asyncio.to_thread(write_high_watermarks, self.broker.config.data_dir, current)
        except OSError as error:
            log.error("high watermark checkpoint failed: %s", error)
            return
        self._written = current

    async def _checkpoint_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.hw_checkpoint_interval_ms / 1000)
            await self.checkpoint_high_watermarks()

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
        if previous is not None:
            for topic in set(previous.topics) - set(view.topics):
                self._remove_topic(topic)  # deleted through ZooKeeper (DeleteTopics)
        for topic, assignment in view.topics.items():
            configs = {
                k: v for k, v in view.configs.get(topic, {}).items()
                if k not in REPLICATION_TOPIC_CONFIGS
            }
            try:
                info = self.broker.adopt_topic(
                    topic, topic_uuid(assignment.topic_id), len(assignment.partitions), configs
                )
                if dict(info.configs) != configs:  # AlterConfigs through ZooKeeper
                    self.broker.set_topic_configs(topic, configs)
                    log.info("topic %s: configs now %s", topic, configs)
            except (KafkaError, ValueError) as error:
                log.error("topic %s cannot be hosted: %s", topic, error)
                continue
            for partition, replicas in assignment.partitions.items():
                tp = TopicPartition(topic, partition)
                versioned = view.states.get(tp)
                if self.node_id in replicas and versioned is not None:
                    self._apply_state(tp, replicas, versioned)
        self.first_view.set()

    def _remove_topic(self, topic: str) -> None:
        """The topic left ZooKeeper: stop replicating it and delete its local logs."""
        for tp in [tp for tp in self.partitions if tp.topic == topic]:
            state = self.partitions.pop(tp)
            self._fail_waiters(state, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            self._tell_group_coordinator(state, is_leader=False)
            if state.fetcher is not None:
                state.fetcher.cancel()
                state.fetcher = None
        if self.broker.topics.get(topic) is not None:
            self.broker.delete_topic(topic)

    def _state_for(self, tp: TopicPartition, replicas: tuple[int, ...]) -> ReplicaState:
        state = self.partitions.get(tp)
        if state is None:
            partition_log = self.broker.partition_log(tp.topic, tp.partition)
            state = ReplicaState(tp, partition_log, LeaderEpochCache(partition_log.directory))
            checkpointed = min(self._checkpointed.pop(tp, 0), partition_log.log_end_offset)
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
        state.high_watermark = min(state.high_watermark, log_end_offset)
        now_ms = clock.now_ms()
        # Followers get a fresh lag allowance and hold the high watermark until they fetch.
        state.followers = {
            b: placement.FollowerState(b, state.high_watermark, now_ms)
            for b in state.replicas
            if b != self.node_id
        }
        self._advance_high_watermark(state)
        self._tell_group_coordinator(state, is_leader=True)

    def _tell_group_coordinator(self, state: ReplicaState, is_leader: bool) -> None:
        """A `__consumer_offsets` partition gained or lost its leader here: the group
        coordinator loads or unloads its groups (Kafka's onElection / onResignation)."""
        if state.tp.topic == OFFSETS_TOPIC and self.broker.groups is not None:
            self.broker.groups.on_partition_role(state.tp.partition, is_leader)

    def _become_follower(self, state: ReplicaState) -> None:
        from tidelog.broker.replica_fetcher import ReplicaFetcher

        log.info("%s: follower of %d at epoch %d", state.tp, state.leader, state.leader_epoch)
        self._fail_waiters(state, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        self._tell_group_coordinator(state, is_leader=False)
        state.followers = {}
        if state.fetcher is not None:
            self._spawn(state.fetcher.stop())
            state.fetcher = None
        if state.leader != NO_LEADER:
            state.fetcher = ReplicaFetcher(self, state, state.leader, state.leader_epoch)
            state.fetcher.start()

    def leader_endpoint(self, broker_id: int) -> tuple[str, int] | None:
        return self.view.brokers.get(broker_id) if self.view is not None else None

    # ------------------------------------------------------------ requests

    def _partition(self, tp: TopicPartition) -> ReplicaState:
        state = self.partitions.get(tp)
        if state is None:
            known = self.view is not None and tp.topic in self.view.topics
            code = ErrorCode.NOT_LEADER_OR_FOLLOWER
            if not known:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            raise KafkaError(code, f"{tp} is not hosted by broker {self.node_id}")
        return state

    def _leader(self, tp: TopicPartition, current_leader_epoch: int = -1) -> ReplicaState:
        """This broker's partition as leader; the client's epoch is checked first (KIP-320,
        Kafka's order): older -> FENCED_LEADER_EPOCH, newer -> UNKNOWN_LEADER_EPOCH, -1 none."""
        state = self._partition(tp)
        placement.check_leader_epoch(tp, current_leader_epoch, state.leader_epoch)
        if state.leader != self.node_id:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{tp}: leader is {state.leader}")
        return state

    def min_insync_replicas(self, topic: str) -> int:
        configs = self.view.configs.get(topic, {}) if self.view is not None else {}
        try:
            return int(configs.get(MIN_INSYNC_REPLICAS, self.settings.min_insync_replicas))
        except ValueError:
            return self.settings.min_insync_replicas

    def check_produce(self, tp: TopicPartition, acks: int) -> int:
        """Before a leader append: the leader epoch to stamp; raises NOT_LEADER_OR_FOLLOWER,
        or NOT_ENOUGH_REPLICAS for acks=all while the ISR is below min.insync.replicas."""
        state = self._leader(tp)
        if acks == -1:
            code = placement.check_min_insync(len(state.isr), self.min_insync_replicas(tp.topic))
            if code != ErrorCode.NONE:
                raise KafkaError(code, f"{tp}: isr {state.isr}")
        return state.leader_epoch

    def after_leader_append(self, tp: TopicPartition) -> None:
        state = self.partitions.get(tp)
        if state is not None and state.leader == self.node_id:
            self._advance_high_watermark(state)

    async def wait_for_high_watermark(
        self, tp: TopicPartition, end_offset: int, timeout_ms: int
    ) -> ErrorCode:
        """acks=all: park until the high watermark reaches `end_offset` (and, with
        acks.all.fsync, the leader's own copy is fsynced: followers fsync before they report)."""
        state = self.partitions.get(tp)
        if state is None or state.leader != self.node_id:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.settings.acks_all_fsync:
            try:
                await asyncio.wait_for(
                    self.broker.wait_durable(state.log, end_offset), max(timeout_ms, 1) / 1000
                )
            except TimeoutError:
                return ErrorCode.REQUEST_TIMED_OUT
            except KafkaError as error:
                return error.code
            if state.leader != self.node_id:
                return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if state.high_watermark >= end_offset:
            return self._acks_outcome(state)
        future: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
        entry = (end_offset, future)
        state.waiters.append(entry)
        try:
            return await asyncio.wait_for(future, max(timeout_ms, 1) / 1000)
        except TimeoutError:
            return ErrorCode.REQUEST_TIMED_OUT
        finally:
            with contextlib.suppress(ValueError):
                state.waiters.remove(entry)

    def _acks_outcome(self, state: ReplicaState) -> ErrorCode:
        if len(state.isr) < self.min_insync_replicas(state.tp.topic):
            return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return ErrorCode.NONE

    def _fail_waiters(self, state: ReplicaState, code: ErrorCode) -> None:
        for _, future in state.waiters:
            if not future.done():
                future.set_result(code)
        state.waiters.clear()

    def fetch_bounds(
        self, tp: TopicPartition, replica_id: int, fetch_offset: int,
        current_leader_epoch: int = -1,
    ) -> tuple[int, int]:
        """(high watermark to report, offset to read below) for a Fetch on this leader.

        Consumers read below the high watermark; a follower (replica_id >= 0) reads to the
        log end and its fetch offset is its log end offset (placement.update_follower_fetch).
        """
        state = self._leader(tp, current_leader_epoch)
        log_end_offset = state.log.log_end_offset
        if replica_id < 0:
            return state.high_watermark, state.high_watermark
        if replica_id not in state.replicas:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{replica_id} is no replica")
        if fetch_offset <= log_end_offset:
            self._record_follower_fetch(state, replica_id, fetch_offset, log_end_offset)
        return state.high_watermark, log_end_offset

    def _record_follower_fetch(
        self, state: ReplicaState, replica_id: int, fetch_offset: int, log_end_offset: int
    ) -> None:
        now_ms = clock.now_ms()
        state.fetch_counts[replica_id] = state.fetch_counts.get(replica_id, 0) + 1
        for watcher in state.fetch_watchers:
            if not watcher.done():
                watcher.set_result(None)
        state.fetch_watchers.clear()
        follower = state.followers.get(replica_id) or placement.FollowerState(replica_id)
        follower = placement.update_follower_fetch(follower, fetch_offset, log_end_offset, now_ms)
        state.followers[replica_id] = follower
        if (
            replica_id not in state.isr
            and state.pending_isr is None
            and placement.may_join_isr(
                follower,
                high_watermark=state.high_watermark,
                leader_epoch_start_offset=state.epochs.epoch_start_offset(state.leader_epoch),
            )
        ):
            self._write_isr(state, placement.expanded_isr(state.isr, replica_id, state.replicas))
        self._advance_high_watermark(state)

    async def wait_for_isr_fetches(self, tp: TopicPartition, fetches: int, timeout_ms: int) -> bool:
        """Leader: until every other ISR member has fetched `fetches` more times (each
        follower applies a response before its next fetch); False at the timeout."""
        state = self._leader(tp)
        wanted = {b: state.fetch_counts.get(b, 0) + fetches for b in state.isr if b != self.node_id}
        deadline = asyncio.get_running_loop().time() + timeout_ms / 1000
        while any(state.fetch_counts.get(b, 0) < n for b, n in wanted.items() if b in state.isr):
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0 or state.leader != self.node_id:
                return False
            watcher: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            state.fetch_watchers.append(watcher)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(watcher, remaining)
        return state.leader == self.node_id

    def high_watermark(self, tp: TopicPartition, current_leader_epoch: int = -1) -> int:
        return self._leader(tp, current_leader_epoch).high_watermark

    def leader_epoch(self, tp: TopicPartition) -> int:
        return self._partition(tp).leader_epoch

    def end_offset_for_epoch(
        self, tp: TopicPartition, epoch: int, current_leader_epoch: int = -1
    ) -> tuple[int, int]:
        """OffsetForLeaderEpoch on the leader: (epoch found, its end offset)."""
        state = self._leader(tp, current_leader_epoch)
        return state.epochs.end_offset_for(epoch, state.log.log_end_offset)

    def set_follower_high_watermark(self, state: ReplicaState, leader_high_watermark: int) -> None:
        state.high_watermark = max(
            state.high_watermark, min(leader_high_watermark, state.log.log_end_offset)
        )

    # ------------------------------------------------------------ high watermark and ISR

    def _advance_high_watermark(self, state: ReplicaState) -> None:
        maximal = set(state.isr) | set(state.pending_isr or ())
        log_end_offset = state.log.log_end_offset
        new = placement.high_watermark(
            state.high_watermark, self.node_id, log_end_offset, maximal, state.followers
        )
        new = min(new, log_end_offset)
        if new <= state.high_watermark:
            return
        state.high_watermark = new
        if state.waiters:
            outcome = self._acks_outcome(state)
            for entry in [w for w in state.waiters if w[0] <= new]:
                state.waiters.remove(entry)
                if not entry[1].done():
                    entry[1].set_result(outcome)
        self.broker.append_waiters.notify(state.tp)  # consumers parked below the old mark

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
            await asyncio.sleep(interval_s)
            now_ms = clock.now_ms()
            for state in list(self.partitions.values()):
                if state.leader != self.node_id or state.pending_isr is not None:
                    continue
                lagging = placement.out_of_sync_replicas(
                    self.node_id,
                    state.isr,
                    state.followers,
                    now_ms=now_ms,
                    replica_lag_time_max_ms=self.settings.replica_lag_time_max_ms,
                )
                if lagging:
                    self._write_isr(state, placement.shrunk_isr(state.isr, lagging))
