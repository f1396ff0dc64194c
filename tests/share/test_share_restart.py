"""Durable share state: a broker SIGKILLed and restarted during share consumption.

The checker counts, per record: delivered again after its acceptance was confirmed, never
delivered, delivered with a delivery count not above the previous one. Every count must be 0
(records in flight at the crash may be delivered again, with a higher delivery count).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from conftest import BrokerFactory
from tidelog.cluster.zookeeper_server import free_port
from tidelog.coordinator.share_records import decode_share_record

from .helpers import SHARE_SETTINGS, Child, create_topic, produce, set_group_configs, wait_for

RECORDS = 400
STATE_TOPIC = "__share_group_state"


def check(records: list[dict[str, Any]], produced: set[tuple[int, int]]) -> dict[str, int]:
    """The checker: every count but `unconfirmed` must be 0."""
    by_record: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for record in records:
        by_record.setdefault((record["p"], record["o"]), []).append(record)
    again_after_accept = backwards = unconfirmed = 0
    for receipts in by_record.values():
        confirmed = False
        for previous, receipt in zip([None, *receipts], receipts, strict=False):
            if confirmed:
                again_after_accept += 1
            if previous is not None and receipt["d"] <= previous["d"]:
                backwards += 1
            confirmed = confirmed or receipt["a"]
        # The broker may have written an acceptance whose answer the crash swallowed.
        unconfirmed += not confirmed
    return {
        "delivered again after accepted": again_after_accept,
        "never delivered": len(produced - set(by_record)),
        "delivery count not increasing": backwards,
        "unconfirmed": unconfirmed,
    }


def share_start_offsets(bootstrap: str, group: str) -> list[int]:
    """The latest SPSO of each of the group's share partitions, read from
    `__share_group_state` with a plain consumer (partition order)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "share-state-reader",
                         "enable.auto.commit": False})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(STATE_TOPIC, 0), 10)
        consumer.assign([TopicPartition(STATE_TOPIC, 0, low)])
        starts: dict[int, int] = {}
        position = low
        while position < high:
            message = consumer.poll(5)
            assert message is not None and message.error() is None
            position = message.offset() + 1
            record = decode_share_record(message.key(), message.value())
            value = record.value
            if record.key.group_id == group and value is not None and value.start_offset >= 0:
                starts[record.key.partition] = value.start_offset
        return [starts[p] for p in sorted(starts)]
    finally:
        consumer.close()


@pytest.fixture
def children() -> Iterator[list[Child]]:
    started: list[Child] = []
    yield started
    for child in started:
        child.kill()


def test_broker_sigkill_during_consumption_keeps_share_state(
    broker_factory: BrokerFactory, children: list[Child]
) -> None:
    listen = f"127.0.0.1:{free_port()}"
    broker = broker_factory(settings=SHARE_SETTINGS, listen=listen)
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "durable", 2)
    set_group_configs(bootstrap, "g-durable", share_auto_offset_reset="earliest",
                      share_record_lock_duration_ms="2000")
    produce(bootstrap, "durable", RECORDS, 2)
    produced = {(i % 2, i // 2) for i in range(RECORDS)}
    consumer = Child(bootstrap, "g-durable", "durable", "accept", max_poll=10, delay_ms=50)
    children.append(consumer)
    wait_for(lambda: len(consumer.pump()) >= RECORDS // 4, "a quarter consumed")
    broker.stop(signal.SIGKILL)
    time.sleep(0.2)  # a gap the consumer sees as a dead broker
    broker_factory(settings=SHARE_SETTINGS, listen=listen, data_dir=broker.data_dir)

    def all_done() -> bool:  # the share-partition start offsets passed every record
        consumer.pump()
        return share_start_offsets(bootstrap, "g-durable") == [RECORDS // 2, RECORDS // 2]
    wait_for(all_done, "every record acknowledged after the restart", deadline_s=60)
    consumer.stop()
    counts = check(consumer.records, produced)
    print("share restart checker:", counts)
    assert counts["delivered again after accepted"] == 0, counts
    assert counts["never delivered"] == 0, counts
    assert counts["delivery count not increasing"] == 0, counts
    assert counts["unconfirmed"] <= 10, counts  # at most one poll's worth around the crash
