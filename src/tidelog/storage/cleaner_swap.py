"""The log cleaner's files: writing a cleaned segment, swapping it in, finishing after a crash.

Files in a partition directory while a group of segments [base, end) is being replaced
(`base` = the group's first base offset, `end` = the base offset of the segment after the
group, 20 digits each)::

    <base>-<end>.log.cleaned   record batches being written (same layout as a .log); not yet
                               fsynced: recovery deletes it (the swap never happened)
    <base>-<end>.log.swap      the complete, fsynced cleaned segment: the commit point.
                               Recovery deletes every .log/.index/.timeindex whose base offset
                               is in [base, end), links it as <base>.log, rebuilds the
                               indexes (derived data, ARCHITECTURE D4), then unlinks it

The cleaner takes the same steps in the same order (`install_cleaned_segment`), so a crash
anywhere leaves either the old segments, or a .swap that recovery finishes: no record is lost
or duplicated. The end offset is in the name because compaction may drop the group's last
records: the swap's own contents cannot say which old segments it replaces.
Blocking file I/O.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from tidelog.errors import CorruptRecordError
from tidelog.records.batch import HEADER_SIZE, RecordBatch, iter_batches, peek_batch_size
from tidelog.storage.config import LogConfig
from tidelog.storage.durable import fsync_directory
from tidelog.storage.segment import LogSegment, SegmentState

CLEANED_SUFFIX = ".log.cleaned"
SWAP_SUFFIX = ".log.swap"
_SEGMENT_SUFFIXES = ("log", "index", "timeindex")
_U32_SPAN = 2**32 - 1


def swap_file_name(base_offset: int, end_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}-{end_offset:020d}{suffix}"


def _parse_range(name: str, suffix: str) -> tuple[int, int] | None:
    base, dash, end = name.removesuffix(suffix).partition("-")
    if not dash or not base.isdigit() or not end.isdigit():
        return None
    return int(base), int(end)


def complete_interrupted_clean(directory: Path, config: LogConfig) -> int:
    """Loader hook (recovery.py), before segments are listed: roll back `.cleaned` files,
    finish `.swap` files. Returns the number of swaps completed."""
    changed = False
    completed = 0
    for path in sorted(directory.iterdir()):
        if path.name.endswith(CLEANED_SUFFIX):
            path.unlink()
            changed = True
    for path in sorted(directory.iterdir()):
        if not path.name.endswith(SWAP_SUFFIX):
            continue
        span = _parse_range(path.name, SWAP_SUFFIX)
        if span is None:
            continue
        install_cleaned_segment(directory, path, span[0], span[1], config).close()
        changed = True
        completed += 1
    if changed:
        fsync_directory(directory)
    return completed


def delete_segment_files(directory: Path, base_offset: int, end_offset: int) -> None:
    """Unlink the .log and index files of every segment based in [base_offset, end_offset)."""
    for path in directory.iterdir():
        stem, dot, suffix = path.name.partition(".")
        if (
            dot and suffix in _SEGMENT_SUFFIXES and stem.isdigit()
            and base_offset <= int(stem) < end_offset
        ):
            path.unlink()


def group_segments(
    segments: Sequence[LogSegment], end_offsets: Sequence[int], config: LogConfig
) -> list[tuple[LogSegment, ...]]:
    """Consecutive segments that become one cleaned segment (Kafka's groupSegmentsBySize):
    at most segment.bytes, index entries that fit one segment's indexes, offsets within u32.
    `end_offsets[i]` is the base offset of the segment after segments[i]."""
    max_offset_entries = max(1, config.segment_index_bytes // 8)
    max_time_entries = max(1, config.segment_index_bytes // 12)
    groups: list[tuple[LogSegment, ...]] = []
    group: list[LogSegment] = []
    size = offset_entries = time_entries = 0
    for segment, end in zip(segments, end_offsets, strict=True):
        if group and (
            size + segment.size > config.segment_bytes
            or offset_entries + segment.offset_index.entries + 1 > max_offset_entries
            or time_entries + segment.time_index.entries + 2 > max_time_entries
            or end - group[0].base_offset > _U32_SPAN
        ):
            groups.append(tuple(group))
            group, size, offset_entries, time_entries = [], 0, 0, 0
        group.append(segment)
        size += segment.size
        offset_entries += segment.offset_index.entries + 1
        time_entries += segment.time_index.entries + 1
    if group:
        groups.append(tuple(group))
    return groups


def commit_cleaned_file(cleaned_path: Path, fd: int, base_offset: int, end_offset: int) -> Path:
    """fsync and close the .cleaned file, rename it .swap, fsync the directory: committed."""
    os.fsync(fd)
    os.close(fd)
    swap_path = cleaned_path.with_name(swap_file_name(base_offset, end_offset, SWAP_SUFFIX))
    os.replace(cleaned_path, swap_path)
    fsync_directory(cleaned_path.parent)
    return swap_path


def install_cleaned_segment(
    directory: Path, swap_path: Path, base_offset: int, end_offset: int, config: LogConfig
) -> LogSegment:
    """Old files out, `.swap` linked as `<base>.log`, indexes rebuilt, `.swap` unlinked;
    returns the open segment (sealed and flushed). The `.swap` name stays until the indexes
    exist, so a crash at any step here is finished again by recovery."""
    delete_segment_files(directory, base_offset, end_offset)
    os.link(swap_path, directory / f"{base_offset:020d}.log")
    segment = LogSegment(
        directory, base_offset, index_bytes=config.segment_index_bytes,
        interval_bytes=config.index_interval_bytes,
    )
    segment.rebuild(validate=False, expected_offset=base_offset, sealed=True)
    segment.flush()
    segment.state = SegmentState.FLUSHED
    # As recovery.load_segment sets it for a sealed segment: reads skip a trailing gap either way.
    segment.next_offset = end_offset if segment.size else base_offset
    swap_path.unlink()
    fsync_directory(directory)
    return segment


def read_batches(
    segment: LogSegment, position: int, budget_bytes: int
) -> tuple[list[RecordBatch], int]:
    """Whole batches of a sealed segment from `position`, about budget_bytes of them (at least
    one); returns them and the position after the last one."""
    remaining = segment.size - position
    if remaining <= 0:
        return [], position
    data = os.pread(segment.fd, min(remaining, max(budget_bytes, HEADER_SIZE)), position)
    batches = list(iter_batches(data))
    if not batches:  # one batch larger than the budget: read exactly that batch
        size = peek_batch_size(data)
        if size < HEADER_SIZE or size > remaining:
            raise CorruptRecordError(f"{segment.path.name}: bad batch at position {position}")
        batches = list(iter_batches(os.pread(segment.fd, size, position)))
        if not batches:
            raise CorruptRecordError(f"{segment.path.name}: short read at position {position}")
    return batches, position + sum(batch.size for batch in batches)


def write_all(fd: int, chunks: list[bytes | bytearray | memoryview]) -> int:
    """Write every chunk (a regular file writes all unless the disk is full); returns bytes."""
    total = 0
    for chunk in chunks:
        view = memoryview(chunk)
        total += len(view)
        while view:
            view = view[os.write(fd, view) :]
    return total
