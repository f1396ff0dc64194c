"""The console's hand-made Kafka requests (kafka_raw, cluster_transactions) facing a hostile or
broken server: bounded frames, truncated answers, a SCRAM server that lies. Every failure is a
ConsoleError with words, never a hang or a crash. No broker needed."""

from __future__ import annotations

import random
import socket
import struct
import threading
from collections.abc import Callable, Iterator

import pytest

from tidelog.console.cluster_transactions import parse_describe_transactions
from tidelog.console.errors import ClusterError, ConsoleError, Unauthenticated
from tidelog.console.kafka_raw import RawConnection, schema_module, scram_exchange

LIST_TRANSACTIONS = 66


@pytest.fixture
def hostile_server() -> Iterator[Callable[[bytes], int]]:
    """`serve(answer)`: a one-shot TCP server that reads a request frame and sends `answer`
    (raw bytes), then closes; returns its port."""
    servers: list[socket.socket] = []

    def serve(answer: bytes) -> int:
        server = socket.create_server(("127.0.0.1", 0))
        servers.append(server)

        def run() -> None:
            conn, _ = server.accept()
            with conn:
                size = struct.unpack(">i", conn.recv(4))[0]
                while size > 0:
                    size -= len(conn.recv(size))
                conn.sendall(answer)

        threading.Thread(target=run, daemon=True).start()
        return int(server.getsockname()[1])

    yield serve
    for server in servers:
        server.close()


def _list_request() -> object:
    module = schema_module(LIST_TRANSACTIONS, 1)
    return module.ListTransactionsRequest(state_filters=(), producer_id_filters=(),
                                          duration_filter=-1)


@pytest.mark.parametrize(("answer", "words"), [
    (struct.pack(">i", 0x7FFFFFFF), "answered a frame of 2147483647 bytes"),
    (struct.pack(">i", -5), "answered a frame of -5 bytes"),
    (struct.pack(">i", 100) + b"\0" * 10, "closed the connection"),
    (b"", "closed the connection"),
    (struct.pack(">i", 9) + b"\0\0\0\1" + b"\xff" * 5, "cannot decode"),
])
def test_bad_frames_are_refused_in_words(hostile_server: Callable[[bytes], int], answer: bytes,
                                         words: str) -> None:
    port = hostile_server(answer)
    with RawConnection("127.0.0.1", port, {}, 5.0) as conn, \
            pytest.raises(ClusterError, match=words):
        conn.call(LIST_TRANSACTIONS, 1, _list_request())


def test_unreachable_broker_is_503() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: refused
    with pytest.raises(ClusterError, match="connecting to") as caught:
        RawConnection("127.0.0.1", port, {}, 2.0)
    assert caught.value.status == 503


def test_describe_transactions_parser_never_crashes() -> None:
    """Seeded random and truncated answers: a list or a ClusterError, nothing else."""
    rng = random.Random(15)
    good = (b"\0\0\0\0" + b"\x02" + b"\0\0" + b"\x04abc" + b"\x08Ongoing" +
            struct.pack(">iqqh", 60000, 1, 7, 0) + b"\x02" + b"\x02t" + b"\x02" +
            struct.pack(">i", 0) + b"\0" + b"\0" + b"\0")
    rows = parse_describe_transactions(good)
    assert rows == [{"transactional_id": "abc", "state": "Ongoing", "producer_id": 7,
                     "producer_epoch": 0, "timeout_ms": 60000, "start_time_ms": 1,
                     "partitions": [{"topic": "t", "partition": 0}]}]
    cases = [good[:n] for n in range(len(good))]
    cases += [bytes(rng.getrandbits(8) for _ in range(rng.randrange(64))) for _ in range(2000)]
    cases += [good[:10] + b"\xff\xff\xff\xff\x0f" + good[15:]]  # a huge count
    for data in cases:
        try:
            parse_describe_transactions(data)
        except ClusterError:
            pass


def _scram_server(first: Callable[[str], str], final: str = "v=bad") -> Callable[[bytes], bytes]:
    """A fake SCRAM server: the first step answers `first(client_nonce)`, the second `final`."""
    state: dict[str, str] = {}

    def step(token: bytes) -> bytes:
        text = token.decode()
        if "nonce" not in state:
            state["nonce"] = text.split("r=", 1)[1]
            return first(state["nonce"]).encode()
        return final.encode()

    return step


@pytest.mark.parametrize(("first", "words"), [
    (lambda n: f"r={n}x,s=c2FsdA==,i=1000000000", "not acceptable"),  # iterations: a CPU trap
    (lambda n: "r=someone-else,s=c2FsdA==,i=4096", "not acceptable"),  # not our nonce
    (lambda n: f"r={n}x,i=4096", "malformed"),  # no salt
    (lambda n: f"r={n}x,s=!!!,i=4096", "malformed"),
    (lambda n: f"r={n}x,s=c2FsdA==,i=4096", "signature does not verify"),  # a wrong proof back
])
def test_a_lying_scram_server_is_refused(first: Callable[[str], str], words: str) -> None:
    with pytest.raises(Unauthenticated, match=words):
        scram_exchange("SCRAM-SHA-256", "alice", "pw", _scram_server(first))


def test_errors_are_console_errors() -> None:
    assert issubclass(Unauthenticated, ConsoleError) and Unauthenticated("x").status == 401
