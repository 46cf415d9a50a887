"""Drive Debian's Chromium through chromedriver (Selenium) for
tests/it/dashboard.rs: one JSON command per line on stdin, one JSON answer per
line on stdout. The Rust test decides what to do and checks the broker
over D-Bus; this only works the page as a user would.

    browser.py AXE_JS

Commands ({"op": ...}):
    get URL                   navigate and wait for the page; answers its
                              title and the URL it ended at (redirects)
    url                       the URL the tab shows now
    text                      the page's visible text
    mark / marked             set a marker on the window / is it still there
                              (a reload would drop it)
    select APP CATEGORY VALUE choose VALUE in a grid cell (fires `change`)
    click LABEL               click the button whose aria-label is LABEL
    wait_text TEXT TIMEOUT    wait, without reloading, until TEXT shows
    screenshot PATH [FULL]    the viewport, or (FULL) the whole page
    emulate SCHEME WIDTH      prefers-color-scheme light or dark, and a
                              viewport WIDTH px wide (0: the window's)
    js SCRIPT                 run SCRIPT (a function body) in the page;
                              answers what it returns, as "value"
    cookies                   the session's cookies (HttpOnly too)
    axe [ALL]                 serious and critical axe-core violations
                              (ALL: every violation, whatever its impact)
    requests                  every URL the pages requested (DevTools log)
    paint URL                 navigate; the page's first contentful paint
                              and DOMContentLoaded (ms from navigation
                              start) and how many grid cells it shows
                              (benches/dashboard.rs)
    quit
"""

import json
import os
import sys
import tempfile
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select


def browser():
    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for a in [
        "--headless=new",
        "--disable-gpu",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-default-apps",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
        f"--user-data-dir={tempfile.mkdtemp(prefix='contextd-chromium-')}",
    ]:
        opts.add_argument(a)
    if os.geteuid() == 0:
        # Chromium's sandbox refuses root; the tests run as root in CI.
        opts.add_argument("--no-sandbox")
    opts.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)


def main():
    axe_js = open(sys.argv[1]).read()
    d = browser()
    d.set_script_timeout(30)
    # What Chromium loads for its own first tab (chrome:// pages) is not
    # the dashboard's doing: start from a blank page and forget it.
    d.get("about:blank")
    d.get_log("performance")
    requested = []

    def drain_log():
        for entry in d.get_log("performance"):
            msg = json.loads(entry["message"])["message"]
            if msg.get("method") == "Network.requestWillBeSent":
                requested.append(msg["params"]["request"]["url"])

    for line in sys.stdin:
        c = json.loads(line)
        op = c["op"]
        out = {"ok": True}
        try:
            if op == "get":
                d.get(c["url"])
                out["title"] = d.title
                out["url"] = d.current_url
            elif op == "url":
                out["url"] = d.current_url
            elif op == "text":
                out["text"] = d.find_element(By.TAG_NAME, "body").text
            elif op == "mark":
                d.execute_script("window.__contextd_mark = 1")
            elif op == "marked":
                out["marked"] = d.execute_script("return window.__contextd_mark === 1")
            elif op == "select":
                css = 'select[data-cell][data-app="%s"][data-category="%s"]' % (c["app"], c["category"])
                el = d.find_element(By.CSS_SELECTOR, css)
                el.click()
                Select(el).select_by_value(c["value"])
            elif op == "click":
                # The page re-reads itself when the broker says something
                # changed: a button found just before may be replaced
                # before the click lands. Find it again then.
                for attempt in range(20):
                    try:
                        el = d.find_element(By.CSS_SELECTOR, 'button[aria-label="%s"]' % c["label"])
                        el.click()
                        break
                    except StaleElementReferenceException:
                        if attempt == 19:
                            raise
                        time.sleep(0.1)
            elif op == "wait_text":
                deadline = time.monotonic() + c["timeout"]
                found = False
                while time.monotonic() < deadline:
                    try:
                        if c["text"] in d.find_element(By.TAG_NAME, "body").text:
                            found = True
                            break
                    except Exception:  # noqa: BLE001 - a page being replaced
                        pass
                    time.sleep(0.1)
                out["found"] = found
            elif op == "screenshot":
                if c.get("full"):
                    import base64

                    m = d.execute_cdp_cmd("Page.getLayoutMetrics", {})
                    size = m.get("cssContentSize") or m["contentSize"]
                    shot = d.execute_cdp_cmd(
                        "Page.captureScreenshot",
                        {
                            "format": "png",
                            "captureBeyondViewport": True,
                            "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1},
                        },
                    )
                    with open(c["path"], "wb") as f:
                        f.write(base64.b64decode(shot["data"]))
                else:
                    d.save_screenshot(c["path"])
            elif op == "emulate":
                d.execute_cdp_cmd(
                    "Emulation.setEmulatedMedia",
                    {"features": [{"name": "prefers-color-scheme", "value": c["scheme"]}]},
                )
                if c.get("width"):
                    d.execute_cdp_cmd(
                        "Emulation.setDeviceMetricsOverride",
                        {"width": c["width"], "height": 900, "deviceScaleFactor": 1, "mobile": False},
                    )
                else:
                    d.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
            elif op == "js":
                out["value"] = d.execute_script(c["script"])
            elif op == "cookies":
                out["cookies"] = d.get_cookies()
            elif op == "axe":
                d.execute_script(axe_js)
                res = d.execute_async_script(
                    "const done = arguments[arguments.length - 1];"
                    "axe.run(document).then(r => done(r.violations.map(v => ({id: v.id, impact: v.impact,"
                    " help: v.help, nodes: v.nodes.map(n => n.target.join(' ')).slice(0, 5)}))),"
                    " e => done([{id: 'axe-failed', impact: 'critical', help: String(e), nodes: []}]));"
                )
                out["violations"] = [v for v in res if c.get("all") or v["impact"] in ("serious", "critical")]
            elif op == "requests":
                drain_log()
                out["urls"] = requested
            elif op == "paint":
                d.get(c["url"])
                out["fcp"] = d.execute_script(
                    "const p = performance.getEntriesByName('first-contentful-paint')[0];"
                    " return p ? p.startTime : null"
                )
                out["dcl"] = d.execute_script(
                    "return performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd"
                )
                out["cells"] = d.execute_script("return document.querySelectorAll('select[data-cell]').length")
            elif op == "quit":
                break
            else:
                out = {"ok": False, "error": f"unknown op {op}"}
        except Exception as e:  # noqa: BLE001 - the test says what failed
            out = {"ok": False, "error": repr(e)}
        if op != "requests":
            drain_log()
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()
    d.quit()


if __name__ == "__main__":
    main()
