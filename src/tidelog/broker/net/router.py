"""Request routing: this broker's handler table, version checks, and KafkaError -> error code.

The table is built per broker instance by `server.py` from each family's `handlers(deps)`
(`tidelog.broker.handlers`); cluster mode swaps in a table with the cluster handlers. ApiVersions
advertises exactly the keys in the table, with ranges from `tidelog.protocol.versions`.

Errors are data: a handler raising KafkaError is answered with that code in the response's
top-level `error_code`; a response without one cannot carry it, and the connection is closed,
as Kafka does.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from tidelog.broker.handlers.context import (
    HandlerTable,
    RequestContext,
    advertised_versions,
)
from tidelog.broker.logformat import request_extra
from tidelog.broker.services import Metrics
from tidelog.errors import ErrorCode, KafkaError, TidelogError
from tidelog.protocol import responses
from tidelog.protocol.codec import RequestHeader
from tidelog.protocol.versions import SUPPORTED_VERSIONS

log = logging.getLogger("tidelog.broker.router")


class UnanswerableError(TidelogError):
    """A handler failed in a way its response cannot express; the connection is closed."""


class Router:
    """Runs on the event loop. `table` is read per request, so replacing it (cluster mode)
    takes effect for the next request on every connection."""

    __slots__ = ("metrics", "table")

    def __init__(self, table: HandlerTable, metrics: Metrics) -> None:
        self.table = table
        self.metrics = metrics

    def advertised_versions(self) -> dict[int, tuple[int, int]]:
        return advertised_versions(self.table)

    def is_supported(self, api_key: int, api_version: int) -> bool:
        if api_key not in self.table:
            return False
        bounds = SUPPORTED_VERSIONS.get(api_key)
        return bounds is not None and bounds[0] <= api_version <= bounds[1]

    async def dispatch(self, context: RequestContext, body: Any) -> Any:
        """Run the handler of a supported request; map typed errors onto the response."""
        handler = self.table[context.header.api_key]
        started = time.perf_counter()
        error_name: str | None = None
        try:
            return await handler(context, body)
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
            # one histogram bucket and two dict increments (a no-op with metrics off)
            self.metrics.record_request(
                context.header.api_key, time.perf_counter() - started, error_name
            )


def error_response(header: RequestHeader, code: ErrorCode) -> Any:
    """The response of (api_key, api_version) carrying `code` at the top level."""
    cls = responses.response_class(header.api_key, header.api_version)
    if not responses.has_field(cls, "error_code"):
        raise UnanswerableError(
            f"api {header.api_key} v{header.api_version} has no top-level error code"
            f" for {code.name}"
        )
    return responses.build(cls, error_code=code)


def _log_context(context: RequestContext) -> dict[str, Any]:
    return request_extra(context.header, context.client_host, context.client_port)
