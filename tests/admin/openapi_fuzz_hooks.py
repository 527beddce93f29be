"""schemathesis hooks for tests/admin/test_openapi_fuzz.py (loaded through SCHEMATHESIS_HOOKS).

The fuzzer tests the document as served; these hooks only keep the generated requests within
what the test's one small broker can hold, never change what is checked: a request asking for
more than MAX_PARTITIONS partitions or a replication factor above the number of brokers (1) is
not sent, and neither is one that would change a dynamic broker setting that acts on the
broker (a connection limit, a log default): the fuzzer would be testing the broker it degraded.
Unknown names and the settings that change nothing here (decision 0028) are still sent.
"""

from __future__ import annotations

from typing import Any

import schemathesis

MAX_PARTITIONS = 4
BROKERS = 1
SCHEMAS_TOPIC = "_schemas"
HARMLESS_BROKER_CONFIGS = {"log.cleaner.backoff.ms"}
"""A live setting whose change cannot hurt the run (the cleaner's idle pause)."""


def _acting_broker_configs(body: Any) -> bool:
    """Whether `body` (a broker config change) sets a dynamic setting that acts on the broker."""
    from kafkalite.server.dynamic_config import DYNAMIC_CONFIGS, STORED_ONLY_CONFIGS

    configs = body.get("configs") if isinstance(body, dict) else None
    if not isinstance(configs, dict):
        return False
    for name in configs:
        if not isinstance(name, str) or name in HARMLESS_BROKER_CONFIGS:
            continue
        if name.startswith("listener.name.") or (
            name in DYNAMIC_CONFIGS and name not in STORED_ONLY_CONFIGS
        ):
            return True
    return False


def _within_bounds(body: Any) -> bool:
    if not isinstance(body, dict):
        return True
    # a JSON number with an integral value (39460.0) is an integer to the API too
    partitions = body.get("partitions")
    if isinstance(partitions, int | float) and not isinstance(partitions, bool):
        if partitions > MAX_PARTITIONS:
            return False
    factor = body.get("replication_factor")
    if isinstance(factor, int | float) and not isinstance(factor, bool) and factor > BROKERS:
        return False
    return True


@schemathesis.hook
def filter_case(context: Any, case: Any) -> bool:
    if case.method.upper() == "DELETE" and case.path == "/topics/{name}":
        if (case.path_parameters or {}).get("name") == SCHEMAS_TOPIC:
            return False  # the Schema Registry's own store: the /schemas routes read it
    broker_configs = case.path in ("/brokers/{id}/configs", "/cluster/broker-configs")
    if broker_configs and _acting_broker_configs(case.body):
        return False
    return _within_bounds(case.body)
