"""The Kafka listener: accepts connections, enforces max.connections, and stops them in order.

Runs on the event loop. It knows nothing of handlers or storage: each connection gets the
router and the limits it needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from tidelog.broker.net.connection import Connection, ConnectionLimits
from tidelog.broker.net.router import Router

log = logging.getLogger("tidelog.broker.server")


class Listener:
    def __init__(self, router: Router, limits: ConnectionLimits, max_connections: int) -> None:
        self._router = router
        self._limits = limits
        self._max_connections = max_connections
        self._connections: set[Connection] = set()
        self._server: asyncio.Server | None = None

    # --- ConnectionRegistry ----------------------------------------------------------------
    def register(self, connection: Connection) -> bool:
        if len(self._connections) >= self._max_connections:
            return False
        self._connections.add(connection)
        return True

    def unregister(self, connection: Connection) -> None:
        self._connections.discard(connection)

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    async def bind(self, host: str, port: int) -> tuple[str, int]:
        """Listen without accepting yet; returns the bound (host, port) (the real port when
        asked for port 0). `start_serving` then accepts."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: Connection(self._router, self, self._limits),
            host,
            port,
            backlog=1024,
            reuse_address=True,
            start_serving=False,
        )
        bound_host, bound_port = self._server.sockets[0].getsockname()[:2]
        return str(bound_host), int(bound_port)

    async def start_serving(self) -> None:
        assert self._server is not None
        await self._server.start_serving()

    def check_idle(self, elapsed_ms: int, max_idle_ms: int) -> None:
        for connection in list(self._connections):
            connection.check_idle(elapsed_ms, max_idle_ms)

    def stop_accepting(self) -> list[Connection]:
        """Shutdown, first step: no new connections, no new requests on the open ones."""
        if self._server is not None:
            self._server.close()
        connections = list(self._connections)
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
