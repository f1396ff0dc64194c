"""The operator HTTP endpoint: `GET /metrics` (Prometheus text) and `GET /health`.

Runs on the broker's own asyncio loop (asyncio.start_server, no threads) so that scraping reads
the log manager and group state between request handlers, never concurrently with them.

HTTP handling is deliberately tiny: one request per connection (`Connection: close`), request
line plus headers bounded to MAX_REQUEST_BYTES, read with a timeout; anything but GET/HEAD on
the two paths gets 404/405. Prometheus and load balancers need nothing more.

`/health` answers 200 `ok` when every check passes, else 503 with one line per failing check:

- `listener`: a Kafka ApiVersions v0 request sent to the broker's own listener over loopback
  is answered with error_code 0 within HEALTH_TIMEOUT_S (so "the broker accepts requests" is
  proven end to end, through the same accept loop, framing and router clients use);
- `data_dir`: a probe file can be created, written, fsynced and removed in the data dir.

ApiVersions v0 request on the wire (big-endian)::

    int32  size            bytes that follow
    int16  api_key         18
    int16  api_version     0
    int32  correlation_id
    int16  client_id length, then the bytes ("tidelog-health")
           (v0 body is empty)

and the response starts with int32 size, int32 correlation_id, int16 error_code.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tidelog.broker.metrics.registry import BrokerMetrics, group_stats, log_manager_source, render

log = logging.getLogger(__name__)

MAX_REQUEST_BYTES = 8192
READ_TIMEOUT_S = 5.0
HEALTH_TIMEOUT_S = 2.0
DEFAULT_METRICS_ADDRESS = "127.0.0.1:9644"
_CLIENT_ID = b"tidelog-health"
_HEALTH_CORRELATION_ID = 0x7E1D


class MetricsAddressError(ValueError):
    """`--metrics` value that is neither HOST:PORT nor `off`, or an address that cannot be bound."""


def parse_metrics_address(value: str) -> tuple[str, int] | None:
    """`HOST:PORT` -> (host, port); `off` -> None. Port 0 picks a free port."""
    text = value.strip()
    if text.lower() == "off":
        return None
    host, sep, port_text = text.rpartition(":")
    if not sep or not host or not port_text.isdigit() or int(port_text) > 65535:
        raise MetricsAddressError(f"--metrics expects HOST:PORT or off, got {value!r}")
    return host.strip("[]"), int(port_text)


@dataclass(frozen=True, slots=True)
class HealthTarget:
    """What /health checks: the broker's Kafka listener and its data directory."""

    kafka_host: str
    kafka_port: int
    data_dir: Path


def _api_versions_v0_request() -> bytes:
    header = struct.pack(">hhih", 18, 0, _HEALTH_CORRELATION_ID, len(_CLIENT_ID)) + _CLIENT_ID
    return struct.pack(">i", len(header)) + header


async def check_listener(host: str, port: int, timeout_s: float = HEALTH_TIMEOUT_S) -> str | None:
    """None if the broker answers ApiVersions; else a one-line reason."""
    writer: asyncio.StreamWriter | None = None
    try:
        async with asyncio.timeout(timeout_s):
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(_api_versions_v0_request())
            await writer.drain()
            size, correlation_id, error_code = struct.unpack(">iih", await reader.readexactly(10))
    except TimeoutError:
        return f"listener: no ApiVersions answer from {host}:{port} within {timeout_s:g}s"
    except (OSError, asyncio.IncompleteReadError) as exc:
        return f"listener: {host}:{port}: {exc}"
    finally:
        if writer is not None:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
    if correlation_id != _HEALTH_CORRELATION_ID or size < 6:
        return f"listener: {host}:{port} sent a malformed ApiVersions response"
    if error_code != 0:
        return f"listener: ApiVersions answered error_code {error_code}"
    return None


def check_data_dir(data_dir: Path) -> str | None:
    """None if a probe file can be written and fsynced in data_dir. Blocking file I/O, short."""
    probe = data_dir / f".health-probe-{os.getpid()}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, b"ok")
            os.fsync(fd)
        finally:
            os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        return f"data_dir: {data_dir} is not writable: {exc.strerror or exc}"
    return None


async def health(target: HealthTarget) -> list[str]:
    """Failing checks, one line each; empty when healthy."""
    failures: list[str] = []
    listener = await check_listener(target.kafka_host, target.kafka_port)
    if listener is not None:
        failures.append(listener)
    data_dir = check_data_dir(target.data_dir)
    if data_dir is not None:
        failures.append(data_dir)
    return failures


_REASONS = {
    200: "OK",
    404: "Not Found",
    405: "Method Not Allowed",
    400: "Bad Request",
    503: "Service Unavailable",
}


def _response(status: int, body: bytes, content_type: str, *, head: bool = False) -> bytes:
    header = (
        f"HTTP/1.1 {status} {_REASONS[status]}\r\n"
        f"Content-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode("ascii")
    return header if head else header + body


class MetricsServer:
    """`GET /metrics` and `GET /health` on the broker's loop. start() then close()."""

    def __init__(
        self, metrics: BrokerMetrics, target: Callable[[], HealthTarget], host: str, port: int
    ) -> None:
        self._metrics = metrics
        self._target = target
        self._host = host
        self._port = port
        self._server: asyncio.Server | None = None

    @property
    def address(self) -> tuple[str, int]:
        """The bound (host, port); port 0 given at start resolves to the real one."""
        if self._server is None:
            return self._host, self._port
        host, port = self._server.sockets[0].getsockname()[:2]
        return str(host), int(port)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self._host, self._port)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(READ_TIMEOUT_S):
                head = await reader.readuntil(b"\r\n\r\n")
            writer.write(await self._dispatch(head))
            await writer.drain()
        except (asyncio.LimitOverrunError, asyncio.IncompleteReadError, TimeoutError):
            writer.write(_response(400, b"bad request\n", "text/plain"))
        except (ConnectionError, OSError) as exc:
            log.debug("metrics connection dropped: %s", exc)
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()

    async def _dispatch(self, head: bytes) -> bytes:
        if len(head) > MAX_REQUEST_BYTES:
            return _response(400, b"request too large\n", "text/plain")
        request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
        parts = request_line.split(" ")
        if len(parts) != 3:
            return _response(400, b"bad request line\n", "text/plain")
        method, target, _ = parts
        path = target.split("?", 1)[0]
        if path not in ("/metrics", "/health"):
            return _response(404, b"not found: try /metrics or /health\n", "text/plain")
        if method not in ("GET", "HEAD"):
            return _response(405, b"only GET\n", "text/plain")
        is_head = method == "HEAD"
        if path == "/metrics":
            return _response(
                200, render(self._metrics), "text/plain; version=0.0.4; charset=utf-8", head=is_head
            )
        failures = await health(self._target())
        if failures:
            body = ("\n".join(failures) + "\n").encode()
            return _response(503, body, "text/plain; charset=utf-8", head=is_head)
        return _response(200, b"ok\n", "text/plain; charset=utf-8", head=is_head)


def _health_host(listen_host: str) -> str:
    # A wildcard listener is reached over loopback.
    return "127.0.0.1" if listen_host in ("", "0.0.0.0", "::") else listen_host


async def start_metrics(
    broker: Any,
    connection_count: Callable[[], int],
    address: tuple[str, int] | None,
    *,
    required: bool,
) -> MetricsServer | None:
    """Attach `broker.metrics` and serve it at `address` (None: metrics off, nothing counted).

    May run before the Kafka listener is bound: /health reads the listen address when asked.
    When the port is taken, an explicitly requested address (`required`) raises
    MetricsAddressError; the default one logs a warning and the broker runs without the
    endpoint (a second broker on one host must still start).
    """
    if address is None:
        return None
    metrics = BrokerMetrics()
    metrics.set_partition_source(log_manager_source(broker.logs))
    metrics.set_connection_source(connection_count)
    metrics.set_group_source(lambda: group_stats(getattr(broker, "groups", None)))
    metrics.set_quota_source(broker.quotas.stats)
    metrics.set_fetch_session_source(broker.fetch_sessions.stats)
    metrics.set_client_metrics_source(broker.telemetry.collect)

    def target() -> HealthTarget:
        config = broker.config  # read per check: port 0 is resolved once the listener is bound
        return HealthTarget(_health_host(config.listen_host), config.listen_port, config.data_dir)

    server = MetricsServer(metrics, target, *address)
    try:
        await server.start()
    except OSError as exc:
        if required:
            raise MetricsAddressError(
                f"cannot listen on {address[0]}:{address[1]} for --metrics: {exc.strerror or exc}"
            ) from None
        log.warning(
            "metrics endpoint disabled: cannot listen on %s:%d: %s",
            address[0],
            address[1],
            exc.strerror or exc,
        )
        return None
    broker.metrics = metrics
    log.info("metrics on http://%s:%d/metrics (and /health)", *server.address)
    return server
