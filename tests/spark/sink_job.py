"""A streaming query into the transactional sink, run as its own process by
test_spark_sink_kills.py so the test can SIGKILL it.

usage: sink_job.py BOOTSTRAP SOURCE_TOPIC SINK_TOPIC CHECKPOINT FLAG_DIR

Kill points the test arms by creating a file in FLAG_DIR before it starts the job:
  arm-task    a write task, after handing its last record to the producer and committing its
              batch id to the transaction, before commit_transaction: writes reached-task and
              waits there (its records are in the log, inside an open transaction);
  arm-driver  the driver's commit() of a batch whose tasks all committed, before Spark records
              the batch in the checkpoint: writes reached-driver and waits there.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

os.environ["PYSPARK_PYTHON"] = sys.executable

from pyspark.sql import SparkSession

import tidelog.spark
from tidelog.spark.sink import TidelogStreamWriter, parse_sink_options
from tidelog.spark.source import TidelogDataSource

PARK_S = 60.0  # longer than the test takes to see the flag and kill


def park_if_armed(flag_dir: str, point: str) -> None:
    if os.path.exists(os.path.join(flag_dir, f"arm-{point}")):
        Path(flag_dir, f"reached-{point}").touch()
        time.sleep(PARK_S)


class KillPointWriter(TidelogStreamWriter):
    def __init__(self, options, flag_dir: str) -> None:  # type: ignore[no-untyped-def]
        super().__init__(options)
        self.flag_dir = flag_dir

    def before_commit(self) -> None:
        park_if_armed(self.flag_dir, "task")

    def commit(self, messages, batchId) -> None:  # type: ignore[no-untyped-def]
        park_if_armed(self.flag_dir, "driver")
        super().commit(messages, batchId)


class KillPointSource(TidelogDataSource):
    @classmethod
    def name(cls) -> str:
        return "tidelog_kill_points"

    def streamWriter(self, schema, overwrite):  # type: ignore[no-untyped-def]
        return KillPointWriter(parse_sink_options(self.options), self.options["flagdir"])


def main() -> None:
    bootstrap, source_topic, sink_topic, checkpoint, flag_dir = sys.argv[1:6]
    spark = (SparkSession.builder.master("local[2]").appName("tidelog-sink-job")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    tidelog.spark.register(spark)
    spark.dataSource.register(KillPointSource)
    frame = source_frame(spark, bootstrap, source_topic)
    (frame.writeStream.format("tidelog_kill_points").option("kafka.bootstrap.servers", bootstrap)
     .option("topic", sink_topic).option("flagDir", flag_dir)
     .option("checkpointLocation", checkpoint)
     .trigger(processingTime="50 milliseconds").start().awaitTermination())


def source_frame(spark, bootstrap: str, source_topic: str):  # type: ignore[no-untyped-def]
    """The query's plan; the test's final run uses the same one."""
    return (spark.readStream.format("tidelog").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", source_topic).option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "40").load()
            .selectExpr("CAST(offset AS STRING) AS key",
                        "concat(CAST(partition AS STRING), ':', CAST(offset AS STRING)) AS value"))


if __name__ == "__main__":
    main()
