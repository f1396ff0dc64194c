"""The share coordinator's state for one `__share_group_state` partition (KIP-932), pure.

Kafka's ShareCoordinatorShard: per share-partition key (group, topic id, partition) the
state epoch, the leader epoch of the share partition's last leader, the share-partition
start offset (SPSO) and the persisted state of each in-flight offset. Operations
(Read/Write/Initialize/DeleteShareGroupState) return the records to append and an error;
state changes only by `replay` of those records once they are replicated (D9), so a write
that fails to replicate changes nothing.

Records (coordinator/share_records.py): a ShareSnapshot holds a key's whole state; a
ShareUpdate holds every offset changed since that snapshot (cumulative, so compaction keeping
only the latest snapshot and the latest update of a key loses nothing); a tombstone deletes
the key. A snapshot is written instead of an update every `snapshot_every` updates (Kafka's
share.coordinator.snapshot.update.records.per.snapshot), and on Initialize.

Fencing, as Kafka's: a write or read carrying a leader epoch below the stored one is
FENCED_LEADER_EPOCH (a deposed partition leader); a write whose state epoch differs from the
stored one is FENCED_STATE_EPOCH (the state was re-initialized by AlterShareGroupOffsets).
A read with a newer leader epoch records it (an update), fencing the previous leader.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from tidelog.coordinator.share_records import (
    SNAPSHOT_TYPE,
    UPDATE_TYPE,
    PersistedStateBatch,
    SharePartitionKey,
    ShareSnapshotValue,
    ShareStateRecord,
    ShareUpdateValue,
)
from tidelog.errors import ErrorCode

UNINITIALIZED_START_OFFSET = -1  # Kafka's PartitionFactory.UNINITIALIZED_START_OFFSET
DEFAULT_STATE_EPOCH = 0
MAX_STATE_OFFSETS = 100_000  # offsets kept per key: a leader bounds its in-flight records


def coordinator_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    """FindCoordinator key_type 2: "group:topicId:partition", the topic id as Kafka prints
    a Uuid (URL-safe base64, no padding)."""
    encoded = base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode("ascii")
    return f"{group_id}:{encoded}:{partition}"


def parse_coordinator_key(key: str) -> tuple[str, uuid.UUID, int] | None:
    """The (group, topic id, partition) of a key_type 2 key; None when malformed."""
    group_id, _, rest = key.rpartition(":")
    group_id, _, encoded = group_id.rpartition(":")
    if not group_id or not encoded or not rest.isdigit() or len(encoded) != 22:
        return None
    try:
        topic_id = uuid.UUID(bytes=base64.urlsafe_b64decode(encoded + "=="))
    except ValueError:
        return None
    return group_id, topic_id, int(rest)


@dataclass(slots=True)
class ShareStateEntry:
    snapshot_epoch: int = 0
    state_epoch: int = DEFAULT_STATE_EPOCH
    leader_epoch: int = -1
    start_offset: int = UNINITIALIZED_START_OFFSET
    create_timestamp: int = 0
    updates: int = 0  # since the snapshot
    # offset -> (delivery state, delivery count), offsets >= start_offset only
    states: dict[int, tuple[int, int]] = field(default_factory=dict)
    since_snapshot: set[int] = field(default_factory=set)

    def batches(self, offsets: Iterable[int] | None = None) -> tuple[PersistedStateBatch, ...]:
        """Runs of equal (state, count) over the given offsets (all when None)."""
        chosen = sorted(self.states if offsets is None else
                        (o for o in offsets if o in self.states))
        runs: list[PersistedStateBatch] = []
        for offset in chosen:
            state, count = self.states[offset]
            last = runs[-1] if runs else None
            if (last is not None and last.last_offset == offset - 1
                    and last.delivery_state == state and last.delivery_count == count):
                runs[-1] = PersistedStateBatch(last.first_offset, offset, state, count)
            else:
                runs.append(PersistedStateBatch(offset, offset, state, count))
        return tuple(runs)


@dataclass(frozen=True, slots=True)
class ReadResult:
    error: ErrorCode
    state_epoch: int = DEFAULT_STATE_EPOCH
    leader_epoch: int = -1
    start_offset: int = UNINITIALIZED_START_OFFSET
    batches: tuple[PersistedStateBatch, ...] = ()


class ShareStateStore:
    """The keys of one `__share_group_state` partition. Not thread-safe; callers serialize
    operations on a key until their records are replayed."""

    def __init__(self, snapshot_every: int = 500) -> None:
        self.entries: dict[tuple[str, uuid.UUID, int], ShareStateEntry] = {}
        self.snapshot_every = snapshot_every

    # ------------------------------------------------------------------ replay
    def replay(self, record: ShareStateRecord) -> None:
        key = (record.key.group_id, record.key.topic_id, record.key.partition)
        value = record.value
        if value is None:
            self.entries.pop(key, None)
            return
        if isinstance(value, ShareSnapshotValue):
            entry = ShareStateEntry(
                snapshot_epoch=value.snapshot_epoch, state_epoch=value.state_epoch,
                leader_epoch=value.leader_epoch, start_offset=value.start_offset,
                create_timestamp=value.create_timestamp,
            )
            self.entries[key] = entry
        else:
            found = self.entries.get(key)
            if found is None or found.snapshot_epoch != value.snapshot_epoch:
                return  # an update of a superseded snapshot (compaction kept it)
            entry = found
            entry.updates += 1
            entry.leader_epoch = max(entry.leader_epoch, value.leader_epoch)
            if value.start_offset >= 0:
                entry.start_offset = value.start_offset
        for batch in value.state_batches:
            for offset in range(batch.first_offset, batch.last_offset + 1):
                entry.states[offset] = (batch.delivery_state, batch.delivery_count)
                if isinstance(value, ShareUpdateValue):
                    entry.since_snapshot.add(offset)
        if entry.start_offset >= 0:
            for offset in [o for o in entry.states if o < entry.start_offset]:
                del entry.states[offset]
            entry.since_snapshot = {o for o in entry.since_snapshot if o >= entry.start_offset}

    # ------------------------------------------------------------------ operations
    def read(self, key: tuple[str, uuid.UUID, int], leader_epoch: int,
             now_ms: int) -> tuple[ReadResult, list[ShareStateRecord]]:
        """ReadShareGroupState: the state, and an update recording a newer leader epoch."""
        entry = self.entries.get(key)
        if entry is None:
            return ReadResult(ErrorCode.NONE), []
        if leader_epoch >= 0 and leader_epoch < entry.leader_epoch:
            return ReadResult(ErrorCode.FENCED_LEADER_EPOCH), []
        result = ReadResult(ErrorCode.NONE, entry.state_epoch, entry.leader_epoch,
                            entry.start_offset, entry.batches())
        if leader_epoch > entry.leader_epoch:
            return result, [self._record(key, entry, leader_epoch, -1, (), now_ms)]
        return result, []

    def write(self, key: tuple[str, uuid.UUID, int], state_epoch: int, leader_epoch: int,
              start_offset: int, batches: Iterable[PersistedStateBatch],
              now_ms: int) -> tuple[ErrorCode, list[ShareStateRecord]]:
        """WriteShareGroupState: one update (or snapshot) with the changed offsets."""
        entry = self.entries.get(key)
        if entry is not None:
            if leader_epoch >= 0 and leader_epoch < entry.leader_epoch:
                return ErrorCode.FENCED_LEADER_EPOCH, []
            if state_epoch != entry.state_epoch:
                return ErrorCode.FENCED_STATE_EPOCH, []
        changed = tuple(batches)
        for batch in changed:
            if batch.last_offset < batch.first_offset or batch.first_offset < 0:
                return ErrorCode.INVALID_REQUEST, []
        if sum(b.last_offset - b.first_offset + 1 for b in changed) > MAX_STATE_OFFSETS:
            return ErrorCode.INVALID_REQUEST, []
        if entry is None:
            entry = ShareStateEntry(state_epoch=state_epoch, create_timestamp=now_ms)
            return ErrorCode.NONE, [self._snapshot(key, entry, leader_epoch, start_offset,
                                                   changed, now_ms, entry.snapshot_epoch + 1)]
        return ErrorCode.NONE, [self._record(key, entry, leader_epoch, start_offset, changed,
                                             now_ms)]

    def initialize(self, key: tuple[str, uuid.UUID, int], state_epoch: int, start_offset: int,
                   now_ms: int) -> tuple[ErrorCode, list[ShareStateRecord]]:
        """InitializeShareGroupState: a fresh snapshot at `start_offset` with a newer state
        epoch (AlterShareGroupOffsets); FENCED_STATE_EPOCH for an older one."""
        entry = self.entries.get(key)
        if entry is not None and state_epoch <= entry.state_epoch:
            return ErrorCode.FENCED_STATE_EPOCH, []
        if start_offset < 0:
            return ErrorCode.INVALID_REQUEST, []
        fresh = ShareStateEntry(state_epoch=state_epoch, create_timestamp=now_ms,
                                leader_epoch=-1 if entry is None else entry.leader_epoch)
        snapshot_epoch = 1 if entry is None else entry.snapshot_epoch + 1
        return ErrorCode.NONE, [self._snapshot(key, fresh, fresh.leader_epoch, start_offset, (),
                                               now_ms, snapshot_epoch)]

    def delete(self, key: tuple[str, uuid.UUID, int]) -> list[ShareStateRecord]:
        """DeleteShareGroupState: a tombstone (nothing when there is no state)."""
        if key not in self.entries:
            return []
        return [ShareStateRecord(SharePartitionKey(*key), None, SNAPSHOT_TYPE)]

    # ------------------------------------------------------------------ records
    def _record(self, key: tuple[str, uuid.UUID, int], entry: ShareStateEntry,
                leader_epoch: int, start_offset: int, changed: tuple[PersistedStateBatch, ...],
                now_ms: int) -> ShareStateRecord:
        if entry.updates + 1 >= self.snapshot_every:
            return self._snapshot(key, entry, leader_epoch, start_offset, changed, now_ms,
                                  entry.snapshot_epoch + 1)
        merged = _merged(entry, start_offset, changed)
        offsets = set(entry.since_snapshot)
        for batch in changed:
            offsets.update(range(batch.first_offset, batch.last_offset + 1))
        start = merged.start_offset
        value = ShareUpdateValue(
            entry.snapshot_epoch, max(leader_epoch, entry.leader_epoch),
            start_offset if start_offset >= 0 else -1,
            merged.batches(o for o in offsets if o >= start),
        )
        return ShareStateRecord(SharePartitionKey(*key), value, UPDATE_TYPE)

    def _snapshot(self, key: tuple[str, uuid.UUID, int], entry: ShareStateEntry,
                  leader_epoch: int, start_offset: int,
                  changed: tuple[PersistedStateBatch, ...], now_ms: int,
                  snapshot_epoch: int) -> ShareStateRecord:
        merged = _merged(entry, start_offset, changed)
        value = ShareSnapshotValue(
            snapshot_epoch, entry.state_epoch, max(leader_epoch, entry.leader_epoch),
            max(0, merged.start_offset), entry.create_timestamp or now_ms, now_ms,
            merged.batches(),
        )
        return ShareStateRecord(SharePartitionKey(*key), value, SNAPSHOT_TYPE)


def _merged(entry: ShareStateEntry, start_offset: int,
            changed: Iterable[PersistedStateBatch]) -> ShareStateEntry:
    """A copy of `entry` with the changes applied (the entry itself is untouched)."""
    start = start_offset if start_offset >= 0 else entry.start_offset
    states = dict(entry.states)
    for batch in changed:
        for offset in range(batch.first_offset, batch.last_offset + 1):
            states[offset] = (batch.delivery_state, batch.delivery_count)
    if start >= 0:
        states = {o: s for o, s in states.items() if o >= start}
    return ShareStateEntry(entry.snapshot_epoch, entry.state_epoch, entry.leader_epoch, start,
                           entry.create_timestamp, entry.updates, states)
