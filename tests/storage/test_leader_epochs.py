"""leader-epoch-checkpoint: Kafka's text format, persisted on change, malformed = empty."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidelog.storage.leader_epochs import CHECKPOINT_FILE, UNDEFINED, LeaderEpochCache


def test_entries_survive_a_reopen_in_kafkas_format(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path)
    cache.assign(0, 0)
    cache.assign(2, 10)
    cache.assign(1, 20)  # older epoch: ignored
    assert (tmp_path / CHECKPOINT_FILE).read_text() == "0\n2\n0 0\n2 10\n"
    assert not (tmp_path / (CHECKPOINT_FILE + ".tmp")).exists()
    reopened = LeaderEpochCache(tmp_path)
    assert reopened.entries == ((0, 0), (2, 10))
    assert reopened.end_offset_for(1, log_end_offset=30) == (0, 10)
    assert reopened.end_offset_for(2, log_end_offset=30) == (2, 30)
    reopened.truncate_from_end(10)
    assert LeaderEpochCache(tmp_path).entries == ((0, 0),)


@pytest.mark.parametrize("text", ["", "1\n0\n", "0\n2\n0 0\n", "0\n1\n0 x\n", "0\n1\n0\n"])
def test_malformed_file_starts_empty(tmp_path: Path, text: str) -> None:
    (tmp_path / CHECKPOINT_FILE).write_text(text)
    cache = LeaderEpochCache(tmp_path)
    assert cache.entries == () and cache.latest_epoch == UNDEFINED
