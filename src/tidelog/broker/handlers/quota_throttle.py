"""What the Produce and Fetch handlers call: record a request against its client's quotas,
mute the connection when it is over (KIP-219), and say how long (Kafka's KafkaApis hooks).

Runs on the event loop. The user is the principal's name (`User:alice` -> `alice`, an
unauthenticated client `ANONYMOUS`), as Kafka's quota entities name users.
"""

from __future__ import annotations

from tidelog.broker.handlers.context import RequestContext
from tidelog.broker.quotas.manager import QuotaManager, QuotaType


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
