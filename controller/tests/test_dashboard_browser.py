"""The dashboard in a real browser: Debian's chromium, driven by Playwright, against the real
controller and terrapin-switch running p4src on veths (netlab), everything on this machine.

As in test_monitor_integration.py, s3's port towards s2 is modelled wrong on purpose (the
controller believes 1 Gbit/s, the switch paces 10 Mbit/s), so a channel from h2 to h1 has an
understated bound at its first hop and its first burst must turn the page red. Screenshots go
to build/results/ (docs/operations.md shows them)."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from netlab import REPO, REST_PORT, TOKEN, VIEWER_TOKEN, Lab, missing_prerequisites

pytestmark = [pytest.mark.integration, pytest.mark.browser]

CHROMIUM = Path("/usr/bin/chromium")
RESULTS = REPO / "build" / "results"
URL = f"http://127.0.0.1:{REST_PORT}/"
INTERVAL = 0.5
# Headless, and nothing that would reach out of the machine (updates, sync, first-run pages).
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

skip_reason = missing_prerequisites()
if skip_reason is None and not CHROMIUM.exists():
    skip_reason = "Debian's chromium is missing (make setup installs it)"
if skip_reason is None:
    try:
        from playwright.sync_api import BrowserContext, ConsoleMessage, Page, Route, expect, sync_playwright
    except ImportError:
        skip_reason = "playwright is missing (make setup installs the controller's dev extras)"
if skip_reason:
    pytest.skip(skip_reason, allow_module_level=True)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    network = Lab(
        Path(tmp_path_factory.mktemp("tdash")),
        believed_rate_bps={(3, 1): 1_000_000_000},
        monitor={"interval_s": INTERVAL},
    )
    try:
        network.up()
        network.start_controller()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:  # the monitor's first read of a switch is a baseline
            state = network.rest("GET", "/monitor")[1]
            if state["polls"] >= 3 and all(not s["error"] for s in state["switches"].values()):
                break
            time.sleep(0.1)
        yield network
    finally:
        network.close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserContext]:
    profile = tmp_path_factory.mktemp("chromium-profile")  # a fresh user-data-dir
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(profile),
            executable_path=str(CHROMIUM),
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1400, "height": 1000},
        )
        try:
            yield context
        finally:
            context.close()
    shutil.rmtree(profile, ignore_errors=True)


class Watched:
    """A page with every console error and every request that left the controller recorded."""

    def __init__(self, context: BrowserContext) -> None:
        self.errors: list[str] = []
        self.foreign: list[str] = []
        self.page: Page = context.new_page()
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda exc: self.errors.append(f"pageerror: {exc}"))
        self.page.route("**/*", self._route)

    def _console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.errors.append(message.text)

    def _route(self, route: Route) -> None:
        url = urlparse(route.request.url)
        if url.scheme == "data" or (url.hostname, url.port) == ("127.0.0.1", REST_PORT):
            route.continue_()
        else:  # the page must need nothing from anywhere else (no CDN, no fonts)
            self.foreign.append(route.request.url)
            route.abort()

    def open(self) -> Page:
        self.page.goto(URL)
        expect(self.page.locator("#verdict")).not_to_have_attribute("data-verdict", "unknown", timeout=10_000)
        return self.page

    def clean(self, *expected: str) -> None:
        """No console error but the `expected` ones (chromium logs every HTTP error reply of
        a fetch as a console error, so a 409 the page shows is one)."""
        unexpected = [e for e in self.errors if not any(x in e for x in expected)]
        assert unexpected == [], self.errors
        for x in expected:
            assert any(x in e for e in self.errors), (x, self.errors)
        assert self.foreign == [], self.foreign

    def close(self) -> None:
        self.page.close()


@pytest.fixture
def watched(browser: BrowserContext) -> Iterator[Watched]:
    w = Watched(browser)
    try:
        yield w
    finally:
        w.close()


def shot(page: Page, name: str) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(RESULTS / f"dashboard-{name}.png"), full_page=True)


def enter_token(page: Page) -> None:
    page.fill("#token-input", TOKEN)
    page.click("#token-save")
    expect(page.locator("#token-state")).to_have_text("operator: changes enabled")


def reserve(page: Page, **fields: Any) -> None:
    form = page.locator("#reservation-form")
    for name, value in fields.items():
        field = form.locator(f"[name={name}]")
        if field.evaluate("e => e.tagName") == "SELECT":
            field.select_option(str(value))
        else:
            field.fill(str(value))
    page.click("#reserve")


def test_the_page_loads_clean_and_shows_the_topology(lab: Lab, watched: Watched) -> None:
    page = watched.open()
    for switch in ("s1", "s2", "s3"):
        expect(page.locator(f'#topology [data-switch="{switch}"]')).to_be_visible()
    for host in ("h1", "h2"):
        expect(page.locator(f'#topology [data-host="{host}"]')).to_be_visible()
    expect(page.locator("#topology line")).to_have_count(4)  # two trunks, two host links
    for port in ("s1:1", "s1:2", "s2:1", "s2:2", "s3:1", "s3:2"):
        expect(page.locator(f'#ports [data-port="{port}"]')).to_be_visible()
    expect(page.locator("#verdict")).to_have_attribute("data-verdict", "ok")
    expect(page.locator("#stream-state")).to_have_text("live")
    shot(page, "empty")
    watched.clean()


def test_a_reservation_made_in_the_form_shows_in_the_table_and_the_bar(lab: Lab, watched: Watched) -> None:
    page = watched.open()
    reserve(page, rate=125_000)  # without the token: refused on the page, nothing sent
    expect(page.locator("#form-result")).to_contain_text("Enter the operator's token")
    enter_token(page)
    page.reload()  # entered once: the session keeps it
    expect(page.locator("#token-state")).to_have_text("operator: changes enabled")
    reserve(page, src="10.0.1.2", dst="10.0.2.2", src_port=5004, dst_port=5004, priority=6, rate=125_000)
    expect(page.locator("#form-result")).to_contain_text("Admitted as reservation")
    (created,) = lab.rest("GET", "/reservations")[1]
    row = page.locator(f'#reservations tr[data-id="{created["id"]}"]')
    expect(row).to_contain_text("10.0.1.2 → 10.0.2.2")
    expect(row).to_contain_text("s1:2 → s2:2 → s3:2")
    for port in ("s1:2", "s2:2", "s3:2"):
        card = page.locator(f'#ports [data-port="{port}"]')
        expect(card).to_have_attribute("data-allocated", "125000")
        expect(card.locator('.bar [data-level="6"]')).to_have_count(1)
        expect(card.locator(".queue")).to_have_count(1)
    expect(page.locator('#ports [data-port="s3:1"]')).to_have_attribute("data-allocated", "0")
    page.fill("#reservation-filter", "10.0.9.9")
    expect(page.locator("#reservations tbody tr")).to_have_count(0)
    page.fill("#reservation-filter", "s2:2")
    expect(page.locator("#reservations tbody tr")).to_have_count(1)
    page.fill("#reservation-filter", "")
    shot(page, "reserved")
    watched.clean()


def test_the_viewers_token_shows_its_role_and_changes_nothing(lab: Lab, watched: Watched) -> None:
    page = watched.open()
    before = lab.rest("GET", "/reservations")[1]
    page.fill("#token-input", VIEWER_TOKEN)
    page.click("#token-save")
    expect(page.locator("#token-state")).to_have_text("viewer: read-only (changes need the operator's token)")
    reserve(page, src="10.0.1.2", dst="10.0.2.2", src_port=7000, dst_port=7000, rate=125_000)
    expect(page.locator("#form-result")).to_contain_text("The token entered is the viewer's")
    assert lab.rest("GET", "/reservations")[1] == before  # refused on the page, nothing sent
    page.fill("#token-input", "nobody-s-token")
    page.click("#token-save")
    expect(page.locator("#token-state")).to_have_text("token refused: read-only")
    page.click("#token-forget")
    expect(page.locator("#token-state")).to_have_text("read-only")
    watched.clean("status of 401 (Unauthorized)")


def test_a_denied_reservation_shows_its_reason(lab: Lab, watched: Watched) -> None:
    page = watched.open()
    enter_token(page)
    # 10 Mbit/s ports, 90% reservable: 1,125,000 B/s, of which 125,000 are taken
    reserve(page, src="10.0.1.2", dst="10.0.2.2", src_port=6000, dst_port=6000, rate=1_100_000)
    result = page.locator("#form-result")
    expect(result).to_have_class("message error")
    expect(result).to_contain_text("Denied")
    expect(result).to_contain_text("rate_buffer.rate at s1:2 level 6")
    expect(result.locator("li").first).to_contain_text("by 100,001 bytes/s")
    shot(page, "denied")
    watched.clean("status of 409 (Conflict)")


def test_deleting_asks_first_and_frees_the_capacity(lab: Lab, watched: Watched) -> None:
    page = watched.open()
    enter_token(page)
    (created,) = lab.rest("GET", "/reservations")[1]
    button = page.locator(f'#reservations button[data-id="{created["id"]}"]')
    page.once("dialog", lambda dialog: dialog.dismiss())
    button.click()
    expect(page.locator('#ports [data-port="s1:2"]')).to_have_attribute("data-allocated", "125000")
    assert len(lab.rest("GET", "/reservations")[1]) == 1
    prompts: list[str] = []

    def accept(dialog: Any) -> None:
        prompts.append(dialog.message)
        dialog.accept()

    page.once("dialog", accept)
    button.click()
    expect(page.locator("#reservation-message")).to_contain_text(f"Reservation {created['id']} deleted")
    assert prompts and f"Delete reservation {created['id']}" in prompts[0]
    expect(page.locator("#reservations tbody tr")).to_have_count(0)
    for port in ("s1:2", "s2:2", "s3:2"):
        expect(page.locator(f'#ports [data-port="{port}"]')).to_have_attribute("data-allocated", "0")
    assert lab.rest("GET", "/reservations")[1] == []
    watched.clean()


def test_an_induced_violation_raises_the_alarm(lab: Lab, watched: Watched) -> None:
    page = watched.open()
    status, res = lab.rest(
        "POST",
        "/reservations",
        {
            "src": "10.0.2.2",
            "dst": "10.0.1.2",
            "protocol": "udp",
            "src_port": 5300,
            "dst_port": 5300,
            "priority": 5,
            "rate": 100_000,
            "burst": 30_000,
            "max_packet": 1500,
        },
    )
    assert status == 201, res
    expect(page.locator('#ports [data-port="s3:1"] .queue')).to_have_count(1)
    for _ in range(6):  # a few bursts, so the alarm stays up long enough to be seen
        lab.send_udp("h2", "10.0.1.2", 5300, 5300, count=20)
        time.sleep(INTERVAL / 2)
        if page.locator("#alarm").is_visible():
            break
    expect(page.locator("#alarm")).to_be_visible(timeout=2 * INTERVAL * 1000 + 1000)
    expect(page.locator("#alarm")).to_contain_text("s3:1 level 5")
    expect(page.locator("#verdict")).to_have_attribute("data-verdict", "network")
    expect(page.locator('#ports [data-port="s3:1"]')).to_have_class("port alarm")
    expect(page.locator('#topology [data-switch="s3"]')).to_have_class("switch alarm")
    event = page.locator('#events li.network[data-kind="queue_delay"]').first
    expect(event).to_contain_text("waited longer than the admitted bound")
    shot(page, "alarm")
    # the bursts are over: the next poll clears it, and the history keeps it
    expect(page.locator("#verdict")).to_have_attribute("data-verdict", "ok", timeout=10_000)
    expect(page.locator("#alarm")).to_be_hidden()
    expect(event).to_be_visible()
    expect(page.locator('#events li.network[data-kind="queue_delay"].active')).to_have_count(0)
    assert lab.rest("DELETE", f"/reservations/{res['id']}")[0] == 204
    watched.clean()
