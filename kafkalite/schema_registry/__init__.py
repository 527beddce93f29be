"""A Schema Registry served by every broker: Confluent Schema Registry's REST API v1 with
Avro, Protobuf and JSON Schema, Confluent's compatibility rules, storage in the compacted
`_schemas` topic, and schema validation on produce (docs/schema-registry.md).

Modules, lowest first: errors (Confluent's error codes), formats (parsing), compatibility (the
rules), view (the state materialised from `_schemas`), models (the API's pydantic models) are
pure; store (the topic through the Kafka client), registry (the operations), validation (the
produce path's RecordValidator), app and server (aiohttp) are the broker's."""
