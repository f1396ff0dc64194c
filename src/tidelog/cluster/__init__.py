"""Replicated cluster: ZooKeeper layout, replica placement, leader election, the controller.

Kafka's classic (pre-KRaft) design over a real ZooKeeper (ARCHITECTURE D10). The pure modules
(`zk_layout`, `placement`) take values and return values; `controller_zk` and
`zookeeper_server` do blocking I/O and are called from threads, never from the event loop.
"""
