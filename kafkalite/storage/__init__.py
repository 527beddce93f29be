"""Layer 1: the storage engine -- Kafka-format partition logs on local disks.

- ``config``: ``LogConfig`` (Kafka topic-config names and defaults).
- ``index``: ``OffsetIndex`` (``.index``) and ``TimeIndex`` (``.timeindex``), mmap'd.
- ``file_records``: the ``.log`` file and zero-copy ``FileRecordsSlice`` (mmap view / sendfile).
- ``segment``: ``LogSegment`` (one ``.log`` + ``.index`` + ``.timeindex``), ``FetchDataInfo``.
- ``log``: ``Log`` (one partition: append, read, truncate, retention, recovery),
  ``LogAppendInfo``.
- ``leader_epoch``: ``LeaderEpochFileCache`` (``leader-epoch-checkpoint``).
- ``checkpoint``: Kafka's checkpoint file format, written atomically.
- ``cleaner``: log compaction (``LogCleaner``: cleanup.policy=compact, offset map, recopy and
  swap of segment groups, ``cleaner-offset-checkpoint``).
- ``log_manager``: ``LogManager`` (all logs across ``log.dirs``, checkpoints, clean shutdown,
  offline directories, the retention/flush scheduler).
- ``errors``: ``StorageError``, ``LogDirFailure`` (both KAFKA_STORAGE_ERROR on the wire).

Imports only ``kafkalite.protocol`` (tests/test_layers.py). Not thread-safe: one event loop.
"""
