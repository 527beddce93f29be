"""Dynamic broker config znodes (Kafka's AdminZkClient.changeBrokerConfig / fetchEntityConfig).

- ``/config/brokers/<id>``: one broker's dynamic configs;
- ``/config/brokers/<default>``: the cluster-wide defaults;

both ``{"version":1,"config":{...}}`` (password values already encrypted by the caller). A
write replaces the whole config of that level (compare-and-set on the node's version) and is
then announced by a sequential ``/config/changes/config_change_NNNNNNNNNN`` whose entity_path
is ``brokers/<id>`` or ``brokers/<default>``, which every broker's config watcher follows.
"""

from __future__ import annotations

from collections.abc import Mapping

from kafkalite.coord import BadVersion, CoordSession, CreateOp, NodeExists, NoNode, SetDataOp
from kafkalite.zk import data as paths

DEFAULT_BROKER = "<default>"
CAS_RETRIES = 20


def broker_entity(broker_id: int | None) -> str:
    """The znode name of a level: the broker id, or ``<default>`` for None."""
    return DEFAULT_BROKER if broker_id is None else str(broker_id)


def broker_config_path(broker_id: int | None) -> str:
    return f"{paths.CONFIG_BROKERS}/{broker_entity(broker_id)}"


async def get_broker_config(session: CoordSession, broker_id: int | None) -> dict[str, str]:
    """The stored config of a level; empty when the node is absent."""
    try:
        data, _ = await session.get_data(broker_config_path(broker_id))
    except NoNode:
        return {}
    return paths.decode_entity_config(data)


async def set_broker_config(
    session: CoordSession, broker_id: int | None, config: Mapping[str, str]
) -> None:
    """Replace the config of a level and announce the change."""
    path = broker_config_path(broker_id)
    encoded = paths.encode_entity_config(config)
    await session.ensure_path(paths.CONFIG_BROKERS)
    for _ in range(CAS_RETRIES):
        stat = await session.exists(path)
        try:
            if stat is None:
                await session.multi([CreateOp(path, encoded)])
            else:
                await session.multi([SetDataOp(path, encoded, stat.version)])
            break
        except (NodeExists, BadVersion, NoNode):
            continue
    else:
        raise RuntimeError(f"{path} kept changing; try again")
    await session.ensure_path(paths.CONFIG_CHANGES)
    await session.create(
        paths.config_change_sequence_path(),
        paths.encode_config_change(f"brokers/{broker_entity(broker_id)}"),
        sequential=True,
    )


def broker_of_entity_path(relative: str) -> int | None | str:
    """For a change notification's entity_path: the broker id, None for the defaults, or ""
    when it names no broker config."""
    kind, _, name = relative.partition("/")
    if kind != "brokers" or not name:
        return ""
    if name == DEFAULT_BROKER:
        return None
    return int(name) if name.isdigit() else ""
