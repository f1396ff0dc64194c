"""Retry back-off and server-side filters of share groups, pure (< 2 s): the back-off syntax,
a share partition's back-off deadlines and filtered acquisition, the filter parser and
evaluator (a Hypothesis run against a small reference evaluator written here, hostile
expressions), and the header scan over real record batches."""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidelog.broker.share.filtering import check_config, filtered_offsets, group_filter
from tidelog.coordinator.share_filter import (
    MAX_DEPTH,
    MAX_EXPRESSION_CHARS,
    FilterError,
    parse_filter,
)
from tidelog.coordinator.share_partition import (
    AcknowledgementBatch,
    AcknowledgeType,
    LogBatch,
    RecordState,
    SharePartition,
    ShareSettings,
    StateBatch,
)
from tidelog.coordinator.share_retry import BackoffError, backoff_ms, parse_backoff
from tidelog.records.batch import Codec, RecordBatch
from tidelog.records.builder import NewRecord, build_batch

BACKOFF = ShareSettings(record_lock_duration_ms=1000, delivery_count_limit=5,
                        max_record_locks=50, retry_backoff_ms=(1000, 2000))


def ranges(acquired: Any) -> list[tuple[int, int, int]]:
    return [(r.first_offset, r.last_offset, r.delivery_count) for r in acquired]


# ------------------------------------------------------------------ back-off syntax
def test_backoff_syntax() -> None:
    assert parse_backoff("") == ()
    assert parse_backoff("10s 30s 1m 2m 1h") == (10_000, 30_000, 60_000, 120_000, 3_600_000)
    assert parse_backoff("250ms, 1S,500") == (250, 1000, 500)
    assert parse_backoff("exponential:1s:2:10s") == (1000, 2000, 4000, 8000, 10_000)
    assert parse_backoff("exponential:100ms:1:100ms") == (100,)
    assert [backoff_ms((1000, 2000), n) for n in (0, 1, 2, 3, 9)] == [0, 1000, 2000, 2000, 2000]
    for bad, why in (("10x", "not a duration"), ("1m -2s", "not a duration"),
                     ("2d", "not a duration"), ("25h", "longer than 1 day"),
                     ("1s " * 65, "more than 64"), ("exponential:1s:2", "expected exponential"),
                     ("exponential:1s:0.5:1m", "between 1 and 100"),
                     ("exponential:1m:2:1s", "max at least initial"), ("x" * 2000, "longer")):
        with pytest.raises(BackoffError, match=why):
            parse_backoff(bad)
        message = check_config("tidelog.share.retry.backoff.ms", bad)
        assert message is not None and "tidelog.share.retry.backoff.ms" in message


# ------------------------------------------------------------------ back-off in a partition
def test_released_and_expired_records_wait_their_backoff_step() -> None:
    partition = SharePartition(0, BACKOFF)
    assert ranges(partition.acquire("m", [LogBatch(0, 1)], 10, now_ms=0)[0]) == [(0, 1, 1)]
    release = AcknowledgementBatch(0, 0, (int(AcknowledgeType.RELEASE),))
    assert partition.acknowledge("m", [release], now_ms=100).value == 0
    # Offset 0 waits the first step (1 s after its release); offset 1 is still locked.
    assert partition.records[0].state is RecordState.AVAILABLE
    assert not partition.can_acquire(2, now_ms=500) and partition.first_acquirable(500) == 2
    assert partition.acquire("m", [LogBatch(0, 1)], 10, now_ms=1099)[0] == []
    assert partition.next_deadline_ms(now_ms=500) == 1000  # offset 1's lock expires first
    # Offset 1's lock expires at 1000: delivered once, so it waits the first step too.
    assert partition.expire(1000) == 1
    assert partition.next_deadline_ms(now_ms=1000) == 1100
    assert ranges(partition.acquire("m", [LogBatch(0, 1)], 10, now_ms=1100)[0]) == [(0, 0, 2)]
    assert ranges(partition.acquire("m", [LogBatch(0, 1)], 10, now_ms=2000)[0]) == [(1, 1, 2)]
    # Delivered twice: the second step (2 s), then the last step repeats.
    assert partition.acknowledge("m", [release], now_ms=1200).value == 0
    assert partition.acquire("m", [LogBatch(0, 0)], 10, now_ms=3199)[0] == []
    assert ranges(partition.acquire("m", [LogBatch(0, 0)], 10, now_ms=3200)[0]) == [(0, 0, 3)]
    assert partition.acknowledge("m", [release], now_ms=3300).value == 0
    # Offset 1's second lock expired at 3000 (seen at 3300): its second step too.
    assert partition.records[0].deadline_ms == partition.records[1].deadline_ms == 5300
    # A member leaving gives its records back at once; so does a restart (not persisted).
    assert ranges(partition.acquire("m", [LogBatch(0, 1)], 10, now_ms=5300)[0]) == [
        (0, 0, 4), (1, 1, 3)]
    assert partition.release_member("m") == 2 and partition.records[1].deadline_ms == 0
    assert partition.can_acquire(2, now_ms=5301)
    restored = SharePartition(0, BACKOFF)
    restored.restore(0, [StateBatch(0, 0, 0, 3), StateBatch(1, 1, 0, 2)])
    assert ranges(restored.acquire("m", [LogBatch(0, 1)], 10, now_ms=0)[0]) == [
        (0, 0, 4), (1, 1, 3)]


def test_without_backoff_release_is_immediate_and_the_limit_archives() -> None:
    partition = SharePartition(0, ShareSettings(record_lock_duration_ms=1000,
                                                delivery_count_limit=2))
    partition.acquire("m", [LogBatch(0, 0)], 10, now_ms=0)
    release = AcknowledgementBatch(0, 0, (int(AcknowledgeType.RELEASE),))
    partition.acknowledge("m", [release], now_ms=10)
    assert ranges(partition.acquire("m", [LogBatch(0, 0)], 10, now_ms=10)[0]) == [(0, 0, 2)]
    partition.acknowledge("m", [release], now_ms=20)
    assert partition.start_offset == 1 and partition.counters.archived == 1


# ------------------------------------------------------------------ filtered acquisition
def test_filtered_offsets_are_acknowledged_not_delivered() -> None:
    partition = SharePartition(0, BACKOFF)
    batches = [LogBatch(0, 4, filtered=frozenset({1, 3})),
               LogBatch(5, 6, filtered=frozenset({5, 6}))]
    acquired, used = partition.acquire("m", batches, 100, now_ms=0)
    assert ranges(acquired) == [(0, 0, 1), (2, 2, 1), (4, 4, 1)] and used == [0]
    assert partition.counters.filtered == 4 and partition.end_offset == 7
    assert partition.records[1].state is RecordState.ACKNOWLEDGED
    # The client acknowledges only what it got; offsets 1 and 3 are done already.
    for offset in (0, 2, 4):
        assert partition.acknowledge(
            "m", [AcknowledgementBatch(offset, offset, (1,))], now_ms=1).value == 0
    assert partition.start_offset == 7 and not partition.records
    # A record released and then filtered (the filter changed meanwhile) is acknowledged.
    partition.acquire("m", [LogBatch(7, 7)], 10, now_ms=10)
    partition.release_member("m")
    assert partition.acquire("m", [LogBatch(7, 7, filtered=frozenset({7}))], 10, now_ms=11)[0] == []
    assert partition.start_offset == 8 and partition.counters.filtered == 5


@settings(max_examples=150, deadline=None, database=None)
@given(st.lists(st.tuples(st.sampled_from(["acquire", "ack", "expire", "leave"]),
                          st.integers(0, 29), st.integers(0, 5), st.integers(0, 4),
                          st.integers(0, 1500)), max_size=40),
       st.frozensets(st.integers(0, 29), max_size=12))
def test_random_operations_respect_backoff_and_filters(
    ops: list[tuple[str, int, int, int, int]], filtered: frozenset[int]
) -> None:
    """Random acquire/acknowledge/expire/leave with a back-off and a filter: no record is
    acquired before its back-off ends, a filtered offset is never delivered, delivery counts
    never go back, the in-flight table stays exactly [SPSO, SPEO)."""
    log = [LogBatch(b, b + 9, filtered=frozenset(o for o in filtered if b <= o <= b + 9))
           for b in (0, 10, 20)]
    partition = SharePartition(0, BACKOFF)
    now = 0
    counts: dict[int, int] = {}
    for op, offset, span, kind, step_ms in ops:
        now += step_ms
        if op == "acquire":
            waiting = {o for o, r in partition.records.items()
                       if r.state is RecordState.AVAILABLE and r.deadline_ms > now}
            for r in partition.acquire(f"m{kind % 2}", log, 10, now_ms=now)[0]:
                for o in range(r.first_offset, r.last_offset + 1):
                    assert o not in waiting and o not in filtered
                    assert r.delivery_count == counts.get(o, 0) + 1
                    counts[o] = r.delivery_count
        elif op == "ack":
            partition.acknowledge(f"m{kind % 2}", [AcknowledgementBatch(
                offset, offset + span, (kind % 4,))], now)
        elif op == "expire":
            partition.expire(now)
        else:
            partition.release_member(f"m{kind % 2}")
        assert set(partition.records) == set(range(partition.start_offset, partition.end_offset))
        for o, record in partition.records.items():
            if record.state is RecordState.AVAILABLE and record.deadline_ms:
                # Waiting at most the step for its delivery count (1 s, then 2 s).
                assert record.deadline_ms - now <= backoff_ms((1000, 2000),
                                                              record.delivery_count)
            if o in filtered and record.state is not RecordState.AVAILABLE:
                assert record.state is RecordState.ACKNOWLEDGED and o not in counts


# ------------------------------------------------------------------ filter parser
def test_tag_expressions() -> None:
    tags = parse_filter("TagA || TagB")
    assert tags.matches({"tag": "TagA"}) and tags.matches({"tag": "TagB"})
    assert not tags.matches({"tag": "TagC"}) and not tags.matches({})
    assert parse_filter("*").matches_all and parse_filter("").matches_all
    assert parse_filter("kind", "x-type").matches({"x-type": "kind"})
    for bad, position in (("TagA ||", 7), ("|| TagA", 0), ("TagA || * ", 8), ("Tag A", 0)):
        with pytest.raises(FilterError) as refused:
            parse_filter(bad)
        assert refused.value.position == position, bad
        assert f"at position {position}" in str(refused.value)


def test_sql92_expressions() -> None:
    def matches(expression: str, **headers: str) -> bool:
        return parse_filter("SQL92:" + expression).matches(headers)

    assert matches("a > 5", a="10") and not matches("a > 5", a="3") and not matches("a > 5")
    assert matches("a = 5", a="5.0") and matches("a = '5'", a="5") and matches("a <> 'x'", a="y")
    assert not matches("a > 'b'", a="c")  # orderings are numeric only
    assert matches("a IN ('eu', 'us')", a="us") and not matches("a NOT IN ('eu')", a="eu")
    assert matches("a between 1 AND 10", a="10") and matches("a NOT BETWEEN 1 AND 10", a="11")
    assert matches("a IS NULL") and matches("a IS NOT NULL", a="")
    assert not matches("a IS NULL", a="")
    assert not matches("NOT a = 1")  # unknown stays unknown: not a match
    assert matches("NOT a = 1 OR b = 2", b="2") and not matches("a = 1 AND b = 2", b="2")
    assert matches("a = 'it''s'", a="it's") and matches("a = -1.5e1", a="-15")
    assert matches("(a = 1 OR a = 2) AND NOT (b = 'x')", a="2", b="y")
    assert matches("a.b_c$ = 1", **{"a.b_c$": "1"})
    for bad, position in (("", 6), ("a >", 9), ("a = 1 AND", 15), ("(a = 1", 12), ("a ! 1", 8),
                          ("a = 'x", 10), ("a IN ()", 12), ("a IN (b)", 12), ("a IS 1", 11),
                          ("a BETWEEN 1 OR 2", 18), ("a = 1 b", 12), ("a", 7)):
        with pytest.raises(FilterError) as refused:
            parse_filter("SQL92:" + bad)
        assert refused.value.position == position, bad


def test_hostile_expressions_are_refused_cleanly() -> None:
    too_long = "SQL92:" + "(" * 10_000 + "a = 1" + ")" * 10_000
    deep = "SQL92:" + "(" * 100 + "a = 1" + ")" * 100
    negated = "SQL92:" + "NOT " * 100 + "a = 1"
    in_list = "SQL92:a IN (" + ", ".join(["1"] * 300) + ")"
    for hostile, why in ((too_long, "longer than"), (deep, "nested deeper"),
                         (negated, "nested deeper"), (in_list, "more than 256"),
                         ("SQL92:a = 1" + " OR a = 1" * 500, "longer than"),
                         ("SQL92:\x00", "unexpected character"),
                         ("SQL92:a = 1e9999999", "unexpected")):
        message = check_config("tidelog.share.filter", hostile)
        assert message is not None and why in message and "position" in message, hostile
    assert len(too_long) > MAX_EXPRESSION_CHARS
    # Right at the bounds: accepted.
    nested = "SQL92:" + "(" * (MAX_DEPTH - 1) + "a = 1" + ")" * (MAX_DEPTH - 1)
    assert parse_filter(nested).matches({"a": "1"})


@settings(max_examples=150, deadline=None, database=None)
@given(st.text(max_size=60), st.dictionaries(st.sampled_from(["a", "b", "tag"]),
                                             st.text(max_size=5)))
def test_random_text_parses_or_fails_with_a_position(text: str, headers: dict[str, str]) -> None:
    for value in (text, "SQL92:" + text):
        try:
            compiled = parse_filter(value)
        except FilterError as error:
            assert 0 <= error.position <= len(value)
            continue
        assert compiled.matches(headers) in (True, False)


# ------------------------------------------------------------------ fuzz against a reference
# A small independent evaluator: expressions as trees, numbers as Fractions, SQL's
# three-valued logic spelt out with None for unknown.
NAMES = ["a", "b", "c"]
POOL = ["1", "2.5", "-3", "10", "1e1", "0", "abc", "", "it's", "x1", "010", ".5"]
REF_NUMBER = re.compile(r"^-?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def ref_number(text: str) -> Fraction | None:
    if not REF_NUMBER.match(text):
        return None
    mantissa, _, exponent = text.lower().partition("e")
    return Fraction(mantissa) * Fraction(10) ** int(exponent or 0)


def ref_value(node: tuple[Any, ...], headers: dict[str, str]) -> str | None:
    return headers.get(node[1]) if node[0] == "name" else node[1]


def ref_equal(left: str, right: str) -> bool:
    a, b = ref_number(left), ref_number(right)
    return a == b if a is not None and b is not None else left == right


def ref_eval(node: tuple[Any, ...], headers: dict[str, str]) -> bool | None:
    kind = node[0]
    if kind in ("and", "or"):
        values = [ref_eval(child, headers) for child in node[1:]]
        decisive = kind == "or"
        if decisive in values:
            return decisive
        return None if None in values else not decisive
    if kind == "not":
        value = ref_eval(node[1], headers)
        return None if value is None else not value
    if kind == "isnull":
        return (ref_value(node[1], headers) is None) != node[2]
    if kind == "cmp":
        return ref_compare(node[1], ref_value(node[2], headers), ref_value(node[3], headers))
    left = ref_value(node[1], headers)
    if left is None:
        return None
    if kind == "in":
        found = any(ref_equal(left, item) for item in node[2])
        return found != node[3]
    if kind == "between":
        result = ref_eval(("and", ("cmp", ">=", node[1], node[2]),
                           ("cmp", "<=", node[1], node[3])), headers)
        return None if result is None else result != node[4]
    raise AssertionError(kind)


def ref_compare(operator: str, left: str | None, right: str | None) -> bool | None:
    if left is None or right is None:
        return None
    if operator in ("=", "<>"):
        return ref_equal(left, right) == (operator == "=")
    a, b = ref_number(left), ref_number(right)
    if a is None or b is None:
        return None
    return {"<": a < b, ">": a > b, "<=": a <= b, ">=": a >= b}[operator]


def render_value(node: tuple[Any, ...]) -> str:
    if node[0] == "name":
        return str(node[1])
    text = str(node[1])
    if node[0] == "number":
        return text
    return "'" + text.replace("'", "''") + "'"


def render(node: tuple[Any, ...], keyword: Any) -> str:
    kind = node[0]
    if kind in ("and", "or"):
        parts = []
        for child in node[1:]:
            text = render(child, keyword)
            # Parentheses where precedence needs them (OR inside AND), sometimes elsewhere.
            if (kind == "and" and child[0] == "or") or keyword(child) == "paren":
                text = f"({text})"
            parts.append(text)
        return f" {keyword(kind.upper())} ".join(parts)
    if kind == "not":
        return f"{keyword('NOT')} ({render(node[1], keyword)})"
    if kind == "isnull":
        middle = " NOT" if node[2] else ""
        return f"{render_value(node[1])} IS{middle} NULL"
    if kind == "in":
        items = ", ".join(render_value(("string", i)) for i in node[2])
        return f"{render_value(node[1])}{' NOT' if node[3] else ''} IN ({items})"
    if kind == "between":
        return (f"{render_value(node[1])}{' NOT' if node[4] else ''} BETWEEN "
                f"{render_value(node[2])} AND {render_value(node[3])}")
    return f"{render_value(node[2])} {node[1]} {render_value(node[3])}"


values = st.one_of(
    st.sampled_from(NAMES).map(lambda n: ("name", n)),
    st.sampled_from(POOL).map(lambda v: ("string", v)),
    st.sampled_from(["1", "2.5", "-3", "10", "1e1", "0", ".5"]).map(lambda v: ("number", v)),
)
predicates = st.one_of(
    st.tuples(st.just("cmp"), st.sampled_from(["=", "<>", "<", ">", "<=", ">="]), values, values),
    st.tuples(st.just("in"), values, st.lists(st.sampled_from(POOL), min_size=1, max_size=4),
              st.booleans()),
    st.tuples(st.just("between"), values, values, values, st.booleans()),
    st.tuples(st.just("isnull"), values, st.booleans()),
)
trees = st.recursive(predicates, lambda inner: st.one_of(
    st.tuples(st.just("not"), inner),
    st.tuples(st.just("and"), inner, inner),
    st.tuples(st.just("or"), inner, inner),
), max_leaves=8)


@settings(max_examples=250, deadline=None, database=None)
@given(trees, st.dictionaries(st.sampled_from(NAMES), st.sampled_from(POOL)), st.randoms())
def test_sql92_matches_the_reference_evaluator(
    tree: tuple[Any, ...], headers: dict[str, str], random: Any
) -> None:
    def keyword(word: Any) -> str:
        if not isinstance(word, str) or word.islower():
            return "paren" if random.random() < 0.2 else ""
        return word.lower() if random.random() < 0.3 else word

    expression = "SQL92:" + render(tree, keyword)
    assert parse_filter(expression).matches(headers) == (ref_eval(tree, headers) is True), (
        expression, headers)


# ------------------------------------------------------------------ scanning real batches
def batch(records: list[NewRecord], codec: Codec = Codec.NONE, base: int = 100) -> RecordBatch:
    return RecordBatch(memoryview(build_batch(records, base_offset=base, codec=codec)))


def test_filtered_offsets_scan_only_headers() -> None:
    records = [NewRecord(b"v%d" % i, b"k", (("tag", b"TagA" if i % 3 == 0 else b"TagB"),
                                               ("price", str(i * 10).encode()), ("n", None)))
               for i in range(9)]
    tags = group_filter({"tidelog.share.filter": "TagA"})
    sql = group_filter({"tidelog.share.filter": "SQL92:price >= 50 AND n IS NULL"})
    assert tags is not None and sql is not None
    for codec in (Codec.NONE, Codec.GZIP, Codec.ZSTD):
        assert filtered_offsets(batch(records, codec), tags) == {
            100 + i for i in range(9) if i % 3}
        assert filtered_offsets(batch(records, codec), sql) == {100 + i for i in range(5)}
    # Only the tag header on each record (checked on whole buffers), or repeated / null
    # values (the last one counts, a null one is absent).
    only_tags = [NewRecord(b"v", None, (("tag", (b"TagA", b"TagB", b"")[i % 3]),))
                 for i in range(6)]
    assert filtered_offsets(batch(only_tags), tags) == {101, 102, 104, 105}
    spelt = [NewRecord(b"v", None, (("t", b"TagA"),)), NewRecord(b"v", None, (("agtag", b"TagA"),))]
    assert filtered_offsets(batch(spelt), tags) == {100, 101}  # keys "t" + "agtag" != "tag" x 2
    repeated = [NewRecord(b"v", None, (("tag", b"TagA"), ("tag", b"TagB"))),
                NewRecord(b"v", None, (("tag", b"TagB"), ("tag", b"TagA"))),
                NewRecord(b"v", None, (("tag", b"TagA"), ("tag", None)))]
    assert filtered_offsets(batch(repeated), tags) == {100, 102}
    # No record has the header: decided once for the batch, all dropped (or all kept).
    plain = batch([NewRecord(b"x", None, (("other", b"1"),)) for _ in range(5)])
    assert filtered_offsets(plain, tags) == set(range(100, 105))
    keep = group_filter({"tidelog.share.filter": "SQL92:price IS NULL"})
    assert keep is not None and filtered_offsets(plain, keep) == frozenset()
    # Another tag header; no filter, or `*`: nothing to do.
    custom = group_filter({"tidelog.share.filter": "TagB",
                           "tidelog.share.filter.tag.header": "price"})
    assert custom is not None and filtered_offsets(batch(records), custom) == set(range(100, 109))
    assert group_filter({}) is None and group_filter({"tidelog.share.filter": "*"}) is None
    # A corrupt records section drops nothing (delivered as stored).
    broken = bytearray(build_batch(records))
    broken[61:63] = b"\x7f\x7f"
    assert filtered_offsets(RecordBatch(memoryview(bytes(broken))), sql) == frozenset()
