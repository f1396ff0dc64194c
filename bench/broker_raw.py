"""Broker-only load: pre-built 1 MiB Produce requests over a raw socket, and the asyncio sinks
that give the Python loopback ceiling. Used by broker_bench.py."""

from __future__ import annotations

import socket
import struct
import textwrap
import time

from tidelog.records.builder import NewRecord, build_batch

SINK = textwrap.dedent(
    """
    import asyncio, struct, sys
    async def handle(reader, writer):
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                frame = await reader.readexactly(size)
                writer.write(struct.pack(">ii", 4, struct.unpack_from(">i", frame, 4)[0]))
        except asyncio.IncompleteReadError:
            writer.close()
    async def main():
        server = await asyncio.start_server(handle, "127.0.0.1", 0, limit=4 << 20)
        print("sink ready on 127.0.0.1:%d" % server.sockets[0].getsockname()[1], flush=True)
        await server.serve_forever()
    asyncio.run(main())
    """
)


# The tougher ceiling: a BufferedProtocol sink (the kernel copies into one reused buffer, nothing
# else is copied) that parses the size and correlation id of each frame, skips the rest and
# answers 8 bytes, i.e. everything a broker must do minus the broker.
SINK_BUFFERED = textwrap.dedent(
    """
    import asyncio, struct
    class Sink(asyncio.BufferedProtocol):
        def connection_made(self, transport):
            self.transport, self.buffer = transport, bytearray(1 << 20)
            self.view, self.head, self.skip = memoryview(self.buffer), bytearray(), 0
        def get_buffer(self, sizehint):
            return self.view
        def buffer_updated(self, nbytes):
            position = 0
            while position < nbytes:
                if self.skip:
                    taken = min(self.skip, nbytes - position)
                    self.skip -= taken
                    position += taken
                    continue
                taken = min(8 - len(self.head), nbytes - position)
                self.head += self.view[position : position + taken]
                position += taken
                if len(self.head) == 8:
                    size, correlation_id = struct.unpack(">ii", self.head)
                    self.transport.write(struct.pack(">ii", 4, correlation_id))
                    self.head, self.skip = bytearray(), size - 4
    async def main():
        server = await asyncio.get_running_loop().create_server(Sink, "127.0.0.1", 0)
        print("sink ready on 127.0.0.1:%d" % server.sockets[0].getsockname()[1], flush=True)
        await server.serve_forever()
    asyncio.run(main())
    """
)


def produce_frame(topic: str, records_per_batch: int, pool: list[bytes]) -> tuple[bytes, int]:
    """A Produce v9 frame (size prefix included) holding one ~1 MiB uncompressed batch."""
    batch = build_batch(
        [NewRecord(value=pool[i % len(pool)]) for i in range(records_per_batch)],
        now_ms=int(time.time() * 1000),
    )
    name = topic.encode()

    def uvarint(value: int) -> bytes:
        out = bytearray()
        while value >= 0x80:
            out.append((value & 0x7F) | 0x80)
            value >>= 7
        out.append(value)
        return bytes(out)

    body = (
        struct.pack(">hhih", 0, 9, 0, 5) + b"bench" + b"\x00"  # header v2: client id, no tags
        + b"\x00" + struct.pack(">hi", 1, 30_000)  # null transactional id, acks=1, timeout
        + uvarint(2) + uvarint(len(name) + 1) + name  # one topic
        + uvarint(2) + struct.pack(">i", 0) + uvarint(len(batch) + 1) + bytes(batch)
        + b"\x00" + b"\x00" + b"\x00"  # tagged fields: partition, topic, request
    )  # fmt: skip
    return struct.pack(">i", len(body)) + body, records_per_batch


def load_generator(host: str, port: int, frame: bytes, requests: int, window: int = 8) -> float:
    """Send `requests` copies of `frame` with up to `window` unanswered; returns seconds."""
    sock = socket.create_connection((host, port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    reader = sock.makefile("rb", buffering=1 << 20)
    sent = answered = 0
    start = time.perf_counter()
    while answered < requests:
        while sent < requests and sent - answered < window:
            sock.sendall(frame)
            sent += 1
        size = struct.unpack(">i", reader.read(4))[0]
        response = reader.read(size)
        if len(response) != size:
            raise RuntimeError("connection closed by the server")
        answered += 1
    elapsed = time.perf_counter() - start
    sock.close()
    return elapsed
