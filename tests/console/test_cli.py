"""`tidelog console` refuses bad settings in one line, without a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize("toml, args, words", [
    ("bogus = 1\n", [], "unknown console settings: bogus"),
    ('timeout = "soon"\n', [], "bad console setting"),
    ("timeout = 0\n", [], "must be positive"),
    ("not toml at all\n", [], "console.toml"),
    ("", ["--listen", "nowhere"], "expected HOST:PORT"),
])
def test_bad_settings(tmp_path: Path, toml: str, args: list[str], words: str) -> None:
    config = tmp_path / "console.toml"
    config.write_text(toml)
    result = subprocess.run(
        [sys.executable, "-m", "tidelog.cli.main", "console", "--config", str(config), *args],
        capture_output=True, text=True, timeout=60)
    assert result.returncode in (1, 2)
    assert words in result.stderr
    assert "Traceback" not in result.stderr
