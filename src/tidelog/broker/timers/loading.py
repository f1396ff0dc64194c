"""Rebuilding delayed delivery's state from `__tidelog_timer` and the target logs at start.

Blocking file I/O on the event loop, once, before the broker is ready (like the group
coordinator's replay). Two steps:

1. `load_timer_log`: one pass over the timer log from its start. SCHEDULE records become
   pending entries (due time, timer id, target partition), DONE records remove theirs, live
   CANCEL records are kept. The records C extension decodes the batches into columns
   (`records/columnar.py`); only each record's meta header is looked at, and only 20 bytes an
   entry remain.
2. `find_delivered`: a delivery is appended to its target partition *before* its DONE record
   (never the other way round), so a crash in between leaves a delivered record that still
   looks pending. Its copy in the target log is the proof: batches written by the deliverer
   carry `TIMER_PRODUCER_ID`, and each record its timer id in a header. The scan per target
   partition starts after the last DONE of that partition (deliveries of one partition are
   appended and marked in order) and not below any pending record's `targetLogEnd`; only
   the deliverer's batches are decoded.
"""

from __future__ import annotations

import logging
import sys
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field

from tidelog.records.batch import Codec
from tidelog.records.codecs import decompress
from tidelog.records.columnar import Columns, RecordColumns
from tidelog.records.record import Record, iter_records
from tidelog.storage.log import PartitionLog
from tidelog.storage.log_scan import iter_batches_from
from tidelog.storage.timer_records import (
    DELIVERED_ID_HEADER,
    TIMER_META_HEADER,
    TIMER_PRODUCER_ID,
    Cancel,
    Done,
    Intent,
    ProducerSequence,
    TimerRecordError,
    decode_meta,
    header_value,
    schedule_fields,
)
from tidelog.types import TopicPartition

log = logging.getLogger("tidelog.broker.timers")
COLUMNS_BYTES = 8 * 1024 * 1024  # records decoded into columns at a time while loading
_OFFSET_LIMIT = (1 << 63) - 1
_META_KEY = TIMER_META_HEADER.encode()
_PARTITION_AT = 42  # in a SCHEDULE meta: version, kind, dueMs, enqueueMs, targetLogEnd, topicId


@dataclass(slots=True)
class LoadedTimers:
    """What the timer log says, before the target logs are checked."""

    due_ms: array[int] = field(default_factory=lambda: array("q"))
    timer_ids: array[int] = field(default_factory=lambda: array("q"))
    targets: list[TopicPartition] = field(default_factory=list)
    target_index: dict[TopicPartition, int] = field(default_factory=dict)
    tags: array[int] = field(default_factory=lambda: array("i"))
    cancels: dict[tuple[str, bytes], tuple[int, int]] = field(default_factory=dict)
    sequences: list[ProducerSequence] = field(default_factory=list)  # in timer-log order
    last_done_offset: dict[TopicPartition, int] = field(default_factory=dict)
    # Per pending entry while loading, then reduced to the minimum per target (min_log_end).
    log_ends: array[int] = field(default_factory=lambda: array("q"))
    min_log_end: dict[TopicPartition, int] = field(default_factory=dict)
    # Cluster mode: per target, the last INTENT and the next (producer epoch, sequence); the
    # intents whose ids have no DONE yet (`in_doubt`: sent again by the new leader).
    next_sequence: dict[TopicPartition, tuple[int, int]] = field(default_factory=dict)
    in_doubt: dict[TopicPartition, Intent] = field(default_factory=dict)

    def tag_of(self, tp: TopicPartition) -> int:
        tag = self.target_index.get(tp)
        if tag is None:
            tag = self.target_index[tp] = len(self.targets)
            self.targets.append(tp)
        return tag


def iter_metas(timer_log: PartitionLog) -> Iterator[tuple[int, bytes | None]]:
    """(offset, value of the last header if it is the meta header, else None) of every timer
    record, through the records C extension: no Python object per record but the pair."""
    builder = RecordColumns(include_headers=True)
    pending_bytes = 0
    for batch in iter_batches_from(timer_log, timer_log.log_start_offset):
        if batch.is_control:
            continue
        records = batch.records_bytes
        if batch.codec != Codec.NONE:
            records = memoryview(decompress(batch.codec, records))
        builder.append(records, batch.records_count, batch.base_offset, batch.base_timestamp,
                       -1, 0, _OFFSET_LIMIT)
        pending_bytes += len(records)
        if pending_bytes >= COLUMNS_BYTES:
            yield from _metas(builder.finish())
            pending_bytes = 0
    yield from _metas(builder.finish())


def _metas(columns: Columns) -> Iterator[tuple[int, bytes | None]]:
    headers = columns.headers
    assert headers is not None
    offsets = _ints("q", columns.offsets)
    lists = _ints("i", headers.list_offsets)
    key_offsets = _ints("i", headers.key_offsets)
    value_offsets = _ints("i", headers.value_offsets)
    key_data, value_data = headers.key_data, headers.value_data
    for row in range(columns.rows):
        last = lists[row + 1] - 1
        if last < lists[row] or key_data[key_offsets[last]:key_offsets[last + 1]] != _META_KEY:
            yield offsets[row], None
            continue
        yield offsets[row], value_data[value_offsets[last]:value_offsets[last + 1]]


def _ints(code: str, data: bytes) -> array[int]:
    values = array(code)
    values.frombytes(data)
    if sys.byteorder == "big":  # the columns are little-endian
        values.byteswap()
    return values


def load_timer_log(
    timer_log: PartitionLog, now_ms: int, end_offset: int | None = None,
) -> LoadedTimers:
    """The timer log's state from its start (up to `end_offset`, else its end)."""
    loaded = LoadedTimers()
    done: set[int] = set()
    intents: dict[TopicPartition, Intent] = {}
    tags: dict[bytes, int] = {}  # meta bytes from partition on -> tag (one per target)
    for offset, value in iter_metas(timer_log):
        if end_offset is not None and offset >= end_offset:
            break
        fields = schedule_fields(value) if value is not None else None
        if fields is not None:
            due_ms, target_log_end, partition, topic = fields
            tag_key = value[_PARTITION_AT:] if value is not None else b""
            tag = tags.get(tag_key)
            if tag is None:
                tag = tags[tag_key] = loaded.tag_of(
                    TopicPartition(topic.decode("utf-8", "replace"), partition))
            loaded.due_ms.append(due_ms)
            loaded.timer_ids.append(offset)
            loaded.tags.append(tag)
            loaded.log_ends.append(target_log_end)
            continue
        try:
            meta = decode_meta(value)
        except TimerRecordError as error:
            log.error("__tidelog_timer offset %d skipped: %s", offset, error)
            continue
        if isinstance(meta, Cancel):
            if meta.expires_ms > now_ms:
                loaded.cancels[(meta.topic, meta.uniq_key)] = (meta.expires_ms, offset)
        elif isinstance(meta, ProducerSequence):
            loaded.sequences.append(meta)
        elif isinstance(meta, Done):
            done.update(meta.timer_ids)
            if meta.target_offset >= 0:
                tp = TopicPartition(meta.topic, meta.partition)
                previous = loaded.last_done_offset.get(tp, -1)
                loaded.last_done_offset[tp] = max(previous, meta.target_offset)
        elif isinstance(meta, Intent):
            intents[TopicPartition(meta.topic, meta.partition)] = meta
    for tp, intent in intents.items():
        loaded.next_sequence[tp] = (intent.producer_epoch,
                                    intent.first_sequence + len(intent.timer_ids))
        if not done.issuperset(intent.timer_ids):
            loaded.in_doubt[tp] = intent
            done.update(intent.timer_ids)  # not pending: the intent is sent again instead
    if done:
        keep = [i for i, timer_id in enumerate(loaded.timer_ids) if timer_id not in done]
        loaded.due_ms = array("q", (loaded.due_ms[i] for i in keep))
        loaded.timer_ids = array("q", (loaded.timer_ids[i] for i in keep))
        loaded.tags = array("i", (loaded.tags[i] for i in keep))
        loaded.log_ends = array("q", (loaded.log_ends[i] for i in keep))
    for tag, log_end in zip(loaded.tags, loaded.log_ends, strict=True):
        tp = loaded.targets[tag]
        low = loaded.min_log_end.get(tp)
        if low is None or log_end < low:
            loaded.min_log_end[tp] = log_end
    loaded.log_ends = array("q")
    return loaded


def scan_start(loaded: LoadedTimers, tp: TopicPartition) -> int:
    """Where an undone delivery to `tp` can be at the earliest (module docstring)."""
    return max(loaded.last_done_offset.get(tp, -1) + 1, loaded.min_log_end.get(tp, 0))


def find_delivered(target_log: PartitionLog, start: int) -> dict[int, int]:
    """Timer id -> target offset for every delivered record at or after `start`."""
    found: dict[int, int] = {}
    for batch in iter_batches_from(target_log, start):
        if batch.producer_id != TIMER_PRODUCER_ID or batch.is_control:
            continue
        for record in iter_records(batch):
            timer_id = delivered_id(record)
            if timer_id is not None:
                found[timer_id] = record.offset
    return found


def delivered_id(record: Record) -> int | None:
    raw = header_value(record.headers, DELIVERED_ID_HEADER)
    if raw is None or not raw.isdigit():
        return None
    return int(raw)
