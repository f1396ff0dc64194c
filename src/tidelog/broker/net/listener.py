"""The Kafka listener: accepts connections, enforces max.connections, and stops them in order.

Runs on the event loop. It knows nothing of handlers or storage: each connection gets the
router and the limits it needs.
"""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import contextlib
import logging
import ssl

from tidelog.broker.net.connection import Connection, ConnectionLimits
from tidelog.broker.net.router import Router
from tidelog.broker.net.security import PLAINTEXT_SECURITY, ListenerSecurity

log = logging.getLogger("tidelog.broker.server")

# asyncio's TLS transport (sslproto.SSLProtocol, a class attribute) gives every connection a
# receive buffer of 256 KiB, allocated at accept: 500 idle TLS clients cost the broker 140 MiB
# (tests/reliability/test_load_limits.py). 32 KiB still takes two full TLS records (16 KiB
# each) per read. It is process-wide: the broker's own TLS clients (replica fetchers) get it
# too, which suits them.
TLS_READ_BUFFER_BYTES = 32 * 1024


class Listener:
    """One of the broker's listeners (`listeners=NAME://host:port`). `connections` is shared
    by all of them: max.connections counts the broker's connections, as in Kafka. A TLS
    listener's handshake is bounded by `handshake_timeout_s`; connections still handshaking
    are asyncio's until then and are not counted."""

    def __init__(
        self,
        router: Router,
        limits: ConnectionLimits,
        max_connections: int,
        *,
        security: ListenerSecurity = PLAINTEXT_SECURITY,
        ssl_context: ssl.SSLContext | None = None,
        handshake_timeout_s: float | None = None,
        connections: set[Connection] | None = None,
    ) -> None:
        self._router = router
        self._limits = limits
        self._max_connections = max_connections
        self._security = security
        self._ssl_context = ssl_context
        self._handshake_timeout_s = handshake_timeout_s
        self._connections: set[Connection] = set() if connections is None else connections
        self._own: set[Connection] = set()  # this listener's, for shutdown
        self._server: asyncio.Server | None = None

    @property
    def name(self) -> str:
        return self._security.listener_name

    # --- ConnectionRegistry ----------------------------------------------------------------
    def register(self, connection: Connection) -> bool:
        if len(self._connections) >= self._max_connections:
            return False
        self._connections.add(connection)
        self._own.add(connection)
        return True

    def unregister(self, connection: Connection) -> None:
        self._connections.discard(connection)
        self._own.discard(connection)

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    async def bind(self, host: str, port: int) -> tuple[str, int]:
        """Listen without accepting yet; returns the bound (host, port) (the real port when
        asked for port 0). `start_serving` then accepts."""
        loop = asyncio.get_running_loop()
        if self._ssl_context is not None:
            asyncio.sslproto.SSLProtocol.max_size = TLS_READ_BUFFER_BYTES
        self._server = await loop.create_server(
            lambda: Connection(self._router, self, self._limits, self._security),
            host or None,
            port,
            backlog=1024,
            reuse_address=True,
            start_serving=False,
            ssl=self._ssl_context,
            ssl_handshake_timeout=self._handshake_timeout_s if self._ssl_context else None,
        )
        bound_host, bound_port = self._server.sockets[0].getsockname()[:2]
        return str(bound_host), int(bound_port)

    async def start_serving(self) -> None:
        assert self._server is not None
        await self._server.start_serving()

    def check_idle(self, elapsed_ms: int, max_idle_ms: int) -> None:
        for connection in list(self._own):
            connection.check_idle(elapsed_ms, max_idle_ms)

    def stop_accepting(self) -> list[Connection]:
        """Shutdown, first step: no new connections, no new requests on the open ones."""
        if self._server is not None:
            self._server.close()
        connections = list(self._own)
        for connection in connections:
            connection.stop_reading()
        return connections

    async def close(self, connections: list[Connection], drain_timeout_s: float) -> None:
        """Shutdown, second step: finish in-flight requests (bounded), then close."""
        drains = [asyncio.ensure_future(c.drain_in_flight()) for c in connections]
        if drains:
            _, slow = await asyncio.wait(drains, timeout=drain_timeout_s)
            for task in slow:
                task.cancel()
            if slow:
                log.warning("%d connections did not finish in time", len(slow))
        for connection in connections:
            connection.close()
        if self._server is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)
