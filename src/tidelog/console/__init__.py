"""Tidelog console: a web UI and JSON API for any Kafka-protocol cluster (issue 15).

A separate process and a plain Kafka client (ARCHITECTURE D17): it talks to the cluster only
through confluent-kafka's admin/consumer/producer APIs and, where a Tidelog broker exposes it,
the Prometheus /metrics endpoint. It imports no broker internals (an import-linter contract).
"""
