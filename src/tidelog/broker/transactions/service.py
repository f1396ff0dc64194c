"""The transaction coordinator on the event loop: `__transaction_state`, markers, timeouts.

Wires the pure `TransactionCoordinator` to storage and time. Per operation: run it (pure),
append its records to the transactional id's `__transaction_state` partition as one batch,
replay them, and when it ends a transaction write the markers (`markers.py`) and append the
completing record. Operations on one transactional id run one at a time (an asyncio lock per
id), so a request arriving while markers are written waits and then sees the completed state.
The EndTxn answer is sent once the markers are written and the transaction is complete (Kafka
answers after PrepareCommit and writes markers in the background; answering later is allowed
by the protocol and keeps a single node's coordinator free of background state).

Start: created at broker start when `__transaction_state` exists (else on the first
transactional request), it replays the topic; transactions found in PrepareCommit/PrepareAbort
(a crash between the prepare record and the last marker) get their markers written again and
complete, as Kafka's coordinator does on load. A timer aborts transactions older than their
transaction.timeout.ms every transaction.abort.timed.out.transaction.cleanup.interval.ms,
fencing the producer (epoch + 1), as Kafka does. Every
transactions.remove.expired.transaction.cleanup.interval.ms, ids idle (no transaction in
progress) for transactional.id.expiration.ms are forgotten through a tombstone.

Single node only: in cluster mode the handlers keep refusing transactional ids
(docs/transactions.md).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from tidelog.broker import clock
from tidelog.broker.internal_topics import TRANSACTION_STATE_TOPIC
from tidelog.broker.transactions.markers import write_markers
from tidelog.coordinator.coordinator import partition_for
from tidelog.coordinator.transactions import TransactionCoordinator, TxnResult
from tidelog.coordinator.txn_records import TransactionState, TxnLogRecord, decode_txn_record
from tidelog.errors import CorruptRecordError, ErrorCode, KafkaError
from tidelog.records.batch import RecordBatch, iter_batches
from tidelog.records.builder import NewRecord, build_batch
from tidelog.records.record import iter_records

if TYPE_CHECKING:
    from tidelog.broker.state import Broker

log = logging.getLogger("tidelog.broker.transactions")
READ_CHUNK_BYTES = 4 * 1024 * 1024
_LOCKS_MAX = 100_000  # idle per-id locks are dropped beyond this many


class TransactionService:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        config = broker.config
        self.coordinator = TransactionCoordinator(config.transaction_max_timeout_ms)
        self.coordinator_epoch = 0  # the __transaction_state leader epoch (0 on a single node)
        self._locks: dict[str, asyncio.Lock] = {}
        self.partitions = self._ensure_topic()
        for partition in range(self.partitions):
            self.coordinator.load(read_partition(broker, partition))
        log.info("transaction coordinator loaded %d transactional ids",
                 len(self.coordinator.transactions))
        loop = asyncio.get_running_loop()
        self._recovery = loop.create_task(self._complete_prepared())
        self._timer: asyncio.TimerHandle | None = None
        self._expiry_timer: asyncio.TimerHandle | None = None
        self._schedule_timeouts()
        self._schedule_expiry()

    def _ensure_topic(self) -> int:
        info = self.broker.topics.get(TRANSACTION_STATE_TOPIC)
        if info is None:
            # Kafka's settings for the topic: compacted, 100 MiB segments.
            configs = {"cleanup.policy": "compact", "segment.bytes": str(100 * 1024 * 1024)}
            count = max(1, self.broker.config.transaction_state_log_num_partitions)
            info = self.broker.create_topic(
                TRANSACTION_STATE_TOPIC, count, configs, internal=True
            )
        return info.partitions

    def partition_of(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.partitions)

    # ------------------------------------------------------------ running operations

    async def run(
        self, transactional_id: str, operation: Callable[[int], TxnResult]
    ) -> TxnResult:
        """Run `operation(now_ms)` for the id, append and replay its records, carry out its
        markers and complete the transaction; returns the operation's result."""
        async with self._lock(transactional_id):
            result = operation(clock.now_ms())
            await self._append(transactional_id, result.records)
            if result.markers is not None:
                await self._finish(transactional_id)
            return result

    def _lock(self, transactional_id: str) -> asyncio.Lock:
        lock = self._locks.get(transactional_id)
        if lock is None:
            if len(self._locks) >= _LOCKS_MAX:
                for key in [k for k, v in self._locks.items() if not v.locked()]:
                    del self._locks[key]
            lock = self._locks[transactional_id] = asyncio.Lock()
        return lock

    async def _finish(self, transactional_id: str) -> None:
        """Write the markers of the id's Prepare* transaction, then complete it."""
        metadata = self.coordinator.describe(transactional_id)
        if metadata is None:
            return
        request = self.coordinator.markers_of(metadata)
        errors = await write_markers(
            self.broker, request.partitions, request.producer_id, request.producer_epoch,
            request.committed, self.coordinator_epoch,
        )
        if ErrorCode.KAFKA_STORAGE_ERROR in errors.values():
            # Stays in Prepare*: the markers are written again at the next start.
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "markers not written")
        done = self.coordinator.complete_markers(transactional_id, clock.now_ms())
        await self._append(transactional_id, done.records)

    async def _append(self, transactional_id: str, records: list[TxnLogRecord]) -> None:
        if not records:
            return
        partition = self.partition_of(transactional_id)
        partition_log = self.broker.partition_log(TRANSACTION_STATE_TOPIC, partition)
        now_ms = clock.now_ms()
        buffer = build_batch(
            [NewRecord(value=r.value_bytes(), key=r.key_bytes()) for r in records], now_ms=now_ms
        )
        try:
            appended = partition_log.append([RecordBatch(memoryview(buffer))], now_ms=now_ms)
        except OSError as error:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, str(error)) from None
        for record in records:
            self.coordinator.replay(record)
        if partition_log.config.durability == "sync":
            await self.broker.wait_durable(partition_log, appended.last_offset + 1)

    async def _complete_prepared(self) -> None:
        for txn_id, metadata in list(self.coordinator.transactions.items()):
            if metadata.state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
                try:
                    async with self._lock(txn_id):
                        await self._finish(txn_id)
                except KafkaError as error:
                    log.warning("completing transaction %s after restart: %s", txn_id, error)

    # ------------------------------------------------------------ timeouts

    def _schedule_timeouts(self) -> None:
        interval_s = max(
            10, self.broker.config.transaction_abort_timed_out_transaction_cleanup_interval_ms
        ) / 1000
        self._timer = asyncio.get_running_loop().call_later(interval_s, self._abort_timed_out)

    def _abort_timed_out(self) -> None:
        for txn_id in self.coordinator.timed_out(clock.now_ms()):
            log.info("aborting transaction %s: transaction.timeout.ms passed", txn_id)
            task = asyncio.ensure_future(self.run(txn_id, partial(self._abort, txn_id)))
            task.add_done_callback(_log_failure)
        self._schedule_timeouts()

    # ------------------------------------------------------------ expiration

    def _schedule_expiry(self) -> None:
        interval_s = max(
            10, self.broker.config.transactions_remove_expired_transaction_cleanup_interval_ms
        ) / 1000
        self._expiry_timer = asyncio.get_running_loop().call_later(interval_s, self._expire)

    def _expire(self) -> None:
        expiration_ms = self.broker.config.transactional_id_expiration_ms
        tombstones = self.coordinator.expired_ids(clock.now_ms(), expiration_ms)
        for record in tombstones:
            txn_id = record.key.transactional_id
            task = asyncio.ensure_future(self.run(txn_id, partial(self._tombstone, txn_id)))
            task.add_done_callback(_log_failure)
        if tombstones:
            log.info("expiring %d transactional ids", len(tombstones))
        self._schedule_expiry()

    def _tombstone(self, transactional_id: str, now_ms: int) -> TxnResult:
        """Checked again under the id's lock: a request may have used it meanwhile."""
        expiration_ms = self.broker.config.transactional_id_expiration_ms
        records = [
            r for r in self.coordinator.expired_ids(now_ms, expiration_ms)
            if r.key.transactional_id == transactional_id
        ]
        return TxnResult(records)

    def _abort(self, transactional_id: str, now_ms: int) -> TxnResult:
        return self.coordinator.abort_timed_out(transactional_id, now_ms)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()
        self._recovery.cancel()


def read_partition(broker: Broker, partition: int) -> list[TxnLogRecord]:
    """Every record of one `__transaction_state` partition, in offset order (blocking I/O)."""
    partition_log = broker.partition_log(TRANSACTION_STATE_TOPIC, partition)
    records: list[TxnLogRecord] = []
    offset = partition_log.log_start_offset
    while offset < partition_log.log_end_offset:
        read = partition_log.read(offset, READ_CHUNK_BYTES)
        data = b"".join(piece.read_bytes() for piece in read.slices)
        batches = list(iter_batches(data))
        if not batches:
            break
        for batch in batches:
            if batch.is_control:
                continue
            for record in iter_records(batch):
                if record.key is None:
                    raise CorruptRecordError(f"__transaction_state record {record.offset}: no key")
                records.append(decode_txn_record(record.key, record.value))
        offset = batches[-1].next_offset
    return records


def _log_failure(task: asyncio.Future[TxnResult]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("transaction timeout abort failed", exc_info=task.exception())


def service(broker: Broker) -> TransactionService:
    """The broker's transaction service, started on first use."""
    transactions = broker.transactions
    if not isinstance(transactions, TransactionService):
        transactions = broker.transactions = TransactionService(broker)
    return transactions
