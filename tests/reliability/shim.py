"""Simulated power loss, LazyFS-style: an LD_PRELOAD shim that journals unsynced file writes.

The shim interposes libc's write/pwrite/writev/pwritev/ftruncate/fsync/fdatasync in the broker
process. For every regular file it appends one line to the journal named by
TIDELOG_POWERLOSS_JOURNAL (read per process, so a forked child can set it through os.environ):

    W <dev> <ino> <offset> <length> <size_before>   before a write of <length> bytes at <offset>
    T <dev> <ino> <new_size> <size_before>         before an ftruncate
    S <dev> <ino> <size>                            after a *successful* fsync/fdatasync
    C <dev> <ino> <dir_dev> <dir_ino>               after open(O_CREAT) made a new file
    D <dev> <ino>                                   after a successful fsync of a directory

A C line not followed by a D line for its directory marks a directory entry that a power
loss may take away with the whole file (POSIX: only an fsync of the directory makes a new
name durable; LazyFS drops such files too).

Files are keyed by inode, not fd: the group-commit thread fsyncs dup'd fds. A W/T line is
written before the operation, an S line after it returned 0 and before control goes back to
Python, so a record the broker acknowledged after its fsync always has its S line (a SIGKILL
between a W line and its write leaves a range past the end of the file, clamped by the reader).
Each line is one write() to an O_APPEND fd, so lines from several threads never interleave.

mmap'd writes (the .index/.timeindex files) are not seen: those files are derived data that
recovery rebuilds, and the harness damages them separately (powerloss.py).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

JOURNAL_ENV = "TIDELOG_POWERLOSS_JOURNAL"

SHIM_SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <libgen.h>
#include <stdarg.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_pwrite64)(int, const void *, size_t, off_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static ssize_t (*real_pwritev)(int, const struct iovec *, int, off_t);
static ssize_t (*real_pwritev64)(int, const struct iovec *, int, off_t);
static int (*real_ftruncate)(int, off_t);
static int (*real_ftruncate64)(int, off_t);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_open)(const char *, int, ...);
static int (*real_open64)(const char *, int, ...);
static int (*real_openat)(int, const char *, int, ...);
static int (*real_openat64)(int, const char *, int, ...);

static pthread_once_t resolved = PTHREAD_ONCE_INIT;
static pthread_mutex_t journal_lock = PTHREAD_MUTEX_INITIALIZER;
static int journal_fd = -1;
static pid_t journal_pid = 0;

static void resolve(void) {
    real_write = dlsym(RTLD_NEXT, "write");
    real_pwrite = dlsym(RTLD_NEXT, "pwrite");
    real_pwrite64 = dlsym(RTLD_NEXT, "pwrite64");
    real_writev = dlsym(RTLD_NEXT, "writev");
    real_pwritev = dlsym(RTLD_NEXT, "pwritev");
    real_pwritev64 = dlsym(RTLD_NEXT, "pwritev64");
    real_ftruncate = dlsym(RTLD_NEXT, "ftruncate");
    real_ftruncate64 = dlsym(RTLD_NEXT, "ftruncate64");
    real_fsync = dlsym(RTLD_NEXT, "fsync");
    real_fdatasync = dlsym(RTLD_NEXT, "fdatasync");
    real_open = dlsym(RTLD_NEXT, "open");
    real_open64 = dlsym(RTLD_NEXT, "open64");
    real_openat = dlsym(RTLD_NEXT, "openat");
    real_openat64 = dlsym(RTLD_NEXT, "openat64");
}

/* The journal fd of this process, opened on first use after the variable is set (or -1). */
static int journal(void) {
    pid_t pid = getpid();
    if (journal_pid == pid) return journal_fd;
    const char *path = getenv("TIDELOG_POWERLOSS_JOURNAL");
    if (path == NULL || path[0] == 0) return -1;
    pthread_mutex_lock(&journal_lock);
    if (journal_pid != pid) {
        pthread_once(&resolved, resolve);  /* the real open: ours would recurse here */
        journal_fd = real_open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        journal_pid = pid;
    }
    pthread_mutex_unlock(&journal_lock);
    return journal_fd;
}

/* A regular file other than the journal: fills *st, returns 1. */
static int tracked(int fd, struct stat *st) {
    int jfd = journal();
    if (jfd < 0 || fd == jfd) return 0;
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) return 0;
    return 1;
}

static void emit(const char *line, int length) {
    int saved = errno;
    if (length > 0) real_write(journal_fd, line, (size_t)length);
    errno = saved;
}

static void note_write(int fd, long long offset, size_t length, int positional) {
    struct stat st;
    if (length == 0 || !tracked(fd, &st)) return;
    if (!positional) {
        int flags = fcntl(fd, F_GETFL);
        if (flags >= 0 && (flags & O_APPEND)) offset = (long long)st.st_size;
        else offset = (long long)lseek(fd, 0, SEEK_CUR);
    }
    char line[160];
    int n = snprintf(line, sizeof line, "W %llu %llu %lld %zu %lld\n",
                     (unsigned long long)st.st_dev, (unsigned long long)st.st_ino,
                     offset, length, (long long)st.st_size);
    emit(line, n);
}

static void note_truncate(int fd, long long size) {
    struct stat st;
    if (!tracked(fd, &st)) return;
    char line[160];
    int n = snprintf(line, sizeof line, "T %llu %llu %lld %lld\n",
                     (unsigned long long)st.st_dev, (unsigned long long)st.st_ino,
                     size, (long long)st.st_size);
    emit(line, n);
}

static void note_sync(int fd) {
    struct stat st;
    int jfd = journal();
    if (jfd < 0 || fd == jfd || fstat(fd, &st) != 0) return;
    char line[160];
    int n = 0;
    if (S_ISREG(st.st_mode))
        n = snprintf(line, sizeof line, "S %llu %llu %lld\n",
                     (unsigned long long)st.st_dev, (unsigned long long)st.st_ino,
                     (long long)st.st_size);
    else if (S_ISDIR(st.st_mode))
        n = snprintf(line, sizeof line, "D %llu %llu\n",
                     (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
    if (n > 0) emit(line, n);
}

/* Before an O_CREAT open: did the name exist? After it: a C line for a new regular file. */
static int existed(int dirfd, const char *path, int flags) {
    struct stat st;
    if (!(flags & O_CREAT) || journal() < 0) return 1;
    return fstatat(dirfd, path, &st, 0) == 0;
}

static void note_create(int dirfd, const char *path, int fd) {
    struct stat st, dir;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return;
    char copy[4096];
    snprintf(copy, sizeof copy, "%s", path);
    if (fstatat(dirfd, dirname(copy), &dir, 0) != 0) return;
    char line[200];
    int n = snprintf(line, sizeof line, "C %llu %llu %llu %llu\n",
                     (unsigned long long)st.st_dev, (unsigned long long)st.st_ino,
                     (unsigned long long)dir.st_dev, (unsigned long long)dir.st_ino);
    emit(line, n);
}

#define OPEN_BODY(call, dirfd)                                         \
    pthread_once(&resolved, resolve);                                  \
    mode_t mode = 0;                                                   \
    if (flags & (O_CREAT | O_TMPFILE)) {                               \
        va_list args;                                                  \
        va_start(args, flags);                                         \
        mode = (mode_t)va_arg(args, int);                              \
        va_end(args);                                                  \
    }                                                                  \
    int had = existed(dirfd, path, flags);                             \
    int fd = call;                                                     \
    if (!had) note_create(dirfd, path, fd);                            \
    return fd;

int open(const char *path, int flags, ...) { OPEN_BODY(real_open(path, flags, mode), AT_FDCWD) }
int open64(const char *path, int flags, ...) {
    OPEN_BODY(real_open64(path, flags, mode), AT_FDCWD)
}
int openat(int dirfd, const char *path, int flags, ...) {
    OPEN_BODY(real_openat(dirfd, path, flags, mode), dirfd)
}
int openat64(int dirfd, const char *path, int flags, ...) {
    OPEN_BODY(real_openat64(dirfd, path, flags, mode), dirfd)
}

static size_t iov_total(const struct iovec *iov, int count) {
    size_t total = 0;
    for (int i = 0; i < count; i++) total += iov[i].iov_len;
    return total;
}

ssize_t write(int fd, const void *buf, size_t count) {
    pthread_once(&resolved, resolve);
    note_write(fd, 0, count, 0);
    return real_write(fd, buf, count);
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset) {
    pthread_once(&resolved, resolve);
    note_write(fd, (long long)offset, count, 1);
    return real_pwrite(fd, buf, count, offset);
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off_t offset) {
    pthread_once(&resolved, resolve);
    note_write(fd, (long long)offset, count, 1);
    return real_pwrite64(fd, buf, count, offset);
}

ssize_t writev(int fd, const struct iovec *iov, int count) {
    pthread_once(&resolved, resolve);
    note_write(fd, 0, iov_total(iov, count), 0);
    return real_writev(fd, iov, count);
}

ssize_t pwritev(int fd, const struct iovec *iov, int count, off_t offset) {
    pthread_once(&resolved, resolve);
    note_write(fd, (long long)offset, iov_total(iov, count), 1);
    return real_pwritev(fd, iov, count, offset);
}

ssize_t pwritev64(int fd, const struct iovec *iov, int count, off_t offset) {
    pthread_once(&resolved, resolve);
    note_write(fd, (long long)offset, iov_total(iov, count), 1);
    return real_pwritev64(fd, iov, count, offset);
}

int ftruncate(int fd, off_t length) {
    pthread_once(&resolved, resolve);
    note_truncate(fd, (long long)length);
    return real_ftruncate(fd, length);
}

int ftruncate64(int fd, off_t length) {
    pthread_once(&resolved, resolve);
    note_truncate(fd, (long long)length);
    return real_ftruncate64(fd, length);
}

int fsync(int fd) {
    pthread_once(&resolved, resolve);
    int result = real_fsync(fd);
    if (result == 0) note_sync(fd);
    return result;
}

int fdatasync(int fd) {
    pthread_once(&resolved, resolve);
    int result = real_fdatasync(fd);
    if (result == 0) note_sync(fd);
    return result;
}
"""


def build_shim(directory: Path) -> Path:
    """Compile the shim into `directory` (reused when the source did not change)."""
    gcc = shutil.which("gcc")
    if gcc is None:
        raise RuntimeError("gcc not found: it is needed to build the power-loss shim")
    directory.mkdir(parents=True, exist_ok=True)
    source = directory / "powerloss_shim.c"
    library = directory / "libpowerloss_shim.so"
    if library.exists() and source.exists() and source.read_text() == SHIM_SOURCE:
        return library
    source.write_text(SHIM_SOURCE)
    tmp = directory / f"libpowerloss_shim.so.{id(source)}.tmp"
    subprocess.run(
        [gcc, "-shared", "-fPIC", "-O1", "-Wall", "-o", str(tmp), str(source), "-ldl",
         "-lpthread"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    tmp.replace(library)
    return library
