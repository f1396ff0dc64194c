"""Cluster calls for the Transactions page, as `tidelog transactions` (Kafka's
kafka-transactions.sh) makes them, but to the right brokers and as the signed-in user:
ListTransactions (v1) to every broker, FindCoordinator (v4, transaction keys) then
DescribeTransactions (v0) to each coordinator, DescribeProducers (v0) to the partitions' leaders
for the open transactions' first offsets, and WriteTxnMarkers (v1) to abort a hanging one.
confluent-kafka has no admin call for these, so they go through `kafka_raw`.
"""

from __future__ import annotations

import struct
import time
from collections import defaultdict
from typing import Any

from kio.schema.errors import ErrorCode

from tidelog.console.cluster_clients import ClusterClients
from tidelog.console.errors import (
    AUTHORIZATION_CODES,
    ClusterError,
    NotFound,
    not_allowed,
)
from tidelog.console.kafka_raw import RawConnection, schema_module

FIND_COORDINATOR, LIST_TRANSACTIONS, DESCRIBE_TRANSACTIONS = 10, 66, 65
DESCRIBE_PRODUCERS, WRITE_TXN_MARKERS = 61, 27
TRANSACTION_KEY = 1  # FindCoordinator key_type
MAX_DESCRIBED = 500  # transactions described per page load


def _name(code: int) -> str:
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"error {code}"


class TransactionCalls(ClusterClients):
    def _brokers(self) -> dict[int, tuple[str, int]]:
        md = self.metadata()
        return {b.id: (b.host, b.port) for b in md.brokers.values()}

    def _connect(self, address: tuple[str, int]) -> RawConnection:
        return self.raw(address)

    def transactions(self) -> dict[str, Any]:
        brokers = self._brokers()
        listed: dict[str, dict[str, Any]] = {}
        lister = schema_module(LIST_TRANSACTIONS, 1)
        for address in brokers.values():
            with self._connect(address) as conn:
                answer = conn.call(LIST_TRANSACTIONS, 1, lister.ListTransactionsRequest(
                    state_filters=(), producer_id_filters=(), duration_filter=-1))
            code = answer.error_code.value
            if code != 0:
                raise ClusterError(f"listing transactions: {_name(code)}")
            for t in answer.transaction_states:
                listed[t.transactional_id] = {"transactional_id": t.transactional_id,
                                              "producer_id": int(t.producer_id),
                                              "state": t.transaction_state}
        ids = sorted(listed)[:MAX_DESCRIBED]
        described = self._describe(ids, brokers) if ids else {}
        rows = [{**listed[i], **described.get(i, {})} for i in ids]
        self._add_start_offsets(rows, brokers)
        return {"transactions": rows, "truncated": len(listed) > len(ids)}

    def _coordinators(self, ids: list[str], brokers: dict[int, tuple[str, int]]
                      ) -> dict[int, list[str]]:
        finder = schema_module(FIND_COORDINATOR, 4)
        with self._connect(next(iter(brokers.values()))) as conn:
            answer = conn.call(FIND_COORDINATOR, 4, finder.FindCoordinatorRequest(
                key_type=TRANSACTION_KEY, coordinator_keys=tuple(ids)))
        by_node: dict[int, list[str]] = defaultdict(list)
        for c in answer.coordinators:
            code = c.error_code.value
            if code in {int(x) for x in AUTHORIZATION_CODES}:
                continue  # DescribeTransactions will say so for this id
            if code != 0:
                raise ClusterError(f"finding the coordinator of {c.key!r}: {_name(code)}", 503)
            brokers.setdefault(int(c.node_id), (c.host, int(c.port)))
            by_node[int(c.node_id)].append(c.key)
        return by_node

    def _describe(self, ids: list[str], brokers: dict[int, tuple[str, int]]
                  ) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        describer = schema_module(DESCRIBE_TRANSACTIONS, 0)
        for node, keys in self._coordinators(ids, brokers).items():
            request = describer.DescribeTransactionsRequest(transactional_ids=tuple(keys))
            with self._connect(brokers[node]) as conn:
                data = conn.exchange(DESCRIBE_TRANSACTIONS, 0, request)
            for row in parse_describe_transactions(data):
                out[row["transactional_id"]] = row
        now = int(time.time() * 1000)
        for row in out.values():
            start = row.get("start_time_ms")
            row["duration_ms"] = now - start if start is not None else None
        return out

    def _add_start_offsets(self, rows: list[dict[str, Any]],
                           brokers: dict[int, tuple[str, int]]) -> None:
        """Each open transaction's first offset per partition (what abort needs), asked of
        the partitions' leaders."""
        wanted: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
        for row in rows:
            for p in row.get("partitions", []):
                if row.get("state") == "Ongoing":
                    wanted[(p["topic"], p["partition"])].append(p)
        if not wanted:
            return
        leaders = self._leaders({t for t, _ in wanted})
        by_leader: dict[int, list[tuple[str, int]]] = defaultdict(list)
        for tp in wanted:
            if tp in leaders:
                by_leader[leaders[tp]].append(tp)
        ids = {id(p): row["producer_id"] for row in rows for p in row.get("partitions", [])}
        for leader, tps in by_leader.items():
            for (topic, partition), result in self._producers(brokers[leader], tps).items():
                for p in wanted[(topic, partition)]:
                    if isinstance(result, str):
                        p["error"] = result
                        continue
                    for producer in result:
                        if producer["producer_id"] == ids[id(p)] and \
                                producer["current_txn_start_offset"] >= 0:
                            p["start_offset"] = producer["current_txn_start_offset"]

    def _leaders(self, topics: set[str]) -> dict[tuple[str, int], int]:
        md = self.metadata()
        return {(t, p.id): p.leader for t in topics if t in md.topics
                for p in md.topics[t].partitions.values()}

    def _producers(self, address: tuple[str, int], tps: list[tuple[str, int]]
                   ) -> dict[tuple[str, int], list[dict[str, int]] | str]:
        module = schema_module(DESCRIBE_PRODUCERS, 0)
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, partition in tps:
            by_topic[topic].append(partition)
        with self._connect(address) as conn:
            answer = conn.call(DESCRIBE_PRODUCERS, 0, module.DescribeProducersRequest(topics=tuple(
                module.TopicRequest(name=t, partition_indexes=tuple(ps))
                for t, ps in by_topic.items())))
        out: dict[tuple[str, int], list[dict[str, int]] | str] = {}
        for topic in answer.topics:
            for p in topic.partitions:
                code = p.error_code.value
                out[(topic.name, int(p.partition_index))] = _name(code) if code else [
                    {"producer_id": int(s.producer_id), "producer_epoch": int(s.producer_epoch),
                     "coordinator_epoch": int(s.coordinator_epoch),
                     "current_txn_start_offset": int(s.current_txn_start_offset)}
                    for s in p.active_producers]
        return out

    def abort_transaction(self, topic: str, partition: int, start_offset: int) -> dict[str, Any]:
        """Kafka's `kafka-transactions abort --start-offset`: the producer whose open
        transaction starts there gets an ABORT marker on that partition."""
        brokers = self._brokers()
        leader = self._leaders({topic}).get((topic, partition))
        if leader is None or leader not in brokers:
            self.topic_metadata(topic)  # 403 or 404 in words
            raise NotFound(f"topic {topic!r} has no partition {partition} with a leader")
        doing = f"aborting the transaction on {topic}-{partition}"
        result = self._producers(brokers[leader], [(topic, partition)])[(topic, partition)]
        if isinstance(result, str):
            if result in {ErrorCode(int(c)).name.upper() for c in AUTHORIZATION_CODES}:
                raise not_allowed(doing, result)
            raise ClusterError(f"{doing}: {result}")
        matches = [p for p in result if p["current_txn_start_offset"] == start_offset]
        if not matches:
            raise NotFound(f"no open transaction starts at offset {start_offset} of "
                           f"{topic}-{partition}")
        producer = matches[0]
        markers = schema_module(WRITE_TXN_MARKERS, 1)
        with self._connect(brokers[leader]) as conn:
            answer = conn.call(WRITE_TXN_MARKERS, 1, markers.WriteTxnMarkersRequest(markers=(
                markers.WritableTxnMarker(
                    producer_id=producer["producer_id"],
                    producer_epoch=producer["producer_epoch"], transaction_result=False,
                    coordinator_epoch=producer["coordinator_epoch"],
                    topics=(markers.WritableTxnMarkerTopic(
                        name=topic, partition_indexes=(partition,)),)),)))
        code = answer.markers[0].topics[0].partitions[0].error_code.value
        if code in {int(c) for c in AUTHORIZATION_CODES}:
            raise not_allowed(doing, _name(code))
        if code != 0:
            raise ClusterError(f"{doing}: {_name(code)}")
        return {"topic": topic, "partition": partition, "start_offset": start_offset,
                "producer_id": producer["producer_id"],
                "producer_epoch": producer["producer_epoch"]}


def parse_describe_transactions(data: bytes) -> list[dict[str, Any]]:
    """DescribeTransactions v0's answer (flexible), read by hand: kio refuses the start time
    -1 of an id with no transaction started. Every length is checked against the bytes left."""
    cursor = _Cursor(data)
    cursor.take(">i")  # throttle_time_ms
    rows = []
    for _ in range(cursor.count()):
        code = cursor.take(">h")
        txn_id, state = cursor.string(), cursor.string()
        timeout_ms, start_ms = cursor.take(">i"), cursor.take(">q")
        producer_id, epoch = cursor.take(">q"), cursor.take(">h")
        partitions = []
        for _ in range(cursor.count()):
            topic = cursor.string()
            partitions += [{"topic": topic, "partition": cursor.take(">i")}
                           for _ in range(cursor.count())]
            cursor.skip_tagged_fields()
        cursor.skip_tagged_fields()
        row: dict[str, Any] = {"transactional_id": txn_id}
        if code != 0:
            row["error"] = _name(code)
        else:
            row.update({"state": state, "producer_id": producer_id, "producer_epoch": epoch,
                        "timeout_ms": timeout_ms,
                        "start_time_ms": start_ms if start_ms >= 0 else None,
                        "partitions": sorted(partitions,
                                             key=lambda p: (p["topic"], p["partition"]))})
        rows.append(row)
    return rows


class _Cursor:
    def __init__(self, data: bytes) -> None:
        self.data, self.position = data, 0

    def take(self, fmt: str) -> int:
        size = struct.calcsize(fmt)
        if self.position + size > len(self.data):
            raise ClusterError("truncated DescribeTransactions answer")
        value = int(struct.unpack_from(fmt, self.data, self.position)[0])
        self.position += size
        return value

    def uvarint(self) -> int:
        result = shift = 0
        while True:
            byte = self.take(">B")
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7
            if shift > 28:
                raise ClusterError("bad varint in DescribeTransactions answer")

    def count(self) -> int:
        count = self.uvarint() - 1
        if count < 0 or count > len(self.data) - self.position:
            raise ClusterError("bad length in DescribeTransactions answer")
        return count

    def string(self) -> str:
        size = self.count()
        text = self.data[self.position : self.position + size].decode("utf-8", "replace")
        self.position += size
        return text

    def skip_tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            size = self.uvarint()
            if size > len(self.data) - self.position:
                raise ClusterError("bad tagged field in DescribeTransactions answer")
            self.position += size
