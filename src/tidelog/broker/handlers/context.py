"""What every handler gets and returns, shared by the router (net/) and the handler modules.

A handler is `async (context, request) -> response | None`, with its dependencies bound
first (`functools.partial(handle_x, deps)`), so the router never knows what a handler uses and
a handler's signature says exactly what it may touch. Each family module exports
`handlers(deps) -> HandlerTable`; `server.py` builds one table per broker instance.

A handler returns a kio response entity, a `protocol.wire.Outgoing` (pre-encoded bytes and
file slices, for Fetch), or None for no response (Produce acks=0).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tidelog.protocol.codec import RequestHeader
from tidelog.protocol.versions import SUPPORTED_VERSIONS
from tidelog.security.principal import ANONYMOUS, KafkaPrincipal


@dataclass(frozen=True, slots=True)
class RequestContext:
    header: RequestHeader
    client_host: str
    client_port: int
    # Who sent it (set by the connection once TLS/SASL authenticated it) and on which listener
    # (Metadata answers with that listener's endpoints; ARCHITECTURE D13).
    principal: KafkaPrincipal = ANONYMOUS
    listener_name: str = "PLAINTEXT"
    # The whole request frame's size (Kafka's produce quota counts it) and the connection's
    # throttle (KIP-219: stop reading from it for that many ms after this response).
    request_bytes: int = 0
    mute: Callable[[int], None] | None = None
    # (name, version) the client gave in ApiVersions v3+ (Kafka's ClientInformation; KIP-714
    # subscriptions match on them), "unknown" until then.
    client_software: tuple[str, str] = ("unknown", "unknown")

    @property
    def client_id(self) -> str:
        return self.header.client_id or ""


# The request is a kio entity (or wire.ProduceRequestData), whose classes kio generates per
# version; the handler narrows it. The response likewise.
Handler = Callable[[RequestContext, Any], Awaitable[Any]]
HandlerTable = dict[int, Handler]


def advertised_versions(table: Mapping[int, Handler]) -> dict[int, tuple[int, int]]:
    """api_key -> (min, max) for every key with a handler (what ApiVersions answers)."""
    return {
        api_key: SUPPORTED_VERSIONS[api_key]
        for api_key in sorted(table)
        if api_key in SUPPORTED_VERSIONS
    }


# include_*_authorized_operations (KIP-430): with no authorizer Kafka answers every operation
# the resource type has (AuthHelper.authorizedOperations), else INT32_MIN ("not provided").
OPERATIONS_NOT_PROVIDED = -(2**31)
ALL_TOPIC_OPERATIONS = 3576  # READ WRITE CREATE DELETE ALTER DESCRIBE DESCRIBE/ALTER_CONFIGS
ALL_CLUSTER_OPERATIONS = 8096  # CREATE ALTER DESCRIBE CLUSTER_ACTION ... IDEMPOTENT_WRITE ...
ALL_GROUP_OPERATIONS = 3400  # READ DELETE DESCRIBE DESCRIBE_CONFIGS ALTER_CONFIGS


def authorized_operations(requested: Any, every_operation: int) -> int:
    """What a response carries for one resource: all of them when asked, else not provided."""
    return every_operation if requested else OPERATIONS_NOT_PROVIDED
