"""Server-side filters and retry back-off for share groups: the group configs, and which
offsets of a record batch a group's filter drops.

Group configs (IncrementalAlterConfigs on GROUP resources; checked by `check_config`):

    tidelog.share.retry.backoff.ms     coordinator/share_retry.py (parsed into ShareSettings)
    tidelog.share.filter               coordinator/share_filter.py (compiled, cached per value)
    tidelog.share.filter.tag.header    the header a tag expression reads (default `tag`)

`filtered_offsets(batch, filter)` decodes only what a filter needs: the records section is
decompressed when compressed; a batch whose bytes hold none of the header names the filter
reads cannot have those headers, so the filter is evaluated once for the whole batch (no
record parsed); otherwise the records C extension (records/columnar.py) decodes the batch
into header columns and only the named headers are looked at (a tag filter compares bytes;
no Record object, no string per record). Runs on the event loop, in the ShareFetch handler:
CPU bounded by what one acquisition reads (acquisition stops reading batches it cannot
take).
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
from tidelog.records.columnar import HeaderColumns, RecordColumns

TIDELOG_GROUP_CONFIGS = (RETRY_BACKOFF_CONFIG, FILTER_CONFIG, TAG_HEADER_CONFIG)
MAX_CACHED_VERDICTS = 4096  # per batch scanned
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
        columns = RecordColumns(include_headers=True)
        columns.append(data, batch.records_count, first, 0, -1, first, last + 1)
        decoded = columns.finish()
    except (CorruptRecordError, OverflowError):
        return frozenset()
    offsets = memoryview(decoded.offsets).cast("q")
    headers = decoded.headers
    if headers is None or not decoded.rows:  # pragma: no cover - include_headers was asked
        return frozenset()
    if group.tags is not None:  # one header, compared as bytes: no string per record
        tags = {tag.encode() for tag in group.tags}
        name = next(iter(names)).encode()
        uniform = _uniform_values(headers, decoded.rows, name)
        if uniform is not None:  # the common case: each record has just this header
            bounds, value_data = uniform
            return frozenset(offset for offset, start, end in zip(
                offsets, bounds, bounds[1:], strict=False) if value_data[start:end] not in tags)
        return frozenset(offset for offset, value in zip(
            offsets, _values(headers, decoded.rows, {name: ""}), strict=True)
            if value is None or value.get("") not in tags)
    wanted = {name.encode(): name for name in names}
    # Records mostly repeat a few header values: one verdict per distinct set of them.
    verdicts: dict[tuple[tuple[str, bytes], ...], bool] = {}
    dropped = []
    for offset, found in zip(offsets, _values(headers, decoded.rows, wanted), strict=True):
        key = () if found is None else tuple(found.items())
        verdict = verdicts.get(key)
        if verdict is None:
            verdict = group.matches({k: v.decode("utf-8", "replace") for k, v in key})
            if len(verdicts) < MAX_CACHED_VERDICTS:
                verdicts[key] = verdict
        if not verdict:
            dropped.append(offset)
    return frozenset(dropped)


def _records_section(batch: RecordBatch) -> bytes:
    codec = batch.attributes & ATTR_CODEC_MASK
    if codec > Codec.ZSTD:
        raise CorruptRecordError(f"unknown compression codec {codec}")
    return bytes(decompress(Codec(codec), batch.records_bytes))


def _uniform_values(
    headers: HeaderColumns, rows: int, name: bytes
) -> tuple[list[int], bytes] | None:
    """When every record has exactly one header, named `name`, with a value: the value
    offsets and data (record i's value is data[offsets[i]:offsets[i + 1]]); else None.
    Checked on whole buffers, without a loop per record."""
    if (headers.entries != rows or headers.list_validity is not None
            or headers.value_validity is not None or headers.key_data != name * rows):
        return None
    # Keys of other lengths could spell the same bytes ("t" + "agtag" for "tag" twice).
    width = len(name)
    if memoryview(headers.key_offsets).cast("i").tolist() != list(range(0, width * rows + 1,
                                                                        width)):
        return None
    return memoryview(headers.value_offsets).cast("i").tolist(), headers.value_data


def _values(headers: HeaderColumns, rows: int, wanted: dict[bytes, str]
            ) -> list[dict[str, bytes] | None]:
    """Per record, the wanted headers' values (None: it has none of them), from the header
    columns (records/columnar.py): a null value counts as absent, the last of repeated keys
    wins (Kafka's lastHeader)."""
    list_offsets = memoryview(headers.list_offsets).cast("i").tolist()
    key_offsets = memoryview(headers.key_offsets).cast("i").tolist()
    value_offsets = memoryview(headers.value_offsets).cast("i").tolist()
    key_data, value_data, validity = headers.key_data, headers.value_data, headers.value_validity
    result: list[dict[str, bytes] | None] = []
    for row in range(rows):
        found: dict[str, bytes] = {}
        for entry in range(list_offsets[row], list_offsets[row + 1]):
            name = wanted.get(key_data[key_offsets[entry]:key_offsets[entry + 1]])
            if name is None:
                continue
            if validity is not None and not validity[entry >> 3] >> (entry & 7) & 1:
                found.pop(name, None)
            else:
                found[name] = value_data[value_offsets[entry]:value_offsets[entry + 1]]
        result.append(found or None)
    return result
