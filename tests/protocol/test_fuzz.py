"""Random and mutated frames into decode_request, in a child process.

kio's native reader aborts the process on some malformed input (see guard.py), so the fuzz
runs in a subprocess: an abort shows up as a negative return code here instead of killing
pytest. The worker covers every supported (api_key, version): all truncations, bit flips,
huge counts and lengths spliced in at every position, then hypothesis examples.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

WORKER = Path(__file__).with_name("fuzz_worker.py")


def test_only_tidelog_errors_escape_decode_request() -> None:
    result = subprocess.run(
        [sys.executable, str(WORKER), "400"],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, (
        f"fuzz worker exited with {result.returncode} (negative = killed by that signal)\n"
        f"{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
    )
    last_line = result.stdout.strip().splitlines()[-1]
    assert last_line.startswith("fuzzed ")
    assert int(last_line.split()[1]) > 100_000
