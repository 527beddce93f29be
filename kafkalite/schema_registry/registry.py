"""The registry's operations (Confluent Schema Registry's semantics) over the store: what the
HTTP routes call. Reads sync the view first (read-your-writes, store.py); writes are serialised
within this broker by a lock, decided on the synced view, written to `_schemas`, and checked
once applied: a registration that lost a race with another broker (view.py: the first writer
wins) is decided again on the newer view.

Parsing (fastavro, jsonschema, protoc) runs in a worker thread, never on the event loop.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kafkalite.schema_registry import compatibility, errors
from kafkalite.schema_registry.errors import RegistryError
from kafkalite.schema_registry.formats import AVRO, ParsedSchema, Reference, parse
from kafkalite.schema_registry.store import SchemaStore
from kafkalite.schema_registry.view import (
    SchemaView,
    StoredSchema,
    Version,
    config_key,
    delete_subject_key,
    mode_key,
    schema_key,
    schema_value,
)

MODES = ("READWRITE", "READONLY", "IMPORT")
DEFAULT_MODE = "READWRITE"
WRITE_ATTEMPTS = 100
"""Races one registration may lose before giving up (50001). Every round has a winner (the
first record in the log), so a writer loses at most once per registration other brokers make
meanwhile."""
LOST_RACE_BACKOFF_S = 0.01
"""Up to this many seconds (random, times the attempt) before deciding again after a lost
race, so brokers writing at once spread out."""
INT_MAX = 2**31 - 1


@dataclass(frozen=True)
class Registered:
    subject: str
    version: int
    id: int
    stored: StoredSchema


class Registry:
    def __init__(self, store: SchemaStore, max_schema_bytes: int) -> None:
        self.store = store
        self.max_schema_bytes = max_schema_bytes
        self._parsed: dict[int, ParsedSchema] = {}
        self._write_lock = asyncio.Lock()

    async def close(self) -> None:
        await self.store.close()

    # ---------------------------------------------------------------------------- parsing

    async def parse(
        self, view: SchemaView, stored: StoredSchema, *, limit: bool = True
    ) -> ParsedSchema:
        refs = await self._resolve(view, stored.references, ())
        return await asyncio.to_thread(
            parse,
            stored.schema_type,
            stored.text,
            refs,
            max_bytes=self.max_schema_bytes if limit else None,
        )

    async def parsed(self, view: SchemaView, schema_id: int) -> ParsedSchema:
        found = self._parsed.get(schema_id)
        stored = view.schemas[schema_id]
        if found is None or found.text != stored.text:
            found = await self._parse_stored(view, stored, (schema_id,))
            self._parsed[schema_id] = found
        return found

    async def _parse_stored(
        self, view: SchemaView, stored: StoredSchema, path: tuple[Any, ...]
    ) -> ParsedSchema:
        refs = await self._resolve(view, stored.references, path)
        return await asyncio.to_thread(parse, stored.schema_type, stored.text, refs)

    async def _resolve(
        self, view: SchemaView, references: Sequence[Reference], path: tuple[Any, ...]
    ) -> list[tuple[Reference, ParsedSchema]]:
        out = []
        for ref in references:
            key = (ref.subject, ref.version)
            if key in path:
                raise errors.InvalidSchema(f"reference cycle through {ref.subject} v{ref.version}")
            entry = view.subjects.get(ref.subject, {}).get(ref.version)
            if entry is None or entry.deleted:
                raise errors.InvalidSchema(
                    f"reference {ref.name!r}: version {ref.version} of subject {ref.subject!r} "
                    "not found"
                )
            cached = self._parsed.get(entry.id)
            if cached is None:
                cached = await self._parse_stored(view, view.schemas[entry.id], (*path, key))
                self._parsed[entry.id] = cached
            out.append((ref, cached))
        return out

    # ---------------------------------------------------------------------------- reading

    async def view(self) -> SchemaView:
        return await self.store.sync()

    def level(self, view: SchemaView, subject: str | None) -> str:
        if subject is not None and subject in view.configs:
            return view.configs[subject]
        return view.configs.get(None, compatibility.DEFAULT_LEVEL)

    def mode(self, view: SchemaView, subject: str | None) -> str:
        if subject is not None and subject in view.modes:
            return view.modes[subject]
        return view.modes.get(None, DEFAULT_MODE)

    def subject_versions(self, view: SchemaView, subject: str, deleted: bool) -> list[Version]:
        versions = view.versions(subject, deleted=deleted)
        if not versions:
            raise RegistryError(errors.SUBJECT_NOT_FOUND, f"Subject '{subject}' not found.")
        return versions

    def version(self, view: SchemaView, subject: str, version: str, deleted: bool) -> Version:
        number = parse_version(version)
        versions = self.subject_versions(view, subject, deleted or number != -1)
        if number == -1:
            live = [v for v in versions if deleted or not v.deleted]
            if not live:
                raise RegistryError(errors.SUBJECT_NOT_FOUND, f"Subject '{subject}' not found.")
            return live[-1]
        for v in versions:
            if v.version == number:
                if v.deleted and not deleted:
                    break
                return v
        raise RegistryError(
            errors.VERSION_NOT_FOUND, f"Version {number} not found for subject '{subject}'."
        )

    def schema(self, view: SchemaView, schema_id: int) -> StoredSchema:
        stored = view.schemas.get(schema_id)
        if stored is None or not any(view.usages(schema_id, deleted=True)):
            raise RegistryError(errors.SCHEMA_NOT_FOUND, f"Schema {schema_id} not found")
        return stored

    async def lookup(self, subject: str, stored: StoredSchema, deleted: bool) -> Registered:
        """POST /subjects/{s}: the version of `subject` holding this schema."""
        view = await self.view()
        versions = self.subject_versions(view, subject, deleted)
        try:
            new = await self.parse(view, stored)
        except errors.InvalidSchema:
            raise
        for v in reversed(versions):
            old = await self.parsed(view, v.id)
            if old.schema_type == new.schema_type and old.identity == new.identity:
                return Registered(subject, v.version, v.id, view.schemas[v.id])
        raise RegistryError(errors.SCHEMA_NOT_FOUND, "Schema not found")

    async def check(self, subject: str, version: str | None, stored: StoredSchema) -> list[str]:
        """/compatibility: why `stored` may not follow `version` (None: every version the
        subject's level checks against)."""
        view = await self.view()
        new = await self.parse(view, stored)
        level = self.level(view, subject)
        if version is None:
            versions = view.versions(subject)
        else:
            if parse_version(version) == -1 and not view.versions(subject):
                return []
            versions = [self.version(view, subject, version, False)]
            level = "FULL" if level.startswith("FULL") else level.removesuffix("_TRANSITIVE")
        olds = [await self.parsed(view, v.id) for v in versions]
        return compatibility.check(level, new, olds)

    # ---------------------------------------------------------------------------- writing

    def _writable(self, view: SchemaView, subject: str | None) -> None:
        if self.mode(view, subject) == "READONLY":
            raise RegistryError(
                errors.OPERATION_NOT_PERMITTED,
                f"Subject {subject} is in read-only mode" if subject else "read-only mode",
            )

    def _registrable(self, view: SchemaView, subject: str, imported: bool) -> None:
        """Confluent's rule: a registration giving an id needs IMPORT mode, one without needs
        READWRITE (IMPORT mode takes only registrations with their ids)."""
        mode = self.mode(view, subject)
        self._writable(view, subject)
        if imported and mode != "IMPORT":
            raise RegistryError(
                errors.OPERATION_NOT_PERMITTED,
                f"Subject {subject} in context . is not in import mode",
            )
        if not imported and mode != "READWRITE":
            raise RegistryError(
                errors.OPERATION_NOT_PERMITTED,
                f"Subject {subject} in context . is not in read-write mode",
            )

    async def register(
        self,
        subject: str,
        stored: StoredSchema,
        normalize: bool = False,
        *,
        schema_id: int | None = None,
        version: int | None = None,
    ) -> int:
        """The id of `stored` registered under `subject` (registering it if needed).
        `schema_id` (IMPORT mode only) and `version`: the id and version to keep."""
        if version is not None and version > INT_MAX:
            parse_version(version)  # 42202
        async with self._write_lock:
            for attempt in range(WRITE_ATTEMPTS):
                view = await self.view()
                self._registrable(view, subject, schema_id is not None)
                new = await self.parse(view, stored)
                live = view.versions(subject)
                if version is None:
                    for v in reversed(live):
                        if schema_id is not None and v.id != schema_id:
                            continue
                        old = await self.parsed(view, v.id)
                        if old.schema_type == new.schema_type and old.identity == new.identity:
                            return v.id  # idempotent: the same schema, its version's id
                all_versions = view.subjects.get(subject, {})
                next_version = max(all_versions, default=0) + 1
                if schema_id is not None:
                    # IMPORT: no compatibility check, the given id and version kept unless
                    # they are another schema's
                    self._importable(view, subject, stored, schema_id, version)
                    chosen_id = schema_id
                    chosen_version = next_version if version is None else version
                else:
                    if version is not None and version != next_version:
                        raise RegistryError(
                            errors.INVALID_SCHEMA, "Version is not one more than previous version"
                        )
                    olds = [await self.parsed(view, v.id) for v in live]
                    problems = compatibility.check(self.level(view, subject), new, olds)
                    if problems:
                        raise RegistryError(
                            errors.INCOMPATIBLE_SCHEMA,
                            f"Schema being registered is incompatible with an earlier schema "
                            f'for subject "{subject}", details: {problems}',
                        )
                    chosen_id = await self._id_for(view, stored, new)
                    chosen_version = next_version
                await self.store.write(
                    [
                        (
                            schema_key(subject, chosen_version),
                            schema_value(subject, chosen_version, chosen_id, stored, False),
                        )
                    ]
                )
                won = self.store.view.subjects.get(subject, {}).get(chosen_version)
                if won is not None and won.id == chosen_id:
                    self._parsed.setdefault(chosen_id, new)
                    return chosen_id
                if won is not None:
                    # another broker took this version first: our record has its key, and
                    # compaction keeps a key's last record, so the winner's is written again
                    # after ours (the views ignore it as a repeat)
                    winner = self.store.view.schemas[won.id]
                    await self.store.write(
                        [
                            (
                                schema_key(subject, chosen_version),
                                schema_value(subject, chosen_version, won.id, winner, won.deleted),
                            )
                        ]
                    )
                # lost: spread out from the other writers (a backoff, not synchronisation)
                await asyncio.sleep(random.uniform(0, LOST_RACE_BACKOFF_S * (attempt + 1)))
            raise RegistryError(
                errors.STORE_ERROR, "registration kept losing races with other writers"
            )

    def _importable(
        self,
        view: SchemaView,
        subject: str,
        stored: StoredSchema,
        schema_id: int,
        version: int | None,
    ) -> None:
        """An imported (id, version) may repeat what is stored, never overwrite it (42205, as
        Confluent refuses another schema under a taken id; a taken version too, which the
        first-writer-wins view would otherwise ignore silently)."""
        known = view.schemas.get(schema_id)
        if known is not None and known != stored:
            raise RegistryError(
                errors.OPERATION_NOT_PERMITTED,
                f"Overwrite new schema with id {schema_id} in context . is not permitted.",
            )
        taken = view.subjects.get(subject, {}).get(version) if version is not None else None
        if taken is not None and taken.id != schema_id:
            raise RegistryError(
                errors.OPERATION_NOT_PERMITTED,
                f"Overwrite new schema with version {version} of subject {subject} (id "
                f"{taken.id}) in context . is not permitted.",
            )

    async def _id_for(self, view: SchemaView, stored: StoredSchema, new: ParsedSchema) -> int:
        """An existing id of the same schema (ids are global, as in Confluent's registry),
        else the next one never used."""
        for schema_id, other in view.schemas.items():
            if other == stored:
                return schema_id
        for schema_id, parsed in list(self._parsed.items()):
            if (
                schema_id in view.schemas
                and parsed.schema_type == new.schema_type
                and parsed.identity == new.identity
                and view.schemas[schema_id].references == stored.references
            ):
                return schema_id
        return view.max_id + 1

    async def delete_version(self, subject: str, version: str, permanent: bool) -> int:
        async with self._write_lock:
            view = await self.view()
            self._writable(view, subject)
            entry = self.version(view, subject, version, True)
            if parse_version(version) == -1:
                live = view.versions(subject)
                if not live:
                    raise RegistryError(errors.SUBJECT_NOT_FOUND, f"Subject '{subject}' not found.")
                entry = live[-1]
            if permanent and not entry.deleted:
                raise RegistryError(
                    errors.VERSION_NOT_SOFT_DELETED,
                    f"Subject '{subject}' Version {entry.version} was not deleted first before "
                    "being permanently deleted",
                )
            if not permanent and entry.deleted:
                raise RegistryError(
                    errors.VERSION_SOFT_DELETED,
                    f"Subject '{subject}' Version {entry.version} was soft deleted. Set "
                    "permanent=true to delete permanently",
                )
            users = view.referenced_by(subject, entry.version)
            if users and not permanent:
                raise RegistryError(
                    errors.REFERENCE_EXISTS,
                    f"One or more references exist to the schema {{subject={subject}, "
                    f"version={entry.version}}}: ids {users}",
                )
            stored = view.schemas[entry.id]
            value = (
                None if permanent else schema_value(subject, entry.version, entry.id, stored, True)
            )
            await self.store.write([(schema_key(subject, entry.version), value)])
            return entry.version

    async def delete_subject(self, subject: str, permanent: bool) -> list[int]:
        async with self._write_lock:
            view = await self.view()
            self._writable(view, subject)
            every = view.versions(subject, deleted=True)
            if not every:
                raise RegistryError(errors.SUBJECT_NOT_FOUND, f"Subject '{subject}' not found.")
            live = [v for v in every if not v.deleted]
            if permanent and live:
                raise RegistryError(
                    errors.SUBJECT_NOT_SOFT_DELETED,
                    f"Subject '{subject}' was not deleted first before being permanently deleted",
                )
            if not permanent and not live:
                raise RegistryError(
                    errors.SUBJECT_SOFT_DELETED,
                    f"Subject '{subject}' was soft deleted.Set permanent=true to delete "
                    "permanently",
                )
            for v in live:
                users = view.referenced_by(subject, v.version)
                if users:
                    raise RegistryError(
                        errors.REFERENCE_EXISTS,
                        f"One or more references exist to the schema {{subject={subject}, "
                        f"version={v.version}}}: ids {users}",
                    )
            records: list[tuple[bytes, bytes | None]]
            if permanent:
                records = [(schema_key(subject, v.version), None) for v in every]
                records.append((config_key(subject), None))
                records.append((mode_key(subject), None))
                done = every
            else:
                records = [
                    (
                        schema_key(subject, v.version),
                        schema_value(subject, v.version, v.id, view.schemas[v.id], True),
                    )
                    for v in live
                ]
                records.append(
                    (
                        delete_subject_key(subject),
                        _json({"subject": subject, "version": live[-1].version}),
                    )
                )
                done = live
            await self.store.write(records)
            return [v.version for v in done]

    async def set_config(self, subject: str | None, level: str) -> None:
        if level not in compatibility.LEVELS:
            raise RegistryError(
                errors.INVALID_COMPATIBILITY_LEVEL,
                f"Invalid compatibility level. Valid values are {', '.join(compatibility.LEVELS)}",
            )
        await self.store.write([(config_key(subject), _json({"compatibilityLevel": level}))])

    async def delete_config(self, subject: str | None) -> str:
        view = await self.view()
        if subject is not None and subject not in view.configs:
            raise RegistryError(
                errors.SUBJECT_LEVEL_COMPATIBILITY_NOT_CONFIGURED,
                f"Subject '{subject}' does not have subject-level compatibility configured",
            )
        previous = self.level(view, subject)
        await self.store.write([(config_key(subject), None)])
        return previous

    async def set_mode(self, subject: str | None, mode: str, force: bool = False) -> None:
        """Set the global (`subject` None) or a subject's mode. Into IMPORT (from another mode)
        only when the scope has no live subject unless `force` (Confluent's 42205 "Cannot
        import since found existing subjects"); its soft-deleted versions are then deleted
        for good, so imported ids and versions do not meet them."""
        if mode not in MODES:
            raise RegistryError(
                errors.INVALID_MODE, f"Invalid mode. Valid values are {', '.join(MODES)}"
            )
        async with self._write_lock:
            records: list[tuple[bytes, bytes | None]] = []
            view = await self.view()
            if mode == "IMPORT" and self.mode(view, subject) != "IMPORT" and not force:
                scope = [s for s in view.subjects if subject is None or s == subject]
                if any(view.versions(s) for s in scope):
                    raise RegistryError(
                        errors.OPERATION_NOT_PERMITTED,
                        "Cannot import since found existing subjects",
                    )
                for s in scope:
                    for v in view.versions(s, deleted=True):
                        if view.referenced_by(s, v.version):
                            raise RegistryError(
                                errors.REFERENCE_EXISTS,
                                f"One or more references exist to the schema "
                                f"{{subject={s}, version={v.version}}}",
                            )
                        records.append((schema_key(s, v.version), None))
            records.append((mode_key(subject), _json({"mode": mode})))
            await self.store.write(records)

    async def delete_mode(self, subject: str) -> str:
        view = await self.view()
        if subject not in view.modes:
            raise RegistryError(
                errors.SUBJECT_LEVEL_MODE_NOT_CONFIGURED,
                f"Subject '{subject}' does not have subject-level mode configured",
            )
        previous = view.modes[subject]
        await self.store.write([(mode_key(subject), None)])
        return previous


def parse_version(version: str | int) -> int:
    """A version path segment: "latest" or -1 (the latest), or 1 .. 2**31-1; else 42202."""
    text = str(version)
    if text == "latest":
        return -1
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number == -1 or 1 <= number <= INT_MAX:
        return number
    raise RegistryError(
        errors.INVALID_VERSION,
        f"The specified version '{text}' is not a valid version id. Allowed values are between "
        f'[1, {INT_MAX}] and the string "latest"',
    )


def stored_of(schema: Any, schema_type: str | None, references: Any) -> StoredSchema:
    return StoredSchema(
        schema_type or AVRO,
        schema,
        tuple(Reference(r.name, r.subject, r.version) for r in references or ()),
    )


def _json(value: Any) -> bytes:
    import json

    return json.dumps(value, separators=(",", ":")).encode()
