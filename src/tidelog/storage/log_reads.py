"""Reads over a partition's segment list (the read half of Kafka's LocalLog).

`read_slices` turns an offset range into `FileSlice`s of whole batches, ready for sendfile:
the start is found by a binary search of the segment bases, then the segment's offset index
and a short scan of batch headers; the end by the same search on positions. The timestamp
lookups answer at batch granularity. `PartitionLog` checks the range and takes no lock:
callers are on the thread that owns the log, the only one that changes the segment list.
Blocking file I/O (preads of batch headers).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from tidelog.storage.results import FileSlice
from tidelog.storage.segment import LogSegment


def read_slices(
    segments: Sequence[LogSegment],
    bases: Sequence[int],
    offset: int,
    limit: int,
    max_bytes: int,
    min_one_batch: bool,
) -> tuple[tuple[FileSlice, ...], int]:
    """Whole batches from the one holding `offset`, up to max_bytes, below offset `limit`
    (min_one_batch: the first batch even if it is larger than max_bytes); and the offset
    after the last batch returned (Kafka's fetch upper bound: where aborted transactions that
    matter to this read must begin below), `offset` when none is."""
    slices: list[FileSlice] = []
    upper_bound = offset
    remaining = max(0, max_bytes)
    number = bisect.bisect_right(bases, offset) - 1
    while number < len(segments) and offset < limit:
        segment = segments[number]
        number += 1
        header = segment.find_batch(offset)
        if header is None or header.base_offset >= limit:
            if header is None:
                continue
            break
        start = header.position
        end = segment.size
        if limit < segment.next_offset:
            end = segment.position_of(limit)
        if end - start > remaining:
            end = segment.boundary_at_or_below(start + remaining, start)
            if end == start and not slices and min_one_batch:
                end = start + header.size
            if end > start:
                slices.append(FileSlice(segment.fd, start, end - start))
                upper_bound = _offset_at(segment, end)
            break
        if end > start:
            slices.append(FileSlice(segment.fd, start, end - start))
            upper_bound = _offset_at(segment, end)
            remaining -= end - start
        if end < segment.size or remaining == 0:
            break
        if number < len(segments):
            offset = bases[number]
    return tuple(slices), upper_bound


def _offset_at(segment: LogSegment, position: int) -> int:
    """The offset of the batch at `position` (a boundary), or the segment's next offset."""
    if position >= segment.size:
        return segment.next_offset
    header = segment.read_header(position)
    return segment.next_offset if header is None else header.base_offset


def offset_for_timestamp(
    segments: Sequence[LogSegment], log_start_offset: int, timestamp_ms: int
) -> tuple[int, int] | None:
    """(offset, maxTimestamp) of the first batch whose maxTimestamp >= timestamp_ms."""
    for segment in segments:
        if segment.max_timestamp < timestamp_ms or segment.next_offset <= log_start_offset:
            continue
        header = segment.find_timestamp(timestamp_ms, min_offset=log_start_offset)
        if header is not None:
            return max(header.base_offset, log_start_offset), header.max_timestamp
    return None


def max_timestamp_offset(
    segments: Sequence[LogSegment], log_start_offset: int
) -> tuple[int, int] | None:
    """(base offset, timestamp) of the first batch holding the largest timestamp, clamped
    to log_start_offset (Kafka's segment-level answer)."""
    best: LogSegment | None = None
    for segment in segments:
        if segment.size and (best is None or segment.max_timestamp > best.max_timestamp):
            best = segment
    if best is None:
        return None
    header = best.find_timestamp(best.max_timestamp)
    if header is None:
        return None
    return max(header.base_offset, log_start_offset), header.max_timestamp
