"""ApiVersions (key 18, v0-4): the keys in this broker's handler table with their ranges.

An unsupported ApiVersions version is answered by the connection in the v0 layout with
UNSUPPORTED_VERSION and ApiVersions' own range, so the client can retry (KIP-511,
COMPATIBILITY.md trap 1). From v3 the client's software name and version must match Kafka's
pattern (ApiVersionsRequest.isValid), else INVALID_REQUEST with no keys.

Features (v3+, KIP-584): a single node finalizes `transaction.version` 2, as Kafka 4 does, so
clients that know KIP-890 part 2 (Kafka's Java client 4.x) bump the epoch per transaction and
let Produce v12 / TxnOffsetCommit v5 add partitions. A cluster does not: its partition leaders
do not call a remote transaction coordinator to add partitions, so its clients keep
transaction version 1 (explicit AddPartitionsToTxn). Both finalize `share.version` 1.
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


# name -> (min supported, max supported, finalized level). `share.version` 1: share groups
# are on (Kafka's isShareGroupsEnabled; tools and consoles read it, since Kafka advertises the
# share APIs even when they are off), on a single node and in a cluster alike.
CLUSTER_FEATURES: Mapping[str, tuple[int, int, int]] = {"share.version": (0, 1, 1)}
SINGLE_NODE_FEATURES: Mapping[str, tuple[int, int, int]] = {
    **CLUSTER_FEATURES, "transaction.version": (0, 2, 2)}


async def handle_api_versions(
    table: Mapping[int, Handler],
    features: Mapping[str, tuple[int, int, int]],
    context: RequestContext,
    request: Any,
) -> Any:
    version = context.header.api_version
    if not _valid(request, version):
        return versions.api_versions_response(version, {}, error_code=ErrorCode.INVALID_REQUEST)
    return versions.api_versions_response(version, advertised_versions(table), features=features)


def handlers(
    table: Mapping[int, Handler], features: Mapping[str, tuple[int, int, int]] | None = None
) -> HandlerTable:
    """`table`: the broker's whole table, read per request (cluster mode adds keys later);
    `features`: the feature levels advertised (none: every feature at level 0)."""
    return {ApiKey.API_VERSIONS: partial(handle_api_versions, table, features or {})}
