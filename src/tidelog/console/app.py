"""The console's ASGI app (Starlette): the JSON API under /api (the `routes_*` modules, behind
`guard.Guard`), server-sent event streams for live tail and live charts, and the built
single-page frontend (package data, `static/`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Route

from tidelog.console import (
    routes_groups,
    routes_messages,
    routes_overview,
    routes_security,
    routes_session,
    routes_share_groups,
    routes_streams,
    routes_topics,
    routes_transactions,
)
from tidelog.console.auth import AuditLog, Sessions
from tidelog.console.cluster import Cluster
from tidelog.console.cluster_sessions import SessionClusters, sasl_settings, tls_user_settings
from tidelog.console.config import ConsoleConfig
from tidelog.console.guard import Guard
from tidelog.console.metrics import MetricsHistory
from tidelog.console.openapi import get_openapi
from tidelog.console.web import State, blocking, error_response

log = logging.getLogger("tidelog.console")
STATIC_DIR = Path(__file__).parent / "static"
# Route modules, one per page family; each handler is declared with openapi.api().
ROUTE_MODULES: tuple[ModuleType, ...] = (routes_session, routes_overview, routes_topics,
                                         routes_messages, routes_streams, routes_groups,
                                         routes_share_groups, routes_security,
                                         routes_transactions)


async def api_not_found(request: Request) -> Response:
    return error_response(404, f"no such API endpoint: {request.method} {request.url.path}")


async def frontend(request: Request) -> Response:
    path = request.path_params.get("path", "")
    candidate = (STATIC_DIR / path).resolve()
    if path and candidate.is_file() and STATIC_DIR.resolve() in candidate.parents:
        return FileResponse(candidate)
    index = STATIC_DIR / "index.html"
    if index.is_file():
        return FileResponse(index, headers={"Cache-Control": "no-cache"})
    return Response("The console's frontend is not built: run scripts/setup (needs Node) or "
                    "install a tidelog wheel. The API is at /api.", media_type="text/plain",
                    status_code=503)


async def _sample_metrics(state: State) -> None:
    while True:
        try:
            point = await blocking(state.history.sample)
        except Exception:
            log.exception("metrics sampling failed")
            point = None
        if point is not None:
            for queue in list(state.subscribers):
                if not queue.full():
                    queue.put_nowait(point)
        await asyncio.sleep(state.config.metrics_interval)


def api_routes() -> list[Route]:
    handlers: list[Any] = [v for m in ROUTE_MODULES for v in vars(m).values()
                           if callable(v) and hasattr(v, "api_route")]
    return [Route(h.api_route[1], h, methods=[h.api_route[0]]) for h in handlers]


def create_app(config: ConsoleConfig) -> Starlette:
    cluster = Cluster(config.bootstrap, config.timeout, config.client)
    session_clusters = None
    mechanism = config.sasl_mechanism
    if mechanism is not None or config.tls_users:
        session_clusters = SessionClusters(
            lambda extra: Cluster(config.bootstrap, config.timeout, {**config.client, **extra}),
            config.max_session_clients,
            (lambda credentials: sasl_settings(credentials, mechanism)) if mechanism
            else tls_user_settings(config))
    sessions = Sessions(config.password,
                        session_clusters.drop if session_clusters is not None else None)
    state = State(config, cluster, sessions, AuditLog(config.audit_log),
                  MetricsHistory(config.metrics), session_clusters)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        sampler = asyncio.create_task(_sample_metrics(state)) if config.metrics else None
        try:
            yield
        finally:
            if sampler is not None:
                sampler.cancel()
            await blocking(cluster.close)
            if session_clusters is not None:
                await blocking(session_clusters.close_all)

    routes = api_routes()
    routes.append(Route("/api/openapi.json", get_openapi, methods=["GET"]))
    routes.append(Route("/api/{rest:path}", api_not_found,
                        methods=["GET", "POST", "PUT", "PATCH", "DELETE"]))
    routes.append(Route("/{path:path}", frontend, methods=["GET"]))
    app = Starlette(routes=routes, middleware=[Middleware(Guard)], lifespan=lifespan)
    app.state.console = state
    return app
