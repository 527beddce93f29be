"""Transactions coordinated by this broker: /transactions, /transactions/{id} and its abort."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from kafkalite.admin import models as m
from kafkalite.admin.access import Access
from kafkalite.admin.errors import AdminError
from kafkalite.admin.routes.base import ApiBase
from kafkalite.admin.routing import route


class TransactionRoutes(ApiBase):
    """List, describe and abort transactions."""

    def txn_coordinator(self) -> Any:
        coordinator = self.server.services.txn_coordinator
        if coordinator is None:
            raise AdminError(503, "UNAVAILABLE", "this broker has no transaction coordinator")
        return coordinator

    @route(
        "GET",
        "/transactions",
        summary="List transactions",
        tag="transactions",
        answer=list[m.TransactionSummary],
    )
    async def list_transactions(self, request: web.Request) -> Any:
        """The transactional ids this broker coordinates (as ListTransactions answers)."""
        from kafkalite.protocol.errors import ErrorCode

        error, _, listed = self.txn_coordinator().list_transactions()
        if error != ErrorCode.NONE:
            raise AdminError.kafka(error)
        access = Access(self.server, request)
        listed = [t for t in listed if access.transactional_id(t.transactional_id)]
        return [
            {
                "transactional_id": t.transactional_id,
                "producer_id": t.producer_id,
                "state": t.state,
            }
            for t in listed
        ]

    @route(
        "GET",
        "/transactions/{id}",
        summary="Describe transaction",
        tag="transactions",
        answer=m.Transaction,
        params={"id": str},
    )
    async def describe_transaction(self, request: web.Request) -> Any:
        from kafkalite.protocol.errors import ErrorCode

        txn_id = request.match_info["id"]
        d = self.txn_coordinator().describe(txn_id)
        if d.error == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
            raise AdminError(404, d.error.name, f"transactional id {txn_id!r} does not exist")
        if d.error == ErrorCode.NOT_COORDINATOR:
            raise AdminError(
                409, d.error.name, f"broker {self.server.broker_id} does not coordinate {txn_id!r}"
            )
        if d.error != ErrorCode.NONE:
            raise AdminError.kafka(d.error)
        return {
            "transactional_id": txn_id,
            "coordinator": self.server.broker_id,
            "state": d.state,
            "producer_id": d.producer_id,
            "producer_epoch": d.producer_epoch,
            "timeout_ms": d.timeout_ms,
            "start_time_ms": d.start_time_ms,
            "last_update_time_ms": d.last_update_time_ms,
            "partitions": [{"topic": tp.topic, "partition": tp.partition} for tp in d.partitions],
        }

    @route(
        "POST",
        "/transactions/{id}/abort",
        summary="Abort transaction",
        tag="transactions",
        answer=m.TransactionAborted,
        status=202,
        params={"id": str},
    )
    async def abort_transaction(self, request: web.Request) -> Any:
        """Fence the producer of an open transaction and abort it (the timeout abort, now)."""
        from kafkalite.protocol.errors import ErrorCode

        txn_id = request.match_info["id"]
        error = await self.txn_coordinator().abort_transaction(txn_id, reason="admin API")
        if error == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
            raise AdminError(404, error.name, f"transactional id {txn_id!r} does not exist")
        if error == ErrorCode.INVALID_TXN_STATE:
            raise AdminError(409, error.name, f"{txn_id!r} has no open transaction")
        if error == ErrorCode.NOT_COORDINATOR:
            raise AdminError(
                409, error.name, f"broker {self.server.broker_id} does not coordinate {txn_id!r}"
            )
        if error != ErrorCode.NONE:
            raise AdminError.kafka(error)
        return {"transactional_id": txn_id, "aborted": True}
