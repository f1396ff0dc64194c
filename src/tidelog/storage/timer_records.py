"""Delayed delivery's record layouts: the timer headers producers set, and `__tidelog_timer`.

Pure (no I/O). `docs/delivery.md` tells the whole design; this module owns the bytes.

**Producer headers** (RocketMQ's property names; values are ASCII decimal strings):

    TIMER_DELIVER_MS   absolute delivery time, epoch milliseconds
    TIMER_DELAY_MS     delay from the broker's receipt, milliseconds (>= 0)
    DELAY              RocketMQ 4's delay level 1-18 (`DELAY_LEVELS_MS`); 0 = no delay
    TIMER_CANCEL       this record cancels pending records of the same topic whose UNIQ_KEY
                       header equals the value (UTF-8); it is never delivered itself
    UNIQ_KEY           a record's id for TIMER_CANCEL (RocketMQ's client message id)

The first of TIMER_DELIVER_MS, TIMER_DELAY_MS, DELAY present decides. A malformed value, a
delivery time more than the topic's `tidelog.delivery.max.delay.ms` ahead, or a DELAY level
outside 0-18 is INVALID_RECORD. A delivery time at or before the receipt is "due now".

**`__tidelog_timer` records.** Ordinary magic-2 records in an internal one-partition topic.
The record's last header is `__tidelog.timer` (`TIMER_META_HEADER`), whose value says what the
record is (big-endian; strings are int16 length + UTF-8):

    version int8 (0), kind int8, then by kind:
    0 SCHEDULE  dueMs int64, enqueueMs int64, targetLogEnd int64, topicId 16 bytes,
                partition int32, topic
                The record's key, value, other headers and timestamp are the producer's own,
                delivered unchanged. targetLogEnd: the target partition's log end offset when
                scheduled (no delivery of this record can sit below it). topicId: the target
                topic's id (a topic created again under the name gets none of these records).
    1 CANCEL    expiresMs int64, topic, uniqKey (string)
                Cancels the topic's records with that UNIQ_KEY delivered before expiresMs.
    2 DONE      targetOffset int64, partition int32, topic, count int32, count x timerId int64
                These timer records were delivered (the last at targetOffset of the target
                partition; -1 when none was: cancelled, or the target is gone).
    3 SEQUENCE  producerId int64, producerEpoch int16, firstSequence int32, lastSequence
                int32, partition int32, topic
                An idempotent producer's batch went to the timer log (all its records, due-now
                ones due at once): the target's producer state counts these sequence numbers,
                and this record restores them after an unclean start.
    4 INTENT    producerEpoch int16, firstSequence int32, partition int32, topic, count
                int32, count x timerId int64
                Cluster mode: the timer partition's leader is about to append these timer
                records to the target partition as one idempotent batch of its own producer
                id (`timer_producer_id(timer partition)`) with this epoch and first sequence.
                Written and committed before the append; the DONE listing the same ids
                follows once the target acknowledged it with acks=all. A new leader finding
                an INTENT without its DONE sends the same batch again: the target's producer
                state answers a duplicate if the first one landed.

A timer record's id is its offset in `__tidelog_timer`. A delivered record carries two more
headers after the producer's: `TIMER_ENQUEUE_MS` (the broker's receipt time, decimal) and
`__tidelog.timer.offset` (`DELIVERED_ID_HEADER`: its timer id, decimal), and its batch the
producer id `TIMER_PRODUCER_ID` (sequence -1), which no client may use on a delay topic: the
pair lets recovery recognise its own deliveries in the target log.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tidelog.errors import InvalidRecordError
from tidelog.records.record import Header

TIMER_TOPIC = "__tidelog_timer"
TIMER_META_HEADER = "__tidelog.timer"
DELIVERED_ID_HEADER = "__tidelog.timer.offset"
ENQUEUE_HEADER = "TIMER_ENQUEUE_MS"
DELIVER_MS_HEADER = "TIMER_DELIVER_MS"
DELAY_MS_HEADER = "TIMER_DELAY_MS"
DELAY_LEVEL_HEADER = "DELAY"
CANCEL_HEADER = "TIMER_CANCEL"
UNIQ_KEY_HEADER = "UNIQ_KEY"
TIMER_PRODUCER_ID = 1 << 62  # far above any id the allocator hands out (blocks of 1000)
# Cluster mode: timer partition p delivers as TIMER_PRODUCER_ID + 1 + p (idempotent). Every id
# in [TIMER_PRODUCER_ID, TIMER_PRODUCER_ID + TIMER_PRODUCER_IDS) is reserved.
TIMER_PRODUCER_IDS = 1 << 20


def timer_producer_id(timer_partition: int) -> int:
    return TIMER_PRODUCER_ID + 1 + timer_partition


def is_timer_producer(producer_id: int) -> bool:
    return TIMER_PRODUCER_ID <= producer_id < TIMER_PRODUCER_ID + TIMER_PRODUCER_IDS

# RocketMQ 4's messageDelayLevel default: "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m
# 30m 1h 2h", level 1 first.
DELAY_LEVELS_MS = (
    1_000, 5_000, 10_000, 30_000, 60_000, 120_000, 180_000, 240_000, 300_000, 360_000,
    420_000, 480_000, 540_000, 600_000, 1_200_000, 1_800_000, 3_600_000, 7_200_000,
)
_MAX_DECIMAL_CHARS = 20
_MAX_STRING_BYTES = 32767


class TimerKind(enum.IntEnum):
    SCHEDULE = 0
    CANCEL = 1
    DONE = 2
    SEQUENCE = 3
    INTENT = 4


@dataclass(frozen=True, slots=True)
class Schedule:
    due_ms: int
    enqueue_ms: int
    target_log_end: int
    topic: str
    partition: int
    topic_id: bytes = bytes(16)  # the target topic's id: a topic deleted and created again
    # under the same name is another topic, and its predecessor's records are dropped


@dataclass(frozen=True, slots=True)
class Cancel:
    expires_ms: int
    topic: str
    uniq_key: bytes


@dataclass(frozen=True, slots=True)
class Done:
    target_offset: int
    topic: str
    partition: int
    timer_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ProducerSequence:
    """An idempotent producer's batch taken by the timer log instead of its target: the
    target's producer state must count its sequence numbers (docs/delivery.md)."""

    producer_id: int
    producer_epoch: int
    first_sequence: int
    last_sequence: int
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class Intent:
    """Cluster mode: these timer records are being appended to the target as one batch of
    the timer partition's producer id, at this epoch and first sequence."""

    producer_epoch: int
    first_sequence: int
    topic: str
    partition: int
    timer_ids: tuple[int, ...]


TimerMeta = Schedule | Cancel | Done | ProducerSequence | Intent

_HEAD = struct.Struct(">bb")
_SCHEDULE = struct.Struct(">qqq16si")
_CANCEL = struct.Struct(">q")
_DONE = struct.Struct(">qi")
_SEQUENCE = struct.Struct(">qhiii")
_INTENT = struct.Struct(">hii")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_VERSION = 0


# --------------------------------------------------------------------- producer headers


def _decimal(name: str, value: bytes | None) -> int:
    if value is None or not 0 < len(value) <= _MAX_DECIMAL_CHARS or not value.isdigit():
        raise InvalidRecordError(f"header {name} must be a non-negative decimal, got {value!r}")
    return int(value)


def delivery_time(headers: Sequence[Header], enqueue_ms: int, max_delay_ms: int) -> int | None:
    """The record's delivery time from its headers, or None when it has none (or DELAY=0).
    Malformed or too distant: InvalidRecordError (INVALID_RECORD) with a message."""
    chosen: tuple[str, bytes | None] | None = None
    for wanted in (DELIVER_MS_HEADER, DELAY_MS_HEADER, DELAY_LEVEL_HEADER):
        for key, value in headers:
            if key == wanted:
                chosen = (key, value)
                break
        if chosen is not None:
            break
    if chosen is None:
        return None
    name, raw = chosen
    number = _decimal(name, raw)
    if name == DELIVER_MS_HEADER:
        due_ms = number
    elif name == DELAY_MS_HEADER:
        due_ms = enqueue_ms + number
    else:
        if number > len(DELAY_LEVELS_MS):
            raise InvalidRecordError(f"header DELAY must be a level 0-18, got {number}")
        if number == 0:
            return None
        due_ms = enqueue_ms + DELAY_LEVELS_MS[number - 1]
    if due_ms - enqueue_ms > max_delay_ms:
        raise InvalidRecordError(
            f"delivery {due_ms - enqueue_ms} ms ahead exceeds "
            f"tidelog.delivery.max.delay.ms={max_delay_ms}"
        )
    return due_ms


def header_value(headers: Sequence[Header], name: str) -> bytes | None:
    for key, value in headers:
        if key == name:
            return value
    return None


# --------------------------------------------------------------------- timer log meta


def _string(value: str | bytes) -> bytes:
    data = value.encode("utf-8") if isinstance(value, str) else value
    if len(data) > _MAX_STRING_BYTES:
        raise InvalidRecordError(f"string of {len(data)} bytes is too long for the timer log")
    return _I16.pack(len(data)) + data


def encode_meta(meta: TimerMeta) -> bytes:
    if isinstance(meta, Schedule):
        return (
            _HEAD.pack(_VERSION, TimerKind.SCHEDULE)
            + _SCHEDULE.pack(meta.due_ms, meta.enqueue_ms, meta.target_log_end, meta.topic_id,
                             meta.partition)
            + _string(meta.topic)
        )
    if isinstance(meta, Cancel):
        return (
            _HEAD.pack(_VERSION, TimerKind.CANCEL)
            + _CANCEL.pack(meta.expires_ms)
            + _string(meta.topic)
            + _string(meta.uniq_key)
        )
    if isinstance(meta, ProducerSequence):
        return (
            _HEAD.pack(_VERSION, TimerKind.SEQUENCE)
            + _SEQUENCE.pack(meta.producer_id, meta.producer_epoch, meta.first_sequence,
                             meta.last_sequence, meta.partition)
            + _string(meta.topic)
        )
    ids = meta.timer_ids
    if isinstance(meta, Intent):
        return (
            _HEAD.pack(_VERSION, TimerKind.INTENT)
            + _INTENT.pack(meta.producer_epoch, meta.first_sequence, meta.partition)
            + _string(meta.topic)
            + _I32.pack(len(ids))
            + struct.pack(f">{len(ids)}q", *ids)
        )
    return (
        _HEAD.pack(_VERSION, TimerKind.DONE)
        + _DONE.pack(meta.target_offset, meta.partition)
        + _string(meta.topic)
        + _I32.pack(len(ids))
        + struct.pack(f">{len(ids)}q", *ids)
    )


class TimerRecordError(ValueError):
    """A `__tidelog_timer` record that does not follow the layout (corrupt or foreign)."""


class _Reader:
    __slots__ = ("data", "position")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.position = 0

    def take(self, form: struct.Struct) -> tuple[Any, ...]:
        end = self.position + form.size
        if end > len(self.data):
            raise TimerRecordError("timer record meta cut short")
        values = form.unpack_from(self.data, self.position)
        self.position = end
        return values

    def end(self) -> None:
        if self.position != len(self.data):
            raise TimerRecordError("bytes after the timer record meta")

    def string(self) -> bytes:
        (length,) = self.take(_I16)
        end = self.position + length
        if length < 0 or end > len(self.data):
            raise TimerRecordError("timer record string cut short")
        value = self.data[self.position:end]
        self.position = end
        return value


def decode_meta(value: bytes | None) -> TimerMeta:
    """The meta header's value -> Schedule / Cancel / Done; TimerRecordError if malformed."""
    if value is None:
        raise TimerRecordError("timer record without meta")
    reader = _Reader(value)
    version, kind = reader.take(_HEAD)
    if version != _VERSION:
        raise TimerRecordError(f"timer record version {version}")
    try:
        if kind == TimerKind.SCHEDULE:
            due_ms, enqueue_ms, target_log_end, topic_id, partition = reader.take(_SCHEDULE)
            topic = reader.string().decode("utf-8")
            reader.end()
            return Schedule(due_ms, enqueue_ms, target_log_end, topic, partition, topic_id)
        if kind == TimerKind.CANCEL:
            (expires_ms,) = reader.take(_CANCEL)
            topic = reader.string().decode("utf-8")
            uniq_key = reader.string()
            reader.end()
            return Cancel(expires_ms, topic, uniq_key)
        if kind == TimerKind.DONE:
            target_offset, partition = reader.take(_DONE)
            topic = reader.string().decode("utf-8")
            (count,) = reader.take(_I32)
            if count < 0 or reader.position + 8 * count != len(value):
                raise TimerRecordError("timer DONE record ids do not match their count")
            ids = struct.unpack_from(f">{count}q", value, reader.position)
            return Done(target_offset, topic, partition, ids)
        if kind == TimerKind.SEQUENCE:
            producer_id, epoch, first, last, partition = reader.take(_SEQUENCE)
            topic = reader.string().decode("utf-8")
            reader.end()
            return ProducerSequence(producer_id, epoch, first, last, topic, partition)
        if kind == TimerKind.INTENT:
            epoch, first, partition = reader.take(_INTENT)
            topic = reader.string().decode("utf-8")
            (count,) = reader.take(_I32)
            if count < 0 or reader.position + 8 * count != len(value):
                raise TimerRecordError("timer INTENT record ids do not match their count")
            ids = struct.unpack_from(f">{count}q", value, reader.position)
            return Intent(epoch, first, topic, partition, ids)
    except UnicodeDecodeError as error:
        raise TimerRecordError(f"timer record topic: {error}") from None
    raise TimerRecordError(f"timer record kind {kind}")


# version, kind, dueMs, enqueueMs, targetLogEnd, topicId, partition, topic length
_SCHEDULE_HEAD = struct.Struct(">bbqqq16sih")


def schedule_fields(value: bytes) -> tuple[int, int, int, bytes] | None:
    """A SCHEDULE meta's (dueMs, targetLogEnd, partition, topic UTF-8 bytes) without objects
    (start-up replays millions); None for any other or malformed meta (use decode_meta)."""
    if len(value) < _SCHEDULE_HEAD.size:
        return None
    version, kind, due_ms, _, target_log_end, _, partition, length = (
        _SCHEDULE_HEAD.unpack_from(value)
    )
    if version != _VERSION or kind != TimerKind.SCHEDULE or len(value) != (
        _SCHEDULE_HEAD.size + length
    ):
        return None
    return due_ms, target_log_end, partition, value[_SCHEDULE_HEAD.size:]


def split_meta(headers: tuple[Header, ...]) -> tuple[TimerMeta, tuple[Header, ...]]:
    """A timer-log record's headers -> (its meta, the producer's headers)."""
    if not headers or headers[-1][0] != TIMER_META_HEADER:
        raise TimerRecordError("timer record without its meta header")
    return decode_meta(headers[-1][1]), headers[:-1]
