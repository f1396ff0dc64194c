"""Idempotent producers: duplicates get their original offsets, gaps and stale epochs are
rejected, and the state survives a clean reopen, a crash (snapshot + replay), and truncation."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidelog.errors import CorruptRecordError, ErrorCode, KafkaError
from tidelog.storage.config import LogConfig
from tidelog.storage.log import PartitionLog
from tidelog.storage.producer_state import ProducerStateManager
from tidelog.types import TopicPartition

from .helpers import make_batch

TP = TopicPartition("idem", 0)
CONFIG = LogConfig(segment_bytes=800)


def produce(log: PartitionLog, sequence: int, count: int = 2, *, epoch: int = 0,
            producer_id: int = 1000) -> tuple[int, int, bool]:
    batch = make_batch(count, producer_id=producer_id, producer_epoch=epoch,
                       base_sequence=sequence, tag=sequence)
    result = log.append([batch], now_ms=0)
    return result.base_offset, result.last_offset, result.duplicate


def test_duplicates_answered_with_original_offsets(tmp_path: Path) -> None:
    log = PartitionLog(TP, tmp_path / "p", CONFIG)
    originals = [produce(log, sequence) for sequence in range(0, 20, 2)]
    end = log.log_end_offset
    for sequence, (base, last, _) in zip(range(10, 20, 2), originals[5:], strict=True):
        assert produce(log, sequence) == (base, last, True)  # one of the last five
    assert log.log_end_offset == end  # nothing written
    with pytest.raises(KafkaError) as info:  # older than the last five: not a known duplicate
        produce(log, 0)
    assert info.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    log.close()


def test_gaps_and_stale_epochs_rejected(tmp_path: Path) -> None:
    log = PartitionLog(TP, tmp_path / "p", CONFIG)
    produce(log, 0)
    with pytest.raises(KafkaError) as info:
        produce(log, 5)
    assert info.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    produce(log, 0, epoch=1)  # a new epoch restarts at sequence 0
    with pytest.raises(KafkaError) as info:
        produce(log, 2, epoch=0)
    assert info.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    with pytest.raises(KafkaError) as info:
        produce(log, 3, epoch=2)
    assert info.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    # several batches of one producer in one append must be contiguous
    first = make_batch(2, producer_id=1000, producer_epoch=1, base_sequence=2)
    skipped = make_batch(2, producer_id=1000, producer_epoch=1, base_sequence=9)
    with pytest.raises(KafkaError) as info:
        log.append([first, skipped], now_ms=0)
    assert info.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    log.close()


def test_empty_partition_accepts_only_a_first_sequence_of_zero(tmp_path: Path) -> None:
    """KAFKA-15591 (Kafka 4.5): a later in-flight batch that reaches a just-created partition
    before the first one is refused, so the first one's retry is not refused forever."""
    log = PartitionLog(TP, tmp_path / "p", CONFIG)
    with pytest.raises(KafkaError) as info:
        produce(log, 17)
    assert info.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.log_end_offset == 0
    assert produce(log, 0) == (0, 1, False)
    assert produce(log, 2) == (2, 3, False)
    # Once the log held records, an unknown producer may start anywhere (KIP-360: its history
    # may have been removed by retention), as before.
    assert produce(log, 40, producer_id=2000) == (4, 5, False)
    log.close()


def test_state_survives_clean_reopen_and_crash(tmp_path: Path) -> None:
    directory = tmp_path / "p"
    log = PartitionLog(TP, directory, CONFIG)
    offsets = [produce(log, sequence) for sequence in range(0, 40, 2)]
    assert log.segment_count() > 2  # rolls wrote snapshots
    log.close()
    log = PartitionLog(TP, directory, CONFIG, clean=True)
    assert produce(log, 38) == (*offsets[-1][:2], True)
    extra = produce(log, 40)
    log.flush()  # durable, but no clean close: the tail after the last snapshot is replayed
    reopened = PartitionLog(TP, directory, CONFIG, clean=False)
    assert produce(reopened, 40) == (*extra[:2], True)
    with pytest.raises(KafkaError):
        produce(reopened, 50)
    reopened.close()
    # without any snapshot the whole log is replayed
    for snapshot in directory.glob("*.snapshot"):
        snapshot.unlink()
    replayed = PartitionLog(TP, directory, CONFIG, clean=False)
    assert produce(replayed, 40) == (*extra[:2], True)
    replayed.close()


def test_truncation_rewinds_producer_state(tmp_path: Path) -> None:
    log = PartitionLog(TP, tmp_path / "p", CONFIG)
    offsets = [produce(log, sequence) for sequence in range(0, 30, 2)]
    log.truncate_to(offsets[10][0])
    # the batch at sequence 20 is gone: it is new again, not a duplicate
    base, _, duplicate = produce(log, 20)
    assert (base, duplicate) == (offsets[10][0], False)
    log.close()


def test_non_idempotent_batches_skip_the_checks(tmp_path: Path) -> None:
    log = PartitionLog(TP, tmp_path / "p", CONFIG)
    for _ in range(3):
        assert not log.append([make_batch(1)], now_ms=0).duplicate
    assert log.log_end_offset == 3
    log.close()


@given(st.binary(max_size=200))
def test_snapshot_decoder_raises_only_typed_errors(data: bytes) -> None:
    try:
        state = ProducerStateManager.decode(data)
    except CorruptRecordError:
        return
    assert ProducerStateManager.decode(state.encode()).producers == state.producers


def test_snapshot_round_trip() -> None:
    state = ProducerStateManager()
    for sequence in range(0, 14, 2):
        state.update(7, 3, sequence, sequence + 1, sequence * 10, sequence * 10 + 1, 99)
    state.update(8, 0, 0, 0, 500, 500, 1)
    decoded = ProducerStateManager.decode(state.encode())
    assert decoded.producers == state.producers
    assert len(decoded.producers[7].batches) == 5


def test_idle_producers_expire_but_an_open_transaction_stays() -> None:
    """producer.id.expiration.ms (Kafka's removeExpiredProducers): by the newest timestamp of
    a producer's batches and markers; the marker's survives a snapshot (version 3)."""
    state = ProducerStateManager()
    state.update(1, 0, 0, 0, 0, 0, 1_000)  # idle since 1 000
    state.update(2, 0, 0, 0, 1, 1, 1_000, transactional=True)  # open since 1 000
    state.update(3, 0, 0, 0, 2, 2, 1_000, transactional=True)
    state.complete_txn(3, 0, 1, 3, 0, timestamp=5_000)  # committed at 5 000
    decoded = ProducerStateManager.decode(state.encode())
    assert decoded.producers == state.producers
    assert decoded.remove_expired(now_ms=5_999, expiration_ms=1_000) == [1]
    assert decoded.remove_expired(now_ms=6_000, expiration_ms=1_000) == [3]
    assert set(decoded.producers) == {2} and decoded.first_unstable_offset() == 1
