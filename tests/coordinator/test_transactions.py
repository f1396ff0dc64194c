"""The pure transaction coordinator: Kafka's state machine and error codes, state changed only
by replaying its own records, the records' bytes round trip, and a reload from them."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidelog.coordinator.transactions import (
    TransactionCoordinator,
    TxnResult,
    allowed,
)
from tidelog.coordinator.txn_records import (
    TransactionLogKey,
    TransactionLogValue,
    TransactionState,
    TxnLogRecord,
    TxnPartitions,
    decode_txn_record,
)
from tidelog.errors import CorruptRecordError, ErrorCode

S = TransactionState
TP = ("orders", 0)


class Harness:
    """Runs operations the way the broker does: apply the records by replay (through bytes)."""

    def __init__(self) -> None:
        self.coordinator = TransactionCoordinator(max_timeout_ms=900_000)
        self.ids = itertools.count(1000)
        self.log: list[TxnLogRecord] = []

    def apply(self, result: TxnResult) -> TxnResult:
        for record in result.records:
            before = self.coordinator.describe(record.key.transactional_id)
            decoded = decode_txn_record(record.key_bytes(), record.value_bytes())
            assert decoded == record
            assert record.value is not None
            if before is not None:
                assert allowed(before.state, S(record.value.transaction_status)), (
                    before.state, record.value.transaction_status)
            self.coordinator.replay(decoded)
            self.log.append(decoded)
        if result.markers is not None:
            done = self.coordinator.complete_markers(result.markers.transactional_id, 0)
            self.apply(done)
        return result

    def init(self, txn_id: str = "t", pid: int = -1, epoch: int = -1) -> tuple[ErrorCode, int, int]:
        result = self.apply(self.coordinator.init_producer_id(
            txn_id, 60_000, pid, epoch, lambda: next(self.ids), 0))
        assert result.init is not None
        return result.init.error, result.init.producer_id, result.init.producer_epoch

    def state(self, txn_id: str = "t") -> TransactionState:
        metadata = self.coordinator.describe(txn_id)
        assert metadata is not None
        return metadata.state


def test_commit_cycle_and_the_errors_kafka_answers() -> None:
    h = Harness()
    assert h.init() == (ErrorCode.NONE, 1000, 0)
    assert h.init() == (ErrorCode.NONE, 1000, 1)  # a new instance bumps the epoch
    add = h.apply(h.coordinator.add_partitions("t", 1000, 0, [TP], 5))
    assert add.error is ErrorCode.PRODUCER_FENCED  # the old epoch is fenced
    assert h.apply(h.coordinator.add_partitions("t", 999, 1, [TP], 5)).error is (
        ErrorCode.INVALID_PRODUCER_ID_MAPPING)
    assert h.apply(h.coordinator.end_transaction("t", 1000, 1, True, 5)).error is (
        ErrorCode.INVALID_TXN_STATE)  # nothing to commit
    assert h.apply(h.coordinator.add_partitions("t", 1000, 1, [TP], 5)).records
    assert not h.apply(h.coordinator.add_partitions("t", 1000, 1, [TP], 6)).records  # known
    assert h.state() is S.ONGOING
    assert h.coordinator.verify_partition("t", 1000, 1, TP) is ErrorCode.NONE
    assert h.coordinator.verify_partition("t", 1000, 1, ("orders", 1)) is (
        ErrorCode.TRANSACTION_ABORTABLE)  # Kafka's answer; Produce v0-10 see INVALID_TXN_STATE
    end = h.coordinator.end_transaction("t", 1000, 1, True, 7)
    assert end.markers is not None and end.markers.committed
    assert end.markers.partitions == frozenset({TP})
    h.apply(end)
    assert h.state() is S.COMPLETE_COMMIT
    # A retried commit is answered NONE, an abort after it INVALID_TXN_STATE.
    assert h.coordinator.end_transaction("t", 1000, 1, True, 8).error is ErrorCode.NONE
    assert h.coordinator.end_transaction("t", 1000, 1, False, 8).error is (
        ErrorCode.INVALID_TXN_STATE)
    assert h.coordinator.verify_partition("t", 1000, 1, TP) is ErrorCode.TRANSACTION_ABORTABLE


def test_a_new_instance_fences_an_ongoing_transaction_by_aborting_it() -> None:
    h = Harness()
    h.init()
    h.apply(h.coordinator.add_partitions("t", 1000, 0, [TP], 1))
    result = h.coordinator.init_producer_id("t", 60_000, -1, -1, lambda: 0, 2)
    assert result.init is not None
    assert result.init.error is ErrorCode.CONCURRENT_TRANSACTIONS  # the client retries
    assert result.markers is not None and not result.markers.committed
    assert result.markers.producer_epoch == 1  # markers at the bumped epoch fence the zombie
    h.apply(result)
    assert h.state() is S.COMPLETE_ABORT
    assert h.init() == (ErrorCode.NONE, 1000, 2)
    # The zombie (epoch 0) is fenced everywhere.
    assert h.coordinator.end_transaction("t", 1000, 0, True, 3).error is ErrorCode.PRODUCER_FENCED
    assert h.coordinator.verify_partition("t", 1000, 0, TP) is ErrorCode.PRODUCER_FENCED


def test_timeout_aborts_only_expired_transactions() -> None:
    h = Harness()
    h.init("a")
    h.init("b")
    h.apply(h.coordinator.add_partitions("a", 1000, 0, [TP], 1_000))
    h.apply(h.coordinator.add_partitions("b", 1001, 0, [TP], 50_000))
    assert h.coordinator.timed_out(61_000) == ["a"]
    result = h.apply(h.coordinator.abort_timed_out("a", 61_000))
    assert result.markers is not None and result.markers.producer_epoch == 1
    assert h.state("a") is S.COMPLETE_ABORT and h.state("b") is S.ONGOING
    assert h.coordinator.timed_out(61_000) == []
    assert not h.coordinator.abort_timed_out("b", 61_000).records  # not expired yet


def test_kip360_recovery_and_timeouts_checked() -> None:
    h = Harness()
    assert h.init() == (ErrorCode.NONE, 1000, 0)
    assert h.init(pid=1000, epoch=0) == (ErrorCode.NONE, 1000, 1)  # recovery bump
    assert h.init(pid=1000, epoch=0) == (ErrorCode.NONE, 1000, 1)  # a retry: same answer
    assert h.init(pid=1000, epoch=7)[0] is ErrorCode.PRODUCER_FENCED
    assert h.init(pid=55, epoch=1)[0] is ErrorCode.PRODUCER_FENCED
    bad = h.coordinator.init_producer_id("t", 900_001, -1, -1, lambda: 0, 0)
    assert bad.init is not None and bad.init.error is ErrorCode.INVALID_TRANSACTION_TIMEOUT
    empty = h.coordinator.init_producer_id("", 1000, -1, -1, lambda: 0, 0)
    assert empty.init is not None and empty.init.error is ErrorCode.INVALID_REQUEST


def test_reload_from_the_log_gives_the_same_state_and_finishes_prepared_ones() -> None:
    h = Harness()
    h.init("x")
    h.apply(h.coordinator.add_partitions("x", 1000, 0, [TP, ("other", 3)], 1))
    prepared = h.coordinator.end_transaction("x", 1000, 0, True, 2)
    for record in prepared.records:  # crash before the markers: no complete record
        h.coordinator.replay(record)
        h.log.append(record)
    reloaded = TransactionCoordinator(900_000)
    pending = reloaded.load(h.log)
    assert reloaded.transactions == h.coordinator.transactions
    assert [(m.transactional_id, m.committed, m.partitions) for m in pending] == [
        ("x", True, frozenset({TP, ("other", 3)}))
    ]


def test_value_layout_is_kafkas_version_0() -> None:
    record = TxnLogRecord(
        TransactionLogKey("tx"),
        TransactionLogValue(7, 2, 60_000, int(S.ONGOING), (TxnPartitions("t", (0, 1)),), 5, 4),
    )
    assert record.key_bytes() == b"\x00\x00\x00\x02tx"
    value = record.value_bytes()
    assert value is not None
    assert value[:2] == b"\x00\x00"  # version 0
    assert value[2:10] == (7).to_bytes(8, "big")
    assert decode_txn_record(record.key_bytes(), value) == record
    assert decode_txn_record(record.key_bytes(), None).value is None


@given(st.binary(max_size=80), st.binary(max_size=80))
def test_decoder_raises_only_typed_errors(key: bytes, value: bytes) -> None:
    try:
        decode_txn_record(b"\x00\x00" + key, value)
    except CorruptRecordError:
        pass


def test_state_table_refuses_skipping_the_prepare_step() -> None:
    assert not allowed(S.ONGOING, S.COMPLETE_COMMIT)
    assert allowed(S.PREPARE_COMMIT, S.COMPLETE_COMMIT)
    with pytest.raises(KeyError):
        allowed(99, S.EMPTY)  # type: ignore[arg-type]


def test_idle_ids_expire_by_tombstone() -> None:
    h = Harness()
    h.init("idle")
    h.init("busy")
    h.apply(h.coordinator.add_partitions("busy", 1001, 0, [TP], 0))
    tombstones = h.coordinator.expired_ids(now_ms=10_000, expiration_ms=5_000)
    assert [(r.key.transactional_id, r.value) for r in tombstones] == [("idle", None)]
    assert h.coordinator.expired_ids(now_ms=4_000, expiration_ms=5_000) == []
    for record in tombstones:
        h.coordinator.replay(record)
    assert h.coordinator.describe("idle") is None and h.coordinator.describe("busy") is not None
    assert h.init("idle") == (ErrorCode.NONE, 1002, 0)  # starts again with a new producer id


def test_transaction_version_2_bumps_the_epoch_per_transaction() -> None:
    """KIP-890 part 2 (EndTxn v5): the Prepare* record and the markers carry epoch + 1, the
    answer names it, a retry of the lost answer gets it again, the old epoch is fenced."""
    h = Harness()
    assert h.init() == (ErrorCode.NONE, 1000, 0)
    h.apply(h.coordinator.add_partitions("t", 1000, 0, [TP], 1))
    end = h.apply(h.coordinator.end_transaction("t", 1000, 0, True, 2, bump=True))
    assert end.error is ErrorCode.NONE and end.ended == (1000, 1)
    assert end.markers is not None and end.markers.producer_epoch == 1
    assert end.markers.partitions == frozenset({TP})
    assert (h.state(), h.coordinator.describe("t").producer_epoch) == (S.COMPLETE_COMMIT, 1)
    retried = h.coordinator.end_transaction("t", 1000, 0, True, 3, bump=True)
    assert (retried.error, retried.ended, retried.records) == (ErrorCode.NONE, (1000, 1), [])
    assert h.coordinator.end_transaction("t", 1000, 0, False, 3, bump=True).error is (
        ErrorCode.PRODUCER_FENCED)  # not that request's outcome
    assert h.coordinator.verify_partition("t", 1000, 0, TP) is ErrorCode.PRODUCER_FENCED
    assert h.apply(h.coordinator.add_partitions("t", 1000, 0, [TP], 3)).error is (
        ErrorCode.PRODUCER_FENCED)
    # Commit with nothing in progress: INVALID_TXN_STATE; abort: accepted, the epoch bumped.
    assert h.coordinator.end_transaction("t", 1000, 1, True, 4, bump=True).error is (
        ErrorCode.INVALID_TXN_STATE)
    aborted = h.apply(h.coordinator.end_transaction("t", 1000, 1, False, 4, bump=True))
    assert aborted.ended == (1000, 2) and aborted.markers is not None
    assert aborted.markers.partitions == frozenset()
    assert h.state() is S.COMPLETE_ABORT


def test_transaction_version_2_moves_to_a_new_producer_id_at_an_exhausted_epoch() -> None:
    h = Harness()
    h.init()
    h.coordinator.transactions["t"] = replace(
        h.coordinator.describe("t"), producer_epoch=32766)
    h.apply(h.coordinator.add_partitions("t", 1000, 32766, [TP], 1))
    end = h.coordinator.end_transaction("t", 1000, 32766, False, 2, bump=True,
                                        new_producer_id=lambda: 2000)
    assert end.ended == (2000, 0)
    assert end.markers is not None and (end.markers.producer_id, end.markers.producer_epoch) == (
        1000, 32767)  # markers of the old producer id, at Short.MaxValue
    h.apply(end)
    metadata = h.coordinator.describe("t")
    assert (metadata.producer_id, metadata.producer_epoch, metadata.state) == (
        2000, 0, S.COMPLETE_ABORT)
    retried = h.coordinator.end_transaction("t", 1000, 32766, False, 3, bump=True)
    assert (retried.error, retried.ended) == (ErrorCode.NONE, (2000, 0))
