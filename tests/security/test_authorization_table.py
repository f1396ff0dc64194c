"""The table of what each API needs covers every API Tidelog serves, and docs/security.md
prints a row for each (a new API cannot be served without deciding its ACLs)."""

from __future__ import annotations

from pathlib import Path

from tidelog.broker.handlers.authorization import REQUIRED
from tidelog.protocol.versions import SUPPORTED_VERSIONS, api_name

DOCS = Path(__file__).resolve().parents[2] / "docs" / "security.md"


def test_every_served_api_has_a_requirement() -> None:
    missing = sorted(api_name(key) for key in SUPPORTED_VERSIONS if key not in REQUIRED)
    assert missing == []


def test_every_served_api_is_in_the_docs_table() -> None:
    text = DOCS.read_text("utf-8")
    table = text[text.index("### What each API needs"):text.index("### ACL APIs and tools")]
    rows = [line for line in table.splitlines() if line.startswith("| ")]
    missing = [
        api_name(key) for key in SUPPORTED_VERSIONS
        if not any(api_name(key) in row.split("|")[1] for row in rows)
    ]
    assert missing == []
