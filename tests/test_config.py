"""BrokerConfig: Kafka's names and defaults, the three sources and their precedence, errors."""

import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.config import BrokerConfig, ConfigError, Endpoint, read_properties

NO_ENV: dict[str, str] = {}


def test_defaults_run_a_single_node_out_of_the_box():
    config = BrokerConfig.load(environ=NO_ENV)
    assert config.broker_id == 0
    assert config.listener_endpoints == [Endpoint("PLAINTEXT", "127.0.0.1", 9092)]
    assert config.log_dir_list == ["./data"]
    assert config.zookeeper_connect is None
    # Kafka's own defaults
    assert config.num_partitions == 1
    assert config.auto_create_topics_enable is True
    assert config.log_segment_bytes == 1073741824
    assert config.message_max_bytes == 1048588
    assert config.socket_request_max_bytes == 104857600
    assert config.offsets_topic_num_partitions == 50
    assert config.replica_lag_time_max_ms == 30000
    assert config.log_retention_time_ms == 168 * 3600 * 1000
    assert config.unclean_leader_election_enable is False


def test_file_then_env_then_overrides(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text(
        "# a comment\n! another\nbroker.id=3\nnum.partitions = 4\n"
        "log.dirs: /a,/b\nlisteners=PLAINTEXT://0.0.0.0:9999\n"
        "zookeeper.connect=localhost:2181/\\\n  kafka\n"
    )
    config = BrokerConfig.load(
        path, ["num.partitions=7"], {"KAFKALITE_BROKER_ID": "5", "KAFKALITE_NUM_PARTITIONS": "6"}
    )
    assert config.broker_id == 5  # env beats file
    assert config.num_partitions == 7  # override beats env
    assert config.log_dir_list == ["/a", "/b"]
    assert config.zookeeper_connect == "localhost:2181/kafka"
    assert config.advertised_endpoints == [Endpoint("PLAINTEXT", "127.0.0.1", 9999)]


def test_brokers_in_threads_load_their_own_configs_at_once(tmp_path):
    """Loading reads no shared state: two brokers of one process (kafkalite.testing starts
    them in threads) load at the same time, each from its own file, environment and
    overrides, and each gets its own values."""
    barrier = threading.Barrier(2)

    def load(broker_id: int) -> BrokerConfig:
        path = tmp_path / f"server-{broker_id}.properties"
        path.write_text(f"broker.id={broker_id}\nlog.dirs=/file/{broker_id}\n")
        env = {"KAFKALITE_NUM_PARTITIONS": str(10 + broker_id)}
        barrier.wait()
        configs = [
            BrokerConfig.load(path, [f"min.insync.replicas={broker_id}"], env) for _ in range(50)
        ]
        assert all(c == configs[0] for c in configs)
        return configs[0]

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # the threads interleave inside a load, not only between loads
    try:
        with ThreadPoolExecutor(2) as pool:
            one, two = pool.map(load, (1, 2))
    finally:
        sys.setswitchinterval(interval)
    assert (one.broker_id, one.log_dir_list, one.num_partitions, one.min_insync_replicas) == (
        1,
        ["/file/1"],
        11,
        1,
    )
    assert (two.broker_id, two.log_dir_list, two.num_partitions, two.min_insync_replicas) == (
        2,
        ["/file/2"],
        12,
        2,
    )


def test_load_leaves_the_process_environment_alone(monkeypatch):
    monkeypatch.setenv("KAFKALITE_NUM_PARTITIONS", "3")
    assert BrokerConfig.load(environ={"KAFKALITE_NUM_PARTITIONS": "9"}).num_partitions == 9
    assert BrokerConfig.load().num_partitions == 3  # None: os.environ
    assert BrokerConfig.load(environ=NO_ENV).num_partitions == 1


def test_env_var_for_log_dirs():
    config = BrokerConfig.load(environ={"KAFKALITE_LOG_DIRS": "/x/y"})
    assert config.log_dir_list == ["/x/y"]


@pytest.mark.parametrize(
    "override, key",
    [
        ("num.partitions=0", "num.partitions"),
        ("broker.id=abc", "broker.id"),
        ("auto.create.topics.enable=maybe", "auto.create.topics.enable"),
        ("listeners=nonsense", "listeners"),
        ("log.segment.bytes=10", "log.segment.bytes"),
        ("log.cleanup.policy=shred", "log.cleanup.policy"),
        ("no.such.key=1", "no.such.key"),
        ("advertised.listeners=SSL://h:1", "advertised.listeners"),
        ("log.cleaner.backoff.ms=-1", "log.cleaner.backoff.ms"),
        ("log.cleaner.min.cleanable.ratio=1.5", "log.cleaner.min.cleanable.ratio"),
        ("log.cleaner.dedupe.buffer.size=lots", "log.cleaner.dedupe.buffer.size"),
        ("log.cleaner.threads=-1", "log.cleaner.threads"),
        ("log.cleaner.io.max.bytes.per.second=0", "log.cleaner.io.max.bytes.per.second"),
        ("replica.socket.timeout.ms=100", "replica.socket.timeout.ms"),  # < fetch wait 500
        ("listener.security.protocol.map=A:TLS", "listener.security.protocol.map"),
        ("log.segment.bytes=3000000000", "log.segment.bytes"),  # Kafka's INT
    ],
)
def test_a_wrong_value_or_unknown_key_names_the_key(override, key):
    with pytest.raises(ConfigError) as info:
        BrokerConfig.load(overrides=[override], environ=NO_ENV)
    assert info.value.key == key
    assert key in str(info.value)


def test_unknown_env_var_and_malformed_override():
    with pytest.raises(ConfigError, match="KAFKALITE_NOPE"):
        BrokerConfig.load(environ={"KAFKALITE_NOPE": "1"})
    with pytest.raises(ConfigError, match="key=value"):
        BrokerConfig.load(overrides=["num.partitions"], environ=NO_ENV)


def test_unknown_key_in_file(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("log.dirz=/tmp\n")
    with pytest.raises(ConfigError) as info:
        BrokerConfig.load(path, environ=NO_ENV)
    assert info.value.key == "log.dirz"


def test_properties_use_kafka_names_and_topic_defaults():
    config = BrokerConfig.load(overrides={"log.retention.ms": "1000"}, environ=NO_ENV)
    props = config.properties()
    assert props["log.retention.ms"] == "1000"
    assert props["auto.create.topics.enable"] == "true"
    defaults = config.topic_config_defaults()
    assert defaults["retention.ms"] == "1000"
    assert defaults["segment.bytes"] == "1073741824"


keys = st.from_regex(r"[a-z][a-z0-9]{0,8}(\.[a-z0-9]{1,8}){0,3}", fullmatch=True)
values = st.text(
    st.characters(min_codepoint=32, max_codepoint=126, exclude_characters="\\"), max_size=20
).map(str.strip)


@settings(max_examples=50, deadline=None)
@given(st.dictionaries(keys, values, max_size=8))
def test_properties_file_round_trip(tmp_path_factory, props):
    path = tmp_path_factory.mktemp("p") / "x.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    assert read_properties(path) == props


def test_topic_config_defaults_are_valid_topic_configs():
    from kafkalite.storage.config import LogConfig

    config = BrokerConfig.load(
        overrides={"log.retention.hours": "1", "log.segment.bytes": "1048576"}, environ=NO_ENV
    )
    log_config = LogConfig.from_properties(config.topic_config_defaults(), strict=True)
    assert log_config.retention_ms == 3_600_000
    assert log_config.segment_bytes == 1_048_576


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"log.retention.hours": "1", "log.segment.bytes": "1048576", "log.roll.ms": "7"},
        {"log.retention.minutes": "2", "log.retention.hours": "9", "log.flush.interval.ms": "5"},
        {
            "log.cleanup.policy": "compact, delete",
            "log.message.timestamp.type": "LogAppendTime",
            "log.preallocate": "true",
            "compression.type": "zstd",
            "unclean.leader.election.enable": "true",
            "min.insync.replicas": "2",
            "message.max.bytes": "2000",
            "log.segment.delete.delay.ms": "9",
            "log.cleaner.max.compaction.lag.ms": "99",
        },
    ],
)
def test_the_default_log_config_is_built_from_the_typed_config(overrides):
    """Built from BrokerConfig's fields, not re-parsed: the same as the topic-config defaults
    the broker announces (DescribeConfigs), read as topic configs."""
    from kafkalite.storage.config import LogConfig

    config = BrokerConfig.load(overrides=overrides, environ=NO_ENV)
    assert LogConfig.from_broker_config(config) == LogConfig.from_properties(
        config.topic_config_defaults(), strict=True
    )


def test_cleaner_settings_reach_the_cleaner_and_the_topic_defaults():
    from kafkalite.storage.cleaner import CleanerConfig
    from kafkalite.storage.config import LogConfig

    config = BrokerConfig.load(
        overrides={
            "log.cleaner.backoff.ms": "250",
            "log.cleaner.threads": "2",
            "log.cleaner.min.cleanable.ratio": "0.25",
            "log.cleaner.delete.retention.ms": "1000",
            "log.cleaner.min.compaction.lag.ms": "5",
        },
        environ=NO_ENV,
    )
    cleaner = CleanerConfig.from_broker_config(config)
    assert (cleaner.enable, cleaner.backoff_ms, cleaner.num_threads) == (True, 250, 2)
    assert cleaner.dedupe_buffer_size == 128 * 1024 * 1024
    log_config = LogConfig.from_broker_config(config)
    assert log_config.min_cleanable_dirty_ratio == 0.25
    assert log_config.delete_retention_ms == 1000
    assert log_config.min_compaction_lag_ms == 5
    assert log_config.max_compaction_lag_ms == 2**63 - 1
