"""The API's description, served as OpenAPI 3.1 at /api/openapi.json: every handler is declared
with `@api(method, path, summary)`, which both documents it and gives `create_app` its route."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tidelog.console.auth import UNSAFE_METHODS

ROUTES_DOC: list[tuple[str, str, str]] = []


def api(method: str, path: str, summary: str) -> Callable[[Any], Any]:
    def register(fn: Any) -> Any:
        ROUTES_DOC.append((method, path, summary))
        fn.api_route = (method, path)
        return fn

    return register


def openapi() -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    for method, path, summary in ROUTES_DOC:
        params = [{"name": part[1:-1], "in": "path", "required": True,
                   "schema": {"type": "string"}}
                  for part in path.split("/") if part.startswith("{")]
        op: dict[str, Any] = {"summary": summary, "parameters": params, "responses": {
            "200": {"description": "OK"},
            "4XX": {"description": "Bad input: {\"error\": sentence}"},
            "502": {"description": "The cluster refused: {\"error\": sentence}"},
            "503": {"description": "The cluster is unreachable: {\"error\": sentence}"}}}
        if method in UNSAFE_METHODS:
            op["parameters"] = [*params, {"name": "X-CSRF-Token", "in": "header",
                                          "required": True, "schema": {"type": "string"}}]
        paths.setdefault(path, {})[method.lower()] = op
    return {"openapi": "3.1.0",
            "info": {"title": "Tidelog console API", "version": "1",
                     "description": "Sign in with POST /api/session (GET it first for the CSRF "
                                    "token); every state-changing call needs X-CSRF-Token."},
            "paths": paths}


async def get_openapi(request: Request) -> Response:
    return JSONResponse(openapi())
