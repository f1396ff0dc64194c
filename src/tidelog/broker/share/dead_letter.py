"""Dead-letter topics for share groups (KIP-1191): undeliverable records copied before archive.

A share group whose config names `errors.deadletterqueue.topic.name` gets every record it
rejects or takes past `share.delivery.count.limit` copied to that topic: key, value, timestamp
and headers of the original, plus context headers (`HEADERS`). Meanwhile the record is
ARCHIVING (state 3, persisted), and ARCHIVED once its copy is appended, so the share-partition
start offset waits for the copy. Once per record: a restart finds ARCHIVING records again and
first looks for their copies in the dead-letter partition's tail (the copy may have been
appended just before the crash) before copying what is missing.

Runs on the event loop; reads and appends are short page-cache I/O. Single node.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from tidelog.broker import clock
from tidelog.coordinator.share_partition import SharePartition
from tidelog.errors import ErrorCode, KafkaError
from tidelog.records.batch import RecordBatch, iter_batches
from tidelog.records.builder import NewRecord, build_batch
from tidelog.records.record import iter_records
from tidelog.types import TopicPartition

if TYPE_CHECKING:
    from tidelog.broker.state import Broker

log = logging.getLogger("tidelog.broker.share")
TOPIC_CONFIG = "errors.deadletterqueue.topic.name"
# Context headers on every copy (UTF-8 strings).
TOPIC_HEADER = "__dlq.errors.topic"
PARTITION_HEADER = "__dlq.errors.partition"
OFFSET_HEADER = "__dlq.errors.offset"
GROUP_HEADER = "__dlq.errors.group.id"
DELIVERY_COUNT_HEADER = "__dlq.errors.delivery.count"
REASON_HEADER = "__dlq.errors.reason"
READ_BYTES = 4 * 1024 * 1024
TAIL_SCAN_BYTES = 16 * 1024 * 1024  # how far back a restart looks for copies already made


def dead_letter_partition(broker: Broker, name: str, source_partition: int) -> int | None:
    """The partition of the dead-letter topic a source partition's copies go to (None: the
    topic does not exist and may not be created)."""
    info = broker.topics.get(name)
    if info is None:
        if not broker.config.errors_deadletterqueue_auto_create_topics_enable:
            return None
        info = broker.create_topic(name, 1, {})
        log.info("created dead-letter topic %s", name)
    return source_partition % info.partitions


def copied_already(
    broker: Broker, name: str, partition: int, group_id: str, topic: str, source_partition: int
) -> set[int]:
    """Source offsets whose copies are in the tail of the dead-letter partition (blocking
    reads, bounded by TAIL_SCAN_BYTES)."""
    partition_log = broker.partition_log(name, partition)
    start = partition_log.log_start_offset
    found: set[int] = set()
    offset = start
    scanned = 0
    while offset < partition_log.log_end_offset and scanned < TAIL_SCAN_BYTES:
        read = partition_log.read(offset, READ_BYTES)
        data = b"".join(piece.read_bytes() for piece in read.slices)
        batches = list(iter_batches(data))
        if not batches:
            break
        scanned += len(data)
        for batch in batches:
            for record in iter_records(batch):
                headers = {key: value for key, value in record.headers}
                if (headers.get(GROUP_HEADER) == group_id.encode()
                        and headers.get(TOPIC_HEADER) == topic.encode()
                        and headers.get(PARTITION_HEADER) == str(source_partition).encode()):
                    found.add(int(headers.get(OFFSET_HEADER) or b"-1"))
        offset = batches[-1].next_offset
    return found


def copy_dead_letters(
    broker: Broker,
    group_id: str,
    topic: str,
    source_partition: int,
    share_partition: SharePartition,
    name: str,
    recheck: bool,
) -> list[int]:
    """Copy the share partition's ARCHIVING records to dead-letter topic `name`; returns the
    offsets now copied (all of them unless the topic is missing: then none are, and the records
    are archived without a copy). `recheck`: look for copies made before a restart first."""
    pending = dict(share_partition.dead_letters)
    if not pending:
        return []
    target = dead_letter_partition(broker, name, source_partition)
    if target is None:
        log.warning("dead-letter topic %s of share group %s does not exist: %d records "
                    "archived without a copy", name, group_id, len(pending))
        return list(pending)
    done = copied_already(broker, name, target, group_id, topic, source_partition) if recheck \
        else set()
    wanted = {offset: reason for offset, reason in pending.items() if offset not in done}
    copies: list[NewRecord] = []
    source_log = broker.partition_log(topic, source_partition)
    offset = max(min(wanted, default=source_log.log_end_offset), source_log.log_start_offset)
    last = max(wanted, default=-1)
    while wanted and offset <= last and offset < source_log.log_end_offset:
        read = source_log.read(offset, READ_BYTES)
        data = b"".join(piece.read_bytes() for piece in read.slices)
        batches = list(iter_batches(data))
        if not batches:
            break
        for batch in batches:
            if batch.is_control:
                continue
            for record in iter_records(batch):
                reason = wanted.get(record.offset)
                if reason is None:
                    continue
                count = share_partition.records[record.offset].delivery_count
                context = (
                    (TOPIC_HEADER, topic.encode()),
                    (PARTITION_HEADER, str(source_partition).encode()),
                    (OFFSET_HEADER, str(record.offset).encode()),
                    (GROUP_HEADER, group_id.encode()),
                    (DELIVERY_COUNT_HEADER, str(count).encode()),
                    (REASON_HEADER, reason.encode()),
                )
                copies.append(NewRecord(record.value, record.key, record.headers + context,
                                        record.timestamp))
        offset = batches[-1].next_offset
    if copies:
        now_ms = clock.now_ms()
        target_log = broker.partition_log(name, target)
        try:
            target_log.append([RecordBatch(memoryview(build_batch(copies, now_ms=now_ms)))],
                              now_ms=now_ms)
        except OSError as error:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, str(error)) from None
        broker.append_waiters.notify(TopicPartition(name, target))
    # Offsets the log no longer holds (retention) cannot be copied: archived all the same.
    return list(pending)
