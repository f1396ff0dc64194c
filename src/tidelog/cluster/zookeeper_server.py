"""Run a standalone ZooKeeper from Debian's `zookeeper` package on loopback.

Used by the cluster tests and by `tidelog cluster up`. Blocking calls (process start, socket
probes); never call from the event loop.

Files written into `data_dir`:

- `zoo.cfg`        the server's configuration (below); rewritten on every start.
- `zookeeper.pid`  the Java process id as decimal ASCII, removed by `stop()`.
- `zookeeper.log`  the JVM's stdout and stderr (the Debian jar logs nothing by default since
                   no SLF4J binding is on the class path; errors still reach stderr).
- `version-2/`     ZooKeeper's own snapshots and transaction logs.

`zoo.cfg` keys: `tickTime` (the session-timeout unit: sessions may last 2..20 ticks),
`dataDir`, `clientPort`, `clientPortAddress=127.0.0.1` (never listen beyond loopback),
`admin.enableServer=false` (the Jetty admin server would take port 8080), and
`4lw.commands.whitelist=ruok,srvr,stat,mntr` (`ruok` is how `start()` knows the server answers).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from tidelog.errors import TidelogError

DEBIAN_ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
"""The Debian jar; its manifest's Class-Path names every dependency under /usr/share/java."""
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
LOOPBACK = "127.0.0.1"
PID_FILE_NAME = "zookeeper.pid"
# Bounds on the JVM so a test ZooKeeper stays small on a shared machine.
JVM_OPTIONS = ("-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-Djava.awt.headless=true")
_PROBE_INTERVAL_S = 0.05
_LOG_TAIL_BYTES = 2000


class ZooKeeperServerError(TidelogError):
    """The ZooKeeper process could not be started, did not answer, or could not be stopped."""


@dataclass(frozen=True, slots=True)
class ZooKeeperConfig:
    """What `zoo.cfg` says. `port` must be free on 127.0.0.1; see `free_port()`."""

    data_dir: Path
    port: int
    tick_time_ms: int = 500
    max_client_connections: int = 200

    def render(self) -> str:
        if not 0 < self.port < 65536:
            raise ZooKeeperServerError(f"invalid client port {self.port}")
        if self.tick_time_ms <= 0:
            raise ZooKeeperServerError(f"invalid tickTime {self.tick_time_ms}")
        lines = [
            f"tickTime={self.tick_time_ms}",
            f"dataDir={self.data_dir.resolve()}",
            f"clientPort={self.port}",
            f"clientPortAddress={LOOPBACK}",
            f"maxClientCnxns={self.max_client_connections}",
            "admin.enableServer=false",
            "4lw.commands.whitelist=ruok,srvr,stat,mntr",
            # Snapshots and logs are small in tests; keep only a few.
            "autopurge.snapRetainCount=3",
            "autopurge.purgeInterval=1",
        ]
        return "\n".join(lines) + "\n"


def free_port() -> int:
    """A port that was free on 127.0.0.1 a moment ago (ZooKeeper cannot report port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        port: int = probe.getsockname()[1]
        return port


def four_letter_word(port: int, word: str, timeout_s: float = 1.0) -> str:
    """Send a ZooKeeper four-letter command (`ruok`, `srvr`...) and return the whole answer."""
    if len(word) != 4 or not word.isalpha():
        raise ZooKeeperServerError(f"not a four-letter word: {word!r}")
    chunks: list[bytes] = []
    with socket.create_connection((LOOPBACK, port), timeout=timeout_s) as conn:
        conn.sendall(word.encode("ascii"))
        total = 0
        while total < 65536:  # answers are a few hundred bytes; bound the read anyway
            chunk = conn.recv(4096)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


class ZooKeeperServer:
    """One standalone ZooKeeper process. Use as a context manager or call start()/stop()."""

    def __init__(
        self,
        config: ZooKeeperConfig,
        *,
        java: str = "java",
        jar: Path = DEBIAN_ZOOKEEPER_JAR,
    ) -> None:
        self.config = config
        self._java = java
        self._jar = jar
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def connect_string(self) -> str:
        """`host:port` for kazoo (append `/chroot` to isolate users)."""
        return f"{LOOPBACK}:{self.config.port}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def pid_file(self) -> Path:
        return self.config.data_dir / PID_FILE_NAME

    @property
    def log_path(self) -> Path:
        return self.config.data_dir / "zookeeper.log"

    def is_running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self, timeout_s: float = 30.0) -> None:
        """Write zoo.cfg, launch the JVM and return once it answers `ruok` with `imok`."""
        if self.is_running():
            raise ZooKeeperServerError("ZooKeeper is already running")
        if not self._jar.is_file():
            raise ZooKeeperServerError(
                f"{self._jar} not found: install Debian's zookeeper package (scripts/setup)"
            )
        data_dir = self.config.data_dir
        data_dir.mkdir(parents=True, exist_ok=True)
        config_path = data_dir / "zoo.cfg"
        config_path.write_text(self.config.render(), "utf-8")
        command = [
            self._java,
            *JVM_OPTIONS,
            "-Dzookeeper.jmx.log4j.disable=true",
            "-cp",
            str(self._jar),
            MAIN_CLASS,
            str(config_path),
        ]
        with open(self.log_path, "ab") as log:
            try:
                # A session of its own: a Ctrl-C aimed at the test run does not hit the JVM
                # first, and stop() still signals this exact PID.
                self._process = subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            except OSError as exc:
                raise ZooKeeperServerError(f"cannot run {self._java}: {exc}") from exc
        self.pid_file.write_text(f"{self._process.pid}\n", "ascii")
        try:
            self._wait_until_serving(timeout_s)
        except ZooKeeperServerError:
            self.stop()
            raise

    def _wait_until_serving(self, timeout_s: float) -> None:
        # ZooKeeper has no ready line without a logging binding; probing the port is the
        # only signal. The deadline bounds the loop.
        deadline = time.monotonic() + timeout_s
        assert self._process is not None
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise ZooKeeperServerError(
                    f"ZooKeeper exited with status {self._process.returncode}: {self._log_tail()}"
                )
            with contextlib.suppress(OSError):  # not listening yet
                if four_letter_word(self.config.port, "ruok", timeout_s=0.5) == "imok":
                    return
            time.sleep(_PROBE_INTERVAL_S)
        raise ZooKeeperServerError(
            f"ZooKeeper did not answer on port {self.config.port} within {timeout_s}s: "
            f"{self._log_tail()}"
        )

    def _log_tail(self) -> str:
        try:
            data = self.log_path.read_bytes()
        except OSError:
            return "(no log)"
        return data[-_LOG_TAIL_BYTES:].decode("utf-8", "replace")

    def stop(self, timeout_s: float = 10.0) -> int | None:
        """SIGTERM the JVM by PID, SIGKILL it after `timeout_s`; returns its exit status."""
        process = self._process
        if process is None:
            return None
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGKILL)
                process.wait(timeout_s)
        with contextlib.suppress(FileNotFoundError):
            self.pid_file.unlink()
        self._process = None
        return process.returncode

    def __enter__(self) -> ZooKeeperServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def stop_from_pid_file(data_dir: Path, timeout_s: float = 10.0) -> bool:
    """Stop a ZooKeeper started earlier by another process (`tidelog cluster down`).

    Signals the PID in `data_dir/zookeeper.pid` only if that process still runs ZooKeeper's
    main class (a recycled PID must never be killed). Returns True if a process was stopped.
    """
    pid_file = data_dir / PID_FILE_NAME
    try:
        pid = int(pid_file.read_text("ascii").strip())
    except (OSError, ValueError):
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        cmdline = []
    if MAIN_CLASS.encode() not in cmdline:
        pid_file.unlink(missing_ok=True)
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and _running(pid):
        time.sleep(_PROBE_INTERVAL_S)
    if _running(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    pid_file.unlink(missing_ok=True)
    return True


def _running(pid: int) -> bool:
    """True while the process exists and is not a zombie awaiting its parent's wait()."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text("ascii", "replace")
    except OSError:
        return False
    # Field 3 (after the parenthesised command name, which may hold spaces) is the state.
    return stat.rpartition(")")[2].split()[:1] != ["Z"]
