"""PartitionLog: append, read, lookups, rolls, retention, truncation (round trips + properties)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidelog.errors import CorruptRecordError, ErrorCode, KafkaError
from tidelog.records.batch import RecordBatch, TimestampType, iter_batches
from tidelog.records.builder import NewRecord, build_batch
from tidelog.storage.config import LogConfig
from tidelog.storage.log import PartitionLog
from tidelog.storage.segment import TRANSITIONS, SegmentState
from tidelog.types import TopicPartition

from .helpers import (
    all_batches,
    index_files,
    linear_offset_lookup,
    linear_timestamp_lookup,
    make_batch,
    read_all,
)

TP = TopicPartition("events", 0)
SMALL = LogConfig(segment_bytes=4096, index_interval_bytes=256, segment_index_bytes=4096)


def open_log(path: Path, config: LogConfig = SMALL, **kwargs: object) -> PartitionLog:
    return PartitionLog(TP, path / TP.dir_name, config, **kwargs)  # type: ignore[arg-type]


def test_append_assigns_dense_offsets_and_reads_back(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    results = [log.append([make_batch(3, tag=i)], now_ms=1_000, leader_epoch=7) for i in range(50)]
    assert [r.base_offset for r in results] == list(range(0, 150, 3))
    assert all(r.last_offset == r.base_offset + 2 for r in results)
    assert log.log_end_offset == 150
    stored = read_all(log)
    assert [b.base_offset for b in stored] == list(range(0, 150, 3))
    assert all(b.is_valid() and b.partition_leader_epoch == 7 for b in stored)
    assert log.segment_count() > 1  # 4 KiB segments rolled
    log.close()


def test_read_limits(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(index_interval_bytes=100))
    sizes = []
    for i in range(20):
        batch = make_batch(2, value_size=40, tag=i)
        sizes.append(batch.size)
        log.append([batch], now_ms=0)
    # at the log end: empty; beyond it or below the start: OFFSET_OUT_OF_RANGE
    assert log.read(40, 1000).size == 0
    for bad in (41, -1):
        with pytest.raises(KafkaError) as info:
            log.read(bad, 1000)
        assert info.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    # an offset inside a batch returns that whole batch
    first = list(iter_batches(log.read(5, 10_000).slices[0].read_bytes()))
    assert first[0].base_offset == 4
    # max_bytes: whole batches only; at least one when min_one_batch
    result = log.read(0, sizes[0] * 3 + 5)
    assert result.size == sum(sizes[:3])
    assert log.read(0, 10).size == sizes[0]
    assert log.read(0, 10, min_one_batch=False).size == 0
    # max_offset (high watermark, exclusive) stops before the batch holding it
    limited = list(iter_batches(log.read(0, 1 << 20, max_offset=9).slices[0].read_bytes()))
    assert [b.base_offset for b in limited] == [0, 2, 4, 6]
    assert log.read(10, 1 << 20, max_offset=10).size == 0
    log.close()


def test_reads_span_segments(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(segment_bytes=1000, index_interval_bytes=10))
    for i in range(40):
        log.append([make_batch(1, value_size=100, tag=i)], now_ms=0)
    assert log.segment_count() > 3
    result = log.read(0, 1 << 20)
    assert len(result.slices) == log.segment_count()
    data = b"".join(s.read_bytes() for s in result.slices)
    assert [b.base_offset for b in iter_batches(data)] == list(range(40))
    log.close()


def test_validation_errors(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(max_message_bytes=200))
    with pytest.raises(KafkaError) as info:
        log.append([make_batch(1, value_size=300)], now_ms=0)
    assert info.value.code == ErrorCode.MESSAGE_TOO_LARGE
    bad = make_batch(1)
    bad.buffer[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        log.append([bad], now_ms=0)
    good = make_batch(1)
    with pytest.raises(CorruptRecordError):  # all or nothing: the valid batch is not written
        log.append([good, bad], now_ms=0)
    assert log.log_end_offset == 0 and log.size_bytes() == 0
    with pytest.raises(KafkaError):
        log.append([], now_ms=0)
    log.close()


def test_log_append_time_rewrites_timestamp_and_crc(tmp_path: Path) -> None:
    config = LogConfig(message_timestamp_type="LogAppendTime")
    log = open_log(tmp_path, config)
    result = log.append([make_batch(2, timestamp_ms=5)], now_ms=123_456)
    assert result.log_append_time_ms == 123_456
    (stored,) = read_all(log)
    assert stored.is_valid()
    assert stored.max_timestamp == 123_456
    assert stored.timestamp_type == TimestampType.LOG_APPEND_TIME
    log.close()


def test_roll_on_segment_ms_and_full_index(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(segment_ms=1000))
    log.append([make_batch()], now_ms=0)
    log.append([make_batch()], now_ms=1000)
    assert log.segment_count() == 1
    log.append([make_batch()], now_ms=1001)
    assert log.segment_count() == 2
    assert log.active_segment.base_offset == 2
    log.close()
    # 48-byte indexes: 6 offset entries, 4 time entries (one kept for the final entry)
    log = open_log(tmp_path / "b", LogConfig(segment_index_bytes=48, index_interval_bytes=0))
    for timestamp in range(12):
        log.append([make_batch(timestamp_ms=timestamp)], now_ms=0)
    assert all(s.time_index.entries <= 4 for s in log.segments())
    assert log.segment_count() >= 3
    assert [b.base_offset for b in read_all(log)] == list(range(12))
    log.close()


def test_truncate_to(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(segment_bytes=600, index_interval_bytes=50))
    for i in range(30):
        log.append([make_batch(2, value_size=30, tag=i)], now_ms=i)
    log.truncate_to(21)  # inside batch 20-21: the whole batch goes
    assert log.log_end_offset == 20
    assert [b.base_offset for b in read_all(log)] == list(range(0, 20, 2))
    assert log.append([make_batch(1)], now_ms=0).base_offset == 20
    log.truncate_to(3)
    assert log.log_end_offset == 2
    log.close()
    reopened = open_log(tmp_path, LogConfig(segment_bytes=600, index_interval_bytes=50))
    assert reopened.log_end_offset == 2
    reopened.close()


def test_delete_records_before(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(segment_bytes=500))
    for i in range(30):
        log.append([make_batch(1, value_size=50, tag=i)], now_ms=0)
    segments = log.segment_count()
    assert log.delete_records_before(17) == 17
    assert log.log_start_offset == 17
    assert log.segment_count() < segments
    assert all(s.base_offset <= 17 for s in log.segments()[:1])
    with pytest.raises(KafkaError) as info:
        log.read(16, 100)
    assert info.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert read_all(log)[0].base_offset == 17
    with pytest.raises(KafkaError):
        log.delete_records_before(31)
    assert log.delete_records_before(5) == 17  # never moves backwards
    log.close()


def test_retention_by_time_and_size(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=300, retention_ms=1000)
    log = open_log(tmp_path, config)
    for i in range(20):
        log.append([make_batch(1, value_size=60, timestamp_ms=i * 100, tag=i)], now_ms=0)
    count = log.segment_count()
    # every batch older than now - retention.ms; the active segment always stays
    assert log.apply_retention(now_ms=1_000_000) == count - 1
    assert log.segment_count() == 1
    assert log.log_start_offset == log.active_segment.base_offset
    log.close()

    config = LogConfig(segment_bytes=300, retention_bytes=700, retention_ms=-1)
    log = open_log(tmp_path / "b", config)
    for i in range(20):
        log.append([make_batch(1, value_size=60, tag=i)], now_ms=0)
    log.apply_retention(now_ms=10**12)
    sizes = [s.size for s in log.segments()]
    assert sum(sizes) >= 700 - max(sizes)  # retention never removes more than needed
    assert sum(sizes) - sizes[0] < 700  # and leaves no deletable segment behind
    log.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batches=st.lists(
        st.tuples(
            st.integers(1, 5),  # records
            st.integers(0, 300),  # value size
            st.integers(0, 10_000),  # timestamp: not monotonic, like real producers
        ),
        min_size=1,
        max_size=60,
    ),
    segment_bytes=st.integers(1800, 6000),
    interval=st.integers(0, 600),
    index_bytes=st.sampled_from([48, 96, 4096]),
    data=st.data(),
)
def test_lookups_equal_linear_scan(
    tmp_path_factory: pytest.TempPathFactory,
    batches: list[tuple[int, int, int]],
    segment_bytes: int,
    interval: int,
    index_bytes: int,
    data: st.DataObject,
) -> None:
    directory = tmp_path_factory.mktemp("prop")
    config = LogConfig(
        segment_bytes=segment_bytes,
        index_interval_bytes=interval,
        segment_index_bytes=index_bytes,
    )
    log = open_log(directory, config)
    for number, (count, size, timestamp) in enumerate(batches):
        log.append(
            [make_batch(count, value_size=size, timestamp_ms=timestamp, tag=number)], now_ms=0
        )
    start = data.draw(st.integers(0, log.log_end_offset))
    log.delete_records_before(start)

    def check(log: PartitionLog) -> None:
        stored = all_batches(log)
        assert [b.base_offset for b in stored][:1] == [log.segments()[0].base_offset]
        assert all(b.is_valid() for b in stored)
        for offset in range(log.log_start_offset, log.log_end_offset):
            result = log.read(offset, 1)
            got = next(iter_batches(result.slices[0].read_bytes()))
            assert got.base_offset == linear_offset_lookup(stored, offset)
        for timestamp in sorted({ts for _, _, ts in batches} | {-1, 0, 10_001}):
            expected = linear_timestamp_lookup(stored, timestamp, log.log_start_offset)
            assert log.offset_for_timestamp(timestamp) == expected
        best = max(b.max_timestamp for b in stored)
        first = linear_timestamp_lookup(stored, best, 0)
        assert first is not None
        assert log.max_timestamp_offset() == (max(first[0], log.log_start_offset), best)

    check(log)
    log.close()
    originals = index_files(directory / TP.dir_name)
    reopened = open_log(directory, config, log_start_offset=log.log_start_offset)
    check(reopened)
    reopened.close()
    # indexes are derived data: delete them all, reopen, they come back byte for byte
    for path in (directory / TP.dir_name).iterdir():
        if path.suffix in (".index", ".timeindex"):
            path.unlink()
    rebuilt = open_log(directory, config, log_start_offset=log.log_start_offset)
    check(rebuilt)
    rebuilt.close()
    assert index_files(directory / TP.dir_name) == originals


@pytest.mark.parametrize("clean", [True, False])
def test_appends_after_reopen_go_to_the_end(tmp_path: Path, clean: bool) -> None:
    log = open_log(tmp_path)
    for number in range(5):
        log.append([make_batch(2, tag=number)], now_ms=0)
    log.close()
    for round_number in range(2):
        log = open_log(tmp_path, clean=clean)
        log.append([make_batch(1, tag=100 + round_number)], now_ms=0)
        assert [b.base_offset for b in read_all(log)] == [0, 2, 4, 6, 8, 10, 11][: 6 + round_number]
        log.close()


def test_batch_views_are_not_copied(tmp_path: Path) -> None:
    """append rewrites offsets in the caller's buffer: zero copies of the batch bytes."""
    log = open_log(tmp_path)
    log.append([make_batch()], now_ms=0)
    batch = make_batch(4)
    log.append([batch], now_ms=0)
    assert batch.base_offset == 1
    assert RecordBatch(read_all(log, 1)[0].buffer).base_offset == 1
    log.close()


def test_follower_append_raw_keeps_offsets(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader")
    for number in range(6):
        leader.append([make_batch(2, tag=number)], now_ms=0, leader_epoch=3)
    follower = open_log(tmp_path / "follower")
    fetched = [RecordBatch(memoryview(bytearray(b.buffer))) for b in read_all(leader)]
    follower.append_raw(fetched[:4])
    follower.append_raw(fetched[4:])
    assert [bytes(b.buffer) for b in read_all(follower)] == [bytes(b.buffer) for b in fetched]
    with pytest.raises(KafkaError):  # must start exactly at the log end offset
        follower.append_raw([fetched[0]])
    follower.truncate_to(4)  # divergence: the follower cuts back and refetches
    follower.append_raw(fetched[2:])
    assert follower.log_end_offset == leader.log_end_offset
    leader.close()
    follower.close()


def test_segment_lifecycle_table(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(segment_bytes=300))
    for number in range(6):
        log.append([make_batch(1, value_size=100, tag=number)], now_ms=0)
    first, *_, active = log.segments()
    assert active.state is SegmentState.ACTIVE
    assert first.state is SegmentState.SEALED  # rolled, not fsynced yet
    log.flush()
    assert first.state is SegmentState.FLUSHED and active.state is SegmentState.ACTIVE
    with pytest.raises(AssertionError):
        first.transition(SegmentState.SEALED)  # not in the table
    log.delete_records_before(log.log_end_offset)
    assert first.state is SegmentState.DELETED
    with pytest.raises(AssertionError):
        first.transition(SegmentState.ACTIVE)
    assert set(TRANSITIONS) == set(SegmentState)
    log.close()


def test_compacted_log_refuses_keyless_records(tmp_path: Path) -> None:
    config = LogConfig(cleanup_policy="compact")
    log = PartitionLog(TopicPartition("compacted", 0), tmp_path / "compacted-0", config)
    try:
        keyed = build_batch([NewRecord(b"v", key=b"k")])
        log.append([RecordBatch(keyed)], now_ms=0)
        keyless = build_batch([NewRecord(b"v", key=b"k"), NewRecord(b"v2")])
        with pytest.raises(KafkaError) as raised:
            log.append([RecordBatch(keyless)], now_ms=0)
        assert raised.value.code == ErrorCode.INVALID_RECORD
        assert log.log_end_offset == 1  # nothing of the refused batch was written
    finally:
        log.close()
