"""ApiVersions (key 18, v0-v4): the versions this broker speaks, per API key.

The table is `advertised_versions()`: the project's advertised ranges for the keys that have a
registered handler. A request above our ApiVersions range never reaches this handler: the
dispatcher answers it as v0 with UNSUPPORTED_VERSION and this same table (KIP-511).
"""

from __future__ import annotations

from typing import Any

from kafkalite.apis.base import RequestContext, handles
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode


@handles(ApiKey.API_VERSIONS)
def handle_api_versions(ctx: RequestContext, request: Any) -> Any:
    return ctx.response(
        error_code=ErrorCode.NONE,
        api_keys=[
            {"api_key": key, "min_version": lo, "max_version": hi}
            for key, (lo, hi) in sorted(ctx.services.api_versions.items())
        ],
        throttle_time=0,
        supported_features=[],
        finalized_features_epoch=-1,
        finalized_features=[],
        zk_migration_ready=False,
    )
