"""Transactions on a 3-broker cluster: the coordinator is the leader of the id's replicated
`__transaction_state` partition, markers reach partitions led by other brokers through
WriteTxnMarkers, and the whole survives SIGKILLs of partition leaders and of the
coordinator's broker.

Real ZooKeeper, three real `tidelog serve --zookeeper` processes (tests/replication/harness.py),
confluent-kafka transactional producers and read_committed consumers.

The kill loop (`test_kill_loop_keeps_transactions_whole`) runs KILLS kills (20 in CI; a soak:
`TIDELOG_TXN_KILLS=200 pytest tests/transactions/test_cluster_transactions.py`). Kills are
cheap because the cluster runs with a 1 s ZooKeeper session (the leaders of a killed broker
move 1 s after the kill) and a 1 s replica.lag.time.max.ms (its ISR shrinks that soon, so
acks=all writes go on). Its checker counts aborted reads, torn transactions, lost committed
records, duplicates and replica offsets that differ; every count must be 0.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from replication import raw_requests
from replication.harness import Cluster, replica_log
from replication.test_secure_cluster import (  # the SASL_SSL + ACL cluster's fixture
    SecureCluster,
    secure_cluster,  # noqa: F401 - a fixture, used by name
)
from replication.test_secure_cluster import wait_value as secure_wait
from tidelog.cluster.zookeeper_server import ZooKeeperServer

TOPIC = "txn-orders"
PARTITIONS = 3
TXN_STATE = "__transaction_state"
FIND_COORDINATOR, DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 10, 61, 65, 66
NOT_LEADER_OR_FOLLOWER, NOT_COORDINATOR = 6, 16
KILLS = int(os.environ.get("TIDELOG_TXN_KILLS", "20"))
KILL_LOOP_LIMIT_S = 60.0 + 10.0 * KILLS  # a guard only: 20 kills take about 60-90 s
SETTINGS = (
    "zookeeper.session.timeout.ms=1000",  # the ZooKeeper fixture's minimum (2 ticks)
    "replica.lag.time.max.ms=1000",
    "transaction.state.log.num.partitions=2",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms=500",
    "auto.create.topics.enable=false",
)


@pytest.fixture(scope="module")
def cluster(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[Cluster]:
    chroot = f"/tidelog-txn-{uuid.uuid4().hex[:12]}"
    root: Path = tmp_path_factory.mktemp("txn-cluster")
    cluster = Cluster(zookeeper.connect_string + chroot, root, SETTINGS)
    try:
        for node_id in (1, 2, 3):
            cluster.add(node_id)
            cluster.start(node_id)
        cluster.create_topic(TOPIC, PARTITIONS, 3, {"min.insync.replicas": "2"})
        for partition in range(PARTITIONS):
            cluster.wait_for_partition(TOPIC, lambda view: len(view[2]) == 3, partition)
        yield cluster
    finally:
        cluster.stop_all()
    tracebacks = [
        f"{b.log_path.name}: {line}" for b in cluster.brokers.values() if b.log_path.exists()
        for line in b.log_path.read_text(errors="replace").splitlines() if "Traceback" in line
    ]
    if tracebacks:
        pytest.fail("a broker logged a traceback:\n" + "\n".join(tracebacks))


def _producer(cluster: Cluster, txn_id: str) -> Producer:
    producer = Producer({
        "bootstrap.servers": cluster.bootstrap(), "transactional.id": txn_id,
        "linger.ms": 2, "transaction.timeout.ms": 60_000, "message.timeout.ms": 60_000,
        "retry.backoff.ms": 100, "topic.metadata.refresh.interval.ms": 1000,
        "socket.timeout.ms": 10_000,
    })
    producer.init_transactions(60)
    return producer


def _reader(cluster: Cluster, isolation: str) -> Consumer:
    reader = Consumer({
        "bootstrap.servers": cluster.bootstrap(), "group.id": f"r-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False, "isolation.level": isolation,
        "topic.metadata.refresh.interval.ms": 1000, "retry.backoff.ms": 100,
        "fetch.wait.max.ms": 100,
    })
    reader.assign([CkTopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    return reader


def _read_until(reader: Consumer, seen: list[bytes], done: set[bytes], deadline_s: float,
                until_all_of: set[bytes]) -> None:
    """Poll until every value of `until_all_of` was read (or the deadline), then 1 s more so
    a record that should not be there would be seen too."""
    deadline = time.monotonic() + deadline_s
    quiet_until: float | None = None
    while time.monotonic() < deadline:
        message = reader.poll(0.2)
        if message is not None and message.error() is None:
            seen.append(message.value())
            done.add(message.value())
        if quiet_until is None and until_all_of <= done:
            quiet_until = time.monotonic() + 1.0
        if quiet_until is not None and time.monotonic() >= quiet_until:
            return
    missing = sorted(until_all_of - done)[:5]
    raise AssertionError(f"not read within {deadline_s} s: {len(until_all_of - done)} values,"
                         f" e.g. {missing}")


def _coordinator_of(cluster: Cluster, txn_id: str) -> int:
    def ask() -> int:
        alive = next(b for b in cluster.brokers.values() if b.alive())
        body = raw_requests._module(FIND_COORDINATOR, 3).FindCoordinatorRequest(
            key=txn_id, key_type=1)
        answer = raw_requests.call(alive.address, FIND_COORDINATOR, 3, body)
        return int(answer.node_id) if answer.error_code == 0 else -1
    return cluster.wait_value(ask, lambda node: node in cluster.brokers, 30, "a coordinator")


def test_commit_and_abort_across_partitions_led_by_different_brokers(cluster: Cluster) -> None:
    leaders = {cluster.wait_for_partition(TOPIC, lambda _: True, p)[0] for p in range(PARTITIONS)}
    assert len(leaders) >= 2, f"the partitions' leaders {leaders}: markers stay local"
    producer = _producer(cluster, "basic")
    coordinator = _coordinator_of(cluster, "basic")
    assert coordinator in (1, 2, 3)
    committed: set[bytes] = set()
    aborted: set[bytes] = set()
    for round_ in range(4):
        producer.begin_transaction()
        values = [f"basic-{round_}-{p}-{i}".encode() for p in range(PARTITIONS) for i in range(3)]
        for value in values:
            producer.produce(TOPIC, value, partition=int(value.split(b"-")[2]))
        if round_ % 2:
            producer.flush(30)  # on the leaders before the abort (else librdkafka purges them)
            producer.abort_transaction(30)
            aborted.update(values)
        else:
            producer.commit_transaction(30)
            committed.update(values)
    reader = _reader(cluster, "read_committed")
    seen: list[bytes] = []
    try:
        _read_until(reader, seen, set(), 30, committed)
    finally:
        reader.close()
    assert sorted(seen) == sorted(committed)
    everything = _reader(cluster, "read_uncommitted")
    seen_all: list[bytes] = []
    try:
        _read_until(everything, seen_all, set(), 30, committed | aborted)
    finally:
        everything.close()
    assert sorted(seen_all) == sorted(committed | aborted)


def test_send_offsets_to_transaction_commits_offsets_with_the_output(cluster: Cluster) -> None:
    """TxnOffsetCommit in a cluster: the group's offsets are pending in its (replicated)
    `__consumer_offsets` partition until the marker, which the transaction coordinator sends
    to that partition's leader: committed with the output, dropped on abort."""
    group = "txn-offsets"
    source = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": group,
                       "enable.auto.commit": False, "isolation.level": "read_committed"})
    producer = _producer(cluster, "offsets")
    try:
        for offset, commit in ((5, True), (9, False)):
            producer.begin_transaction()
            producer.produce(TOPIC, b"offsets-%d" % offset, partition=1)
            producer.send_offsets_to_transaction(
                [CkTopicPartition(TOPIC, 0, offset)], source.consumer_group_metadata(), 30)
            if commit:
                producer.commit_transaction(30)
            else:
                producer.flush(30)
                producer.abort_transaction(30)
        committed = source.committed([CkTopicPartition(TOPIC, 0)], timeout=30)
        assert [tp.offset for tp in committed] == [5]
    finally:
        source.close()


def test_describe_and_list_transactions_answer_at_the_coordinator(cluster: Cluster) -> None:
    """DescribeTransactions is answered by the id's coordinator (NOT_COORDINATOR elsewhere);
    ListTransactions by every broker for the ids it coordinates (Kafka's admin client asks
    them all)."""
    producer = _producer(cluster, "described")
    producer.begin_transaction()
    producer.produce(TOPIC, b"described-0", partition=0)
    producer.flush(30)  # AddPartitionsToTxn done: the transaction is Ongoing
    try:
        coordinator = _coordinator_of(cluster, "described")
        describe = raw_requests._module(DESCRIBE_TRANSACTIONS, 0).DescribeTransactionsRequest(
            transactional_ids=("described",))
        listing = raw_requests._module(LIST_TRANSACTIONS, 0).ListTransactionsRequest(
            state_filters=(), producer_id_filters=())
        listed: dict[int, set[str]] = {}
        for node_id, broker in cluster.brokers.items():
            state = raw_requests.call(
                broker.address, DESCRIBE_TRANSACTIONS, 0, describe).transaction_states[0]
            if node_id == coordinator:
                assert (state.error_code, state.transaction_state) == (0, "Ongoing")
                assert [(t.topic, list(t.partitions)) for t in state.topics] == [(TOPIC, [0])]
            else:
                assert state.error_code == NOT_COORDINATOR
            answer = raw_requests.call(broker.address, LIST_TRANSACTIONS, 0, listing)
            assert answer.error_code == 0
            listed[node_id] = {t.transactional_id for t in answer.transaction_states}
        assert {n for n, ids in listed.items() if "described" in ids} == {coordinator}
        # DescribeProducers: the partition's leader shows the open transaction's first offset.
        leader = cluster.wait_for_partition(TOPIC, lambda _: True, 0)[0]
        module = raw_requests._module(DESCRIBE_PRODUCERS, 0)
        producers = module.DescribeProducersRequest(topics=(
            module.TopicRequest(name=TOPIC, partition_indexes=(0,)),))
        for node_id, broker in cluster.brokers.items():
            answer = raw_requests.call(broker.address, DESCRIBE_PRODUCERS, 0, producers)
            partition = answer.topics[0].partitions[0]
            if node_id == leader:
                assert partition.error_code == 0
                assert any(p.current_txn_start_offset >= 0 for p in partition.active_producers)
            else:
                assert partition.error_code == NOT_LEADER_OR_FOLLOWER
    finally:
        producer.abort_transaction(30)


def test_coordinator_killed_between_prepare_and_markers_commits_whole(cluster: Cluster) -> None:
    """The coordinator's broker is SIGKILLed after PrepareCommit is replicated but before the
    marker is acknowledged (a follower of the data partition is SIGSTOPped and the topic asks
    min.insync.replicas=3, so the marker cannot be acknowledged): the broker that takes over
    the `__transaction_state` partition finds the transaction in PrepareCommit, writes the
    marker again and completes it; read_committed then reads the whole transaction."""
    topic = "txn-recovery"
    cluster.create_topic(topic, 1, 3, {"min.insync.replicas": "3"})
    cluster.wait_for_partition(topic, lambda view: len(view[2]) == 3)
    producer = _producer(cluster, "recovery")
    coordinator = _coordinator_of(cluster, "recovery")
    leader = cluster.wait_for_partition(topic, lambda _: True)[0]
    stopped = next(n for n in sorted(cluster.brokers) if n not in (coordinator, leader))
    values = [b"recovery-%d" % i for i in range(3)]
    producer.begin_transaction()
    for value in values:
        producer.produce(topic, value)
    producer.flush(30)
    outcome: list[object] = []

    def commit() -> None:
        try:
            producer.commit_transaction(90)
            outcome.append("committed")
        except KafkaException as error:
            outcome.append(error)

    cluster.signal(stopped, signal.SIGSTOP)
    committer = threading.Thread(target=commit)
    try:
        committer.start()
        describe = raw_requests._module(DESCRIBE_TRANSACTIONS, 0).DescribeTransactionsRequest(
            transactional_ids=("recovery",))
        cluster.wait_value(
            lambda: raw_requests.call(cluster.brokers[coordinator].address,
                                      DESCRIBE_TRANSACTIONS, 0, describe
                                      ).transaction_states[0].transaction_state,
            lambda state: state == "PrepareCommit", 30, "PrepareCommit at the coordinator")
        cluster.kill(coordinator, signal.SIGKILL)
    finally:
        cluster.signal(stopped, signal.SIGCONT)
    cluster.start(coordinator)

    def state_at_coordinator() -> str:
        # Asked afresh each time: the broker that answers FindCoordinator may still have the
        # old view (each learns leadership from its own ZooKeeper watch), and leadership of
        # `__transaction_state` may move again once the killed broker is back.
        successor = _coordinator_of(cluster, "recovery")
        answer = raw_requests.call(cluster.brokers[successor].address, DESCRIBE_TRANSACTIONS,
                                   0, describe)
        return str(answer.transaction_states[0].transaction_state)

    cluster.wait_value(state_at_coordinator, lambda state: state == "CompleteCommit", 60,
                       "CompleteCommit at the current coordinator")
    committer.join(120)
    reader = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": "recovery-reader",
                       "enable.auto.commit": False, "isolation.level": "read_committed"})
    reader.assign([CkTopicPartition(topic, 0, 0)])
    seen: list[bytes] = []
    try:
        _read_until(reader, seen, set(), 60, set(values))
    finally:
        reader.close()
    assert seen == values
    # The producer's own call either saw the commit or gave up meanwhile; never an abort.
    assert outcome and (outcome[0] == "committed" or not outcome[0].args[0].txn_requires_abort())
    for partition in range(PARTITIONS):  # the kill loop starts from a full ISR
        cluster.wait_for_partition(TOPIC, lambda view: len(view[2]) == 3, partition, 60)


# ------------------------------------------------------------------ the kill loop


@dataclass
class Ledger:
    """What the producers did: committed and aborted transactions' values."""

    committed: dict[str, list[bytes]] = field(default_factory=dict)  # txn name -> values
    aborted: set[bytes] = field(default_factory=set)
    unknown: dict[str, list[bytes]] = field(default_factory=dict)  # commit outcome not known
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _produce_loop(cluster_bootstrap: str, name: str, ledger: Ledger, stop: threading.Event
                  ) -> None:
    """Transactions of 1-6 records over all partitions; each commit's outcome recorded:
    committed (commit returned), aborted (abort returned), unknown (a fatal error: the
    producer is recreated, the coordinator fences and aborts it unless it had committed)."""
    serial = 0
    rng = random.Random(name)
    while not stop.is_set():
        try:
            producer = Producer({
                "bootstrap.servers": cluster_bootstrap, "transactional.id": name,
                "linger.ms": 2, "transaction.timeout.ms": 60_000,
                "message.timeout.ms": 60_000, "retry.backoff.ms": 100,
                "topic.metadata.refresh.interval.ms": 1000, "socket.timeout.ms": 10_000,
            })
            producer.init_transactions(60)
        except KafkaException as error:
            with ledger.lock:
                ledger.errors.append(f"{name} init: {error}")
            continue
        try:
            while not stop.is_set():
                serial += 1
                txn = f"{name}:{serial}"
                values = [f"{txn}:{i}".encode() for i in range(rng.randint(1, 6))]
                commit = rng.random() < 0.7
                producer.begin_transaction()
                with ledger.lock:
                    ledger.unknown[txn] = values  # until its outcome is known
                try:
                    for index, value in enumerate(values):
                        producer.produce(TOPIC, value, partition=index % PARTITIONS)
                    if commit:
                        _retrying(producer.commit_transaction)
                    else:
                        producer.flush(60)
                        _retrying(producer.abort_transaction)
                except KafkaException as error:
                    if not error.args[0].txn_requires_abort():
                        raise  # fatal: the outcome stays unknown
                    _retrying(producer.abort_transaction)
                    commit = False
                with ledger.lock:
                    del ledger.unknown[txn]
                    if commit:
                        ledger.committed[txn] = values
                    else:
                        ledger.aborted.update(values)
        except KafkaException as error:
            with ledger.lock:
                ledger.errors.append(f"{name}: {error}")
        finally:
            producer.flush(0)


def _retrying(end: Callable[[float], None]) -> None:
    """commit_transaction / abort_transaction, called again after a retriable error (as
    librdkafka's documentation asks)."""
    for _ in range(10):
        try:
            end(60)
            return
        except KafkaException as error:
            if not error.args[0].retriable():
                raise
    end(60)


def _kill_loop(cluster: Cluster, stop: threading.Event, kills: list[int],
               limit: int, failures: list[BaseException]) -> None:
    try:
        _kill(cluster, stop, kills, limit)
    except BaseException as error:  # reported by the test, not lost with the thread
        failures.append(error)


def _kill(cluster: Cluster, stop: threading.Event, kills: list[int], limit: int) -> None:
    """SIGKILL a broker (a partition leader or the coordinators' broker, alternately) and
    restart it once the survivors lead everything; one broker down at a time."""
    rng = random.Random(7)
    while not stop.is_set() and (limit == 0 or len(kills) < limit):
        if len(kills) % 2 == 0:
            victim = _coordinator_of(cluster, rng.choice(("writer-a", "writer-b")))
        else:
            victim = cluster.wait_for_partition(
                TOPIC, lambda _: True, rng.randrange(PARTITIONS))[0]
        cluster.kill(victim, signal.SIGKILL)
        kills.append(victim)
        _wait_all(cluster, (TOPIC,), lambda view, dead=victim: view[0] != dead)
        cluster.start(victim)
        # Back in every ISR before the next kill, so no acknowledged write rests on one copy.
        _wait_all(cluster, (TOPIC, TXN_STATE), lambda view: len(view[2]) == 3)


def _wait_all(cluster: Cluster, topics: tuple[str, ...],
              accept: Callable[[tuple[int, list[int], list[int]]], bool]) -> None:
    """Until one Metadata answer shows every partition of `topics` with a live leader and
    passing `accept` (one request per poll, where wait_for_partition asks per partition)."""
    def read() -> list[tuple[int, list[int], list[int]]]:
        metadata = cluster.admin().list_topics(timeout=10)
        return [
            (p.leader, list(p.replicas), list(p.isrs))
            for topic in topics for p in metadata.topics[topic].partitions.values()
        ]

    cluster.wait_value(read, lambda views: bool(views) and all(
        view[0] in cluster.brokers and accept(view) for view in views), 60, f"{topics}")


def test_kill_loop_keeps_transactions_whole(cluster: Cluster) -> None:
    ledger = Ledger()
    stop = threading.Event()
    writers = [
        threading.Thread(target=_produce_loop, args=(cluster.bootstrap(), name, ledger, stop))
        for name in ("writer-a", "writer-b")
    ]
    for writer in writers:
        writer.start()
    reader = _reader(cluster, "read_committed")
    read: list[bytes] = []
    kills: list[int] = []
    killer_stop = threading.Event()
    killer_failures: list[BaseException] = []
    killer = threading.Thread(target=_kill_loop,
                              args=(cluster, killer_stop, kills, KILLS, killer_failures))
    killer.start()
    started = time.monotonic()
    deadline = started + KILL_LOOP_LIMIT_S
    try:
        while killer.is_alive() and time.monotonic() < deadline:
            message = reader.poll(0.2)
            if message is not None and message.error() is None:
                read.append(message.value())
    finally:
        kill_loop_s = time.monotonic() - started
        killer_stop.set()
        killer.join(180)
        stop.set()
        for writer in writers:
            writer.join(120)
    assert not killer.is_alive() and not any(w.is_alive() for w in writers)
    assert not killer_failures, killer_failures
    # All brokers up and in sync: read on until every committed value is there.
    committed = {v for values in ledger.committed.values() for v in values}
    maybe = {v for values in ledger.unknown.values() for v in values}
    done = set(read)
    try:
        _read_until(reader, read, done, 90, committed)
    finally:
        reader.close()
    counts = Counter(v for v in read if v.startswith(b"writer-"))  # not the first test's
    transactions_read: dict[str, set[bytes]] = {}
    for value in counts:
        transactions_read.setdefault(value.rsplit(b":", 1)[0].decode(), set()).add(value)
    all_values = {**ledger.committed, **ledger.unknown}
    torn = sum(1 for txn, values in transactions_read.items()
               if txn in all_values and values != set(all_values[txn]))
    verdict = {
        "aborted_reads": sum(1 for v in counts if v in ledger.aborted),
        "torn_transactions": torn,
        "lost_committed": len(committed - set(counts)),
        "duplicates": sum(c - 1 for c in counts.values() if c > 1),
        "unknown_values_read": sum(1 for v in counts if v not in committed | maybe),
        "replica_offsets_differ": _replica_differences(cluster),
    }
    print(f"kills={len(kills)} in {kill_loop_s:.0f} s committed_txns={len(ledger.committed)}"
          f" aborted_values={len(ledger.aborted)} unknown_txns={len(ledger.unknown)}"
          f" read={len(read)} verdict={verdict} producer_errors={len(ledger.errors)}")
    assert len(kills) == KILLS
    assert len(ledger.committed) >= 20
    assert verdict == dict.fromkeys(verdict, 0), (verdict, ledger.errors[:5])


def _replica_differences(cluster: Cluster) -> int:
    """Stop the brokers (SIGTERM, after the ISR is full) and compare their copies: offsets
    present on two replicas with different values."""
    for partition in range(PARTITIONS):
        cluster.wait_for_partition(TOPIC, lambda view: len(view[2]) == 3, partition, 60)
    for node_id in cluster.brokers:
        cluster.kill(node_id, signal.SIGTERM)
    differ = 0
    for partition in range(PARTITIONS):
        logs = [replica_log(b.data_dir, TOPIC, partition) for b in cluster.brokers.values()]
        reference = max(logs, key=len)
        differ += sum(1 for log in logs for o, v in log.items()
                      if o in reference and reference[o] != v)
    return differ



def test_transactions_over_sasl_ssl_with_acls(secure_cluster: SecureCluster) -> None:  # noqa: F811
    """Markers travel between brokers on the SASL_SSL inter-broker listener (SCRAM, the ACL
    authorizer on, brokers in super.users: WriteTxnMarkers needs CLUSTER_ACTION): a commit and
    an abort across partitions led by different brokers, read back with read_committed."""
    cluster = secure_cluster
    topic = "secure-txn"
    admin = AdminClient(cluster.client_config())  # must outlive its futures
    admin.create_topics([NewTopic(topic, PARTITIONS, 3)], request_timeout=15)[topic].result(30)

    def leaders() -> set[int]:
        metadata = AdminClient(cluster.client_config()).list_topics(topic, timeout=10)
        return {p.leader for p in metadata.topics[topic].partitions.values()}

    secure_wait(leaders, lambda found: -1 not in found and len(found) >= 2, "spread leaders")
    producer = Producer(cluster.client_config(**{
        "transactional.id": "secure", "linger.ms": 2, "transaction.timeout.ms": 60_000}))
    producer.init_transactions(60)
    committed = [b"secure-c-%d" % p for p in range(PARTITIONS)]
    aborted = [b"secure-a-%d" % p for p in range(PARTITIONS)]
    producer.begin_transaction()
    for partition, value in enumerate(committed):
        producer.produce(topic, value, partition=partition)
    producer.commit_transaction(60)
    producer.begin_transaction()
    for partition, value in enumerate(aborted):
        producer.produce(topic, value, partition=partition)
    producer.flush(60)
    producer.abort_transaction(60)
    reader = Consumer(cluster.client_config(**{
        "group.id": "secure-reader", "enable.auto.commit": False,
        "isolation.level": "read_committed"}))
    reader.assign([CkTopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    seen: list[bytes] = []
    try:
        _read_until(reader, seen, set(), 60, set(committed))
    finally:
        reader.close()
    assert sorted(seen) == sorted(committed)
