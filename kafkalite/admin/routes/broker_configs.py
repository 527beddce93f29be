"""Dynamic broker configs (decision 0028), as the console's broker page shows and edits them:
GET/PATCH /brokers/{id}/configs (one broker's level) and /cluster/broker-configs (the
cluster-wide defaults).

Everything goes over the Kafka protocol with the admin API's client, as an AdminClient does:
DescribeConfigs (with synonyms) and IncrementalAlterConfigs (SET / DELETE) of the BROKER
resource, a broker's own level sent to that broker and the defaults to this one. The broker's
answer is the authority: its validators, its sources (DYNAMIC_BROKER_CONFIG,
DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG) and its secrecy (a
password-type value is answered null, and so are its synonyms). The caller's authorisation is
the admin API's, before anything is asked: DESCRIBE_CONFIGS on the cluster to read, ALTER_CONFIGS
on the cluster to change (Kafka's ACLs for these requests).

Invariants: no value of a sensitive config leaves this module (null in every answer, the
values set are not echoed). A value the broker refuses is 409 with Kafka's error name and
message (INVALID_CONFIG, INVALID_REQUEST), nothing of that request applied.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from kafkalite.admin import models as m
from kafkalite.admin.errors import AdminError
from kafkalite.admin.routes.base import ApiBase
from kafkalite.admin.routes.cluster import path_int
from kafkalite.admin.routes.topics import CONFIG_SOURCES
from kafkalite.admin.routing import route

RESOURCE_BROKER = 4
OP_SET, OP_DELETE = 0, 1


def entries(result: Any) -> list[dict[str, Any]]:
    """DescribeConfigs' entries as the API answers them (secrets null)."""

    def source(code: Any) -> str:
        name = CONFIG_SOURCES.get(int(code), "UNKNOWN")
        return name if name in m.BrokerConfigSource.__args__ else "UNKNOWN"  # type: ignore[attr-defined]

    out = []
    for c in sorted(result.configs, key=lambda c: c.name):
        sensitive = bool(c.is_sensitive)
        out.append(
            {
                "name": c.name,
                "value": None if sensitive else c.value,
                "source": source(c.config_source),
                "read_only": bool(c.read_only),
                "sensitive": sensitive,
                "synonyms": [
                    {
                        "name": s.name,
                        "value": None if sensitive else s.value,
                        "source": source(s.source),
                    }
                    for s in (getattr(c, "synonyms", None) or [])
                ],
            }
        )
    return out


class BrokerConfigRoutes(ApiBase):
    """A broker's configs with their sources, the cluster-wide defaults, and changing them."""

    async def _registered(self, broker_id: int) -> None:
        from kafkalite.zk import client as zk_data

        if broker_id not in await zk_data.get_all_brokers_and_epochs(self.session):
            raise AdminError(404, "BROKER_NOT_AVAILABLE", f"broker {broker_id} is not registered")

    async def _ask(self, api: str, node_id: int, send: Any) -> Any:
        try:
            client = await self.kafka_client()
            return await send(client)
        except asyncio.CancelledError:
            raise
        except AdminError:
            raise
        except Exception as e:  # the client's I/O and protocol failures, at the boundary
            raise AdminError(
                503, "BROKER_NOT_AVAILABLE", f"broker {node_id} did not answer {api}: {e}"
            ) from None

    async def _describe(self, node_id: int, name: str) -> list[dict[str, Any]]:
        from kafkalite.protocol.errors import ErrorCode

        response = await self._ask(
            "DescribeConfigs",
            node_id,
            lambda client: client.describe_configs(
                [(RESOURCE_BROKER, name)], node_id=node_id, include_synonyms=True
            ),
        )
        [result] = response.results
        error = ErrorCode.of(int(result.error_code))
        if error != ErrorCode.NONE:
            raise AdminError.kafka(error, result.error_message or error.name)
        return entries(result)

    async def _alter(self, node_id: int, name: str, change: m.BrokerConfigChange) -> dict:
        from kafkalite.client.connection import request_builder
        from kafkalite.protocol.api import ApiKey
        from kafkalite.protocol.errors import ErrorCode

        ops = [
            {"name": k, "config_operation": OP_SET if v is not None else OP_DELETE, "value": v}
            for k, v in sorted(change.configs.items())
        ]
        response = await self._ask(
            "IncrementalAlterConfigs",
            node_id,
            lambda client: client.send(
                ApiKey.INCREMENTAL_ALTER_CONFIGS,
                request_builder(
                    ApiKey.INCREMENTAL_ALTER_CONFIGS,
                    resources=[
                        {"resource_type": RESOURCE_BROKER, "resource_name": name, "configs": ops}
                    ],
                    validate_only=False,
                ),
                node_id=node_id,
            ),
        )
        [result] = response.responses
        error = ErrorCode.of(int(result.error_code))
        if error != ErrorCode.NONE:
            status = 409 if error in (ErrorCode.INVALID_CONFIG, ErrorCode.INVALID_REQUEST) else None
            refused = AdminError.kafka(error, result.error_message or error.name)
            if status is not None:
                refused.status = status
            raise refused
        return {
            "broker_id": int(name) if name else None,
            "set": sorted(k for k, v in change.configs.items() if v is not None),
            "removed": sorted(k for k, v in change.configs.items() if v is None),
        }

    @route(
        "GET",
        "/brokers/{id}/configs",
        summary="Broker configs",
        tag="cluster",
        answer=m.BrokerConfigs,
        params={"id": m.BrokerId},
    )
    async def broker_configs(self, request: web.Request) -> Any:
        """Every setting of the broker with the value in effect, its source and the levels
        that set it (DescribeConfigs of the broker with synonyms, at that broker); read_only
        false for those that can be changed dynamically; secrets null."""
        broker_id = path_int(request, "id")
        await self._registered(broker_id)
        return {"broker_id": broker_id, "configs": await self._describe(broker_id, str(broker_id))}

    @route(
        "PATCH",
        "/brokers/{id}/configs",
        summary="Alter broker configs",
        tag="cluster",
        answer=m.BrokerConfigsAltered,
        body=m.BrokerConfigChange,
        params={"id": m.BrokerId},
    )
    async def alter_broker_configs(self, request: web.Request, change: m.BrokerConfigChange) -> Any:
        """Set or remove dynamic configs of this one broker (`/config/brokers/<id>`, source
        DYNAMIC_BROKER_CONFIG), sent to that broker as IncrementalAlterConfigs."""
        broker_id = path_int(request, "id")
        await self._registered(broker_id)
        return await self._alter(broker_id, str(broker_id), change)

    @route(
        "GET",
        "/cluster/broker-configs",
        summary="Cluster-wide broker config defaults",
        tag="cluster",
        answer=m.BrokerConfigs,
    )
    async def default_broker_configs(self, request: web.Request) -> Any:
        """The dynamic defaults every broker takes (`/config/brokers/<default>`, source
        DYNAMIC_DEFAULT_BROKER_CONFIG): DescribeConfigs of the broker resource ""."""
        return {"broker_id": None, "configs": await self._describe(self.server.broker_id, "")}

    @route(
        "PATCH",
        "/cluster/broker-configs",
        summary="Alter cluster-wide broker config defaults",
        tag="cluster",
        answer=m.BrokerConfigsAltered,
        body=m.BrokerConfigChange,
    )
    async def alter_default_broker_configs(
        self, request: web.Request, change: m.BrokerConfigChange
    ) -> Any:
        """Set or remove cluster-wide dynamic defaults (what a broker without a value of its
        own takes), as IncrementalAlterConfigs of the broker resource ""."""
        return await self._alter(self.server.broker_id, "", change)
