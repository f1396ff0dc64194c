"""The client side of the mixed-nemesis run (run as a script inside the client namespace).

    python jepsen_workload.py BOOTSTRAP TOPIC PARTITIONS SECONDS HISTORY_DIR

For SECONDS it runs, each in its own process (so one client blocked in a call never stalls
another: they would share a GIL as threads):
- one idempotent acks=all producer sending unique values ("<n>") round-robin to the
  partitions, about 60 a second;
- two consumers in a classic group and one in a KIP-848 group (`group.protocol=consumer`),
  polling and committing synchronously after each poll that returned records.
Then it stops the consumers, flushes the producer (bounded), and reads every partition from
offset 0 to its high watermark with an assigned consumer (the final read).

Every operation is one JSON line in HISTORY_DIR/<process>.jsonl (Jepsen's shape; `t` is
seconds since the run's start on the wall clock, shared by the processes):
    {"t": seconds since start, "process": "producer" | "classic-0" | ... | "final",
     "type": "invoke" | "ok" | "fail" | "info", "f": "send" | "poll" | "commit" | "assign"
     | "read", ...}
`send` ok carries partition and offset; a send that timed out is `info` (indefinite: it may or
may not have been written), a definite refusal is `fail`. `poll` ok carries the records as
[partition, offset, value]; `commit` ok carries the committed [partition, offset] pairs;
`assign` carries the partitions a consumer got (a new session: the checker's monotonicity is
per session). The process prints one line {"done": true, ...counts} at the end.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

SEND_INTERVAL_S = 1 / 60
START = time.time()  # replaced by the parent's start in every child


class History:
    def __init__(self, path: str) -> None:
        self._file = open(path, "w", buffering=1)  # noqa: SIM115 (closed by close())
        self._lock = threading.Lock()

    def add(self, process: str, kind: str, f: str, **fields: Any) -> None:
        line = {"t": round(time.time() - START, 4), "process": process, "type": kind,
                "f": f, **fields}
        with self._lock:
            self._file.write(json.dumps(line, separators=(",", ":")) + "\n")

    def close(self) -> None:
        self._file.close()


def produce(bootstrap: str, topic: str, partitions: int, until: float, history: History) -> None:
    producer = Producer({
        "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
        "message.timeout.ms": 20_000, "linger.ms": 2, "log_level": 2,
        "topic.metadata.refresh.interval.ms": 2000,
    })

    def delivered(error: KafkaError | None, message: Any) -> None:
        value = message.value().decode()
        if error is None:
            history.add("producer", "ok", "send", value=value, partition=message.partition(),
                        offset=message.offset())
        elif error.code() in (KafkaError._MSG_TIMED_OUT, KafkaError._TIMED_OUT,
                              KafkaError.REQUEST_TIMED_OUT, KafkaError._TRANSPORT):
            history.add("producer", "info", "send", value=value, error=error.name())
        else:
            history.add("producer", "fail", "send", value=value, error=error.name())

    number = 0
    next_send = time.monotonic()
    while time.monotonic() < until:
        value = str(number)
        partition = number % partitions
        history.add("producer", "invoke", "send", value=value, partition=partition)
        try:
            producer.produce(topic, value=value.encode(), partition=partition,
                             on_delivery=delivered)
        except BufferError:
            history.add("producer", "fail", "send", value=value, error="queue full")
        number += 1
        next_send += SEND_INTERVAL_S
        producer.poll(0)  # serves delivery callbacks; returns early, so pace with sleep
        time.sleep(max(0.0, next_send - time.monotonic()))
    remaining = producer.flush(30)
    # Whatever is still queued after the flush is indefinite; librdkafka reports it as
    # timed out through the callbacks above when message.timeout.ms passes.
    producer.poll(0)
    history.add("producer", "info", "flush", remaining=remaining)


def consume(bootstrap: str, topic: str, group: str, protocol: str, name: str, until: float,
            history: History) -> None:
    settings = {
        "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "log_level": 2, "topic.metadata.refresh.interval.ms": 2000,
    }
    if protocol == "consumer":
        settings["group.protocol"] = "consumer"
    else:
        settings.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000,
                         "partition.assignment.strategy": "range"})

    def assigned(_consumer: Any, partitions: list[TopicPartition]) -> None:
        history.add(name, "ok", "assign", partitions=sorted(p.partition for p in partitions))

    def revoked(_consumer: Any, partitions: list[TopicPartition]) -> None:
        history.add(name, "ok", "revoke", partitions=sorted(p.partition for p in partitions))

    consumer = Consumer(settings)
    consumer.subscribe([topic], on_assign=assigned, on_revoke=revoked)
    try:
        while time.monotonic() < until:
            messages = consumer.consume(100, 0.5)
            records = [[m.partition(), m.offset(), m.value().decode()]
                       for m in messages if m.error() is None]
            if not records:
                continue
            history.add(name, "ok", "poll", records=records)
            ends: dict[int, int] = {}
            for partition, offset, _ in records:
                ends[partition] = max(ends.get(partition, -1), offset + 1)
            history.add(name, "invoke", "commit", offsets=sorted(ends.items()))
            try:
                committed = consumer.commit(
                    offsets=[TopicPartition(topic, p, o) for p, o in ends.items()],
                    asynchronous=False)
                history.add(name, "ok", "commit", offsets=sorted(
                    (tp.partition, tp.offset) for tp in committed or [] if tp.error is None))
            except KafkaException as error:
                history.add(name, "fail", "commit", error=str(error.args[0].name()))
    finally:
        consumer.close()


def final_read(bootstrap: str, topic: str, partitions: int, history: History) -> int:
    """Every partition from 0 to its high watermark; retried until the cluster answers."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "jepsen-final",
                         "enable.auto.commit": False, "log_level": 2})
    total = 0
    try:
        for partition in range(partitions):
            deadline = time.monotonic() + 120
            while True:
                try:
                    _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                             timeout=10)
                    break
                except KafkaException:
                    if time.monotonic() > deadline:
                        raise
            consumer.assign([TopicPartition(topic, partition, 0)])
            history.add("final", "ok", "assign", partitions=[partition], high=high)
            records: list[list[Any]] = []
            position = 0
            while position < high and time.monotonic() < deadline:
                for message in consumer.consume(500, 1.0):
                    if message.error() is None:
                        records.append([partition, message.offset(), message.value().decode()])
                        position = message.offset() + 1
            history.add("final", "ok", "read", partition=partition, high=high, records=records,
                        complete=position >= high)
            total += len(records)
    finally:
        consumer.close()
    return total


def child(role: str, bootstrap: str, topic: str, partitions: int, until: float,
          directory: Path) -> None:
    history = History(str(directory / f"{role}.jsonl"))
    try:
        if role == "producer":
            produce(bootstrap, topic, partitions, until, history)
        elif role.startswith("classic-"):
            consume(bootstrap, topic, "jepsen-classic", "classic", role, until, history)
        else:
            consume(bootstrap, topic, "jepsen-848", "consumer", role, until, history)
    finally:
        history.close()


def main() -> None:
    global START
    if sys.argv[1] == "--child":
        role, bootstrap, topic, partitions, until, directory, start = sys.argv[2:9]
        START = float(start)
        child(role, bootstrap, topic, int(partitions), float(until), Path(directory))
        return
    bootstrap, topic, partitions, seconds, directory = sys.argv[1:6]
    until = time.monotonic() + float(seconds)  # CLOCK_MONOTONIC is system-wide
    roles = ["producer", "classic-0", "classic-1", "kip848-0"]
    children = [
        subprocess.Popen([sys.executable, __file__, "--child", role, bootstrap, topic, partitions,
                          str(until), directory, str(START)], stdin=subprocess.DEVNULL)
        for role in roles
    ]
    codes = [process.wait() for process in children]
    print(json.dumps({"phase": "workload done", "exit_codes": codes}), flush=True)
    # The final read waits for the harness: it heals everything first and says so on stdin.
    sys.stdin.readline()
    history = History(str(Path(directory) / "final.jsonl"))
    read = final_read(bootstrap, topic, int(partitions), history)
    history.close()
    print(json.dumps({"done": True, "final_read": read}), flush=True)


if __name__ == "__main__":
    main()
