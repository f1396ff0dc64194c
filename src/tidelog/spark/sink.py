"""The `tidelog` sink: `df.write` and `df.writeStream` produce rows with an idempotent producer.

Input columns (Spark's Kafka sink): value (binary or string, required); key (binary or
string), topic (string), partition (int), headers (array<struct<key string, value binary>>)
optional. The `topic` option, when set, overrides the column.

Exactly-once for streaming (docs/decisions.md): Spark replays a micro-batch whose commit it
did not record, with the same (query id, batch id) and the same rows per task. Markers in the
internal topic `__tidelog_spark_sink` (one partition) record progress:
  key "<query id>/<batch id>/<task partition id>"  value {"rows": n}: written by the task
      after every one of its records was acknowledged (flush returned, no delivery error)
  key "<query id>/<batch id>"                      value {"tasks": n, "rows": n}: written by
      the driver in commit()
A task that finds its own marker, or the batch marker, publishes nothing (`markers.py` reads
them incrementally). The task reads the
query and batch id from Spark's local properties `sql.streaming.queryId` and
`streaming.sql.batchId`, which Spark sets for every micro-batch.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from tidelog.spark.client import METADATA_TIMEOUT_S
from tidelog.spark.markers import forget_index, marker_index
from tidelog.spark.options import SourceOptionError, kafka_config

MARKER_TOPIC = "__tidelog_spark_sink"
QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"


class SinkDeliveryError(RuntimeError):
    """The broker refused or lost a record the sink produced."""


@dataclass(frozen=True, slots=True)
class SinkOptions:
    kafka_config: Mapping[str, str]
    topic: str | None
    marker_topic: str


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
        marker_topic=options.get("tidelog.sink.markertopic", MARKER_TOPIC),
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


def produce_batches(
    options: SinkOptions,
    batches: Iterator[pa.RecordBatch],
    marker: tuple[str, Mapping[str, Any]] | None = None,
) -> int:
    """Produce every row and wait until all are acknowledged; then, if given, write the
    marker (key, document) with the same producer. Returns the row count."""
    failures: list[KafkaError] = []

    def on_delivery(error: KafkaError | None, _message: Any) -> None:
        if error is not None:
            failures.append(error)

    producer = _idempotent_producer(options)
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
    _flush(producer, failures)
    if marker is not None:
        # Only after every record above is acknowledged: the marker claims they are stored.
        key, document = marker
        producer.produce(options.marker_topic, json.dumps({**document, "rows": count}).encode(),
                         key.encode(), partition=0, on_delivery=on_delivery)
        _flush(producer, failures)
    return count


def _flush(producer: Producer, failures: list[KafkaError]) -> None:
    remaining = producer.flush(METADATA_TIMEOUT_S * 4)
    if failures or remaining:
        _forget_producers()
        raise SinkDeliveryError(
            f"{len(failures)} records failed, {remaining} unacknowledged: "
            + "; ".join(str(f) for f in failures[:3])
        )


def ensure_marker_topic(options: SinkOptions) -> None:
    """Create the marker topic if it does not exist (driver side)."""
    admin = AdminClient(dict(options.kafka_config))
    futures = admin.create_topics([NewTopic(options.marker_topic, 1, 1)])
    for future in futures.values():
        try:
            future.result(METADATA_TIMEOUT_S)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise


def write_marker(
    producer: Producer, options: SinkOptions, key: str, document: Mapping[str, Any]
) -> None:
    failures: list[KafkaError] = []
    producer.produce(options.marker_topic, json.dumps(document).encode(), key.encode(),
                     partition=0,
                     on_delivery=lambda error, _m: failures.append(error) if error else None)
    _flush(producer, failures)


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
    """`df.writeStream.format("tidelog")`: exactly-once per (query id, batch id) via markers."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options
        ensure_marker_topic(options)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        context = TaskContext.get()
        if context is None:
            raise RuntimeError("TidelogStreamWriter.write must run inside a Spark task")
        query_id = context.getLocalProperty(QUERY_ID_PROPERTY) or ""
        batch_id = int(context.getLocalProperty(BATCH_ID_PROPERTY) or -1)
        task = context.partitionId()
        batch_key = f"{query_id}/{batch_id}"
        task_key = f"{batch_key}/{task}"
        try:
            done = marker_index(self.options.kafka_config, self.options.marker_topic).contains(
                batch_key, task_key
            )
        except Exception:
            forget_index(self.options.kafka_config, self.options.marker_topic)
            raise
        if done:
            return SinkCommit(query_id, batch_id, task, 0, True)
        rows = produce_batches(self.options, iterator, marker=(task_key, {}))
        return SinkCommit(query_id, batch_id, task, rows, False)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        done = [m for m in messages if isinstance(m, SinkCommit)]
        if not done:
            return
        write_marker(
            _idempotent_producer(self.options),
            self.options,
            f"{done[0].query_id}/{batchId}",
            {"tasks": len(done), "rows": sum(m.rows for m in done)},
        )

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Records of finished tasks stay published; their markers make the retry skip them."""
