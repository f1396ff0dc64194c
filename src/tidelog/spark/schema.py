"""Row schema of the tidelog data source: Spark's Kafka source schema, in Spark and Arrow form.

Columns, in order (Spark's `kafka` format):
  key            binary     null when the record has no key
  value          binary     null for a tombstone
  topic          string
  partition      int
  offset         long
  timestamp      timestamp  record timestamp, Arrow timestamp[us, tz=UTC]
  timestampType  int        0 CreateTime, 1 LogAppendTime, -1 none
  headers        array<struct<key string, value binary>>   only with includeHeaders=true;
                 null when the record has no headers

The Arrow schema must equal what PySpark derives from the Spark schema (`to_arrow_schema(...,
timezone="UTC")`), or Spark rejects the batch: every field nullable, list element named
"element", microsecond UTC timestamps.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

_BASE_DDL = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
_HEADERS_DDL = "headers array<struct<key string, value binary>>"

HEADER_TYPE = pa.list_(
    pa.field("element", pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
)
_BASE_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestampType", pa.int32()),
]


def spark_ddl(include_headers: bool) -> str:
    return f"{_BASE_DDL}, {_HEADERS_DDL}" if include_headers else _BASE_DDL


def arrow_schema(include_headers: bool) -> pa.Schema:
    fields = list(_BASE_FIELDS)
    if include_headers:
        fields.append(pa.field("headers", HEADER_TYPE))
    return pa.schema(fields)


def messages_to_batch(
    messages: Sequence[Any], topic: str, partition: int, include_headers: bool
) -> pa.RecordBatch:
    """Build one Arrow batch from confluent_kafka Message objects of one partition.

    One pass over the messages filling plain lists: the per-record cost is a handful of C
    accessor calls, which is what bounds the source's rows/s."""
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    offsets: list[int] = []
    timestamps: list[int] = []
    timestamp_types: list[int] = []
    headers: list[list[dict[str, Any]] | None] = []
    for message in messages:
        keys.append(message.key())
        values.append(message.value())
        offsets.append(message.offset())
        kind, timestamp_ms = message.timestamp()
        timestamps.append(timestamp_ms * 1000)
        # librdkafka: 0 none, 1 create, 2 log append; Spark: -1, 0, 1.
        timestamp_types.append(kind - 1)
        if include_headers:
            pairs = message.headers()
            headers.append([{"key": k, "value": v} for k, v in pairs] if pairs else None)
    count = len(offsets)
    columns = [
        pa.array(keys, pa.binary()),
        pa.array(values, pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), count),
        pa.repeat(pa.scalar(partition, pa.int32()), count),
        pa.array(offsets, pa.int64()),
        pa.array(timestamps, pa.timestamp("us", tz="UTC")),
        pa.array(timestamp_types, pa.int32()),
    ]
    if include_headers:
        columns.append(pa.array(headers, HEADER_TYPE))
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema(include_headers))


def conform(table: pa.Table, topic: str, partition: int, include_headers: bool) -> pa.Table:
    """Give an archived Parquet table (which lacks the partition-by columns) the source schema."""
    count = table.num_rows
    schema = arrow_schema(include_headers)
    columns = []
    for field in schema:
        if field.name == "topic":
            columns.append(pa.repeat(pa.scalar(topic, pa.string()), count))
        elif field.name == "partition":
            columns.append(pa.repeat(pa.scalar(partition, pa.int32()), count))
        elif field.name == "headers" and "headers" not in table.column_names:
            columns.append(pa.nulls(count, HEADER_TYPE))
        else:
            columns.append(table.column(field.name).cast(field.type))
    return pa.Table.from_arrays(columns, schema=schema)
