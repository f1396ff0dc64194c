"""Does a batch hold a record due later (or a cancel)? Answered without a Python object per
record: the records C extension (`records/columnar.py`) decodes the batch into columns and
only the header keys are compared, so a batch whose timer headers all say "now" is appended
as the producer sent it at a fraction of a full decode's cost."""

from __future__ import annotations

import sys
from array import array

from tidelog.records.batch import RecordBatch
from tidelog.records.columnar import RecordColumns
from tidelog.storage.timer_records import (
    CANCEL_HEADER,
    DELAY_LEVEL_HEADER,
    DELAY_MS_HEADER,
    DELIVER_MS_HEADER,
    delivery_time,
)

_TIMER_KEYS = {
    name.encode(): name
    for name in (DELIVER_MS_HEADER, DELAY_MS_HEADER, DELAY_LEVEL_HEADER, CANCEL_HEADER)
}
_OFFSET_LIMIT = (1 << 63) - 1


def _ints(code: str, data: bytes) -> array[int]:
    values = array(code)
    values.frombytes(data)
    if sys.byteorder == "big":  # the columns are little-endian
        values.byteswap()
    return values


def any_timer_record(batch: RecordBatch, section: bytes, now_ms: int, max_delay_ms: int) -> bool:
    """True when a record of the batch (records `section`, decompressed) is due after
    `now_ms` or is a cancel. Malformed records: CorruptRecordError; bad timer headers:
    InvalidRecordError (as the full decode would raise)."""
    builder = RecordColumns(include_headers=True)
    builder.append(section, batch.records_count, 0, batch.base_timestamp, -1, 0, _OFFSET_LIMIT)
    columns = builder.finish()
    headers = columns.headers
    if headers is None or headers.entries == 0:
        return False
    lists = _ints("i", headers.list_offsets)
    key_offsets = _ints("i", headers.key_offsets)
    value_offsets = _ints("i", headers.value_offsets)
    key_data, value_data, validity = headers.key_data, headers.value_data, headers.value_validity
    for row in range(columns.rows):
        found: list[tuple[str, bytes | None]] = []
        for entry in range(lists[row], lists[row + 1]):
            name = _TIMER_KEYS.get(key_data[key_offsets[entry]:key_offsets[entry + 1]])
            if name is None:
                continue
            value: bytes | None = value_data[value_offsets[entry]:value_offsets[entry + 1]]
            if validity is not None and not (validity[entry >> 3] >> (entry & 7)) & 1:
                value = None
            found.append((name, value))
        if not found:
            continue
        cancel = next((value for name, value in found if name == CANCEL_HEADER), None)
        if cancel is not None:  # the first TIMER_CANCEL decides, as header_value reads it
            return True
        due_ms = delivery_time(found, now_ms, max_delay_ms)
        if due_ms is not None and due_ms > now_ms:
            return True
    return False
