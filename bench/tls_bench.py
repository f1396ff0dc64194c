"""TLS against plaintext in one run: the seed workload's produce and consume over PLAINTEXT,
SSL and SASL_SSL (SCRAM-SHA-256) listeners of one broker, and the broker's CPU time.

    PYTHONPATH=src .venv/bin/python bench/tls_bench.py [--messages 300000] [--rounds 2]

One `tidelog serve` with three listeners (certificates from `tidelog certs`, a user from
`tidelog users add`), pagecache durability. Per round and listener: produce --messages values
of 200-300 bytes (confluent-kafka, acks=1, no compression, one partition, a topic per
listener) until flush() returns, then consume them by assign from offset 0; the broker's CPU
seconds (utime+stime from /proc) are read around each phase. Correctness: counts and value
bytes equal. Prints a Markdown table (median of the rounds).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

USER, PASSWORD = "bench", "bench-secret"


def tidelog(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "tidelog.cli.main", *args], check=True,
                   capture_output=True)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def produce(conf: dict[str, str], topic: str, values: list[bytes], count: int) -> float:
    producer = Producer({**conf, "acks": "1", "linger.ms": 5, "batch.size": 1_000_000,
                         "queue.buffering.max.messages": 1_000_000})
    started = time.perf_counter()
    for index in range(count):
        while True:
            try:
                producer.produce(topic, values[index % len(values)], partition=0)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(120) == 0
    return time.perf_counter() - started


def consume(conf: dict[str, str], topic: str, count: int) -> tuple[float, int]:
    consumer = Consumer({**conf, "group.id": f"bench-{topic}", "enable.auto.commit": False,
                         "fetch.max.bytes": 52_428_800})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = total = 0
    started = time.perf_counter()
    while got < count:
        for message in consumer.consume(10_000, 5):
            if message.error() is None:
                got += 1
                total += len(message.value())
    elapsed = time.perf_counter() - started
    consumer.close()
    return elapsed, total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    generator = random.Random(7)
    values = [bytes(generator.getrandbits(8) for _ in range(generator.randint(200, 300)))
              for _ in range(1000)]
    expected_bytes = sum(len(values[i % len(values)]) for i in range(args.messages))
    with tempfile.TemporaryDirectory() as tmp:
        certs, data = f"{tmp}/certs", f"{tmp}/data"
        tidelog("certs", "--dir", certs)
        tidelog("users", "add", USER, "--password", PASSWORD, "--data-dir", data)
        with open(f"{tmp}/broker.log", "w") as log_file:
            broker = subprocess.Popen(
                [sys.executable, "-m", "tidelog.cli.main", "serve", "--data-dir", data,
                 "--metrics", "off", "--set",
                 "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
                 "--set", f"ssl.keystore.location={certs}/broker.pem",
                 "--set", f"ssl.truststore.location={certs}/ca.pem"],
                stdout=subprocess.PIPE, stderr=log_file,
            )
        try:
            assert broker.stdout is not None
            broker.stdout.readline()  # the ready line: every listener is bound
            text = Path(f"{tmp}/broker.log").read_text()
            ports = dict(re.findall(r"listener (\S+) \(\S+\) on \S+:(\d+)", text))
            tls = {"ssl.ca.location": f"{certs}/ca.pem"}
            confs = {
                "PLAINTEXT": {},
                "SSL": {"security.protocol": "SSL", **tls},
                "SASL_SSL": {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
                             "sasl.username": USER, "sasl.password": PASSWORD, **tls},
            }
            results: dict[str, dict[str, list[float]]] = {}
            for round_index in range(args.rounds):
                for name, extra in confs.items():
                    conf = {"bootstrap.servers": f"127.0.0.1:{ports[name]}", **extra}
                    topic = f"bench-{name.lower()}-{round_index}"
                    cpu = cpu_seconds(broker.pid)
                    produced_s = produce(conf, topic, values, args.messages)
                    produce_cpu = cpu_seconds(broker.pid) - cpu
                    cpu = cpu_seconds(broker.pid)
                    consumed_s, total = consume(conf, topic, args.messages)
                    consume_cpu = cpu_seconds(broker.pid) - cpu
                    assert total == expected_bytes, (total, expected_bytes)
                    row = results.setdefault(name, {})
                    for key, value in (("produce", args.messages / produced_s),
                                       ("consume", args.messages / consumed_s),
                                       ("produce_cpu", produce_cpu / args.messages * 1e6),
                                       ("consume_cpu", consume_cpu / args.messages * 1e6)):
                        row.setdefault(key, []).append(value)
        finally:
            broker.terminate()
            broker.wait(20)
    base = {k: statistics.median(v) for k, v in results["PLAINTEXT"].items()}
    print(f"{args.messages} messages x {args.rounds} rounds (median)\n")
    print("| listener | produce msg/s | vs plaintext | consume msg/s | vs plaintext |"
          " broker CPU s per 1M produced | per 1M consumed |")
    print("|---|---|---|---|---|---|---|")
    for name, row in results.items():
        median = {k: statistics.median(v) for k, v in row.items()}
        print(f"| {name} | {median['produce']:,.0f} | {median['produce'] / base['produce']:.0%}"
              f" | {median['consume']:,.0f} | {median['consume'] / base['consume']:.0%}"
              f" | {median['produce_cpu']:.1f} | {median['consume_cpu']:.1f} |")


if __name__ == "__main__":
    main()
