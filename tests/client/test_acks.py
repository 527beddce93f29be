"""``acks`` as Kafka's clients take it (client/acks.py), through the client's produce."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalite.client.acks import normalize_acks
from kafkalite.testing import Broker


@pytest.mark.parametrize(
    "given_acks, expected",
    [
        ("all", -1),
        ("ALL", -1),
        ("-1", -1),
        ("0", 0),
        ("1", 1),
        (" 1 ", 1),
        (-1, -1),
        (0, 0),
        (1, 1),
    ],
)
def test_kafkas_spellings(given_acks, expected):
    assert normalize_acks(given_acks) == expected


@given(st.integers(-(2**15), 2**15 - 1))
def test_an_int16_passes_as_it_is_for_the_broker_to_judge(acks):
    assert normalize_acks(acks) == acks


@pytest.mark.parametrize("bad", ["most", "2x", "", None, True, 1.0, 2**15, -(2**15) - 1])
def test_anything_else_is_a_value_error_naming_it(bad):
    with pytest.raises(ValueError, match="acks"):
        normalize_acks(bad)


def test_the_testing_helpers_produce_with_acks_all():
    """``produce(..., acks="all")`` died with struct.error in the encoder."""
    with Broker() as broker:
        topic = broker.create_topic("acks-all", partitions=1)
        assert broker.produce(topic, [b"a"], acks="all") == 0
        assert broker.produce(topic, [b"b"], acks="1") == 1
        assert broker.produce(topic, [b"c"], acks=-1) == 2
        assert [m.value for m in broker.consume_all(topic)] == [b"a", b"b", b"c"]
