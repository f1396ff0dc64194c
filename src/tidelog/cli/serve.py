"""`tidelog serve`: run a broker in the foreground (logs to stderr).

A single node by default; `--zookeeper HOST:PORT[/chroot]` joins a cluster, and then these
`--set` names are accepted too: min.insync.replicas, replica.lag.time.max.ms,
replica.high.watermark.checkpoint.interval.ms,
unclean.leader.election.enable, zookeeper.session.timeout.ms, acks.all.fsync (D7, default true).

Exit status: 0 after a clean SIGTERM/SIGINT shutdown, 2 for bad options or settings, 1 when the
listener cannot be opened.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click
from click.core import ParameterSource

from tidelog.broker.acl_store import AclStoreError
from tidelog.broker.config import ConfigError, load_config
from tidelog.broker.logformat import LOG_FORMATS, configure_logging
from tidelog.cluster.zk_acls import ZkAclError

if TYPE_CHECKING:
    from tidelog.broker.replication.cluster_agent import ClusterSettings
from tidelog.broker.metrics.http import (
    DEFAULT_METRICS_ADDRESS,
    MetricsAddressError,
    parse_metrics_address,
)


def _parse_sets(values: tuple[str, ...]) -> dict[str, str]:
    settings = {}
    for item in values:
        name, separator, value = item.partition("=")
        if not separator or not name.strip():
            raise click.BadParameter(f"expected key=value, got {item!r}", param_hint="--set")
        settings[name.strip()] = value.strip()
    return settings


def _cluster_settings(zookeeper: str, settings: dict[str, str]) -> ClusterSettings:
    """Take the cluster-only settings out of `settings` (the rest go to load_config)."""
    from tidelog.broker.replication.cluster_agent import ClusterSettings

    def number(name: str, default: int) -> int:
        value = settings.pop(name, None)
        if value is None:
            return default
        if not value.isdigit() or int(value) < 1:
            raise click.BadParameter(f"{name} must be a positive integer", param_hint="--set")
        return int(value)

    unclean = settings.pop("unclean.leader.election.enable", "false").lower()
    if unclean not in ("true", "false"):
        raise click.BadParameter(
            "unclean.leader.election.enable: true or false", param_hint="--set"
        )
    fsync = settings.pop("acks.all.fsync", "true").lower()
    if fsync not in ("true", "false"):
        raise click.BadParameter("acks.all.fsync: true or false", param_hint="--set")
    return ClusterSettings(
        zookeeper=zookeeper,
        session_timeout_ms=number("zookeeper.session.timeout.ms", 6000),
        min_insync_replicas=number("min.insync.replicas", 1),
        replica_lag_time_max_ms=number("replica.lag.time.max.ms", 30_000),
        hw_checkpoint_interval_ms=number("replica.high.watermark.checkpoint.interval.ms", 5000),
        unclean_leader_election_enable=unclean == "true",
        acks_all_fsync=fsync == "true",
    )


@click.command()
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Data directory [default: ./tidelog-data].",
)
@click.option(
    "--listen",
    metavar="HOST:PORT",
    default=None,
    help="Listen address [default: 127.0.0.1:9092]; port 0 picks a free port.",
)
@click.option(
    "--advertise",
    metavar="HOST:PORT",
    default=None,
    help="Address clients are told to dial [default: the listen address].",
)
@click.option("--node-id", type=int, default=None, help="Broker id [default: 0].")
@click.option(
    "--config",
    "config_file",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="TOML file of Kafka-named settings.",
)
@click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="KEY=VALUE",
    help="A Kafka-named setting, e.g. num.partitions=3 (repeatable).",
)
@click.option(
    "--log-level",
    default="INFO",
    show_default=True,
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
)
@click.option(
    "--log-format",
    default="plain",
    show_default=True,
    type=click.Choice(LOG_FORMATS),
    help="plain text, or one JSON object per line (with request context on errors).",
)
@click.option(
    "--metrics",
    "metrics",
    metavar="HOST:PORT|off",
    default=DEFAULT_METRICS_ADDRESS,
    show_default=True,
    help="Prometheus /metrics and /health endpoint; off disables it.",
)
@click.option(
    "--zookeeper",
    metavar="HOST:PORT[/chroot]",
    default=None,
    help="Join the cluster coordinated by this ZooKeeper (needs a unique --node-id).",
)
@click.pass_context
def serve(
    ctx: click.Context,
    data_dir: Path | None,
    listen: str | None,
    advertise: str | None,
    node_id: int | None,
    config_file: Path | None,
    sets: tuple[str, ...],
    log_level: str,
    log_format: str,
    metrics: str,
    zookeeper: str | None,
) -> None:
    """Run a broker until SIGTERM or SIGINT."""
    try:
        metrics_address = parse_metrics_address(metrics)
    except MetricsAddressError as error:
        raise click.BadParameter(str(error), param_hint="'--metrics'") from None
    metrics_required = ctx.get_parameter_source("metrics") is not ParameterSource.DEFAULT
    settings = _parse_sets(sets)
    cluster = _cluster_settings(zookeeper, settings) if zookeeper else None
    try:
        config = load_config(
            config_file,
            settings,
            data_dir=data_dir,
            listen=listen,
            advertise=advertise,
            node_id=node_id,
        )
    except ConfigError as error:
        click.echo(f"tidelog serve: {error}", err=True)
        sys.exit(2)
    configure_logging(log_level, log_format)
    from tidelog.broker.server import serve as run_server

    try:
        asyncio.run(run_server(config, metrics_address=metrics_address,
                               metrics_required=metrics_required, cluster=cluster))
    except (MetricsAddressError, AclStoreError, ZkAclError) as error:
        click.echo(f"tidelog serve: {error}", err=True)
        sys.exit(1)
    except ConfigError as error:  # a listener's TLS or SASL settings, read at start
        click.echo(f"tidelog serve: {error}", err=True)
        sys.exit(2)
    except OSError as error:
        click.echo(
            f"tidelog serve: cannot listen on {config.listen_host}:"
            f"{config.listen_port}: {error.strerror}",
            err=True,
        )
        sys.exit(1)
