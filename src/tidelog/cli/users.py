"""`tidelog users add|list|remove`: SCRAM users, offline in a broker's data directory (as
`kafka-storage format --add-scram` writes the first ones) or online through the Kafka admin
API (AlterUserScramCredentials / DescribeUserScramCredentials, so it works against Kafka too).

    tidelog users add alice --password s3cret [--mechanism SCRAM-SHA-512] --data-dir DIR
    tidelog users add alice --password s3cret --bootstrap HOST:PORT [--command-config FILE]
    tidelog users list --data-dir DIR | --bootstrap HOST:PORT
    tidelog users remove alice [--mechanism SCRAM-SHA-256] --data-dir DIR | --bootstrap ...

Only salted keys are stored (`security/scram_credentials.py` documents the file); a running
single node re-reads the file at the next authentication. PLAIN logins check the same
credentials. `--command-config`: Kafka client properties (security.protocol, sasl.mechanism,
sasl.jaas.config or sasl.username/sasl.password, ssl.truststore.location as PEM, ...).
"""

from __future__ import annotations

import secrets
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from tidelog.cli.client import ToolError, base_config, command_config, kafka_error_text
from tidelog.security.scram_credentials import (
    DEFAULT_ITERATIONS,
    SCRAM_MECHANISMS,
    CredentialStoreError,
    make_credential,
    read_store,
    write_store,
)

F = TypeVar("F", bound=Callable[..., Any])
ADMIN_TIMEOUT_S = 30.0


def _where(func: F) -> F:
    func = click.option("--command-config", type=click.Path(dir_okay=False), default=None,
                        help="Kafka client properties for --bootstrap (TLS, SASL).")(func)
    func = click.option("--bootstrap", "--bootstrap-server", "bootstrap", default=None,
                        metavar="HOST:PORT",
                        help="A running broker (Tidelog or Kafka): use the admin API.")(func)
    return click.option("--data-dir", type=click.Path(path_type=Path, file_okay=False),
                        default=None, help="A broker's data directory (offline).")(func)


def _check_where(data_dir: Path | None, bootstrap: str | None) -> None:
    if (data_dir is None) == (bootstrap is None):
        raise click.UsageError("give exactly one of --data-dir and --bootstrap")


def _admin(bootstrap: str, config_file: str | None) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient(base_config(bootstrap, **command_config(config_file)))


def _mechanism(name: str) -> Any:
    from confluent_kafka.admin import ScramMechanism

    return {"SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256,
            "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512}[name]


def _alter(bootstrap: str, config_file: str | None, alteration: Any) -> None:
    from confluent_kafka import KafkaException

    admin = _admin(bootstrap, config_file)  # kept alive until the futures complete
    futures = admin.alter_user_scram_credentials([alteration])
    for future in futures.values():
        try:
            future.result(ADMIN_TIMEOUT_S)
        except KafkaException as error:
            raise ToolError(kafka_error_text(error.args[0])) from None


@click.group("users")
def users_group() -> None:
    """SCRAM users (SCRAM-SHA-256, SCRAM-SHA-512; PLAIN checks them too)."""


@users_group.command("add")
@click.argument("name")
@click.option("--password", required=True,
              help="The user's password (only its salted keys are stored).")
@click.option("--mechanism", type=click.Choice(sorted(SCRAM_MECHANISMS)),
              default="SCRAM-SHA-256", show_default=True)
@click.option("--iterations", type=int, default=DEFAULT_ITERATIONS, show_default=True)
@_where
def add_user(name: str, password: str, mechanism: str, iterations: int, data_dir: Path | None,
             bootstrap: str | None, command_config: str | None) -> None:
    """Add NAME, or replace its credential for MECHANISM."""
    _check_where(data_dir, bootstrap)
    if not name:
        raise click.BadParameter("a user name must not be empty", param_hint="NAME")
    if bootstrap is not None:
        from confluent_kafka.admin import ScramCredentialInfo, UserScramCredentialUpsertion

        upsertion = UserScramCredentialUpsertion(
            name, ScramCredentialInfo(_mechanism(mechanism), iterations), password.encode(),
            secrets.token_bytes(32),
        )
        _alter(bootstrap, command_config, upsertion)
    else:
        assert data_dir is not None
        try:
            users = read_store(data_dir)
            users.setdefault(name, {})[mechanism] = make_credential(
                mechanism, password, iterations=iterations
            )
            write_store(data_dir, users)
        except CredentialStoreError as error:
            click.echo(f"tidelog users: {error}", err=True)
            sys.exit(1)
    click.echo(f"{name}: {mechanism} credential stored ({iterations} iterations)")


@users_group.command("list")
@_where
def list_users(data_dir: Path | None, bootstrap: str | None, command_config: str | None) -> None:
    """Users and their mechanisms, one per line."""
    _check_where(data_dir, bootstrap)
    described: dict[str, list[tuple[str, int]]] = {}
    if bootstrap is not None:
        from confluent_kafka import KafkaException

        try:
            admin = _admin(bootstrap, command_config)
            descriptions = admin.describe_user_scram_credentials().result(ADMIN_TIMEOUT_S)
        except KafkaException as error:
            raise ToolError(kafka_error_text(error.args[0])) from None
        for user, description in descriptions.items():
            described[user] = [
                (info.mechanism.name.replace("_", "-"), info.iterations)
                for info in description.scram_credential_infos
            ]
    else:
        assert data_dir is not None
        try:
            users = read_store(data_dir)
        except CredentialStoreError as error:
            click.echo(f"tidelog users: {error}", err=True)
            sys.exit(1)
        for user, mechanisms in users.items():
            described[user] = [(m, c.iterations) for m, c in mechanisms.items()]
    for user, infos in sorted(described.items()):
        text = ", ".join(f"{m} (iterations={i})" for m, i in sorted(infos))
        click.echo(f"{user}\t{text}")


@users_group.command("remove")
@click.argument("name")
@click.option("--mechanism", type=click.Choice(sorted(SCRAM_MECHANISMS)), default=None,
              help="Remove only this credential [default: all of the user's].")
@_where
def remove_user(name: str, mechanism: str | None, data_dir: Path | None, bootstrap: str | None,
                command_config: str | None) -> None:
    """Remove NAME (or one of its credentials)."""
    _check_where(data_dir, bootstrap)
    if bootstrap is not None:
        from confluent_kafka.admin import UserScramCredentialDeletion

        mechanisms = [mechanism] if mechanism else sorted(SCRAM_MECHANISMS)
        removed = 0
        for each in mechanisms:
            try:
                _alter(bootstrap, command_config,
                       UserScramCredentialDeletion(name, _mechanism(each)))
                removed += 1
            except ToolError:
                if mechanism is not None:
                    raise
        if not removed:
            raise ToolError(f"no such user or credential: {name}")
        click.echo(f"{name}: removed")
        return
    assert data_dir is not None
    try:
        users = read_store(data_dir)
        if name not in users or (mechanism is not None and mechanism not in users[name]):
            click.echo(f"tidelog users: no such user or credential: {name}", err=True)
            sys.exit(1)
        if mechanism is None:
            del users[name]
        else:
            del users[name][mechanism]
            if not users[name]:
                del users[name]
        write_store(data_dir, users)
    except CredentialStoreError as error:
        click.echo(f"tidelog users: {error}", err=True)
        sys.exit(1)
    click.echo(f"{name}: removed")
