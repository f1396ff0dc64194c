"""Client telemetry (KIP-714) against a live broker: a subscription made with kafka-python's
admin client (CLIENT_METRICS config resources, ListConfigResources), librdkafka pushing its
metrics into the broker's /metrics, Kafka's error codes for each kind of bad push, and the
stored subscriptions a restart reads."""

from __future__ import annotations

import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import zstandard
from confluent_kafka import Producer
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

from protocol.otlp_encode import gauge, metrics_data, number_point
from tidelog.broker.telemetry.service import TelemetryService
from tidelog.broker.telemetry.store import ClientMetricsStoreError, FileClientMetricsStore
from tidelog.errors import ErrorCode

from .metrics_probe import metrics_args
from .raw import RawClient, request_module

if TYPE_CHECKING:
    from conftest import BrokerProcess

GET, PUSH = 71, 72
MAX_BYTES = 8192
PAYLOAD = metrics_data(
    gauge("org.apache.kafka.producer.record.queue.time.avg", number_point(2.5, {"node.id": "3"}))
)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, int]]:
    from conftest import BrokerFactory

    factory = BrokerFactory(tmp_path_factory.mktemp("telemetry"))
    args, port = metrics_args()
    try:
        yield factory(settings={"telemetry.max.bytes": str(MAX_BYTES)}, extra_args=args), port
    finally:
        bad = factory.stop_all()
    assert not bad, bad


def scrape(port: int) -> list[str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return response.read().decode().splitlines()


def wait_for_series(port: int, needle: str, timeout_s: float = 30.0) -> list[str]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = [line for line in scrape(port) if needle in line and not line.startswith("#")]
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"no /metrics series with {needle!r} within {timeout_s} s")


def admin(broker: BrokerProcess) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)


def subscribe(broker: BrokerProcess, name: str, configs: dict[str, str]) -> None:
    client = admin(broker)
    try:
        result = client.alter_configs(
            [ConfigResource(ConfigResourceType.CLIENT_METRICS, name, configs=configs)]
        )
    finally:
        client.close()
    assert result == {"client_metrics": {name: "OK"}}


def test_librdkafka_pushes_its_metrics_into_the_broker(served: tuple[BrokerProcess, int]) -> None:
    broker, port = served
    subscribe(broker, "producers", {
        "metrics": "org.apache.kafka.producer.", "interval.ms": "200",
        "match": "client_id=tele-.*,client_software_name=confluent-kafka-python",
    })
    producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "tele-producer"})
    deadline = time.monotonic() + 30
    found: list[str] = []
    while not found and time.monotonic() < deadline:
        producer.produce("tele-topic", b"value")
        producer.poll(0.1)
        found = [
            line for line in scrape(port)
            if line.startswith("tidelog_client_org_apache_kafka_producer_")
            and 'client_id="tele-producer"' in line
        ]
    assert producer.flush(10) == 0
    assert found, "librdkafka's pushed metrics never reached /metrics"
    assert all('client_software_name="confluent-kafka-python"' in line for line in found)
    assert any("node_request_latency" in line and 'node_id="' in line for line in found)
    pushes = wait_for_series(port, 'tidelog_client_telemetry_pushes_total{error="NONE"}')
    assert float(pushes[0].split()[-1]) >= 1


def test_client_metrics_configs_describe_list_and_delete(
    served: tuple[BrokerProcess, int],
) -> None:
    broker, _port = served
    subscribe(broker, "listed", {"metrics": "a., b.", "interval.ms": "1000"})
    client = admin(broker)
    try:
        described = client.describe_configs(
            [ConfigResource(ConfigResourceType.CLIENT_METRICS, "listed")], config_filter="all"
        )["client_metrics"]["listed"]
        assert described["metrics"]["value"] == "a.,b."
        assert described["interval.ms"]["value"] == "1000"
        assert described["interval.ms"]["config_source"] == "DYNAMIC_CLIENT_METRICS_CONFIG"
        assert described["match"]["value"] == ""
        assert described["match"]["config_source"] == "DEFAULT_CONFIG"
        listed = client.list_config_resources()
        assert "listed" in listed["client_metrics"]
        assert "0" in listed["broker"]
        # Kafka's validation: the interval must be 100 .. 3,600,000 ms.
        refused = client.alter_configs(
            [ConfigResource(ConfigResourceType.CLIENT_METRICS, "listed",
                            configs={"interval.ms": "5"})], raise_on_unknown=False,
        )
        assert "InvalidRequest" in refused["client_metrics"]["listed"]
        # Deleting every config deletes the subscription.
        deleted = client.alter_configs(
            [ConfigResource(ConfigResourceType.CLIENT_METRICS, "listed",
                            configs={"metrics": ("DELETE", None),
                                     "interval.ms": ("DELETE", None)})],
            raise_on_unknown=False,
        )
        assert deleted == {"client_metrics": {"listed": "OK"}}
        assert "listed" not in client.list_config_resources().get("client_metrics", [])
    finally:
        client.close()


def get(raw: RawClient, instance_id: uuid.UUID | None) -> Any:
    module = request_module(GET, 0)
    return raw.call(GET, 0, module.GetTelemetrySubscriptionsRequest(client_instance_id=instance_id))


def push(
    raw: RawClient, instance_id: uuid.UUID | None, subscription_id: int, metrics: bytes,
    compression_type: int = 0, terminating: bool = False,
) -> ErrorCode:
    module = request_module(PUSH, 0)
    response = raw.call(PUSH, 0, module.PushTelemetryRequest(
        client_instance_id=instance_id, subscription_id=subscription_id,
        terminating=terminating, compression_type=compression_type, metrics=metrics,
    ))
    return ErrorCode(response.error_code.value)


def test_pushes_are_checked_as_kafka_checks_them(served: tuple[BrokerProcess, int]) -> None:
    broker, port = served
    subscribe(broker, "raw", {"metrics": "*", "interval.ms": "60000", "match": "client_id=raw-.*"})
    with RawClient(broker.bootstrap) as raw:
        first = get(raw, None)
        assert first.error_code.value == 0
        instance_id = first.client_instance_id
        assert instance_id is not None
        assert first.push_interval.total_seconds() == 60
        assert first.requested_metrics == ("",)  # every metric
        assert first.telemetry_max_bytes == MAX_BYTES
        assert set(first.accepted_compression_types) == {1, 2, 3, 4}
        assert first.delta_temporality
        sid = first.subscription_id
        # Too early for another Get.
        assert get(raw, instance_id).error_code.value == ErrorCode.THROTTLING_QUOTA_EXCEEDED
        assert push(raw, None, sid, PAYLOAD) == ErrorCode.INVALID_REQUEST
        assert push(raw, instance_id, sid + 1, PAYLOAD) == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        again = get(raw, instance_id)  # allowed at once after UNKNOWN_SUBSCRIPTION_ID
        assert again.error_code.value == 0 and again.subscription_id == sid
        assert push(raw, instance_id, sid, PAYLOAD, compression_type=7) == (
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        )
        assert get(raw, instance_id).error_code.value == 0
        compressed = zstandard.ZstdCompressor().compress(PAYLOAD)
        assert push(raw, instance_id, sid, compressed, compression_type=4) == ErrorCode.NONE
        series = wait_for_series(port, f'client_instance_id="{instance_id}"')
        assert any(
            line.startswith("tidelog_client_org_apache_kafka_producer_record_queue_time_avg{")
            and 'node_id="3"' in line and line.endswith(" 2.5") for line in series
        )
        # Within the interval: throttled; the terminating push is taken, then nothing more.
        assert push(raw, instance_id, sid, PAYLOAD) == ErrorCode.THROTTLING_QUOTA_EXCEEDED
        assert push(raw, instance_id, sid, b"", terminating=True) == ErrorCode.NONE
        assert push(raw, instance_id, sid, PAYLOAD, terminating=True) == ErrorCode.INVALID_REQUEST

        # Bad payloads: INVALID_RECORD (after a fresh Get for a fresh instance each time).
        for metrics, codec, expected in (
            (b"\x0a\xff\xff\xff\xff\x0f", 0, ErrorCode.INVALID_RECORD),  # length past the end
            (b"not zstd at all", 4, ErrorCode.INVALID_RECORD),
            (b"x" * (MAX_BYTES + 1), 0, ErrorCode.TELEMETRY_TOO_LARGE),
        ):
            fresh = get(raw, None)
            assert push(raw, fresh.client_instance_id, fresh.subscription_id, metrics, codec) == (
                expected
            )
    refused = [line for line in scrape(port) if line.startswith(
        'tidelog_client_telemetry_pushes_total{error="INVALID_RECORD"}')]
    assert refused and float(refused[0].split()[-1]) >= 2


def test_subscriptions_are_stored_and_read_back(tmp_path: Path) -> None:
    """What a restart reads: client-metrics.json, written atomically (no broker process: a
    restart's cost is the broker's start-up, tested elsewhere)."""
    store = FileClientMetricsStore(tmp_path)
    store.write("kept", {"metrics": "org.apache.kafka.", "interval.ms": "30000"})
    store.write("gone", {"metrics": "x."})
    store.write("gone", {})
    service = TelemetryService(FileClientMetricsStore(tmp_path), MAX_BYTES, lambda: 0)
    assert service.subscriptions() == {
        "kept": {"metrics": "org.apache.kafka.", "interval.ms": "30000"}
    }
    assert service.manager.subscriptions["kept"].interval_ms == 30000
    (tmp_path / "client-metrics.json").write_text('{"version": 1, "subscriptions": '
                                                  '{"bad": {"interval.ms": "1"}}}')
    with pytest.raises(ClientMetricsStoreError, match="bad"):
        FileClientMetricsStore(tmp_path).load()
