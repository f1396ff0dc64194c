"""Helpers for the tools tests: run `tidelog ...` as a subprocess, pick free ports."""

from __future__ import annotations

import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

TOOL_TIMEOUT_S = 90.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class ToolRun:
    returncode: int
    stdout: bytes
    stderr: str

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", "replace")


def run_tool(
    *args: str,
    stdin: bytes | None = None,
    timeout_s: float = TOOL_TIMEOUT_S,
    cwd: Path | None = None,
) -> ToolRun:
    """`tidelog ARGS` in a subprocess, as an operator runs it."""
    completed = subprocess.run(
        [sys.executable, "-m", "tidelog.cli.main", *args],
        input=stdin if stdin is not None else b"",
        capture_output=True,
        timeout=timeout_s,
        cwd=cwd,
        check=False,
    )
    return ToolRun(
        completed.returncode, completed.stdout, completed.stderr.decode("utf-8", "replace")
    )
