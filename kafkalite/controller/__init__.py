"""The controller: Kafka's ZooKeeper-era KafkaController (docs/architecture.md, Controller).

Pure cores (no I/O; decisions returned as data, see ``results.py``):

- ``context``: ``ControllerContext`` and ``PartitionAndReplica`` (the value types the znodes hold,
  ``Broker``, ``LeaderAndIsr``, ``ReplicaAssignment``, are in ``kafkalite.zk.types``).
- ``election``: leader selection (offline, reassign, preferred, controlled shutdown).
- ``partition_state_machine`` / ``replica_state_machine``: transition tables; illegal moves raise.
- ``broker_request_batch``: LeaderAndIsr / UpdateMetadata / StopReplica as data per broker.
- ``topic_deletion_manager``, ``controller_core`` (every KafkaController callback).

I/O shell (the znode reads and writes, fenced multi writes included, and topic administration
are in ``kafkalite.zk``):

- ``event_manager``, ``channel_manager``, ``kafka_controller`` (``KafkaController``; re-exported
  by ``controller`` for the composition root).
"""
