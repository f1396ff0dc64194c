"""The broker's `replication-offset-checkpoint`: every hosted partition's high watermark.

Blocking file I/O (one small write every few seconds and at shutdown). No asyncio.

Kafka's text format (kafka.server.checkpoints.OffsetCheckpointFile), so Kafka's tools read it::

    0                           version (always 0)
    <count>                     number of entries that follow
    <topic> <partition> <hw>    one line per partition: topic name, partition index, high
                                watermark (topic names never contain spaces)

Written whole to `replication-offset-checkpoint.tmp`, fsynced, then renamed over the old file
(and the directory fsynced), so a crash leaves the old or the new file. A malformed file reads
as empty: the high watermark is then learned again from the leader, as before the checkpoint.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path

from tidelog.types import TopicPartition

CHECKPOINT_FILE = "replication-offset-checkpoint"
_log = logging.getLogger(__name__)


def read_high_watermarks(directory: Path) -> dict[TopicPartition, int]:
    path = directory / CHECKPOINT_FILE
    try:
        lines = path.read_text("ascii").split("\n")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        _log.warning("%s unreadable (%s): high watermarks start at 0", path, exc)
        return {}
    try:
        if lines[0].strip() != "0":
            raise ValueError(f"version {lines[0]!r}")
        count = int(lines[1])
        entries: dict[TopicPartition, int] = {}
        for line in lines[2 : 2 + count]:
            topic, partition, offset = line.split()
            if int(partition) < 0 or int(offset) < 0:
                raise ValueError(f"negative field in {line!r}")
            entries[TopicPartition(topic, int(partition))] = int(offset)
        if len(entries) != count:
            raise ValueError("fewer entries than announced")
    except (ValueError, IndexError) as exc:
        _log.warning("%s malformed (%s): high watermarks start at 0", path, exc)
        return {}
    return entries


def write_high_watermarks(directory: Path, high_watermarks: Mapping[TopicPartition, int]) -> None:
    lines = "".join(
        f"{tp.topic} {tp.partition} {offset}\n"
        for tp, offset in sorted(high_watermarks.items())
    )
    temporary = directory / (CHECKPOINT_FILE + ".tmp")
    with open(temporary, "w", encoding="ascii") as stream:
        stream.write(f"0\n{len(high_watermarks)}\n{lines}")
        stream.flush()
        os.fsync(stream.fileno())
    os.replace(temporary, directory / CHECKPOINT_FILE)
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
