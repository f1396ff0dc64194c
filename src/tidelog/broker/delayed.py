"""Delayed operations: fetch requests parked until an append or their deadline.

Runs on the event loop; must not block. A waiter is one asyncio future shared by the partitions
a fetch asked for; any append to one of them completes it. No polling loops (STYLE: uvicorn).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from tidelog.types import TopicPartition


class AppendWaiters:
    """Maps a partition to the futures of the fetches parked on it."""

    def __init__(self) -> None:
        self._waiting: dict[TopicPartition, set[asyncio.Future[None]]] = {}

    def notify(self, topic_partition: TopicPartition) -> None:
        """An append reached `topic_partition`: wake every fetch parked on it."""
        futures = self._waiting.pop(topic_partition, None)
        if futures:
            for future in futures:
                if not future.done():
                    future.set_result(None)

    async def wait(self, partitions: Iterable[TopicPartition], timeout_ms: int) -> bool:
        """Park until an append reaches one of `partitions` or `timeout_ms`; True if woken."""
        if timeout_ms <= 0:
            return False
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        registered = list(partitions)
        for topic_partition in registered:
            self._waiting.setdefault(topic_partition, set()).add(future)
        try:
            await asyncio.wait_for(future, timeout_ms / 1000)
            return True
        except TimeoutError:
            return False
        finally:
            for topic_partition in registered:
                waiting = self._waiting.get(topic_partition)
                if waiting is not None:
                    waiting.discard(future)
                    if not waiting:
                        del self._waiting[topic_partition]

    def wake_all(self) -> None:
        """Shutdown: answer every parked fetch now with what it has."""
        for topic_partition in list(self._waiting):
            self.notify(topic_partition)
