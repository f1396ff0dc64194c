"""Between coordinator records and `__consumer_offsets` record batches.

`encode_batch` turns an operation's records into one magic v2 batch (key and value bytes as
documented in `coordinator.records`; a tombstone has a null value); `iter_coordinator_records`
reads the batches of a partition back, skipping control batches, so that loading a shard is
`shard.load(iter_coordinator_records(bytes_of_the_partition), now_ms)`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from tidelog.coordinator.records import CoordinatorRecord, decode_record
from tidelog.coordinator.txn_offsets import TransactionalRecord, TransactionEnd
from tidelog.errors import CorruptRecordError
from tidelog.records.batch import iter_batches
from tidelog.records.builder import NewRecord, build_batch
from tidelog.records.control import ControlRecordType, read_end_transaction_marker
from tidelog.records.record import iter_records


def encode_batch(records: Sequence[CoordinatorRecord], now_ms: int) -> bytearray:
    """One batch holding `records` in order (at least one), stamped `now_ms`."""
    return build_batch(
        [NewRecord(value=r.value_bytes(), key=r.key_bytes()) for r in records], now_ms=now_ms
    )


def iter_coordinator_records(data: bytes | memoryview) -> Iterator[CoordinatorRecord]:
    """Every coordinator record in a run of whole batches, in offset order."""
    for batch in iter_batches(data):
        if batch.is_control:
            continue
        for record in iter_records(batch):
            if record.key is None:
                raise CorruptRecordError(f"__consumer_offsets record {record.offset} has no key")
            yield decode_record(record.key, record.value)


def iter_logged_records(
    data: bytes | memoryview,
) -> Iterator[CoordinatorRecord | TransactionalRecord | TransactionEnd]:
    """Like `iter_coordinator_records`, with transactions: records of transactional batches
    come wrapped with their producer id, COMMIT/ABORT markers as `TransactionEnd`."""
    for batch in iter_batches(data):
        if batch.is_control:
            if batch.producer_id >= 0:
                marker = read_end_transaction_marker(batch)
                yield TransactionEnd(
                    batch.producer_id, marker.control_type == ControlRecordType.COMMIT
                )
            continue
        for record in iter_records(batch):
            if record.key is None:
                raise CorruptRecordError(f"__consumer_offsets record {record.offset} has no key")
            decoded = decode_record(record.key, record.value)
            if batch.is_transactional:
                yield TransactionalRecord(batch.producer_id, decoded)
            else:
                yield decoded
