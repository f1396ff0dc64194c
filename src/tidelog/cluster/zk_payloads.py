"""Kafka's classic ZooKeeper payloads: the JSON in each znode, encoded and validated.

Pure: values in, bytes out and back. Every payload is UTF-8 JSON, written exactly as Kafka's
ZooKeeper mode writes it (kafka.zk.ZkData), so `zkCli.sh` output reads the same as a Kafka
cluster's. Decoders validate every field and raise `ZkLayoutError`, never anything else.
The paths are in `zk_layout.py`, which re-exports everything here.

Znodes (P = persistent, E = ephemeral, S = persistent sequential):

`/brokers/ids/<id>` (E) one live broker; its creation zxid (`czxid`) is the broker epoch:
    {"version": 5,                      format version (4 and 5 are read)
     "host": "127.0.0.1",               host of the first endpoint
     "port": 9092,                      port of the first endpoint
     "endpoints": ["PLAINTEXT://127.0.0.1:9092"],   listener://host:port, one per listener
     "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
     "jmx_port": -1,                    no JMX
     "rack": null,                      rack id or null (Kafka omits the key when unset)
     "features": {},                    finalized-feature ranges (none)
     "timestamp": "1700000000000"}      registration time, ms since the epoch, as a string
`/controller` (E) the active controller:
    {"version": 2, "brokerid": 1, "timestamp": "1700000000000", "kraftControllerEpoch": -1}
    (-1: not a KRaft migration; version 1 without that key is also read)
`/controller_epoch` (P) the controller epoch as decimal ASCII, e.g. `3`. A new controller
    creates `/controller` and bumps this in one multi-op conditional on this znode's version;
    every later controller write checks that version, which fences a stale controller.
`/brokers/topics/<topic>` (P) replica assignment:
    {"version": 3,
     "partitions": {"0": [1, 2, 3]},    partition -> replicas, preferred leader first
     "topic_id": "AAAAAAAAAAAAAAAAAAAAAA",  22-char base64url UUID without padding
     "adding_replicas": {"0": [4]},     partition -> replicas a reassignment adds
     "removing_replicas": {"0": [1]}}   partition -> replicas it removes (both {} when none)
    During a reassignment `partitions` holds target + original replicas (target first).
`/admin/reassign_partitions` (P) a reassignment request, read and deleted by the controller:
    {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [2, 3, 4]}]}
`/brokers/topics/<topic>/partitions/<p>/state` (P) leader and ISR:
    {"controller_epoch": 1,             epoch of the controller that last wrote it
     "leader": 1,                       broker id, -1 when no replica can lead
     "version": 1,
     "leader_epoch": 0,                 bumped by every controller leadership/ISR change
     "isr": [1, 2, 3]}                  in-sync replicas, never empty
`/isr_change_notification/isr_change_<seq>` (S) a leader changed ISRs itself; the controller
    re-reads these partitions, then deletes the notification:
    {"version": 1, "partitions": [{"topic": "t", "partition": 0}]}
`/admin/delete_topics/<topic>` (P, empty) a request to delete `<topic>`.
`/cluster/id` (P) {"version": "1", "id": "<22-char base64url>"}
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tidelog.errors import TidelogError
from tidelog.types import TopicPartition

NO_LEADER = -1
MAX_PAYLOAD_BYTES = 1 << 20  # ZooKeeper's default jute.maxbuffer
_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")
_LISTENER_NAME = re.compile(r"[A-Z0-9_]{1,249}")
_PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})
MAX_ENDPOINTS = 64  # a registration names a handful of listeners; a bound on what we parse
_ENDPOINT = re.compile(r"([A-Z0-9_]+)://([^:/\s]*|\[[0-9a-fA-F:]+\]):(\d{1,5})")


class ZkLayoutError(TidelogError):
    """A znode path or payload breaks Kafka's layout."""


def validate_topic_name(topic: str) -> str:
    """Kafka's rule: 1..249 of `[a-zA-Z0-9._-]`, not `.` or `..`."""
    if not _TOPIC_NAME.fullmatch(topic) or topic in (".", ".."):
        raise ZkLayoutError(f"illegal topic name {topic!r}")
    return topic


def new_topic_id() -> str:
    """A random UUID as Kafka prints it: base64url without the `==` padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")


# ---------------------------------------------------------------- payload values


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    """One listener of a registered broker: `CLIENT://host:9094` with its security protocol."""

    listener: str
    security_protocol: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """The payload of `/brokers/ids/<id>` (the epoch is the znode's czxid, not in the JSON).

    `host`/`port`/`listener` is the first endpoint, the one the registering broker's peers
    replicate from (its inter-broker listener); `other_endpoints` are its other listeners,
    which Metadata answers to clients connected to a listener of that name."""

    broker_id: int
    host: str
    port: int
    timestamp_ms: int
    rack: str | None = None
    listener: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"
    other_endpoints: tuple[BrokerEndpoint, ...] = ()

    @property
    def endpoints(self) -> tuple[BrokerEndpoint, ...]:
        first = BrokerEndpoint(self.listener, self.security_protocol, self.host, self.port)
        return (first, *self.other_endpoints)

    def endpoint(self, listener: str) -> BrokerEndpoint | None:
        return next((e for e in self.endpoints if e.listener == listener), None)

    def encode(self) -> bytes:
        check_broker_id(self.broker_id)
        for endpoint in self.endpoints:
            _check_port(endpoint.port)
            if not _LISTENER_NAME.fullmatch(endpoint.listener):
                raise ZkLayoutError(f"illegal listener name {endpoint.listener!r}")
        return _dump(
            {
                "features": {},
                "listener_security_protocol_map": {
                    e.listener: e.security_protocol for e in self.endpoints},
                "endpoints": [f"{e.listener}://{e.host}:{e.port}" for e in self.endpoints],
                "jmx_port": -1,
                "port": self.port,
                "host": self.host,
                "version": 5,
                "rack": self.rack,
                "timestamp": str(self.timestamp_ms),
            }
        )

    @classmethod
    def decode(cls, broker_id: int, data: bytes) -> BrokerRegistration:
        obj = _load(data)
        if _int(obj, "version") not in (4, 5):
            raise ZkLayoutError(f"unsupported broker registration version {obj['version']}")
        endpoints = obj.get("endpoints")
        if not isinstance(endpoints, list) or not endpoints or len(endpoints) > MAX_ENDPOINTS:
            raise ZkLayoutError("broker registration without endpoints (or too many)")
        protocols = obj.get("listener_security_protocol_map") or {}
        if not isinstance(protocols, dict):
            raise ZkLayoutError("listener_security_protocol_map must be an object")
        parsed: list[BrokerEndpoint] = []
        for text in endpoints:
            match = _ENDPOINT.fullmatch(text) if isinstance(text, str) else None
            if match is None:
                raise ZkLayoutError(f"malformed endpoint {text!r}")
            listener = match.group(1)
            protocol = protocols.get(listener, listener)
            if protocol not in _PROTOCOLS:
                raise ZkLayoutError(f"listener {listener}: unknown security protocol {protocol!r}")
            parsed.append(BrokerEndpoint(listener, protocol, match.group(2),
                                         _check_port(int(match.group(3)))))
        rack = obj.get("rack")
        if rack is not None and not isinstance(rack, str):
            raise ZkLayoutError("rack must be a string or null")
        first = parsed[0]
        return cls(
            broker_id=check_broker_id(broker_id),
            host=first.host,
            port=first.port,
            timestamp_ms=_timestamp(obj),
            rack=rack,
            listener=first.listener,
            security_protocol=first.security_protocol,
            other_endpoints=tuple(parsed[1:]),
        )


@dataclass(frozen=True, slots=True)
class ControllerRegistration:
    """The payload of `/controller`."""

    broker_id: int
    timestamp_ms: int

    def encode(self) -> bytes:
        check_broker_id(self.broker_id)
        return _dump(
            {
                "version": 2,
                "brokerid": self.broker_id,
                "timestamp": str(self.timestamp_ms),
                "kraftControllerEpoch": -1,
            }
        )

    @classmethod
    def decode(cls, data: bytes) -> ControllerRegistration:
        obj = _load(data)
        if _int(obj, "version") not in (1, 2):
            raise ZkLayoutError(f"unsupported controller version {obj['version']}")
        return cls(check_broker_id(_int(obj, "brokerid")), _timestamp(obj))


def encode_controller_epoch(epoch: int) -> bytes:
    if epoch < 0:
        raise ZkLayoutError(f"negative controller epoch {epoch}")
    return str(epoch).encode("ascii")


def decode_controller_epoch(data: bytes) -> int:
    text = data.decode("ascii", "replace").strip()
    if not _is_decimal(text) or len(text) > 10:
        raise ZkLayoutError(f"malformed controller epoch {data[:32]!r}")
    return int(text)


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    """The payload of `/brokers/topics/<topic>`: replicas per partition, preferred leader first."""

    topic: str
    topic_id: str
    partitions: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    # A reassignment in flight (Kafka's ReplicaAssignment): partition -> replicas it adds /
    # removes; `partitions` then holds the target and the original replicas together.
    adding_replicas: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    removing_replicas: Mapping[int, tuple[int, ...]] = field(default_factory=dict)

    def target_replicas(self, partition: int) -> tuple[int, ...]:
        """The replicas a reassignment moves to (the replicas themselves when none)."""
        removing = set(self.removing_replicas.get(partition, ()))
        return tuple(b for b in self.replicas(partition) if b not in removing)

    def origin_replicas(self, partition: int) -> tuple[int, ...]:
        """The replicas before the reassignment (what a cancellation goes back to)."""
        adding = set(self.adding_replicas.get(partition, ()))
        return tuple(b for b in self.replicas(partition) if b not in adding)

    def is_reassigning(self, partition: int) -> bool:
        return bool(self.adding_replicas.get(partition) or self.removing_replicas.get(partition))

    def replicas(self, partition: int) -> tuple[int, ...]:
        try:
            return self.partitions[partition]
        except KeyError:
            raise ZkLayoutError(f"{self.topic} has no partition {partition}") from None

    def encode(self) -> bytes:
        validate_topic_name(self.topic)
        _check_partitions(self.partitions)
        return _dump(
            {
                "version": 3,
                "partitions": {
                    str(p): list(replicas) for p, replicas in sorted(self.partitions.items())
                },
                "topic_id": self.topic_id,
                "adding_replicas": _partition_lists(self.adding_replicas),
                "removing_replicas": _partition_lists(self.removing_replicas),
            }
        )

    @classmethod
    def decode(cls, topic: str, data: bytes) -> TopicAssignment:
        obj = _load(data)
        if _int(obj, "version") not in (1, 2, 3):
            raise ZkLayoutError(f"unsupported topic assignment version {obj['version']}")
        raw = obj.get("partitions")
        if not isinstance(raw, dict):
            raise ZkLayoutError("topic assignment without partitions")
        partitions: dict[int, tuple[int, ...]] = {}
        for key, replicas in raw.items():
            if not isinstance(key, str) or not _is_decimal(key) or len(key) > 9:
                raise ZkLayoutError(f"malformed partition id {key!r}")
            partitions[int(key)] = _broker_list(replicas, "replicas")
        _check_partitions(partitions)
        topic_id = obj.get("topic_id", "")
        if not isinstance(topic_id, str):
            raise ZkLayoutError("topic_id must be a string")
        adding = _decode_partition_lists(obj.get("adding_replicas", {}), "adding_replicas")
        removing = _decode_partition_lists(obj.get("removing_replicas", {}), "removing_replicas")
        for moving in (adding, removing):
            for p, brokers in moving.items():
                if p not in partitions or not set(brokers) <= set(partitions[p]):
                    raise ZkLayoutError(f"partition {p}: {brokers} are not among its replicas")
        return cls(validate_topic_name(topic), topic_id, partitions, adding, removing)


def _partition_lists(lists: Mapping[int, tuple[int, ...]]) -> dict[str, list[int]]:
    return {str(p): list(brokers) for p, brokers in sorted(lists.items()) if brokers}


def _decode_partition_lists(raw: Any, name: str) -> dict[int, tuple[int, ...]]:
    if not isinstance(raw, dict):
        raise ZkLayoutError(f"{name} must be an object")
    result: dict[int, tuple[int, ...]] = {}
    for key, brokers in raw.items():
        if not isinstance(key, str) or not _is_decimal(key) or len(key) > 9:
            raise ZkLayoutError(f"malformed partition id {key!r} in {name}")
        result[int(key)] = _broker_list(brokers, name)
    return result


MAX_REASSIGNMENT_ENTRIES = 100_000  # bounded by the znode size anyway (1 MiB)


def encode_reassignment(targets: Mapping[TopicPartition, tuple[int, ...]]) -> bytes:
    """`/admin/reassign_partitions` (Kafka's ReassignPartitionsZNode, version 1)."""
    entries = []
    for tp, replicas in sorted(targets.items()):
        validate_topic_name(tp.topic)
        entries.append(
            {"topic": tp.topic, "partition": tp.partition,
             "replicas": list(_broker_list(list(replicas), "replicas"))}
        )
    return _dump({"version": 1, "partitions": entries})


def decode_reassignment(data: bytes) -> dict[TopicPartition, tuple[int, ...]]:
    obj = _load(data)
    if _int(obj, "version") != 1:
        raise ZkLayoutError(f"unsupported reassignment version {obj['version']}")
    raw = obj.get("partitions")
    if not isinstance(raw, list) or len(raw) > MAX_REASSIGNMENT_ENTRIES:
        raise ZkLayoutError("reassignment without a partitions list")
    targets: dict[TopicPartition, tuple[int, ...]] = {}
    for entry in raw:
        if not isinstance(entry, dict) or not isinstance(entry.get("topic"), str):
            raise ZkLayoutError(f"malformed reassignment entry {entry!r}")
        partition = _int(entry, "partition")
        if partition < 0:
            raise ZkLayoutError(f"invalid partition {partition}")
        tp = TopicPartition(validate_topic_name(entry["topic"]), partition)
        targets[tp] = _broker_list(entry.get("replicas"), "replicas")
    return targets


@dataclass(frozen=True, slots=True)
class PartitionState:
    """The payload of `.../partitions/<p>/state` (Kafka's LeaderIsrAndControllerEpoch)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int

    def __post_init__(self) -> None:
        if self.leader < NO_LEADER or self.leader_epoch < 0 or self.controller_epoch < 0:
            raise ZkLayoutError(f"invalid partition state {self}")
        if not self.isr or len(set(self.isr)) != len(self.isr) or min(self.isr) < 0:
            raise ZkLayoutError(f"invalid ISR {self.isr}")

    def encode(self) -> bytes:
        return _dump(
            {
                "controller_epoch": self.controller_epoch,
                "leader": self.leader,
                "version": 1,
                "leader_epoch": self.leader_epoch,
                "isr": list(self.isr),
            }
        )

    @classmethod
    def decode(cls, data: bytes) -> PartitionState:
        obj = _load(data)
        if _int(obj, "version") not in (1, 2):
            raise ZkLayoutError(f"unsupported partition state version {obj['version']}")
        return cls(
            leader=_int(obj, "leader"),
            leader_epoch=_int(obj, "leader_epoch"),
            isr=_broker_list(obj.get("isr"), "isr"),
            controller_epoch=_int(obj, "controller_epoch"),
        )


def encode_isr_change(partitions: list[TopicPartition]) -> bytes:
    return _dump(
        {
            "version": 1,
            "partitions": [{"topic": tp.topic, "partition": tp.partition} for tp in partitions],
        }
    )


def decode_isr_change(data: bytes) -> list[TopicPartition]:
    obj = _load(data)
    if _int(obj, "version") != 1:
        raise ZkLayoutError(f"unsupported ISR change version {obj['version']}")
    raw = obj.get("partitions")
    if not isinstance(raw, list):
        raise ZkLayoutError("ISR change without partitions")
    result = []
    for item in raw:
        if not isinstance(item, dict) or not isinstance(item.get("topic"), str):
            raise ZkLayoutError(f"malformed ISR change entry {item!r}")
        partition = _int(item, "partition")
        if partition < 0:
            raise ZkLayoutError(f"negative partition {partition}")
        result.append(TopicPartition(validate_topic_name(item["topic"]), partition))
    return result


def encode_cluster_id(cluster_id: str) -> bytes:
    return _dump({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    obj = _load(data)
    cluster_id = obj.get("id")
    if not isinstance(cluster_id, str) or not cluster_id:
        raise ZkLayoutError("cluster id missing")
    return cluster_id


# ---------------------------------------------------------------- helpers


def _dump(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode("utf-8")


def _load(data: bytes) -> dict[str, Any]:
    if len(data) > MAX_PAYLOAD_BYTES:
        raise ZkLayoutError(f"payload of {len(data)} bytes exceeds {MAX_PAYLOAD_BYTES}")
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ZkLayoutError(f"not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise ZkLayoutError("payload is not a JSON object")
    return obj


def _is_decimal(text: str) -> bool:
    # str.isdigit() alone accepts digits such as "²" that int() rejects.
    return text.isascii() and text.isdigit()


def _int(obj: Mapping[str, Any], key: str) -> int:
    value = obj.get(key)
    # bool is an int subclass in Python; JSON true is not a number.
    if not isinstance(value, int) or isinstance(value, bool) or not -(2**63) <= value < 2**63:
        raise ZkLayoutError(f"field {key!r} must be an integer, got {value!r}")
    return value


def _timestamp(obj: Mapping[str, Any]) -> int:
    value = obj.get("timestamp")
    # Kafka writes the timestamp as a decimal string; accept a number too.
    if isinstance(value, str) and _is_decimal(value) and len(value) <= 18:
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63:
        return value
    raise ZkLayoutError(f"malformed timestamp {value!r}")


def _broker_list(value: Any, name: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not value:
        raise ZkLayoutError(f"{name} must be a non-empty list")
    result = []
    for item in value:
        if not isinstance(item, int) or isinstance(item, bool):
            raise ZkLayoutError(f"{name} entries must be broker ids, got {item!r}")
        result.append(check_broker_id(item))
    if len(set(result)) != len(result):
        raise ZkLayoutError(f"duplicate broker in {name} {result}")
    return tuple(result)


def _check_partitions(partitions: Mapping[int, tuple[int, ...]]) -> None:
    if not partitions:
        raise ZkLayoutError("a topic needs at least one partition")
    if sorted(partitions) != list(range(len(partitions))):
        raise ZkLayoutError(f"partitions must be numbered 0..n-1, got {sorted(partitions)}")
    for replicas in partitions.values():
        _broker_list(list(replicas), "replicas")


def check_broker_id(broker_id: int) -> int:
    if not 0 <= broker_id < 2**31:
        raise ZkLayoutError(f"invalid broker id {broker_id}")
    return broker_id


def _check_port(port: int) -> int:
    if not 0 < port < 65536:
        raise ZkLayoutError(f"invalid port {port}")
    return port
