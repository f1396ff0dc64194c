"""What the Produce and Fetch handlers call: record a request against its client's quotas,
mute the connection when it is over (KIP-219), and say how long (Kafka's KafkaApis hooks);
and the request-time quota around every handler (`with_request_quota`).

Runs on the event loop. The user is the principal's name (`User:alice` -> `alice`, an
unauthenticated client `ANONYMOUS`), as Kafka's quota entities name users.
"""

from __future__ import annotations

import dataclasses
import datetime
import struct
import time
from collections.abc import Coroutine, Generator
from functools import partial
from typing import Any

from tidelog.broker.handlers.context import Handler, HandlerTable, RequestContext
from tidelog.broker.quotas.manager import QuotaManager, QuotaType
from tidelog.protocol.api_keys import ApiKey
from tidelog.protocol.wire import Outgoing


def throttle(quotas: QuotaManager, context: RequestContext, throttle_ms: int) -> int:
    if throttle_ms > 0 and context.mute is not None:
        context.mute(throttle_ms)
    return throttle_ms


def produce_throttle_ms(quotas: QuotaManager | None, context: RequestContext) -> int:
    """Record the whole request's bytes (Kafka: request.sizeInBytes) and throttle."""
    if quotas is None:
        return 0
    throttle_ms = quotas.record(
        QuotaType.PRODUCE, context.principal.name, context.client_id, context.request_bytes
    )
    return throttle(quotas, context, throttle_ms)


def fetch_max_bytes(quotas: QuotaManager | None, context: RequestContext, max_bytes: int
                    ) -> int:
    """A consumer's Fetch carries at most one quota window's bytes (Kafka's
    getMaxValueInQuotaWindow), so one response cannot earn a throttle by itself alone."""
    if quotas is None:
        return max_bytes
    limit = quotas.max_value_in_window(
        QuotaType.FETCH, context.principal.name, context.client_id
    )
    return max_bytes if limit is None else min(max_bytes, max(1, int(limit)))


def fetch_throttle_ms(quotas: QuotaManager | None, context: RequestContext, size: int) -> int:
    """Record a consumer's response bytes. Over quota: the bytes are taken back, since the
    answer is then empty (KIP-219: the client asks again after the throttle), and the
    connection is muted."""
    if quotas is None:
        return 0
    user, client_id = context.principal.name, context.client_id
    throttle_ms = quotas.record(QuotaType.FETCH, user, client_id, size)
    if throttle_ms > 0:
        quotas.unrecord(QuotaType.FETCH, user, client_id, size)
    return throttle(quotas, context, throttle_ms)


# --- request_percentage (Kafka's ClientRequestQuotaManager) -----------------------------------
# Not counted: a follower's Fetch and the brokers' own transaction markers (Kafka exempts
# cluster actions), and the SASL exchange (answered by the connection before any handler).
_EXEMPT = frozenset({ApiKey.WRITE_TXN_MARKERS})
_FETCH_THROTTLE = struct.Struct(">i")


class _StepTimer:
    """Drives a handler's coroutine and sums the time of its steps on the loop: the time the
    request held the loop (Kafka's request-handler thread time), without the time it waited
    (a parked Fetch, an fsync, the high watermark)."""

    __slots__ = ("_coroutine", "seconds")

    def __init__(self, coroutine: Coroutine[Any, Any, Any]) -> None:
        self._coroutine = coroutine
        self.seconds = 0.0

    def __await__(self) -> Generator[Any, Any, Any]:
        coroutine = self._coroutine
        value: Any = None
        error: BaseException | None = None
        while True:
            started = time.perf_counter()
            try:
                step = coroutine.send(value) if error is None else coroutine.throw(error)
            except StopIteration as stop:
                self.seconds += time.perf_counter() - started
                return stop.value
            self.seconds += time.perf_counter() - started
            try:
                value, error = (yield step), None
            except BaseException as thrown:  # cancellation travels into the handler
                value, error = None, thrown


def with_request_quota(table: HandlerTable, quotas: QuotaManager) -> None:
    """Wrap every handler of `table` (in place): while any entity sets request_percentage, a
    request's time on the loop is recorded for its client, and over the quota the response
    carries the throttle time (at most one quota window, as Kafka caps it) and the
    connection is muted. The bandwidth throttles of Produce and Fetch stay: the longer wins."""
    for api_key, handler in list(table.items()):
        if api_key not in _EXEMPT:
            table[api_key] = partial(_timed, quotas, handler)


async def _timed(quotas: QuotaManager, handler: Handler, context: RequestContext, request: Any
                 ) -> Any:
    if not quotas.enabled(QuotaType.REQUEST) or _is_follower_fetch(context, request):
        return await handler(context, request)
    timer = _StepTimer(handler(context, request))  # type: ignore[arg-type]
    response = await timer
    throttle_ms = quotas.record(
        QuotaType.REQUEST, context.principal.name, context.client_id, timer.seconds * 100,
        max_throttle_ms=quotas.window.window_ms,
    )
    if throttle_ms <= 0 or response is None:
        return response
    throttle(quotas, context, throttle_ms)
    return _with_throttle_time(context, response, throttle_ms)


def _is_follower_fetch(context: RequestContext, request: Any) -> bool:
    if context.header.api_key != ApiKey.FETCH:
        return False
    state = getattr(request, "replica_state", None)
    replica_id = state.replica_id if state is not None else getattr(request, "replica_id", -1)
    return int(replica_id) >= 0


def _with_throttle_time(context: RequestContext, response: Any, throttle_ms: int) -> Any:
    if isinstance(response, Outgoing):  # Fetch: patch the encoded header
        head = response.parts[0]
        if not isinstance(head, bytes):
            return response
        # size, correlation id, (v12+: the header's empty tagged fields), throttle_time_ms
        position = 8 + (1 if context.header.api_version >= 12 else 0)
        (current,) = _FETCH_THROTTLE.unpack_from(head, position)
        if current >= throttle_ms:
            return response
        patched = head[:position] + _FETCH_THROTTLE.pack(throttle_ms) + head[position + 4:]
        return dataclasses.replace(response, parts=(patched, *response.parts[1:]))
    current_delta = getattr(response, "throttle_time", None)
    if not isinstance(current_delta, datetime.timedelta):
        return response  # no throttle field: the mute alone
    if current_delta >= datetime.timedelta(milliseconds=throttle_ms):
        return response
    return dataclasses.replace(response, throttle_time=datetime.timedelta(milliseconds=throttle_ms))
