"""`tidelog` command group. Subcommand modules register here with one `main.add_command` line."""

from __future__ import annotations

import click

from tidelog.cli.acls import acls
from tidelog.cli.archive import archive
from tidelog.cli.bench import bench_group
from tidelog.cli.certs import certs_command
from tidelog.cli.cluster import cluster_group
from tidelog.cli.config import config_group
from tidelog.cli.console import console_command
from tidelog.cli.consume import consume_command
from tidelog.cli.dump_log import dump_log_command
from tidelog.cli.groups import groups
from tidelog.cli.log_dirs import log_dirs_group
from tidelog.cli.produce import produce_command
from tidelog.cli.reassign import reassign
from tidelog.cli.serve import serve
from tidelog.cli.share_groups import describe_share, list_share, reset_share_offsets
from tidelog.cli.timers import timers
from tidelog.cli.topics import topics
from tidelog.cli.transactions import transactions
from tidelog.cli.users import users_group


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="tidelog")
def main() -> None:
    """Tidelog: a log-structured message broker that speaks the Kafka protocol."""


main.add_command(serve)
main.add_command(archive)
main.add_command(topics)
topics.add_command(reassign)  # `tidelog topics reassign` (kafka-reassign-partitions.sh)
main.add_command(produce_command)
main.add_command(consume_command)
main.add_command(dump_log_command)
main.add_command(config_group)
main.add_command(config_group, name="configs")  # kafka-configs' spelling
main.add_command(log_dirs_group)
main.add_command(bench_group)
main.add_command(groups)
main.add_command(cluster_group)
main.add_command(console_command)
main.add_command(acls)
main.add_command(transactions)
main.add_command(users_group)
main.add_command(certs_command)
main.add_command(timers)

groups.add_command(list_share)
groups.add_command(describe_share)
groups.add_command(reset_share_offsets)

if __name__ == "__main__":
    main()
