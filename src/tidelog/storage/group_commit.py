"""Group commit: one fsync thread shared by every partition log (MetaQ/RocketMQ's
GroupCommitService, ARCHITECTURE D7).

Callers (the event loop) enqueue `(log, offset, callback)` and return at once. The thread takes
everything queued, fsyncs each log once (so N appends waiting on one log cost one fsync),
advances the log's recovery point, then fires the callbacks on this thread with `None`, or
with the error that stopped the fsync. The recovery point only moves after the fsync returns.
A failed fsync takes the log offline for appends until a restart (`PartitionLog.fsync_error`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from tidelog.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from tidelog.storage.log import PartitionLog

SyncCallback = Callable[[BaseException | None], None]
_log = logging.getLogger(__name__)
MAX_PENDING = 1_000_000  # a bound on queued waiters: the broker bounds in-flight requests first


FsyncObserver = Callable[[float], None]


class GroupCommit:
    """`observe(seconds)`, when given with `clock_s` (the caller's monotonic clock: storage
    reads no clock itself), is called on the fsync thread with each fsync's duration."""

    def __init__(
        self,
        name: str = "tidelog-fsync",
        *,
        observe: FsyncObserver | None = None,
        clock_s: Callable[[], float] | None = None,
    ) -> None:
        self._observe = observe if clock_s is not None else None
        self._clock_s = clock_s
        self._condition = threading.Condition()
        self._pending: dict[int, tuple[PartitionLog, list[tuple[int, SyncCallback | None]]]] = {}
        self._pending_count = 0
        self._closed = False
        self.fsync_count = 0
        self.requests_served = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def request(self, log: PartitionLog, offset: int, callback: SyncCallback | None) -> None:
        """Fire `callback` once everything below `offset` in `log` is fsynced."""
        with self._condition:
            if self._closed:
                raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "log manager is closed")
            if self._pending_count >= MAX_PENDING:
                raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "too many fsync waiters")
            entry = self._pending.get(id(log))
            if entry is None:
                entry = (log, [])
                self._pending[id(log)] = entry
            entry[1].append((offset, callback))
            self._pending_count += 1
            self._condition.notify()

    def _run(self) -> None:
        while True:
            with self._condition:
                while not self._pending and not self._closed:
                    self._condition.wait()
                if not self._pending:
                    return
                batch, self._pending, self._pending_count = self._pending, {}, 0
            for log, waiters in batch.values():
                self._commit(log, waiters)

    def _commit(
        self, log: PartitionLog, waiters: list[tuple[int, SyncCallback | None]]
    ) -> None:
        error: BaseException | None = None
        try:
            ticket = log.flush_begin()
            started = self._clock_s() if self._clock_s is not None else 0.0
            ticket.fsync_and_close()
            if self._observe is not None and self._clock_s is not None:
                self._observe(self._clock_s() - started)
            log.flush_end(ticket)
            self.fsync_count += 1
        except OSError as exc:
            if log.fsync_error is None:
                log.fsync_error = exc  # the log goes offline for appends (PartitionLog)
            error = KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"fsync failed: {exc}")
        for offset, callback in waiters:
            self.requests_served += 1
            if callback is None:
                continue
            outcome = error
            if outcome is None and log.recovery_point < offset:
                # Only a truncation between append and fsync gets here: the bytes are gone.
                outcome = KafkaError(
                    ErrorCode.NOT_LEADER_OR_FOLLOWER, f"offset {offset} truncated before fsync"
                )
            try:
                callback(outcome)
            except Exception:
                # A broken callback must not stop every other partition's durability.
                _log.exception("sync callback failed for %s", log.topic_partition)

    def close(self) -> None:
        """Serve everything queued, then stop the thread."""
        with self._condition:
            self._closed = True
            self._condition.notify()
        self._thread.join()
