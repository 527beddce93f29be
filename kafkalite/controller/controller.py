"""``kafkalite.controller.controller.KafkaController``: the name the composition root imports.

The controller itself lives in ``kafka_controller.py`` (Kafka's ``KafkaController.scala``);
this module only re-exports it, and ``new_controller``, which puts it on a thread of its own
when the session allows (``controller_thread.py``).
"""

from .controller_thread import ControllerThread, new_controller
from .kafka_controller import KafkaController

__all__ = ["ControllerThread", "KafkaController", "new_controller"]
