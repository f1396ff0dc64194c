"""Server-side filters and retry back-off for share groups: the group configs, and which
offsets of a record batch a group's filter drops.

Group configs (IncrementalAlterConfigs on GROUP resources; checked by `check_config`):

    tidelog.share.retry.backoff.ms     coordinator/share_retry.py (parsed into ShareSettings)
    tidelog.share.filter               coordinator/share_filter.py (compiled, cached per value)
    tidelog.share.filter.tag.header    the header a tag expression reads (default `tag`)

`filtered_offsets(batch, filter)` decodes only what a filter needs: the records section is
decompressed when compressed; a batch whose bytes hold none of the header names the filter
reads cannot have those headers, so the filter is evaluated once for the whole batch (no
record parsed); otherwise each record's fields are skipped by their lengths and only the
named headers' values are kept (no Record object). Runs on the event loop, in the ShareFetch
handler: CPU bounded by what one acquisition reads.
"""

from __future__ import annotations

from collections.abc import Mapping

from tidelog.coordinator.share_filter import (
    DEFAULT_TAG_HEADER,
    FILTER_CONFIG,
    MAX_HEADER_NAME,
    TAG_HEADER_CONFIG,
    Filter,
    FilterError,
    parse_filter,
)
from tidelog.coordinator.share_retry import CONFIG as RETRY_BACKOFF_CONFIG
from tidelog.coordinator.share_retry import BackoffError, parse_backoff
from tidelog.errors import CorruptRecordError
from tidelog.records.batch import ATTR_CODEC_MASK, Codec, RecordBatch
from tidelog.records.codecs import decompress
from tidelog.records.varint import read_varint

TIDELOG_GROUP_CONFIGS = (RETRY_BACKOFF_CONFIG, FILTER_CONFIG, TAG_HEADER_CONFIG)
DEFAULTS = {RETRY_BACKOFF_CONFIG: "", FILTER_CONFIG: "", TAG_HEADER_CONFIG: DEFAULT_TAG_HEADER}


def check_config(name: str, value: str) -> str | None:
    """None when `value` is acceptable for `name` (one of TIDELOG_GROUP_CONFIGS), else the
    INVALID_CONFIG message."""
    try:
        if name == RETRY_BACKOFF_CONFIG:
            parse_backoff(value)
        elif name == FILTER_CONFIG:
            parse_filter(value)
        elif not value or len(value) > MAX_HEADER_NAME:
            return f"{name} must be a header name of 1 to {MAX_HEADER_NAME} characters"
    except BackoffError as error:
        return f"Invalid value {value!r} for configuration {name}: {error}"
    except FilterError as error:
        return str(error)
    return None


def group_filter(configs: Mapping[str, str]) -> Filter | None:
    """The group's compiled filter; None when it has none (or one matching everything)."""
    text = configs.get(FILTER_CONFIG, "")
    if not text:
        return None
    try:
        compiled = parse_filter(text, configs.get(TAG_HEADER_CONFIG, DEFAULT_TAG_HEADER))
    except FilterError:  # checked when set; a bad stored value filters nothing
        return None
    return None if compiled.matches_all else compiled


def filtered_offsets(batch: RecordBatch, group: Filter) -> frozenset[int]:
    """The offsets of `batch` that `group` drops (all of the batch's range when the filter is
    false for a batch without any of its headers). A malformed batch drops nothing: it is
    delivered as stored, as it would be without a filter."""
    first, last = batch.base_offset, batch.last_offset
    try:
        data = _records_section(batch)
        names = group.names
        if not any(name.encode() in data for name in names):
            return frozenset() if group.matches({}) else frozenset(range(first, last + 1))
        wanted = {name.encode(): name for name in names}
        dropped = [first + delta for delta, headers in _scan(data, batch.records_count, wanted)
                   if not group.matches(headers)]
    except CorruptRecordError:
        return frozenset()
    return frozenset(dropped)


def _records_section(batch: RecordBatch) -> bytes:
    codec = batch.attributes & ATTR_CODEC_MASK
    if codec > Codec.ZSTD:
        raise CorruptRecordError(f"unknown compression codec {codec}")
    return bytes(decompress(Codec(codec), batch.records_bytes))


def _scan(
    data: bytes, count: int, wanted: dict[bytes, str]
) -> list[tuple[int, dict[str, str]]]:
    """(offsetDelta, the wanted headers' values) per record (layout: records/record.py); a
    null header value counts as absent; the last of repeated keys wins (Kafka's lastHeader)."""
    size = len(data)
    position = 0
    found: list[tuple[int, dict[str, str]]] = []
    if count < 0 or count > size:
        raise CorruptRecordError(f"records count {count}")
    for _ in range(count):
        length, position = read_varint(data, position)
        end = position + length
        if length < 6 or end > size:
            raise CorruptRecordError(f"record length {length} does not fit the batch")
        _, position = read_varint(data, position + 1)  # attributes skipped, timestampDelta
        offset_delta, position = read_varint(data, position)
        for _field in range(2):  # key, value
            field_length, position = read_varint(data, position)
            if field_length > 0:
                position += field_length
        header_count, position = read_varint(data, position)
        if position > end or header_count < 0 or header_count * 2 > end - position:
            raise CorruptRecordError("record fields overrun their record")
        headers: dict[str, str] = {}
        for _header in range(header_count):
            key_length, position = read_varint(data, position)
            key = data[position:position + key_length]
            position += max(0, key_length)
            value_length, position = read_varint(data, position)
            name = wanted.get(key)
            if name is not None:
                if value_length < 0:
                    headers.pop(name, None)
                else:
                    headers[name] = data[position:position + value_length].decode(
                        "utf-8", "replace")
            position += max(0, value_length)
        if position != end:
            raise CorruptRecordError(f"record length {length} disagrees with its fields")
        found.append((offset_delta, headers))
    return found
