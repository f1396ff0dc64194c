"""The columnar decoder (native and fallback) against iter_records / record._decode: equal
columns for valid batches, CorruptRecordError exactly when _decode raises for mutated or random
bytes, rows appended before a failure kept, and Arrow arrays that validate."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from tidelog.errors import CorruptRecordError
from tidelog.records.batch import ATTR_TIMESTAMP_TYPE, RecordBatch, TimestampType
from tidelog.records.builder import NewRecord, build_batch
from tidelog.records.columnar import NATIVE, Columns, RecordColumns
from tidelog.records.record import Record, _decode, iter_records
from tidelog.records.varint import encode_varint

from .strategies import new_records

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
Row = tuple[int, int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...] | None]


def section_of(batch: bytes | bytearray) -> tuple[bytes, int, int, int, int]:
    """(records section, count, base_offset, base_timestamp, log_append_time) of a batch."""
    view = RecordBatch(batch)
    log_append = view.max_timestamp if view.attributes & ATTR_TIMESTAMP_TYPE else -1
    return (bytes(view.records_bytes), view.records_count, view.base_offset,
            view.base_timestamp, log_append)


def expected_rows(record: Record, log_append: bool, include_headers: bool) -> Row:
    headers = (record.headers or None) if include_headers else None
    return (record.offset, record.timestamp * 1000, 1 if log_append else 0, record.key,
            record.value, headers)


def _binary(validity: bytes | None, offsets: bytes, data: bytes, count: int) -> list[bytes | None]:
    ends = memoryview(offsets).cast("i")
    assert len(ends) == count + 1 and ends[0] == 0 and ends[count] == len(data)
    return [
        data[ends[i]:ends[i + 1]] if validity is None or validity[i >> 3] >> (i & 7) & 1
        else None
        for i in range(count)
    ]


def rows_of(columns: Columns) -> list[Row]:
    """Read the buffers back into rows (checks the layout the docstring promises)."""
    count = columns.rows
    offsets = memoryview(columns.offsets).cast("q").tolist()
    timestamps = memoryview(columns.timestamps_us).cast("q").tolist()
    types = memoryview(columns.timestamp_types).cast("i").tolist()
    keys = _binary(columns.key_validity, columns.key_offsets, columns.key_data, count)
    values = _binary(columns.value_validity, columns.value_offsets, columns.value_data, count)
    assert keys.count(None) == columns.key_nulls and values.count(None) == columns.value_nulls
    for validity in (columns.key_validity, columns.value_validity):
        if validity is not None:  # bits past the last row are 0
            assert len(validity) == (count + 7) // 8 and validity[-1] >> (count - 1) % 8 + 1 == 0
    headers: list[tuple[tuple[str, bytes | None], ...] | None] = [None] * count
    if columns.headers is not None:
        h = columns.headers
        names = _binary(None, h.key_offsets, h.key_data, h.entries)
        header_values = _binary(h.value_validity, h.value_offsets, h.value_data, h.entries)
        assert header_values.count(None) == h.value_nulls
        bounds = memoryview(h.list_offsets).cast("i").tolist()
        assert len(bounds) == count + 1 and bounds[-1] == h.entries
        for i in range(count):
            present = h.list_validity is None or h.list_validity[i >> 3] >> (i & 7) & 1
            entries = range(bounds[i], bounds[i + 1])
            assert bool(present) == bool(entries)  # zero headers <=> null list
            if present:
                headers[i] = tuple((str(names[j], "utf-8"), header_values[j]) for j in entries)
        assert sum(1 for x in headers if x is None) == h.list_nulls
    return list(zip(offsets, timestamps, types, keys, values, headers, strict=True))


def reference(
    data: bytes, count: int, base_offset: int, base_timestamp: int, log_append_time: int
) -> list[Record] | None:
    """record._decode with iter_records' count checks and the int64 range the columns need;
    None where it raises CorruptRecordError."""
    log_append = log_append_time >= 0
    try:
        if count < 0 or count > len(data) // 7:
            return None
        records = list(_decode(data, count, base_offset, base_timestamp,
                               log_append_time if log_append else None))
    except CorruptRecordError:
        return None
    for r in records:
        fits = [r.offset - base_offset, r.offset, r.timestamp * 1000]
        if not log_append:
            fits.append(r.timestamp - base_timestamp)
        if not all(INT64_MIN <= x <= INT64_MAX for x in fits):
            return None
    return records


def decode_both(
    include_headers: bool, sections: Sequence[tuple[bytes, int, int, int, int]],
    start_offset: int = INT64_MIN, end_offset: int = INT64_MAX,
) -> Columns:
    results = []
    for native in (True, False):
        columns = RecordColumns(include_headers, native=native)
        for section in sections:
            columns.append(*section, start_offset, end_offset)
        results.append(columns.finish())
        assert columns.rows == 0 and columns.data_bytes == 0
    assert results[0] == results[1]  # native == fallback, buffer for buffer
    return results[0]


batches = st.lists(new_records, min_size=1, max_size=8).flatmap(
    lambda records: st.builds(
        build_batch, st.just(records),
        base_offset=st.integers(0, 2**40),
        timestamp_type=st.sampled_from(TimestampType),
        now_ms=st.integers(0, 2**42),
    )
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(batches, min_size=1, max_size=4), st.booleans(), st.data())
def test_columns_equal_iter_records(
    built: list[bytearray], include_headers: bool, data: st.DataObject
) -> None:
    every = [(r, RecordBatch(b).attributes & ATTR_TIMESTAMP_TYPE != 0) for b in built
             for r in iter_records(RecordBatch(b))]
    offsets = [r.offset for r, _ in every]
    start = data.draw(st.integers(min(offsets) - 1, max(offsets) + 1))
    end = data.draw(st.integers(start, max(offsets) + 2))
    columns = decode_both(include_headers, [section_of(b) for b in built], start, end)
    expected = [expected_rows(r, lat, include_headers) for r, lat in every
                if start <= r.offset < end]
    assert rows_of(columns) == expected
    assert (columns.headers is None) == (not include_headers)


def test_zero_headers_is_a_null_list_and_empty_values_are_not_null() -> None:
    headers = (("", b""), ("k", None))
    batch = build_batch([NewRecord(b"", key=b""), NewRecord(None, headers=headers)])
    columns = decode_both(True, [section_of(batch)])
    assert columns.key_nulls == 1 and columns.value_nulls == 1
    assert columns.headers is not None
    assert columns.headers.list_nulls == 1 and columns.headers.value_nulls == 1
    assert rows_of(columns)[0][3:] == (b"", b"", None)


def test_any_buffer_type_and_an_offset_view() -> None:
    batch = build_batch([NewRecord(b"v%d" % i, key=b"k") for i in range(5)], base_offset=7)
    section, count, base_offset, base_timestamp, lat = section_of(batch)
    padded = memoryview(b"xx" + section + b"yy")[2:-2]
    for records in (section, bytearray(section), padded):
        columns = RecordColumns(False)
        assert columns.append(records, count, base_offset, base_timestamp, lat, 8, 10) == 2
        assert rows_of(columns.finish())[1][:5] == (9, 0, 0, b"k", b"v2")


@pytest.mark.parametrize("native", [True, False])
def test_a_failed_append_keeps_earlier_rows(native: bool) -> None:
    good = section_of(build_batch([NewRecord(b"a" * 20, key=None, headers=(("h", None),))] * 9))
    bad = section_of(build_batch([NewRecord(b"b" * 30, key=b"k", headers=(("x", b"y"),))] * 9))
    columns = RecordColumns(True, native=native)
    columns.append(*good, 0, 100)
    before = (columns.rows, columns.data_bytes)
    corrupt = (bad[0][:-1], *bad[1:])  # the last record loses its final byte
    with pytest.raises(CorruptRecordError):
        columns.append(*corrupt, 0, 100)
    with pytest.raises(CorruptRecordError):
        columns.append(bad[0], bad[1] - 1, *bad[2:], 0, 100)  # bytes trail recordsCount
    with pytest.raises(CorruptRecordError):
        columns.append(bad[0], -1, *bad[2:], 0, 100)
    assert (columns.rows, columns.data_bytes) == before
    columns.append(*good, 0, 100)
    assert columns.finish() == decode_both(True, [good, good], 0, 100)


# ---- fuzz: CorruptRecordError exactly when _decode raises, never a crash -------------------

MUTATION_BYTES = st.one_of(
    st.sampled_from([b"\x00", b"\x01", b"\x7f", b"\x80", b"\xff", b"\xfe\xff\xff\xff\x0f",
                     b"\xff" * 9 + b"\x01", b"\xff" * 9 + b"\x7f", b"\xff" * 10, b"\xed\xa0\x80",
                     b"\xc0\x80", b"\xf4\x90\x80\x80"]),
    st.binary(min_size=1, max_size=4),
)


@st.composite
def mutated_sections(draw: st.DrawFn) -> tuple[bytes, int, int, int, int]:
    section, count, base_offset, base_timestamp, lat = section_of(draw(batches))
    data = bytearray(section)
    for _ in range(draw(st.integers(0, 4))):  # 0: only the count or the bases change
        kind = draw(st.sampled_from(["replace", "insert", "delete", "truncate"]))
        at = draw(st.integers(0, len(data)))
        if kind == "replace":
            chunk = draw(MUTATION_BYTES)
            data[at:at + len(chunk)] = chunk
        elif kind == "insert":
            data[at:at] = draw(MUTATION_BYTES)
        elif kind == "delete":
            del data[at:at + draw(st.integers(1, 8))]
        else:
            del data[at:]
    count += draw(st.sampled_from([0, 0, 0, -1, 1]))
    base_offset = draw(st.sampled_from([base_offset, INT64_MAX - 3, INT64_MIN]))
    base_timestamp = draw(st.sampled_from([base_timestamp, INT64_MAX // 1000, INT64_MIN + 5]))
    return bytes(data), count, base_offset, base_timestamp, lat


def assert_agrees(section: tuple[bytes, int, int, int, int]) -> None:
    records = reference(*section)
    for native in (True, False):
        columns = RecordColumns(True, native=native)
        if records is None:
            with pytest.raises(CorruptRecordError):
                columns.append(*section, INT64_MIN, INT64_MAX)
            assert columns.rows == 0
        else:
            columns.append(*section, INT64_MIN, INT64_MAX)
            lat = section[4] >= 0
            assert rows_of(columns.finish()) == [
                expected_rows(r, lat, True) for r in records if r.offset < INT64_MAX  # end excl.
            ]


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_sections())
def test_fuzz_mutated_sections(section: tuple[bytes, int, int, int, int]) -> None:
    event("decodes" if reference(*section) is not None else "corrupt")
    assert_agrees(section)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.integers(-2, 30), st.integers(-5, 5), st.integers(-1, 3))
def test_fuzz_random_bytes(data: bytes, count: int, base: int, lat: int) -> None:
    assert_agrees((data, count, base, base, lat))


def one_record(header_key: bytes) -> bytes:
    body = b"\x00\x00\x00" + encode_varint(-1) + encode_varint(-1) + encode_varint(1)
    body += encode_varint(len(header_key)) + header_key + encode_varint(-1)
    return encode_varint(len(body)) + body


@settings(max_examples=300, deadline=None)
@given(st.one_of(
    st.binary(max_size=8),
    st.text(max_size=4).map(lambda s: s.encode("utf-8", "surrogatepass")),
    st.lists(st.sampled_from([b"a", b"\xc2\x80", b"\xe0\xa0\x80", b"\xed\x9f\xbf", b"\xed\xa0\x80",
                              b"\xf0\x90\x80\x80", b"\xf4\x8f\xbf\xbf", b"\xf4\x90\x80\x80",
                              b"\xc1\xbf", b"\xe0\x9f\xbf", b"\xf5", b"\x80", b"\xe2\x82"]),
             max_size=4).map(b"".join),
))
def test_header_keys_follow_python_utf8(header_key: bytes) -> None:
    try:
        header_key.decode("utf-8")
    except UnicodeDecodeError:
        valid = False
    else:
        valid = True
    assume(len(header_key) < 60)
    section = (one_record(header_key), 1, 0, 0, -1)
    assert (reference(*section) is not None) == valid
    assert_agrees(section)


WIDE_VARINT = b"\xff" * 9 + b"\x7f"  # well formed, 70 bits: no int64


@pytest.mark.parametrize(
    ("timestamp_delta", "log_append_time", "base_offset", "decodes"),
    [
        (WIDE_VARINT, 5, 0, True),  # a LOG_APPEND_TIME batch ignores timestampDelta
        (WIDE_VARINT, -1, 0, False),
        (encode_varint(INT64_MAX), -1, 0, False),  # ms fit, microseconds do not
        (encode_varint(-(2**40)), -1, 0, True),
        (b"\x00", 2**62, 0, False),
        (b"\x00", -1, INT64_MAX, True),
        (b"\x00", -1, INT64_MIN, True),
    ],
)
def test_int64_edges(
    timestamp_delta: bytes, log_append_time: int, base_offset: int, decodes: bool
) -> None:
    body = b"\x00" + timestamp_delta + b"\x00" + encode_varint(-1) * 2 + b"\x00"
    section = (encode_varint(len(body)) + body, 1, base_offset, 0, log_append_time)
    assert (reference(*section) is not None) == decodes
    assert_agrees(section)


# ---- Arrow ---------------------------------------------------------------------------------


def test_arrow_arrays_from_buffers_validate() -> None:
    import pyarrow as pa  # the test's dependency only: tidelog.records must not need it
    built = [
        build_batch([NewRecord(b"v%d" % i, key=None if i % 3 else b"k%d" % i,
                               headers=tuple((f"h{j}", b"x" if j else None) for j in range(i % 3)),
                               timestamp_ms=1_700_000_000_000 + i) for i in range(10)],
                    base_offset=50),
        build_batch([NewRecord(None, key=b"kk")], base_offset=60,
                    timestamp_type=TimestampType.LOG_APPEND_TIME, now_ms=1_700_000_000_999),
    ]
    records = [r for b in built for r in iter_records(RecordBatch(b))]
    columns = decode_both(True, [section_of(b) for b in built])
    rows = columns.rows
    h = columns.headers
    assert h is not None

    def binary(kind: object, validity: bytes | None, offsets: bytes, data: bytes, count: int,
               nulls: int) -> object:
        buffers = [None if validity is None else pa.py_buffer(validity), pa.py_buffer(offsets),
                   pa.py_buffer(data)]
        return pa.Array.from_buffers(kind, count, buffers, nulls)

    def fixed(kind: object, data: bytes) -> object:
        return pa.Array.from_buffers(kind, rows, [None, pa.py_buffer(data)], 0)

    entry = pa.struct([("key", pa.string()), ("value", pa.binary())])
    structs = pa.StructArray.from_arrays(
        [binary(pa.string(), None, h.key_offsets, h.key_data, h.entries, 0),
         binary(pa.binary(), h.value_validity, h.value_offsets, h.value_data, h.entries,
                h.value_nulls)], fields=list(entry))
    list_type = pa.list_(pa.field("element", entry))
    arrays = {
        "key": binary(pa.binary(), columns.key_validity, columns.key_offsets, columns.key_data,
                      rows, columns.key_nulls),
        "value": binary(pa.binary(), columns.value_validity, columns.value_offsets,
                        columns.value_data, rows, columns.value_nulls),
        "offset": fixed(pa.int64(), columns.offsets),
        "timestamp": fixed(pa.timestamp("us", tz="UTC"), columns.timestamps_us),
        "timestampType": fixed(pa.int32(), columns.timestamp_types),
        "headers": pa.Array.from_buffers(
            list_type, rows,
            [None if h.list_validity is None else pa.py_buffer(h.list_validity),
             pa.py_buffer(h.list_offsets)], h.list_nulls, children=[structs]),
    }
    for array in arrays.values():
        array.validate(full=True)
    assert arrays["key"].to_pylist() == [r.key for r in records]
    assert arrays["value"].to_pylist() == [r.value for r in records]
    assert arrays["offset"].to_pylist() == [r.offset for r in records]
    assert arrays["timestamp"].equals(
        pa.array([r.timestamp * 1000 for r in records], pa.timestamp("us", tz="UTC")))
    assert arrays["timestampType"].to_pylist() == [0] * 10 + [1]
    assert arrays["headers"].to_pylist() == [
        [{"key": k, "value": v} for k, v in r.headers] if r.headers else None for r in records
    ]


def test_the_native_decoder_is_built() -> None:
    assert NATIVE  # pip install -e . (scripts/setup) builds it; the fallback is for elsewhere


def test_a_builder_made_without_init_is_usable() -> None:
    from tidelog.records._columnar import ColumnBuilder

    builder = ColumnBuilder.__new__(ColumnBuilder)
    assert builder.append(*section_of(build_batch([NewRecord(b"v")])), 0, 1) == 1
    assert builder.finish()[0] == 1


def test_records_package_does_not_import_pyarrow() -> None:
    code = "import sys, tidelog.records.columnar; assert 'pyarrow' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
