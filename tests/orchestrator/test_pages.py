"""The pages people look at, rendered in a real headless Chromium: the comparison of a 12-robot, 2-platoon run,
its ITS-G5 run report and a sweep page show every platoon, draw non-empty latency curves, never scroll sideways
and print values, not dict literals."""

from __future__ import annotations

import base64
import io
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from PIL import Image

from orchestrator.batch.compare import compare
from orchestrator.batch.sweep import sweep
from orchestrator.scenario import parse_scenario

from .test_live_view import CHROMIUM, chromium
from .test_resolved import REPO

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (make test installs it)")]
PLATOON = REPO / "scenarios" / "platoon.yaml"
TWO_PLATOONS = ["duration_s=15", "vehicles.count=12", "platoon.size=6"]


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("pages")
    compare(parse_scenario(PLATOON.read_text(), overrides=TWO_PLATOONS), "channel", ["ideal", "itsg5"], out / "cmp",
            jobs=2)
    sweep(PLATOON, [("controller.time_gap_s", [0.5, 1.0])], out / "sweep", overrides=["duration_s=5"], jobs=2)
    return {"comparison": out / "cmp" / "comparison.html", "report": out / "cmp" / "itsg5" / "report.html",
            "sweep": out / "sweep" / "sweep.html"}


def _look(page: Path, profile: Path) -> dict:
    """What Chromium shows of ``page``: widths, headings, table cells, and the embedded images."""
    with chromium(page.as_uri(), profile) as tab:
        _wait_loaded(tab, page)
        return tab.evaluate("""({
            scroll: document.documentElement.scrollWidth, view: window.innerWidth,
            headings: [...document.querySelectorAll('h2')].map(h => h.textContent),
            cells: [...document.querySelectorAll('td')].map(td => td.textContent),
            text: document.body.innerText,
            images: [...document.querySelectorAll('img')].map(i => ({alt: i.alt, w: i.naturalWidth, src: i.src}))
        })""")


def _wait_loaded(tab, page: Path) -> None:
    """Until the tab shows ``page`` fully loaded (a new tab is a complete about:blank first)."""
    deadline = time.monotonic() + 60
    while tab.evaluate("document.URL + ' ' + document.readyState") != f"{page.as_uri()} complete":
        assert time.monotonic() < deadline, f"{page} did not load"
        time.sleep(0.1)


def _coloured_pixels(src: str, rgb: tuple[int, int, int]) -> int:
    """Pixels of an embedded PNG within a small distance of ``rgb`` (a plotted line's colour)."""
    data = base64.b64decode(src.split(",", 1)[1])
    pixels = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"), np.int32)
    return int(np.count_nonzero(np.abs(pixels - np.asarray(rgb)).sum(axis=2) < 40))


@pytest.mark.parametrize("name", ["comparison", "report", "sweep"])
def test_the_page_fits_the_window_and_shows_values_not_dicts(pages, tmp_path, name):
    seen = _look(pages[name], tmp_path / "profile")
    assert seen["scroll"] <= seen["view"], f"{name} scrolls sideways: {seen['scroll']} > {seen['view']}"
    assert seen["images"] and all(i["w"] > 0 for i in seen["images"])
    assert not [c for c in seen["cells"] if "{" in c or "}" in c]


def test_the_comparison_shows_every_platoon_and_its_latency_curves(pages, tmp_path):
    seen = _look(pages["comparison"], tmp_path / "profile")
    assert "p0 (ela_cacc, 5 followers)" in seen["text"] and "p1 (ela_cacc, 5 followers)" in seen["text"]
    assert "Predecessor speed as each follower received it, against the truth (10 links" in seen["text"]
    curves = next(i for i in seen["images"] if i["alt"] == "latency_interval_histograms")
    # both variants drew their curves, each in its channel's colour (ideal black, ITS-G5 blue) and line style
    assert _coloured_pixels(curves["src"], (0, 0, 0)) > 300 and _coloured_pixels(curves["src"], (0, 114, 178)) > 300


def test_the_run_report_has_a_table_per_platoon_and_flat_channel_values(pages, tmp_path):
    seen = _look(pages["report"], tmp_path / "profile")
    assert "Per platoon (worst follower)" in seen["headings"]
    assert "p0 (ela_cacc, 5 followers)" in seen["text"] and "p1 (ela_cacc, 5 followers)" in seen["text"]
    assert "interest_outcomes.received" in seen["text"]
    assert {"V2x pdr distance", "V2x latency", "V2x over time"} <= set(seen["headings"])


def test_the_run_reports_speed_chart_zooms_and_reads_out_the_trace(pages, tmp_path):
    page = pages["report"]
    with chromium(page.as_uri(), tmp_path / "profile") as tab:
        _wait_loaded(tab, page)
        tab.evaluate("window.scrollTo(0, document.getElementById('chart-speeds').getBoundingClientRect().top"
                     " + window.scrollY - 50)")
        rect = "(function(){var r = document.querySelector('#chart-speeds canvas').getBoundingClientRect();" \
               " return [r.x, r.y, r.width, r.height]})()"
        box, deadline = None, time.monotonic() + 30
        while box != (box := tab.evaluate(rect)) or box[1] < 0:  # until the scroll has settled on the chart
            assert time.monotonic() < deadline
            time.sleep(0.2)
        x0, y0, w, h = box
        assert tab.evaluate("document.getElementById('chart-speeds').dataset.view") == "0.000,15.000"

        def mouse(kind: str, fx: float, fy: float, clicks: int = 1) -> None:
            tab.call("Input.dispatchMouseEvent", type=kind, x=x0 + fx * w, y=y0 + fy * h, button="left",
                     clickCount=clicks)

        mouse("mousePressed", 0.3, 0.5)
        mouse("mouseMoved", 0.6, 0.5)
        mouse("mouseReleased", 0.6, 0.5)
        start, end = map(float, tab.evaluate("document.getElementById('chart-speeds').dataset.view").split(","))
        assert 3.0 < start < end < 10.0  # the dragged span of a 15 s run (the plot area starts after the axis)
        for fy in np.linspace(0.1, 0.9, 17):  # hover down the middle until the read-out names a line
            mouse("mouseMoved", 0.45, fy)
            tip = tab.evaluate("document.querySelector('#chart-speeds .tip').textContent")
            if tip:
                break
        name, rest = tip.split(": ")
        value, t_s = float(rest.split(" m/s")[0]), float(rest.split("t = ")[1].split(" s")[0])
        trace = pq.read_table(page.parent / "trace" / "vehicles.parquet", columns=["t_s", "robot", "v"]).to_pydict()
        rid = int(name.removeprefix("robot")) + 1  # robotN has station id N + 1 in this fleet
        at = [v for t, r, v in zip(trace["t_s"], trace["robot"], trace["v"], strict=True)
              if r == rid and abs(t - t_s) < 0.005]
        assert at and abs(at[0] - value) <= 5e-4 * abs(at[0])  # the read-out's four significant digits
        mouse("mousePressed", 0.5, 0.5, 2)
        tab.call("Input.dispatchMouseEvent", type="mouseReleased", x=x0 + 0.5 * w, y=y0 + 0.5 * h, button="left",
                 clickCount=2)
        assert tab.evaluate("document.getElementById('chart-speeds').dataset.view") == "0.000,15.000"


def test_a_chart_of_many_robots_shows_the_first_and_a_control_shows_the_rest(tmp_path):
    from orchestrator.runner import run_scenario

    out = tmp_path / "run"
    assert run_scenario(parse_scenario(PLATOON.read_text(), overrides=[
        "duration_s=4", "vehicles.count=20", "platoon.size=10", "outputs.plots=false"]), out).ok
    page = out / "report.html"
    with chromium(page.as_uri(), tmp_path / "profile") as tab:
        _wait_loaded(tab, page)
        shown = "document.getElementById('chart-speeds').dataset.shown"
        assert tab.evaluate(shown) == "16"
        assert tab.evaluate("document.querySelector('#chart-speeds button.all').textContent") == "show all 20"
        tab.evaluate("document.querySelector('#chart-speeds button.all').click()")
        assert tab.evaluate(shown) == "20"
        assert tab.evaluate("document.querySelector('#chart-speeds button.all').textContent") == "show the first 16"
