"""tidelog.spark: the `tidelog` PySpark data source (ARCHITECTURE D11).

    import tidelog.spark
    tidelog.spark.register(spark)
    spark.read.format("tidelog").option("kafka.bootstrap.servers", "127.0.0.1:9092")
        .option("subscribe", "clicks").load()

Options and row schema are those of Spark's built-in Kafka source; see docs/spark.md.
"""

from __future__ import annotations

from typing import Any


def register(spark: Any) -> None:
    """Register the `tidelog` format with a SparkSession (reader and writer, batch and stream)."""
    from tidelog.spark.source import TidelogDataSource

    spark.dataSource.register(TidelogDataSource)


__all__ = ["register"]
