"""Decode v2 records sections into Arrow column buffers, with no Python object per record.

`RecordColumns` accumulates the records of ONE partition, batch by batch (the decompressed
records section of each, see `tidelog.records.record` for the record layout), and `finish()`
returns buffers ready for ``pyarrow.Array.from_buffers`` (this module never imports pyarrow).
The work is done by the C extension `tidelog.records._columnar`; a pure-Python fallback with
the same semantics (built on `record._decode`) runs when the extension is not built, and
`NATIVE` says which one is active.

Buffers of `Columns` (all integers little-endian; `rows` = records kept)::

    offsets          int64 x rows         baseOffset + offsetDelta
    timestamps_us    int64 x rows         timestamp in MICROseconds (ms * 1000): baseTimestamp +
                                          timestampDelta, or the batch's log append time
    timestamp_types  int32 x rows         0 create time, 1 log append time
    key_validity     ceil(rows / 8) bytes Arrow validity bitmap, bit i (LSB first) = 1 when row
                                          i has a key; None when no key is null (key_nulls = 0)
    key_offsets      int32 x (rows + 1)   Arrow binary offsets: row i's key is
                                          key_data[key_offsets[i]:key_offsets[i + 1]]
                                          (empty for a null key); starts at 0
    key_data         bytes                the keys, back to back
    value_*          the same three buffers (and value_nulls) for the values

`HeaderColumns` (None unless include_headers) is a list<struct<key string, value binary>>::

    list_validity    ceil(rows / 8) bytes bit i = 0 when record i has ZERO headers (a null list,
                                          as Spark's Kafka source gives), None when none is
    list_offsets     int32 x (rows + 1)   record i's headers are entries
                                          list_offsets[i] .. list_offsets[i + 1] - 1
    key_offsets      int32 x (entries+1)  UTF-8 header keys (never null) in key_data
    value_validity   ceil(entries / 8)    bit j = 0 for a null header value; None when none is
    value_offsets    int32 x (entries+1)  header values in value_data

Bits past the last row of a bitmap are 0. Records outside [start_offset, end_offset) are
decoded and checked but not kept. Checks are those of `record._decode` (exactly `count`
records, each `length` matching its fields, no trailing bytes, -1 as the only negative length,
UTF-8 header keys, varints of at most 10 bytes, every length inside its record) plus what int64
columns need: a varint wider than 64 bits (except a LOG_APPEND_TIME batch's ignored
timestampDelta), an offset outside int64 or a timestamp whose microseconds leave int64 raise
CorruptRecordError too. A failed append leaves the rows appended before it untouched. Offsets
are int32 as Arrow's binary type wants: an append that would take a data column (or the
header entries) past 2**31 - 1 raises OverflowError instead; call finish() well before.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple, Protocol

from tidelog.errors import CorruptRecordError
from tidelog.records.record import MIN_RECORD_SIZE, Record, _decode

if TYPE_CHECKING:
    from tidelog.records._columnar import RawColumns, RawHeaders

Buffer = bytes | bytearray | memoryview

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_TIMESTAMP_MS_LIMIT = _INT64_MAX // 1000
ARROW_MAX_OFFSET = (1 << 31) - 1


class HeaderColumns(NamedTuple):
    list_validity: bytes | None
    list_nulls: int
    list_offsets: bytes
    entries: int
    key_offsets: bytes
    key_data: bytes
    value_validity: bytes | None
    value_nulls: int
    value_offsets: bytes
    value_data: bytes


class Columns(NamedTuple):
    rows: int
    offsets: bytes
    timestamps_us: bytes
    timestamp_types: bytes
    key_validity: bytes | None
    key_nulls: int
    key_offsets: bytes
    key_data: bytes
    value_validity: bytes | None
    value_nulls: int
    value_offsets: bytes
    value_data: bytes
    headers: HeaderColumns | None


class _Builder(Protocol):
    @property
    def rows(self) -> int: ...

    @property
    def data_bytes(self) -> int: ...

    def append(
        self, records: Buffer, count: int, base_offset: int, base_timestamp: int,
        log_append_time: int, start_offset: int, end_offset: int,
    ) -> int: ...

    def finish(self) -> RawColumns: ...


def _load_native() -> Callable[[bool], _Builder] | None:
    try:
        from tidelog.records._columnar import ColumnBuilder
    except ImportError:
        return None
    return ColumnBuilder


_NATIVE_BUILDER = _load_native()
NATIVE: bool = _NATIVE_BUILDER is not None


class RecordColumns:
    """Accumulates records of ONE partition into column buffers (layout: module docstring).

    `native=None` takes the C decoder when it is built; True demands it (ImportError
    otherwise), False takes the pure-Python fallback."""

    __slots__ = ("_builder",)

    def __init__(self, include_headers: bool, *, native: bool | None = None) -> None:
        if native is None:
            native = NATIVE
        if not native:
            self._builder: _Builder = _PythonBuilder(include_headers)
        elif _NATIVE_BUILDER is None:
            raise ImportError("tidelog.records._columnar is not built")
        else:
            self._builder = _NATIVE_BUILDER(include_headers)

    @property
    def rows(self) -> int:
        """Rows appended since the last finish()."""
        return self._builder.rows

    @property
    def data_bytes(self) -> int:
        """Key, value and header bytes held since the last finish()."""
        return self._builder.data_bytes

    def append(
        self, records: Buffer, count: int, base_offset: int, base_timestamp: int,
        log_append_time: int, start_offset: int, end_offset: int,
    ) -> int:
        """Decode `count` records of a decompressed v2 records section and keep those with
        start_offset <= offset < end_offset; returns how many were kept.

        log_append_time >= 0 marks a LOG_APPEND_TIME batch (pass its maxTimestamp): every
        record takes that timestamp and timestampType 1; otherwise timestamp = base_timestamp
        + timestampDelta and type 0. Malformed bytes raise CorruptRecordError, an Arrow offset
        past 2 GiB OverflowError; either way the rows appended before stay intact."""
        return self._builder.append(
            records, count, base_offset, base_timestamp, log_append_time, start_offset,
            end_offset,
        )

    def finish(self) -> Columns:
        """Return the columns and reset the builder to empty."""
        (rows, offsets, timestamps_us, timestamp_types, key_validity, key_nulls, key_offsets,
         key_data, value_validity, value_nulls, value_offsets, value_data,
         headers) = self._builder.finish()
        return Columns(
            rows, offsets, timestamps_us, timestamp_types, key_validity, key_nulls,
            key_offsets, key_data, value_validity, value_nulls, value_offsets, value_data,
            None if headers is None else HeaderColumns(*headers),
        )


class _Binary:
    """One Arrow binary column being built: validity bytes (0/1 per slot), offsets, data."""

    __slots__ = ("data", "nulls", "offsets", "valid")

    def __init__(self) -> None:
        self.valid = bytearray()
        self.nulls = 0
        self.offsets = array("i", [0])
        self.data = bytearray()

    def push(self, value: bytes | None) -> None:
        if value is None:
            self.valid.append(0)
            self.nulls += 1
        else:
            self.valid.append(1)
            self.data += value
        self.offsets.append(len(self.data))

    def validity(self) -> bytes | None:
        return _bitmap(self.valid) if self.nulls else None


class _PythonBuilder:
    """The fallback: `record._decode` into scratch Records, range checks, then commit."""

    def __init__(self, include_headers: bool) -> None:
        self._include_headers = include_headers
        self._reset()

    def _reset(self) -> None:
        self._offsets = array("q")
        self._timestamps_us = array("q")
        self._timestamp_types = array("i")
        self._keys = _Binary()
        self._values = _Binary()
        self._list_valid = bytearray()
        self._list_offsets = array("i", [0])
        self._header_keys = _Binary()
        self._header_values = _Binary()

    @property
    def rows(self) -> int:
        return len(self._offsets)

    @property
    def data_bytes(self) -> int:
        return (len(self._keys.data) + len(self._values.data) + len(self._header_keys.data)
                + len(self._header_values.data))

    def append(
        self, records: Buffer, count: int, base_offset: int, base_timestamp: int,
        log_append_time: int, start_offset: int, end_offset: int,
    ) -> int:
        data = bytes(records)
        if count < 0:
            raise CorruptRecordError(f"negative recordsCount {count}")
        if count > len(data) // MIN_RECORD_SIZE:
            raise CorruptRecordError(f"{len(data)} bytes cannot hold {count} records")
        log_append = log_append_time >= 0
        decoded = _decode(
            data, count, base_offset, base_timestamp, log_append_time if log_append else None
        )
        kept: list[Record] = []
        for record in decoded:
            _check_int64_columns(record, base_offset, base_timestamp, log_append)
            if start_offset <= record.offset < end_offset:
                kept.append(record)
        self._check_arrow_bounds(kept)
        self._commit(kept, 1 if log_append else 0)
        return len(kept)

    def _check_arrow_bounds(self, kept: list[Record]) -> None:
        key_bytes = sum(len(r.key) for r in kept if r.key is not None)
        value_bytes = sum(len(r.value) for r in kept if r.value is not None)
        sizes = [len(self._keys.data) + key_bytes, len(self._values.data) + value_bytes]
        if self._include_headers:
            headers = [header for record in kept for header in record.headers]
            sizes.append(len(self._header_keys.offsets) - 1 + len(headers))
            sizes.append(len(self._header_keys.data)
                         + sum(len(key.encode("utf-8")) for key, _ in headers))
            sizes.append(len(self._header_values.data)
                         + sum(len(value) for _, value in headers if value is not None))
        if max(sizes) > ARROW_MAX_OFFSET:
            raise OverflowError("a column would pass Arrow's 2 GiB int32 offsets")

    def _commit(self, kept: list[Record], timestamp_type: int) -> None:
        for record in kept:
            self._offsets.append(record.offset)
            self._timestamps_us.append(record.timestamp * 1000)
            self._timestamp_types.append(timestamp_type)
            self._keys.push(record.key)
            self._values.push(record.value)
            if self._include_headers:
                self._list_valid.append(1 if record.headers else 0)
                for key, value in record.headers:
                    self._header_keys.push(key.encode("utf-8"))
                    self._header_values.push(value)
                self._list_offsets.append(len(self._header_keys.offsets) - 1)

    def finish(self) -> RawColumns:
        keys, values = self._keys, self._values
        headers: RawHeaders | None = None
        if self._include_headers:
            list_nulls = self._list_valid.count(0)
            header_keys, header_values = self._header_keys, self._header_values
            headers = (
                _bitmap(self._list_valid) if list_nulls else None, list_nulls,
                _little_endian(self._list_offsets), len(header_keys.offsets) - 1,
                _little_endian(header_keys.offsets), bytes(header_keys.data),
                header_values.validity(), header_values.nulls,
                _little_endian(header_values.offsets), bytes(header_values.data),
            )
        columns: RawColumns = (
            len(self._offsets), _little_endian(self._offsets),
            _little_endian(self._timestamps_us), _little_endian(self._timestamp_types),
            keys.validity(), keys.nulls, _little_endian(keys.offsets), bytes(keys.data),
            values.validity(), values.nulls, _little_endian(values.offsets), bytes(values.data),
            headers,
        )
        self._reset()
        return columns


def _check_int64_columns(
    record: Record, base_offset: int, base_timestamp: int, log_append: bool
) -> None:
    # _decode computes with Python ints; the columns (and the C decoder) are int64.
    if not (_INT64_MIN <= record.offset - base_offset <= _INT64_MAX
            and _INT64_MIN <= record.offset <= _INT64_MAX):
        raise CorruptRecordError("offset outside int64")
    if not log_append and not _INT64_MIN <= record.timestamp - base_timestamp <= _INT64_MAX:
        raise CorruptRecordError("timestampDelta outside int64")
    if not -_TIMESTAMP_MS_LIMIT <= record.timestamp <= _TIMESTAMP_MS_LIMIT:
        raise CorruptRecordError("timestamp does not fit int64 microseconds")


def _bitmap(valid: bytearray) -> bytes:
    """Pack one 0/1 byte per slot into an LSB-first bitmap."""
    bits = bytearray((len(valid) + 7) // 8)
    for index in range(len(valid)):
        if valid[index]:
            bits[index >> 3] |= 1 << (index & 7)
    return bytes(bits)


def _little_endian(values: array[int]) -> bytes:
    if sys.byteorder == "big":
        values = array(values.typecode, values)
        values.byteswap()
    return values.tobytes()
