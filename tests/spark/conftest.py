"""Fixtures for the Spark tests: one SparkSession (local[2]) per session and the shared
`tidelog serve` broker per module; every test uses its own topics."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql import SparkSession

import tidelog.spark


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    # Python workers must use this interpreter (it has pyarrow and confluent_kafka).
    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]")
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
