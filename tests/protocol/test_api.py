import pytest

from kafkalite.protocol.api import (
    ADVERTISED_VERSIONS,
    CODEC_VERSIONS,
    DEFAULT_ENABLED_KEYS,
    GROUP_KEYS,
    SUPPORTED_VERSIONS,
    ApiKey,
    is_flexible,
    request_class,
    request_header_version,
    response_class,
    response_header_version,
    supported_versions,
)
from kafkalite.protocol.errors import UnsupportedVersionError


def test_api_key_numbers_match_kafka():
    assert ApiKey.PRODUCE == 0
    assert ApiKey.FETCH == 1
    assert ApiKey.LIST_OFFSETS == 2
    assert ApiKey.METADATA == 3
    assert ApiKey.LEADER_AND_ISR == 4
    assert ApiKey.STOP_REPLICA == 5
    assert ApiKey.UPDATE_METADATA == 6
    assert ApiKey.CONTROLLED_SHUTDOWN == 7
    assert ApiKey.OFFSET_COMMIT == 8
    assert ApiKey.API_VERSIONS == 18
    assert ApiKey.CREATE_TOPICS == 19
    assert ApiKey.OFFSET_DELETE == 47


def test_every_advertised_version_has_request_and_response_classes():
    for key, (low, high) in ADVERTISED_VERSIONS.items():
        codec_low, codec_high = CODEC_VERSIONS[key]
        assert codec_low <= low <= high <= codec_high, key
        for version in range(low, high + 1):
            req, resp = request_class(key, version), response_class(key, version)
            assert req.__api_key__ == key and req.__version__ == version
            assert resp.__api_key__ == key and resp.__version__ == version
            assert req.__flexible__ == is_flexible(key, version), (key, version)


def test_default_table_leaves_groups_out_and_always_has_api_versions():
    assert not GROUP_KEYS & SUPPORTED_VERSIONS.keys()
    assert SUPPORTED_VERSIONS.keys() == DEFAULT_ENABLED_KEYS | {ApiKey.API_VERSIONS}
    only = supported_versions([ApiKey.PRODUCE])
    assert only == {ApiKey.PRODUCE: (3, 11), ApiKey.API_VERSIONS: (0, 4)}
    with_groups = supported_versions(DEFAULT_ENABLED_KEYS | GROUP_KEYS)
    assert with_groups[ApiKey.JOIN_GROUP] == (0, 9)


def test_client_compatibility_floor():
    # aiokafka 0.14's newest versions must be inside what we advertise, else it cannot talk.
    aiokafka_max = {0: 7, 1: 11, 2: 3, 3: 5, 8: 3, 9: 3, 10: 1, 11: 5, 12: 1, 13: 1, 14: 3, 19: 3}
    table = supported_versions(DEFAULT_ENABLED_KEYS | GROUP_KEYS)
    for key, version in aiokafka_max.items():
        low, high = table[ApiKey(key)]
        assert low <= version, ApiKey(key).name


def test_overrides_narrow_within_codec():
    table = supported_versions([ApiKey.FETCH], overrides={ApiKey.FETCH: (4, 10)})
    assert table[ApiKey.FETCH] == (4, 10)
    with pytest.raises(ValueError):
        supported_versions([ApiKey.FETCH], overrides={ApiKey.FETCH: (0, 10)})
    with pytest.raises(ValueError):
        supported_versions([ApiKey.DESCRIBE_DELEGATION_TOKEN])


def test_header_versions():
    assert request_header_version(ApiKey.METADATA, 8) == 1
    assert request_header_version(ApiKey.METADATA, 9) == 2
    assert response_header_version(ApiKey.METADATA, 9) == 1
    assert response_header_version(ApiKey.API_VERSIONS, 3) == 0
    assert request_header_version(ApiKey.API_VERSIONS, 3) == 2
    assert request_header_version(ApiKey.API_VERSIONS, 9) == 2  # future versions stay flexible
    assert request_header_version(ApiKey.LEADER_AND_ISR, 4) == 2
    assert request_header_version(ApiKey.OFFSET_DELETE, 0) == 1


def test_unknown_versions_raise():
    with pytest.raises(UnsupportedVersionError):
        request_class(ApiKey.PRODUCE, 2)
    with pytest.raises(UnsupportedVersionError):
        response_class(ApiKey.LEADER_AND_ISR, 3)
    with pytest.raises(UnsupportedVersionError):
        request_class(999, 0)
