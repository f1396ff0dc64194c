"""Checkpoint files in Kafka's text format (kafka.server.checkpoints.CheckpointFile).

Layout (UTF-8 text, `\\n` line ends)::

    line 1   version        "0"
    line 2   entry count    decimal, equal to the number of lines that follow
    line 3+  one entry per line, fields separated by a space (read: any whitespace run, as Kafka);
             which fields depends on the file:
               recovery-point-offset-checkpoint   <topic> <partition> <offset>   (per data dir)
               log-start-offset-checkpoint        <topic> <partition> <offset>   (per data dir)
               replication-offset-checkpoint      <topic> <partition> <hw>       (hw_checkpoint.py)
               leader-epoch-checkpoint            <epoch> <start offset>         (leader_epochs.py)

Topic names never contain spaces (Kafka's name rules). Written with `durable.write_durably`
(tmp, fsync, rename, fsync dir): a reader sees the previous checkpoint or the new one, never a
torn mix. A file that fails to parse is reported as CorruptRecordError; each caller decides
what that means (full recovery for the data-dir files, an empty cache for the derived ones).
Blocking file I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from tidelog.errors import CorruptRecordError
from tidelog.storage.durable import write_durably
from tidelog.types import TopicPartition

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CHECKPOINT_VERSION = 0


def write_entries(path: Path, entries: Iterable[tuple[object, ...]]) -> None:
    """Replace `path` with the version line, the count and one line per entry."""
    lines = [" ".join(str(field) for field in entry) for entry in entries]
    header = [str(CHECKPOINT_VERSION), str(len(lines))]
    write_durably(path, ("\n".join(header + lines) + "\n").encode())


def read_entries(path: Path, fields: int) -> list[tuple[str, ...]]:
    """Each entry's `fields` fields as text. Missing file -> []; unreadable or malformed (bad
    version, count not matching the lines, wrong field count) -> CorruptRecordError."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        raise CorruptRecordError(f"{path.name}: unreadable: {exc}") from exc
    lines = text.splitlines()
    try:
        if len(lines) < 2 or int(lines[0]) != CHECKPOINT_VERSION:
            raise ValueError("bad version line")
        count = int(lines[1])
        if count != len(lines) - 2:
            raise ValueError(f"count {count} but {len(lines) - 2} entries")
        entries = [tuple(line.split()) for line in lines[2:]]  # Kafka splits on \s+
        for entry in entries:
            if len(entry) != fields:
                raise ValueError(f"{len(entry)} fields in {' '.join(entry)!r}, not {fields}")
    except ValueError as exc:
        raise CorruptRecordError(f"{path.name}: malformed checkpoint: {exc}") from exc
    return entries


def write_checkpoint(path: Path, offsets: Mapping[TopicPartition, int]) -> None:
    entries = sorted(offsets.items())
    write_entries(path, ((tp.topic, tp.partition, offset) for tp, offset in entries))


def read_checkpoint(path: Path) -> dict[TopicPartition, int]:
    """`<topic> <partition> <offset>` entries. Missing file -> {}; malformed ->
    CorruptRecordError."""
    try:
        return {
            TopicPartition(topic, int(partition)): int(offset)
            for topic, partition, offset in read_entries(path, fields=3)
        }
    except ValueError as exc:
        raise CorruptRecordError(f"{path.name}: malformed checkpoint: {exc}") from exc
