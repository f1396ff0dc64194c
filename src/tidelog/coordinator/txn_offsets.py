"""Transactional offset commits in a group coordinator shard (KIP-98, KIP-447).

TxnOffsetCommit writes OffsetCommit records into `__consumer_offsets` inside the producer's
transaction: a transactional batch carrying the producer id and epoch. They are *pending*
(Kafka's GroupMetadata.pendingTransactionalOffsetCommits) until the transaction's COMMIT
marker reaches that partition, when they become the group's committed offsets, or its ABORT
marker, when they are dropped. Loading replays the same way: the loader
(`coordinator/loader.py`) wraps records of transactional batches as `TransactionalRecord` and
markers as `TransactionEnd`.
"""

from __future__ import annotations

from dataclasses import dataclass

from tidelog.coordinator.records import CoordinatorRecord, OffsetCommitKey, OffsetCommitValue


@dataclass(frozen=True, slots=True)
class TransactionalRecord:
    """A record of a transactional batch of `producer_id` (pending until its marker)."""

    producer_id: int
    record: CoordinatorRecord


@dataclass(frozen=True, slots=True)
class TransactionEnd:
    """A COMMIT (`committed`) or ABORT marker of `producer_id` in this partition."""

    producer_id: int
    committed: bool


PendingKey = tuple[str, str, int]  # group, topic, partition


class PendingTxnOffsets:
    """Pending transactional offsets per producer id, in commit order."""

    __slots__ = ("by_producer",)

    def __init__(self) -> None:
        self.by_producer: dict[int, dict[PendingKey, CoordinatorRecord]] = {}

    def add(self, producer_id: int, record: CoordinatorRecord) -> None:
        key = record.key
        if isinstance(key, OffsetCommitKey):
            pending = self.by_producer.setdefault(producer_id, {})
            pending[(key.group, key.topic, key.partition)] = record

    def end(self, producer_id: int) -> list[CoordinatorRecord]:
        """The producer's pending records (its transaction ended); forgets them."""
        return list(self.by_producer.pop(producer_id, {}).values())

    def has_pending(self, group: str, topic: str, partition: int) -> bool:
        """OffsetFetch require_stable: a transaction still holds an offset for it."""
        return any((group, topic, partition) in p for p in self.by_producer.values())

    def pending_value(self, producer_id: int, key: PendingKey) -> OffsetCommitValue | None:
        record = self.by_producer.get(producer_id, {}).get(key)
        value = None if record is None else record.value
        return value if isinstance(value, OffsetCommitValue) else None
