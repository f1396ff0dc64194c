"""The live-broker fuzzer (issue 16): real client sessions, captured (capture.py), replayed
against a running broker with mutations, while a canary producer and consumer check that
nothing stored is lost or damaged.

    stats = fuzz_sessions(("127.0.0.1", port), sessions, seconds=30, seed=7, workers=6)

Each round picks one captured connection (its frames in order: ApiVersions, Metadata, Produce,
JoinGroup, ...), applies one to three mutations, opens a fresh connection, sends the frames
with their size prefixes back to back (pipelined, as clients do) and drains whatever the broker
answers until it falls silent or closes the connection. The broker
may answer with an error, close the connection, or ignore a frame it is still waiting the rest
of; it must never stop serving. Mutations:

  flip       random bits of one frame flipped
  bytes      a run of one frame's bytes replaced with random or boundary values (0x00, 0xff, 0x7f)
  truncate   one frame cut short (its size prefix says so: a short but well-framed request)
  size       one frame's size prefix lies: larger (then the connection is closed after it),
             negative, or past the broker's socket.request.max.bytes
  header     the api key / api version / correlation id of one frame replaced
  splice     the tail of one frame grafted onto the head of another (any session)
  repeat     one frame sent many times in a row (pipelining past the in-flight limit)
  reorder    the frames shuffled

Everything is seeded: the seed and the round number replay one input.
"""

from __future__ import annotations

import random
import socket
import struct
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

MUTATIONS = ("flip", "bytes", "truncate", "size", "header", "splice", "repeat", "reorder")
BOUNDARY = (0x00, 0xFF, 0x7F, 0x80)
FIRST_ANSWER_S = 0.5  # the broker's first bytes (or its close) after the last frame
ANSWER_IDLE_S = 0.05  # then silent for this long: done
ANSWER_MAX_S = 2.0
MAX_REPEAT = 64


@dataclass
class FuzzStats:
    rounds: int = 0
    frames: int = 0
    answers_bytes: int = 0
    closed_by_broker: int = 0
    refused: int = 0  # connect failed (must stay 0: the broker always accepts)
    mutations: Counter[str] = field(default_factory=Counter)

    def line(self) -> str:
        kinds = " ".join(f"{k}={v}" for k, v in sorted(self.mutations.items()))
        return (f"{self.rounds} sessions, {self.frames} frames, {self.answers_bytes} answer "
                f"bytes, {self.closed_by_broker} closed by the broker, {self.refused} refused; "
                f"{kinds}")


def mutate(frames: list[bytes], pool: list[list[bytes]], rng: random.Random,
           counts: Counter[str]) -> list[bytes]:
    """Frames with their size prefixes, one to three mutations applied."""
    bodies = [bytearray(f) for f in frames]
    prefixes: list[bytes | None] = [None] * len(bodies)  # None: the true size
    for _ in range(rng.randint(1, 3)):
        kind = rng.choice(MUTATIONS)
        counts[kind] += 1
        index = rng.randrange(len(bodies))
        body = bodies[index]
        if kind == "flip" and body:
            for _ in range(rng.randint(1, 8)):
                body[rng.randrange(len(body))] ^= 1 << rng.randrange(8)
        elif kind == "bytes" and body:
            start = rng.randrange(len(body))
            for position in range(start, min(len(body), start + rng.randint(1, 16))):
                body[position] = rng.choice(BOUNDARY) if rng.random() < 0.5 else rng.randrange(256)
        elif kind == "truncate":
            del body[rng.randrange(len(body) + 1):]
        elif kind == "size":
            lie = rng.choice((len(body) + rng.randint(1, 1000), -rng.randint(1, 1 << 31),
                              rng.randint(100 << 20, (1 << 31) - 1), 0))
            prefixes[index] = struct.pack(">i", lie)
        elif kind == "header" and len(body) >= 8:
            field_at = rng.choice((0, 2, 4))
            width = 4 if field_at == 4 else 2
            value = rng.choice((-1, 0, 1, 0x7FFF, rng.randrange(1 << (8 * width - 1))))
            body[field_at:field_at + width] = value.to_bytes(width, "big", signed=True)
        elif kind == "splice":
            other = rng.choice(rng.choice(pool))
            cut_here, cut_there = rng.randrange(len(body) + 1), rng.randrange(len(other) + 1)
            bodies[index] = body = bytearray(body[:cut_here] + other[cut_there:])
        elif kind == "repeat":
            times = rng.randint(2, MAX_REPEAT)
            bodies[index + 1:index + 1] = [bytearray(body) for _ in range(times - 1)]
            prefixes[index + 1:index + 1] = [prefixes[index]] * (times - 1)
        elif kind == "reorder":
            order = list(range(len(bodies)))
            rng.shuffle(order)
            bodies = [bodies[i] for i in order]
            prefixes = [prefixes[i] for i in order]
    return [(prefix if prefix is not None else struct.pack(">i", len(body))) + bytes(body)
            for prefix, body in zip(prefixes, bodies, strict=True)]


def _drain(sock: socket.socket) -> tuple[int, bool]:
    """Answer bytes read until the broker is silent (FIRST_ANSWER_S for the first bytes,
    ANSWER_IDLE_S after them, ANSWER_MAX_S in all), and whether it closed the connection."""
    received = 0
    deadline = time.monotonic() + ANSWER_MAX_S
    while time.monotonic() < deadline:
        sock.settimeout(ANSWER_IDLE_S if received else FIRST_ANSWER_S)
        try:
            chunk = sock.recv(1 << 16)
        except TimeoutError:
            return received, False
        except OSError:
            return received, True
        if not chunk:
            return received, True
        received += len(chunk)
    return received, False


def _one_round(address: tuple[str, int], frames: list[bytes], stats: FuzzStats,
               lock: threading.Lock) -> None:
    try:
        sock = socket.create_connection(address, timeout=5)
    except OSError:
        with lock:
            stats.refused += 1
        return
    sent, answered, closed = 0, 0, False
    try:
        for frame in frames:
            try:
                sock.sendall(frame)
            except OSError:  # the broker closed it after an earlier frame
                closed = True
                break
            sent += 1
        got, closed_now = _drain(sock)
        answered, closed = got, closed or closed_now
    finally:
        sock.close()
    with lock:
        stats.frames += sent
        stats.answers_bytes += answered
        stats.closed_by_broker += closed


def fuzz_sessions(address: tuple[str, int], sessions: list[list[bytes]], *, seconds: float,
                  seed: int, workers: int = 6) -> FuzzStats:
    """Mutated sessions from `workers` threads for `seconds`; each thread has its own rng
    (seed, worker), so a run replays."""
    stats = FuzzStats()
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds

    def work(worker: int) -> None:
        rng = random.Random(seed * 1000 + worker)
        counts: Counter[str] = Counter()
        rounds = 0
        while time.monotonic() < stop_at:
            frames = mutate(rng.choice(sessions), sessions, rng, counts)
            _one_round(address, frames, stats, lock)
            rounds += 1
        with lock:
            stats.rounds += rounds
            stats.mutations.update(counts)

    threads = [threading.Thread(target=work, args=(n,), daemon=True) for n in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds + 60)
    return stats
