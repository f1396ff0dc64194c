"""Truncated, mutated and huge-count Produce frames (every version served) into the
hand-written decoder, in a child process: only ProtocolDecodeError may escape."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

WORKER = Path(__file__).with_name("produce_fuzz_worker.py")


def test_only_protocol_decode_errors_escape_the_produce_decoder() -> None:
    result = subprocess.run(
        [sys.executable, str(WORKER), "300"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, (
        f"worker exited with {result.returncode}\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
    )
    last_line = result.stdout.strip().splitlines()[-1]
    assert last_line.startswith("fuzzed ")
    assert int(last_line.split()[1]) > 20_000
