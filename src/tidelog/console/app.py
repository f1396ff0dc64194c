"""The console's ASGI app (Starlette): the JSON API under /api, server-sent event streams for
live tail and live charts, and the built single-page frontend (package data, `static/`)."""

from __future__ import annotations

import asyncio
import base64
import binascii
import csv
import hmac
import io
import json
import logging
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from anyio import to_thread
from confluent_kafka import TopicPartition
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tidelog.console.auth import CSRF_HEADER, SESSION_COOKIE, AuditLog, Session, Sessions
from tidelog.console.cluster import (
    MAX_PAGE,
    BadRequest,
    Cluster,
    ConsoleError,
    message_dict,
)
from tidelog.console.config import ConsoleConfig
from tidelog.console.filters import FilterError, compile_filter
from tidelog.console.metrics import MetricsHistory

log = logging.getLogger("tidelog.console")
STATIC_DIR = Path(__file__).parent / "static"
T = TypeVar("T")
UNSAFE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}
TAIL_BATCH_MAX = 50


@dataclass
class State:
    config: ConsoleConfig
    cluster: Cluster
    sessions: Sessions
    audit: AuditLog
    history: MetricsHistory
    known_brokers: dict[int, dict[str, Any]] = field(default_factory=dict)
    subscribers: list[asyncio.Queue[dict[str, Any]]] = field(default_factory=list)


def _state(request: Request) -> State:
    state: State = request.app.state.console
    return state


async def blocking(fn: Callable[[], T]) -> T:
    return await to_thread.run_sync(fn)


# -- API description (served as OpenAPI 3.1 at /api/openapi.json) ----------------------------

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


# -- helpers -----------------------------------------------------------------------------------

def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


async def _json_body(request: Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except (ValueError, UnicodeDecodeError):
        raise BadRequest("the request body is not valid JSON") from None
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    return body


def _int(value: Any, name: str, *, minimum: int | None = None, maximum: int | None = None,
         required: bool = False) -> int | None:
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


def _str(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value:
        raise BadRequest(f"{name} must be a non-empty string")
    return value


def _bytes(value: Any, encoding: str, name: str) -> bytes | None:
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


def _session(request: Request) -> Session | None:
    return _state(request).sessions.get(request.cookies.get(SESSION_COOKIE))


def _user(request: Request) -> str:
    session = _session(request)
    return session.user if session else "?"


async def _audited(request: Request, action: str, target: str, details: dict[str, Any],
                   fn: Callable[[], T]) -> T:
    state = _state(request)
    try:
        result = await blocking(fn)
    except ConsoleError as error:
        state.audit.write(_user(request), action, target, details, False, str(error))
        raise
    state.audit.write(_user(request), action, target, details, True)
    return result


def _read_params(request: Request, topic: str) -> dict[str, Any]:
    q = request.query_params
    start = q.get("start", "newest")
    if start not in ("oldest", "newest", "offset", "timestamp"):
        raise BadRequest("start must be oldest, newest, offset or timestamp")
    offset = _int(q.get("offset"), "offset", minimum=0, required=start == "offset")
    timestamp = _int(q.get("timestamp"), "timestamp", minimum=0, required=start == "timestamp")
    limit = _int(q.get("limit"), "limit", minimum=1, maximum=MAX_PAGE) or 100
    partitions: list[int] | None = None
    if q.get("partition") not in (None, "", "all"):
        partitions = [_int(p, "partition", minimum=0, required=True) or 0
                      for p in q.get("partition", "").split(",")]
    try:
        keep = compile_filter(q.get("filter", ""))
    except FilterError as error:
        raise BadRequest(f"filter: {error}") from None
    return {"topic": topic, "partitions": partitions, "start": start, "offset": offset,
            "timestamp": timestamp, "limit": limit, "keep": keep}


# -- session -----------------------------------------------------------------------------------

@api("GET", "/api/session", "Who is signed in, whether a password is needed, the CSRF token")
async def get_session(request: Request) -> Response:
    state = _state(request)
    session = _session(request)
    if session is None:
        session = state.sessions.create("" if state.sessions.required else "anonymous")
    body = {"signed_in": bool(session.user), "user": session.user or None,
            "csrf_token": session.csrf, "password_required": state.sessions.required,
            "bootstrap": state.config.bootstrap}
    response = JSONResponse(body)
    response.set_cookie(SESSION_COOKIE, session.id, httponly=True, samesite="strict",
                        path="/")
    return response


@api("POST", "/api/session", "Sign in: {password}")
async def sign_in(request: Request) -> Response:
    state = _state(request)
    body = await _json_body(request)
    old = _session(request)
    if state.sessions.required and not state.sessions.check_password(str(body.get("password"))):
        claimed = str(body.get("user") or "?")[:64]
        state.audit.write(claimed, "sign-in", "console", {}, False, "wrong password")
        return _error(401, "wrong password")
    user = str(body.get("user") or "admin") if state.sessions.required else "anonymous"
    state.sessions.drop(old.id if old else None)
    # A fresh id on sign-in, so a planted pre-login cookie is worthless.
    session = state.sessions.create(user[:64])
    state.audit.write(session.user, "sign-in", "console", {}, True)
    response = JSONResponse({"signed_in": True, "user": session.user,
                             "csrf_token": session.csrf})
    response.set_cookie(SESSION_COOKIE, session.id, httponly=True, samesite="strict", path="/")
    return response


@api("DELETE", "/api/session", "Sign out")
async def sign_out(request: Request) -> Response:
    session = _session(request)
    _state(request).sessions.drop(session.id if session else None)
    response = JSONResponse({"signed_in": False})
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


# -- cluster -----------------------------------------------------------------------------------

@api("GET", "/api/cluster", "Cluster id, controller, brokers (up/down), metrics endpoints")
async def get_cluster(request: Request) -> Response:
    state = _state(request)
    metrics = [{"url": u, "up": state.history.up.get(u), "error": state.history.errors.get(u),
                "disk_bytes": state.history.disk_bytes(u)} for u in state.config.metrics]
    try:
        overview = await blocking(state.cluster.overview)
    except ConsoleError as error:
        brokers = [{**b, "up": False, "controller": False}
                   for b in state.known_brokers.values()]
        return JSONResponse({"reachable": False, "error": str(error), "brokers": brokers,
                             "bootstrap": state.config.bootstrap, "metrics": metrics})
    live = {b["id"] for b in overview["brokers"]}
    for b in overview["brokers"]:
        state.known_brokers[b["id"]] = {**b, "up": True}
    brokers = [{**b, "up": b["id"] in live, "partitions_led": b["partitions_led"]
                if b["id"] in live else 0}
               for b in sorted(state.known_brokers.values(), key=lambda b: b["id"])]
    return JSONResponse({"reachable": True, **overview, "brokers": brokers,
                         "bootstrap": state.config.bootstrap, "metrics": metrics})


@api("GET", "/api/metrics", "Throughput history (15 minutes) from the brokers' /metrics")
async def get_metrics(request: Request) -> Response:
    state = _state(request)
    return JSONResponse({"available": bool(state.config.metrics),
                         "points": list(state.history.points)})


@api("GET", "/api/metrics/stream", "Server-sent events: one throughput point per scrape")
async def metrics_stream(request: Request) -> Response:
    state = _state(request)
    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=100)
    state.subscribers.append(queue)

    async def events() -> AsyncIterator[str]:
        try:
            yield ": connected\n\n"
            while not await request.is_disconnected():
                try:
                    point = await asyncio.wait_for(queue.get(), 15)
                except TimeoutError:
                    yield ": keep-alive\n\n"
                    continue
                yield f"data: {json.dumps(point)}\n\n"
        finally:
            state.subscribers.remove(queue)

    return StreamingResponse(events(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache"})


# -- topics ------------------------------------------------------------------------------------

@api("GET", "/api/topics", "Topics with partitions, replicas, messages and size")
async def list_topics(request: Request) -> Response:
    state = _state(request)
    topics = await blocking(lambda: state.cluster.topics(state.history.sizes()))
    return JSONResponse({"topics": topics})


@api("POST", "/api/topics", "Create a topic: {name, partitions, replication_factor, configs}")
async def create_topic(request: Request) -> Response:
    state = _state(request)
    body = await _json_body(request)
    name = _str(body.get("name"), "name")
    partitions = _int(body.get("partitions", 1), "partitions", minimum=1, maximum=10000) or 1
    replication = _int(body.get("replication_factor", 1), "replication_factor", minimum=1,
                       maximum=100) or 1
    configs = body.get("configs") or {}
    if not isinstance(configs, dict) or not all(isinstance(v, str | int) for v in
                                                configs.values()):
        raise BadRequest("configs must be an object of config name to string value")
    configs = {str(k): str(v) for k, v in configs.items()}
    details = {"partitions": partitions, "replication_factor": replication, "configs": configs}
    await _audited(request, "create-topic", name, details,
                   lambda: state.cluster.create_topic(name, partitions, replication, configs))
    return JSONResponse({"created": name}, status_code=201)


@api("GET", "/api/topics/{topic}", "Per partition leader, replicas, ISR, offsets; configs")
async def get_topic(request: Request) -> Response:
    state = _state(request)
    name = request.path_params["topic"]
    return JSONResponse(await blocking(lambda: state.cluster.topic(name, state.history.sizes())))


@api("DELETE", "/api/topics/{topic}", "Delete a topic: {confirm: the topic's name}")
async def delete_topic(request: Request) -> Response:
    state = _state(request)
    name = request.path_params["topic"]
    body = await _json_body(request)
    if body.get("confirm") != name:
        raise BadRequest("type the topic's name in confirm to delete it")
    await _audited(request, "delete-topic", name, {},
                   lambda: state.cluster.delete_topic(name))
    return JSONResponse({"deleted": name})


@api("PATCH", "/api/topics/{topic}/configs", "Alter configs: {set: {name: value}, delete: []}")
async def alter_configs(request: Request) -> Response:
    state = _state(request)
    name = request.path_params["topic"]
    body = await _json_body(request)
    set_ = body.get("set") or {}
    delete = body.get("delete") or []
    if not isinstance(set_, dict) or not isinstance(delete, list):
        raise BadRequest("set must be an object and delete a list of config names")
    if not set_ and not delete:
        raise BadRequest("nothing to change: give set or delete")
    set_ = {str(k): str(v) for k, v in set_.items()}
    delete = [str(k) for k in delete]
    await _audited(request, "alter-topic-configs", name, {"set": set_, "delete": delete},
                   lambda: state.cluster.alter_topic_configs(name, set_, delete))
    return JSONResponse({"configs": await blocking(lambda: state.cluster.topic_configs(name))})


# -- messages ----------------------------------------------------------------------------------

@api("GET", "/api/topics/{topic}/messages",
     "Browse: partition, start=oldest|newest|offset|timestamp, offset, timestamp (ms), limit, "
     "filter")
async def read_messages(request: Request) -> Response:
    state = _state(request)
    params = _read_params(request, request.path_params["topic"])
    return JSONResponse(await blocking(lambda: state.cluster.read(**params)))


@api("GET", "/api/topics/{topic}/messages/export",
     "Export the same selection as browse: format=json|csv")
async def export_messages(request: Request) -> Response:
    state = _state(request)
    topic = request.path_params["topic"]
    fmt = request.query_params.get("format", "json")
    if fmt not in ("json", "csv"):
        raise BadRequest("format must be json or csv")
    params = _read_params(request, topic)
    page = await blocking(lambda: state.cluster.read(**params))
    rows = [{k: m[k] for k in ("topic", "partition", "offset", "timestamp", "key", "value",
                               "headers")} for m in page["messages"]]
    disposition = {"Content-Disposition": f'attachment; filename="{topic}.{fmt}"'}
    if fmt == "json":
        return Response(json.dumps(rows, indent=2), media_type="application/json",
                        headers=disposition)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["topic", "partition", "offset", "timestamp", "key", "value", "headers"])
    for r in rows:
        writer.writerow([r["topic"], r["partition"], r["offset"], r["timestamp"], r["key"],
                         r["value"], json.dumps(r["headers"])])
    return Response(out.getvalue(), media_type="text/csv", headers=disposition)


@api("POST", "/api/topics/{topic}/messages",
     "Produce: {key, value, headers: [[name, value]], partition, encoding: text|base64}")
async def produce(request: Request) -> Response:
    state = _state(request)
    topic = request.path_params["topic"]
    body = await _json_body(request)
    encoding = body.get("encoding", "text")
    if encoding not in ("text", "base64"):
        raise BadRequest("encoding must be text or base64")
    key = _bytes(body.get("key"), encoding, "key")
    value = _bytes(body.get("value"), encoding, "value")
    headers_in = body.get("headers") or []
    if not isinstance(headers_in, list) or not all(
            isinstance(h, list) and len(h) == 2 and isinstance(h[0], str) for h in headers_in):
        raise BadRequest("headers must be a list of [name, value] pairs")
    headers = [(h[0], _bytes(h[1], encoding, f"header {h[0]!r}")) for h in headers_in]
    partition = _int(body.get("partition"), "partition", minimum=0)
    details = {"partition": partition, "key_size": len(key or b""),
               "value_size": len(value or b"")}
    result = await _audited(request, "produce", topic, details, lambda: state.cluster.produce(
        topic, key=key, value=value, headers=headers, partition=partition))
    return JSONResponse(result, status_code=201)


@api("POST", "/api/reproduce",
     "Re-produce a message to another topic: {topic, partition, offset, to_topic}")
async def reproduce(request: Request) -> Response:
    state = _state(request)
    body = await _json_body(request)
    topic = _str(body.get("topic"), "topic")
    partition = _int(body.get("partition"), "partition", minimum=0, required=True) or 0
    offset = _int(body.get("offset"), "offset", minimum=0, required=True) or 0
    to_topic = _str(body.get("to_topic"), "to_topic")

    def run() -> dict[str, Any]:
        m = state.cluster.fetch_one(topic, partition, offset)
        raw = (m["key_raw"], m["value_raw"])
        key, value = (base64.b64decode(r["base64"]) if r else None for r in raw)
        headers = [(n, v.encode("utf-8") if v is not None else None) for n, v in m["headers"]]
        return state.cluster.produce(to_topic, key=key, value=value, headers=headers,
                                     partition=None)

    result = await _audited(request, "reproduce", to_topic,
                            {"from": f"{topic}/{partition}@{offset}"}, run)
    return JSONResponse(result, status_code=201)


@api("GET", "/api/topics/{topic}/tail",
     "Server-sent events: new messages (filter applies); sampled, with the count skipped")
async def tail(request: Request) -> Response:
    state = _state(request)
    topic = request.path_params["topic"]
    try:
        keep = compile_filter(request.query_params.get("filter", ""))
    except FilterError as error:
        raise BadRequest(f"filter: {error}") from None
    meta = await blocking(lambda: state.cluster.topic(topic))  # 404 before streaming
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=20)
    stop = threading.Event()
    ends = {p["partition"]: p["log_end_offset"] for p in meta["partitions"]}

    def pump() -> None:
        consumer = state.cluster.consumer()
        try:
            consumer.assign([TopicPartition(topic, p, o) for p, o in ends.items()])
            while not stop.is_set():
                batch, skipped = [], 0
                for m in consumer.consume(1000, 0.5):
                    if m.error() is not None:
                        continue
                    decoded = message_dict(m)
                    if keep(decoded):
                        batch.append(decoded)
                # Sampling keeps the browser responsive on a busy topic: the newest few.
                if len(batch) > TAIL_BATCH_MAX:
                    skipped, batch = len(batch) - TAIL_BATCH_MAX, batch[-TAIL_BATCH_MAX:]
                event = {"messages": batch, "skipped": skipped}
                if batch or skipped:
                    loop.call_soon_threadsafe(_offer, queue, event)
        except Exception as error:  # reported to the stream, never raised into the loop
            loop.call_soon_threadsafe(_offer, queue, {"error": str(error)})
        finally:
            consumer.close()

    thread = threading.Thread(target=pump, name=f"tail-{topic}", daemon=True)
    thread.start()

    async def events() -> AsyncIterator[str]:
        try:
            yield ": connected\n\n"
            while not await request.is_disconnected():
                try:
                    event = await asyncio.wait_for(queue.get(), 5)
                except TimeoutError:
                    yield ": keep-alive\n\n"
                    continue
                yield f"data: {json.dumps(event)}\n\n"
        finally:
            stop.set()

    return StreamingResponse(events(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache"})


def _offer(queue: asyncio.Queue[dict[str, Any]], event: dict[str, Any]) -> None:
    if queue.full():
        dropped = queue.get_nowait()
        event = {**event, "skipped": event.get("skipped", 0) + len(dropped.get("messages", []))
                 + dropped.get("skipped", 0)}
    queue.put_nowait(event)


# -- consumer groups ---------------------------------------------------------------------------

@api("GET", "/api/groups", "Consumer groups with state, protocol, members and total lag")
async def list_groups(request: Request) -> Response:
    state = _state(request)
    return JSONResponse({"groups": await blocking(state.cluster.groups)})


@api("GET", "/api/groups/{group}", "Members, assignment, committed/end offsets and lag")
async def get_group(request: Request) -> Response:
    state = _state(request)
    group = request.path_params["group"]
    return JSONResponse(await blocking(lambda: state.cluster.group(group)))


async def _reset_args(request: Request) -> tuple[str | None, str, int | None]:
    body = await _json_body(request)
    strategy = body.get("strategy")
    if strategy not in ("earliest", "latest", "timestamp", "shift", "offset"):
        raise BadRequest("strategy must be earliest, latest, timestamp, shift or offset")
    value = _int(body.get("value"), "value", required=strategy in ("timestamp", "shift",
                                                                   "offset"))
    if strategy in ("timestamp", "offset") and value is not None and value < 0:
        raise BadRequest(f"value must be at least 0 for {strategy}")
    topic = body.get("topic") or None
    if topic is not None and not isinstance(topic, str):
        raise BadRequest("topic must be a string")
    return topic, strategy, value


@api("POST", "/api/groups/{group}/reset-preview",
     "Preview a reset: {topic?, strategy: earliest|latest|timestamp|shift|offset, value}")
async def reset_preview(request: Request) -> Response:
    state = _state(request)
    group = request.path_params["group"]
    topic, strategy, value = await _reset_args(request)
    return JSONResponse(await blocking(
        lambda: state.cluster.preview_reset(group, topic, strategy, value)))


@api("POST", "/api/groups/{group}/reset",
     "Reset offsets (same body as the preview; only for empty groups)")
async def reset_apply(request: Request) -> Response:
    state = _state(request)
    group = request.path_params["group"]
    topic, strategy, value = await _reset_args(request)

    def run() -> dict[str, Any]:
        preview = state.cluster.preview_reset(group, topic, strategy, value)
        state.cluster.apply_reset(group, preview["offsets"])
        return preview

    details = {"topic": topic, "strategy": strategy, "value": value}
    return JSONResponse(await _audited(request, "reset-offsets", group, details, run))


@api("DELETE", "/api/groups/{group}", "Delete a consumer group (only when empty)")
async def delete_group(request: Request) -> Response:
    state = _state(request)
    group = request.path_params["group"]
    await _audited(request, "delete-group", group, {},
                   lambda: state.cluster.delete_group(group))
    return JSONResponse({"deleted": group})


# -- audit, OpenAPI ----------------------------------------------------------------------------

@api("GET", "/api/audit", "The audit log, newest first")
async def get_audit(request: Request) -> Response:
    return JSONResponse({"entries": _state(request).audit.read()})


async def get_openapi(request: Request) -> Response:
    return JSONResponse(openapi())


async def api_not_found(request: Request) -> Response:
    return _error(404, f"no such API endpoint: {request.method} {request.url.path}")


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


# -- middleware --------------------------------------------------------------------------------

PUBLIC = {("GET", "/api/session"), ("POST", "/api/session"), ("GET", "/api/openapi.json")}


class Guard(BaseHTTPMiddleware):
    """Sign-in and CSRF for /api; cluster and input errors as {"error": sentence}."""

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        path = request.url.path
        if not path.startswith("/api/"):
            return await call_next(request)
        session = _session(request)
        if request.method in UNSAFE_METHODS and (
                session is None
                or not _same(request.headers.get(CSRF_HEADER, ""), session.csrf)):
            return _error(403, "missing or wrong X-CSRF-Token header (GET /api/session for it)")
        if (request.method, path) not in PUBLIC and (session is None or not session.user):
            return _error(401, "sign in first (POST /api/session)")
        try:
            return await call_next(request)
        except ConsoleError as error:
            return _error(error.status, str(error))
        except Exception:
            log.exception("console request %s %s failed", request.method, path)
            return _error(500, "the console failed on this request; its log has the details")


def _same(a: str, b: str) -> bool:
    return bool(a) and hmac.compare_digest(a.encode(), b.encode())


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


def create_app(config: ConsoleConfig) -> Starlette:
    cluster = Cluster(config.bootstrap, config.timeout, config.client)
    state = State(config, cluster, Sessions(config.password), AuditLog(config.audit_log),
                  MetricsHistory(config.metrics))

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        sampler = asyncio.create_task(_sample_metrics(state)) if config.metrics else None
        try:
            yield
        finally:
            if sampler is not None:
                sampler.cancel()
            await blocking(cluster.close)

    handlers = [v for v in globals().values() if callable(v) and hasattr(v, "api_route")]
    routes = [Route(h.api_route[1], h, methods=[h.api_route[0]]) for h in handlers]
    routes.append(Route("/api/openapi.json", get_openapi, methods=["GET"]))
    routes.append(Route("/api/{rest:path}", api_not_found,
                        methods=["GET", "POST", "PUT", "PATCH", "DELETE"]))
    routes.append(Route("/{path:path}", frontend, methods=["GET"]))
    app = Starlette(routes=routes, middleware=[Middleware(Guard)], lifespan=lifespan)
    app.state.console = state
    return app

