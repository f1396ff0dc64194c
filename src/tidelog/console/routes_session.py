"""Routes for signing in and out (/api/session) and the Audit log page (/api/audit)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tidelog.console.auth import SESSION_COOKIE
from tidelog.console.openapi import api
from tidelog.console.web import error_response, json_body, session_of, state_of


@api("GET", "/api/session", "Who is signed in, whether a password is needed, the CSRF token")
async def get_session(request: Request) -> Response:
    state = state_of(request)
    session = session_of(request)
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
    state = state_of(request)
    body = await json_body(request)
    old = session_of(request)
    if state.sessions.required and not state.sessions.check_password(str(body.get("password"))):
        claimed = str(body.get("user") or "?")[:64]
        state.audit.write(claimed, "sign-in", "console", {}, False, "wrong password")
        return error_response(401, "wrong password")
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
    session = session_of(request)
    state_of(request).sessions.drop(session.id if session else None)
    response = JSONResponse({"signed_in": False})
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


@api("GET", "/api/audit", "The audit log, newest first")
async def get_audit(request: Request) -> Response:
    return JSONResponse({"entries": state_of(request).audit.read()})
