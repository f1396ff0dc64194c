"""What the group service reads: its settings from the broker config, a whole
`__consumer_offsets` partition as coordinator records (to load a shard by replaying it), and
its shards' figures for /metrics.

`read_partition` is blocking file I/O: run it at start or on a worker thread.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from tidelog.broker.internal_topics import OFFSETS_TOPIC
from tidelog.broker.metrics.registry import GroupOffset, GroupStats
from tidelog.coordinator.coordinator import GroupCoordinatorShard
from tidelog.coordinator.loader import iter_logged_records
from tidelog.coordinator.messages import GroupConfig
from tidelog.coordinator.records import CoordinatorRecord
from tidelog.coordinator.txn_offsets import TransactionalRecord, TransactionEnd
from tidelog.records.batch import iter_batches

if TYPE_CHECKING:
    from tidelog.broker.state import Broker


READ_CHUNK_BYTES = 4 * 1024 * 1024


def group_config(broker: Broker) -> GroupConfig:
    config = broker.config
    return GroupConfig(
        initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
        min_session_timeout_ms=config.group_min_session_timeout_ms,
        max_session_timeout_ms=config.group_max_session_timeout_ms,
        offsets_retention_ms=config.offsets_retention_minutes * 60_000,
        consumer_session_timeout_ms=config.group_consumer_session_timeout_ms,
        consumer_heartbeat_interval_ms=config.group_consumer_heartbeat_interval_ms,
        consumer_migration_policy=config.group_consumer_migration_policy,
    )


def read_partition(
    broker: Broker, partition: int
) -> list[CoordinatorRecord | TransactionalRecord | TransactionEnd]:
    """Every coordinator record of one partition, in offset order (blocking file I/O)."""
    partition_log = broker.partition_log(OFFSETS_TOPIC, partition)
    records: list[CoordinatorRecord | TransactionalRecord | TransactionEnd] = []
    offset = partition_log.log_start_offset
    while offset < partition_log.log_end_offset:
        read = partition_log.read(offset, READ_CHUNK_BYTES)
        if read.size == 0:
            break
        data = b"".join(piece.read_bytes() for piece in read.slices)
        batches = list(iter_batches(data))
        if not batches:
            break
        records.extend(iter_logged_records(data))
        offset = batches[-1].next_offset
    return records


def group_stats(shards: Iterable[GroupCoordinatorShard]) -> GroupStats:
    """Groups per state and committed offsets over the shards."""
    states: dict[str, int] = {}
    offsets: list[GroupOffset] = []
    for shard in shards:
        for listed in shard.list_groups():
            states[listed.state] = states.get(listed.state, 0) + 1
        for group_id, committed in shard.offsets.snapshot().items():
            offsets.extend(
                GroupOffset(group_id, topic, partition, value.offset)
                for (topic, partition), value in committed.items()
            )
    return GroupStats(states, tuple(offsets))
