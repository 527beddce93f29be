"""The composition root (layer 3): builds one broker from its configuration and runs it.

- `kafka_server`: `KafkaServer` (Kafka's KafkaServer: start-up order, wiring, shutdown) and
  `serve` (``kafkalite serve``);
- `registration`: the broker in the coordination store (``/brokers/ids/<id>``, the cluster id);
- `config_watch`: dynamic topic, user and client configs and their change notifications;
- `errors`: `StartupError`.
"""

from kafkalite.server.errors import StartupError
from kafkalite.server.kafka_server import KafkaServer, serve

__all__ = ["KafkaServer", "StartupError", "serve"]
