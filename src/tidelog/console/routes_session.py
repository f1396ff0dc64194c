"""Routes for signing in and out (/api/session) and the Audit log page (/api/audit)."""

from __future__ import annotations

import hmac
import time

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tidelog.console.auth import SESSION_COOKIE
from tidelog.console.cluster_sessions import (
    tls_user_settings,
    token_claims,
    token_expiry,
    verify_certificate,
    verify_credentials,
)
from tidelog.console.errors import ConsoleError
from tidelog.console.openapi import api
from tidelog.console.web import State, blocking, error_response, json_body, session_of, state_of

MAX_NAME = 256  # user names and passwords longer than this are refused before any handshake


@api("GET", "/api/session", "Who is signed in, whether a password is needed, the CSRF token")
async def get_session(request: Request) -> Response:
    state = state_of(request)
    session = session_of(request)
    required = state.sessions.required or _sasl(state) is not None or bool(state.config.tls_users)
    if session is None:
        session = state.sessions.create("" if required else "anonymous")
    body = {"signed_in": bool(session.user), "user": session.user or None,
            "csrf_token": session.csrf, "password_required": required,
            "sasl_mechanism": _sasl(state), "client_certificates": bool(state.config.tls_users),
            "bootstrap": state.config.bootstrap}
    response = JSONResponse(body)
    response.set_cookie(SESSION_COOKIE, session.id, httponly=True, samesite="strict",
                        path="/")
    return response


def _sasl(state: State) -> str | None:
    return state.config.sasl_mechanism


@api("POST", "/api/session",
     "Sign in: {user, password} (the Kafka credentials against a SASL cluster, else the "
     "console's password); {token} against an OAUTHBEARER cluster")
async def sign_in(request: Request) -> Response:
    state = state_of(request)
    body = await json_body(request)
    old = session_of(request)
    mechanism = _sasl(state)
    if mechanism is not None:
        return await _sasl_sign_in(request, state, body, mechanism)
    if state.config.tls_users:
        return await _tls_user_sign_in(request, state, body)
    if state.sessions.required and not state.sessions.check_password(str(body.get("password"))):
        claimed = str(body.get("user") or "?")[:64]
        state.audit.write(claimed, "sign-in", "console", {}, False, "wrong password")
        return error_response(401, "wrong password")
    user = str(body.get("user") or "admin") if state.sessions.required else "anonymous"
    state.sessions.drop(old.id if old else None)
    # A fresh id on sign-in, so a planted pre-login cookie is worthless.
    session = state.sessions.create(user[:64])
    state.audit.write(session.user, "sign-in", "console", {}, True)
    return _signed_in(session.id, session.user, session.csrf)


async def _sasl_sign_in(request: Request, state: State, body: dict[str, object],
                        mechanism: str) -> Response:
    """Check the user's Kafka credentials by a SASL handshake; the session keeps them so every
    call it makes goes to the cluster as that user."""
    if mechanism == "OAUTHBEARER":
        return await _token_sign_in(request, state, body)
    user, password = body.get("user"), body.get("password")
    if not isinstance(user, str) or not user or len(user) > MAX_NAME:
        return error_response(400, f"user must be your Kafka user name (1 to {MAX_NAME} "
                                   f"characters)")
    if not isinstance(password, str) or not password or len(password) > MAX_NAME:
        return error_response(400, f"password must be your Kafka password (1 to {MAX_NAME} "
                                   f"characters)")
    base = {"bootstrap.servers": state.config.bootstrap,
            "socket.connection.setup.timeout.ms": 5000, **state.config.client}
    try:
        await blocking(lambda: verify_credentials(base, (user, password), mechanism,
                                                  state.config.timeout))
    except ConsoleError as error:
        state.audit.write(user, "sign-in", "console", {"mechanism": mechanism}, False,
                          str(error))
        raise
    old = session_of(request)
    state.sessions.drop(old.id if old else None)
    session = state.sessions.create(user, (user, password))
    state.audit.write(user, "sign-in", "console", {"mechanism": mechanism}, True)
    return _signed_in(session.id, session.user, session.csrf)


async def _token_sign_in(request: Request, state: State, body: dict[str, object]) -> Response:
    """OAUTHBEARER: the user pastes a token (a JWT from their identity provider). The broker
    verifies it in a real handshake; the console reads its claims (unverified) only to name
    the user (`oauthbearer_principal_claim`) and to end the session when the token expires."""
    token = body.get("token")
    if not isinstance(token, str) or not token.strip():
        return error_response(400, "token must be your OAuth bearer token (a JWT)")
    token = token.strip()
    claims = token_claims(token)
    claim = state.config.oauthbearer_principal_claim
    user = claims.get(claim)
    if not isinstance(user, str) or not user or len(user) > MAX_NAME:
        return error_response(400, f"the token has no {claim!r} claim naming its principal")
    expires = token_expiry(token)
    if expires <= time.time():
        state.audit.write(user, "sign-in", "console", {"mechanism": "OAUTHBEARER"}, False,
                          "token expired")
        return error_response(401, f"the token expired at "
                                   f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(expires))}"
                                   f"; get a fresh one")
    base = {"bootstrap.servers": state.config.bootstrap,
            "socket.connection.setup.timeout.ms": 5000, **state.config.client}
    try:
        await blocking(lambda: verify_credentials(base, (user, token), "OAUTHBEARER",
                                                  state.config.timeout))
    except ConsoleError as error:
        state.audit.write(user, "sign-in", "console", {"mechanism": "OAUTHBEARER"}, False,
                          str(error))
        raise
    old = session_of(request)
    state.sessions.drop(old.id if old else None)
    session = state.sessions.create(user, (user, token), expires_at=expires)
    state.audit.write(user, "sign-in", "console", {"mechanism": "OAUTHBEARER"}, True)
    return _signed_in(session.id, session.user, session.csrf)


async def _tls_user_sign_in(request: Request, state: State, body: dict[str, object]
                            ) -> Response:
    """Mutual TLS, a certificate per console user: the user's console password (tls_users),
    then one request with their certificate; the session's clients present it."""
    user, password = body.get("user"), body.get("password")
    if not isinstance(user, str) or not user or len(user) > MAX_NAME or \
            not isinstance(password, str) or len(password) > MAX_NAME:
        return error_response(400, f"user and password must be strings (1 to {MAX_NAME} "
                                   f"characters)")
    table = state.config.tls_users.get(user)
    # The same answer and the same comparison for an unknown user as for a wrong password.
    expected = (table or {}).get("password", "")
    matches = hmac.compare_digest(password.encode(), expected.encode())
    if table is None or not matches:
        state.audit.write(user[:64], "sign-in", "console", {"mechanism": "mutual TLS"}, False,
                          "wrong user name or password")
        return error_response(401, "wrong user name or password")
    settings = {"bootstrap.servers": state.config.bootstrap,
                "socket.connection.setup.timeout.ms": 5000, **state.config.client,
                **tls_user_settings(state.config)((user, ""))}
    try:
        await blocking(lambda: verify_certificate(settings, user, state.config.timeout))
    except ConsoleError as error:
        state.audit.write(user, "sign-in", "console", {"mechanism": "mutual TLS"}, False,
                          str(error))
        raise
    old = session_of(request)
    state.sessions.drop(old.id if old else None)
    session = state.sessions.create(user, (user, ""))
    state.audit.write(user, "sign-in", "console", {"mechanism": "mutual TLS"}, True)
    return _signed_in(session.id, session.user, session.csrf)


def _signed_in(session_id: str, user: str, csrf: str) -> Response:
    response = JSONResponse({"signed_in": True, "user": user, "csrf_token": csrf})
    response.set_cookie(SESSION_COOKIE, session_id, httponly=True, samesite="strict", path="/")
    return response


@api("DELETE", "/api/session", "Sign out (closes the session's cluster clients)")
async def sign_out(request: Request) -> Response:
    session = session_of(request)
    state = state_of(request)
    await blocking(lambda: state.sessions.drop(session.id if session else None))
    if session is not None and session.user:
        state.audit.write(session.user, "sign-out", "console", {}, True)
    response = JSONResponse({"signed_in": False})
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


@api("GET", "/api/audit", "The audit log, newest first")
async def get_audit(request: Request) -> Response:
    return JSONResponse({"entries": state_of(request).audit.read()})
