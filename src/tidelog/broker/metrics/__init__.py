"""Prometheus metrics: `registry` (BrokerMetrics, counters and histograms the loop updates) and
`http` (the /metrics and /health endpoint served on the broker loop)."""
