"""Values PartitionLog hands out (re-exported by `tidelog.storage.log`, where callers import
them): append results, file slices for sendfile, read results, fsync tickets."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tidelog.storage.segment import LogSegment


@dataclass(frozen=True, slots=True)
class AppendResult:
    base_offset: int  # offset of the first record of the first batch
    last_offset: int
    log_append_time_ms: int  # -1 unless message.timestamp.type=LogAppendTime
    log_start_offset: int
    duplicate: bool = False  # idempotent retry: original offsets, nothing written


@dataclass(frozen=True, slots=True)
class FileSlice:
    """Bytes of whole batches in a segment file, ready for os.sendfile(sock, fd, position,
    length). The fd stays valid until the next retention pass after its segment is deleted."""

    fd: int
    position: int
    length: int

    def read_bytes(self) -> bytes:
        """The pread fallback (TLS, tests)."""
        return os.pread(self.fd, self.length, self.position)


@dataclass(frozen=True, slots=True)
class ReadResult:
    slices: tuple[FileSlice, ...]  # record bytes in offset order, whole batches only
    size: int
    log_start_offset: int
    log_end_offset: int
    next_offset: int = -1  # offset after the last batch read (the fetch's upper bound)


@dataclass(frozen=True, slots=True)
class FlushTicket:
    """What the fsync thread syncs outside the lock: dup'd fds stay valid across a roll."""

    generation: int
    log_end_offset: int
    fds: tuple[int, ...]
    sealed: tuple[LogSegment, ...]

    def fsync_and_close(self) -> None:
        """Fsync every dup'd fd, then close them all (also when an fsync fails)."""
        try:
            for fd in self.fds:
                os.fsync(fd)
        finally:
            for fd in self.fds:
                os.close(fd)
