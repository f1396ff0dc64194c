"""Property: compaction over random keyed records equals a dict model, read back normally."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tidelog.records.batch import Codec
from tidelog.records.builder import NewRecord
from tidelog.storage.cleaner import LogCleaner
from tidelog.storage.config import LogConfig
from tidelog.storage.log import PartitionLog
from tidelog.storage.offset_map import SLOT_BYTES

from .test_compaction import TP, append, clean_until_done, compacted_model, entries

CONFIG = LogConfig(
    cleanup_policy="compact", segment_bytes=1024, index_interval_bytes=64,
    segment_index_bytes=4096, min_cleanable_dirty_ratio=0.0, delete_retention_ms=1_000,
)
T1 = 10_000
T2 = T1 + CONFIG.delete_retention_ms

record = st.tuples(st.integers(0, 7), st.one_of(st.none(), st.binary(max_size=12)))
operation = st.one_of(
    st.tuples(
        st.just("batch"), st.lists(record, min_size=1, max_size=4),
        st.sampled_from([Codec.NONE, Codec.NONE, Codec.ZSTD, Codec.LZ4]),
    ),
    st.tuples(st.just("roll")),
    st.tuples(st.just("roll")),
)
operations = st.lists(operation, min_size=4, max_size=40)


def apply(log: PartitionLog, ops: list[tuple[object, ...]], now_ms: int) -> None:
    for op in ops:
        if op[0] == "roll":
            if log.active_segment.size:
                log.roll()
            continue
        _, records, codec = op
        assert isinstance(records, list) and isinstance(codec, Codec)
        batch = [NewRecord(value, f"key-{key}".encode(), (), now_ms) for key, value in records]
        append(log, batch, codec=codec, now_ms=now_ms)


def active_bytes(log: PartitionLog) -> bytes:
    return Path(log.active_segment.path).read_bytes()


@settings(max_examples=60, deadline=None)
@given(
    first=operations, second=operations,
    map_memory_bytes=st.sampled_from([6 * SLOT_BYTES, 12 * SLOT_BYTES, 1 << 16]),
    budget_bytes=st.sampled_from([64, 700, 1 << 20]),
)
def test_compaction_equals_model(
    first: list[tuple[object, ...]], second: list[tuple[object, ...]],
    map_memory_bytes: int, budget_bytes: int,
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / TP.dir_name
        log = PartitionLog(TP, directory, CONFIG)
        cleaner = LogCleaner(Path(tmp), map_memory_bytes=map_memory_bytes)

        apply(log, first, T1 - 1)
        written = entries(log)
        first_uncleanable = log.active_segment.base_offset
        active = active_bytes(log)
        clean_until_done(cleaner, log, T1, budget_bytes)
        assert entries(log) == compacted_model(written, first_uncleanable)
        assert active_bytes(log) == active
        assert cleaner.offset_map_bytes <= map_memory_bytes

        previous_end = log.log_end_offset
        apply(log, second, T1)
        written += [e for e in entries(log) if e[0] >= previous_end]
        second_uncleanable = log.active_segment.base_offset
        clean_until_done(cleaner, log, T2, budget_bytes)
        expected = compacted_model(written, second_uncleanable, first_uncleanable)
        got = entries(log)
        assert got == expected
        offsets = [offset for offset, _, _ in got]
        assert offsets == sorted(set(offsets))
        assert log.log_end_offset == len(written)

        log.close()
        reopened = PartitionLog(TP, directory, CONFIG)
        assert entries(reopened) == expected
        reopened.close()
