"""Simulated power loss through a crash loop (powerloss.py): 100 crashes in sync durability with
nothing acknowledged lost, and a short page-cache run that reports what it lost but must
recover to a consistent log. Longer: TIDELOG_POWER_LOSS_CRASHES=2000 (or scripts/soak-power-loss).
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from reliability.powerloss import (
    FileJournal,
    MutationStats,
    Report,
    apply_power_loss,
    read_journal,
    run,
)

SHIM_CACHE = Path.home() / ".cache" / "tidelog-test-shims"


def _crashes(default: int) -> int:
    return int(os.environ.get("TIDELOG_POWER_LOSS_CRASHES", default))


def _seed() -> int:
    seed = os.environ.get("TIDELOG_POWER_LOSS_SEED")
    return int(seed) if seed else random.SystemRandom().randrange(2**32)


def _assert_consistent(report: Report) -> None:
    print(report.summary())
    details = "\n".join([report.summary(), *report.examples[:20]])
    assert report.corrupt_batches == 0, details
    assert report.duplicated == 0, details
    assert report.offset_gaps == 0, details
    assert report.lost_synced == 0, details
    assert not any("Traceback" in example for example in report.examples), details


def test_sync_mode_loses_nothing_acknowledged_through_100_power_losses(tmp_path: Path) -> None:
    report = run(tmp_path, crashes=_crashes(100), durability="sync", seed=_seed(),
                 shim_dir=SHIM_CACHE)
    _assert_consistent(report)
    assert report.acked > 0
    assert report.lost_acked == 0, report.summary()
    assert report.reordered == 0, report.summary()


def test_page_cache_mode_recovers_a_consistent_log(tmp_path: Path) -> None:
    """Acks before fsync: acknowledged records may go (reported), synced ones may not."""
    report = run(tmp_path, crashes=max(10, _crashes(100) // 10), durability="pagecache",
                 seed=_seed(), shim_dir=SHIM_CACHE)
    _assert_consistent(report)


def test_journal_reader_and_mutations(tmp_path: Path) -> None:
    """The mutation model on a file with a known journal."""
    data = tmp_path / "data"
    data.mkdir()
    target = data / "00000000000000000000.log"
    target.write_bytes(b"s" * 100 + b"u" * 50)
    stat = target.stat()
    key = f"{stat.st_dev} {stat.st_ino}"
    journal = tmp_path / "journal"
    journal.write_text(
        f"W {key} 0 60 0\nS {key} 60\nW {key} 60 40 60\nS {key} 100\n"
        f"W {key} 100 20 100\nW {key} 120 30 120\nS {key}"  # last line cut by SIGKILL
    )
    parsed = read_journal(journal)
    assert parsed[(stat.st_dev, stat.st_ino)] == FileJournal(
        synced=100, ops=[("W", 100, 20), ("W", 120, 30)]
    )
    stats = MutationStats()
    apply_power_loss(data, journal, "truncate", random.Random(1), stats)
    assert target.read_bytes() == b"s" * 100
    assert stats.bytes_dropped == 50 and not journal.exists()

    for seed in range(20):
        target.write_bytes(b"s" * 100 + b"u" * 50)
        journal.write_text(f"S {key} 100\nW {key} 100 20 100\nW {key} 120 30 120\n")
        stats = MutationStats()
        mode = "prefix" if seed % 2 else "garbage"
        apply_power_loss(data, journal, mode, random.Random(seed), stats)
        content = target.read_bytes()
        assert content[:100] == b"s" * 100  # synced bytes never touched
        if mode == "prefix":
            assert set(content[100:]) <= {ord("u")}
        else:
            assert len(content) == 150


CREATE_AND_ROLL = """
import os
import sys
from pathlib import Path
from tidelog.records.batch import RecordBatch
from tidelog.records.builder import NewRecord, build_batch
from tidelog.storage.config import LogConfig
from tidelog.storage.log import PartitionLog
from tidelog.types import TopicPartition

log = PartitionLog(TopicPartition("t", 0), Path(sys.argv[1]) / "t-0", LogConfig())
log.append([RecordBatch(build_batch([NewRecord(value=b"v")]))], now_ms=0)
log.flush()  # what sync durability does before it acknowledges
if sys.argv[2] == "roll":
    log.roll()
    log.append([RecordBatch(build_batch([NewRecord(value=b"w")]))], now_ms=0)
    log.flush()
os._exit(0)  # the crash: no close(), no snapshot written at shutdown
"""


@pytest.mark.parametrize("scenario", ["first", "roll"])
def test_new_segment_names_are_durable(tmp_path: Path, scenario: str) -> None:
    """Regression (found by the power-loss loop in sync mode: acknowledged records lost): a new
    segment file's directory entry must be fsynced, or a power loss can take the whole file,
    fsynced data and all. The partition's first segment used to be created in a directory
    nobody fsynced (only the data dir above it was)."""
    import subprocess
    import sys

    from reliability.powerloss import inodes_under, undurable_creations
    from reliability.shim import JOURNAL_ENV, build_shim

    shim = build_shim(SHIM_CACHE)
    journal = tmp_path / "journal"
    data = tmp_path / "data"
    data.mkdir()
    env = {**os.environ, "LD_PRELOAD": str(shim), JOURNAL_ENV: str(journal)}
    subprocess.run([sys.executable, "-c", CREATE_AND_ROLL, str(data), scenario], env=env,
                   check=True, timeout=120)
    segments = {key: path for key, path in inodes_under(data).items() if path.suffix == ".log"}
    assert len(segments) == (2 if scenario == "roll" else 1)
    undurable = undurable_creations(journal)
    assert not [str(path) for key, path in segments.items() if key in undurable]
