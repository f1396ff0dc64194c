"""`tidelog archive`: move a topic's old records to Parquet with a Spark job (tidelog.spark)."""

from __future__ import annotations

import os
import re
import sys
import time

import click

from tidelog.cli.client import ToolError, base_config, bootstrap_option, check_reachable

_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|h|d)\s*$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_duration_ms(text: str) -> int:
    """`90s`, `15m`, `12h`, `7d`, `500ms` -> milliseconds."""
    match = _DURATION.match(text)
    if match is None:
        raise click.BadParameter(f"{text!r} is not a duration like 30s, 15m, 12h, 7d")
    return int(match.group(1)) * _UNIT_MS[match.group(2)]


@click.command()
@bootstrap_option
@click.option("--topic", required=True, help="Topic to archive.")
@click.option("--before", "before", type=int, default=None,
              help="Archive offsets below OFFSET (in every partition).")
@click.option("--older-than", "older_than", default=None,
              help="Archive records older than DURATION (e.g. 7d, 12h, 30m).")
@click.option("--to", "destination", required=True, type=click.Path(file_okay=False),
              help="Archive root directory (Parquet + manifest).")
@click.option("--master", default="local[2]", show_default=True, help="Spark master URL.")
def archive(
    bootstrap: str, topic: str, before: int | None, older_than: str | None, destination: str,
    master: str,
) -> None:
    """Write a topic's old records to Parquet (partitioned by topic and partition) and record
    the archived offset ranges in the archive manifest."""
    if (before is None) == (older_than is None):
        raise click.UsageError("give exactly one of --before OFFSET and --older-than DURATION")
    if before is not None and before < 0:
        raise click.BadParameter("must be >= 0", param_hint="'--before'")
    older_than_ms = parse_duration_ms(older_than) if older_than is not None else None
    check_reachable(bootstrap)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import tidelog.spark
    from tidelog.spark.archive import ArchiveError
    from tidelog.spark.archive_job import run_archive
    from tidelog.spark.options import SourceOptionError

    spark = (SparkSession.builder.master(master).appName("tidelog-archive")
             .config("spark.ui.enabled", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    tidelog.spark.register(spark)
    config = {k: str(v) for k, v in base_config(bootstrap).items() if k == "bootstrap.servers"}
    try:
        results = run_archive(spark, config, os.path.abspath(destination), topic,
                              before_offset=before, older_than_ms=older_than_ms,
                              now_ms=int(time.time() * 1000))
    except (SourceOptionError, ArchiveError) as exc:
        raise ToolError(str(exc)) from None
    finally:
        spark.stop()
    if not results:
        click.echo(f"nothing to archive in {topic}")
    for r in results:
        click.echo(f"archived {r.topic}/{r.partition} offsets [{r.start_offset}, {r.end_offset}) "
                   f"in {r.files} file(s)")
