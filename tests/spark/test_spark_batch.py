"""Batch reads against a real broker: byte-for-byte equality and Spark's offset semantics."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from .helpers import BASE_TIMESTAMP_MS, by_partition, produce, reader


def test_batch_read_equals_what_was_produced(spark, bootstrap, new_topic) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic(partitions=2)
    sent = by_partition(produce(bootstrap, topic, 120, partitions=2))
    rows = reader(spark, bootstrap, subscribe=topic, includeHeaders="true").collect()
    assert len(rows) == 120
    got = sorted(rows, key=lambda r: (r.partition, r.offset))
    for partition, records in sent.items():
        own = [r for r in got if r.partition == partition]
        assert [r.offset for r in own] == list(range(len(records)))
        for row, record in zip(own, records, strict=True):
            assert row.topic == topic
            assert row.key == (bytes(record.key) if record.key is not None else None)
            assert (bytes(row.value) if row.value is not None else None) == record.value
            assert row.timestamp == datetime.fromtimestamp(record.timestamp_ms / 1000, UTC) \
                .replace(tzinfo=None)
            assert row.timestampType == 0
            headers = [(h.key, h.value) for h in row.headers] if row.headers else []
            assert [(k, bytes(v) if v is not None else None) for k, v in headers] == \
                list(record.headers)


def test_starting_and_ending_offsets(spark, bootstrap, new_topic) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic(partitions=2)
    produce(bootstrap, topic, 40, partitions=2)  # 20 per partition
    rows = reader(
        spark, bootstrap, subscribe=topic,
        startingOffsets=json.dumps({topic: {"0": 5, "1": -2}}),
        endingOffsets=json.dumps({topic: {"0": -1, "1": 7}}),
    ).select("partition", "offset").collect()
    got = sorted((r.partition, r.offset) for r in rows)
    assert got == [(0, o) for o in range(5, 20)] + [(1, o) for o in range(0, 7)]
    assign = reader(spark, bootstrap, assign=json.dumps({topic: [1]}),
                    endingOffsets=json.dumps({topic: {"1": 3}})).collect()
    assert sorted((r.partition, r.offset) for r in assign) == [(1, 0), (1, 1), (1, 2)]


def test_starting_and_ending_timestamps(spark, bootstrap, new_topic) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic()
    # Record i has timestamp BASE + i s, all in one record batch: ListOffsets by timestamp
    # must answer with the exact record, not the batch's base offset.
    produce(bootstrap, topic, 20)
    rows = reader(spark, bootstrap, subscribe=topic,
                  startingTimestamp=str(BASE_TIMESTAMP_MS + 4500),
                  endingTimestamp=str(BASE_TIMESTAMP_MS + 9000)).collect()
    assert sorted(r.offset for r in rows) == list(range(5, 9))
    by_ts = reader(spark, bootstrap, subscribe=topic,
                   startingOffsetsByTimestamp=json.dumps({topic: {"0": BASE_TIMESTAMP_MS + 17000}})
                   ).collect()
    assert sorted(r.offset for r in by_ts) == [17, 18, 19]
    with pytest.raises(Exception, match="startingOffsetsByTimestampStrategy"):
        reader(spark, bootstrap, subscribe=topic,
               startingTimestamp=str(BASE_TIMESTAMP_MS + 10**9)).collect()
    latest = reader(spark, bootstrap, subscribe=topic,
                    startingTimestamp=str(BASE_TIMESTAMP_MS + 10**9),
                    startingOffsetsByTimestampStrategy="latest").collect()
    assert latest == []


def test_min_partitions(spark, bootstrap, new_topic) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic()
    produce(bootstrap, topic, 50)
    frame = reader(spark, bootstrap, subscribe=topic, minPartitions="4")
    assert frame.rdd.getNumPartitions() >= 4
    assert sorted(r.offset for r in frame.collect()) == list(range(50))


def test_bad_options_fail_on_the_driver(spark, bootstrap) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(Exception, match="not allowed in a batch query"):
        reader(spark, bootstrap, subscribe="x", startingOffsets="latest").collect()


def test_subscribe_pattern(spark, bootstrap, new_topic) -> None:  # type: ignore[no-untyped-def]
    first, second = new_topic(), new_topic()
    produce(bootstrap, first, 5)
    produce(bootstrap, second, 7)
    frame = reader(spark, bootstrap, subscribePattern=f"({first}|{second})")
    counts = {r.topic: r["count"] for r in frame.groupBy("topic").count().collect()}
    assert counts == {first: 5, second: 7}
