"""Durable whole-file replacement: the one copy of write temp, fsync, rename, fsync dir.

`write_durably(path, data)` writes `<name>.tmp`, fsyncs it, renames it over `path`, then
fsyncs the directory so the rename itself survives a power loss. A reader (or recovery after
a crash) sees the old file or the new one, whole, never a torn mix. Used for checkpoints,
producer snapshots, markers and the broker's metadata files. Blocking file I/O.
"""

from __future__ import annotations

import os
from pathlib import Path

TEMPORARY_SUFFIX = ".tmp"


def write_durably(path: Path, data: bytes) -> None:
    """tmp + fsync + rename + fsync(dir): a reader sees the old file or the new one, whole."""
    tmp = path.with_name(path.name + TEMPORARY_SUFFIX)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_directory(path.parent)


def fsync_directory(directory: Path) -> None:
    """Make creations, renames and unlinks inside `directory` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
