"""Producer state of one partition: the last 5 batches of every producer id (idempotence)
and each producer's ongoing transaction (Kafka's ProducerStateManager).

A leader append checks each batch with `check()` (Kafka's rules: a stale epoch is
INVALID_PRODUCER_EPOCH, a batch equal to one of the last 5 is a duplicate answered with its
original offsets, any other sequence that does not follow the last one is
OUT_OF_ORDER_SEQUENCE_NUMBER) and commits it with `update()`. The state is derived from the log:
it is rebuilt from the newest snapshot plus a replay of the batch headers after it.

Transactions: a producer's first transactional batch opens its transaction (its base offset is
the transaction's first offset); a COMMIT/ABORT control batch (`records/control.py`) closes it
and yields a `CompletedTxn`. The first offset of the oldest open transaction is the partition's
first unstable offset, which bounds the last stable offset (LSO). Kafka's checks: a marker
with an older producer epoch is INVALID_PRODUCER_EPOCH, one from an older coordinator epoch
TRANSACTION_COORDINATOR_FENCED, a non-transactional batch while a transaction is open
INVALID_TXN_STATE.

Expiration (Kafka's producer.id.expiration.ms, `remove_expired`): a producer with no open
transaction whose last batch or marker timestamp is that old is forgotten, so a partition's
state does not grow with every producer that ever wrote; the next snapshot leaves it out.

Snapshot file `<offset, 20 digits>.snapshot` (offset = log end offset when written), big-endian
(version 1, written before transactions, lacks the two transaction fields; version 2 lacks
lastTimestamp; both are still read)::

    0  version        int16    3
    2  crc            uint32   CRC32C of every byte after this field
    6  producerCount  int32
   10  producers...            producerCount times:
         producerId             int64
         producerEpoch          int16
         coordinatorEpoch       int32    v2+: epoch of the last marker's coordinator, -1
         currentTxnFirstOffset  int64    v2+: first offset of the open transaction, -1 none
         markerTimestamp        int64    v3+: of the last COMMIT/ABORT marker, -1 (Kafka's
                                         lastTimestamp, for expiration, is the newest of
                                         it and the batches' maxTimestamp)
         batchCount             int8     0..5, oldest first
         batches...             batchCount times:
           firstSequence  int32
           lastSequence   int32
           firstOffset    int64
           lastOffset     int64
           maxTimestamp   int64

Written with `durable.write_durably` (temp file, fsync, rename, fsync dir). Pure bookkeeping
plus that file I/O.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import crc32c as _crc32c

from tidelog.errors import CorruptRecordError, ErrorCode, KafkaError
from tidelog.records.batch import RecordBatch
from tidelog.records.control import ControlRecordType, read_end_transaction_marker
from tidelog.storage.durable import write_durably

MAX_CACHED_BATCHES = 5
SNAPSHOT_SUFFIX = ".snapshot"
_SNAPSHOT_VERSION = 3
_PREFIX = struct.Struct(">hIi")
_PRODUCER_V1 = struct.Struct(">qhb")
_PRODUCER_V2 = struct.Struct(">qhiqb")
_PRODUCER = struct.Struct(">qhiqqb")
_BATCH = struct.Struct(">iiqqq")
_SEQUENCE_MODULUS = 2**31


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    max_timestamp: int


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a COMMIT/ABORT marker closed: records [first_offset, last_offset), the
    marker at last_offset."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool
    empty: bool = False  # no open transaction: nothing to index (as Kafka 4.3 does)


@dataclass(slots=True)
class ProducerEntry:
    producer_epoch: int
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=MAX_CACHED_BATCHES)
    )
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1
    marker_timestamp: int = -1  # of the last COMMIT/ABORT marker (snapshot v3+)

    @property
    def last_timestamp(self) -> int:
        """Kafka's lastTimestamp: of the newest data batch or marker of this producer."""
        batch = self.batches[-1].max_timestamp if self.batches else -1
        return max(batch, self.marker_timestamp)

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else -1


class _Header(Protocol):
    """The batch-header fields replay needs (records.batch.BatchHeader has them)."""

    @property
    def producer_id(self) -> int: ...
    @property
    def producer_epoch(self) -> int: ...
    @property
    def base_sequence(self) -> int: ...
    @property
    def base_offset(self) -> int: ...
    @property
    def last_offset_delta(self) -> int: ...
    @property
    def max_timestamp(self) -> int: ...
    @property
    def is_transactional(self) -> bool: ...


class ProducerStateManager:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its open txn

    def first_unstable_offset(self) -> int | None:
        """First offset of the oldest open transaction (None: none open)."""
        return min(self.ongoing.values()) if self.ongoing else None

    def remove_expired(self, now_ms: int, expiration_ms: int) -> list[int]:
        """Kafka's removeExpiredProducers: forget producers with no open transaction whose
        last timestamp is `expiration_ms` old (producer.id.expiration.ms); their ids."""
        expired = [
            producer_id for producer_id, entry in self.producers.items()
            if entry.current_txn_first_offset < 0
            and now_ms - entry.last_timestamp >= expiration_ms
        ]
        for producer_id in expired:
            del self.producers[producer_id]
        return expired

    def check_marker(
        self, producer_id: int, producer_epoch: int, coordinator_epoch: int
    ) -> None:
        """Kafka's appendEndTxnMarker checks for a leader append of a marker."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        if producer_epoch < entry.producer_epoch:
            raise KafkaError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"marker of producer {producer_id} epoch {producer_epoch} < "
                f"{entry.producer_epoch}",
            )
        if coordinator_epoch < entry.coordinator_epoch:
            raise KafkaError(
                ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                f"marker of coordinator epoch {coordinator_epoch} < {entry.coordinator_epoch}",
            )

    def complete_txn(
        self,
        producer_id: int,
        producer_epoch: int,
        control_type: int,
        marker_offset: int,
        coordinator_epoch: int,
        timestamp: int = -1,
    ) -> CompletedTxn:
        """Close the producer's transaction with the marker at `marker_offset`."""
        entry = self.producers.get(producer_id)
        if entry is None or entry.producer_epoch != producer_epoch:
            # A marker at a new epoch (a fenced or timed-out producer's abort) starts the
            # epoch: its sequences begin again.
            fresh = ProducerEntry(producer_epoch)
            if entry is not None:
                fresh.current_txn_first_offset = entry.current_txn_first_offset
            entry = fresh
            self.producers[producer_id] = entry
        first_offset = entry.current_txn_first_offset
        empty = first_offset < 0
        if empty:
            first_offset = marker_offset  # an empty transaction: the marker alone
        entry.current_txn_first_offset = -1
        entry.coordinator_epoch = coordinator_epoch
        entry.marker_timestamp = timestamp
        self.ongoing.pop(producer_id, None)
        return CompletedTxn(
            producer_id, first_offset, marker_offset, control_type == ControlRecordType.ABORT,
            empty,
        )

    def check(
        self,
        producer_id: int,
        producer_epoch: int,
        first_sequence: int,
        last_sequence: int,
        *,
        never_written: bool = False,
    ) -> BatchMetadata | None:
        """Validate one idempotent batch; returns the original batch if it is a duplicate."""
        entry = self.producers.get(producer_id)
        if entry is None:
            if never_written and first_sequence != 0:
                # A log that never held a record cannot have lost this producer's history, so
                # a later batch arriving first is out of order (KAFKA-15591, Kafka 4.5): else a
                # retried first request to a just-created partition is refused forever.
                raise KafkaError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"producer {producer_id}: first sequence {first_sequence} on an empty "
                    "partition, expected 0",
                )
            # Unknown producer (new, or its state expired with retention): accept, as Kafka
            # does since KIP-360, rather than fence a producer whose history was deleted.
            return None
        if producer_epoch < entry.producer_epoch:
            raise KafkaError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"producer {producer_id} epoch {producer_epoch} < {entry.producer_epoch}",
            )
        if producer_epoch > entry.producer_epoch:
            if first_sequence != 0:
                raise KafkaError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"producer {producer_id} new epoch {producer_epoch} starts at "
                    f"sequence {first_sequence}, not 0",
                )
            return None
        for cached in entry.batches:
            if cached.first_sequence == first_sequence and cached.last_sequence == last_sequence:
                return cached
        expected = (entry.last_sequence + 1) % _SEQUENCE_MODULUS
        if entry.batches and first_sequence != expected:
            raise KafkaError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"producer {producer_id}: sequence {first_sequence}, expected {expected}",
            )
        return None

    def check_append(
        self, batches: Sequence[RecordBatch], *, never_written: bool = False
    ) -> BatchMetadata | None:
        """Check one append's batches; the original batch if the append is a duplicate.
        A producer's batches inside one append must follow each other. `never_written`: the
        log has never held a record (its end offset is 0)."""
        pending: dict[int, tuple[int, int]] = {}
        for batch in batches:
            producer_id, sequence = batch.producer_id, batch.base_sequence
            if batch.is_control:
                continue  # markers: check_marker, by the writer of markers
            if producer_id >= 0 and sequence < 0:
                entry = self.producers.get(producer_id)
                if entry is not None and batch.producer_epoch < entry.producer_epoch:
                    raise KafkaError(
                        ErrorCode.INVALID_PRODUCER_EPOCH,
                        f"producer {producer_id} epoch {batch.producer_epoch} < "
                        f"{entry.producer_epoch}",
                    )
                continue
            if (
                producer_id in self.ongoing
                and not batch.is_transactional
                and batch.producer_epoch == self.producers[producer_id].producer_epoch
            ):
                raise KafkaError(
                    ErrorCode.INVALID_TXN_STATE,
                    f"producer {producer_id}: non-transactional write inside its transaction",
                )
            if producer_id < 0 or sequence < 0:
                continue
            epoch = batch.producer_epoch
            if producer_id in pending:
                last_epoch, last_sequence = pending[producer_id]
                if epoch != last_epoch or sequence != (last_sequence + 1) % _SEQUENCE_MODULUS:
                    raise KafkaError(
                        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                        f"producer {producer_id}: sequence {sequence} after {last_sequence}",
                    )
            else:
                original = self.check(
                    producer_id, epoch, sequence, batch.last_sequence, never_written=never_written
                )
                if original is not None:
                    if len(batches) == 1:
                        return original
                    raise KafkaError(
                        ErrorCode.DUPLICATE_SEQUENCE_NUMBER,
                        f"producer {producer_id}: duplicate batch inside a multi-batch append",
                    )
            pending[producer_id] = (epoch, batch.last_sequence)
        return None

    def record_append(self, batches: Sequence[RecordBatch]) -> list[CompletedTxn]:
        """Record appended batches; the transactions their markers closed."""
        completed: list[CompletedTxn] = []
        for batch in batches:
            if batch.producer_id < 0:
                continue
            if batch.is_control:
                marker = read_end_transaction_marker(batch)
                completed.append(self.complete_txn(
                    batch.producer_id, batch.producer_epoch, marker.control_type,
                    batch.base_offset, marker.coordinator_epoch, batch.max_timestamp,
                ))
            elif batch.base_sequence >= 0:
                self.update(
                    batch.producer_id, batch.producer_epoch, batch.base_sequence,
                    batch.last_sequence, batch.base_offset, batch.last_offset,
                    batch.max_timestamp, transactional=batch.is_transactional,
                )
            elif batch.is_transactional:
                self.open_txn(batch.producer_id, batch.producer_epoch, batch.base_offset)
        return completed

    def open_txn(self, producer_id: int, producer_epoch: int, first_offset: int) -> None:
        """A transactional batch without sequences (a coordinator's, e.g. TxnOffsetCommit's
        offsets in `__consumer_offsets`): it opens the producer's transaction all the same."""
        entry = self.producers.get(producer_id)
        if entry is None or entry.producer_epoch != producer_epoch:
            fresh = ProducerEntry(producer_epoch)
            if entry is not None:
                fresh.coordinator_epoch = entry.coordinator_epoch
                fresh.current_txn_first_offset = entry.current_txn_first_offset
            entry = fresh
            self.producers[producer_id] = entry
        if entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = first_offset
            self.ongoing[producer_id] = first_offset

    def replay(self, headers: Iterable[_Header]) -> None:
        """Rebuild from stored data-batch headers (recovery, truncation); control batches go
        to `complete_txn` (their type is in the record, which a header does not hold)."""
        for header in headers:
            if header.producer_id >= 0 and header.base_sequence < 0 and header.is_transactional:
                self.open_txn(header.producer_id, header.producer_epoch, header.base_offset)
            elif header.producer_id >= 0 and header.base_sequence >= 0:
                last_sequence = (header.base_sequence + header.last_offset_delta) % 2**31
                self.update(
                    header.producer_id, header.producer_epoch, header.base_sequence,
                    last_sequence, header.base_offset, header.base_offset
                    + header.last_offset_delta, header.max_timestamp,
                    transactional=header.is_transactional,
                )

    def update(
        self,
        producer_id: int,
        producer_epoch: int,
        first_sequence: int,
        last_sequence: int,
        first_offset: int,
        last_offset: int,
        max_timestamp: int,
        *,
        transactional: bool = False,
    ) -> None:
        """Record an appended batch (leader append, follower append, or replay)."""
        entry = self.producers.get(producer_id)
        if entry is None or producer_epoch != entry.producer_epoch:
            fresh = ProducerEntry(producer_epoch)
            if entry is not None:
                fresh.coordinator_epoch = entry.coordinator_epoch
                fresh.current_txn_first_offset = entry.current_txn_first_offset
            entry = fresh
            self.producers[producer_id] = entry
        entry.batches.append(
            BatchMetadata(first_sequence, last_sequence, first_offset, last_offset, max_timestamp)
        )
        if transactional and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = first_offset
            self.ongoing[producer_id] = first_offset

    # --- snapshots -------------------------------------------------------------------------
    def encode(self) -> bytes:
        body = bytearray()
        for producer_id, entry in sorted(self.producers.items()):
            body += _PRODUCER.pack(
                producer_id, entry.producer_epoch, entry.coordinator_epoch,
                entry.current_txn_first_offset, entry.marker_timestamp, len(entry.batches),
            )
            for b in entry.batches:
                body += _BATCH.pack(
                    b.first_sequence, b.last_sequence, b.first_offset, b.last_offset,
                    b.max_timestamp,
                )
        counted = struct.pack(">i", len(self.producers)) + bytes(body)
        crc = int(_crc32c.crc32c(counted))
        return struct.pack(">hI", _SNAPSHOT_VERSION, crc) + counted

    @classmethod
    def decode(cls, data: bytes) -> ProducerStateManager:
        """Parse a snapshot; any inconsistency raises CorruptRecordError (caller replays)."""
        if len(data) < _PREFIX.size:
            raise CorruptRecordError("producer snapshot too short")
        version, crc, count = _PREFIX.unpack_from(data, 0)
        if version not in (1, 2, _SNAPSHOT_VERSION) or int(_crc32c.crc32c(data[6:])) != crc:
            raise CorruptRecordError("producer snapshot version or CRC mismatch")
        state = cls()
        position = _PREFIX.size
        try:
            for _ in range(count):
                marker_timestamp = -1
                if version == 1:
                    producer_id, epoch, batch_count = _PRODUCER_V1.unpack_from(data, position)
                    coordinator_epoch, txn_first_offset = -1, -1
                    position += _PRODUCER_V1.size
                elif version == 2:
                    producer_id, epoch, coordinator_epoch, txn_first_offset, batch_count = (
                        _PRODUCER_V2.unpack_from(data, position)
                    )
                    position += _PRODUCER_V2.size
                else:
                    (producer_id, epoch, coordinator_epoch, txn_first_offset, marker_timestamp,
                     batch_count) = _PRODUCER.unpack_from(data, position)
                    position += _PRODUCER.size
                entry = ProducerEntry(epoch, coordinator_epoch=coordinator_epoch,
                                      current_txn_first_offset=txn_first_offset,
                                      marker_timestamp=marker_timestamp)
                if txn_first_offset >= 0:
                    state.ongoing[producer_id] = txn_first_offset
                for _ in range(batch_count):
                    entry.batches.append(BatchMetadata(*_BATCH.unpack_from(data, position)))
                    position += _BATCH.size
                state.producers[producer_id] = entry
        except struct.error as exc:
            raise CorruptRecordError(f"producer snapshot truncated: {exc}") from exc
        if position != len(data):
            raise CorruptRecordError("trailing bytes in producer snapshot")
        return state

    def write_snapshot(self, directory: Path, offset: int) -> Path:
        path = directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"
        write_durably(path, self.encode())
        return path


def snapshot_offsets(directory: Path) -> list[int]:
    """Offsets of the snapshot files present, ascending."""
    offsets = []
    for path in directory.glob(f"*{SNAPSHOT_SUFFIX}"):
        stem = path.name[: -len(SNAPSHOT_SUFFIX)]
        if stem.isdigit():
            offsets.append(int(stem))
    return sorted(offsets)


def load_latest_snapshot(
    directory: Path, max_offset: int
) -> tuple[int, ProducerStateManager] | None:
    """The newest readable snapshot at or below `max_offset`; unreadable ones are deleted."""
    for offset in reversed(snapshot_offsets(directory)):
        if offset > max_offset:
            continue
        path = directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"
        try:
            return offset, ProducerStateManager.decode(path.read_bytes())
        except (CorruptRecordError, OSError):
            path.unlink(missing_ok=True)
    return None


def delete_snapshots(directory: Path, offsets: Iterable[int]) -> None:
    for offset in offsets:
        (directory / f"{offset:020d}{SNAPSHOT_SUFFIX}").unlink(missing_ok=True)
