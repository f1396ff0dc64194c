"""Streaming reads: restart from a checkpoint, SIGKILL mid-batch, admission control, data loss."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from .helpers import produce, reader


def _stream(spark, bootstrap: str, topic: str, **options: str):  # type: ignore[no-untyped-def]
    frame = (spark.readStream.format("tidelog").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", topic).option("startingOffsets", "earliest"))
    for key, value in options.items():
        frame = frame.option(key, value)
    return frame.load()


def _drain(spark, bootstrap: str, topic: str, checkpoint: Path, output: Path,  # type: ignore[no-untyped-def]
           **options: str):
    query = (_stream(spark, bootstrap, topic, **options)
             .select("partition", "offset", "value").writeStream.format("parquet")
             .option("path", str(output)).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None
    return query


def _output_keys(spark, output: Path) -> list[tuple[int, int]]:  # type: ignore[no-untyped-def]
    rows = spark.read.parquet(str(output)).select("partition", "offset").collect()
    return sorted((r.partition, r.offset) for r in rows)


def test_stop_and_restart_reads_every_row_once(spark, bootstrap, new_topic, tmp_path) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic(partitions=2)
    produce(bootstrap, topic, 30, partitions=2)
    checkpoint, output = tmp_path / "checkpoint", tmp_path / "out"
    _drain(spark, bootstrap, topic, checkpoint, output)
    assert len(_output_keys(spark, output)) == 30
    produce(bootstrap, topic, 30, partitions=2, seed=2)
    _drain(spark, bootstrap, topic, checkpoint, output, commitOffsetsToGroup="lag-view")
    keys = _output_keys(spark, output)
    assert keys == sorted({(p, o) for p in (0, 1) for o in range(30)})
    # The group holds the query's position, so group tools can show its lag. Spark calls
    # commit(end) of a batch when it plans the next one, so the group trails by one batch:
    # batch 0 (offsets 15/15) was committed when batch 1 started.
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "lag-view"})
    try:
        committed = consumer.committed([TopicPartition(topic, p) for p in (0, 1)], timeout=10)
    finally:
        consumer.close()
    assert [c.offset for c in committed] == [15, 15]


def test_max_offsets_per_trigger_splits_by_backlog(spark, bootstrap, new_topic, tmp_path) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic(partitions=2)
    producer_rows = [0] * 60 + [1] * 20
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    for index, partition in enumerate(producer_rows):
        producer.produce(topic, b"v%d" % index, partition=partition)
    assert producer.flush(30) == 0
    query = _drain(spark, bootstrap, topic, tmp_path / "cp", tmp_path / "out",
                   maxOffsetsPerTrigger="40")
    batches = [p for p in query.recentProgress if p.numInputRows > 0]
    first_end = json.loads(batches[0].sources[0].endOffset)
    assert first_end == {topic: {"0": 30, "1": 10}}  # 40 shared 3:1 like the 60:20 backlog
    assert [p.numInputRows for p in batches] == [40, 40]
    assert json.loads(batches[0].sources[0].latestOffset) == {topic: {"0": 60, "1": 20}}
    assert len(_output_keys(spark, tmp_path / "out")) == 80


def test_fail_on_data_loss(spark, bootstrap, new_topic, tmp_path) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic()
    produce(bootstrap, topic, 20)
    checkpoint, output = tmp_path / "cp", tmp_path / "out"
    _drain(spark, bootstrap, topic, checkpoint, output, maxOffsetsPerTrigger="100")
    produce(bootstrap, topic, 20, seed=3)
    # Retention removes offsets 0..29 (DeleteRecords moves the log start offset like
    # retention does), so offsets 20..29 are gone before the query read them.
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records([TopicPartition(topic, 0, 30)]).values():
        future.result(30)
    query = (_stream(spark, bootstrap, topic).select("offset").writeStream.format("parquet")
             .option("path", str(output)).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    with pytest.raises(Exception, match="removed by retention"):
        query.awaitTermination(120)
    _drain(spark, bootstrap, topic, checkpoint, output, failOnDataLoss="false")
    offsets = [o for _, o in _output_keys(spark, output)]
    assert offsets == list(range(0, 20)) + list(range(30, 40))
    with pytest.raises(Exception, match="removed by retention"):
        reader(spark, bootstrap, subscribe=topic,
               startingOffsets=json.dumps({topic: {"0": 0}})).collect()
    rows = reader(spark, bootstrap, subscribe=topic, failOnDataLoss="false",
                  startingOffsets=json.dumps({topic: {"0": 0}})).collect()
    assert sorted(r.offset for r in rows) == list(range(30, 40))


def _batches(log_dir: Path) -> int:
    return len([f for f in os.listdir(log_dir) if f.isdigit()]) if log_dir.exists() else 0


def test_sigkill_mid_batch_then_restart(spark, bootstrap, new_topic, tmp_path) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic(partitions=2)
    produce(bootstrap, topic, 200, partitions=2)
    checkpoint, output = tmp_path / "cp", tmp_path / "out"
    job = [sys.executable, str(Path(__file__).with_name("stream_job.py")), bootstrap, topic,
           str(checkpoint), str(output)]
    process = subprocess.Popen(job, start_new_session=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        # Kill once two batches are committed and the next one is planned but not committed:
        # its offsets are in the offset log and its rows may be partly written.
        while time.monotonic() < deadline:
            committed, planned = _batches(checkpoint / "commits"), _batches(checkpoint / "offsets")
            if committed >= 2 and planned > committed:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the streaming job did not reach its third batch in 120 s")
    finally:
        # The job's process group holds the Python driver, its JVM and Python workers.
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(30)
    assert _batches(checkpoint / "commits") < 10  # killed before the backlog was drained
    # Restart from the same checkpoint in this process (a stateless plan may drop the UDF).
    _drain(spark, bootstrap, topic, checkpoint, output, maxOffsetsPerTrigger="20")
    keys = _output_keys(spark, output)
    assert keys == sorted({(p, o) for p in (0, 1) for o in range(100)})
