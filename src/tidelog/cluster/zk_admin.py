"""Znodes any broker writes outside the controller's and leaders' paths: the cluster id, topic
configs with their change notifications, producer id blocks (a base of `ZkStore`).

Blocking network calls: run on a thread, never on the event loop. Layouts, as Kafka's
ZooKeeper mode writes them:

- `/cluster/id`: `{"version":"1","id":"..."}` (zk_layout), created once by the first broker.
- `/config/topics/<t>`: `{"version":1,"config":{"name":"value",...}}`.
- `/config/changes/config_change_<seq>`: `{"version":2,"entity_path":"topics/<t>"}` after
  each change (brokers here watch the config znode itself; Kafka's tools read these).
- `/config/brokers/<id>` and `/config/brokers/<default>`: dynamic broker configs, the same
  document (only the replication throttle rates are dynamic here), notification
  `"entity_path":"brokers/<id>"`.
- `/latest_producer_id_block`: `{"version":1,"broker":N,"block_start":"<first>",
  "block_end":"<last>"}` (decimal strings, inclusive).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from tidelog.cluster import zk_layout as layout
from tidelog.errors import ErrorCode, KafkaError

CONFIG_TOPICS_PATH = "/config/topics"
CONFIG_BROKERS_PATH = "/config/brokers"
DEFAULT_BROKER = "<default>"  # Kafka's entity name for the cluster-wide default
CONFIG_CHANGE_PREFIX = "/config/changes/config_change_"
PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS_PATH}/{topic}"


def broker_config_path(broker: str) -> str:
    """`broker`: a broker id in decimal, or DEFAULT_BROKER."""
    return f"{CONFIG_BROKERS_PATH}/{broker}"


def _config_document(configs: Mapping[str, str]) -> bytes:
    return json.dumps({"version": 1, "config": dict(configs)}).encode("utf-8")


class AdminZnodes:
    client: KazooClient

    def ensure_cluster_id(self, proposed: str) -> str:
        """The cluster's id from `/cluster/id`; the first broker writes `proposed`."""
        try:
            self.client.create(layout.CLUSTER_ID_PATH, layout.encode_cluster_id(proposed),
                               makepath=True)
        except NodeExistsError:
            pass
        data, _ = self.client.get(layout.CLUSTER_ID_PATH)
        return layout.decode_cluster_id(data)

    def ensure_config_paths(self) -> None:
        self.client.ensure_path(CONFIG_TOPICS_PATH)

    def topic_config(self, topic: str) -> dict[str, str] | None:
        """A topic's config overrides; None if the znode is malformed, {} if absent."""
        try:
            data, _ = self.client.get(topic_config_path(topic))
        except NoNodeError:
            return {}
        try:
            config = json.loads(data)["config"]
            return {str(k): str(v) for k, v in config.items()}
        except (ValueError, KeyError, TypeError, AttributeError):
            return None

    def create_topic_config(self, topic: str, configs: Mapping[str, str]) -> None:
        """At topic creation (AdminZkClient.createTopicWithAssignment writes it first)."""
        try:
            self.client.create(topic_config_path(topic), _config_document(configs))
        except NodeExistsError:
            self.client.set(topic_config_path(topic), _config_document(configs))

    def change_topic_config(self, topic: str, configs: Mapping[str, str]) -> None:
        """Replace the overrides and leave Kafka's change notification
        (AdminZkClient.changeTopicConfig)."""
        path = topic_config_path(topic)
        try:
            self.client.set(path, _config_document(configs))
        except NoNodeError:
            self.client.create(path, _config_document(configs), makepath=True)
        notification = json.dumps({"version": 2, "entity_path": f"topics/{topic}"})
        self.client.create(
            CONFIG_CHANGE_PREFIX, notification.encode("utf-8"), sequence=True, makepath=True
        )

    def broker_config(self, broker: str) -> dict[str, str] | None:
        """A broker's (or `<default>`'s) dynamic configs; None if malformed, {} if absent."""
        try:
            data, _ = self.client.get(broker_config_path(broker))
        except NoNodeError:
            return {}
        try:
            config = json.loads(data)["config"]
            return {str(k): str(v) for k, v in config.items()}
        except (ValueError, KeyError, TypeError, AttributeError):
            return None

    def change_broker_config(self, broker: str, configs: Mapping[str, str]) -> None:
        """Replace `/config/brokers/<broker>` (Kafka's AdminZkClient.changeBrokerConfig) and
        leave the change notification."""
        path = broker_config_path(broker)
        try:
            self.client.set(path, _config_document(configs))
        except NoNodeError:
            self.client.create(path, _config_document(configs), makepath=True)
        notification = json.dumps({"version": 2, "entity_path": f"brokers/{broker}"})
        self.client.create(
            CONFIG_CHANGE_PREFIX, notification.encode("utf-8"), sequence=True, makepath=True
        )

    def claim_producer_id_block(self, broker_id: int, size: int) -> tuple[int, int]:
        """Reserve the next `size` producer ids for `broker_id`, `[start, end)`: a set
        conditional on the znode's version, retried when another broker won (Kafka's
        ZooKeeper-mode protocol), so no id is handed out twice."""
        while True:
            try:
                data, stat = self.client.get(PRODUCER_ID_BLOCK_PATH)
            except NoNodeError:
                start, version = 0, None
            else:
                try:
                    start = int(json.loads(data)["block_end"]) + 1
                except (ValueError, KeyError, TypeError) as error:
                    raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                                     f"malformed {PRODUCER_ID_BLOCK_PATH}: {error}") from None
                version = stat.version
            document = json.dumps({
                "version": 1, "broker": broker_id,
                "block_start": str(start), "block_end": str(start + size - 1),
            }).encode("utf-8")
            try:
                if version is None:
                    self.client.create(PRODUCER_ID_BLOCK_PATH, document, makepath=True)
                else:
                    self.client.set(PRODUCER_ID_BLOCK_PATH, document, version=version)
            except (NodeExistsError, BadVersionError):
                continue  # another broker claimed a block meanwhile
            return start, start + size
