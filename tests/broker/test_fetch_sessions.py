"""Fetch sessions (KIP-227) live: the wire rules, then real consumers on many partitions.

kafka-python keeps a fetch session per broker (incremental fetches, counted in /metrics);
librdkafka (confluent-kafka 2.16) keeps none: it sends epoch -1, every fetch sessionless.
A broker restart and an eviction (one cache slot) send the consumer back to full fetches
without an error reaching the application and without a record lost or read twice.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaPartition

from tidelog.cluster.zookeeper_server import free_port
from tidelog.errors import ErrorCode

from .metrics_probe import gauge, metrics_args
from .raw import RawClient, request_module
from .test_requests import batch, produce

if TYPE_CHECKING:
    from conftest import BrokerFactory, BrokerProcess

FETCH = 1
PARTITIONS = 100


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, int]]:
    from conftest import BrokerFactory

    factory = BrokerFactory(tmp_path_factory.mktemp("sessions"))
    args, port = metrics_args()
    try:
        yield factory(extra_args=args), port
    finally:
        bad = factory.stop_all()
    assert not bad, bad


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions)])
    try:
        futures[name].result(timeout=30)
    except KafkaException as error:
        raise AssertionError(f"CreateTopics {name} failed: {error}") from error


def kinds(port: int) -> dict[str, float]:
    return {
        kind: gauge(port, f'tidelog_fetch_requests_total{{kind="{kind}"}}') or 0.0
        for kind in ("full", "incremental", "sessionless", "error")
    }


def fetch_body(
    version: int,
    session: tuple[int, int],
    partitions: dict[int, int],
    topic: str,
    topic_id: Any = None,
    forget: tuple[int, ...] = (),
) -> Any:
    module = request_module(FETCH, version)
    by_id = version >= 13
    named = {"topic_id": topic_id} if by_id else {"topic": topic}
    replica = {"replica_id": -1} if version < 15 else {}
    return module.FetchRequest(
        **replica,
        max_wait=timedelta(0),
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=session[0],
        session_epoch=session[1],
        topics=(
            module.FetchTopic(
                **named,
                partitions=tuple(
                    module.FetchPartition(
                        partition=index, fetch_offset=offset, partition_max_bytes=1 << 16
                    )
                    for index, offset in partitions.items()
                ),
            ),
        )
        if partitions
        else (),
        forgotten_topics_data=(module.ForgottenTopic(**named, partitions=forget),)
        if forget
        else (),
    )


def answered(response: Any) -> dict[int, int]:
    """partition -> high watermark, for every partition the response names."""
    return {
        p.partition_index: p.high_watermark for t in response.responses for p in t.partitions
    }


@pytest.mark.parametrize("version", [12, 16])
def test_session_wire_rules(served: tuple[BrokerProcess, int], version: int) -> None:
    broker, port = served
    topic = f"wire-{version}"
    create_topic(broker.bootstrap, topic, partitions=3)
    before = kinds(port)
    with RawClient(broker.bootstrap) as client:
        produce(client, topic, [batch([b"a", b"b"])], partition=0)
        metadata = client.call(3, 12, request_module(3, 12).MetadataRequest(
            topics=(request_module(3, 12).MetadataRequestTopic(name=topic, topic_id=None),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        ))
        topic_id = metadata.topics[0].topic_id

        def call(session: tuple[int, int], wanted: dict[int, int], **extra: Any) -> Any:
            body = fetch_body(version, session, wanted, topic, topic_id, **extra)
            return client.call(FETCH, version, body)

        opened = call((0, 0), {0: 0, 1: 0, 2: 0})
        session_id = opened.session_id
        assert opened.error_code == 0 and session_id != 0
        assert answered(opened) == {0: 2, 1: 0, 2: 0}
        # Nothing changed: an empty answer (the offset moved past the records read).
        assert answered(call((session_id, 1), {0: 2})) == {}
        produce(client, topic, [batch([b"c"])], partition=1)
        news = call((session_id, 2), {})
        assert news.session_id == session_id and answered(news) == {1: 1}
        # Partition 1 is re-read from its cached offset until the fetcher moves it.
        assert answered(call((session_id, 3), {})) == {1: 1}
        produce(client, topic, [batch([b"d"])], partition=2)
        assert answered(call((session_id, 4), {1: 1}, forget=(2,))) == {}
        wrong = call((session_id, 9), {})
        assert (wrong.error_code, wrong.session_id) == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0)
        assert answered(wrong) == {}
        # Closing (epoch -1) answers in full, sessionless; the session is gone after.
        closed = call((session_id, -1), {0: 2, 1: 1, 2: 0})
        assert closed.session_id == 0 and answered(closed) == {0: 2, 1: 1, 2: 1}
        unknown = call((session_id, 5), {})
        assert unknown.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    after = kinds(port)
    assert after["full"] - before["full"] == 1
    assert after["incremental"] - before["incremental"] == 4
    assert after["error"] - before["error"] == 2
    assert after["sessionless"] - before["sessionless"] == 1


def produce_all(bootstrap: str, topic: str, per_partition: int, first: int = 0) -> set[str]:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    sent = set()
    for partition in range(PARTITIONS):
        for index in range(first, first + per_partition):
            value = f"{partition}-{index}"
            producer.produce(topic, value.encode(), partition=partition)
            sent.add(value)
    assert producer.flush(30) == 0
    return sent


def kafka_python_consumer(bootstrap: str, topic: str, partitions: range) -> KafkaConsumer:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        group_id=None,
        fetch_max_wait_ms=100,
        reconnect_backoff_ms=50,
        reconnect_backoff_max_ms=200,
        request_timeout_ms=5000,
    )
    assigned = [KafkaPartition(topic, index) for index in partitions]
    consumer.assign(assigned)
    consumer.seek_to_beginning(*assigned)
    return consumer


def drain(consumer: KafkaConsumer, received: list[str], count: int, timeout_s: float) -> None:
    """Poll until `count` values arrived (failing on a deadline); every value is kept, so a
    duplicate shows in the caller's comparison."""
    deadline = time.monotonic() + timeout_s
    while len(received) < count:
        assert time.monotonic() < deadline, f"{len(received)} of {count} records"
        for records in consumer.poll(timeout_ms=200).values():
            received.extend(record.value.decode() for record in records)


def wait_polling(consumers: list[KafkaConsumer], condition: Callable[[], bool]) -> None:
    """Poll consumers that have read everything (nothing may arrive) until `condition`."""
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in 30 s"
        for consumer in consumers:
            assert not consumer.poll(timeout_ms=100)


def test_kafka_python_fetches_incrementally(served: tuple[BrokerProcess, int]) -> None:
    broker, port = served
    create_topic(broker.bootstrap, "many", partitions=PARTITIONS)
    sent = produce_all(broker.bootstrap, "many", 3)
    before = kinds(port)
    consumer = kafka_python_consumer(broker.bootstrap, "many", range(PARTITIONS))
    received: list[str] = []
    try:
        drain(consumer, received, len(sent), 60)
        sent |= produce_all(broker.bootstrap, "many", 1, first=3)
        drain(consumer, received, len(sent), 60)
        wait_polling([consumer], lambda: kinds(port)["incremental"] - before["incremental"] >= 10)
        assert gauge(port, "tidelog_fetch_sessions") == 1
        assert gauge(port, "tidelog_fetch_session_partitions") == PARTITIONS
    finally:
        consumer.close()
    assert sorted(received) == sorted(sent)
    after = kinds(port)
    assert after["full"] - before["full"] >= 1
    assert after["incremental"] - before["incremental"] > 3 * (after["full"] - before["full"])


def test_librdkafka_fetches_sessionless(served: tuple[BrokerProcess, int]) -> None:
    broker, port = served
    create_topic(broker.bootstrap, "many-rd", partitions=PARTITIONS)
    sent = produce_all(broker.bootstrap, "many-rd", 2)
    before = kinds(port)
    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": "unused", "fetch.wait.max.ms": 100,
        "enable.auto.commit": False,
    })
    consumer.assign([ConfluentPartition("many-rd", index, 0) for index in range(PARTITIONS)])
    received: list[str] = []
    deadline = time.monotonic() + 60
    try:
        while len(received) < len(sent):
            assert time.monotonic() < deadline, f"{len(received)} of {len(sent)} records"
            for message in consumer.consume(500, timeout=0.5):
                assert message.error() is None, message.error()
                received.append(message.value().decode())
    finally:
        consumer.close()
    assert sorted(received) == sorted(sent)
    after = kinds(port)
    assert after["sessionless"] > before["sessionless"]
    assert after["incremental"] == before["incremental"]


def test_restart_and_eviction_fall_back_to_full_fetches(broker_factory: BrokerFactory) -> None:
    """One cache slot, evictable 300 ms after creation. Consumer A (10 partitions) opens the
    only session; B (20 partitions) evicts it; A is told FETCH_SESSION_ID_NOT_FOUND and goes
    on with full fetches. Then the broker restarts: both start over. Every record arrives
    exactly once in both consumers."""
    args, port = metrics_args()
    listen = f"127.0.0.1:{free_port()}"
    settings = {
        "max.incremental.fetch.session.cache.slots": "1",
        "min.incremental.fetch.session.eviction.ms": "300",
    }
    broker = broker_factory(settings=settings, extra_args=args, listen=listen)
    create_topic(broker.bootstrap, "evict", partitions=PARTITIONS)
    sent = produce_all(broker.bootstrap, "evict", 1)
    expect_a = sorted(v for v in sent if int(v.split("-")[0]) < 10)
    expect_b = sorted(v for v in sent if 10 <= int(v.split("-")[0]) < 30)
    consumer_a = kafka_python_consumer(broker.bootstrap, "evict", range(10))
    consumer_b = None
    received_a: list[str] = []
    received_b: list[str] = []
    try:
        drain(consumer_a, received_a, len(expect_a), 30)
        deadline = time.monotonic() + 30
        while True:  # B evicts A once A's session is older than the eviction time
            assert time.monotonic() < deadline, "no eviction"
            consumer_a.poll(timeout_ms=100)
            if consumer_b is None and (gauge(port, "tidelog_fetch_sessions") or 0) >= 1:
                consumer_b = kafka_python_consumer(broker.bootstrap, "evict", range(10, 30))
            if consumer_b is not None:
                for records in consumer_b.poll(timeout_ms=100).values():
                    received_b.extend(record.value.decode() for record in records)
            if (gauge(port, "tidelog_fetch_session_evictions_total") or 0) >= 1:
                break
        assert consumer_b is not None
        # A's next incremental fetch names the evicted session: told, it starts over in full.
        wait_polling([consumer_a], lambda: kinds(port)["error"] >= 1)
        drain(consumer_b, received_b, len(expect_b), 30)
        broker.stop()
        broker = broker_factory(broker.data_dir, settings=settings, extra_args=args, listen=listen)
        sent |= produce_all(broker.bootstrap, "evict", 1, first=1)
        expect_a = sorted(v for v in sent if int(v.split("-")[0]) < 10)
        expect_b = sorted(v for v in sent if 10 <= int(v.split("-")[0]) < 30)
        drain(consumer_a, received_a, len(expect_a), 60)
        drain(consumer_b, received_b, len(expect_b), 60)
        wait_polling([consumer_a, consumer_b], lambda: kinds(port)["incremental"] >= 1)
    finally:
        consumer_a.close()
        if consumer_b is not None:
            consumer_b.close()
    assert sorted(received_a) == expect_a
    assert sorted(received_b) == expect_b
