"""Neo4j Browser on the test session's own server, with the HTG's guide, style and saved
queries (docker/browser, served at /htam/ by the launcher's extension).

The Browser test drives a real headless Chromium (Debian's `chromium` package) through
Playwright: log in, the guide plays on connect, no usage-data prompt, apply the style
from the guide, run a guide query, and check the HTG is drawn in the style. Its
screenshot is kept in the test's folder and under test-artifacts/browser/.
"""

from __future__ import annotations

import html
import io
import os
import re
import shutil
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Locator, Page, sync_playwright

from htam_graph import analytics
from htam_graph.vocab import Verdict
from tests.conftest import HTTP_VAR, IN_CI

pytestmark = [pytest.mark.neo4j, pytest.mark.nvcc]  # the memory comes from real runs (conftest.py)

REPO = Path(__file__).parents[2]
ARTIFACTS = REPO / "test-artifacts" / "browser"
# Headless on a machine without a GPU or a network beyond the local server.
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
TIMEOUT_MS = 90_000  # two busy cores: the Browser's first load and connect take a while
GLOBAL_COLOUR = "#4C8EDA"  # node.Global in docker/browser/htam.grass
TASK_COLOUR, RUN_COLOUR, STEP_COLOUR = "#F79767", "#C990C0", "#FFE081"  # node.Task, node.Run, node.Step


def _unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture
def base_url() -> str:
    """Where the test server serves HTTP (localhost: the name the Browser allows guides from)."""
    port = os.environ.get(HTTP_VAR)
    if not port:
        _unavailable(f"the test server's HTTP port is unknown: set {HTTP_VAR} with HTAM_TEST_NEO4J_URI")
    return f"http://localhost:{port}"


@pytest.fixture
def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        _unavailable("no Chromium: install Debian's package (`apt-get install -y chromium`)")
    return str(found)


def fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.read()


def test_the_served_guide_style_and_favourites(filled_neo4j, base_url, _neo4j_session_store):
    """What the Browser loads, checked without it: the guide holds every saved query, each
    favourite runs on the filled memory, and the success rates agree with the analytics."""
    guide = fetch(f"{base_url}/htam/guide.html").decode()
    assert "{{" not in guide and f":style {base_url}/htam/htam.grass" in guide
    assert "node.Global" in fetch(f"{base_url}/htam/htam.grass").decode()
    archive = zipfile.ZipFile(io.BytesIO(fetch(f"{base_url}/htam/favorites.zip")))
    favourites = {Path(name).stem: archive.read(name).decode() for name in archive.namelist()}
    assert all(name.startswith("HTAM/") for name in archive.namelist()) and len(favourites) >= 6
    driver, database = _neo4j_session_store.driver, _neo4j_session_store.database
    results = {}
    for name, query in favourites.items():
        assert query.startswith(f"// {name.replace('_', ':')}")  # named by its first line, as the Browser does
        assert html.escape(query, quote=False) in guide  # the guide shows every saved query
        results[name] = driver.execute_query(query, database_=database).records
        assert results[name], f"{name} returned nothing on a filled memory"
    want = analytics.transitions(_neo4j_session_store).set_index(["source", "target"])
    for row in results["Transition success rates"]:
        edge = want.loc[(row["source"], row["target"])]
        got = [row["observations"], row["success_rate"], row["ci_low"], row["ci_high"], row["mean_gain"]]
        assert got == pytest.approx(
            [edge["observations"], edge["success_rate"], edge["ci_low"], edge["ci_high"], edge["mean_gain"]],
            abs=5e-4,
        )


def run_from_guide(page: Page, guide: Locator, text: str) -> Locator:
    """Click the guide's block holding `text` (it goes into the editor), run it, and return
    the frame it opens."""
    guide.locator("pre.runnable", has_text=text).click()
    page.get_by_test_id("activeEditor").filter(has_text=text).wait_for()  # before Run: not an empty editor
    page.get_by_test_id("editor-Run").click()
    frame = page.get_by_test_id("frame").filter(has=page.get_by_test_id("frameCommand").filter(has_text=text))
    frame.first.wait_for()
    return frame.first


@pytest.fixture
def page(chromium: str, tmp_path: Path) -> Iterator[Page]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(TIMEOUT_MS)
        try:
            yield page
        finally:
            page.screenshot(path=tmp_path / "browser.png", full_page=True)
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            shutil.copy(tmp_path / "browser.png", ARTIFACTS / "browser.png")
            browser.close()


def test_the_browser_plays_the_guide_and_draws_the_htg(filled_neo4j, base_url, page, tmp_path, _neo4j_session_store):
    bolt = filled_neo4j["HTAM_NEO4J_URI"].replace("bolt://127.0.0.1", "neo4j://localhost")
    page.goto(f"{base_url}/browser/?dbms={bolt}")
    page.get_by_test_id("username").fill("neo4j")
    page.get_by_test_id("password").fill(filled_neo4j["HTAM_NEO4J_PASSWORD"])
    page.get_by_test_id("connect").click()

    # The server plays the guide on connect (browser.post_connect_cmd) ...
    guide = page.get_by_test_id("frame").filter(has_text="htam/guide.html")
    guide.get_by_text("The HTAM memory").wait_for()
    # ... and has told the Browser not to ask about usage data (client.allow_telemetry).
    assert page.get_by_text("we collect information on product usage").count() == 0

    # The guide's first block loads the HTG style from the server.
    styled = run_from_guide(page, guide, ":style")
    styled.get_by_text("node.Global").first.wait_for()

    # The first slide's picture: real nodes, each captioned by what names it (a task by its
    # id, never a number such as -102; a run by method and seed; a step by its verdict).
    picture = run_from_guide(page, guide, "The graph on real nodes")
    picture.locator("svg g.node").first.wait_for()
    drawn: dict[str, list[str]] = {}
    for node in picture.locator("svg g.node").all():
        fill = node.locator("circle.b-outline").get_attribute("fill") or ""
        caption = " ".join(t.strip() for t in node.locator("text").all_text_contents()).strip()
        drawn.setdefault(fill, []).append(caption.removesuffix("…"))  # a long one is cut, with an ellipsis
    picture.screenshot(path=tmp_path / "picture.png")
    tasks = {r.task_id for r in _neo4j_session_store.get_runs()}
    assert drawn[TASK_COLOUR] and all(any(t.startswith(c) for t in tasks) for c in drawn[TASK_COLOUR])
    runs = {f"{r.method} s{r.seed}" for r in _neo4j_session_store.get_runs()}
    assert all(re.fullmatch(r"[a-z-]+ s\d+", r) for r in runs), runs
    assert drawn[RUN_COLOUR] and all(any(r.startswith(c) for r in runs) for c in drawn[RUN_COLOUR])
    verdicts = {v.value for v in Verdict}
    assert drawn[STEP_COLOUR] and all(any(v.startswith(c) for v in verdicts) for c in drawn[STEP_COLOUR])
    assert drawn[GLOBAL_COLOUR] and all(c and not c.lstrip("-").isdigit() for cs in drawn.values() for c in cs)

    # Two slides on, a ready query draws the transitions between the globals.
    guide.get_by_test_id("nextSlide").click()
    guide.get_by_test_id("nextSlide").click()
    drawing = run_from_guide(page, guide, "transitions with evidence")
    drawing.locator("svg g.relationship").first.wait_for()

    nodes = drawing.locator("svg g.node")
    fills = nodes.locator("circle.b-outline").evaluate_all("els => els.map(e => e.getAttribute('fill'))")
    captions = " ".join(nodes.locator("text").all_text_contents())
    used = analytics.transitions(_neo4j_session_store)
    ids = set(used["source"]) | set(used["target"])
    names = [g.name for g in _neo4j_session_store.get_globals() if g.id in ids]
    assert nodes.count() == len(ids)
    assert set(fills) == {GLOBAL_COLOUR}  # every node a Global, in the style's colour
    assert all(name.split()[0] in captions for name in names)  # captioned by name, as the style says
    drawing.screenshot(path=tmp_path / "htg.png")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(tmp_path / "htg.png", ARTIFACTS / "htg.png")
