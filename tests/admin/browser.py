"""The console's browser tests' shared helpers: a headless Debian chromium (through chromedriver
and selenium; nothing is downloaded; one per test module: the `browser` fixture of conftest.py), polling with a deadline instead of
sleeps, and screenshots written to tests/output/console/ for review."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
except ImportError as e:  # pragma: no cover - the test extras are required
    raise RuntimeError("selenium is required: pip install -e '.[test]'") from e

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
SCREENSHOTS = Path(__file__).resolve().parents[1] / "output" / "console"
WAIT_S = 30.0


def start_browser(profile: Path):
    for path in (CHROMIUM, CHROMEDRIVER):
        if shutil.which(path) is None:
            raise RuntimeError(f"{path} is required: apt-get install chromium chromium-driver")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(WAIT_S)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return driver


def wait_until(predicate, what: str, timeout: float = WAIT_S):
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = predicate()
        except Exception:  # an element not there yet, a stale one: poll again
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)  # polling interval


def console_errors(driver) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def screenshot(driver, name: str, at: str | None = None) -> None:
    """Save the window as tests/output/console/`name`.png, scrolled to the element `at` (css)."""
    if at is not None:
        driver.execute_script(
            "document.querySelector(arguments[0]).scrollIntoView({block: 'start'})", at
        )
    driver.save_screenshot(str(SCREENSHOTS / f"{name}.png"))


def open_page(driver, url: str, route: str, page: str, shot: str | None = None) -> None:
    """Open `#route` of the console at `url` and wait until page `page` has loaded its data."""
    driver.get(f"{url}/#{route}")
    main = driver.find_element(By.ID, "main")
    wait_until(lambda: main.get_attribute("data-loaded") == page, f"page {route} to load")
    if shot:
        screenshot(driver, shot)


def text_of(driver, css: str) -> str:
    return driver.find_element(By.CSS_SELECTOR, css).text


def rows_of(driver, css: str, attribute: str) -> list[str]:
    """The `attribute` of every element matching `css`, read in one script (the console
    redraws its lists every few seconds)."""
    return driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map((e) => e.getAttribute(arguments[1]))",
        css,
        attribute,
    )


def table_text(driver, css: str) -> list[list[str]]:
    """The cells' text of the rows matching `css`, read in one script."""
    return driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])]"
        ".map((r) => [...r.children].map((c) => c.textContent.trim()))",
        css,
    )
