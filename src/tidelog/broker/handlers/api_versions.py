"""ApiVersions (key 18, v0-4): the keys in the router's table with their version ranges.

An unsupported ApiVersions version is answered by the connection in the v0 layout with
UNSUPPORTED_VERSION and the full list, so the client can retry (COMPATIBILITY.md trap 1).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tidelog.protocol import versions

if TYPE_CHECKING:
    from tidelog.broker.router import RequestContext
    from tidelog.broker.state import Broker

API_VERSIONS = 18


def api_versions_response(api_version: int) -> Any:
    from tidelog.broker import router  # the table includes this module: import at call time

    return versions.api_versions_response(api_version, router.advertised_versions())


async def handle_api_versions(broker: Broker, context: RequestContext, request: Any) -> Any:
    return api_versions_response(context.header.api_version)


HANDLERS = {API_VERSIONS: handle_api_versions}
