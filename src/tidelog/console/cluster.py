"""The console's view of a cluster, through confluent-kafka only (so any Kafka cluster works).

`Cluster` is one object with every call the web layer makes, assembled from:

- `cluster_clients`: the admin/producer/consumer clients, metadata and offset look-ups;
- `cluster_admin`: brokers and topics (list, describe, create, delete, configs);
- `cluster_messages`: browse, produce, fetch one message;
- `cluster_groups`: consumer groups, lag, offset resets, delete;
- `cluster_security`: ACLs and SCRAM users;
- `cluster_share_groups`: share groups (list, describe, start-offset resets, delete);
- `cluster_transactions`: transactions (list, describe, abort a hanging one).

Every method is blocking (confluent-kafka's futures) and is called from a worker thread by the
web layer. Cluster failures become `ClusterError` with a sentence for the user; bad requests
become `BadRequest`; both carry the HTTP status the API answers with (`errors`).
"""

from __future__ import annotations

from tidelog.console.cluster_admin import AdminCalls
from tidelog.console.cluster_groups import GroupCalls
from tidelog.console.cluster_messages import MessageCalls
from tidelog.console.cluster_security import SecurityCalls
from tidelog.console.cluster_share_groups import ShareGroupCalls
from tidelog.console.cluster_transactions import TransactionCalls


class Cluster(AdminCalls, MessageCalls, GroupCalls, ShareGroupCalls, SecurityCalls,
              TransactionCalls):
    """Every cluster call the console makes; one per console process."""
