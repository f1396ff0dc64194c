"""Reading a whole partition log batch by batch (blocking I/O): how the internal topics'
owners replay them at start (`__transaction_state`, `__share_group_state`, the timer log)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from tidelog.records.batch import RecordBatch, iter_batches

if TYPE_CHECKING:
    from tidelog.storage.log import PartitionLog

READ_CHUNK_BYTES = 4 * 1024 * 1024


def iter_batches_from(partition_log: PartitionLog, start: int) -> Iterator[RecordBatch]:
    """Every batch of the log from the one holding `start` to the log end."""
    offset = max(start, partition_log.log_start_offset)
    while offset < partition_log.log_end_offset:
        read = partition_log.read(offset, READ_CHUNK_BYTES)
        data = b"".join(piece.read_bytes() for piece in read.slices)
        batches = list(iter_batches(data))
        if not batches:
            break
        yield from batches
        offset = batches[-1].next_offset
