"""A topics view for driving ConsumerGroup / the core's consumer groups in tests."""

from __future__ import annotations

import uuid


class Topics:
    """Name -> (id, partitions), as the broker's MetadataCache answers."""

    def __init__(self, **partitions: int) -> None:
        self.ids: dict[str, uuid.UUID] = {}
        self.partitions: dict[str, int] = {}
        for name, n in partitions.items():
            self.add(name, n)

    def add(self, name: str, n: int) -> uuid.UUID:
        self.ids.setdefault(name, uuid.uuid5(uuid.NAMESPACE_DNS, name))
        self.partitions[name] = n
        return self.ids[name]

    def get_all_topics(self):
        return frozenset(self.partitions)

    def get_topic_id(self, topic: str):
        return self.ids.get(topic) if topic in self.partitions else None

    def num_partitions(self, topic: str):
        return self.partitions.get(topic)

    def get_topic_name(self, topic_id):
        for name, tid in self.ids.items():
            if tid == topic_id:
                return name
        return None
