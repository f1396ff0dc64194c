"""Fixtures for the Spark tests: one SparkSession (local[2]) and one `tidelog serve` broker per
session; every test uses its own topics, so they do not see each other's data."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql import SparkSession

import tidelog.spark

READY = re.compile(r"tidelog ready on (\S+):(\d+)")


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


@pytest.fixture(scope="session")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real broker subprocess on a free loopback port; yields its bootstrap address."""
    data_dir = tmp_path_factory.mktemp("tidelog-spark-broker")
    command = [
        str(Path(sys.executable).with_name("tidelog")), "serve",
        "--data-dir", str(data_dir), "--listen", "127.0.0.1:0",
    ]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        assert process.stdout is not None
        address = None
        for line in process.stdout:
            match = READY.search(line)
            if match:
                address = f"{match.group(1)}:{match.group(2)}"
                break
        assert address is not None, "broker exited before printing its ready line"
        yield address
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


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
