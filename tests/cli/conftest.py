"""The broker with an admin API that the commands over it (cluster, groups) are tested against:
the fixtures of tests/admin/."""

from tests.admin.conftest import admin, admin_broker  # noqa: F401 - fixtures, found by name
