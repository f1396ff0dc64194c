"""What every route module shares: the app's `State`, running blocking cluster calls off the
event loop, reading request bodies and parameters into clear 400s, the signed-in user, and
audited changes."""

from __future__ import annotations

import asyncio
import base64
import binascii
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from anyio import to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse

from tidelog.console.auth import SESSION_COOKIE, AuditLog, Session, Sessions
from tidelog.console.cluster import Cluster
from tidelog.console.cluster_sessions import SessionClusters
from tidelog.console.config import ConsoleConfig
from tidelog.console.errors import BadRequest, ConsoleError, Unauthenticated
from tidelog.console.metrics import MetricsHistory

T = TypeVar("T")


@dataclass
class State:
    config: ConsoleConfig
    cluster: Cluster
    sessions: Sessions
    audit: AuditLog
    history: MetricsHistory
    # SASL clusters: each signed-in user's own clients (None: everyone shares `cluster`).
    session_clusters: SessionClusters | None = None
    known_brokers: dict[int, dict[str, Any]] = field(default_factory=dict)
    subscribers: list[asyncio.Queue[dict[str, Any]]] = field(default_factory=list)


def state_of(request: Request) -> State:
    state: State = request.app.state.console
    return state


async def blocking(fn: Callable[[], T]) -> T:
    return await to_thread.run_sync(fn)


def error_response(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


async def json_body(request: Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except (ValueError, UnicodeDecodeError):
        raise BadRequest("the request body is not valid JSON") from None
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    return body


def int_param(value: Any, name: str, *, minimum: int | None = None,
              maximum: int | None = None, required: bool = False) -> int | None:
    if value is None or value == "":
        if required:
            raise BadRequest(f"{name} is required")
        return None
    if isinstance(value, bool):
        raise BadRequest(f"{name} must be an integer, got {value!r}")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise BadRequest(f"{name} must be an integer, got {value!r}") from None
    if isinstance(value, float) and value != number:
        raise BadRequest(f"{name} must be an integer, got {value!r}")
    if minimum is not None and number < minimum:
        raise BadRequest(f"{name} must be at least {minimum}, got {number}")
    if maximum is not None and number > maximum:
        raise BadRequest(f"{name} must be at most {maximum}, got {number}")
    return number


def str_param(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value:
        raise BadRequest(f"{name} must be a non-empty string")
    return value


def bytes_param(value: Any, encoding: str, name: str) -> bytes | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadRequest(f"{name} must be a string or null")
    if encoding == "base64":
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise BadRequest(f"{name} is not valid base64") from None
    return value.encode("utf-8")


def session_of(request: Request) -> Session | None:
    return state_of(request).sessions.get(request.cookies.get(SESSION_COOKIE))


def cluster_of(request: Request) -> Cluster:
    """The cluster as the signed-in user sees it: their own clients against a SASL cluster."""
    state = state_of(request)
    if state.session_clusters is None:
        return state.cluster
    session = session_of(request)
    if session is None or session.credentials is None:
        raise Unauthenticated("sign in first (POST /api/session)")
    return state.session_clusters.get(session.id, session.credentials)


def user_of(request: Request) -> str:
    session = session_of(request)
    return session.user if session else "?"


async def audited(request: Request, action: str, target: str, details: dict[str, Any],
                  fn: Callable[[], T]) -> T:
    state = state_of(request)
    try:
        result = await blocking(fn)
    except ConsoleError as error:
        state.audit.write(user_of(request), action, target, details, False, str(error))
        raise
    state.audit.write(user_of(request), action, target, details, True)
    return result
