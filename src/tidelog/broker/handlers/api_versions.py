"""ApiVersions (key 18, v0-4): the keys in this broker's handler table with their ranges.

An unsupported ApiVersions version is answered by the connection in the v0 layout with
UNSUPPORTED_VERSION and ApiVersions' own range, so the client can retry (KIP-511,
COMPATIBILITY.md trap 1). From v3 the client's software name and version must match Kafka's
pattern (ApiVersionsRequest.isValid), else INVALID_REQUEST with no keys.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import partial
from typing import Any

from tidelog.broker.handlers.context import (
    Handler,
    HandlerTable,
    RequestContext,
    advertised_versions,
)
from tidelog.errors import ErrorCode
from tidelog.protocol import versions
from tidelog.protocol.api_keys import ApiKey

_SOFTWARE_NAME_OR_VERSION = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def client_software(request: Any, version: int) -> tuple[str, str] | None:
    """The (name, version) a valid ApiVersions v3+ request names, else None."""
    if version < 3 or not _valid(request, version):
        return None
    return request.client_software_name, request.client_software_version


def _valid(request: Any, version: int) -> bool:
    if version < 3:
        return True
    return all(
        _SOFTWARE_NAME_OR_VERSION.fullmatch(value or "") is not None
        for value in (request.client_software_name, request.client_software_version)
    )


async def handle_api_versions(
    table: Mapping[int, Handler], context: RequestContext, request: Any
) -> Any:
    version = context.header.api_version
    if not _valid(request, version):
        return versions.api_versions_response(version, {}, error_code=ErrorCode.INVALID_REQUEST)
    return versions.api_versions_response(version, advertised_versions(table))


def handlers(table: Mapping[int, Handler]) -> HandlerTable:
    """`table`: the broker's whole table, read per request (cluster mode adds keys later)."""
    return {ApiKey.API_VERSIONS: partial(handle_api_versions, table)}
