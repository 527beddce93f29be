"""The composition root in-process: what start-up builds from the broker's configuration."""

from __future__ import annotations

import json

import pytest

from kafkalite.server import KafkaServer
from kafkalite.testing import free_port
from kafkalite.zk import client as zk_client
from tests.controller.shell_support import eventually
from tests.server.support import started


async def expire_and_wait_until_registered_again(server: KafkaServer) -> None:
    """Expire the broker's session, then wait until it registered on a new session and was
    elected controller again on it. The controller stays active with the old epoch until it
    has processed the expiry, so being active is not enough: the epoch must have moved past
    the one it held on the old session, and ``/controller`` must belong to the new session."""
    old_session_id = server.session.session_id
    old_controller_epoch = server.controller.epoch
    assert server.controller.is_active
    server.store.expire_session(old_session_id)

    async def owned_by_the_new_session(path: str) -> bool:
        stat = await server.session.exists(path)
        return stat is not None and stat.ephemeral_owner == server.session.session_id

    async def registered_again() -> bool:
        if server.session.session_id == old_session_id:
            return False
        if not server.controller.is_active or server.controller.epoch <= old_controller_epoch:
            return False
        return await owned_by_the_new_session("/brokers/ids/0") and await owned_by_the_new_session(
            "/controller"
        )

    await eventually(registered_again, message="registered on a new session")


async def test_cleaner_and_fetcher_settings_reach_the_running_roles(tmp_path):
    server = await started(
        tmp_path,
        **{
            "log.cleaner.backoff.ms": "250",
            "log.cleaner.threads": "2",
            "log.cleaner.dedupe.buffer.size": "1048576",
            "log.cleaner.io.max.bytes.per.second": "5000000",
            "replica.socket.timeout.ms": "7000",
            "num.replica.fetchers": "3",
        },
    )
    try:
        cleaner = server.log_manager.cleaner
        assert (cleaner.config.backoff_ms, cleaner.config.num_threads) == (250, 2)
        assert cleaner.config.dedupe_buffer_size == 1048576
        assert cleaner.throttler.desired_rate_per_second == 5_000_000
        fetchers = server.replica_manager.replica_fetcher_manager
        assert fetchers.endpoint_for_leader(1).client.request_timeout == 7.0
        assert fetchers.config.num_replica_fetchers == 3
        # ISR changes go through the writer that treats a lost-but-applied write as done
        alter_isr = server.replica_manager.alter_isr
        assert alter_isr.func is zk_client.update_leader_and_isr
        assert alter_isr.args == (server.session,)
        # a failed log dir takes its partitions offline, then the controller is told
        listeners = server.log_manager.log_dir_failure_listeners
        assert listeners == [
            server.replica_manager.handle_log_dir_failure,
            server._propagate_log_dir_failure,
        ]
    finally:
        await server.shutdown()


async def test_the_counters_are_handed_to_their_producers_and_to_the_admin_api(tmp_path):
    """One RequestStats and one TopicStats per broker: the dispatcher and the replica manager
    record into them, the admin API's /metrics reads the same ones."""
    server = await started(tmp_path, **{"admin.listener": "http://127.0.0.1:0"})
    try:
        assert server.dispatcher.stats is server.request_stats
        assert server.replica_manager.topic_stats is server.topic_stats
        assert server.admin_server.request_stats is server.request_stats
        assert server.admin_server.topic_stats is server.topic_stats
    finally:
        await server.shutdown()


async def test_a_listener_of_any_name_is_registered_as_plaintext(tmp_path):
    """Kafka's tooling decodes /brokers/ids/<id> with SecurityProtocol.forName: a listener named
    INTERNAL must be announced with protocol PLAINTEXT (and give the top-level host and port)."""
    port = free_port()
    server = await started(
        tmp_path,
        **{"listeners": f"INTERNAL://127.0.0.1:{port}", "inter.broker.listener.name": "INTERNAL"},
    )
    try:
        data, _ = await server.session.get_data("/brokers/ids/0")
        registration = json.loads(data)
        assert registration["listener_security_protocol_map"] == {"INTERNAL": "PLAINTEXT"}
        assert (registration["host"], registration["port"]) == ("127.0.0.1", port)
        assert registration["endpoints"] == [f"INTERNAL://127.0.0.1:{port}"]
    finally:
        await server.shutdown()


async def test_a_broker_whose_session_expires_registers_and_leads_again(tmp_path):
    """Kafka's session expiry handling: a new session, /brokers/ids/<id> again (with a new
    broker epoch), a new controller election, and the broker keeps serving its topics (it
    stayed unregistered for good, and the controller was gone)."""
    server = await started(tmp_path)
    try:
        old_epoch = server.services.extra["broker_epoch"]
        await expire_and_wait_until_registered_again(server)
        assert server.session.renewals == 1
        assert server.services.extra["broker_epoch"] > old_epoch
        controller, _ = await server.session.get_data("/controller")
        assert json.loads(controller)["brokerid"] == 0
    finally:
        await server.shutdown()


async def test_a_store_error_while_registering_again_is_retried(tmp_path):
    """The first store operation on the renewed session loses its connection: registering
    again is retried (the renewal task ended, leaving the broker unregistered for good)."""
    server = await started(tmp_path)
    try:
        renew = server.session.renew

        async def renew_then_lose_the_next_answer():
            new = await renew()
            server.store.fail_next(1)
            return new

        server.session.renew = renew_then_lose_the_next_answer
        await expire_and_wait_until_registered_again(server)
    finally:
        await server.shutdown()


@pytest.mark.parametrize("after_apply", [False, True])
async def test_a_lost_connection_while_registering_at_start_up_is_retried(
    tmp_path, monkeypatch, after_apply
):
    """A start-up whose registration loses its store connection (the create applied or not)
    retries instead of failing: the broker ends up registered on its own session."""
    start_roles = KafkaServer._start_roles
    lost = []

    async def start_roles_then_lose_the_registration(self):
        await start_roles(self)
        create = self.session.create

        async def create_losing_the_first_registration(path, *args, **kwargs):
            if path == "/brokers/ids/0" and not lost:
                lost.append(path)
                self.store.fail_next(1, after_apply=after_apply)
            return await create(path, *args, **kwargs)

        self.session.create = create_losing_the_first_registration

    monkeypatch.setattr(KafkaServer, "_start_roles", start_roles_then_lose_the_registration)
    server = await started(tmp_path)
    try:
        assert lost == ["/brokers/ids/0"]
        stat = await server.session.exists("/brokers/ids/0")
        assert stat is not None and stat.ephemeral_owner == server.session.session_id
        assert server.services.extra["broker_epoch"] == stat.czxid
    finally:
        await server.shutdown()


async def test_a_session_that_expired_before_the_first_registration_is_replaced(
    tmp_path, monkeypatch
):
    """Loading thousands of logs may outlive the session opened first: start-up opens a new
    one and registers on it instead of failing."""
    start_roles = KafkaServer._start_roles
    expired = []

    async def start_roles_then_expire(self):
        await start_roles(self)
        expired.append(self.session.session_id)
        self.store.expire_session(self.session.session_id)

    monkeypatch.setattr(KafkaServer, "_start_roles", start_roles_then_expire)
    server = await started(tmp_path)
    try:
        assert len(expired) == 1 and server.session.session_id != expired[0]
        stat = await server.session.exists("/brokers/ids/0")
        assert stat is not None and stat.ephemeral_owner == server.session.session_id
        assert server.controller.is_active
    finally:
        await server.shutdown()
