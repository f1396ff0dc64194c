"""Real clients read a compacted topic through a real broker: gaps in offsets, tombstones gone."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import confluent_kafka
import kafka
from confluent_kafka.admin import AdminClient, NewTopic

if TYPE_CHECKING:
    from conftest import BrokerFactory

TOPIC = "compacted-clients"
RECORDS = 300
Entry = tuple[int, bytes | None, bytes | None]


def produced(index: int) -> tuple[bytes, bytes | None]:
    """Ten keys overwritten in turn; key k3 is deleted near the end."""
    key = f"k{index % 10}".encode()
    return key, None if index % 10 == 3 and index > 250 else f"v{index}".encode()


def expected_after_cleaning(first_uncleanable_offset: int) -> list[Entry]:
    latest: dict[bytes, int] = {}
    for offset in range(first_uncleanable_offset):
        latest[produced(offset)[0]] = offset
    out: list[Entry] = []
    for offset in range(RECORDS):
        key, value = produced(offset)
        below = offset < first_uncleanable_offset
        if not below or (latest[key] == offset and value is not None):
            out.append((offset, key, value))
    return out


def read_confluent(bootstrap: str) -> list[Entry]:
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": "compaction-check",
        "enable.auto.commit": False,
    })
    try:
        start = confluent_kafka.OFFSET_BEGINNING
        consumer.assign([confluent_kafka.TopicPartition(TOPIC, 0, start)])
        got: list[Entry] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (not got or got[-1][0] < RECORDS - 1):
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                offset = message.offset()
                assert offset is not None
                got.append((offset, message.key(), message.value()))
        return got
    finally:
        consumer.close()


def read_kafka_python(bootstrap: str) -> list[Entry]:
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        partition = kafka.TopicPartition(TOPIC, 0)
        consumer.assign([partition])
        consumer.seek_to_beginning(partition)
        got: list[Entry] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (not got or got[-1][0] < RECORDS - 1):
            for messages in consumer.poll(timeout_ms=500).values():
                got.extend((m.offset, m.key, m.value) for m in messages)
        return got
    finally:
        consumer.close()


def active_base_offset(data_dir: Path) -> int:
    bases = [int(p.stem) for p in (data_dir / f"{TOPIC}-0").glob("*.log") if p.stem.isdigit()]
    return max(bases)


def test_clients_read_compacted_topic_with_gaps(broker_factory: BrokerFactory) -> None:
    broker = broker_factory(
        settings={"log.retention.check.interval.ms": "200"}, extra_args=["--metrics", "off"]
    )
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    configs = {
        "cleanup.policy": "compact", "segment.bytes": "2000",
        "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "100",
    }
    for future in admin.create_topics([NewTopic(TOPIC, 1, 1, config=configs)]).values():
        future.result(30)
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for index in range(RECORDS):  # one batch each, so that segments roll every ~27 records
        key, value = produced(index)
        producer.produce(TOPIC, key=key, value=value)
        assert producer.flush(10) == 0

    # The cleaner looks for work every log.cleaner.backoff.ms (15 s) once it found none.
    expected = expected_after_cleaning(active_base_offset(broker.data_dir))
    assert len(expected) < RECORDS // 5
    deadline = time.monotonic() + 60
    got = read_confluent(broker.bootstrap)
    while got != expected and time.monotonic() < deadline:
        time.sleep(1)
        got = read_confluent(broker.bootstrap)
    assert got == expected
    assert read_kafka_python(broker.bootstrap) == expected
    assert read_spark_direct(broker.bootstrap) == expected


def read_spark_direct(bootstrap: str) -> list[Entry]:
    """The Spark source's direct reader (Fetch + native decode), over the whole range."""
    from tidelog.spark.fetch_reader import DirectRead
    from tidelog.spark.planning import OffsetRange

    got: list[Entry] = []
    for batch in DirectRead(bootstrap, OffsetRange(TOPIC, 0, 0, RECORDS), False, 20_000).batches():
        rows = batch.to_pydict()
        got.extend(zip(rows["offset"], rows["key"], rows["value"], strict=True))
    return got
