"""Admin-test helpers on top of the shared `broker` fixtures in tests/conftest.py."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

TIDELOG = str(Path(sys.executable).with_name("tidelog"))


_QUIET = logging.getLogger("tests.admin.librdkafka")  # clients outlive their module's broker
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False


def make_admin(bootstrap: str) -> AdminClient:
    return AdminClient(
        {"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000, "logger": _QUIET}
    )


@pytest.fixture
def admin(broker: Any) -> AdminClient:
    return make_admin(broker.bootstrap)


def error_name(future: object) -> str:
    """The Kafka error name a confluent-kafka admin future failed with ('' if it succeeded)."""
    try:
        future.result(timeout=15)  # type: ignore[attr-defined]
    except KafkaException as error:
        return str(error.args[0].name())
    return ""
