"""Kafka's ZooKeeper schema and its reads and writes (Kafka's ``kafka.zk`` package).

``coord`` is the ZooKeeper-semantics store (one interface, embedded and ZooKeeper backends); this
package is what Kafka keeps in that store:

- ``data``: the znode paths and their JSON, byte for byte as Kafka writes them (``ZkData``);
- ``types``: the values the znodes hold as the controller and the brokers use them (``Broker``,
  ``ReplicaAssignment``, ``LeaderAndIsr``, ``LeaderIsrAndControllerEpoch``);
- ``client``: typed reads and the controller's writes, fenced by the controller epoch
  (``KafkaZkClient``); ``writes``: those writes as data, the controller's decisions;
- ``admin``: topic administration by znode (``AdminZkClient``), with replica placement in
  ``assignment`` (``AdminUtils.assignReplicasToBrokers``);
- ``security``: the ACL, SCRAM credential and quota znodes.
"""
