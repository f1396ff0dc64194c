"""Executor-side direct reads (fetch_reader) against a real broker, without Spark: the same
Arrow rows as the librdkafka reader for every codec, headers, log-append time and ranges that
cut batches; a dead leader address or removed offsets hand over to librdkafka."""

from __future__ import annotations

import random
import socket
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from tidelog.records.columnar import NATIVE
from tidelog.spark.client import Cluster, read_range
from tidelog.spark.fetch_reader import DirectRead, Handover, direct_fetch_possible
from tidelog.spark.options import parse_source_options
from tidelog.spark.planning import DataLossError, OffsetRange
from tidelog.spark.source import LiveRange, _read


@pytest.fixture(autouse=True, scope="module")
def _close_cached_clients() -> Iterator[None]:
    """This process plays a Spark worker: close its cached clients before the broker stops."""
    yield
    from tidelog.spark import client, fetch_reader

    while client._CONSUMERS:
        client._CONSUMERS.popitem()[1].close()
    while fetch_reader._CONNECTIONS:
        fetch_reader._CONNECTIONS.popitem()[1].close()


def test_the_native_decoder_is_built() -> None:
    assert NATIVE, "tidelog.records._columnar did not build: direct reads fall back to librdkafka"


def test_direct_reads_only_where_they_match_librdkafka() -> None:
    leader = "127.0.0.1:9092"
    assert direct_fetch_possible({}, leader)
    assert direct_fetch_possible({"security.protocol": "PLAINTEXT"}, leader)
    assert not direct_fetch_possible({}, None)
    assert not direct_fetch_possible({"security.protocol": "SSL"}, leader)
    assert not direct_fetch_possible({"isolation.level": "read_committed"}, leader)


def _dead_address() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


def _produce(bootstrap: str, topic: str, count: int, compression: str = "none") -> None:
    rng = random.Random(7)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                         "compression.type": compression, "batch.num.messages": 37})
    for index in range(count):
        key = None if index % 5 == 0 else rng.randbytes(rng.randint(0, 12))
        value = None if index % 13 == 4 else rng.randbytes(rng.randint(0, 400))
        headers = None if index % 3 == 0 else [("h", rng.randbytes(3)), ("nul", None)]
        producer.produce(topic, value, key, headers=headers)
    assert producer.flush(30) == 0


def _leader(bootstrap: str, topic: str) -> str:
    cluster = Cluster({"bootstrap.servers": bootstrap})
    try:
        return cluster.leaders([(topic, 0)])[(topic, 0)]
    finally:
        cluster.close()


def _via_librdkafka(bootstrap: str, offset_range: OffsetRange) -> pa.Table:
    batches = list(read_range({"bootstrap.servers": bootstrap}, offset_range, True, True, 30_000))
    return pa.Table.from_batches(batches).combine_chunks()


def _direct(leader: str, offset_range: OffsetRange, **kwargs: Any) -> pa.Table:
    batches = list(DirectRead(leader, offset_range, True, 30_000, **kwargs).batches())
    for batch in batches:
        batch.validate(full=True)
    return pa.Table.from_batches(batches).combine_chunks()


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_direct_rows_equal_librdkafka_rows(bootstrap, new_topic, compression) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic()
    _produce(bootstrap, topic, 500, compression)
    leader = _leader(bootstrap, topic)
    # Whole log, then a range that starts and ends inside batches, then tiny fetches.
    for start, end, max_bytes in ((0, 500, 4 << 20), (11, 433, 4 << 20), (3, 290, 1)):
        offset_range = OffsetRange(topic, 0, start, end)
        direct = _direct(leader, offset_range, max_bytes=max_bytes)
        assert direct.num_rows == end - start
        assert direct.equals(_via_librdkafka(bootstrap, offset_range))


def test_log_append_time(bootstrap, new_topic) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic(**{"message.timestamp.type": "LogAppendTime"})
    _produce(bootstrap, topic, 60)
    offset_range = OffsetRange(topic, 0, 0, 60)
    direct = _direct(_leader(bootstrap, topic), offset_range)
    assert set(direct.column("timestampType").to_pylist()) == {1}
    assert direct.equals(_via_librdkafka(bootstrap, offset_range))


def test_dead_leader_hands_over_to_librdkafka(bootstrap, new_topic) -> None:  # type: ignore[no-untyped-def]
    dead = _dead_address()
    topic = new_topic()
    _produce(bootstrap, topic, 80)
    offset_range = OffsetRange(topic, 0, 0, 80)
    with pytest.raises(Handover) as handover:
        list(DirectRead(dead, offset_range, True, 5_000).batches())
    assert handover.value.next_offset == 0
    options = parse_source_options({"kafka.bootstrap.servers": bootstrap, "subscribe": topic,
                                    "includeHeaders": "true"}, streaming=False)
    rows = pa.Table.from_batches(
        list(_read(LiveRange(offset_range, dead), options))
    )
    assert rows.combine_chunks().equals(_via_librdkafka(bootstrap, offset_range))


def test_removed_offsets_hand_over_and_follow_fail_on_data_loss(bootstrap, new_topic) -> None:  # type: ignore[no-untyped-def]
    from confluent_kafka import TopicPartition

    topic = new_topic()
    _produce(bootstrap, topic, 100)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_records([TopicPartition(topic, 0, 40)])[TopicPartition(topic, 0, 40)].result(30)
    leader = _leader(bootstrap, topic)
    offset_range = OffsetRange(topic, 0, 10, 100)
    with pytest.raises(Handover):
        list(DirectRead(leader, offset_range, True, 5_000).batches())
    strict = parse_source_options({"kafka.bootstrap.servers": bootstrap, "subscribe": topic},
                                  streaming=False)
    with pytest.raises(DataLossError):
        list(_read(LiveRange(offset_range, leader), strict))
    lenient = parse_source_options({"kafka.bootstrap.servers": bootstrap, "subscribe": topic,
                                    "failOnDataLoss": "false"}, streaming=False)
    rows = pa.Table.from_batches(list(_read(LiveRange(offset_range, leader), lenient)))
    assert rows.column("offset").to_pylist() == list(range(40, 100))
