"""Sessions, CSRF and the audit log.

Sessions are random ids in an HttpOnly, SameSite=Strict cookie, kept in memory (a restart signs
everyone out). Each session has a CSRF token that state-changing calls must echo in the
X-CSRF-Token header (double submit against the server's copy, so a cross-site form cannot).
Without a configured password everyone is "anonymous" but still needs a session and the token.
Against a SASL cluster a session also holds the user's Kafka credentials (in memory only) so
the session's clients can be (re)made as that user; dropping or expiring a session tells
`on_drop` (which closes those clients).
"""

from __future__ import annotations

import hmac
import json
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
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
    # (user, password) for the cluster's SASL; never logged or answered.
    credentials: tuple[str, str] | None = field(default=None, repr=False)
    expires_at: float | None = None  # an OAUTHBEARER session ends with its token

    def expired(self, now: float) -> bool:
        return now - self.created > SESSION_TTL_S or (
            self.expires_at is not None and now >= self.expires_at)


class Sessions:
    def __init__(self, password: str | None,
                 on_drop: Callable[[str], None] | None = None) -> None:
        self.password = password
        self.on_drop = on_drop
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()

    @property
    def required(self) -> bool:
        return self.password is not None

    def check_password(self, password: str) -> bool:
        return self.password is not None and hmac.compare_digest(
            password.encode("utf-8"), self.password.encode("utf-8"))

    def create(self, user: str, credentials: tuple[str, str] | None = None,
               expires_at: float | None = None) -> Session:
        session = Session(secrets.token_urlsafe(32), user, secrets.token_urlsafe(32), time.time(),
                          credentials, expires_at)
        with self._lock:
            dropped = self._prune() if len(self._sessions) >= MAX_SESSIONS else []
            self._sessions[session.id] = session
        self._dropped(dropped)
        return session

    def _dropped(self, ids: list[str]) -> None:
        if self.on_drop is not None:
            for sid in ids:
                self.on_drop(sid)

    def _prune(self) -> list[str]:
        """Drop expired sessions, then the oldest not signed in, then the oldest."""
        now = time.time()
        dropped = []
        for sid, s in list(self._sessions.items()):
            if s.expired(now):
                del self._sessions[sid]
                dropped.append(sid)
        by_age = sorted(self._sessions.values(), key=lambda s: (bool(s.user), s.created))
        for s in by_age[: max(0, len(by_age) - MAX_SESSIONS // 2)]:
            del self._sessions[s.id]
            dropped.append(s.id)
        return dropped

    def get(self, session_id: str | None) -> Session | None:
        if not session_id:
            return None
        with self._lock:
            session = self._sessions.get(session_id)
            expired = session is not None and session.expired(time.time())
            if expired:
                del self._sessions[session_id]
        if expired:
            self._dropped([session_id])
            return None
        return session

    def drop(self, session_id: str | None) -> None:
        with self._lock:
            found = self._sessions.pop(session_id or "", None)
        if found is not None:
            self._dropped([found.id])


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
