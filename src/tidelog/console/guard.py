"""The middleware in front of /api: sign-in and CSRF checks, and errors as {"error": sentence}
(never a stack trace)."""

from __future__ import annotations

import hmac
import logging

from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import Response

from tidelog.console.auth import CSRF_HEADER, UNSAFE_METHODS
from tidelog.console.errors import ConsoleError
from tidelog.console.web import error_response, session_of

log = logging.getLogger("tidelog.console")


PUBLIC = {("GET", "/api/session"), ("POST", "/api/session"), ("GET", "/api/openapi.json")}


class Guard(BaseHTTPMiddleware):
    """Sign-in and CSRF for /api; cluster and input errors as {"error": sentence}."""

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        path = request.url.path
        if not path.startswith("/api/"):
            return await call_next(request)
        session = session_of(request)
        if request.method in UNSAFE_METHODS and (
                session is None
                or not _same(request.headers.get(CSRF_HEADER, ""), session.csrf)):
            return error_response(
                403, "missing or wrong X-CSRF-Token header (GET /api/session for it)")
        if (request.method, path) not in PUBLIC and (session is None or not session.user):
            return error_response(401, "sign in first (POST /api/session)")
        try:
            return await call_next(request)
        except ConsoleError as error:
            return error_response(error.status, str(error))
        except Exception:
            log.exception("console request %s %s failed", request.method, path)
            return error_response(
                500, "the console failed on this request; its log has the details")


def _same(a: str, b: str) -> bool:
    return bool(a) and hmac.compare_digest(a.encode(), b.encode())
