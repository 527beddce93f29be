"""The coordination store's exceptions.

Every backend converts its own failures (aiozk's ``exc.*``, OS errors from the embedded
journal) into these at its boundary, so callers catch one family whatever the backend. The
names and meanings are ZooKeeper's (``KeeperException.Code``), because the controller design
leans on exactly those outcomes:

- ``NodeExists`` / ``NoNode`` / ``NotEmpty`` / ``NoChildrenForEphemerals``: the tree refused the
  change, nothing was applied.
- ``BadVersion``: a compare-and-set lost; the caller re-reads and decides again.
- ``ConnectionLoss``: the connection dropped while the request was outstanding, or no connection
  came back within the connection timeout. The outcome of a write is unknown: it may or may not
  have been applied.
- ``SessionExpired``: the session is gone and every ephemeral node it owned with it. The session
  object is dead for good; open a new one and re-register.
- ``SessionClosed``: the caller closed the session itself.
- ``RequestTooLarge``: the request, serialised as ZooKeeper's wire format, is longer than
  ``jute.maxbuffer`` (``base.JUTE_MAXBUFFER``, ZooKeeper's default 0xfffff bytes); nothing was
  applied and the session is unharmed. A ZooKeeper server answers such a request by closing the
  connection (the client sees ``ConnectionLoss`` and its session is suspended), so both backends
  measure the request before sending or applying it and raise this instead.

A failed ``multi`` raises the exception of the first failing operation, carrying
``failed_op_index`` and ``results`` (one entry per operation: the exception for the failing one,
``RolledBack`` for the others), like ZooKeeper's ``KeeperException.getResults()``.
"""

from __future__ import annotations


class CoordError(Exception):
    """Base class of every coordination-store error."""

    def __init__(self, message: str = "", *, path: str | None = None) -> None:
        self.path = path
        self.failed_op_index: int | None = None
        self.results: list | None = None
        super().__init__(message or (path or ""))


class NodeExists(CoordError):
    """create: a node already exists at the path."""


class NoNode(CoordError):
    """The node (or, for create, its parent) does not exist."""


class BadVersion(CoordError):
    """The expected version did not match the node's current version."""


class NotEmpty(CoordError):
    """delete: the node still has children."""


class NoChildrenForEphemerals(CoordError):
    """create: the parent is an ephemeral node, which cannot have children."""


class BadArguments(CoordError):
    """The request itself is malformed (bad path, sequential flag misuse, ...)."""


class RolledBack(CoordError):
    """multi: this operation was fine but another one failed, so nothing was applied."""


class ConnectionLoss(CoordError):
    """No connection to the store; the outcome of an outstanding write is unknown."""


class SessionExpired(CoordError):
    """The session expired: its ephemeral nodes are deleted and the session cannot be used."""


class SessionClosed(CoordError):
    """The session was closed by its owner."""


class RequestTooLarge(CoordError):
    """The request is longer than jute.maxbuffer: refused before anything was applied."""


class StoreCorrupted(CoordError):
    """The embedded store's files on disk cannot be read back."""
