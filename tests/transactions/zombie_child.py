"""A transactional producer that writes inside a transaction and then waits to be SIGKILLed
(run as a subprocess by test_confluent.py). argv: bootstrap, topic, transactional id."""

from __future__ import annotations

import sys
import time

from confluent_kafka import Producer


def main() -> None:
    bootstrap, topic, txn_id = sys.argv[1:4]
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                         "transaction.timeout.ms": 3000})
    producer.init_transactions(30)
    producer.begin_transaction()
    for index in range(20):
        producer.produce(topic, value=b"doomed-%d" % index)
    producer.flush(30)
    sys.stdout.write("written\n")
    sys.stdout.flush()
    time.sleep(600)  # the test kills us


if __name__ == "__main__":
    main()
