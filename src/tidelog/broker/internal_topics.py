"""Names of Kafka's internal topics (a leaf module: services and handlers both import it)."""

from __future__ import annotations

from tidelog.storage.timer_records import TIMER_TOPIC

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
# Tidelog's own: delayed delivery's timer log (docs/delivery.md).
SHARE_GROUP_STATE_TOPIC = "__share_group_state"
INTERNAL_TOPICS = frozenset(
    {OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_GROUP_STATE_TOPIC, TIMER_TOPIC}
)
