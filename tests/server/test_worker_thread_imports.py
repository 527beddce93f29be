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
