"""KIP-714 with Kafka's own Java client (kafka-clients 4.3.1): its consumers subscribe
(GetTelemetrySubscriptions) and push their metrics (PushTelemetry, at the interval and a final
terminating push at close), which the broker exposes in /metrics."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

from broker.metrics_probe import metrics_args

from .common import of_kind, run_program

if TYPE_CHECKING:
    from conftest import BrokerProcess


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, int]]:
    from conftest import BrokerFactory

    factory = BrokerFactory(tmp_path_factory.mktemp("java-telemetry"))
    args, port = metrics_args()
    try:
        yield factory(extra_args=args), port
    finally:
        bad = factory.stop_all()
    assert not bad, bad


def java_series(port: int) -> list[str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        lines = response.read().decode().splitlines()
    return [line for line in lines if line.startswith("tidelog_client_org_apache_kafka_")
            and 'client_software_name="apache-kafka-java"' in line]


def test_the_java_client_pushes_its_metrics(served: tuple[BrokerProcess, int]) -> None:
    broker, port = served
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        assert admin.alter_configs([ConfigResource(
            ConfigResourceType.CLIENT_METRICS, "java-clients",
            configs={"metrics": "org.apache.kafka.", "interval.ms": "100",
                     "match": "client_software_name=apache-kafka-java"},
        )]) == {"client_metrics": {"java-clients": "OK"}}
    finally:
        admin.close()
    lines = run_program("Clients", broker.bootstrap, "jt", "20")
    assert of_kind(lines, "done"), "the Java program did not finish"
    # The last pushes (terminating, at close) are answered before the JVM exits.
    deadline = time.monotonic() + 10
    found = java_series(port)
    while not found and time.monotonic() < deadline:
        time.sleep(0.05)
        found = java_series(port)
    assert found, "no metrics from the Java client in /metrics"
    # The consumers poll for seconds, so their subscription always arrives and they push;
    # the program's producers close within milliseconds, often before theirs arrives (then
    # a Java client sends nothing), so they are not required here.
    kinds = {line.split("_")[5] for line in found}  # tidelog_client_org_apache_kafka_<kind>_
    assert "consumer" in kinds, sorted({line.split("{")[0] for line in found})
