"""Load limits (issue 16): many client connections and many partitions on one broker, with a
canary client that must lose nothing, and the broker's memory measured per connection and per
partition. Used by test_load_limits.py (CI sizes) and `scripts/soak-load` (full sizes):

    python -m reliability.load_limits --connections 2000 --partitions 10000
"""

from __future__ import annotations

import argparse
import os
import selectors
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

API_VERSIONS_V0 = struct.pack(">ihhih", 10, 18, 0, 1, -1)  # size, key, version, id, no client
PARTITIONS_PER_TOPIC = 100


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def _read_exact(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("closed by the broker")
        data += chunk
    return data


def api_versions_round_trips(sockets: list[socket.socket], timeout_s: float) -> int:
    """Send ApiVersions v0 on every socket at once, then read every answer; returns how many
    were answered (an answer is the frame with our correlation id 1 and error 0)."""
    for sock in sockets:
        sock.sendall(API_VERSIONS_V0)
    answered = 0
    deadline = time.monotonic() + timeout_s
    with selectors.DefaultSelector() as selector:
        for sock in sockets:
            selector.register(sock, selectors.EVENT_READ)
        pending = len(sockets)
        while pending and time.monotonic() < deadline:
            for key, _ in selector.select(1.0):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                (size,) = struct.unpack(">i", _read_exact(sock, 4))
                body = _read_exact(sock, size)
                correlation_id, error = struct.unpack_from(">ih", body, 0)
                answered += correlation_id == 1 and error == 0
                selector.unregister(sock)
                pending -= 1
    return answered


def canary(bootstrap: str, topic: str, count: int) -> tuple[int, int]:
    """Produce `count` unique values (idempotent, acks=all) and read them back; returns
    (acknowledged, acknowledged values read back)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})  # referenced until the result
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5})
    acked: set[str] = set()

    def delivered(error: object, message: object) -> None:
        if error is None:
            acked.add(message.value().decode())  # type: ignore[attr-defined]

    for number in range(count):
        producer.produce(topic, value=f"canary-{number}".encode(), on_delivery=delivered)
        producer.poll(0)
    producer.flush(60)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen: set[str] = set()
    deadline = time.monotonic() + 60
    while len(seen) < len(acked) and time.monotonic() < deadline:
        for message in consumer.consume(1000, 1.0):
            if message.error() is None:
                seen.add(message.value().decode())
    consumer.close()
    return len(acked), len(acked & seen)


@dataclass
class ConnectionResult:
    connections: int
    answered_first: int
    answered_last: int
    canary_acked: int
    canary_read: int
    rss_before_mib: float
    rss_with_connections_mib: float
    rss_after_mib: float

    @property
    def per_connection_kib(self) -> float:
        return (self.rss_with_connections_mib - self.rss_before_mib) * 1024 / self.connections

    def summary(self) -> str:
        return (f"{self.connections} connections: answered {self.answered_first} then "
                f"{self.answered_last}; canary {self.canary_read}/{self.canary_acked} read; RSS "
                f"{self.rss_before_mib:.0f} -> {self.rss_with_connections_mib:.0f} MiB "
                f"({self.per_connection_kib:.1f} KiB per connection), "
                f"{self.rss_after_mib:.0f} MiB after closing them")


def connection_load(host: str, port: int, pid: int, connections: int,
                    canary_messages: int, tls: tuple[ssl.SSLContext, int] | None = None,
                    ) -> ConnectionResult:
    """`connections` clients that each speak (ApiVersions) and stay open while a canary
    produces and consumes; then every one of them is answered again. With `tls` (a client
    context and the broker's SSL listener port) the connections are TLS ones (each handshake
    done before the first ApiVersions); the canary keeps the plaintext port."""
    before = rss_mib(pid)
    if tls is None:
        sockets = [socket.create_connection((host, port), timeout=30)
                   for _ in range(connections)]
    else:
        context, tls_port = tls
        sockets = [context.wrap_socket(socket.create_connection((host, tls_port), timeout=30),
                                       server_hostname=host) for _ in range(connections)]
    try:
        first = api_versions_round_trips(sockets, 60)
        acked, read = canary(f"{host}:{port}", f"canary-{connections}", canary_messages)
        with_connections = rss_mib(pid)
        last = api_versions_round_trips(sockets, 60)
    finally:
        for sock in sockets:
            sock.close()
    time.sleep(1)  # the broker notices the closes
    return ConnectionResult(connections, first, last, acked, read, before, with_connections,
                            rss_mib(pid))


@dataclass
class PartitionResult:
    partitions: int
    acked: int
    read_before_restart: int
    read_after_restart: int
    rss_before_mib: float
    rss_with_partitions_mib: float
    restart_s: float
    rss_after_restart_mib: float

    @property
    def per_partition_kib(self) -> float:
        return (self.rss_with_partitions_mib - self.rss_before_mib) * 1024 / self.partitions

    def summary(self) -> str:
        return (f"{self.partitions} partitions: {self.acked} acknowledged, "
                f"{self.read_before_restart} read, {self.read_after_restart} read after a "
                f"restart of {self.restart_s:.1f} s; RSS {self.rss_before_mib:.0f} -> "
                f"{self.rss_with_partitions_mib:.0f} MiB ({self.per_partition_kib:.1f} KiB per "
                f"partition), {self.rss_after_restart_mib:.0f} MiB after the restart")


def create_partitions(bootstrap: str, partitions: int) -> list[str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [f"many-{n}" for n in range(partitions // PARTITIONS_PER_TOPIC)]
    for start in range(0, len(topics), 10):
        futures = admin.create_topics(
            [NewTopic(t, PARTITIONS_PER_TOPIC, 1) for t in topics[start:start + 10]],
            operation_timeout=120)
        for future in futures.values():
            future.result(180)
    return topics


def one_per_partition(bootstrap: str, topics: list[str]) -> int:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20,
                         "enable.idempotence": True})
    acked = 0

    def delivered(error: object, _message: object) -> None:
        nonlocal acked
        acked += error is None

    for topic in topics:
        for partition in range(PARTITIONS_PER_TOPIC):
            producer.produce(topic, value=f"{topic}/{partition}".encode(), partition=partition,
                             on_delivery=delivered)
            producer.poll(0)
    producer.flush(120)
    return acked


def read_one_per_partition(bootstrap: str, topics: list[str]) -> int:
    """How many partitions hold exactly their value at offset 0."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "many-reader",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 50})
    wanted = {f"{t}/{p}" for t in topics for p in range(PARTITIONS_PER_TOPIC)}
    consumer.assign([TopicPartition(t, p, 0) for t in topics for p in range(PARTITIONS_PER_TOPIC)])
    seen: set[str] = set()
    deadline = time.monotonic() + 180
    while seen != wanted and time.monotonic() < deadline:
        for message in consumer.consume(1000, 1.0):
            if message.error() is None and message.offset() == 0:
                value = message.value().decode()
                if value == f"{message.topic()}/{message.partition()}":
                    seen.add(value)
    consumer.close()
    return len(seen & wanted)


def tls_material(directory: Path) -> tuple[list[str], ssl.SSLContext, int]:
    """`tidelog certs` into `directory`: the broker's arguments for a PLAINTEXT and an SSL
    listener, a client context trusting its CA, and the SSL port."""
    from tidelog.cluster.zookeeper_server import free_port

    subprocess.run([sys.executable, "-m", "tidelog.cli.main", "certs", "--dir", str(directory)],
                   check=True, capture_output=True, timeout=120)
    plain, tls_port = free_port(), free_port()
    arguments = ["--set", f"listeners=PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls_port}",
                 "--set", "ssl.keystore.type=PEM",
                 "--set", f"ssl.keystore.location={directory / 'broker.pem'}",
                 "--set", "ssl.truststore.type=PEM",
                 "--set", f"ssl.truststore.location={directory / 'ca.pem'}"]
    context = ssl.create_default_context(cafile=str(directory / "ca.pem"))
    return arguments, context, tls_port


def _serve(data_dir: Path, log: Path, listeners: list[str] | None = None,
           ) -> tuple[subprocess.Popen[bytes], str, int, float]:
    """A broker on 127.0.0.1 (a free port, or `listeners`: arguments from tls_material)."""
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "tidelog.cli.main", "serve", "--data-dir", str(data_dir),
         *(listeners or ["--listen", "127.0.0.1:0"]), "--metrics", "off",
         # room for the soak's sizes (defaults: 1000 connections, 4000 partitions)
         "--set", "max.connections=10000", "--set", "max.broker.partitions=40000"],
        stdout=subprocess.PIPE, stderr=log.open("ab"), stdin=subprocess.DEVNULL)
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(600):
            process.kill()
            raise AssertionError(f"broker not ready within 600 s; see {log}")
    line = process.stdout.readline().decode()
    if not line.startswith("tidelog ready on "):
        process.kill()
        raise AssertionError(f"broker did not start: {line!r}; see {log}")
    host, _, port = line.removeprefix("tidelog ready on ").strip().rpartition(":")
    return process, host, int(port), time.monotonic() - started


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(120)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(30)


def partition_load(directory: Path, partitions: int) -> PartitionResult:
    """`partitions` partitions on one broker (topics of 100), one record in each, read back
    before and after a restart (SIGTERM, start on the same data directory)."""
    directory.mkdir(parents=True, exist_ok=True)
    data_dir, log = directory / "data", directory / "broker.log"
    process, host, port, _ = _serve(data_dir, log)
    try:
        bootstrap = f"{host}:{port}"
        before = rss_mib(process.pid)
        topics = create_partitions(bootstrap, partitions)
        acked = one_per_partition(bootstrap, topics)
        read_before = read_one_per_partition(bootstrap, topics)
        with_partitions = rss_mib(process.pid)
    finally:
        _stop(process)
    process, host, port, restart_s = _serve(data_dir, log)
    try:
        read_after = read_one_per_partition(f"{host}:{port}", topics)
        after = rss_mib(process.pid)
    finally:
        _stop(process)
    return PartitionResult(len(topics) * PARTITIONS_PER_TOPIC, acked, read_before, read_after,
                           before, with_partitions, restart_s, after)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="soak-load", description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=2000)
    parser.add_argument("--partitions", type=int, default=10000,
                        help="on one broker, in topics of 100 partitions")
    parser.add_argument("--canary", type=int, default=5000, help="canary messages")
    parser.add_argument("--tls", action="store_true",
                        help="also hold the connections over TLS (a second run)")
    parser.add_argument("--dir", type=Path, default=None, help="work directory (default: tmp)")
    args = parser.parse_args(argv)
    directory = args.dir or Path(tempfile.mkdtemp(prefix="soak-load-"))
    directory.mkdir(parents=True, exist_ok=True)
    process, host, port, _ = _serve(directory / "connections-data", directory / "conn.log")
    try:
        connections = connection_load(host, port, process.pid, args.connections, args.canary)
    finally:
        _stop(process)
    print(connections.summary(), flush=True)
    tls_ok = True
    if args.tls:
        arguments, context, tls_port = tls_material(directory / "certs")
        process, host, port, _ = _serve(directory / "tls-data", directory / "tls.log", arguments)
        try:
            over_tls = connection_load(host, port, process.pid, args.connections, args.canary,
                                       (context, tls_port))
        finally:
            _stop(process)
        print("TLS: " + over_tls.summary(), flush=True)
        tls_ok = (over_tls.answered_first == over_tls.answered_last == args.connections
                  and over_tls.canary_read == over_tls.canary_acked)
    result = partition_load(directory / "partitions", args.partitions)
    print(result.summary(), flush=True)
    ok = (tls_ok and connections.answered_first == connections.answered_last == args.connections
          and connections.canary_read == connections.canary_acked
          and result.read_before_restart == result.read_after_restart == result.partitions)
    print("every count as required" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
