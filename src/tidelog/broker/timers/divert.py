"""The produce side of delayed delivery: split a delay-enabled topic's batch into what is
appended now and what goes to the timer log (docs/delivery.md).

Synchronous, on the event loop. Checks in order, cheapest first: the log's own client-batch
checks (CRC, sizes; keys on a compacted topic); the reserved producer id; a substring search
for `DELAY` / `TIMER_` over the records section (most batches stop here, undecoded); the
header keys on the records C extension's columns (`headers.py`: a batch whose timer headers
all say "now" stops here); then a full decode classifies each record: a cancel, due later,
or due now.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from tidelog.broker.timers.headers import any_timer_record
from tidelog.errors import InvalidRecordError
from tidelog.records.batch import Codec, RecordBatch
from tidelog.records.builder import NewRecord, build_batch
from tidelog.records.codecs import DEFAULT_MAX_UNCOMPRESSED_BYTES, decompress
from tidelog.records.record import Record, iter_records
from tidelog.storage import log_validator
from tidelog.storage.log import PartitionLog
from tidelog.storage.log_validator import AppendOrigin
from tidelog.storage.timer_records import (
    CANCEL_HEADER,
    TIMER_META_HEADER,
    TIMER_PRODUCER_ID,
    TIMER_PRODUCER_IDS,
    Cancel,
    ProducerSequence,
    Schedule,
    TimerMeta,
    delivery_time,
    encode_meta,
    header_value,
    is_timer_producer,
)
from tidelog.types import TopicPartition

_NAME_PARTS = (b"DELAY", b"TIMER_")


@dataclass(slots=True)
class Split:
    """One request's batches for a partition, split."""

    kept: list[RecordBatch] = field(default_factory=list)  # appended now (maybe rebuilt)
    timer_records: list[NewRecord] = field(default_factory=list)  # one timer-log batch
    schedules: list[tuple[int, int]] = field(default_factory=list)  # (position, due ms)
    cancels: list[tuple[int, Cancel]] = field(default_factory=list)  # (position, cancel)
    sequenced: list[RecordBatch] = field(default_factory=list)  # idempotent, taken whole


def split_batches(
    partition_log: PartitionLog, tp: TopicPartition, topic_id: bytes,
    batches: Sequence[RecordBatch], now_ms: int,
) -> Split:
    """Raises KafkaError (INVALID_RECORD, CORRUPT_MESSAGE, OUT_OF_ORDER_SEQUENCE_NUMBER,
    INVALID_PRODUCER_EPOCH) for what the partition refuses; nothing is written here."""
    parts = Split()
    kept, timer_records = parts.kept, parts.timer_records
    schedules, cancels, sequenced = parts.schedules, parts.cancels, parts.sequenced
    config = partition_log.config
    # The log's own client-batch checks (CRC, sizes, offsets, attributes) before anything is
    # decoded: a batch the timer log takes must pass what its target would have checked.
    log_validator.validate_batches(batches, config, AppendOrigin.CLIENT)
    if config.compacts:
        log_validator.require_keys(batches, config.max_message_bytes)
    for batch in batches:
        if is_timer_producer(batch.producer_id):
            raise InvalidRecordError(
                f"producer ids {TIMER_PRODUCER_ID}-{TIMER_PRODUCER_ID + TIMER_PRODUCER_IDS - 1}"
                " are reserved")
        limit = max(config.max_message_bytes * 64, DEFAULT_MAX_UNCOMPRESSED_BYTES)
        section = _records_section(batch, limit)
        if not (_NAME_PARTS[0] in section or _NAME_PARTS[1] in section):
            kept.append(batch)  # no header name can be in it: not even decoded
            continue
        if not any_timer_record(batch, section, now_ms, config.tidelog_delivery_max_delay_ms):
            kept.append(batch)  # every record due now: the producer's bytes, untouched
            continue
        now_records: list[Record] = []
        first_timer = len(timer_records)
        for record in iter_records(batch, max_uncompressed_bytes=limit):
            cancel_key = header_value(record.headers, CANCEL_HEADER)
            if cancel_key is not None:
                cancel = Cancel(now_ms + config.tidelog_delivery_max_delay_ms, tp.topic,
                                cancel_key)
                cancels.append((len(timer_records), cancel))
                timer_records.append(timer_record(record, cancel))
                continue
            due_ms = delivery_time(record.headers, now_ms,
                                   config.tidelog_delivery_max_delay_ms)
            if due_ms is None or due_ms <= now_ms:
                now_records.append(record)
                continue
            schedule = Schedule(due_ms, now_ms, partition_log.log_end_offset, tp.topic,
                                tp.partition, topic_id)
            schedules.append((len(timer_records), due_ms))
            timer_records.append(timer_record(record, schedule))
        if len(timer_records) == first_timer:
            kept.append(batch)  # nothing delayed: the producer's bytes, untouched
            continue
        if batch.producer_id >= 0:
            if not _take_idempotent(partition_log, tp, topic_id, batch, now_ms, now_records,
                                    first_timer, timer_records, schedules, cancels):
                continue  # a retry of a batch taken before
            sequenced.append(batch)
            continue
        if now_records:
            kept.append(RecordBatch(memoryview(build_batch(
                [NewRecord(r.value, r.key, r.headers, r.timestamp) for r in now_records],
                now_ms=now_ms,
            ))))
    return parts


def _take_idempotent(
    partition_log: PartitionLog, tp: TopicPartition, topic_id: bytes, batch: RecordBatch,
    now_ms: int,
    now_records: list[Record], first_timer: int, timer_records: list[NewRecord],
    schedules: list[tuple[int, int]], cancels: list[tuple[int, Cancel]],
) -> bool:
    """An idempotent producer's batch holding delayed records goes to the timer log whole
    (its due-now records due at once), so its sequence numbers stay whole: checked here
    against the target's producer state like an append (a retry of a batch taken before
    is a duplicate: False, nothing more is scheduled; a gap is OUT_OF_ORDER_SEQUENCE) and
    counted there once the timer batch is written. Transactional batches are refused."""
    if batch.is_transactional:
        raise InvalidRecordError(
            "transactional producers cannot delay records: a transaction's records must "
            "become visible when it commits"
        )
    duplicate = partition_log.producer_state.check(
        batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.last_sequence,
        never_written=partition_log.log_end_offset == 0,
    )
    if duplicate is not None:
        del timer_records[first_timer:]
        schedules[:] = [entry for entry in schedules if entry[0] < first_timer]
        cancels[:] = [entry for entry in cancels if entry[0] < first_timer]
        return False
    for record in now_records:
        schedule = Schedule(now_ms, now_ms, partition_log.log_end_offset, tp.topic,
                            tp.partition, topic_id)
        schedules.append((len(timer_records), now_ms))
        timer_records.append(timer_record(record, schedule))
    timer_records.append(meta_record(ProducerSequence(
        batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.last_sequence,
        tp.topic, tp.partition,
    )))
    return True


def _records_section(batch: RecordBatch, max_uncompressed_bytes: int) -> bytes:
    """The batch's records, decompressed, as bytes (`in` on a memoryview compares items, not
    substrings). Every timer header name holds `DELAY` or `TIMER_`: a section with neither
    needs no decoding."""
    if batch.codec == Codec.NONE:
        return bytes(batch.records_bytes)
    return decompress(batch.codec, batch.records_bytes, max_uncompressed_bytes)


def timer_record(record: Record, meta: TimerMeta) -> NewRecord:
    """A timer-log record: the producer's record with the meta header last."""
    return NewRecord(
        record.value, record.key,
        (*record.headers, (TIMER_META_HEADER, encode_meta(meta))),
        record.timestamp,
    )


def meta_record(meta: TimerMeta) -> NewRecord:
    return NewRecord(None, None, ((TIMER_META_HEADER, encode_meta(meta)),))
