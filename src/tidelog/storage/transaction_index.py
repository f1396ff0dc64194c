"""The aborted-transaction index of one segment: `<base offset, 20 digits>.txnindex`.

Kafka's TransactionIndex format: a plain concatenation of 34-byte entries, one per aborted
transaction whose ABORT marker lies in this segment, in marker-offset order, big-endian::

    0  version           int16   0
    2  producerId        int64
   10  firstOffset       int64   offset of the transaction's first record (may be in an
                                 earlier segment)
   18  lastOffset        int64   offset of the ABORT marker
   26  lastStableOffset  int64   the partition's LSO right after the abort (Kafka's
                                 "lastStableOffset": the first offset still undecided, or
                                 lastOffset + 1)

Derived data (D4): recovery rebuilds the entries of every replayed segment from the ABORT
markers in the log (`PartitionLog._load_producer_state`). The entries are kept in memory too:
aborted transactions are few next to records, and a read_committed fetch asks on every call.
A partial trailing entry (crash mid-write) is cut on open. Blocking file I/O, called from the
thread that owns the partition log.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tidelog.storage.durable import write_durably

TXN_INDEX_SUFFIX = ".txnindex"
_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(
            _VERSION, self.producer_id, self.first_offset, self.last_offset,
            self.last_stable_offset,
        )


def txn_index_path(directory: Path, base_offset: int) -> Path:
    return directory / f"{base_offset:020d}{TXN_INDEX_SUFFIX}"


class TransactionIndex:
    """One segment's aborted transactions, in memory and in its `.txnindex` file."""

    __slots__ = ("entries", "path")

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: list[AbortedTxn] = []
        if path.exists():
            data = path.read_bytes()
            whole = len(data) - len(data) % ENTRY_SIZE
            for position in range(0, whole, ENTRY_SIZE):
                version, *fields = _ENTRY.unpack_from(data, position)
                if version != _VERSION:
                    whole = position  # unknown bytes: cut here, recovery replays the rest
                    break
                self.entries.append(AbortedTxn(*fields))
            if whole != len(data):
                os.truncate(path, whole)

    def append(self, entry: AbortedTxn) -> None:
        if self.entries and entry.last_offset <= self.entries[-1].last_offset:
            raise AssertionError(
                f"aborted txn at {entry.last_offset} not after {self.entries[-1].last_offset}"
            )
        self.entries.append(entry)
        with open(self.path, "ab") as file:
            file.write(entry.encode())

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or after `offset` (truncation, replay)."""
        keep = [entry for entry in self.entries if entry.last_offset < offset]
        if len(keep) == len(self.entries):
            return
        self.entries = keep
        if keep:
            with open(self.path, "r+b") as file:
                file.truncate(len(keep) * ENTRY_SIZE)
        else:
            self.path.unlink(missing_ok=True)

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """Kafka's collectAbortedTxns: entries overlapping [fetch_offset, upper_bound_offset),
        and whether the search is complete (an entry's LSO reached the upper bound: no later
        segment can hold an abort of a transaction that began below it)."""
        found: list[AbortedTxn] = []
        for entry in self.entries:
            if entry.last_offset >= fetch_offset and entry.first_offset < upper_bound_offset:
                found.append(entry)
            if entry.last_stable_offset >= upper_bound_offset:
                return found, True
        return found, False

    def drop(self, marker_offsets: set[int]) -> None:
        """Log cleaner: forget the entries whose ABORT marker it removes; the file is
        replaced durably, since an entry must never outlive its marker."""
        keep = [entry for entry in self.entries if entry.last_offset not in marker_offsets]
        if len(keep) == len(self.entries):
            return
        self.entries = keep
        write_durably(self.path, b"".join(entry.encode() for entry in keep))

    def delete(self) -> None:
        self.entries = []
        self.path.unlink(missing_ok=True)


def collect_aborted(
    indexes: Iterable[TransactionIndex], fetch_offset: int, upper_bound_offset: int
) -> list[AbortedTxn]:
    """Aborted transactions overlapping [fetch_offset, upper_bound_offset) over the indexes of
    the segment holding fetch_offset and every later one (LocalLog.collectAbortedTransactions)."""
    result: list[AbortedTxn] = []
    for index in indexes:
        found, complete = index.collect(fetch_offset, upper_bound_offset)
        result.extend(found)
        if complete:
            break
    return result
