"""A share consumer in its own process, for tests that SIGKILL it.

    python tests/share/share_child.py BOOTSTRAP GROUP TOPIC MODE [MAX_POLL_RECORDS [DELAY_MS]]

MODE: accept (acknowledge every record ACCEPT), hold (never acknowledge, poll once), release,
reject. Prints one JSON line per record received, after its acknowledgement was committed
(`commit_sync`), flushed at once: {"p": partition, "o": offset, "d": delivery count,
"v": value, "a": whether the broker confirmed the acknowledgement, "t": the child's monotonic
clock when the poll returned it}. DELAY_MS: time spent
"processing" each poll's records. Stops when stdin closes (`close()` commits and leaves the
group) or when killed.
"""

from __future__ import annotations

import json
import os
import select
import sys
import time

from confluent_kafka import AcknowledgeType, KafkaException, ShareConsumer

KINDS = {"accept": AcknowledgeType.ACCEPT, "release": AcknowledgeType.RELEASE,
         "reject": AcknowledgeType.REJECT}


def main() -> None:
    bootstrap, group, topic, mode = sys.argv[1:5]
    max_poll = sys.argv[5] if len(sys.argv) > 5 else "500"
    delay_s = int(sys.argv[6]) / 1000 if len(sys.argv) > 6 else 0.0
    settings = {
        "bootstrap.servers": bootstrap, "group.id": group,
        "share.acknowledgement.mode": "explicit", "max.poll.records": max_poll,
    }
    if os.environ.get("SHARE_CHILD_DEBUG"):
        settings["debug"] = os.environ["SHARE_CHILD_DEBUG"]
    consumer = ShareConsumer(settings)
    consumer.subscribe([topic])
    print(json.dumps({"ready": True}), flush=True)
    held = False
    try:
        while not select.select([sys.stdin], [], [], 0.05 if held else 0)[0]:
            if held:  # explicit mode polls again only once everything is acknowledged
                continue
            got = []
            messages = consumer.poll(0.2)
            received = time.monotonic()
            for message in messages:
                if message.error() is not None:
                    continue
                if mode in KINDS:
                    consumer.acknowledge(message, KINDS[mode])
                got.append({"p": message.partition(), "o": message.offset(),
                            "d": message.delivery_count(), "v": message.value().decode(),
                            "t": received})
            if not got:
                continue
            time.sleep(delay_s)
            failed: set[int] = set()
            if mode in KINDS:
                try:
                    results = consumer.commit_sync(10)
                    failed = {tp.partition for tp, error in results.items() if error is not None}
                except KafkaException:
                    failed = {line["p"] for line in got}
            for line in got:
                line["a"] = mode in KINDS and line["p"] not in failed
                print(json.dumps(line), flush=True)
            held = mode == "hold"
    finally:
        if mode != "hold":
            consumer.close()


if __name__ == "__main__":
    main()
