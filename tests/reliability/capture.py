"""Request frames of real clients, for the fuzz corpus: a recording TCP proxy in front of a
broker while confluent-kafka (producer, classic and KIP-848 group consumers) and kafka-python
(admin, consumer) do ordinary work. The broker advertises the proxy's address, so every
connection the clients open goes through it. Frames are kept in memory, capped.
"""

from __future__ import annotations

import os
import selectors
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

MAX_FRAMES = 2000
MAX_FRAME_BYTES = 16384  # the fuzzer's -max_len


class _Recorder:
    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.frames: list[bytes] = []
        self.sessions: list[list[bytes]] = []  # each connection's frames in order
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.2)
        self.port = self.listener.getsockname()[1]
        self.stopped = threading.Event()
        self.threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def start(self) -> None:
        self._spawn(self._accept)

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        thread.start()
        self.threads.append(thread)

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream, timeout=10)
            except OSError:
                client.close()
                continue
            self._spawn(self._pump, client, server, True)
            self._spawn(self._pump, server, client, False)

    def _pump(self, source: socket.socket, sink: socket.socket, record: bool) -> None:
        pending = b""
        session: list[bytes] = []
        if record:
            with self._lock:
                self.sessions.append(session)
        source.settimeout(0.2)
        try:
            while not self.stopped.is_set():
                try:
                    chunk = source.recv(65536)
                except TimeoutError:
                    continue
                if not chunk:
                    break
                sink.sendall(chunk)
                if record:
                    pending += chunk
                    while len(pending) >= 4:
                        (size,) = struct.unpack_from(">i", pending)
                        if len(pending) < 4 + size:
                            break
                        frame, pending = pending[4 : 4 + size], pending[4 + size :]
                        with self._lock:
                            if len(self.frames) < MAX_FRAMES and len(frame) <= MAX_FRAME_BYTES:
                                self.frames.append(frame)
                                session.append(frame)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def stop(self) -> None:
        self.stopped.set()
        self.listener.close()
        for thread in self.threads:
            thread.join(5)


def _start_broker(data_dir: Path, advertise_port: int) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [sys.executable, "-m", "tidelog.cli.main", "serve", "--data-dir", str(data_dir),
         "--listen", "127.0.0.1:0", "--advertise", f"127.0.0.1:{advertise_port}",
         "--metrics", "off", "--set", "num.partitions=2"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
    )
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(60):
            process.kill()
            raise RuntimeError("broker for the capture did not start within 60 s")
    line = process.stdout.readline().decode()
    if not line.startswith("tidelog ready on "):
        process.kill()
        raise RuntimeError(f"broker for the capture did not start: {line!r}")
    return process  # its ready line names the advertised (proxy) address


def _listening_port(process: subprocess.Popen[bytes]) -> int:
    """The broker's real port (it advertises the proxy's): the socket it listens on."""
    inodes = set()
    for fd in os.listdir(f"/proc/{process.pid}/fd"):
        try:
            target = os.readlink(f"/proc/{process.pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    with open("/proc/net/tcp") as table:
        for row in table.read().splitlines()[1:]:
            fields = row.split()
            if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                return int(fields[1].split(":")[1], 16)
    raise RuntimeError("broker's listening port not found")


def _client_work(bootstrap: str) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from kafka import KafkaAdminClient, KafkaConsumer
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        admin.create_topics([NewTopic("captured", 2, 1)])
        admin.list_topics()
        admin.describe_topics(["captured"])
        admin.describe_cluster()
    finally:
        admin.close()
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "acks": "all", "linger.ms": 1, "compression.type": "lz4"})
    for i in range(20):
        producer.produce("captured", key=b"k%d" % i, value=b"v%d" % i, headers={"h": b"x"})
    producer.flush(20)
    for protocol in ("classic", "consumer"):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"capture-{protocol}",
                             "group.protocol": protocol, "auto.offset.reset": "earliest",
                             "enable.auto.commit": False})
        try:
            consumer.subscribe(["captured"])
            deadline = time.monotonic() + 20
            seen = 0
            while seen < 5 and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is not None and message.error() is None:
                    seen += 1
            consumer.commit(asynchronous=False) if seen else None
            consumer.committed([TopicPartition("captured", 0)], timeout=10)
        except Exception:  # a protocol this broker build refuses: the frames sent still count
            pass
        finally:
            consumer.close()
    reader = KafkaConsumer("captured", bootstrap_servers=bootstrap, group_id="capture-kp",
                           auto_offset_reset="earliest", consumer_timeout_ms=3000)
    try:
        for _ in reader:
            pass
        reader.commit()
    finally:
        reader.close()


def capture_frames(timeout_s: float = 90.0) -> list[bytes]:
    """Request frames (without size prefix) sent by real clients to a live broker."""
    return [frame for session in capture_sessions(timeout_s) for frame in session]


def capture_sessions(timeout_s: float = 90.0) -> list[list[bytes]]:
    """Each client connection's request frames (without size prefix), in the order sent."""
    with tempfile.TemporaryDirectory(prefix="tidelog-capture-") as tmp:
        recorder = _Recorder(("127.0.0.1", 0))
        process = _start_broker(Path(tmp) / "data", recorder.port)
        try:
            recorder.upstream = ("127.0.0.1", _listening_port(process))
            recorder.start()
            worker = threading.Thread(
                target=_client_work, args=(f"127.0.0.1:{recorder.port}",), daemon=True
            )
            worker.start()
            worker.join(timeout_s)
        finally:
            recorder.stop()
            process.terminate()
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
            if process.stdout is not None:
                process.stdout.close()
        return [list(session) for session in recorder.sessions if session]


if __name__ == "__main__":
    frames = capture_frames()
    keys = sorted({struct.unpack_from(">hh", f)[0:2] for f in frames})
    print(f"{len(frames)} frames, (api, version): {keys}")
