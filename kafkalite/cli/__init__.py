"""The `kafkalite` command line (typer + rich): root.py holds the app and the entry point,
``main``; one module per command or group of commands (serve, topics, produce, consume, cluster,
groups, transactions, security for users/acls/quotas, storage), their shared options in
common.py and admin_api.py, and the Kafka-protocol tools they drive (console_producer.py,
console_consumer.py, group_member.py)."""

from kafkalite.cli.root import app, main

__all__ = ["app", "main"]
