"""Properties of roll and retention boundaries over random batch sizes and timestamps."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tidelog.storage.config import LogConfig
from tidelog.storage.log import PartitionLog
from tidelog.types import TopicPartition

from .helpers import all_batches, make_batch, read_all

TP = TopicPartition("bounds", 1)
batch_specs = st.lists(
    st.tuples(st.integers(1, 3), st.integers(0, 400), st.integers(0, 100_000)),
    min_size=1, max_size=50,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs=batch_specs, segment_bytes=st.integers(1500, 5000),
       index_bytes=st.sampled_from([36, 64, 4096]), interval=st.integers(0, 800))
def test_roll_boundaries(
    tmp_path_factory: pytest.TempPathFactory, specs: list[tuple[int, int, int]],
    segment_bytes: int, index_bytes: int, interval: int,
) -> None:
    config = LogConfig(segment_bytes=segment_bytes, segment_index_bytes=index_bytes,
                       index_interval_bytes=interval)
    log = PartitionLog(TP, tmp_path_factory.mktemp("roll") / TP.dir_name, config)
    for number, (count, size, timestamp) in enumerate(specs):
        log.append([make_batch(count, value_size=size, timestamp_ms=timestamp, tag=number)],
                   now_ms=0)
    segments = log.segments()
    for segment, following in itertools.pairwise(segments):
        # a segment never exceeds segment.bytes, and rolled only when the next batch did not
        # fit or an index was full
        assert 0 < segment.size <= segment_bytes
        first_next = following.size and following.read_header(0)
        assert first_next
        assert (segment.size + first_next.size > segment_bytes
                or not segment.fits(1))
        assert following.base_offset == segment.next_offset
    assert [b.base_offset for b in read_all(log)] == [b.base_offset for b in all_batches(log)]
    log.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs=batch_specs, retention_bytes=st.integers(-1, 20_000),
       retention_ms=st.integers(-1, 100_000), now_ms=st.integers(0, 200_000))
# Found by hypothesis: the size pass removed the young first segment, uncovering an expired
# one that the time pass (then run first) had not reached; Kafka runs size before time.
@example(specs=[(1, 0, 0), (1, 0, 0), (1, 51, 0), (3, 141, 125), (3, 222, 0), (3, 219, 0),
                (3, 130, 0)], retention_bytes=481, retention_ms=4, now_ms=5)
def test_retention_boundaries(
    tmp_path_factory: pytest.TempPathFactory, specs: list[tuple[int, int, int]],
    retention_bytes: int, retention_ms: int, now_ms: int,
) -> None:
    config = LogConfig(segment_bytes=1500, retention_bytes=retention_bytes,
                       retention_ms=retention_ms)
    log = PartitionLog(TP, tmp_path_factory.mktemp("retention") / TP.dir_name, config)
    for number, (count, size, timestamp) in enumerate(specs):
        log.append([make_batch(count, value_size=size, timestamp_ms=timestamp, tag=number)],
                   now_ms=0)
    before = log.segments()
    active = log.active_segment
    log.apply_retention(now_ms)
    after = log.segments()
    assert after[-1] is active  # the active segment always stays
    assert after == before[len(before) - len(after):]  # only a prefix of old ones goes
    assert log.log_start_offset == after[0].base_offset
    deleted = before[: len(before) - len(after)]
    size_before = sum(s.size for s in before)
    removed = 0
    for segment in deleted:  # each deleted segment was expired or over the size limit
        expired = retention_ms >= 0 and segment.max_timestamp < now_ms - retention_ms
        oversize = retention_bytes >= 0 and size_before - removed - segment.size >= retention_bytes
        assert expired or oversize
        removed += segment.size
    if len(after) > 1:  # and the oldest survivor is neither
        oldest = after[0]
        assert not (retention_ms >= 0 and oldest.max_timestamp < now_ms - retention_ms)
        assert not (retention_bytes >= 0
                    and log.size_bytes() - oldest.size >= retention_bytes)
    log.close()
