"""The HTTP admin API and its metrics (docs/architecture.md, Edges); the commands on it are in cli/.

- ``app.py``: the aiohttp application (its routes, JSON errors) and ``AdminServer``, started
  by ``KafkaServer`` on ``admin.listener`` inside the broker's event loop;
- ``routes/``: the route handlers, one module per resource (health, cluster, topics, records,
  transactions, groups, partitions, metrics, console), joined by ``app.AdminApi``;
- ``models.py``: the pydantic models of every request and answer body;
- ``routing.py``: ``@route``, the one declaration of a route (registration, validation, docs);
- ``openapi.py``: the OpenAPI 3.1 document served at ``/openapi.json``, generated from both;
- ``metrics.py``: request/topic counters fed by the dispatcher and the replica manager, and the
  Prometheus collector behind ``/metrics``;
- ``errors.py``: ``AdminError`` and the Kafka error -> HTTP status table;
- ``console/``: the operator console at ``/`` and the API reference at ``/docs`` (HTML, CSS
  and JavaScript modules served as they are, no build step);
- ``browse.py``, ``history.py``: the record browser and the rates kept for the console.

Importing this package imports none of them (the dispatcher imports only ``metrics``).
"""
