"""The ACL matrix (docs/security.md "Authorization"): one row per API, each run with a real
client (confluent-kafka) three times: no ACL -> the authorization error; DESCRIBE only -> what
Kafka answers; the ACLs Kafka requires -> success. Every connection is User:ANONYMOUS until
listeners authenticate, so the rows grant and deny that principal; it keeps ALTER on the
cluster throughout (ADMIN_ACL) to change ACLs between phases, which also implies DESCRIBE on
the cluster (the DescribeCluster row denies that explicitly).

Each phase replaces the ACLs and then opens new clients: the change applies to the very next
request (no client-side cache carries a grant over)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka.admin import AclBinding, AclOperation, ResourcePatternType, ResourceType

from conftest import BrokerFactory, BrokerProcess

from . import clients, txn_clients
from .clients import acl

TOPIC, DOOMED, GROUP = "matrix-topic", "matrix-doomed", "matrix-group"
DOOMED_GROUP, OFFSETS_GROUP = "matrix-doomed-group", "matrix-offsets-group"
TXN, TXN_GROUP = "matrix-tx", "matrix-tx-group"  # TXN: a committed transaction (setup)
Op, RT = AclOperation, ResourceType
PREFIXED = ResourcePatternType.PREFIXED


def topic_acl(operation: AclOperation, name: str = TOPIC) -> AclBinding:
    return acl(RT.TOPIC, name, operation)


def group_acl(operation: AclOperation, name: str = GROUP) -> AclBinding:
    return acl(RT.GROUP, name, operation)


def txn_acl(operation: AclOperation, name: str = TXN) -> AclBinding:
    return acl(RT.TRANSACTIONAL_ID, name, operation)


# Transactional client rows use a fresh id per phase ("mtx-..."), granted by prefix.
def fresh_txn_acl(operation: AclOperation) -> AclBinding:
    return acl(RT.TRANSACTIONAL_ID, "mtx-", operation, pattern=PREFIXED)


CLUSTER_ACTION = acl(RT.BROKER, "kafka-cluster", Op.CLUSTER_ACTION)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker with the authorizer on; ANONYMOUS may only alter ACLs (seeded acls.json).
    The setup grants what it needs: TOPIC with one record, DOOMED, GROUP with an offset."""
    tmp: Path = tmp_path_factory.mktemp("acl-matrix")
    data_dir = tmp / "data"
    clients.write_acls_file(data_dir, [clients.ADMIN_ACL_JSON])
    factory = BrokerFactory(tmp)
    try:
        broker = factory(data_dir, settings=clients.AUTHORIZER)
        bootstrap = broker.bootstrap
        clients.set_acls(bootstrap, [
            acl(RT.BROKER, "kafka-cluster", Op.CREATE),
            topic_acl(Op.WRITE), topic_acl(Op.READ), group_acl(Op.READ),
            group_acl(Op.READ, DOOMED_GROUP), group_acl(Op.READ, OFFSETS_GROUP),
            txn_acl(Op.WRITE),
        ])
        assert clients.create_topic(bootstrap, TOPIC) == ""
        assert clients.create_topic(bootstrap, DOOMED) == ""
        assert clients.produce(bootstrap, TOPIC) == ""
        for group in (GROUP, DOOMED_GROUP, OFFSETS_GROUP):
            assert clients.commit_offset(bootstrap, TOPIC, group) == ""
        assert txn_clients.produce_in_transaction(bootstrap, TXN, TOPIC) == ""
        yield broker
    finally:
        bad = factory.stop_all()
    if bad:
        pytest.fail("broker logged a traceback:\n" + "\n".join(bad))


@dataclass(frozen=True)
class Row:
    api: str
    action: Callable[[str], str]  # bootstrap -> Kafka error name, "" for success
    describe_only: list[AclBinding]
    describe_only_answer: str
    full: list[AclBinding]
    no_acl_answer: str = "TOPIC_AUTHORIZATION_FAILED"
    no_acl: tuple[AclBinding, ...] = ()
    base: tuple[AclBinding, ...] = ()  # present in every phase (what the client needs besides)


ROWS = [
    Row("Metadata", lambda b: clients.topic_metadata(b, TOPIC),
        [topic_acl(Op.DESCRIBE)], "", [topic_acl(Op.DESCRIBE)]),
    Row("Produce", lambda b: clients.produce(b, TOPIC),
        [topic_acl(Op.DESCRIBE)], "TOPIC_AUTHORIZATION_FAILED", [topic_acl(Op.WRITE)]),
    # Idempotent: InitProducerId needs IDEMPOTENT_WRITE on the cluster or WRITE on a topic.
    Row("InitProducerId", clients.init_producer_id_raw,
        [topic_acl(Op.DESCRIBE)], "CLUSTER_AUTHORIZATION_FAILED", [topic_acl(Op.WRITE)],
        no_acl_answer="CLUSTER_AUTHORIZATION_FAILED"),
    Row("InitProducerId (IDEMPOTENT_WRITE)", clients.init_producer_id_raw,
        [topic_acl(Op.DESCRIBE)], "CLUSTER_AUTHORIZATION_FAILED",
        [acl(RT.BROKER, "kafka-cluster", Op.IDEMPOTENT_WRITE)],
        no_acl_answer="CLUSTER_AUTHORIZATION_FAILED"),
    # The producer needs the topic's metadata first (DESCRIBE in every phase).
    Row("idempotent Producer", lambda b: clients.produce(b, TOPIC, idempotent=True),
        [], "CLUSTER_AUTHORIZATION_FAILED", [topic_acl(Op.WRITE)],
        no_acl_answer="CLUSTER_AUTHORIZATION_FAILED", base=(topic_acl(Op.DESCRIBE),)),
    Row("Fetch", lambda b: clients.fetch_raw(b, TOPIC),
        [topic_acl(Op.DESCRIBE)], "TOPIC_AUTHORIZATION_FAILED", [topic_acl(Op.READ)]),
    # librdkafka's consumer looks up its group's coordinator even with assign(), and a
    # refused Metadata reaches only its error_cb: the group is granted, the topic is not.
    Row("Fetch (Consumer)", lambda b: clients.fetch(b, TOPIC),
        [], "TOPIC_AUTHORIZATION_FAILED", [topic_acl(Op.READ)],
        base=(acl(RT.GROUP, "fetch-", Op.READ, pattern=PREFIXED), topic_acl(Op.DESCRIBE))),
    Row("ListOffsets", lambda b: clients.list_offsets_raw(b, TOPIC),
        [topic_acl(Op.DESCRIBE)], "", [topic_acl(Op.DESCRIBE)]),
    # librdkafka's list_offsets stops at the refused Metadata: the partition is unknown to it.
    Row("ListOffsets (AdminClient)", lambda b: clients.list_offsets(b, TOPIC),
        [topic_acl(Op.DESCRIBE)], "", [topic_acl(Op.DESCRIBE)], no_acl_answer="_NOENT"),
    Row("CreateTopics", lambda b: clients.create_topic(b, clients.unique("new")),
        [acl(RT.TOPIC, "new-", Op.DESCRIBE, pattern=PREFIXED)], "TOPIC_AUTHORIZATION_FAILED",
        [acl(RT.TOPIC, "new-", Op.CREATE, pattern=PREFIXED)]),
    Row("CreateTopics (cluster CREATE)", lambda b: clients.create_topic(b, clients.unique("new")),
        [acl(RT.TOPIC, "new-", Op.DESCRIBE, pattern=PREFIXED)], "TOPIC_AUTHORIZATION_FAILED",
        [acl(RT.BROKER, "kafka-cluster", Op.CREATE)]),
    Row("CreatePartitions", lambda b: clients.create_partitions(b, TOPIC),
        [topic_acl(Op.DESCRIBE)], "TOPIC_AUTHORIZATION_FAILED", [topic_acl(Op.ALTER)]),
    Row("DescribeConfigs", lambda b: clients.describe_configs(b, TOPIC),
        [topic_acl(Op.DESCRIBE)], "TOPIC_AUTHORIZATION_FAILED",
        [topic_acl(Op.DESCRIBE_CONFIGS)]),
    Row("IncrementalAlterConfigs", lambda b: clients.alter_configs(b, TOPIC),
        [topic_acl(Op.DESCRIBE)], "TOPIC_AUTHORIZATION_FAILED", [topic_acl(Op.ALTER_CONFIGS)]),
    Row("DeleteRecords", lambda b: clients.delete_records(b, TOPIC),
        [topic_acl(Op.DESCRIBE)], "TOPIC_AUTHORIZATION_FAILED",
        [topic_acl(Op.DELETE)], no_acl_answer="_NOENT"),  # as ListOffsets (AdminClient)
    # FindCoordinator (DESCRIBE group), JoinGroup/SyncGroup/Heartbeat (READ group), OffsetFetch,
    # Fetch (READ topic), OffsetCommit (READ group and topic).
    Row("consumer group (FindCoordinator, JoinGroup, SyncGroup, OffsetCommit)",
        lambda b: clients.consume_in_group(b, TOPIC, clients.unique("cg")),
        [acl(RT.GROUP, "cg-", Op.DESCRIBE, pattern=PREFIXED), topic_acl(Op.READ)],
        "GROUP_AUTHORIZATION_FAILED",
        [acl(RT.GROUP, "cg-", Op.READ, pattern=PREFIXED), topic_acl(Op.READ)],
        no_acl_answer="GROUP_AUTHORIZATION_FAILED"),
    Row("OffsetCommit", lambda b: clients.offset_commit_raw(b, TOPIC, GROUP),
        [group_acl(Op.READ), topic_acl(Op.DESCRIBE)], "TOPIC_AUTHORIZATION_FAILED",
        [group_acl(Op.READ), topic_acl(Op.READ)], no_acl_answer="GROUP_AUTHORIZATION_FAILED"),
    # The Consumer needs DESCRIBE on the group to find its coordinator before it commits.
    Row("OffsetCommit (Consumer)", lambda b: clients.commit_offset(b, TOPIC, GROUP),
        [group_acl(Op.READ), topic_acl(Op.DESCRIBE)], "TOPIC_AUTHORIZATION_FAILED",
        [group_acl(Op.READ), topic_acl(Op.READ)], no_acl_answer="GROUP_AUTHORIZATION_FAILED",
        no_acl=(group_acl(Op.DESCRIBE),)),
    Row("OffsetFetch", lambda b: clients.offset_fetch_raw(b, TOPIC, GROUP),
        [group_acl(Op.DESCRIBE)], "TOPIC_AUTHORIZATION_FAILED",
        [group_acl(Op.DESCRIBE), topic_acl(Op.DESCRIBE)],
        no_acl_answer="GROUP_AUTHORIZATION_FAILED"),
    Row("OffsetFetch (Consumer)", lambda b: clients.committed(b, TOPIC, GROUP),
        [group_acl(Op.DESCRIBE)], "TOPIC_AUTHORIZATION_FAILED",
        [group_acl(Op.DESCRIBE), topic_acl(Op.DESCRIBE)],
        no_acl_answer="TOPIC_AUTHORIZATION_FAILED", no_acl=(group_acl(Op.DESCRIBE),)),
    Row("DescribeGroups", lambda b: clients.describe_group(b, GROUP),
        [group_acl(Op.DESCRIBE)], "", [group_acl(Op.DESCRIBE)],
        no_acl_answer="GROUP_AUTHORIZATION_FAILED"),
    Row("DeleteGroups", lambda b: clients.delete_group(b, DOOMED_GROUP),
        [group_acl(Op.DESCRIBE, DOOMED_GROUP)], "GROUP_AUTHORIZATION_FAILED",
        [group_acl(Op.DELETE, DOOMED_GROUP)], no_acl_answer="GROUP_AUTHORIZATION_FAILED"),
    Row("OffsetDelete", lambda b: clients.offset_delete_raw(b, TOPIC, OFFSETS_GROUP),
        [group_acl(Op.DESCRIBE, OFFSETS_GROUP), topic_acl(Op.DESCRIBE)],
        "GROUP_AUTHORIZATION_FAILED",
        [group_acl(Op.DELETE, OFFSETS_GROUP), topic_acl(Op.READ)],
        no_acl_answer="GROUP_AUTHORIZATION_FAILED"),
    Row("OffsetDelete (topic)", lambda b: clients.offset_delete_raw(b, TOPIC, OFFSETS_GROUP),
        [group_acl(Op.DELETE, OFFSETS_GROUP), topic_acl(Op.DESCRIBE)],
        "TOPIC_AUTHORIZATION_FAILED",
        [group_acl(Op.DELETE, OFFSETS_GROUP), topic_acl(Op.READ)],
        no_acl_answer="TOPIC_AUTHORIZATION_FAILED", no_acl=(group_acl(Op.DELETE, OFFSETS_GROUP),)),
    Row("ConsumerGroupHeartbeat",
        lambda b: clients.consumer_group_heartbeat_raw(b, TOPIC, clients.unique("kip848")),
        [acl(RT.GROUP, "kip848-", Op.DESCRIBE, pattern=PREFIXED), topic_acl(Op.DESCRIBE)],
        "GROUP_AUTHORIZATION_FAILED",
        [acl(RT.GROUP, "kip848-", Op.READ, pattern=PREFIXED), topic_acl(Op.DESCRIBE)],
        no_acl_answer="GROUP_AUTHORIZATION_FAILED"),
    Row("ConsumerGroupHeartbeat (subscribed topic)",
        lambda b: clients.consumer_group_heartbeat_raw(b, TOPIC, clients.unique("kip848")),
        [], "TOPIC_AUTHORIZATION_FAILED", [topic_acl(Op.DESCRIBE)],
        base=(acl(RT.GROUP, "kip848-", Op.READ, pattern=PREFIXED),)),
    Row("OffsetForLeaderEpoch", lambda b: clients.offset_for_leader_epoch_raw(b, TOPIC),
        [topic_acl(Op.DESCRIBE)], "", [topic_acl(Op.DESCRIBE)]),
    Row("FindCoordinator (transactional id)",
        lambda b: clients.find_transaction_coordinator_raw(b, "tx-matrix"),
        [acl(RT.TRANSACTIONAL_ID, "tx-matrix", Op.DESCRIBE)], "",
        [acl(RT.TRANSACTIONAL_ID, "tx-matrix", Op.DESCRIBE)],
        no_acl_answer="TRANSACTIONAL_ID_AUTHORIZATION_FAILED"),
    # Transactions (KafkaApis): WRITE on the transactional id first, then what each API touches.
    # Its own id: a fresh epoch leaves TXN Empty, whose start time (-1) kio cannot decode.
    Row("InitProducerId (transactional)",
        lambda b: txn_clients.init_transactional_raw(b, "matrix-init"),
        [txn_acl(Op.DESCRIBE, "matrix-init")], "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
        [txn_acl(Op.WRITE, "matrix-init")],
        no_acl_answer="TRANSACTIONAL_ID_AUTHORIZATION_FAILED"),
    # init_transactions: FindCoordinator (DESCRIBE on the id), then InitProducerId (WRITE).
    Row("transactional Producer (FindCoordinator, InitProducerId)",
        lambda b: txn_clients.init_transactions(b, clients.unique("mtx")),
        [fresh_txn_acl(Op.DESCRIBE)], "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
        [fresh_txn_acl(Op.WRITE)], no_acl_answer="TRANSACTIONAL_ID_AUTHORIZATION_FAILED"),
    Row("transactional Producer (AddPartitionsToTxn, Produce, EndTxn)",
        lambda b: txn_clients.produce_in_transaction(b, clients.unique("mtx"), TOPIC),
        [topic_acl(Op.DESCRIBE)], "TOPIC_AUTHORIZATION_FAILED", [topic_acl(Op.WRITE)],
        base=(fresh_txn_acl(Op.WRITE),)),
    # send_offsets_to_transaction: AddOffsetsToTxn (READ on the group), then TxnOffsetCommit
    # (READ on the group and each topic).
    Row("transactional offsets (AddOffsetsToTxn)",
        lambda b: txn_clients.send_offsets_in_transaction(
            b, clients.unique("mtx"), TOPIC, TXN_GROUP),
        [group_acl(Op.DESCRIBE, TXN_GROUP)], "GROUP_AUTHORIZATION_FAILED",
        [group_acl(Op.READ, TXN_GROUP)], no_acl_answer="GROUP_AUTHORIZATION_FAILED",
        base=(fresh_txn_acl(Op.WRITE), topic_acl(Op.READ))),
    Row("transactional offsets (TxnOffsetCommit topic)",
        lambda b: txn_clients.send_offsets_in_transaction(
            b, clients.unique("mtx"), TOPIC, TXN_GROUP),
        [topic_acl(Op.DESCRIBE)], "TOPIC_AUTHORIZATION_FAILED", [topic_acl(Op.READ)],
        base=(fresh_txn_acl(Op.WRITE), group_acl(Op.READ, TXN_GROUP))),
    Row("AddPartitionsToTxn v4 (brokers)",
        lambda b: txn_clients.add_partitions_v4_raw(b, TXN, TOPIC),
        [acl(RT.BROKER, "kafka-cluster", Op.DESCRIBE)], "CLUSTER_AUTHORIZATION_FAILED",
        [CLUSTER_ACTION], no_acl_answer="CLUSTER_AUTHORIZATION_FAILED"),
    Row("DescribeTransactions", lambda b: txn_clients.describe_transaction_raw(b, TXN),
        [txn_acl(Op.DESCRIBE)], "", [txn_acl(Op.DESCRIBE)],
        no_acl_answer="TRANSACTIONAL_ID_AUTHORIZATION_FAILED"),
    Row("DescribeProducers", lambda b: txn_clients.describe_producers_raw(b, TOPIC),
        [topic_acl(Op.DESCRIBE)], "TOPIC_AUTHORIZATION_FAILED", [topic_acl(Op.READ)]),
    Row("DescribeCluster", clients.describe_cluster,
        [], "", [], no_acl_answer="CLUSTER_AUTHORIZATION_FAILED",
        no_acl=(acl(RT.BROKER, "kafka-cluster", Op.DESCRIBE, allow=False),)),
    Row("DeleteTopics", lambda b: clients.delete_topic(b, DOOMED),
        [topic_acl(Op.DESCRIBE, DOOMED)], "TOPIC_AUTHORIZATION_FAILED",
        [topic_acl(Op.DELETE, DOOMED)]),
]


@pytest.mark.parametrize("row", ROWS, ids=[row.api for row in ROWS])
def test_acl_matrix(secured: BrokerProcess, row: Row) -> None:
    bootstrap = secured.bootstrap
    answers = []
    for bindings in (list(row.no_acl), row.describe_only, row.full):
        clients.set_acls(bootstrap, [*row.base, *bindings])
        answers.append(row.action(bootstrap))
    assert answers == [row.no_acl_answer, row.describe_only_answer, ""]
