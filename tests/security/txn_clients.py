"""Transactional actions for the ACL tests: a real transactional producer (confluent-kafka)
where it reaches the API, raw kio requests where it does not (EndTxn without a transaction the
client would first have to open, AddPartitionsToTxn v4, WriteTxnMarkers, the admin APIs).
Each returns the Kafka error name it ended with ("" for success); every wait has a deadline."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from broker.raw import RawClient, request_module
from tidelog.protocol.api_keys import ApiKey
from tidelog.records.builder import NewRecord, build_batch

from .clients import _QUIET, WAIT_S, code_name


def _error(exception: KafkaException) -> str:
    return str(exception.args[0].name())


def _producer(bootstrap: str, txn_id: str) -> Producer:
    return Producer({
        "bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5,
        "message.timeout.ms": 10000, "transaction.timeout.ms": 10000, "logger": _QUIET,
    })


def init_transactions(bootstrap: str, txn_id: str) -> str:
    """FindCoordinator (transaction) and InitProducerId with the transactional id."""
    producer = _producer(bootstrap, txn_id)
    try:
        producer.init_transactions(WAIT_S)
    except KafkaException as error:
        return _error(error)
    return ""


def produce_in_transaction(bootstrap: str, txn_id: str, topic: str) -> str:
    """init, begin, one record (AddPartitionsToTxn, then Produce), commit (EndTxn): the
    broker's error that failed the transaction."""
    producer = _producer(bootstrap, txn_id)
    reported: list[str] = []

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            reported.append(error.name())

    try:
        producer.init_transactions(WAIT_S)
        producer.begin_transaction()
        producer.produce(topic, b"in-a-transaction", callback=delivered)
        producer.commit_transaction(WAIT_S)
    except KafkaException as error:
        name = _error(error)
        # A local code (_INCONSISTENT: "see the delivery reports") defers to the report's;
        # a failed commit purges the queue, so a report may only say _PURGE_QUEUE.
        broker_side = [e for e in reported if not e.startswith("_")]
        return broker_side[0] if name.startswith("_") and broker_side else name
    assert not reported, reported
    return ""


def send_offsets_in_transaction(bootstrap: str, txn_id: str, topic: str, group: str) -> str:
    """init, begin, send_offsets_to_transaction (AddOffsetsToTxn, FindCoordinator for the
    group, TxnOffsetCommit), commit: the first error."""
    producer = _producer(bootstrap, txn_id)
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "logger": _QUIET,
        "enable.auto.commit": False,
    })
    try:
        producer.init_transactions(WAIT_S)
        producer.begin_transaction()
        producer.send_offsets_to_transaction(
            [TopicPartition(topic, 0, 1)], consumer.consumer_group_metadata(), WAIT_S
        )
        producer.commit_transaction(WAIT_S)
    except KafkaException as error:
        return _error(error)
    finally:
        consumer.close()
    return ""


def init_producer_id_raw(client: RawClient, txn_id: str) -> Any:
    """InitProducerId v4 with a transactional id: the response."""
    module = request_module(ApiKey.INIT_PRODUCER_ID, 4)
    return client.call(ApiKey.INIT_PRODUCER_ID, 4, module.InitProducerIdRequest(
        transactional_id=txn_id, transaction_timeout=timedelta(seconds=60), producer_id=-1,
        producer_epoch=-1,
    ))


def init_transactional_raw(bootstrap: str, txn_id: str) -> str:
    with RawClient(bootstrap) as client:
        return code_name(init_producer_id_raw(client, txn_id).error_code)


def add_partitions_raw(
    client: RawClient, txn_id: str, pid: int, epoch: int, topics: dict[str, list[int]],
) -> dict[tuple[str, int], str]:
    """AddPartitionsToTxn v3 (a client's): each partition's error."""
    module = request_module(ApiKey.ADD_PARTITIONS_TO_TXN, 3)
    answer = client.call(ApiKey.ADD_PARTITIONS_TO_TXN, 3, module.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=tuple(
            module.AddPartitionsToTxnTopic(name=name, partitions=tuple(partitions))
            for name, partitions in topics.items()
        ),
    ))
    return {
        (topic.name, p.partition_index): code_name(p.partition_error_code)
        for topic in answer.results_by_topic_v3_and_below
        for p in topic.results_by_partition
    }


def add_partitions_v4_raw(bootstrap: str, txn_id: str, topic: str) -> str:
    """AddPartitionsToTxn v4 (the brokers' batched form, verify_only): the top-level error."""
    module = request_module(ApiKey.ADD_PARTITIONS_TO_TXN, 4)
    with RawClient(bootstrap) as client:
        answer = client.call(ApiKey.ADD_PARTITIONS_TO_TXN, 4, module.AddPartitionsToTxnRequest(
            transactions=(module.AddPartitionsToTxnTransaction(
                transactional_id=txn_id, producer_id=1, producer_epoch=0, verify_only=True,
                topics=(module.AddPartitionsToTxnTopic(name=topic, partitions=(0,)),),
            ),),
        ))
    return code_name(answer.error_code)


def end_txn_raw(client: RawClient, txn_id: str, pid: int, epoch: int) -> str:
    module = request_module(ApiKey.END_TXN, 3)
    answer = client.call(ApiKey.END_TXN, 3, module.EndTxnRequest(
        transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, committed=True,
    ))
    return code_name(answer.error_code)


def add_offsets_raw(client: RawClient, txn_id: str, pid: int, epoch: int, group: str) -> str:
    module = request_module(ApiKey.ADD_OFFSETS_TO_TXN, 3)
    answer = client.call(ApiKey.ADD_OFFSETS_TO_TXN, 3, module.AddOffsetsToTxnRequest(
        transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, group_id=group,
    ))
    return code_name(answer.error_code)


def txn_offset_commit_raw(
    client: RawClient, txn_id: str, pid: int, epoch: int, group: str, topics: list[str],
) -> dict[str, str]:
    """TxnOffsetCommit v3 of partition 0 of each topic: each topic's error."""
    module = request_module(ApiKey.TXN_OFFSET_COMMIT, 3)
    answer = client.call(ApiKey.TXN_OFFSET_COMMIT, 3, module.TxnOffsetCommitRequest(
        transactional_id=txn_id, group_id=group, producer_id=pid, producer_epoch=epoch,
        generation_id=-1, member_id="", group_instance_id=None,
        topics=tuple(
            module.TxnOffsetCommitRequestTopic(name=name, partitions=(
                module.TxnOffsetCommitRequestPartition(
                    partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                    committed_metadata=""),))
            for name in topics
        ),
    ))
    return {topic.name: code_name(topic.partitions[0].error_code) for topic in answer.topics}


def produce_txn_raw(
    client: RawClient, txn_id: str, topic: str, pid: int, epoch: int, sequence: int,
) -> str:
    """Produce v9 of one transactional batch to partition 0."""
    module = request_module(ApiKey.PRODUCE, 9)
    records = bytes(build_batch(
        [NewRecord(value=b"raw")], producer_id=pid, producer_epoch=epoch,
        base_sequence=sequence, transactional=True,
    ))
    answer = client.call(ApiKey.PRODUCE, 9, module.ProduceRequest(
        transactional_id=txn_id, acks=-1, timeout=timedelta(seconds=5),
        topic_data=(module.TopicProduceData(name=topic, partition_data=(
            module.PartitionProduceData(index=0, records=records),)),),
    ))
    return code_name(answer.responses[0].partition_responses[0].error_code)


def describe_transactions_raw(bootstrap: str, txn_id: str) -> Any:
    """DescribeTransactions v0 of one id: its state entity."""
    module = request_module(ApiKey.DESCRIBE_TRANSACTIONS, 0)
    with RawClient(bootstrap) as client:
        answer = client.call(ApiKey.DESCRIBE_TRANSACTIONS, 0,
                             module.DescribeTransactionsRequest(transactional_ids=(txn_id,)))
    return answer.transaction_states[0]


def describe_transaction_raw(bootstrap: str, txn_id: str) -> str:
    return code_name(describe_transactions_raw(bootstrap, txn_id).error_code)


def list_transactions_raw(bootstrap: str) -> list[str]:
    """ListTransactions v1 without filters: the ids listed."""
    module = request_module(ApiKey.LIST_TRANSACTIONS, 1)
    with RawClient(bootstrap) as client:
        answer = client.call(ApiKey.LIST_TRANSACTIONS, 1, module.ListTransactionsRequest(
            state_filters=(), producer_id_filters=(), duration_filter=-1,
        ))
    assert code_name(answer.error_code) == ""
    return sorted(state.transactional_id for state in answer.transaction_states)


def describe_producers_raw(bootstrap: str, topic: str) -> str:
    """DescribeProducers v0 of partition 0: its error."""
    module = request_module(ApiKey.DESCRIBE_PRODUCERS, 0)
    with RawClient(bootstrap) as client:
        answer = client.call(ApiKey.DESCRIBE_PRODUCERS, 0, module.DescribeProducersRequest(
            topics=(module.TopicRequest(name=topic, partition_indexes=(0,)),),
        ))
    return code_name(answer.topics[0].partitions[0].error_code)


def write_txn_markers_raw(bootstrap: str, topic: str, producer_id: int) -> str:
    """WriteTxnMarkers v1: an ABORT marker for `producer_id` on partition 0 (what the admin
    client's abortTransaction sends): the partition's error."""
    module = request_module(ApiKey.WRITE_TXN_MARKERS, 1)
    with RawClient(bootstrap) as client:
        answer = client.call(ApiKey.WRITE_TXN_MARKERS, 1, module.WriteTxnMarkersRequest(
            markers=(module.WritableTxnMarker(
                producer_id=producer_id, producer_epoch=0, transaction_result=False,
                topics=(module.WritableTxnMarkerTopic(name=topic, partition_indexes=(0,)),),
                coordinator_epoch=0,
            ),),
        ))
    return code_name(answer.markers[0].topics[0].partitions[0].error_code)


def open_transactions_raw(bootstrap: str, topic: str) -> dict[int, int]:
    """DescribeProducers v0 of partition 0: producer id -> its open transaction's first
    offset (-1: none)."""
    module = request_module(ApiKey.DESCRIBE_PRODUCERS, 0)
    with RawClient(bootstrap) as client:
        answer = client.call(ApiKey.DESCRIBE_PRODUCERS, 0, module.DescribeProducersRequest(
            topics=(module.TopicRequest(name=topic, partition_indexes=(0,)),),
        ))
    partition = answer.topics[0].partitions[0]
    assert code_name(partition.error_code) == ""
    return {p.producer_id: p.current_txn_start_offset for p in partition.active_producers}
