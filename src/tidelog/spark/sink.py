"""The `tidelog` sink: `df.write` produces with an idempotent producer, `df.writeStream` with
one Kafka transaction per (query id, batch id, task).

Input columns (Spark's Kafka sink): value (binary or string, required); key (binary or
string), topic (string), partition (int), headers (array<struct<key string, value binary>>)
optional. The `topic` option, when set, overrides the column.

Exactly-once for streaming (docs/decisions.md, docs/spark.md): Spark replays a micro-batch
whose commit it did not record, with the same (query id, batch id) and the same rows per task.
Every write task of batch B, task partition T of query Q:
  1. starts a transactional producer with transactional.id "<prefix><Q>-<T>" and calls
     init_transactions: the coordinator fences every earlier attempt of (Q, T) (epoch bump)
     and aborts its open transaction (or completes one already being committed);
  2. reads the committed offset of the progress group "<prefix><Q>-<T>" on partition 0 of the
     progress topic `__tidelog_spark_sink` (read_committed, so require_stable): the next batch
     id this task has to write. If it is above B, batch B is already in the output: publish
     nothing;
  3. otherwise, in one transaction: produces the rows, TxnOffsetCommit of B + 1 for that group
     (metadata {"batch": B, "rows": n}), commit.
The rows and the batch id become visible to read_committed readers together or not at all.
The task reads Q and B from Spark's local properties `sql.streaming.queryId` and
`streaming.sql.batchId`, which Spark sets for every micro-batch. Nothing is ever written to the
progress topic: its partition only names the offset key (Kafka refuses offsets of a partition
that does not exist).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from tidelog.spark.client import METADATA_TIMEOUT_S, consumer_config
from tidelog.spark.options import SourceOptionError, kafka_config

PROGRESS_TOPIC = "__tidelog_spark_sink"
TRANSACTIONAL_ID_PREFIX = "tidelog-spark-"
QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"


class SinkDeliveryError(RuntimeError):
    """The broker refused or lost a record the sink produced."""


@dataclass(frozen=True, slots=True)
class SinkOptions:
    kafka_config: Mapping[str, str]
    topic: str | None
    progress_topic: str
    transactional_id_prefix: str


@dataclass(frozen=True, slots=True)
class SinkCommit(WriterCommitMessage):  # type: ignore[misc]
    query_id: str
    batch_id: int
    task: int
    rows: int
    skipped: bool


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    options = {str(k).lower(): str(v) for k, v in options.items()}
    return SinkOptions(
        kafka_config=kafka_config(options),
        topic=options.get("topic") or None,
        # The option keeps its name from the marker scheme this replaced.
        progress_topic=options.get("tidelog.sink.markertopic", PROGRESS_TOPIC),
        transactional_id_prefix=options.get("tidelog.sink.transactionalidprefix",
                                            TRANSACTIONAL_ID_PREFIX),
    )


def _as_bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    return bytes(value)


# One producer per configuration per Python worker: Spark reuses workers across tasks, and an
# idempotent producer costs ~0.5 s to start (producer id), which would dominate a micro-batch.
_PRODUCERS: dict[tuple[tuple[str, str], ...], Producer] = {}
MAX_CACHED_PRODUCERS = 8


def _idempotent_producer(options: SinkOptions) -> Producer:
    config: dict[str, Any] = dict(options.kafka_config)
    config.update({"enable.idempotence": True, "acks": "all"})
    config.setdefault("linger.ms", 5)
    key = tuple(sorted((k, str(v)) for k, v in config.items()))
    producer = _PRODUCERS.get(key)
    if producer is None:
        if len(_PRODUCERS) >= MAX_CACHED_PRODUCERS:
            _PRODUCERS.clear()
        producer = _PRODUCERS[key] = Producer(config)
    return producer


def _forget_producers() -> None:
    """After a delivery failure the idempotent producer may be fenced: start afresh."""
    _PRODUCERS.clear()


def produce_batches(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> int:
    """Produce every row with the worker's idempotent producer and wait until all are
    acknowledged. Returns the row count."""
    failures: list[KafkaError] = []
    producer = _idempotent_producer(options)
    count = _produce_rows(producer, options, batches, failures)
    _flush(producer, failures)
    return count


def _produce_rows(
    producer: Producer,
    options: SinkOptions,
    batches: Iterator[pa.RecordBatch],
    failures: list[KafkaError],
) -> int:
    """Hand every row to `producer`; delivery errors are appended to `failures`."""

    def on_delivery(error: KafkaError | None, _message: Any) -> None:
        if error is not None:
            failures.append(error)

    count = 0
    for batch in batches:
        names = batch.schema.names
        if "value" not in names:
            raise SourceOptionError("the sink needs a value column")
        values = batch.column("value").to_pylist()
        nothing: list[Any] = [None] * len(values)
        keys = batch.column("key").to_pylist() if "key" in names else nothing
        topics = batch.column("topic").to_pylist() if "topic" in names else nothing
        partitions = batch.column("partition").to_pylist() if "partition" in names else nothing
        headers = batch.column("headers").to_pylist() if "headers" in names else nothing
        for value, key, topic, partition, header in zip(
            values, keys, topics, partitions, headers, strict=True
        ):
            target = options.topic or topic
            if not target:
                raise SourceOptionError("no topic: set the topic option or a topic column")
            extra: dict[str, Any] = {}
            if partition is not None:
                extra["partition"] = partition
            if header:
                extra["headers"] = [(h["key"], _as_bytes(h["value"])) for h in header]
            while True:
                try:
                    producer.produce(target, _as_bytes(value), _as_bytes(key),
                                     on_delivery=on_delivery, **extra)
                    break
                except BufferError:
                    producer.poll(0.05)
            count += 1
        producer.poll(0)
    return count


def _flush(producer: Producer, failures: list[KafkaError]) -> None:
    remaining = producer.flush(METADATA_TIMEOUT_S * 4)
    if failures or remaining:
        _forget_producers()
        raise SinkDeliveryError(
            f"{len(failures)} records failed, {remaining} unacknowledged: "
            + "; ".join(str(f) for f in failures[:3])
        )


def ensure_progress_topic(options: SinkOptions) -> None:
    """Create the progress topic if it does not exist (driver side)."""
    admin = AdminClient(dict(options.kafka_config))
    futures = admin.create_topics([NewTopic(options.progress_topic, 1, 1)])
    for future in futures.values():
        try:
            future.result(METADATA_TIMEOUT_S)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise


@dataclass(frozen=True, slots=True)
class TaskTransaction:
    """Names of one write task's transaction: (query id, task partition id) -> the
    transactional id and the progress group (the same string)."""

    query_id: str
    batch_id: int
    task: int
    prefix: str

    @property
    def transactional_id(self) -> str:
        return f"{self.prefix}{self.query_id}-{self.task}"

    @property
    def progress_group(self) -> str:
        return self.transactional_id


def committed_batch(options: SinkOptions, consumer: Consumer) -> int:
    """The next batch id the consumer's progress group (one query, one task) has to write;
    0 if it never committed one."""
    partition = TopicPartition(options.progress_topic, 0)
    answer = consumer.committed([partition], timeout=METADATA_TIMEOUT_S)[0]
    if answer.error is not None:
        raise KafkaException(answer.error)
    return max(int(answer.offset), 0)  # -1001: no offset committed yet


def write_task_transaction(
    options: SinkOptions,
    txn: TaskTransaction,
    batches: Iterator[pa.RecordBatch],
    before_commit: Callable[[], None] = lambda: None,
) -> int | None:
    """Publish one task's rows and its batch id in one transaction (module docstring).

    Returns the row count, or None when an earlier attempt already committed this batch.
    `before_commit` runs after every row was handed to the producer, before the commit
    (tests use it to be killed there)."""
    config: dict[str, Any] = dict(options.kafka_config)
    config.update({"transactional.id": txn.transactional_id, "acks": "all",
                   "enable.idempotence": True})
    config.setdefault("linger.ms", 5)
    # A new producer per task: a cached one may have been fenced meanwhile by an attempt of the
    # same (query, task) in another worker, and init_transactions is what fences and resolves
    # the earlier attempts. ~60 ms per task on a local broker (docs/spark.md).
    producer = Producer(config)
    consumer = Consumer(consumer_config({**options.kafka_config,
                                         "group.id": txn.progress_group,
                                         "isolation.level": "read_committed"}))
    try:
        producer.init_transactions(METADATA_TIMEOUT_S)
        if committed_batch(options, consumer) > txn.batch_id:
            return None
        failures: list[KafkaError] = []
        producer.begin_transaction()
        try:
            count = _produce_rows(producer, options, batches, failures)
            progress = TopicPartition(options.progress_topic, 0, txn.batch_id + 1,
                                      json.dumps({"batch": txn.batch_id, "rows": count}))
            producer.send_offsets_to_transaction([progress], consumer.consumer_group_metadata(),
                                                 METADATA_TIMEOUT_S)
            before_commit()
            producer.commit_transaction(METADATA_TIMEOUT_S * 4)
        except BaseException:
            _abort_quietly(producer)
            raise
        if failures:  # commit_transaction raises first; kept so no error is ever dropped
            raise SinkDeliveryError("; ".join(str(f) for f in failures[:3]))
        return count
    finally:
        consumer.close()
        # Destroys the producer now (its threads and sockets), not at some later collection.
        del producer


def _abort_quietly(producer: Producer) -> None:
    """Abort after a failure; if even that fails, the next attempt's init_transactions (or
    transaction.timeout.ms) aborts the transaction."""
    try:
        producer.abort_transaction(METADATA_TIMEOUT_S)
    except KafkaException:
        pass


class TidelogBatchWriter(DataSourceArrowWriter):  # type: ignore[misc]
    """`df.write.format("tidelog")`: idempotent produce, at-least-once across task retries."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        context = TaskContext.get()
        task = context.partitionId() if context is not None else 0
        rows = produce_batches(self.options, iterator)
        return SinkCommit("", -1, task, rows, False)


class TidelogStreamWriter(DataSourceStreamArrowWriter):  # type: ignore[misc]
    """`df.writeStream.format("tidelog")`: one transaction per (query id, batch id, task)."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options
        ensure_progress_topic(options)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        context = TaskContext.get()
        if context is None:
            raise RuntimeError("TidelogStreamWriter.write must run inside a Spark task")
        query_id = context.getLocalProperty(QUERY_ID_PROPERTY)
        batch_id = context.getLocalProperty(BATCH_ID_PROPERTY)
        if not query_id or batch_id is None:
            raise RuntimeError("no streaming query id / batch id in the task's properties")
        txn = TaskTransaction(query_id, int(batch_id), context.partitionId(),
                              self.options.transactional_id_prefix)
        rows = write_task_transaction(self.options, txn, iterator, self.before_commit)
        return SinkCommit(query_id, txn.batch_id, txn.task, rows or 0, rows is None)

    def before_commit(self) -> None:
        """Called in a task between its last record and its commit; a hook for tests."""

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Every task already committed its own transaction: nothing is left to publish."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Committed tasks stay published; their progress groups make the replay skip them.
        A failed task aborted its transaction (or its successor's init_transactions will)."""
