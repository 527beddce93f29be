"""A minimal LogManager over real ``kafkalite.storage.log.Log`` objects, for broker unit tests
(the contract's get_log / get_or_create_log / delete_log; no scheduler, no checkpoints)."""

from __future__ import annotations

import os

from kafkalite.storage.config import LogConfig
from kafkalite.storage.log import Log


class StubLogManager:
    def __init__(self, root: str, default_config: LogConfig | None = None):
        self.root = root
        self.default_config = default_config or LogConfig()
        self.logs: dict[tuple[str, int], Log] = {}
        self.deleted: list[tuple[str, int]] = []

    def get_log(self, topic, partition):
        return self.logs.get((topic, partition))

    def get_or_create_log(self, topic, partition, config=None):
        log = self.logs.get((topic, partition))
        if log is None:
            log = Log(os.path.join(self.root, f"{topic}-{partition}"), config or self.default_config)
            self.logs[(topic, partition)] = log
        return log

    def delete_log(self, topic, partition):
        self.logs.pop((topic, partition)).delete()
        self.deleted.append((topic, partition))

    def close(self):
        for log in self.logs.values():
            log.close()
        self.logs.clear()
