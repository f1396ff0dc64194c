"""Apache Kafka beside Tidelog in tests: every test gets Kafka through `scripts/kafka` only.

Import it as a plain module (tests/ is on sys.path through tests/conftest.py):

    import kafka_peer

    @pytest.fixture(scope="module")
    def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[kafka_peer.KafkaPeer]:
        with kafka_peer.running_kafka(tmp_path_factory.mktemp("kafka")) as peer:
            yield peer            # peer.bootstrap == "127.0.0.1:PORT"

- `running_kafka(dir, brokers=1, settings={...})`: `scripts/kafka start` on free ports (brokers
  PORT.., controllers PORT+n..), yields a `KafkaPeer`, stops it by PID (`scripts/kafka stop`).
- `run_tool("kafka-topics", "--bootstrap-server", b, "--list")`: one of Kafka's CLI tools.
- `classpath()`: Kafka's jars (`LIB/*`); `compile_java(dir)`: javac the `*.java` in dir once per
  content hash into the peer cache and return the class directory; `run_java(classes, Main, ...)`.

Failures to fetch or start Kafka fail the test (never skip): CI must run these.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import random
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "kafka"
READY_PREFIX = "kafka ready on "
KAFKA_VERSION = "4.3.1"


@dataclass
class KafkaPeer:
    directory: Path
    port: int
    brokers: int
    bootstrap: str  # "127.0.0.1:PORT" (3 brokers: the three, comma-separated)

    @property
    def ports(self) -> list[int]:
        return [self.port + i for i in range(self.brokers)]

    def log_path(self, node: int = 1) -> Path:
        return self.directory / f"node-{node}" / "kafka.log"

    def data_dir(self, node: int = 1) -> Path:
        return self.directory / f"node-{node}" / "data"

    def log_text(self, node: int = 1) -> str:
        path = self.log_path(node)
        return path.read_text("utf-8", "replace") if path.exists() else ""

    def stop(self) -> None:
        _script("stop", "--dir", str(self.directory), timeout=120)


def _script(*args: str, timeout: float = 600) -> str:
    result = subprocess.run(
        [str(SCRIPT), *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if result.returncode != 0:
        pytest.fail(
            f"scripts/kafka {' '.join(args)} failed ({result.returncode}):\n"
            f"{result.stdout}\n{result.stderr}"
        )
    return result.stdout


def _ports_free(first: int, count: int) -> bool:
    for port in range(first, first + count):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def free_port_range(count: int) -> int:
    """A first port of `count` consecutive free ports, below Linux's ephemeral range (32768+)
    so that no outgoing connection takes one before Kafka binds it."""
    rng = random.Random()
    for _ in range(200):
        first = rng.randrange(20000, 32000 - count)
        if _ports_free(first, count):
            return first
    raise RuntimeError(f"no {count} consecutive free ports found")


def start_kafka(
    directory: Path,
    *,
    brokers: int = 1,
    settings: Mapping[str, str] | None = None,
    timeout_s: float = 180,
) -> KafkaPeer:
    """`scripts/kafka start` in `directory` on free ports; returns once it answers Metadata."""
    last_error = ""
    for _ in range(3):  # a port found free can be taken before the JVM binds it
        port = free_port_range(2 * brokers)
        args = [
            str(SCRIPT),
            "start",
            "--dir",
            str(directory),
            "--port",
            str(port),
            "--brokers",
            str(brokers),
            "--timeout",
            str(timeout_s),
        ]
        for key, value in (settings or {}).items():
            args += ["--set", f"{key}={value}"]
        result = subprocess.run(
            args, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout_s + 600
        )
        lines = [line for line in result.stdout.splitlines() if line.startswith(READY_PREFIX)]
        if result.returncode == 0 and lines:
            bootstrap = lines[-1][len(READY_PREFIX) :].strip()
            return KafkaPeer(directory, port, brokers, bootstrap)
        last_error = f"({result.returncode})\n{result.stdout}\n{result.stderr}"
        if "already in use" not in result.stderr and "Address already in use" not in last_error:
            break
    pytest.fail(f"scripts/kafka start failed {last_error}")


@contextmanager
def running_kafka(
    directory: Path,
    *,
    brokers: int = 1,
    settings: Mapping[str, str] | None = None,
    timeout_s: float = 180,
) -> Iterator[KafkaPeer]:
    peer = start_kafka(directory, brokers=brokers, settings=settings, timeout_s=timeout_s)
    try:
        yield peer
    finally:
        peer.stop()


# ---------------------------------------------------------------- tools and Java programs


@cache
def lib_dir() -> Path:
    """Kafka's jar directory in the peer cache (fetched on first use)."""
    return Path(_script("fetch").strip())


def classpath() -> str:
    return f"{lib_dir()}/*"


def run_tool(
    name: str,
    *args: str,
    input: str | None = None,
    timeout: float = 180,
    check: bool = True,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run `scripts/kafka tool NAME ARGS...`; with check, a non-zero exit fails the test."""
    lib_dir()  # fetch outside the tool's own timeout
    result = subprocess.run(
        [str(SCRIPT), "tool", name, *args],
        input=input,
        stdin=None if input is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **env} if env else None,
    )
    if check and result.returncode != 0:
        pytest.fail(
            f"{name} {' '.join(args)} exited {result.returncode}:\n"
            f"stdout:\n{result.stdout[-4000:]}\nstderr:\n{result.stderr[-4000:]}"
        )
    return result


def compile_java(source_dir: Path) -> Path:
    """javac every *.java in source_dir against Kafka's jars, once per content hash: returns the
    class directory (in the peer cache, beside Kafka)."""
    sources = sorted(source_dir.glob("*.java"))
    if not sources:
        raise FileNotFoundError(f"no *.java in {source_dir}")
    digest = hashlib.sha256(KAFKA_VERSION.encode())
    for source in sources:
        digest.update(source.name.encode() + b"\0" + source.read_bytes() + b"\0")
    root = lib_dir().parent.parent / "java-classes"
    target = root / digest.hexdigest()[:16]
    if (target / ".complete").is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / ".complete").is_file():
            return target
        staging = Path(tempfile.mkdtemp(prefix="javac-", dir=root))
        javac = shutil.which("javac")
        if javac is None:
            pytest.fail("javac not found: run scripts/setup (Debian openjdk-17-jdk-headless)")
        result = subprocess.run(
            [
                javac,
                "-nowarn",
                "-encoding",
                "UTF-8",
                "-cp",
                classpath(),
                "-d",
                str(staging),
                *map(str, sources),
            ],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if result.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            pytest.fail(f"javac failed:\n{result.stdout}\n{result.stderr}")
        (staging / ".complete").write_text("ok\n")
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    return target


def run_java(
    classes: Path,
    main: str,
    *args: str,
    jvm_opts: Sequence[str] = ("-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"),
    timeout: float = 240,
    check: bool = True,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a compiled test program with Kafka's jars; Kafka's own logging goes to stderr at
    WARN (the tools' log4j2 configuration)."""
    log4j = lib_dir().parent / "tools-log4j2.properties"
    java = shutil.which("java") or "java"
    command = [
        java,
        *jvm_opts,
        "-Xshare:auto",
        f"-Dlog4j2.configurationFile={log4j}",
        "-cp",
        f"{classes}:{classpath()}",
        main,
        *args,
    ]
    result = subprocess.run(
        command,
        input=input,
        stdin=None if input is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and result.returncode != 0:
        pytest.fail(
            f"java {main} {' '.join(args)} exited {result.returncode}:\n"
            f"stdout:\n{result.stdout[-6000:]}\nstderr:\n{result.stderr[-6000:]}"
        )
    return result
