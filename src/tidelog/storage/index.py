"""Sparse offset and time indexes of one segment: preallocated, memory-mapped, derived data.

`.index` (offset index), 8-byte entries, big-endian::

    0  relativeOffset  uint32   batch baseOffset minus the segment's base offset
    4  position        uint32   byte position of that batch in the segment's .log

`.timeindex` (time index), 12-byte entries, big-endian::

    0  timestamp       int64    largest maxTimestamp of every batch up to and including ...
    8  relativeOffset  uint32   ... this batch (its baseOffset minus the segment's base offset)

Both files are sized to `segment.index.bytes` (rounded down to whole entries; sparse, with
disk blocks reserved 64 KiB ahead of the entries so a full disk is an OSError, not SIGBUS) when
their first entry is written (an index with no entries stays empty, unmapped) and trimmed to
their entries when the segment is sealed or closed, so on open `entries = size // entry_size`.
Entries are strictly increasing in every field. An entry is added for a batch when more than
`index.interval.bytes` were appended since the previous entry; the time index adds one only when
the segment's max timestamp grew, plus a final one when the segment is sealed, closed or rebuilt.
The `.log` is the truth (ARCHITECTURE D4): a file that fails `check()` is deleted and rebuilt.

Blocking file I/O; owned by the thread that appends to the log.
"""

from __future__ import annotations

import mmap
import operator
import os
import struct
from array import array
from pathlib import Path

from tidelog.errors import CorruptRecordError

_OFFSET_ENTRY = struct.Struct(">II")
_TIME_ENTRY = struct.Struct(">qI")
_ALLOCATE_BYTES = 64 * 1024  # disk blocks reserved ahead of the entries, per posix_fallocate


class IndexCorruptError(CorruptRecordError):
    """An index file fails its sanity check; the caller rebuilds it from the .log."""


class _MappedIndex:
    """A file of fixed-size entries, mapped read/write, with an entry count.

    Lazy, as Kafka's LazyIndex: no file descriptor is held and nothing is mapped until an entry
    is written or read, and the descriptor used to map is closed at once (the mapping keeps
    its own), so an idle partition costs the broker one descriptor (its .log), not five."""

    entry: struct.Struct

    def __init__(self, path: Path, max_index_bytes: int, *, writable: bool) -> None:
        self.path = path
        self.max_entries = max(1, max_index_bytes // self.entry.size)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
        finally:
            os.close(fd)
        if size % self.entry.size:
            raise IndexCorruptError(f"{path.name}: size {size} is not a multiple of entries")
        self.entries = size // self.entry.size
        self._mmap: mmap.mmap | None = None
        self._allocated_bytes = size  # file bytes backed by disk blocks (not a sparse hole)
        self.writable = writable

    def _mapping(self) -> mmap.mmap | None:
        """The mapping, made on first use: writable at max entries (the file sized sparse to
        it), else exactly the entries. None while there is nothing to map."""
        if self._mmap is None:
            slots = max(self.max_entries, self.entries) if self.writable else self.entries
            size = slots * self.entry.size
            if size == 0:
                return None
            fd = os.open(self.path, os.O_RDWR)
            try:
                if self.writable and os.fstat(fd).st_size < size:
                    os.ftruncate(fd, size)
                self._mmap = mmap.mmap(fd, size)
            finally:
                os.close(fd)
        return self._mmap

    def _unmap(self) -> None:
        if self._mmap is not None:
            self._mmap.close()
            self._mmap = None

    def make_writable(self) -> None:
        """Appends may follow: the next use maps the file at max entries; `_store` allocates
        blocks ahead of the entries it writes, because storing into a sparse page of a full
        disk is SIGBUS."""
        if self.writable:
            return
        self._unmap()
        self._allocated_bytes = self.entries * self.entry.size
        self.writable = True

    def trim(self) -> None:
        """Cut the file to its entries (seal and close): on open, size says how many."""
        size = self.entries * self.entry.size
        if self._mmap is not None:
            self._mmap.flush()
        self._unmap()
        fd = os.open(self.path, os.O_RDWR)
        try:
            os.ftruncate(fd, size)
        finally:
            os.close(fd)
        self._allocated_bytes = size
        self.writable = False

    @property
    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    def flush(self) -> None:
        if self._mmap is not None:
            self._mmap.flush()

    def reset(self) -> None:
        """Drop every entry (rebuild)."""
        self.truncate_entries(0)

    def truncate_entries(self, entries: int) -> None:
        if entries < self.entries:
            mapped = self._mapping()
            if mapped is not None:
                start = entries * self.entry.size
                end = self.entries * self.entry.size
                mapped[start:end] = bytes(end - start)
        self.entries = entries

    def raw_entries(self) -> bytes:
        if self.entries == 0:
            return b""
        mapped = self._mapping()
        assert mapped is not None
        return mapped[: self.entries * self.entry.size]

    def _store(self, *fields: int) -> None:
        mapped = self._mapping() if self.writable else None
        if mapped is None or self.entries >= len(mapped) // self.entry.size:
            raise IndexCorruptError(f"{self.path.name}: append to a full or sealed index")
        start = self.entries * self.entry.size
        if start + self.entry.size > self._allocated_bytes:
            # Disk full raises OSError (ENOSPC) here, before the mapping is touched.
            length = min(_ALLOCATE_BYTES, len(mapped) - self._allocated_bytes)
            fd = os.open(self.path, os.O_RDWR)
            try:
                os.posix_fallocate(fd, self._allocated_bytes, length)
            finally:
                os.close(fd)
            self._allocated_bytes += length
        self.entry.pack_into(mapped, start, *fields)
        self.entries += 1

    def _field(self, slot: int, field: int) -> int:
        mapped = self._mapping()
        assert mapped is not None
        value: int = self.entry.unpack_from(mapped, slot * self.entry.size)[field]
        return value

    def close(self) -> None:
        self._unmap()


def _strictly_increasing(values: array[int]) -> bool:
    return all(map(operator.lt, values, values[1:]))


class OffsetIndex(_MappedIndex):
    entry = _OFFSET_ENTRY

    def append(self, relative_offset: int, position: int) -> None:
        self._store(relative_offset, position)

    def entry_at(self, slot: int) -> tuple[int, int]:
        mapped = self._mapping()
        assert mapped is not None
        rel, pos = self.entry.unpack_from(mapped, slot * self.entry.size)
        return int(rel), int(pos)

    def lookup(self, relative_offset: int) -> tuple[int, int]:
        """(relativeOffset, position) of the last entry <= relative_offset, else (0, 0)."""
        slot = self._last_slot_le(relative_offset, 0)
        return (0, 0) if slot < 0 else self.entry_at(slot)

    def lookup_position(self, position: int) -> tuple[int, int]:
        """Last entry whose position <= `position`, else (0, 0): a batch boundary below it."""
        slot = self._last_slot_le(position, 1)
        return (0, 0) if slot < 0 else self.entry_at(slot)

    def _last_slot_le(self, target: int, field: int) -> int:
        low, high = 0, self.entries
        while low < high:
            middle = (low + high) // 2
            if self._field(middle, field) <= target:
                low = middle + 1
            else:
                high = middle
        return low - 1

    def check(self, log_size: int, offset_span: int) -> None:
        """Kafka's sanity check on every entry: both columns increase, all inside the log."""
        values = array("I", self.raw_entries())
        if values and struct.pack("=I", 1) != struct.pack(">I", 1):
            values.byteswap()
        relative, position = values[0::2], values[1::2]
        if not _strictly_increasing(relative) or not _strictly_increasing(position):
            raise IndexCorruptError(f"{self.path.name}: entries not increasing")
        if position and position[0] == 0:
            # The first batch is never indexed (bytes since the last entry start at 0), so a
            # zero entry is preallocated space that a crash left unwritten.
            raise IndexCorruptError(f"{self.path.name}: zero entry")
        if relative and (relative[-1] >= offset_span or position[-1] >= log_size):
            raise IndexCorruptError(f"{self.path.name}: entry points past the log")


class TimeIndex(_MappedIndex):
    entry = _TIME_ENTRY

    def append(self, timestamp: int, relative_offset: int) -> None:
        self._store(timestamp, relative_offset)

    def entry_at(self, slot: int) -> tuple[int, int]:
        mapped = self._mapping()
        assert mapped is not None
        timestamp, rel = self.entry.unpack_from(mapped, slot * self.entry.size)
        return int(timestamp), int(rel)

    @property
    def last_timestamp(self) -> int:
        return self.entry_at(self.entries - 1)[0] if self.entries else -1

    def last_entry_below(self, timestamp: int) -> tuple[int, int] | None:
        """The last entry with timestamp < `timestamp`: every batch up to it is older."""
        low, high = 0, self.entries
        while low < high:
            middle = (low + high) // 2
            if self._field(middle, 0) < timestamp:
                low = middle + 1
            else:
                high = middle
        return None if low == 0 else self.entry_at(low - 1)

    def check(self, offset_span: int) -> None:
        raw = self.raw_entries()
        count = self.entries
        stamps = struct.unpack(f">{count}q", _column(raw, 0, 8, 12))
        offsets = array("I", _column(raw, 8, 4, 12))
        if offsets and struct.pack("=I", 1) != struct.pack(">I", 1):
            offsets.byteswap()
        if not all(map(operator.lt, stamps, stamps[1:])) or not _strictly_increasing(offsets):
            raise IndexCorruptError(f"{self.path.name}: entries not increasing")
        if offsets and offsets[-1] >= offset_span:
            raise IndexCorruptError(f"{self.path.name}: entry points past the log")


def _column(raw: bytes, start: int, width: int, stride: int) -> bytes:
    """One fixed-width column of a table of `stride`-byte rows, gathered without a Python loop."""
    rows = len(raw) // stride
    if rows == 0:
        return b""
    out = bytearray(rows * width)
    for byte in range(width):
        out[byte::width] = raw[start + byte :: stride]
    return bytes(out)
