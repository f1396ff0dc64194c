"""Log compaction (`cleanup.policy=compact`): Kafka's LogCleaner in bounded steps.

This module schedules, like Kafka's LogCleaner + LogCleanerManager: which log to clean, when,
each log's first dirty offset (`cleaner-offset-checkpoint`) and delete horizons;
`cleaner_pass.py` does one pass (Kafka's Cleaner: build the offset map, rewrite and swap).

The active segment is never touched, nor any segment at or after the first one holding a
record younger than min.compaction.lag.ms, nor any at or after the one holding the first
unstable offset (the first record of the oldest open transaction: Kafka's cleaner stops at the
last stable offset, so it never decides about a transaction still open). A log is picked when
its dirty bytes over cleanable bytes reach min.cleanable.dirty.ratio, or when a delete horizon
stamped by an earlier pass has passed (its tombstones and markers can go). Each `clean_step`
reads at most about `budget_bytes` of segment data, so the broker's loop never waits long; the
map's memory is fixed (offset_map.py).

Blocking file I/O, on the thread that owns the logs (like every PartitionLog call).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from tidelog.errors import CorruptRecordError
from tidelog.storage.checkpoint import read_checkpoint, write_checkpoint
from tidelog.storage.cleaner_pass import CleanableRange, CleanerStats, CleaningPass, CleanPhase
from tidelog.storage.offset_map import OffsetMap
from tidelog.storage.segment import LogSegment
from tidelog.types import TopicPartition

if TYPE_CHECKING:
    from collections.abc import Iterable

    from tidelog.storage.log import PartitionLog

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
DEFAULT_MAP_MEMORY_BYTES = 16 * 1024 * 1024  # Kafka: log.cleaner.dedupe.buffer.size
DEFAULT_BACKOFF_MS = 15_000  # Kafka: log.cleaner.backoff.ms
DEFAULT_STEP_BYTES = 1024 * 1024  # segment bytes read per step: keeps each step short
_LOG = logging.getLogger(__name__)


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
        self._pass: CleaningPass | None = None
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
        first_unstable = log.first_unstable_offset()
        cleanable: list[LogSegment] = []
        clean_bytes = dirty_bytes = 0
        for number, segment in enumerate(segments[:-1]):
            if (lag_ms > 0 and segment.max_timestamp > now_ms - lag_ms) or (
                first_unstable is not None and segments[number + 1].base_offset > first_unstable
            ):
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
            if not current.still_valid():
                self._abort(current, "segments changed under the cleaner")
            else:
                current.advance(now_ms, max(1, budget_bytes))
                if current.phase is CleanPhase.DONE:
                    self._finish(current)
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
    def _start(self, log: PartitionLog, now_ms: int) -> CleaningPass:
        if self._map is None:
            self._map = OffsetMap(self.map_memory_bytes)
        self._map.clear()
        cleanable = self.cleanable_range(log, now_ms)
        current = CleaningPass.start(log, cleanable, self._map, self.stats)
        self._pass = current
        self.stats.passes += 1
        return current

    def _finish(self, current: CleaningPass) -> None:
        tp = current.log.topic_partition
        self._first_dirty[tp] = current.end_offset
        if current.min_horizon_ms is None:
            self._horizons.pop(tp, None)
        else:
            self._horizons[tp] = current.min_horizon_ms
        self.write_checkpoint()

    def _abort(self, current: CleaningPass, why: str) -> None:
        _LOG.info("log cleaner: pass over %s abandoned: %s", current.log.topic_partition, why)
        current.abandon()
        self.stats.aborted_passes += 1
        if self._pass is current:
            self._pass = None

    def write_checkpoint(self) -> None:
        if self.data_dir is not None:
            write_checkpoint(self.data_dir / CLEANER_OFFSET_CHECKPOINT, self._first_dirty)

    def close(self) -> None:
        if self._pass is not None:
            self._abort(self._pass, "cleaner closed")
        self._map = None
