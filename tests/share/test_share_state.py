"""The share coordinator's pure state (coordinator/share_state.py): writes, reads, fencing,
snapshots, and that replaying only what compaction keeps (each key's latest snapshot and
latest update) rebuilds the same state."""

from __future__ import annotations

import random
import uuid

from tidelog.coordinator.share_records import (
    PersistedStateBatch,
    ShareStateRecord,
    decode_share_record,
)
from tidelog.coordinator.share_state import (
    ShareStateStore,
    coordinator_key,
    parse_coordinator_key,
)
from tidelog.errors import ErrorCode

TOPIC_ID = uuid.UUID("6c0b4b57-6f2e-4b34-9a2c-1d4f1c0f2b10")
KEY = ("g", TOPIC_ID, 3)


def _apply(store: ShareStateStore, records: list[ShareStateRecord]) -> None:
    for record in records:  # through the bytes, as a replay from the log does
        store.replay(decode_share_record(record.key_bytes(), record.value_bytes()))


def _batch(first: int, last: int, state: int, count: int) -> PersistedStateBatch:
    return PersistedStateBatch(first, last, state, count)


def test_write_then_read_merges_updates_over_the_snapshot() -> None:
    store = ShareStateStore()
    error, records = store.write(KEY, 0, 5, 0, [_batch(0, 4, 0, 1)], 1000)
    assert error is ErrorCode.NONE and records[0].record_type == 0  # the first is a snapshot
    _apply(store, records)
    error, records = store.write(KEY, 0, 5, 2, [_batch(2, 2, 2, 1), _batch(5, 6, 0, 1)], 1001)
    assert error is ErrorCode.NONE and records[0].record_type == 1
    _apply(store, records)
    result, extra = store.read(KEY, 5, 1002)
    assert extra == [] and result.error is ErrorCode.NONE
    assert result.start_offset == 2 and result.state_epoch == 0
    assert result.batches == (_batch(2, 2, 2, 1), _batch(3, 6, 0, 1))


def test_unknown_key_reads_uninitialized() -> None:
    result, records = ShareStateStore().read(KEY, 1, 0)
    assert (result.error, result.start_offset, result.batches, records) == (
        ErrorCode.NONE, -1, (), [])


def test_a_newer_leader_epoch_fences_the_previous_leader() -> None:
    store = ShareStateStore()
    _apply(store, store.write(KEY, 0, 1, 0, [_batch(0, 0, 0, 1)], 0)[1])
    result, records = store.read(KEY, 2, 1)  # the new leader reads
    assert result.error is ErrorCode.NONE and len(records) == 1
    _apply(store, records)
    assert store.write(KEY, 0, 1, 0, [_batch(0, 0, 2, 1)], 2) == (
        ErrorCode.FENCED_LEADER_EPOCH, [])
    assert store.read(KEY, 1, 3)[0].error is ErrorCode.FENCED_LEADER_EPOCH
    assert store.write(KEY, 0, 2, 0, [_batch(0, 0, 2, 1)], 4)[0] is ErrorCode.NONE


def test_initialize_starts_a_new_state_epoch_that_fences_writes() -> None:
    store = ShareStateStore()
    _apply(store, store.write(KEY, 0, 1, 0, [_batch(0, 9, 2, 1)], 0)[1])
    assert store.initialize(KEY, 0, 5, 1)[0] is ErrorCode.FENCED_STATE_EPOCH
    error, records = store.initialize(KEY, 1, 5, 1)
    assert error is ErrorCode.NONE
    _apply(store, records)
    result, _ = store.read(KEY, -1, 2)
    assert (result.state_epoch, result.start_offset, result.batches) == (1, 5, ())
    assert store.write(KEY, 0, 1, 5, [], 3)[0] is ErrorCode.FENCED_STATE_EPOCH
    assert store.write(KEY, 1, 1, 5, [_batch(5, 5, 0, 1)], 3)[0] is ErrorCode.NONE


def test_delete_writes_a_tombstone() -> None:
    store = ShareStateStore()
    assert store.delete(KEY) == []
    _apply(store, store.write(KEY, 0, 1, 0, [], 0)[1])
    _apply(store, store.delete(KEY))
    assert KEY not in store.entries


def test_bad_batches_are_refused() -> None:
    store = ShareStateStore()
    assert store.write(KEY, 0, 1, 0, [_batch(5, 4, 0, 1)], 0) == (ErrorCode.INVALID_REQUEST, [])
    assert store.write(KEY, 0, 1, 0, [_batch(0, 10**9, 0, 1)], 0)[0] is (
        ErrorCode.INVALID_REQUEST)


def test_compaction_keeps_enough_to_rebuild_the_state() -> None:
    """Random writes with a snapshot every 7 updates: replaying only each key's latest
    snapshot and latest update after it gives the state a full replay gives."""
    rng = random.Random(7)
    store = ShareStateStore(snapshot_every=7)
    log: list[ShareStateRecord] = []
    start = 0
    for turn in range(200):
        start += rng.choice((0, 0, 1, 2))
        batches = [_batch(o, o, rng.choice((0, 2, 4)), rng.randint(1, 5))
                   for o in sorted(rng.sample(range(start, start + 30), 3))]
        error, records = store.write(KEY, 0, 1, start, batches, turn)
        assert error is ErrorCode.NONE
        _apply(store, records)
        log.extend(records)
    last_snapshot = max(i for i, r in enumerate(log) if r.record_type == 0)
    updates = [r for r in log[last_snapshot + 1:] if r.record_type == 1]
    compacted = ShareStateStore(snapshot_every=7)
    _apply(compacted, [log[last_snapshot], *updates[-1:]])
    assert compacted.read(KEY, -1, 0)[0] == store.read(KEY, -1, 0)[0]


def test_coordinator_keys_round_trip() -> None:
    key = coordinator_key("orders:eu", TOPIC_ID, 12)
    assert parse_coordinator_key(key) == ("orders:eu", TOPIC_ID, 12)
    for bad in ("", "g", "g:x:1", f"g:{key.split(':')[-2]}:x", ":AAAAAAAAAAAAAAAAAAAAAA:1"):
        assert parse_coordinator_key(bad) is None
