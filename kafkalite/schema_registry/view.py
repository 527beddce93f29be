"""The registry's state, materialised from the `_schemas` topic's records in Confluent's
format (so a Confluent or Karapace registry on the same cluster reads the same topic):

    key   {"keytype":"SCHEMA","subject":S,"version":V,"magic":1}
    value {"subject":S,"version":V,"id":N,"schemaType":T,"references":[...],"schema":TEXT,
           "deleted":false}          (schemaType left out for AVRO, references when none;
                                     deleted:true = soft-deleted; a null value = hard-deleted)
    key   {"keytype":"CONFIG","subject":S|null,"magic":0}   value {"compatibilityLevel":L}|null
    key   {"keytype":"MODE","subject":S|null,"magic":0}     value {"mode":M}|null
    key   {"keytype":"DELETE_SUBJECT","subject":S,"magic":0} value {"subject":S,"version":V}
    key   {"keytype":"NOOP","magic":0}                      (ignored)

Keys are written with a fixed field order and no spaces, so compaction keeps the last record of
each key.

Invariant, the first writer wins: every broker applies the same records in the same order, and
a SCHEMA record that would give an existing (subject, version) another schema, or an existing id
another schema, is ignored. So ids never collide even when two brokers write at once; a writer
that lost such a race sees its record ignored and tries again (registry.py). Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from kafkalite.schema_registry.formats import AVRO, Reference


@dataclass(frozen=True)
class StoredSchema:
    """A schema as the topic holds it: its type, text and references."""

    schema_type: str
    text: str
    references: tuple[Reference, ...] = ()


@dataclass
class Version:
    version: int
    id: int
    deleted: bool = False


@dataclass
class SchemaView:
    schemas: dict[int, StoredSchema] = field(default_factory=dict)
    subjects: dict[str, dict[int, Version]] = field(default_factory=dict)
    configs: dict[str | None, str] = field(default_factory=dict)
    modes: dict[str | None, str] = field(default_factory=dict)
    max_id: int = 0
    next_offset: int = 0
    """The offset of the next record to apply (everything before it is in the view)."""
    ignored: int = 0
    """Records ignored by the first-writer-wins rule (or unreadable)."""

    # -------------------------------------------------------------------------- applying

    def apply(self, offset: int, key: bytes | None, value: bytes | None) -> None:
        self.next_offset = max(self.next_offset, offset + 1)
        try:
            k = json.loads(key) if key else None
            v = json.loads(value) if value is not None else None
        except (ValueError, RecursionError):
            self.ignored += 1
            return
        if not isinstance(k, dict):
            self.ignored += 1
            return
        keytype = k.get("keytype")
        subject = k.get("subject")
        if keytype == "SCHEMA":
            self._apply_schema(subject, k.get("version"), v)
        elif keytype == "CONFIG":
            self._set(self.configs, subject, v, "compatibilityLevel")
        elif keytype == "MODE":
            self._set(self.modes, subject, v, "mode")
        elif keytype == "DELETE_SUBJECT" and isinstance(v, dict):
            upto = v.get("version")
            for entry in self.subjects.get(subject, {}).values():
                if not isinstance(upto, int) or entry.version <= upto:
                    entry.deleted = True

    def _set(self, table: dict[str | None, str], subject: Any, v: Any, name: str) -> None:
        if v is None:
            table.pop(subject, None)
        elif isinstance(v, dict) and isinstance(v.get(name), str):
            table[subject] = v[name]
        else:
            self.ignored += 1

    def _apply_schema(self, subject: Any, version: Any, v: Any) -> None:
        if not isinstance(subject, str) or not isinstance(version, int):
            self.ignored += 1
            return
        versions = self.subjects.get(subject)
        if v is None:  # hard delete
            if versions is not None:
                versions.pop(version, None)
                if not versions:
                    del self.subjects[subject]
            return
        try:
            schema_id = int(v["id"])
            stored = StoredSchema(
                str(v.get("schemaType") or AVRO),
                str(v["schema"]),
                tuple(
                    Reference(str(r["name"]), str(r["subject"]), int(r["version"]))
                    for r in v.get("references") or ()
                ),
            )
        except (KeyError, TypeError, ValueError):
            self.ignored += 1
            return
        known = self.schemas.get(schema_id)
        if known is not None and known != stored:
            self.ignored += 1  # the id is another schema's: an earlier writer won
            return
        existing = versions.get(version) if versions else None
        if existing is not None and existing.id != schema_id:
            self.ignored += 1  # the version is another schema's: an earlier writer won
            return
        self.schemas[schema_id] = stored
        self.max_id = max(self.max_id, schema_id)
        self.subjects.setdefault(subject, {})[version] = Version(
            version, schema_id, bool(v.get("deleted", False))
        )

    # ---------------------------------------------------------------------------- reading

    def versions(self, subject: str, *, deleted: bool = False) -> list[Version]:
        return sorted(
            (v for v in self.subjects.get(subject, {}).values() if deleted or not v.deleted),
            key=lambda v: v.version,
        )

    def subject_names(self, *, deleted: bool = False) -> list[str]:
        return sorted(s for s in self.subjects if self.versions(s, deleted=deleted))

    def usages(self, schema_id: int, *, deleted: bool = False) -> Iterator[tuple[str, int]]:
        """(subject, version) of every registration of `schema_id`."""
        for subject, versions in sorted(self.subjects.items()):
            for v in sorted(versions.values(), key=lambda v: v.version):
                if v.id == schema_id and (deleted or not v.deleted):
                    yield subject, v.version

    def referenced_by(self, subject: str, version: int) -> list[int]:
        """The ids of the live schemas that reference (subject, version)."""
        live = {
            v.id for versions in self.subjects.values() for v in versions.values() if not v.deleted
        }
        return sorted(
            schema_id
            for schema_id, stored in self.schemas.items()
            if schema_id in live
            and any(r.subject == subject and r.version == version for r in stored.references)
        )


def schema_key(subject: str, version: int) -> bytes:
    return _dump({"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1})


def schema_value(
    subject: str, version: int, schema_id: int, stored: StoredSchema, deleted: bool
) -> bytes:
    value: dict[str, Any] = {"subject": subject, "version": version, "id": schema_id}
    if stored.schema_type != AVRO:
        value["schemaType"] = stored.schema_type
    if stored.references:
        value["references"] = [r.as_json() for r in stored.references]
    value["schema"] = stored.text
    value["deleted"] = deleted
    return _dump(value)


def config_key(subject: str | None) -> bytes:
    return _dump({"keytype": "CONFIG", "subject": subject, "magic": 0})


def mode_key(subject: str | None) -> bytes:
    return _dump({"keytype": "MODE", "subject": subject, "magic": 0})


def delete_subject_key(subject: str) -> bytes:
    return _dump({"keytype": "DELETE_SUBJECT", "subject": subject, "magic": 0})


def noop_key() -> bytes:
    return _dump({"keytype": "NOOP", "magic": 0})


def _dump(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
