"""The systems bench/peers.py compares: each starts its server from the Debian package on
127.0.0.1 (own data dir, own ports), runs the seed workload's produce and consume phases with its
usual Python client, and reports what it measured plus the numbers the checks need.

Settings (WORKLOAD.md): Redis Streams with redis-py pipelines of 1000 and AOF everysec; NATS
JetStream with file storage and nats-py; RabbitMQ Streams with rstream; Tidelog with
confluent-kafka (the `tidelog bench` runners). Consume = a consumer in a group that touches every
value and commits after every batch: Redis XREADGROUP COUNT 1000 + XACK; NATS pull fetch(1000) +
ack_sync of the last message (AckPolicy.ALL); RabbitMQ store_offset every 1000 messages (the
stream protocol has no per-delivery batch, and store_offset has no reply: the final offset is
read back with query_offset); Tidelog commit(asynchronous=False) after every consume() batch.
"""

from __future__ import annotations

import abc
import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BATCH = 1000
START_TIMEOUT_S = 60.0


@dataclass
class Phase:
    seconds: float
    count: int
    bytes: int
    checks: dict[str, bool] = field(default_factory=dict)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_port(port: int, process: subprocess.Popen[bytes], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"nothing listening on 127.0.0.1:{port} after {timeout_s:g}s")


class System(abc.ABC):
    """One peer: start() the server, produce(values) and consume(values), stop()."""

    name = ""
    _process: subprocess.Popen[bytes] | None = None

    def __init__(self, work_dir: Path) -> None:
        self.dir = work_dir / self.name
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)
        self.log = (self.dir / "server.log").open("ab")

    def _spawn(self, args: list[str], env: dict[str, str] | None = None) -> None:
        # Own session: stop() signals exactly this server's process group (the Erlang VM
        # spawns helpers); nothing else is touched.
        self._process = subprocess.Popen(
            args,
            stdout=self.log,
            stderr=self.log,
            stdin=subprocess.DEVNULL,
            cwd=self.dir,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            os.killpg(self._process.pid, signal.SIGTERM)
            try:
                self._process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self._process.pid, signal.SIGKILL)
                self._process.wait(10)
        self.log.close()

    @abc.abstractmethod
    def start(self) -> None: ...

    @abc.abstractmethod
    def produce(self, values: list[bytes]) -> Phase: ...

    @abc.abstractmethod
    def consume(self, values: list[bytes]) -> Phase: ...

    @abc.abstractmethod
    def version(self) -> str: ...

    @abc.abstractmethod
    def drop(self) -> None:
        """Delete this round's stream (keeps memory and disk flat across rounds)."""


class Tidelog(System):
    name = "tidelog"

    def start(self) -> None:
        self.port = free_port()
        self._spawn(
            [
                sys.executable,
                "-m",
                "tidelog.cli.main",
                "serve",
                "--data-dir",
                str(self.dir / "data"),
                "--listen",
                f"127.0.0.1:{self.port}",
                "--metrics",
                "off",
                "--log-level",
                "WARNING",
            ]
        )
        wait_port(self.port, self._process, START_TIMEOUT_S)  # type: ignore[arg-type]
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.round = 0

    def version(self) -> str:
        from importlib.metadata import version

        return version("tidelog")

    def produce(self, values: list[bytes]) -> Phase:
        from tidelog.cli import perf

        self.round += 1
        self.topic = f"peers-{self.round}"
        perf.ensure_topic(self.bootstrap, self.topic, 1)
        pool = perf.ValuePool(tuple(values))
        result = perf.run_produce(self.bootstrap, self.topic, len(values), pool)
        return Phase(result.seconds, result.messages, result.bytes, dict(result.checks))

    def consume(self, values: list[bytes]) -> Phase:
        from tidelog.cli import perf

        expected = sum(map(len, values))
        result = perf.run_consume(self.bootstrap, self.topic, len(values), expected_bytes=expected)
        return Phase(result.seconds, result.messages, result.bytes, dict(result.checks))

    def drop(self) -> None:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.delete_topics([self.topic])[self.topic].result(timeout=30)


class Redis(System):
    name = "redis"

    def start(self) -> None:
        self.port = free_port()
        self._spawn(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(self.dir),
                "--appendonly",
                "yes",
                "--appendfsync",
                "everysec",
                "--save",
                "",
                "--protected-mode",
                "no",
            ]
        )
        wait_port(self.port, self._process, START_TIMEOUT_S)  # type: ignore[arg-type]
        import redis

        self.client = redis.Redis(host="127.0.0.1", port=self.port)
        self.round = 0

    def version(self) -> str:
        return str(self.client.info("server")["redis_version"])

    def produce(self, values: list[bytes]) -> Phase:
        self.round += 1
        self.stream = f"peers-{self.round}"
        acked = acked_bytes = 0
        started = time.perf_counter()
        for begin in range(0, len(values), BATCH):
            pipe = self.client.pipeline(transaction=False)
            chunk = values[begin : begin + BATCH]
            for value in chunk:
                pipe.xadd(self.stream, {b"v": value})
            acked += sum(1 for entry_id in pipe.execute() if entry_id)
            acked_bytes += sum(map(len, chunk))
        seconds = time.perf_counter() - started
        stored = self.client.xlen(self.stream)
        return Phase(
            seconds,
            acked,
            acked_bytes,
            {"acked == sent": acked == len(values), "stored == sent": stored == len(values)},
        )

    def consume(self, values: list[bytes]) -> Phase:
        self.client.xgroup_create(self.stream, "bench", id="0")
        count = size = 0
        started = time.perf_counter()
        while count < len(values):
            reply: Any = self.client.xreadgroup(
                "bench", "c1", {self.stream: ">"}, count=BATCH, block=5000
            )
            if not reply:
                break
            entries: list[tuple[bytes, dict[bytes, bytes]]] = reply[0][1]  # type: ignore[index]
            for _, fields in entries:
                size += len(fields[b"v"])
            count += len(entries)
            self.client.xack(self.stream, "bench", *[entry_id for entry_id, _ in entries])
        seconds = time.perf_counter() - started
        pending = self.client.xpending(self.stream, "bench")["pending"]
        return Phase(
            seconds,
            count,
            size,
            {
                "read == sent": count == len(values),
                "bytes == sent": size == sum(map(len, values)),
                "all acked": pending == 0,
            },
        )

    def drop(self) -> None:
        self.client.delete(self.stream)


class Nats(System):
    name = "nats"

    def start(self) -> None:
        self.port = free_port()
        self._spawn(
            [
                "nats-server",
                "-js",
                "-sd",
                str(self.dir / "jetstream"),
                "-a",
                "127.0.0.1",
                "-p",
                str(self.port),
            ]
        )
        wait_port(self.port, self._process, START_TIMEOUT_S)  # type: ignore[arg-type]
        self.round = 0

    def version(self) -> str:
        out = subprocess.run(["nats-server", "--version"], capture_output=True, text=True)
        return out.stdout.strip().removeprefix("nats-server: ")

    async def _connect(self) -> Any:
        import nats

        return await nats.connect(f"nats://127.0.0.1:{self.port}")

    def produce(self, values: list[bytes]) -> Phase:
        self.round += 1
        self.stream = f"PEERS{self.round}"
        return asyncio.run(self._produce(values))

    async def _produce(self, values: list[bytes]) -> Phase:
        from nats.js.api import StorageType

        connection = await self._connect()
        js = connection.jetstream()
        await js.add_stream(
            name=self.stream, subjects=[self.stream.lower()], storage=StorageType.FILE
        )
        subject = self.stream.lower()
        acked = acked_bytes = 0
        started = time.perf_counter()
        for begin in range(0, len(values), BATCH):
            chunk = values[begin : begin + BATCH]
            # A window of BATCH publishes in flight, each awaiting its JetStream ack.
            acks = await asyncio.gather(*(js.publish(subject, value) for value in chunk))
            acked += sum(1 for ack in acks if ack.seq)
            acked_bytes += sum(map(len, chunk))
        seconds = time.perf_counter() - started
        info = await js.stream_info(self.stream)
        await connection.close()
        return Phase(
            seconds,
            acked,
            acked_bytes,
            {
                "acked == sent": acked == len(values),
                "stored == sent": info.state.messages == len(values),
            },
        )

    def consume(self, values: list[bytes]) -> Phase:
        return asyncio.run(self._consume(values))

    async def _consume(self, values: list[bytes]) -> Phase:
        from nats.errors import TimeoutError as NatsTimeout
        from nats.js.api import AckPolicy, ConsumerConfig

        connection = await self._connect()
        js = connection.jetstream()
        subscription = await js.pull_subscribe(
            self.stream.lower(),
            durable="bench",
            stream=self.stream,
            config=ConsumerConfig(ack_policy=AckPolicy.ALL, max_ack_pending=-1),
        )
        count = size = 0
        started = time.perf_counter()
        while count < len(values):
            try:
                messages = await subscription.fetch(BATCH, timeout=5)
            except NatsTimeout:
                break
            for message in messages:
                size += len(message.data)
            count += len(messages)
            await messages[-1].ack_sync()  # AckPolicy.ALL: acknowledges the whole batch
        seconds = time.perf_counter() - started
        info = await subscription.consumer_info()
        await connection.close()
        return Phase(
            seconds,
            count,
            size,
            {
                "read == sent": count == len(values),
                "bytes == sent": size == sum(map(len, values)),
                "all acked": info.ack_floor.stream_seq == len(values),
            },
        )

    def drop(self) -> None:
        async def delete() -> None:
            connection = await self._connect()
            await connection.jetstream().delete_stream(self.stream)
            await connection.close()

        asyncio.run(delete())


class RabbitMQ(System):
    name = "rabbitmq"

    def start(self) -> None:
        self.amqp_port, self.stream_port, self.dist_port, self.epmd_port = (
            free_port(),
            free_port(),
            free_port(),
            free_port(),
        )
        (self.dir / "enabled_plugins").write_text("[rabbitmq_stream].\n")
        (self.dir / "rabbitmq.conf").write_text(
            f"listeners.tcp.default = 127.0.0.1:{self.amqp_port}\n"
            f"stream.listeners.tcp.default = 127.0.0.1:{self.stream_port}\n"
            f"stream.advertised_host = 127.0.0.1\nstream.advertised_port = {self.stream_port}\n"
            "loopback_users = none\n"
        )
        env = {
            "ERL_EPMD_PORT": str(self.epmd_port),
            "HOME": str(self.dir),
            "RABBITMQ_NODENAME": "peers@localhost",
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_MNESIA_BASE": str(self.dir / "mnesia"),
            "RABBITMQ_LOG_BASE": str(self.dir / "log"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(self.dir / "enabled_plugins"),
            "RABBITMQ_CONFIG_FILE": str(self.dir / "rabbitmq"),
            # No busy-waiting schedulers: an idle VM must not steal CPU from the others.
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "+sbwt none +sbwtdcpu none +sbwtdio none",
        }
        # Our own epmd on a private port, in the server's process group: stop() ends both.
        self._spawn(
            [
                "sh",
                "-c",
                f"epmd -port {self.epmd_port} & exec /usr/lib/rabbitmq/bin/rabbitmq-server",
            ],
            env,
        )
        wait_port(self.stream_port, self._process, START_TIMEOUT_S)  # type: ignore[arg-type]
        self.round = 0

    def version(self) -> str:
        out = subprocess.run(
            ["dpkg-query", "-W", "-f=${Version}", "rabbitmq-server"], capture_output=True, text=True
        )
        return out.stdout.strip()

    def _client_args(self) -> dict[str, Any]:
        return {
            "host": "127.0.0.1",
            "port": self.stream_port,
            "username": "guest",
            "password": "guest",
        }

    def produce(self, values: list[bytes]) -> Phase:
        self.round += 1
        self.stream = f"peers-{self.round}"
        return asyncio.run(self._produce(values))

    async def _produce(self, values: list[bytes]) -> Phase:
        from rstream import Producer, RawMessage

        producer = Producer(**self._client_args())
        await producer.start()
        await producer.create_stream(self.stream, exists_ok=True)
        state = {"confirmed": 0, "failed": 0}
        done = asyncio.Event()

        def on_confirm(status: Any) -> None:
            state["confirmed" if status.is_confirmed else "failed"] += 1
            if state["confirmed"] + state["failed"] == len(values):
                done.set()

        started = time.perf_counter()
        for begin in range(0, len(values), BATCH):
            await producer.send_batch(
                self.stream,
                [RawMessage(v) for v in values[begin : begin + BATCH]],
                on_publish_confirm=on_confirm,
            )
        await asyncio.wait_for(done.wait(), timeout=300)
        seconds = time.perf_counter() - started
        await producer.close()
        return Phase(
            seconds,
            state["confirmed"],
            sum(map(len, values)),
            {"confirmed == sent": state["confirmed"] == len(values)},
        )

    def consume(self, values: list[bytes]) -> Phase:
        return asyncio.run(self._consume(values))

    async def _consume(self, values: list[bytes]) -> Phase:
        from rstream import Consumer, ConsumerOffsetSpecification, OffsetType

        consumer = Consumer(**self._client_args())
        await consumer.start()
        state = {"count": 0, "bytes": 0, "last": -1}
        done = asyncio.Event()
        total = len(values)

        async def on_message(message: Any, context: Any) -> None:
            state["count"] += 1
            state["bytes"] += len(message)
            state["last"] = context.offset
            if state["count"] % BATCH == 0 or state["count"] == total:
                await consumer.store_offset(self.stream, "bench", context.offset)
            if state["count"] >= total:
                done.set()

        started = time.perf_counter()
        await consumer.subscribe(
            self.stream,
            on_message,
            subscriber_name="bench",
            offset_specification=ConsumerOffsetSpecification(OffsetType.FIRST, None),
        )
        try:
            await asyncio.wait_for(done.wait(), timeout=300)
        except TimeoutError:
            pass
        stored = -1
        for _ in range(50):  # store_offset has no reply: wait until the broker shows it
            stored = await consumer.query_offset(self.stream, "bench")
            if stored == state["last"]:
                break
            await asyncio.sleep(0.02)
        seconds = time.perf_counter() - started
        await consumer.close()
        return Phase(
            seconds,
            state["count"],
            state["bytes"],
            {
                "read == sent": state["count"] == total,
                "bytes == sent": state["bytes"] == sum(map(len, values)),
                "stored offset covers all": stored == total - 1,
            },
        )

    def drop(self) -> None:
        async def delete() -> None:
            from rstream import Producer

            producer = Producer(**self._client_args())
            await producer.start()
            await producer.delete_stream(self.stream, missing_ok=True)
            await producer.close()

        asyncio.run(delete())


class Kafka(Tidelog):
    """Apache Kafka (scripts/kafka: Maven Central, KRaft, one combined node) with exactly the
    Tidelog row's client and settings (`tidelog bench` runners, confluent-kafka, acks=1). Kafka
    acknowledges acks=1 before any fsync by default (flush.messages is unbounded), the same
    page-cache durability as Tidelog's default."""

    name = "kafka"

    def start(self) -> None:
        from apache_kafka import ApacheKafka

        self.broker = ApacheKafka(self.dir / "kafka")
        self.bootstrap = self.broker.bootstrap
        self.round = 0

    def version(self) -> str:
        from apache_kafka import ApacheKafka

        return ApacheKafka.version()

    def produce(self, values: list[bytes]) -> Phase:
        # Kafka's metadata shows a new topic a moment after CreateTopics answers (Tidelog's at
        # once), and the runner's first watermark query would fail: create it and wait here.
        from tidelog.cli import perf

        topic = f"peers-{self.round + 1}"
        perf.ensure_topic(self.bootstrap, topic, 1)
        deadline = time.monotonic() + 30
        while perf.find_partitions(self.bootstrap, topic) is None:
            if time.monotonic() > deadline:
                raise RuntimeError(f"topic {topic} did not appear in Kafka's metadata")
            time.sleep(0.1)
        return super().produce(values)

    def stop(self) -> None:
        broker = getattr(self, "broker", None)
        if broker is not None:
            broker.stop()
        self.log.close()


SYSTEMS: dict[str, type[System]] = {
    cls.name: cls for cls in (Tidelog, Kafka, Redis, Nats, RabbitMQ)
}
