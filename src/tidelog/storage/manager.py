"""LogManager: every partition log of one data dir, the fsync thread, checkpoints, retention.

Data dir::

    recovery-point-offset-checkpoint   Kafka text checkpoint (checkpoint.py)
    log-start-offset-checkpoint        Kafka text checkpoint (checkpoint.py)
    .clean-shutdown                    empty marker: written last by a clean close, removed
                                       once the logs are loaded; its absence means recovery
    <topic>-<partition>/               one PartitionLog each
    <topic>-<partition>.deleted/       a deleted log being removed (finished at next start)

No threads except the group-commit fsync thread; retention, flush.ms and checkpoints run when
the caller's clock says so (`tick(now_ms)`). Methods other than `request_sync` run on the
owning thread (the broker's event loop) and do short blocking file I/O.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

from tidelog.errors import CorruptRecordError, ErrorCode, KafkaError
from tidelog.storage.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    read_checkpoint,
    write_checkpoint,
)
from tidelog.storage.cleaner import DEFAULT_BACKOFF_MS, LogCleaner
from tidelog.storage.config import LogConfig
from tidelog.storage.durable import fsync_directory, write_durably
from tidelog.storage.group_commit import FsyncObserver, GroupCommit
from tidelog.storage.log import PartitionLog
from tidelog.types import TopicPartition

CLEAN_SHUTDOWN_MARKER = ".clean-shutdown"
DELETED_SUFFIX = ".deleted"


def parse_partition_dir(name: str) -> TopicPartition | None:
    topic, dash, partition = name.rpartition("-")
    if not dash or not topic or not partition.isdigit():
        return None
    return TopicPartition(topic, int(partition))


CLEANER_STEPS_PER_TICK = 8


class LogManager:
    def __init__(
        self,
        data_dir: Path,
        default_config: LogConfig,
        *,
        now_ms: int,
        retention_check_interval_ms: int = 300_000,
        checkpoint_interval_ms: int = 60_000,
        producer_id_expiration_ms: int = 86_400_000,
        producer_id_expiration_check_interval_ms: int = 600_000,
        cleaner_backoff_ms: int = DEFAULT_BACKOFF_MS,
        fsync_observer: FsyncObserver | None = None,
        clock_s: Callable[[], float] | None = None,
    ) -> None:
        """Load every partition dir: clean start (marker present) scans no log; otherwise
        recovery from each log's recovery point. Starts the one fsync thread; with
        `fsync_observer` and `clock_s` it reports each fsync's duration (on that thread)."""
        self.data_dir = data_dir
        self.default_config = default_config
        self.retention_check_interval_ms = retention_check_interval_ms
        self.checkpoint_interval_ms = checkpoint_interval_ms
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producer_id_expiration_check_interval_ms = producer_id_expiration_check_interval_ms
        data_dir.mkdir(parents=True, exist_ok=True)
        marker = data_dir / CLEAN_SHUTDOWN_MARKER
        self.clean_start = marker.exists()
        recovery_points = self._read_checkpoint(RECOVERY_POINT_CHECKPOINT)
        log_start_offsets = self._read_checkpoint(LOG_START_OFFSET_CHECKPOINT)
        self._logs: dict[TopicPartition, PartitionLog] = {}
        # log compaction (storage/cleaner.py)
        self.cleaner = LogCleaner(data_dir, backoff_ms=cleaner_backoff_ms)
        for directory in sorted(data_dir.iterdir()):
            if directory.name.endswith(DELETED_SUFFIX) and directory.is_dir():
                shutil.rmtree(directory, ignore_errors=True)
                continue
            tp = parse_partition_dir(directory.name)
            if tp is None or not directory.is_dir():
                continue
            self._logs[tp] = self._open(
                tp, default_config, clean=self.clean_start,
                recovery_point=recovery_points.get(tp, 0),
                log_start_offset=log_start_offsets.get(tp, 0),
            )
        self._group_commit = GroupCommit(observe=fsync_observer, clock_s=clock_s)
        self._last_flush_ms = dict.fromkeys(self._logs, now_ms)
        self._last_retention_ms = now_ms
        self._last_checkpoint_ms = now_ms
        # The first tick expires producers loaded from snapshots (Kafka filters them on load).
        self._last_producer_expiration_ms = now_ms - producer_id_expiration_check_interval_ms
        self._checkpointed: tuple[dict[TopicPartition, int], dict[TopicPartition, int]] = ({}, {})
        self.write_checkpoints()
        if self.clean_start:
            marker.unlink()
            fsync_directory(data_dir)
        self._closed = False

    def _read_checkpoint(self, name: str) -> dict[TopicPartition, int]:
        try:
            return read_checkpoint(self.data_dir / name)
        except CorruptRecordError:
            return {}  # recovery from offset 0 / first segment is always safe

    def _open(
        self, tp: TopicPartition, config: LogConfig, *, clean: bool, recovery_point: int,
        log_start_offset: int,
    ) -> PartitionLog:
        return PartitionLog(
            tp, self.data_dir / tp.dir_name, config, clean=clean, recovery_point=recovery_point,
            log_start_offset=log_start_offset, flush_requester=self._request_flush,
        )

    # --- partition logs ----------------------------------------------------------------------
    def get(self, tp: TopicPartition) -> PartitionLog | None:
        return self._logs.get(tp)

    def logs(self) -> Iterable[PartitionLog]:
        return tuple(self._logs.values())

    def create(self, tp: TopicPartition, config: LogConfig) -> PartitionLog:
        """Create (or return the existing) log; an existing one takes the new config."""
        existing = self._logs.get(tp)
        if existing is not None:
            existing.config = config
            return existing
        if parse_partition_dir(tp.dir_name) != tp or "/" in tp.topic or tp.topic in (".", ".."):
            raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"bad topic partition {tp}")
        log = self._open(tp, config, clean=True, recovery_point=0, log_start_offset=0)
        fsync_directory(self.data_dir)
        self._logs[tp] = log
        self._last_flush_ms[tp] = self._last_checkpoint_ms
        return log

    def delete(self, tp: TopicPartition) -> None:
        log = self._logs.pop(tp, None)
        self._last_flush_ms.pop(tp, None)
        self.cleaner.forget(tp)  # log compaction
        if log is None:
            return
        log.close(flush=False)
        doomed = self.data_dir / (tp.dir_name + DELETED_SUFFIX)
        shutil.rmtree(doomed, ignore_errors=True)
        log.directory.rename(doomed)
        fsync_directory(self.data_dir)
        shutil.rmtree(doomed, ignore_errors=True)

    def update_config(self, tp: TopicPartition, config: LogConfig) -> None:
        log = self._logs.get(tp)
        if log is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, str(tp))
        log.config = config

    # --- time-driven work ----------------------------------------------------------------------
    def tick(self, now_ms: int) -> None:
        """flush.ms, retention and checkpoints when due; cheap when nothing is."""
        for tp, log in self._logs.items():
            flush_ms = log.config.flush_ms
            if log.log_end_offset > log.recovery_point and (
                now_ms - self._last_flush_ms.get(tp, now_ms) >= flush_ms
            ):
                self._last_flush_ms[tp] = now_ms
                self._group_commit.request(log, log.log_end_offset, None)
        if now_ms - self._last_retention_ms >= self.retention_check_interval_ms:
            self._last_retention_ms = now_ms
            for log in self._logs.values():
                log.close_retired()  # retired by the previous pass: no sendfile still uses them
                log.apply_retention(now_ms)
        if (now_ms - self._last_producer_expiration_ms
                >= self.producer_id_expiration_check_interval_ms):
            self._last_producer_expiration_ms = now_ms
            for log in self._logs.values():
                log.producer_state.remove_expired(now_ms, self.producer_id_expiration_ms)
        # Log compaction in bounded steps (~1 MiB each): a few per tick so a busy compacted
        # topic keeps up, while the event loop is never held for long.
        for _ in range(CLEANER_STEPS_PER_TICK):
            if not self.cleaner.step(self._logs.values(), now_ms):
                break
        if now_ms - self._last_checkpoint_ms >= self.checkpoint_interval_ms:
            self._last_checkpoint_ms = now_ms
            self.write_checkpoints()

    def write_checkpoints(self) -> None:
        """Write both checkpoint files if anything changed since the last write."""
        recovery_points = {tp: log.recovery_point for tp, log in self._logs.items()}
        log_starts = {tp: log.log_start_offset for tp, log in self._logs.items()}
        if (recovery_points, log_starts) == self._checkpointed:
            return
        write_checkpoint(self.data_dir / RECOVERY_POINT_CHECKPOINT, recovery_points)
        write_checkpoint(self.data_dir / LOG_START_OFFSET_CHECKPOINT, log_starts)
        self._checkpointed = (recovery_points, log_starts)

    # --- durability ----------------------------------------------------------------------------
    def request_sync(
        self, log: PartitionLog, offset: int, callback: Callable[[BaseException | None], None]
    ) -> None:
        """Sync durability: `callback` fires on the fsync thread once `offset` (exclusive end)
        is fsynced; many requests share one fsync."""
        self._group_commit.request(log, offset, callback)

    def _request_flush(self, log: PartitionLog) -> None:
        """flush.messages reached: fsync on the group-commit thread, not on the caller's."""
        self._group_commit.request(log, log.log_end_offset, None)

    @property
    def fsync_count(self) -> int:
        return self._group_commit.fsync_count

    def close(self, *, clean: bool = True) -> None:
        """Stop the fsync thread, flush and close every log, checkpoints, then the marker."""
        if self._closed:
            return
        self._closed = True
        self._group_commit.close()
        self.cleaner.close()  # log compaction: drop a half-written .cleaned file
        for log in self._logs.values():
            log.close(flush=True)
        self.write_checkpoints()
        # A log whose fsync failed is recovered at the next start, never trusted as clean.
        if clean and all(log.fsync_error is None for log in self._logs.values()):
            write_durably(self.data_dir / CLEAN_SHUTDOWN_MARKER, b"")
