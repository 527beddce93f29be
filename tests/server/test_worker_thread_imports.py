"""The modules a broker imports on a worker thread (the admin API, the Schema Registry) are
imported one at a time in the process: brokers of one process start together, and ast.parse on
two threads at once can fail on CPython 3.11 (pytest parses kafkalite's modules to rewrite them)."""

import importlib

from kafkalite.server import kafka_server


def test_a_worker_thread_import_holds_the_process_wide_lock(monkeypatch):
    held = []

    def fake_import(name):
        held.append((name, kafka_server._IMPORTS.locked()))
        return name

    monkeypatch.setattr(importlib, "import_module", fake_import)
    assert kafka_server._import_module("kafkalite.admin.app") == "kafkalite.admin.app"
    assert held == [("kafkalite.admin.app", True)]
    assert not kafka_server._IMPORTS.locked()


async def test_the_schema_registry_start_imports_the_admin_app_on_a_worker_thread(monkeypatch):
    # SchemaRegistryServer.start serves through kafkalite.admin.app's start_site: that import
    # (aiohttp routes, pydantic models) must not run on the loop, where the first clients
    # after a restart wait for their Metadata
    import threading
    import types

    loop_thread = threading.current_thread()
    imported = []

    class FakeRegistryServer:
        registry = None

        def __init__(self, server, url):
            pass

        async def start(self):
            imported.append(("start", threading.current_thread() is loop_thread))

    def fake_import(name):
        imported.append((name, threading.current_thread() is loop_thread))
        return types.SimpleNamespace(SchemaRegistryServer=FakeRegistryServer)

    monkeypatch.setattr(kafka_server, "_import_module", fake_import)
    server = types.SimpleNamespace(
        config=types.SimpleNamespace(schema_registry_listeners="http://127.0.0.1:0"),
        services=types.SimpleNamespace(extra={}),
    )
    await kafka_server.KafkaServer._start_schema_registry(server)
    assert imported == [
        ("kafkalite.schema_registry.server", False),
        ("kafkalite.admin.app", False),
        ("start", True),
    ]
