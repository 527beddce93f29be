"""A coordination session that outlives its expiry (Kafka's ``ZooKeeperClient``, whose
``reinitialize`` replaces an expired ZooKeeper handle behind the same client object).

``RenewableSession`` is what the broker hands to its roles: every call goes to the session that
is current when it is made. When that session expires, ``renew()`` opens a new one on the same
store (retrying while the store is unreachable) and closes the old. Whatever depended on the old
session, its ephemeral nodes and its watches, is gone: the owner re-creates it after
``renew()`` (the broker re-registers and runs for controller again, as Kafka's
``RegisterBrokerAndReelect``). Calls made while the session is expired fail with
``SessionExpired`` as before; nothing is queued.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from .base import CoordSession, CoordStore, SessionState
from .errors import CoordError, SessionClosed


class RenewableSession:
    def __init__(
        self,
        store: CoordStore,
        timeout_ms: int,
        *,
        connection_timeout_ms: int | None = None,
        retry_backoff_s: float = 1.0,
    ) -> None:
        self.store = store
        self.timeout_ms = timeout_ms
        self.connection_timeout_ms = connection_timeout_ms
        self.retry_backoff_s = retry_backoff_s
        self.current: CoordSession | None = None
        self.renewals = 0
        self._closed = False

    async def open(self) -> RenewableSession:
        self.current = await self._open()
        return self

    async def _open(self) -> CoordSession:
        return await self.store.open_session(
            self.timeout_ms, connection_timeout_ms=self.connection_timeout_ms
        )

    def __getattr__(self, name: str) -> Any:
        # Only names this class does not define: the operations of the current session.
        current = self.__dict__.get("current")
        if current is None:
            raise AttributeError(name)
        return getattr(current, name)

    async def wait_for_expiry(self) -> SessionState:
        """Wait until the current session is expired or closed; returns which."""
        assert self.current is not None
        return await self.current.wait_for_state(SessionState.EXPIRED, SessionState.CLOSED)

    async def renew(self) -> CoordSession:
        """Replace the current session with a new one (retrying every ``retry_backoff_s``
        while the store cannot be reached); the old one is closed. Raises SessionClosed once
        ``close()`` was called."""
        old = self.current
        while True:
            if self._closed:
                raise SessionClosed("the session was closed")
            try:
                new = await self._open()
                break
            except CoordError:
                await asyncio.sleep(self.retry_backoff_s)
        if self._closed:
            await new.close()
            raise SessionClosed("the session was closed")
        self.current = new
        self.renewals += 1
        if old is not None:
            # Release what the old session holds on this side; its ephemeral nodes may outlive
            # it on the server for a while (an expiry this client declared after a long
            # disconnection): the owner waits for them to go before creating its own again.
            with contextlib.suppress(CoordError, OSError, TimeoutError):
                async with asyncio.timeout(self.timeout_ms / 1000):
                    await old.close()
        return new

    async def close(self) -> None:
        self._closed = True
        if self.current is not None:
            await self.current.close()
