"""Shared pieces of the web console tests: the daemon fixtures of tests/server/conftest.py
(loaded under their own module name, so they never clash with another conftest), and a
headless Chromium driven by Selenium (skipped with a message when either is missing)."""
import importlib.util
import os
import pathlib
import shutil

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("sd_server_conftest", ROOT / "tests" / "server" / "conftest.py")
srv = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(srv)

CHROMIUM = os.environ.get("SD_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("SD_CHROMEDRIVER", "/usr/bin/chromedriver")


def browser(width=1280, height=900, phone=False):
    """A headless Chromium session (`phone`: a 390x844 touch screen at 3x); skips when chromium,
    chromedriver or selenium is absent."""
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium not installed (pip, tests/requirements.txt)")
    for p in (CHROMIUM, CHROMEDRIVER):
        if not (os.access(p, os.X_OK) or shutil.which(p)):
            pytest.skip(f"{p} absent: install Debian's chromium and chromium-driver (tools/deps.sh)")
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
              f"--window-size={width},{height}", "--force-color-profile=srgb", "--hide-scrollbars"):
        opts.add_argument(a)
    if phone:
        opts.add_experimental_option("mobileEmulation", {"deviceMetrics": {"width": 390, "height": 844, "pixelRatio": 3.0}})
    # Console messages (CSP violations included) are read back by the tests.
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    d.set_script_timeout(60)
    return d


def screenshot(driver, name):
    """Saves a PNG to $SD_WEB_SCREENSHOTS/<name>.png when that variable names a directory
    (docs/screenshots/ is refreshed this way); no-op otherwise."""
    out = os.environ.get("SD_WEB_SCREENSHOTS")
    if out:
        pathlib.Path(out).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(pathlib.Path(out) / f"{name}.png"))


metric = srv.metric  # one unlabelled sample of /metrics (tests/server/conftest.py)
