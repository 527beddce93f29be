"""``kafkalite.controller.controller.KafkaController``: the name the composition root imports.

The controller itself lives in ``kafka_controller.py`` (Kafka's ``KafkaController.scala``);
this module only re-exports it.
"""

from .kafka_controller import KafkaController

__all__ = ["KafkaController"]
