"""A real ZooKeeper and real `tidelog serve --zookeeper` subprocesses on loopback.

Brokers keep their port and data directory across restarts, so a killed broker comes back as
the same replica. Every process is started here and stopped here by PID.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from confluent_kafka.admin import AdminClient, NewTopic

from tidelog.cluster.zookeeper_server import free_port
from tidelog.records.batch import iter_batches
from tidelog.records.record import iter_records

SESSION_TIMEOUT_MS = 3000
LAG_TIME_MAX_MS = 2000
HW_CHECKPOINT_MS = 500
T = TypeVar("T")
PartitionView = tuple[int, list[int], list[int]]  # (leader, replicas, isr) of one answer


def replica_log(data_dir: Path, topic: str, partition: int = 0) -> dict[int, bytes]:
    """offset -> value of every record in a (stopped) broker's copy of the partition."""
    files = sorted((data_dir / f"{topic}-{partition}").glob("*.log"))
    data = b"".join(p.read_bytes() for p in files)
    return {
        record.offset: record.value or b""
        for batch in iter_batches(data)
        for record in iter_records(batch)
    }


@dataclass
class BrokerProcess:
    node_id: int
    port: int
    data_dir: Path
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    advertise: str | None = None  # e.g. a proxy's address: followers dial this one
    zookeeper: str | None = None  # e.g. through a proxy; None = the cluster's connect string
    metrics: str = "off"  # e.g. "127.0.0.1:PORT" to scrape /metrics
    env: dict[str, str] = field(default_factory=dict)  # e.g. LD_PRELOAD of a fault shim

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


@dataclass
class Cluster:
    zookeeper: str
    root: Path
    extra_sets: tuple[str, ...] = ()
    brokers: dict[int, BrokerProcess] = field(default_factory=dict)

    def add(self, node_id: int) -> BrokerProcess:
        data_dir = self.root / f"broker-{node_id}"
        broker = BrokerProcess(node_id, free_port(), data_dir, self.root / f"broker-{node_id}.log")
        self.brokers[node_id] = broker
        return broker

    def start(self, node_id: int, timeout_s: float = 30.0) -> None:
        broker = self.brokers[node_id]
        command = [
            str(Path(sys.executable).with_name("tidelog")), "serve",
            "--data-dir", str(broker.data_dir),
            "--listen", broker.address,
            "--node-id", str(node_id),
            "--zookeeper", broker.zookeeper or self.zookeeper,
            "--metrics", broker.metrics,
            "--set", f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}",
            "--set", f"replica.lag.time.max.ms={LAG_TIME_MAX_MS}",
            "--set", "default.replication.factor=3",
            "--set", f"replica.high.watermark.checkpoint.interval.ms={HW_CHECKPOINT_MS}",
        ]
        if broker.advertise is not None:
            command += ["--advertise", broker.advertise]
        for item in self.extra_sets:
            command += ["--set", item]
        log = open(broker.log_path, "ab")  # noqa: SIM115 - owned by the child
        broker.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL,
            env={**os.environ, **broker.env} if broker.env else None,
        )
        log.close()
        assert broker.process.stdout is not None
        deadline = time.monotonic() + timeout_s
        line = broker.process.stdout.readline()  # blocks until the ready line or exit
        if b"tidelog ready" not in line or time.monotonic() > deadline:
            self.kill(node_id)
            raise RuntimeError(f"broker {node_id} did not start: {broker.log_path.read_text()}")

    def kill(self, node_id: int, signum: int = signal.SIGKILL) -> None:
        broker = self.brokers[node_id]
        if broker.process is not None and broker.process.poll() is None:
            os.kill(broker.process.pid, signum)
            if signum in (signal.SIGKILL, signal.SIGTERM):
                broker.process.wait(timeout=20)

    def signal(self, node_id: int, signum: int) -> None:
        process = self.brokers[node_id].process
        assert process is not None
        os.kill(process.pid, signum)

    def stop_all(self) -> None:
        for node_id, broker in self.brokers.items():
            if broker.process is not None and broker.process.poll() is None:
                os.kill(broker.process.pid, signal.SIGCONT)
                self.kill(node_id, signal.SIGKILL)

    def bootstrap(self) -> str:
        return ",".join(b.address for b in self.brokers.values() if b.alive())

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap()})

    @staticmethod
    def admin_of(address: str) -> AdminClient:
        """An admin client that talks to this one broker only (its own view of the cluster)."""
        return AdminClient({"bootstrap.servers": address})

    def create_topic(self, name: str, partitions: int = 1, replication: int = 3,
                     configs: dict[str, str] | None = None) -> None:
        admin = self.admin()  # must outlive the future
        futures = admin.create_topics(
            [NewTopic(name, partitions, replication, config=configs or {})], request_timeout=15
        )
        futures[name].result(timeout=20)

    def partition_state(self, topic: str, partition: int = 0) -> tuple[int, list[int], list[int]]:
        """(leader, replicas, isr) from Metadata."""
        metadata = self.admin().list_topics(topic, timeout=10)
        p = metadata.topics[topic].partitions[partition]
        return p.leader, list(p.replicas), list(p.isrs)

    def wait_for(self, predicate, timeout_s: float = 30.0, what: str = "condition") -> None:  # type: ignore[no-untyped-def]
        self.wait_value(predicate, bool, timeout_s, what)

    @staticmethod
    def wait_value(read: Callable[[], T], accept: Callable[[T], bool],
                   timeout_s: float = 30.0, what: str = "condition") -> T:
        """Poll `read()` until one reading passes `accept` and return that same reading.

        Brokers learn ZooKeeper changes from their own watches, so two readings (from the same
        broker or two) may disagree; a test acts on the one answer it checked, never on a
        second read that may come from another broker's older view."""
        deadline = time.monotonic() + timeout_s
        last: str = "no reading"
        while time.monotonic() < deadline:
            try:
                value = read()
            except Exception as error:
                last = f"error: {error!r}"
            else:
                if accept(value):
                    return value
                last = f"reading: {value!r}"
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what} (last {last})")

    def wait_for_partition(self, topic: str, accept: Callable[[PartitionView], bool],
                           partition: int = 0, timeout_s: float = 30.0,
                           what: str = "partition state") -> PartitionView:
        """The first Metadata answer with a live leader (not -1) that passes `accept`."""
        return self.wait_value(
            lambda: self.partition_state(topic, partition),
            lambda view: view[0] >= 0 and view[0] in self.brokers and accept(view),
            timeout_s, what,
        )
