"""Routes for the Security page: ACLs (list with filters, create single ones or from a template,
delete) and SCRAM users (list, create, rotate a password, delete). Every change is audited; the
cluster's ACLs decide whether the signed-in user may make it."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tidelog.console.cluster_security import (
    MAX_ITERATIONS,
    MAX_TEXT,
    MECHANISMS,
    MIN_ITERATIONS,
    OPERATIONS,
    PATTERN_TYPES,
    PERMISSIONS,
    RESOURCE_TYPES,
    Acl,
    expand_template,
    parse_acl,
)
from tidelog.console.errors import BadRequest
from tidelog.console.openapi import api
from tidelog.console.web import audited, blocking, cluster_of, int_param, json_body

MAX_ACLS = 100  # per request


def _filter(request: Request, name: str, choices: tuple[str, ...] | None = None) -> str | None:
    value = request.query_params.get(name) or None
    if value is None:
        return None
    if len(value) > MAX_TEXT:
        raise BadRequest(f"{name} is too long")
    if choices is not None:
        value = value.upper().replace("-", "_")
        if value not in choices:
            raise BadRequest(f"{name} must be one of {', '.join(choices)}")
    return value


@api("GET", "/api/acls", "ACLs, filtered by resource_type, name, pattern_type (LITERAL, "
     "PREFIXED or MATCH: every ACL that applies to the name), principal, host, operation, "
     "permission; {enabled: false} without an authorizer")
async def list_acls(request: Request) -> Response:
    cluster = cluster_of(request)
    filters = {
        "resource_type": _filter(request, "resource_type", tuple(RESOURCE_TYPES)),
        "name": _filter(request, "name"),
        "pattern_type": _filter(request, "pattern_type", (*PATTERN_TYPES, "MATCH")),
        "principal": _filter(request, "principal"),
        "host": _filter(request, "host"),
        "operation": _filter(request, "operation", OPERATIONS),
        "permission": _filter(request, "permission", PERMISSIONS),
    }
    if filters["pattern_type"] == "MATCH" and not filters["name"]:
        raise BadRequest("pattern_type MATCH needs a name")
    return JSONResponse(await blocking(lambda: cluster.acls(filters)))


def _acl_list(body: dict[str, Any]) -> list[Acl]:
    items = body.get("acls")
    if not isinstance(items, list) or not items:
        raise BadRequest("acls must be a non-empty list of ACLs")
    if len(items) > MAX_ACLS:
        raise BadRequest(f"at most {MAX_ACLS} ACLs per request")
    return [parse_acl(item) for item in items]


@api("POST", "/api/acls", "Create ACLs: {acls: [{resource_type, name, pattern_type, principal, "
     "host, operation, permission}]}")
async def create_acls(request: Request) -> Response:
    cluster = cluster_of(request)
    acls = _acl_list(await json_body(request))
    rows = [a.as_dict() for a in acls]
    await audited(request, "create-acls", "acls", {"acls": rows},
                  lambda: cluster.create_acls(acls))
    return JSONResponse({"created": rows}, status_code=201)


@api("POST", "/api/acls/template", "Create ACLs from a template: {template: producer|consumer|"
     "admin, principal, topic, pattern_type, group, group_pattern_type, prefix, host, "
     "preview}; preview: true answers the ACLs without creating them")
async def create_from_template(request: Request) -> Response:
    cluster = cluster_of(request)
    body = await json_body(request)
    acls = expand_template(body)
    rows = [a.as_dict() for a in acls]
    if body.get("preview") is True:
        return JSONResponse({"preview": rows})
    await audited(request, "create-acls", f"template {body['template']}", {"acls": rows},
                  lambda: cluster.create_acls(acls))
    return JSONResponse({"created": rows}, status_code=201)


@api("DELETE", "/api/acls", "Delete exactly these ACLs: {acls: [...], confirm: true}")
async def delete_acls(request: Request) -> Response:
    cluster = cluster_of(request)
    body = await json_body(request)
    if body.get("confirm") is not True:
        raise BadRequest("confirm must be true to delete ACLs")
    acls = _acl_list(body)
    rows = [a.as_dict() for a in acls]
    deleted = await audited(request, "delete-acls", "acls", {"acls": rows},
                            lambda: cluster.delete_acls(acls))
    return JSONResponse({"deleted": deleted})


# -- SCRAM users -------------------------------------------------------------------------------

@api("GET", "/api/users", "SCRAM users with their mechanisms and iterations")
async def list_users(request: Request) -> Response:
    cluster = cluster_of(request)
    return JSONResponse({"users": await blocking(cluster.users)})


def _credential(body: dict[str, Any]) -> tuple[str, str, int]:
    password = body.get("password")
    if not isinstance(password, str) or not password or len(password) > MAX_TEXT:
        raise BadRequest(f"password must be a non-empty string (at most {MAX_TEXT} "
                         f"characters)")
    mechanism = body.get("mechanism", "SCRAM-SHA-256")
    if mechanism not in MECHANISMS:
        raise BadRequest(f"mechanism must be one of {', '.join(MECHANISMS)}, got {mechanism!r}")
    iterations = int_param(body.get("iterations", MIN_ITERATIONS), "iterations",
                           minimum=MIN_ITERATIONS, maximum=MAX_ITERATIONS) or MIN_ITERATIONS
    return password, mechanism, iterations


def _user_name(value: Any) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_TEXT:
        raise BadRequest(f"name must be a non-empty string (at most {MAX_TEXT} characters)")
    return value


@api("POST", "/api/users", "Create a SCRAM user: {name, password, mechanism, iterations}")
async def create_user(request: Request) -> Response:
    cluster = cluster_of(request)
    body = await json_body(request)
    name = _user_name(body.get("name"))
    password, mechanism, iterations = _credential(body)
    await audited(request, "create-user", name,
                  {"mechanism": mechanism, "iterations": iterations},
                  lambda: cluster.upsert_user(name, password, mechanism, iterations,
                                              create=True))
    return JSONResponse({"created": name, "mechanism": mechanism}, status_code=201)


@api("PUT", "/api/users/{user}/password",
     "Rotate a SCRAM user's password: {password, mechanism, iterations}")
async def rotate_password(request: Request) -> Response:
    cluster = cluster_of(request)
    name = _user_name(request.path_params["user"])
    password, mechanism, iterations = _credential(await json_body(request))
    await audited(request, "rotate-password", name,
                  {"mechanism": mechanism, "iterations": iterations},
                  lambda: cluster.upsert_user(name, password, mechanism, iterations,
                                              create=False))
    return JSONResponse({"rotated": name, "mechanism": mechanism})


@api("DELETE", "/api/users/{user}", "Delete a SCRAM user (every mechanism): {confirm: name}")
async def delete_user(request: Request) -> Response:
    cluster = cluster_of(request)
    name = _user_name(request.path_params["user"])
    body = await json_body(request)
    if body.get("confirm") != name:
        raise BadRequest("type the user's name in confirm to delete it")
    mechanisms = await audited(request, "delete-user", name, {},
                               lambda: cluster.delete_user(name))
    return JSONResponse({"deleted": name, "mechanisms": mechanisms})
