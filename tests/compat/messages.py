"""Deterministic test messages and the byte-for-byte comparison every client test uses."""

from __future__ import annotations

import random
from dataclasses import dataclass

COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")
BASE_TIMESTAMP_MS = 1_700_000_000_000


@dataclass(frozen=True)
class Message:
    key: bytes | None
    value: bytes
    headers: tuple[tuple[str, bytes], ...]
    timestamp_ms: int


def make_messages(count: int, seed: int, *, max_value: int = 300) -> list[Message]:
    """Keys (some null), binary values, 0-2 headers, increasing explicit timestamps."""
    rng = random.Random(seed)
    messages = []
    for index in range(count):
        key = None if index % 7 == 3 else f"key-{seed}-{index}".encode()
        value = rng.randbytes(rng.randint(1, max_value))
        headers = tuple((f"h{n}", rng.randbytes(rng.randint(0, 12))) for n in range(index % 3))
        messages.append(Message(key, value, headers, BASE_TIMESTAMP_MS + seed * 10_000 + index))
    return messages


def assert_same(sent: list[Message], received: list[Message]) -> None:
    assert len(received) == len(sent), f"sent {len(sent)}, read back {len(received)}"
    for index, (want, got) in enumerate(zip(sent, received, strict=True)):
        assert got == want, f"message {index} differs: sent {want!r:.200}, got {got!r:.200}"
