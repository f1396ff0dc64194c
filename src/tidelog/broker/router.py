"""Request routing: the merged handler table, version checks, and KafkaError -> error code.

Each API family is a module `tidelog.broker.handlers.<family>` exporting
`HANDLERS: dict[int, Handler]`; adding a family is one import line below. ApiVersions advertises
exactly the keys in the merged table, with ranges from `tidelog.protocol.versions`.

A handler returns a kio response entity, a `tidelog.broker.wire.Outgoing` (pre-encoded bytes and
file slices, for Fetch), or None for no response (Produce acks=0). Errors are data: a handler
raising KafkaError is answered with that code in the response's top-level `error_code`; a
response without one cannot carry it, and the connection is closed, as Kafka does.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tidelog.broker import responses
from tidelog.broker.handlers import (
    admin,
    api_versions,
    fetch,
    groups,
    list_offsets,
    metadata,
    produce,
    producer,
)
from tidelog.broker.logformat import request_extra
from tidelog.errors import ErrorCode, KafkaError, TidelogError
from tidelog.protocol.codec import RequestHeader
from tidelog.protocol.versions import SUPPORTED_VERSIONS

if TYPE_CHECKING:
    from tidelog.broker.state import Broker

log = logging.getLogger("tidelog.broker.router")


@dataclass(frozen=True, slots=True)
class RequestContext:
    header: RequestHeader
    client_host: str
    client_port: int


Handler = Callable[["Broker", RequestContext, Any], Awaitable[Any | None]]

HANDLERS: dict[int, Handler] = {}
for _family in (api_versions, metadata, produce, fetch, list_offsets, producer, admin, groups):
    HANDLERS.update(_family.HANDLERS)


class UnanswerableError(TidelogError):
    """A handler failed in a way its response cannot express; the connection is closed."""


def advertised_versions() -> dict[int, tuple[int, int]]:
    """api_key -> (min, max) for every key with a handler (what ApiVersions answers)."""
    return {
        api_key: SUPPORTED_VERSIONS[api_key]
        for api_key in sorted(HANDLERS)
        if api_key in SUPPORTED_VERSIONS
    }


def is_supported(api_key: int, api_version: int) -> bool:
    if api_key not in HANDLERS:
        return False
    bounds = SUPPORTED_VERSIONS.get(api_key)
    return bounds is not None and bounds[0] <= api_version <= bounds[1]


def error_response(header: RequestHeader, code: ErrorCode) -> Any:
    """The response of (api_key, api_version) carrying `code` at the top level."""
    cls = responses.response_class(header.api_key, header.api_version)
    if not responses.has_field(cls, "error_code"):
        raise UnanswerableError(
            f"api {header.api_key} v{header.api_version} has no top-level error code"
            f" for {code.name}"
        )
    return responses.build(cls, error_code=code)


async def dispatch(broker: Broker, context: RequestContext, body: Any) -> Any | None:
    """Run the handler of a supported request; map typed errors onto the response."""
    handler = HANDLERS[context.header.api_key]
    started = time.perf_counter()
    error_name: str | None = None
    try:
        return await handler(broker, context, body)
    except KafkaError as error:
        error_name = error.code.name
        log.info("api %d: %s", context.header.api_key, error, extra=_log_context(context))
        return error_response(context.header, error.code)
    except (TidelogError, ValueError, TypeError, LookupError, OSError) as error:
        # A bug or an I/O failure: the traceback goes to the log; the client sees
        # UNKNOWN_SERVER_ERROR (or a closed connection) and the broker keeps serving.
        error_name = ErrorCode.UNKNOWN_SERVER_ERROR.name
        log.exception(
            "api %d failed: %s", context.header.api_key, error, extra=_log_context(context)
        )
        return error_response(context.header, ErrorCode.UNKNOWN_SERVER_ERROR)
    finally:
        if broker.metrics is not None:  # one histogram bucket and two dict increments
            broker.metrics.record_request(
                context.header.api_key, time.perf_counter() - started, error_name
            )


def _log_context(context: RequestContext) -> dict[str, Any]:
    return request_extra(context.header, context.client_host, context.client_port)
