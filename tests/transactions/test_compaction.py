"""Compaction of a topic written by transactions, read by confluent-kafka at both isolation
levels after the cleaner ran: Kafka's answers (its LogCleaner removes aborted records, compacts
committed ones, and removes a marker delete.retention.ms after its transaction's data is gone).
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import TYPE_CHECKING

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.raw import RawClient, request_module
from tidelog.protocol.api_keys import ApiKey
from tidelog.records.batch import iter_batches
from tidelog.records.control import ControlRecordType, read_end_transaction_marker

from .helpers import DEADLINE_S, consumer, txn_producer, wait_for

if TYPE_CHECKING:
    from conftest import BrokerFactory

TOPIC = "txn-compacted"
KEYS = [b"k%d" % i for i in range(5)]


def _read(bootstrap: str, isolation: str, end_offset: int) -> dict[bytes, list[bytes]]:
    """key -> values in offset order, reading until the offset before `end_offset`."""
    reader = consumer(bootstrap, isolation)
    reader.assign([TopicPartition(TOPIC, 0, 0)])
    values: dict[bytes, list[bytes]] = {}
    try:
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            message = reader.poll(0.2)
            if message is None or message.error() is not None:
                position = reader.position([TopicPartition(TOPIC, 0)])[0].offset
                if position >= end_offset:
                    break
                continue
            values.setdefault(message.key(), []).append(message.value())
        else:
            raise AssertionError(f"{isolation} reader did not reach offset {end_offset}")
    finally:
        reader.close()
    return values


def _markers(bootstrap: str) -> tuple[list[str], list[int]]:
    """The control batches left (types) and the aborted transactions a read_committed fetch
    from offset 0 lists (producer ids)."""
    module = request_module(ApiKey.FETCH, 11)
    with RawClient(bootstrap) as client:
        answer = client.call(ApiKey.FETCH, 11, module.FetchRequest(
            replica_id=-1, max_wait=timedelta(0), min_bytes=0, max_bytes=1 << 24,
            isolation_level=1, topics=(module.FetchTopic(topic=TOPIC, partitions=(
                module.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 24,
                                      log_start_offset=-1),)),),
            forgotten_topics_data=(),
        ))
    partition = answer.responses[0].partitions[0]
    types = [
        "ABORT" if read_end_transaction_marker(batch).control_type == ControlRecordType.ABORT
        else "COMMIT"
        for batch in iter_batches(partition.records) if batch.is_control
    ]
    return types, [t.producer_id for t in partition.aborted_transactions or ()]


def test_cleaner_removes_aborted_records_and_then_their_markers(
    broker_factory: BrokerFactory,
) -> None:
    broker = broker_factory(settings={"log.cleaner.backoff.ms": "200"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    configs = {"cleanup.policy": "compact", "segment.bytes": "1200",
               "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "300"}
    admin.create_topics([NewTopic(TOPIC, 1, 1, config=configs)])[TOPIC].result(DEADLINE_S)
    producer = txn_producer(broker.bootstrap, "compacted-writer", **{"linger.ms": 0})

    def transaction(values: list[tuple[bytes, bytes]], commit: bool) -> None:
        producer.begin_transaction()
        for key, value in values:
            producer.produce(TOPIC, value, key)
        producer.flush(DEADLINE_S)
        if commit:
            producer.commit_transaction(DEADLINE_S)
        else:
            producer.abort_transaction(DEADLINE_S)

    transaction([(k, b"c1-" + k) for k in KEYS], commit=True)
    transaction([(k, b"aborted-" + k) for k in KEYS], commit=False)
    transaction([(k, b"c2-" + k) for k in KEYS[:3]], commit=True)
    for index in range(40):  # roll segments past them (the active one is never cleaned)
        transaction([(b"filler-%d" % index, b"f" * 40)], commit=True)
    end_offset = broker_offsets_end(broker.bootstrap)
    expected = {k: [b"c2-" + k] for k in KEYS[:3]} | {k: [b"c1-" + k] for k in KEYS[3:]}

    def cleaned() -> bool:
        read = _read(broker.bootstrap, "read_uncommitted", end_offset)
        return {k: v for k, v in read.items() if k in KEYS} == expected

    # read_uncommitted sees what read_committed sees once the aborted records are gone, and
    # each key's latest committed value only.
    wait_for(cleaned, "the cleaner to remove aborted and shadowed records", 60)
    committed = _read(broker.bootstrap, "read_committed", end_offset)
    assert {k: v for k, v in committed.items() if k in KEYS} == expected
    # The ABORT marker and its aborted-transaction entry go delete.retention.ms after a
    # cleaning finds its data gone: the next one, which new writes make due (as in Kafka).
    # The first COMMIT marker stays (k3, k4 of its transaction remain).
    for index in range(40, 60):
        transaction([(b"filler-%d" % index, b"f" * 40)], commit=True)
    wait_for(lambda: "ABORT" not in _markers(broker.bootstrap)[0], "the ABORT marker to go", 60)
    types, aborted = _markers(broker.bootstrap)
    assert aborted == [] and types[0] == "COMMIT"
    producer.flush(0)


def broker_offsets_end(bootstrap: str) -> int:
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
    try:
        return int(probe.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=DEADLINE_S)[1])
    finally:
        probe.close()
