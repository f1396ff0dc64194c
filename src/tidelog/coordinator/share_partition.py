"""One share partition (KIP-932): the in-flight records of a share group on one partition.

Pure: the partition leader holds one `SharePartition` per (group, topic, partition) and passes
the time in. Offsets below the share-partition start offset (SPSO, `start_offset`) are done;
offsets from `end_offset` (SPEO, the next offset never acquired) on have never been delivered;
every offset in `[start_offset, end_offset)` has an `InFlightRecord` (the invariant every
method keeps). Their number is bounded by `max_record_locks`
(`group.share.partition.max.record.locks`): past it no new offset is acquired.

States (Kafka's RecordState codes, also what `__share_group_state` stores)::

    AVAILABLE     0  may be acquired (never delivered, released, or its lock expired), from
                     `deadline_ms` on when the group has a retry back-off (share_retry.py)
    ACQUIRED      1  delivered to `member_id` until `deadline_ms` (persisted as AVAILABLE)
    ACKNOWLEDGED  2  accepted: never delivered again
    ARCHIVING     3  rejected or over the limit in a group with a dead-letter topic (KIP-1191):
                     ARCHIVED once copied there (`dead_letters`, `dead_lettered`)
    ARCHIVED      4  rejected, a gap, or over the delivery-count limit: never delivered again

Transitions: AVAILABLE -> ACQUIRED (acquire: delivery_count + 1); ACQUIRED -> ACKNOWLEDGED
(accept), ARCHIVED (reject, gap), AVAILABLE (release, lock expiry, member gone) or ARCHIVED
instead when the delivery count reached `delivery_count_limit`; ACQUIRED -> ACQUIRED (renew:
new deadline). A record the group's filter drops (`LogBatch.filtered`) goes from AVAILABLE
(or new) to ACKNOWLEDGED without being delivered. The SPSO moves over every
ACKNOWLEDGED/ARCHIVED prefix, dropping those records.
An acknowledgement is checked whole before any of it applies: a bad one changes nothing.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tidelog.coordinator.share_retry import backoff_ms
from tidelog.errors import ErrorCode


class RecordState(enum.IntEnum):
    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVING = 3  # KIP-1191: to be copied to the dead-letter topic, then ARCHIVED
    ARCHIVED = 4


# Why a record goes to the dead-letter topic (the reason header).
REJECTED = "CLIENT_REJECTED"
DELIVERY_COUNT_LIMIT = "MAX_DELIVERY_ATTEMPTS_REACHED"


class AcknowledgeType(enum.IntEnum):
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4  # ShareFetch/ShareAcknowledge v2 (KIP-1222)


_DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
_FINAL_STATE = {
    AcknowledgeType.GAP: RecordState.ARCHIVED,
    AcknowledgeType.ACCEPT: RecordState.ACKNOWLEDGED,
    AcknowledgeType.REJECT: RecordState.ARCHIVED,
}
MAX_ACKNOWLEDGED_RANGE = 1_000_000  # one batch may not name more offsets than this


class InFlightRecord:
    # deadline_ms: ACQUIRED, when the lock expires; AVAILABLE, when its retry back-off ends
    # (0: at once).
    __slots__ = ("deadline_ms", "delivery_count", "member_id", "state")

    def __init__(self, state: RecordState, delivery_count: int, member_id: str = "",
                 deadline_ms: int = 0) -> None:
        self.state = state
        self.delivery_count = delivery_count
        self.member_id = member_id
        self.deadline_ms = deadline_ms


@dataclass(frozen=True, slots=True)
class ShareSettings:
    record_lock_duration_ms: int = 30_000  # share.record.lock.duration.ms
    delivery_count_limit: int = 5  # share.delivery.count.limit
    max_record_locks: int = 2000  # group.share.partition.max.record.locks
    dead_letter: bool = False  # the group has errors.deadletterqueue.topic.name (KIP-1191)
    retry_backoff_ms: tuple[int, ...] = ()  # tidelog.share.retry.backoff.ms, parsed


@dataclass(frozen=True, slots=True)
class AcquiredRange:
    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class AcknowledgementBatch:
    first_offset: int
    last_offset: int
    acknowledge_types: tuple[int, ...]  # one for the whole range, or one per offset


@dataclass(frozen=True, slots=True)
class LogBatch:
    """What acquisition needs of a record batch read from the log (its header only)."""

    base_offset: int
    last_offset: int
    is_control: bool = False  # never delivered: a control batch, or an aborted transaction's
    filtered: frozenset[int] = frozenset()  # offsets the group's filter drops (acknowledged)


@dataclass(frozen=True, slots=True)
class StateBatch:
    """A run of offsets with one persisted state and delivery count (ShareSnapshot layout)."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(slots=True)
class Counters:
    acquired: int = 0
    acknowledged: int = 0
    released: int = 0
    rejected: int = 0
    archived: int = 0
    lock_expiries: int = 0
    redeliveries: int = 0
    dead_letter_copies: int = 0
    filtered: int = 0  # acknowledged by the broker: the group's filter did not match


def _add_range(ranges: list[AcquiredRange], first: int, last: int, delivery_count: int) -> None:
    """Append [first, last] to the acquired ranges, merged with the previous range when
    adjacent with the same delivery count."""
    previous = ranges[-1] if ranges else None
    if (previous is not None and previous.last_offset == first - 1
            and previous.delivery_count == delivery_count):
        ranges[-1] = AcquiredRange(previous.first_offset, last, delivery_count)
    else:
        ranges.append(AcquiredRange(first, last, delivery_count))


def check_batches(batches: Sequence[AcknowledgementBatch], renew_allowed: bool) -> ErrorCode:
    """KafkaApis' validation of a partition's acknowledgement batches: each range ordered,
    ranges ascending and not overlapping, one type per range or one per offset, known types.
    INVALID_REQUEST otherwise (the partition's acknowledgement error)."""
    previous_last = -1
    allowed = 4 if renew_allowed else 3
    for batch in batches:
        if batch.first_offset < 0 or batch.last_offset < batch.first_offset:
            return ErrorCode.INVALID_REQUEST
        if batch.last_offset - batch.first_offset >= MAX_ACKNOWLEDGED_RANGE:
            return ErrorCode.INVALID_REQUEST
        if batch.first_offset <= previous_last:
            return ErrorCode.INVALID_REQUEST
        size = batch.last_offset - batch.first_offset + 1
        if len(batch.acknowledge_types) not in (1, size):
            return ErrorCode.INVALID_REQUEST
        if any(not 0 <= kind <= allowed for kind in batch.acknowledge_types):
            return ErrorCode.INVALID_REQUEST
        previous_last = batch.last_offset
    return ErrorCode.NONE


class SharePartition:
    def __init__(self, start_offset: int, settings: ShareSettings) -> None:
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.settings = settings
        self.records: dict[int, InFlightRecord] = {}
        self.counters = Counters()
        self.dirty: set[int] = set()  # offsets whose persisted form changed since last drained
        self.start_moved = False
        # ARCHIVING offsets -> reason: to be copied to the dead-letter topic (KIP-1191).
        self.dead_letters: dict[int, str] = {}

    # ---------------------------------------------------------------- reading the state
    def acquired_count(self) -> int:
        return sum(1 for r in self.records.values() if r.state is RecordState.ACQUIRED)

    def next_deadline_ms(self, now_ms: int | None = None) -> int | None:
        """The next lock expiry, or (given `now_ms`) the next end of a retry back-off."""
        deadlines = [r.deadline_ms for r in self.records.values()
                     if r.state is RecordState.ACQUIRED or (
                         now_ms is not None and r.state is RecordState.AVAILABLE
                         and r.deadline_ms > now_ms)]
        return min(deadlines) if deadlines else None

    def first_acquirable(self, now_ms: int | None = None) -> int:
        """Where a read for acquisition should start: the lowest AVAILABLE in-flight offset
        (past its back-off, given `now_ms`), else the SPEO."""
        for offset in range(self.start_offset, self.end_offset):
            record = self.records[offset]
            if record.state is RecordState.AVAILABLE and (
                    now_ms is None or record.deadline_ms <= now_ms):
                return offset
        return self.end_offset

    def can_acquire(self, log_end_offset: int, now_ms: int | None = None) -> bool:
        if any(r.state is RecordState.AVAILABLE and (now_ms is None or r.deadline_ms <= now_ms)
               for r in self.records.values()):
            return True
        return self.end_offset < log_end_offset and self._room() > 0

    def has_room(self) -> bool:
        """Whether new offsets (past the SPEO) may be acquired now."""
        return self._room() > 0

    def _room(self) -> int:
        return self.settings.max_record_locks - (self.end_offset - self.start_offset)

    # ---------------------------------------------------------------- operations
    def acquire(
        self, member_id: str, batches: Iterable[LogBatch], max_records: int, now_ms: int
    ) -> tuple[list[AcquiredRange], list[int]]:
        """Acquire for `member_id` from the batches of a log read (ascending, starting at or
        before `first_acquirable()`): AVAILABLE in-flight offsets and new offsets past the
        SPEO, whole batches until `max_records` is reached (Kafka lets batch alignment exceed
        it), new offsets only while fewer than `max_record_locks` are in flight. AVAILABLE
        records still in their retry back-off are skipped; offsets in a batch's `filtered`
        set are acknowledged instead of acquired. Returns the acquired ranges and the indexes
        of the batches holding any of them."""
        deadline = now_ms + self.settings.record_lock_duration_ms
        ranges: list[AcquiredRange] = []
        used: list[int] = []
        count = 0
        records = self.records
        for index, batch in enumerate(batches):
            if count >= max_records:
                break
            if batch.last_offset < self.start_offset:
                continue
            if batch.base_offset > self.end_offset and self._room() > 0:
                # Offsets the log no longer holds (compaction, an aborted gap): archived.
                self._extend(batch.base_offset, RecordState.ARCHIVED)
            acquired_here = 0
            first = max(batch.base_offset, self.start_offset)
            filtered = batch.filtered
            # Offsets already in flight: only AVAILABLE ones are acquired again.
            for offset in range(first, min(batch.last_offset + 1, self.end_offset)):
                record = records[offset]
                if record.state is not RecordState.AVAILABLE or record.deadline_ms > now_ms:
                    continue
                self.dirty.add(offset)
                if batch.is_control:  # markers are never delivered
                    record.state = RecordState.ARCHIVED
                    continue
                if offset in filtered:
                    record.state = RecordState.ACKNOWLEDGED
                    self.counters.filtered += 1
                    continue
                record.state = RecordState.ACQUIRED
                record.delivery_count += 1
                record.member_id = member_id
                record.deadline_ms = deadline
                if record.delivery_count > 1:
                    self.counters.redeliveries += 1
                acquired_here += 1
                _add_range(ranges, offset, offset, record.delivery_count)
            # Offsets past the SPEO, within the in-flight bound: new records, in bulk.
            # Like Kafka, a batch is acquired whole when there is room at its start: the
            # bound may be passed by less than one batch, and a batch is never sent twice
            # for being split by it.
            new_first = max(first, self.end_offset)
            new_last = batch.last_offset if self._room() > 0 else new_first - 1
            if new_last >= new_first:
                state = RecordState.ARCHIVED if batch.is_control else RecordState.ACQUIRED
                for offset in range(new_first, new_last + 1):
                    records[offset] = InFlightRecord(state, 0 if batch.is_control else 1,
                                                     member_id, deadline)
                self.dirty.update(range(new_first, new_last + 1))
                self.end_offset = new_last + 1
                if filtered and not batch.is_control:
                    acquired_here += self._drop_filtered(ranges, new_first, new_last, filtered)
                elif not batch.is_control:
                    acquired_here += new_last - new_first + 1
                    _add_range(ranges, new_first, new_last, 1)
            if acquired_here:
                used.append(index)
                count += acquired_here
        self.counters.acquired += count
        self._advance()
        return ranges, used

    def _drop_filtered(self, ranges: list[AcquiredRange], first: int, last: int,
                       filtered: frozenset[int]) -> int:
        """New offsets [first, last] were acquired: those the filter drops become
        ACKNOWLEDGED (never delivered), the rest go into `ranges`. Returns how many remain."""
        records = self.records
        dropped = sorted(o for o in filtered if first <= o <= last)
        start = first
        for offset in dropped:  # runs between dropped offsets go out whole
            if offset > start:
                _add_range(ranges, start, offset - 1, 1)
            record = records[offset]
            record.state = RecordState.ACKNOWLEDGED
            record.delivery_count = 0
            record.member_id = ""
            start = offset + 1
        if start <= last:
            _add_range(ranges, start, last, 1)
        self.counters.filtered += len(dropped)
        return last - first + 1 - len(dropped)

    def _extend(self, new_end: int, state: RecordState) -> None:
        for offset in range(self.end_offset, new_end):
            self.records[offset] = InFlightRecord(state, 0)
            if state is RecordState.ARCHIVED:
                self.dirty.add(offset)
        self.end_offset = max(self.end_offset, new_end)

    def acknowledge(
        self, member_id: str, batches: Sequence[AcknowledgementBatch], now_ms: int,
        renew_allowed: bool = False,
    ) -> ErrorCode:
        """Apply a partition's acknowledgements from `member_id`, all or nothing: the batches
        well formed and within the in-flight records (INVALID_REQUEST), every offset named at
        or past the SPSO ACQUIRED by this member (INVALID_RECORD_STATE); offsets below the
        SPSO are done already and skipped (as Kafka)."""
        self.expire(now_ms)
        error = check_batches(batches, renew_allowed)
        if error is not ErrorCode.NONE:
            return error
        for batch in batches:
            # Kafka's SharePartition: offsets past the in-flight records are not in its cache
            # (INVALID_REQUEST); offsets below the SPSO are done already and skipped.
            if batch.last_offset >= self.end_offset:
                return ErrorCode.INVALID_REQUEST
            for offset in range(max(batch.first_offset, self.start_offset),
                                batch.last_offset + 1):
                record = self.records[offset]
                if record.state is not RecordState.ACQUIRED or record.member_id != member_id:
                    return ErrorCode.INVALID_RECORD_STATE
        for batch in batches:
            offsets = range(batch.first_offset, batch.last_offset + 1)
            if batch.last_offset < self.start_offset:
                continue
            if batch.first_offset < self.start_offset:  # one type per offset: keep the pairing
                skip = self.start_offset - batch.first_offset
                kinds = batch.acknowledge_types
                batch = AcknowledgementBatch(self.start_offset, batch.last_offset,
                                             kinds if len(kinds) == 1 else kinds[skip:])
                offsets = range(batch.first_offset, batch.last_offset + 1)
            if len(batch.acknowledge_types) == 1:
                kind = AcknowledgeType(batch.acknowledge_types[0])
                if kind is AcknowledgeType.ACCEPT:  # the common case, without a call per offset
                    records = self.records
                    for offset in offsets:
                        record = records[offset]
                        record.state = RecordState.ACKNOWLEDGED
                        record.member_id = ""
                    self.dirty.update(offsets)
                    self.counters.acknowledged += len(offsets)
                    continue
                for offset in offsets:
                    self._apply(offset, kind, now_ms)
            else:
                for offset, raw in zip(offsets, batch.acknowledge_types, strict=True):
                    self._apply(offset, AcknowledgeType(raw), now_ms)
        self._advance()
        return ErrorCode.NONE

    def _apply(self, offset: int, kind: AcknowledgeType, now_ms: int) -> None:
        record = self.records[offset]
        if kind is AcknowledgeType.RENEW:
            record.deadline_ms = now_ms + self.settings.record_lock_duration_ms
            return
        if kind is AcknowledgeType.RELEASE:
            self.counters.released += 1
            self._make_available(offset, record, now_ms)
            return
        record.state = _FINAL_STATE[kind]
        record.member_id = ""
        self.dirty.add(offset)
        if kind is AcknowledgeType.ACCEPT:
            self.counters.acknowledged += 1
        elif kind is AcknowledgeType.REJECT:
            self.counters.rejected += 1
            self._archive(offset, record, REJECTED)
        else:
            self.counters.archived += 1

    def _archive(self, offset: int, record: InFlightRecord, reason: str) -> None:
        """Undeliverable: ARCHIVING until copied to the dead-letter topic, when the group
        has one, else ARCHIVED."""
        if self.settings.dead_letter:
            record.state = RecordState.ARCHIVING
            self.dead_letters[offset] = reason
        else:
            record.state = RecordState.ARCHIVED
            self.counters.archived += 1
        self.dirty.add(offset)

    def dead_lettered(self, offsets: Iterable[int]) -> None:
        """These ARCHIVING records were copied to the dead-letter topic: ARCHIVED."""
        for offset in offsets:
            self.dead_letters.pop(offset, None)
            record = self.records.get(offset)
            if record is not None and record.state is RecordState.ARCHIVING:
                record.state = RecordState.ARCHIVED
                self.counters.archived += 1
                self.counters.dead_letter_copies += 1
                self.dirty.add(offset)
        self._advance()

    def _make_available(self, offset: int, record: InFlightRecord,
                        now_ms: int | None = None) -> None:
        """Released (`now_ms` given: after the group's retry back-off for its delivery
        count) or archived at the delivery-count limit."""
        record.member_id = ""
        if record.delivery_count >= self.settings.delivery_count_limit:
            self._archive(offset, record, DELIVERY_COUNT_LIMIT)
        else:
            record.state = RecordState.AVAILABLE
            wait_ms = backoff_ms(self.settings.retry_backoff_ms, record.delivery_count)
            record.deadline_ms = now_ms + wait_ms if now_ms is not None and wait_ms else 0
        self.dirty.add(offset)

    def expire(self, now_ms: int) -> int:
        """Locks past their deadline: their records become AVAILABLE (or ARCHIVED at the
        delivery-count limit). Returns how many expired."""
        expired = 0
        for offset, record in self.records.items():
            if record.state is RecordState.ACQUIRED and record.deadline_ms <= now_ms:
                self._make_available(offset, record, now_ms)
                expired += 1
        if expired:
            self.counters.lock_expiries += expired
            self._advance()
        return expired

    def release_member(self, member_id: str) -> int:
        """A member left or closed its share session: its acquired records go back, at once
        (no retry back-off: they were not processed and failed)."""
        released = 0
        for offset, record in self.records.items():
            if record.state is RecordState.ACQUIRED and record.member_id == member_id:
                self._make_available(offset, record)
                released += 1
        if released:
            self._advance()
        return released

    def move_start(self, log_start_offset: int) -> None:
        """Retention removed offsets below `log_start_offset`: they leave the share partition."""
        if log_start_offset <= self.start_offset:
            return
        for offset in range(self.start_offset, min(log_start_offset, self.end_offset)):
            del self.records[offset]
            self.dirty.discard(offset)
            self.dead_letters.pop(offset, None)
        self.start_offset = log_start_offset
        self.end_offset = max(self.end_offset, log_start_offset)
        self.start_moved = True

    def _advance(self) -> None:
        start = self.start_offset
        while start < self.end_offset and self.records[start].state in _DONE:
            del self.records[start]
            self.dirty.discard(start)
            start += 1
        if start != self.start_offset:
            self.start_offset = start
            self.start_moved = True

    # ---------------------------------------------------------------- persistence
    def state_batches(self, offsets: Iterable[int] | None = None) -> list[StateBatch]:
        """The persisted form of the given in-flight offsets (all when None), as runs:
        ACQUIRED is written AVAILABLE with its delivery count (Kafka's persister does too)."""
        records = self.records
        chosen: Iterable[int] = (
            range(self.start_offset, self.end_offset) if offsets is None
            else sorted(o for o in offsets if o in records)
        )
        runs: list[StateBatch] = []
        first = previous = -2
        run_state, run_count = 0, 0
        for offset in chosen:
            record = records[offset]
            state = 0 if record.state is RecordState.ACQUIRED else int(record.state)
            count = record.delivery_count
            if offset == previous + 1 and state == run_state and count == run_count:
                previous = offset
                continue
            if previous >= 0:
                runs.append(StateBatch(first, previous, run_state, run_count))
            first = previous = offset
            run_state, run_count = state, count
        if previous >= 0:
            runs.append(StateBatch(first, previous, run_state, run_count))
        return runs

    def drain_dirty(self) -> tuple[set[int], bool]:
        dirty, moved = self.dirty, self.start_moved
        self.dirty, self.start_moved = set(), False
        return dirty, moved

    def restore(self, start_offset: int, batches: Iterable[StateBatch]) -> None:
        """Put persisted state back (a ShareSnapshot, or one ShareUpdate over it): offsets
        below `start_offset` are dropped; AVAILABLE records at the delivery-count limit are
        archived (their last delivery may have been the last allowed one)."""
        self.move_start(start_offset)
        for batch in batches:
            for offset in range(max(batch.first_offset, self.start_offset),
                                batch.last_offset + 1):
                if offset >= self.end_offset:
                    self._extend(offset + 1, RecordState.AVAILABLE)
                record = self.records[offset]
                record.state = RecordState(batch.delivery_state)
                record.delivery_count = batch.delivery_count
                record.member_id = ""
                record.deadline_ms = 0  # a retry back-off is not persisted: available now
                if record.state is RecordState.ARCHIVING:  # its copy may not have been made
                    reason = (DELIVERY_COUNT_LIMIT if record.delivery_count
                              >= self.settings.delivery_count_limit else REJECTED)
                    self.dead_letters[offset] = reason
                if (record.state is RecordState.AVAILABLE
                        and record.delivery_count >= self.settings.delivery_count_limit):
                    self._archive(offset, record, DELIVERY_COUNT_LIMIT)
        self._advance()
        self.dirty.clear()
        self.start_moved = False
