"""Disk full under the storage layer: the failing append is an OSError (never SIGBUS from a
mapped index), nothing partial stays in the segment, appends resume when space returns and
recovery keeps every acknowledged batch.

As root the test fills a real 1 MiB tmpfs; otherwise RLIMIT_FSIZE makes writes fail (EFBIG).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

CHILD = Path(__file__).with_name("disk_full_child.py")


@contextlib.contextmanager
def small_filesystem(path: Path) -> Iterator[str]:
    """A 1 MiB tmpfs at `path` when this process may mount one, else the rlimit mode."""
    path.mkdir()
    if os.geteuid() == 0:
        mounted = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(path)], capture_output=True
        )
        if mounted.returncode == 0:
            try:
                yield "tmpfs"
            finally:
                subprocess.run(["umount", str(path)], check=True)
            return
    yield "rlimit"


@pytest.mark.parametrize("mode", ["tmpfs", "tmpfs-index", "rlimit"])
def test_append_on_a_full_disk_leaves_nothing_partial(tmp_path: Path, mode: str) -> None:
    with small_filesystem(tmp_path / "small") as available:
        chosen = mode if available == "tmpfs" else "rlimit"
        result = subprocess.run(
            [sys.executable, str(CHILD), str(tmp_path / "small"), chosen],
            capture_output=True, text=True, timeout=60,
        )
    assert result.returncode == 0, f"child exited {result.returncode}\n{result.stderr[-3000:]}"
    report = json.loads(result.stdout.strip().splitlines()[-1])
    acknowledged = report["acknowledged"]
    assert acknowledged and report["error"], "the disk never filled"
    assert report["file_size"] == report["segment_size"], "a partial batch was left behind"
    assert report["after"] == acknowledged[-1] + (1 if mode == "tmpfs-index" else 4)
    assert report["recovered"] == [*acknowledged, report["after"]]
    assert report["truncated_bytes"] == 0
