"""The transaction coordinator on the event loop: `__transaction_state`, markers, timeouts.

Wires the pure `TransactionCoordinator` (one per `__transaction_state` partition) to storage
and time. Per operation: run it (pure), append its records to the transactional id's
partition as one batch, replay them once durable, and when it ends a transaction write the
markers and append the completing record. Operations on one transactional id run one at a
time (an asyncio lock per id), so a request arriving while markers are written waits and then
sees the completed state. The EndTxn answer is sent once the markers are written and the
transaction is complete (Kafka answers after PrepareCommit and writes markers in the
background; answering later is allowed by the protocol and leaves no background state). The
markers and the completing record are one task per id, shielded from the request: a client
that goes away does not leave a transaction half-ended.

Single node: created at broker start when `__transaction_state` exists (else on the first
transactional request); every partition is replayed; transactions found in
PrepareCommit/PrepareAbort (a crash between the prepare record and the last marker) get their
markers written again and complete, as Kafka's coordinator does on load.

Cluster mode (`broker.replication` set; `cluster.py`): started when the broker joins. The topic
is replicated and created through ZooKeeper; a coordinator exists only for the partitions this
broker leads, loaded when it becomes leader (a role listener of Replication; requests meanwhile
COORDINATOR_LOAD_IN_PROGRESS, elsewhere NOT_COORDINATOR), with the partition's leader epoch as
its coordinator epoch (stamped in the markers), and dropped when it stops leading (or leads at
a new epoch: reloaded). Appends carry the leader epoch and are answered after the high
watermark passes them (acks=all); a record is replayed only then, so a failed append leaves
the state as it was and the client's retry redoes it. Markers go to each partition's current
leader (locally or by WriteTxnMarkers), retried after a leader change until every one is
acknowledged, as Kafka's TransactionMarkerChannelManager; only then is the transaction
completed. A coordinator that lost its partition stops retrying: the new one completes it.

A timer aborts transactions older than their transaction.timeout.ms every
transaction.abort.timed.out.transaction.cleanup.interval.ms, fencing the producer (epoch + 1),
as Kafka does. Every transactions.remove.expired.transaction.cleanup.interval.ms, ids idle (no
transaction in progress) for transactional.id.expiration.ms are forgotten through a tombstone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from functools import partial
from typing import TYPE_CHECKING, Any, cast

from tidelog.broker import clock
from tidelog.broker.internal_topics import TRANSACTION_STATE_TOPIC
from tidelog.broker.transactions.markers import write_markers
from tidelog.coordinator.coordinator import partition_for
from tidelog.coordinator.transactions import (
    MarkerRequest,
    TransactionCoordinator,
    TransactionMetadata,
    TxnResult,
)
from tidelog.coordinator.txn_records import TransactionState, TxnLogRecord, decode_txn_record
from tidelog.errors import CorruptRecordError, ErrorCode, KafkaError
from tidelog.records.batch import RecordBatch
from tidelog.records.builder import NewRecord, build_batch
from tidelog.records.record import iter_records
from tidelog.storage.log_scan import iter_batches_from
from tidelog.types import TopicPartition

if TYPE_CHECKING:
    from tidelog.broker.replication.replica_manager import Replication
    from tidelog.broker.state import Broker
    from tidelog.broker.transactions.cluster import MarkerChannels, TransactionStateCreator

log = logging.getLogger("tidelog.broker.transactions")
_LOCKS_MAX = 100_000  # idle per-id locks are dropped beyond this many
MARKER_RETRY_BACKOFF_S = 0.1  # Kafka's retry.backoff.ms between marker rounds
# Marker answers after which a partition is not retried: written, or (as Kafka's
# TransactionMarkerRequestCompletionHandler) refused for an epoch a newer one superseded.
_MARKER_DONE = (
    ErrorCode.NONE, ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED,
)
Operation = Callable[[TransactionCoordinator, int], TxnResult]


class TransactionService:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        config = broker.config
        self.max_timeout_ms = config.transaction_max_timeout_ms
        # partition -> its coordinator and coordinator epoch, for the partitions loaded here
        self.coordinators: dict[int, TransactionCoordinator] = {}
        self.epochs: dict[int, int] = {}
        self._loading: dict[int, object] = {}  # partition -> token of the load in flight
        self._locks: dict[str, asyncio.Lock] = {}
        self._finishing: dict[str, tuple[int, asyncio.Task[None]]] = {}  # id -> (epoch, task)
        self._background: set[asyncio.Task[None]] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._expiry_timer: asyncio.TimerHandle | None = None
        # None on a single node; Broker types it by its Protocol to stay below replication.
        self.replication = cast("Replication | None", broker.replication)
        self.creator: TransactionStateCreator | None = None
        self.channels: MarkerChannels | None = None
        if self.replication is not None:
            from tidelog.broker.transactions.cluster import (
                MarkerChannels,
                TransactionStateCreator,
                state_partition_count,
            )

            self.creator = TransactionStateCreator(broker, self.replication)
            self.channels = MarkerChannels(self.replication)
            self.partitions = state_partition_count(broker, self.replication)
            self.replication.role_listeners.append(self._on_role)
            for tp, state in list(self.replication.partitions.items()):
                if tp.topic == TRANSACTION_STATE_TOPIC and state.leader == config.node_id:
                    self.on_partition_role(tp.partition, is_leader=True)
        else:
            self.partitions = self._ensure_topic()
            for partition in range(self.partitions):
                self._install(partition, 0, read_partition(broker, partition))
            log.info("transaction coordinator loaded %d transactional ids",
                     sum(len(c.transactions) for c in self.coordinators.values()))
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

    def _install(self, partition: int, epoch: int, records: list[TxnLogRecord]) -> None:
        """A loaded partition: its coordinator serves from now on; transactions it finds in
        Prepare* get their markers written again and complete."""
        coordinator = TransactionCoordinator(self.max_timeout_ms)
        prepared = coordinator.load(records)
        self.coordinators[partition] = coordinator
        self.epochs[partition] = epoch
        for request in prepared:
            self._finish_task(request.transactional_id, partition, epoch)

    # ------------------------------------------------------------ cluster: load and unload

    def _on_role(self, tp: TopicPartition, is_leader: bool) -> None:
        if tp.topic == TRANSACTION_STATE_TOPIC:
            self.on_partition_role(tp.partition, is_leader)

    def on_partition_role(self, partition: int, is_leader: bool) -> None:
        """Cluster mode: leadership of a `__transaction_state` partition gained or lost here.
        A new leader epoch reloads the partition: the coordinator epoch is the leader epoch."""
        replication = self.replication
        if replication is None:
            return
        from tidelog.broker.transactions.cluster import state_partition_count

        self.partitions = state_partition_count(self.broker, replication)
        state = replication.partitions.get(TopicPartition(TRANSACTION_STATE_TOPIC, partition))
        if not is_leader or state is None:
            self._unload(partition)
            return
        epoch = state.leader_epoch
        if self.epochs.get(partition) == epoch:
            return
        self._unload(partition)
        token = object()
        self._loading[partition] = token
        self._spawn(self._load(partition, epoch, token))

    async def _load(self, partition: int, epoch: int, token: object) -> None:
        await asyncio.sleep(0)  # the stopped replica fetcher finishes first
        try:
            records = await asyncio.to_thread(read_partition, self.broker, partition)
        except (OSError, KafkaError, ValueError) as error:
            log.error("loading transactions of partition %d failed: %s", partition, error)
            if self._loading.get(partition) is token:
                del self._loading[partition]
            return
        if self._loading.get(partition) is not token:
            return  # leadership moved while reading
        del self._loading[partition]
        self._install(partition, epoch, records)
        log.info("transaction coordinator for partition %d at epoch %d: %d ids from %d records",
                 partition, epoch, len(self.coordinators[partition].transactions), len(records))

    def _unload(self, partition: int) -> None:
        self._loading.pop(partition, None)
        self.epochs.pop(partition, None)
        coordinator = self.coordinators.pop(partition, None)
        if coordinator is not None:
            log.info("transaction coordinator for partition %d moved: unloaded %d ids",
                     partition, len(coordinator.transactions))

    # ------------------------------------------------------------ routing

    def partition_of(self, transactional_id: str) -> int:
        if self.replication is not None:
            from tidelog.broker.transactions.cluster import state_partition_count

            self.partitions = state_partition_count(self.broker, self.replication)
        return partition_for(transactional_id, self.partitions)

    def _loaded(self, partition: int) -> tuple[TransactionCoordinator, int]:
        coordinator = self.coordinators.get(partition)
        if coordinator is None:
            if partition in self._loading:
                raise KafkaError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, f"loading {partition}")
            raise KafkaError(ErrorCode.NOT_COORDINATOR, f"not leading partition {partition}")
        return coordinator, self.epochs[partition]

    def coordinator_of(self, transactional_id: str) -> TransactionCoordinator:
        """The loaded coordinator of the id (NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS)."""
        return self._loaded(self.partition_of(transactional_id))[0]

    def describe(self, transactional_id: str) -> TransactionMetadata | None:
        """The id's state if this broker coordinates it (raises as `coordinator_of`)."""
        return self.coordinator_of(transactional_id).describe(transactional_id)

    def all_transactions(self) -> dict[str, TransactionMetadata]:
        """Every id of the partitions loaded here (ListTransactions)."""
        return {
            txn_id: metadata
            for coordinator in self.coordinators.values()
            for txn_id, metadata in coordinator.transactions.items()
        }

    def verify_partition(
        self, transactional_id: str, producer_id: int, producer_epoch: int, tp: tuple[str, int]
    ) -> ErrorCode:
        """KIP-890 part 1: may this producer write `tp`? (raises as `coordinator_of`)"""
        return self.coordinator_of(transactional_id).verify_partition(
            transactional_id, producer_id, producer_epoch, tp
        )

    # ------------------------------------------------------------ running operations

    async def run(self, transactional_id: str, operation: Operation) -> TxnResult:
        """Run `operation(coordinator, now_ms)` for the id, append its records and replay them
        once durable (replicated), carry out its markers and complete the transaction; returns
        the operation's result."""
        partition = self.partition_of(transactional_id)
        async with self._lock(transactional_id):
            coordinator, epoch = self._loaded(partition)
            result = operation(coordinator, clock.now_ms())
            await self._append(partition, epoch, result.records)
            if result.markers is not None:
                await asyncio.shield(self._finish_task(transactional_id, partition, epoch))
            return result

    def _lock(self, transactional_id: str) -> asyncio.Lock:
        lock = self._locks.get(transactional_id)
        if lock is None:
            if len(self._locks) >= _LOCKS_MAX:
                for key in [k for k, v in self._locks.items() if not v.locked()]:
                    del self._locks[key]
            lock = self._locks[transactional_id] = asyncio.Lock()
        return lock

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        task.add_done_callback(_log_failure)
        return task

    def _finish_task(self, transactional_id: str, partition: int, epoch: int) -> asyncio.Task[None]:
        """The one task writing the id's markers and completing its transaction at this
        coordinator epoch (one left from an older epoch stops by itself: NOT_COORDINATOR)."""
        current = self._finishing.get(transactional_id)
        if current is not None and current[0] == epoch and not current[1].done():
            return current[1]
        task = self._spawn(self._finish(transactional_id, partition, epoch))
        entry = (epoch, task)
        self._finishing[transactional_id] = entry

        def forget(_: object) -> None:
            if self._finishing.get(transactional_id) is entry:
                del self._finishing[transactional_id]

        task.add_done_callback(forget)
        return task

    async def _finish(self, transactional_id: str, partition: int, epoch: int) -> None:
        """Write the markers of the id's Prepare* transaction, then complete it."""
        coordinator, _ = self._current(partition, epoch)
        metadata = coordinator.describe(transactional_id)
        if metadata is None or metadata.state not in (
            TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT
        ):
            return
        request = coordinator.markers_of(metadata)
        if self.replication is None:
            errors = await write_markers(
                self.broker, request.partitions, request.producer_id, request.producer_epoch,
                request.committed, epoch,
            )
            if ErrorCode.KAFKA_STORAGE_ERROR in errors.values():
                # Stays in Prepare*: the markers are written again at the next start.
                raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "markers not written")
        else:
            await self._write_cluster_markers(partition, epoch, request)
        while True:
            coordinator, _ = self._current(partition, epoch)
            done = coordinator.complete_markers(transactional_id, clock.now_ms())
            try:
                await self._append(partition, epoch, done.records)
                return
            except KafkaError as error:
                # Kafka's tryAppendToLog: the complete record is retried while this broker
                # still coordinates (too few replicas, a timeout); a lost partition stops it.
                if self.replication is None or error.code is ErrorCode.NOT_COORDINATOR:
                    raise
                log.info("completing transaction %s: %s, retrying", transactional_id, error)
            await asyncio.sleep(MARKER_RETRY_BACKOFF_S)

    def _current(self, partition: int, epoch: int) -> tuple[TransactionCoordinator, int]:
        """The partition's coordinator if it is still the one at `epoch` (else NOT_COORDINATOR:
        a newer coordinator owns the id's transactions)."""
        coordinator = self.coordinators.get(partition)
        if coordinator is None or self.epochs.get(partition) != epoch or self.broker.closing:
            raise KafkaError(ErrorCode.NOT_COORDINATOR, f"partition {partition} moved")
        return coordinator, epoch

    async def _write_cluster_markers(
        self, partition: int, epoch: int, request: MarkerRequest
    ) -> None:
        """Every partition's marker through its current leader, retried until acknowledged."""
        from tidelog.broker.transactions.cluster import leader_of, topic_exists

        replication = self.replication
        channels = self.channels
        assert replication is not None and channels is not None
        node_id = self.broker.config.node_id
        remaining = set(request.partitions)
        while remaining:
            self._current(partition, epoch)
            by_leader: dict[int, list[tuple[str, int]]] = {}
            for topic, index in sorted(remaining):
                if not topic_exists(replication, topic):
                    remaining.discard((topic, index))  # deleted: nothing to mark (Kafka)
                    continue
                leader = leader_of(replication, topic, index)
                if leader is not None:
                    by_leader.setdefault(leader, []).append((topic, index))
            rounds = [
                write_markers(
                    self.broker, tps, request.producer_id, request.producer_epoch,
                    request.committed, epoch, replication,
                )
                if leader == node_id
                else channels.write(
                    leader, tps, request.producer_id, request.producer_epoch,
                    request.committed, epoch,
                )
                for leader, tps in by_leader.items()
            ]
            for (_, tps), errors in zip(
                by_leader.items(), await asyncio.gather(*rounds), strict=True
            ):
                for tp in tps:
                    code = errors.get(tp, ErrorCode.NONE)
                    if code in _MARKER_DONE:
                        remaining.discard(tp)
                    else:
                        log.debug("marker for %s: %s, retrying", tp, code.name)
            if remaining:
                await asyncio.sleep(MARKER_RETRY_BACKOFF_S)

    async def _append(self, partition: int, epoch: int, records: list[TxnLogRecord]) -> None:
        """Append the records as one batch; replay them once durable (in a cluster: once the
        high watermark passes them), so a failed write changes no state."""
        if not records:
            return
        coordinator, _ = self._current(partition, epoch)
        tp = TopicPartition(TRANSACTION_STATE_TOPIC, partition)
        leader_epoch = 0
        replication = self.replication
        if replication is not None:
            from tidelog.broker.groups.cluster import append_leader_epoch

            leader_epoch = append_leader_epoch(replication, tp)
            if leader_epoch != epoch:
                raise KafkaError(ErrorCode.NOT_COORDINATOR, f"{tp} at epoch {leader_epoch}")
        partition_log = self.broker.partition_log(TRANSACTION_STATE_TOPIC, partition)
        now_ms = clock.now_ms()
        buffer = build_batch(
            [NewRecord(value=r.value_bytes(), key=r.key_bytes()) for r in records], now_ms=now_ms
        )
        try:
            appended = partition_log.append(
                [RecordBatch(memoryview(buffer))], now_ms=now_ms, leader_epoch=leader_epoch
            )
        except OSError as error:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, str(error)) from None
        end_offset = appended.last_offset + 1
        if replication is not None:
            from tidelog.broker.groups.cluster import replicated

            self.broker.append_waiters.notify(tp)
            replication.after_leader_append(tp)
            fsync = (self.broker.wait_durable(partition_log, end_offset)
                     if partition_log.config.durability == "sync" else None)
            await replicated(replication, tp, end_offset, fsync)
            coordinator, _ = self._current(partition, epoch)
        elif partition_log.config.durability == "sync":
            await self.broker.wait_durable(partition_log, end_offset)
        for record in records:
            coordinator.replay(record)

    # ------------------------------------------------------------ timeouts

    def _schedule_timeouts(self) -> None:
        interval_s = max(
            10, self.broker.config.transaction_abort_timed_out_transaction_cleanup_interval_ms
        ) / 1000
        self._timer = asyncio.get_running_loop().call_later(interval_s, self._abort_timed_out)

    def _abort_timed_out(self) -> None:
        now_ms = clock.now_ms()
        for coordinator in list(self.coordinators.values()):
            for txn_id in coordinator.timed_out(now_ms):
                log.info("aborting transaction %s: transaction.timeout.ms passed", txn_id)
                self._spawn(self._run_quietly(txn_id, partial(self._abort, txn_id)))
        self._schedule_timeouts()

    async def _run_quietly(self, transactional_id: str, operation: Operation) -> None:
        try:
            await self.run(transactional_id, operation)
        except KafkaError as error:  # moved or not written: the next round retries
            log.info("transaction %s: %s", transactional_id, error)

    # ------------------------------------------------------------ expiration

    def _schedule_expiry(self) -> None:
        interval_s = max(
            10, self.broker.config.transactions_remove_expired_transaction_cleanup_interval_ms
        ) / 1000
        self._expiry_timer = asyncio.get_running_loop().call_later(interval_s, self._expire)

    def _expire(self) -> None:
        expiration_ms = self.broker.config.transactional_id_expiration_ms
        now_ms = clock.now_ms()
        tombstones = [
            record for coordinator in list(self.coordinators.values())
            for record in coordinator.expired_ids(now_ms, expiration_ms)
        ]
        for record in tombstones:
            txn_id = record.key.transactional_id
            self._spawn(self._run_quietly(txn_id, partial(self._tombstone, txn_id)))
        if tombstones:
            log.info("expiring %d transactional ids", len(tombstones))
        self._schedule_expiry()

    def _tombstone(
        self, transactional_id: str, coordinator: TransactionCoordinator, now_ms: int
    ) -> TxnResult:
        """Checked again under the id's lock: a request may have used it meanwhile."""
        expiration_ms = self.broker.config.transactional_id_expiration_ms
        records = [
            r for r in coordinator.expired_ids(now_ms, expiration_ms)
            if r.key.transactional_id == transactional_id
        ]
        return TxnResult(records)

    def _abort(
        self, transactional_id: str, coordinator: TransactionCoordinator, now_ms: int
    ) -> TxnResult:
        return coordinator.abort_timed_out(transactional_id, now_ms)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()
        for task in list(self._background):
            task.cancel()
        if self.channels is not None:
            self.channels.close()


def read_partition(broker: Broker, partition: int) -> list[TxnLogRecord]:
    """Every record of one `__transaction_state` partition, in offset order (blocking I/O)."""
    partition_log = broker.partition_log(TRANSACTION_STATE_TOPIC, partition)
    records: list[TxnLogRecord] = []
    for batch in iter_batches_from(partition_log, partition_log.log_start_offset):
        if batch.is_control:
            continue
        for record in iter_records(batch):
            if record.key is None:
                raise CorruptRecordError(f"__transaction_state record {record.offset}: no key")
            records.append(decode_txn_record(record.key, record.value))
    return records


def _log_failure(task: asyncio.Future[None]) -> None:
    if task.cancelled():
        return
    error = task.exception()
    if isinstance(error, KafkaError):
        log.info("transaction work stopped: %s", error)
    elif error is not None:
        log.error("transaction work failed", exc_info=error)


def service(broker: Broker) -> TransactionService:
    """The broker's transaction service, started on first use."""
    transactions = broker.transactions
    if not isinstance(transactions, TransactionService):
        transactions = broker.transactions = TransactionService(broker)
    return transactions
