"""compression.type's recompression: same records, same header fields, new codec and CRC."""

from __future__ import annotations

import itertools

import pytest

from tidelog.errors import CorruptRecordError
from tidelog.records.batch import Codec, RecordBatch
from tidelog.records.builder import NewRecord, build_batch
from tidelog.records.recompress import recompress
from tidelog.records.record import iter_records

RECORDS = [NewRecord(key=b"k%d" % i, value=b"v" * i, timestamp_ms=1000 + i) for i in range(20)]


@pytest.mark.parametrize("source,target", list(itertools.permutations(list(Codec), 2)))
def test_recompress_keeps_records_and_header(source: Codec, target: Codec) -> None:
    original = RecordBatch(build_batch(
        RECORDS, codec=source, producer_id=7, producer_epoch=1, base_sequence=3,
        transactional=True,
    ))
    converted = recompress(original, target, 1 << 20)
    converted.validate()  # CRC and counts hold
    assert converted.codec == target
    for field in ("producer_id", "producer_epoch", "base_sequence", "is_transactional",
                  "last_offset_delta", "max_timestamp", "records_count"):
        assert getattr(converted, field) == getattr(original, field), field
    assert [(r.key, r.value, r.timestamp) for r in iter_records(converted)] == [
        (r.key, r.value, r.timestamp_ms) for r in RECORDS
    ]
    assert recompress(converted, target, 1 << 20) is converted  # already in the codec


def test_inflation_past_the_bound_is_refused() -> None:
    batch = RecordBatch(build_batch([NewRecord(value=b"\0" * 100_000)], codec=Codec.GZIP))
    with pytest.raises(CorruptRecordError):
        recompress(batch, Codec.LZ4, 10_000)
