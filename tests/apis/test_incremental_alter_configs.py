"""IncrementalAlterConfigs' operations on a topic's override set (pure function)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.apis.incremental_alter_configs import APPEND, DELETE, SET, SUBTRACT, apply_ops
from kafkalite.protocol.errors import ErrorCode

DEFAULTS = {"cleanup.policy": "delete", "retention.ms": "604800000"}


def test_set_delete_append_subtract():
    new, error, _ = apply_ops(
        {"retention.ms": "1"},
        DEFAULTS,
        [
            ("retention.bytes", SET, "10"),
            ("retention.ms", DELETE, None),
            ("cleanup.policy", APPEND, "compact"),
        ],
    )
    assert error == ErrorCode.NONE
    assert new == {"retention.bytes": "10", "cleanup.policy": "delete,compact"}
    new, _, _ = apply_ops(new, DEFAULTS, [("cleanup.policy", SUBTRACT, "delete")])
    assert new["cleanup.policy"] == "compact"


def test_append_to_a_scalar_and_unknown_operations_fail():
    assert apply_ops({}, DEFAULTS, [("retention.ms", APPEND, "1")])[1] == ErrorCode.INVALID_CONFIG
    assert apply_ops({}, DEFAULTS, [("retention.ms", 9, "1")])[1] == ErrorCode.INVALID_REQUEST
    assert apply_ops({}, DEFAULTS, [("retention.ms", SET, None)])[1] == ErrorCode.INVALID_CONFIG


names = st.sampled_from(["retention.ms", "retention.bytes", "segment.bytes"])
values = st.integers(0, 10**9).map(str)


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(names, values),
    st.lists(st.tuples(names, st.sampled_from([SET, DELETE]), values)),
)
def test_set_and_delete_behave_like_a_dict(current, ops):
    model = dict(current)
    for name, op, value in ops:
        if op == SET:
            model[name] = value
        else:
            model.pop(name, None)
    new, error, _ = apply_ops(current, DEFAULTS, ops)
    assert error == ErrorCode.NONE and new == model
    assert current == dict(current)  # the input is not modified


async def test_empty_and_unknown_topic_names_are_answered_without_touching_the_store(
    call, services
):
    """An empty name is Kafka's 'default topic resource' (INVALID_REQUEST); an unknown or
    unwritable name ('..') is UNKNOWN_TOPIC_OR_PARTITION; the store is never asked (it refused
    such paths with an error that closed the connection)."""
    import sys

    from kafkalite.broker.metadata_cache import MetadataCache
    from kafkalite.protocol.api import ApiKey, request_class
    from kafkalite.protocol.errors import ErrorCode

    services.metadata_cache = MetadataCache(0)
    services.store = None  # any store access would fail the request
    cls = request_class(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1)
    m = sys.modules[cls.__module__]
    request = cls(
        resources=tuple(
            m.AlterConfigsResource(
                resource_type=2,
                resource_name=name,
                configs=(m.AlterableConfig(name="retention.ms", config_operation=0, value="1"),),
            )
            for name in ("", "..")
        ),
        validate_only=False,
    )
    response = await call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, request)
    assert [(r.resource_name, r.error_code.value) for r in response.responses] == [
        ("", ErrorCode.INVALID_REQUEST.value),
        ("..", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.value),
    ]
