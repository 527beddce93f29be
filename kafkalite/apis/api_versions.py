"""ApiVersions (key 18, v0-v4): the versions this broker speaks, per API key.

The table is `advertised_versions()`: the project's advertised ranges for the keys that have a
registered handler. A request above our ApiVersions range never reaches this handler: the
dispatcher answers it as v0 with UNSUPPORTED_VERSION and this same table (KIP-511). From v3 the
client names its software (KIP-511); a name or version that is not Kafka's pattern is answered
INVALID_REQUEST with no table, as Kafka's ApiVersionsRequest.isValid decides.
"""

from __future__ import annotations

import re
from typing import Any

from kafkalite.apis.base import RequestContext, handles
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode

# Kafka's ApiVersionsRequest.SOFTWARE_NAME_VERSION_PATTERN
SOFTWARE_NAME_VERSION_PATTERN = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def _valid_software(request: Any) -> bool:
    name = getattr(request, "client_software_name", None)
    version = getattr(request, "client_software_version", None)
    if name is None and version is None:
        return True  # v0-v2 carry neither
    return all(
        isinstance(v, str) and SOFTWARE_NAME_VERSION_PATTERN.fullmatch(v) for v in (name, version)
    )


@handles(ApiKey.API_VERSIONS)
def handle_api_versions(ctx: RequestContext, request: Any) -> Any:
    if not _valid_software(request):
        return ctx.response(
            error_code=ErrorCode.INVALID_REQUEST,
            api_keys=[],
            throttle_time=0,
            supported_features=[],
            finalized_features_epoch=-1,
            finalized_features=[],
            zk_migration_ready=False,
        )
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
