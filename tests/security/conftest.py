"""Brokers with several listeners, TLS material from `tidelog certs`, users from
`tidelog users add`: everything made by the commands users run (docs/security.md)."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from conftest import BrokerFactory, BrokerProcess

PASSWORD = "alice-secret"
USERS = {"alice": ("SCRAM-SHA-256", PASSWORD), "bob512": ("SCRAM-SHA-512", "bob-secret")}
_LISTENER_LINE = re.compile(r"listener (\S+) \((\S+)\) on (\S+):(\d+)")


def tidelog(*args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "tidelog.cli.main", *args],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@dataclass(frozen=True)
class Certs:
    directory: Path

    def __getitem__(self, name: str) -> str:
        return str(self.directory / name)


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    directory = tmp_path_factory.mktemp("certs")
    tidelog("certs", "--dir", str(directory), "--client-cn", "Alice")
    return Certs(directory)


@pytest.fixture(scope="session")
def other_certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    """A second, unrelated CA with its own client: 'the wrong CA'."""
    directory = tmp_path_factory.mktemp("other-certs")
    tidelog("certs", "--dir", str(directory), "--client-cn", "Mallory")
    return Certs(directory)


@dataclass
class SecureBroker:
    process: BrokerProcess
    ports: dict[str, int]  # listener name -> bound port

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def log_text(self) -> str:
        return self.process.log_text()

    def wait_for_log(self, pattern: str, timeout_s: float = 20.0) -> re.Match[str]:
        """The first log line matching `pattern`, waiting until it is written."""
        deadline = time.monotonic() + timeout_s
        compiled = re.compile(pattern)
        while True:
            match = compiled.search(self.log_text())
            if match is not None:
                return match
            if time.monotonic() > deadline:
                tail = self.log_text()[-3000:]
                raise AssertionError(f"no log line matching {pattern!r}:\n{tail}")
            time.sleep(0.05)


def tls_settings(certs: Certs, client_auth: str = "none") -> dict[str, str]:
    return {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": certs["broker.pem"],
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": certs["ca.pem"],
        "ssl.client.auth": client_auth,
    }


StartSecure = Callable[..., SecureBroker]


@pytest.fixture
def secure_broker(broker_factory: BrokerFactory, tmp_path: Path) -> StartSecure:
    """`secure_broker(listeners, settings)`: a broker whose listeners are all on port 0, with
    USERS added offline first; returns the bound port of every listener."""

    def start(listeners: list[str], settings: Mapping[str, str] | None = None,
              users: Mapping[str, tuple[str, str]] = USERS,
              data_dir: Path | None = None) -> SecureBroker:
        """`data_dir`: restart on an earlier broker's data directory."""
        data_dir = data_dir or tmp_path / f"secure-{len(broker_factory.started)}"
        for name, (mechanism, password) in users.items():
            tidelog("users", "add", name, "--password", password, "--mechanism", mechanism,
                    "--data-dir", str(data_dir))
        all_settings = {
            "listeners": ",".join(f"{name}://127.0.0.1:0" for name in listeners),
            "connection.failed.authentication.delay.ms": "100",
            **(settings or {}),
        }
        process = broker_factory(data_dir, settings=all_settings, listen=None)
        # The listener lines are logged before the ready line is printed.
        ports = {m.group(1): int(m.group(4)) for m in _LISTENER_LINE.finditer(process.log_text())}
        assert set(ports) == set(listeners), process.log_text()
        assert process.port == ports[listeners[0]]  # the ready line names the first listener
        return SecureBroker(process, ports)

    return start
