"""`tidelog timers list|describe`: delayed delivery's pending records (docs/delivery.md).

Kafka has no API for them, so the tool reads the broker's Prometheus endpoint (`--metrics`,
the address `tidelog serve --metrics` listens on; default 127.0.0.1:9644): the
`tidelog_timer_*` families (broker/timers/metrics.py). One GET with a timeout per endpoint.
A cluster: `--metrics` lists every broker's endpoint, comma-separated; each broker reports the
timer partitions it leads, and the listings are added up (counts summed, the earliest due time
kept; the delivery lag is the worst broker's quantile).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

import click
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console
from rich.table import Table

from tidelog.cli.client import ToolError

console = Console(highlight=False)
DEFAULT_METRICS = "127.0.0.1:9644"
_MAX_BYTES = 64 * 1024 * 1024
_MAX_ENDPOINTS = 1000

metrics_option = click.option(
    "--metrics", "metrics", default=DEFAULT_METRICS, show_default=True,
    envvar="TIDELOG_METRICS",
    help="The broker's metrics endpoint HOST:PORT (a cluster: each broker's, comma-separated).",
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")
timeout_option = click.option("--timeout", "timeout_s", default=10.0, show_default=True,
                              help="Seconds to wait for the endpoint.")


def scrape(addresses: str, timeout_s: float) -> dict[str, Any]:
    """The timer families of one broker or several (comma-separated), added up."""
    merged: dict[str, Any] = {"delivered": 0, "cancelled": 0, "lag_ms": {},
                              "partitions": defaultdict(dict)}
    for address in [a.strip() for a in addresses.split(",") if a.strip()][:_MAX_ENDPOINTS]:
        one = _scrape_one(address, timeout_s)
        merged["delivered"] += one["delivered"]
        merged["cancelled"] += one["cancelled"]
        for quantile, value in one["lag_ms"].items():
            merged["lag_ms"][quantile] = max(value, merged["lag_ms"].get(quantile, value))
        for key, values in one["partitions"].items():
            into = merged["partitions"][key]
            pending = "tidelog_timer_pending"
            into[pending] = into.get(pending, 0) + values.get(pending, 0)
            due = values.get("tidelog_timer_next_due_timestamp_ms")
            if due is not None:
                known = into.get("tidelog_timer_next_due_timestamp_ms")
                into["tidelog_timer_next_due_timestamp_ms"] = due if known is None else min(
                    known, due)
    return merged


def _scrape_one(address: str, timeout_s: float) -> dict[str, Any]:
    """The timer families: {"partitions": {(topic, partition): {...}}, "delivered": n, ...}."""
    url = f"http://{address}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            text = response.read(_MAX_BYTES).decode("utf-8", "replace")
    except (urllib.error.URLError, OSError) as error:
        raise ToolError(f"cannot read {url}: {error}") from None
    partitions: dict[tuple[str, int], dict[str, float]] = defaultdict(dict)
    summary: dict[str, Any] = {"delivered": 0, "cancelled": 0, "lag_ms": {}}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = sample.labels
            if sample.name in ("tidelog_timer_pending", "tidelog_timer_next_due_timestamp_ms"):
                key = (labels["topic"], int(labels["partition"]))
                partitions[key][sample.name] = sample.value
            elif sample.name == "tidelog_timer_delivered_total":
                summary["delivered"] = int(sample.value)
            elif sample.name == "tidelog_timer_cancelled_total":
                summary["cancelled"] = int(sample.value)
            elif sample.name == "tidelog_timer_delivery_lag_ms":
                summary["lag_ms"][labels["quantile"]] = sample.value
    summary["partitions"] = partitions
    return summary


def _rows(partitions: dict[tuple[str, int], dict[str, float]]) -> list[dict[str, Any]]:
    rows = []
    for (topic, partition), values in sorted(partitions.items()):
        due = values.get("tidelog_timer_next_due_timestamp_ms")
        rows.append({
            "topic": topic, "partition": partition,
            "pending": int(values.get("tidelog_timer_pending", 0)),
            "next_due_ms": int(due) if due is not None else None,
        })
    return rows


def _when(due_ms: int | None) -> str:
    if due_ms is None:
        return "-"
    at = datetime.fromtimestamp(due_ms / 1000, tz=UTC).isoformat(timespec="milliseconds")
    return f"{at} (in {max(0.0, due_ms / 1000 - time.time()):.1f} s)"


@click.group("timers")
def timers() -> None:
    """Delayed delivery: pending records per topic and their next due times."""


@timers.command("list")
@metrics_option
@json_option
@timeout_option
def list_timers(metrics: str, as_json: bool, timeout_s: float) -> None:
    """Pending delayed records per topic, with the earliest due time."""
    summary = scrape(metrics, timeout_s)
    per_topic: dict[str, dict[str, Any]] = {}
    for row in _rows(summary["partitions"]):
        topic = per_topic.setdefault(row["topic"], {"topic": row["topic"], "pending": 0,
                                                    "partitions": 0, "next_due_ms": None})
        topic["pending"] += row["pending"]
        topic["partitions"] += 1
        due = row["next_due_ms"]
        if due is not None and (topic["next_due_ms"] is None or due < topic["next_due_ms"]):
            topic["next_due_ms"] = due
    if as_json:
        click.echo(json.dumps(list(per_topic.values())))
        return
    table = Table("TOPIC", "PARTITIONS", "PENDING", "NEXT DUE")
    for topic in per_topic.values():
        table.add_row(topic["topic"], str(topic["partitions"]), str(topic["pending"]),
                      _when(topic["next_due_ms"]))
    console.print(table)


@timers.command("describe")
@click.argument("topic")
@metrics_option
@json_option
@timeout_option
def describe_timers(topic: str, metrics: str, as_json: bool, timeout_s: float) -> None:
    """TOPIC's pending delayed records per partition, and the broker's delivery figures."""
    summary = scrape(metrics, timeout_s)
    rows = [row for row in _rows(summary["partitions"]) if row["topic"] == topic]
    if as_json:
        click.echo(json.dumps({
            "topic": topic, "partitions": rows, "delivered": summary["delivered"],
            "cancelled": summary["cancelled"], "lag_ms": summary["lag_ms"],
        }))
        return
    table = Table("PARTITION", "PENDING", "NEXT DUE")
    for row in rows:
        table.add_row(str(row["partition"]), str(row["pending"]), _when(row["next_due_ms"]))
    console.print(table)
    lag = summary["lag_ms"]
    console.print(
        f"broker: {summary['delivered']} delivered, {summary['cancelled']} cancelled; "
        f"delivery lag p50 {lag.get('0.5', '-')} ms, p99 {lag.get('0.99', '-')} ms"
    )
