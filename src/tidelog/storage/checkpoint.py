"""Offset checkpoint files in Kafka's text format (`recovery-point-offset-checkpoint`,
`log-start-offset-checkpoint`), one per data dir.

Layout (UTF-8 text, `\\n` line ends)::

    line 1   version                 "0"
    line 2   entry count             decimal
    line 3+  "<topic> <partition> <offset>"   one line per partition, space separated

Written to `<name>.tmp`, fsynced, renamed over the old file, directory fsynced: a reader sees
the previous checkpoint or the new one, never a torn mix. A file that fails to parse is
reported as CorruptRecordError so the caller can fall back to full recovery.
Blocking file I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from tidelog.errors import CorruptRecordError
from tidelog.storage.producer_state import write_durably
from tidelog.types import TopicPartition

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CHECKPOINT_VERSION = 0


def write_checkpoint(path: Path, offsets: Mapping[TopicPartition, int]) -> None:
    lines = [str(CHECKPOINT_VERSION), str(len(offsets))]
    lines += [f"{tp.topic} {tp.partition} {offset}" for tp, offset in sorted(offsets.items())]
    write_durably(path, ("\n".join(lines) + "\n").encode())


def read_checkpoint(path: Path) -> dict[TopicPartition, int]:
    """Missing file -> {}; malformed -> CorruptRecordError."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise CorruptRecordError(f"{path.name}: unreadable: {exc}") from exc
    lines = text.splitlines()
    try:
        if len(lines) < 2 or int(lines[0]) != CHECKPOINT_VERSION:
            raise ValueError("bad version line")
        count = int(lines[1])
        if count != len(lines) - 2:
            raise ValueError(f"count {count} but {len(lines) - 2} entries")
        offsets: dict[TopicPartition, int] = {}
        for line in lines[2:]:
            topic, partition, offset = line.split(" ")
            offsets[TopicPartition(topic, int(partition))] = int(offset)
    except ValueError as exc:
        raise CorruptRecordError(f"{path.name}: malformed checkpoint: {exc}") from exc
    return offsets
