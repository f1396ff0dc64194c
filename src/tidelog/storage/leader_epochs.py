"""Leader epoch cache of one partition and its `leader-epoch-checkpoint` file (KIP-101/279).

Blocking file I/O (small, rare writes: one per leader change). No asyncio.

The file is Kafka's text format, so Kafka's own tools read it::

    0                 version (always 0)
    <count>           number of entries that follow
    <epoch> <offset>  one line per entry: a leader epoch and the first offset written in it,
                      ascending in both columns

Written whole with `durable.write_durably` (tmp, fsync, rename, fsync dir; checkpoint.py), so
a crash leaves either the old or the new file. A malformed file is discarded (the cache is
derived data: a follower rebuilds entries from the epochs stamped in the batches it fetches).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from tidelog.errors import CorruptRecordError
from tidelog.storage.checkpoint import read_entries, write_entries

CHECKPOINT_FILE = "leader-epoch-checkpoint"
UNDEFINED = -1
_log = logging.getLogger(__name__)


def end_offset_for_epoch(
    entries: Sequence[tuple[int, int]], requested: int, log_end_offset: int
) -> tuple[int, int]:
    """Kafka's LeaderEpochFileCache.endOffsetFor, the OffsetForLeaderEpoch answer: the latest
    epoch ends at the log end offset; an older one at the start of the next epoch (the largest
    known epoch <= `requested` is named, or `requested` itself when it precedes them all);
    UNDEFINED, or an epoch above every known one: (UNDEFINED, UNDEFINED)."""
    if requested == UNDEFINED or not entries:
        return UNDEFINED, UNDEFINED
    if entries[-1][0] == requested:
        return requested, log_end_offset
    found = requested
    for epoch, start_offset in entries:
        if epoch > requested:
            return found, start_offset
        found = epoch
    return UNDEFINED, UNDEFINED


class LeaderEpochCache:
    """(epoch, start_offset) entries of one partition, persisted on every change."""

    def __init__(self, directory: Path) -> None:
        self._path = directory / CHECKPOINT_FILE
        self._entries: list[tuple[int, int]] = self._load()

    def _load(self) -> list[tuple[int, int]]:
        try:
            return [(int(epoch), int(offset)) for epoch, offset in read_entries(self._path, 2)]
        except (CorruptRecordError, ValueError) as exc:
            _log.warning("%s (%s): starting empty", self._path, exc)
            return []

    def _save(self) -> None:
        write_entries(self._path, self._entries)

    @property
    def entries(self) -> tuple[tuple[int, int], ...]:
        return tuple(self._entries)

    @property
    def latest_epoch(self) -> int:
        return self._entries[-1][0] if self._entries else UNDEFINED

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that `epoch` starts at `start_offset` (ignored unless it is a newer epoch)."""
        if epoch < 0 or (self._entries and epoch <= self._entries[-1][0]):
            return
        # An older epoch that would start at or after the new one held nothing: drop it.
        while self._entries and self._entries[-1][1] >= start_offset:
            self._entries.pop()
        self._entries.append((epoch, start_offset))
        self._save()

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(largest epoch <= `epoch`, the offset where it ends): the start of the next epoch,
        or `log_end_offset` for the latest; (UNDEFINED, UNDEFINED) if none is <= `epoch`."""
        found = UNDEFINED
        end_offset = UNDEFINED
        for index, (entry_epoch, _) in enumerate(self._entries):
            if entry_epoch > epoch:
                break
            found = entry_epoch
            following = self._entries[index + 1 : index + 2]
            end_offset = following[0][1] if following else log_end_offset
        return found, end_offset

    def epoch_start_offset(self, epoch: int) -> int:
        for entry_epoch, offset in self._entries:
            if entry_epoch == epoch:
                return offset
        return UNDEFINED

    def truncate_from_end(self, end_offset: int) -> None:
        """The log was truncated to `end_offset`: forget epochs starting at or after it."""
        kept = [entry for entry in self._entries if entry[1] < end_offset]
        if kept != self._entries:
            self._entries = kept
            self._save()
