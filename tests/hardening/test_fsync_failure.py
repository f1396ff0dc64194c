"""A live broker in sync durability whose fsync fails (hardening.md row 13).

Fault injection below the group-commit thread: a small LD_PRELOAD shim, compiled here with gcc,
interposes libc's `fsync` and `fdatasync` in the `tidelog serve` process and makes them fail with
EIO while a trigger file exists. Python's `os.fsync` calls libc's `fsync`, so the group-commit
thread sees the same OSError a failing disk gives it.

What must hold: records produced while fsync works are acknowledged; a produce whose fsync fails
answers KAFKA_STORAGE_ERROR and is never acknowledged; the broker stays up and the same
connection keeps serving Metadata and Fetch; and after SIGKILL and a restart without the shim,
every acknowledged record is there, in order, exactly once.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import confluent_kafka
from confluent_kafka import Consumer, Producer

from broker.raw import RawClient
from broker.test_requests import batch, create, fetch, produce
from reliability.fsync_fault import TRIGGER_ENV, build_shim
from tidelog.errors import ErrorCode
from tidelog.records.batch import iter_batches
from tidelog.records.record import iter_records

if TYPE_CHECKING:
    from conftest import BrokerFactory

TOPIC = "fsync-fails"
def _produce(bootstrap: str, values: list[bytes]) -> list[tuple[bytes, int | None, Any]]:
    """Produce with a real client, acks=all and no retries; (value, offset or None, error)."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": False,
            "retries": 0,
            "linger.ms": 0,
            "max.in.flight.requests.per.connection": 1,
            "message.timeout.ms": 10_000,
        }
    )
    outcomes: list[tuple[bytes, int | None, Any]] = []

    def report(error: Any, message: Any) -> None:
        offset = None if error is not None else message.offset()
        outcomes.append((message.value(), offset, error))

    for value in values:
        producer.produce(TOPIC, value=value, partition=0, on_delivery=report)
        producer.flush(15)  # one request per record: each outcome is its own
    assert producer.flush(15) == 0
    assert len(outcomes) == len(values)
    return outcomes


def _fetch_values(client: RawClient) -> list[bytes]:
    values: list[bytes] = []
    start = 0
    while True:
        data = fetch(client, TOPIC, start)
        assert data.error_code == ErrorCode.NONE, data.error_code
        batches = list(iter_batches(data.records or b""))
        if not batches:
            return values
        for record_batch in batches:
            values += [bytes(r.value or b"") for r in iter_records(record_batch)]
        start = batches[-1].next_offset


def _consume_values(bootstrap: str, expected_count: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "fsync-check",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.assign([confluent_kafka.TopicPartition(TOPIC, 0, 0)])
        _, high = consumer.get_watermark_offsets(
            confluent_kafka.TopicPartition(TOPIC, 0), timeout=10
        )
        assert high >= expected_count
        values: list[bytes] = []
        while len(values) < high:
            message = consumer.poll(10)
            assert message is not None, f"consumed {len(values)} of {high}"
            assert message.error() is None, message.error()
            values.append(message.value())
        return values
    finally:
        consumer.close()


def test_fsync_failure_is_a_storage_error_and_never_acknowledged(
    broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    shim = build_shim(tmp_path)
    trigger = tmp_path / "fsync-fails-now"
    broker = broker_factory(
        settings={"log.durability": "sync"},
        env={"LD_PRELOAD": str(shim), TRIGGER_ENV: str(trigger)},
    )
    acknowledged: list[bytes] = []
    with RawClient(broker.bootstrap) as client:
        create(client, TOPIC)

        # 1. fsync works: acknowledged.
        before = _produce(broker.bootstrap, [b"ok-%d" % i for i in range(5)])
        assert [error for _, _, error in before] == [None] * 5
        assert [offset for _, offset, _ in before] == [0, 1, 2, 3, 4]
        acknowledged += [value for value, _, _ in before]

        # 2. fsync fails: KAFKA_STORAGE_ERROR, never acknowledged, the broker stays up.
        trigger.touch()
        failed = _produce(broker.bootstrap, [b"failed-%d" % i for i in range(2)])
        for _, offset, error in failed:
            assert offset is None
            assert error is not None
            assert error.code() == confluent_kafka.KafkaError.KAFKA_STORAGE_ERROR
        raw_failed = produce(client, TOPIC, [batch([b"raw-failed"])], acks=-1)
        assert raw_failed.error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert raw_failed.base_offset == -1
        # The same connection keeps answering other requests.
        create(client, TOPIC)
        seen = _fetch_values(client)
        assert seen[: len(acknowledged)] == acknowledged
        assert broker.process.poll() is None

        # 3. fsync works again, but the partition stays offline for appends until a restart:
        # after a failed fsync Linux may have dropped the dirty pages, so a later fsync that
        # succeeds proves nothing about the bytes before it. Reads keep working.
        trigger.unlink()
        after = produce(client, TOPIC, [batch([b"after"])], acks=-1)
        assert after.error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert after.base_offset == -1
        assert _fetch_values(client)[: len(acknowledged)] == acknowledged
        assert _produce(broker.bootstrap, [b"after-client"])[0][1] is None

    # 4. Power-cut stand-in: SIGKILL, restart without the shim. Recovery starts at the recovery
    # point (never moved past the failed fsync) and the partition takes appends again.
    broker.kill()
    restarted = broker_factory(data_dir=broker.data_dir)
    resumed = _produce(restarted.bootstrap, [b"resumed"])
    assert resumed[0][2] is None
    acknowledged.append(b"resumed")
    recovered = _consume_values(restarted.bootstrap, len(acknowledged))
    # Every acknowledged record, in order, exactly once. Records answered with an error may be
    # there too (at least once: their bytes survived in the page cache), never acknowledged ones
    # missing.
    assert [value for value in recovered if value in acknowledged] == acknowledged
    assert recovered[:5] == acknowledged[:5]
    assert recovered[-1] == b"resumed"
