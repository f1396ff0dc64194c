"""fsync/fdatasync failing with EIO on demand: an LD_PRELOAD shim for a broker process.

Python's os.fsync calls libc's fsync, so the broker's group-commit thread sees the same OSError
a failing disk gives it. The shim fails every fsync/fdatasync while the file named by
TIDELOG_FAULT_FSYNC_FILE exists, so a test (or the mixed-nemesis run) turns the fault on and
off by creating and removing that file. Used by tests/hardening/test_fsync_failure.py and the
`fsync-eio` nemesis (jepsen.py).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

TRIGGER_ENV = "TIDELOG_FAULT_FSYNC_FILE"

SHIM_SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

/* fsync/fdatasync fail with EIO while the file named by TIDELOG_FAULT_FSYNC_FILE exists. */
static int injected(void) {
    const char *trigger = getenv("TIDELOG_FAULT_FSYNC_FILE");
    if (trigger != NULL && access(trigger, F_OK) == 0) {
        errno = EIO;
        return 1;
    }
    return 0;
}

int fsync(int fd) {
    static int (*real)(int);
    if (injected()) return -1;
    if (real == NULL) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    return real(fd);
}

int fdatasync(int fd) {
    static int (*real)(int);
    if (injected()) return -1;
    if (real == NULL) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    return real(fd);
}
"""


def build_shim(directory: Path) -> Path:
    """Compile the shim into `directory` with gcc; its path (for LD_PRELOAD)."""
    gcc = shutil.which("gcc")
    if gcc is None:
        raise AssertionError("gcc not found: it is needed to build the fsync fault-injection shim")
    source = directory / "fsync_fault.c"
    library = directory / "libfsync_fault.so"
    source.write_text(SHIM_SOURCE)
    subprocess.run(
        [gcc, "-shared", "-fPIC", "-O1", "-o", str(library), str(source), "-ldl"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return library
