"""Connection limits: Kafka's ConnectionQuotas (`max.connections`, `max.connections.per.ip`,
`max.connections.per.ip.overrides`).

As in Kafka's SocketServer:
- An acceptor takes a connection off the listening socket, then waits for a slot
  (`wait_for_slot`) while the broker-wide count is at `max.connections`: meanwhile it accepts
  nothing more, and new connections wait in the kernel's listen backlog until one closes. The
  time acceptors spend waiting is counted (Kafka's AcceptorBlockedPercent).
- Then the connection is counted (`inc`); if its address already had its limit
  (`max.connections.per.ip`, or the override for that address) `inc` says so, and the acceptor
  closes it at once (`dec`) and counts the rejection (Kafka's TooManyConnectionsException).
- The inter-broker listener is protected when there are several listeners: it never waits
  for `max.connections`, and a connection accepted on it beyond the limit makes the broker
  close the least recently active connection of another listener.

Overrides name an IP address or a host name; host names are resolved once, at start-up
(`resolve_overrides`), as Kafka does with InetAddress.getByName.

Invariant: `total` is the number of connections counted and not yet released; every `inc`
is matched by exactly one `dec`. Single event loop, not thread-safe.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from collections.abc import Mapping

from kafkalite.config import INT_MAX, ConfigError

OVERRIDES_KEY = "max.connections.per.ip.overrides"


class ConnectionQuotas:
    def __init__(
        self,
        max_connections: int = INT_MAX,
        max_connections_per_ip: int = INT_MAX,
        per_ip_overrides: Mapping[str, int] | None = None,
        *,
        listeners: tuple[str, ...] = (),
        inter_broker_listener: str | None = None,
    ) -> None:
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self.per_ip_overrides: dict[str, int] = dict(per_ip_overrides or {})
        """Address (or, until resolve_overrides, host name) -> its limit."""
        self._protected = inter_broker_listener if len(listeners) > 1 else None
        self.total = 0
        self._per_ip: dict[str, int] = {}
        self._per_listener: dict[str, int] = dict.fromkeys(listeners, 0)
        self._waiters: list[asyncio.Future[None]] = []
        self.rejected_per_ip = 0
        self._blocked_total = 0.0
        self._blocked_since: dict[int, float] = {}

    @classmethod
    def from_config(cls, config: object) -> ConnectionQuotas:
        """From a BrokerConfig (duck-typed: the network layer reads, never builds, configs)."""
        endpoints = config.listener_endpoints  # type: ignore[attr-defined]
        names = tuple(e.listener_name for e in endpoints)
        return cls(
            config.max_connections,  # type: ignore[attr-defined]
            config.max_connections_per_ip,  # type: ignore[attr-defined]
            config.max_connections_per_ip_override_map,  # type: ignore[attr-defined]
            listeners=names,
            inter_broker_listener=config.inter_broker_listener,  # type: ignore[attr-defined]
        )

    def reconfigure(
        self, max_connections: int, max_connections_per_ip: int, per_ip_overrides: Mapping[str, int]
    ) -> None:
        """New limits (dynamic broker configs), for the connections accepted from now on:
        connections already counted stay open, as in Kafka. Overrides must be addresses
        here (`resolve_overrides` turns host names into them)."""
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self.per_ip_overrides = dict(per_ip_overrides)
        if self._waiters:  # a higher limit may free acceptors that wait
            waiters, self._waiters = self._waiters, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    async def resolve_overrides(self) -> None:
        """Host names in the overrides become addresses; an unknown host stops start-up."""
        loop = asyncio.get_running_loop()
        resolved: dict[str, int] = {}
        for host, limit in self.per_ip_overrides.items():
            try:
                ipaddress.ip_address(host)
                resolved[host] = limit
                continue
            except ValueError:
                pass
            try:
                infos = await loop.getaddrinfo(host, None, type=socket.SOCK_STREAM)
            except OSError as e:
                raise ConfigError(
                    OVERRIDES_KEY,
                    f"invalid value for {OVERRIDES_KEY}: cannot resolve {host!r}: {e}",
                ) from None
            for info in infos:
                resolved[str(info[4][0])] = limit
        self.per_ip_overrides = resolved

    # ------------------------------------------------------------------ counting

    def limit_for(self, ip: str) -> int:
        return self.per_ip_overrides.get(ip, self.max_connections_per_ip)

    def connections_from(self, ip: str) -> int:
        return self._per_ip.get(ip, 0)

    def slot_available(self, listener: str) -> bool:
        return listener == self._protected or self.total < self.max_connections

    def inc(self, listener: str, ip: str) -> bool:
        """Count a new connection; False when its address was already at its limit (the
        caller closes it and calls `dec`, as Kafka does)."""
        count = self._per_ip.get(ip, 0)
        self._per_ip[ip] = count + 1
        self.total += 1
        self._per_listener[listener] = self._per_listener.get(listener, 0) + 1
        if count >= self.limit_for(ip):
            self.rejected_per_ip += 1
            return False
        return True

    def dec(self, listener: str, ip: str) -> None:
        count = self._per_ip.get(ip, 0)
        if count <= 0:
            raise ValueError(f"connection count of {ip} released more often than counted")
        if count == 1:
            del self._per_ip[ip]
        else:
            self._per_ip[ip] = count - 1
        self.total -= 1
        self._per_listener[listener] -= 1
        if self._waiters:
            waiters, self._waiters = self._waiters, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    def over_limit_for(self, listener: str) -> bool:
        """Kafka's maxConnectionsExceeded: too many connections, and `listener` is not the
        protected one (one of its connections should be closed)."""
        return self.total > self.max_connections and listener != self._protected

    @property
    def protected_listener(self) -> str | None:
        return self._protected

    # ------------------------------------------------------------------ waiting

    async def wait_for_slot(self, listener: str) -> None:
        """Return once `listener` may take one more connection (at once if it may now)."""
        if self.slot_available(listener):
            return
        key = id(asyncio.current_task())
        self._blocked_since[key] = time.monotonic()
        try:
            loop = asyncio.get_running_loop()
            while not self.slot_available(listener):
                waiter = loop.create_future()
                self._waiters.append(waiter)
                await waiter
        finally:
            self._blocked_total += time.monotonic() - self._blocked_since.pop(key)

    def blocked_seconds(self) -> float:
        """Seconds acceptors have spent waiting for a slot, the current waits included."""
        now = time.monotonic()
        return self._blocked_total + sum(now - since for since in self._blocked_since.values())
