"""`tidelog transactions list|describe|abort` against a real broker: an open transaction is
found (how an operator finds a hanging one), described, and aborted at its partition."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import TYPE_CHECKING

from .helpers import DEADLINE_S, create_topic, list_offset, txn_producer

if TYPE_CHECKING:
    from conftest import BrokerFactory


def tidelog(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "tidelog.cli.main", "transactions", *args, "-b", bootstrap]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


def test_list_and_describe(broker_factory: BrokerFactory) -> None:
    broker = broker_factory()
    create_topic(broker.bootstrap, "cli-txn", partitions=2)
    hanging = txn_producer(broker.bootstrap, "cli-hanging")
    hanging.begin_transaction()
    hanging.produce("cli-txn", value=b"open", partition=1)
    hanging.flush(DEADLINE_S)
    done = txn_producer(broker.bootstrap, "cli-done")
    done.begin_transaction()
    done.produce("cli-txn", value=b"closed", partition=0)
    done.commit_transaction(DEADLINE_S)
    idle = txn_producer(broker.bootstrap, "cli-idle")  # Empty: no transaction started

    listed = tidelog(broker.bootstrap, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    states = {row["transactional_id"]: row["state"] for row in json.loads(listed.stdout)}
    assert states == {"cli-hanging": "Ongoing", "cli-done": "CompleteCommit",
                      "cli-idle": "Empty"}
    ongoing = tidelog(broker.bootstrap, "list", "--state", "Ongoing", "--json")
    assert [row["transactional_id"] for row in json.loads(ongoing.stdout)] == ["cli-hanging"]

    described = tidelog(broker.bootstrap, "describe", "cli-hanging", "--json")
    assert described.returncode == 0, described.stderr
    fields = json.loads(described.stdout)
    assert fields["state"] == "Ongoing"
    assert fields["partitions"] == ["cli-txn-1"]
    assert fields["start_time"] is not None
    empty = json.loads(tidelog(broker.bootstrap, "describe", "cli-idle", "--json").stdout)
    assert (empty["state"], empty["start_time"], empty["partitions"]) == ("Empty", None, [])
    table = tidelog(broker.bootstrap, "list")
    assert "cli-hanging" in table.stdout and "Ongoing" in table.stdout
    missing = tidelog(broker.bootstrap, "describe", "cli-nobody")
    assert missing.returncode == 1
    assert "TRANSACTIONAL_ID_NOT_FOUND" in missing.stderr
    # Abort the hanging transaction at its partition (offset 0 of partition 1).
    assert list_offset(broker.bootstrap, "cli-txn", 1, partition=1) == 0
    wrong = tidelog(broker.bootstrap, "abort", "--topic", "cli-txn", "--partition", "1",
                    "--start-offset", "7")
    assert wrong.returncode == 1 and "no open transaction" in wrong.stderr
    aborted = tidelog(broker.bootstrap, "abort", "--topic", "cli-txn", "--partition", "1",
                      "--start-offset", "0")
    assert aborted.returncode == 0, aborted.stderr
    assert list_offset(broker.bootstrap, "cli-txn", 1, partition=1) == 2  # record + marker
    idle.flush(1)
