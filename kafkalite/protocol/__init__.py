"""Layer 0: the Kafka wire protocol, without I/O.

- ``errors``: every Kafka error code (``ErrorCode``) and the ``KafkaError`` hierarchy.
- ``types``: ``TopicPartition``.
- ``api``: ``ApiKey``, codec/advertised version tables, flexible-version thresholds,
  ``request_class`` / ``response_class``.
- ``frames``: request/response headers and frames (parse, decode, encode, ApiVersions fallback).
- ``encoder``: compiled encoders for kio-style message dataclasses.
- ``messages``: LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown (kio dropped them).
- ``records``: the RecordBatch v2 codec (owned with the records work).

No module here imports asyncio, opens sockets or files. The generator of ``messages`` is a
development tool outside the package: ``tools/generate_messages.py``.
"""
