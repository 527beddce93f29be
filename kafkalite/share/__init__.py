"""Share groups (KIP-932, "queues for Kafka"): membership, share sessions, share-partitions and
the share coordinator on ``__share_group_state``. See docs/share-groups.md."""
