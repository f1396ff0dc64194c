"""Retry back-off and server-side filters with real share consumers (confluent-kafka's
ShareConsumer in explicit acknowledgement mode, one process each) and confluent-kafka's
AdminClient for the group configs; one broker for the module."""

from __future__ import annotations

import re
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from broker.metrics_probe import metrics_args
from conftest import BrokerFactory, BrokerProcess

from .helpers import SHARE_SETTINGS, Child, create_topic, produce, set_group_configs, wait_for


@pytest.fixture(scope="module")
def share_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    factory = BrokerFactory(tmp_path_factory.mktemp("share-retry-filter"))
    arguments, port = metrics_args()
    try:
        broker = factory(settings=SHARE_SETTINGS, extra_args=arguments)
        broker.metrics_port = port  # type: ignore[attr-defined]
        yield broker
    finally:
        bad = factory.stop_all()
    if bad:
        pytest.fail("broker logged a traceback:\n" + "\n".join(bad))


@pytest.fixture
def children() -> Iterator[list[Child]]:
    started: list[Child] = []
    yield started
    for child in started:
        child.kill()


def scrape(broker: BrokerProcess) -> str:
    port = broker.metrics_port  # type: ignore[attr-defined]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return str(response.read().decode())


def metric_sum(text: str, family: str, group: str) -> float:
    pattern = re.compile(rf'^{family}\{{group="{re.escape(group)}",[^}}]*\}} (\S+)$', re.M)
    return sum(float(value) for value in pattern.findall(text))


def test_released_records_come_back_after_each_backoff_step_then_dead_letter(
    share_broker: BrokerProcess, children: list[Child]
) -> None:
    """Back-off 1 s, then 1.5 s repeated; delivery-count limit 4: each record is delivered at
    t, t+1, t+2.5, t+4 (each within 1 s of its step), then copied to the dead-letter topic
    with delivery count 4."""
    bootstrap = share_broker.bootstrap
    create_topic(bootstrap, "t-retry", 1)
    set_group_configs(bootstrap, "g-retry", share_auto_offset_reset="earliest",
                      share_delivery_count_limit="4",
                      errors_deadletterqueue_topic_name="dlq.t-retry",
                      **{"tidelog.share.retry.backoff.ms": "1s 1500ms"})
    values = produce(bootstrap, "t-retry", 2, 1)
    worker = Child(bootstrap, "g-retry", "t-retry", "release")
    children.append(worker)
    wait_for(lambda: len(worker.pump()) >= 8, "four deliveries of each record", 30)
    worker.stop()
    for offset in (0, 1):
        deliveries = sorted((r["d"], r["t"]) for r in worker.records if r["o"] == offset)
        assert [d for d, _ in deliveries] == [1, 2, 3, 4]
        for (_, earlier), (_, later), step_s in zip(deliveries[:-1], deliveries[1:],
                                                    (1.0, 1.5, 1.5),
                                                    strict=True):
            # Never before the step (the release came after the receipt), within 1 s of it.
            assert step_s - 0.01 <= later - earlier <= step_s + 1.0, (offset, deliveries)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "dlq-retry-reader",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.assign([TopicPartition("dlq.t-retry", 0, 0)])
    copies: list[Any] = []
    deadline = time.monotonic() + 20
    while len(copies) < 2 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            copies.append(message)
    consumer.close()
    assert len(copies) == 2
    for copy in copies:
        headers = {key: value.decode() for key, value in copy.headers() or []}
        assert headers["__dlq.errors.reason"] == "MAX_DELIVERY_ATTEMPTS_REACHED"
        assert headers["__dlq.errors.delivery.count"] == "4"
        assert copy.value().decode() == values[int(headers["__dlq.errors.offset"])]


def test_a_lock_expiry_waits_the_backoff_too(
    share_broker: BrokerProcess, children: list[Child]
) -> None:
    """A consumer holds three records and is SIGKILLed: their 1 s locks expire and, with
    back-off `2s`, the other member (polling all along) gets them about 3 s after the first
    delivery, not 1 s (both children's clocks are the machine's CLOCK_MONOTONIC; the first
    delivery happened up to the holder's poll return), with delivery count 2."""
    bootstrap = share_broker.bootstrap
    create_topic(bootstrap, "t-retry-expiry", 1)
    set_group_configs(bootstrap, "g-retry-expiry", share_auto_offset_reset="earliest",
                      share_record_lock_duration_ms="1000",
                      **{"tidelog.share.retry.backoff.ms": "2s"})
    produce(bootstrap, "t-retry-expiry", 3, 1)
    holder = Child(bootstrap, "g-retry-expiry", "t-retry-expiry", "hold")
    children.append(holder)
    wait_for(lambda: len(holder.pump()) >= 3, "the holder's records")
    taker = Child(bootstrap, "g-retry-expiry", "t-retry-expiry", "accept")
    children.append(taker)
    wait_for(lambda: (taker.pump(), taker.ready)[1], "the taker polling")
    holder.kill()
    wait_for(lambda: len(taker.pump()) >= 3, "redelivery after lock expiry and back-off")
    first = max(r["t"] for r in holder.records)
    assert {(r["o"], r["d"]) for r in taker.records} == {(0, 2), (1, 2), (2, 2)}
    # Without the back-off they would come back 1 s after the first delivery.
    assert min(r["t"] for r in taker.records) >= first + 2.5


def _produce_with_headers(bootstrap: str, topic: str, count: int) -> list[dict[str, str]]:
    """Records with a tag, a price and a region header (every seventh without headers);
    the value names the record. Returns each record's headers by index."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    sent = []
    for i in range(count):
        headers = {} if i % 7 == 6 else {
            "tag": ("TagA", "TagB", "TagC")[i % 3], "price": str(i),
            "region": ("eu", "us", "asia", "eu")[i % 4]}
        producer.produce(topic, value=f"r{i}".encode(), partition=i % 2,
                         headers=[(k, v.encode()) for k, v in headers.items()])
        sent.append(headers)
    assert producer.flush(30) == 0
    return sent


def test_tag_and_sql92_filters_deliver_only_matching_records(
    share_broker: BrokerProcess, children: list[Child]
) -> None:
    bootstrap = share_broker.bootstrap
    create_topic(bootstrap, "t-filter", 2)
    groups = {
        "g-tags": ("TagA || TagB", lambda h: h.get("tag") in ("TagA", "TagB")),
        "g-sql": ("SQL92:price >= 20 AND region IN ('eu', 'us') OR tag IS NULL",
                  lambda h: not h or (int(h["price"]) >= 20 and h["region"] in ("eu", "us"))),
    }
    for group, (expression, _) in groups.items():
        set_group_configs(bootstrap, group, share_auto_offset_reset="earliest",
                          **{"tidelog.share.filter": expression})
    sent = _produce_with_headers(bootstrap, "t-filter", 90)
    workers = {group: Child(bootstrap, group, "t-filter", "accept") for group in groups}
    children.extend(workers.values())
    for group, (_, wanted) in groups.items():
        expected = {f"r{i}" for i, headers in enumerate(sent) if wanted(headers)}
        assert 0 < len(expected) < len(sent)
        worker = workers[group]
        wait_for(lambda w=worker, n=len(expected): len(w.pump()) >= n, f"{group} records")
        # Every record is done (delivered or filtered) once the SPSOs reach the log end.
        wait_for(lambda g=group: metric_sum(scrape(share_broker), "tidelog_share_start_offset",
                                             g) == len(sent), f"{group} at the log end")
        worker.stop()
        received = [r["v"] for r in worker.records]
        assert len(received) == len(set(received)) and set(received) == expected, group
        assert all(r["d"] == 1 and r["a"] for r in worker.records)
        text = scrape(share_broker)
        assert metric_sum(text, "tidelog_share_filtered_total", group) == len(sent) - len(expected)
        assert metric_sum(text, "tidelog_share_acquired_total", group) == len(expected)


def test_bad_retry_and_filter_configs_are_refused_with_invalid_config(
    share_broker: BrokerProcess,
) -> None:
    bootstrap = share_broker.bootstrap
    for name, value, message in (
        ("tidelog.share.filter", "SQL92:price > AND x = 1", "at position 14"),
        ("tidelog.share.filter", "SQL92:" + "(" * 200 + "a = 1" + ")" * 200, "nested deeper"),
        ("tidelog.share.filter", "SQL92:a = 1" + " OR a = 1" * 600, "longer than 4096"),
        ("tidelog.share.filter", "TagA || ", "empty tag at position 8"),
        ("tidelog.share.retry.backoff.ms", "10s 30x", "'30x' is not a duration"),
        ("tidelog.share.retry.backoff.ms", "exponential:1s:0:1m", "between 1 and 100"),
        ("tidelog.share.filter.tag.header", "", "header name"),
    ):
        with pytest.raises(KafkaException) as refused:
            set_group_configs(bootstrap, "g-bad", **{name: value})
        error = refused.value.args[0]
        assert error.code() == KafkaError.INVALID_CONFIG, (name, value)
        assert message in error.str(), error.str()
    set_group_configs(bootstrap, "g-bad", **{"tidelog.share.filter": "SQL92:a IS NOT NULL",
                                             "tidelog.share.retry.backoff.ms": "10s 1m"})
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource("group", "g-bad")
    configs = admin.describe_configs([resource])[resource].result(30)
    assert configs["tidelog.share.filter"].value == "SQL92:a IS NOT NULL"
    assert configs["tidelog.share.retry.backoff.ms"].value == "10s 1m"
    assert configs["tidelog.share.filter.tag.header"].value == "tag"  # the default
