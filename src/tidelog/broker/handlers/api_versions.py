"""ApiVersions (key 18, v0-4): the keys in the router's table with their version ranges.

An unsupported ApiVersions version is answered by the connection in the v0 layout with
UNSUPPORTED_VERSION and the full list, so the client can retry (COMPATIBILITY.md trap 1).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tidelog.broker import responses
from tidelog.errors import ErrorCode

if TYPE_CHECKING:
    from tidelog.broker.router import RequestContext
    from tidelog.broker.state import Broker

API_VERSIONS = 18


def api_versions_response(api_version: int, error_code: ErrorCode = ErrorCode.NONE) -> Any:
    from tidelog.broker import router  # the table includes this module: import at call time

    module = responses.response_module(API_VERSIONS, api_version)
    cls = responses.response_class(API_VERSIONS, api_version)
    entries = tuple(
        responses.build(module.ApiVersion, api_key=key, min_version=low, max_version=high)
        for key, (low, high) in router.advertised_versions().items()
    )
    return responses.build(cls, error_code=error_code, api_keys=entries, throttle_time=0)


async def handle_api_versions(broker: Broker, context: RequestContext, request: Any) -> Any:
    return api_versions_response(context.header.api_version)


HANDLERS = {API_VERSIONS: handle_api_versions}
