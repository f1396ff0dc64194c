"""connections.max.idle.ms: a connection that sends nothing (or half a frame) is closed; one
that keeps talking is not."""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

from confluent_kafka import Producer


def _closed_by_peer(sock: socket.socket, timeout_s: float) -> bool:
    sock.settimeout(timeout_s)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def test_idle_and_half_sent_connections_are_closed(broker_factory: Any) -> None:
    broker = broker_factory(settings={"connections.max.idle.ms": "1500"})
    host, port = broker.bootstrap.rsplit(":", 1)
    idle = socket.create_connection((host, int(port)))
    half = socket.create_connection((host, int(port)))
    half.sendall(struct.pack(">i", 50 * 1024 * 1024) + b"\0" * 1024)  # a frame never finished
    try:
        assert _closed_by_peer(idle, 8)
        assert _closed_by_peer(half, 8)
    finally:
        idle.close()
        half.close()

    # A client that keeps producing across several idle periods is never cut off.
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    delivered: list[int] = []
    deadline = time.monotonic() + 4
    while time.monotonic() < deadline:
        producer.produce("busy", b"x", on_delivery=lambda err, msg: delivered.append(err is None))
        producer.poll(0.5)
    assert producer.flush(10) == 0
    assert delivered and all(delivered)
    assert "idle for" in broker.log_text()
