"""Transactions with confluent-kafka (librdkafka) against a real broker: commit and abort as
each isolation level sees them, the LSO holding read_committed readers behind an open
transaction, consume-transform-produce with send_offsets_to_transaction, a zombie fenced by a
new instance, and a producer SIGKILLed mid-transaction aborted by transaction.timeout.ms."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import KafkaException
from confluent_kafka import TopicPartition as CkTopicPartition

from .helpers import (
    DEADLINE_S,
    consumer,
    create_topic,
    list_offset,
    read_values,
    txn_producer,
    wait_for,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

    from conftest import BrokerProcess

# Timed-out transactions are looked for every 200 ms (Kafka's default is 10 s).
SETTINGS = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"}


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    from conftest import BrokerFactory

    factory = BrokerFactory(tmp_path_factory.mktemp("txn"))
    try:
        yield factory(settings=SETTINGS)
    finally:
        bad = factory.stop_all()
    if bad:
        pytest.fail("broker logged a traceback:\n" + "\n".join(bad))


def test_commit_and_abort_as_each_isolation_level_sees_them(txn_broker: BrokerProcess) -> None:
    bootstrap = txn_broker.bootstrap
    create_topic(bootstrap, "ck-basic")
    producer = txn_producer(bootstrap, "ck-basic-tx")
    producer.begin_transaction()
    for index in range(5):
        producer.produce("ck-basic", value=b"committed-%d" % index)
    producer.commit_transaction(DEADLINE_S)
    producer.begin_transaction()
    for index in range(3):
        producer.produce("ck-basic", value=b"aborted-%d" % index)
    producer.flush(DEADLINE_S)  # on the broker before the abort (else librdkafka purges them)
    producer.abort_transaction(DEADLINE_S)
    producer.begin_transaction()
    producer.produce("ck-basic", value=b"committed-last")
    producer.commit_transaction(DEADLINE_S)
    committed = [b"committed-%d" % i for i in range(5)] + [b"committed-last"]
    aborted = [b"aborted-%d" % i for i in range(3)]
    seen = read_values(bootstrap, "ck-basic", "read_committed", lambda v: b"committed-last" in v)
    assert seen == committed
    everything = read_values(bootstrap, "ck-basic", "read_uncommitted",
                             lambda v: b"committed-last" in v)
    assert everything == committed[:5] + aborted + committed[5:]
    # 9 records and 3 markers; nothing open: LSO = high watermark.
    assert list_offset(bootstrap, "ck-basic", 0) == list_offset(bootstrap, "ck-basic", 1) == 12


def test_lso_holds_read_committed_readers_until_commit_or_abort(
    txn_broker: BrokerProcess,
) -> None:
    bootstrap = txn_broker.bootstrap
    create_topic(bootstrap, "ck-lso")
    before = txn_producer(bootstrap, "ck-lso-before")
    before.begin_transaction()
    before.produce("ck-lso", value=b"first")
    before.commit_transaction(DEADLINE_S)  # offsets 0, marker 1
    open_txn = txn_producer(bootstrap, "ck-lso-open")
    open_txn.begin_transaction()
    open_txn.produce("ck-lso", value=b"held")
    open_txn.flush(DEADLINE_S)  # offset 2, transaction open
    other = txn_producer(bootstrap, "ck-lso-other")
    other.begin_transaction()
    other.produce("ck-lso", value=b"behind")
    other.commit_transaction(DEADLINE_S)  # offset 3 committed, marker 4: still behind the LSO
    assert list_offset(bootstrap, "ck-lso", 1) == 2
    assert list_offset(bootstrap, "ck-lso", 0) == 5
    assert read_values(bootstrap, "ck-lso", "read_committed", lambda v: bool(v)) == [b"first"]
    open_txn.commit_transaction(DEADLINE_S)  # marker 5
    assert list_offset(bootstrap, "ck-lso", 1) == 6
    seen = read_values(bootstrap, "ck-lso", "read_committed", lambda v: len(v) >= 3)
    assert seen == [b"first", b"held", b"behind"]
    # And an abort releases it too, dropping the open transaction's records.
    open_txn.begin_transaction()
    open_txn.produce("ck-lso", value=b"dropped")
    open_txn.flush(DEADLINE_S)
    assert list_offset(bootstrap, "ck-lso", 1) == 6
    open_txn.abort_transaction(DEADLINE_S)
    assert list_offset(bootstrap, "ck-lso", 1) == list_offset(bootstrap, "ck-lso", 0) == 8
    before.begin_transaction()
    before.produce("ck-lso", value=b"after")
    before.commit_transaction(DEADLINE_S)
    seen = read_values(bootstrap, "ck-lso", "read_committed", lambda v: b"after" in v)
    assert seen == [b"first", b"held", b"behind", b"after"]


def test_consume_transform_produce_commits_offsets_with_the_output(
    txn_broker: BrokerProcess,
) -> None:
    bootstrap = txn_broker.bootstrap
    create_topic(bootstrap, "ck-in")
    create_topic(bootstrap, "ck-out")
    feeder = txn_producer(bootstrap, "ck-feeder")
    feeder.begin_transaction()
    for index in range(10):
        feeder.produce("ck-in", value=b"%d" % index)
    feeder.commit_transaction(DEADLINE_S)

    def transform_batch(group: str, txn_id: str, count: int, commit: bool) -> None:
        source = consumer(bootstrap, "read_committed", **{"group.id": group})
        source.subscribe(["ck-in"])
        producer = txn_producer(bootstrap, txn_id)
        taken = []
        while len(taken) < count:
            message = source.poll(0.5)
            if message is not None and not message.error():
                taken.append(message)
        producer.begin_transaction()
        for message in taken:
            producer.produce("ck-out", value=b"x" + message.value())
        positions = [CkTopicPartition("ck-in", 0, taken[-1].offset() + 1)]
        producer.send_offsets_to_transaction(
            positions, source.consumer_group_metadata(), DEADLINE_S
        )
        if commit:
            producer.commit_transaction(DEADLINE_S)
        else:
            producer.flush(DEADLINE_S)
            producer.abort_transaction(DEADLINE_S)
        source.close()

    transform_batch("ctp", "ck-ctp", 4, commit=False)  # aborted: neither output nor offsets
    reader = consumer(bootstrap, "read_committed", **{"group.id": "ctp"})
    assert reader.committed([CkTopicPartition("ck-in", 0)], DEADLINE_S)[0].offset < 0
    transform_batch("ctp", "ck-ctp", 4, commit=True)  # restarts at 0: the abort kept nothing
    committed = reader.committed([CkTopicPartition("ck-in", 0)], DEADLINE_S)
    assert committed[0].offset == 4
    transform_batch("ctp", "ck-ctp", 6, commit=True)  # resumes at the committed offset
    assert reader.committed([CkTopicPartition("ck-in", 0)], DEADLINE_S)[0].offset == 10
    reader.close()
    out = read_values(bootstrap, "ck-out", "read_committed", lambda v: len(v) >= 10)
    assert out == [b"x%d" % i for i in range(10)]


def test_zombie_is_fenced_by_a_new_instance(txn_broker: BrokerProcess) -> None:
    bootstrap = txn_broker.bootstrap
    create_topic(bootstrap, "ck-zombie")
    zombie = txn_producer(bootstrap, "ck-zombie-tx")
    zombie.begin_transaction()
    zombie.produce("ck-zombie", value=b"zombie")
    zombie.flush(DEADLINE_S)
    successor = txn_producer(bootstrap, "ck-zombie-tx")  # aborts the zombie's transaction
    successor.begin_transaction()
    successor.produce("ck-zombie", value=b"successor")
    successor.commit_transaction(DEADLINE_S)
    with pytest.raises(KafkaException) as info:
        zombie.commit_transaction(DEADLINE_S)
    assert info.value.args[0].fatal() or "fenced" in str(info.value).lower()
    seen = read_values(bootstrap, "ck-zombie", "read_committed", lambda v: bool(v))
    assert seen == [b"successor"]


def test_killed_producer_is_aborted_by_its_timeout(txn_broker: BrokerProcess) -> None:
    bootstrap = txn_broker.bootstrap
    create_topic(bootstrap, "ck-killed")
    child = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("zombie_child.py")), bootstrap,
         "ck-killed", "ck-killed-tx"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == b"written\n"
        assert list_offset(bootstrap, "ck-killed", 1) == 0  # the open transaction holds it
    finally:
        child.kill()
        child.wait(DEADLINE_S)
    # transaction.timeout.ms=3000: the coordinator aborts it, the LSO moves past the marker.
    wait_for(lambda: list_offset(bootstrap, "ck-killed", 1) == 21, "the timeout abort")
    after = txn_producer(bootstrap, "ck-killed-after")
    after.begin_transaction()
    after.produce("ck-killed", value=b"after")
    after.commit_transaction(DEADLINE_S)
    assert read_values(bootstrap, "ck-killed", "read_committed", lambda v: bool(v)) == [b"after"]
    uncommitted = read_values(bootstrap, "ck-killed", "read_uncommitted",
                              lambda v: b"after" in v)
    assert uncommitted[:20] == [b"doomed-%d" % i for i in range(20)]
