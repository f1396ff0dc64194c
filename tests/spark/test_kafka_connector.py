"""Spark's own Kafka connector (spark-sql-kafka-0-10, loaded through `spark.jars` by the
conftest) against a Tidelog broker: batch and streaming reads and writes with format("kafka"),
row for row the same as format("tidelog") reads of the same topics."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from .helpers import produce, reader


@pytest.fixture(scope="module", autouse=True)
def connector(spark: SparkSession) -> None:
    """Fail (not skip) when the connector is missing: scripts/spark-kafka-jars fetches it."""
    jars = spark.sparkContext.getConf().get("spark.jars", "")
    assert "spark-sql-kafka-0-10" in jars, \
        "Spark's Kafka connector is not on the classpath: run scripts/spark-kafka-jars"


def kafka_reader(spark: SparkSession, bootstrap: str, **options: str) -> DataFrame:
    frame = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        frame = frame.option(key, value)
    return frame.load()


def as_tuples(rows: list[Any]) -> list[tuple[Any, ...]]:
    """Rows as comparable tuples in (topic, partition, offset) order; bytearrays become bytes."""

    def plain(value: Any) -> Any:
        return bytes(value) if isinstance(value, bytearray) else value

    out = []
    for row in rows:
        headers = row["headers"] if "headers" in row.__fields__ else None
        out.append((
            row["topic"], row["partition"], row["offset"], plain(row["key"]), plain(row["value"]),
            row["timestamp"], row["timestampType"],
            None if headers is None else tuple((h["key"], plain(h["value"])) for h in headers),
        ))
    return sorted(out, key=lambda t: (t[0], t[1], t[2]))


def written_rows(spark: SparkSession, count: int, partitions: int) -> DataFrame:
    """Rows for format("kafka").save(): explicit partition, null keys, headers (some with a null
    value, some records without any)."""
    data = []
    for i in range(count):
        key = None if i % 7 == 3 else f"k{i}".encode()
        value = (f"value-{i}-" + "x" * (i % 50)).encode()
        headers = None if i % 3 == 0 else [("h", f"{i}".encode()), ("empty", None)]
        data.append((key, value, i % partitions, headers))
    return spark.createDataFrame(
        data, "key binary, value binary, partition int, "
              "headers array<struct<key: string, value: binary>>")


def test_batch_write_with_kafka_reads_back_the_same_with_both_formats(
        spark, bootstrap, new_topic) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic(partitions=2)
    rows = written_rows(spark, 200, 2).coalesce(1)  # one writer task: a known order
    (rows.write.format("kafka").option("kafka.bootstrap.servers", bootstrap)
     .option("topic", topic).save())

    via_kafka = as_tuples(kafka_reader(spark, bootstrap, subscribe=topic,
                                       includeHeaders="true").collect())
    via_tidelog = as_tuples(reader(spark, bootstrap, subscribe=topic,
                                   includeHeaders="true").collect())
    assert len(via_kafka) == 200
    assert via_kafka == via_tidelog
    # What was written, in order, per partition.
    for partition in (0, 1):
        expected = [(bytes(r.key) if r.key is not None else None, bytes(r.value),
                     None if r.headers is None else tuple((h.key, None if h.value is None
                                                           else bytes(h.value))
                                                          for h in r.headers))
                    for r in rows.collect() if r.partition == partition]
        got = [(t[3], t[4], t[7]) for t in via_kafka if t[1] == partition]
        assert got == expected
        assert [t[2] for t in via_kafka if t[1] == partition] == list(range(100))
    assert {t[6] for t in via_kafka} == {0}


def test_records_from_another_client_read_the_same_with_both_formats(
        spark, bootstrap, new_topic) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic(partitions=3)
    produce(bootstrap, topic, 150, partitions=3)  # null keys/values, header values, timestamps
    via_kafka = as_tuples(kafka_reader(spark, bootstrap, subscribe=topic,
                                       includeHeaders="true").collect())
    via_tidelog = as_tuples(reader(spark, bootstrap, subscribe=topic,
                                   includeHeaders="true").collect())
    assert len(via_kafka) == 150
    assert via_kafka == via_tidelog

    # Offset ranges mean the same in both (JSON offsets; -2 earliest, -1 latest).
    ranges = {"startingOffsets": json.dumps({topic: {"0": 5, "1": -2, "2": 49}}),
              "endingOffsets": json.dumps({topic: {"0": -1, "1": 7, "2": 50}})}
    part_kafka = as_tuples(kafka_reader(spark, bootstrap, subscribe=topic, **ranges).collect())
    part_tidelog = as_tuples(reader(spark, bootstrap, subscribe=topic, **ranges).collect())
    assert [(t[1], t[2]) for t in part_kafka] == \
        [(0, o) for o in range(5, 50)] + [(1, o) for o in range(7)] + [(2, 49)]
    assert part_kafka == part_tidelog


def test_stream_read_with_kafka_available_now_to_parquet(
        spark, bootstrap, new_topic, tmp_path) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic(partitions=2)
    produce(bootstrap, topic, 120, partitions=2)
    stream = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", "50").option("includeHeaders", "true").load())
    query = (stream.writeStream.format("parquet").option("path", str(tmp_path / "out"))
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None
    batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
    assert len(batches) >= 3  # 120 rows at most 50 per micro-batch
    got = as_tuples(spark.read.parquet(str(tmp_path / "out")).collect())
    expected = as_tuples(reader(spark, bootstrap, subscribe=topic,
                                includeHeaders="true").collect())
    assert len(got) == 120
    assert got == expected

    # Records appended later arrive in the next AvailableNow run of the same checkpoint.
    produce(bootstrap, topic, 10, partitions=2, seed=2)
    again = (stream.writeStream.format("parquet").option("path", str(tmp_path / "out"))
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    again.awaitTermination(120)
    assert again.exception() is None
    assert spark.read.parquet(str(tmp_path / "out")).count() == 130


def test_stream_write_with_kafka(spark, bootstrap, new_topic, tmp_path) -> None:  # type: ignore[no-untyped-def]
    source, target = new_topic(partitions=2), new_topic(partitions=2)
    (written_rows(spark, 90, 2).write.format("kafka")
     .option("kafka.bootstrap.servers", bootstrap).option("topic", source).save())
    stream = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", source).option("startingOffsets", "earliest")
              .option("includeHeaders", "true").load()
              .selectExpr("key", "value", "headers", "partition"))
    query = (stream.writeStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", target).option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None

    def content(topic: str) -> list[tuple[Any, ...]]:
        rows = as_tuples(reader(spark, bootstrap, subscribe=topic, includeHeaders="true")
                         .collect())
        return [(t[1], t[2], t[3], t[4], t[7]) for t in rows]  # partition, offset, k, v, headers

    assert len(content(target)) == 90
    assert content(target) == content(source)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_writes_with_kafka(spark, bootstrap, new_topic, codec) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic()
    rows = spark.range(500).selectExpr("cast(id as string) as key",
                                       "repeat(cast(id as string), 20) as value")
    (rows.write.format("kafka").option("kafka.bootstrap.servers", bootstrap)
     .option("kafka.compression.type", codec).option("topic", topic).save())
    via_tidelog = as_tuples(reader(spark, bootstrap, subscribe=topic).collect())
    via_kafka = as_tuples(kafka_reader(spark, bootstrap, subscribe=topic).collect())
    assert via_tidelog == via_kafka
    assert sorted(int(t[3]) for t in via_tidelog) == list(range(500))
    assert all(t[4] == t[3] * 20 for t in via_tidelog)
