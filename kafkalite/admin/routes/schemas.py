"""The Schema Registry as the console shows it: /schemas (subjects with their latest version,
type and compatibility level), a subject's versions, one version's schema pretty-printed, a
diff of two versions, and the global and per-subject compatibility levels.

The data is the registry of the broker answering, read in process (admin/schemas.py): the same
materialised view of `_schemas` its REST API answers from, synced to the topic's end first
(read-your-writes). Changing a level goes through the registry's own operation (a record in
`_schemas`, written by the registry as a PUT /config of its REST API would). The ACLs are the
registry listener's: DESCRIBE on the cluster to read, ALTER on the cluster to change.
With the registry disabled GET /schemas says so (`enabled` false) and the other routes answer
404 SCHEMA_REGISTRY_DISABLED.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from aiohttp import web

from kafkalite.admin import models as m
from kafkalite.admin.errors import AdminError
from kafkalite.admin.routes.base import ApiBase
from kafkalite.admin.routing import route

VIEW_TIMEOUT_S = 10.0
"""How long a request waits for the registry's view to catch up with `_schemas` (a console
page must not hang while the topic has no leader)."""
_SUBJECT = re.compile(r"[^/\x00-\x1f]{1,255}")


def registry_error(e: Any) -> AdminError:
    """A registry error (Confluent's code) as the admin API's error: its constant's name."""
    from kafkalite.schema_registry import errors

    names = {
        value: name
        for name, value in vars(errors).items()
        if name.isupper() and isinstance(value, int) and value > 1000
    }
    status = e.status if 400 <= e.status < 500 else 503
    return AdminError(status, names.get(e.error_code, "SCHEMA_REGISTRY_ERROR"), e.message)


class SchemaRoutes(ApiBase):
    """Subjects, versions, schemas, diffs and compatibility levels of this broker's registry."""

    def _registry(self) -> Any:
        from kafkalite.admin.schemas import registry_of

        registry = registry_of(self.server)
        if registry is None:
            raise AdminError(
                404,
                "SCHEMA_REGISTRY_DISABLED",
                "this broker runs no Schema Registry (schema.registry.listeners is empty)",
            )
        return registry

    async def _view(self, registry: Any) -> Any:
        import asyncio

        from kafkalite.schema_registry.errors import RegistryError

        try:
            return await asyncio.wait_for(registry.view(), VIEW_TIMEOUT_S)
        except TimeoutError:
            raise AdminError(
                503,
                "SCHEMA_REGISTRY_UNAVAILABLE",
                f"the registry did not read _schemas to its end within {VIEW_TIMEOUT_S:.0f} s",
            ) from None
        except RegistryError as e:
            raise registry_error(e) from None
        except asyncio.CancelledError:
            raise
        except Exception as e:  # the store's Kafka client at the boundary
            raise AdminError(
                503, "SCHEMA_REGISTRY_UNAVAILABLE", f"the registry cannot read _schemas: {e}"
            ) from None

    @staticmethod
    def _subject(request: web.Request) -> str:
        subject = request.match_info["subject"]
        if not _SUBJECT.fullmatch(subject):
            raise AdminError(404, "SUBJECT_NOT_FOUND", f"Subject '{subject}' not found.")
        return subject

    @staticmethod
    def _versions(view: Any, subject: str, deleted: bool) -> list[Any]:
        versions = view.versions(subject, deleted=deleted)
        if not versions:
            raise AdminError(404, "SUBJECT_NOT_FOUND", f"Subject '{subject}' not found.")
        return versions

    @route(
        "GET",
        "/schemas",
        summary="Schema Registry subjects",
        tag="schemas",
        answer=m.SchemaRegistryOverview,
        query=m.SchemasQuery,
    )
    async def schemas(self, request: web.Request, query: m.SchemasQuery) -> Any:
        """Every subject with its latest version, schema type and compatibility level (with
        `deleted`, soft-deleted subjects and versions too), and the global level."""
        from kafkalite.admin.schemas import registry_of

        registry = registry_of(self.server)
        if registry is None:
            return {
                "enabled": False,
                "url": None,
                "compatibility": None,
                "mode": None,
                "subjects": [],
            }
        view = await self._view(registry)
        subjects = []
        for name in view.subject_names(deleted=query.deleted):
            versions = view.versions(name, deleted=query.deleted)
            if not versions:
                continue
            live = [v for v in versions if not v.deleted]
            latest = (live or versions)[-1]
            subjects.append(
                {
                    "subject": name,
                    "latest_version": latest.version,
                    "latest_id": latest.id,
                    "schema_type": view.schemas[latest.id].schema_type,
                    "versions": len(versions),
                    "compatibility": registry.level(view, name),
                    "compatibility_is_subjects": name in view.configs,
                    "deleted": not live,
                }
            )
        return {
            "enabled": True,
            "url": getattr(self.server, "schema_registry_url", None),
            "compatibility": registry.level(view, None),
            "mode": registry.mode(view, None),
            "subjects": subjects,
        }

    @route(
        "GET",
        "/schemas/subjects/{subject}",
        summary="Describe subject",
        tag="schemas",
        answer=m.SubjectDetail,
        query=m.SchemasQuery,
        params={"subject": m.SubjectName},
    )
    async def subject(self, request: web.Request, query: m.SchemasQuery) -> Any:
        """A subject's versions (with `deleted`, soft-deleted ones too) and its levels."""
        registry = self._registry()
        subject = self._subject(request)
        view = await self._view(registry)
        versions = self._versions(view, subject, query.deleted)
        return {
            "subject": subject,
            "compatibility": registry.level(view, subject),
            "subject_compatibility": view.configs.get(subject),
            "global_compatibility": registry.level(view, None),
            "mode": registry.mode(view, subject),
            "versions": [
                {"version": v.version, "id": v.id, "deleted": v.deleted} for v in versions
            ],
        }

    def _version(self, view: Any, subject: str, number: int) -> Any:
        for v in self._versions(view, subject, True):
            if v.version == number:
                return v
        raise AdminError(
            404, "VERSION_NOT_FOUND", f"Version {number} not found for subject '{subject}'."
        )

    @staticmethod
    def _version_number(request: web.Request) -> int:
        text = request.match_info["version"]
        if not text.isdigit() or not 1 <= int(text) <= m.INT32_MAX:
            raise AdminError(404, "VERSION_NOT_FOUND", f"no version {text!r}")
        return int(text)

    @route(
        "GET",
        "/schemas/subjects/{subject}/versions/{version}",
        summary="Schema version",
        tag="schemas",
        answer=m.SchemaVersionDetail,
        params={"subject": m.SubjectName, "version": m.SchemaVersionNumber},
    )
    async def schema_version(self, request: web.Request) -> Any:
        """One version of a subject (soft-deleted ones too, marked): its id, type, references
        and schema text, JSON indented."""
        from kafkalite.admin.schemas import pretty

        registry = self._registry()
        subject = self._subject(request)
        number = self._version_number(request)
        view = await self._view(registry)
        v = self._version(view, subject, number)
        stored = view.schemas[v.id]
        return {
            "subject": subject,
            "version": v.version,
            "id": v.id,
            "schema_type": stored.schema_type,
            "schema_text": pretty(stored.schema_type, stored.text),
            "references": [r.as_json() for r in stored.references],
            "deleted": v.deleted,
        }

    @route(
        "GET",
        "/schemas/subjects/{subject}/diff",
        summary="Diff schema versions",
        tag="schemas",
        answer=m.SchemaDiff,
        query=m.SchemaDiffQuery,
        params={"subject": m.SubjectName},
    )
    async def schema_diff(self, request: web.Request, query: m.SchemaDiffQuery) -> Any:
        """The pretty-printed schemas of two versions, line by line: kept, removed (only in
        `from`) and added (only in `to`)."""
        from kafkalite.admin.schemas import pretty

        registry = self._registry()
        subject = self._subject(request)
        view = await self._view(registry)
        texts = []
        for number in (query.from_version, query.to_version):
            stored = view.schemas[self._version(view, subject, number).id]
            texts.append(pretty(stored.schema_type, stored.text).splitlines())
        old, new = texts
        lines: list[dict[str, str]] = []
        matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                lines += [{"op": "same", "text": t} for t in old[i1:i2]]
                continue
            lines += [{"op": "removed", "text": t} for t in old[i1:i2]]
            lines += [{"op": "added", "text": t} for t in new[j1:j2]]
        return {
            "subject": subject,
            "from_version": query.from_version,
            "to_version": query.to_version,
            "lines": lines,
        }

    async def _set_level(self, registry: Any, subject: str | None, level: str | None) -> Any:
        from kafkalite.schema_registry.errors import RegistryError

        try:
            if level is not None:
                await registry.set_config(subject, level)
            elif subject is not None and subject in (await self._view(registry)).configs:
                await registry.delete_config(subject)
        except RegistryError as e:
            raise registry_error(e) from None
        view = await self._view(registry)
        return {"subject": subject, "compatibility": registry.level(view, subject)}

    @route(
        "PUT",
        "/schemas/config",
        summary="Set global compatibility",
        tag="schemas",
        answer=m.CompatibilitySetting,
        body=m.GlobalCompatibilityChange,
    )
    async def set_global_compatibility(
        self, request: web.Request, change: m.GlobalCompatibilityChange
    ) -> Any:
        """The registry's global compatibility level (as PUT /config of its REST API)."""
        return await self._set_level(self._registry(), None, change.compatibility)

    @route(
        "PUT",
        "/schemas/subjects/{subject}/config",
        summary="Set subject compatibility",
        tag="schemas",
        answer=m.CompatibilitySetting,
        body=m.CompatibilityChange,
        params={"subject": m.SubjectName},
    )
    async def set_subject_compatibility(
        self, request: web.Request, change: m.CompatibilityChange
    ) -> Any:
        """A subject's own compatibility level (PUT /config/{subject}); null removes it, and
        the global level applies again (DELETE /config/{subject})."""
        registry = self._registry()
        subject = self._subject(request)
        return await self._set_level(registry, subject, change.compatibility)
