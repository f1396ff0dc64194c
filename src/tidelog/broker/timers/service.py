"""The timer service: divert due-later records to `__tidelog_timer`, deliver them when due.

Runs on the event loop; every call is synchronous (page-cache I/O, like the other writers of
internal topics). Design, exactly-once argument and limits: `docs/delivery.md`.

- `divert` (the produce hook, topics with `tidelog.delivery.delay.enable=true`): has
  `divert.split_batches` sort the request's batch, appends its due-later records and cancels
  to the timer log as one batch (answered once that batch is durable, under the same rules as
  any append), adds each to the timing wheel, and hands the rest back to be appended as usual.
- `deliver_due` (every wheel tick, 100 ms): takes the entries the wheel expires, reads their
  bodies from the timer log, appends them per target partition (batches of the producer id
  `TIMER_PRODUCER_ID`, each record carrying its timer id), then appends one DONE record per
  target partition to the timer log. Target first, DONE second: a crash in between is found
  by `loading.find_delivered` at the next start, so nothing is delivered twice or lost.
- every `CLEANUP_INTERVAL_MS` the timer log is cut below its oldest pending or live record
  (`delete_records_before`), so it holds what is pending, not history.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter, deque
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tidelog.broker import clock
from tidelog.broker.timers.divert import meta_record, split_batches
from tidelog.broker.timers.loading import (
    find_delivered,
    load_timer_log,
    scan_start,
)
from tidelog.broker.timers.metrics import TimerCollector, TopicTimers
from tidelog.errors import ErrorCode, InvalidRecordError, KafkaError
from tidelog.records.batch import RecordBatch, iter_batches
from tidelog.records.builder import NewRecord, build_batch
from tidelog.records.record import Record, iter_records
from tidelog.storage.log import PartitionLog
from tidelog.storage.timer_records import (
    DELIVERED_ID_HEADER,
    ENQUEUE_HEADER,
    TIMER_PRODUCER_ID,
    TIMER_TOPIC,
    UNIQ_KEY_HEADER,
    Done,
    ProducerSequence,
    Schedule,
    TimerMeta,
    TimerRecordError,
    header_value,
    split_meta,
)
from tidelog.storage.timer_wheel import TimingWheel
from tidelog.types import TopicPartition

if TYPE_CHECKING:
    from tidelog.broker.state import Broker

log = logging.getLogger("tidelog.broker.timers")
CLEANUP_INTERVAL_MS = 10_000
READ_BYTES = 1 << 20
DONE_IDS_PER_RECORD = 8192
DELIVERY_RECORDS_PER_BATCH = 4096
MAX_LIVE_CANCELS = 100_000
RETRY_AFTER_MS = 1_000  # a failed target append (disk) is tried again this much later
LAG_SAMPLES = 10_000
# The timer log's own configs, whatever the broker's defaults: records stay until delivered
# (the service deletes below the oldest pending one; no retention, no compaction, which would
# key on the producers' keys), keep the producers' timestamps, and a producer's whole batch
# fits in one timer batch. Durability follows the broker's log.durability.
TIMER_TOPIC_CONFIGS = {
    "retention.ms": "-1",
    "retention.bytes": "-1",
    "cleanup.policy": "delete",
    "message.timestamp.type": "CreateTime",
    "segment.bytes": str(128 * 1024 * 1024),  # the cut below the oldest pending frees disk
    "max.message.bytes": str(64 * 1024 * 1024),
}


@dataclass(frozen=True, slots=True)
class Diverted:
    """What `divert` leaves to the produce handler."""

    batches: list[RecordBatch]  # to append to the target as usual (maybe none)
    timer_log: PartitionLog | None  # the timer log, when records went there
    timer_end_offset: int  # wait for durability up to here (with timer_log)
    # Cluster mode: the timer batch's acks=all append at its timer partition's leader, to
    # await before answering (None: done; else the partition's error). Closed unawaited when
    # the rest of the partition's produce fails.
    commit: Coroutine[Any, Any, KafkaError | None] | None = None


class TimerService:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.log = self._ensure_topic()
        now_ms = clock.now_ms()
        self.wheel = TimingWheel(now_ms)
        self._targets: list[TopicPartition] = []
        self._target_index: dict[TopicPartition, int] = {}
        self._cancels: dict[tuple[str, bytes], tuple[int, int]] = {}
        self.pending_per_target: Counter[int] = Counter()
        self.delivered_total = 0
        self.cancelled_total = 0
        self.lag_ms: deque[int] = deque(maxlen=LAG_SAMPLES)  # delivery time - due time
        self._next_cleanup_ms = now_ms + CLEANUP_INTERVAL_MS
        self._load(now_ms)
        self._handle: asyncio.TimerHandle | None = None
        self._closed = False
        registry = getattr(broker.metrics, "registry", None)  # None: metrics are off
        if registry is not None:
            registry.register(TimerCollector(self))
        self._schedule()

    def _ensure_topic(self) -> PartitionLog:
        if self.broker.topics.get(TIMER_TOPIC) is None:
            self.broker.create_topic(TIMER_TOPIC, 1, TIMER_TOPIC_CONFIGS, internal=True)
        return self.broker.partition_log(TIMER_TOPIC, 0)

    def _topic_id(self, topic: str) -> bytes:
        info = self.broker.topics.get(topic)
        return info.topic_id.bytes if info is not None else bytes(16)

    def _tag(self, tp: TopicPartition) -> int:
        tag = self._target_index.get(tp)
        if tag is None:
            tag = self._target_index[tp] = len(self._targets)
            self._targets.append(tp)
        return tag

    # ------------------------------------------------------------------ start

    def _load(self, now_ms: int) -> None:
        loaded = load_timer_log(self.log, now_ms)
        self._cancels = loaded.cancels
        self._restore_sequences(loaded.sequences)
        delivered: dict[int, int] = {}
        pending_tags = set(loaded.tags)
        for tp, tag in loaded.target_index.items():
            if tag not in pending_tags:
                continue
            try:
                target = self.broker.partition_log(tp.topic, tp.partition)
            except KafkaError:
                continue  # deleted: its records are dropped when due
            found = find_delivered(target, scan_start(loaded, tp))
            if found:
                delivered.update(found)
                log.info("%d delivered records of %s found past their DONE", len(found), tp)
                self._append_done(tp, max(found.values()), sorted(found))
        for due_ms, timer_id, tag in zip(loaded.due_ms, loaded.timer_ids, loaded.tags,
                                          strict=True):
            if timer_id in delivered:
                continue
            own_tag = self._tag(loaded.targets[tag])
            self.wheel.add(due_ms, timer_id, own_tag)
            self.pending_per_target[own_tag] += 1
        log.info("timer log loaded: %d pending records, %d live cancels",
                 len(self.wheel), len(self._cancels))

    # ------------------------------------------------------------------ produce

    def divert(
        self, partition_log: PartitionLog, tp: TopicPartition, batches: Sequence[RecordBatch],
        now_ms: int,
    ) -> Diverted:
        """Split one partition's batches of a delay-enabled topic (module docstring).
        Raises KafkaError (INVALID_RECORD, CORRUPT_MESSAGE) for what the partition refuses."""
        parts = split_batches(partition_log, tp, self._topic_id(tp.topic), batches, now_ms)
        timer_records, schedules, cancels = parts.timer_records, parts.schedules, parts.cancels
        if not timer_records:
            return Diverted(parts.kept, None, -1)
        if cancels and len(self._cancels) + len(cancels) > MAX_LIVE_CANCELS:
            raise InvalidRecordError(f"more than {MAX_LIVE_CANCELS} live TIMER_CANCEL records")
        try:
            appended = self.log.append(
                [RecordBatch(memoryview(build_batch(timer_records, now_ms=now_ms)))],
                now_ms=now_ms,
            )
        except KafkaError as error:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                             f"timer log append failed: {error}") from None
        for batch in parts.sequenced:  # the target counts their sequence numbers from now on
            partition_log.producer_state.update(
                batch.producer_id, batch.producer_epoch, batch.base_sequence,
                batch.last_sequence, -1, -1, batch.max_timestamp,
            )
        tag = self._tag(tp)
        for position, due_ms in schedules:
            self.wheel.add(due_ms, appended.base_offset + position, tag)
        self.pending_per_target[tag] += len(schedules)
        for position, cancel in cancels:
            self._cancels[(cancel.topic, cancel.uniq_key)] = (
                cancel.expires_ms, appended.base_offset + position
            )
        return Diverted(parts.kept, self.log, appended.last_offset + 1)

    def _restore_sequences(self, sequences: list[ProducerSequence]) -> None:
        """After an unclean start the target's producer state is rebuilt from its own log,
        which never held the batches the timer log took: count them again where the state
        has nothing newer."""
        for meta in sequences:
            try:
                target = self.broker.partition_log(meta.topic, meta.partition)
            except KafkaError:
                continue
            state = target.producer_state
            entry = state.producers.get(meta.producer_id)
            if entry is not None:
                if meta.producer_epoch < entry.producer_epoch:
                    continue
                if meta.producer_epoch == entry.producer_epoch and (
                    entry.last_sequence >= meta.first_sequence
                ):
                    continue
            state.update(meta.producer_id, meta.producer_epoch, meta.first_sequence,
                         meta.last_sequence, -1, -1, -1)

    # ------------------------------------------------------------------ delivery

    def _schedule(self) -> None:
        if self._closed:
            return
        now_ms = clock.now_ms()
        tick_ms = self.wheel.tick_ms
        delay_ms = tick_ms - now_ms % tick_ms + 1  # just past the next tick's end
        self._handle = asyncio.get_running_loop().call_later(delay_ms / 1000, self._on_tick)

    def _on_tick(self) -> None:
        try:
            now_ms = clock.now_ms()
            self.deliver_due(now_ms)
            if now_ms >= self._next_cleanup_ms:
                self._next_cleanup_ms = now_ms + CLEANUP_INTERVAL_MS
                self.cleanup(now_ms)
        except (OSError, KafkaError):
            log.exception("timer delivery failed; retrying at the next tick")
        self._schedule()

    def deliver_due(self, now_ms: int) -> int:
        """Deliver every record due by `now_ms`; returns how many were appended."""
        expired = self.wheel.advance(now_ms)
        if not expired:
            return 0
        by_target: dict[int, list[tuple[int, int]]] = {}
        for due_ms, timer_id, tag in expired:
            by_target.setdefault(tag, []).append((timer_id, due_ms))
        # One pass over the timer log for every target: entries of different targets
        # interleave there.
        bodies = self._read_timer_records(sorted(expired.timer_ids))
        delivered = 0
        rounds = list(by_target.items())
        for index, (tag, entries) in enumerate(rounds):
            entries.sort(key=lambda entry: (entry[1], entry[0]))  # due order, then id
            try:
                delivered += self._deliver_to(tag, entries, bodies, now_ms)
            except (OSError, KafkaError):
                # A DONE append failed (the disk): the targets not tried yet wait a retry;
                # this one's records are in its log and the next start finds them there.
                for later_tag, later_entries in rounds[index + 1:]:
                    for timer_id, due_ms in later_entries:
                        self.wheel.add(max(due_ms, now_ms + RETRY_AFTER_MS), timer_id,
                                       later_tag)
                raise
        return delivered

    def _deliver_to(
        self, tag: int, entries: list[tuple[int, int]], bodies: dict[int, Record], now_ms: int,
    ) -> int:
        tp = self._targets[tag]
        topic_id = self._topic_id(tp.topic)
        records: list[NewRecord] = []
        ids: list[int] = []
        lags: list[int] = []
        skipped: list[int] = []
        for timer_id, due_ms in entries:
            record = bodies.get(timer_id)
            meta: TimerMeta | None = None
            if record is not None:
                try:
                    meta, headers = split_meta(record.headers)
                except TimerRecordError as error:
                    log.error("timer record %d unreadable: %s", timer_id, error)
            if record is None or not isinstance(meta, Schedule):
                log.error("timer record %d missing; dropped", timer_id)
                skipped.append(timer_id)
                continue
            if meta.topic_id != topic_id:
                log.warning("timer record %d dropped: topic %s was deleted", timer_id, tp.topic)
                skipped.append(timer_id)
                continue
            uniq_key = header_value(headers, UNIQ_KEY_HEADER)
            if uniq_key is not None and self._cancelled(tp.topic, uniq_key, now_ms):
                skipped.append(timer_id)
                self.cancelled_total += 1
                continue
            records.append(NewRecord(
                record.value, record.key,
                (*headers, (ENQUEUE_HEADER, str(meta.enqueue_ms).encode()),
                 (DELIVERED_ID_HEADER, str(timer_id).encode())),
                record.timestamp,
            ))
            ids.append(timer_id)
            lags.append(now_ms - due_ms)
        last_offset = -1
        if records:
            try:
                target = self.broker.partition_log(tp.topic, tp.partition)
            except KafkaError:
                log.warning("%d delayed records for %s dropped: the partition is gone",
                            len(records), tp)
                skipped += ids
                ids, lags = [], []
            else:
                last_offset, appended, failure = self._append_target(target, records, now_ms)
                if failure is not None:
                    log.warning("delivery to %s failed (%s); retrying in %d ms",
                                tp, failure, RETRY_AFTER_MS)
                    retried = set(ids[appended:])  # the records before are in the log
                    for timer_id, due_ms in entries:
                        if timer_id in retried:
                            self.wheel.add(max(due_ms, now_ms + RETRY_AFTER_MS), timer_id, tag)
                    ids, lags = ids[:appended], lags[:appended]
                if appended:
                    self.broker.append_waiters.notify(tp)
                    if target.config.is_sync:
                        # DONE only once the delivery is as durable as an acknowledged
                        # produce to the target would be: with durability=sync, fsynced
                        # (here, on the loop: a DONE must not overtake the next delivery's).
                        target.flush()
        if ids or skipped:
            self._append_done(tp, last_offset, sorted(ids + skipped))
        self.pending_per_target[tag] -= len(ids) + len(skipped)
        self.delivered_total += len(ids)
        self.lag_ms.extend(lags)
        return len(ids)

    def _append_target(
        self, target: PartitionLog, records: list[NewRecord], now_ms: int,
    ) -> tuple[int, int, OSError | None]:
        """Batches of at most DELIVERY_RECORDS_PER_BATCH records and about max.message.bytes.
        Returns the last offset written (-1: none), how many of `records` were handled (a
        refused batch counts: it is dropped), and the OSError that stopped it, if one did."""
        limit = max(1024, target.config.max_message_bytes - 1024)
        last_offset = -1
        handled = 0
        chunks: list[list[NewRecord]] = [[]]
        size = 0
        for record in records:
            record_size = estimated_size(record)
            chunk = chunks[-1]
            if chunk and (size + record_size > limit or len(chunk) >= DELIVERY_RECORDS_PER_BATCH):
                chunks.append([])
                size = 0
            chunks[-1].append(record)
            size += record_size
        for chunk in chunks:
            try:
                offset = self._append_chunk(target, chunk, now_ms)
            except OSError as error:
                return last_offset, handled, error
            last_offset = max(last_offset, offset)
            handled += len(chunk)
        return last_offset, handled, None

    def _append_chunk(self, target: PartitionLog, chunk: list[NewRecord], now_ms: int) -> int:
        buffer = build_batch(chunk, producer_id=TIMER_PRODUCER_ID, producer_epoch=0,
                             now_ms=now_ms)
        try:
            result = target.append([RecordBatch(memoryview(buffer))], now_ms=now_ms)
        except KafkaError as error:
            # The topic's limits changed since the records were accepted: they cannot be
            # appended as they are; dropping them is logged (docs/delivery.md).
            log.error("%d delayed records for %s refused (%s); dropped",
                      len(chunk), target.topic_partition, error)
            return -1
        return result.last_offset

    def _read_timer_records(self, timer_ids: list[int]) -> dict[int, Record]:
        return read_timer_records(self.log, timer_ids)

    def _cancelled(self, topic: str, uniq_key: bytes, now_ms: int) -> bool:
        cancel = self._cancels.get((topic, uniq_key))
        return cancel is not None and cancel[0] > now_ms

    def _append_done(self, tp: TopicPartition, target_offset: int, ids: list[int]) -> None:
        now_ms = clock.now_ms()
        records = [
            meta_record(Done(target_offset, tp.topic, tp.partition,
                              tuple(ids[i:i + DONE_IDS_PER_RECORD])))
            for i in range(0, len(ids), DONE_IDS_PER_RECORD)
        ]
        self.log.append([RecordBatch(memoryview(build_batch(records, now_ms=now_ms)))],
                        now_ms=now_ms)

    def cleanup(self, now_ms: int) -> None:
        """Forget expired cancels; delete the timer log below what is still needed."""
        for key in [k for k, (expires_ms, _) in self._cancels.items() if expires_ms <= now_ms]:
            del self._cancels[key]
        low = self.wheel.min_timer_id()
        for _, timer_id in self._cancels.values():
            low = timer_id if low is None else min(low, timer_id)
        if low is None:
            low = self.log.log_end_offset
        if low > self.log.log_start_offset:
            self.log.delete_records_before(low)

    # ------------------------------------------------------------------ listings

    def listing(self) -> list[TopicTimers]:
        """Pending records and the next due time per target partition."""
        tags = {tag for tag, count in self.pending_per_target.items() if count > 0}
        next_due = self.wheel.next_due_per_tag(tags)
        return [
            TopicTimers(self._targets[tag].topic, self._targets[tag].partition,
                        self.pending_per_target[tag], next_due.get(tag))
            for tag in sorted(tags, key=lambda t: self._targets[t])
        ]

    def lag_quantiles(self) -> tuple[float, float] | None:
        """p50 and p99 of the last LAG_SAMPLES delivery lags, in ms."""
        if not self.lag_ms:
            return None
        ordered = sorted(self.lag_ms)
        last = len(ordered) - 1
        return float(ordered[last * 50 // 100]), float(ordered[last * 99 // 100])

    def close(self) -> None:
        self._closed = True
        if self._handle is not None:
            self._handle.cancel()


def read_timer_records(timer_log: PartitionLog, timer_ids: list[int]) -> dict[int, Record]:
    """The timer records with these ids (sorted), read in runs of about READ_BYTES."""
    wanted = set(timer_ids)
    last_wanted = timer_ids[-1] if timer_ids else -1
    found: dict[int, Record] = {}
    for timer_id in timer_ids:
        if timer_id in found or timer_id < timer_log.log_start_offset:
            continue
        if timer_id >= timer_log.log_end_offset:
            break
        read = timer_log.read(timer_id, READ_BYTES)
        data = b"".join(piece.read_bytes() for piece in read.slices)
        for batch in iter_batches(data):
            if batch.last_offset < timer_id:
                continue
            if batch.base_offset > last_wanted:
                break
            for record in iter_records(batch):
                if record.offset in wanted:
                    found[record.offset] = record
    return found


def estimated_size(record: NewRecord) -> int:
    size = 32 + len(record.key or b"") + len(record.value or b"")
    for key, value in record.headers:
        size += 8 + len(key) + len(value or b"")
    return size


def service(broker: Broker) -> TimerService:
    """The broker's timer service, started on first use (or at start when the timer log
    exists)."""
    timers = broker.timers
    if not isinstance(timers, TimerService):
        timers = broker.timers = TimerService(broker)
    return timers

