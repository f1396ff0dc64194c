"""Transactions in storage: ongoing transactions per producer, COMMIT/ABORT markers, the last
stable offset and the aborted-transaction index (`.txnindex`), checked against a small model,
and rebuilt identically by a clean reopen, a crash recovery (with and without snapshots) and a
truncation."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidelog.errors import ErrorCode, KafkaError
from tidelog.records.batch import RecordBatch
from tidelog.records.builder import NewRecord, build_batch
from tidelog.records.control import (
    ControlRecordType,
    EndTransactionMarker,
    build_end_transaction_batch,
    read_end_transaction_marker,
)
from tidelog.records.record import iter_records
from tidelog.storage.cleaner import LogCleaner
from tidelog.storage.config import LogConfig
from tidelog.storage.log import PartitionLog
from tidelog.storage.producer_state import ProducerStateManager
from tidelog.storage.transaction_index import ENTRY_SIZE, AbortedTxn
from tidelog.types import TopicPartition

from .helpers import read_all

TP = TopicPartition("txn", 0)
CONFIG = LogConfig(segment_bytes=600)


def txn_batch(producer_id: int, epoch: int, sequence: int, count: int = 2) -> RecordBatch:
    records = [NewRecord(b"v" * 20, timestamp_ms=1_000) for _ in range(count)]
    return RecordBatch(memoryview(build_batch(
        records, producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence,
        transactional=True, now_ms=1_000,
    )))


def plain_batch(count: int = 1) -> RecordBatch:
    records = [NewRecord(b"p" * 20, timestamp_ms=1_000) for _ in range(count)]
    return RecordBatch(memoryview(build_batch(records, now_ms=1_000)))


def marker(producer_id: int, epoch: int, commit: bool, coordinator_epoch: int = 0) -> RecordBatch:
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    return RecordBatch(memoryview(build_end_transaction_batch(
        EndTransactionMarker(kind, coordinator_epoch), producer_id=producer_id,
        producer_epoch=epoch, now_ms=1_000,
    )))


@dataclass
class Model:
    """What the partition should say: open transactions and aborted ones, by offsets."""

    ongoing: dict[int, int] = field(default_factory=dict)
    aborted: list[tuple[int, int, int]] = field(default_factory=list)  # pid, first, marker
    sequences: dict[int, int] = field(default_factory=dict)

    def lso(self, log_end_offset: int) -> int:
        return min(self.ongoing.values(), default=log_end_offset)


def observed(log: PartitionLog) -> tuple[int, list[tuple[int, int, int]]]:
    aborted = log.aborted_transactions(0, log.log_end_offset)
    return (
        log.last_stable_offset(log.log_end_offset),
        [(a.producer_id, a.first_offset, a.last_offset) for a in aborted],
    )


def apply(log: PartitionLog, model: Model, op: tuple[str, int, int]) -> None:
    kind, producer_id, count = op
    if kind == "data":
        sequence = model.sequences.get(producer_id, 0)
        result = log.append([txn_batch(producer_id, 0, sequence, count)], now_ms=0)
        model.sequences[producer_id] = sequence + count
        model.ongoing.setdefault(producer_id, result.base_offset)
    elif kind == "plain":
        log.append([plain_batch(count)], now_ms=0)
    else:
        result = log.append([marker(producer_id, 0, kind == "commit")], now_ms=0)
        first = model.ongoing.pop(producer_id, None)
        if kind == "abort" and first is not None:  # a marker with nothing open: no entry
            model.aborted.append((producer_id, first, result.base_offset))


OPS = st.lists(
    st.tuples(
        st.sampled_from(["data", "data", "plain", "commit", "abort"]),
        st.integers(1000, 1003),
        st.integers(1, 4),
    ),
    max_size=40,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=OPS, cut=st.integers(0, 40))
def test_lso_and_aborted_index_match_the_model_and_survive_recovery(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, int, int]], cut: int
) -> None:
    directory = tmp_path_factory.mktemp("log")
    log = PartitionLog(TP, directory, CONFIG)
    model = Model()
    history = {0: (0, [])}  # log end offset after each append -> what the log said then
    for op in ops:
        apply(log, model, op)
        assert observed(log) == (model.lso(log.log_end_offset), model.aborted)
        history[log.log_end_offset] = observed(log)
    expected = observed(log)
    log.close()
    reopened = PartitionLog(TP, directory, CONFIG)  # clean: snapshot + txnindex files
    assert observed(reopened) == expected
    reopened.flush()
    crashed = PartitionLog(TP, directory, CONFIG, clean=False)  # no close: a crash
    assert observed(crashed) == expected
    crashed.close(flush=False)
    for snapshot in directory.glob("*.snapshot"):
        snapshot.unlink()
    for index in directory.glob("*.txnindex"):
        index.write_bytes(index.read_bytes()[: ENTRY_SIZE // 2])  # torn and stale
    replayed = PartitionLog(TP, directory, CONFIG, clean=False)
    assert observed(replayed) == expected
    # Truncation rewinds the transactions with the log: the state at that log end offset.
    boundaries = sorted(history)
    boundary = boundaries[min(cut, len(boundaries) - 1)]
    replayed.truncate_to(boundary)
    assert replayed.log_end_offset == boundary
    assert observed(replayed) == history[boundary]
    replayed.close()
    final = PartitionLog(TP, directory, CONFIG)
    assert observed(final) == history[boundary]
    final.close()


def test_truncation_reopens_a_transaction_its_marker_closed(tmp_path: Path) -> None:
    log = PartitionLog(TP, tmp_path / "p", CONFIG)
    log.append([txn_batch(7, 0, 0)], now_ms=0)  # offsets 0-1
    end = log.append([marker(7, 0, commit=False)], now_ms=0).base_offset  # 2
    assert log.aborted_transactions(0, 3) == [AbortedTxn(7, 0, 2, 3)]
    assert log.last_stable_offset(log.log_end_offset) == 3
    log.truncate_to(end)
    assert log.aborted_transactions(0, 3) == []
    assert log.last_stable_offset(log.log_end_offset) == 0  # open again
    log.close()


def test_lso_stops_at_the_oldest_open_transaction(tmp_path: Path) -> None:
    log = PartitionLog(TP, tmp_path / "p", CONFIG)
    log.append([plain_batch(3)], now_ms=0)  # 0-2
    log.append([txn_batch(1, 0, 0)], now_ms=0)  # 3-4
    log.append([txn_batch(2, 0, 0)], now_ms=0)  # 5-6
    assert log.last_stable_offset(log.log_end_offset) == 3
    log.append([marker(1, 0, commit=True)], now_ms=0)  # 7
    assert log.last_stable_offset(log.log_end_offset) == 5
    log.append([marker(2, 0, commit=False)], now_ms=0)  # 8
    assert log.last_stable_offset(log.log_end_offset) == 9
    assert log.aborted_transactions(0, 9) == [AbortedTxn(2, 5, 8, 9)]
    assert log.aborted_transactions(7, 9) == [AbortedTxn(2, 5, 8, 9)]
    assert log.aborted_transactions(9, 9) == []
    assert log.last_stable_offset(6) == 6  # never above the high watermark
    log.close()


def test_marker_and_write_checks_answer_kafkas_errors(tmp_path: Path) -> None:
    log = PartitionLog(TP, tmp_path / "p", CONFIG)
    log.append([txn_batch(1, 3, 0)], now_ms=0)
    with pytest.raises(KafkaError) as info:
        log.append([marker(1, 2, commit=True)], now_ms=0)
    assert info.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    log.append([marker(1, 3, commit=True, coordinator_epoch=5)], now_ms=0)
    log.append([txn_batch(1, 3, 2)], now_ms=0)
    with pytest.raises(KafkaError) as info:
        log.append([marker(1, 3, commit=True, coordinator_epoch=4)], now_ms=0)
    assert info.value.code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    idempotent = RecordBatch(memoryview(build_batch(
        [NewRecord(b"x", timestamp_ms=1)], producer_id=1, producer_epoch=3, base_sequence=4,
        now_ms=1,
    )))
    with pytest.raises(KafkaError) as info:
        log.append([idempotent], now_ms=0)
    assert info.value.code == ErrorCode.INVALID_TXN_STATE
    # A bumped-epoch abort (a fenced producer's transaction) closes it and starts the epoch.
    log.append([marker(1, 4, commit=False, coordinator_epoch=5)], now_ms=0)
    assert log.last_stable_offset(log.log_end_offset) == log.log_end_offset
    log.close()


def test_txnindex_layout_is_kafkas(tmp_path: Path) -> None:
    log = PartitionLog(TP, tmp_path / "p", CONFIG)
    log.append([txn_batch(9, 1, 0)], now_ms=0)
    log.append([marker(9, 1, commit=False)], now_ms=0)
    data = (tmp_path / "p" / f"{0:020d}.txnindex").read_bytes()
    assert struct.unpack(">hqqqq", data) == (0, 9, 0, 2, 3)
    log.close()


def test_snapshot_keeps_the_open_transaction() -> None:
    state = ProducerStateManager()
    state.update(5, 1, 0, 1, 10, 11, 1_000, transactional=True)
    copy = ProducerStateManager.decode(state.encode())
    assert copy.first_unstable_offset() == 10
    assert copy.producers[5].current_txn_first_offset == 10


def test_compaction_applies_kafkas_transaction_rules(tmp_path: Path) -> None:
    """Kafka's cleaner rules: aborted records are removed (and never shadow the committed
    record of their key: __consumer_offsets holds TxnOffsetCommit records), committed
    transactional records are compacted like others, a marker stays while its transaction has
    data, is then stamped with a delete horizon and removed after it (an ABORT marker with its
    .txnindex entry), and nothing at or after the first unstable offset is touched."""
    config = LogConfig(cleanup_policy="compact", segment_bytes=600, min_cleanable_dirty_ratio=0.0,
                       delete_retention_ms=1_000)
    log = PartitionLog(TP, tmp_path / "c", config)

    def keyed(value: bytes, key: bytes = b"k", **fields: int) -> RecordBatch:
        record = NewRecord(value, key, timestamp_ms=1_000)
        return RecordBatch(memoryview(build_batch([record], now_ms=1_000, **fields))) # type: ignore[arg-type]

    def txn(producer_id: int, value: bytes, key: bytes) -> RecordBatch:
        return keyed(value, key, producer_id=producer_id, producer_epoch=0, base_sequence=0,
                     transactional=True)

    def fill(count: int, tag: bytes) -> None:
        for index in range(count):  # roll past what came before, so it is cleanable
            log.append([keyed(b"filler", tag + b"%d" % index)], now_ms=0)

    def clean(now_ms: int) -> None:
        steps = 0
        while cleaner.clean_step(log, now_ms, 1 << 20):
            steps += 1
            assert steps < 1000

    def kept() -> list[tuple[int, bytes | None]]:
        out: list[tuple[int, bytes | None]] = []
        for batch in read_all(log):
            if batch.is_control:
                out.append((batch.base_offset, b"ABORT" if read_end_transaction_marker(
                    batch).control_type == ControlRecordType.ABORT else b"COMMIT"))
            else:
                out.extend((r.offset, r.value) for r in iter_records(batch)
                           if r.value != b"filler")
        return out

    log.append([keyed(b"old")], now_ms=0)  # 0
    log.append([keyed(b"committed")], now_ms=0)  # 1
    log.append([txn(5, b"aborted", b"k")], now_ms=0)  # 2: an aborted offset commit, say
    log.append([marker(5, 0, commit=False)], now_ms=0)  # 3
    log.append([txn(6, b"t1", b"t")], now_ms=0)  # 4
    log.append([marker(6, 0, commit=True)], now_ms=0)  # 5
    log.append([txn(7, b"t2", b"t")], now_ms=0)  # 6
    log.append([marker(7, 0, commit=True)], now_ms=0)  # 7
    fill(30, b"a")
    open_offset = log.log_end_offset
    log.append([txn(8, b"open", b"o")], now_ms=0)  # open: the first unstable offset
    fill(30, b"b")
    later_offset = log.log_end_offset
    log.append([keyed(b"o2", b"o")], now_ms=0)  # would shadow "open" if it were decided
    fill(30, b"c")
    cleaner = LogCleaner()
    clean(10_000)
    # Aborted and shadowed data gone; every marker kept (its data was read by this pass);
    # nothing from the open transaction's segment on.
    assert kept() == [(1, b"committed"), (3, b"ABORT"), (5, b"COMMIT"), (6, b"t2"),
                      (7, b"COMMIT"), (open_offset, b"open"), (later_offset, b"o2")]
    assert log.aborted_transactions(0, log.log_end_offset) == [AbortedTxn(5, 2, 3, 4)]
    assert log.first_unstable_offset() == open_offset
    commit_offset = log.log_end_offset
    log.append([marker(8, 0, commit=True)], now_ms=0)
    fill(30, b"d")
    clean(10_000)  # "open" is committed now, and shadowed; markers 3, 5 lost their data
    assert kept() == [(1, b"committed"), (3, b"ABORT"), (5, b"COMMIT"), (6, b"t2"),
                      (7, b"COMMIT"), (later_offset, b"o2"), (commit_offset, b"COMMIT")]
    horizons = {b.base_offset: b.base_timestamp for b in read_all(log)
                if b.is_control and b.has_delete_horizon}
    assert horizons == {3: 11_000, 5: 11_000}  # stamped: due at now + delete.retention.ms
    clean(10_500)
    assert len(kept()) == 7  # not yet due
    clean(11_000)
    assert kept() == [(1, b"committed"), (6, b"t2"), (7, b"COMMIT"), (later_offset, b"o2"),
                      (commit_offset, b"COMMIT")]
    assert log.aborted_transactions(0, log.log_end_offset) == []
    log.close()
    reopened = PartitionLog(TP, tmp_path / "c", config)
    assert reopened.aborted_transactions(0, reopened.log_end_offset) == []
    assert reopened.first_unstable_offset() is None
    reopened.close()
