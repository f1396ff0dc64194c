"""Fixtures for the console-tool and metrics tests: one broker per module with its metrics
endpoint on a free port, and a runner for `tidelog ...` subprocesses."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from conftest import BrokerFactory, BrokerProcess

from .helpers import free_port


@dataclass
class ToolBroker:
    process: BrokerProcess
    metrics_port: int

    @property
    def bootstrap(self) -> str:
        return self.process.bootstrap

    def get(self, path: str) -> tuple[int, str]:
        url = f"http://127.0.0.1:{self.metrics_port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return int(response.status), response.read().decode()
        except urllib.error.HTTPError as error:
            return int(error.code), error.read().decode()


@pytest.fixture(scope="module")
def tool_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ToolBroker]:
    factory = BrokerFactory(tmp_path_factory.mktemp("tools-broker"))
    port = free_port()
    try:
        process = factory(extra_args=["--metrics", f"127.0.0.1:{port}"])
        yield ToolBroker(process, port)
    finally:
        bad = factory.stop_all()
    if bad:
        pytest.fail("broker logged a traceback:\n" + "\n".join(bad))
