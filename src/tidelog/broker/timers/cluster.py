"""Delayed delivery in cluster mode: a replicated `__tidelog_timer`, a deliverer per timer
partition on its leader, deliveries that are never lost nor repeated across failovers.
Design and the exactly-once argument: `docs/delivery.md` (Cluster mode).

- The topic is created through ZooKeeper (`InternalTopicCreator`) on the first delayed
  record: tidelog.timer.log.num.partitions partitions, replication factor
  min(tidelog.timer.log.replication.factor, live brokers), min.insync.replicas
  tidelog.timer.log.min.isr (capped at the factor).
- Produce (`divert`, on the target partition's leader): the request's batch is split as on a
  single node (`divert.split_batches`); the due-later records and cancels go, as one batch,
  to the timer partition of the target *topic* (`timer_partition`: a topic's cancels must meet
  its records) through a Produce with acks=all to that partition's leader, which may be this
  broker (`peer_produce.py`); the client's answer waits for it (committed there).
- Delivery (`TimerPartition`, one task per timer partition this broker leads, started and
  stopped by leadership): waits until the high watermark covers the log end it took over,
  replays the log (`loading.load_timer_log`), then every tick reads the newly committed
  SCHEDULE and CANCEL records into its wheel and delivers what is due. Per target partition,
  one batch at a time: an INTENT record (the timer ids, the producer epoch and first sequence
  of the batch) is appended and committed first; then the batch goes to the target's leader
  as the idempotent producer `timer_producer_id(p)` with acks=all; then a DONE record. A new
  leader sends an INTENT without DONE again, with the same producer id, epoch and sequence:
  the target's producer state (replicated with the log, as Kafka's) answers a duplicate if the
  first one landed, so nothing is written twice, and nothing is lost since DONE follows the
  target's acknowledgement only.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tidelog.broker import clock
from tidelog.broker.replication.internal_topic import InternalTopicCreator, partition_count
from tidelog.broker.timers.divert import meta_record, split_batches
from tidelog.broker.timers.loading import load_timer_log
from tidelog.broker.timers.metrics import TimerCollector, TopicTimers
from tidelog.broker.timers.peer_produce import PeerProducer
from tidelog.broker.timers.service import (
    CLEANUP_INTERVAL_MS,
    DELIVERY_RECORDS_PER_BATCH,
    DONE_IDS_PER_RECORD,
    LAG_SAMPLES,
    MAX_LIVE_CANCELS,
    TIMER_TOPIC_CONFIGS,
    Diverted,
    estimated_size,
    read_timer_records,
)
from tidelog.errors import ErrorCode, InvalidRecordError, KafkaError
from tidelog.records.batch import RecordBatch
from tidelog.records.builder import NewRecord, build_batch
from tidelog.records.record import Record, iter_records
from tidelog.storage.log_scan import iter_batches_from
from tidelog.storage.timer_records import (
    DELIVERED_ID_HEADER,
    ENQUEUE_HEADER,
    TIMER_TOPIC,
    UNIQ_KEY_HEADER,
    Cancel,
    Done,
    Intent,
    Schedule,
    TimerRecordError,
    header_value,
    split_meta,
    timer_producer_id,
)
from tidelog.storage.timer_wheel import TimingWheel
from tidelog.types import TopicPartition

if TYPE_CHECKING:
    from tidelog.broker.replication.replica_manager import Replication
    from tidelog.broker.state import Broker
    from tidelog.records.record import Header
    from tidelog.storage.log import PartitionLog

log = logging.getLogger("tidelog.broker.timers.cluster")
TICK_S = 0.1
PRODUCE_TIMEOUT_MS = 30_000  # the timer or target leader's wait for its ISR
RETRY_S = 0.2  # a failed target append is tried again this much later (same INTENT)
TAKEOVER_WAIT_MS = 5_000  # per wait for the high watermark to cover the log taken over
BATCHER_IN_FLIGHT = 4  # concurrent timer batches per timer partition (each one commit wait)
BATCHER_MAX_RECORDS = 16_384  # records of one coalesced timer batch
BATCHER_MAX_BYTES = 16 << 20  # and about its bytes (the timer log takes 64 MiB batches)
# A target's answers that no retry can change: the batch is dropped (logged), as on a single
# node when a topic's limits changed since the records were accepted.
_PERMANENT = frozenset({
    ErrorCode.INVALID_RECORD, ErrorCode.CORRUPT_MESSAGE, ErrorCode.MESSAGE_TOO_LARGE,
    ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_TOPIC_EXCEPTION,
})
# The target's producer state lost this producer's history (or never had it): start a new
# epoch at sequence 0 (a new INTENT) rather than retry forever.
_NEW_EPOCH = frozenset({
    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, ErrorCode.UNKNOWN_PRODUCER_ID,
    ErrorCode.INVALID_PRODUCER_EPOCH,
})


def timer_partition(topic: str, partitions: int) -> int:
    """The `__tidelog_timer` partition of a target topic: every partition of a topic shares
    one, so a cancel meets the records it names (crc32: the same on every broker)."""
    return zlib.crc32(topic.encode("utf-8")) % max(1, partitions)


class TimerTopicCreator(InternalTopicCreator):
    def __init__(self, broker: Broker, replication: Replication) -> None:
        self.broker = broker
        super().__init__(replication, TIMER_TOPIC, self._layout)

    def _layout(self, live_brokers: int) -> tuple[int, int, dict[str, str]]:
        config = self.broker.config
        factor = max(1, min(config.tidelog_timer_log_replication_factor, live_brokers))
        configs = dict(TIMER_TOPIC_CONFIGS)
        configs["min.insync.replicas"] = str(max(1, min(config.tidelog_timer_log_min_isr,
                                                        factor)))
        return max(1, config.tidelog_timer_log_num_partitions), factor, configs


class ClusterTimers:
    """The broker's delayed delivery in cluster mode (`broker.timers`)."""

    def __init__(self, broker: Broker, replication: Replication) -> None:
        self.broker = broker
        self.replication = replication
        self.creator = TimerTopicCreator(broker, replication)
        self.producer = PeerProducer(replication)
        self.partitions: dict[int, TimerPartition] = {}
        self._batchers: dict[int, TimerBatcher] = {}
        self.delivered_total = 0
        self.cancelled_total = 0
        self.lag_ms: deque[int] = deque(maxlen=LAG_SAMPLES)
        replication.role_listeners.append(self._on_role)
        for tp, state in list(replication.partitions.items()):
            if tp.topic == TIMER_TOPIC and state.leader == broker.config.node_id:
                self._on_role(tp, True)
        registry = getattr(broker.metrics, "registry", None)
        if registry is not None:
            registry.register(TimerCollector(self))

    # ------------------------------------------------------------------ leadership

    def _on_role(self, tp: TopicPartition, is_leader: bool) -> None:
        if tp.topic != TIMER_TOPIC:
            return
        current = self.partitions.get(tp.partition)
        state = self.replication.partitions.get(tp)
        if is_leader and state is not None:
            if current is not None and current.epoch == state.leader_epoch:
                return
            if current is not None:
                current.stop()
            self.partitions[tp.partition] = TimerPartition(self, tp, state.leader_epoch)
        elif current is not None:
            current.stop()
            del self.partitions[tp.partition]

    # ------------------------------------------------------------------ produce

    def divert(
        self, partition_log: PartitionLog, tp: TopicPartition, batches: list[RecordBatch],
        now_ms: int,
    ) -> Diverted:
        info = self.broker.topics.get(tp.topic)
        topic_id = info.topic_id.bytes if info is not None else bytes(16)
        parts = split_batches(partition_log, tp, topic_id, batches, now_ms)
        if not parts.timer_records:
            return Diverted(parts.kept, None, -1)
        if parts.sequenced:
            raise InvalidRecordError(
                "idempotent producers cannot delay records on a cluster yet (their sequence "
                "numbers would have to survive a failover of the target partition): produce "
                "delayed records with enable.idempotence=false")
        view = self.replication.view
        if view is None or TIMER_TOPIC not in view.topics:
            self.creator.ensure()
            raise KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS,
                             f"{TIMER_TOPIC} is being created; retry")
        count = partition_count(self.replication, TIMER_TOPIC,
                                self.broker.config.tidelog_timer_log_num_partitions)
        partition = timer_partition(tp.topic, count)
        versioned = view.states.get(TopicPartition(TIMER_TOPIC, partition))
        if versioned is None or versioned.state.leader not in view.brokers:
            raise KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS,
                             f"{TIMER_TOPIC}-{partition} has no leader; retry")
        batcher = self._batchers.get(partition)
        if batcher is None:
            batcher = self._batchers[partition] = TimerBatcher(self, partition)
        return Diverted(parts.kept, None, -1, commit=batcher.commit(parts.timer_records))

    # ------------------------------------------------------------------ listings

    def listing(self) -> list[TopicTimers]:
        rows: list[TopicTimers] = []
        for deliverer in self.partitions.values():
            rows.extend(deliverer.listing())
        return sorted(rows, key=lambda row: (row.topic, row.partition))

    def lag_quantiles(self) -> tuple[float, float] | None:
        if not self.lag_ms:
            return None
        ordered = sorted(self.lag_ms)
        last = len(ordered) - 1
        return float(ordered[last * 50 // 100]), float(ordered[last * 99 // 100])

    def close(self) -> None:
        for deliverer in self.partitions.values():
            deliverer.stop()
        self.partitions.clear()
        self.producer.close()


class TimerBatcher:
    """Timer records of concurrent produces for one timer partition, sent together (group
    commit): each send takes everything queued into one batch (one Produce, one commit
    wait), with at most BATCHER_IN_FLIGHT sends at once. Records are queued only once the
    produce handler awaits them (a partition whose append failed queues nothing)."""

    def __init__(self, owner: ClusterTimers, partition: int) -> None:
        self.owner = owner
        self.partition = partition
        # (records, their estimated bytes, the produce's future)
        self._queue: list[tuple[list[NewRecord], int, asyncio.Future[KafkaError | None]]] = []
        self._in_flight = 0
        self._tasks: set[asyncio.Task[None]] = set()

    async def commit(self, records: list[NewRecord]) -> KafkaError | None:
        future: asyncio.Future[KafkaError | None] = asyncio.get_running_loop().create_future()
        self._queue.append((records, sum(estimated_size(r) for r in records), future))
        self._kick()
        return await future

    def _kick(self) -> None:
        while self._queue and self._in_flight < BATCHER_IN_FLIGHT:
            taken = [self._queue.pop(0)]
            count, size = len(taken[0][0]), taken[0][1]
            while self._queue and (count + len(self._queue[0][0]) <= BATCHER_MAX_RECORDS
                                   and size + self._queue[0][1] <= BATCHER_MAX_BYTES):
                item = self._queue.pop(0)
                taken.append(item)
                count, size = count + len(item[0]), size + item[1]
            self._in_flight += 1
            task = asyncio.ensure_future(self._send(taken))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _send(
        self, taken: list[tuple[list[NewRecord], int, asyncio.Future[KafkaError | None]]],
    ) -> None:
        try:
            outcome = await self._produce([r for records, _, _ in taken for r in records])
        except Exception as error:  # answered, whatever happened: never a hung produce
            log.exception("timer batch for partition %d", self.partition)
            outcome = KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, str(error))
        finally:
            self._in_flight -= 1
        for _, _, future in taken:
            if not future.done():
                future.set_result(outcome)
        self._kick()

    async def _produce(self, records: list[NewRecord]) -> KafkaError | None:
        view = self.owner.replication.view
        versioned = (view.states.get(TopicPartition(TIMER_TOPIC, self.partition))
                     if view is not None else None)
        if view is None or versioned is None or versioned.state.leader not in view.brokers:
            return KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS,
                              f"{TIMER_TOPIC}-{self.partition} has no leader; retry")
        batch = build_batch(records, now_ms=clock.now_ms())
        produced = await self.owner.producer.produce(
            versioned.state.leader, TIMER_TOPIC, self.partition, batch, PRODUCE_TIMEOUT_MS)
        if produced.error == ErrorCode.NONE:
            return None
        code = produced.error
        if code in (ErrorCode.NETWORK_EXCEPTION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
            code = ErrorCode.NOT_ENOUGH_REPLICAS  # retriable for the client's own partition
        return KafkaError(code, f"timer log {TIMER_TOPIC}-{self.partition}: "
                                f"{produced.message or produced.error.name}")


@dataclass(slots=True)
class _Target:
    tp: TopicPartition
    backlog: list[tuple[int, int]] = field(default_factory=list)  # (due ms, timer id)
    epoch: int = 0  # producer epoch and next sequence of the next batch
    sequence: int = 0
    in_doubt: Intent | None = None  # INTENT written, target not yet acknowledged
    intent_end: int = 0  # the timer log must be committed up to here before it is sent
    intent_offset: int = 0  # the open INTENT's own offset (0: unknown, loaded: no cut)
    busy: bool = False
    retry_at: float = 0.0


class TimerPartition:
    """The deliverer of one `__tidelog_timer` partition, on its leader at one epoch."""

    def __init__(self, owner: ClusterTimers, tp: TopicPartition, epoch: int) -> None:
        self.owner = owner
        self.broker = owner.broker
        self.replication = owner.replication
        self.tp = tp
        self.epoch = epoch
        self.producer_id = timer_producer_id(tp.partition)
        self.log = self.broker.partition_log(TIMER_TOPIC, tp.partition)
        self.wheel = TimingWheel(clock.now_ms())
        self.targets: list[_Target] = []
        self.target_index: dict[TopicPartition, int] = {}
        self.cancels: dict[tuple[str, bytes], tuple[int, int]] = {}
        self.pending: Counter[int] = Counter()
        self.scanned = 0
        self.loaded = False
        self._stopped = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._main = asyncio.ensure_future(self._run())

    def stop(self) -> None:
        self._stopped = True
        self._main.cancel()
        for task in list(self._tasks):
            task.cancel()

    def _leading(self) -> bool:
        state = self.replication.partitions.get(self.tp)
        return (not self._stopped and state is not None
                and state.leader == self.broker.config.node_id
                and state.leader_epoch == self.epoch)

    def _target(self, tp: TopicPartition) -> int:
        tag = self.target_index.get(tp)
        if tag is None:
            tag = self.target_index[tp] = len(self.targets)
            self.targets.append(_Target(tp))
        return tag

    # ------------------------------------------------------------------ take over

    async def _run(self) -> None:
        try:
            await self._take_over()
            next_cleanup_ms = clock.now_ms() + CLEANUP_INTERVAL_MS
            while self._leading():
                try:
                    self._tick()
                    if clock.now_ms() >= next_cleanup_ms:
                        next_cleanup_ms = clock.now_ms() + CLEANUP_INTERVAL_MS
                        await self._cleanup()
                except (OSError, KafkaError):
                    log.exception("%s: delivery tick failed; retrying", self.tp)
                await asyncio.sleep(TICK_S)
        except asyncio.CancelledError:
            pass

    async def _take_over(self) -> None:
        """Everything the previous leaders wrote is committed before it is read: a record
        above the high watermark could still be truncated, or be a DONE the replay must see."""
        end = self.log.log_end_offset
        while True:
            if not self._leading():
                raise asyncio.CancelledError
            code = await self.replication.wait_for_high_watermark(self.tp, end,
                                                                  TAKEOVER_WAIT_MS)
            if code == ErrorCode.NONE:
                break
            await asyncio.sleep(RETRY_S)
        now_ms = clock.now_ms()
        loaded = await asyncio.to_thread(load_timer_log, self.log, now_ms, end)
        if not self._leading():
            raise asyncio.CancelledError
        self.cancels = loaded.cancels
        for due_ms, timer_id, tag in zip(loaded.due_ms, loaded.timer_ids, loaded.tags,
                                          strict=True):
            own = self._target(loaded.targets[tag])
            self.wheel.add(due_ms, timer_id, own)
            self.pending[own] += 1
        for tp, (epoch, sequence) in loaded.next_sequence.items():
            target = self.targets[self._target(tp)]
            target.epoch, target.sequence = epoch, sequence
        for tp, intent in loaded.in_doubt.items():
            tag = self._target(tp)
            self.targets[tag].in_doubt = intent
            self.pending[tag] += len(intent.timer_ids)
        self.scanned = end
        self.loaded = True
        log.info("%s: deliverer at epoch %d: %d pending, %d deliveries in doubt",
                 self.tp, self.epoch, len(self.wheel), len(loaded.in_doubt))

    # ------------------------------------------------------------------ every tick

    def _tick(self) -> None:
        state = self.replication.partitions.get(self.tp)
        if state is not None:
            self._read_new(state.high_watermark)
        now_ms = clock.now_ms()
        expired = self.wheel.advance(now_ms)
        for due_ms, timer_id, tag in expired:
            self.targets[tag].backlog.append((due_ms, timer_id))
        now = asyncio.get_running_loop().time()
        for tag, target in enumerate(self.targets):
            if target.busy or now < target.retry_at:
                continue
            if target.in_doubt is None and not target.backlog:
                continue
            target.busy = True
            task = asyncio.ensure_future(self._deliver(tag))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _read_new(self, high_watermark: int) -> None:
        """SCHEDULE and CANCEL records committed since the last tick (INTENT and DONE records
        past the take-over are this deliverer's own)."""
        if high_watermark <= self.scanned:
            return
        start, self.scanned = self.scanned, high_watermark
        for batch in iter_batches_from(self.log, start):
            if batch.base_offset >= high_watermark:
                break
            if batch.is_control or batch.last_offset < start:
                continue
            for record in iter_records(batch):
                if not start <= record.offset < high_watermark:
                    continue
                try:
                    meta, _ = split_meta(record.headers)
                except TimerRecordError as error:
                    log.error("%s offset %d skipped: %s", self.tp, record.offset, error)
                    continue
                if isinstance(meta, Schedule):
                    tag = self._target(TopicPartition(meta.topic, meta.partition))
                    self.wheel.add(meta.due_ms, record.offset, tag)
                    self.pending[tag] += 1
                elif isinstance(meta, Cancel) and len(self.cancels) < MAX_LIVE_CANCELS:
                    self.cancels[(meta.topic, meta.uniq_key)] = (meta.expires_ms, record.offset)

    async def _cleanup(self) -> None:
        """Cut the log below what is still needed: pending SCHEDULEs, live CANCELs, and each
        target's producer epoch and sequence, which an INTENT without ids carries past the cut
        (a new leader must go on with them: a batch that reused a sequence number would be
        taken for a duplicate), and every open INTENT with its records. The cut stays below
        the high watermark, which followers follow (their log start offset)."""
        now_ms = clock.now_ms()
        for key in [k for k, (expires_ms, _) in self.cancels.items() if expires_ms <= now_ms]:
            del self.cancels[key]
        low = self.scanned
        pending = self.wheel.min_timer_id()
        candidates = [pending] if pending is not None else []
        candidates += [offset for _, offset in self.cancels.values()]
        candidates += [timer_id for t in self.targets for _, timer_id in t.backlog]
        for t in self.targets:
            if t.in_doubt is not None:
                candidates += [t.intent_offset, *t.in_doubt.timer_ids]
        low = min([low, *candidates])
        if low <= self.log.log_start_offset:
            return
        # An open INTENT stays its target's last one: no checkpoint may supersede it.
        used = [t for t in self.targets if (t.epoch or t.sequence) and t.in_doubt is None]
        if used:
            start = self.log.log_end_offset
            end = self._append([
                meta_record(Intent(t.epoch, t.sequence, t.tp.topic, t.tp.partition, ()))
                for t in used
            ])
            code = await self.replication.wait_for_high_watermark(self.tp, end,
                                                                  PRODUCE_TIMEOUT_MS)
            if code != ErrorCode.NONE or not self._leading():
                return
            low = min(low, start)
        self.log.delete_records_before(low)

    # ------------------------------------------------------------------ one target

    async def _deliver(self, tag: int) -> None:
        target = self.targets[tag]
        try:
            # Round after round while records are due (the tick adds them to the backlog
            # meanwhile): a round is two commits, the next one need not wait for a tick.
            while self._leading():
                if target.in_doubt is None:
                    if not target.backlog:
                        break
                    await self._new_intent(tag)
                    continue
                await self._send(tag, target.in_doubt)
                if target.in_doubt is not None:
                    break  # no longer leading
        except (OSError, KafkaError) as error:
            log.warning("%s: delivery to %s: %s; retrying", self.tp, target.tp, error)
            target.retry_at = asyncio.get_running_loop().time() + RETRY_S
        finally:
            target.busy = False

    async def _new_intent(self, tag: int) -> None:
        """Take up to one batch of the target's due records: cancelled or orphaned ones are
        marked DONE at once; the rest become an INTENT, committed before anything is sent."""
        target = self.targets[tag]
        self.replication.check_produce(self.tp, -1)  # leading, ISR big enough: before taking
        target.backlog.sort()
        taken = target.backlog[:DELIVERY_RECORDS_PER_BATCH]
        bodies = read_timer_records(self.log, sorted(timer_id for _, timer_id in taken))
        ids: list[int] = []
        lags: list[int] = []
        skipped: list[int] = []
        size = 0
        limit = self._max_batch_bytes(target.tp)
        now_ms = clock.now_ms()
        for due_ms, timer_id in taken:
            delivered = self._delivered_record(target.tp, timer_id, bodies.get(timer_id),
                                               now_ms)
            if delivered is None:
                skipped.append(timer_id)
                continue
            size += estimated_size(delivered)
            if ids and size > limit:
                break  # the rest waits for the next batch
            ids.append(timer_id)
            lags.append(now_ms - due_ms)
        handled = set(ids) | set(skipped)
        if skipped:
            self._append([meta_record(Done(-1, target.tp.topic, target.tp.partition,
                                           tuple(skipped)))])
            self.pending[tag] -= len(skipped)
            target.backlog = [entry for entry in target.backlog if entry[1] not in skipped]
        if not ids:
            return
        intent = Intent(target.epoch, target.sequence, target.tp.topic, target.tp.partition,
                        tuple(ids))
        # Raises before anything changes here: the records stay in the backlog.
        target.intent_end = self._append([meta_record(intent)])
        target.intent_offset = target.intent_end - 1
        target.backlog = [entry for entry in target.backlog if entry[1] not in handled]
        target.sequence += len(ids)
        target.in_doubt = intent
        self.owner.lag_ms.extend(lags)

    def _delivered_record(
        self, tp: TopicPartition, timer_id: int, record: Record | None, now_ms: int,
    ) -> NewRecord | None:
        """The record to append for a timer record; None: drop it (missing, unreadable,
        cancelled, or its topic was deleted)."""
        if record is None:
            log.error("%s: timer record %d missing; dropped", self.tp, timer_id)
            return None
        try:
            meta, headers = split_meta(record.headers)
        except TimerRecordError as error:
            log.error("%s: timer record %d unreadable (%s); dropped", self.tp, timer_id, error)
            return None
        if not isinstance(meta, Schedule):
            return None
        info = self.broker.topics.get(tp.topic)
        view = self.replication.view
        if (view is not None and tp.topic not in view.topics) or (
            info is not None and info.topic_id.bytes != meta.topic_id
            and meta.topic_id != bytes(16)
        ):
            log.warning("%s: timer record %d dropped: topic %s was deleted",
                        self.tp, timer_id, tp.topic)
            return None
        uniq_key = header_value(headers, UNIQ_KEY_HEADER)
        if uniq_key is not None:
            cancel = self.cancels.get((tp.topic, uniq_key))
            if cancel is not None and cancel[0] > now_ms:
                self.owner.cancelled_total += 1
                return None
        return _delivered(record, headers, meta, timer_id)

    def _max_batch_bytes(self, tp: TopicPartition) -> int:
        info = self.broker.topics.get(tp.topic)
        if info is None:
            return 1024 * 1024 - 1024
        config = self.broker.topics.log_config_for(info)
        return max(1024, config.max_message_bytes - 1024)

    async def _send(self, tag: int, intent: Intent) -> None:
        """The INTENT's batch to the target's leader (again, after a failover or a failure:
        the same producer id, epoch and sequence), then its DONE."""
        target = self.targets[tag]
        tp = target.tp
        # Only a committed INTENT is sent: one lost in a failover would leave its sequence
        # numbers to another batch, which the target would take for a duplicate.
        code = await self.replication.wait_for_high_watermark(self.tp, target.intent_end,
                                                              PRODUCE_TIMEOUT_MS)
        if code != ErrorCode.NONE:
            raise KafkaError(code, f"INTENT not committed in {self.tp}")
        bodies = read_timer_records(self.log, sorted(intent.timer_ids))
        records: list[NewRecord] = []
        for timer_id in intent.timer_ids:
            record = bodies.get(timer_id)
            try:
                meta, headers = split_meta(record.headers) if record is not None else (
                    None, ())
            except TimerRecordError:
                meta = None
            if record is None or not isinstance(meta, Schedule):
                # Never expected (the log is cut below every open INTENT's records): the
                # batch cannot be rebuilt with its sequence numbers; it stays in doubt.
                raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                                 f"timer record {timer_id} of an INTENT is gone")
            records.append(_delivered(record, headers, meta, timer_id))
        view = self.replication.view
        if view is not None and tp.topic not in view.topics:
            self._finish(tag, intent, -1, f"topic {tp.topic} was deleted")
            return
        versioned = view.states.get(tp) if view is not None else None
        if versioned is None or versioned.state.leader not in (view.brokers if view else {}):
            raise KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, f"{tp} has no leader")
        batch = build_batch(records, producer_id=self.producer_id,
                            producer_epoch=intent.producer_epoch,
                            base_sequence=intent.first_sequence, now_ms=clock.now_ms())
        produced = await self.owner.producer.produce(
            versioned.state.leader, tp.topic, tp.partition, batch, PRODUCE_TIMEOUT_MS)
        if not self._leading():
            return
        if produced.error == ErrorCode.NONE:
            self._finish(tag, intent, produced.base_offset + len(records) - 1, None)
            return
        if produced.error in _PERMANENT:
            self._finish(tag, intent, -1, produced.message or produced.error.name)
            return
        if produced.error in _NEW_EPOCH:
            # Nothing of this producer id is known there any more (or it moved on): a new
            # epoch at sequence 0, recorded before it is used.
            epoch = (intent.producer_epoch + 1) % 32768
            renewed = Intent(epoch, 0, intent.topic, intent.partition, intent.timer_ids)
            target.intent_end = self._append([meta_record(renewed)])
            target.intent_offset = target.intent_end - 1
            target.epoch, target.sequence = epoch, len(intent.timer_ids)
            target.in_doubt = renewed
            log.warning("%s: %s answered %s; producer epoch %d from now on", self.tp, tp,
                        produced.error.name, epoch)
        raise KafkaError(produced.error, produced.message or f"append to {tp}")

    def _finish(self, tag: int, intent: Intent, target_offset: int, dropped: str | None) -> None:
        target = self.targets[tag]
        if dropped is not None:
            log.error("%s: %d delayed records for %s dropped: %s", self.tp,
                      len(intent.timer_ids), target.tp, dropped)
        ids = intent.timer_ids
        self._append([
            meta_record(Done(target_offset, target.tp.topic, target.tp.partition,
                             ids[i:i + DONE_IDS_PER_RECORD]))
            for i in range(0, len(ids), DONE_IDS_PER_RECORD)
        ])
        target.in_doubt = None
        self.pending[tag] -= len(ids)
        if dropped is None:
            self.owner.delivered_total += len(ids)

    def _append(self, records: list[NewRecord]) -> int:
        """A leader append to this timer partition; its end offset."""
        epoch = self.replication.check_produce(self.tp, -1)
        if epoch != self.epoch:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{self.tp} moved")
        now_ms = clock.now_ms()
        appended = self.log.append([RecordBatch(memoryview(build_batch(records, now_ms=now_ms)))],
                                   now_ms=now_ms, leader_epoch=epoch)
        self.broker.append_waiters.notify(self.tp)
        self.replication.after_leader_append(self.tp)
        return appended.last_offset + 1

    # ------------------------------------------------------------------ listings

    def listing(self) -> list[TopicTimers]:
        tags = {tag for tag, count in self.pending.items() if count > 0}
        next_due = self.wheel.next_due_per_tag(tags)
        return [TopicTimers(self.targets[tag].tp.topic, self.targets[tag].tp.partition,
                            self.pending[tag], next_due.get(tag)) for tag in sorted(tags)]


def _delivered(record: Record, headers: tuple[Header, ...], meta: Schedule,
               timer_id: int) -> NewRecord:
    return NewRecord(
        record.value, record.key,
        (*headers, (ENQUEUE_HEADER, str(meta.enqueue_ms).encode()),
         (DELIVERED_ID_HEADER, str(timer_id).encode())),
        record.timestamp,
    )


def service(broker: Broker, replication: Replication) -> ClusterTimers:
    timers = broker.timers
    if not isinstance(timers, ClusterTimers):
        timers = broker.timers = ClusterTimers(broker, replication)
    return timers

