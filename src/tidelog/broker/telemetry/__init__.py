"""Client telemetry (KIP-714): subscriptions stored as CLIENT_METRICS configs, the pushed
OTLP metrics exposed in /metrics (docs/operations.md "Client telemetry")."""
