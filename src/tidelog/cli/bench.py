"""`tidelog bench produce|consume|e2e`: kafka-producer-perf-test in spirit, the seed workload
(4,000,000 messages of 200-300 random bytes, one partition, acks=1) by default.

Progress goes to stderr (a bar on a terminal); the summary (msg/s, MB/s, latency p50/p95/p99/max,
client CPU, the count checks) to stdout as a table, or as one JSON object with `--json`.
Exit status 1 when a count check fails. See tidelog.cli.perf for what each mode measures.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from tidelog.cli import perf, perf_e2e
from tidelog.cli.client import (
    ToolError,
    bootstrap_option,
    check_reachable,
    parse_properties,
    stderr,
)
from tidelog.cli.produce import COMPRESSIONS

F = TypeVar("F", bound=Callable[..., Any])
out = Console(highlight=False)


@dataclass(frozen=True, slots=True)
class Workload:
    """The options every `tidelog bench` mode takes (`@workload_options`)."""

    bootstrap: str
    topic: str
    partitions: int
    count: int
    min_size: int
    max_size: int
    as_json: bool

    def pool(self, floor_bytes: int = 0) -> perf.ValuePool:
        """The value pool; `floor_bytes` raises both sizes (e2e stamps 8 bytes in each)."""
        min_size, max_size = max(self.min_size, floor_bytes), max(self.max_size, floor_bytes)
        if min_size > max_size:
            raise click.BadParameter(
                f"{min_size} > --max-size {max_size}", param_hint="'--min-size'"
            )
        return perf.ValuePool.generate(min_size, max_size)


@dataclass(frozen=True, slots=True)
class ProducerSettings:
    """The producer options of `bench produce` and `bench e2e` (`@producer_options`)."""

    acks: str
    compression: str
    rate: float
    extra: tuple[str, ...]

    def extra_settings(self) -> dict[str, str]:
        return parse_properties(self.extra, "-X")


def _add_options(func: Callable[..., Any], options: list[Callable[[F], F]]) -> None:
    for option in reversed(options):
        option(func)


def workload_options(func: F) -> F:
    """-b, --topic, --partitions, -n/--quick, --min-size/--max-size, --json, handed to the
    command as one `workload: Workload` argument."""

    @functools.wraps(func)
    def command(
        *,
        bootstrap: str,
        topic: str,
        partitions: int,
        messages: int | None,
        quick: bool,
        min_size: int,
        max_size: int,
        as_json: bool,
        **rest: Any,
    ) -> Any:
        if messages is None:
            messages = perf.QUICK_MESSAGES if quick else perf.SEED_MESSAGES
        workload = Workload(bootstrap, topic, partitions, messages, min_size, max_size, as_json)
        return func(workload=workload, **rest)

    _add_options(
        command,
        [
            bootstrap_option,
            click.option("--topic", "-t", default="tidelog-bench", show_default=True),
            click.option(
                "--partitions",
                default=1,
                show_default=True,
                type=click.IntRange(min=1),
                help="Partitions when the topic is created.",
            ),
            click.option(
                "--messages",
                "-n",
                type=click.IntRange(min=1),
                default=None,
                help=f"Messages (default {perf.SEED_MESSAGES:,}; --quick {perf.QUICK_MESSAGES:,}).",
            ),
            click.option("--quick", is_flag=True, help=f"{perf.QUICK_MESSAGES:,} messages."),
            click.option("--min-size", default=200, show_default=True, type=click.IntRange(min=0)),
            click.option("--max-size", default=300, show_default=True, type=click.IntRange(min=0)),
            click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON."),
        ],
    )
    return cast(F, command)


def producer_options(func: F) -> F:
    """--acks, --compression, --rate, -X, handed to the command as `producer: ProducerSettings`."""

    @functools.wraps(func)
    def command(
        *, acks: str, compression: str, rate: float, extra: tuple[str, ...], **rest: Any
    ) -> Any:
        return func(producer=ProducerSettings(acks, compression, rate, extra), **rest)

    _add_options(
        command,
        [
            click.option(
                "--acks",
                type=click.Choice(["0", "1", "all", "-1"]),
                default="1",
                show_default=True,
            ),
            click.option(
                "--compression",
                type=click.Choice(COMPRESSIONS),
                default="none",
                show_default=True,
            ),
            click.option(
                "--rate",
                type=click.FloatRange(min=0),
                default=0.0,
                help="Offered load in msg/s (0 = as fast as possible).",
            ),
            click.option(
                "-X",
                "extra",
                multiple=True,
                metavar="KEY=VALUE",
                help="Extra librdkafka producer setting (repeatable).",
            ),
        ],
    )
    return cast(F, command)


def _progress(label: str, total: int, as_json: bool) -> Progress:
    return Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TaskProgressColumn(),
        TimeRemainingColumn(),
        console=stderr,
        transient=True,
        disable=as_json or not stderr.is_terminal,
    )


def _run_with_progress(
    label: str, total: int, as_json: bool, run: Callable[[perf.Progress], perf.BenchResult]
) -> perf.BenchResult:
    progress = _progress(label, total, as_json)
    with progress:
        task = progress.add_task(label, total=total)
        return run(lambda n: progress.advance(task, n))


def _report(results: list[perf.BenchResult], as_json: bool) -> None:
    if as_json:
        payload: Any = results[0].to_dict() if len(results) == 1 else [r.to_dict() for r in results]
        click.echo(json.dumps(payload, indent=2))
    else:
        for result in results:
            table = Table(title=f"bench {result.mode}: {result.topic}", show_header=False)
            table.add_column("metric")
            table.add_column("value", justify="right")
            table.add_row("messages", f"{result.messages:,}")
            table.add_row("bytes", f"{result.bytes:,}")
            table.add_row("seconds", f"{result.seconds:.3f}")
            table.add_row("msg/s", f"{result.msg_per_s:,.0f}")
            table.add_row("MB/s", f"{result.mb_per_s:,.2f}")
            for name, value in result.latency_ms.items():
                table.add_row(f"{result.latency_kind} {name} (ms)", f"{value:.3f}")
            table.add_row("client CPU s / M msg", f"{result.client_cpu_s_per_million:.2f}")
            for check, passed in result.checks.items():
                table.add_row(f"check: {check}", "ok" if passed else "FAILED")
            out.print(table)
            for note in result.notes:
                stderr.print(note)
    failed = [f"{r.mode}: {c}" for r in results for c, passed in r.checks.items() if not passed]
    if failed:
        raise ToolError("count check failed: " + "; ".join(failed))


@click.group("bench")
def bench_group() -> None:
    """Measure produce, consume and end-to-end throughput and latency."""


@bench_group.command("produce")
@workload_options
@producer_options
def bench_produce(workload: Workload, producer: ProducerSettings) -> None:
    """Produce N messages as fast as possible (or at --rate) and wait for every ack."""
    _run_producing("producing", perf.run_produce, workload, producer, workload.pool())


@bench_group.command("e2e")
@workload_options
@producer_options
def bench_e2e(workload: Workload, producer: ProducerSettings) -> None:
    """Produce and consume at once; latency is send -> receive per message."""
    pool = workload.pool(floor_bytes=perf.STAMP.size)
    _run_producing("end to end", perf_e2e.run_e2e, workload, producer, pool)


def _run_producing(
    label: str,
    runner: Callable[..., perf.BenchResult],
    workload: Workload,
    producer: ProducerSettings,
    pool: perf.ValuePool,
) -> None:
    """The produce and e2e modes: same checks, same options, a different runner."""
    settings = producer.extra_settings()
    check_reachable(workload.bootstrap)
    perf.ensure_topic(workload.bootstrap, workload.topic, workload.partitions)
    result = _run_with_progress(
        label,
        workload.count,
        workload.as_json,
        lambda progress: runner(
            workload.bootstrap,
            workload.topic,
            workload.count,
            pool,
            acks=producer.acks,
            compression=producer.compression,
            rate=producer.rate,
            extra=settings,
            progress=progress,
        ),
    )
    _report([result], workload.as_json)


@bench_group.command("consume")
@workload_options
@click.option("--group", "-g", help="Consumer group (default: a fresh one per run).")
def bench_consume(workload: Workload, group: str | None) -> None:
    """Read N messages in a group, committing synchronously after every poll batch.

    When the topic holds fewer than N messages the missing backlog is produced first."""
    bootstrap, topic, count = workload.bootstrap, workload.topic, workload.count
    check_reachable(bootstrap)
    created = perf.ensure_topic(bootstrap, topic, workload.partitions)
    stored = sum(high - low for low, high in perf.watermarks(bootstrap, topic).values())
    results: list[perf.BenchResult] = []
    expected_bytes: int | None = None
    if stored < count:
        pool = workload.pool()
        missing = count - stored
        seeded = _run_with_progress(
            "seeding backlog",
            missing,
            workload.as_json,
            lambda progress: perf.run_produce(bootstrap, topic, missing, pool, progress=progress),
        )
        results.append(seeded)
        if created or stored == 0:
            expected_bytes = pool.total_bytes(count)
    results.append(
        _run_with_progress(
            "consuming",
            count,
            workload.as_json,
            lambda progress: perf.run_consume(
                bootstrap,
                topic,
                count,
                group=group,
                expected_bytes=expected_bytes,
                progress=progress,
            ),
        )
    )
    _report(results, workload.as_json)
