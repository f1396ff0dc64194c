"""Opening a partition directory: clean load or crash recovery (ARCHITECTURE D3).

Clean start (the data dir held `.clean-shutdown`): every segment is opened from its indexes;
no `.log` is read except the batch headers after the newest segment's last index entry.

Unclean start: segments entirely below the recovery point are trusted (they were fsynced); the
segment holding the recovery point and every later one are rescanned: each batch's size, magic,
CRC and offsets are checked, the file is cut at the first invalid byte, every later segment is
deleted, and the indexes are rebuilt. Missing or corrupt index files are rebuilt in any case.
Blocking file I/O, run before the log serves anything.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tidelog.storage.cleaner_swap import complete_interrupted_clean
from tidelog.storage.config import LogConfig
from tidelog.storage.segment import LogSegment, SegmentState

_STRAY_SUFFIXES = (".index", ".timeindex", ".tmp")


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
                LogSegment.load(directory, base, next_base_offset=next_base, **sizes)
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
        for suffix in (".log", ".index", ".timeindex"):
            (directory / f"{base:020d}{suffix}").unlink(missing_ok=True)
        result.deleted_segments += 1
