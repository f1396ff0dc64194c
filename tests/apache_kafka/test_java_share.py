"""Kafka's own share consumer (KafkaShareConsumer, kafka-clients 4.3.1) against `tidelog serve`:
three consumers in one share group on a two-partition topic read every record exactly once
(implicit acknowledgement), and the Admin client describes the share group."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from .common import of_kind, run_program, tidelog_broker

if TYPE_CHECKING:
    from collections.abc import Iterator

    from conftest import BrokerProcess

COUNT = 300


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from tidelog_broker(tmp_path_factory.mktemp("broker"), {
        "group.share.heartbeat.interval.ms": "500",
    })


def test_java_share_consumers_read_every_record_once(broker: BrokerProcess) -> None:
    lines = run_program("Share", broker.bootstrap, "java-share", "java-share-t", str(COUNT))
    assert of_kind(lines, "done"), "the program did not finish"
    records = of_kind(lines, "record")
    received = [(r["partition"], r["offset"]) for r in records]
    assert len(received) == len(set(received)) == COUNT
    assert set(received) == {(i % 2, i // 2) for i in range(COUNT)}
    assert {r["delivery"] for r in records} == {1}
    group = of_kind(lines, "group")[0]
    assert group["members"] == 3 and group["state"].lower() == "stable"
