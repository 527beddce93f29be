"""What the principal of an admin request may see, by Kafka's rules for the equivalent request
(security.py's middleware has already checked the route's own ACL, ROUTE_ACLS):

- topics (GET /topics, /partitions, /overview's counts, /metrics and /metrics/history series
  labelled by topic, a group's offsets): those it may DESCRIBE, as Metadata answers;
- groups (GET /groups, /metrics series labelled by group): all with DESCRIBE on the cluster,
  else those it may DESCRIBE, as ListGroups answers;
- transactional ids (GET /transactions): those it may DESCRIBE, as ListTransactions answers.

What it may not see is left out, never answered with an error naming it, so a list reveals
nothing the principal could not learn over the Kafka protocol. Without an authorizer everything
is visible.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from aiohttp import web

from kafkalite.admin.security import PRINCIPAL_KEY, caller_of
from kafkalite.protocol.acl import AclOperation as Op
from kafkalite.protocol.acl import ResourceType as T
from kafkalite.security.acl import CLUSTER_NAME


class Access:
    """The ACL checks of one admin request's principal."""

    def __init__(self, server: Any, request: web.Request) -> None:
        self.authorizer = getattr(server, "authorizer", None)
        self.caller = caller_of(request, request.get(PRINCIPAL_KEY) or "User:ANONYMOUS")
        self._all_groups: bool | None = None

    def allowed(self, op: Op, rtype: T, name: str) -> bool:
        return self.authorizer is None or self.authorizer.allowed(self.caller, op, rtype, name)

    def topic(self, name: str, op: Op = Op.DESCRIBE) -> bool:
        return self.allowed(op, T.TOPIC, name)

    def topics(self, names: Iterable[str], op: Op = Op.DESCRIBE) -> list[str]:
        return [n for n in names if self.topic(n, op)]

    def group(self, group_id: str) -> bool:
        if self._all_groups is None:
            self._all_groups = self.allowed(Op.DESCRIBE, T.CLUSTER, CLUSTER_NAME)
        return self._all_groups or self.allowed(Op.DESCRIBE, T.GROUP, group_id)

    def transactional_id(self, txn_id: str) -> bool:
        return self.allowed(Op.DESCRIBE, T.TRANSACTIONAL_ID, txn_id)

    def labels(self) -> Callable[[Mapping[str, str]], bool]:
        """Whether a metric sample with these labels may be shown (its topic, its group)."""
        if self.authorizer is None:
            return lambda labels: True
        topics: dict[str, bool] = {}
        groups: dict[str, bool] = {}

        def visible(labels: Mapping[str, str]) -> bool:
            topic, group = labels.get("topic"), labels.get("group")
            if topic is not None:
                if topic not in topics:
                    topics[topic] = self.topic(topic)
                if not topics[topic]:
                    return False
            if group is not None and group not in groups:
                groups[group] = self.group(group)
            return group is None or groups[group]

        return visible
