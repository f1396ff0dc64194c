"""The Apache Kafka peer for the differential test, and its totals line in the summary."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

SUMMARY: list[str] = []
# Both brokers run with the same settings where an answer depends on them. scripts/kafka writes
# Kafka's shipped server.properties (log.retention.hours=168, log.segment.bytes=1 GiB,
# log.retention.check.interval.ms=300000, num.partitions=1, group.initial.rebalance.delay.ms=0);
# Tidelog gets the same by --set. Kafka gets Tidelog's one-partition internal topics (its
# default is 50: Metadata of __consumer_offsets is compared, and one partition starts faster).
# Kafka's first retention check runs 30 s after start (log.initial.task.delay.ms, an internal
# setting), not after log.retention.check.interval.ms: on a loaded machine the run outlasts
# that, and the scripts' 2020-timestamped records were deleted under them (168 h retention),
# so Fetch and ListOffsets answers differed at random. Tidelog checks first after the interval.
KAFKA_SETTINGS = {
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.num.partitions": "1",
    "log.initial.task.delay.ms": "3600000",
}
TIDELOG_SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "log.retention.hours": "168",
    "log.segment.bytes": "1073741824",
    "log.retention.check.interval.ms": "300000",
    "num.partitions": "1",
}


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for line in SUMMARY:
        terminalreporter.write_line(line)


@pytest.fixture(scope="module")
def kafka_peer_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One Apache Kafka 4.3.1 (KRaft, one node) for the module, through tests/kafka_peer.py
    (scripts/kafka); a Kafka that cannot be fetched or started fails the test."""
    import kafka_peer

    directory = tmp_path_factory.mktemp("differential-kafka")
    with kafka_peer.running_kafka(directory, settings=KAFKA_SETTINGS) as peer:
        yield peer.bootstrap
