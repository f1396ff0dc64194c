"""The transaction coordinator (Kafka's TransactionCoordinator, transaction versions 1 and 2),
pure (D14).

State per transactional id (`TransactionMetadata`) changes only by `replay(record)` of
`__transaction_state` records. Each operation takes plain arguments and `now_ms` and returns a
`TxnResult`: the records to append (the caller appends, then replays them), the response, and
for a transaction that ends the `MarkerRequest` the caller must carry out (write COMMIT/ABORT
markers to every partition of the transaction) before calling `complete_markers`, whose record
moves PrepareCommit/PrepareAbort to CompleteCommit/CompleteAbort. The caller runs operations on
one transactional id one at a time, so Kafka's "pending state" is not needed here.

States (TransactionState codes of the log):

    Empty           a producer id and epoch, no transaction (after InitProducerId)
    Ongoing         partitions added (AddPartitionsToTxn / AddOffsetsToTxn); a timer may abort it
    PrepareCommit   EndTxn(commit) written; the markers are being written
    PrepareAbort    EndTxn(abort), a fence by a new InitProducerId, or the timeout
    CompleteCommit  all COMMIT markers written; a new transaction may begin
    CompleteAbort   all ABORT markers written
    Dead            expired id (not produced by Tidelog yet)
    PrepareEpochFence  never written by Tidelog: the fence writes PrepareAbort at epoch + 1

Transaction version 2 (KIP-890 part 2: EndTxn v5+, `bump=True`): ending a transaction bumps the
producer epoch in its Prepare* record, so the markers carry the new epoch and a late write of
the old epoch is fenced at every partition; EndTxn answers the new producer id and epoch. At an
exhausted epoch the Prepare* record takes epoch Short.MaxValue and the Complete* record moves to
a new producer id at epoch 0 (Kafka's nextProducerId; kept in memory here, as the records are
written in TransactionLogValue v0). A retry of the EndTxn whose answer was lost (the request's
epoch is one below, or its producer id the previous one) gets the same answer. An abort with no
transaction in progress (Empty, Complete*) bumps the epoch too: a TV2 client may abort a
transaction whose first write never reached a partition.

Errors follow Kafka: an unknown id or another producer id is INVALID_PRODUCER_ID_MAPPING, an old
epoch PRODUCER_FENCED, a request during Prepare* CONCURRENT_TRANSACTIONS, a transition the state
does not allow INVALID_TXN_STATE.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from tidelog.coordinator.txn_records import (
    TransactionLogKey,
    TransactionLogValue,
    TransactionState,
    TxnLogRecord,
    group_partitions,
)
from tidelog.errors import ErrorCode

MAX_EPOCH = 32767
_EXHAUSTED_EPOCH = MAX_EPOCH - 1  # Kafka bumps to a new producer id at Short.MaxValue - 1
S = TransactionState
_TRANSITIONS: dict[S, frozenset[S]] = {
    S.EMPTY: frozenset({S.EMPTY, S.ONGOING, S.DEAD, S.PREPARE_ABORT}),  # TV2: abort with none
    S.ONGOING: frozenset({S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.COMPLETE_COMMIT}),
    S.PREPARE_ABORT: frozenset({S.COMPLETE_ABORT}),
    S.COMPLETE_COMMIT: frozenset({S.EMPTY, S.ONGOING, S.DEAD, S.PREPARE_ABORT}),
    S.COMPLETE_ABORT: frozenset({S.EMPTY, S.ONGOING, S.DEAD, S.PREPARE_ABORT}),
    S.DEAD: frozenset(),
    S.PREPARE_EPOCH_FENCE: frozenset({S.PREPARE_ABORT}),
}


@dataclass(frozen=True, slots=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TransactionState
    partitions: frozenset[tuple[str, int]]
    last_update_ms: int
    start_ms: int  # -1: no transaction started
    # In memory (Kafka's lastProducerEpoch): the epoch before the last bump, for a retried
    # InitProducerId (KIP-360) whose answer was lost.
    last_producer_epoch: int = -1
    # In memory (Kafka's previousProducerId/nextProducerId, TV2 at an exhausted epoch): the
    # producer id the Complete* record moves to, and the one it moved from.
    next_producer_id: int = -1
    previous_producer_id: int = -1

    def to_value(self) -> TransactionLogValue:
        return TransactionLogValue(
            self.producer_id, self.producer_epoch, self.timeout_ms, int(self.state),
            group_partitions(self.partitions), self.last_update_ms, self.start_ms,
        )


@dataclass(frozen=True, slots=True)
class MarkerRequest:
    """Write a COMMIT (`committed`) or ABORT marker for the producer to each partition."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool
    partitions: frozenset[tuple[str, int]]


@dataclass(frozen=True, slots=True)
class InitProducerIdResponse:
    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(slots=True)
class TxnResult:
    records: list[TxnLogRecord] = field(default_factory=list)
    error: ErrorCode = ErrorCode.NONE
    markers: MarkerRequest | None = None
    init: InitProducerIdResponse | None = None  # InitProducerId's answer
    # EndTxn v5+ (TV2): the producer id and epoch the client continues with.
    ended: tuple[int, int] | None = None


def _record(metadata: TransactionMetadata) -> TxnLogRecord:
    return TxnLogRecord(TransactionLogKey(metadata.transactional_id), metadata.to_value())


class TransactionCoordinator:
    """Every transactional id of the `__transaction_state` partitions this broker loaded."""

    def __init__(self, max_timeout_ms: int) -> None:
        self.max_timeout_ms = max_timeout_ms
        self.transactions: dict[str, TransactionMetadata] = {}
        # A TV2 EndTxn at an exhausted epoch: the new producer id, taken by the replay of its
        # Prepare* record (the v0 record has no field for it).
        self._next_ids: dict[str, int] = {}

    # ------------------------------------------------------------ replay

    def replay(self, record: TxnLogRecord) -> None:
        txn_id = record.key.transactional_id
        value = record.value
        if value is None:
            self.transactions.pop(txn_id, None)
            return
        before = self.transactions.get(txn_id)
        last_epoch = -1
        next_id = previous_id = -1
        state = TransactionState(value.transaction_status)
        if before is not None:
            last_epoch = before.last_producer_epoch
            previous_id = before.previous_producer_id
            if value.producer_id == before.producer_id and (
                value.producer_epoch != before.producer_epoch
            ):
                last_epoch = before.producer_epoch
            if value.producer_id != before.producer_id:
                previous_id = before.producer_id
            elif state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                next_id = self._next_ids.pop(txn_id, -1)
        self.transactions[txn_id] = TransactionMetadata(
            txn_id, value.producer_id, value.producer_epoch, value.transaction_timeout_ms,
            state, value.partitions(),
            value.transaction_last_update_timestamp_ms, value.transaction_start_timestamp_ms,
            last_epoch, next_id, previous_id,
        )

    def load(self, records: Iterable[TxnLogRecord]) -> list[MarkerRequest]:
        """Replay a partition; the transactions left in Prepare* (their markers may not all
        be written: the caller writes them again, then completes them, as Kafka does)."""
        for record in records:
            self.replay(record)
        return [
            self.markers_of(metadata)
            for metadata in self.transactions.values()
            if metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT)
        ]

    # ------------------------------------------------------------ InitProducerId

    def init_producer_id(
        self,
        transactional_id: str,
        timeout_ms: int,
        producer_id: int,
        producer_epoch: int,
        new_producer_id: Callable[[], int],
        now_ms: int,
    ) -> TxnResult:
        if not transactional_id:
            return _init_error(ErrorCode.INVALID_REQUEST)
        if not 0 < timeout_ms <= self.max_timeout_ms:
            return _init_error(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        metadata = self.transactions.get(transactional_id)
        if metadata is None:
            created = TransactionMetadata(
                transactional_id, new_producer_id(), 0, timeout_ms, S.EMPTY, frozenset(),
                now_ms, -1,
            )
            return TxnResult([_record(created)], init=_init_ok(created))
        expected = producer_id >= 0
        if expected and producer_id != metadata.producer_id:
            # KIP-360: a recovering producer must name this id's current producer id.
            return _init_error(ErrorCode.PRODUCER_FENCED)
        state = metadata.state
        if state in (S.PREPARE_COMMIT, S.PREPARE_ABORT, S.PREPARE_EPOCH_FENCE, S.DEAD):
            return _init_error(ErrorCode.CONCURRENT_TRANSACTIONS)
        if state is S.ONGOING:
            # Fence the previous producer: abort its transaction at epoch + 1; the client
            # retries (CONCURRENT_TRANSACTIONS) and then gets a bumped epoch.
            result = self._abort_with_bump(metadata, now_ms)
            result.init = InitProducerIdResponse(ErrorCode.CONCURRENT_TRANSACTIONS)
            return result
        if expected and producer_epoch != metadata.producer_epoch:
            if producer_epoch == metadata.last_producer_epoch:
                # A retry of the bump that already happened: answer the current epoch.
                return TxnResult(init=_init_ok(metadata))
            return _init_error(ErrorCode.PRODUCER_FENCED)
        if metadata.producer_epoch >= _EXHAUSTED_EPOCH:
            bumped = replace(metadata, producer_id=new_producer_id(), producer_epoch=0)
        else:
            bumped = replace(metadata, producer_epoch=metadata.producer_epoch + 1)
        bumped = replace(
            bumped, timeout_ms=timeout_ms, state=S.EMPTY, partitions=frozenset(),
            last_update_ms=now_ms, start_ms=-1,
        )
        return TxnResult([_record(bumped)], init=_init_ok(bumped))

    # ------------------------------------------------------------ adding partitions

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[tuple[str, int]],
        now_ms: int,
    ) -> TxnResult:
        metadata, error = self._check_producer(transactional_id, producer_id, producer_epoch)
        if metadata is None:
            return TxnResult(error=error)
        state = metadata.state
        if state in (S.PREPARE_COMMIT, S.PREPARE_ABORT, S.PREPARE_EPOCH_FENCE):
            return TxnResult(error=ErrorCode.CONCURRENT_TRANSACTIONS)
        if state is S.DEAD:
            return TxnResult(error=ErrorCode.INVALID_TXN_STATE)
        wanted = frozenset(partitions)
        if state is S.ONGOING and wanted <= metadata.partitions:
            return TxnResult()  # nothing new: no write
        start_ms = metadata.start_ms if state is S.ONGOING else now_ms
        ongoing = replace(
            metadata, state=S.ONGOING, partitions=metadata.partitions | wanted,
            last_update_ms=now_ms, start_ms=start_ms,
        )
        return TxnResult([_record(ongoing)])

    def verify_partition(
        self, transactional_id: str, producer_id: int, producer_epoch: int, tp: tuple[str, int]
    ) -> ErrorCode:
        """KIP-890 part 1 (AddPartitionsToTxn verify_only): may this producer write `tp`?
        Kafka's handleVerifyPartitionsInTransaction answers: another producer id
        INVALID_PRODUCER_ID_MAPPING, another epoch PRODUCER_FENCED, a transaction being ended
        CONCURRENT_TRANSACTIONS, a partition not in the transaction TRANSACTION_ABORTABLE (the
        callers map these for older request versions)."""
        metadata = self.transactions.get(transactional_id)
        if metadata is None or metadata.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if producer_epoch != metadata.producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        if metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if metadata.state is not S.ONGOING or tp not in metadata.partitions:
            return ErrorCode.TRANSACTION_ABORTABLE
        return ErrorCode.NONE

    # ------------------------------------------------------------ ending

    def end_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        now_ms: int,
        *,
        bump: bool = False,
        new_producer_id: Callable[[], int] | None = None,
    ) -> TxnResult:
        """EndTxn. `bump`: transaction version 2 (EndTxn v5+), the epoch bumped per
        transaction; `new_producer_id` serves an exhausted epoch."""
        if bump:
            return self._end_v2(
                transactional_id, producer_id, producer_epoch, committed, now_ms,
                new_producer_id,
            )
        metadata, error = self._check_producer(transactional_id, producer_id, producer_epoch)
        if metadata is None:
            return TxnResult(error=error)
        state = metadata.state
        if state is S.ONGOING:
            prepared = replace(
                metadata, state=S.PREPARE_COMMIT if committed else S.PREPARE_ABORT,
                last_update_ms=now_ms,
            )
            return TxnResult([_record(prepared)], markers=self.markers_of(prepared))
        if state is S.COMPLETE_COMMIT:
            return TxnResult(error=ErrorCode.NONE if committed else ErrorCode.INVALID_TXN_STATE)
        if state is S.COMPLETE_ABORT:
            return TxnResult(error=ErrorCode.INVALID_TXN_STATE if committed else ErrorCode.NONE)
        if state is S.PREPARE_COMMIT:
            return TxnResult(
                error=ErrorCode.CONCURRENT_TRANSACTIONS if committed
                else ErrorCode.INVALID_TXN_STATE
            )
        if state is S.PREPARE_ABORT:
            return TxnResult(
                error=ErrorCode.INVALID_TXN_STATE if committed
                else ErrorCode.CONCURRENT_TRANSACTIONS
            )
        return TxnResult(error=ErrorCode.INVALID_TXN_STATE)  # Empty, Dead, fencing

    def _end_v2(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        now_ms: int,
        new_producer_id: Callable[[], int] | None,
    ) -> TxnResult:
        """Kafka's endTransaction for TV2 clients (KIP-890 part 2)."""
        if not transactional_id:
            return TxnResult(error=ErrorCode.INVALID_REQUEST)
        metadata = self.transactions.get(transactional_id)
        if metadata is None:
            return TxnResult(error=ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        state = metadata.state
        wanted = S.COMPLETE_COMMIT if committed else S.COMPLETE_ABORT
        preparing = S.PREPARE_COMMIT if committed else S.PREPARE_ABORT
        # A retry whose answer was lost: the epoch it ended was bumped by one, or (at an
        # exhausted epoch) the transaction moved to a new producer id.
        retry = (
            producer_id == metadata.producer_id and producer_epoch + 1 == metadata.producer_epoch
        ) or (
            producer_id == metadata.previous_producer_id and metadata.producer_epoch == 0
            and producer_epoch >= _EXHAUSTED_EPOCH
        )
        if producer_id != metadata.producer_id and not retry:
            return TxnResult(error=ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if not retry and producer_epoch != metadata.producer_epoch:
            return TxnResult(error=ErrorCode.PRODUCER_FENCED)
        if retry:
            if state is wanted:
                return TxnResult(ended=(metadata.producer_id, metadata.producer_epoch))
            if state is preparing:
                return TxnResult(error=ErrorCode.CONCURRENT_TRANSACTIONS)
            # Not this request's outcome: an older producer (a zombie) after another bump.
            return TxnResult(error=ErrorCode.PRODUCER_FENCED)
        if state in (S.PREPARE_COMMIT, S.PREPARE_ABORT, S.PREPARE_EPOCH_FENCE):
            return TxnResult(
                error=ErrorCode.CONCURRENT_TRANSACTIONS if state is preparing
                else ErrorCode.INVALID_TXN_STATE
            )
        if state is not S.ONGOING and (
            committed or state not in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
        ):
            return TxnResult(error=ErrorCode.INVALID_TXN_STATE)
        # Ongoing, or an abort with nothing in progress: Prepare* at the bumped epoch.
        next_id = -1
        epoch = metadata.producer_epoch + 1
        if metadata.producer_epoch >= _EXHAUSTED_EPOCH:
            if new_producer_id is None:
                return TxnResult(error=ErrorCode.CONCURRENT_TRANSACTIONS)
            next_id, epoch = new_producer_id(), MAX_EPOCH
        prepared = replace(
            metadata, producer_epoch=epoch, state=preparing, last_update_ms=now_ms,
            partitions=metadata.partitions if state is S.ONGOING else frozenset(),
            next_producer_id=next_id,
        )
        if next_id >= 0:
            self._next_ids[transactional_id] = next_id
        ended = (next_id, 0) if next_id >= 0 else (metadata.producer_id, epoch)
        return TxnResult([_record(prepared)], markers=self.markers_of(prepared), ended=ended)

    def complete_markers(self, transactional_id: str, now_ms: int) -> TxnResult:
        """Every marker of the Prepare* transaction is written: CompleteCommit/CompleteAbort."""
        metadata = self.transactions.get(transactional_id)
        if metadata is None or metadata.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return TxnResult()
        done = S.COMPLETE_COMMIT if metadata.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        completed = replace(metadata, state=done, partitions=frozenset(), last_update_ms=now_ms)
        if metadata.next_producer_id >= 0:  # TV2 at an exhausted epoch: a new producer id
            completed = replace(
                completed, producer_id=metadata.next_producer_id, producer_epoch=0,
                next_producer_id=-1,
            )
        return TxnResult([_record(completed)])

    # ------------------------------------------------------------ timeouts

    def timed_out(self, now_ms: int) -> list[str]:
        """Ongoing transactions older than their transaction.timeout.ms."""
        return [
            txn_id for txn_id, metadata in self.transactions.items()
            if metadata.state is S.ONGOING and metadata.start_ms + metadata.timeout_ms <= now_ms
        ]

    def abort_timed_out(self, transactional_id: str, now_ms: int) -> TxnResult:
        """Kafka's abortTimedOutTransactions: fence the producer (epoch + 1) and abort."""
        metadata = self.transactions.get(transactional_id)
        if (
            metadata is None or metadata.state is not S.ONGOING
            or metadata.start_ms + metadata.timeout_ms > now_ms
        ):
            return TxnResult()
        return self._abort_with_bump(metadata, now_ms)

    # ------------------------------------------------------------ expiration

    def expired_ids(self, now_ms: int, expiration_ms: int) -> list[TxnLogRecord]:
        """Kafka's transactional.id.expiration.ms: tombstones for ids with no transaction in
        progress (Empty, CompleteCommit, CompleteAbort) not updated for that long; replaying
        a tombstone forgets the id (a new InitProducerId starts it again with a new producer
        id)."""
        idle = (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
        return [
            TxnLogRecord(TransactionLogKey(txn_id), None)
            for txn_id, metadata in self.transactions.items()
            if metadata.state in idle and metadata.last_update_ms + expiration_ms <= now_ms
        ]

    # ------------------------------------------------------------ helpers

    def _abort_with_bump(self, metadata: TransactionMetadata, now_ms: int) -> TxnResult:
        epoch = metadata.producer_epoch
        bumped = epoch + 1 if epoch < _EXHAUSTED_EPOCH else epoch
        aborting = replace(
            metadata, producer_epoch=bumped, state=S.PREPARE_ABORT, last_update_ms=now_ms
        )
        return TxnResult([_record(aborting)], markers=self.markers_of(aborting))

    def markers_of(self, metadata: TransactionMetadata) -> MarkerRequest:
        return MarkerRequest(
            metadata.transactional_id, metadata.producer_id, metadata.producer_epoch,
            metadata.state is S.PREPARE_COMMIT, metadata.partitions,
        )

    def _check_producer(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> tuple[TransactionMetadata | None, ErrorCode]:
        if not transactional_id:
            return None, ErrorCode.INVALID_REQUEST
        metadata = self.transactions.get(transactional_id)
        if metadata is None or metadata.producer_id != producer_id:
            return None, ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if metadata.producer_epoch != producer_epoch:
            return None, ErrorCode.PRODUCER_FENCED
        return metadata, ErrorCode.NONE

    def describe(self, transactional_id: str) -> TransactionMetadata | None:
        return self.transactions.get(transactional_id)


def _init_error(error: ErrorCode) -> TxnResult:
    return TxnResult(init=InitProducerIdResponse(error))


def _init_ok(metadata: TransactionMetadata) -> InitProducerIdResponse:
    return InitProducerIdResponse(ErrorCode.NONE, metadata.producer_id, metadata.producer_epoch)


def allowed(source: TransactionState, target: TransactionState) -> bool:
    """The state table (tests check that every record the coordinator writes obeys it)."""
    return target in _TRANSITIONS[source]
