"""Batch query across archive and live data: archive the oldest clicks to Parquet, then count
page views over the whole history, read as one DataFrame (archived offsets from Parquet, the
rest from the broker; no gap, no overlap).

usage: .venv/bin/tidelog archive -b 127.0.0.1:9092 --topic clicks --older-than 1m \\
           --to /tmp/tidelog-example/archive
       .venv/bin/python examples/archive_and_live_query.py [--bootstrap 127.0.0.1:9092]
           [--topic clicks] [--archive /tmp/tidelog-example/archive]
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from pyspark.sql import SparkSession
from pyspark.sql.functions import col, from_json
from pyspark.sql.functions import max as max_
from pyspark.sql.functions import min as min_

import tidelog.spark


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="clicks")
    parser.add_argument("--archive", default="/tmp/tidelog-example/archive")
    args = parser.parse_args()
    spark = (SparkSession.builder.master("local[2]").appName("archive-and-live")
             .config("spark.ui.enabled", "false").getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    tidelog.spark.register(spark)
    history = (spark.read.format("tidelog")
               .option("kafka.bootstrap.servers", args.bootstrap)
               .option("subscribe", args.topic)
               .option("archive.path", args.archive)
               .load())
    history.groupBy("partition").agg(
        min_("offset").alias("first_offset"), max_("offset").alias("last_offset"),
        (max_("offset") - min_("offset") + 1).alias("span")
    ).show()
    events = history.select(from_json(col("value").cast("string"),
                                      "user string, page string, ts_ms long").alias("e"))
    events.groupBy("e.page").count().orderBy(col("count").desc()).show()
    spark.stop()


if __name__ == "__main__":
    main()
