"""kafka-python and aiokafka transactional producers against the broker: commit and abort as
read_committed and read_uncommitted consumers see them, and aiokafka's
send_offsets_to_transaction."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from kafka import KafkaProducer

from .helpers import DEADLINE_S, create_topic, list_offset, read_values

if TYPE_CHECKING:
    from conftest import BrokerFactory


def test_kafka_python_commit_and_abort(broker_factory: BrokerFactory) -> None:
    broker = broker_factory()
    create_topic(broker.bootstrap, "kp-txn")
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="kp-tx")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for index in range(3):
            producer.send("kp-txn", b"kept-%d" % index)
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send("kp-txn", b"dropped")
        producer.flush()
        producer.abort_transaction()
        producer.begin_transaction()
        producer.send("kp-txn", b"kept-last")
        producer.commit_transaction()
    finally:
        producer.close(timeout=DEADLINE_S)
    kept = [b"kept-0", b"kept-1", b"kept-2", b"kept-last"]
    assert read_values(broker.bootstrap, "kp-txn", "read_committed",
                       lambda v: b"kept-last" in v) == kept
    assert read_values(broker.bootstrap, "kp-txn", "read_uncommitted",
                       lambda v: b"kept-last" in v) == [*kept[:3], b"dropped", *kept[3:]]
    assert list_offset(broker.bootstrap, "kp-txn", 1) == list_offset(broker.bootstrap, "kp-txn", 0)


def test_aiokafka_transactions_and_offsets(broker_factory: BrokerFactory) -> None:
    broker = broker_factory()
    create_topic(broker.bootstrap, "aio-in")
    create_topic(broker.bootstrap, "aio-out")

    async def scenario() -> tuple[list[bytes], int | None]:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="aio-tx")
        await producer.start()
        try:
            async with producer.transaction():
                for index in range(4):
                    await producer.send("aio-in", b"in-%d" % index)
            try:
                async with producer.transaction():
                    await (await producer.send("aio-out", b"dropped"))
                    raise RuntimeError("abort this one")
            except RuntimeError:
                pass
            source = AIOKafkaConsumer(
                "aio-in", bootstrap_servers=broker.bootstrap, group_id="aio-group",
                isolation_level="read_committed", auto_offset_reset="earliest",
                enable_auto_commit=False,
            )
            await source.start()
            try:
                taken = []
                async with asyncio.timeout(DEADLINE_S):
                    while len(taken) < 4:
                        batch = await source.getmany(timeout_ms=500)
                        for messages in batch.values():
                            taken.extend(messages)
                async with producer.transaction():
                    for message in taken:
                        await producer.send("aio-out", b"out-" + message.value)
                    await producer.send_offsets_to_transaction(
                        {TopicPartition("aio-in", 0): taken[-1].offset + 1}, "aio-group"
                    )
                committed = await source.committed(TopicPartition("aio-in", 0))
            finally:
                await source.stop()
        finally:
            await producer.stop()
        return [m.value for m in taken], committed

    values, committed = asyncio.run(scenario())
    assert values == [b"in-%d" % i for i in range(4)]
    assert committed == 4
    out = read_values(broker.bootstrap, "aio-out", "read_committed", lambda v: len(v) >= 4)
    assert out == [b"out-in-%d" % i for i in range(4)]
    everything = read_values(broker.bootstrap, "aio-out", "read_uncommitted",
                             lambda v: len(v) >= 5)
    assert everything[0] == b"dropped"


def test_kafka_python_send_offsets_to_transaction(broker_factory: BrokerFactory) -> None:
    """kafka-python's consume-transform-produce: the output and the group's offset commit in
    one transaction (an aborted round leaves neither)."""
    from kafka import KafkaConsumer, OffsetAndMetadata
    from kafka import TopicPartition as KpTopicPartition

    broker = broker_factory()
    create_topic(broker.bootstrap, "kp-in")
    create_topic(broker.bootstrap, "kp-out")
    feeder = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for index in range(5):
        feeder.send("kp-in", b"%d" % index, partition=0)
    feeder.flush()
    feeder.close()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="kp-ctp")
    reader = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="kp-group",
                           enable_auto_commit=False)
    tp = KpTopicPartition("kp-in", 0)
    try:
        producer.init_transactions()
        offsets = {tp: OffsetAndMetadata(5, "", -1)}
        producer.begin_transaction()
        producer.send("kp-out", b"dropped")
        producer.send_offsets_to_transaction(offsets, "kp-group")
        producer.flush()
        producer.abort_transaction()
        assert reader.committed(tp) is None
        producer.begin_transaction()
        for index in range(5):
            producer.send("kp-out", b"x%d" % index)
        producer.send_offsets_to_transaction(offsets, "kp-group")
        producer.commit_transaction()
        assert reader.committed(tp) == 5
    finally:
        reader.close()
        producer.close(timeout=DEADLINE_S)
    out = read_values(broker.bootstrap, "kp-out", "read_committed", lambda v: len(v) >= 5)
    assert out == [b"x%d" % i for i in range(5)]
