"""Shared strategies for the records tests."""

from __future__ import annotations

from hypothesis import strategies as st

from tidelog.records.builder import NewRecord

optional_bytes = st.one_of(st.none(), st.binary(max_size=64))
headers = st.lists(st.tuples(st.text(max_size=8), optional_bytes), max_size=3).map(tuple)
new_records = st.builds(
    NewRecord,
    value=optional_bytes,
    key=optional_bytes,
    headers=headers,
    timestamp_ms=st.one_of(st.none(), st.integers(min_value=-(2**40), max_value=2**42)),
)
