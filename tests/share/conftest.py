"""The handler-calling fixtures of tests/apis (a dispatcher over BrokerServices, no broker)."""

from tests.apis.conftest import call, services  # noqa: F401 - fixtures, used by name
