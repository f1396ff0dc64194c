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
from itertools import chain
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Message

from tidelog.records.columnar import Columns, HeaderColumns

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


_TIMESTAMP = pa.timestamp("us", tz="UTC")


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

    One C-level map per column (much cheaper per record than a loop of appends), then
    the arithmetic (ms -> us, librdkafka's timestamp kinds -> Spark's) on whole Arrow arrays:
    the per-record Python work is what bounds the source's rows/s."""
    count = len(messages)
    # map() over the C method descriptors runs the loop in C: no Python frame per record.
    keys = pa.array(list(map(Message.key, messages)), pa.binary())
    values = pa.array(list(map(Message.value, messages)), pa.binary())
    offsets = _offsets(messages)
    # timestamp() is a (kind, ms) pair: flatten the pairs in C into one int64 array and read
    # it as fixed-size lists of 2, instead of unpacking each pair in Python (zip(*pairs) was
    # ~60% of this function's time).
    pairs = pa.FixedSizeListArray.from_arrays(
        pa.array(list(chain.from_iterable(map(Message.timestamp, messages))), pa.int64()), 2
    )
    stamps = pc.multiply(pc.list_element(pairs, 1), 1000).cast(pa.timestamp("us", tz="UTC"))
    # librdkafka: 0 none, 1 create, 2 log append; Spark: -1, 0, 1.
    timestamp_types = pc.subtract(
        pc.list_element(pairs, 0).cast(pa.int32()), pa.scalar(1, pa.int32())
    )
    columns = [
        keys,
        values,
        pa.repeat(pa.scalar(topic, pa.string()), count),
        pa.repeat(pa.scalar(partition, pa.int32()), count),
        offsets,
        stamps,
        timestamp_types,
    ]
    if include_headers:
        # A consumed record's headers are a list of (str, bytes | None) pairs, or None.
        headers: list[Any] = list(map(Message.headers, messages))
        columns.append(pa.array(
            [[{"key": k, "value": v} for k, v in hs] if hs else None for hs in headers],
            HEADER_TYPE,
        ))
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema(include_headers))


def columns_to_batch(
    columns: Columns, topic: str, partition: int, include_headers: bool
) -> pa.RecordBatch:
    """Build one Arrow batch, zero-copy, from the natively decoded buffers of `RecordColumns`."""
    rows = columns.rows
    arrays = [
        pa.Array.from_buffers(
            pa.binary(), rows, _buffers(columns.key_validity, columns.key_offsets,
                                        columns.key_data), columns.key_nulls
        ),
        pa.Array.from_buffers(
            pa.binary(), rows, _buffers(columns.value_validity, columns.value_offsets,
                                        columns.value_data), columns.value_nulls
        ),
        pa.repeat(pa.scalar(topic, pa.string()), rows),
        pa.repeat(pa.scalar(partition, pa.int32()), rows),
        pa.Array.from_buffers(pa.int64(), rows, [None, pa.py_buffer(columns.offsets)], 0),
        pa.Array.from_buffers(
            _TIMESTAMP, rows, [None, pa.py_buffer(columns.timestamps_us)], 0
        ),
        pa.Array.from_buffers(
            pa.int32(), rows, [None, pa.py_buffer(columns.timestamp_types)], 0
        ),
    ]
    if include_headers:
        if columns.headers is None:
            raise ValueError("headers were not decoded (RecordColumns(include_headers=False))")
        arrays.append(_headers_array(rows, columns.headers))
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(include_headers))


def _buffers(validity: Any, offsets: Any, data: Any) -> list[pa.Buffer | None]:
    return [
        None if validity is None else pa.py_buffer(validity),
        pa.py_buffer(offsets),
        pa.py_buffer(data),
    ]


def _headers_array(rows: int, headers: HeaderColumns) -> pa.Array:
    entries = headers.entries
    keys = pa.Array.from_buffers(
        pa.string(), entries, _buffers(None, headers.key_offsets, headers.key_data), 0
    )
    values = pa.Array.from_buffers(
        pa.binary(), entries,
        _buffers(headers.value_validity, headers.value_offsets, headers.value_data),
        headers.value_nulls,
    )
    entry_type = HEADER_TYPE.value_type
    structs = pa.StructArray.from_arrays([keys, values], fields=list(entry_type))
    return pa.Array.from_buffers(
        HEADER_TYPE, rows,
        [None if headers.list_validity is None else pa.py_buffer(headers.list_validity),
         pa.py_buffer(headers.list_offsets)],
        headers.list_nulls, children=[structs],
    )


def _offsets(messages: Sequence[Any]) -> pa.Array:
    """The offset column. Offsets in one partition only grow, so when the first and last are
    len - 1 apart (nothing compacted away) they are first, first + 1, ...: computed on Arrow
    arrays instead of one offset() call per record."""
    count = len(messages)
    first = messages[0].offset() if count else 0
    if count and messages[-1].offset() - first == count - 1:
        return pc.cumulative_sum(pa.repeat(pa.scalar(1, pa.int64()), count), start=first - 1)
    return pa.array(list(map(Message.offset, messages)), pa.int64())


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
