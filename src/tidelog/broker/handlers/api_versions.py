"""ApiVersions (key 18, v0-4): the keys in this broker's handler table with their ranges.

An unsupported ApiVersions version is answered by the connection in the v0 layout with
UNSUPPORTED_VERSION and the full list, so the client can retry (COMPATIBILITY.md trap 1).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from tidelog.broker.handlers.context import (
    Handler,
    HandlerTable,
    RequestContext,
    advertised_versions,
)
from tidelog.protocol import versions
from tidelog.protocol.api_keys import ApiKey


async def handle_api_versions(
    table: Mapping[int, Handler], context: RequestContext, request: Any
) -> Any:
    return versions.api_versions_response(context.header.api_version, advertised_versions(table))


def handlers(table: Mapping[int, Handler]) -> HandlerTable:
    """`table`: the broker's whole table, read per request (cluster mode adds keys later)."""
    return {ApiKey.API_VERSIONS: partial(handle_api_versions, table)}
