"""The transactional stream sink SIGKILLed at random points and restarted: a read_committed
reader of the output sees every input row exactly once (issue 12).

TIDELOG_SPARK_SINK_KILLS=N runs N kills instead of 10 (soak; about 10 s per kill here)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from .helpers import produce, read_to_end
from .sink_job import source_frame

KILLS = int(os.environ.get("TIDELOG_SPARK_SINK_KILLS", "10"))
# Kill points, in turn: between a task's last record and its commit; anywhere (a random
# moment while batches flow); after every task committed, before Spark records the batch.
KINDS = ("task", "random", "driver", "random")
ROWS_PER_PARTITION = 1_000


def _batches(log_dir: Path) -> int:
    return len([f for f in os.listdir(log_dir) if f.isdigit()]) if log_dir.exists() else 0


def _wait_for(condition, seconds: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen in {seconds} s")
        time.sleep(0.02)


@pytest.mark.timeout(300 + 60 * KILLS)  # a Spark start per kill: 30-70 s under load here
def test_sigkilled_stream_sink_publishes_every_row_once(  # type: ignore[no-untyped-def]
    spark, bootstrap, new_topic, tmp_path: Path
) -> None:
    source_topic, sink_topic = new_topic(partitions=2), new_topic(partitions=2)
    produce(bootstrap, source_topic, 2 * ROWS_PER_PARTITION, partitions=2)
    checkpoint, flags = tmp_path / "checkpoint", tmp_path / "flags"
    flags.mkdir()
    rng = random.Random(int(os.environ.get("TIDELOG_SPARK_SINK_SEED", "12")))
    job = [sys.executable, str(Path(__file__).with_name("sink_job.py")), bootstrap,
           source_topic, sink_topic, str(checkpoint), str(flags)]
    landed: Counter[str] = Counter()
    for kill in range(KILLS):
        kind = KINDS[kill % len(KINDS)]
        for leftover in flags.iterdir():
            leftover.unlink()
        if kind != "random":
            (flags / f"arm-{kind}").touch()
        committed_before = _batches(checkpoint / "commits")
        started = time.monotonic()
        with (tmp_path / f"job-{kill}.log").open("wb") as log:
            process = subprocess.Popen(job, start_new_session=True,
                                       stdout=subprocess.DEVNULL, stderr=log)
        try:
            if kind == "random":
                # Once this run has committed a batch, kill at a random moment.
                _wait_for(lambda n=committed_before: _batches(checkpoint / "commits") > n, 120,
                          f"kill {kill}: a batch commit")
                time.sleep(rng.uniform(0, 1.0))
            else:
                _wait_for((flags / f"reached-{kind}").exists, 120, f"kill {kill}: {kind}")
        finally:
            # The job's process group holds the Python driver, its JVM and Python workers.
            assert process.poll() is None, "the job exited before it was killed"
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(30)
        landed[kind] += 1
        print(f"kill {kill} ({kind}) after {time.monotonic() - started:.1f} s; "
              f"{_batches(checkpoint / 'commits')} batches committed")
    assert _batches(checkpoint / "commits") < 2 * ROWS_PER_PARTITION // 40, "drained too soon"
    # The last restart drains the backlog in this process, through the plain sink.
    query = (source_frame(spark, bootstrap, source_topic).writeStream.format("tidelog")
             .option("kafka.bootstrap.servers", bootstrap).option("topic", sink_topic)
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    query.awaitTermination(300)
    assert query.exception() is None
    expected = {f"{p}:{o}".encode() for p in (0, 1) for o in range(ROWS_PER_PARTITION)}
    committed = Counter(v for _, v in read_to_end(bootstrap, sink_topic, 2, "read_committed"))
    assert set(committed) == expected
    assert [v for v, n in committed.items() if n != 1] == []
    # The task kills left records of open transactions in the log, aborted on restart: a
    # read_uncommitted reader sees them, a read_committed one (above) never does.
    uncommitted = read_to_end(bootstrap, sink_topic, 2, "read_uncommitted")
    if landed["task"]:
        assert len(uncommitted) > len(expected)
    print(f"kills {dict(landed)}; batches {_batches(checkpoint / 'commits')}; "
          f"aborted rows in the log {len(uncommitted) - len(expected)}")
