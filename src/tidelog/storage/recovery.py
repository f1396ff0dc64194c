"""Opening a partition directory: clean load or crash recovery (ARCHITECTURE D3); Kafka's
LogLoader, segment by segment.

Clean start (the data dir held `.clean-shutdown`): every segment is opened from its indexes;
no `.log` is read except the batch headers after the newest segment's last index entry.

Unclean start: segments entirely below the recovery point are trusted (they were fsynced); the
segment holding the recovery point and every later one are rescanned: each batch's size, magic,
CRC and offsets are checked, the file is cut at the first invalid byte, every later segment is
deleted, and the indexes are rebuilt. Missing or corrupt index files are rebuilt in any case:
`load_segment` spot-checks a clean segment's indexes against a few batch headers and rebuilds
them from the log (`LogSegment.rebuild`) when they disagree. Blocking file I/O, run before the
log serves anything.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tidelog.storage.cleaner_swap import complete_interrupted_clean
from tidelog.storage.config import LogConfig
from tidelog.storage.index import IndexCorruptError
from tidelog.storage.segment import LogSegment, SegmentState

_STRAY_SUFFIXES = (".index", ".timeindex", ".txnindex", ".tmp")
_U32_SPAN = 2**32 - 1
_VERIFY_MAX_HEADERS = 256  # headers read to check one time-index entry; beyond: trusted


@dataclass(slots=True)
class LoadResult:
    segments: list[LogSegment]
    recovered_segments: int = 0
    truncated_bytes: int = 0
    deleted_segments: int = 0


def segment_base_offsets(directory: Path) -> list[int]:
    bases = []
    for path in directory.glob("*.log"):
        stem = path.stem
        if stem.isdigit():
            bases.append(int(stem))
    return sorted(bases)


def _remove_strays(directory: Path, bases: set[int]) -> None:
    """Index files without a .log, and temp files, left by a crash mid-roll or mid-write."""
    for path in directory.iterdir():
        if path.name.endswith(".tmp") or (
            path.suffix in _STRAY_SUFFIXES and path.stem.isdigit()
            and int(path.stem) not in bases
        ):
            path.unlink(missing_ok=True)


def load_segments(
    directory: Path, config: LogConfig, *, clean: bool, recovery_point: int
) -> LoadResult:
    complete_interrupted_clean(directory, config)  # log cleaner: finish or undo a swap
    bases = segment_base_offsets(directory)
    _remove_strays(directory, set(bases))
    result = LoadResult([])
    sizes = {"index_bytes": config.segment_index_bytes,
             "interval_bytes": config.index_interval_bytes}
    for number, base in enumerate(bases):
        next_base = bases[number + 1] if number + 1 < len(bases) else None
        last = next_base is None
        beyond_recovery_point = next_base is None or next_base > recovery_point
        needs_recovery = not clean and beyond_recovery_point
        if not needs_recovery:
            result.segments.append(
                load_segment(directory, base, next_base_offset=next_base, **sizes)
            )
            continue
        # Rescan this segment; the first one that loses bytes ends the log.
        segment = LogSegment(directory, base, **sizes)
        previous_end = result.segments[-1].next_offset if result.segments else base
        truncated = segment.rebuild(validate=True, expected_offset=previous_end, sealed=not last)
        os.fsync(segment.fd)
        result.recovered_segments += 1
        result.segments.append(segment)
        if truncated or (not last and segment.next_offset > bases[number + 1]):
            result.truncated_bytes += truncated
            _drop_later(directory, bases[number + 1 :], result)
            if not last:
                segment.offset_index.make_writable()
                segment.time_index.make_writable()
            break
        if not last:
            segment.state = SegmentState.FLUSHED
    return result


def _drop_later(directory: Path, bases: list[int], result: LoadResult) -> None:
    for base in bases:
        for suffix in (".log", ".index", ".timeindex", ".txnindex"):
            (directory / f"{base:020d}{suffix}").unlink(missing_ok=True)
        result.deleted_segments += 1


def load_segment(
    directory: Path,
    base_offset: int,
    *,
    index_bytes: int,
    interval_bytes: int,
    next_base_offset: int | None,
) -> LogSegment:
    """Open without reading the log (clean start); a bad index is rebuilt from the log.

    `next_base_offset` is the following segment's base (None for the newest segment,
    whose end is found by a short header scan after its last index entry)."""
    segment = LogSegment(
        directory, base_offset, index_bytes=index_bytes, interval_bytes=interval_bytes
    )
    active = next_base_offset is None
    span = (next_base_offset if next_base_offset is not None else base_offset + _U32_SPAN)
    try:
        segment.open_indexes(writable=False)
        segment.offset_index.check(segment.size, span - base_offset)
        segment.time_index.check(span - base_offset)
        _verify_against_log(segment)
    except (IndexCorruptError, OSError):
        segment.rebuild(validate=False, expected_offset=base_offset, sealed=not active)
    else:
        if next_base_offset is None:
            _load_tail(segment)
        else:
            segment.max_timestamp = segment.time_index.last_timestamp
            segment.next_offset = next_base_offset if segment.size else base_offset
    if active:
        segment.offset_index.make_writable()
        segment.time_index.make_writable()
    else:
        segment.state = SegmentState.FLUSHED
    return segment


def _verify_against_log(segment: LogSegment) -> None:
    """Spot-check index entries against batch headers (a few preads, bounded): the last
    offset entry must start a batch with that offset; the first and last time entries
    must equal the max timestamp of the batches they summarise."""
    if segment.offset_index.entries:
        relative, position = segment.offset_index.entry_at(segment.offset_index.entries - 1)
        header = segment.read_header(position)
        if header is None or header.base_offset != segment.base_offset + relative:
            raise IndexCorruptError(f"{segment.offset_index.path.name}: entry off a batch")
    entries = segment.time_index.entries
    for slot in sorted({0, entries - 1}) if entries else ():
        timestamp, relative = segment.time_index.entry_at(slot)
        computed, start = -1, 0
        if slot:
            computed, previous = segment.time_index.entry_at(slot - 1)
            start = segment.offset_index.lookup(previous)[1]
        target = segment.base_offset + relative
        found = False
        for count, header in enumerate(segment.iter_headers(start)):
            if header.base_offset > target or count >= _VERIFY_MAX_HEADERS:
                found = count >= _VERIFY_MAX_HEADERS  # too far to check cheaply: trust
                break
            computed = max(computed, header.max_timestamp)
            if header.base_offset == target:
                found = computed == timestamp
                break
        if not found:
            raise IndexCorruptError(f"{segment.time_index.path.name}: entry disagrees")


def _load_tail(segment: LogSegment) -> None:
    """Derive in-memory state from the indexes plus the batches after the last entry."""
    segment.max_timestamp = segment.time_index.last_timestamp
    start = 0
    if segment.offset_index.entries:
        relative, start = segment.offset_index.entry_at(segment.offset_index.entries - 1)
        segment.last_batch_offset = segment.base_offset + relative
    segment.bytes_since_index_entry = segment.size - start
    for header in segment.iter_headers(start):
        segment.max_timestamp = max(segment.max_timestamp, header.max_timestamp)
        segment.last_batch_offset = header.base_offset
        segment.next_offset = header.last_offset + 1
