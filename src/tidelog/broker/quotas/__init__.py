"""Client quotas on the loop (KIP-13/55/124/219): the store, the sensors, throttling."""
