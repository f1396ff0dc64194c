"""One log cleaner pass (Kafka's Cleaner, next to LogCleaner's scheduling in cleaner.py).

A pass over one partition log, as a state table:

    BUILDING_MAP  read the dirty batches, [first dirty offset, first uncleanable offset),
                  into the offset map (key digest -> latest offset); a full map ends the scan
                  at a batch boundary: the pass then covers [log start, end_offset) only
    CLEANING      rewrite groups of consecutive sealed segments (each group <= segment.bytes)
                  into one `.cleaned` file, keeping per key only the latest record
                  (cleaned_batch.py), then swap it in for the group
    DONE          end_offset becomes the log's first dirty offset (the caller checkpoints it)

Transactions (Kafka's Cleaner with CleanedTransactionMetadata): the pass never reaches the
first unstable offset (cleaner.py stops the range before the segment holding it), so every
transactional batch it reads is decided: aborted (inside an aborted transaction of the log's
`.txnindex`) or committed. Aborted batches neither enter the map nor survive; committed ones are
compacted like any batch. A marker is kept while the pass reads any batch of its transaction;
once it reads none (the data went in an earlier pass) the marker is stamped with a delete
horizon (now + delete.retention.ms), and a pass after the horizon removes it, an ABORT
marker's `.txnindex` entry first (so a crash leaves, at worst, a marker without an entry and
without data, which readers ignore; never an entry without its marker, which would make a
read_committed reader skip the producer's later batches).

Crash safety: the cleaned segment is written as `<base>-<end>.log.cleaned`, renamed to
`.log.swap` once fsynced (the commit point), then swapped in; `cleaner_swap.py` documents the
files and the recovery that finishes or rolls back a swap a crash interrupted.

Blocking file I/O, on the thread that owns the logs (like every PartitionLog call).
"""

from __future__ import annotations

import bisect
import enum
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tidelog.errors import CorruptRecordError
from tidelog.records.batch import RecordBatch
from tidelog.records.control import ControlRecordType, read_end_transaction_marker
from tidelog.storage.cleaned_batch import (
    clean_batch,
    parse_records,
    records_section,
    stamp_delete_horizon,
)
from tidelog.storage.cleaner_swap import (
    CLEANED_SUFFIX,
    commit_cleaned_file,
    group_segments,
    install_cleaned_segment,
    read_batches,
    swap_file_name,
    write_all,
)
from tidelog.storage.offset_map import OffsetMap, key_digest
from tidelog.storage.segment import LogSegment, SegmentState

if TYPE_CHECKING:
    from tidelog.storage.log import PartitionLog


_MAX_OFFSET = 2**63 - 1


class CleanPhase(enum.Enum):
    BUILDING_MAP = "building_map"
    CLEANING = "cleaning"
    DONE = "done"


TRANSITIONS: dict[CleanPhase, frozenset[CleanPhase]] = {
    CleanPhase.BUILDING_MAP: frozenset({CleanPhase.CLEANING, CleanPhase.DONE}),
    CleanPhase.CLEANING: frozenset({CleanPhase.DONE}),
    CleanPhase.DONE: frozenset(),
}


@dataclass(frozen=True, slots=True)
class CleanableRange:
    """What a pass over a log could cover now."""

    first_dirty_offset: int
    first_uncleanable_offset: int
    segments: tuple[LogSegment, ...]  # sealed, below first_uncleanable_offset
    clean_bytes: int
    dirty_bytes: int

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


@dataclass(slots=True)
class CleanerStats:
    passes: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_removed: int = 0
    swaps: int = 0
    aborted_passes: int = 0


@dataclass(slots=True)
class CleaningPass:
    """One pass over one log (Kafka's Cleaner.clean): its cursors, its map, its cleaned file.
    `LogCleaner` owns the pass and decides when it starts, advances and ends."""

    log: PartitionLog
    cleanable: CleanableRange
    offset_map: OffsetMap
    stats: CleanerStats
    phase: CleanPhase = CleanPhase.BUILDING_MAP
    segment_number: int = 0  # cursor: index into the segments being read
    position: int = 0  # cursor: byte position in that segment
    end_offset: int = 0  # the map covers [first dirty offset, end_offset)
    groups: list[tuple[LogSegment, ...]] = field(default_factory=list)
    group_number: int = 0
    cleaned_path: Path | None = None
    cleaned_fd: int = -1
    min_horizon_ms: int | None = None
    group_changed: bool = False  # a batch of the current group was rewritten or dropped
    # Transactions: producer id -> sorted (first offset, ABORT marker offset) of its aborted
    # transactions; the producers whose committed / aborted data this pass read since their
    # last marker; the ABORT markers the current group removes (their index entries go).
    aborted: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    committed_seen: set[int] = field(default_factory=set)
    aborted_seen: set[int] = field(default_factory=set)
    removed_aborts: set[int] = field(default_factory=set)

    def transition(self, target: CleanPhase) -> None:
        if target not in TRANSITIONS[self.phase]:
            raise AssertionError(f"cleaner pass: {self.phase} -> {target}")
        self.phase = target

    @classmethod
    def start(
        cls, log: PartitionLog, cleanable: CleanableRange, offset_map: OffsetMap,
        stats: CleanerStats,
    ) -> CleaningPass:
        """A pass over `cleanable`, its cursor on the first dirty batch (`offset_map` empty)."""
        current = cls(log, cleanable, offset_map, stats, end_offset=cleanable.first_dirty_offset)
        for entry in log.aborted_transactions(log.log_start_offset, log.log_end_offset):
            current.aborted.setdefault(entry.producer_id, []).append(
                (entry.first_offset, entry.last_offset)
            )
        for spans in current.aborted.values():
            spans.sort()
        while (
            current.segment_number < len(cleanable.segments)
            and current._segment_end(current.segment_number) <= current.end_offset
        ):
            current.segment_number += 1  # clean segments: nothing to read into the map
        if current.segment_number < len(cleanable.segments):
            segment = cleanable.segments[current.segment_number]
            current.position = segment.position_of(cleanable.first_dirty_offset)
        return current

    def _segment_end(self, number: int) -> int:
        segments = self.cleanable.segments
        if number + 1 < len(segments):
            return segments[number + 1].base_offset
        return self.cleanable.first_uncleanable_offset

    def advance(self, now_ms: int, budget_bytes: int) -> None:
        """Build the map, then clean groups, for about `budget_bytes` of segment data."""
        if self.phase is CleanPhase.BUILDING_MAP:
            budget_bytes -= self._build_map(budget_bytes)
            if self.phase is CleanPhase.BUILDING_MAP:
                return
        while self.phase is CleanPhase.CLEANING and budget_bytes > 0:
            budget_bytes -= self._clean_group(now_ms, budget_bytes)

    def still_valid(self) -> bool:
        """False once the log stopped compacting or a segment of the pass went away."""
        log = self.log
        if "compact" not in log.config.cleanup_policy:
            return False
        live = {id(segment) for segment in log.segments()[:-1]}
        pending = self.cleanable.segments
        if self.phase is CleanPhase.CLEANING:
            pending = tuple(s for group in self.groups[self.group_number :] for s in group)
        return all(
            id(segment) in live and segment.state is not SegmentState.DELETED
            for segment in pending
        )

    def _build_map(self, budget_bytes: int) -> int:
        """Read dirty batches into the map; returns the bytes read."""
        offset_map = self.offset_map
        segments = self.cleanable.segments
        used = 0
        while self.segment_number < len(segments) and used < budget_bytes:
            segment = segments[self.segment_number]
            batches, next_position = read_batches(segment, self.position, budget_bytes - used)
            for batch in batches:
                if batch.records_count > offset_map.free_slots and not batch.is_control:
                    if offset_map.entries == 0:
                        raise CorruptRecordError(
                            f"batch at offset {batch.base_offset} holds more records than the "
                            f"cleaner's offset map ({offset_map.max_entries} keys)"
                        )
                    self.stats.bytes_read += used
                    self._start_cleaning()  # map full: clean what it covers
                    return used
                # Aborted records never shadow others (an aborted offset commit must not
                # replace the committed one before it); committed transactional ones do.
                if not batch.is_control and not self._is_aborted(batch):
                    for record in parse_records(batch, records_section(batch)):
                        if record.key is not None:
                            offset_map.put(key_digest(record.key), record.offset)
                self.end_offset = batch.next_offset
                used += batch.size
            self.position = next_position
            if next_position >= segment.size:
                self.end_offset = max(
                    self.end_offset, self._segment_end(self.segment_number)
                )
                self.segment_number += 1
                self.position = 0
        self.stats.bytes_read += used
        if self.segment_number >= len(segments):
            self._start_cleaning()
        return used

    def _start_cleaning(self) -> None:
        segments = self.cleanable.segments
        covered = [s for s in segments if s.base_offset < self.end_offset]
        ends = [self._segment_end(number) for number in range(len(covered))]
        self.groups = group_segments(covered, ends, self.log.config)
        self.group_number = 0
        self.segment_number = 0
        self.position = 0
        self.transition(CleanPhase.CLEANING)
        if not self.groups:
            self.transition(CleanPhase.DONE)

    def _clean_group(self, now_ms: int, budget_bytes: int) -> int:
        """Rewrite up to budget_bytes of the current group; swap it in once written."""
        group = self.groups[self.group_number]
        end = self._group_end(group)
        if self.cleaned_path is None:
            name = swap_file_name(group[0].base_offset, end, CLEANED_SUFFIX)
            self.cleaned_path = self.log.directory / name
            self.cleaned_fd = os.open(
                self.cleaned_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644
            )
        used = 0
        retention_ms = self.log.config.delete_retention_ms
        while self.segment_number < len(group) and used < budget_bytes:
            segment = group[self.segment_number]
            batches, next_position = read_batches(segment, self.position, budget_bytes - used)
            out: list[bytes | bytearray | memoryview] = []
            for batch in batches:
                used += batch.size
                if batch.base_offset >= self.end_offset:
                    out.append(batch.buffer)  # beyond the map: kept as it is
                    continue
                kept = self._clean(batch, now_ms, retention_ms)
                if kept is not batch.buffer:
                    self.group_changed = True
                if kept is None:
                    self.stats.records_removed += batch.records_count
                    continue
                result = RecordBatch(kept)
                self.stats.records_removed += batch.records_count - result.records_count
                if result.has_delete_horizon:  # always in the future: expired ones are gone
                    horizon = result.base_timestamp
                    if self.min_horizon_ms is None or horizon < self.min_horizon_ms:
                        self.min_horizon_ms = horizon
                out.append(kept)
            self.stats.bytes_written += write_all(self.cleaned_fd, out)
            self.position = next_position
            if next_position >= segment.size:
                self.segment_number += 1
                self.position = 0
        self.stats.bytes_read += used
        if self.segment_number >= len(group):
            if self.group_changed or len(group) > 1:
                self._swap(group, end)
            else:  # the same bytes: keep the old segment and its indexes
                self.discard_cleaned_file()
                self._next_group()
        return max(used, 1)

    def _is_aborted(self, batch: RecordBatch) -> bool:
        if not batch.is_transactional or batch.is_control:
            return False
        spans = self.aborted.get(batch.producer_id)
        if not spans:
            return False
        # A producer's transactions do not overlap: the last one starting at or before the
        # batch is the only candidate.
        index = bisect.bisect_right(spans, (batch.base_offset, _MAX_OFFSET)) - 1
        return index >= 0 and batch.base_offset < spans[index][1]

    def _clean(
        self, batch: RecordBatch, now_ms: int, retention_ms: int
    ) -> bytearray | memoryview | None:
        """One batch below the map's end: markers and aborted data by the transaction rules,
        the rest by key."""
        if batch.is_control:
            return self._clean_marker(batch, now_ms, retention_ms)
        if batch.is_transactional:
            if self._is_aborted(batch):
                self.aborted_seen.add(batch.producer_id)
                return None
            self.committed_seen.add(batch.producer_id)
        return clean_batch(batch, self.offset_map, now_ms=now_ms, delete_retention_ms=retention_ms)

    def _clean_marker(
        self, batch: RecordBatch, now_ms: int, retention_ms: int
    ) -> bytearray | memoryview | None:
        """Kafka's onControlBatchRead and marker retention: kept while this pass read data of
        its transaction, else stamped with a delete horizon, and removed after it."""
        producer_id = batch.producer_id
        if producer_id < 0 or batch.records_count == 0:
            return batch.buffer
        control_type = read_end_transaction_marker(batch).control_type
        if control_type == ControlRecordType.ABORT:
            seen = self.aborted_seen
        elif control_type == ControlRecordType.COMMIT:
            seen = self.committed_seen
        else:
            return batch.buffer
        if producer_id in seen:
            seen.discard(producer_id)
            return batch.buffer  # the transaction still has data in the log
        if not batch.has_delete_horizon:
            return stamp_delete_horizon(batch, now_ms + retention_ms)
        if now_ms < batch.base_timestamp:
            return batch.buffer
        if control_type == ControlRecordType.ABORT:
            self.removed_aborts.add(batch.base_offset)
        return None

    def _group_end(self, group: tuple[LogSegment, ...]) -> int:
        return self._segment_end(self.cleanable.segments.index(group[-1]))

    def _swap(self, group: tuple[LogSegment, ...], end: int) -> None:
        """.cleaned -> .swap (commit point), retire the group, .swap -> <base>.log, reopen."""
        assert self.cleaned_path is not None
        log = self.log
        base = group[0].base_offset
        if self.removed_aborts:
            # Before the commit point: an index entry must never outlive its marker.
            log.drop_aborted_entries(group, self.removed_aborts)
            self.removed_aborts = set()
        swap_path = commit_cleaned_file(self.cleaned_path, self.cleaned_fd, base, end)
        self.cleaned_fd = -1
        self.cleaned_path = None
        config = log.config

        def install() -> LogSegment:
            return install_cleaned_segment(log.directory, swap_path, base, end, config)

        log.replace_segments(group, install)
        self.stats.swaps += 1
        self._next_group()

    def _next_group(self) -> None:
        self.removed_aborts = set()
        self.group_number += 1
        self.group_changed = False
        self.segment_number = 0
        self.position = 0
        if self.group_number >= len(self.groups):
            self.transition(CleanPhase.DONE)

    def abandon(self) -> None:
        """Drop the unfinished cleaned file (the old segments stay); the pass is DONE."""
        self.discard_cleaned_file()
        if self.phase is not CleanPhase.DONE:
            self.transition(CleanPhase.DONE)

    def discard_cleaned_file(self) -> None:
        if self.cleaned_fd >= 0:
            os.close(self.cleaned_fd)
            self.cleaned_fd = -1
        if self.cleaned_path is not None:
            self.cleaned_path.unlink(missing_ok=True)
            self.cleaned_path = None
