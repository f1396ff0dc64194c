"""Timer headers and the `__tidelog_timer` meta layout (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidelog.errors import InvalidRecordError
from tidelog.storage.timer_records import (
    DELAY_LEVELS_MS,
    Cancel,
    Done,
    Intent,
    ProducerSequence,
    Schedule,
    TimerRecordError,
    decode_meta,
    delivery_time,
    encode_meta,
)

WEEK_MS = 7 * 24 * 3600 * 1000


def test_headers_decide_in_rocketmq_order() -> None:
    now = 1_000_000
    assert delivery_time([], now, WEEK_MS) is None
    assert delivery_time([("TIMER_DELIVER_MS", b"1005000")], now, WEEK_MS) == 1_005_000
    assert delivery_time([("TIMER_DELAY_MS", b"250")], now, WEEK_MS) == now + 250
    assert delivery_time([("DELAY", b"3")], now, WEEK_MS) == now + 10_000
    assert delivery_time([("DELAY", b"18")], now, WEEK_MS) == now + 7_200_000
    assert delivery_time([("DELAY", b"0")], now, WEEK_MS) is None
    both = [("TIMER_DELAY_MS", b"5"), ("TIMER_DELIVER_MS", b"1000007")]
    assert delivery_time(both, now, WEEK_MS) == 1_000_007  # absolute first
    assert len(DELAY_LEVELS_MS) == 18


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ([("TIMER_DELAY_MS", b"-5")], "non-negative decimal"),
        ([("TIMER_DELAY_MS", b"1e3")], "non-negative decimal"),
        ([("TIMER_DELIVER_MS", None)], "non-negative decimal"),
        ([("TIMER_DELIVER_MS", b"9" * 21)], "non-negative decimal"),
        ([("DELAY", b"19")], "level 0-18"),
        ([("TIMER_DELAY_MS", str(WEEK_MS + 1).encode())], "tidelog.delivery.max.delay.ms"),
    ],
)
def test_bad_headers_are_invalid_records(headers: list[tuple[str, bytes | None]],
                                         message: str) -> None:
    with pytest.raises(InvalidRecordError, match=message):
        delivery_time(headers, 0, WEEK_MS)


Meta = Schedule | Cancel | Done | ProducerSequence | Intent
metas = st.one_of(
    st.builds(Schedule, st.integers(0, 2**62), st.integers(0, 2**62), st.integers(0, 2**62),
              st.text(max_size=40), st.integers(0, 2**31 - 1), st.binary(min_size=16,
                                                                         max_size=16)),
    st.builds(Cancel, st.integers(0, 2**62), st.text(max_size=40), st.binary(max_size=40)),
    st.builds(Done, st.integers(-1, 2**62), st.text(max_size=40), st.integers(0, 2**31 - 1),
              st.lists(st.integers(0, 2**62), max_size=20).map(tuple)),
    st.builds(ProducerSequence, st.integers(0, 2**62), st.integers(0, 2**15 - 1),
              st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1), st.text(max_size=40),
              st.integers(0, 2**31 - 1)),
    st.builds(Intent, st.integers(0, 2**15 - 1), st.integers(0, 2**31 - 1),
              st.text(max_size=40), st.integers(0, 2**31 - 1),
              st.lists(st.integers(0, 2**62), max_size=20).map(tuple)),
)


@given(metas)
def test_meta_round_trips(meta: Meta) -> None:
    assert decode_meta(encode_meta(meta)) == meta


@given(metas, st.data())
def test_every_cut_or_change_is_refused_or_decoded(meta: Meta, data: st.DataObject) -> None:
    """A meta cut short or with a byte more is refused with TimerRecordError, only."""
    encoded = encode_meta(meta)
    cut = data.draw(st.integers(0, len(encoded) - 1))
    for damaged in (encoded[:cut], encoded + b"\xff"):
        with pytest.raises(TimerRecordError):
            decode_meta(damaged)
