"""Log compaction: offset map, batch rewrite, passes over real segment files, crash safety."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidelog.errors import CorruptRecordError
from tidelog.records.batch import Codec, RecordBatch, TimestampType, iter_batches
from tidelog.records.builder import NewRecord, build_batch
from tidelog.records.record import iter_records
from tidelog.storage.cleaned_batch import clean_batch
from tidelog.storage.cleaner import LogCleaner
from tidelog.storage.cleaner_swap import CLEANED_SUFFIX, SWAP_SUFFIX
from tidelog.storage.config import LogConfig
from tidelog.storage.log import PartitionLog
from tidelog.storage.manager import LogManager
from tidelog.storage.offset_map import SLOT_BYTES, OffsetMap, key_digest
from tidelog.types import TopicPartition

TP = TopicPartition("compacted", 0)
COMPACT = LogConfig(
    cleanup_policy="compact", segment_bytes=64 * 1024, index_interval_bytes=64,
    segment_index_bytes=4096, min_cleanable_dirty_ratio=0.0, delete_retention_ms=1_000,
)
Entry = tuple[int, bytes | None, bytes | None]  # offset, key, value


def keyed(key: str, value: str | None, timestamp_ms: int = 1_000) -> NewRecord:
    return NewRecord(None if value is None else value.encode(), key.encode(), (), timestamp_ms)


def append(
    log: PartitionLog, records: Sequence[NewRecord], *, codec: Codec = Codec.NONE,
    now_ms: int = 1_000, **fields: int,
) -> None:
    buffer = build_batch(records, codec=codec, now_ms=now_ms, **fields)  # type: ignore[arg-type]
    log.append([RecordBatch(memoryview(buffer))], now_ms=now_ms)


def read_batches(log: PartitionLog) -> list[RecordBatch]:
    """Everything from the log start through the read path; compaction may leave no batch at
    all below the log end offset (every record removed), which reads as empty."""
    batches: list[RecordBatch] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        result = log.read(offset, 1 << 20)
        got = list(iter_batches(b"".join(s.read_bytes() for s in result.slices)))
        if not got:
            break
        batches.extend(got)
        offset = got[-1].next_offset
    return batches


def entries(log: PartitionLog) -> list[Entry]:
    """Every record through the normal read path."""
    return [
        (record.offset, record.key, record.value)
        for batch in read_batches(log)
        for record in iter_records(batch)
    ]


def clean_until_done(
    cleaner: LogCleaner, log: PartitionLog, now_ms: int, budget_bytes: int = 1 << 20
) -> int:
    steps = 0
    while cleaner.clean_step(log, now_ms, budget_bytes):
        steps += 1
        assert steps < 10_000, "the cleaner does not converge"
    return steps


def open_log(path: Path, config: LogConfig = COMPACT, **kwargs: object) -> PartitionLog:
    return PartitionLog(TP, path / TP.dir_name, config, **kwargs)  # type: ignore[arg-type]


# --- offset map ---------------------------------------------------------------------------------
def test_offset_map_keeps_latest_offset_within_its_memory() -> None:
    offset_map = OffsetMap(100 * SLOT_BYTES)
    assert offset_map.memory_bytes == 100 * SLOT_BYTES
    assert offset_map.max_entries == 90
    for offset in range(200):
        offset_map.put(key_digest(str(offset % 50).encode()), offset)
    assert offset_map.entries == 50
    assert offset_map.get(key_digest(b"7")) == 157
    assert offset_map.get(key_digest(b"missing")) == -1
    assert offset_map.latest_offset == 199
    for offset in range(40):
        offset_map.put(key_digest(f"more-{offset}".encode()), 1_000 + offset)
    assert offset_map.free_slots == 0
    with pytest.raises(AssertionError):
        offset_map.put(key_digest(b"one too many"), 5_000)
    offset_map.clear()
    assert offset_map.entries == 0 and offset_map.get(key_digest(b"7")) == -1


# --- one batch ----------------------------------------------------------------------------------
@pytest.mark.parametrize("codec", list(Codec))
def test_clean_batch_keeps_offsets_codec_producer_fields(codec: Codec) -> None:
    records = [keyed("a", "1", 10), keyed("b", "2", 30), keyed("a", "3", 20), keyed("c", None, 5)]
    buffer = build_batch(
        records, base_offset=100, codec=codec, producer_id=7, producer_epoch=2,
        base_sequence=40, partition_leader_epoch=3,
    )
    batch = RecordBatch(buffer)
    offset_map = OffsetMap(1024)
    for offset, key in ((102, b"a"), (101, b"b"), (103, b"c")):
        offset_map.put(key_digest(key), offset)
    cleaned = clean_batch(batch, offset_map, now_ms=5_000, delete_retention_ms=1_000)
    assert cleaned is not None
    out = RecordBatch(cleaned)
    out.validate()
    assert (out.base_offset, out.last_offset_delta, out.records_count) == (100, 3, 3)
    assert (out.producer_id, out.producer_epoch, out.base_sequence) == (7, 2, 40)
    assert (out.partition_leader_epoch, out.codec) == (3, codec)
    assert out.has_delete_horizon and out.base_timestamp == 6_000  # the tombstone's horizon
    got = [(r.offset, r.key, r.value, r.timestamp) for r in iter_records(out)]
    assert got == [(101, b"b", b"2", 30), (102, b"a", b"3", 20), (103, b"c", None, 5)]
    assert out.max_timestamp == 30

    # After the horizon the tombstone goes and the horizon with it.
    again = clean_batch(out, offset_map, now_ms=6_000, delete_retention_ms=1_000)
    assert again is not None
    final = RecordBatch(again)
    final.validate()
    assert not final.has_delete_horizon and final.last_offset_delta == 3
    assert [(r.offset, r.value, r.timestamp) for r in iter_records(final)] == [
        (101, b"2", 30), (102, b"3", 20)
    ]


def test_clean_batch_unchanged_batch_is_the_same_bytes_and_empty_batch_is_dropped() -> None:
    batch = RecordBatch(build_batch([keyed("x", "1"), keyed("y", "2")], base_offset=5))
    offset_map = OffsetMap(1024)
    assert clean_batch(batch, offset_map, now_ms=0, delete_retention_ms=0) is batch.buffer
    offset_map.put(key_digest(b"x"), 9)
    offset_map.put(key_digest(b"y"), 9)
    assert clean_batch(batch, offset_map, now_ms=0, delete_retention_ms=0) is None
    keyless = RecordBatch(build_batch([NewRecord(b"v")], base_offset=5))
    assert clean_batch(keyless, OffsetMap(1024), now_ms=0, delete_retention_ms=0) is None


def test_clean_batch_log_append_time_keeps_record_timestamps() -> None:
    buffer = build_batch(
        [keyed("k", "old"), keyed("k", None)], timestamp_type=TimestampType.LOG_APPEND_TIME,
        now_ms=777,
    )
    offset_map = OffsetMap(1024)
    offset_map.put(key_digest(b"k"), 1)
    cleaned = clean_batch(RecordBatch(buffer), offset_map, now_ms=50, delete_retention_ms=10)
    assert cleaned is not None
    out = RecordBatch(cleaned)
    assert out.has_delete_horizon and out.base_timestamp == 60 and out.max_timestamp == 777
    assert [(r.offset, r.timestamp) for r in iter_records(out)] == [(1, 777)]


def test_clean_batch_corrupt_records_raise_typed_error() -> None:
    buffer = bytearray(build_batch([keyed("k", "v")]))
    buffer[61] = 0x7F  # record length far past the batch
    with pytest.raises(CorruptRecordError):
        clean_batch(RecordBatch(buffer), OffsetMap(1024), now_ms=0, delete_retention_ms=0)


@settings(max_examples=300, deadline=None)
@given(
    codec=st.sampled_from([Codec.NONE, Codec.NONE, Codec.GZIP, Codec.ZSTD]),
    flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=4),
)
def test_clean_batch_fuzz_only_typed_errors(codec: Codec, flips: list[tuple[int, int]]) -> None:
    records = [keyed("a", "1"), keyed("bb", None), NewRecord(b"x", None, (("h", b"v"),))]
    buffer = build_batch(records, codec=codec)
    for position, value in flips:  # damage the records section only; the header is checked
        buffer[61 + position % (len(buffer) - 61)] = value
    offset_map = OffsetMap(1024)
    offset_map.put(key_digest(b"a"), 0)
    try:
        cleaned = clean_batch(RecordBatch(buffer), offset_map, now_ms=0, delete_retention_ms=0)
    except CorruptRecordError:
        return
    if cleaned is not None:
        RecordBatch(cleaned).validate()


# --- passes over a log --------------------------------------------------------------------------
def test_compaction_keeps_latest_per_key_and_original_offsets(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for round_number in range(3):
        for key in "abcd":
            append(log, [keyed(key, f"{key}{round_number}")])
        log.roll()
    append(log, [keyed("a", "active")])
    before_active = (log.active_segment.base_offset, log.active_segment.size)
    cleaner = LogCleaner()
    clean_until_done(cleaner, log, now_ms=2_000)
    assert entries(log) == [
        (8, b"a", b"a2"), (9, b"b", b"b2"), (10, b"c", b"c2"), (11, b"d", b"d2"),
        (12, b"a", b"active"),
    ]
    assert (log.active_segment.base_offset, log.active_segment.size) == before_active
    assert log.log_start_offset == 0 and log.log_end_offset == 13
    assert cleaner.stats.records_removed == 8 and cleaner.first_dirty_offset(log) == 12
    assert log.read(3, 1 << 20).slices  # an offset in a gap reads from the next batch
    log.close()
    reopened = open_log(tmp_path)
    assert [e[0] for e in entries(reopened)] == [8, 9, 10, 11, 12]
    reopened.close()


def test_tombstones_stay_until_delete_horizon(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, [keyed("a", "1"), keyed("b", "1")])
    append(log, [keyed("a", None)])
    log.roll()
    append(log, [keyed("z", "active")])
    cleaner = LogCleaner()
    clean_until_done(cleaner, log, now_ms=10_000)
    assert entries(log) == [(1, b"b", b"1"), (2, b"a", None), (3, b"z", b"active")]
    clean_until_done(cleaner, log, now_ms=10_999)  # before the horizon: nothing to do
    assert (2, b"a", None) in entries(log)
    clean_until_done(cleaner, log, now_ms=11_000)
    assert entries(log) == [(1, b"b", b"1"), (3, b"z", b"active")]
    log.close()


def test_segment_with_nothing_to_remove_is_not_rewritten(tmp_path: Path) -> None:
    config = LogConfig(cleanup_policy="compact", min_cleanable_dirty_ratio=0.0, segment_bytes=100)
    log = open_log(tmp_path, config)
    for key in "abc":
        append(log, [keyed(key, "1")])
        log.roll()
    inodes = sorted(p.stat().st_ino for p in log.directory.glob("*.log"))
    cleaner = LogCleaner()
    clean_until_done(cleaner, log, now_ms=0)
    assert cleaner.stats.passes == 1 and cleaner.stats.swaps == 0
    assert sorted(p.stat().st_ino for p in log.directory.glob("*.log")) == inodes
    assert not list(log.directory.glob("*" + CLEANED_SUFFIX))
    assert [e[1] for e in entries(log)] == [b"a", b"b", b"c"]
    log.close()


def test_min_compaction_lag_and_active_segment_untouched(tmp_path: Path) -> None:
    config = LogConfig(
        cleanup_policy="compact", min_cleanable_dirty_ratio=0.0, min_compaction_lag_ms=5_000,
    )
    log = open_log(tmp_path, config)
    append(log, [keyed("k", "old", 1_000)], now_ms=1_000)
    log.roll()
    append(log, [keyed("k", "young", 9_000)], now_ms=9_000)
    log.roll()
    append(log, [keyed("k", "active", 9_500)], now_ms=9_500)
    cleaner = LogCleaner()
    clean_until_done(cleaner, log, now_ms=10_000)  # segment 1 is younger than the lag
    assert [e[2] for e in entries(log)] == [b"old", b"young", b"active"]
    clean_until_done(cleaner, log, now_ms=14_001)  # now it is old enough; the active is not
    assert [e[2] for e in entries(log)] == [b"young", b"active"]
    log.close()


def test_dirty_ratio_gates_cleaning(tmp_path: Path) -> None:
    config = LogConfig(cleanup_policy="compact", min_cleanable_dirty_ratio=0.5)
    log = open_log(tmp_path, config)
    append(log, [keyed("k", "1")])
    log.roll()
    cleaner = LogCleaner()
    clean_until_done(cleaner, log, now_ms=0)
    assert cleaner.cleanable_range(log, 0).dirty_bytes == 0
    append(log, [keyed("k", "2"), keyed("j", "1"), keyed("j", "3")])
    log.roll()
    assert cleaner.cleanable_range(log, 0).dirty_ratio > 0.5
    assert cleaner.needs_cleaning(log, 0)
    clean_until_done(cleaner, log, now_ms=0)
    assert [e[2] for e in entries(log)] == [b"2", b"3"]
    delete_log = open_log(tmp_path / "d", LogConfig(cleanup_policy="delete"))
    append(delete_log, [keyed("k", "1"), keyed("k", "2")])
    delete_log.roll()
    assert not cleaner.needs_cleaning(delete_log, 0)
    log.close()
    delete_log.close()


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])
def test_compressed_batches_compacted(tmp_path: Path, codec: Codec) -> None:
    log = open_log(tmp_path)
    for round_number in range(4):
        records = [keyed(f"k{i}", f"v{round_number}-{i}") for i in range(8)]
        if round_number == 3:
            records = records[:4]
        append(log, records, codec=codec)
    log.roll()
    append(log, [keyed("tail", "x")], codec=codec)
    clean_until_done(LogCleaner(), log, now_ms=0)
    expected = [(16 + i, f"k{i}".encode(), f"v2-{i}".encode()) for i in range(4, 8)]
    expected += [(24 + i, f"k{i}".encode(), f"v3-{i}".encode()) for i in range(4)]
    assert entries(log) == [*sorted(expected), (28, b"tail", b"x")]
    for batch in read_batches(log):
        batch.validate()
        assert batch.codec == codec
    log.close()


def test_small_map_cleans_in_several_passes(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for round_number in range(3):
        for key in range(20):
            append(log, [keyed(f"k{key}", f"{round_number}")])
        log.roll()
    append(log, [keyed("tail", "x")])
    cleaner = LogCleaner(map_memory_bytes=12 * SLOT_BYTES)  # 10 keys per pass
    clean_until_done(cleaner, log, now_ms=0, budget_bytes=300)
    assert cleaner.stats.passes >= 6
    assert entries(log) == [(40 + k, f"k{k}".encode(), b"2") for k in range(20)] + [
        (60, b"tail", b"x")
    ]
    log.close()


def test_cleaner_offset_checkpoint_survives_restart(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, [keyed("a", "1"), keyed("a", "2")])
    log.roll()
    cleaner = LogCleaner(tmp_path)
    clean_until_done(cleaner, log, now_ms=0)
    assert (tmp_path / "cleaner-offset-checkpoint").read_text().splitlines() == [
        "0", "1", f"{TP.topic} 0 2"
    ]
    assert LogCleaner(tmp_path).first_dirty_offset(log) == 2
    log.close()


def test_log_manager_tick_compacts_and_keeps_it_across_restart(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, COMPACT, now_ms=0)
    log = manager.create(TP, COMPACT)
    other = manager.create(TopicPartition("plain", 0), LogConfig())
    for value in ("1", "2", "3"):
        append(log, [keyed("k", value)])
        append(other, [keyed("k", value)])
    log.roll()
    other.roll()
    for now_ms in range(1, 50):
        manager.tick(now_ms)
    assert entries(log) == [(2, b"k", b"3")]
    assert len(entries(other)) == 3
    manager.close()
    restarted = LogManager(tmp_path, COMPACT, now_ms=100)
    reopened = restarted.get(TP)
    assert reopened is not None and entries(reopened) == [(2, b"k", b"3")]
    assert restarted.cleaner.first_dirty_offset(reopened) == 3
    restarted.delete(TP)
    restarted.close()


# --- crash safety -------------------------------------------------------------------------------
class SimulatedCrash(BaseException):
    """Raised where a crash is simulated; the cleaner must not swallow it."""


def compacted_model(
    records: Sequence[Entry], first_uncleanable_offset: int, tombstones_expired_below: int = 0
) -> list[Entry]:
    """What compaction must leave: below first_uncleanable_offset only the latest record of
    each key, minus tombstones below tombstones_expired_below; everything after it as is."""
    latest: dict[bytes | None, int] = {}
    for offset, key, _ in records:
        if offset < first_uncleanable_offset:
            latest[key] = offset
    return [
        (offset, key, value)
        for offset, key, value in records
        if offset >= first_uncleanable_offset
        or (
            key is not None and latest[key] == offset
            and not (value is None and offset < tombstones_expired_below)
        )
    ]


def build_crash_log(tmp_path: Path) -> tuple[PartitionLog, list[Entry]]:
    """Three segments of overwritten keys and an active one; returns the log and what a
    complete cleaning leaves."""
    log = open_log(tmp_path)
    for round_number in range(3):
        for key in range(6):
            append(log, [keyed(f"k{key}", f"{round_number}"), keyed("t", None)])
        log.roll()
    append(log, [keyed("k0", "active")])
    return log, compacted_model(entries(log), log.active_segment.base_offset)


def test_crash_while_writing_cleaned_file_rolls_back(tmp_path: Path) -> None:
    log, expected = build_crash_log(tmp_path)
    original = entries(log)
    cleaner = LogCleaner()
    while not list(log.directory.glob("*" + CLEANED_SUFFIX)):
        assert cleaner.clean_step(log, 0, 100)
    log.close()  # crash: the pass dies with the process
    reopened = open_log(tmp_path, clean=False)
    assert not list(reopened.directory.glob("*" + CLEANED_SUFFIX))
    assert entries(reopened) == original
    clean_until_done(LogCleaner(), reopened, now_ms=0)
    assert entries(reopened) == expected
    reopened.close()


@pytest.mark.parametrize("stage", ["committed", "one old deleted", "two old deleted", "linked"])
def test_crash_after_swap_commit_completes(tmp_path: Path, stage: str) -> None:
    log, expected = build_crash_log(tmp_path)
    directory = log.directory
    old_logs = sorted(directory.glob("*.log"))[:-1]
    deleted = {"committed": 0, "one old deleted": 1, "two old deleted": 2}.get(stage, 3)

    def crash(*_: object) -> None:
        for path in old_logs[:deleted]:  # the crash came part way through the swap
            for suffix in (".log", ".index", ".timeindex"):
                path.with_suffix(suffix).unlink()
        if stage == "linked":  # .swap linked as <base>.log, indexes half written
            (swap,) = directory.glob("*" + SWAP_SUFFIX)
            old_logs[0].hardlink_to(swap)
            old_logs[0].with_suffix(".index").write_bytes(b"\x00" * 8)
        raise SimulatedCrash

    log.replace_segments = crash  # type: ignore[method-assign, assignment]
    with pytest.raises(SimulatedCrash):
        clean_until_done(LogCleaner(), log, now_ms=0)
    assert len(list(directory.glob("*" + SWAP_SUFFIX))) == 1
    del log.replace_segments
    log.close()
    reopened = open_log(tmp_path, clean=False)
    assert not list(directory.glob("*" + SWAP_SUFFIX))
    assert entries(reopened) == expected
    assert len(list(directory.glob("*.log"))) == reopened.segment_count() == 2
    assert reopened.offset_for_timestamp(0) == (expected[0][0], 1_000)  # indexes rebuilt
    reopened.close()
