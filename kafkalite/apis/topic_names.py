"""Topic-name rules (Kafka's org.apache.kafka.common.internals.Topic), as the request handlers
ask them: the rules themselves are ``zk.admin.validate_topic_name``."""

from __future__ import annotations

from kafkalite.protocol.errors import InvalidTopicError
from kafkalite.zk.admin import validate_topic_name

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


def invalid_topic_reason(name: str | None) -> str | None:
    """Why `name` is not a legal topic name, or None when it is."""
    try:
        validate_topic_name(name or "")
    except InvalidTopicError as e:
        return str(e)
    return None


def is_internal(name: str) -> bool:
    return name in INTERNAL_TOPICS
