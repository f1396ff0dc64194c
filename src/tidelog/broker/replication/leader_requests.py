"""What the handlers ask a partition leader: produce checks, acks=all waits, follower and
consumer fetch bounds, epochs (KIP-320), and the high watermark moving up.

A base class of `Replication` (the view and roles live there); runs on the event loop and
must not block. The rules themselves are pure, in `isr.py`.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
from typing import TYPE_CHECKING

from tidelog.broker import clock
from tidelog.broker.replication import isr
from tidelog.broker.replication.topic_mirror import MIN_INSYNC_REPLICAS
from tidelog.cluster import placement
from tidelog.errors import ErrorCode, KafkaError
from tidelog.types import TopicPartition

LEADER_FETCH_MAX_BYTES = 8 * 1024 * 1024  # what a replica fetcher asks for at most
REPLICA_FETCH_MAX_WAIT_MS = 500  # replica_fetcher.FETCH_MAX_WAIT_MS (Kafka's default)

if TYPE_CHECKING:
    from tidelog.broker.replication.cluster_agent import ClusterSettings, ClusterView
    from tidelog.broker.replication.replica_state import ReplicaState
    from tidelog.broker.replication.throttle import ReplicationQuota
    from tidelog.broker.state import Broker


class LeaderRequests(abc.ABC):
    broker: Broker
    settings: ClusterSettings
    node_id: int
    view: ClusterView | None
    partitions: dict[TopicPartition, ReplicaState]

    @abc.abstractmethod
    def _write_isr(self, state: ReplicaState, new_isr: tuple[int, ...]) -> None:
        """Write an ISR change (Replication: to ZooKeeper, before adopting it)."""

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
        # asyncio.timeout, not wait_for, for every wait here: in 3.11 wait_for swallows a
        # cancellation that arrives as the awaited future completes (see wait_for_view).
        if self.settings.acks_all_fsync:
            try:
                async with asyncio.timeout(max(timeout_ms, 1) / 1000):
                    await self.broker.wait_durable(state.log, end_offset)
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
            async with asyncio.timeout(max(timeout_ms, 1) / 1000):
                return await future
        except TimeoutError:
            return ErrorCode.REQUEST_TIMED_OUT
        finally:
            with contextlib.suppress(ValueError):
                state.waiters.remove(entry)

    def _acks_outcome(self, state: ReplicaState) -> ErrorCode:
        return isr.acks_outcome(len(state.isr), self.min_insync_replicas(state.tp.topic))

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
        return state.high_watermark, self._leader_throttle_bound(
            state, replica_id, fetch_offset, log_end_offset
        )

    def _leader_throttle_bound(
        self, state: ReplicaState, replica_id: int, fetch_offset: int, log_end_offset: int
    ) -> int:
        """Kafka's leader-side replication throttle, for a throttled replica outside the ISR:
        the offset its fetch may read up to. While over the rate, nothing; else the whole
        batches within one chunk (at least one), charged to the quota as granted."""
        quota = self.leader_quota(state, replica_id)
        partition_log = state.log
        if quota is None or not (
            partition_log.log_start_offset <= fetch_offset < log_end_offset
        ):
            return log_end_offset  # not throttled, nothing to read, or out of range
        now_ms = clock.now_ms()
        if quota.delay_ms(now_ms) > 0:
            return fetch_offset  # nothing more for now: over the rate
        # A fetch refused for the rate waits out the follower's max wait (500 ms), so each
        # granted fetch carries that long's worth.
        chunk = quota.fetch_size(LEADER_FETCH_MAX_BYTES, REPLICA_FETCH_MAX_WAIT_MS)
        granted = partition_log.read(fetch_offset, chunk, max_offset=log_end_offset)
        quota.record(granted.size, now_ms)
        return granted.next_offset if granted.next_offset > fetch_offset else log_end_offset

    @abc.abstractmethod
    def leader_quota(self, state: ReplicaState, replica_id: int) -> ReplicationQuota | None:
        """The leader throttle if it applies to this replica's fetches of `state`."""

    def _record_follower_fetch(
        self, state: ReplicaState, replica_id: int, fetch_offset: int, log_end_offset: int
    ) -> None:
        now_ms = clock.now_ms()
        state.fetch_counts[replica_id] = state.fetch_counts.get(replica_id, 0) + 1
        self._wake_fetch_watchers(state)
        expanded = isr.follower_fetched(
            state, replica_id, fetch_offset, log_end_offset, now_ms,
            state.epochs.epoch_start_offset(state.leader_epoch),
        )
        if expanded is not None:
            self._write_isr(state, expanded)
        self._advance_high_watermark(state)

    def _wake_fetch_watchers(self, state: ReplicaState) -> None:
        for watcher in state.fetch_watchers:
            if not watcher.done():
                watcher.set_result(None)
        state.fetch_watchers.clear()

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
                async with asyncio.timeout(remaining):
                    await watcher
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
        state.high_watermark = isr.follower_high_watermark(
            state.high_watermark, leader_high_watermark, state.log.log_end_offset
        )

    def _advance_high_watermark(self, state: ReplicaState) -> None:
        new = isr.next_high_watermark(state, self.node_id, state.log.log_end_offset)
        if new is None:
            return
        state.high_watermark = new
        if state.waiters:
            outcome = self._acks_outcome(state)
            for entry in [w for w in state.waiters if w[0] <= new]:
                state.waiters.remove(entry)
                if not entry[1].done():
                    entry[1].set_result(outcome)
        self.broker.append_waiters.notify(state.tp)  # consumers parked below the old mark
