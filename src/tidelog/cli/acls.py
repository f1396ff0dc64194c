"""`tidelog acls add|list|remove`: ACLs over the Kafka admin API, with kafka-acls' flags.

CreateAcls / DescribeAcls / DeleteAcls through confluent-kafka's AdminClient, so the commands
work against Tidelog and Apache Kafka alike. Flags as kafka-acls.sh spells them:
`--allow-principal`, `--deny-principal`, `--allow-host`, `--deny-host`, `--operation`,
`--topic`, `--group`, `--cluster`, `--transactional-id`, `--resource-pattern-type`,
`--principal` (list filter), `--bootstrap`, `--command-config`. Exit status 1 when the broker
refuses, 2 for bad arguments. `add --authorizer-properties zookeeper.connect=HOST:PORT[/chroot]`
writes into a cluster's ZooKeeper directly instead (kafka-acls' ZooKeeper mode).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import click
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from tidelog.cli.client import ToolError, bootstrap_option, check_reachable
from tidelog.cli.command_config import read_properties, to_librdkafka

TIMEOUT_S = 15.0
CLUSTER = "kafka-cluster"
_QUIET = logging.getLogger("tidelog.cli.acls.librdkafka")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False

# kafka-acls' operation names (Read, DescribeConfigs, ...), case-insensitive, and the enum's.
_OPERATIONS = {
    op.name.replace("_", "").lower(): op
    for op in AclOperation
    if op not in (AclOperation.UNKNOWN, AclOperation.ANY)
}
_PATTERNS = {
    "literal": ResourcePatternType.LITERAL,
    "prefixed": ResourcePatternType.PREFIXED,
    "match": ResourcePatternType.MATCH,
    "any": ResourcePatternType.ANY,
}


def _operation(name: str) -> AclOperation:
    operation = _OPERATIONS.get(name.replace("_", "").replace("-", "").lower())
    if operation is None:
        known = ", ".join(sorted(_OPERATIONS))
        raise click.BadParameter(f"unknown operation {name!r} (one of {known})")
    return operation


def _admin(bootstrap: str, command_config: Path | None) -> AdminClient:
    config: dict[str, Any] = {}
    if command_config is not None:
        config.update(to_librdkafka(read_properties(command_config)))
    config.setdefault("bootstrap.servers", bootstrap)
    if "security.protocol" not in config:
        check_reachable(config["bootstrap.servers"])
    config["logger"] = _QUIET
    return AdminClient(config)


def _resources(
    topics: tuple[str, ...],
    groups: tuple[str, ...],
    cluster: bool,
    transactional_ids: tuple[str, ...],
) -> list[tuple[ResourceType, str]]:
    found = [(ResourceType.TOPIC, name) for name in topics]
    found += [(ResourceType.GROUP, name) for name in groups]
    found += [(ResourceType.TRANSACTIONAL_ID, name) for name in transactional_ids]
    if cluster:
        found.append((ResourceType.BROKER, CLUSTER))
    return found


def _entries(
    allow_principals: tuple[str, ...],
    deny_principals: tuple[str, ...],
    allow_hosts: tuple[str, ...],
    deny_hosts: tuple[str, ...],
    operations: tuple[str, ...],
) -> list[tuple[str, str, AclOperation, AclPermissionType]]:
    """kafka-acls' product: each principal x its hosts (default `*`) x each operation."""
    ops = [_operation(name) for name in operations] or [AclOperation.ALL]
    found = []
    for principals, hosts, permission in (
        (allow_principals, allow_hosts or ("*",), AclPermissionType.ALLOW),
        (deny_principals, deny_hosts or ("*",), AclPermissionType.DENY),
    ):
        for principal in principals:
            for host in hosts:
                for op in ops:
                    found.append((principal, host, op, permission))
    return found


def _filter(*fields: Any) -> AclBindingFilter:
    """An AclBindingFilter; None fields match anything (confluent-kafka's stubs say str)."""
    return AclBindingFilter(*fields)


def _resource_options(func: Any) -> Any:
    for option in reversed([
        click.option("--topic", "topics", multiple=True, help="Topic name (or prefix, or *)."),
        click.option("--group", "groups", multiple=True, help="Consumer group id."),
        click.option("--cluster", is_flag=True, help="The cluster resource."),
        click.option("--transactional-id", "transactional_ids", multiple=True),
        click.option(
            "--resource-pattern-type",
            "pattern",
            type=click.Choice(sorted(_PATTERNS), case_sensitive=False),
            default="literal",
            show_default=True,
        ),
        click.option("--command-config", type=click.Path(path_type=Path, dir_okay=False),
                     help="Kafka client properties (security.protocol, sasl.jaas.config, ...)."),
        bootstrap_option,
    ]):
        func = option(func)
    return func


def _entry_options(func: Any) -> Any:
    for option in reversed([
        click.option("--allow-principal", "allow_principals", multiple=True, metavar="TYPE:NAME"),
        click.option("--deny-principal", "deny_principals", multiple=True, metavar="TYPE:NAME"),
        click.option("--allow-host", "allow_hosts", multiple=True),
        click.option("--deny-host", "deny_hosts", multiple=True),
        click.option("--host", "hosts", multiple=True, help="Host for both allow and deny."),
        click.option("--operation", "operations", multiple=True, help="Read, Write, ... (All)."),
        click.option("--force", is_flag=True, help="Accepted for kafka-acls compatibility."),
    ]):
        func = option(func)
    return func


def _describe(binding: Any) -> str:
    return (
        f"(principal={binding.principal}, host={binding.host}, "
        f"operation={binding.operation.name}, permissionType={binding.permission_type.name})"
    )


def _on(binding: Any) -> str:
    return f"{binding.restype.name}:{binding.name}"


def _print_grouped(bindings: Iterable[Any]) -> None:
    by_resource: dict[tuple[str, str, str], list[Any]] = {}
    for binding in bindings:
        restype = "CLUSTER" if binding.restype == ResourceType.BROKER else binding.restype.name
        key = (restype, binding.name, binding.resource_pattern_type.name)
        by_resource.setdefault(key, []).append(binding)
    for (restype, name, pattern), items in sorted(by_resource.items()):
        click.echo(
            f"Current ACLs for resource `ResourcePattern(resourceType={restype}, "
            f"name={name}, patternType={pattern})`:"
        )
        for binding in sorted(items, key=_describe):
            click.echo(f" \t{_describe(binding)} ")
        click.echo("")


def _result(future: Any) -> Any:
    try:
        return future.result(timeout=TIMEOUT_S)
    except KafkaException as error:
        kafka_error = error.args[0]
        raise ToolError(f"{kafka_error.name()}: {kafka_error.str()}") from None


@click.group("acls")
def acls() -> None:
    """Add, list and remove ACLs (kafka-acls' flags) through the Kafka admin API."""


@acls.command("add")
@_resource_options
@_entry_options
@click.option(
    "--authorizer-properties", "authorizer_properties", multiple=True,
    metavar="zookeeper.connect=HOST:PORT[/chroot]",
    help="Write into a cluster's ZooKeeper instead of through a broker (kafka-acls' ZooKeeper "
         "mode), e.g. the brokers' ClusterAction before their first start.",
)
def add_command(
    bootstrap: str, command_config: Path | None, topics: tuple[str, ...], groups: tuple[str, ...],
    cluster: bool, transactional_ids: tuple[str, ...], pattern: str,
    allow_principals: tuple[str, ...], deny_principals: tuple[str, ...],
    allow_hosts: tuple[str, ...], deny_hosts: tuple[str, ...], hosts: tuple[str, ...],
    operations: tuple[str, ...], force: bool, authorizer_properties: tuple[str, ...],
) -> None:
    """Add ACLs: each principal x host x operation on each resource."""
    pattern_type = _PATTERNS[pattern.lower()]
    if pattern_type not in (ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED):
        raise click.BadParameter("add takes --resource-pattern-type literal or prefixed")
    resources = _resources(topics, groups, cluster, transactional_ids)
    entries = _entries(allow_principals, deny_principals, allow_hosts or hosts,
                       deny_hosts or hosts, operations)
    if not resources:
        raise click.UsageError("name a resource: --topic, --group, --cluster or --transactional-id")
    if not entries:
        raise click.UsageError("name a principal: --allow-principal or --deny-principal")
    bindings = [
        AclBinding(restype, name, pattern_type, principal, host, op, permission)
        for restype, name in resources
        for principal, host, op, permission in entries
    ]
    if authorizer_properties:
        _add_in_zookeeper(_zookeeper_connect(authorizer_properties), bindings)
        for binding in bindings:
            click.echo(f"Added {_describe(binding)} on {_on(binding)}")
        return
    client = _admin(bootstrap, command_config)
    for binding, future in client.create_acls(bindings, request_timeout=TIMEOUT_S).items():
        _result(future)
        click.echo(f"Added {_describe(binding)} on {_on(binding)}")


def _zookeeper_connect(properties: tuple[str, ...]) -> str:
    values = dict(item.partition("=")[::2] for item in properties)
    unknown = sorted(set(values) - {"zookeeper.connect"})
    if unknown or not values.get("zookeeper.connect"):
        raise click.BadParameter(
            "only zookeeper.connect=HOST:PORT[/chroot] is understood "
            f"(got {', '.join(properties)})",
            param_hint="'--authorizer-properties'",
        )
    return values["zookeeper.connect"]


def _add_in_zookeeper(connect: str, bindings: list[AclBinding]) -> None:
    """The bindings in Kafka's ZooKeeper layout with change notices, as kafka-acls'
    ZooKeeper mode wrote them: running brokers apply them from the notices."""
    from kazoo.client import KazooClient
    from kazoo.handlers.threading import KazooTimeoutError

    from tidelog.cluster.zk_acls import ZkAclError, ZkAclStore
    from tidelog.security import acl

    def code(value: Any) -> int:  # confluent-kafka's enums carry Kafka's codes
        return int(getattr(value, "value", value))

    converted = [
        acl.AclBinding(
            acl.ResourcePattern(acl.ResourceType(code(binding.restype)), str(binding.name),
                                acl.PatternType(code(binding.resource_pattern_type))),
            acl.AccessControlEntry(str(binding.principal), str(binding.host),
                                   acl.AclOperation(code(binding.operation)),
                                   acl.AclPermissionType(code(binding.permission_type))),
        )
        for binding in bindings
    ]
    try:
        for binding in converted:
            acl.validate_binding(binding)
    except acl.AclValidationError as error:
        raise click.BadParameter(str(error)) from None
    client = KazooClient(hosts=connect, timeout=TIMEOUT_S)
    try:
        client.start(timeout=TIMEOUT_S)
    except KazooTimeoutError:
        raise ToolError(f"cannot reach ZooKeeper at {connect}") from None
    try:
        ZkAclStore(client).update(converted, ())
    except ZkAclError as error:
        raise ToolError(str(error)) from None
    finally:
        client.stop()
        client.close()


@acls.command("list")
@_resource_options
@click.option("--principal", "principals", multiple=True, metavar="TYPE:NAME")
def list_command(
    bootstrap: str, command_config: Path | None, topics: tuple[str, ...], groups: tuple[str, ...],
    cluster: bool, transactional_ids: tuple[str, ...], pattern: str, principals: tuple[str, ...],
) -> None:
    """List ACLs (every resource unless one is named)."""
    pattern_type = _PATTERNS[pattern.lower()]
    resources = _resources(topics, groups, cluster, transactional_ids)
    filters = [
        _filter(restype, name, pattern_type, principal, None, AclOperation.ANY,
                         AclPermissionType.ANY)
        for restype, name in resources
        for principal in principals or (None,)
    ]
    if not resources:  # every resource: every pattern type too
        filters = [
            _filter(ResourceType.ANY, None, ResourcePatternType.ANY, principal, None,
                             AclOperation.ANY, AclPermissionType.ANY)
            for principal in principals or (None,)
        ]
    client = _admin(bootstrap, command_config)
    found: dict[str, Any] = {}
    for acl_filter in filters:
        for binding in _result(client.describe_acls(acl_filter, request_timeout=TIMEOUT_S)):
            found[str(binding)] = binding
    _print_grouped(found.values())


@acls.command("remove")
@_resource_options
@_entry_options
def remove_command(
    bootstrap: str, command_config: Path | None, topics: tuple[str, ...], groups: tuple[str, ...],
    cluster: bool, transactional_ids: tuple[str, ...], pattern: str,
    allow_principals: tuple[str, ...], deny_principals: tuple[str, ...],
    allow_hosts: tuple[str, ...], deny_hosts: tuple[str, ...], hosts: tuple[str, ...],
    operations: tuple[str, ...], force: bool,
) -> None:
    """Remove ACLs: the named entries, or every ACL of the named resources."""
    pattern_type = _PATTERNS[pattern.lower()]
    resources = _resources(topics, groups, cluster, transactional_ids)
    if not resources:
        raise click.UsageError("name a resource: --topic, --group, --cluster or --transactional-id")
    entries: list[tuple[str | None, str | None, AclOperation, AclPermissionType]] = list(
        _entries(allow_principals, deny_principals, allow_hosts or hosts, deny_hosts or hosts,
                 operations)
    )
    if not entries:  # kafka-acls --remove with only a resource: all of its ACLs
        entries = [(None, None, AclOperation.ANY, AclPermissionType.ANY)]
    filters = [
        _filter(restype, name, pattern_type, principal, host, op, permission)
        for restype, name in resources
        for principal, host, op, permission in entries
    ]
    client = _admin(bootstrap, command_config)
    removed = []
    for future in client.delete_acls(filters, request_timeout=TIMEOUT_S).values():
        removed += _result(future)
    for binding in removed:
        click.echo(f"Removed {_describe(binding)} on {_on(binding)}")
    if not removed:
        click.echo("No matching ACLs")
