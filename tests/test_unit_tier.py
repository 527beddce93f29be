"""The unit tier's lighter property tests (tests/conftest.py, ``UNIT_TIER_EXAMPLES``): each
``@given`` test and each stateful test case draws a quarter of its examples there, at least 10
or all of them when it asks for fewer, once however many items share the test, with its other
settings kept."""

from types import SimpleNamespace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule

from tests.conftest import _fewer_examples


def test_the_unit_tier_draws_a_quarter_of_each_property_tests_examples():
    @settings(max_examples=300, suppress_health_check=[HealthCheck.filter_too_much])
    @given(st.integers())
    def many(value):
        assert isinstance(value, int)

    @settings(max_examples=5)
    @given(st.integers())
    def few(value):
        assert isinstance(value, int)

    @settings(max_examples=32)
    @given(st.integers())
    def some(value):
        assert isinstance(value, int)

    class Machine(RuleBasedStateMachine):
        @rule()
        def step(self):
            pass

    case = Machine.TestCase
    case.settings = settings(max_examples=90, stateful_step_count=7)
    items = [
        SimpleNamespace(obj=many, cls=None),
        SimpleNamespace(obj=many, cls=None),  # a parametrised test: one function, two items
        SimpleNamespace(obj=few, cls=None),
        SimpleNamespace(obj=some, cls=None),
        SimpleNamespace(obj=case("runTest").runTest, cls=case),
        SimpleNamespace(obj=case("runTest").runTest, cls=case),
        SimpleNamespace(obj=lambda: None, cls=None),  # not a property test: left alone
    ]
    _fewer_examples(items)
    lighter = many._hypothesis_internal_use_settings
    assert lighter.max_examples == 75
    assert lighter.suppress_health_check == (HealthCheck.filter_too_much,)
    assert few._hypothesis_internal_use_settings.max_examples == 5
    assert some._hypothesis_internal_use_settings.max_examples == 10
    assert (case.settings.max_examples, case.settings.stateful_step_count) == (22, 7)
    many()  # still runs, with its lighter settings
