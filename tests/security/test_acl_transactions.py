"""The transaction APIs' ACL checks a client cannot reach on its own (docs/security.md "What
each API needs"), on the wire: a transaction opened with the rights it needs, then the rights
taken away mid-transaction; per-partition and per-topic refusals; the admin APIs' filtering;
WriteTxnMarkers (ALTER or CLUSTER_ACTION on the cluster). Every connection is User:ANONYMOUS,
which keeps ALTER on the cluster (ADMIN_ACL) to change ACLs, except in the WriteTxnMarkers test,
whose broker is restarted with each ACL file instead."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AclBinding, AclOperation, ResourceType

import kafka_peer
from broker.raw import RawClient
from conftest import BrokerFactory, BrokerProcess

from . import clients, txn_clients
from .clients import acl

Op, RT = AclOperation, ResourceType
OPEN, SHUT, GROUP = "txn-acl-open", "txn-acl-shut", "txn-acl-group"
REFUSED = "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"


def txn_acl(operation: AclOperation, name: str) -> AclBinding:
    return acl(RT.TRANSACTIONAL_ID, name, operation)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    tmp: Path = tmp_path_factory.mktemp("acl-txn")
    data_dir = tmp / "data"
    clients.write_acls_file(data_dir, [clients.ADMIN_ACL_JSON])
    factory = BrokerFactory(tmp)
    try:
        broker = factory(data_dir, settings=clients.AUTHORIZER)
        clients.set_acls(broker.bootstrap, [acl(RT.BROKER, "kafka-cluster", Op.CREATE)])
        for topic in (OPEN, SHUT):
            assert clients.create_topic(broker.bootstrap, topic) == ""
        yield broker
    finally:
        bad = factory.stop_all()
    if bad:
        pytest.fail("broker logged a traceback:\n" + "\n".join(bad))


def test_every_step_of_an_open_transaction_needs_write_on_its_id(
    secured: BrokerProcess,
) -> None:
    """Opened with WRITE on the id; with DESCRIBE only, Produce of its batches, AddPartitionsToTxn,
    AddOffsetsToTxn, TxnOffsetCommit and EndTxn are refused; with WRITE back it commits."""
    bootstrap, txn_id = secured.bootstrap, clients.unique("mid")
    granted = [acl(RT.TOPIC, OPEN, Op.WRITE), acl(RT.TOPIC, OPEN, Op.READ),
               acl(RT.GROUP, GROUP, Op.READ)]
    clients.set_acls(bootstrap, [txn_acl(Op.WRITE, txn_id), *granted])
    with RawClient(bootstrap) as client:
        answer = txn_clients.init_producer_id_raw(client, txn_id)
        assert clients.code_name(answer.error_code) == ""
        pid, epoch = answer.producer_id, answer.producer_epoch
        assert txn_clients.add_partitions_raw(client, txn_id, pid, epoch, {OPEN: [0]}) == {
            (OPEN, 0): ""}

        clients.set_acls(bootstrap, [txn_acl(Op.DESCRIBE, txn_id), *granted])
        assert txn_clients.produce_txn_raw(client, txn_id, OPEN, pid, epoch, 0) == REFUSED
        assert txn_clients.add_partitions_raw(client, txn_id, pid, epoch, {OPEN: [0]}) == {
            (OPEN, 0): REFUSED}
        assert txn_clients.add_offsets_raw(client, txn_id, pid, epoch, GROUP) == REFUSED
        assert txn_clients.txn_offset_commit_raw(
            client, txn_id, pid, epoch, GROUP, [OPEN, SHUT]) == {OPEN: REFUSED, SHUT: REFUSED}
        assert txn_clients.end_txn_raw(client, txn_id, pid, epoch) == REFUSED
        assert clients.code_name(txn_clients.init_producer_id_raw(client, txn_id).error_code) == (
            REFUSED)

        clients.set_acls(bootstrap, [txn_acl(Op.WRITE, txn_id), *granted])
        assert txn_clients.produce_txn_raw(client, txn_id, OPEN, pid, epoch, 0) == ""
        assert txn_clients.end_txn_raw(client, txn_id, pid, epoch) == ""
    state = txn_clients.describe_transactions_raw(bootstrap, txn_id)
    assert state.transaction_state == "CompleteCommit"


def test_add_partitions_refuses_per_partition_and_attempts_none(secured: BrokerProcess) -> None:
    """A topic without WRITE and an internal topic (always: Kafka never authorizes those) are
    TOPIC_AUTHORIZATION_FAILED, a missing topic UNKNOWN_TOPIC_OR_PARTITION, the rest
    OPERATION_NOT_ATTEMPTED."""
    bootstrap, txn_id = secured.bootstrap, clients.unique("add")
    clients.set_acls(bootstrap, [
        txn_acl(Op.WRITE, txn_id), acl(RT.TOPIC, OPEN, Op.WRITE), acl(RT.TOPIC, SHUT, Op.DESCRIBE),
        acl(RT.TOPIC, "__consumer_offsets", Op.WRITE), acl(RT.TOPIC, "txn-acl-gone", Op.WRITE),
    ])
    with RawClient(bootstrap) as client:
        answer = txn_clients.init_producer_id_raw(client, txn_id)
        pid, epoch = answer.producer_id, answer.producer_epoch
        outcomes = txn_clients.add_partitions_raw(client, txn_id, pid, epoch, {
            OPEN: [0], SHUT: [0], "__consumer_offsets": [0], "txn-acl-gone": [0],
        })
    assert outcomes == {
        (OPEN, 0): "OPERATION_NOT_ATTEMPTED",
        (SHUT, 0): "TOPIC_AUTHORIZATION_FAILED",
        ("__consumer_offsets", 0): "TOPIC_AUTHORIZATION_FAILED",
        ("txn-acl-gone", 0): "UNKNOWN_TOPIC_OR_PARTITION",
    }


def test_txn_offset_commit_needs_the_group_and_each_topic(secured: BrokerProcess) -> None:
    bootstrap, txn_id = secured.bootstrap, clients.unique("offsets")
    base = [txn_acl(Op.WRITE, txn_id), acl(RT.TOPIC, OPEN, Op.READ),
            acl(RT.TOPIC, SHUT, Op.DESCRIBE)]
    clients.set_acls(bootstrap, [*base, acl(RT.GROUP, GROUP, Op.READ)])
    with RawClient(bootstrap) as client:
        answer = txn_clients.init_producer_id_raw(client, txn_id)
        pid, epoch = answer.producer_id, answer.producer_epoch
        assert txn_clients.add_offsets_raw(client, txn_id, pid, epoch, GROUP) == ""
        assert txn_clients.txn_offset_commit_raw(
            client, txn_id, pid, epoch, GROUP, [OPEN, SHUT, "txn-acl-gone"]
        ) == {OPEN: "", SHUT: "TOPIC_AUTHORIZATION_FAILED",
              "txn-acl-gone": "TOPIC_AUTHORIZATION_FAILED"}

        clients.set_acls(bootstrap, [*base, acl(RT.GROUP, GROUP, Op.DESCRIBE)])
        assert txn_clients.txn_offset_commit_raw(
            client, txn_id, pid, epoch, GROUP, [OPEN, SHUT]
        ) == {OPEN: "GROUP_AUTHORIZATION_FAILED", SHUT: "GROUP_AUTHORIZATION_FAILED"}
        assert txn_clients.add_offsets_raw(client, txn_id, pid, epoch, GROUP) == (
            "GROUP_AUTHORIZATION_FAILED")


def test_admin_apis_show_only_what_the_caller_may_describe(secured: BrokerProcess) -> None:
    """ListTransactions lists the ids the caller may DESCRIBE; DescribeTransactions refuses
    the others and lists an ongoing transaction's partitions only for topics it may
    DESCRIBE."""
    bootstrap = secured.bootstrap
    shown, hidden = clients.unique("shown"), clients.unique("hidden")
    clients.set_acls(bootstrap, [
        acl(RT.TRANSACTIONAL_ID, "*", Op.WRITE), acl(RT.TOPIC, OPEN, Op.WRITE),
        acl(RT.TOPIC, SHUT, Op.WRITE),
    ])
    with RawClient(bootstrap) as client:
        for txn_id in (shown, hidden):
            answer = txn_clients.init_producer_id_raw(client, txn_id)
            pid, epoch = answer.producer_id, answer.producer_epoch
            assert txn_clients.add_partitions_raw(
                client, txn_id, pid, epoch, {OPEN: [0], SHUT: [0]}
            ) == {(OPEN, 0): "", (SHUT, 0): ""}
    everything = txn_clients.list_transactions_raw(bootstrap)
    assert {shown, hidden} <= set(everything)  # WRITE on every id implies DESCRIBE

    clients.set_acls(bootstrap, [txn_acl(Op.DESCRIBE, shown), acl(RT.TOPIC, OPEN, Op.DESCRIBE)])
    assert txn_clients.list_transactions_raw(bootstrap) == [shown]
    state = txn_clients.describe_transactions_raw(bootstrap, shown)
    assert clients.code_name(state.error_code) == ""
    assert state.transaction_state == "Ongoing"
    assert [(t.topic, tuple(t.partitions)) for t in state.topics] == [(OPEN, (0,))]
    assert txn_clients.describe_transaction_raw(bootstrap, hidden) == REFUSED

    clients.set_acls(bootstrap, [])
    assert txn_clients.list_transactions_raw(bootstrap) == []


def test_write_txn_markers_needs_alter_or_cluster_action(
    tmp_path: Path, broker_factory: BrokerFactory,
) -> None:
    """WriteTxnMarkers (what the admin client's abortTransaction sends): refused with neither
    ALTER nor CLUSTER_ACTION on the cluster, written with either. Each phase restarts the
    broker on its own ACL file (the ACL APIs themselves need ALTER)."""
    data_dir = tmp_path / "data"

    def cluster(operation: str) -> dict[str, str]:
        return {**clients.ADMIN_ACL_JSON, "operation": operation}

    def topic(operation: str) -> dict[str, str]:
        return {**clients.ADMIN_ACL_JSON, "resource_type": "TOPIC", "name": OPEN,
                "operation": operation}

    answers = []
    for operations in (["DESCRIBE"], ["CLUSTER_ACTION"], ["ALTER"]):
        clients.write_acls_file(data_dir, [
            cluster("CREATE"), topic("DESCRIBE"), *(cluster(op) for op in operations),
        ])
        broker = broker_factory(data_dir, settings=clients.AUTHORIZER)
        if not answers:
            assert clients.create_topic(broker.bootstrap, OPEN) == ""
        answers.append(txn_clients.write_txn_markers_raw(broker.bootstrap, OPEN, 4242))
        assert broker.stop() == 0
    assert answers == ["CLUSTER_AUTHORIZATION_FAILED", "", ""]


def test_kafka_transactions_tool_sees_and_aborts_only_what_it_may(
    secured: BrokerProcess,
) -> None:
    """Kafka's own `kafka-transactions.sh` (its Java Admin client) with ACLs: `list` shows the
    ids the caller may DESCRIBE, `describe` of another is refused (at FindCoordinator),
    `abort` of a hanging transaction needs READ on the topic (DescribeProducers) and then
    writes the marker (WriteTxnMarkers: ALTER on the cluster, held here by ADMIN_ACL), ending
    only that one."""
    bootstrap = secured.bootstrap
    shown, hidden = clients.unique("tool-shown"), clients.unique("tool-hidden")
    clients.set_acls(bootstrap, [
        acl(RT.TRANSACTIONAL_ID, "*", Op.WRITE), acl(RT.TOPIC, SHUT, Op.WRITE),
        acl(RT.TOPIC, SHUT, Op.READ),
    ])
    pids: list[int] = []
    with RawClient(bootstrap) as client:
        for txn_id in (shown, hidden):
            answer = txn_clients.init_producer_id_raw(client, txn_id)
            pid, epoch = answer.producer_id, answer.producer_epoch
            assert txn_clients.add_partitions_raw(client, txn_id, pid, epoch, {SHUT: [0]}) == {
                (SHUT, 0): ""}
            assert txn_clients.produce_txn_raw(client, txn_id, SHUT, pid, epoch, 0) == ""
            pids.append(pid)
    before = txn_clients.open_transactions_raw(bootstrap, SHUT)
    starts = [before[pid] for pid in pids]

    def tool(*args: str) -> subprocess.CompletedProcess[str]:
        return kafka_peer.run_tool(
            "kafka-transactions", "--bootstrap-server", bootstrap, *args, check=False
        )

    clients.set_acls(bootstrap, [txn_acl(Op.DESCRIBE, shown), acl(RT.TOPIC, SHUT, Op.DESCRIBE)])
    listed = tool("list")
    assert listed.returncode == 0, listed.stderr
    assert shown in listed.stdout and hidden not in listed.stdout
    refused = tool("describe", "--transactional-id", hidden)
    assert refused.returncode != 0
    # The Admin client looks up the id's coordinator first: FindCoordinator is refused.
    assert "FindCoordinator" in refused.stderr and "authorization failure" in refused.stderr
    abort = ("abort", "--topic", SHUT, "--partition", "0", "--start-offset", str(starts[1]))
    no_read = tool(*abort)
    assert no_read.returncode != 0
    assert "TopicAuthorization" in no_read.stdout + no_read.stderr

    clients.set_acls(bootstrap, [txn_acl(Op.DESCRIBE, shown), acl(RT.TOPIC, SHUT, Op.READ)])
    aborted = tool(*abort)
    assert aborted.returncode == 0, aborted.stdout + aborted.stderr
    after = txn_clients.open_transactions_raw(bootstrap, SHUT)
    assert after.get(pids[1], -1) == -1  # its transaction ended by the ABORT marker
    assert after[pids[0]] == starts[0]  # the other one still open
