"""ZkStore's admin znodes (cluster/zk_admin.py) against a real ZooKeeper, in Kafka's layouts."""

from __future__ import annotations

import json

from tidelog.cluster.zk_store import ZkStore

from .conftest import ZkFactory


def test_cluster_id_is_written_once(zk_factory: ZkFactory) -> None:
    first, second = ZkStore(zk_factory()), ZkStore(zk_factory())
    assert first.ensure_cluster_id("aaa") == "aaa"
    assert second.ensure_cluster_id("bbb") == "aaa"  # the first broker's id wins


def test_topic_config_create_change_and_notification(zk_factory: ZkFactory) -> None:
    store = ZkStore(zk_factory())
    store.ensure_config_paths()
    assert store.topic_config("t") == {}
    store.create_topic_config("t", {"retention.ms": "1000"})
    assert store.topic_config("t") == {"retention.ms": "1000"}
    store.change_topic_config("t", {"min.insync.replicas": "2"})
    data, _ = store.client.get("/config/topics/t")
    assert json.loads(data) == {"version": 1, "config": {"min.insync.replicas": "2"}}
    [change] = store.client.get_children("/config/changes")
    assert change.startswith("config_change_")
    assert json.loads(store.client.get(f"/config/changes/{change}")[0]) == {
        "version": 2, "entity_path": "topics/t"}
    store.client.set("/config/topics/t", b"not json")
    assert store.topic_config("t") is None  # malformed: the caller logs and ignores it


def test_producer_id_blocks_never_overlap(zk_factory: ZkFactory) -> None:
    stores = [ZkStore(zk_factory()) for _ in range(3)]
    blocks = [store.claim_producer_id_block(broker_id, 1000)
              for _ in range(2) for broker_id, store in enumerate(stores, 1)]
    assert blocks == [(i * 1000, (i + 1) * 1000) for i in range(6)]
    block = json.loads(stores[0].client.get("/latest_producer_id_block")[0])
    assert block == {"version": 1, "broker": 3, "block_start": "5000", "block_end": "5999"}
