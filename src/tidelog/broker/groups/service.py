"""The group coordinator on the event loop: shards, `__consumer_offsets`, timers, parked requests.

Wires the pure `GroupCoordinatorShard`s (one per `__consumer_offsets` partition) to storage and
time. Per operation: snapshot the groups it touches, run it (pure), append its records as one
batch, replay them, arm/cancel its timers with `loop.call_later`, and answer after the append
(after fsync when durability is `sync`; after the high watermark in a cluster). Parked
JoinGroup/SyncGroup requests wait on futures keyed by waiter id, completed by a later
operation or timer. If the append, fsync or high-watermark wait fails, the shard reverts
(`group_writes.py`) and the request and every parked request it would have answered get the
error.

Single node: started at broker start (`service(broker)`): creates `__consumer_offsets`
(compacted, offsets.topic.num.partitions partitions) if missing and rebuilds every shard by
replaying it (`group_log.py`). Storage calls are short page-cache writes.

Cluster mode (`broker.replication` set; `group_cluster.py`): the topic is replicated and
created through ZooKeeper; a shard exists only for the partitions this broker leads. Becoming
leader of one (`on_partition_role`, a role listener of Replication) replays it on a worker
thread (requests meanwhile: COORDINATOR_LOAD_IN_PROGRESS); losing it drops the shard, its
timers and its parked requests (NOT_COORDINATOR). Appends carry the leader epoch.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar, cast

from tidelog.broker import clock
from tidelog.broker.groups import transactional
from tidelog.broker.groups.loading import group_config, group_stats, read_partition
from tidelog.broker.groups.writes import UncommittedWrites, Write, complete, fail, record_groups
from tidelog.broker.internal_topics import OFFSETS_TOPIC
from tidelog.broker.metrics.registry import GroupStats
from tidelog.coordinator.coordinator import GroupCoordinatorShard, ShardSnapshot, partition_for
from tidelog.coordinator.loader import encode_batch
from tidelog.coordinator.messages import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    Result,
    TimerKey,
    TimerRequest,
    TopicsImage,
)
from tidelog.coordinator.txn_offsets import TransactionEnd
from tidelog.errors import ErrorCode, KafkaError
from tidelog.records.batch import RecordBatch
from tidelog.types import TopicPartition

if TYPE_CHECKING:
    from tidelog.broker.replication.replica_manager import Replication
    from tidelog.broker.state import Broker

log = logging.getLogger("tidelog.broker.groups")

SHUTDOWN_SIGNAL = TopicPartition("__group_coordinator_shutdown", -1)  # never appended to
SHUTDOWN_WAIT_MS = 10 * 365 * 24 * 3600 * 1000
T = TypeVar("T")


class GroupService:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.config = group_config(broker)
        self.shards: dict[int, GroupCoordinatorShard] = {}
        self._timers: dict[tuple[int, TimerKey], asyncio.TimerHandle] = {}
        self._timer_deadlines: dict[tuple[int, TimerKey], int] = {}  # of the armed ones
        self._waiters: dict[int, asyncio.Future[Any]] = {}
        self._waiter_ids = itertools.count(1)
        self._retention_handle: asyncio.TimerHandle | None = None
        # None on a single node; Broker types it by its Protocol to stay below replication.
        self.replication = cast("Replication | None", broker.replication)
        self._loading: dict[int, object] = {}  # partition -> token of the load in flight
        self._waiter_partitions: dict[int, int] = {}
        self._uncommitted = UncommittedWrites()
        # Shutdown signal: the broker wakes every append waiter when it starts closing; parked
        # JoinGroup/SyncGroup requests then answer NOT_COORDINATOR instead of holding the drain.
        self._closing = asyncio.ensure_future(
            broker.append_waiters.wait([SHUTDOWN_SIGNAL], SHUTDOWN_WAIT_MS)
        )
        self._schedule_retention()
        if self.replication is not None:
            from tidelog.broker.groups.cluster import OffsetsTopicCreator, offsets_partition_count

            self.creator = OffsetsTopicCreator(broker, self.replication)
            self.partitions = offsets_partition_count(broker, self.replication)
            self.replication.role_listeners.append(self._on_role)
            for tp, state in self.replication.partitions.items():
                if tp.topic == OFFSETS_TOPIC and state.leader == broker.config.node_id:
                    self.on_partition_role(tp.partition, is_leader=True)
            return
        self.partitions = self._ensure_topic()
        now_ms = clock.now_ms()
        for partition in range(self.partitions):
            shard = GroupCoordinatorShard(self.config)
            timers = shard.load(read_partition(self.broker, partition), now_ms)
            self.shards[partition] = shard
            for timer in timers:
                self._arm(partition, timer)
        log.info(
            "group coordinator loaded %d groups", sum(len(s.groups) for s in self.shards.values())
        )

    def _ensure_topic(self) -> int:
        info = self.broker.topics.get(OFFSETS_TOPIC)
        if info is None:
            configs = {"cleanup.policy": "compact", "segment.bytes": str(100 * 1024 * 1024)}
            count = max(1, self.broker.config.offsets_topic_num_partitions)
            info = self.broker.create_topic(OFFSETS_TOPIC, count, configs, internal=True)
        return info.partitions

    # ------------------------------------------------------------ cluster: load and unload

    def _on_role(self, tp: TopicPartition, is_leader: bool) -> None:
        if tp.topic == OFFSETS_TOPIC:
            self.on_partition_role(tp.partition, is_leader)

    def on_partition_role(self, partition: int, is_leader: bool) -> None:
        """Cluster mode: this broker became leader of an offsets partition, or stopped being
        it. A new leader epoch while already leading keeps the loaded state (it is the log's)."""
        if self.replication is None:
            return
        from tidelog.broker.groups.cluster import offsets_partition_count

        self.partitions = offsets_partition_count(self.broker, self.replication)
        if not is_leader:
            self._unload(partition)
            return
        if partition in self.shards or partition in self._loading:
            return
        token = object()
        self._loading[partition] = token
        task = asyncio.ensure_future(self._load(partition, token))
        task.add_done_callback(_log_failure)

    async def _load(self, partition: int, token: object) -> None:
        await asyncio.sleep(0)  # the stopped replica fetcher finishes first
        try:
            records = await asyncio.to_thread(read_partition, self.broker, partition)
        except (OSError, KafkaError, ValueError) as error:
            log.error("loading groups of partition %d failed: %s", partition, error)
            if self._loading.get(partition) is token:
                del self._loading[partition]
            return
        if self._loading.get(partition) is not token:
            return  # leadership moved while reading
        del self._loading[partition]
        shard = GroupCoordinatorShard(self.config)
        timers = shard.load(records, clock.now_ms())
        self.shards[partition] = shard
        for timer in timers:
            self._arm(partition, timer)
        log.info("coordinator for partition %d: loaded %d groups from %d records",
                 partition, len(shard.groups), len(records))

    def _unload(self, partition: int) -> None:
        self._loading.pop(partition, None)
        shard = self.shards.pop(partition, None)
        self._uncommitted.drop(partition)  # the state goes with the shard
        for key in [key for key in self._timers if key[0] == partition]:
            self._timers.pop(key).cancel()
            self._timer_deadlines.pop(key, None)
        for waiter_id, waiting_on in list(self._waiter_partitions.items()):
            future = self._waiters.get(waiter_id)
            if waiting_on == partition and future is not None and not future.done():
                future.set_exception(
                    KafkaError(ErrorCode.NOT_COORDINATOR, f"partition {partition} moved")
                )
        if shard is not None:
            log.info("coordinator for partition %d moved: unloaded %d groups",
                     partition, len(shard.groups))

    # ------------------------------------------------------------ routing

    def partition_of(self, group_id: str) -> int:
        if self.replication is not None:
            from tidelog.broker.groups.cluster import offsets_partition_count

            self.partitions = offsets_partition_count(self.broker, self.replication)
        return partition_for(group_id, self.partitions)

    def shard_of(self, group_id: str) -> GroupCoordinatorShard:
        return self._shard(self.partition_of(group_id))

    def _shard(self, partition: int) -> GroupCoordinatorShard:
        shard = self.shards.get(partition)
        if shard is None:
            if partition in self._loading:
                raise KafkaError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, f"loading {partition}")
            raise KafkaError(ErrorCode.NOT_COORDINATOR, f"not leading partition {partition}")
        return shard

    def topics_image(self) -> TopicsImage:
        return {
            info.name: (info.topic_id, info.partitions)
            for info in self.broker.topics.all()
            if not info.internal
        }

    # ------------------------------------------------------------ running operations

    async def run(
        self, group_id: str, operation: Callable[[GroupCoordinatorShard, int], Result[T]]
    ) -> T:
        """Run one operation for `group_id`; returns its response (maybe after parking)."""
        partition = self.partition_of(group_id)
        shard = self._shard(partition)
        waiter_id = next(self._waiter_ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiters[waiter_id] = future
        self._waiter_partitions[waiter_id] = partition
        try:
            undo = shard.snapshot([group_id])
            result = operation(shard, waiter_id)
            log.debug(
                "group %s: %d records, answer %s", group_id, len(result.records), result.response
            )
            durable = self._apply(partition, shard, undo, result)
            if durable is not None:
                await durable
            if result.response is not None:
                return result.response
            if not self.broker.closing:
                await asyncio.wait({future, self._closing}, return_when=asyncio.FIRST_COMPLETED)
            if not future.done():
                raise KafkaError(ErrorCode.NOT_COORDINATOR, "the broker is shutting down")
            response: T = future.result()
            return response
        finally:
            self._waiters.pop(waiter_id, None)
            self._waiter_partitions.pop(waiter_id, None)

    def _apply(
        self, partition: int, shard: GroupCoordinatorShard, undo: ShardSnapshot,
        result: Result[Any],
    ) -> Coroutine[Any, Any, None] | None:
        """Append and replay the records and arm the timers, now. None when nothing is left
        to wait for (the parked requests it completes are answered); else the coroutine that
        waits for durability and then answers them, or reverts and fails them. A failed
        append reverts to `undo` and fails them at once (KafkaError raised)."""
        durable: Awaitable[None] | None = None
        write = Write(shard, undo)
        try:
            if result.records:
                durable = self._append(partition, shard, result, write)
        except KafkaError as error:
            shard.restore(write.undo)  # nothing was appended: only this operation is undone
            fail(self._waiters, result.completions, error)
            raise
        for timer in result.timers:
            write.timers_before.setdefault(
                timer.key, self._timer_deadlines.get((partition, timer.key)))
            self._arm(partition, timer)
        if durable is None:
            complete(self._waiters, result.completions)
            return None
        self._uncommitted.add(partition, write)
        return self._finish(partition, write, durable, result.completions)

    def _append(
        self, partition: int, shard: GroupCoordinatorShard, result: Result[Any], write: Write
    ) -> Awaitable[None] | None:
        """Append the records as one batch and replay them; the durability wait, if any."""
        tp = TopicPartition(OFFSETS_TOPIC, partition)
        leader_epoch = 0
        if self.replication is not None:
            from tidelog.broker.groups.cluster import append_leader_epoch

            leader_epoch = append_leader_epoch(self.replication, tp)
        partition_log = self.broker.partition_log(OFFSETS_TOPIC, partition)
        buffer = encode_batch(result.records, clock.now_ms())
        try:
            appended = partition_log.append(
                [RecordBatch(memoryview(buffer))], now_ms=clock.now_ms(),
                leader_epoch=leader_epoch,
            )
        except OSError as error:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, str(error)) from None
        write.cover(result.records)
        for record in result.records:
            shard.replay(record)
        self.broker.append_waiters.notify(tp)
        durable: Awaitable[None] | None = None
        if partition_log.config.durability == "sync":
            durable = self.broker.wait_durable(partition_log, appended.last_offset + 1)
        if self.replication is not None:
            from tidelog.broker.groups.cluster import replicated

            self.replication.after_leader_append(tp)
            durable = replicated(self.replication, tp, appended.last_offset + 1, durable)
        return durable

    async def _finish(
        self, partition: int, write: Write, durable: Awaitable[None],
        completions: list[tuple[int, object]],
    ) -> None:
        try:
            await durable
            if write.doomed is not None:
                raise KafkaError(write.doomed.code, f"reverted: {write.doomed.message}")
        except KafkaError as error:
            for undone in self._uncommitted.revert(partition, write, error, self.shards.get):
                for key, deadline in undone.timers_before.items():  # newest write first
                    self._arm(partition, TimerRequest(key, deadline))
            fail(self._waiters, completions, error)
            raise
        finally:
            self._uncommitted.settle(partition, write)
        complete(self._waiters, completions)

    def _apply_detached(
        self, partition: int, shard: GroupCoordinatorShard, undo: ShardSnapshot,
        result: Result[Any],
    ) -> None:
        """For timer-driven results: nobody awaits them, parked requests do (same path as
        `run`: answered when durable, reverted and failed otherwise)."""
        finish = self._apply(partition, shard, undo, result)
        if finish is not None:
            task = asyncio.ensure_future(finish)
            task.add_done_callback(_log_failure)

    # ------------------------------------------------------------ timers

    def _arm(self, partition: int, timer: TimerRequest) -> None:
        handle_key = (partition, timer.key)
        old = self._timers.pop(handle_key, None)
        self._timer_deadlines.pop(handle_key, None)
        if old is not None:
            old.cancel()
        if timer.deadline_ms is None:
            return
        self._timer_deadlines[handle_key] = timer.deadline_ms
        delay_s = max(0, timer.deadline_ms - clock.now_ms()) / 1000
        loop = asyncio.get_running_loop()
        self._timers[handle_key] = loop.call_later(delay_s, self._fire, partition, timer.key)

    def _fire(self, partition: int, key: TimerKey) -> None:
        self._timers.pop((partition, key), None)
        self._timer_deadlines.pop((partition, key), None)
        if partition not in self.shards:
            return  # unloaded meanwhile
        try:
            shard = self.shards[partition]
            undo = shard.snapshot([key[1]])
            result = shard.on_timer(key, self.topics_image(), clock.now_ms())
            log.debug(
                "group timer %s: %d records, %d answers",
                key,
                len(result.records),
                len(result.completions),
            )
            self._apply_detached(partition, shard, undo, result)
        except (KafkaError, OSError, ValueError):
            log.exception("group timer %s failed", key)

    def _schedule_retention(self) -> None:
        loop = asyncio.get_running_loop()
        interval_s = self.config_interval_ms() / 1000
        self._retention_handle = loop.call_later(interval_s, self._expire_offsets)

    def config_interval_ms(self) -> int:
        return max(1000, self.broker.config.offsets_retention_check_interval_ms)

    def _expire_offsets(self) -> None:
        now_ms = clock.now_ms()
        for partition, shard in list(self.shards.items()):
            records = shard.expire_offsets(now_ms)
            if records:
                log.info("expiring %d offsets/groups in partition %d", len(records), partition)
                try:
                    undo = shard.snapshot(record_groups(records))
                    self._apply_detached(partition, shard, undo, Result(records=records))
                except KafkaError as error:
                    log.warning("offset expiry in partition %d deferred: %s", partition, error)
        self._schedule_retention()

    # ------------------------------------------------------------ transactions

    async def txn_offset_commit(
        self, request: OffsetCommitRequest, producer_id: int, producer_epoch: int
    ) -> OffsetCommitResponse:
        """TxnOffsetCommit (`transactional.py`): pending until the transaction's marker."""
        partition = self.partition_of(request.group_id)
        return await transactional.txn_offset_commit(
            self.broker, self._shard(partition), partition, request, producer_id, producer_epoch,
            self.replication,
        )

    def on_transaction_marker(self, partition: int, producer_id: int, committed: bool) -> None:
        """A COMMIT/ABORT marker reached `__consumer_offsets` partition `partition`."""
        shard = self.shards.get(partition)
        if shard is not None:
            shard.replay(TransactionEnd(producer_id, committed))

    def metrics_snapshot(self) -> GroupStats:
        """Groups per state and committed offsets, for /metrics (read at scrape time)."""
        return group_stats(self.shards.values())

    def close(self) -> None:
        self._closing.cancel()
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        self._timer_deadlines.clear()
        if self._retention_handle is not None:
            self._retention_handle.cancel()
        for future in self._waiters.values():
            if not future.done():
                future.cancel()


def _log_failure(task: asyncio.Future[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("group append failed", exc_info=task.exception())


def service(broker: Broker) -> GroupService:
    """The broker's group service, started on first use."""
    groups = broker.groups
    if not isinstance(groups, GroupService):
        groups = broker.groups = GroupService(broker)
    return groups
