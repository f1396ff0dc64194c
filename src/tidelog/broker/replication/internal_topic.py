"""Creating an internal topic (`__consumer_offsets`, `__transaction_state`) in a cluster:
through ZooKeeper like any topic, once, by whichever broker is first asked for a coordinator.
Runs on the event loop (the ZooKeeper write through `asyncio.to_thread`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from tidelog.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from tidelog.broker.replication.replica_manager import Replication

log = logging.getLogger("tidelog.broker.replication.internal_topic")
# live brokers -> (partitions, replication factor, topic configs)
TopicLayout = Callable[[int], tuple[int, int, dict[str, str]]]


class InternalTopicCreator:
    """Creates `name` once (one attempt in flight; a failed one is retried at the next
    `ensure()`, i.e. the next FindCoordinator)."""

    def __init__(self, replication: Replication, name: str, layout: TopicLayout) -> None:
        self.replication = replication
        self.name = name
        self._layout = layout
        self._task: asyncio.Task[None] | None = None

    def ensure(self) -> None:
        view = self.replication.view
        if view is None or self.name in view.topics:
            return
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._create(len(view.brokers)))

    async def _create(self, live_brokers: int) -> None:
        agent = self.replication.agent
        if agent is None:
            return
        partitions, factor, configs = self._layout(live_brokers)
        try:
            await asyncio.to_thread(agent.create_topic, self.name, partitions, factor, configs)
        except KafkaError as error:
            if error.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                log.warning("could not create %s: %s", self.name, error)
            return
        except (KazooException, KazooTimeoutError, OSError) as error:
            log.warning("could not create %s: %s", self.name, error)
            return
        log.info("created %s: %d partitions, replication factor %d",
                 self.name, partitions, factor)


def partition_count(replication: Replication, name: str, configured: int) -> int:
    """The topic's real partition count once it exists, else the configured one."""
    view = replication.view
    if view is not None:
        assignment = view.topics.get(name)
        if assignment is not None and assignment.partitions:
            return len(assignment.partitions)
    return max(1, configured)
