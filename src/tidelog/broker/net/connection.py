"""One client connection: frames in, handlers run concurrently, responses out in request order.

Runs on the event loop; must not block. The adapter is thin (STYLE: uvicorn): bytes from the
transport are cut into frames, each frame is decoded sans-I/O (`protocol.codec`, or
`protocol.wire` for Produce, whose record sets stay writable views into the frame) and
dispatched by the router. It knows its listener only as a `ConnectionRegistry`.

Receiving (asyncio.BufferedProtocol, so the kernel copies straight into our buffers) is
`protocol.frame.FrameReceiver`: small frames are copied out of one receive buffer once, a big
frame is received in place into its own growing bytearray (see frame.py for the memory rules).
A declared size above socket.request.max.bytes (or below the 8-byte header) closes the
connection before anything is allocated.

Ordering and bounds: at most `max_in_flight_per_connection` requests run at once (reading
pauses at the limit and while the client is not reading its responses), and at most
MAX_FETCHES_IN_FLIGHT Fetches until their responses are written (each holds open segment files
for sendfile: a client that never reads must not exhaust the broker's file descriptors);
responses are written strictly in request order, Fetch record bytes by sendfile after their
header bytes.

Security (ARCHITECTURE D13): on a TLS listener asyncio's SSL transport hands us plaintext
(the handshake is done, and bounded by ssl.handshake.timeout.ms, before `connection_made`);
the principal is the client certificate's mapped subject (SSL) or whoever SASL authenticated
(SASL_*, `sasl_authenticator.py`). Until SASL completes only ApiVersions, SaslHandshake and
SaslAuthenticate are served, frames are bounded by sasl.server.max.receive.size, and anything
else closes the connection. TLS cannot sendfile (the kernel would send plaintext): Fetch file
slices are read and written in TLS_CHUNK_BYTES pieces, waiting while the transport's buffer
is full.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import ssl
from collections import deque
from dataclasses import dataclass
from typing import Any, Protocol

from tidelog.broker.handlers.api_versions import client_software
from tidelog.broker.handlers.context import RequestContext
from tidelog.broker.net.router import Router, UnanswerableError
from tidelog.broker.net.sasl_authenticator import (
    Reauthentication,
    SaslAuthenticator,
    SaslPhase,
    SaslStep,
)
from tidelog.broker.net.security import (
    PLAINTEXT_SECURITY,
    ListenerSecurity,
    certificate_principal,
)
from tidelog.errors import ProtocolDecodeError
from tidelog.protocol.api_keys import ApiKey
from tidelog.protocol.codec import RequestHeader, decode_request, encode_response, parse_header
from tidelog.protocol.frame import FrameReceiver, FrameSizeError
from tidelog.protocol.versions import encode_unsupported_api_versions
from tidelog.protocol.wire import (
    Outgoing,
    SendSlice,
    decode_produce_request,
    decode_request_header,
)
from tidelog.security.principal import ANONYMOUS, KafkaPrincipal
from tidelog.security.ssl_principal import PrincipalMappingError

MAX_FETCHES_IN_FLIGHT = 4  # consumers and followers keep one Fetch in flight per broker
MIN_FRAME_BYTES = 8  # api_key, api_version, correlation_id
TLS_CHUNK_BYTES = 256 * 1024  # Fetch file bytes read per TLS write (no sendfile over TLS)
log = logging.getLogger("tidelog.broker.connection")


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    max_frame_bytes: int  # socket.request.max.bytes
    max_in_flight: int  # max.in.flight.requests.per.connection


@dataclass(frozen=True, slots=True)
class _FinalAnswer:
    """Send `frame` (maybe empty), then close: the answer to a failed authentication."""

    frame: bytes


class ConnectionRegistry(Protocol):
    """The listener as a connection sees it: max.connections and shutdown tracking."""

    def register(self, connection: Connection) -> bool: ...

    def unregister(self, connection: Connection) -> None: ...


class Connection(asyncio.BufferedProtocol):
    def __init__(
        self,
        router: Router,
        registry: ConnectionRegistry,
        limits: ConnectionLimits,
        security: ListenerSecurity = PLAINTEXT_SECURITY,
    ) -> None:
        self._router = router
        self._security = security
        self._max_frame_bytes = limits.max_frame_bytes
        self._principal: KafkaPrincipal = ANONYMOUS
        self._sasl: SaslAuthenticator | None = None
        self._session_expires_at: float | None = None  # KIP-368, loop.time() seconds
        self._writable = asyncio.Event()
        self._writable.set()
        self._registry = registry
        self._max_in_flight = limits.max_in_flight
        self._frames = FrameReceiver(limits.max_frame_bytes, min_frame_bytes=MIN_FRAME_BYTES)
        # Tasks of dispatched requests; plain futures for answers the connection makes itself
        self._pending: deque[tuple[RequestHeader, asyncio.Future[Any]]] = deque()
        self._fetches_pending = 0  # Fetches whose responses are not yet written
        self._read_blockers: set[str] = set()
        self._muted_until: float | None = None  # loop.time() a quota throttle ends
        self._writer_task: asyncio.Task[None] | None = None
        self._transport: asyncio.Transport | None = None
        self._peer: tuple[str, int] = ("", 0)
        self._client_software: tuple[str, str] = ("unknown", "unknown")
        self._closed = False
        self._active = False  # bytes arrived since the last idle check
        self._idle_ms = 0

    # --- transport callbacks ---------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        peer = transport.get_extra_info("peername")
        if peer:
            self._peer = (str(peer[0]), int(peer[1]))
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        transport.set_write_buffer_limits(high=4 << 20)
        if not self._registry.register(self):
            log.warning("max.connections reached: refusing %s:%d", *self._peer)
            self._closed = True
            transport.abort()
            return
        security = self._security
        if security.sasl is not None:
            self._sasl = SaslAuthenticator(security.sasl, f"{self._peer[0]}:{self._peer[1]}")
            self._frames.max_frame_bytes = min(
                self._max_frame_bytes, security.sasl_max_receive_bytes
            )
        elif security.tls:
            self._principal_from_certificate(transport.get_extra_info("ssl_object"))

    def _principal_from_certificate(self, ssl_object: ssl.SSLObject | None) -> None:
        try:
            principal = certificate_principal(ssl_object, self._security.principal_rules)
        except PrincipalMappingError as error:
            log.warning("closing %s:%d: %s", *self._peer, error)
            self.close()
            return
        if principal is not None:
            self._principal = principal.kafka
            log.info("%s:%d: TLS client %s is %s", *self._peer, principal.dn, principal.kafka)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._writable.set()  # a buffered TLS fetch write stops waiting
        self._registry.unregister(self)
        for _, task in self._pending:
            task.cancel()
            task.add_done_callback(_close_outgoing)
        self._pending.clear()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._frames.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        self._active = True
        self._frames.buffer_updated(nbytes)
        self._parse_frames()

    def pause_writing(self) -> None:
        self._writable.clear()
        self._block_reading("writing")

    def resume_writing(self) -> None:
        self._writable.set()
        self._unblock_reading("writing")

    # --- framing -------------------------------------------------------------------------
    def _parse_frames(self) -> None:
        while (
            not self._closed
            and len(self._pending) < self._max_in_flight
            and "fetches" not in self._read_blockers
            and "throttled" not in self._read_blockers
        ):
            try:
                frame = self._frames.next_frame()
            except FrameSizeError as error:
                log.warning(
                    "closing %s:%d: frame of %d bytes (limit %d)",
                    *self._peer,
                    error.declared_size,
                    error.max_frame_bytes,
                )
                self.close()
                return
            if frame is None:
                return
            self._submit(frame)

    def _note_client_software(self, body: Any, api_version: int) -> None:
        software = client_software(body, api_version)
        if software is not None:
            self._client_software = software

    def _submit(self, frame: bytearray) -> None:
        if self._sasl is not None and not self._sasl.complete:
            self._submit_unauthenticated(self._sasl, frame)
            return
        if self._session_expires_at is not None and self._reauthenticate_or_close(frame):
            return
        try:
            api_key, api_version, correlation_id = parse_header(memoryview(frame))
            if not self._router.is_supported(api_key, api_version):
                self._unsupported(api_key, api_version, correlation_id)
                return
            if api_key == ApiKey.PRODUCE:
                view = memoryview(frame)
                header, position = decode_request_header(view)
                body: Any = decode_produce_request(view, api_version, position)
            else:
                request = decode_request(bytes(frame))
                header, body = request.header, request.body
        except ProtocolDecodeError as error:
            log.warning("closing %s:%d: %s", *self._peer, error)
            self.close()
            return
        if api_key == ApiKey.API_VERSIONS:
            self._note_client_software(body, api_version)
        context = RequestContext(
            header, self._peer[0], self._peer[1], self._principal, self._security.listener_name,
            len(frame), self.mute_for, self._client_software,
        )
        task = asyncio.get_running_loop().create_task(self._router.dispatch(context, body))
        self._pending.append((header, task))
        task.add_done_callback(self._on_done)
        if len(self._pending) >= self._max_in_flight:
            self._block_reading("in_flight")
        if header.api_key == ApiKey.FETCH:
            self._fetches_pending += 1
            if self._fetches_pending >= MAX_FETCHES_IN_FLIGHT:
                self._block_reading("fetches")

    # --- SASL, before authentication ------------------------------------------------------
    def _submit_unauthenticated(self, sasl: SaslAuthenticator, frame: bytearray) -> None:
        if sasl.phase is SaslPhase.RAW_TOKEN:
            header = RequestHeader(ApiKey.SASL_AUTHENTICATE, 0, -1, None, False)
            self._answer_sasl(sasl, header, sasl.raw_token(bytes(frame)))
            return
        try:
            api_key, api_version, correlation_id = parse_header(memoryview(frame))
            if not sasl.allows(api_key):
                log.warning(
                    "closing %s:%d: api %d before SASL authentication (%s)",
                    *self._peer, api_key, sasl.phase.value,
                )
                self.close()
                return
            if not self._router.is_supported(api_key, api_version):
                self._unsupported(api_key, api_version, correlation_id)
                return
            request = decode_request(bytes(frame))
        except ProtocolDecodeError as error:
            log.warning("closing %s:%d: %s", *self._peer, error)
            self.close()
            return
        header = request.header
        if api_key == ApiKey.API_VERSIONS:
            self._note_client_software(request.body, api_version)
            context = RequestContext(
                header, self._peer[0], self._peer[1], ANONYMOUS, self._security.listener_name
            )
            task = asyncio.get_running_loop().create_task(
                self._router.dispatch(context, request.body)
            )
            self._pending.append((header, task))
            task.add_done_callback(self._on_done)
            return
        if api_key == ApiKey.SASL_HANDSHAKE:
            step = sasl.handshake(header, request.body)
        else:
            step = sasl.authenticate(header, request.body)
        self._answer_sasl(sasl, header, step)

    def _reauthenticate_or_close(self, frame: bytearray) -> bool:
        """KIP-368 on a session with a lifetime: a SaslHandshake starts re-authentication
        (True: handled); any other request after the lifetime closes the connection."""
        assert self._sasl is not None and self._session_expires_at is not None
        try:
            api_key, _, _ = parse_header(memoryview(frame))
        except ProtocolDecodeError:
            return False  # _submit closes it
        if api_key == ApiKey.SASL_HANDSHAKE:
            previous = self._sasl
            self._sasl = SaslAuthenticator(
                previous.settings, f"{self._peer[0]}:{self._peer[1]}",
                Reauthentication(self._principal, previous.mechanism),
            )
            self._submit_unauthenticated(self._sasl, frame)
            return True
        if asyncio.get_running_loop().time() >= self._session_expires_at:
            log.info("closing %s:%d: SASL session expired (connections.max.reauth.ms)",
                     *self._peer)
            self.close()
            return True
        return False

    def _answer_sasl(self, sasl: SaslAuthenticator, header: RequestHeader, step: SaslStep
                     ) -> None:
        if step.close:
            self.close()
            return
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Any] = loop.create_future()
        frame = step.raw if step.raw is not None else (
            encode_response(header, step.response) if step.response is not None else b""
        )
        self._pending.append((header, done))
        done.add_done_callback(self._on_done)
        if step.fail:
            # Kafka's connection.failed.authentication.delay.ms: read nothing more, answer
            # late, then close (slows down password guessing without holding a thread).
            self._block_reading("authentication_failed")
            delay_s = sasl.failed_authentication_delay_ms / 1000
            loop.call_later(delay_s, _resolve, done, _FinalAnswer(frame))
            return
        done.set_result(Outgoing((frame,), len(frame)))
        if sasl.phase is SaslPhase.RAW_TOKEN:
            self._frames.min_frame_bytes = 0  # a bare PLAIN token may be this short
        elif sasl.complete:
            self._principal = sasl.principal or ANONYMOUS
            self._frames.max_frame_bytes = self._max_frame_bytes
            self._frames.min_frame_bytes = MIN_FRAME_BYTES
            max_reauth_ms = sasl.settings.max_reauth_ms
            if max_reauth_ms > 0:
                self._session_expires_at = loop.time() + max_reauth_ms / 1000

    def _unsupported(self, api_key: int, api_version: int, correlation_id: int) -> None:
        if api_key == ApiKey.API_VERSIONS:
            # Kafka's fallback (KIP-511): the v0 layout listing ApiVersions' own range, all a
            # client needs to retry with a version both sides speak.
            header = RequestHeader(ApiKey.API_VERSIONS, 0, correlation_id, None, False)
            own = self._router.advertised_versions()[ApiKey.API_VERSIONS]
            versions: dict[int, tuple[int, int]] = {ApiKey.API_VERSIONS: own}
            frame = encode_unsupported_api_versions(correlation_id, versions)
            done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            done.set_result(Outgoing((frame,), len(frame)))
            self._pending.append((header, done))
            self._on_done(done)
            return
        log.warning("closing %s:%d: unsupported api %d v%d", *self._peer, api_key, api_version)
        self.close()

    # --- responses, in request order -----------------------------------------------------
    def _on_done(self, _task: asyncio.Future[Any]) -> None:
        if self._writer_task is None:
            self._write_ready()

    def _write_ready(self) -> None:
        """Write every finished response at the head of the queue; hand off to a task for
        sendfile parts."""
        while self._pending and self._pending[0][1].done() and not self._gone():
            header, task = self._pending[0]
            try:
                result = task.result()
            except UnanswerableError as error:
                log.warning("closing %s:%d: %s", *self._peer, error)
                self.close()
                return
            except Exception:
                log.exception("closing %s:%d: request failed", *self._peer)
                self.close()
                return
            self._pending.popleft()
            if isinstance(result, _FinalAnswer):
                assert self._transport is not None
                if result.frame:
                    self._transport.write(result.frame)
                self.close()
                return
            if header.api_key == ApiKey.FETCH:
                self._fetches_pending -= 1
            if isinstance(result, Outgoing) and len(result.parts) > 1:
                self._writer_task = asyncio.get_running_loop().create_task(
                    self._send_outgoing(result)
                )
                return
            assert self._transport is not None
            if isinstance(result, Outgoing):
                part = result.parts[0]
                assert isinstance(part, bytes)
                self._transport.write(part)
            elif result is not None:
                self._transport.write(encode_response(header, result))
        if len(self._pending) < self._max_in_flight:
            self._unblock_reading("in_flight")
        if self._fetches_pending < MAX_FETCHES_IN_FLIGHT:
            self._unblock_reading("fetches")

    def _gone(self) -> bool:
        """Closed, or closing: a failed send makes asyncio close the transport and call
        connection_lost only on the next loop turn; writing more meanwhile (a pipelined client
        that reset its connection) only logs a warning per write."""
        return self._closed or self._transport is None or self._transport.is_closing()

    async def _send_outgoing(self, outgoing: Outgoing) -> None:
        assert self._transport is not None
        loop = asyncio.get_running_loop()
        try:
            for part in outgoing.parts:
                if self._gone():
                    break
                if isinstance(part, bytes):
                    self._transport.write(part)
                elif self._security.tls:
                    await self._write_file_buffered(part)
                    part.file.close()
                else:
                    await loop.sendfile(self._transport, part.file, part.position, part.length)
                    part.file.close()
        except (OSError, RuntimeError) as error:
            log.info("%s:%d: sendfile stopped: %s", *self._peer, error)
            self.close()
        finally:
            _close_parts(outgoing.parts)
            self._writer_task = None
        if not self._closed:
            self._apply_reading()
            self._write_ready()

    async def _write_file_buffered(self, part: SendSlice) -> None:
        """TLS: file bytes through the transport (encrypted by it), a chunk at a time, never
        more than the write buffer's high-water mark ahead of the client. The reads are
        blocking pread calls on the loop; segment data a consumer fetches is normally in the
        page cache."""
        assert self._transport is not None
        position, remaining = part.position, part.length
        while remaining > 0 and not self._closed:
            chunk = os.pread(part.file.fileno(), min(remaining, TLS_CHUNK_BYTES), position)
            if not chunk:
                raise OSError(f"segment ended {remaining} bytes before its fetched slice")
            self._transport.write(chunk)
            position += len(chunk)
            remaining -= len(chunk)
            await self._writable.wait()

    # --- flow control --------------------------------------------------------------------
    def mute_for(self, throttle_ms: int) -> None:
        """KIP-219: a client over its quota is answered at once (with throttle_time_ms) and
        then not read from until the throttle time has passed; requests already received
        wait too. A longer throttle extends the mute, a shorter one does not cut it."""
        if throttle_ms <= 0 or self._closed:
            return
        # From now on one request at a time, as Kafka serves every connection: otherwise the
        # requests the client sent during the mute would all be taken at once when it ends,
        # each recorded before the first one's throttle could hold the rest back.
        self._max_in_flight = 1
        loop = asyncio.get_running_loop()
        until = loop.time() + throttle_ms / 1000
        if self._muted_until is not None and self._muted_until >= until:
            return
        self._muted_until = until
        self._block_reading("throttled")
        loop.call_at(until, self._unmute, until)

    def _unmute(self, until: float) -> None:
        if self._muted_until == until:
            self._muted_until = None
            self._unblock_reading("throttled")

    def _block_reading(self, reason: str) -> None:
        self._read_blockers.add(reason)
        self._apply_reading()

    def _unblock_reading(self, reason: str) -> None:
        if reason in self._read_blockers:
            self._read_blockers.discard(reason)
            self._apply_reading()
            if not self._read_blockers:
                self._parse_frames()  # frames already buffered while paused

    def _apply_reading(self) -> None:
        transport = self._transport
        if transport is None or self._closed or transport.is_closing():
            return
        if self._read_blockers:
            if transport.is_reading():
                transport.pause_reading()
        elif not transport.is_reading():
            transport.resume_reading()

    def close(self) -> None:
        if not self._closed and self._transport is not None:
            self._closed = True
            self._transport.close()

    def check_idle(self, elapsed_ms: int, max_idle_ms: int) -> None:
        """Called every broker tick: close a connection that sent nothing and awaits no
        response for connections.max.idle.ms (a half-sent frame holds memory otherwise)."""
        if self._active or self._pending:
            self._active = False
            self._idle_ms = 0
            return
        self._idle_ms += elapsed_ms
        if self._idle_ms >= max_idle_ms:
            log.info("closing %s:%d: idle for %d ms", *self._peer, self._idle_ms)
            self.close()

    def stop_reading(self) -> None:
        """Shutdown: take no new requests; in-flight ones still get their responses."""
        self._block_reading("shutdown")

    async def drain_in_flight(self) -> None:
        """Wait until every accepted request has been answered (or the peer went away)."""
        while not self._closed:
            if self._writer_task is not None:
                await asyncio.wait({self._writer_task})
                continue
            unfinished = [task for _, task in self._pending if not task.done()]
            if unfinished:
                await asyncio.wait(unfinished)
                continue
            self._write_ready()
            if self._writer_task is None:
                return


def _resolve(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():
        future.set_result(value)


def _close_parts(parts: tuple[bytes | SendSlice, ...]) -> None:
    for part in parts:
        if isinstance(part, SendSlice) and not part.file.closed:
            part.file.close()


def _close_outgoing(task: asyncio.Future[Any]) -> None:
    if task.cancelled() or task.exception() is not None:
        return
    result = task.result()
    if isinstance(result, Outgoing):
        _close_parts(result.parts)
