"""Spark data source benchmark (docs/benchmarks.md, "Spark data source").

1. Batch read: N messages of 250 bytes (2 partitions) through `format("tidelog")`, vs. a
   synthetic in-memory Python data source yielding the same rows as Arrow batches, interleaved
   A B A B ... for --rounds rounds in one run. Each read touches every value
   (sum(length(value))) and is checked against the expected count and bytes. Also prints the
   CPU per row of the Spark JVM, the Python workers and the broker (Linux /proc) for both.
   With Spark's own Kafka connector on the classpath (scripts/spark-kafka-jars; --no-kafka to
   leave it out) the same rounds also read through `format("kafka")` from this Tidelog and,
   after the same fill, from an Apache Kafka broker (scripts/kafka: 4.3.1, KRaft, one node)
   started beside it, plus `format("tidelog")` reading that Kafka: six readers interleaved.
2. Streaming latency (--latency): a producer sends --rate msg/s for --seconds with the send
   time in the value; a streaming query (tidelog -> tidelog sink, exactly-once) copies
   them to an output topic; a consumer computes receive time - send time. p50 / p99. 200
   warm-up messages go through the query first and are not measured.

usage: .venv/bin/python bench/spark_bench.py [--messages 1000000] [--rounds 3] [--latency]
                                             [--no-kafka]
Starts its own `tidelog serve` (and Apache Kafka) in a temporary directory unless --bootstrap
is given.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

import pyarrow as pa
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

import tidelog.spark
from tidelog.spark.schema import arrow_schema, spark_ddl

sys.path.insert(0, str(Path(__file__).resolve().parent))
from apache_kafka import ApacheKafka

ROOT = Path(__file__).resolve().parent.parent

VALUE_SIZE = 250
PARTITIONS = 2
ROWS_PER_BATCH = 10_000
WARM_UP_MESSAGES = 200


class SyntheticReader(DataSourceReader):  # type: ignore[misc]
    def __init__(self, rows: int) -> None:
        self.rows = rows

    def partitions(self) -> list[InputPartition]:
        share = self.rows // PARTITIONS
        return [InputPartition((p, share)) for p in range(PARTITIONS)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        index, count = partition.value
        value = pa.array([b"x" * VALUE_SIZE] * ROWS_PER_BATCH, pa.binary())
        keys = pa.nulls(ROWS_PER_BATCH, pa.binary())
        topic = pa.repeat(pa.scalar("synthetic", pa.string()), ROWS_PER_BATCH)
        part = pa.repeat(pa.scalar(index, pa.int32()), ROWS_PER_BATCH)
        stamp = pa.repeat(pa.scalar(1_700_000_000_000_000, pa.timestamp("us", tz="UTC")),
                          ROWS_PER_BATCH)
        kind = pa.repeat(pa.scalar(0, pa.int32()), ROWS_PER_BATCH)
        for start in range(0, count, ROWS_PER_BATCH):
            size = min(ROWS_PER_BATCH, count - start)
            offsets = pa.array(range(start, start + size), pa.int64())
            columns = [keys, value, topic, part, offsets, stamp, kind]
            yield pa.RecordBatch.from_arrays(
                [c.slice(0, size) if c is not offsets else c for c in columns],
                schema=arrow_schema(False),
            )


class SyntheticSource(DataSource):  # type: ignore[misc]
    @classmethod
    def name(cls) -> str:
        return "synthetic_kafka"

    def schema(self) -> str:
        return spark_ddl(False)

    def reader(self, schema: Any) -> DataSourceReader:
        return SyntheticReader(int(self.options["rows"]))


def start_broker(data_dir: str) -> tuple[subprocess.Popen[str], str]:
    tidelog = str(Path(sys.executable).with_name("tidelog"))
    process = subprocess.Popen(
        [tidelog, "serve", "--data-dir", data_dir, "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    assert process.stdout is not None
    for line in process.stdout:
        match = re.search(r"tidelog ready on (\S+)", line)
        if match:
            return process, match.group(1)
    raise RuntimeError("broker did not start")


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(30)


def fill(bootstrap: str, topic: str, messages: int) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                         "batch.size": 1_000_000, "queue.buffering.max.messages": 500_000})
    pool = [os.urandom(VALUE_SIZE) for _ in range(1024)]
    started = time.perf_counter()
    for index in range(messages):
        while True:
            try:
                producer.produce(topic, pool[index & 1023], partition=index % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(120) == 0
    return messages / (time.perf_counter() - started)


def cpu_seconds(broker_pid: int | dict[int, str] | None) -> dict[str, float]:
    """CPU time (user + system, all threads) so far of the Spark JVM, the Python workers and
    the broker, from /proc (Linux); empty elsewhere."""
    totals: dict[str, float] = {}
    if not os.path.isdir("/proc"):
        return totals
    tick = os.sysconf("SC_CLK_TCK")
    brokers = broker_pid if isinstance(broker_pid, dict) else {broker_pid: "broker"}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
            stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(entry) in brokers:
            kind = brokers[int(entry)]
        elif b"pyspark.daemon" in command:
            kind = "python workers"
        elif b"java" in command and b"pyspark" in command:
            kind = "JVM"
        else:
            continue
        totals[kind] = totals.get(kind, 0.0) + (int(stat[11]) + int(stat[12])) / tick
    return totals


def timed_read(
    frame: Any, expected_rows: int, broker_pid: int | dict[int, str] | None = None,
    cpu: dict[str, list[float]] | None = None,
) -> float:
    """Rows/s of one read; with `cpu`, appends each process kind's CPU seconds per row."""
    before = cpu_seconds(broker_pid) if cpu is not None else {}
    started = time.perf_counter()
    row = frame.selectExpr("count(*) AS n", "sum(length(value)) AS b").collect()[0]
    elapsed = time.perf_counter() - started
    assert row.n == expected_rows and row.b == expected_rows * VALUE_SIZE, row
    if cpu is not None:
        for kind, seconds in cpu_seconds(broker_pid).items():
            cpu.setdefault(kind, []).append((seconds - before.get(kind, 0.0)) / expected_rows)
    return expected_rows / elapsed


def cpu_summary(cpu: dict[str, list[float]]) -> str:
    return ", ".join(f"{kind} {statistics.median(per_row) * 1e6:.2f}"
                     for kind, per_row in sorted(cpu.items()))


def batch_benchmark(
    spark: SparkSession, bootstrap: str, messages: int, rounds: int, broker_pid: int | None,
    kafka: Any = None, connector: bool = False,
) -> None:
    topic = f"bench-{int(time.time())}"
    create_topic(bootstrap, topic, PARTITIONS)
    rate = fill(bootstrap, topic, messages)
    print(f"filled {messages} x {VALUE_SIZE} B in {PARTITIONS} partitions at {rate:,.0f} msg/s")
    pids: dict[int, str] = {broker_pid: "broker"} if broker_pid is not None else {}
    if kafka is not None:
        create_topic(kafka.bootstrap, topic, PARTITIONS)
        time.sleep(1)  # Kafka's metadata shows a new topic a moment after CreateTopics
        rate = fill(kafka.bootstrap, topic, messages)
        print(f"filled Apache Kafka at {rate:,.0f} msg/s")
        pids[kafka.pid] = "kafka broker"

    def live(direct: bool, server: str = bootstrap) -> Any:
        return (spark.read.format("tidelog").option("kafka.bootstrap.servers", server)
                .option("subscribe", topic).option("directFetch", str(direct).lower()).load())

    def spark_kafka(server: str) -> Any:
        return (spark.read.format("kafka").option("kafka.bootstrap.servers", server)
                .option("subscribe", topic).load())

    # Interleaved in each round: the default reader (direct Fetch + native decode), the
    # librdkafka reader (directFetch=false), and the synthetic in-memory source; with the
    # connector, Spark's format("kafka") on Tidelog and on Apache Kafka, and tidelog on Kafka.
    readers = {"tidelog": live(True), "tidelog librdkafka": live(False),
               "synthetic": spark.read.format("synthetic_kafka")
               .option("rows", str(messages)).load()}
    if connector:
        readers["kafka connector on tidelog"] = spark_kafka(bootstrap)
    if kafka is not None:
        readers["tidelog on kafka"] = live(True, kafka.bootstrap)
        if connector:
            readers["kafka connector on kafka"] = spark_kafka(kafka.bootstrap)
    for frame in readers.values():  # warm up workers, imports, cached connections
        timed_read(frame, messages)
    rates: dict[str, list[float]] = {name: [] for name in readers}
    cpu: dict[str, dict[str, list[float]]] = {name: {} for name in readers}
    ratios: dict[str, list[float]] = {name: [] for name in readers if name != "synthetic"}
    for index in range(rounds):
        # Alternate the order per round so drift on the shared machine hits every row alike.
        order = list(readers.items()) if index % 2 == 0 else list(readers.items())[::-1]
        for name, frame in order:
            rates[name].append(timed_read(frame, messages, pids, cpu[name]))
        synthetic = rates["synthetic"][-1]
        for name in ratios:
            ratios[name].append(rates[name][-1] / synthetic)
        print(f"round {index + 1}: " + ", ".join(
            f"{name} {values[-1]:,.0f} rows/s" for name, values in rates.items())
            + "; ratios " + ", ".join(f"{name} {r[-1]:.0%}" for name, r in ratios.items()))
    for name, values in rates.items():
        line = (f"median {name}: {statistics.median(values):,.0f} rows/s "
                f"(min {min(values):,.0f} max {max(values):,.0f})")
        if name in ratios:
            r = ratios[name]
            line += (f"; ratio to synthetic median {statistics.median(r):.0%} "
                     f"(min {min(r):.0%} max {max(r):.0%})")
        if cpu[name]:
            line += f"; CPU us/row: {cpu_summary(cpu[name])}"
        print(line)
    pairs = [("tidelog", "kafka connector on tidelog"),
             ("kafka connector on tidelog", "kafka connector on kafka"),
             ("tidelog", "kafka connector on kafka"), ("tidelog", "tidelog on kafka")]
    for a, b in pairs:
        if a in rates and b in rates:
            r = [x / y for x, y in zip(rates[a], rates[b], strict=True)]
            print(f"ratio {a} / {b} per round: " + ", ".join(f"{v:.2f}" for v in r)
                  + f" (median {statistics.median(r):.2f})")


def latency_benchmark(spark: SparkSession, bootstrap: str, rate: int, seconds: int,
                      checkpoint: str) -> None:
    source, sink = f"lat-in-{int(time.time())}", f"lat-out-{int(time.time())}"
    create_topic(bootstrap, source, PARTITIONS)
    create_topic(bootstrap, sink, 1)
    query = (spark.readStream.format("tidelog").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", source).option("startingOffsets", "earliest").load()
             .select("value")
             .writeStream.format("tidelog").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", sink).option("checkpointLocation", checkpoint)
             .trigger(processingTime="0 seconds").start())
    # Warm-up, not measured: the first non-empty micro-batch starts the Python workers of the
    # reader and the sink (~3-4 s here), which would otherwise be the p99 of a short run.
    warm_up = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1})
    for index in range(WARM_UP_MESSAGES):
        warm_up.produce(source, b"w" * VALUE_SIZE, partition=index % PARTITIONS)
    warm_up.flush(30)
    watch = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-watch"})
    deadline = time.monotonic() + 120
    while watch.get_watermark_offsets(TopicPartition(sink, 0), timeout=10)[1] < WARM_UP_MESSAGES:
        if time.monotonic() > deadline:
            raise RuntimeError("the streaming query did not copy the warm-up messages")
        time.sleep(0.1)
    watch.close()
    # ...and the micro-batch that copied them has finished (its commit comes after the data).
    while not any(p.numInputRows > 0 for p in query.recentProgress):
        if time.monotonic() > deadline:
            raise RuntimeError("the warm-up micro-batch did not finish")
        time.sleep(0.1)
    warm_batches = len(query.recentProgress)
    # Measured records start at the end of the warm-up output (its transactions' commit
    # markers take offsets too, so that is not WARM_UP_MESSAGES).
    watch = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-watch"})
    first_measured = watch.get_watermark_offsets(TopicPartition(sink, 0), timeout=10)[1]
    watch.close()
    total = rate * seconds

    def send() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1})
        started = time.perf_counter()
        for index in range(total):
            due = started + index / rate
            delay = due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            stamp = time.time_ns().to_bytes(8, "big")
            producer.produce(source, stamp + b"x" * (VALUE_SIZE - 8), partition=index % 2)
            producer.poll(0)
        producer.flush(30)

    sender = threading.Thread(target=send)
    sender.start()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(sink, 0, first_measured)])
    latencies: list[float] = []
    deadline = time.monotonic() + seconds + 60
    while len(latencies) < total and time.monotonic() < deadline:
        for message in consumer.consume(1000, timeout=0.05):
            value = message.value()
            if message.error() is None and value is not None:
                sent_ns = int.from_bytes(value[:8], "big")
                latencies.append((time.time_ns() - sent_ns) / 1e6)
    sender.join()
    measured = [p for p in query.recentProgress[warm_batches:] if p.numInputRows > 0]
    if measured:
        triggers = sorted(p.durationMs.get("triggerExecution", 0) for p in measured)
        print(f"{len(measured)} measured micro-batches: median {statistics.median(triggers):.0f} "
              f"ms (max {triggers[-1]}), median rows "
              f"{statistics.median(p.numInputRows for p in measured):.0f}")
    query.stop()
    consumer.close()
    latencies.sort()
    assert len(latencies) == total, f"received {len(latencies)} of {total}"
    p50 = latencies[len(latencies) // 2]
    p99 = latencies[int(len(latencies) * 0.99)]
    print(f"streaming latency at {rate} msg/s for {seconds} s ({total} msgs, exactly-once sink): "
          f"p50 {p50:.0f} ms, p99 {p99:.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap")
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency", action="store_true")
    parser.add_argument("--rate", type=int, default=10_000)
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--no-kafka", action="store_true",
                        help="no format(\"kafka\") rows and no Apache Kafka broker")
    args = parser.parse_args()
    jars = ""
    if not args.no_kafka:
        jars = subprocess.run([str(ROOT / "scripts" / "spark-kafka-jars")], check=True,
                              capture_output=True, text=True,
                              env={**os.environ, "TIDELOG_PYSPARK_PYTHON": sys.executable},
                              ).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="tidelog-spark-bench-") as scratch:
        process = None
        kafka = None
        bootstrap = args.bootstrap
        if bootstrap is None:
            process, bootstrap = start_broker(os.path.join(scratch, "data"))
        try:
            if not args.no_kafka and args.bootstrap is None and args.messages > 0:
                kafka = ApacheKafka(Path(scratch) / "kafka")
            spark = (SparkSession.builder.master("local[2]").appName("tidelog-spark-bench")
                     .config("spark.jars", jars)
                     .config("spark.ui.enabled", "false")
                     .config("spark.sql.shuffle.partitions", "2").getOrCreate())
            spark.sparkContext.setLogLevel("ERROR")
            tidelog.spark.register(spark)
            spark.dataSource.register(SyntheticSource)
            if args.messages > 0:
                broker_pid = process.pid if process is not None else None
                batch_benchmark(spark, bootstrap, args.messages, args.rounds, broker_pid,
                                kafka, connector=bool(jars))
            if args.latency:
                latency_benchmark(spark, bootstrap, args.rate, args.seconds,
                                  os.path.join(scratch, "checkpoint"))
            spark.stop()
        finally:
            if kafka is not None:
                kafka.stop()
            if process is not None:
                process.terminate()
                process.wait(30)


if __name__ == "__main__":
    main()
