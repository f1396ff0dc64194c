"""`tidelog config describe|set`: topic and broker configs over DescribeConfigs and
IncrementalAlterConfigs (AdminClient), like kafka-configs.

`describe` shows overrides only (what `kafka-configs --describe` shows); `--all` adds defaults
with their source. `set` takes `key=value` pairs (SET) and `--delete key` (DELETE, back to the
default) in one IncrementalAlterConfigs request.
"""

from __future__ import annotations

from typing import Any

import click
from rich.console import Console
from rich.table import Table

from tidelog.cli.client import (
    ToolError,
    base_config,
    bootstrap_option,
    check_reachable,
    parse_properties,
    stderr,
    topic_partitions,
)

REQUEST_TIMEOUT_S = 15.0
out = Console(highlight=False)


def _resource(topic: str | None, broker: str | None) -> Any:
    from confluent_kafka.admin import ConfigResource, ResourceType

    if (topic is None) == (broker is None):
        raise click.UsageError("give exactly one of --topic NAME or --broker ID")
    if topic is not None:
        return ConfigResource(ResourceType.TOPIC, topic)
    assert broker is not None
    if not broker.isdigit():
        raise click.BadParameter(f"{broker!r} is not a broker id", param_hint="'--broker'")
    return ConfigResource(ResourceType.BROKER, broker)


def _label(topic: str | None, broker: str | None) -> str:
    return f"topic {topic}" if topic is not None else f"broker {broker}"


def _admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    check_reachable(bootstrap)
    return AdminClient(base_config(bootstrap))


def _result(futures: dict[Any, Any], what: str) -> Any:
    from confluent_kafka import KafkaException

    (future,) = futures.values()
    try:
        return future.result(timeout=REQUEST_TIMEOUT_S)
    except KafkaException as exc:
        error = exc.args[0]
        text = error.str() if hasattr(error, "str") else str(error)
        raise ToolError(f"cannot {what}: {text}") from None


def _source_name(source: Any) -> str:
    """ConfigSource (an enum or its int) -> e.g. `dynamic_topic`, `default`."""
    from confluent_kafka.admin import ConfigSource

    try:
        name = ConfigSource(source).name
    except ValueError:
        return str(source)
    return name.removesuffix("_CONFIG").lower()


def _check_topic(bootstrap: str, topic: str | None) -> None:
    if topic is not None:
        topic_partitions(bootstrap, topic)  # unknown topic -> one clear line


@click.group("config")
def config_group() -> None:
    """Describe or change topic and broker configs."""


@config_group.command("describe")
@bootstrap_option
@click.option("--topic", "-t", help="Topic name.")
@click.option("--broker", help="Broker id (e.g. 0).")
@click.option("--all", "show_all", is_flag=True, help="Include defaults, not only overrides.")
def describe_command(bootstrap: str, topic: str | None, broker: str | None, show_all: bool) -> None:
    """Show the configs of a topic or a broker."""
    resource = _resource(topic, broker)
    admin = _admin(bootstrap)
    _check_topic(bootstrap, topic)
    entries = _result(admin.describe_configs([resource]), f"describe {_label(topic, broker)}")
    table = Table(title=f"{'topic' if topic else 'broker'} {topic or broker}")
    table.add_column("name")
    table.add_column("value")
    table.add_column("source")
    shown = 0
    for name in sorted(entries):
        entry = entries[name]
        if not show_all and entry.is_default:
            continue
        value = (
            "<sensitive>"
            if entry.is_sensitive
            else ("" if entry.value is None else str(entry.value))
        )
        table.add_row(name, value, _source_name(entry.source))
        shown += 1
    if shown:
        out.print(table)
    else:
        stderr.print("no overrides (use --all to list every config)")


@config_group.command("set")
@bootstrap_option
@click.option("--topic", "-t", help="Topic name.")
@click.option("--broker", help="Broker id (e.g. 0).")
@click.option(
    "--delete",
    "deletes",
    multiple=True,
    metavar="KEY",
    help="Remove an override (back to the default; repeatable).",
)
@click.argument("pairs", nargs=-1, metavar="KEY=VALUE...")
def set_command(
    bootstrap: str,
    topic: str | None,
    broker: str | None,
    deletes: tuple[str, ...],
    pairs: tuple[str, ...],
) -> None:
    """Set (KEY=VALUE) or delete (--delete KEY) configs of a topic or a broker."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    resource = _resource(topic, broker)
    updates = parse_properties(pairs, "KEY=VALUE")
    if not updates and not deletes:
        raise click.UsageError("nothing to change: give KEY=VALUE pairs or --delete KEY")
    admin = _admin(bootstrap)
    _check_topic(bootstrap, topic)
    for name, value in updates.items():
        resource.add_incremental_config(
            ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        )
    for name in deletes:
        resource.add_incremental_config(
            ConfigEntry(name, None, incremental_operation=AlterConfigOpType.DELETE)
        )
    _result(admin.incremental_alter_configs([resource]), f"alter {_label(topic, broker)}")
    changed = [f"{k}={v}" for k, v in updates.items()] + [f"-{k}" for k in deletes]
    stderr.print(
        f"updated {'topic' if topic else 'broker'} {topic or broker}: " + ", ".join(changed)
    )
