"""The request and answer models of the registry's API (pydantic): the server validates with
them and the OpenAPI document is generated from them. Field names are Confluent's (camelCase
where Confluent's are)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SchemaType = Literal["AVRO", "JSON", "PROTOBUF"]
Level = Literal[
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
]
Mode = Literal["READWRITE", "READONLY", "IMPORT"]


class Error(BaseModel):
    error_code: int
    message: str


class ReferenceModel(BaseModel):
    name: str
    subject: str
    version: int = Field(ge=1, le=2**31 - 1)


class SchemaRequest(BaseModel):
    """A schema to register, look up or test. Other fields Confluent's newer clients send
    (metadata, ruleSet) are accepted and ignored."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    schema_: str = Field(alias="schema")
    schemaType: SchemaType | None = None
    references: list[ReferenceModel] | None = None
    id: int | None = None
    """IMPORT mode: the id to keep (a registration elsewhere than IMPORT mode may not give one;
    a negative id is none, as in Confluent's clients)."""
    version: int | None = None
    """The version to keep (IMPORT mode: any; otherwise only the next one; 0 or none: the
    next)."""


class RegisteredId(BaseModel):
    id: int


class SchemaById(BaseModel):
    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)

    schema_: str = Field(alias="schema")
    schemaType: SchemaType | None = None
    references: list[ReferenceModel] | None = None


class SubjectSchema(BaseModel):
    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)

    subject: str
    version: int
    id: int
    schema_: str = Field(alias="schema")
    schemaType: SchemaType | None = None
    references: list[ReferenceModel] | None = None


class SubjectVersion(BaseModel):
    subject: str
    version: int


class Compatibility(BaseModel):
    is_compatible: bool
    messages: list[str] | None = None


class ConfigRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    compatibility: Level


class ConfigAnswer(BaseModel):
    compatibilityLevel: Level


class ModeBody(BaseModel):
    model_config = ConfigDict(extra="ignore")

    mode: Mode


class Empty(BaseModel):
    pass


# -- query strings


class DeletedQuery(BaseModel):
    deleted: bool = False


class SubjectsQuery(DeletedQuery):
    subjectPrefix: str | None = None


class FormatQuery(BaseModel):
    subject: str | None = None
    format: str | None = None


class VersionQuery(DeletedQuery):
    format: str | None = None


class LookupQuery(DeletedQuery):
    normalize: bool = False


class NormalizeQuery(BaseModel):
    normalize: bool = False


class PermanentQuery(BaseModel):
    permanent: bool = False


class VerboseQuery(NormalizeQuery):
    verbose: bool = False


class DefaultToGlobalQuery(BaseModel):
    defaultToGlobal: bool = False


class ForceQuery(BaseModel):
    force: bool = False
