"""Sessions, CSRF and the audit log.

Sessions are random ids in an HttpOnly, SameSite=Strict cookie, kept in memory (a restart signs
everyone out). Each session has a CSRF token that state-changing calls must echo in the
X-CSRF-Token header (double submit against the server's copy, so a cross-site form cannot).
Without a configured password everyone is "anonymous" but still needs a session and the token.
"""

from __future__ import annotations

import hmac
import json
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SESSION_COOKIE = "tidelog_console_session"
CSRF_HEADER = "x-csrf-token"
UNSAFE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}  # they need the CSRF token
SESSION_TTL_S = 12 * 3600
MAX_SESSIONS = 10_000  # GET /api/session makes one per cookieless visitor: keep memory bounded


@dataclass
class Session:
    id: str
    user: str
    csrf: str
    created: float


class Sessions:
    def __init__(self, password: str | None) -> None:
        self.password = password
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()

    @property
    def required(self) -> bool:
        return self.password is not None

    def check_password(self, password: str) -> bool:
        return self.password is not None and hmac.compare_digest(
            password.encode("utf-8"), self.password.encode("utf-8"))

    def create(self, user: str) -> Session:
        session = Session(secrets.token_urlsafe(32), user, secrets.token_urlsafe(32), time.time())
        with self._lock:
            if len(self._sessions) >= MAX_SESSIONS:
                self._prune()
            self._sessions[session.id] = session
        return session

    def _prune(self) -> None:
        """Drop expired sessions, then the oldest not signed in, then the oldest."""
        now = time.time()
        for sid, s in list(self._sessions.items()):
            if now - s.created > SESSION_TTL_S:
                del self._sessions[sid]
        by_age = sorted(self._sessions.values(), key=lambda s: (bool(s.user), s.created))
        for s in by_age[: max(0, len(by_age) - MAX_SESSIONS // 2)]:
            del self._sessions[s.id]

    def get(self, session_id: str | None) -> Session | None:
        if not session_id:
            return None
        with self._lock:
            session = self._sessions.get(session_id)
            if session is not None and time.time() - session.created > SESSION_TTL_S:
                del self._sessions[session_id]
                return None
            return session

    def drop(self, session_id: str | None) -> None:
        with self._lock:
            self._sessions.pop(session_id or "", None)


class AuditLog:
    """Append-only JSON lines: {"time", "user", "action", "target", "details", "ok"}."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def write(self, user: str, action: str, target: str, details: dict[str, Any],
              ok: bool, error: str | None = None) -> None:
        entry = {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "user": user,
                 "action": action, "target": target, "details": details, "ok": ok}
        if error:
            entry["error"] = error
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(entry, sort_keys=True) + "\n")

    def read(self, limit: int = 500) -> list[dict[str, Any]]:
        try:
            lines = self.path.read_text("utf-8").splitlines()
        except FileNotFoundError:
            return []
        out = []
        for line in reversed(lines[-limit:]):
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out
