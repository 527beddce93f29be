"""Generate kio-style message modules for the ZooKeeper-era inter-broker APIs.

kio follows Kafka 4.x, which removed LeaderAndIsr (4), StopReplica (5), UpdateMetadata (6) and
ControlledShutdown (7) together with ZooKeeper mode. kafkalite's controller needs them, so this
script turns their Kafka 3.x JSON schemas (transcribed below: field names, types, version ranges,
defaults) into the same shape kio generates: one module per (message, version, request|response)
under ``kafkalite/protocol/messages/<api>/v<N>/``, each a set of frozen, slotted, kw-only
dataclasses whose fields carry ``metadata={"kafka_type": ...}``. kio's own reader and writer
(``kio.serial.entity_reader`` / ``entity_writer``, native decode) then handle them like any kio
message.

Development tool, outside the runtime package (the wheel does not ship it). Its output is
already formatted as ``ruff format`` and ``ruff check`` want it, so a test
(``tests/protocol/test_generate_messages.py``) regenerates every module into a temporary
directory and diffs it against the committed ones. Re-run after editing a schema:

    .venv/bin/python tools/generate_messages.py
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

MESSAGES_DIR = Path(__file__).resolve().parent.parent / "kafkalite" / "protocol" / "messages"

# --- the schemas (Kafka 3.x clients/src/main/resources/common/message/*.json) ---------------
# Field: (Name, type, versions, extra) where extra may hold default, nullableVersions,
# entityType, fields (for an inline struct array) and the struct name for "[]Struct" types.


def F(name, type_, versions, **extra):
    return {"name": name, "type": type_, "versions": versions, **extra}


LEADER_AND_ISR_PARTITION_STATE = [
    F("TopicName", "string", "0-1", entityType="topicName"),
    F("PartitionIndex", "int32", "0+"),
    F("ControllerEpoch", "int32", "0+"),
    F("Leader", "int32", "0+", entityType="brokerId"),
    F("LeaderEpoch", "int32", "0+"),
    F("Isr", "[]int32", "0+", entityType="brokerId"),
    F("ZkVersion", "int32", "0+"),
    F("Replicas", "[]int32", "0+", entityType="brokerId"),
    F("AddingReplicas", "[]int32", "3+", entityType="brokerId"),
    F("RemovingReplicas", "[]int32", "3+", entityType="brokerId"),
    F("IsNew", "bool", "1+", default="false"),
    F("LeaderRecoveryState", "int8", "6+", default="0"),
]

LEADER_AND_ISR_PARTITION_ERROR = [
    F("TopicName", "string", "0-4", entityType="topicName"),
    F("PartitionIndex", "int32", "0+"),
    F("ErrorCode", "int16", "0+"),
]

UPDATE_METADATA_PARTITION_STATE = [
    F("TopicName", "string", "0-4", entityType="topicName"),
    F("PartitionIndex", "int32", "0+"),
    F("ControllerEpoch", "int32", "0+"),
    F("Leader", "int32", "0+", entityType="brokerId"),
    F("LeaderEpoch", "int32", "0+"),
    F("Isr", "[]int32", "0+", entityType="brokerId"),
    F("ZkVersion", "int32", "0+"),
    F("Replicas", "[]int32", "0+", entityType="brokerId"),
    F("OfflineReplicas", "[]int32", "4+", entityType="brokerId"),
]

MESSAGES = [
    {
        "apiKey": 4,
        "type": "request",
        "name": "LeaderAndIsrRequest",
        "module": "leader_and_isr",
        # v4 first flexible; v5 Type + TopicId (KIP-516); v6 LeaderRecoveryState (KIP-704);
        # v7 isKRaftController (KIP-866).
        "generate": range(4, 8),
        "flexibleVersions": "4+",
        "fields": [
            F("ControllerId", "int32", "0+", entityType="brokerId"),
            F("IsKRaftController", "bool", "7+", default="false"),
            F("ControllerEpoch", "int32", "0+"),
            F("BrokerEpoch", "int64", "2+", default="-1"),
            F("Type", "int8", "5+"),
            F("UngroupedPartitionStates", "[]LeaderAndIsrPartitionState", "0-1"),
            F(
                "TopicStates",
                "[]LeaderAndIsrTopicState",
                "2+",
                fields=[
                    F("TopicName", "string", "2+", entityType="topicName"),
                    F("TopicId", "uuid", "5+"),
                    F("PartitionStates", "[]LeaderAndIsrPartitionState", "2+"),
                ],
            ),
            F(
                "LiveLeaders",
                "[]LeaderAndIsrLiveLeader",
                "0+",
                fields=[
                    F("BrokerId", "int32", "0+", entityType="brokerId"),
                    F("HostName", "string", "0+"),
                    F("Port", "int32", "0+"),
                ],
            ),
        ],
        "commonStructs": {"LeaderAndIsrPartitionState": LEADER_AND_ISR_PARTITION_STATE},
    },
    {
        "apiKey": 4,
        "type": "response",
        "name": "LeaderAndIsrResponse",
        "module": "leader_and_isr",
        "generate": range(4, 8),
        "flexibleVersions": "4+",
        "fields": [
            F("ErrorCode", "int16", "0+"),
            F("PartitionErrors", "[]LeaderAndIsrPartitionError", "0-4"),
            F(
                "Topics",
                "[]LeaderAndIsrTopicError",
                "5+",
                fields=[
                    F("TopicId", "uuid", "5+"),
                    F("PartitionErrors", "[]LeaderAndIsrPartitionError", "5+"),
                ],
            ),
        ],
        "commonStructs": {"LeaderAndIsrPartitionError": LEADER_AND_ISR_PARTITION_ERROR},
    },
    {
        "apiKey": 5,
        "type": "request",
        "name": "StopReplicaRequest",
        "module": "stop_replica",
        # v2 first flexible; v3 per-partition LeaderEpoch/DeletePartition (KIP-570);
        # v4 isKRaftController (KIP-866).
        "generate": range(2, 5),
        "flexibleVersions": "2+",
        "fields": [
            F("ControllerId", "int32", "0+", entityType="brokerId"),
            F("IsKRaftController", "bool", "4+", default="false"),
            F("ControllerEpoch", "int32", "0+"),
            F("BrokerEpoch", "int64", "1+", default="-1"),
            F("DeletePartitions", "bool", "0-2"),
            F(
                "UngroupedPartitions",
                "[]StopReplicaPartitionV0",
                "0",
                fields=[
                    F("TopicName", "string", "0", entityType="topicName"),
                    F("PartitionIndex", "int32", "0"),
                ],
            ),
            F(
                "Topics",
                "[]StopReplicaTopicV1",
                "1-2",
                fields=[
                    F("Name", "string", "1-2", entityType="topicName"),
                    F("PartitionIndexes", "[]int32", "1-2"),
                ],
            ),
            F(
                "TopicStates",
                "[]StopReplicaTopicState",
                "3+",
                fields=[
                    F("TopicName", "string", "3+", entityType="topicName"),
                    F(
                        "PartitionStates",
                        "[]StopReplicaPartitionState",
                        "3+",
                        fields=[
                            F("PartitionIndex", "int32", "3+"),
                            F("LeaderEpoch", "int32", "3+", default="-1"),
                            F("DeletePartition", "bool", "3+"),
                        ],
                    ),
                ],
            ),
        ],
    },
    {
        "apiKey": 5,
        "type": "response",
        "name": "StopReplicaResponse",
        "module": "stop_replica",
        "generate": range(2, 5),
        "flexibleVersions": "2+",
        "fields": [
            F("ErrorCode", "int16", "0+"),
            F(
                "PartitionErrors",
                "[]StopReplicaPartitionError",
                "0+",
                fields=[
                    F("TopicName", "string", "0+", entityType="topicName"),
                    F("PartitionIndex", "int32", "0+"),
                    F("ErrorCode", "int16", "0+"),
                ],
            ),
        ],
    },
    {
        "apiKey": 6,
        "type": "request",
        "name": "UpdateMetadataRequest",
        "module": "update_metadata",
        # v6 first flexible; v7 TopicId.
        "generate": range(6, 8),
        "flexibleVersions": "6+",
        "fields": [
            F("ControllerId", "int32", "0+", entityType="brokerId"),
            F("ControllerEpoch", "int32", "0+"),
            F("BrokerEpoch", "int64", "5+", default="-1"),
            F("UngroupedPartitionStates", "[]UpdateMetadataPartitionState", "0-4"),
            F(
                "TopicStates",
                "[]UpdateMetadataTopicState",
                "5+",
                fields=[
                    F("TopicName", "string", "5+", entityType="topicName"),
                    F("TopicId", "uuid", "7+"),
                    F("PartitionStates", "[]UpdateMetadataPartitionState", "5+"),
                ],
            ),
            F(
                "LiveBrokers",
                "[]UpdateMetadataBroker",
                "0+",
                fields=[
                    F("Id", "int32", "0+", entityType="brokerId"),
                    F("V0Host", "string", "0"),
                    F("V0Port", "int32", "0"),
                    F(
                        "Endpoints",
                        "[]UpdateMetadataEndpoint",
                        "1+",
                        fields=[
                            F("Port", "int32", "1+"),
                            F("Host", "string", "1+"),
                            F("Listener", "string", "3+"),
                            F("SecurityProtocol", "int16", "1+"),
                        ],
                    ),
                    F("Rack", "string", "2+", nullableVersions="0+"),
                ],
            ),
        ],
        "commonStructs": {"UpdateMetadataPartitionState": UPDATE_METADATA_PARTITION_STATE},
    },
    {
        "apiKey": 6,
        "type": "response",
        "name": "UpdateMetadataResponse",
        "module": "update_metadata",
        "generate": range(6, 8),
        "flexibleVersions": "6+",
        "fields": [F("ErrorCode", "int16", "0+")],
    },
    {
        "apiKey": 7,
        "type": "request",
        "name": "ControlledShutdownRequest",
        "module": "controlled_shutdown",
        "generate": range(3, 4),
        "flexibleVersions": "3+",
        "fields": [
            F("BrokerId", "int32", "0+", entityType="brokerId"),
            F("BrokerEpoch", "int64", "2+", default="-1"),
        ],
    },
    {
        "apiKey": 7,
        "type": "response",
        "name": "ControlledShutdownResponse",
        "module": "controlled_shutdown",
        "generate": range(3, 4),
        "flexibleVersions": "3+",
        "fields": [
            F("ErrorCode", "int16", "0+"),
            F(
                "RemainingPartitions",
                "[]RemainingPartition",
                "0+",
                fields=[
                    F("TopicName", "string", "0+", entityType="topicName"),
                    F("PartitionIndex", "int32", "0+"),
                ],
            ),
        ],
    },
]

# --- the generator ---------------------------------------------------------------------------

PRIMITIVES = {
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "bool": "bool",
    "string": "str",
    "uuid": "uuid.UUID | None",
}
ENTITY_TYPES = {"brokerId": "BrokerId", "topicName": "TopicName"}


def in_versions(spec: str | None, version: int) -> bool:
    if spec is None or spec == "none":
        return False
    if spec.endswith("+"):
        return version >= int(spec[:-1])
    if "-" in spec:
        low, high = spec.split("-")
        return int(low) <= version <= int(high)
    return version == int(spec)


SNAKE_OVERRIDES = {"IsKRaftController": "is_kraft_controller"}


def snake(name: str) -> str:
    if name in SNAKE_OVERRIDES:
        return SNAKE_OVERRIDES[name]
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    name = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    return name.lower()


@dataclass
class Emitter:
    message: dict
    version: int

    def __post_init__(self) -> None:
        self.flexible = in_versions(self.message["flexibleVersions"], self.version)
        self.classes: list[str] = []
        self.emitted: set[str] = set()
        self.imports: set[str] = set()

    def struct_fields(self, struct_name: str, inline: list | None) -> list:
        if inline is not None:
            return inline
        return self.message["commonStructs"][struct_name]

    def field_line(self, f: dict) -> str | None:
        if not in_versions(f["versions"], self.version):
            return None
        name = snake(f["name"])
        type_ = f["type"]
        nullable = in_versions(f.get("nullableVersions"), self.version)
        meta = None
        default = None
        if type_.startswith("[]"):
            inner = type_[2:]
            if inner in PRIMITIVES:
                py = ENTITY_TYPES.get(f.get("entityType"), PRIMITIVES[inner])
                self.note_type(py)
                annotation = f"tuple[{py}, ...]"
                meta = inner
                default = "()"
            else:
                self.emit_struct(inner, f.get("fields"))
                annotation = f"tuple[{inner}, ...]"
        elif f["name"] == "ErrorCode" and type_ == "int16":
            self.imports.add("from kio.schema.errors import ErrorCode")
            annotation, meta = "ErrorCode", "error_code"
        else:
            py = ENTITY_TYPES.get(f.get("entityType"), PRIMITIVES[type_])
            self.note_type(py)
            annotation = f"{py} | None" if nullable and type_ == "string" else py
            meta = type_
            if "default" in f:
                raw = f["default"]
                if type_ == "bool":
                    default = "True" if raw == "true" else "False"
                else:
                    default = f"{py}({raw})"
            elif nullable:
                default = "None"
        if type_ == "uuid":
            self.imports.add("import uuid")
        if meta is None:
            return f"    {name}: {annotation}"
        args = f'metadata={{"kafka_type": "{meta}"}}'
        if default is not None:
            args += f", default={default}"
        return f"    {name}: {annotation} = field({args})"

    def note_type(self, py: str) -> None:
        if py in ("i8", "i16", "i32", "i64"):
            self.imports.add(f"from kio.static.primitive import {py}")
        elif py in ("BrokerId", "TopicName"):
            self.imports.add(f"from kio.schema.types import {py}")

    def emit_struct(self, struct_name: str, inline: list | None) -> None:
        if struct_name in self.emitted:
            return
        self.emitted.add(struct_name)
        lines = [self.field_line(f) for f in self.struct_fields(struct_name, inline)]
        self.classes.append(self.render_class(struct_name, "nested", [x for x in lines if x]))

    def render_class(self, name: str, entity_type: str, lines: list[str]) -> str:
        header = "RequestHeader" if self.message["type"] == "request" else "ResponseHeader"
        return "\n".join(
            [
                "",
                "",
                "",
                "@dataclass(frozen=True, slots=True, kw_only=True)",
                f"class {name}:",
                f"    __type__: ClassVar = EntityType.{entity_type}",
                f"    __version__: ClassVar[i16] = i16({self.version})",
                f"    __flexible__: ClassVar[bool] = {self.flexible}",
                f"    __api_key__: ClassVar[i16] = i16({self.message['apiKey']})",
                f"    __header_schema__: ClassVar[type[{header}]] = {header}",
                *lines,
            ]
        )

    def render(self) -> str:
        lines = [self.field_line(f) for f in self.message["fields"]]
        top = self.render_class(self.message["name"], self.message["type"], [x for x in lines if x])
        self.imports.add("from kio.static.primitive import i16")
        if self.message["type"] == "request":
            hv = 2 if self.flexible else 1
            self.imports.add(f"from kio.schema.request_header.v{hv}.header import RequestHeader")
        else:
            hv = 1 if self.flexible else 0
            self.imports.add(f"from kio.schema.response_header.v{hv}.header import ResponseHeader")
        source_json = self.message["name"] + ".json"
        # isort's layout, as ruff wants it: one line per module, names in natural order
        from_imports: dict[str, set[str]] = {"kio.static.constants": {"EntityType"}}
        for line in self.imports:
            if line.startswith("from "):
                module, names = line[len("from ") :].split(" import ")
                from_imports.setdefault(module, set()).update(n.strip() for n in names.split(","))
        head = [
            '"""',
            f"{self.message['name']} v{self.version}, generated by tools/generate_messages.py",
            f"from Kafka 3.x ``clients/src/main/resources/common/message/{source_json}``.",
            '"""',
            "",
            *sorted(i for i in self.imports if i.startswith("import ")),
            "from dataclasses import dataclass, field",
            "from typing import ClassVar",
            "",
            *(
                f"from {module} import {', '.join(sorted(names, key=_natural))}"
                for module, names in sorted(from_imports.items())
            ),
        ]
        return "\n".join(head) + "".join(self.classes) + top + "\n"


def _natural(name: str) -> list:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def generate(out_dir: Path) -> list[Path]:
    """Write every message module under ``out_dir`` (with the packages' ``__init__.py``)."""
    written = []
    for message in MESSAGES:
        for version in message["generate"]:
            out = out_dir / message["module"] / f"v{version}" / f"{message['type']}.py"
            out.parent.mkdir(parents=True, exist_ok=True)
            for pkg in (out.parent, out.parent.parent):
                (pkg / "__init__.py").touch()
            out.write_text(Emitter(message, version).render())
            written.append(out)
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out",
        type=Path,
        default=MESSAGES_DIR,
        help="directory to write the modules under (default: kafkalite/protocol/messages)",
    )
    args = parser.parse_args(argv)
    written = generate(args.out)
    print(f"wrote {len(written)} modules under {args.out}")


if __name__ == "__main__":
    main(sys.argv[1:])
