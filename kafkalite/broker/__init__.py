"""The broker role (layer 2): partitions, replication and what the request handlers call.

Modules, one concept each:

- ``replica_manager``: ``ReplicaManager``, every hosted partition; produce (acks 0/1/all with a
  purgatory), long-poll fetch, ListOffsets, OffsetForLeaderEpoch, DeleteRecords, LeaderAndIsr,
  StopReplica.
- ``partition``: ``Partition``, one partition's role, HW/ISR rules, epoch fencing, truncation.
- ``purgatory``: delayed operations completed by events or their timeout.
- ``producer_state``: idempotent-producer sequences and epochs per partition.
- ``producer_id_manager``: producer id blocks in the coordination store.
- ``fetch_session``: KIP-227 incremental fetch sessions.
- ``metadata_cache``: the cluster as the controller's UpdateMetadata describes it.
- ``replica_fetcher``: followers pulling from leaders (truncation, fetch, endpoints).
- ``types``: value types exchanged with the handlers; ``clock``: the injected time.

Lower layers only (protocol, storage, coord, client); never the handlers (tests/test_layers.py).
"""
