"""Fuzz the hand-written Produce decoder (broker/wire.py) in a process of its own.

Run by test_produce_fuzz.py. Frames are decoded exactly as the connection does
(`decode_request_header`, then `decode_produce_request`). Only ProtocolDecodeError may escape;
a decoded frame's record views must lie inside it. Exit 0 and a last line ``fuzzed N frames``.
Usage: python produce_fuzz_worker.py [hypothesis_examples]
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from broker.raw import encode_request, request_module
from tidelog.errors import ProtocolDecodeError
from tidelog.protocol.versions import SUPPORTED_VERSIONS
from tidelog.protocol.wire import decode_produce_request, decode_request_header
from tidelog.records.builder import NewRecord, build_batch

LOW, HIGH = SUPPORTED_VERSIONS[0]
VERSIONS = list(range(LOW, HIGH + 1))
HUGE_FIELDS = [
    b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\xff\x7f", b"\x80\x80\x80\x80\x0c",
    b"\xff\xff\xff\xff\xff", b"\x7f\xff\xff\xff", b"\x80\x00\x00\x00", b"\xff\xff\xff\xfe",
    b"\xff\xff", b"\x7f\xff", b"\x00",
]
decoded = 0


def sample(version: int, seed: int) -> bytes:
    """A valid Produce frame (no size prefix): 1-3 topics of 1-3 partitions, some null sets."""
    rnd = random.Random(seed)
    module = request_module(0, version)
    import uuid
    from datetime import timedelta

    topics = []
    for t in range(rnd.randint(1, 3)):
        partitions = []
        for p in range(rnd.randint(1, 3)):
            records = None if rnd.random() < 0.1 else bytes(
                build_batch([NewRecord(value=rnd.randbytes(rnd.randint(0, 40)))])
            )
            partitions.append(module.PartitionProduceData(index=p, records=records))
        # v13+ names the topic by id (16 bytes) instead of a name.
        named = ({"topic_id": uuid.UUID(int=rnd.getrandbits(128))} if version >= 13
                 else {"name": f"t{t}"})
        topics.append(module.TopicProduceData(**named, partition_data=tuple(partitions)))
    body = module.ProduceRequest(
        transactional_id=rnd.choice([None, "", "tx"]), acks=rnd.choice([0, 1, -1]),
        timeout=timedelta(milliseconds=rnd.randint(0, 30000)), topic_data=tuple(topics),
    )
    return encode_request(0, version, seed, body)[4:]


def feed(frame: bytes) -> bool:
    """True when the frame decoded, False when it raised ProtocolDecodeError."""
    global decoded
    buffer = bytearray(frame)
    view = memoryview(buffer)
    try:
        header, position = decode_request_header(view)
        request = decode_produce_request(view, header.api_version, position)
    except ProtocolDecodeError:
        decoded += 1
        return False
    except BaseException as error:
        raise AssertionError(f"{type(error).__name__} escaped for frame {frame.hex()}") from error
    for topic in request.topics:
        for partition in topic.partitions:
            if partition.records is not None:
                assert partition.records.obj is buffer
    decoded += 1
    return True


def mutate(frame: bytes, rnd: random.Random) -> bytes:
    data = bytearray(frame)
    for _ in range(rnd.randint(1, 4)):
        if not data:
            break
        position = rnd.randrange(4, len(data)) if len(data) > 4 else 0
        choice = rnd.random()
        if choice < 0.3:
            data[rnd.randrange(len(data))] ^= 1 << rnd.randrange(8)
        elif choice < 0.5:
            del data[position:]
        elif choice < 0.8:
            field = rnd.choice(HUGE_FIELDS)
            data[position : position + len(field)] = field
        else:
            data[position:position] = rnd.choice(HUGE_FIELDS)
    return bytes(data)


def deterministic_pass(rounds: int) -> None:
    for version in VERSIONS:
        for seed in range(3):
            frame = sample(version, seed)
            assert feed(frame), f"a valid v{version} frame did not decode"
            for cut in range(len(frame)):
                feed(frame[:cut])
            feed(frame + b"\x00")  # a trailing byte
            rnd = random.Random(seed)
            for _ in range(rounds):
                feed(mutate(frame, rnd))
            for position in range(8, len(frame)):
                for field in HUGE_FIELDS[:7]:
                    feed(frame[:position] + field + frame[position + len(field) :])


def hypothesis_pass(examples: int) -> None:
    fuzz = settings(
        max_examples=examples, deadline=None, database=None,
        suppress_health_check=list(HealthCheck),
    )

    @fuzz
    @given(st.sampled_from(VERSIONS), st.integers(-(2**31), 2**31 - 1), st.binary(max_size=96))
    def random_body(version: int, correlation_id: int, body: bytes) -> None:
        feed(bytes([0, 0, 0, version]) + correlation_id.to_bytes(4, "big", signed=True) + body)

    @fuzz
    @given(st.sampled_from(VERSIONS), st.integers(0, 30), st.randoms(use_true_random=False))
    def mutated(version: int, seed: int, rnd: random.Random) -> None:
        feed(mutate(sample(version, seed), rnd))

    random_body()
    mutated()


if __name__ == "__main__":
    examples = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    deterministic_pass(rounds=40)
    hypothesis_pass(examples)
    print(f"fuzzed {decoded} frames")
