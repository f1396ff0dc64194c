"""The broker's `replication-offset-checkpoint`: every hosted partition's high watermark.

Blocking file I/O (one small write every few seconds and at shutdown). No asyncio.

Kafka's text format (checkpoint.py; kafka.server.checkpoints.OffsetCheckpointFile), so Kafka's
tools read it::

    0                           version (always 0)
    <count>                     number of entries that follow
    <topic> <partition> <hw>    one line per partition: topic name, partition index, high
                                watermark (topic names never contain spaces)

Written whole with `durable.write_durably` (tmp, fsync, rename, fsync dir), so a crash leaves
the old or the new file. A malformed file (or a negative partition or high watermark) reads as
empty: the high watermark is then learned again from the leader, as before the checkpoint.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from tidelog.errors import CorruptRecordError
from tidelog.storage.checkpoint import read_checkpoint, write_checkpoint
from tidelog.types import TopicPartition

CHECKPOINT_FILE = "replication-offset-checkpoint"
_log = logging.getLogger(__name__)


def read_high_watermarks(directory: Path) -> dict[TopicPartition, int]:
    path = directory / CHECKPOINT_FILE
    try:
        entries = read_checkpoint(path)
    except CorruptRecordError as exc:
        _log.warning("%s (%s): high watermarks start at 0", path, exc)
        return {}
    if any(tp.partition < 0 or offset < 0 for tp, offset in entries.items()):
        _log.warning("%s has a negative field: high watermarks start at 0", path)
        return {}
    return entries


def write_high_watermarks(directory: Path, high_watermarks: Mapping[TopicPartition, int]) -> None:
    write_checkpoint(directory / CHECKPOINT_FILE, high_watermarks)
