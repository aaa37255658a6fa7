"""The comparison page with the three channel models (ideal, ITS-G5, C-V2X) on one seed: every table and figure
shows each channel, each in its own fixed colour; the figures' data (PDR against distance, gaps, ages) as computed."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from orchestrator.batch.compare import compare
from orchestrator.batch.compare_data import ages_of_information, link_receptions
from orchestrator.batch.compare_plots import CHANNEL_COLORS, plot_channel_figures, plot_metric_bars, variant_colors
from orchestrator.scenario import parse_scenario

from .test_resolved import REPO

CHANNELS = ["ideal", "itsg5", "cv2x"]


def _rgb(color: str) -> np.ndarray:
    return np.asarray([int(color[k:k + 2], 16) for k in (1, 3, 5)])


def coloured_pixels(png: bytes | Path, color: str) -> int:
    """Pixels of a PNG within a small distance of ``color`` (a drawn line's or bar's colour)."""
    data = png.read_bytes() if isinstance(png, Path) else png
    pixels = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"), np.int32)
    return int(np.count_nonzero(np.abs(pixels - _rgb(color)).sum(axis=2) < 40))


def test_every_channel_kind_has_its_own_fixed_colour_whatever_the_order():
    assert variant_colors(["cv2x", "ideal", "itsg5"]) == variant_colors(CHANNELS) == CHANNEL_COLORS
    colors = variant_colors(["itsg5", "itsg5_predicted", "ideal", "other"])
    assert colors["itsg5"] == "#0072B2" and colors["ideal"] == "#000000"
    assert len(set(colors.values())) == 4  # the others take distinct colours of the palette
    rgb = [_rgb(c) for c in CHANNEL_COLORS.values()]
    assert min(np.abs(a - b).sum() for k, a in enumerate(rgb) for b in rgb[k + 1:]) > 150  # far apart


def test_link_receptions_give_the_distance_at_generation_and_the_gaps_of_successful_receptions():
    t = np.arange(0, 2_000_000_000, 100_000_000, dtype=np.int64)
    series = {1: {"t_ns": t, "x": np.zeros(len(t)), "y": np.zeros(len(t))},
              2: {"t_ns": t, "x": -t / 1e8, "y": np.zeros(len(t))}}  # 1 m further behind every 100 ms
    trace = {"t_ns": np.asarray([150, 350, 550, 750, 760], np.int64) * 1_000_000,
             "generated_ns": np.asarray([100, 300, 500, 700, 700], np.int64) * 1_000_000,
             "event": np.asarray(["rx", "rx", "rx", "rx", "tx"], object),
             "sender": np.asarray([1, 1, 1, 1, 1]), "receiver": np.asarray([2, 2, 2, 2, -1]),
             "outcome": np.asarray(["received", "collision", "received", "received", "sent"], object)}
    got = link_receptions(trace, series, {(2, 1)})
    assert got["distance_m"].tolist() == pytest.approx([1.0, 3.0, 5.0, 7.0])
    assert got["received"].tolist() == [True, False, True, True]
    assert got["gap_s"].tolist() == pytest.approx([0.4, 0.2])
    ages = {1: {"pred_age_s": np.asarray([np.nan, np.nan])}, 2: {"pred_age_s": np.asarray([0.1, np.nan, 0.3])}}
    assert ages_of_information(ages, {2}).tolist() == pytest.approx([0.1, 0.3])


def test_the_channel_figures_draw_each_channel_in_its_colour(tmp_path):
    rng = np.random.default_rng(1)
    links = {c: {"distance_m": rng.uniform(1, 50, 400), "received": rng.uniform(size=400) < p,
                 "gap_s": rng.exponential(s, 300)} for c, p, s in zip(CHANNELS, (1.0, 0.9, 0.8), (0.01, 0.2, 0.3),
                                                                      strict=True)}
    ages = {c: rng.exponential(s, 500) for c, s in zip(CHANNELS, (0.0, 0.3, 0.4), strict=True)}
    path = plot_channel_figures(tmp_path, links, ages, CHANNEL_COLORS)
    bars = plot_metric_bars(tmp_path, {"pdr": {"ideal": 1.0, "itsg5": 0.9, "cv2x": 0.8},
                                       "spacing_error_max_m": {"ideal": 0.1, "itsg5": 0.5, "cv2x": 0.7}},
                            CHANNELS, CHANNEL_COLORS)
    for figure in (path, bars):
        for c in CHANNELS:
            assert coloured_pixels(figure, CHANNEL_COLORS[c]) > 300, (figure.name, c)


@pytest.mark.slow  # three runs of the platoon with plots and the page
def test_the_page_shows_the_three_channels_in_its_tables_and_figures(tmp_path):
    scenario = parse_scenario((REPO / "scenarios" / "platoon.yaml").read_text(), overrides=["duration_s=10"])
    result = compare(scenario, "channel", CHANNELS, tmp_path, jobs=2)
    assert result["ok"] and result["variants"] == CHANNELS
    summary = result["summary"]
    assert summary["latency_mean_s"]["ideal"] == 0.0
    assert 0.001 < summary["latency_mean_s"]["itsg5"] < 0.01
    assert 0.001 < summary["latency_mean_s"]["cv2x"] <= 0.1 + 0.004  # up to the 100 ms budget plus processing
    assert summary["cbr_mean"]["cv2x"] is not None and summary["cbr_mean"]["ideal"] is None
    html = (tmp_path / "comparison.html").read_text().replace("<wbr>", "")  # headers may wrap at underscores
    # the tables: a column per channel, the differences to the first, the links' PDR and latency per channel
    header = re.search(r"<th>metric</th>(.*?)</tr>", html, re.S).group(1)
    assert re.findall(r"<th>(.*?)</th>", header) == [*CHANNELS, "itsg5 - ideal", "cv2x - ideal"]
    for text in ("pdr cv2x", "latency_mean_s cv2x", "Followers, channel cv2x", "Per platoon, channel cv2x",
                 "Followers, channel itsg5", "Followers, channel ideal"):
        assert text in html, text
    for c in CHANNELS:  # the legend of colours
        assert f"<span style='color:{CHANNEL_COLORS[c]}'>&#9632;</span>&nbsp;{c}" in html
    # the figures, inlined: every channel drawn in its colour in each of them
    assert html.count("data:image/png;base64,") >= 5
    for name in ("platoon_metrics_bars", "channel_pdr_gap_aoi", "latency_interval_histograms"):
        figure = tmp_path / "plots" / f"{name}.png"
        for c in CHANNELS:
            assert coloured_pixels(figure, CHANNEL_COLORS[c]) > 150, (name, c)
    speeds = sorted((tmp_path / "plots").glob("received_predecessor_speed*.png"))
    assert speeds and all(coloured_pixels(speeds[0], CHANNEL_COLORS[c]) > 100 for c in ("itsg5", "cv2x"))
    saved = json.loads((tmp_path / "comparison.json").read_text())
    assert set(saved["runs"]) == set(CHANNELS) and saved["runs"]["cv2x"]["run"]["seed"] == 42
