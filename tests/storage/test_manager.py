"""LogManager: data dir layout, clean vs unclean start, checkpoints, group commit, tick."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tidelog.errors import CorruptRecordError, ErrorCode, KafkaError
from tidelog.storage.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    read_checkpoint,
    write_checkpoint,
)
from tidelog.storage.config import TOPIC_CONFIG_NAMES, LogConfig
from tidelog.storage.manager import CLEAN_SHUTDOWN_MARKER, LogManager
from tidelog.types import TopicPartition

from .helpers import make_batch, read_all

A = TopicPartition("orders", 0)
B = TopicPartition("my-topic-with-dashes", 12)


def test_create_reopen_delete(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, LogConfig(), now_ms=0)
    assert not manager.clean_start
    log_a = manager.create(A, LogConfig())
    assert manager.create(A, LogConfig(segment_bytes=5000)) is log_a  # idempotent
    log_b = manager.create(B, LogConfig())
    log_a.append([make_batch(3)], now_ms=0)
    log_b.append([make_batch(2)], now_ms=0)
    log_b.delete_records_before(1)
    manager.close()
    assert (tmp_path / CLEAN_SHUTDOWN_MARKER).exists()
    assert read_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT) == {A: 3, B: 2}
    assert read_checkpoint(tmp_path / LOG_START_OFFSET_CHECKPOINT) == {A: 0, B: 1}

    manager = LogManager(tmp_path, LogConfig(), now_ms=0)
    assert manager.clean_start and not (tmp_path / CLEAN_SHUTDOWN_MARKER).exists()
    assert sorted(log.topic_partition for log in manager.logs()) == sorted([A, B])
    reopened = manager.get(B)
    assert reopened is not None and reopened.log_start_offset == 1
    assert all(log.recovered_segments == 0 for log in manager.logs())
    manager.delete(A)
    assert manager.get(A) is None and not (tmp_path / A.dir_name).exists()
    with pytest.raises(KafkaError) as info:
        manager.update_config(A, LogConfig())
    assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    manager.close(clean=False)

    manager = LogManager(tmp_path, LogConfig(), now_ms=0)
    assert not manager.clean_start
    recovered = manager.get(B)
    assert recovered is not None and recovered.recovered_segments == 1
    assert [b.base_offset for b in read_all(recovered)] == [0]  # batch 0-1, from offset 1
    manager.close()


def test_group_commit_shares_fsyncs_and_advances_recovery_point(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, LogConfig(durability="sync"), now_ms=0)
    log = manager.create(A, LogConfig(durability="sync"))
    done = threading.Semaphore(0)
    outcomes: list[BaseException | None] = []

    def callback(error: BaseException | None) -> None:
        outcomes.append(error)
        done.release()

    for _ in range(200):
        log.append([make_batch(1)], now_ms=0)
        manager.request_sync(log, log.log_end_offset, callback)
    for _ in range(200):
        assert done.acquire(timeout=30)
    assert outcomes == [None] * 200
    assert log.recovery_point == 200
    assert manager.fsync_count <= 200
    manager.close()


def test_flush_messages_and_flush_ms(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, LogConfig(), now_ms=0)
    log = manager.create(A, LogConfig(flush_messages=5))
    for _ in range(4):
        log.append([make_batch(1)], now_ms=0)
    assert log.recovery_point == 0
    log.append([make_batch(1)], now_ms=0)  # the fifth message asks the fsync thread
    synced = threading.Event()
    manager.request_sync(log, 5, lambda error: synced.set())
    assert synced.wait(10) and log.recovery_point >= 5

    timed = manager.create(B, LogConfig(flush_ms=1000))
    timed.append([make_batch(1)], now_ms=0)
    manager.tick(500)
    manager.tick(1000)  # flush.ms elapsed: an fsync is queued
    synced.clear()
    manager.request_sync(timed, 1, lambda error: synced.set())
    assert synced.wait(10) and timed.recovery_point == 1
    manager.close()


def test_tick_runs_retention_and_checkpoints(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=300, retention_ms=1000)
    manager = LogManager(tmp_path, config, now_ms=0, retention_check_interval_ms=100,
                         checkpoint_interval_ms=100)
    log = manager.create(A, config)
    for number in range(10):
        log.append([make_batch(1, value_size=100, timestamp_ms=number)], now_ms=0)
    segments = log.segment_count()
    manager.tick(50)
    assert log.segment_count() == segments  # not due yet
    manager.tick(5000)
    assert log.segment_count() == 1
    assert read_checkpoint(tmp_path / LOG_START_OFFSET_CHECKPOINT)[A] == log.log_start_offset
    manager.close()


def test_checkpoint_format_and_corruption(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    write_checkpoint(path, {B: 7, A: 3})
    assert path.read_text() == "0\n2\nmy-topic-with-dashes 12 7\norders 0 3\n"
    assert read_checkpoint(path) == {A: 3, B: 7}
    assert read_checkpoint(tmp_path / "missing") == {}
    for bad in ("", "1\n0\n", "0\n2\norders 0 3\n", "0\n1\norders x 3\n", "\xff"):
        path.write_text(bad)
        with pytest.raises(CorruptRecordError):
            read_checkpoint(path)
    # a corrupt checkpoint at start falls back to full recovery
    (tmp_path / "data").mkdir()
    manager = LogManager(tmp_path / "data", LogConfig(), now_ms=0)
    manager.create(A, LogConfig()).append([make_batch(2)], now_ms=0)
    manager.close(clean=False)
    (tmp_path / "data" / RECOVERY_POINT_CHECKPOINT).write_text("garbage")
    manager = LogManager(tmp_path / "data", LogConfig(), now_ms=0)
    recovered = manager.get(A)
    assert recovered is not None and recovered.log_end_offset == 2
    manager.close()


def test_config_properties() -> None:
    config = LogConfig.from_properties({"segment.bytes": "2048", "cleanup.policy": "delete,compact",
                                        "durability": "sync", "min.cleanable.dirty.ratio": "0.2"})
    assert config.segment_bytes == 2048 and config.is_sync
    assert config.cleanup_policy == "compact,delete" and config.deletes
    assert LogConfig.from_properties(config.to_properties()) == config
    assert set(config.to_properties()) == set(TOPIC_CONFIG_NAMES)
    base = LogConfig(retention_ms=5)
    assert LogConfig.from_properties({"flush.ms": "10"}, base).retention_ms == 5
    for bad in ({"segment.bytes": "ten"}, {"segment.bytes": "3000000000"}, {"nope": "1"},
                {"durability": "maybe"}, {"cleanup.policy": "delete,shred"},
                {"retention.ms": "-2"}, {"min.cleanable.dirty.ratio": "1.5"},
                {"message.timestamp.type": "Now"}):
        with pytest.raises(KafkaError) as info:
            LogConfig.from_properties(bad)
        assert info.value.code == ErrorCode.INVALID_CONFIG


def test_roll_flushes_sealed_segments_in_the_background(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, LogConfig(), now_ms=0)
    log = manager.create(A, LogConfig(segment_bytes=400))
    for _ in range(12):
        log.append([make_batch(1, value_size=100)], now_ms=0)
    assert log.segment_count() > 2
    sealed_end = log.active_segment.base_offset
    synced = threading.Event()
    manager.request_sync(log, 0, lambda error: synced.set())  # queued behind the roll flushes
    assert synced.wait(10)
    assert log.recovery_point >= sealed_end
    assert all(s.state.value == "flushed" for s in log.segments()[:-1])
    manager.close(clean=False)
    manager = LogManager(tmp_path, LogConfig(), now_ms=0)
    reopened = manager.get(A)
    assert reopened is not None and reopened.recovered_segments == 1  # only the active one
    manager.close()
