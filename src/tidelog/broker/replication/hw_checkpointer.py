"""The high watermark checkpoint of one broker (`replication-offset-checkpoint`).

Runs on the event loop; the file write (fsync + rename) runs on a worker thread. Written every
`replica.high.watermark.checkpoint.interval.ms` when a mark moved, and at shutdown; read once
at start, so a restarted broker starts each partition at min(checkpoint, log end), not 0.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from pathlib import Path

from tidelog.storage.hw_checkpoint import read_high_watermarks, write_high_watermarks
from tidelog.types import TopicPartition

log = logging.getLogger("tidelog.broker.replication.replica_manager")


class HighWatermarkCheckpointer:
    def __init__(
        self, data_dir: Path, interval_ms: int,
        current: Callable[[], Mapping[TopicPartition, int]],
    ) -> None:
        self._data_dir = data_dir
        self._interval_ms = interval_ms
        self._current = current
        # consumed as each partition is first hosted
        self._checkpointed = read_high_watermarks(data_dir)
        self._written: dict[TopicPartition, int] = dict(self._checkpointed)
        self._task: asyncio.Task[None] | None = None

    def initial(self, tp: TopicPartition, log_end_offset: int) -> int:
        """The checkpointed mark of a partition hosted for the first time (0 if none)."""
        return min(self._checkpointed.pop(tp, 0), log_end_offset)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop())

    def cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def checkpoint(self) -> None:
        """Write the file if a high watermark moved since the last write."""
        current = dict(self._current())
        if current == self._written:
            return
        try:
            await asyncio.to_thread(write_high_watermarks, self._data_dir, current)
        except OSError as error:
            log.error("high watermark checkpoint failed: %s", error)
            return
        self._written = current

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self._interval_ms / 1000)  # a period, not a poll
            await self.checkpoint()
