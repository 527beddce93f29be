"""kafkalite's own asyncio Kafka-protocol client (layer 1: imports only kafkalite.protocol).

Used by the controller channel, replica fetchers and the CLI. ``KafkaConnection`` is one socket
to one broker; ``KafkaClient`` keeps one per node id from cluster metadata.
"""

from .client import CONTROLLER, BrokerAddress, KafkaClient, PartitionInfo, parse_bootstrap
from .connection import KafkaConnection, request_builder
from .errors import KafkaConnectionError, KafkaTimeoutError, NoBrokersAvailableError
from .messages import build_message

__all__ = [
    "CONTROLLER",
    "BrokerAddress",
    "KafkaClient",
    "KafkaConnection",
    "KafkaConnectionError",
    "KafkaTimeoutError",
    "NoBrokersAvailableError",
    "PartitionInfo",
    "build_message",
    "parse_bootstrap",
    "request_builder",
]
