"""Produce a synthetic clickstream to Tidelog: JSON page views keyed by user.

usage: .venv/bin/python examples/clickstream_producer.py [--bootstrap 127.0.0.1:9092]
       [--topic clicks] [--rate 200] [--seconds 60] [--count N]
       [--start-time 2024-05-01T12:00:00Z --time-step-ms 500]

Each event is {"user", "page", "ts_ms"}; ts_ms is also the record's timestamp, so
`tidelog archive --older-than` and the page-count windows see the same time. By default ts_ms
is the wall clock. With --start-time the event times are synthetic: the first event has that
time and each next one is --time-step-ms later, so several minutes of clicks can be produced in
a second (with --rate 0, which produces as fast as the broker acknowledges).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from datetime import datetime

from confluent_kafka import KafkaError, Message, Producer

PAGES = ["/", "/search", "/product/1", "/product/2", "/cart", "/checkout", "/help"]


def parse_time_ms(text: str) -> int:
    """Epoch milliseconds, or an ISO-8601 time with a zone (2024-05-01T12:00:00Z)."""
    if text.isdigit():
        return int(text)
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r} needs a time zone, e.g. Z or +02:00")
    return int(moment.timestamp() * 1000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="clicks")
    parser.add_argument("--rate", type=int, default=200, help="events per second (0: no pacing)")
    parser.add_argument("--seconds", type=float, default=60, help="stop after this long")
    parser.add_argument("--count", type=int, default=None, help="stop after this many events")
    parser.add_argument("--start-time", type=parse_time_ms, default=None,
                        help="synthetic event time of the first event (ISO-8601 or epoch ms)")
    parser.add_argument("--time-step-ms", type=int, default=1000,
                        help="with --start-time: event time added per event")
    args = parser.parse_args()
    producer = Producer({"bootstrap.servers": args.bootstrap, "enable.idempotence": True,
                         "linger.ms": 10})
    failures: list[KafkaError] = []

    def on_delivery(error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            failures.append(error)

    rng = random.Random(42)
    started = time.monotonic()
    sent = 0
    while time.monotonic() - started < args.seconds and (args.count is None or sent < args.count):
        if args.rate > 0:
            due = started + sent / args.rate
            if due > time.monotonic():
                time.sleep(due - time.monotonic())
        user = f"user-{rng.randrange(1000)}"
        if args.start_time is None:
            ts_ms = int(time.time() * 1000)
        else:
            ts_ms = args.start_time + sent * args.time_step_ms
        event = {"user": user, "page": rng.choice(PAGES), "ts_ms": ts_ms}
        while True:
            try:
                producer.produce(args.topic, json.dumps(event).encode(), user.encode(),
                                 headers=[("source", b"example")], timestamp=ts_ms,
                                 on_delivery=on_delivery)
                break
            except BufferError:  # local queue full (unpaced): let deliveries drain it
                producer.poll(0.1)
        producer.poll(0)
        sent += 1
    unacknowledged = producer.flush(30)
    if failures or unacknowledged:
        reason = failures[0] if failures else "flush timed out"
        print(f"{len(failures) + unacknowledged} of {sent} events not delivered: {reason}",
              file=sys.stderr)
        sys.exit(1)
    print(f"sent {sent} events to {args.topic}")


if __name__ == "__main__":
    main()
