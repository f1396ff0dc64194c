"""Broker log output: plain text (default) or one JSON object per line (`--log-format json`).

Request context travels as `extra=` fields on the log record (see `request_extra`): client_id,
api, api_version, correlation_id and client (host:port). The plain formatter appends them in
brackets; the JSON formatter makes them top-level keys, so a log pipeline can group the errors
of one client or one API without parsing messages.

JSON line keys: ts (ISO 8601, UTC, ms), level, logger, message, then any context fields, then
`exception` (the formatted traceback) when there is one.
"""

from __future__ import annotations

import datetime
import json
import logging
import sys
from typing import Any

from tidelog.protocol.versions import api_name

CONTEXT_FIELDS = ("client_id", "api", "api_version", "correlation_id", "client")
PLAIN_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LOG_FORMATS = ("plain", "json")


def request_extra(header: Any, client_host: str, client_port: int) -> dict[str, Any]:
    """`extra=` fields for a log call about one request (header: protocol RequestHeader)."""
    return {
        "client_id": header.client_id,
        "api": api_name(header.api_key),
        "api_version": header.api_version,
        "correlation_id": header.correlation_id,
        "client": f"{client_host}:{client_port}",
    }


def _context(record: logging.LogRecord) -> dict[str, Any]:
    return {name: getattr(record, name) for name in CONTEXT_FIELDS if hasattr(record, name)}


class PlainFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__(PLAIN_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        context = _context(record)
        if not context:
            return text
        fields = " ".join(f"{name}={value}" for name, value in context.items())
        first, newline, rest = text.partition("\n")  # keep a traceback below the context
        return f"{first} [{fields}]{newline}{rest}"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        moment = datetime.datetime.fromtimestamp(record.created, tz=datetime.UTC)
        entry: dict[str, Any] = {
            "ts": moment.isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update(_context(record))
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure_logging(level: str, log_format: str = "plain") -> None:
    """Root logger -> stderr with the chosen formatter (replaces earlier handlers)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else PlainFormatter())
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level.upper())
