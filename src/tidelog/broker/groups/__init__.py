"""Consumer groups on the loop: `service` (GroupService: one coordinator shard per
`__consumer_offsets` partition, appends, timers, parked requests), `writes` (uncommitted writes
reverted when their append, fsync or high-watermark wait fails), `loading` (replaying a
partition, group settings, /metrics figures), `cluster` (the offsets topic and coordinator
lookup in cluster mode), `transactional` (TxnOffsetCommit's offsets appended inside the
producer's transaction). The state machine itself is pure: `tidelog.coordinator`."""
