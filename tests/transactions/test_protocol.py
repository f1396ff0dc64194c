"""Transactions at the protocol level (kio requests on a socket): Kafka's error codes for each
misuse, a partition leader refusing a transactional write to a partition the transaction has
not added, read_committed fetches listing aborted transactions, and a broker restarted (cleanly
or SIGKILLed) between a transaction's writes and its commit, whose state replays."""

from __future__ import annotations

import signal
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pytest
from kio.schema.errors import ErrorCode as KioErrorCode

from broker.raw import RawClient, request_module
from tidelog.coordinator.transactions import TransactionCoordinator
from tidelog.coordinator.txn_records import decode_txn_record
from tidelog.protocol.api_keys import ApiKey
from tidelog.records.batch import RecordBatch, iter_batches
from tidelog.records.builder import NewRecord, build_batch
from tidelog.records.record import iter_records
from tidelog.storage.config import LogConfig
from tidelog.storage.log import PartitionLog
from tidelog.types import TopicPartition

from .helpers import create_topic, wait_for

if TYPE_CHECKING:
    from conftest import BrokerFactory


def init(client: RawClient, txn_id: str, version: int = 4, **ids: int) -> Any:
    module = request_module(ApiKey.INIT_PRODUCER_ID, version)
    fields: dict[str, Any] = {"transactional_id": txn_id,
                              "transaction_timeout": timedelta(seconds=60)}
    if version >= 3:
        fields |= {"producer_id": ids.get("producer_id", -1),
                   "producer_epoch": ids.get("producer_epoch", -1)}
    return client.call(ApiKey.INIT_PRODUCER_ID, version, module.InitProducerIdRequest(**fields))


def add_partitions(
    client: RawClient, txn_id: str, pid: int, epoch: int, topic: str, partitions: list[int],
    version: int = 3,
) -> list[tuple[str, int, Any]]:
    module = request_module(ApiKey.ADD_PARTITIONS_TO_TXN, version)
    answer = client.call(ApiKey.ADD_PARTITIONS_TO_TXN, version, module.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=(module.AddPartitionsToTxnTopic(name=topic,
                                                            partitions=tuple(partitions)),),
    ))
    return sorted(
        (topic_result.name, p.partition_index, p.partition_error_code)
        for topic_result in answer.results_by_topic_v3_and_below
        for p in topic_result.results_by_partition
    )


def end_txn(client: RawClient, txn_id: str, pid: int, epoch: int, commit: bool,
            version: int = 3) -> Any:
    module = request_module(ApiKey.END_TXN, version)
    answer = client.call(ApiKey.END_TXN, version, module.EndTxnRequest(
        transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, committed=commit,
    ))
    return answer.error_code


def produce_txn(client: RawClient, txn_id: str, topic: str, pid: int, epoch: int,
                sequence: int, values: list[bytes], partition: int = 0, version: int = 9) -> Any:
    module = request_module(ApiKey.PRODUCE, version)
    records = bytes(build_batch(
        [NewRecord(value=v) for v in values], producer_id=pid, producer_epoch=epoch,
        base_sequence=sequence, transactional=True,
    ))
    answer = client.call(ApiKey.PRODUCE, version, module.ProduceRequest(
        transactional_id=txn_id, acks=-1, timeout=timedelta(seconds=5),
        topic_data=(module.TopicProduceData(name=topic, partition_data=(
            module.PartitionProduceData(index=partition, records=records),)),),
    ))
    return answer.responses[0].partition_responses[0]


def fetch_committed(client: RawClient, topic: str) -> Any:
    module = request_module(ApiKey.FETCH, 11)
    answer = client.call(ApiKey.FETCH, 11, module.FetchRequest(
        replica_id=-1, max_wait=timedelta(0), min_bytes=0, max_bytes=1 << 20,
        isolation_level=1, topics=(module.FetchTopic(topic=topic, partitions=(
            module.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20,
                                  log_start_offset=-1),)),),
        forgotten_topics_data=(),
    ))
    return answer.responses[0].partitions[0]


def test_errors_as_kafka_answers_them(broker_factory: BrokerFactory) -> None:
    broker = broker_factory()
    create_topic(broker.bootstrap, "raw-txn", partitions=2)
    with RawClient(broker.bootstrap) as client:
        first = init(client, "raw-t")
        assert first.error_code == KioErrorCode.none and first.producer_epoch == 0
        pid = first.producer_id
        # Writing before adding the partition: refused by the partition leader (KIP-890).
        refused = produce_txn(client, "raw-t", "raw-txn", pid, 0, 0, [b"early"])
        assert refused.error_code == KioErrorCode.invalid_txn_state
        unknown = add_partitions(client, "raw-t", pid, 0, "raw-nope", [0])
        assert unknown == [("raw-nope", 0, KioErrorCode.unknown_topic_or_partition)]
        assert add_partitions(client, "raw-t", pid, 0, "raw-txn", [0]) == [
            ("raw-txn", 0, KioErrorCode.none)]
        assert produce_txn(client, "raw-t", "raw-txn", pid, 0, 0, [b"a", b"b"]).error_code == (
            KioErrorCode.none)
        other = produce_txn(client, "raw-t", "raw-txn", pid, 0, 2, [b"c"], partition=1)
        assert other.error_code == KioErrorCode.invalid_txn_state  # partition 1 not added
        assert end_txn(client, "raw-t", pid + 1, 0, True) == (
            KioErrorCode.invalid_producer_id_mapping)
        assert end_txn(client, "raw-t", pid, 0, False) == KioErrorCode.none  # abort
        assert end_txn(client, "raw-t", pid, 0, True) == KioErrorCode.invalid_txn_state
        aborted = fetch_committed(client, "raw-txn")
        assert [(a.producer_id, a.first_offset) for a in aborted.aborted_transactions] == [
            (pid, 0)]
        assert aborted.last_stable_offset == aborted.high_watermark == 3
        # A new instance bumps the epoch: the old one is fenced (INVALID_PRODUCER_EPOCH
        # before EndTxn v2, PRODUCER_FENCED from v2, KIP-588).
        assert init(client, "raw-t").producer_epoch == 1
        assert end_txn(client, "raw-t", pid, 0, True, version=1) == (
            KioErrorCode.invalid_producer_epoch)
        assert end_txn(client, "raw-t", pid, 0, True, version=3) == KioErrorCode.producer_fenced
        stale = add_partitions(client, "raw-t", pid, 0, "raw-txn", [0])
        assert stale == [("raw-txn", 0, KioErrorCode.producer_fenced)]
        late = produce_txn(client, "raw-t", "raw-txn", pid, 0, 3, [b"late"])
        assert late.error_code == KioErrorCode.invalid_producer_epoch
        timeout = request_module(ApiKey.INIT_PRODUCER_ID, 4).InitProducerIdRequest(
            transactional_id="raw-u", transaction_timeout=timedelta(hours=1),
            producer_id=-1, producer_epoch=-1)
        too_long = client.call(ApiKey.INIT_PRODUCER_ID, 4, timeout)
        assert too_long.error_code == KioErrorCode.invalid_transaction_timeout


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL], ids=["clean", "killed"])
def test_restart_between_writes_and_commit_replays_the_transaction(
    broker_factory: BrokerFactory, stop: int
) -> None:
    broker = broker_factory()
    create_topic(broker.bootstrap, "raw-restart")
    with RawClient(broker.bootstrap) as client:
        answer = init(client, "raw-r")
        pid, epoch = answer.producer_id, answer.producer_epoch
        assert add_partitions(client, "raw-r", pid, epoch, "raw-restart", [0]) == [
            ("raw-restart", 0, KioErrorCode.none)]
        written = produce_txn(client, "raw-r", "raw-restart", pid, epoch, 0, [b"x", b"y"])
        assert written.error_code == KioErrorCode.none
        assert fetch_committed(client, "raw-restart").last_stable_offset == 0
    broker.stop(stop)
    again = broker_factory(broker.data_dir)
    with RawClient(again.bootstrap) as client:
        # The open transaction came back from __transaction_state and the log's producer state.
        assert fetch_committed(client, "raw-restart").last_stable_offset == 0
        assert end_txn(client, "raw-r", pid, epoch, True) == KioErrorCode.none
        data = fetch_committed(client, "raw-restart")
        assert data.last_stable_offset == data.high_watermark == 3
        values = [r.value for b in iter_batches(data.records) if not b.is_control
                  for r in _records(b)]
        assert values == [b"x", b"y"]
        assert list(data.aborted_transactions) == []


def _records(batch: Any) -> list[Any]:
    return list(iter_records(batch))


def test_admin_apis_and_require_stable(broker_factory: BrokerFactory) -> None:
    """DescribeTransactions, ListTransactions and DescribeProducers show an open transaction
    (how a hanging one is found); OffsetFetch require_stable answers UNSTABLE_OFFSET_COMMIT
    while a transaction holds the group's offset, the offset once it commits."""
    broker = broker_factory()
    create_topic(broker.bootstrap, "raw-admin")
    with RawClient(broker.bootstrap) as client:
        answer = init(client, "raw-a")
        pid, epoch = answer.producer_id, answer.producer_epoch
        add_partitions(client, "raw-a", pid, epoch, "raw-admin", [0])
        produce_txn(client, "raw-a", "raw-admin", pid, epoch, 0, [b"open"])
        offsets = request_module(ApiKey.ADD_OFFSETS_TO_TXN, 3)
        added = client.call(ApiKey.ADD_OFFSETS_TO_TXN, 3, offsets.AddOffsetsToTxnRequest(
            transactional_id="raw-a", producer_id=pid, producer_epoch=epoch, group_id="raw-g"))
        assert added.error_code == KioErrorCode.none
        commit = request_module(ApiKey.TXN_OFFSET_COMMIT, 3)
        committed = client.call(ApiKey.TXN_OFFSET_COMMIT, 3, commit.TxnOffsetCommitRequest(
            transactional_id="raw-a", group_id="raw-g", producer_id=pid, producer_epoch=epoch,
            generation_id=-1, member_id="", group_instance_id=None,
            topics=(commit.TxnOffsetCommitRequestTopic(name="raw-admin", partitions=(
                commit.TxnOffsetCommitRequestPartition(
                    partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                    committed_metadata=""),)),),
        ))
        assert committed.topics[0].partitions[0].error_code == KioErrorCode.none

        def offset_fetch() -> Any:
            module = request_module(ApiKey.OFFSET_FETCH, 7)
            answer = client.call(ApiKey.OFFSET_FETCH, 7, module.OffsetFetchRequest(
                group_id="raw-g", require_stable=True,
                topics=(module.OffsetFetchRequestTopic(name="raw-admin",
                                                       partition_indexes=(0,)),),
            ))
            return answer.topics[0].partitions[0]

        pending = offset_fetch()
        assert (pending.error_code, pending.committed_offset) == (
            KioErrorCode.unstable_offset_commit, -1)

        describe = request_module(ApiKey.DESCRIBE_TRANSACTIONS, 0)
        states = client.call(ApiKey.DESCRIBE_TRANSACTIONS, 0, describe.DescribeTransactionsRequest(
            transactional_ids=("raw-a", "raw-missing"))).transaction_states
        assert states[0].transaction_state == "Ongoing" and states[0].producer_id == pid
        assert sorted((t.topic, tuple(t.partitions)) for t in states[0].topics) == [
            ("__consumer_offsets", (0,)), ("raw-admin", (0,))]
        assert states[1].error_code == KioErrorCode.transactional_id_not_found
        listing = request_module(ApiKey.LIST_TRANSACTIONS, 1)
        listed = client.call(ApiKey.LIST_TRANSACTIONS, 1, listing.ListTransactionsRequest(
            state_filters=("Ongoing", "Sleeping"), producer_id_filters=(), duration_filter=-1))
        assert [(t.transactional_id, t.transaction_state) for t in listed.transaction_states] == [
            ("raw-a", "Ongoing")]
        assert listed.unknown_state_filters == ("Sleeping",)
        producers = request_module(ApiKey.DESCRIBE_PRODUCERS, 0)
        described = client.call(ApiKey.DESCRIBE_PRODUCERS, 0, producers.DescribeProducersRequest(
            topics=(producers.TopicRequest(name="raw-admin", partition_indexes=(0,)),)))
        active = described.topics[0].partitions[0].active_producers
        assert [(p.producer_id, p.current_txn_start_offset) for p in active] == [(pid, 0)]

        assert end_txn(client, "raw-a", pid, epoch, True) == KioErrorCode.none
        stable = offset_fetch()
        assert (stable.error_code, stable.committed_offset) == (KioErrorCode.none, 1)
        states = client.call(ApiKey.DESCRIBE_TRANSACTIONS, 0, describe.DescribeTransactionsRequest(
            transactional_ids=("raw-a",))).transaction_states
        assert states[0].transaction_state == "CompleteCommit"


def test_restart_completes_a_commit_left_in_prepare(broker_factory: BrokerFactory) -> None:
    """A crash between the PrepareCommit record and the markers: the next start writes the
    markers and completes the transaction as a whole (Kafka's coordinator does on load). The
    crash is made exact by appending the PrepareCommit record to the killed broker's
    `__transaction_state` through the storage layer, as the coordinator would have."""
    broker = broker_factory()
    create_topic(broker.bootstrap, "raw-prepared")
    with RawClient(broker.bootstrap) as client:
        answer = init(client, "raw-p")
        pid, epoch = answer.producer_id, answer.producer_epoch
        add_partitions(client, "raw-p", pid, epoch, "raw-prepared", [0])
        written = produce_txn(client, "raw-p", "raw-prepared", pid, epoch, 0, [b"a", b"b"])
        assert written.error_code == KioErrorCode.none
    broker.stop(signal.SIGKILL)
    tp = TopicPartition("__transaction_state", 0)
    state_log = PartitionLog(tp, broker.data_dir / tp.dir_name, LogConfig(), clean=False)
    coordinator = TransactionCoordinator(900_000)
    data = b"".join(s.read_bytes() for s in state_log.read(0, 1 << 20).slices)
    for stored in iter_batches(data):
        for record in iter_records(stored):
            assert record.key is not None
            coordinator.replay(decode_txn_record(record.key, record.value))
    prepared = coordinator.end_transaction("raw-p", pid, epoch, True, 1)
    assert prepared.markers is not None and prepared.markers.committed
    batch = build_batch([NewRecord(value=r.value_bytes(), key=r.key_bytes())
                         for r in prepared.records], now_ms=1)
    state_log.append([RecordBatch(memoryview(batch))], now_ms=1)
    state_log.close()
    again = broker_factory(broker.data_dir)
    with RawClient(again.bootstrap) as client:
        # The completion runs right after the start: wait for the COMMIT marker.
        wait_for(lambda: fetch_committed(client, "raw-prepared").last_stable_offset == 3,
                 "the markers of the prepared commit")
        data_after = fetch_committed(client, "raw-prepared")
        assert list(data_after.aborted_transactions) == []
        values = [r.value for b in iter_batches(data_after.records) if not b.is_control
                  for r in iter_records(b)]
        assert values == [b"a", b"b"]
        assert end_txn(client, "raw-p", pid, epoch, True) == KioErrorCode.none  # complete


def test_idle_transactional_id_expires_and_stays_expired(broker_factory: BrokerFactory) -> None:
    settings = {"transactional.id.expiration.ms": "500",
                "transactions.remove.expired.transaction.cleanup.interval.ms": "100"}
    broker = broker_factory(settings=settings)
    listing = request_module(ApiKey.LIST_TRANSACTIONS, 1)

    def known(client: RawClient) -> bool:
        listed = client.call(ApiKey.LIST_TRANSACTIONS, 1, listing.ListTransactionsRequest(
            state_filters=(), producer_id_filters=(), duration_filter=-1))
        return "raw-x" in [t.transactional_id for t in listed.transaction_states]

    with RawClient(broker.bootstrap) as client:
        first = init(client, "raw-x")
        assert first.error_code == KioErrorCode.none
        wait_for(lambda: not known(client), "the idle id to expire")
    broker.stop()
    again = broker_factory(broker.data_dir, settings=settings)
    with RawClient(again.bootstrap) as client:
        assert not known(client)  # the tombstone replays
        second = init(client, "raw-x")
        assert second.producer_id != first.producer_id and second.producer_epoch == 0


def test_add_partitions_never_adds_an_internal_topic(broker_factory: BrokerFactory) -> None:
    """Kafka leaves internal topics out of the names AddPartitionsToTxn v0-3 authorizes, with
    or without an authorizer: they answer TOPIC_AUTHORIZATION_FAILED and the rest
    OPERATION_NOT_ATTEMPTED (offsets join a transaction through AddOffsetsToTxn only)."""
    broker = broker_factory()
    create_topic(broker.bootstrap, "raw-internal")
    with RawClient(broker.bootstrap) as client:
        answer = init(client, "raw-internal")
        pid, epoch = answer.producer_id, answer.producer_epoch
        assert add_partitions(client, "raw-internal", pid, epoch, "__transaction_state", [0]) == [
            ("__transaction_state", 0, KioErrorCode.topic_authorization_failed)]
        module = request_module(ApiKey.ADD_PARTITIONS_TO_TXN, 3)
        mixed = client.call(ApiKey.ADD_PARTITIONS_TO_TXN, 3, module.AddPartitionsToTxnRequest(
            v3_and_below_transactional_id="raw-internal", v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch, v3_and_below_topics=(
                module.AddPartitionsToTxnTopic(name="raw-internal", partitions=(0,)),
                module.AddPartitionsToTxnTopic(name="__consumer_offsets", partitions=(0,)),
            ),
        ))
        assert sorted(
            (topic.name, p.partition_error_code)
            for topic in mixed.results_by_topic_v3_and_below for p in topic.results_by_partition
        ) == [("__consumer_offsets", KioErrorCode.topic_authorization_failed),
              ("raw-internal", KioErrorCode.operation_not_attempted)]


def test_idle_producer_ids_expire_from_partitions(broker_factory: BrokerFactory) -> None:
    """producer.id.expiration.ms: an idle producer leaves the partition's producer state (and,
    after a restart, the snapshot does not bring it back); one with an open transaction stays
    however old it is, as Kafka's removeExpiredProducers keeps it."""
    settings = {"producer.id.expiration.ms": "1500",
                "producer.id.expiration.check.interval.ms": "100"}
    broker = broker_factory(settings=settings)
    create_topic(broker.bootstrap, "raw-expire")
    producers = request_module(ApiKey.DESCRIBE_PRODUCERS, 0)

    def active(client: RawClient) -> set[int]:
        described = client.call(ApiKey.DESCRIBE_PRODUCERS, 0, producers.DescribeProducersRequest(
            topics=(producers.TopicRequest(name="raw-expire", partition_indexes=(0,)),)))
        return {p.producer_id for p in described.topics[0].partitions[0].active_producers}

    with RawClient(broker.bootstrap) as client:
        ready = init(client, "raw-open")
        open_pid, open_epoch = ready.producer_id, ready.producer_epoch
        assert add_partitions(client, "raw-open", open_pid, open_epoch, "raw-expire", [0]) == [
            ("raw-expire", 0, KioErrorCode.none)]
        assert produce_txn(client, "raw-open", "raw-expire", open_pid, open_epoch, 0,
                           [b"open"]).error_code == KioErrorCode.none
        idle = client.call(ApiKey.INIT_PRODUCER_ID, 4, request_module(
            ApiKey.INIT_PRODUCER_ID, 4).InitProducerIdRequest(
            transactional_id=None, transaction_timeout=timedelta(seconds=60),
            producer_id=-1, producer_epoch=-1))
        module = request_module(ApiKey.PRODUCE, 9)
        written = client.call(ApiKey.PRODUCE, 9, module.ProduceRequest(
            transactional_id=None, acks=-1, timeout=timedelta(seconds=5),
            topic_data=(module.TopicProduceData(name="raw-expire", partition_data=(
                module.PartitionProduceData(index=0, records=bytes(build_batch(
                    [NewRecord(value=b"idem")], producer_id=idle.producer_id,
                    producer_epoch=idle.producer_epoch, base_sequence=0))),)),),
        ))
        assert written.responses[0].partition_responses[0].error_code == KioErrorCode.none
        assert active(client) == {open_pid, idle.producer_id}
        wait_for(lambda: active(client) == {open_pid}, "the idle producer to expire")
    broker.stop()
    again = broker_factory(broker.data_dir, settings=settings)
    with RawClient(again.bootstrap) as client:
        assert active(client) == {open_pid}  # the open transaction is kept, nothing returns
        assert end_txn(client, "raw-open", open_pid, open_epoch, True) == KioErrorCode.none
        wait_for(lambda: active(client) == set(), "the ended transaction's producer to expire")


def test_transaction_version_2_protocol(broker_factory: BrokerFactory) -> None:
    """KIP-890 part 2 as Kafka 4 serves it: ApiVersions finalizes transaction.version 2;
    Produce v12 adds its partition (no AddPartitionsToTxn), TxnOffsetCommit v5 the group's;
    EndTxn v5 answers the bumped epoch, the markers carry it and the old epoch is fenced;
    a partition not added is TRANSACTION_ABORTABLE for Produce v11, INVALID_TXN_STATE before."""
    broker = broker_factory()
    create_topic(broker.bootstrap, "raw-tv2", partitions=2)
    with RawClient(broker.bootstrap) as client:
        for version in (3, 4):
            answer = client.call(ApiKey.API_VERSIONS, version, request_module(
                ApiKey.API_VERSIONS, version).ApiVersionsRequest(
                client_software_name="t", client_software_version="1"))
            assert sorted((f.name, f.min_version_level, f.max_version_level)
                          for f in answer.finalized_features) == [
                ("share.version", 1, 1), ("transaction.version", 2, 2)]
            assert answer.finalized_features_epoch >= 0
            assert sorted((f.name, f.min_version, f.max_version)
                          for f in answer.supported_features) == (
                [("share.version", 0, 1), ("transaction.version", 0, 2)] if version == 4 else [])
        ready = init(client, "raw-tv2", version=5)
        pid, epoch = ready.producer_id, ready.producer_epoch
        written = produce_txn(client, "raw-tv2", "raw-tv2", pid, epoch, 0, [b"one"], version=12)
        assert written.error_code == KioErrorCode.none  # added by the produce itself
        # v11 and v9 clients must add first: TRANSACTION_ABORTABLE / INVALID_TXN_STATE.
        assert produce_txn(client, "raw-tv2", "raw-tv2", pid, epoch, 0, [b"x"], partition=1,
                           version=11).error_code == KioErrorCode.transaction_abortable
        assert produce_txn(client, "raw-tv2", "raw-tv2", pid, epoch, 0, [b"x"], partition=1,
                           version=9).error_code == KioErrorCode.invalid_txn_state
        offsets = request_module(ApiKey.TXN_OFFSET_COMMIT, 5)
        committed = client.call(ApiKey.TXN_OFFSET_COMMIT, 5, offsets.TxnOffsetCommitRequest(
            transactional_id="raw-tv2", group_id="raw-tv2-group", producer_id=pid,
            producer_epoch=epoch, generation_id=-1, member_id="", group_instance_id=None,
            topics=(offsets.TxnOffsetCommitRequestTopic(name="raw-tv2", partitions=(
                offsets.TxnOffsetCommitRequestPartition(
                    partition_index=0, committed_offset=7, committed_leader_epoch=-1,
                    committed_metadata=""),)),),
        ))
        assert committed.topics[0].partitions[0].error_code == KioErrorCode.none
        describe = request_module(ApiKey.DESCRIBE_TRANSACTIONS, 0)
        state = client.call(ApiKey.DESCRIBE_TRANSACTIONS, 0, describe.DescribeTransactionsRequest(
            transactional_ids=("raw-tv2",))).transaction_states[0]
        assert sorted((t.topic, tuple(t.partitions)) for t in state.topics) == [
            ("__consumer_offsets", (0,)), ("raw-tv2", (0,))]
        end = request_module(ApiKey.END_TXN, 5)
        ended = client.call(ApiKey.END_TXN, 5, end.EndTxnRequest(
            transactional_id="raw-tv2", producer_id=pid, producer_epoch=epoch, committed=True))
        assert (ended.error_code, ended.producer_id, ended.producer_epoch) == (
            KioErrorCode.none, pid, epoch + 1)
        retried = client.call(ApiKey.END_TXN, 5, end.EndTxnRequest(
            transactional_id="raw-tv2", producer_id=pid, producer_epoch=epoch, committed=True))
        assert (retried.error_code, retried.producer_epoch) == (KioErrorCode.none, epoch + 1)
        # The COMMIT marker carries the new epoch: a late write of the old one is fenced.
        data = fetch_committed(client, "raw-tv2")
        markers = [b for b in iter_batches(data.records) if b.is_control]
        assert [(b.producer_id, b.producer_epoch) for b in markers] == [(pid, epoch + 1)]
        late = produce_txn(client, "raw-tv2", "raw-tv2", pid, epoch, 1, [b"late"], version=12)
        assert late.error_code == KioErrorCode.invalid_producer_epoch
        values = [r.value for b in iter_batches(data.records) if not b.is_control
                  for r in iter_records(b)]
        assert values == [b"one"]
        fetched = request_module(ApiKey.OFFSET_FETCH, 7)
        answer = client.call(ApiKey.OFFSET_FETCH, 7, fetched.OffsetFetchRequest(
            group_id="raw-tv2-group", require_stable=True,
            topics=(fetched.OffsetFetchRequestTopic(name="raw-tv2", partition_indexes=(0,)),)))
        assert answer.topics[0].partitions[0].committed_offset == 7
        # The next transaction goes on at the new epoch, its sequences from 0.
        again = produce_txn(client, "raw-tv2", "raw-tv2", pid, epoch + 1, 0, [b"two"],
                            version=12)
        assert again.error_code == KioErrorCode.none
        aborted = client.call(ApiKey.END_TXN, 5, end.EndTxnRequest(
            transactional_id="raw-tv2", producer_id=pid, producer_epoch=epoch + 1,
            committed=False))
        assert (aborted.error_code, aborted.producer_epoch) == (KioErrorCode.none, epoch + 2)
