"""Shared plumbing for the console tools: bootstrap option, clear errors, confluent-kafka configs.

The tools talk to the broker only through the Kafka protocol (confluent-kafka / librdkafka), so
they work against any Kafka. librdkafka retries an unreachable broker forever and logs every
attempt; the tools instead check the address up front and fail with one line naming it.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
CONNECT_TIMEOUT_S = 3.0
METADATA_TIMEOUT_S = 10.0

F = TypeVar("F", bound=Callable[..., Any])

stderr = Console(stderr=True, highlight=False)


class ToolError(click.ClickException):
    """One-line failure: click prints `Error: <message>` on stderr and exits with status 1."""


def bootstrap_option(func: F) -> F:
    """`-b/--bootstrap-server HOST:PORT[,HOST:PORT...]` (env TIDELOG_BOOTSTRAP_SERVER)."""
    return click.option(
        "-b",
        "--bootstrap-server",
        "--bootstrap",
        "bootstrap",
        default=DEFAULT_BOOTSTRAP,
        envvar="TIDELOG_BOOTSTRAP_SERVER",
        show_default=True,
        help="Broker address(es), comma-separated.",
    )(func)


def _split_address(address: str) -> tuple[str, int]:
    host, sep, port = address.strip().rpartition(":")
    if not sep or not host or not port.isdigit():
        raise click.BadParameter(f"{address!r} is not HOST:PORT", param_hint="'--bootstrap-server'")
    return host.strip("[]"), int(port)


def check_reachable(bootstrap: str) -> None:
    """Fail fast with the address and a hint when no bootstrap broker accepts a TCP connection."""
    reasons: list[str] = []
    for address in bootstrap.split(","):
        host, port = _split_address(address)
        try:
            with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S):
                return
        except OSError as exc:
            reasons.append(f"{host}:{port}: {exc.strerror or exc}")
    raise ToolError(
        f"cannot reach a broker at {bootstrap} ({'; '.join(reasons)}); "
        "is `tidelog serve` running there?"
    )


def base_config(bootstrap: str, **extra: Any) -> dict[str, Any]:
    """librdkafka settings shared by every tool; its own logging is kept to real errors."""
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "client.id": f"tidelog-cli-{os.getpid()}",
        "log_level": 3,
    }
    config.update(extra)
    return config


def parse_properties(pairs: tuple[str, ...], option: str) -> dict[str, str]:
    """`key=value` strings -> dict; a pair without `=` is a usage error naming the option."""
    result: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{pair!r} is not key=value", param_hint=f"'{option}'")
        result[key.strip()] = value
    return result


def find_partitions(bootstrap: str, topic: str) -> list[int] | None:
    """Partition ids of `topic`, or None when it does not exist.

    Asks through a consumer handle: librdkafka sends a consumer's topic Metadata request with
    allow_auto_topic_creation=false, so looking a topic up never creates it.
    """
    from confluent_kafka import Consumer, KafkaException

    consumer = Consumer(base_config(bootstrap, **{"group.id": "tidelog-cli-metadata"}))
    try:
        metadata = consumer.list_topics(topic=topic, timeout=METADATA_TIMEOUT_S)
    except KafkaException as exc:
        raise ToolError(
            f"metadata request to {bootstrap} failed: {kafka_error_text(exc.args[0])}"
        ) from None
    finally:
        consumer.close()
    info = metadata.topics.get(topic)
    if info is None or info.error is not None or not info.partitions:
        return None
    return sorted(info.partitions)


def topic_partitions(bootstrap: str, topic: str) -> list[int]:
    """Partition ids of `topic`; an unknown topic is a one-line ToolError."""
    partitions = find_partitions(bootstrap, topic)
    if partitions is None:
        raise ToolError(f"topic {topic!r} does not exist (see `tidelog topics list`)")
    return partitions


def kafka_error_text(error: Any) -> str:
    """A confluent_kafka.KafkaError as `NAME: reason`."""
    name = error.name() if hasattr(error, "name") else ""
    text = error.str() if hasattr(error, "str") else str(error)
    return f"{name}: {text}" if name and name not in text else text


# Kafka client property -> librdkafka's name, where they differ (the rest pass unchanged).
_JAVA_TO_LIBRDKAFKA = {
    "ssl.truststore.location": "ssl.ca.location",
    "ssl.keystore.location": "ssl.certificate.location",
    "ssl.key.password": "ssl.key.password",
}
# Java-only properties with no librdkafka meaning here (PEM types are librdkafka's default).
_JAVA_ONLY = {"ssl.truststore.type", "ssl.keystore.type", "ssl.endpoint.identification.algorithm",
              "sasl.login.callback.handler.class"}


def command_config(path: str | None) -> dict[str, str]:
    """`--command-config FILE`: Kafka client properties (as Kafka's tools take them) ->
    librdkafka settings. `sasl.jaas.config`'s username and password become sasl.username and
    sasl.password; a PEM key store file serves as both certificate and key."""
    if path is None:
        return {}
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as error:
        raise ToolError(f"cannot read {path}: {error.strerror}") from None
    properties: dict[str, str] = {}
    for line in lines:
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, separator, value = line.partition("=")
        if not separator:
            raise ToolError(f"{path}: {line!r} is not key=value")
        properties[key.strip()] = value.strip()
    config: dict[str, str] = {}
    for key, value in properties.items():
        if key == "sasl.jaas.config":
            for field_name in ("username", "password"):
                match = re.search(rf'{field_name}\s*=\s*"([^"]*)"', value)
                if match:
                    config[f"sasl.{field_name}"] = match.group(1)
        elif key in _JAVA_TO_LIBRDKAFKA:
            config[_JAVA_TO_LIBRDKAFKA[key]] = value
            if key == "ssl.keystore.location":
                config["ssl.key.location"] = value
        elif key not in _JAVA_ONLY:
            config[key] = value
    return config
