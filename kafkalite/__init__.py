"""kafkalite: a Kafka broker in Python (asyncio)."""

__version__ = "0.1.0"
