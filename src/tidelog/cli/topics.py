"""`tidelog topics create|list|describe|delete`: topic administration over the Kafka admin API.

Every command talks to the broker only through the Kafka protocol (confluent-kafka's
AdminClient), so it works against Tidelog and against any Kafka cluster alike. No business
logic lives here: the broker validates names, partition counts and configs; this module parses
arguments, calls, and prints. Errors are one line on stderr and a non-zero exit status:
1 for a refused or failed operation, 2 for bad arguments (click's convention).
"""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from typing import Any, NoReturn

import click
from confluent_kafka import KafkaError, KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    ConfigSource,
    NewTopic,
    OffsetSpec,
    ResourceType,
)
from rich.console import Console
from rich.table import Table

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
DEFAULT_TIMEOUT_S = 10.0

_bootstrap_option = click.option(
    "--bootstrap",
    "--bootstrap-server",
    "-b",
    "bootstrap",
    default=DEFAULT_BOOTSTRAP,
    envvar="TIDELOG_BOOTSTRAP_SERVER",
    show_default=True,
    metavar="HOST:PORT[,HOST:PORT...]",
    help="Broker(s) to contact; any Kafka-compatible broker works.",
)
_timeout_option = click.option(
    "--timeout",
    default=DEFAULT_TIMEOUT_S,
    show_default=True,
    type=click.FloatRange(min=0.1, max=600),
    metavar="SECONDS",
    help="Give up on the broker after this long.",
)


class CommandFailed(click.ClickException):
    """One-line failure: `error: <message>` on stderr, exit status 1."""

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


def _fail(message: str) -> NoReturn:
    raise CommandFailed(message)


def _silent_logger() -> logging.Logger:
    # librdkafka logs every refused connection; the command reports failures itself, once.
    logger = logging.getLogger("tidelog.cli.librdkafka")
    logger.addHandler(logging.NullHandler())
    logger.propagate = False
    return logger


def _addresses(bootstrap: str) -> list[tuple[str, int]]:
    addresses = []
    for item in bootstrap.split(","):
        host, separator, port = item.strip().rpartition(":")
        if not separator or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise click.BadParameter(f"expected HOST:PORT, got {item!r}", param_hint="--bootstrap")
        addresses.append((host.strip("[]"), int(port)))
    return addresses


def _require_reachable(bootstrap: str, timeout_s: float) -> None:
    """Fail fast, naming the address, when nothing listens (librdkafka would only time out)."""
    errors = []
    for host, port in _addresses(bootstrap):
        try:
            with socket.create_connection((host, port), timeout=min(timeout_s, 3.0)):
                return
        except OSError as error:
            errors.append(f"{host}:{port} ({error.strerror or error})")
    _fail(
        f"no broker reachable at {', '.join(errors)}; "
        "start one with `tidelog serve` or pass --bootstrap HOST:PORT"
    )


def _admin(bootstrap: str, timeout_s: float) -> AdminClient:
    _require_reachable(bootstrap, timeout_s)
    timeout_ms = int(timeout_s * 1000)
    settings: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "client.id": "tidelog-cli",
        "socket.timeout.ms": max(timeout_ms, 10),
        "socket.connection.setup.timeout.ms": max(timeout_ms, 1000),
        "allow.auto.create.topics": False,
        "logger": _silent_logger(),
    }
    return AdminClient(settings)


def _kafka_error(error: BaseException) -> KafkaError | None:
    if isinstance(error, KafkaException) and error.args and isinstance(error.args[0], KafkaError):
        return error.args[0]
    return None


def _topic_change_done(
    future: Future[None], name: str, action: str, timeout: float, tolerated: int | None
) -> bool:
    """Wait for a create/delete of topic `name`: True once done, False when it failed with
    the `tolerated` error code (--if-not-exists, --if-exists); any other failure exits."""
    try:
        future.result(timeout=timeout)
    except KafkaException as error:
        kafka_error = _kafka_error(error)
        if tolerated is not None and kafka_error is not None and kafka_error.code() == tolerated:
            return False
        _fail(f"cannot {action} topic {name!r}: {_describe_error(error)}")
    except TimeoutError:
        _fail(f"cannot {action} topic {name!r}: no answer from the broker within {timeout:g} s")
    return True


def _describe_error(error: BaseException) -> str:
    kafka_error = _kafka_error(error)
    if kafka_error is None:
        return str(error)
    text = kafka_error.str()
    return f"{kafka_error.name()}: {text}" if kafka_error.name() not in text else text


def _result(future: Future[Any], timeout_s: float, what: str) -> Any:
    try:
        return future.result(timeout=timeout_s)
    except KafkaException as error:
        _fail(f"{what}: {_describe_error(error)}")
    except TimeoutError:
        _fail(f"{what}: no answer from the broker within {timeout_s:g} s")


def _parse_configs(
    ctx: click.Context, param: click.Parameter, values: Iterable[str]
) -> dict[str, str]:
    configs: dict[str, str] = {}
    for item in values:
        name, separator, value = item.partition("=")
        if not separator or not name.strip():
            raise click.BadParameter(f"expected NAME=VALUE, got {item!r}", ctx, param)
        configs[name.strip()] = value
    return configs


@click.group("topics")
def topics() -> None:
    """Create, list, describe and delete topics (Kafka admin API; works against any Kafka)."""


@topics.command("create")
@click.argument("name")
@click.option(
    "--partitions",
    "-p",
    type=click.IntRange(min=1),
    default=None,
    help="Number of partitions (default: the broker's num.partitions).",
)
@click.option(
    "--replication-factor",
    "-r",
    type=click.IntRange(min=1),
    default=None,
    help="Replicas per partition (default: the broker's default.replication.factor).",
)
@click.option(
    "--config",
    "-c",
    "configs",
    multiple=True,
    callback=_parse_configs,
    metavar="NAME=VALUE",
    help="Topic config override, e.g. retention.ms=3600000; repeat for more.",
)
@click.option("--if-not-exists", is_flag=True, help="Succeed quietly if the topic exists.")
@click.option("--validate-only", is_flag=True, help="Ask the broker to check, create nothing.")
@_bootstrap_option
@_timeout_option
def create(
    name: str,
    partitions: int | None,
    replication_factor: int | None,
    configs: dict[str, str],
    if_not_exists: bool,
    validate_only: bool,
    bootstrap: str,
    timeout: float,
) -> None:
    """Create topic NAME.

    \b
    Examples:
      tidelog topics create orders --partitions 6
      tidelog topics create audit -p 1 -c retention.ms=-1 -c cleanup.policy=compact
    """
    admin = _admin(bootstrap, timeout)
    new_topic = NewTopic(
        name,
        num_partitions=partitions if partitions is not None else -1,
        replication_factor=replication_factor if replication_factor is not None else -1,
        config=configs,
    )
    futures = admin.create_topics(
        [new_topic],
        operation_timeout=timeout,
        request_timeout=timeout,
        validate_only=validate_only,
    )
    tolerated = KafkaError.TOPIC_ALREADY_EXISTS if if_not_exists else None
    if not _topic_change_done(futures[name], name, "create", timeout, tolerated):
        click.echo(f"topic {name!r} already exists")
        return
    verb = "would be created (validate only)" if validate_only else "created"
    click.echo(f"topic {name!r} {verb}")


def _topic_rows(admin: AdminClient, timeout: float) -> list[dict[str, Any]]:
    try:
        metadata = admin.list_topics(timeout=timeout)
    except KafkaException as error:
        _fail(f"cannot list topics: {_describe_error(error)}")
    rows = []
    for topic in sorted(metadata.topics.values(), key=lambda item: item.topic or ""):
        replicas = [len(part.replicas) for part in topic.partitions.values()]
        rows.append(
            {
                "name": topic.topic,
                "partitions": len(topic.partitions),
                "replication_factor": max(replicas, default=0),
            }
        )
    return rows


@topics.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array instead of a table.")
@click.option("--exclude-internal", is_flag=True, help="Hide internal topics (names with __).")
@_bootstrap_option
@_timeout_option
def list_topics(as_json: bool, exclude_internal: bool, bootstrap: str, timeout: float) -> None:
    """List every topic with its partition count and replication factor."""
    rows = _topic_rows(_admin(bootstrap, timeout), timeout)
    if exclude_internal:
        rows = [row for row in rows if not row["name"].startswith("__")]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    table = Table("TOPIC", "PARTITIONS", "REPLICATION FACTOR", box=None, header_style="bold")
    for row in rows:
        table.add_row(row["name"], str(row["partitions"]), str(row["replication_factor"]))
    Console().print(table)


def _offsets(
    admin: AdminClient,
    name: str,
    partitions: Iterable[int],
    spec: Callable[[], Any],
    timeout: float,
) -> dict[int, int]:
    request = {TopicPartition(name, partition): spec() for partition in partitions}
    if not request:
        return {}
    futures = admin.list_offsets(request, request_timeout=timeout)
    return {
        tp.partition: _result(
            future, timeout, f"cannot list offsets of {tp.topic}-{tp.partition}"
        ).offset
        for tp, future in futures.items()
    }


def _topic_overrides(admin: AdminClient, name: str, timeout: float) -> dict[str, str]:
    resource = ConfigResource(ResourceType.TOPIC, name)
    futures = admin.describe_configs([resource], request_timeout=timeout)
    entries: Mapping[str, Any] = _result(
        futures[resource], timeout, f"cannot describe configs of {name!r}"
    )
    return {
        entry.name: entry.value
        for entry in sorted(entries.values(), key=lambda item: item.name)
        if entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    }


def describe_topic(admin: AdminClient, name: str, timeout: float) -> dict[str, Any]:
    """Everything `topics describe` prints, as plain data (also the --json document)."""
    futures = admin.describe_topics(TopicCollection([name]), request_timeout=timeout)
    description = _result(futures[name], timeout, f"cannot describe topic {name!r}")
    ids = [part.id for part in description.partitions]
    earliest = _offsets(admin, name, ids, OffsetSpec.earliest, timeout)
    latest = _offsets(admin, name, ids, OffsetSpec.latest, timeout)
    return {
        "name": description.name,
        "topic_id": str(description.topic_id) if description.topic_id is not None else None,
        "internal": bool(description.is_internal),
        "partitions": [
            {
                "partition": part.id,
                "leader": part.leader.id if part.leader is not None else None,
                "replicas": [node.id for node in part.replicas],
                "isr": [node.id for node in part.isr],
                "log_start_offset": earliest.get(part.id),
                "log_end_offset": latest.get(part.id),
            }
            for part in sorted(description.partitions, key=lambda item: item.id)
        ],
        "configs": _topic_overrides(admin, name, timeout),
    }


@topics.command("describe")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON document instead of tables.")
@_bootstrap_option
@_timeout_option
def describe(name: str, as_json: bool, bootstrap: str, timeout: float) -> None:
    """Show topic NAME: partitions, leader, replicas, ISR, offsets and config overrides."""
    info = describe_topic(_admin(bootstrap, timeout), name, timeout)
    if as_json:
        click.echo(json.dumps(info, indent=2))
        return
    console = Console()
    internal = " (internal)" if info["internal"] else ""
    console.print(
        f"[bold]{info['name']}[/bold]{internal}  id {info['topic_id']}  "
        f"partitions {len(info['partitions'])}",
        highlight=False,
    )
    table = Table(
        "PARTITION",
        "LEADER",
        "REPLICAS",
        "ISR",
        "LOG START",
        "LOG END",
        box=None,
        header_style="bold",
    )
    for part in info["partitions"]:
        table.add_row(
            str(part["partition"]),
            str(part["leader"]),
            ",".join(map(str, part["replicas"])),
            ",".join(map(str, part["isr"])),
            str(part["log_start_offset"]),
            str(part["log_end_offset"]),
        )
    console.print(table)
    if info["configs"]:
        configs = Table("CONFIG", "VALUE", box=None, header_style="bold")
        for config_name, value in info["configs"].items():
            configs.add_row(config_name, value)
        console.print(configs)
    else:
        console.print("configs: broker defaults (no overrides)")


@topics.command("delete")
@click.argument("name")
@click.option("--if-exists", is_flag=True, help="Succeed quietly if there is no such topic.")
@_bootstrap_option
@_timeout_option
def delete(name: str, if_exists: bool, bootstrap: str, timeout: float) -> None:
    """Delete topic NAME and all of its data."""
    admin = _admin(bootstrap, timeout)
    futures = admin.delete_topics([name], operation_timeout=timeout, request_timeout=timeout)
    tolerated = KafkaError.UNKNOWN_TOPIC_OR_PART if if_exists else None
    if not _topic_change_done(futures[name], name, "delete", timeout, tolerated):
        click.echo(f"topic {name!r} does not exist")
        return
    click.echo(f"topic {name!r} deleted")
