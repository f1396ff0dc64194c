"""Group writes applied before they are durable, and how to undo them (Kafka's coordinator
runtime keeps such uncommitted state in its SnapshotRegistry / timeline structures).

Runs on the event loop. `GroupService` snapshots the groups an operation touches before it
runs (`GroupCoordinatorShard.snapshot`), applies it at once (so the next operation builds on
it) and keeps the `Write` here, in log order per `__consumer_offsets` partition, until its
records are durable. If they never become so, `revert` restores that write's snapshot and
those of every later write of the partition, newest first, and dooms the later ones: they
built on the reverted state, so they fail too even if their own records commit. The caller
puts back the timers the reverted writes armed or cancelled (`Write.timers_before`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from tidelog.coordinator.coordinator import GroupCoordinatorShard, ShardSnapshot
from tidelog.coordinator.messages import TimerKey
from tidelog.coordinator.records import CoordinatorRecord
from tidelog.errors import KafkaError

log = logging.getLogger("tidelog.broker.groups")
Waiters = dict[int, "asyncio.Future[Any]"]
Completions = list[tuple[int, object]]


@dataclass(eq=False)
class Write:
    """An applied operation whose records are not durable yet, and how to undo it."""

    shard: GroupCoordinatorShard
    undo: ShardSnapshot
    doomed: KafkaError | None = None  # an earlier write failed: this one was reverted too
    # each timer the write armed or cancelled -> its deadline before (None: not armed)
    timers_before: dict[TimerKey, int | None] = field(default_factory=dict)

    def cover(self, records: Iterable[CoordinatorRecord]) -> None:
        """Extend the undo to the groups the records change beyond the operation's own (a
        timer's or the offsets expiry's); call before replaying them."""
        others = record_groups(records) - set(self.undo.groups)
        if others:
            extra = self.shard.snapshot(others)
            self.undo = ShardSnapshot({**extra.groups, **self.undo.groups},
                                      {**extra.offsets, **self.undo.offsets},
                                      {**extra.deadlines, **self.undo.deadlines})


def record_groups(records: Iterable[CoordinatorRecord]) -> set[str]:
    """The group ids the records are about (offset and classic keys name `group`)."""
    groups: set[str] = set()
    for record in records:
        key: Any = record.key
        groups.add(key.group if hasattr(key, "group") else key.group_id)
    return groups


class UncommittedWrites:
    def __init__(self) -> None:
        self._pending: dict[int, list[Write]] = {}  # partition -> writes in log order

    def add(self, partition: int, write: Write) -> None:
        self._pending.setdefault(partition, []).append(write)

    def settle(self, partition: int, write: Write) -> None:
        """Durable (or abandoned at shutdown): no undo needed any more."""
        pending = self._pending.get(partition, [])
        if write in pending:
            pending.remove(write)

    def drop(self, partition: int) -> None:
        """The partition's shard was unloaded: its state, uncommitted or not, is gone."""
        self._pending.pop(partition, None)

    def revert(
        self, partition: int, write: Write, error: KafkaError,
        current_shard: Callable[[int], GroupCoordinatorShard | None],
    ) -> list[Write]:
        """`write` never became durable: undo it and every later uncommitted write; returns
        the writes whose state was restored, newest first (their timers are the caller's)."""
        pending = self._pending.get(partition, [])
        if write not in pending:
            return []  # reverted already, with an earlier write
        index = pending.index(write)
        reverted = pending[index:]
        del pending[index:]
        restored: list[Write] = []
        for undone in reversed(reverted):
            if current_shard(partition) is undone.shard:  # not unloaded meanwhile
                undone.shard.restore(undone.undo)
                restored.append(undone)
        for later in reverted[1:]:
            later.doomed = error
        log.warning("partition %d: %d uncommitted group writes reverted: %s",
                    partition, len(reverted), error.message)
        return restored


def complete(waiters: Waiters, completions: Completions) -> None:
    for waiter_id, response in completions:
        future = waiters.get(waiter_id)
        if future is not None and not future.done():
            future.set_result(response)


def fail(waiters: Waiters, completions: Completions, error: KafkaError) -> None:
    """The parked requests a failed operation would have answered get its error."""
    for waiter_id, _ in completions:
        future = waiters.get(waiter_id)
        if future is not None and not future.done():
            future.set_exception(KafkaError(error.code, error.message))
