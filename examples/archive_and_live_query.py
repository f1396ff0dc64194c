"""Batch query across archive and live data: archive the oldest clicks to Parquet, then count
page views over the whole history, read as one DataFrame (archived offsets from Parquet, the
rest from the broker; no gap, no overlap).

usage: .venv/bin/tidelog archive -b 127.0.0.1:9092 --topic clicks --older-than 1m \\
           --to /tmp/tidelog-example/archive
       .venv/bin/python examples/archive_and_live_query.py [--bootstrap 127.0.0.1:9092]
           [--topic clicks] [--archive /tmp/tidelog-example/archive]

Prints one line per partition, e.g.
    partition 0: 313 rows, offsets 0-312, 313 distinct, archived [0, 150)
(rows == distinct == last - first + 1 means every offset came back exactly once), then one line
per page, e.g. `page /cart: 80 views`.
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from pyspark.sql import SparkSession
from pyspark.sql.functions import col, count, countDistinct, from_json
from pyspark.sql.functions import max as max_
from pyspark.sql.functions import min as min_

import tidelog.spark
from tidelog.spark.archive import load_manifest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="clicks")
    parser.add_argument("--archive", default="/tmp/tidelog-example/archive")
    args = parser.parse_args()
    spark = (SparkSession.builder.master("local[2]").appName("archive-and-live")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    tidelog.spark.register(spark)
    history = (spark.read.format("tidelog")
               .option("kafka.bootstrap.servers", args.bootstrap)
               .option("subscribe", args.topic)
               .option("archive.path", args.archive)
               .load())
    manifest = load_manifest(args.archive)
    partitions = history.groupBy("partition").agg(
        count("*").alias("rows"), min_("offset").alias("first"), max_("offset").alias("last"),
        countDistinct("offset").alias("distinct"),
    ).orderBy("partition").collect()
    for p in partitions:
        ranges = manifest.ranges_of(args.topic, p.partition)
        archived = f"[{ranges[0].start_offset}, {ranges[-1].end_offset})" if ranges else "none"
        print(f"partition {p.partition}: {p.rows} rows, offsets {p.first}-{p.last}, "
              f"{p.distinct} distinct, archived {archived}")
    events = history.select(from_json(col("value").cast("string"),
                                      "user string, page string, ts_ms long").alias("e"))
    for row in events.groupBy("e.page").count().orderBy(col("count").desc(), "page").collect():
        print(f"page {row.page}: {row['count']} views")
    spark.stop()


if __name__ == "__main__":
    main()
