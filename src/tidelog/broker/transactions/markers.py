"""Writing transaction markers into partition logs (the leader side of WriteTxnMarkers).

One control batch per partition (`records/control.py`, Kafka's EndTransactionMarker layout)
with the producer id and epoch of the transaction, appended by the partition's leader like a
coordinator's write (AppendOrigin.COORDINATOR: storage checks the producer and coordinator
epochs and closes the producer's ongoing transaction). A marker in `__consumer_offsets` also
tells the group coordinator to apply or drop the producer's pending offsets. A partition whose
topic is gone is skipped, as Kafka's marker writer skips it. Runs on the event loop.

Cluster mode (`replication` given): as Kafka's ReplicaManager.appendRecords for markers
(acks=-1): refused unless this broker leads the partition with the ISR at min.insync.replicas
(NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS), stamped with the leader epoch, and acknowledged
once the high watermark passes the marker (else that wait's error), so a marker reported
written survives the loss of the leader.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from tidelog.broker import clock
from tidelog.broker.internal_topics import OFFSETS_TOPIC
from tidelog.errors import ErrorCode, KafkaError
from tidelog.records.batch import RecordBatch
from tidelog.records.control import (
    ControlRecordType,
    EndTransactionMarker,
    build_end_transaction_batch,
)
from tidelog.types import TopicPartition

if TYPE_CHECKING:
    from tidelog.broker.services import PartitionReplication
    from tidelog.broker.state import Broker

log = logging.getLogger("tidelog.broker.transactions")
MARKER_APPEND_TIMEOUT_MS = 30_000  # Kafka writes markers with request.timeout.ms (30 s)


async def write_markers(
    broker: Broker,
    partitions: Iterable[tuple[str, int]],
    producer_id: int,
    producer_epoch: int,
    committed: bool,
    coordinator_epoch: int,
    replication: PartitionReplication | None = None,
    timeout_ms: int = MARKER_APPEND_TIMEOUT_MS,
) -> dict[tuple[str, int], ErrorCode]:
    """Append a COMMIT or ABORT marker to each partition; the error per partition (absent:
    written, and in a cluster replicated to the ISR)."""
    kind = ControlRecordType.COMMIT if committed else ControlRecordType.ABORT
    marker = EndTransactionMarker(kind, coordinator_epoch)
    errors: dict[tuple[str, int], ErrorCode] = {}
    durable: list[Any] = []
    replicated: list[tuple[tuple[str, int], TopicPartition, int]] = []
    for topic, partition in sorted(partitions):
        now_ms = clock.now_ms()
        tp = TopicPartition(topic, partition)
        buffer = build_end_transaction_batch(
            marker, producer_id=producer_id, producer_epoch=producer_epoch, now_ms=now_ms
        )
        try:
            leader_epoch = 0 if replication is None else replication.check_produce(tp, -1)
            partition_log = broker.topics.partition_log(topic, partition)
            appended = partition_log.append(
                [RecordBatch(memoryview(buffer))], now_ms=now_ms, leader_epoch=leader_epoch
            )
        except KafkaError as error:
            if replication is None and error.code in (
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID
            ):
                continue  # deleted meanwhile: nothing to mark
            log.warning("marker for %s-%d: %s", topic, partition, error)
            errors[(topic, partition)] = error.code
            continue
        except OSError as error:
            log.warning("marker for %s-%d: %s", topic, partition, error)
            errors[(topic, partition)] = ErrorCode.KAFKA_STORAGE_ERROR
            continue
        broker.append_waiters.notify(tp)
        if topic == OFFSETS_TOPIC and broker.groups is not None:
            on_marker = getattr(broker.groups, "on_transaction_marker", None)
            if on_marker is not None:
                on_marker(partition, producer_id, committed)
        if partition_log.config.durability == "sync":
            durable.append(broker.wait_durable(partition_log, appended.last_offset + 1))
        if replication is not None:
            replication.after_leader_append(tp)
            replicated.append(((topic, partition), tp, appended.last_offset + 1))
    for wait in durable:
        await wait
    if replication is not None:
        for key, tp, end_offset in replicated:
            code = await replication.wait_for_high_watermark(tp, end_offset, timeout_ms)
            if code != ErrorCode.NONE:
                errors[key] = code
    return errors
