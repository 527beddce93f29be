"""IMPORT mode as Confluent's registry has it: into IMPORT only with nothing live in scope
(unless force=true), registrations there carry their id (and version), kept as given; a clash
with what is stored is 42205; the id generator continues above the highest id; confluent-kafka's
SchemaRegistryClient and AvroDeserializer read the imported schemas. One broker of its own
(modes are registry-wide state)."""

from __future__ import annotations

import json

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from kafkalite.testing import Broker
from tests.schema_registry.support import call

pytestmark = pytest.mark.integration

POINT = {"type": "record", "name": "Point", "fields": [{"name": "x", "type": "long"}]}
POINT_V2 = {
    "type": "record",
    "name": "Point",
    "fields": [{"name": "x", "type": "long"}, {"name": "y", "type": "long", "default": 0}],
}
# incompatible with POINT under BACKWARD: IMPORT mode does not check compatibility
POINT_V3 = {"type": "record", "name": "Point", "fields": [{"name": "x", "type": "string"}]}


@pytest.fixture(scope="module")
def url():
    with Broker() as b:
        yield b.schema_registry_url


def register(url, subject, schema, **fields):
    return call(
        url, "POST", f"/subjects/{subject}/versions", {"schema": json.dumps(schema), **fields}
    )


def test_import_mode_keeps_ids_and_versions(url):
    # something live: IMPORT refused globally and for that subject, allowed for another
    assert register(url, "existing", POINT).status == 200
    answer = call(url, "PUT", "/mode", {"mode": "IMPORT"})
    assert (answer.status, answer.body["error_code"]) == (422, 42205)
    assert "existing subjects" in answer.body["message"]
    answer = call(url, "PUT", "/mode/existing", {"mode": "IMPORT"})
    assert (answer.status, answer.body["error_code"]) == (422, 42205)
    # an id outside IMPORT mode is refused
    answer = register(url, "imported", POINT, id=100, version=3)
    assert (answer.status, answer.body["error_code"]) == (422, 42205)
    assert "not in import mode" in answer.body["message"]

    assert call(url, "PUT", "/mode/imported", {"mode": "IMPORT"}).status == 200
    assert call(url, "GET", "/mode/imported").body == {"mode": "IMPORT"}
    # without an id IMPORT mode refuses
    answer = register(url, "imported", POINT)
    assert (answer.status, answer.body["error_code"]) == (422, 42205)
    assert "not in read-write mode" in answer.body["message"]

    assert register(url, "imported", POINT, id=100, version=3).body == {"id": 100}
    assert register(url, "imported", POINT_V2, id=7, version=8).body == {"id": 7}
    # no compatibility check in IMPORT mode; no version given: the next one
    assert register(url, "imported", POINT_V3, id=250).body == {"id": 250}
    # repeating an import is idempotent
    assert register(url, "imported", POINT, id=100, version=3).body == {"id": 100}
    assert call(url, "GET", "/subjects/imported/versions").body == [3, 8, 9]
    version = call(url, "GET", "/subjects/imported/versions/8").body
    assert (version["id"], version["version"], json.loads(version["schema"])) == (7, 8, POINT_V2)

    # clashes: another schema under a taken id, another id under a taken version
    answer = register(url, "imported", POINT_V2, id=100, version=20)
    assert (answer.status, answer.body["error_code"]) == (422, 42205)
    assert "id 100" in answer.body["message"]
    answer = register(url, "imported", POINT_V2, id=7, version=3)
    assert (answer.status, answer.body["error_code"]) == (422, 42205)
    assert call(url, "GET", "/subjects/imported/versions").body == [3, 8, 9]

    # back to READWRITE: new ids continue above the highest
    assert call(url, "PUT", "/mode/imported", {"mode": "READWRITE"}).status == 200
    fresh = {"type": "record", "name": "Fresh", "fields": [{"name": "f", "type": "int"}]}
    assert register(url, "fresh", fresh).body == {"id": 251}
    # a version given outside IMPORT mode must be the next one
    answer = register(url, "fresh", {**fresh, "doc": "d"}, version=5)
    assert (answer.status, answer.body["error_code"]) == (422, 42201)


def test_force_and_soft_deleted_leftovers(url):
    subject = "forced"
    assert register(url, subject, POINT).status == 200
    answer = call(url, "PUT", f"/mode/{subject}?force=true", {"mode": "IMPORT"})
    assert answer.status == 200
    assert register(url, subject, POINT_V3, id=300, version=2).body == {"id": 300}
    assert call(url, "DELETE", f"/mode/{subject}").status == 200

    # soft-deleted versions do not stop IMPORT mode; they are deleted for good
    gone = "leftover"
    assert register(url, gone, POINT).status == 200
    assert call(url, "DELETE", f"/subjects/{gone}").status == 200
    assert call(url, "PUT", f"/mode/{gone}", {"mode": "IMPORT"}).status == 200
    assert call(url, "GET", f"/subjects/{gone}/versions?deleted=true").status == 404
    assert register(url, gone, POINT_V2, id=400, version=1).body == {"id": 400}
    assert call(url, "DELETE", f"/mode/{gone}").status == 200


def test_confluent_kafka_reads_imported_schemas(url):
    subject = "client-read"
    assert call(url, "PUT", f"/mode/{subject}", {"mode": "IMPORT"}).status == 200
    assert register(url, subject, POINT, id=5000, version=4).status == 200
    client = SchemaRegistryClient({"url": url})
    assert json.loads(client.get_schema(5000).schema_str) == POINT
    latest = client.get_latest_version(subject)
    assert (latest.schema_id, latest.version) == (5000, 4)
    assert client.get_version(subject, 4).schema_id == 5000
    # a record framed with the imported id decodes: magic byte, id 5000, zigzag long 21
    framed = b"\x00" + (5000).to_bytes(4, "big") + b"\x2a"
    deserializer = AvroDeserializer(client)
    assert deserializer(framed, SerializationContext("t", MessageField.VALUE)) == {"x": 21}
