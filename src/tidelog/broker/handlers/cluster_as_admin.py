"""The cluster handlers seen as the single-node admin handlers' dependencies, so each API's
ACL checks (admin_common.require) are written once (authorization.REQUIRED). Its own module:
cluster_common and admin_common stay independent of each other (import-linter)."""

from __future__ import annotations

from tidelog.broker.handlers.admin_common import AdminDeps
from tidelog.broker.handlers.cluster_common import ClusterDeps


def admin_deps(deps: ClusterDeps) -> AdminDeps:
    return AdminDeps(deps.config, deps.identity, deps.topics, deps.authorizer)
