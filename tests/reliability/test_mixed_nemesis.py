"""Issue 16's CI run: 300 seconds of faults mixed at random (seeded) on ZooKeeper and 3
brokers in network namespaces, an idempotent acks=all producer and consumers in a classic and a
KIP-848 group throughout; every checker count must be 0 (jepsen.py, jepsen_checker.py).
Nemeses: kills, pauses, five kinds of partition, packet loss, a slow link, a full disk and
failing fsync, sometimes two at once (jepsen.py lists them).

TIDELOG_NEMESIS_SEED and TIDELOG_NEMESIS_SECONDS replay or shorten a run; longer and 5-broker
runs are `scripts/soak-nemesis`. The report, history and timeline stay in the test's tmp dir
(the path is printed).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reliability.jepsen import run
from reliability.netns import NamespacesUnavailable

SEED = int(os.environ.get("TIDELOG_NEMESIS_SEED", "16"))
SECONDS = float(os.environ.get("TIDELOG_NEMESIS_SECONDS", "300"))


@pytest.mark.timeout(SECONDS + 600)  # start, final read and checks on top of the run itself
def test_mixed_nemeses_lose_nothing(tmp_path: Path) -> None:
    try:
        result = run(tmp_path / "run", seed=SEED, seconds=SECONDS, brokers=3)
    except NamespacesUnavailable as error:
        pytest.skip(f"network namespaces refused by this kernel: {error}")
    report = result.report_path.read_text()
    print(report)
    print(f"history and timeline in {result.report_path.parent}")
    assert len(result.faults) >= SECONDS / 20, report  # faults really happened
    assert result.analysis.counts["acknowledged"] > 0, report
    assert result.analysis.ok(), report
