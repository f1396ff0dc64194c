"""Disk nemeses for the mixed-nemesis run (jepsen.py): a full disk and an fsync that fails.

    disks = BrokerDisks(directory, ["b1", "b2", "b3"], shim_dir=directory)
    disks.mount()                 # each broker's data directory on its own tmpfs (size-limited)
    env = disks.broker_env("b1")  # LD_PRELOAD of the fsync shim, trigger file per broker
    disks.fill("b1")              # writes fail with ENOSPC until drain("b1")
    disks.fail_fsync("b2")        # fsync/fdatasync fail with EIO until restore_fsync("b2")
    disks.unmount()               # after the replicas' logs were read

A tmpfs with `size=` gives the real ENOSPC a full disk gives (RLIMIT_FSIZE, which the
hardening test uses, limits one file's size instead). Mounting needs root, which network
namespaces need anyway; `mount()` raises DisksUnavailable with the kernel's words otherwise.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

from reliability.fsync_fault import TRIGGER_ENV, build_shim

TMPFS_SIZE = "512m"  # far more than a run writes; filled on purpose by fill()


class DisksUnavailable(RuntimeError):
    """tmpfs mounts (or gcc for the shim) are refused on this machine."""


class BrokerDisks:
    def __init__(self, directory: Path, nodes: list[str]) -> None:
        self.directory, self.nodes = directory, nodes
        self._mounted: list[Path] = []
        self._shim: Path | None = None

    def data_dir(self, node: str) -> Path:
        return self.directory / node

    def mount(self) -> None:
        try:
            self._shim = build_shim(self.directory)
        except (AssertionError, subprocess.CalledProcessError) as error:
            raise DisksUnavailable(f"fsync shim: {error}") from error
        for node in self.nodes:
            path = self.data_dir(node)
            path.mkdir(parents=True, exist_ok=True)
            completed = subprocess.run(
                ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE},mode=0755", "tmpfs", str(path)],
                capture_output=True, text=True, timeout=30)
            if completed.returncode != 0:
                self.unmount()
                raise DisksUnavailable(f"mount tmpfs on {path}: {completed.stderr.strip()}")
            self._mounted.append(path)

    def unmount(self) -> None:
        for path in reversed(self._mounted):
            subprocess.run(["umount", "--lazy", str(path)], capture_output=True, timeout=30)
        self._mounted.clear()

    # --- disk full ----------------------------------------------------------------------------
    def _filler(self, node: str) -> Path:
        return self.data_dir(node) / ".nemesis-filler"

    def fill(self, node: str) -> None:
        """Take every free block of the broker's tmpfs: its next write fails with ENOSPC."""
        path = self._filler(node)
        stats = os.statvfs(self.data_dir(node))
        free = stats.f_bavail * stats.f_frsize
        with path.open("ab") as handle:
            with contextlib.suppress(OSError):  # the space may shrink while we allocate
                os.posix_fallocate(handle.fileno(), path.stat().st_size, free)
            # fallocate can leave a few blocks; fill them byte-exact with writes
            chunk = b"\0" * 65536
            with contextlib.suppress(OSError):
                while True:
                    handle.write(chunk)
                    handle.flush()

    def drain(self, node: str) -> None:
        self._filler(node).unlink(missing_ok=True)

    # --- fsync EIO ----------------------------------------------------------------------------
    def _trigger(self, node: str) -> Path:
        return self.directory / f"{node}.fsync-fails"

    def broker_env(self, node: str) -> dict[str, str]:
        """Environment additions for a broker: the shim preloaded, its trigger file named."""
        if self._shim is None:
            return {}
        return {"LD_PRELOAD": str(self._shim), TRIGGER_ENV: str(self._trigger(node))}

    def fail_fsync(self, node: str) -> None:
        self._trigger(node).touch()

    def restore_fsync(self, node: str) -> None:
        self._trigger(node).unlink(missing_ok=True)
