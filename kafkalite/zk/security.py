"""Security state in the coordination store, where Kafka (ZooKeeper mode) keeps it.

- ``/config/users/<user>`` and ``/config/clients/<client-id>``: entity configs
  (``{"version":1,"config":{...}}``) holding SCRAM credentials (``SCRAM-SHA-256`` ->
  ``salt=..,stored_key=..,server_key=..,iterations=N``, ScramCredentialUtils) and quotas
  (``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage``); ``<default>`` is
  the default entity. A change writes ``/config/changes/config_change_<seq>``
  (``{"version":2,"entity_path":"users/alice"}``), as Kafka's AdminZkClient does.

User names are URL-encoded in the path, as Kafka's Sanitizer does (``@`` and ``/`` are
legal in a principal name).
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable, Mapping

from kafkalite.coord.base import CoordSession, CreateOp, SetDataOp
from kafkalite.coord.errors import BadVersion, NodeExists, NoNode
from kafkalite.security.acl import (
    RESOURCE_TYPES_BY_NAME,
    AclEntry,
    PatternType,
    ResourcePattern,
    change_notification,
    decode_acls,
    encode_acls,
    node_path,
)
from kafkalite.security.scram import MECHANISMS, ScramCredential, ScramError
from kafkalite.zk import data as paths

ACL_ROOT = "/kafka-acl"
ACL_EXTENDED_ROOT = "/kafka-acl-extended/prefixed"
ACL_CHANGES = "/kafka-acl-changes"
ACL_EXTENDED_CHANGES = "/kafka-acl-extended-changes"

CAS_RETRIES = 10
DEFAULT_ENTITY = "<default>"


def sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize: URL-encoding, with '*' kept as '%2A' and '+' for space
    turned back into '%20'."""
    return urllib.parse.quote(name, safe="").replace("*", "%2A")


def desanitize(name: str) -> str:
    return urllib.parse.unquote(name)


def entity_path(entity_type: str, name: str) -> str:
    return paths.config_entity_path(entity_type, sanitize(name) if name != DEFAULT_ENTITY else name)


async def get_entity_config(session: CoordSession, entity_type: str, name: str) -> dict[str, str]:
    try:
        data, _ = await session.get_data(entity_path(entity_type, name))
    except NoNode:
        return {}
    return paths.decode_entity_config(data)


async def list_entities(session: CoordSession, entity_type: str) -> list[str]:
    try:
        children = await session.get_children(f"{paths.CONFIG}/{entity_type}")
    except NoNode:
        return []
    return sorted(c if c == DEFAULT_ENTITY else desanitize(c) for c in children)


async def alter_entity_config(
    session: CoordSession,
    entity_type: str,
    name: str,
    set_: Mapping[str, str],
    remove: tuple[str, ...] | list[str] = (),
) -> dict[str, str]:
    """Read-modify-write the entity's config with compare-and-set, then announce the change;
    the new config."""
    relative = entity_path(entity_type, name)[len(paths.CONFIG) + 1 :]
    return await alter_config_at(session, relative, set_, remove)


async def alter_config_at(
    session: CoordSession,
    relative: str,
    set_: Mapping[str, str],
    remove: tuple[str, ...] | list[str] = (),
) -> dict[str, str]:
    """`alter_entity_config` for a path under /config (``users/alice/clients/app``)."""
    path = f"{paths.CONFIG}/{relative}"
    await session.ensure_path(path.rsplit("/", 1)[0])
    for _ in range(CAS_RETRIES):
        stat = await session.exists(path)
        current: dict[str, str] = {}
        if stat is not None:
            try:
                data, stat = await session.get_data(path)
            except NoNode:
                continue
            current = paths.decode_entity_config(data)
        updated = {k: v for k, v in current.items() if k not in remove}
        updated.update(set_)
        encoded = paths.encode_entity_config(updated)
        try:
            if stat is None:
                await session.multi([CreateOp(path, encoded)])
            else:
                await session.multi([SetDataOp(path, encoded, stat.version)])
        except (NodeExists, BadVersion, NoNode):
            continue
        await session.ensure_path(paths.CONFIG_CHANGES)
        await session.create(
            paths.config_change_sequence_path(),
            paths.encode_config_change(relative),
            sequential=True,
        )
        return updated
    raise RuntimeError(f"{path} kept changing; try again")


def quota_path(entity: tuple[tuple[str, str], ...]) -> str:
    """The /config-relative path of a quota entity (("user", u), ("client-id", c))."""
    parts = []
    for kind, name in entity:
        plural = "users" if kind == "user" else "clients"
        parts += [plural, name if name == DEFAULT_ENTITY else sanitize(name)]
    return "/".join(parts)


def entity_of_path(relative: str) -> tuple[tuple[str, str], ...] | None:
    parts = relative.split("/")
    if len(parts) not in (2, 4) or len(parts) == 4 and (parts[0], parts[2]) != ("users", "clients"):
        return None
    out = []
    for plural, name in zip(parts[::2], parts[1::2], strict=True):
        if plural not in ("users", "clients"):
            return None
        out.append(("user" if plural == "users" else "client-id", desanitize(name)))
    return tuple(out)


async def load_quota_configs(
    session: CoordSession,
) -> list[tuple[tuple[tuple[str, str], ...], dict[str, str]]]:
    """Every user, client and user+client entity config (quotas and, for users, SCRAM)."""
    out = []
    for plural in ("users", "clients"):
        try:
            names = await session.get_children(f"{paths.CONFIG}/{plural}")
        except NoNode:
            continue
        for name in names:
            relative = f"{plural}/{name}"
            out.append((entity_of_path(relative), await _config_at(session, relative)))
            if plural == "users":
                try:
                    clients = await session.get_children(f"{paths.CONFIG}/{relative}/clients")
                except NoNode:
                    continue
                for client in clients:
                    nested = f"{relative}/clients/{client}"
                    out.append((entity_of_path(nested), await _config_at(session, nested)))
    return [(e, c) for e, c in out if e is not None]


async def _config_at(session: CoordSession, relative: str) -> dict[str, str]:
    try:
        data, _ = await session.get_data(f"{paths.CONFIG}/{relative}")
    except NoNode:
        return {}
    return paths.decode_entity_config(data)


async def config_at(session: CoordSession, relative: str) -> dict[str, str]:
    return await _config_at(session, relative)


async def scram_credential(
    session: CoordSession, user: str, mechanism: str
) -> ScramCredential | None:
    """The user's stored credential for `mechanism`, None when there is none."""
    text = (await get_entity_config(session, "users", user)).get(mechanism)
    if text is None:
        return None
    try:
        return ScramCredential.from_string(text)
    except ScramError:
        return None


async def scram_users(session: CoordSession) -> dict[str, dict[str, ScramCredential]]:
    """Every user with at least one SCRAM credential -> mechanism -> credential."""
    out: dict[str, dict[str, ScramCredential]] = {}
    for user in await list_entities(session, "users"):
        config = await get_entity_config(session, "users", user)
        creds = {}
        for mechanism in MECHANISMS:
            if mechanism in config:
                try:
                    creds[mechanism] = ScramCredential.from_string(config[mechanism])
                except ScramError:
                    continue
        if creds:
            out[user] = creds
    return out


# ---------------------------------------------------------------------- ACLs (AclAuthorizer's)


async def read_acls(session: CoordSession, pattern: ResourcePattern) -> set[AclEntry]:
    try:
        data, _ = await session.get_data(node_path(pattern))
    except NoNode:
        return set()
    return decode_acls(data)


async def load_all_acls(session: CoordSession) -> list[tuple[ResourcePattern, set[AclEntry]]]:
    out = []
    for type_name, resource_type in RESOURCE_TYPES_BY_NAME.items():
        for root, pattern_type in (
            (f"{ACL_ROOT}/{type_name}", PatternType.LITERAL),
            (f"{ACL_EXTENDED_ROOT}/{type_name}", PatternType.PREFIXED),
        ):
            try:
                names = await session.get_children(root)
            except NoNode:
                continue
            for name in names:
                pattern = ResourcePattern(resource_type, name, pattern_type)
                out.append((pattern, await read_acls(session, pattern)))
    return out


async def update_acls(
    session: CoordSession,
    pattern: ResourcePattern,
    change: Callable[[set[AclEntry]], set[AclEntry]],
) -> set[AclEntry]:
    """Apply `change` to the pattern's ACLs with compare-and-set (the node is deleted when none
    remain), then announce it under the change-notification path; the new ACLs."""
    path = node_path(pattern)
    await session.ensure_path(path.rsplit("/", 1)[0])
    for _ in range(CAS_RETRIES):
        try:
            data, stat = await session.get_data(path)
            current = decode_acls(data)
        except NoNode:
            stat, current = None, set()
        updated = change(set(current))
        if updated == current:
            return current
        try:
            if stat is None:
                await session.multi([CreateOp(path, encode_acls(updated))])
            elif updated:
                await session.multi([SetDataOp(path, encode_acls(updated), stat.version)])
            else:
                await session.delete(path, stat.version)
        except (NodeExists, BadVersion, NoNode):
            continue
        prefix, notification = change_notification(pattern)
        await session.ensure_path(prefix.rsplit("/", 1)[0])
        await session.create(prefix, notification, sequential=True)
        return updated
    raise RuntimeError(f"{path} kept changing; try again")
