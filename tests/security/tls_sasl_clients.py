"""One produce-then-consume round trip per real client, with a listener's security settings:
confluent-kafka (librdkafka), kafka-python, aiokafka and kcat. Each returns the values it read
back (partition 0 from the beginning, no group), waiting with a deadline."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from dataclasses import dataclass
from typing import Any

import confluent_kafka
import confluent_kafka.admin

KCAT = shutil.which("kcat") or "/usr/bin/kcat"
DEADLINE_S = 40.0


@dataclass(frozen=True)
class Security:
    protocol: str  # PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL
    mechanism: str | None = None
    username: str | None = None
    password: str | None = None
    ca: str | None = None
    cert: str | None = None
    key: str | None = None

    def librdkafka(self) -> dict[str, str]:
        conf = {"security.protocol": self.protocol}
        if self.mechanism:
            conf |= {"sasl.mechanism": self.mechanism, "sasl.username": self.username or "",
                     "sasl.password": self.password or ""}
        if self.ca:
            conf["ssl.ca.location"] = self.ca
        if self.cert and self.key:
            conf |= {"ssl.certificate.location": self.cert, "ssl.key.location": self.key}
        return conf

    def kafka_python(self) -> dict[str, Any]:
        conf: dict[str, Any] = {"security_protocol": self.protocol}
        if self.mechanism:
            conf |= {"sasl_mechanism": self.mechanism, "sasl_plain_username": self.username,
                     "sasl_plain_password": self.password}
        if self.ca:
            conf |= {"ssl_cafile": self.ca, "ssl_check_hostname": True}
        if self.cert and self.key:
            conf |= {"ssl_certfile": self.cert, "ssl_keyfile": self.key}
        return conf

    def aiokafka(self) -> dict[str, Any]:
        from aiokafka.helpers import create_ssl_context

        conf: dict[str, Any] = {"security_protocol": self.protocol}
        if self.mechanism:
            conf |= {"sasl_mechanism": self.mechanism, "sasl_plain_username": self.username,
                     "sasl_plain_password": self.password}
        if self.ca:
            conf["ssl_context"] = create_ssl_context(
                cafile=self.ca, certfile=self.cert, keyfile=self.key
            )
        return conf


def values(topic: str, count: int) -> list[bytes]:
    return [f"{topic}-{index}".encode() for index in range(count)]


def confluent_roundtrip(bootstrap: str, topic: str, security: Security, count: int = 20
                        ) -> list[bytes]:
    conf = {"bootstrap.servers": bootstrap, **security.librdkafka()}
    producer = confluent_kafka.Producer({**conf, "acks": "all"})
    errors: list[Any] = []
    for value in values(topic, count):
        producer.produce(topic, value, partition=0,
                         on_delivery=lambda error, _m: errors.append(error) if error else None)
    assert producer.flush(DEADLINE_S) == 0 and not errors, errors
    consumer = confluent_kafka.Consumer({**conf, "group.id": f"{topic}-reader",
                                         "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
    got: list[bytes] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(bytes(message.value()))
    finally:
        consumer.close()
    return got


def kafka_python_roundtrip(bootstrap: str, topic: str, security: Security, count: int = 20
                           ) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    conf = {"bootstrap_servers": bootstrap, **security.kafka_python()}
    producer = KafkaProducer(acks="all", **conf)
    futures = [producer.send(topic, value, partition=0) for value in values(topic, count)]
    for future in futures:
        future.get(timeout=DEADLINE_S)
    producer.close(timeout=10)
    consumer = KafkaConsumer(enable_auto_commit=False, **conf)
    partition = TopicPartition(topic, 0)
    consumer.assign([partition])
    consumer.seek_to_beginning(partition)
    got: list[bytes] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(got) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got += [bytes(record.value) for record in records]
    finally:
        consumer.close()
    return got


def aiokafka_roundtrip(bootstrap: str, topic: str, security: Security, count: int = 20
                       ) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    async def run() -> list[bytes]:
        conf = {"bootstrap_servers": bootstrap, **security.aiokafka()}
        producer = AIOKafkaProducer(acks="all", **conf)
        await producer.start()
        try:
            for value in values(topic, count):
                await producer.send_and_wait(topic, value, partition=0)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(enable_auto_commit=False, **conf)
        await consumer.start()
        got: list[bytes] = []
        try:
            partition = TopicPartition(topic, 0)
            consumer.assign([partition])
            await consumer.seek_to_beginning(partition)
            deadline = time.monotonic() + DEADLINE_S
            while len(got) < count and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=500)
                for records in batches.values():
                    got += [bytes(record.value) for record in records if record.value]
        finally:
            await consumer.stop()
        return got

    return asyncio.run(run())


def kcat_roundtrip(bootstrap: str, topic: str, security: Security, count: int = 20
                   ) -> list[bytes]:
    options: list[str] = []
    for name, value in security.librdkafka().items():
        options += ["-X", f"{name}={value}"]
    payload = b"".join(value + b"\n" for value in values(topic, count))
    produced = subprocess.run(
        [KCAT, "-P", "-b", bootstrap, "-t", topic, "-p", "0", "-X", "acks=all", *options],
        input=payload, capture_output=True, timeout=60, check=False,
    )
    assert produced.returncode == 0, produced.stderr.decode(errors="replace")
    consumed = subprocess.run(
        [KCAT, "-C", "-b", bootstrap, "-t", topic, "-p", "0", "-o", "beginning", "-e",
         "-c", str(count), *options],
        capture_output=True, timeout=60, check=False,
    )
    assert consumed.returncode == 0, consumed.stderr.decode(errors="replace")
    return consumed.stdout.splitlines()


ROUNDTRIPS = {
    "confluent": confluent_roundtrip,
    "kafka-python": kafka_python_roundtrip,
    "aiokafka": aiokafka_roundtrip,
    "kcat": kcat_roundtrip,
}


def end_offset(bootstrap: str, topic: str) -> int:
    """The log end offset of partition 0, through a PLAINTEXT listener (-1: no topic)."""
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    if topic not in admin.list_topics(timeout=20).topics:
        return -1
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
    try:
        _, high = consumer.get_watermark_offsets(
            confluent_kafka.TopicPartition(topic, 0), timeout=20
        )
    finally:
        consumer.close()
    return int(high)


def create_topic(bootstrap: str, topic: str) -> None:
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([confluent_kafka.admin.NewTopic(topic, 1, 1)])
    futures[topic].result(30)
