"""Log compaction (`cleanup.policy=compact`): Kafka's LogCleaner in bounded steps.

A pass over one partition log, like Kafka's cleaner thread, as a state table:

    BUILDING_MAP  read the dirty batches, [first dirty offset, first uncleanable offset),
                  into the offset map (key digest -> latest offset); a full map ends the scan
                  at a batch boundary: the pass then covers [log start, end_offset) only
    CLEANING      rewrite groups of consecutive sealed segments (each group <= segment.bytes)
                  into one `.cleaned` file, keeping per key only the latest record
                  (cleaned_batch.py), then swap it in for the group
    DONE          end_offset becomes the log's first dirty offset (cleaner-offset-checkpoint)

The active segment is never touched, nor any segment at or after the first one holding a
record younger than min.compaction.lag.ms. A log is picked when its dirty bytes over cleanable
bytes reach min.cleanable.dirty.ratio, or when a delete horizon stamped by an earlier pass
has passed (its tombstones can go). Each `clean_step` reads at most about `budget_bytes` of
segment data, so the broker's loop never waits long; the map's memory is fixed (offset_map.py).

Crash safety: the cleaned segment is written as `<base>-<end>.log.cleaned`, renamed to
`.log.swap` once fsynced (the commit point), then swapped in; `cleaner_swap.py` documents the
files and the recovery that finishes or rolls back a swap a crash interrupted.

Blocking file I/O, on the thread that owns the logs (like every PartitionLog call).
"""

from __future__ import annotations

import enum
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tidelog.errors import CorruptRecordError
from tidelog.records.batch import RecordBatch
from tidelog.storage.checkpoint import read_checkpoint, write_checkpoint
from tidelog.storage.cleaned_batch import clean_batch, parse_records, records_section
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
from tidelog.types import TopicPartition

if TYPE_CHECKING:
    from collections.abc import Iterable

    from tidelog.storage.log import PartitionLog

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
DEFAULT_MAP_MEMORY_BYTES = 16 * 1024 * 1024  # Kafka: log.cleaner.dedupe.buffer.size
DEFAULT_BACKOFF_MS = 15_000  # Kafka: log.cleaner.backoff.ms
DEFAULT_STEP_BYTES = 1024 * 1024  # segment bytes read per step: keeps each step short
_LOG = logging.getLogger(__name__)


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
class _Pass:
    log: PartitionLog
    cleanable: CleanableRange
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

    def transition(self, target: CleanPhase) -> None:
        if target not in TRANSITIONS[self.phase]:
            raise AssertionError(f"cleaner pass: {self.phase} -> {target}")
        self.phase = target


class LogCleaner:
    """Compacts the logs of one data dir, one pass at a time with one offset map."""

    def __init__(
        self,
        data_dir: Path | None = None,
        *,
        map_memory_bytes: int = DEFAULT_MAP_MEMORY_BYTES,
        backoff_ms: int = DEFAULT_BACKOFF_MS,
    ) -> None:
        """`data_dir` holds cleaner-offset-checkpoint; None keeps first dirty offsets in memory.
        The map is allocated at the first pass."""
        self.data_dir = data_dir
        self.map_memory_bytes = map_memory_bytes
        self.backoff_ms = backoff_ms
        self.stats = CleanerStats()
        self.uncleanable: set[TopicPartition] = set()
        self._map: OffsetMap | None = None
        self._pass: _Pass | None = None
        self._next_check_ms = -(2**63)
        self._first_dirty: dict[TopicPartition, int] = {}
        self._horizons: dict[TopicPartition, int] = {}
        if data_dir is not None:
            try:
                self._first_dirty = read_checkpoint(data_dir / CLEANER_OFFSET_CHECKPOINT)
            except CorruptRecordError:
                self._first_dirty = {}  # cleaning from the log start again is always safe

    @property
    def offset_map_bytes(self) -> int:
        """Memory the offset map holds (0 until the first pass)."""
        return 0 if self._map is None else self._map.memory_bytes

    # --- scheduling ------------------------------------------------------------------------
    def first_dirty_offset(self, log: PartitionLog) -> int:
        offset = self._first_dirty.get(log.topic_partition, log.log_start_offset)
        if not log.log_start_offset <= offset <= log.log_end_offset:
            return log.log_start_offset  # truncated or advanced past it
        return offset

    def cleanable_range(self, log: PartitionLog, now_ms: int) -> CleanableRange:
        segments = log.segments()
        first_dirty = self.first_dirty_offset(log)
        limit = segments[-1].base_offset
        lag_ms = log.config.min_compaction_lag_ms
        cleanable: list[LogSegment] = []
        clean_bytes = dirty_bytes = 0
        for number, segment in enumerate(segments[:-1]):
            if lag_ms > 0 and segment.max_timestamp > now_ms - lag_ms:
                limit = segment.base_offset
                break
            cleanable.append(segment)
            if segments[number + 1].base_offset <= first_dirty:
                clean_bytes += segment.size
            else:
                dirty_bytes += segment.size
        return CleanableRange(first_dirty, limit, tuple(cleanable), clean_bytes, dirty_bytes)

    def needs_cleaning(self, log: PartitionLog, now_ms: int) -> bool:
        if "compact" not in log.config.cleanup_policy or log.topic_partition in self.uncleanable:
            return False
        cleanable = self.cleanable_range(log, now_ms)
        if cleanable.dirty_bytes and (
            cleanable.dirty_ratio >= log.config.min_cleanable_dirty_ratio
        ):
            return True
        horizon = self._horizons.get(log.topic_partition)
        return horizon is not None and now_ms >= horizon and bool(cleanable.segments)

    def step(
        self, logs: Iterable[PartitionLog], now_ms: int, budget_bytes: int = DEFAULT_STEP_BYTES
    ) -> bool:
        """LogManager.tick: continue the pass in progress or start one on the dirtiest log;
        returns True while work is pending. Looks for work at most every backoff_ms."""
        current = self._pass
        if current is not None:
            return self.clean_step(current.log, now_ms, budget_bytes)
        if now_ms < self._next_check_ms:
            return False
        best: PartitionLog | None = None
        best_ratio = -1.0
        for log in logs:
            if self.needs_cleaning(log, now_ms):
                ratio = self.cleanable_range(log, now_ms).dirty_ratio
                if ratio > best_ratio:
                    best, best_ratio = log, ratio
        if best is None:
            self._next_check_ms = now_ms + self.backoff_ms
            return False
        return self.clean_step(best, now_ms, budget_bytes)

    def clean_step(self, log: PartitionLog, now_ms: int, budget_bytes: int) -> bool:
        """Do about `budget_bytes` of cleaning work on `log` (a pass in progress on another
        log is abandoned); returns True while more work is pending for it."""
        current = self._pass
        if current is not None and current.log is not log:
            self._abort(current, "another log asked for cleaning")
            current = None
        if current is None:
            if not self.needs_cleaning(log, now_ms):
                return False
            current = self._start(log, now_ms)
        try:
            self._advance(current, now_ms, max(1, budget_bytes))
        except (CorruptRecordError, OSError) as error:
            _LOG.error("log cleaner: %s is uncleanable: %s", log.topic_partition, error)
            self.uncleanable.add(log.topic_partition)
            self._abort(current, str(error))
            return False
        if current.phase is CleanPhase.DONE:
            self._pass = None
            return self.needs_cleaning(log, now_ms)
        return True

    def forget(self, topic_partition: TopicPartition) -> None:
        """The log was deleted."""
        if self._pass is not None and self._pass.log.topic_partition == topic_partition:
            self._abort(self._pass, "log deleted")
        self._first_dirty.pop(topic_partition, None)
        self._horizons.pop(topic_partition, None)
        self.uncleanable.discard(topic_partition)

    # --- a pass ----------------------------------------------------------------------------
    def _start(self, log: PartitionLog, now_ms: int) -> _Pass:
        if self._map is None:
            self._map = OffsetMap(self.map_memory_bytes)
        self._map.clear()
        cleanable = self.cleanable_range(log, now_ms)
        current = _Pass(log, cleanable, end_offset=cleanable.first_dirty_offset)
        while (
            current.segment_number < len(cleanable.segments)
            and self._segment_end(current, current.segment_number) <= current.end_offset
        ):
            current.segment_number += 1  # clean segments: nothing to read into the map
        if current.segment_number < len(cleanable.segments):
            segment = cleanable.segments[current.segment_number]
            current.position = segment.position_of(cleanable.first_dirty_offset)
        self._pass = current
        self.stats.passes += 1
        return current

    def _segment_end(self, current: _Pass, number: int) -> int:
        segments = current.cleanable.segments
        if number + 1 < len(segments):
            return segments[number + 1].base_offset
        return current.cleanable.first_uncleanable_offset

    def _advance(self, current: _Pass, now_ms: int, budget_bytes: int) -> None:
        if not self._still_valid(current):
            self._abort(current, "segments changed under the cleaner")
            return
        if current.phase is CleanPhase.BUILDING_MAP:
            budget_bytes -= self._build_map(current, budget_bytes)
            if current.phase is CleanPhase.BUILDING_MAP:
                return
        while current.phase is CleanPhase.CLEANING and budget_bytes > 0:
            budget_bytes -= self._clean_group(current, now_ms, budget_bytes)
        if current.phase is CleanPhase.DONE:
            self._finish(current)

    def _still_valid(self, current: _Pass) -> bool:
        log = current.log
        if "compact" not in log.config.cleanup_policy:
            return False
        live = {id(segment) for segment in log.segments()[:-1]}
        pending = current.cleanable.segments
        if current.phase is CleanPhase.CLEANING:
            pending = tuple(s for group in current.groups[current.group_number :] for s in group)
        return all(
            id(segment) in live and segment.state is not SegmentState.DELETED
            for segment in pending
        )

    def _build_map(self, current: _Pass, budget_bytes: int) -> int:
        """Read dirty batches into the map; returns the bytes read."""
        offset_map = self._map
        assert offset_map is not None
        segments = current.cleanable.segments
        used = 0
        while current.segment_number < len(segments) and used < budget_bytes:
            segment = segments[current.segment_number]
            batches, next_position = read_batches(segment, current.position, budget_bytes - used)
            for batch in batches:
                if batch.records_count > offset_map.free_slots and not batch.is_control:
                    if offset_map.entries == 0:
                        raise CorruptRecordError(
                            f"batch at offset {batch.base_offset} holds more records than the "
                            f"cleaner's offset map ({offset_map.max_entries} keys)"
                        )
                    self.stats.bytes_read += used
                    self._start_cleaning(current)  # map full: clean what it covers
                    return used
                if not batch.is_control:
                    for record in parse_records(batch, records_section(batch)):
                        if record.key is not None:
                            offset_map.put(key_digest(record.key), record.offset)
                current.end_offset = batch.next_offset
                used += batch.size
            current.position = next_position
            if next_position >= segment.size:
                current.end_offset = max(
                    current.end_offset, self._segment_end(current, current.segment_number)
                )
                current.segment_number += 1
                current.position = 0
        self.stats.bytes_read += used
        if current.segment_number >= len(segments):
            self._start_cleaning(current)
        return used

    def _start_cleaning(self, current: _Pass) -> None:
        segments = current.cleanable.segments
        covered = [s for s in segments if s.base_offset < current.end_offset]
        ends = [self._segment_end(current, number) for number in range(len(covered))]
        current.groups = group_segments(covered, ends, current.log.config)
        current.group_number = 0
        current.segment_number = 0
        current.position = 0
        current.transition(CleanPhase.CLEANING)
        if not current.groups:
            current.transition(CleanPhase.DONE)

    def _clean_group(self, current: _Pass, now_ms: int, budget_bytes: int) -> int:
        """Rewrite up to budget_bytes of the current group; swap it in once written."""
        offset_map = self._map
        assert offset_map is not None
        group = current.groups[current.group_number]
        end = self._group_end(current, group)
        if current.cleaned_path is None:
            name = swap_file_name(group[0].base_offset, end, CLEANED_SUFFIX)
            current.cleaned_path = current.log.directory / name
            current.cleaned_fd = os.open(
                current.cleaned_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644
            )
        used = 0
        retention_ms = current.log.config.delete_retention_ms
        while current.segment_number < len(group) and used < budget_bytes:
            segment = group[current.segment_number]
            batches, next_position = read_batches(segment, current.position, budget_bytes - used)
            out: list[bytes | bytearray | memoryview] = []
            for batch in batches:
                used += batch.size
                if batch.base_offset >= current.end_offset:
                    out.append(batch.buffer)  # beyond the map: kept as it is
                    continue
                kept = clean_batch(
                    batch, offset_map, now_ms=now_ms, delete_retention_ms=retention_ms
                )
                if kept is not batch.buffer:
                    current.group_changed = True
                if kept is None:
                    self.stats.records_removed += batch.records_count
                    continue
                result = RecordBatch(kept)
                self.stats.records_removed += batch.records_count - result.records_count
                if result.has_delete_horizon:  # always in the future: expired ones are gone
                    horizon = result.base_timestamp
                    if current.min_horizon_ms is None or horizon < current.min_horizon_ms:
                        current.min_horizon_ms = horizon
                out.append(kept)
            self.stats.bytes_written += write_all(current.cleaned_fd, out)
            current.position = next_position
            if next_position >= segment.size:
                current.segment_number += 1
                current.position = 0
        self.stats.bytes_read += used
        if current.segment_number >= len(group):
            if current.group_changed or len(group) > 1:
                self._swap(current, group, end)
            else:  # the same bytes: keep the old segment and its indexes
                self._discard_cleaned_file(current)
                self._next_group(current)
        return max(used, 1)

    def _group_end(self, current: _Pass, group: tuple[LogSegment, ...]) -> int:
        return self._segment_end(current, current.cleanable.segments.index(group[-1]))

    def _swap(self, current: _Pass, group: tuple[LogSegment, ...], end: int) -> None:
        """.cleaned -> .swap (commit point), retire the group, .swap -> <base>.log, reopen."""
        assert current.cleaned_path is not None
        log = current.log
        base = group[0].base_offset
        swap_path = commit_cleaned_file(current.cleaned_path, current.cleaned_fd, base, end)
        current.cleaned_fd = -1
        current.cleaned_path = None
        config = log.config

        def install() -> LogSegment:
            return install_cleaned_segment(log.directory, swap_path, base, end, config)

        log.replace_segments(group, install)
        self.stats.swaps += 1
        self._next_group(current)

    def _next_group(self, current: _Pass) -> None:
        current.group_number += 1
        current.group_changed = False
        current.segment_number = 0
        current.position = 0
        if current.group_number >= len(current.groups):
            current.transition(CleanPhase.DONE)

    def _finish(self, current: _Pass) -> None:
        tp = current.log.topic_partition
        self._first_dirty[tp] = current.end_offset
        if current.min_horizon_ms is None:
            self._horizons.pop(tp, None)
        else:
            self._horizons[tp] = current.min_horizon_ms
        self.write_checkpoint()

    def _abort(self, current: _Pass, why: str) -> None:
        _LOG.info("log cleaner: pass over %s abandoned: %s", current.log.topic_partition, why)
        self._discard_cleaned_file(current)
        if current.phase is not CleanPhase.DONE:
            current.transition(CleanPhase.DONE)
        self.stats.aborted_passes += 1
        if self._pass is current:
            self._pass = None

    @staticmethod
    def _discard_cleaned_file(current: _Pass) -> None:
        if current.cleaned_fd >= 0:
            os.close(current.cleaned_fd)
            current.cleaned_fd = -1
        if current.cleaned_path is not None:
            current.cleaned_path.unlink(missing_ok=True)
            current.cleaned_path = None

    def write_checkpoint(self) -> None:
        if self.data_dir is not None:
            write_checkpoint(self.data_dir / CLEANER_OFFSET_CHECKPOINT, self._first_dirty)

    def close(self) -> None:
        if self._pass is not None:
            self._abort(self._pass, "cleaner closed")
        self._map = None
