"""TxnOffsetCommit on the loop: the group's offsets appended inside the producer's transaction.

The OffsetCommit records the shard returns are appended to the group's `__consumer_offsets`
partition as one transactional batch carrying the producer id and epoch (no sequence: storage
checks the epoch, INVALID_PRODUCER_EPOCH for a fenced producer) and replayed as pending
(`coordinator/txn_offsets.py`) until a COMMIT or ABORT marker of that producer reaches the
partition (`GroupService.on_transaction_marker`, called by `broker/transactions/markers.py`).
Runs on the event loop; storage calls are short page-cache writes. In a cluster the batch
carries the leader epoch and is answered once the high watermark passes it (acks=all, as the
group's other writes: `cluster.py`); the offsets are pending from the append on, as Kafka's
shard holds them from its write.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tidelog.broker import clock
from tidelog.broker.internal_topics import OFFSETS_TOPIC
from tidelog.coordinator.coordinator import GroupCoordinatorShard
from tidelog.coordinator.messages import OffsetCommitRequest, OffsetCommitResponse
from tidelog.coordinator.txn_offsets import TransactionalRecord
from tidelog.errors import ErrorCode, KafkaError
from tidelog.records.batch import RecordBatch
from tidelog.records.builder import NewRecord, build_batch
from tidelog.types import TopicPartition

if TYPE_CHECKING:
    from tidelog.broker.replication.replica_manager import Replication
    from tidelog.broker.state import Broker


async def txn_offset_commit(
    broker: Broker, shard: GroupCoordinatorShard, partition: int,
    request: OffsetCommitRequest, producer_id: int, producer_epoch: int,
    replication: Replication | None = None,
) -> OffsetCommitResponse:
    now_ms = clock.now_ms()
    result = shard.txn_offset_commit(request, now_ms)
    assert result.response is not None
    if not result.records:
        return result.response
    tp = TopicPartition(OFFSETS_TOPIC, partition)
    leader_epoch = 0
    if replication is not None:
        from tidelog.broker.groups.cluster import append_leader_epoch

        leader_epoch = append_leader_epoch(replication, tp)
    partition_log = broker.partition_log(OFFSETS_TOPIC, partition)
    buffer = build_batch(
        [NewRecord(value=r.value_bytes(), key=r.key_bytes()) for r in result.records],
        producer_id=producer_id, producer_epoch=producer_epoch, transactional=True,
        now_ms=now_ms,
    )
    try:
        appended = partition_log.append(
            [RecordBatch(memoryview(buffer))], now_ms=now_ms, leader_epoch=leader_epoch
        )
    except OSError as error:
        raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, str(error)) from None
    for record in result.records:
        shard.replay(TransactionalRecord(producer_id, record))
    broker.append_waiters.notify(tp)
    end_offset = appended.last_offset + 1
    fsync = (broker.wait_durable(partition_log, end_offset)
             if partition_log.config.durability == "sync" else None)
    if replication is not None:
        from tidelog.broker.groups.cluster import replicated

        replication.after_leader_append(tp)
        await replicated(replication, tp, end_offset, fsync)
    elif fsync is not None:
        await fsync
    return result.response
