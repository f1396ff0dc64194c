"""The sink: batch writes, and exactly-once streaming writes across a failed commit."""

from __future__ import annotations

import sys
from pathlib import Path

from pyspark import cloudpickle

from tidelog.spark.sink import TidelogStreamWriter, parse_sink_options
from tidelog.spark.source import TidelogDataSource

from .helpers import produce, read_to_end

# Spark workers cannot import this test module: ship its classes by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


class CommitFails(Exception):
    """Injected: the driver dies after the tasks published, before Spark records the commit."""


class FailingCommitWriter(TidelogStreamWriter):
    def commit(self, messages, batchId) -> None:  # type: ignore[no-untyped-def]
        raise CommitFails(f"injected failure before commit of batch {batchId}")


class FailingCommitSource(TidelogDataSource):
    @classmethod
    def name(cls) -> str:
        return "tidelog_failing_commit"

    def streamWriter(self, schema, overwrite):  # type: ignore[no-untyped-def]
        return FailingCommitWriter(parse_sink_options(self.options))


def _consume_all(bootstrap: str, topic: str) -> list[tuple[bytes, bytes]]:
    return read_to_end(bootstrap, topic, 1, "read_committed")  # type: ignore[return-value]


def test_batch_write_then_read_back(spark, bootstrap, new_topic) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic()
    rows = [(f"k{i}".encode(), f"v{i}") for i in range(50)]
    frame = spark.createDataFrame(rows, "key binary, value string")
    frame.write.format("tidelog").option("kafka.bootstrap.servers", bootstrap) \
        .option("topic", topic).mode("append").save()
    got = _consume_all(bootstrap, topic)
    assert sorted(got) == sorted((k, v.encode()) for k, v in rows)


def test_stream_sink_is_exactly_once_across_a_failed_commit(  # type: ignore[no-untyped-def]
    spark, bootstrap, new_topic, tmp_path: Path
) -> None:
    source_topic, sink_topic = new_topic(partitions=2), new_topic()
    produce(bootstrap, source_topic, 60, partitions=2)
    spark.dataSource.register(FailingCommitSource)
    checkpoint = str(tmp_path / "checkpoint")

    def run(format_name: str):  # type: ignore[no-untyped-def]
        frame = (spark.readStream.format("tidelog").option("kafka.bootstrap.servers", bootstrap)
                 .option("subscribe", source_topic).option("startingOffsets", "earliest")
                 .load()
                 .selectExpr("CAST(offset AS STRING) AS key",
                             "concat(CAST(partition AS STRING), ':', CAST(offset AS STRING))"
                             " AS value"))
        return (frame.writeStream.format(format_name)
                .option("kafka.bootstrap.servers", bootstrap).option("topic", sink_topic)
                .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())

    failed = run("tidelog_failing_commit")
    try:
        failed.awaitTermination(120)
        raise AssertionError("the injected commit failure did not stop the query")
    except Exception as exc:  # Spark wraps the Python exception in a StreamingQueryException
        assert "injected failure before commit" in str(exc)
    published = _consume_all(bootstrap, sink_topic)
    assert len(published) == 60  # the tasks published everything before the commit failed
    replay = run("tidelog")
    replay.awaitTermination(120)
    assert replay.exception() is None
    values = [v for _, v in _consume_all(bootstrap, sink_topic)]
    expected = {f"{p}:{o}".encode() for p in (0, 1) for o in range(30)}
    assert len(values) == 60 and set(values) == expected  # batch 0 replayed, not republished
    produce(bootstrap, source_topic, 10, partitions=2, seed=9)
    run("tidelog").awaitTermination(120)
    assert len(_consume_all(bootstrap, sink_topic)) == 70
