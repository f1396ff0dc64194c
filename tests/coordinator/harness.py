"""A test driver for a coordinator shard: plays the broker's part with numbers for time.

Records go through their byte encoding before replay (as they would through the log); timers
live in a dict and fire when a test advances the clock; parked requests complete by waiter id.
"""

from __future__ import annotations

import uuid
from typing import Any

from tidelog.coordinator.consumer_group import ConsumerGroup
from tidelog.coordinator.coordinator import GroupCoordinatorShard
from tidelog.coordinator.group import ClassicGroup, GroupState
from tidelog.coordinator.messages import GroupConfig, Result, TimerKey, TopicsImage
from tidelog.coordinator.records import CoordinatorRecord, decode_record

TOPIC_ID = uuid.UUID(int=0xABC)


class Harness:
    def __init__(
        self, config: GroupConfig | None = None, topics: TopicsImage | None = None
    ) -> None:
        self.config = config or GroupConfig(initial_rebalance_delay_ms=0)
        self.topics: TopicsImage = topics if topics is not None else {"t": (TOPIC_ID, 6)}
        self.shard = GroupCoordinatorShard(self.config)
        self.log: list[CoordinatorRecord] = []
        self.completions: dict[int, Any] = {}
        self.timers: dict[TimerKey, int] = {}
        self._next_waiter = 0

    def waiter(self) -> int:
        self._next_waiter += 1
        return self._next_waiter

    def run(self, result: Result[Any], waiter: int | None = None) -> Any:
        for record in result.records:
            decoded = decode_record(record.key_bytes(), record.value_bytes())
            assert decoded == record
            self.log.append(decoded)
            self.shard.replay(decoded)
        self.completions.update(result.completions)
        for timer in result.timers:
            if timer.deadline_ms is None:
                self.timers.pop(timer.key, None)
            else:
                self.timers[timer.key] = timer.deadline_ms
        if result.response is None and waiter is not None:
            return self.completions.pop(waiter, None)
        return result.response

    def advance(self, now_ms: int) -> None:
        """Fire every timer due at or before `now_ms`, earliest first."""
        while True:
            due = sorted(
                (deadline, key) for key, deadline in self.timers.items() if deadline <= now_ms
            )
            if not due:
                return
            deadline, key = due[0]
            del self.timers[key]
            self.run(self.shard.on_timer(key, self.topics, max(deadline, 0)))

    def reloaded(self, now_ms: int = 0) -> GroupCoordinatorShard:
        shard = GroupCoordinatorShard(self.config)
        shard.load(self.log, now_ms)
        return shard


def persisted_view(shard: GroupCoordinatorShard) -> dict[str, Any]:
    """What the log must reproduce: groups at rest and committed offsets."""
    groups: dict[str, Any] = {}
    for group_id, group in shard.groups.items():
        if isinstance(group, ClassicGroup):
            assert group.state in (GroupState.EMPTY, GroupState.STABLE), "compare groups at rest"
            groups[group_id] = (group.state, group.to_record(0))
        else:
            assert isinstance(group, ConsumerGroup)
            groups[group_id] = (
                group.group_epoch,
                group.assignment_epoch,
                dict(group.members),
                dict(group.target),
                dict(group.subscription_metadata),
            )
    return {"groups": groups, "offsets": shard.offsets.snapshot()}
