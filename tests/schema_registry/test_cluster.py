"""The registry on a 3-broker cluster (kafkalite.testing.Cluster, in-process): a registration on
one broker is readable on the others at once (read-your-writes through `_schemas`), concurrent
registrations on different brokers never share an id, and registering goes on after the
`_schemas` leader is killed."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from kafkalite.testing import Cluster
from tests.schema_registry.support import call

pytestmark = pytest.mark.integration


def schema(n: int) -> str:
    return json.dumps({"type": "record", "name": f"R{n}", "fields": [{"name": "f", "type": "int"}]})


@pytest.fixture(scope="module")
def cluster():
    with Cluster(3) as c:
        yield c


def test_registered_on_one_broker_readable_on_another_at_once(cluster):
    urls = [cluster.schema_registry_url_of(b) for b in cluster.broker_ids]
    for n in range(5):
        writer, reader = urls[n % 3], urls[(n + 1) % 3]
        answer = call(writer, "POST", f"/subjects/s{n}/versions", {"schema": schema(n)})
        assert answer.status == 200, answer.body
        got = call(reader, "GET", f"/schemas/ids/{answer.body['id']}")
        assert (got.status, got.body["schema"]) == (200, schema(n))
        assert (
            call(reader, "GET", f"/subjects/s{n}/versions/latest").body["id"] == answer.body["id"]
        )


def test_concurrent_registrations_on_every_broker_never_share_an_id(cluster):
    urls = [cluster.schema_registry_url_of(b) for b in cluster.broker_ids]

    def register(n: int) -> tuple[str, int]:
        answer = call(
            urls[n % 3], "POST", f"/subjects/race{n}/versions", {"schema": schema(100 + n)}
        )
        assert answer.status == 200, answer.body
        return f"race{n}", answer.body["id"]

    with ThreadPoolExecutor(9) as pool:
        results = list(pool.map(register, range(30)))
    ids = [i for _, i in results]
    assert len(set(ids)) == len(ids)
    for subject, schema_id in results:
        for url in urls:
            assert call(url, "GET", f"/subjects/{subject}/versions/1").body["id"] == schema_id


def test_registering_goes_on_after_the_schemas_leader_is_killed(cluster):
    # (the topic is made on the registry's first use: this test may run alone)
    first = cluster.schema_registry_url_of(cluster.broker_ids[0])
    before = call(first, "POST", "/subjects/before-kill/versions", {"schema": schema(998)})
    assert before.status == 200, before.body
    leader = cluster.partitions("_schemas")[0].leader
    survivors = [b for b in cluster.broker_ids if b != leader]
    cluster.kill(leader)
    url = cluster.schema_registry_url_of(survivors[0])
    answer = call(url, "POST", "/subjects/after-kill/versions", {"schema": schema(999)})
    assert answer.status == 200, answer.body
    other = cluster.schema_registry_url_of(survivors[1])
    assert call(other, "GET", f"/schemas/ids/{answer.body['id']}").status == 200
    # the earlier registration survived the leader's failover
    assert call(other, "GET", "/subjects/before-kill/versions/1").body["id"] == before.body["id"]
