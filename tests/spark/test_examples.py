"""examples/ run end to end as examples/README.md says: each script (and `tidelog archive`) is
a subprocess with its own Spark JVM against the module's `tidelog serve`, and the test checks
what they wrote, against the clicks read back from the broker with a plain Kafka client.

The producer's synthetic event time (--start-time, --time-step-ms, --rate 0) puts ten minutes
of clicks in the topic in about a second, starting at second 30 of a minute so the watermark
never sits on a window boundary."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from tidelog.spark.archive import load_manifest

REPO = Path(__file__).resolve().parents[2]
TIDELOG = Path(sys.executable).with_name("tidelog")
EVENTS = 600
STEP_MS = 1000  # 600 events, one a second: ten minutes of event time
MINUTE_MS = 60_000
WATERMARK_DELAY_MS = 2 * MINUTE_MS  # page_counts_stream.py's withWatermark
SPARK_TIMEOUT_S = 240.0


def example_env() -> dict[str, str]:
    # Workers must run this interpreter; a small driver heap and a JVM tuned for start-up
    # (C1 only, serial GC) keep three short-lived Spark JVMs cheap on 2 cores.
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_DRIVER_MEMORY="512m")
    env["SPARK_SUBMIT_OPTS"] = " ".join(
        [env.get("SPARK_SUBMIT_OPTS", ""), "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"]
    ).strip()
    return env


def run(*args: str, timeout_s: float = SPARK_TIMEOUT_S) -> str:
    """Run one README step; subprocess.run kills it (by PID) on timeout. Returns stdout."""
    result = subprocess.run(
        list(args), cwd=REPO, env=example_env(), stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=timeout_s,
    )
    assert result.returncode == 0, (
        f"{' '.join(args)} exited {result.returncode}\n{result.stdout}\n{result.stderr[-6000:]}"
    )
    return result.stdout


def produce_clicks(bootstrap: str, topic: str, start_ms: int) -> None:
    out = run(sys.executable, "examples/clickstream_producer.py", "--bootstrap", bootstrap,
              "--topic", topic, "--rate", "0", "--count", str(EVENTS),
              "--start-time", str(start_ms), "--time-step-ms", str(STEP_MS), timeout_s=60)
    assert out.strip() == f"sent {EVENTS} events to {topic}"


@dataclass(frozen=True)
class Record:
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes


def consume_all(bootstrap: str, topic: str) -> list[Record]:
    """Every committed record of `topic` up to its end, read with a plain client (librdkafka
    reads read_committed by default). By position, not by count: the transactional sink's
    commit markers take offsets that carry no record."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4()}",
                         "enable.auto.commit": False})
    try:
        partitions = len(consumer.list_topics(topic, 10).topics[topic].partitions)
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), 10)[1]
                for p in range(partitions)}
        wanted = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        records: list[Record] = []
        deadline = time.monotonic() + 30
        while not all(tp.offset >= ends[tp.partition] for tp in consumer.position(wanted)):
            assert time.monotonic() < deadline, f"{topic}: not read to its end in 30 s"
            for message in consumer.consume(500, 1.0):
                assert message.error() is None, message.error()
                partition, offset, value = message.partition(), message.offset(), message.value()
                assert partition is not None and offset is not None and value is not None
                records.append(Record(partition, offset, message.timestamp()[1], message.key(),
                                      value))
    finally:
        consumer.close()
    return records


def log_start_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4()}"})
    try:
        partitions = consumer.list_topics(topic, 10).topics[topic].partitions
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), 10)[0]
                for p in partitions}
    finally:
        consumer.close()


def minute_aligned_start(minutes_ago: int) -> int:
    """Epoch ms at second 30 of the minute `minutes_ago` minutes back."""
    now_ms = int(time.time() * 1000)
    return (now_ms - minutes_ago * MINUTE_MS) // MINUTE_MS * MINUTE_MS + 30_000


@dataclass(frozen=True)
class Click:
    page: str
    ts_ms: int


def clicks_of(records: list[Record]) -> list[Click]:
    clicks = []
    for record in records:
        event = json.loads(record.value)
        # The producer stamps each record with its event time.
        assert record.timestamp_ms == event["ts_ms"]
        assert record.key == event["user"].encode()
        clicks.append(Click(event["page"], event["ts_ms"]))
    return clicks


def test_page_counts_stream_counts_every_closed_minute_once(  # type: ignore[no-untyped-def]
    bootstrap, new_topic, tmp_path: Path
) -> None:
    clicks_topic = new_topic(partitions=2)
    counts_topic = f"page-counts-{uuid.uuid4().hex[:10]}"  # auto-created by the sink
    produce_clicks(bootstrap, clicks_topic, minute_aligned_start(20))
    clicks = clicks_of(consume_all(bootstrap, clicks_topic))
    assert len(clicks) == EVENTS

    run(sys.executable, "examples/page_counts_stream.py", "--bootstrap", bootstrap,
        "--topic", clicks_topic, "--output-topic", counts_topic, "--out", str(tmp_path),
        "--available-now")

    # A minute is closed (emitted in append mode) once the watermark, the newest event time
    # minus two minutes, has passed its end; the rest stay in the state store.
    watermark_ms = max(c.ts_ms for c in clicks) - WATERMARK_DELAY_MS
    expected = Counter(
        (c.ts_ms // MINUTE_MS * MINUTE_MS, c.page) for c in clicks
        if c.ts_ms // MINUTE_MS * MINUTE_MS + MINUTE_MS <= watermark_ms
    )
    minutes = {minute for minute, _ in expected}
    # Clicks from second 30 of minute 0 to second 29 of minute 10; the watermark is at second
    # 29 of minute 8, so minutes 0-7 are closed and 8-10 still open.
    assert len(minutes) == 8

    # The output topic: one record per (minute, page), keyed by page, nothing repeated.
    published: Counter[tuple[int, str]] = Counter()
    for record in consume_all(bootstrap, counts_topic):
        row = json.loads(record.value)
        assert record.key == row["page"].encode()
        minute_ms = int(datetime.fromisoformat(row["minute"]).timestamp() * 1000)
        assert (minute_ms, row["page"]) not in published, f"{row} published twice"
        published[(minute_ms, row["page"])] = row["count"]
    assert published == expected

    # The Parquet sink holds the same rows.
    table = pq.read_table(tmp_path / "page-counts")
    minute_ns = table.column("minute").cast(pa.timestamp("ns")).cast(pa.int64()).to_pylist()
    rows = list(zip(minute_ns, table.column("page").to_pylist(),
                    table.column("count").to_pylist(), strict=True))
    assert len(rows) == len(expected)
    assert Counter({(ns // 1_000_000, page): n for ns, page, n in rows}) == expected
    # Per page, the closed minutes' counts add up to the clicks produced in them.
    for page in {page for _, page in expected}:
        assert sum(n for _, p, n in rows if p == page) == sum(
            n for (_, p), n in expected.items() if p == page
        )


LINE = re.compile(r"^partition (\d+): (\d+) rows, offsets (\d+)-(\d+), (\d+) distinct, "
                  r"archived \[(\d+), (\d+)\)$")


def test_archive_then_query_archive_and_live(  # type: ignore[no-untyped-def]
    bootstrap, new_topic, tmp_path: Path
) -> None:
    topic = new_topic(partitions=2)
    # Clicks from ~11 to ~1 minutes ago, so `--older-than 5m` archives about half of each
    # partition and leaves the rest live.
    produce_clicks(bootstrap, topic, minute_aligned_start(11))
    records = consume_all(bootstrap, topic)
    clicks = clicks_of(records)
    high = Counter(record.partition for record in records)  # offsets start at 0
    archive = tmp_path / "archive"

    out = run(str(TIDELOG), "archive", "-b", bootstrap, "--topic", topic, "--older-than", "5m",
              "--to", str(archive))
    manifest = load_manifest(str(archive))
    archived_end = {}
    for partition in (0, 1):
        ranges = manifest.ranges_of(topic, partition)
        assert len(ranges) == 1 and ranges[0].start_offset == 0, ranges
        archived_end[partition] = end = ranges[0].end_offset
        assert 0 < end < high[partition]
        assert f"archived {topic}/{partition} offsets [0, {end})" in out
        # The archive holds the clicks older than five minutes, and only those.
        own = [r for r in records if r.partition == partition]
        assert max(r.timestamp_ms for r in own if r.offset < end) < min(
            r.timestamp_ms for r in own if r.offset >= end
        )

    # Retention drops the archived offsets from the broker: the query can only find them in
    # the archive.
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the futures end
    futures = admin.delete_records([TopicPartition(topic, p, archived_end[p]) for p in (0, 1)])
    for future in futures.values():
        future.result(30)
    assert log_start_offsets(bootstrap, topic) == archived_end

    out = run(sys.executable, "examples/archive_and_live_query.py", "--bootstrap", bootstrap,
              "--topic", topic, "--archive", str(archive))
    lines = out.splitlines()
    summaries = [LINE.match(line) for line in lines if line.startswith("partition ")]
    assert len(summaries) == 2 and all(summaries), lines
    for match in summaries:
        assert match is not None
        partition, rows, first, last, distinct, start, end = map(int, match.groups())
        # Offsets 0..high-1, each exactly once, across the archive/live boundary.
        assert (rows, first, last, distinct) == (high[partition], 0, high[partition] - 1,
                                                 high[partition])
        assert (start, end) == (0, archived_end[partition])
    views = {}
    for line in lines:
        if line.startswith("page "):
            page, _, n = line[len("page "):].rpartition(": ")
            views[page] = int(n.removesuffix(" views"))
    assert views == Counter(c.page for c in clicks)
