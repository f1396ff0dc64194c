"""Fuzz decode_request in a process of its own (run by test_fuzz.py).

A native abort in kio would kill this process, not pytest: the parent sees the signal in the
exit status. Exit 0 and a last line ``fuzzed N frames`` means every input either decoded or
raised a TidelogError. Usage: python fuzz_worker.py [hypothesis_examples]
"""

from __future__ import annotations

import random
import struct
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))

from samples import SUPPORTED_PAIRS, sample_frame  # type: ignore[import-not-found]

from tidelog.errors import TidelogError
from tidelog.protocol.codec import decode_request

# Lengths and counts that made kio's native reader allocate absurd amounts, plus edges.
HUGE_FIELDS = [
    b"\xff\xff\xff\xff\x0f",  # uvarint 2**32 - 1
    b"\xff\xff\xff\xff\x7f",  # uvarint 2**35 - 1, the largest kio accepts
    b"\x80\x80\x80\x80\x0c",  # uvarint 3 * 2**30
    b"\xff\xff\xff\xff\xff",  # over-long uvarint
    b"\x7f\xff\xff\xff",  # int32 max
    b"\x80\x00\x00\x00",  # int32 min
    b"\xff\xff\xff\xfe",  # int32 -2
    b"\xff\xff",  # int16 -1 / uvarint start
    b"\x7f\xff",  # int16 max
    b"\x00",
]

decoded = 0


def feed(frame: bytes) -> None:
    global decoded
    try:
        decode_request(frame)
    except TidelogError:
        pass
    except BaseException as error:
        raise AssertionError(f"{type(error).__name__} escaped for frame {frame.hex()}") from error
    decoded += 1


def mutate(frame: bytes, rnd: random.Random) -> bytes:
    data = bytearray(frame)
    for _ in range(rnd.randint(1, 3)):
        choice = rnd.random()
        position = rnd.randrange(8, len(data) + 1) if len(data) > 8 else len(data)
        if choice < 0.3 and data:
            index = rnd.randrange(len(data))
            data[index] ^= 1 << rnd.randrange(8)
        elif choice < 0.5:
            del data[position:]
        elif choice < 0.8:
            field = rnd.choice(HUGE_FIELDS)
            data[position : position + len(field)] = field
        else:
            data[position:position] = rnd.choice(HUGE_FIELDS)
    return bytes(data)


def deterministic_pass(rounds: int) -> None:
    """Every supported (api_key, version): truncations, bit flips and huge counts."""
    for api_key, version in SUPPORTED_PAIRS:
        for seed in range(3):
            _, frame = sample_frame(api_key, version, seed)
            for cut in range(len(frame)):
                feed(frame[:cut])
            rnd = random.Random(seed)
            for _ in range(rounds):
                feed(mutate(frame, rnd))
            for position in range(8, len(frame)):
                for field in HUGE_FIELDS[:5]:
                    feed(frame[:position] + field + frame[position + len(field) :])


header = st.tuples(
    st.sampled_from([*sorted({key for key, _ in SUPPORTED_PAIRS}), -1, 99, 1000]),
    st.integers(-1, 20),
    st.integers(-(2**31), 2**31 - 1),
)


def hypothesis_pass(examples: int) -> None:
    fuzz = settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )

    @fuzz
    @given(header, st.binary(max_size=64))
    def random_bytes(head: tuple[int, int, int], body: bytes) -> None:
        api_key, version, correlation_id = head
        frame = struct.pack(">hhih", api_key, version, correlation_id, -1) + body
        feed(frame)
        feed(frame[:8] + body)

    @fuzz
    @given(st.sampled_from(SUPPORTED_PAIRS), st.integers(0, 50), st.randoms(use_true_random=False))
    def mutated(pair: tuple[int, int], seed: int, rnd: random.Random) -> None:
        _, frame = sample_frame(pair[0], pair[1], seed)
        feed(mutate(frame, rnd))

    random_bytes()
    mutated()


if __name__ == "__main__":
    examples = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    deterministic_pass(rounds=20)
    hypothesis_pass(examples)
    print(f"fuzzed {decoded} frames")
