"""`tidelog.share.retry.backoff.ms`: RocketMQ-style retry back-off for share groups (pure).

A share group with this config makes a record it released, or whose acquisition lock expired,
acquirable again only after a back-off chosen by the record's delivery count: after delivery
n the n-th step applies, the last step repeating once the list runs out (RocketMQ's
`messageDelayLevel` table, applied to its %RETRY% topic). Two syntaxes:

    10s 30s 1m 2m 5m 1h       a list of steps (RocketMQ's); units ms, s, m, h; a bare number
                              is milliseconds; separated by spaces or commas
    exponential:1s:2:10m      initial step, multiplier (a decimal >= 1), cap: the n-th step is
                              min(initial * multiplier ** (n - 1), cap)

An empty value means no back-off (Kafka's behaviour: available at once). Bounds: at most
`MAX_STEPS` steps, each at most `MAX_STEP_MS` (1 day); the value at most `MAX_TEXT` chars.
`parse_backoff` raises `BackoffError` with a message saying what is wrong; the result is a
tuple of step lengths in ms (`exponential:` is expanded up to the cap, at most `MAX_STEPS`).
"""

from __future__ import annotations

import functools
import re

CONFIG = "tidelog.share.retry.backoff.ms"
MAX_STEPS = 64
MAX_STEP_MS = 24 * 3600 * 1000
MAX_TEXT = 1024
_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "": 1}
_STEP = re.compile(r"(\d{1,12})(ms|s|m|h|)")


class BackoffError(ValueError):
    """The config value is malformed; the message says why."""


def _step_ms(text: str) -> int:
    match = _STEP.fullmatch(text.strip().lower())
    if match is None:
        raise BackoffError(f"{text.strip()!r} is not a duration (a number with ms, s, m or h)")
    value = int(match.group(1)) * _UNITS[match.group(2)]
    if value > MAX_STEP_MS:
        raise BackoffError(f"step {text.strip()!r} is longer than 1 day")
    return value


def parse_backoff(text: str) -> tuple[int, ...]:
    """The back-off steps in ms (empty: none); BackoffError when malformed."""
    text = text.strip()
    if len(text) > MAX_TEXT:
        raise BackoffError(f"longer than {MAX_TEXT} characters")
    if not text:
        return ()
    if text.lower().startswith("exponential:"):
        parts = text.split(":")
        if len(parts) != 4:
            raise BackoffError("expected exponential:<initial>:<multiplier>:<max>")
        initial, cap = _step_ms(parts[1]), _step_ms(parts[3])
        try:
            multiplier = float(parts[2])
        except ValueError:
            raise BackoffError(f"multiplier {parts[2]!r} is not a number") from None
        if not 1.0 <= multiplier <= 100.0:
            raise BackoffError(f"multiplier {parts[2]!r} must be between 1 and 100")
        if initial <= 0 or cap < initial:
            raise BackoffError("initial must be > 0 and max at least initial")
        steps = [initial]
        while steps[-1] < cap and len(steps) < MAX_STEPS:
            steps.append(min(cap, max(steps[-1] + 1, int(steps[-1] * multiplier))))
        return tuple(steps)
    pieces = [p for p in re.split(r"[\s,]+", text) if p]
    if len(pieces) > MAX_STEPS:
        raise BackoffError(f"more than {MAX_STEPS} steps")
    return tuple(_step_ms(piece) for piece in pieces)


def backoff_ms(steps: tuple[int, ...], delivery_count: int) -> int:
    """How long a record delivered `delivery_count` times waits before it may be acquired
    again: the n-th step, the last one repeated; 0 without steps."""
    if not steps or delivery_count <= 0:
        return 0
    return steps[min(delivery_count, len(steps)) - 1]


@functools.lru_cache(maxsize=256)
def configured_backoff(text: str) -> tuple[int, ...]:
    """The steps of a stored (already validated) config value, cached; () if malformed."""
    try:
        return parse_backoff(text)
    except BackoffError:
        return ()
