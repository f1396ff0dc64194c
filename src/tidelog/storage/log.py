"""PartitionLog: one partition's segmented log (Kafka's UnifiedLog + LocalLog, minus replication).

Has `log_validator.py` check batches by header and CRC only (D2) and number them (next =
log_end_offset), appends with one writev per request, rolls segments, serves reads as file
slices for sendfile, applies retention, truncation and delete-records, and keeps
producer state (idempotence, ongoing transactions) with each segment's aborted-transaction
index (`transaction_index.py`): the last stable offset and read_committed reads come from them.

Threads: everything runs on the caller's thread (the broker's event loop: calls are short,
page-cache I/O) except `flush_begin` / `flush_end`, which the group-commit thread calls; the
lock guards the segment list and the recovery point between the two.
"""

from __future__ import annotations

import bisect
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from tidelog.errors import ErrorCode, KafkaError
from tidelog.records.batch import BatchHeader, RecordBatch
from tidelog.records.control import read_end_transaction_marker
from tidelog.storage import log_reads, log_validator
from tidelog.storage import producer_state as ps
from tidelog.storage.config import LogConfig
from tidelog.storage.durable import fsync_directory
from tidelog.storage.log_validator import AppendOrigin
from tidelog.storage.recovery import load_segments
from tidelog.storage.results import AppendResult, FlushTicket, ReadResult
from tidelog.storage.segment import LogSegment, SegmentState
from tidelog.storage.transaction_index import (
    AbortedTxn,
    TransactionIndex,
    collect_aborted,
    txn_index_path,
)
from tidelog.types import TopicPartition

_U32_SPAN = 2**32 - 1
_SNAPSHOTS_KEPT = 2


class PartitionLog:
    def __init__(
        self,
        topic_partition: TopicPartition,
        directory: Path,
        config: LogConfig,
        *,
        clean: bool = True,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        flush_requester: Callable[[PartitionLog], None] | None = None,
    ) -> None:
        self.topic_partition = topic_partition
        self.directory = directory
        self.config = config
        self.flush_requester = flush_requester
        self._lock = threading.Lock()
        self._generation = 0  # bumped by truncation: an in-flight fsync must not advance
        # After a failed fsync Linux may have dropped the dirty pages and a later fsync succeeds
        # anyway, so the log takes no more appends or fsyncs until a restart recovers it from
        # the recovery point (Kafka takes the log dir offline). Reads keep working.
        self.fsync_error: OSError | None = None
        self._retired: list[int] = []
        directory.mkdir(parents=True, exist_ok=True)
        loaded = load_segments(directory, config, clean=clean, recovery_point=recovery_point)
        self.recovered_segments = loaded.recovered_segments
        self.truncated_bytes = loaded.truncated_bytes
        self._segments = loaded.segments
        if not self._segments:
            self._segments = [self._new_segment(max(0, log_start_offset))]
        self._bases = [segment.base_offset for segment in self._segments]
        self._txn_indexes = {
            base: TransactionIndex(txn_index_path(directory, base)) for base in self._bases
        }
        self._log_start_offset = min(max(log_start_offset, self._bases[0]), self.log_end_offset)
        # Everything loaded is on disk: clean logs were flushed, recovered ones were fsynced.
        self._recovery_point = self.log_end_offset
        self.producer_state = self._load_producer_state()

    # --- properties ------------------------------------------------------------------------
    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    def segments(self) -> tuple[LogSegment, ...]:
        return tuple(self._segments)

    def size_bytes(self) -> int:
        return sum(segment.size for segment in self._segments)

    def segment_count(self) -> int:
        return len(self._segments)

    # --- append ----------------------------------------------------------------------------
    def append(
        self,
        batches: Sequence[RecordBatch],
        *,
        now_ms: int,
        leader_epoch: int = 0,
        origin: AppendOrigin = AppendOrigin.COORDINATOR,
    ) -> AppendResult:
        """Leader append of one request's batches for this partition, all or nothing. Produce
        passes `origin=AppendOrigin.CLIENT` (Kafka's client-batch rules); the broker's own
        writers (the group coordinator, tests' builders) keep the default."""
        self._check_fsync_error()
        total_size = log_validator.validate_batches(batches, self.config, origin)
        if self.config.compacts:
            log_validator.require_keys(
                batches, self.config.max_message_bytes, str(self.topic_partition)
            )
        for batch in batches:
            if batch.is_control and batch.producer_id >= 0:
                marker = read_end_transaction_marker(batch)
                self.producer_state.check_marker(
                    batch.producer_id, batch.producer_epoch, marker.coordinator_epoch
                )
        duplicate = self.producer_state.check_append(
            batches, never_written=self.log_end_offset == 0
        )
        if duplicate is not None:
            return AppendResult(
                duplicate.first_offset, duplicate.last_offset, -1, self._log_start_offset, True
            )
        append_time = now_ms if self.config.log_append_time else -1
        record_count = sum(batch.last_offset_delta + 1 for batch in batches)
        segment = self._maybe_roll(total_size, len(batches), record_count, now_ms)
        first_offset = self.log_end_offset
        next_offset = log_validator.assign_offsets(batches, first_offset, leader_epoch, append_time)
        segment.append(batches, total_size)
        self._after_append(batches, now_ms)
        return AppendResult(first_offset, next_offset - 1, append_time, self._log_start_offset)

    def append_raw(self, batches: Sequence[RecordBatch], *, now_ms: int = 0) -> None:
        """Follower append: batches keep their offsets and must start at log_end_offset."""
        self._check_fsync_error()
        total_size = log_validator.validate_batches(
            batches, self.config, AppendOrigin.REPLICATION
        )
        next_offset = log_validator.check_follower_offsets(batches, self.log_end_offset)
        record_count = next_offset - self.log_end_offset
        segment = self._maybe_roll(total_size, len(batches), record_count, now_ms)
        segment.append(batches, total_size)
        self._after_append(batches, now_ms)

    def _check_fsync_error(self) -> None:
        if self.fsync_error is not None:
            raise KafkaError(
                ErrorCode.KAFKA_STORAGE_ERROR, f"log offline after fsync failed: {self.fsync_error}"
            )

    def _after_append(self, batches: Sequence[RecordBatch], now_ms: int) -> None:
        segment = self._segments[-1]
        if segment.rolling_base_ms is None:
            segment.rolling_base_ms = now_ms
        for completed in self.producer_state.record_append(batches):
            if completed.is_aborted and not completed.empty:
                self._index_abort(segment.base_offset, completed)
        if self.log_end_offset - self._recovery_point >= self.config.flush_messages:
            if self.flush_requester is not None:
                self.flush_requester(self)
            else:
                self.flush()

    def _index_abort(self, base_offset: int, completed: ps.CompletedTxn) -> None:
        # Kafka's lastStableOffset(completedTxn): the first offset still undecided once this
        # one is closed, else the offset after its marker.
        first_unstable = self.producer_state.first_unstable_offset()
        last_stable = completed.last_offset + 1 if first_unstable is None else first_unstable
        self._txn_index(base_offset).append(AbortedTxn(
            completed.producer_id, completed.first_offset, completed.last_offset, last_stable
        ))

    def _txn_index(self, base_offset: int) -> TransactionIndex:
        index = self._txn_indexes.get(base_offset)
        if index is None:
            index = TransactionIndex(txn_index_path(self.directory, base_offset))
            self._txn_indexes[base_offset] = index
        return index

    # --- transactions ----------------------------------------------------------------------
    def first_unstable_offset(self) -> int | None:
        return self.producer_state.first_unstable_offset()

    def last_stable_offset(self, high_watermark: int) -> int:
        """The LSO: below it every transaction is decided (and below the high watermark)."""
        first_unstable = self.producer_state.first_unstable_offset()
        return high_watermark if first_unstable is None else min(first_unstable, high_watermark)

    def aborted_transactions(self, fetch_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [fetch_offset, upper_bound_offset) (read_committed
        fetch)."""
        start = max(0, bisect.bisect_right(self._bases, fetch_offset) - 1)
        return collect_aborted(
            (self._txn_index(base) for base in self._bases[start:]), fetch_offset,
            upper_bound_offset,
        )

    # --- rolling ---------------------------------------------------------------------------
    def _maybe_roll(
        self, total_size: int, batch_count: int, record_count: int, now_ms: int
    ) -> LogSegment:
        segment = self._segments[-1]
        if segment.size == 0:
            return segment
        started = segment.rolling_base_ms
        if (
            segment.size + total_size > self.config.segment_bytes
            or not segment.fits(batch_count)
            or (started is not None and now_ms - started > self.config.segment_ms)
            or self.log_end_offset + record_count - segment.base_offset > _U32_SPAN
        ):
            return self.roll()
        return segment

    def roll(self) -> LogSegment:
        """Seal the active segment and start one at log_end_offset; snapshot producer state."""
        log_end_offset = self.log_end_offset
        old = self._segments[-1]
        new = self._new_segment(log_end_offset)
        with self._lock:
            old.seal()
            self._segments.append(new)
            self._bases.append(new.base_offset)
        self._write_producer_snapshot()
        if self.flush_requester is not None:
            # As Kafka does on roll: fsync the sealed segment in the background, so the
            # recovery point (and the rescan after a crash) stays within the active segment.
            self.flush_requester(self)
        return new

    def _new_segment(self, base_offset: int) -> LogSegment:
        segment = LogSegment.create(
            self.directory,
            base_offset,
            index_bytes=self.config.segment_index_bytes,
            interval_bytes=self.config.index_interval_bytes,
        )
        # The new name must be durable before an fsync of the file can stand for its records:
        # a power loss can otherwise take the whole file (the partition's first segment had
        # no directory fsync at all; tests/reliability/test_power_loss.py).
        fsync_directory(self.directory)
        return segment

    # --- read ------------------------------------------------------------------------------
    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> ReadResult:
        """Whole batches from the one holding `offset`, up to max_bytes, below max_offset."""
        log_end_offset = self.log_end_offset
        if offset < self._log_start_offset or offset > log_end_offset:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"offset {offset} outside [{self._log_start_offset}, {log_end_offset}]",
            )
        limit = log_end_offset if max_offset is None else min(max_offset, log_end_offset)
        slices, upper_bound = log_reads.read_slices(
            self._segments, self._bases, offset, limit, max_bytes, min_one_batch
        )
        return ReadResult(
            slices, sum(s.length for s in slices), self._log_start_offset, log_end_offset,
            upper_bound,
        )

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, maxTimestamp) of the first batch whose maxTimestamp >= timestamp_ms."""
        return log_reads.offset_for_timestamp(self._segments, self._log_start_offset, timestamp_ms)

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """(base offset, timestamp) of the first batch holding the largest timestamp, clamped
        to log_start_offset (Kafka's segment-level answer)."""
        return log_reads.max_timestamp_offset(self._segments, self._log_start_offset)

    # --- deletion --------------------------------------------------------------------------
    def truncate_to(self, offset: int) -> None:
        """Remove every batch holding an offset >= `offset` (replication divergence)."""
        if offset >= self.log_end_offset:
            return
        with self._lock:
            self._generation += 1
            while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
                self._retire(self._segments.pop())
                self._bases.pop()
            segment = self._segments[-1]
            segment.truncate_to_position(segment.position_of(offset))
            self._recovery_point = min(self._recovery_point, self.log_end_offset)
            self._log_start_offset = min(self._log_start_offset, self.log_end_offset)
        log_end_offset = self.log_end_offset
        ps.delete_snapshots(
            self.directory, [o for o in ps.snapshot_offsets(self.directory) if o > log_end_offset]
        )
        self.producer_state = self._load_producer_state()

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: advance log_start_offset; drop sealed segments wholly below it."""
        if offset > self.log_end_offset or offset < 0:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"offset {offset} beyond log end offset {self.log_end_offset}",
            )
        if offset > self._log_start_offset:
            self._log_start_offset = offset
            self._delete_oldest(lambda segment, next_base: next_base <= offset)
        return self._log_start_offset

    def apply_retention(self, now_ms: int) -> int:
        """retention.ms / retention.bytes over sealed segments; returns segments deleted."""
        if not self.config.deletes:
            return 0
        deleted = 0
        # Kafka's order (UnifiedLog.deleteOldSegments): size, then time, so a segment the size
        # pass uncovers is still checked for age in the same run.
        if self.config.retention_bytes >= 0:
            excess = [self.size_bytes() - self.config.retention_bytes]

            def over_size(segment: LogSegment, _: int) -> bool:
                if excess[0] - segment.size < 0:
                    return False
                excess[0] -= segment.size
                return True

            deleted += self._delete_oldest(over_size)
        retention_ms = self.config.retention_ms
        if retention_ms >= 0:
            deleted += self._delete_oldest(
                lambda segment, _: segment.max_timestamp < now_ms - retention_ms
            )
        return deleted

    def _delete_oldest(self, predicate: Callable[[LogSegment, int], bool]) -> int:
        """Delete sealed segments from the oldest while predicate(segment, next base) holds."""
        deleted = 0
        with self._lock:
            while len(self._segments) > 1 and predicate(self._segments[0], self._bases[1]):
                self._retire(self._segments.pop(0))
                self._bases.pop(0)
                deleted += 1
            self._log_start_offset = max(self._log_start_offset, self._bases[0])
        return deleted

    def _retire(self, segment: LogSegment) -> None:
        # The fd stays open until the next close_retired(): a FileSlice handed out earlier
        # may still be in a sendfile.
        self._retired.append(segment.delete())
        index = self._txn_indexes.pop(segment.base_offset, None)
        if index is not None:
            index.delete()
        else:
            txn_index_path(self.directory, segment.base_offset).unlink(missing_ok=True)

    # --- log cleaner hook (owned by storage/cleaner.py) ---------------------------------------
    def drop_aborted_entries(self, group: Sequence[LogSegment], marker_offsets: set[int]) -> None:
        """Log cleaner, before it swaps in a cleaned `group`: the aborted transactions whose
        ABORT markers it removed leave the `.txnindex` of the segment holding them."""
        with self._lock:
            for segment in group:
                self._txn_index(segment.base_offset).drop(marker_offsets)

    def replace_segments(
        self, old: Sequence[LogSegment], install: Callable[[], LogSegment]
    ) -> None:
        """Log cleaner: retire the consecutive sealed segments `old`, then put the segment
        `install()` opens (it renames the cleaned file into place) where they were."""
        with self._lock:
            first = self._segments.index(old[0])
            if self._segments[first : first + len(old)] != list(old) or first + len(old) >= len(
                self._segments
            ):
                raise AssertionError("replace_segments: not consecutive sealed segments")
            # The cleaned segment (same base offset as old[0]) keeps the aborted transactions
            # of the ones it replaces: the later segments' entries are appended to old[0]'s
            # index first (marker order holds), so a crash in between duplicates entries
            # rather than losing them.
            merged = self._txn_index(old[0].base_offset)
            for segment in old[1:]:
                for entry in self._txn_index(segment.base_offset).entries:
                    merged.append(entry)
            del self._txn_indexes[old[0].base_offset]
            for segment in old:
                if segment is old[0]:
                    self._retired.append(segment.delete())
                else:
                    self._retire(segment)
            new = install()
            self._txn_indexes[new.base_offset] = merged
            self._segments[first : first + len(old)] = [new]
            self._bases[first : first + len(old)] = [new.base_offset]

    def close_retired(self) -> None:
        retired, self._retired = self._retired, []
        for fd in retired:
            os.close(fd)

    # --- durability ------------------------------------------------------------------------
    def flush_begin(self) -> FlushTicket:
        """Fsync thread: what to sync for everything appended so far (fds are dup'd)."""
        with self._lock:
            if self.fsync_error is not None:
                raise OSError(f"log offline after fsync failed: {self.fsync_error}")
            pending = [s for s in self._segments if s.state is not SegmentState.FLUSHED]
            return FlushTicket(
                self._generation,
                self.log_end_offset,
                tuple(os.dup(s.fd) for s in pending),
                tuple(s for s in pending if s.state is SegmentState.SEALED),
            )

    def flush_end(self, ticket: FlushTicket) -> None:
        """Fsync thread, after fsyncing the ticket's fds: advance the recovery point."""
        with self._lock:
            if ticket.generation == self._generation:
                self._recovery_point = max(self._recovery_point, ticket.log_end_offset)
            for segment in ticket.sealed:
                if segment.state is SegmentState.SEALED:
                    segment.transition(SegmentState.FLUSHED)

    def flush(self) -> None:
        """Fsync everything now (close, tests, no group-commit thread)."""
        ticket = self.flush_begin()
        ticket.fsync_and_close()
        self.flush_end(ticket)

    def close(self, *, flush: bool = True) -> None:
        """Flush, snapshot producer state, trim indexes, close files."""
        if flush and self.fsync_error is None:
            self.flush()
            self._write_producer_snapshot()
        with self._lock:
            for segment in self._segments:
                segment.close()
        self.close_retired()

    # --- producer state --------------------------------------------------------------------
    def _write_producer_snapshot(self) -> None:
        self.producer_state.write_snapshot(self.directory, self.log_end_offset)
        offsets = ps.snapshot_offsets(self.directory)
        ps.delete_snapshots(self.directory, offsets[:-_SNAPSHOTS_KEPT])

    def _load_producer_state(self) -> ps.ProducerStateManager:
        """Newest snapshot <= log end offset, then replay the batch headers after it."""
        log_end_offset = self.log_end_offset
        stale = [o for o in ps.snapshot_offsets(self.directory) if o > log_end_offset]
        ps.delete_snapshots(self.directory, stale)
        loaded = ps.load_latest_snapshot(self.directory, log_end_offset)
        start, state = loaded if loaded is not None else (0, ps.ProducerStateManager())
        # The aborted-transaction entries after the snapshot are rebuilt by the replay (D4).
        for index in self._txn_indexes.values():
            index.truncate_to(start)
        if start >= log_end_offset:
            return state
        self.producer_state = state
        for segment in self._segments[bisect.bisect_right(self._bases, start) - 1 :]:
            data_run: list[BatchHeader] = []
            for header in segment.scan_headers(segment.position_of(start)):
                if not header.is_control or header.producer_id < 0:
                    data_run.append(header)
                    continue
                state.replay(data_run)
                data_run = []
                raw = os.pread(segment.fd, header.size, header.position)
                marker = read_end_transaction_marker(RecordBatch(raw))
                completed = state.complete_txn(
                    header.producer_id, header.producer_epoch, marker.control_type,
                    header.base_offset, marker.coordinator_epoch, header.max_timestamp,
                )
                if completed.is_aborted and not completed.empty:
                    self._index_abort(segment.base_offset, completed)
            state.replay(data_run)
        return state

