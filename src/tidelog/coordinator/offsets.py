"""Committed offsets: the OffsetCommitKey/OffsetCommitValue records of `__consumer_offsets`.

The store changes only through `replay()`; commit, delete and expiry produce records. Retention
follows Kafka (KIP-211): an offset with an explicit expire timestamp (OffsetCommit v2-4 with a
retention time) expires then; otherwise an offset expires `offsets.retention.minutes` after its
group became empty (after its commit for groups without members, and for topics a non-empty
group no longer subscribes to).
"""

from __future__ import annotations

from collections.abc import Iterable

from tidelog.coordinator.messages import (
    CommitPartition,
    FetchedOffset,
    GroupConfig,
)
from tidelog.coordinator.records import CoordinatorRecord, OffsetCommitKey, OffsetCommitValue
from tidelog.errors import ErrorCode

Partition = tuple[str, int]


class OffsetStore:
    """Offsets per group, as replayed from the log. Not thread-safe; one per coordinator shard."""

    __slots__ = ("_offsets",)

    def __init__(self) -> None:
        self._offsets: dict[str, dict[Partition, OffsetCommitValue]] = {}

    def replay(self, key: OffsetCommitKey, value: OffsetCommitValue | None) -> None:
        partition = (key.topic, key.partition)
        if value is None:
            group = self._offsets.get(key.group)
            if group is not None:
                group.pop(partition, None)
                if not group:
                    del self._offsets[key.group]
        else:
            self._offsets.setdefault(key.group, {})[partition] = value

    def groups(self) -> list[str]:
        return list(self._offsets)

    def has_offsets(self, group_id: str) -> bool:
        return bool(self._offsets.get(group_id))

    def get(self, group_id: str, topic: str, partition: int) -> OffsetCommitValue | None:
        return self._offsets.get(group_id, {}).get((topic, partition))

    def partitions(self, group_id: str) -> list[Partition]:
        return sorted(self._offsets.get(group_id, {}))

    def snapshot(self) -> dict[str, dict[Partition, OffsetCommitValue]]:
        return {group: dict(items) for group, items in self._offsets.items()}

    def group_offsets(self, group_id: str) -> dict[Partition, OffsetCommitValue] | None:
        """A copy of one group's offsets (None if it has none); values are immutable."""
        items = self._offsets.get(group_id)
        return dict(items) if items is not None else None

    def restore_group(
        self, group_id: str, items: dict[Partition, OffsetCommitValue] | None
    ) -> None:
        """Put back what `group_offsets` returned (undo of uncommitted replays)."""
        if items:
            self._offsets[group_id] = dict(items)
        else:
            self._offsets.pop(group_id, None)

    def commit(
        self,
        group_id: str,
        partitions: Iterable[CommitPartition],
        retention_time_ms: int,
        config: GroupConfig,
        now_ms: int,
    ) -> tuple[list[CoordinatorRecord], list[tuple[str, int, ErrorCode]]]:
        """Records for a validated commit, and each partition's outcome."""
        records: list[CoordinatorRecord] = []
        outcomes: list[tuple[str, int, ErrorCode]] = []
        expire = now_ms + retention_time_ms if retention_time_ms >= 0 else -1
        for item in partitions:
            metadata = item.metadata or ""
            if len(metadata.encode()) > config.offset_metadata_max_bytes:
                outcomes.append((item.topic, item.partition, ErrorCode.OFFSET_METADATA_TOO_LARGE))
                continue
            # A negative offset is stored as Kafka does (clients read it as "none").
            if item.partition < 0 or not item.topic:
                outcomes.append((item.topic, item.partition, ErrorCode.INVALID_COMMIT_OFFSET_SIZE))
                continue
            value = OffsetCommitValue(
                offset=item.offset,
                metadata=metadata,
                commit_timestamp=now_ms,
                # A value with an expire timestamp is written as v1, which has no leader epoch.
                leader_epoch=item.leader_epoch if expire < 0 else -1,
                expire_timestamp=expire,
            )
            key = OffsetCommitKey(group_id, item.topic, item.partition)
            records.append(CoordinatorRecord(key, value))
            outcomes.append((item.topic, item.partition, ErrorCode.NONE))
        return records, outcomes

    def fetch(self, group_id: str, partitions: Iterable[Partition] | None) -> list[FetchedOffset]:
        """Committed offsets; -1 for partitions without one (not an error, as in Kafka)."""
        committed = self._offsets.get(group_id, {})
        wanted = sorted(committed) if partitions is None else list(partitions)
        fetched = []
        for topic, partition in wanted:
            value = committed.get((topic, partition))
            if value is None:
                fetched.append(FetchedOffset(topic, partition, -1))
            else:
                fetched.append(
                    FetchedOffset(
                        topic, partition, value.offset, value.leader_epoch, value.metadata
                    )
                )
        return fetched

    def tombstones(
        self, group_id: str, partitions: Iterable[Partition] | None = None
    ) -> list[CoordinatorRecord]:
        committed = self._offsets.get(group_id, {})
        chosen = (
            sorted(committed) if partitions is None else [p for p in partitions if p in committed]
        )
        return [CoordinatorRecord(OffsetCommitKey(group_id, t, p), None) for t, p in chosen]

    def expired(
        self,
        group_id: str,
        now_ms: int,
        retention_ms: int,
        empty_since_ms: int | None,
        subscribed_topics: set[str] | None,
    ) -> list[CoordinatorRecord]:
        """Tombstones for offsets past retention.

        `empty_since_ms`: when the group became empty (None if it has members or no state).
        `subscribed_topics`: topics an active group consumes (their offsets never expire);
        None for an active group whose subscriptions are unknown (nothing expires).
        """
        committed = self._offsets.get(group_id, {})
        gone: list[Partition] = []
        for partition, value in committed.items():
            if value.expire_timestamp >= 0:
                if now_ms >= value.expire_timestamp:
                    gone.append(partition)
                continue
            if empty_since_ms is not None:
                base = max(empty_since_ms, value.commit_timestamp)
            elif subscribed_topics is not None and partition[0] not in subscribed_topics:
                base = value.commit_timestamp
            else:
                continue
            if now_ms - base >= retention_ms:
                gone.append(partition)
        return self.tombstones(group_id, sorted(gone))
