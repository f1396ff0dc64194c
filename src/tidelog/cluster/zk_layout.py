"""Kafka's classic ZooKeeper layout: the znode paths (payloads: `zk_payloads.py`).

Pure. Paths are built from validated names only (topic names by Kafka's rule, non-negative
ids), so a path never escapes its parent. This module re-exports `zk_payloads`, so callers
import paths and payload values from one place.

Znodes (P = persistent, E = ephemeral, S = persistent sequential; JSON field by field in
`zk_payloads.py`):

    /brokers/ids/<id>                              E  one live broker (czxid = broker epoch)
    /controller                                    E  the active controller
    /controller_epoch                              P  decimal epoch; fences stale controllers
    /brokers/topics/<topic>                        P  replica assignment and topic id
    /brokers/topics/<topic>/partitions/<p>/state   P  leader, leader epoch, ISR
    /isr_change_notification/isr_change_<seq>      S  partitions whose ISR a leader changed
    /admin/delete_topics/<topic>                   P  a request to delete <topic>
    /cluster/id                                    P  the cluster id
"""

from __future__ import annotations

from tidelog.cluster.zk_payloads import (
    MAX_PAYLOAD_BYTES,
    NO_LEADER,
    BrokerEndpoint,
    BrokerRegistration,
    ControllerRegistration,
    PartitionState,
    TopicAssignment,
    ZkLayoutError,
    check_broker_id,
    decode_cluster_id,
    decode_controller_epoch,
    decode_isr_change,
    decode_reassignment,
    encode_cluster_id,
    encode_controller_epoch,
    encode_isr_change,
    encode_reassignment,
    new_topic_id,
    validate_topic_name,
)
from tidelog.types import TopicPartition

__all__ = [
    "BROKERS_PATH",
    "BROKER_IDS_PATH",
    "CLUSTER_ID_PATH",
    "CONTROLLER_EPOCH_PATH",
    "CONTROLLER_PATH",
    "DELETE_TOPICS_PATH",
    "INITIAL_CONTROLLER_EPOCH",
    "ISR_CHANGE_NOTIFICATION_PATH",
    "ISR_CHANGE_PREFIX",
    "MAX_PAYLOAD_BYTES",
    "NO_LEADER",
    "PERSISTENT_PATHS",
    "REASSIGN_PARTITIONS_PATH",
    "TOPICS_PATH",
    "BrokerEndpoint",
    "BrokerRegistration",
    "ControllerRegistration",
    "PartitionState",
    "TopicAssignment",
    "ZkLayoutError",
    "broker_path",
    "check_broker_id",
    "decode_cluster_id",
    "decode_controller_epoch",
    "decode_isr_change",
    "decode_reassignment",
    "delete_topic_path",
    "encode_cluster_id",
    "encode_controller_epoch",
    "encode_isr_change",
    "encode_reassignment",
    "new_topic_id",
    "partition_path",
    "partition_state_path",
    "partitions_path",
    "topic_path",
    "validate_topic_name",
]

BROKERS_PATH = "/brokers"
BROKER_IDS_PATH = "/brokers/ids"
TOPICS_PATH = "/brokers/topics"
CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
ISR_CHANGE_NOTIFICATION_PATH = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
DELETE_TOPICS_PATH = "/admin/delete_topics"
REASSIGN_PARTITIONS_PATH = "/admin/reassign_partitions"
# An admin's request for preferred leader elections (Kafka's ZooKeeper-mode path and payload:
# {"version":1,"partitions":[{"topic":"t","partition":0}]}); the controller elects, then
# deletes it.
PREFERRED_REPLICA_ELECTION_PATH = "/admin/preferred_replica_election"
CLUSTER_ID_PATH = "/cluster/id"
PERSISTENT_PATHS = (
    BROKER_IDS_PATH,
    TOPICS_PATH,
    ISR_CHANGE_NOTIFICATION_PATH,
    DELETE_TOPICS_PATH,
    "/cluster",
)
"""Created at startup by whoever connects first (idempotent)."""

INITIAL_CONTROLLER_EPOCH = 0
"""Value written when `/controller_epoch` is created; the first controller takes epoch 1."""


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS_PATH}/{check_broker_id(broker_id)}"


def topic_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{validate_topic_name(topic)}"


def partitions_path(topic: str) -> str:
    return f"{topic_path(topic)}/partitions"


def partition_path(tp: TopicPartition) -> str:
    if tp.partition < 0:
        raise ZkLayoutError(f"negative partition {tp.partition}")
    return f"{partitions_path(tp.topic)}/{tp.partition}"


def partition_state_path(tp: TopicPartition) -> str:
    return f"{partition_path(tp)}/state"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS_PATH}/{validate_topic_name(topic)}"
