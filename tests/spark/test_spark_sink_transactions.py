"""The sink's per-task transaction against a real broker, without Spark: a zombie attempt is
fenced, a committed batch is skipped, an aborted one is written again."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition

from tidelog.spark.sink import (
    TaskTransaction,
    ensure_progress_topic,
    parse_sink_options,
    write_task_transaction,
)

from .helpers import read_to_end


def _rows(batch: int, count: int) -> list[pa.RecordBatch]:
    values = [f"{batch}:{i}".encode() for i in range(count)]
    return [pa.record_batch([pa.array(values, pa.binary())], names=["value"])]


def test_zombie_attempt_is_fenced_and_a_committed_batch_is_skipped(  # type: ignore[no-untyped-def]
    bootstrap, new_topic
) -> None:
    topic = new_topic()
    options = parse_sink_options({"kafka.bootstrap.servers": bootstrap, "topic": topic,
                                  "tidelog.sink.transactionalIdPrefix": f"{topic}-"})
    ensure_progress_topic(options)
    txn = TaskTransaction("query", 0, 3, options.transactional_id_prefix)
    second: list[int | None] = []

    def retry_meanwhile() -> None:
        # Attempt 1 has produced its rows and its batch id, not yet committed; attempt 2 of
        # the same (query, batch, task) starts: it fences attempt 1, aborts its transaction
        # and publishes the batch itself.
        second.append(write_task_transaction(options, txn, iter(_rows(0, 5))))

    with pytest.raises(KafkaException, match=r"(?i)fenced"):
        write_task_transaction(options, txn, iter(_rows(0, 5)), retry_meanwhile)
    assert second == [5]
    # A third attempt (a replay after Spark's commit failed) finds batch 0 committed.
    assert write_task_transaction(options, txn, iter(_rows(0, 5))) is None
    assert write_task_transaction(options, TaskTransaction("query", 1, 3, txn.prefix),
                                  iter(_rows(1, 2))) == 2
    committed = sorted(v for _, v in read_to_end(bootstrap, topic, 1, "read_committed"))
    assert committed == sorted([f"0:{i}".encode() for i in range(5)] + [b"1:0", b"1:1"])
    everything = read_to_end(bootstrap, topic, 1, "read_uncommitted")
    assert len(everything) == 12  # attempt 1's five rows are in the log, aborted
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": txn.progress_group})
    try:
        progress = consumer.committed([TopicPartition(options.progress_topic, 0)], timeout=10)[0]
    finally:
        consumer.close()
    assert progress.offset == 2 and json.loads(progress.metadata) == {"batch": 1, "rows": 2}
