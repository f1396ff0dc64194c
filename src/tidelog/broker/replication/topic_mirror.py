"""Cluster mode: local topics follow ZooKeeper's (`/brokers/topics`, `/config/topics`).

A view listener of `Replication` (runs on the event loop, on every new `ClusterView`): a topic
in the view is adopted locally (its id and partition count), its log configs follow
AlterConfigs written to ZooKeeper by any broker, and a topic gone from the view (DeleteTopics)
has its local logs deleted. Replication has stopped that topic's fetchers and waiters first.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from tidelog.broker.replication.cluster_agent import ClusterView, topic_uuid
from tidelog.errors import KafkaError

if TYPE_CHECKING:
    from tidelog.broker.state import Broker

log = logging.getLogger("tidelog.broker.replication.replica_manager")
MIN_INSYNC_REPLICAS = "min.insync.replicas"
UNCLEAN_LEADER_ELECTION = "unclean.leader.election.enable"
# Replication's own topic configs: kept in ZooKeeper, never in the local LogConfig.
REPLICATION_TOPIC_CONFIGS = frozenset({MIN_INSYNC_REPLICAS, UNCLEAN_LEADER_ELECTION})


class TopicMirror:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def on_view(self, view: ClusterView, previous: ClusterView | None) -> set[str]:
        """Apply the view's topics; returns the topics that cannot be hosted here."""
        if previous is not None:
            for topic in set(previous.topics) - set(view.topics):
                if self.broker.topics.get(topic) is not None:
                    self.broker.delete_topic(topic)  # deleted through ZooKeeper
        unhostable: set[str] = set()
        for topic, assignment in view.topics.items():
            configs = {
                k: v for k, v in view.configs.get(topic, {}).items()
                if k not in REPLICATION_TOPIC_CONFIGS
            }
            try:
                info = self.broker.adopt_topic(
                    topic, topic_uuid(assignment.topic_id), len(assignment.partitions), configs
                )
                if dict(info.configs) != configs:  # AlterConfigs through ZooKeeper
                    self.broker.set_topic_configs(topic, configs)
                    log.info("topic %s: configs now %s", topic, configs)
            except (KafkaError, ValueError) as error:
                log.error("topic %s cannot be hosted: %s", topic, error)
                unhostable.add(topic)
        return unhostable
