"""The controller: Kafka's ZooKeeper-era KafkaController (seeds 000-002, DESIGN.md section 6).

Pure cores (no I/O; decisions returned as data, see ``results.py``):

- ``context``: ``ControllerContext`` and the value types (``Broker``, ``LeaderAndIsr``,
  ``ReplicaAssignment``, ``PartitionAndReplica``).
- ``election``: leader selection (offline, reassign, preferred, controlled shutdown).
- ``partition_state_machine`` / ``replica_state_machine``: transition tables; illegal moves raise.
- ``broker_request_batch``: LeaderAndIsr / UpdateMetadata / StopReplica as data per broker.
- ``topic_deletion_manager``, ``controller_core`` (every KafkaController callback), ``assignment``
  (replica placement, seed 000 section 4).

I/O shell:

- ``zk_data``: the znodes, fenced multi writes, the leader's ISR compare-and-set.
- ``admin``: topic administration by writing znodes (create/delete topics, add partitions,
  configs, reassignment and election requests).
- ``event_manager``, ``channel_manager``, ``kafka_controller`` (``KafkaController``; re-exported
  by ``controller`` for the composition root).
"""
