"""A streaming job run as its own process by test_spark_stream.py (so a test can SIGKILL it).

usage: stream_job.py BOOTSTRAP TOPIC CHECKPOINT OUTPUT
Small micro-batches (maxOffsetsPerTrigger) forever, each batch slowed down so that a kill
lands mid-batch.
"""

from __future__ import annotations

import os
import sys
import time

os.environ["PYSPARK_PYTHON"] = sys.executable

from pyspark.sql import SparkSession
from pyspark.sql.functions import udf

import tidelog.spark


def main() -> None:
    bootstrap, topic, checkpoint, output = sys.argv[1:5]
    spark = (SparkSession.builder.master("local[2]").appName("tidelog-stream-job")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    tidelog.spark.register(spark)
    source = (spark.readStream.format("tidelog").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", "20").load())

    @udf("binary")
    def slow(value: bytes) -> bytes:
        time.sleep(0.02)  # 20 rows per batch -> ~0.4 s per batch: room to be killed mid-batch
        return value

    frame = source.select("partition", "offset", slow("value").alias("value"))
    writer = (frame.writeStream.format("parquet").option("path", output)
              .option("checkpointLocation", checkpoint))
    writer.trigger(processingTime="100 milliseconds").start().awaitTermination()


if __name__ == "__main__":
    main()
