"""Replication (cluster mode): the services that bind ZooKeeper and the pure ISR rules to the loop.

`cluster_agent` (ZooKeeper watches -> `ClusterView`, its own thread), `replica_manager`
(`Replication`: roles from the view, follower fetchers, ISR shrink/expand written to ZooKeeper),
`leader_requests` (what handlers ask a leader: acks=all waits, fetch bounds, KIP-320 epochs),
`isr` (pure: Kafka's high-watermark and ISR rules), `replica_state`, `replica_fetcher`,
`topic_mirror` (local topics follow ZooKeeper), `hw_checkpointer`."""
