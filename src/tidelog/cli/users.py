"""`tidelog users add|list|remove`: SCRAM users in a stopped (or running single-node) broker's
data directory, as `kafka-storage format --add-scram` writes the first ones.

    tidelog users add alice --password s3cret --mechanism SCRAM-SHA-512 --data-dir DIR
    tidelog users list --data-dir DIR
    tidelog users remove alice [--mechanism SCRAM-SHA-256] --data-dir DIR

Only salted keys are stored (`security/scram_credentials.py` documents the file). A running
single node re-reads the file at the next authentication. PLAIN logins check the same
credentials.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from tidelog.security.scram_credentials import (
    DEFAULT_ITERATIONS,
    SCRAM_MECHANISMS,
    CredentialStoreError,
    make_credential,
    read_store,
    write_store,
)

_DATA_DIR = click.option(
    "--data-dir", type=click.Path(path_type=Path, file_okay=False), required=True,
    help="The broker's data directory.",
)


@click.group("users")
def users_group() -> None:
    """SCRAM users (SCRAM-SHA-256, SCRAM-SHA-512; PLAIN checks them too)."""


@users_group.command("add")
@click.argument("name")
@click.option("--password", required=True, help="The user's password (only its salted keys "
              "are stored).")
@click.option("--mechanism", type=click.Choice(sorted(SCRAM_MECHANISMS)),
              default="SCRAM-SHA-256", show_default=True)
@click.option("--iterations", type=int, default=DEFAULT_ITERATIONS, show_default=True)
@_DATA_DIR
def add_user(name: str, password: str, mechanism: str, iterations: int, data_dir: Path) -> None:
    """Add NAME, or replace its credential for MECHANISM."""
    if not name:
        raise click.BadParameter("a user name must not be empty", param_hint="NAME")
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
@_DATA_DIR
def list_users(data_dir: Path) -> None:
    """Users and their mechanisms, one per line."""
    try:
        users = read_store(data_dir)
    except CredentialStoreError as error:
        click.echo(f"tidelog users: {error}", err=True)
        sys.exit(1)
    for name, mechanisms in sorted(users.items()):
        described = ", ".join(
            f"{mechanism} (iterations={credential.iterations})"
            for mechanism, credential in sorted(mechanisms.items())
        )
        click.echo(f"{name}\t{described}")


@users_group.command("remove")
@click.argument("name")
@click.option("--mechanism", type=click.Choice(sorted(SCRAM_MECHANISMS)), default=None,
              help="Remove only this credential [default: all of the user's].")
@_DATA_DIR
def remove_user(name: str, mechanism: str | None, data_dir: Path) -> None:
    """Remove NAME (or one of its credentials)."""
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
