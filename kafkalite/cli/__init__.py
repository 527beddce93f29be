"""The `kafkalite` command line (click + rich): root.py holds the app and the entry point,
``main``; one module per command or group of commands (serve, topics, produce, consume, cluster,
groups, transactions, security for users/acls/quotas, storage), their shared options in
common.py and admin_api.py, and the Kafka-protocol tools they drive (console_producer.py,
console_consumer.py, group_member.py)."""

from typing import Any

__all__ = ["app", "main"]


def __getattr__(name: str) -> Any:
    # imported on first use: kafkalite.cli.overview (what a bare --help prints) must not cost
    # the import of click that root.py makes
    if name in __all__:
        from kafkalite.cli import root

        return getattr(root, name)
    raise AttributeError(name)
