"""The listener and the process lifecycle: start, serve, shut down gracefully.

One asyncio event loop (the stdlib loop: it implements `loop.sendfile` natively, which uvloop
does not; ARCHITECTURE D5/D6). Shutdown order on SIGTERM/SIGINT: stop accepting, stop reading
new requests, answer parked fetches and finish in-flight requests (bounded wait), close the
connections, then `LogManager.close(clean=True)` (flush + clean-shutdown marker).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import resource
import signal
import sys
from dataclasses import replace
from typing import TYPE_CHECKING

from tidelog.broker import group_service
from tidelog.broker.config import BrokerConfig
from tidelog.broker.connection import Connection
from tidelog.broker.metrics_http import MetricsAddressError, start_metrics
from tidelog.broker.state import Broker

if TYPE_CHECKING:
    from tidelog.broker.cluster_agent import ClusterSettings

log = logging.getLogger("tidelog.broker.server")
DRAIN_TIMEOUT_S = 6.0  # leaves margin inside the 10 s a supervisor gives SIGTERM


class BrokerServer:
    """Accepts connections for one Broker and tracks them for max.connections and shutdown."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._connections: set[Connection] = set()
        self._server: asyncio.Server | None = None
        self._tick_handle: asyncio.TimerHandle | None = None

    def register(self, connection: Connection) -> bool:
        if len(self._connections) >= self.broker.config.max_connections:
            return False
        self._connections.add(connection)
        return True

    def unregister(self, connection: Connection) -> None:
        self._connections.discard(connection)

    async def start(self, load_groups: bool = True) -> tuple[str, int]:
        """Listen; returns the bound (host, port) (the real port when asked for port 0).
        `load_groups=False` in cluster mode: the group service starts once the cluster is
        joined (its `__consumer_offsets` is replicated, not created locally)."""
        config = self.broker.config
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: Connection(self),
            config.listen_host,
            config.listen_port,
            backlog=1024,
            reuse_address=True,
        )
        host, port = self._server.sockets[0].getsockname()[:2]
        if config.advertised_port == 0 or config.listen_port == 0:
            advertised_port = config.advertised_port or port
            self.broker.config = replace(config, listen_port=port, advertised_port=advertised_port)
        # Load the group coordinator now (create and replay __consumer_offsets) rather than on
        # the first group request, so a restart's replay cost is paid before `ready`.
        if load_groups:
            group_service.service(self.broker)
        self._schedule_tick()
        return str(host), int(port)

    def _schedule_tick(self) -> None:
        interval_s = self.broker.config.log_tick_interval_ms / 1000
        self._tick_handle = asyncio.get_running_loop().call_later(interval_s, self._tick)

    def _tick(self) -> None:
        try:
            self.broker.tick()
        except OSError:
            log.exception("log maintenance failed; retrying at the next tick")
        config = self.broker.config
        for connection in list(self._connections):
            connection.check_idle(config.log_tick_interval_ms, config.connections_max_idle_ms)
        self._schedule_tick()

    async def shutdown(self) -> None:
        if self._tick_handle is not None:
            self._tick_handle.cancel()
        if self._server is not None:
            self._server.close()
        connections = list(self._connections)
        for connection in connections:
            connection.stop_reading()
        self.broker.closing = True
        self.broker.append_waiters.wake_all()
        drains = [asyncio.ensure_future(c.drain_in_flight()) for c in connections]
        if drains:
            _, slow = await asyncio.wait(drains, timeout=DRAIN_TIMEOUT_S)
            for task in slow:
                task.cancel()
            if slow:
                log.warning("%d connections did not finish in time", len(slow))
        for connection in connections:
            connection.close()
        if self._server is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)
        self.broker.close()


def _raise_open_files_limit() -> None:
    """Lift the soft open-files limit to the hard one, as the JVM does for Kafka: partitions
    and connections each hold descriptors, and the soft default is often 1024."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


async def serve(
    config: BrokerConfig,
    *,
    metrics_address: tuple[str, int] | None = None,
    metrics_required: bool = False,
    cluster: ClusterSettings | None = None,
) -> None:
    """Run a broker until SIGTERM or SIGINT; prints the ready line once it accepts connections.

    `metrics_address`: where /metrics and /health listen (None: no metrics are kept).
    `cluster`: join a ZooKeeper cluster (None: a single node, nothing else changes)."""
    _raise_open_files_limit()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    broker = Broker(config)
    server = BrokerServer(broker)
    try:
        metrics_server = await start_metrics(
            broker, lambda: len(server._connections), metrics_address, required=metrics_required
        )
        host, port = await server.start(load_groups=cluster is None)
    except (OSError, MetricsAddressError):
        broker.close()
        raise
    link = None
    if cluster is not None:
        from tidelog.broker.cluster_link import join_cluster

        try:
            link = await join_cluster(broker, cluster)
        except BaseException:
            await server.shutdown()
            raise
    sys.stdout.write(f"tidelog ready on {host}:{port}\n")
    sys.stdout.flush()
    log.info(
        "node %d, cluster %s, data in %s, advertising %s:%d",
        config.node_id,
        broker.cluster_id,
        config.data_dir,
        broker.config.advertised_host,
        broker.config.advertised_port,
    )
    await stop.wait()
    log.info("shutting down")
    if link is not None:
        await link.leave()
    if metrics_server is not None:
        await metrics_server.close()
    await server.shutdown()
    log.info("stopped cleanly")
