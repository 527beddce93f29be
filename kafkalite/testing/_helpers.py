"""The helper methods ``Broker`` and ``Cluster`` share (``create_topic``, ``produce``...).

Each runs kafkalite's own client (``_ops``) on one event-loop thread shared by the process, so a
helper works the same from a synchronous test, from inside a running event loop (the ``a``-named
twins are awaitable and do not block that loop), and whether the broker is in this process or
not.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable, Mapping
from typing import Any, Self

from . import _ops
from ._loop import LoopThread

_client_loop: LoopThread | None = None
_client_loop_lock = threading.Lock()


def client_loop() -> LoopThread:
    global _client_loop
    with _client_loop_lock:
        if _client_loop is None or not _client_loop.running:
            _client_loop = LoopThread("kafkalite-testing-client").start()
        return _client_loop


class Helpers:
    """Mixed into Broker and Cluster; needs ``bootstrap_servers``, ``start()`` and ``close()``
    (the sync and async context managers call them)."""

    @property
    def bootstrap_servers(self) -> str:
        raise NotImplementedError

    def start(self) -> Self:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return await asyncio.to_thread(self.__enter__)

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.close)

    @property
    def helper_bootstrap(self) -> str:
        """Where the helpers connect first (a cluster puts its reachable brokers first)."""
        return self.bootstrap_servers

    def _run(self, coro: Any, timeout: float) -> Any:
        return client_loop().run(coro, timeout + 10)

    async def _arun(self, coro: Any) -> Any:
        loop = client_loop().loop
        assert loop is not None
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))

    # -- synchronous --

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = -1,
        *,
        config: Mapping[str, Any] | None = None,
        timeout: float = 30.0,
    ) -> str:
        """Create ``name`` and wait until each partition has a leader; returns the name."""
        return self._run(
            _ops.create_topic(
                self.helper_bootstrap,
                name,
                partitions=partitions,
                replication_factor=replication_factor,
                config=config,
                timeout=timeout,
            ),
            timeout,
        )

    def produce(
        self,
        topic: str,
        values: Iterable[Any],
        *,
        partition: int = 0,
        acks: int | str = -1,
        timeout: float = 30.0,
    ) -> int:
        """Append ``values`` (values, ``(key, value)`` or ``(key, value, headers)``) to one
        partition in one batch; the first offset."""
        return self._run(
            _ops.produce(
                self.helper_bootstrap,
                topic,
                list(values),
                partition=partition,
                acks=acks,
                timeout=timeout,
            ),
            timeout,
        )

    def consume_all(self, topic: str, *, timeout: float = 30.0) -> list[_ops.Message]:
        """Every record of ``topic`` up to each partition's high watermark now."""
        return self._run(_ops.consume_all(self.helper_bootstrap, topic, timeout=timeout), timeout)

    def wait_for_leaders(
        self,
        *topics: str,
        timeout: float = 30.0,
        full_isr: bool = False,
        not_on: Iterable[int] = (),
    ) -> dict[Any, _ops.PartitionState]:
        """Wait until every partition of ``topics`` has a leader (not in ``not_on``; with
        ``full_isr`` also its whole replica set in the ISR); their states."""
        return self._run(
            _ops.wait_for_leaders(
                self.helper_bootstrap, topics, timeout=timeout, full_isr=full_isr, not_on=not_on
            ),
            timeout,
        )

    def partitions(self, topic: str, *, timeout: float = 30.0) -> dict[int, _ops.PartitionState]:
        """Leader, replicas and ISR of each partition of ``topic``."""
        return self._run(_ops.partitions(self.helper_bootstrap, topic, timeout=timeout), timeout)

    # -- awaitable twins (for async tests: the caller's loop keeps running) --

    async def acreate_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = -1,
        *,
        config: Mapping[str, Any] | None = None,
        timeout: float = 30.0,
    ) -> str:
        return await self._arun(
            _ops.create_topic(
                self.helper_bootstrap,
                name,
                partitions=partitions,
                replication_factor=replication_factor,
                config=config,
                timeout=timeout,
            )
        )

    async def aproduce(
        self,
        topic: str,
        values: Iterable[Any],
        *,
        partition: int = 0,
        acks: int | str = -1,
        timeout: float = 30.0,
    ) -> int:
        return await self._arun(
            _ops.produce(
                self.helper_bootstrap,
                topic,
                list(values),
                partition=partition,
                acks=acks,
                timeout=timeout,
            )
        )

    async def apartitions(
        self, topic: str, *, timeout: float = 30.0
    ) -> dict[int, _ops.PartitionState]:
        return await self._arun(_ops.partitions(self.helper_bootstrap, topic, timeout=timeout))

    async def aconsume_all(self, topic: str, *, timeout: float = 30.0) -> list[_ops.Message]:
        return await self._arun(_ops.consume_all(self.helper_bootstrap, topic, timeout=timeout))

    async def await_for_leaders(
        self,
        *topics: str,
        timeout: float = 30.0,
        full_isr: bool = False,
        not_on: Iterable[int] = (),
    ) -> dict[Any, _ops.PartitionState]:
        return await self._arun(
            _ops.wait_for_leaders(
                self.helper_bootstrap, topics, timeout=timeout, full_isr=full_isr, not_on=not_on
            )
        )
