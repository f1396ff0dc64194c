"""Delayed delivery on a live broker with real clients (confluent-kafka and a raw Produce).

One broker for the module; each test its own topic. Delays are short (under 2 s) and every
wait is on a condition with a deadline. Timing is asserted one way only: nothing is delivered
before it is due (the broker and the test read the same clock); lateness is measured, not
asserted (docs/delivery.md gives the figures).
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
import uuid
from collections.abc import Iterator

import pytest
from aiokafka import AIOKafkaConsumer
from click.testing import CliRunner
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)
from kafka import KafkaProducer
from prometheus_client.parser import text_string_to_metric_families

import kafka_peer
from broker.metrics_probe import metrics_args
from conftest import BrokerFactory, BrokerProcess
from tidelog.cli.timers import timers
from tidelog.errors import ErrorCode
from tidelog.records.builder import NewRecord

from .helpers import DELAY_TOPIC, Reader, create_topic, now_ms, raw_produce


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, int]]:
    factory = BrokerFactory(tmp_path_factory.mktemp("timers"))
    args, port = metrics_args()
    try:
        yield factory(extra_args=args), port
    finally:
        bad = factory.stop_all()
    if bad:
        pytest.fail("broker logged a traceback:\n" + "\n".join(bad))


@pytest.fixture
def broker(live: tuple[BrokerProcess, int]) -> BrokerProcess:
    return live[0]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def producer(bootstrap: str, **extra: object) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, **extra})


def test_topic_configs_default_describe_and_alter(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    name = unique("cfg")
    create_topic(broker.bootstrap, name)
    resource = ConfigResource(ResourceType.TOPIC, name)

    def described() -> dict[str, str]:
        configs = admin.describe_configs([resource])[resource].result(timeout=10)
        return {key: entry.value for key, entry in configs.items()}

    before = described()
    assert before["tidelog.delivery.delay.enable"] == "false"
    assert before["tidelog.delivery.max.delay.ms"] == str(7 * 24 * 3600 * 1000)
    change = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
        ConfigEntry("tidelog.delivery.delay.enable", "true",
                    incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("tidelog.delivery.max.delay.ms", "60000",
                    incremental_operation=AlterConfigOpType.SET),
    ])
    admin.incremental_alter_configs([change])[change].result(timeout=10)
    after = described()
    assert after["tidelog.delivery.delay.enable"] == "true"
    assert after["tidelog.delivery.max.delay.ms"] == "60000"
    bad = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
        ConfigEntry("tidelog.delivery.delay.enable", "maybe",
                    incremental_operation=AlterConfigOpType.SET),
    ])
    with pytest.raises(KafkaException) as refused:
        admin.incremental_alter_configs([bad])[bad].result(timeout=10)
    assert refused.value.args[0].name() == "INVALID_CONFIG"


def test_delayed_records_arrive_when_due_with_everything_kept(broker: BrokerProcess) -> None:
    name = unique("delay")
    create_topic(broker.bootstrap, name, configs=DELAY_TOPIC)
    sent_ms = now_ms()
    producer_timestamp = sent_ms - 5_000
    wanted = {  # key -> (headers, due at the latest this far after sending)
        b"plain": [("h", b"1")],
        b"zero": [("TIMER_DELAY_MS", b"0")],
        b"relative": [("TIMER_DELAY_MS", b"1200"), ("h", b"2"), ("n", None)],
        b"absolute": [("TIMER_DELIVER_MS", str(sent_ms + 600).encode())],
        b"level": [("DELAY", b"1")],
    }
    client = producer(broker.bootstrap, **{"compression.type": "lz4"})  # decompressed to read
    for key, headers in wanted.items():
        client.produce(name, value=b"v-" + key, key=key, headers=headers,
                       timestamp=producer_timestamp)
    assert client.flush(15) == 0
    reader = Reader(broker.bootstrap, name)
    try:
        records = reader.read_count(len(wanted))
    finally:
        reader.close()
    by_key = {record.key: record for record in records}
    assert set(by_key) == set(wanted)
    # Due-now records first (the producer's order), then by due time; offsets dense.
    assert [r.key for r in records] == [b"plain", b"zero", b"absolute", b"level", b"relative"]
    assert [r.offset for r in records] == list(range(5))
    for key, headers in wanted.items():
        record = by_key[key]
        assert record.value == b"v-" + key
        assert record.timestamp_ms == producer_timestamp
        assert record.headers[:len(headers)] == headers
        if key in (b"plain", b"zero"):
            assert record.headers == headers  # appended as usual
            continue
        assert [h for h, _ in record.headers[len(headers):]] == [
            "TIMER_ENQUEUE_MS", "__tidelog.timer.offset"]
        enqueue_ms = int(record.header("TIMER_ENQUEUE_MS") or b"0")
        assert sent_ms - 1_000 <= enqueue_ms <= record.received_ms
    assert by_key[b"absolute"].received_ms >= sent_ms + 600
    enqueued = int(by_key[b"relative"].header("TIMER_ENQUEUE_MS") or b"0")
    assert by_key[b"relative"].received_ms >= enqueued + 1_200
    assert by_key[b"level"].received_ms >= enqueued + 1_000


def test_refused_delays_say_why(broker: BrokerProcess) -> None:
    name = unique("refuse")
    create_topic(broker.bootstrap, name, configs={**DELAY_TOPIC,
                                                  "tidelog.delivery.max.delay.ms": "10000"})
    cases = [
        ([("TIMER_DELAY_MS", b"10001")], "tidelog.delivery.max.delay.ms=10000"),
        ([("TIMER_DELIVER_MS", str(now_ms() + 60_000).encode())], "exceeds"),
        ([("DELAY", b"19")], "level 0-18"),
        ([("TIMER_DELAY_MS", b"soon")], "non-negative decimal"),
    ]
    for headers, message in cases:
        answer = raw_produce(broker.bootstrap, name, [NewRecord(b"x", headers=tuple(headers))])
        assert answer.error_code == ErrorCode.INVALID_RECORD
        assert message in (answer.error_message or "")
    # The target's own checks hold for the records the timer log takes.
    small = unique("small")
    create_topic(broker.bootstrap, small, configs={**DELAY_TOPIC, "max.message.bytes": "200",
                                                   "cleanup.policy": "compact"})
    later = (("TIMER_DELAY_MS", b"500"),)
    too_large = raw_produce(broker.bootstrap, small, [NewRecord(b"x" * 300, b"k", later)])
    assert too_large.error_code == ErrorCode.MESSAGE_TOO_LARGE
    keyless = raw_produce(broker.bootstrap, small, [NewRecord(b"x", headers=later)])
    assert keyless.error_code == ErrorCode.INVALID_RECORD
    assert "key" in (keyless.error_message or "")
    due_now = NewRecord(b"now", headers=(("TIMER_DELAY_MS", b"0"),))
    forged = raw_produce(broker.bootstrap, name, [due_now], producer_id=1 << 62,
                         base_sequence=0)
    assert forged.error_code == ErrorCode.INVALID_RECORD
    assert "reserved" in (forged.error_message or "")


def test_idempotent_producer_sequences_hold(broker: BrokerProcess) -> None:
    """Kafka's sequence rules for an idempotent producer whose batches mix due-now and
    delayed records: a taken batch counts, its retry is a duplicate, a gap is refused."""
    name = unique("idem")
    create_topic(broker.bootstrap, name, configs=DELAY_TOPIC)

    def send(sequence: int, *records: NewRecord) -> tuple[ErrorCode, int]:
        answer = raw_produce(broker.bootstrap, name, list(records), producer_id=7,
                             base_sequence=sequence)
        return answer.error_code, answer.base_offset

    later = NewRecord(b"later", headers=(("TIMER_DELAY_MS", b"600"),))
    assert send(0, NewRecord(b"first")) == (ErrorCode.NONE, 0)
    assert send(1, later, NewRecord(b"along")) == (ErrorCode.NONE, -1)  # taken whole
    assert send(1, later, NewRecord(b"along")) == (ErrorCode.NONE, -1)  # a retry: duplicate
    assert send(4, NewRecord(b"gap"))[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    code, _ = send(3, NewRecord(b"next"))
    assert code == ErrorCode.NONE
    reader = Reader(broker.bootstrap, name)
    try:
        records = reader.read_until(lambda rs: any(r.value == b"later" for r in rs))
    finally:
        reader.close()
    values = [r.value for r in records]
    assert sorted(values) == sorted([b"first", b"along", b"next", b"later"])  # each once
    assert values[0] == b"first" and values[-1] == b"later"


def test_transactional_producers_cannot_delay(broker: BrokerProcess) -> None:
    name = unique("txn")
    create_topic(broker.bootstrap, name, configs=DELAY_TOPIC)
    client = producer(broker.bootstrap, **{"transactional.id": unique("tx")})
    client.init_transactions(15)
    client.begin_transaction()
    errors: list[str] = []
    client.produce(name, b"later", headers=[("TIMER_DELAY_MS", b"500")],
                   on_delivery=lambda error, _: errors.append(error and error.name()))
    client.flush(15)
    assert errors == ["INVALID_RECORD"]
    client.abort_transaction(15)


def test_topic_without_the_config_keeps_timer_headers_as_ordinary(
    broker: BrokerProcess,
) -> None:
    name = unique("plain")
    create_topic(broker.bootstrap, name)
    headers = (("TIMER_DELAY_MS", b"600000"), ("DELAY", b"18"))
    answer = raw_produce(broker.bootstrap, name, [NewRecord(b"v", headers=headers)])
    assert answer.error_code == ErrorCode.NONE and answer.base_offset == 0
    reader = Reader(broker.bootstrap, name)
    try:
        (record,) = reader.read_count(1)
    finally:
        reader.close()
    assert record.headers == list(headers)


def test_cancel_by_uniq_key(broker: BrokerProcess) -> None:
    name = unique("cancel")
    create_topic(broker.bootstrap, name, configs=DELAY_TOPIC)
    delay = (("TIMER_DELAY_MS", b"1500"),)
    first = raw_produce(broker.bootstrap, name, [
        NewRecord(b"doomed", headers=(*delay, ("UNIQ_KEY", b"id-1"))),
        NewRecord(b"kept", headers=(*delay, ("UNIQ_KEY", b"id-2"))),
    ])
    assert first.error_code == ErrorCode.NONE and first.base_offset == -1
    cancel = raw_produce(broker.bootstrap, name, [
        NewRecord(None, headers=(("TIMER_CANCEL", b"id-1"),))])
    assert cancel.error_code == ErrorCode.NONE and cancel.base_offset == -1
    marker = raw_produce(broker.bootstrap, name, [
        NewRecord(b"last", headers=(("TIMER_DELAY_MS", b"1700"),))])
    assert marker.error_code == ErrorCode.NONE
    reader = Reader(broker.bootstrap, name)
    try:
        # "last" is due after both: once it is read, "doomed" would have been read before it.
        records = reader.read_until(lambda rs: any(r.value == b"last" for r in rs))
    finally:
        reader.close()
    assert [r.value for r in records] == [b"kept", b"last"]


def test_metrics_and_timers_cli(live: tuple[BrokerProcess, int]) -> None:
    broker, port = live
    name = unique("listed")
    create_topic(broker.bootstrap, name, partitions=2, configs=DELAY_TOPIC)
    due_ms = now_ms() + 600_000
    for partition, count in ((0, 3), (1, 1)):
        answer = raw_produce(broker.bootstrap, name, [
            NewRecord(b"later", headers=(("TIMER_DELIVER_MS", str(due_ms + i).encode()),))
            for i in range(count)
        ], partition=partition)
        assert answer.error_code == ErrorCode.NONE
    samples = scrape(port)
    assert samples[("tidelog_timer_pending", name, "0")] == 3
    assert samples[("tidelog_timer_pending", name, "1")] == 1
    assert samples[("tidelog_timer_next_due_timestamp_ms", name, "0")] == due_ms
    assert samples[("tidelog_timer_next_due_timestamp_ms", name, "1")] == due_ms

    listed = json.loads(timers_cli("list", "--metrics", f"127.0.0.1:{port}", "--json"))
    assert {"topic": name, "pending": 4, "partitions": 2, "next_due_ms": due_ms} in listed
    described = json.loads(timers_cli("describe", name, "--metrics", f"127.0.0.1:{port}",
                                      "--json"))
    assert described["partitions"] == [
        {"topic": name, "partition": 0, "pending": 3, "next_due_ms": due_ms},
        {"topic": name, "partition": 1, "pending": 1, "next_due_ms": due_ms},
    ]
    soon = unique("soon")
    create_topic(broker.bootstrap, soon, configs=DELAY_TOPIC)
    raw_produce(broker.bootstrap, soon, [NewRecord(b"s", headers=(("TIMER_DELAY_MS", b"300"),))])
    reader = Reader(broker.bootstrap, soon)
    try:
        reader.read_count(1)
    finally:
        reader.close()
    described = json.loads(timers_cli("describe", name, "--metrics", f"127.0.0.1:{port}",
                                      "--json"))
    assert described["delivered"] >= 1
    assert set(described["lag_ms"]) == {"0.5", "0.99"}
    table = timers_cli("describe", name, "--metrics", f"127.0.0.1:{port}")
    assert "PENDING" in table and "delivered" in table


def timers_cli(*args: str) -> str:
    """The real command, in this process (a subprocess costs seconds of imports)."""
    result = CliRunner().invoke(timers, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def scrape(port: int) -> dict[tuple[str, str, str], float]:
    """(sample name, topic, partition) -> value of every timer sample on /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith("tidelog_timer"):
                key = (sample.name, sample.labels.get("topic", ""),
                       sample.labels.get("partition", sample.labels.get("quantile", "")))
                samples[key] = sample.value
    return samples


def test_other_python_clients_schedule_and_read(broker: BrokerProcess) -> None:
    """kafka-python produces (idempotent: its 2.1+ default), aiokafka reads."""
    name = unique("clients")
    create_topic(broker.bootstrap, name, configs=DELAY_TOPIC)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    sent_ms = now_ms()
    first = producer.send(name, b"later", key=b"k", headers=[("TIMER_DELAY_MS", b"700")])
    producer.flush(15)  # a batch of its own: a mixed batch answers the due-now offsets
    second = producer.send(name, b"now", key=b"k")
    producer.flush(15)
    assert first.get(15).offset == -1  # no offset until it is due
    assert second.get(15).offset == 0
    producer.close()

    async def read() -> list[tuple[bytes | None, int]]:
        consumer = AIOKafkaConsumer(name, bootstrap_servers=broker.bootstrap,
                                    auto_offset_reset="earliest", fetch_max_wait_ms=50)
        await consumer.start()
        try:
            got: list[tuple[bytes | None, int]] = []
            async with asyncio.timeout(30):
                async for message in consumer:
                    got.append((message.value, now_ms()))
                    if len(got) == 2:
                        return got
        finally:
            await consumer.stop()
        return got

    got = asyncio.run(read())
    assert [value for value, _ in got] == [b"now", b"later"]
    assert got[1][1] >= sent_ms + 700


def test_java_console_producer_with_its_idempotent_default(broker: BrokerProcess) -> None:
    """Kafka's own kafka-console-producer (Java client, idempotence on by default) schedules
    records through headers; each arrives once, the delayed one last."""
    name = unique("java")
    create_topic(broker.bootstrap, name, configs=DELAY_TOPIC)
    sent_ms = now_ms()
    kafka_peer.run_tool(
        "kafka-console-producer", "--bootstrap-server", broker.bootstrap, "--topic", name,
        "--property", "parse.headers=true", "--property", "parse.key=false",
        input="TIMER_DELAY_MS:800\tlater\nk:v\tnow\n", timeout=120,
    )
    reader = Reader(broker.bootstrap, name)
    try:
        records = reader.read_count(2)
    finally:
        reader.close()
    assert [r.value for r in records] == [b"now", b"later"]
    assert records[1].received_ms >= sent_ms + 800
    assert records[1].headers[0] == ("TIMER_DELAY_MS", b"800")
