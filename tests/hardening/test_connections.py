"""Connection-level limits against a live broker: memory per idle connection, frames declared
big but never sent (slowloris), and a client that never reads its responses (max.connections
itself is covered by tests/broker/test_lifecycle.py).
Memory is read from /proc/PID/status (VmRSS); the bounds are generous multiples of the fix.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import time
from datetime import timedelta
from typing import TYPE_CHECKING

from broker.raw import RawClient, encode_request, request_module
from broker.test_requests import batch, create, fetch, produce
from tidelog.errors import ErrorCode
from tidelog.records.batch import iter_batches

if TYPE_CHECKING:
    from conftest import BrokerFactory, BrokerProcess

METADATA = 3


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def metadata_works(broker: BrokerProcess) -> None:
    with RawClient(broker.bootstrap, timeout_s=10) as client:
        module = request_module(METADATA, 4)
        response = client.call(
            METADATA, 4, module.MetadataRequest(topics=None, allow_auto_topic_creation=False)
        )
        assert response.brokers


def settle(pid: int) -> int:
    """RSS once the broker has read what was sent (it stops changing)."""
    previous = -1
    for _ in range(20):
        time.sleep(0.1)
        current = rss_kib(pid)
        if current == previous:
            return current
        previous = current
    return previous


def connect(broker: BrokerProcess) -> socket.socket:
    return socket.create_connection((broker.host, broker.port), timeout=10)


def test_frames_declared_big_but_not_sent_cost_little(broker_factory: BrokerFactory) -> None:
    broker = broker_factory(settings={"message.max.bytes": str(8 << 20)})
    metadata_works(broker)
    before = settle(broker.pid)
    holders = [connect(broker) for _ in range(8)]
    try:
        for sock in holders:  # 90 MiB declared, 4 KiB sent, then silence
            sock.sendall(struct.pack(">ihhih", 90 << 20, 0, 9, 1, 0) + bytes(4096))
        metadata_works(broker)  # a half-sent frame blocks nobody else
        grown_kib = settle(broker.pid) - before
        print(f"8 half-sent 90 MiB frames: +{grown_kib} KiB")
        assert grown_kib < 64 * 1024, f"{grown_kib} KiB for 8 half-sent frames"
    finally:
        for sock in holders:
            sock.close()
    # Frames that grow while they arrive are still whole and correct.
    with RawClient(broker.bootstrap) as client:
        create(client, "big")
        payload = bytes(range(256)) * (5 * 4096)  # 5 MiB
        result = produce(client, "big", [batch([payload])])
        assert result.error_code == ErrorCode.NONE
        records = fetch(client, "big", 0, partition_max_bytes=8 << 20).records
        assert payload in bytes(records)
        assert len(list(iter_batches(records))) == 1


def test_idle_connections_are_cheap(broker_factory: BrokerFactory) -> None:
    broker = broker_factory()
    metadata_works(broker)
    before = settle(broker.pid)
    idle = [connect(broker) for _ in range(300)]
    try:
        for sock in idle[::10]:  # some have spoken once (ApiVersions v0), then gone quiet
            sock.sendall(struct.pack(">ihhih", 10, 18, 0, 1, -1))
        metadata_works(broker)
        per_connection_kib = (settle(broker.pid) - before) / len(idle)
        print(f"idle connection: {per_connection_kib:.1f} KiB")
        assert per_connection_kib < 64, f"{per_connection_kib:.0f} KiB per idle connection"
    finally:
        for sock in idle:
            sock.close()


def test_a_client_that_never_reads_cannot_grow_the_broker(broker_factory: BrokerFactory) -> None:
    broker = broker_factory()
    with RawClient(broker.bootstrap) as client:
        create(client, "slow")
        for _ in range(8):
            assert produce(client, "slow", [batch([bytes(128 * 1024)])]).error_code == 0
    metadata_works(broker)
    rss_before, files_before = settle(broker.pid), len(os.listdir(f"/proc/{broker.pid}/fd"))
    slow = connect(broker)
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    try:
        module = request_module(1, 12)
        body = module.FetchRequest(
            max_wait=timedelta(0), min_bytes=0, max_bytes=1 << 20,
            topics=(module.FetchTopic(topic="slow", partitions=(module.FetchPartition(
                partition=0, fetch_offset=0, partition_max_bytes=1 << 20, log_start_offset=-1),)),),
            forgotten_topics_data=(),
        )
        frame = encode_request(1, 12, 7, body)
        slow.setblocking(False)
        sent = 0
        with contextlib.suppress(BlockingIOError):
            for _ in range(5000):  # ~1 GiB of responses asked for, none read
                slow.send(frame)
                sent += 1
        metadata_works(broker)  # others are still served
        grown_kib = settle(broker.pid) - rss_before
        files = len(os.listdir(f"/proc/{broker.pid}/fd")) - files_before
        print(f"slow reader: {sent} fetches sent, +{grown_kib} KiB, +{files} open files")
        assert grown_kib < 64 * 1024
        assert files < 50
    finally:
        slow.close()
