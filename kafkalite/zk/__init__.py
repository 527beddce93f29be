"""Kafka's ZooKeeper schema and its reads and writes (Kafka's ``kafka.zk`` package).

``coord`` is the ZooKeeper-semantics store (one interface, embedded and ZooKeeper backends); this
package is what Kafka keeps in that store:

- ``data``: the znode paths and their JSON, byte for byte as Kafka writes them (``ZkData``);
- ``security``: the ACL, SCRAM credential and quota znodes.
"""
