"""Pure planning: options, canonical offsets JSON, admission control, splitting, data loss."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidelog.spark.options import (
    SourceOptionError,
    parse_source_options,
    parse_subscription,
)
from tidelog.spark.planning import (
    DataLossError,
    OffsetRange,
    check_data_loss,
    json_to_offsets,
    offsets_to_json,
    rate_limit,
    resolve_offset,
    split_ranges,
)

BASE = {"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "a,b"}


def test_offsets_json_is_canonical() -> None:
    offsets = {("b", 10): 5, ("a", 2): 7, ("b", 2): 1, ("a", 0): 3}
    document = offsets_to_json(offsets)
    assert json.dumps(document) == '{"a": {"0": 3, "2": 7}, "b": {"2": 1, "10": 5}}'
    assert json_to_offsets(document) == offsets


@given(st.dictionaries(st.tuples(st.sampled_from("xyz"), st.integers(0, 50)),
                       st.integers(0, 10**12)))
def test_offsets_json_round_trips(offsets: dict[tuple[str, int], int]) -> None:
    document = offsets_to_json(offsets)
    assert json_to_offsets(json.loads(json.dumps(document))) == offsets
    assert list(document) == sorted(document)


def test_malformed_offset_document_is_a_typed_error() -> None:
    with pytest.raises(SourceOptionError):
        json_to_offsets({"a": {"x": 1}})


def test_rate_limit_splits_in_proportion_to_backlog() -> None:
    start = {("t", 0): 0, ("t", 1): 100, ("t", 2): 0}
    end = {("t", 0): 600, ("t", 1): 400, ("t", 2): 100}
    limited = rate_limit(start, end, 100)
    # backlogs 600, 300, 100 of 1000 -> 60, 30, 10
    assert limited == {("t", 0): 60, ("t", 1): 130, ("t", 2): 10}


def test_rate_limit_moves_tiny_partitions_and_reads_all_when_under_limit() -> None:
    start = {("t", 0): 0, ("t", 1): 0}
    end = {("t", 0): 10_000, ("t", 1): 1}
    assert rate_limit(start, end, 10)[("t", 1)] == 1  # share < 1 rounds up
    assert rate_limit(start, end, 20_000) == end


@given(
    st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 1000)), min_size=1, max_size=8),
    st.integers(1, 5000),
)
def test_rate_limit_never_passes_end_nor_goes_back(
    spans: list[tuple[int, int]], max_rows: int
) -> None:
    start = {("t", i): a for i, (a, _) in enumerate(spans)}
    end = {("t", i): a + b for i, (a, b) in enumerate(spans)}
    limited = rate_limit(start, end, max_rows)
    for tp in end:
        assert start[tp] <= limited[tp] <= end[tp]
    total = sum(limited[tp] - start[tp] for tp in end)
    assert total <= max_rows + len(spans)  # at most one extra record per round-up


@given(
    st.lists(st.integers(0, 500), min_size=1, max_size=6),
    st.one_of(st.none(), st.integers(1, 40)),
)
def test_split_ranges_cover_each_range_exactly(
    sizes: list[int], min_partitions: int | None
) -> None:
    ranges = [OffsetRange("t", i, 10, 10 + size) for i, size in enumerate(sizes)]
    pieces = split_ranges(ranges, min_partitions)
    for r in ranges:
        own = [p for p in pieces if p.partition == r.partition]
        covered = [o for p in own for o in range(p.start_offset, p.end_offset)]
        assert covered == list(range(r.start_offset, r.end_offset))
        assert all(p.size > 0 for p in own)


def test_split_ranges_reaches_min_partitions() -> None:
    pieces = split_ranges([OffsetRange("t", 0, 0, 100), OffsetRange("t", 1, 0, 100)], 8)
    assert len(pieces) == 8


def test_check_data_loss_raises_or_skips() -> None:
    wanted = {("t", 0): 5, ("t", 1): 50}
    log_start = {("t", 0): 20, ("t", 1): 0}
    with pytest.raises(DataLossError, match=r"5\.\.19"):
        check_data_loss(wanted, log_start, fail_on_data_loss=True)
    assert check_data_loss(wanted, log_start, False) == {("t", 0): 20, ("t", 1): 50}


def test_resolve_offsets_like_spark() -> None:
    options = parse_source_options(
        {**BASE, "startingOffsets": '{"a":{"0":-2,"1":-1,"2":7}}'}, streaming=True
    )
    spec = options.starting
    assert resolve_offset(spec, "a", 0, 3, 9, None, False) == 3
    assert resolve_offset(spec, "a", 1, 3, 9, None, False) == 9
    assert resolve_offset(spec, "a", 2, 3, 9, None, False) == 7
    with pytest.raises(SourceOptionError):
        resolve_offset(spec, "b", 0, 3, 9, None, False)


def test_timestamp_without_a_record_errors_or_goes_latest() -> None:
    spec = parse_source_options({**BASE, "startingTimestamp": "1000"}, True).starting
    assert resolve_offset(spec, "a", 0, 0, 9, 4, False) == 4
    with pytest.raises(SourceOptionError):
        resolve_offset(spec, "a", 0, 0, 9, None, False)
    assert resolve_offset(spec, "a", 0, 0, 9, None, True) == 9


def test_timestamp_options_take_precedence() -> None:
    options = parse_source_options(
        {**BASE, "startingOffsets": "earliest", "startingOffsetsByTimestamp": '{"a":{"0":5}}',
         "startingTimestamp": "7"}, streaming=False)
    assert options.starting.kind == "timestamp"
    options = parse_source_options(
        {**BASE, "startingOffsets": "earliest", "startingOffsetsByTimestamp": '{"a":{"0":5}}'},
        streaming=False)
    assert options.starting.timestamps == {("a", 0): 5}


@pytest.mark.parametrize(
    ("extra", "streaming"),
    [
        ({"startingOffsets": "latest"}, False),
        ({"endingOffsets": "earliest"}, False),
        ({"endingOffsets": '{"a":{"0":-2}}'}, False),
        ({"endingOffsets": "latest"}, True),
        ({"maxOffsetsPerTrigger": "0"}, True),
        ({"failOnDataLoss": "maybe"}, True),
        ({"startingOffsets": "{not json"}, True),
        ({"kafka.group.id": "g"}, True),
        ({"subscribePattern": "x.*"}, True),
    ],
)
def test_bad_options_are_typed_errors(extra: dict[str, str], streaming: bool) -> None:
    with pytest.raises(SourceOptionError):
        parse_source_options({**BASE, **extra}, streaming)


def test_subscriptions() -> None:
    assert parse_subscription({"subscribe": "a, b"}).topics == ("a", "b")
    pattern = parse_subscription({"subscribePattern": "click.*"})
    assert pattern.matches("clicks") and not pattern.matches("views")
    assigned = parse_subscription({"assign": '{"b":[1],"a":[0,2]}'})
    assert assigned.assigned == (("a", 0), ("a", 2), ("b", 1))
    with pytest.raises(SourceOptionError):
        parse_subscription({"assign": '{"a":"0"}'})


def test_kafka_options_pass_through_unprefixed() -> None:
    options = parse_source_options({**BASE, "kafka.client.id": "x", "other": "y"}, True)
    assert options.kafka_config == {"bootstrap.servers": "127.0.0.1:1", "client.id": "x"}
    assert options.fail_on_data_loss is True and options.include_headers is False


def test_option_names_are_case_insensitive() -> None:
    # Spark hands a Python data source its options with lower-cased names.
    options = parse_source_options(
        {"kafka.bootstrap.servers": "h:1", "subscribe": "a", "includeheaders": "true",
         "maxoffsetspertrigger": "7", "startingoffsets": "earliest"}, streaming=True)
    assert options.include_headers and options.max_offsets_per_trigger == 7
    assert options.starting.kind == "earliest"
