"""replication-offset-checkpoint: Kafka's text format, crash-safe replace, malformed = empty."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidelog.cluster.placement import check_leader_epoch
from tidelog.errors import ErrorCode, KafkaError
from tidelog.storage.hw_checkpoint import (
    CHECKPOINT_FILE,
    read_high_watermarks,
    write_high_watermarks,
)
from tidelog.types import TopicPartition


def test_round_trip_in_kafkas_format(tmp_path: Path) -> None:
    marks = {TopicPartition("b", 1): 7, TopicPartition("a", 0): 12}
    write_high_watermarks(tmp_path, marks)
    assert (tmp_path / CHECKPOINT_FILE).read_text() == "0\n2\na 0 12\nb 1 7\n"
    assert read_high_watermarks(tmp_path) == marks
    assert not (tmp_path / (CHECKPOINT_FILE + ".tmp")).exists()


@pytest.mark.parametrize("text", ["1\n0\n", "0\n2\na 0 1\n", "0\n1\na x 1\n", "0\n1\na 0 -1\n",
                                  "", "0\n1\na 0\n"])
def test_malformed_file_reads_as_empty(tmp_path: Path, text: str) -> None:
    (tmp_path / CHECKPOINT_FILE).write_text(text)
    assert read_high_watermarks(tmp_path) == {}


def test_missing_file_reads_as_empty(tmp_path: Path) -> None:
    assert read_high_watermarks(tmp_path) == {}


def test_leader_epoch_check_kip_320() -> None:
    tp = TopicPartition("t", 0)
    check_leader_epoch(tp, -1, 5)  # no epoch given: no check
    check_leader_epoch(tp, 5, 5)
    with pytest.raises(KafkaError) as fenced:
        check_leader_epoch(tp, 4, 5)
    assert fenced.value.code == ErrorCode.FENCED_LEADER_EPOCH
    with pytest.raises(KafkaError) as unknown:
        check_leader_epoch(tp, 6, 5)
    assert unknown.value.code == ErrorCode.UNKNOWN_LEADER_EPOCH
