"""Malformed, oversized and unknown frames against a live broker, with real traffic beside them.

The broker must close the offending connection (or answer with an error code), never crash,
and a producer and a consumer running at the same time must lose nothing.
"""

from __future__ import annotations

import random
import socket
import struct
import threading
from datetime import timedelta
from typing import TYPE_CHECKING

from confluent_kafka import Consumer, Producer, TopicPartition

from .raw import RawClient, encode_request, request_module
from .test_requests import batch, produce_body

if TYPE_CHECKING:
    from conftest import BrokerProcess


def _send_and_drain(bootstrap: str, data: bytes) -> None:
    host, _, port = bootstrap.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
            while sock.recv(65536):
                pass
        except (ConnectionResetError, BrokenPipeError, TimeoutError):
            pass


def _valid_frames() -> list[bytes]:
    metadata = request_module(3, 12)
    fetch = request_module(1, 12)
    return [
        encode_request(0, 9, 1, produce_body("fuzz-target", [batch([b"v" * 40])])),
        encode_request(0, 3, 2, produce_body("fuzz-target", [batch([b"w"])], version=3)),
        encode_request(
            3,
            12,
            3,
            metadata.MetadataRequest(
                topics=None,
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            ),
        ),
        encode_request(
            1,
            12,
            4,
            fetch.FetchRequest(
                max_wait=timedelta(0),
                min_bytes=0,
                topics=(
                    fetch.FetchTopic(
                        topic="fuzz-target",
                        partitions=(
                            fetch.FetchPartition(
                                partition=0, fetch_offset=0, partition_max_bytes=1 << 16
                            ),
                        ),
                    ),
                ),
                forgotten_topics_data=(),
            ),
        ),
    ]


def _mutations(rng: random.Random, frames: list[bytes], count: int) -> list[bytes]:
    out = []
    for _ in range(count):
        frame = bytearray(rng.choice(frames))
        kind = rng.randrange(4)
        if kind == 0:  # flip bytes after the size prefix
            for _ in range(rng.randint(1, 6)):
                frame[rng.randrange(4, len(frame))] = rng.randrange(256)
        elif kind == 1:  # truncate the body but keep the declared size consistent
            cut = rng.randrange(12, len(frame))
            frame = frame[:cut]
            struct.pack_into(">i", frame, 0, cut - 4)
        elif kind == 2:  # random body
            body = rng.randbytes(rng.randint(0, 300))
            frame = bytearray(struct.pack(">i", len(body)) + body)
        else:  # unknown api keys and versions
            struct.pack_into(">hh", frame, 4, rng.randint(-5, 200), rng.randint(-3, 40))
        out.append(bytes(frame))
    return out


def test_bad_frames_never_hurt_the_broker_or_its_clients(broker: BrokerProcess) -> None:
    with RawClient(broker.bootstrap) as client:
        client.call(
            3,
            4,
            request_module(3, 4).MetadataRequest(
                topics=(request_module(3, 4).MetadataRequestTopic(name="fuzz-target"),),
                allow_auto_topic_creation=True,
            ),
        )
    total = 3000
    sent = [b"clean-%06d" % i for i in range(total)]
    produce_errors: list[object] = []

    def producer_thread() -> None:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 1})
        for value in sent:
            producer.produce(
                "fuzz-clean",
                value=value,
                partition=0,
                on_delivery=lambda e, m: produce_errors.append(e) if e else None,
            )
            producer.poll(0)
        if producer.flush(60):
            produce_errors.append("undelivered")

    received: list[bytes] = []

    def consumer_thread() -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": "fuzz",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 100,
                "topic.metadata.refresh.interval.ms": 500,
            }
        )
        consumer.assign([TopicPartition("fuzz-clean", 0, 0)])
        for _ in range(600):
            if len(received) >= total:
                break
            for message in consumer.consume(num_messages=1000, timeout=0.1):
                if message.error() is None:
                    received.append(message.value())
        consumer.close()

    # Create the clean topic before the threads start (auto-create via producer metadata).
    warmup = Producer({"bootstrap.servers": broker.bootstrap})
    warmup.list_topics("fuzz-clean", timeout=10)
    threads = [threading.Thread(target=producer_thread), threading.Thread(target=consumer_thread)]
    for thread in threads:
        thread.start()

    rng = random.Random(20261123)
    oversized = [
        struct.pack(">i", 200 * 1024 * 1024) + b"\0" * 64,  # above socket.request.max.bytes
        struct.pack(">i", -7) + b"\0" * 16,  # negative size
        struct.pack(">i", 3) + b"abc",  # shorter than a request header
        struct.pack(">i", 1 << 30),  # huge declared size, nothing follows
    ]
    for data in oversized + _mutations(rng, _valid_frames(), 400):
        _send_and_drain(broker.bootstrap, data)
    # Many frames on one connection, some of them bad in the middle.
    _send_and_drain(broker.bootstrap, b"".join(_mutations(rng, _valid_frames(), 50)))

    for thread in threads:
        thread.join(120)
    assert not produce_errors, produce_errors[:3]
    assert received == sent
    with RawClient(broker.bootstrap) as client:
        versions = client.call(
            18,
            3,
            request_module(18, 3).ApiVersionsRequest(
                client_software_name="after", client_software_version="1"
            ),
        )
        assert int(versions.error_code) == 0
