"""Streaming job: per-minute page counts under a 2-minute watermark, written exactly once to
the Tidelog topic `page-counts` and to Parquet (minutes in UTC).

usage: .venv/bin/python examples/page_counts_stream.py [--bootstrap 127.0.0.1:9092]
       [--topic clicks] [--output-topic page-counts] [--out /tmp/tidelog-example]
       [--available-now]

Each output record is keyed by page with a JSON value {"minute", "page", "count"}; the Parquet
files under OUT/page-counts hold the same rows. Checkpoints are under OUT/checkpoint-*.
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from pyspark.sql import SparkSession
from pyspark.sql.functions import col, from_json, struct, to_json, window

import tidelog.spark

EVENT_SCHEMA = "user string, page string, ts_ms long"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="clicks")
    parser.add_argument("--output-topic", default="page-counts")
    parser.add_argument("--out", default="/tmp/tidelog-example")
    parser.add_argument("--available-now", action="store_true",
                        help="process what is there, then stop (Trigger.AvailableNow)")
    args = parser.parse_args()
    spark = (SparkSession.builder.master("local[2]").appName("page-counts")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    tidelog.spark.register(spark)

    clicks = (spark.readStream.format("tidelog")
              .option("kafka.bootstrap.servers", args.bootstrap)
              .option("subscribe", args.topic)
              .option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", "5000")
              .load())
    events = (clicks.select(from_json(col("value").cast("string"), EVENT_SCHEMA).alias("e"))
              .select("e.page", (col("e.ts_ms") / 1000).cast("timestamp").alias("event_time")))
    counts = (events.withWatermark("event_time", "2 minutes")
              .groupBy(window("event_time", "1 minute"), "page").count()
              .select(col("window.start").alias("minute"), "page", "count"))

    def trigger(writer):  # type: ignore[no-untyped-def]
        return writer.trigger(availableNow=True) if args.available_now else writer

    # Append mode: a minute's count is emitted once, when the watermark passes its end.
    to_topic = trigger(
        counts.select(col("page").alias("key"),
                      to_json(struct("minute", "page", "count")).alias("value"))
        .writeStream.format("tidelog").outputMode("append")
        .option("kafka.bootstrap.servers", args.bootstrap).option("topic", args.output_topic)
        .option("checkpointLocation", os.path.join(args.out, "checkpoint-topic"))
    ).start()
    to_parquet = trigger(
        counts.writeStream.format("parquet").outputMode("append")
        .option("path", os.path.join(args.out, "page-counts"))
        .option("checkpointLocation", os.path.join(args.out, "checkpoint-parquet"))
    ).start()
    if args.available_now:
        to_topic.awaitTermination()
        to_parquet.awaitTermination()
    else:
        # Returns (raising its error) when either query stops, rather than waiting on the
        # first one while the second has failed.
        spark.streams.awaitAnyTermination()


if __name__ == "__main__":
    main()
