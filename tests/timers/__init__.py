"""Delayed and scheduled delivery (docs/delivery.md)."""
