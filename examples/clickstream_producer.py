"""Produce a synthetic clickstream to Tidelog: JSON page views keyed by user.

usage: .venv/bin/python examples/clickstream_producer.py [--bootstrap 127.0.0.1:9092]
       [--topic clicks] [--rate 200] [--seconds 60]
"""

from __future__ import annotations

import argparse
import json
import random
import time

from confluent_kafka import Producer

PAGES = ["/", "/search", "/product/1", "/product/2", "/cart", "/checkout", "/help"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="clicks")
    parser.add_argument("--rate", type=int, default=200, help="events per second")
    parser.add_argument("--seconds", type=int, default=60)
    args = parser.parse_args()
    producer = Producer({"bootstrap.servers": args.bootstrap, "enable.idempotence": True,
                         "linger.ms": 10})
    rng = random.Random(42)
    started = time.monotonic()
    sent = 0
    while time.monotonic() - started < args.seconds:
        due = started + sent / args.rate
        if due > time.monotonic():
            time.sleep(due - time.monotonic())
        user = f"user-{rng.randrange(1000)}"
        event = {"user": user, "page": rng.choice(PAGES), "ts_ms": int(time.time() * 1000)}
        producer.produce(args.topic, json.dumps(event).encode(), user.encode(),
                         headers=[("source", b"example")])
        producer.poll(0)
        sent += 1
    producer.flush(30)
    print(f"sent {sent} events to {args.topic}")


if __name__ == "__main__":
    main()
