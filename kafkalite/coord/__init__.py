"""Coordination: one ZooKeeper-shaped interface, an embedded store and real ZooKeeper.

``open_store(connect, data_dir, session_timeout_ms)`` picks the backend the way the broker config
does: ``zookeeper.connect`` set -> ZooKeeper through aiozk (``host:port[,host:port...][/chroot]``,
the chroot created if missing, like Kafka), the client running on a coordination thread of its
own so that a busy caller loop cannot starve the session's pings (``threaded.py``); absent -> the
embedded store kept in ``data_dir``, shared by every broker of the process that names the same
directory.
"""

from __future__ import annotations

import os

from .base import (
    ANY_VERSION,
    JUTE_MAXBUFFER,
    CheckOp,
    CheckResult,
    CoordSession,
    CoordStore,
    CreateOp,
    CreateResult,
    DeleteOp,
    DeleteResult,
    EventType,
    NodeData,
    Op,
    OpResult,
    SessionState,
    SetDataOp,
    SetDataResult,
    Stat,
    Watch,
    WatchEvent,
)
from .errors import (
    BadArguments,
    BadVersion,
    ConnectionLoss,
    CoordError,
    NoChildrenForEphemerals,
    NodeExists,
    NoNode,
    NotEmpty,
    RequestTooLarge,
    RolledBack,
    SessionClosed,
    SessionExpired,
    StoreCorrupted,
)

DEFAULT_SESSION_TIMEOUT_MS = 18000
"""Kafka's ``zookeeper.session.timeout.ms`` default."""


def parse_connect(connect: str) -> tuple[str, str | None]:
    """Split ``zookeeper.connect`` into the server list and the chroot (None when absent).

    ``"h1:2181,h2:2181/kafkalite"`` -> ``("h1:2181,h2:2181", "/kafkalite")``; like Kafka, the
    chroot is everything from the first slash and applies to every server.
    """
    connect = connect.strip()
    if not connect:
        raise BadArguments("zookeeper.connect is empty")
    slash = connect.find("/")
    if slash < 0:
        return connect, None
    servers, chroot = connect[:slash], connect[slash:].rstrip("/")
    if not servers:
        raise BadArguments(f"zookeeper.connect has no servers: {connect!r}")
    return servers, (chroot or None)


def open_store(
    connect: str | None,
    data_dir: str | os.PathLike | None,
    session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
    *,
    connection_timeout_ms: int | None = None,
    fsync: bool = True,
) -> CoordStore:
    """The coordination store the broker config asks for (see the module docstring).

    Sessions come from ``await store.open_session()``; ``await store.close()`` releases it.
    """
    if connect:
        from .zookeeper import ZooKeeperStore

        servers, chroot = parse_connect(connect)
        return ZooKeeperStore(
            servers,
            chroot=chroot,
            session_timeout_ms=session_timeout_ms,
            connection_timeout_ms=connection_timeout_ms,
        )
    from .embedded import EmbeddedStore

    if data_dir is None:
        return EmbeddedStore(None, session_timeout_ms=session_timeout_ms, fsync=fsync)
    return EmbeddedStore.shared(data_dir, session_timeout_ms=session_timeout_ms, fsync=fsync)


__all__ = [
    "JUTE_MAXBUFFER",
    "ANY_VERSION",
    "DEFAULT_SESSION_TIMEOUT_MS",
    "BadArguments",
    "BadVersion",
    "CheckOp",
    "CheckResult",
    "ConnectionLoss",
    "CoordError",
    "CoordSession",
    "CoordStore",
    "CreateOp",
    "CreateResult",
    "DeleteOp",
    "DeleteResult",
    "EventType",
    "NoChildrenForEphemerals",
    "NoNode",
    "NodeData",
    "NodeExists",
    "NotEmpty",
    "Op",
    "OpResult",
    "RolledBack",
    "SessionClosed",
    "SessionExpired",
    "SessionState",
    "SetDataOp",
    "SetDataResult",
    "Stat",
    "RequestTooLarge",
    "StoreCorrupted",
    "Watch",
    "WatchEvent",
    "open_store",
    "parse_connect",
]
