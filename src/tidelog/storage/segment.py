"""One log segment: `<base offset, 20 digits>.log` plus its `.index` and `.timeindex`.

The `.log` is a plain concatenation of record batches (magic v2, layout and header struct in
`tidelog/records/batch.py`) whose offsets are already assigned (`log_validator.py` numbers
them); the segment never renumbers.
Positions are u32 (segment.bytes <= 2^31 - 1). The indexes (layout in `index.py`) are derived.

Lifecycle (a state table; Archived arrives with tiered storage):

    ACTIVE   receives appends; indexes preallocated and writable
    SEALED   rolled: no more appends, indexes trimmed; bytes may not be on disk yet
    FLUSHED  sealed and fsynced (log, indexes): everything before it is durable
    DELETED  files unlinked (retention, truncation, delete-records); fd closed later

Truncation (replication) may turn the newest surviving SEALED/FLUSHED segment ACTIVE again.
Opening an existing segment from its indexes (and checking them) is the loader's job
(`recovery.py`); `rebuild` recreates the indexes from the log for it, for truncation and for
the cleaner. Blocking file I/O, called from the thread that owns the partition log.
"""

from __future__ import annotations

import enum
import mmap
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import crc32c as _crc32c

from tidelog.records.batch import (
    CRC_POSITION,
    CRC_START,
    HEADER_SIZE,
    MAGIC_POSITION,
    MAGIC_V2,
    BatchHeader,
    RecordBatch,
    read_batch_header,
)
from tidelog.storage.index import IndexCorruptError, OffsetIndex, TimeIndex

_IOV_MAX = 1024
_U32_SPAN = 2**32 - 1


class SegmentState(enum.Enum):
    ACTIVE = "active"
    SEALED = "sealed"
    FLUSHED = "flushed"
    DELETED = "deleted"


TRANSITIONS: dict[SegmentState, frozenset[SegmentState]] = {
    SegmentState.ACTIVE: frozenset({SegmentState.SEALED, SegmentState.DELETED}),
    SegmentState.SEALED: frozenset(
        {SegmentState.FLUSHED, SegmentState.DELETED, SegmentState.ACTIVE}
    ),
    SegmentState.FLUSHED: frozenset({SegmentState.DELETED, SegmentState.ACTIVE}),
    SegmentState.DELETED: frozenset(),
}


def log_path(directory: Path, base_offset: int, suffix: str) -> Path:
    return directory / f"{base_offset:020d}{suffix}"


class LogSegment:
    def __init__(
        self, directory: Path, base_offset: int, *, index_bytes: int, interval_bytes: int
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.interval_bytes = interval_bytes
        self.index_bytes = index_bytes
        self.path = log_path(directory, base_offset, ".log")
        # O_APPEND: writes land at the end even after a reopen or an ftruncate
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self.size = os.fstat(self.fd).st_size
        self.state = SegmentState.ACTIVE
        self.next_offset = base_offset  # exclusive end offset of the batches it holds
        self.max_timestamp = -1
        self.last_batch_offset = -1  # base offset of the last batch (final time-index entry)
        self.bytes_since_index_entry = 0
        self.rolling_base_ms: int | None = None  # now_ms of the first append since open
        self.offset_index: OffsetIndex
        self.time_index: TimeIndex
        self._indexes_open = False

    # --- opening ---------------------------------------------------------------------------
    @classmethod
    def create(
        cls, directory: Path, base_offset: int, *, index_bytes: int, interval_bytes: int
    ) -> LogSegment:
        for suffix in (".log", ".index", ".timeindex"):
            log_path(directory, base_offset, suffix).unlink(missing_ok=True)
        segment = cls(
            directory, base_offset, index_bytes=index_bytes, interval_bytes=interval_bytes
        )
        segment.open_indexes(writable=True)
        return segment

    def open_indexes(self, *, writable: bool) -> None:
        offset_path = log_path(self.directory, self.base_offset, ".index")
        time_path = log_path(self.directory, self.base_offset, ".timeindex")
        if not writable and not (offset_path.exists() and time_path.exists()):
            raise IndexCorruptError(f"index files of segment {self.base_offset} missing")
        self.offset_index = OffsetIndex(offset_path, self.index_bytes, writable=writable)
        try:
            self.time_index = TimeIndex(time_path, self.index_bytes, writable=writable)
        except (IndexCorruptError, OSError):
            self.offset_index.close()
            raise
        self._indexes_open = True

    def close_indexes(self) -> None:
        if self._indexes_open:
            self.offset_index.close()
            self.time_index.close()
            self._indexes_open = False

    # --- state -----------------------------------------------------------------------------
    def transition(self, target: SegmentState) -> None:
        if target not in TRANSITIONS[self.state]:
            raise AssertionError(f"segment {self.base_offset}: {self.state} -> {target}")
        self.state = target

    # --- appending -------------------------------------------------------------------------
    def fits(self, batch_count: int) -> bool:
        """Room for `batch_count` more index entries plus the final time-index entry."""
        return (
            self.offset_index.entries + batch_count <= self.offset_index.max_entries
            and self.time_index.entries + batch_count + 1 <= self.time_index.max_entries
        )

    def append(self, batches: Sequence[RecordBatch], total_size: int) -> None:
        """Write already-numbered batches with one writev (no copies) and index them.

        All or nothing: on an I/O error (disk full) the file and the indexes are cut back to
        where they were, so the next append lands at `size` and nothing partial is left."""
        buffers = [batch.buffer for batch in batches]
        offset_entries, time_entries = self.offset_index.entries, self.time_index.entries
        saved = (self.max_timestamp, self.last_batch_offset, self.bytes_since_index_entry)
        try:
            written = 0
            for start in range(0, len(buffers), _IOV_MAX):
                written += os.writev(self.fd, buffers[start : start + _IOV_MAX])
            if written != total_size:
                self._finish_short_write(buffers, written)
            position = self.size
            for batch in batches:
                self._index_batch(position, batch.base_offset, batch.size, batch.max_timestamp)
                self.last_batch_offset = batch.base_offset
                position += batch.size
        except OSError:
            os.ftruncate(self.fd, self.size)
            self.offset_index.truncate_entries(offset_entries)
            self.time_index.truncate_entries(time_entries)
            self.max_timestamp, self.last_batch_offset, self.bytes_since_index_entry = saved
            raise
        self.size = position
        self.next_offset = batches[-1].next_offset

    def _finish_short_write(self, buffers: list[memoryview], written: int) -> None:
        """A regular file writes everything unless the disk is full; finish or fail loudly."""
        data = memoryview(b"".join(buffers))[written:]
        while data:
            count = os.write(self.fd, data)
            if count <= 0:
                raise OSError("short write to the segment")
            data = data[count:]

    def _index_batch(self, position: int, base_offset: int, size: int, max_ts: int) -> None:
        if max_ts > self.max_timestamp:
            self.max_timestamp = max_ts
        if self.bytes_since_index_entry > self.interval_bytes:
            relative = base_offset - self.base_offset
            self.offset_index.append(relative, position)
            if self.max_timestamp > self.time_index.last_timestamp:
                self.time_index.append(self.max_timestamp, relative)
            self.bytes_since_index_entry = 0
        self.bytes_since_index_entry += size

    def append_final_time_entry(self) -> None:
        if self.last_batch_offset >= 0 and self.max_timestamp > self.time_index.last_timestamp:
            self.time_index.append(self.max_timestamp, self.last_batch_offset - self.base_offset)

    def flush(self) -> None:
        """Fsync the log and msync the indexes (the log cleaner's swap; the group-commit
        thread syncs dup'd fds instead)."""
        os.fsync(self.fd)
        self.offset_index.flush()
        self.time_index.flush()

    def seal(self) -> None:
        self.append_final_time_entry()
        self.offset_index.trim()
        self.time_index.trim()
        self.transition(SegmentState.SEALED)

    # --- reading ---------------------------------------------------------------------------
    def read_header(self, position: int) -> BatchHeader | None:
        if self.size - position < HEADER_SIZE:
            return None
        raw = os.pread(self.fd, HEADER_SIZE, position)
        if len(raw) < HEADER_SIZE:
            return None
        return read_batch_header(raw, 0, position)

    def iter_headers(self, position: int, end: int | None = None) -> Iterator[BatchHeader]:
        """Batch headers from `position` (a batch boundary) to `end`, one pread each."""
        limit = self.size if end is None else end
        while position < limit:
            header = self.read_header(position)
            if header is None or header.size < HEADER_SIZE:
                return
            yield header
            position += header.size

    def find_batch(self, offset: int) -> BatchHeader | None:
        """The first batch whose last offset >= `offset` (index lookup, then a header scan)."""
        relative = max(0, offset - self.base_offset)
        _, position = self.offset_index.lookup(min(relative, _U32_SPAN))
        for header in self.iter_headers(position):
            if header.last_offset >= offset:
                return header
        return None

    def position_of(self, offset: int) -> int:
        """Byte position of the first batch whose last offset >= offset, else the size."""
        header = self.find_batch(offset)
        return self.size if header is None else header.position

    def boundary_at_or_below(self, position: int, floor: int) -> int:
        """The largest batch boundary in [floor, position] (floor itself is a boundary)."""
        _, start = self.offset_index.lookup_position(position)
        boundary = max(start, floor)
        for header in self.iter_headers(boundary, self.size):
            if header.position + header.size > position:
                break
            boundary = header.position + header.size
        return boundary

    def find_timestamp(self, timestamp: int, *, min_offset: int = 0) -> BatchHeader | None:
        """The first batch whose maxTimestamp >= `timestamp` (and last offset >= min_offset)."""
        if self.max_timestamp < timestamp:
            return None
        entry = self.time_index.last_entry_below(timestamp)
        position = 0 if entry is None else self.offset_index.lookup(entry[1])[1]
        for header in self.iter_headers(position):
            if header.max_timestamp >= timestamp and header.last_offset >= min_offset:
                return header
        return None

    def scan_headers(self, position: int) -> Iterator[BatchHeader]:
        """Every batch header from `position` through one read-only mapping (bulk replay)."""
        size = self.size
        if size - position < HEADER_SIZE:
            return
        with mmap.mmap(self.fd, size, access=mmap.ACCESS_READ) as data:
            while size - position >= HEADER_SIZE:
                header = read_batch_header(data, position, position)
                if header.size < HEADER_SIZE or position + header.size > size:
                    return
                yield header
                position += header.size

    # --- recovery --------------------------------------------------------------------------
    def rebuild(self, *, validate: bool, expected_offset: int, sealed: bool) -> int:
        """Recreate both indexes from the log (D4) with the rule used on append; with
        `validate`, check each batch's size, magic, CRC and offsets and truncate the file at
        the first invalid byte. Returns the bytes truncated."""
        self.close_indexes()
        for suffix in (".index", ".timeindex"):
            log_path(self.directory, self.base_offset, suffix).unlink(missing_ok=True)
        self.open_indexes(writable=True)
        self.max_timestamp = -1
        self.last_batch_offset = -1
        self.bytes_since_index_entry = 0
        self.next_offset = max(self.base_offset, expected_offset)
        file_size = os.fstat(self.fd).st_size
        position = 0
        if file_size:
            with mmap.mmap(self.fd, file_size, access=mmap.ACCESS_READ) as data:
                position = self._scan(data, file_size, validate)
        if position < file_size:
            os.ftruncate(self.fd, position)
        self.size = position
        self.append_final_time_entry()
        if sealed:
            self.offset_index.trim()
            self.time_index.trim()
        return file_size - position

    def _scan(self, data: mmap.mmap, file_size: int, validate: bool) -> int:
        position = 0
        view = memoryview(data)
        try:
            while file_size - position >= HEADER_SIZE:
                header = read_batch_header(data, position, position)
                end = position + header.size
                if header.size < HEADER_SIZE or end > file_size:
                    break
                if validate and not self._batch_ok(view, header, end):
                    break
                self._index_batch(position, header.base_offset, header.size, header.max_timestamp)
                self.last_batch_offset = header.base_offset
                self.next_offset = header.last_offset + 1
                position = end
        finally:
            view.release()
        return position

    def _batch_ok(self, view: memoryview, header: BatchHeader, end: int) -> bool:
        position = header.position
        if view[position + MAGIC_POSITION] != MAGIC_V2:
            return False
        if header.base_offset < self.next_offset or header.last_offset_delta < 0:
            return False
        if header.last_offset - self.base_offset > _U32_SPAN:
            return False
        crc = int.from_bytes(view[position + CRC_POSITION : position + CRC_START], "big")
        return int(_crc32c.crc32c(view[position + CRC_START : end])) == crc

    def truncate_to_position(self, position: int) -> None:
        """Cut the log (replication truncation) and rebuild the indexes; becomes ACTIVE."""
        os.ftruncate(self.fd, position)
        self.rebuild(validate=False, expected_offset=self.base_offset, sealed=False)
        if self.state is not SegmentState.ACTIVE:
            self.transition(SegmentState.ACTIVE)

    # --- closing ---------------------------------------------------------------------------
    def close(self) -> None:
        """Clean close: the final time entry, trimmed indexes (their size is their count)."""
        if self.state is SegmentState.DELETED:
            return
        if self.offset_index.writable:
            self.append_final_time_entry()
            self.offset_index.trim()
            self.time_index.trim()
        self.close_indexes()
        os.close(self.fd)
        self.fd = -1

    def delete(self) -> int:
        """Unlink the files; returns the fd, which stays readable for in-flight FileSlices."""
        self.close_indexes()
        for suffix in (".index", ".timeindex"):
            log_path(self.directory, self.base_offset, suffix).unlink(missing_ok=True)
        self.path.unlink(missing_ok=True)
        self.transition(SegmentState.DELETED)
        fd, self.fd = self.fd, -1
        return fd

