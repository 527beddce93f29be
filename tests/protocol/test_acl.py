"""ACL operation bit sets (KIP-430): Kafka's Utils.to32BitField / from32BitField."""

from hypothesis import given
from hypothesis import strategies as st

from kafkalite.protocol.acl import (
    AclOperation,
    ResourceType,
    authorized_operations,
    from_32bit_field,
    to_32bit_field,
)


@given(st.sets(st.sampled_from(list(AclOperation))))
def test_bit_field_round_trip(operations):
    field = to_32bit_field(operations)
    assert -(2**31) <= field < 2**31
    assert from_32bit_field(field) == operations


def test_kafka_values_without_authorizer():
    # What a Kafka 3.9 broker without an authorizer answers (bits of AclOperation codes).
    assert (
        authorized_operations(ResourceType.TOPIC) == 3576
    )  # 0b1101_1111_1000: READ..ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS
    assert authorized_operations(ResourceType.CLUSTER) == 8096  # 0b1_1111_1010_0000
    assert authorized_operations(ResourceType.GROUP) == (1 << 3) | (1 << 6) | (1 << 8)
