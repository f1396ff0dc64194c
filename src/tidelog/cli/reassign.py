"""`tidelog topics reassign --plan|--execute|--verify`: Kafka's `kafka-reassign-partitions.sh`.

- `--plan --topics T[,T...] --brokers 2,3,4` prints a plan in Kafka's JSON format
  (`{"version":1,"partitions":[{"topic","partition","replicas","log_dirs"}]}`) that moves every
  partition of the topics onto those brokers, the replication factor kept: partition p takes
  the brokers rotated by p (the first is the preferred leader); the current assignment goes
  to stderr, to keep for a rollback (Kafka's `--generate` prints both).
- `--execute --file plan.json [--throttle BYTES_PER_S]` sends AlterPartitionReassignments.
  With `--throttle`, as Kafka's tool: `leader.replication.throttled.rate` and
  `follower.replication.throttled.rate` on every broker involved, and the topics'
  `leader.replication.throttled.replicas` (the current replicas) and
  `follower.replication.throttled.replicas` (the moving ones).
- `--verify --file plan.json` says per partition whether its move is done (Metadata shows the
  plan's replicas and ListPartitionReassignments no longer lists it) or in progress; once all
  are done it removes the throttles (exit status 0 when done, 1 while any is in progress).
Reassignment requests go to the first bootstrap broker (any Tidelog broker serves them);
configs and metadata through confluent-kafka's AdminClient.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from tidelog.cli.client import ToolError, bootstrap_option, check_reachable
from tidelog.cli.transactions import _call, _module

ALTER_PARTITION_REASSIGNMENTS, LIST_PARTITION_REASSIGNMENTS = 45, 46
MAX_PLAN_BYTES = 16 * 1024 * 1024
RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
Plan = dict[tuple[str, int], list[int]]


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def _current(admin: AdminClient, topics: list[str], timeout_s: float) -> Plan:
    metadata = admin.list_topics(timeout=timeout_s)
    current: Plan = {}
    for name in topics:
        topic = metadata.topics.get(name)
        if topic is None or topic.error is not None:
            raise ToolError(f"topic {name!r}: {topic.error if topic else 'not found'}")
        for p, partition in topic.partitions.items():
            current[(name, p)] = list(partition.replicas)
    return current


def _plan_document(plan: Plan) -> dict[str, Any]:
    return {"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(plan.items())
    ]}


def _read_plan(path: Path) -> Plan:
    try:
        if path.stat().st_size > MAX_PLAN_BYTES:
            raise ToolError(f"{path}: larger than {MAX_PLAN_BYTES} bytes")
        document = json.loads(path.read_text("utf-8"))
        plan: Plan = {}
        for entry in document["partitions"]:
            replicas = [int(b) for b in entry["replicas"]]
            plan[(str(entry["topic"]), int(entry["partition"]))] = replicas
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ToolError(f"{path}: not a reassignment plan ({error})") from None
    if not plan:
        raise ToolError(f"{path}: the plan names no partition")
    return plan


def _alter_configs(admin: AdminClient, resources: list[ConfigResource], timeout_s: float) -> None:
    # librdkafka sends a BROKER resource to that broker, one per call.
    brokers = [r for r in resources if r.restype == ConfigResource.Type.BROKER]
    others = [r for r in resources if r.restype != ConfigResource.Type.BROKER]
    for batch in [*([b] for b in brokers), *([others] if others else [])]:
        for resource, future in admin.incremental_alter_configs(batch).items():
            try:
                future.result(timeout=timeout_s)
            except Exception as error:  # confluent raises KafkaException, or a timeout
                raise ToolError(f"configs of {resource}: {error}") from None


def _throttle(admin: AdminClient, plan: Plan, current: Plan, rate: int | None,
              timeout_s: float) -> None:
    """Kafka's throttle recipe; rate None removes it."""
    op = AlterConfigOpType.SET if rate is not None else AlterConfigOpType.DELETE
    brokers = sorted({b for r in [*plan.values(), *current.values()] for b in r})
    resources = [
        ConfigResource(ConfigResource.Type.BROKER, str(b), incremental_configs=[
            ConfigEntry(name, str(rate) if rate is not None else None, incremental_operation=op)
            for name in RATES])
        for b in brokers
    ]
    for topic in sorted({t for t, _ in plan}):
        leaders = [f"{p}:{b}" for (t, p), r in sorted(current.items()) if t == topic for b in r]
        followers = [f"{p}:{b}" for (t, p), r in sorted(plan.items()) if t == topic
                     for b in r if b not in current.get((t, p), [])]
        resources.append(ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
            ConfigEntry(LEADER_REPLICAS, ",".join(leaders) if rate is not None else None,
                        incremental_operation=op),
            ConfigEntry(FOLLOWER_REPLICAS, ",".join(followers) if rate is not None else None,
                        incremental_operation=op),
        ]))
    _alter_configs(admin, resources, timeout_s)


def _ongoing(bootstrap: str, timeout_s: float) -> set[tuple[str, int]]:
    module = _module(LIST_PARTITION_REASSIGNMENTS, 0)
    answer = _call(bootstrap, LIST_PARTITION_REASSIGNMENTS, 0,
                   module.ListPartitionReassignmentsRequest(topics=None), timeout_s)
    if answer.error_code.value != 0:
        raise ToolError(f"ListPartitionReassignments: {answer.error_code.name}")
    return {(t.name, int(p.partition_index)) for t in answer.topics for p in t.partitions}


@click.command("reassign")
@click.option("--plan", "mode", flag_value="plan",
              help="Print a plan moving --topics onto --brokers.")
@click.option("--execute", "mode", flag_value="execute", help="Start the moves of --file.")
@click.option("--verify", "mode", flag_value="verify", help="Report the moves of --file.")
@click.option("--topics", help="Topics to move (comma-separated), with --plan.")
@click.option("--brokers", help="Broker ids to move them onto (comma-separated), with --plan.")
@click.option("--file", "plan_file", type=click.Path(path_type=Path, dir_okay=False),
              help="Kafka's reassignment JSON, with --execute and --verify.")
@click.option("--throttle", type=click.IntRange(min=1), default=None, metavar="BYTES_PER_S",
              help="With --execute: cap the replication rate of the moving replicas.")
@bootstrap_option
@click.option("--timeout", "timeout_s", type=float, default=30.0, show_default=True)
def reassign(mode: str | None, topics: str | None, brokers: str | None, plan_file: Path | None,
             throttle: int | None, bootstrap: str, timeout_s: float) -> None:
    """Move partitions between brokers (kafka-reassign-partitions.sh)."""
    if mode is None:
        raise click.UsageError("one of --plan, --execute, --verify is required")
    check_reachable(bootstrap)
    admin = _admin(bootstrap)
    if mode == "plan":
        if not topics or not brokers:
            raise click.UsageError("--plan needs --topics and --brokers")
        try:
            ids = [int(b) for b in brokers.split(",") if b.strip()]
        except ValueError:
            raise click.BadParameter(brokers, param_hint="--brokers") from None
        current = _current(admin, [t.strip() for t in topics.split(",") if t.strip()], timeout_s)
        plan: Plan = {}
        for (topic, p), replicas in current.items():
            if len(replicas) > len(ids):
                raise ToolError(f"{topic}-{p} has {len(replicas)} replicas; only {len(ids)} "
                                "brokers given")
            plan[(topic, p)] = [ids[(p + i) % len(ids)] for i in range(len(replicas))]
        click.echo("Current partition replica assignment (keep it to roll back):", err=True)
        click.echo(json.dumps(_plan_document(current)), err=True)
        click.echo(json.dumps(_plan_document(plan)))
        return
    if plan_file is None:
        raise click.UsageError(f"--{mode} needs --file")
    plan = _read_plan(plan_file)
    if mode == "execute":
        current = _current(admin, sorted({t for t, _ in plan}), timeout_s)
        if throttle is not None:
            _throttle(admin, plan, current, throttle, timeout_s)
        module = _module(ALTER_PARTITION_REASSIGNMENTS, 0)
        by_topic: dict[str, list[Any]] = {}
        for (topic, p), replicas in sorted(plan.items()):
            by_topic.setdefault(topic, []).append(
                module.ReassignablePartition(partition_index=p, replicas=tuple(replicas)))
        answer = _call(bootstrap, ALTER_PARTITION_REASSIGNMENTS, 0,
                       module.AlterPartitionReassignmentsRequest(
                           topics=tuple(module.ReassignableTopic(name=t, partitions=tuple(ps))
                                        for t, ps in by_topic.items())), timeout_s)
        if answer.error_code.value != 0:
            raise ToolError(f"AlterPartitionReassignments: {answer.error_code.name}")
        failed = [f"{t.name}-{p.partition_index}: {p.error_code.name} {p.error_message or ''}"
                  for t in answer.responses for p in t.partitions if p.error_code.value != 0]
        if failed:
            raise ToolError("reassignment refused for " + "; ".join(failed))
        click.echo(f"Successfully started partition reassignments for "
                   f"{', '.join(f'{t}-{p}' for t, p in sorted(plan))}")
        return
    ongoing = _ongoing(bootstrap, timeout_s)
    current = _current(admin, sorted({t for t, _ in plan}), timeout_s)
    done = True
    for (topic, p), replicas in sorted(plan.items()):
        if (topic, p) not in ongoing and current.get((topic, p)) == replicas:
            click.echo(f"Reassignment of partition {topic}-{p} is completed.")
        else:
            done = False
            click.echo(f"Reassignment of partition {topic}-{p} is still in progress.")
    if not done:
        sys.exit(1)
    _throttle(admin, plan, current, None, timeout_s)
    click.echo("Clearing broker-level and topic-level throttles.")
