"""The console of a broker whose admin API asks for credentials (HTTP basic against the
broker's users, or its bearer token; tests/security/support.py secured_admin_config), in a real
headless chromium: the console's files load without credentials and show its own login page
(no browser dialog, no credentials in a URL), wrong credentials are refused, a login is kept
for the tab and sent as an Authorization header, a user without ACLs sees the API's 403s, and
logging out forgets it. Screenshots go to tests/output/console/."""

from __future__ import annotations

import pytest

from kafkalite.testing import Broker
from tests.admin.browser import console_errors, screenshot, wait_until
from tests.security.support import ADMIN_PASSWORD, ADMIN_TOKEN, ADMIN_USER, secured_admin_config

try:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select
except ImportError as e:  # pragma: no cover - the test extras are required
    raise RuntimeError("selenium is required: pip install -e '.[test]'") from e


@pytest.fixture(scope="module")
def broker():
    with Broker(secured_admin_config()) as b:
        b.create_topic("guarded")
        yield b


def loaded(browser) -> str | None:
    return browser.find_element(By.ID, "main").get_attribute("data-loaded")


def stored(browser) -> str | None:
    return browser.execute_script("return sessionStorage.getItem('kafkalite.authorization')")


def fresh(browser, url: str) -> None:
    """Forget the tab's login and open `url`: the page shown before (a login page, often) is
    marked not loaded first, so a wait for the next login page cannot take the old one's
    form, whose inputs the console is about to replace."""
    browser.execute_script(
        "sessionStorage.clear(); document.getElementById('main').dataset.loaded = ''"
    )
    browser.get(url)


def log_in(browser, *, user: str = "", password: str = "", token: str = "") -> None:
    wait_until(lambda: loaded(browser) == "login", "the login page")
    if token:
        Select(browser.find_element(By.ID, "login-kind")).select_by_value("bearer")
        browser.find_element(By.ID, "login-token").send_keys(token)
    else:
        browser.find_element(By.ID, "login-user").send_keys(user)
        browser.find_element(By.ID, "login-password").send_keys(password)
    browser.find_element(By.ID, "login-submit").click()


def test_login_with_a_user_then_log_out(browser, broker) -> None:
    browser.get(f"{broker.admin_url}/#/topics")
    wait_until(lambda: loaded(browser) == "login", "the login page instead of the topics")
    assert browser.current_url.endswith("#/login?next=%2Ftopics")
    screenshot(browser, "login")

    log_in(browser, user=ADMIN_USER, password="not-the-password")
    wait_until(
        lambda: "Wrong credentials" in browser.find_element(By.ID, "login-out").text,
        "the refusal",
    )
    assert stored(browser) is None
    screenshot(browser, "login-refused")

    for field in ("login-user", "login-password"):
        browser.find_element(By.ID, field).clear()
    log_in(browser, user=ADMIN_USER, password=ADMIN_PASSWORD)
    wait_until(lambda: loaded(browser) == "topics", "the topics page after the login")
    wait_until(
        lambda: browser.find_elements(By.CSS_SELECTOR, "#topics tr[data-topic=guarded]"),
        "the topic list, read with the credentials",
    )
    assert stored(browser).startswith("Basic ")
    assert ADMIN_PASSWORD not in browser.current_url and "Basic" not in browser.current_url
    screenshot(browser, "logged-in")
    assert console_errors(browser) == [] or all(
        "401" in e for e in console_errors(browser)
    )  # the first, refused requests

    # a reload keeps the login (this tab's sessionStorage)
    browser.get(f"{broker.admin_url}/#/groups")
    wait_until(lambda: loaded(browser) == "groups", "the groups page")

    browser.find_element(By.ID, "logout").click()
    wait_until(lambda: loaded(browser) == "login", "the login page after logging out")
    assert stored(browser) is None
    browser.get(f"{broker.admin_url}/#/")
    wait_until(lambda: loaded(browser) == "login", "the login page again")


def test_login_with_the_bearer_token_and_act(browser, broker) -> None:
    fresh(browser, f"{broker.admin_url}/#/actions")
    log_in(browser, token=ADMIN_TOKEN)
    wait_until(lambda: loaded(browser) == "actions", "the actions page")
    # a state-changing request from the page: JSON, same origin, the token in its header
    form = browser.find_element(By.ID, "create-topic")
    form.find_element(By.NAME, "name").send_keys("made-after-login")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_until(lambda: "done" in form.text, "the topic to be created")
    assert "made-after-login" in broker.server.metadata_cache.partition_states


def test_a_user_without_acls_sees_the_apis_refusals(browser, broker) -> None:
    fresh(browser, f"{broker.admin_url}/#/security")
    log_in(browser, user="alice", password="alice-secret")  # a user with no ACL at all
    wait_until(lambda: stored(browser), "the login")
    browser.get(f"{broker.admin_url}/#/security")
    wait_until(
        lambda: (
            "User:alice may not DESCRIBE CLUSTER" in browser.find_element(By.ID, "acl-list").text
        ),
        "the API's 403 shown",
    )
    assert "forbidden" in browser.find_element(By.ID, "user-list").text
    assert "forbidden" in browser.find_element(By.ID, "quota-list").text
    screenshot(browser, "login-forbidden")


def test_metrics_are_read_with_the_consoles_credentials(browser, broker) -> None:
    # the header's metrics link stays inside the console, which fetches /metrics with the
    # login's Authorization header: a plain link would get the browser's own dialog
    fresh(browser, f"{broker.admin_url}/#/metrics")
    log_in(browser, token=ADMIN_TOKEN)
    wait_until(lambda: loaded(browser) == "metrics", "the metrics page after the login")
    wait_until(
        lambda: "kafkalite_" in browser.find_element(By.ID, "metrics-text").text,
        "the metrics, read with the credentials",
    )
    assert (
        browser.execute_script(
            "return [...document.querySelectorAll('header a')].filter("
            "(a) => a.getAttribute('href') === '/metrics').length"
        )
        == 0
    )
    screenshot(browser, "metrics")
