"""The message filter language: what it matches, and that bad input is a FilterError in words
(never an exception from deeper down, never code execution)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidelog.console.filters import MAX_EXPRESSION_CHARS, FilterError, compile_filter

MESSAGE = {"topic": "orders", "partition": 2, "offset": 41, "timestamp": 1700000000000,
           "key": "order-7", "value": '{"user": {"id": 12, "tags": ["a", "b"]}, "ok": true}',
           "headers": [("trace", "abc"), ("empty", None)]}


@pytest.mark.parametrize("expression, expected", [
    ("", True),
    ('key == "order-7"', True),
    ('key != "order-7"', False),
    ("partition == 2 and offset >= 41", True),
    ("offset > 41 or partition < 2", False),
    ('not (key startswith "x")', True),
    ('key endswith "-7" and value contains "tags"', True),
    ("value.user.id == 12", True),
    ("value.user.id > 11.5", True),
    ('value.user.tags.1 == "b"', True),
    ("value.ok == true", True),
    ("value.missing == null", True),
    ("value.missing > 3", False),
    ('header["trace"] == "abc"', True),
    ('header["empty"] == null', True),
    ('header["absent"] != null', False),
    ('topic == "orders" and timestamp >= 1700000000000', True),
    ('KEY == "order-7" AND NOT partition == 3', True),
    (r'value contains "\"id\""', True),
])
def test_matches(expression: str, expected: bool) -> None:
    assert compile_filter(expression)(MESSAGE) is expected


def test_non_json_value_paths_are_null() -> None:
    assert compile_filter("value.a == null")({"value": "[" * 100_000 + "]" * 100_000})
    assert compile_filter("value.a == null")({"value": "plain text"})
    assert not compile_filter("value.a == 1")({"value": None})


@pytest.mark.parametrize("expression, words", [
    ("key ==", "position 6"),
    ("nope == 1", "unknown field 'nope'"),
    ("key = 1", "unexpected character '='"),
    ('(key == "a"', "expected ')'"),
    ('key == "a" extra', "unexpected 'extra'"),
    ("header[key] == 1", "expected string"),
    ('__import__("os").system("id")', "unknown field"),
    ("key == 'single'", "unexpected character"),
    ("key", "expected a comparison"),
    ("value. == 1", "JSON field name"),
])
def test_errors_in_words(expression: str, words: str) -> None:
    with pytest.raises(FilterError) as info:
        compile_filter(expression)
    assert words in str(info.value)


def test_deep_nesting_is_refused_not_a_crash() -> None:
    with pytest.raises(FilterError, match="nested deeper"):
        compile_filter("(" * 600 + 'key == "a"' + ")" * 600)
    with pytest.raises(FilterError, match="nested deeper"):
        compile_filter("not " * 400 + 'key == "a"')
    assert compile_filter("(" * 20 + 'key == "order-7"' + ")" * 20)(MESSAGE)


def test_length_limit() -> None:
    with pytest.raises(FilterError, match="longer than"):
        compile_filter('key == "' + "a" * MAX_EXPRESSION_CHARS + '"')


@given(st.text(max_size=80))
def test_any_text_compiles_or_fails_cleanly(text: str) -> None:
    try:
        predicate = compile_filter(text)
    except FilterError:
        return
    assert predicate(MESSAGE) in (True, False)
