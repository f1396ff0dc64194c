"""Fixtures for the Spark tests: one SparkSession (local[2]) per session and the shared
`tidelog serve` broker per module; every test uses its own topics."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql import SparkSession

import tidelog.spark

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def kafka_connector_jars() -> str:
    """Spark's own Kafka connector for `spark.jars` (scripts/spark-kafka-jars fetches it from
    Maven once into ~/.cache); "" when it cannot be had, and test_kafka_connector.py fails."""
    try:
        return subprocess.run([os.path.join(REPO, "scripts", "spark-kafka-jars")], check=True,
                              capture_output=True, text=True, timeout=600,
                              env={**os.environ, "TIDELOG_PYSPARK_PYTHON": sys.executable},
                              ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    # Python workers must use this interpreter (it has pyarrow and confluent_kafka).
    os.environ["PYSPARK_PYTHON"] = sys.executable
    # The jars can only join the driver's classpath when the JVM starts, so every Spark test
    # session loads Spark's Kafka connector beside the tidelog source (format("kafka")).
    session = (
        SparkSession.builder.master("local[2]")
        .config("spark.jars", kafka_connector_jars())
        .appName("tidelog-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    tidelog.spark.register(session)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="module")
def bootstrap(broker: Any) -> str:
    """The shared module-scoped `tidelog serve` broker (tests/conftest.py)."""
    return broker.bootstrap


@pytest.fixture
def new_topic(bootstrap: str):  # type: ignore[no-untyped-def]
    """Create a fresh topic: new_topic(partitions=1, **configs) -> name."""

    def create(partitions: int = 1, **configs: str) -> str:
        name = f"t-{uuid.uuid4().hex[:10]}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        futures = admin.create_topics([NewTopic(name, partitions, 1, config=configs)])
        for future in futures.values():
            future.result(30)
        return name

    return create
