"""A group member in its own process (so a test can SIGKILL it): prints each assignment."""

from __future__ import annotations

import sys

from confluent_kafka import Consumer


def main() -> None:
    bootstrap, topic, group = sys.argv[1:4]
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            "auto.offset.reset": "earliest",
        }
    )

    def on_assign(_: Consumer, partitions: list) -> None:  # type: ignore[type-arg]
        print("assigned", ",".join(str(p.partition) for p in partitions), flush=True)

    consumer.subscribe([topic], on_assign=on_assign)
    while True:
        consumer.poll(0.2)


if __name__ == "__main__":
    main()
