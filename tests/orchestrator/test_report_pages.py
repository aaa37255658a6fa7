"""The pages' content from hand-made metrics: one colour per robot across figures and channels, the maneuver
section (its rows are metrics.json's), the roles timeline, every link (joiners' included), and old run directories
without these blocks."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from core.robots import RobotSpec
from orchestrator.batch.compare_data import chain
from orchestrator.batch.compare_plots import plot_overlay, plot_received_speed
from orchestrator.metrics import Series
from orchestrator.reporting.plots import (
    ROBOT_COLORS,
    draw_job,
    follower_plot_jobs,
    platoon_groups,
    robot_colors,
    series_plot_jobs,
)
from orchestrator.reporting.report import maneuver_rows, maneuver_section, write_run_report

ROBOTS = [RobotSpec(1, "a0", platoon=0), RobotSpec(2, "a1", platoon=0, position_in_platoon=1, predecessor=1, leader=1),
          RobotSpec(3, "a2", platoon=0, position_in_platoon=2, predecessor=2, leader=1),
          RobotSpec(4, "b0", platoon=1), RobotSpec(5, "b1", platoon=1, position_in_platoon=1, predecessor=4, leader=4),
          RobotSpec(6, "joiner", platoon=2)]
ROLES = {"intervals": [
    {"robot": "a0", "platoon": "a", "position": 0, "predecessor": None, "leader": None, "from_s": 0, "to_s": 20,
     "phase": "steady"},
    {"robot": "a1", "platoon": "a", "position": 1, "predecessor": "a0", "leader": "a0", "from_s": 0, "to_s": 20,
     "phase": "steady"},
    {"robot": "a2", "platoon": "a", "position": 2, "predecessor": "a1", "leader": "a0", "from_s": 0, "to_s": 8,
     "phase": "maneuver"},
    {"robot": "a2", "platoon": "a", "position": 3, "predecessor": "joiner", "leader": "a0", "from_s": 8, "to_s": 20,
     "phase": "steady"},
    {"robot": "b0", "platoon": "b", "position": 0, "predecessor": None, "leader": None, "from_s": 0, "to_s": 20,
     "phase": "steady"},
    {"robot": "b1", "platoon": "b", "position": 1, "predecessor": "b0", "leader": "b0", "from_s": 0, "to_s": 20,
     "phase": "steady"},
    {"robot": "joiner", "platoon": "joiner", "position": 0, "predecessor": None, "leader": None, "from_s": 0,
     "to_s": 2, "phase": "steady"},
    {"robot": "joiner", "platoon": "a", "position": 2, "predecessor": "a1", "leader": "a0", "from_s": 2, "to_s": 20,
     "phase": "maneuver"}]}
LINK = {"pdr": 1.0, "latency_mean_s": 0.0, "latency_p95_s": 0.0, "interval_mean_s": 0.01, "sent": 10, "received": 10}
FOLLOWERS = {
    "a1": {"spacing_error_rms_m": 0.1, "following": [{"predecessor": "a0", "from_s": 0, "to_s": 20}],
           "links": [{"predecessor": "a0", "from_s": 0, "to_s": 20, **LINK}]},
    "a2": {"spacing_error_rms_m": 0.2, "following": [{"predecessor": "a1", "from_s": 0, "to_s": 8},
                                                    {"predecessor": "joiner", "from_s": 8, "to_s": 20}],
           "links": [{"predecessor": "a1", "from_s": 0, "to_s": 8, **LINK},
                     {"predecessor": "joiner", "from_s": 8, "to_s": 20, **LINK}]},
    "b1": {"spacing_error_rms_m": 0.3, "following": [{"predecessor": "b0", "from_s": 0, "to_s": 20}],
           "links": [{"predecessor": "b0", "from_s": 0, "to_s": 20, **LINK}]},
    "joiner": {"spacing_error_rms_m": 0.4, "following": [{"predecessor": "a1", "from_s": 2, "to_s": 20}],
               "links": [{"predecessor": "a1", "from_s": 2, "to_s": 20, **LINK}]},
}
MANEUVERS = {"requests": [
    {"index": 0, "type": "join", "at_s": 2.0, "robots": ["a0", "a2", "joiner"], "requested_s": 2.0,
     "completed_s": 8.0, "status": "completed", "time_to_complete_s": 6.0, "aborts": [], "min_gap_m": 0.61,
     "max_decel_mps2": 0.7, "max_decel_any_mps2": 1.5, "min_ttc_s": 0.8, "max_spacing_error_behind_m": 0.13},
    {"index": 1, "type": "leave", "at_s": 10.0, "robots": ["a0", "a1"], "requested_s": 10.0, "completed_s": None,
     "status": "aborted", "reason": "gap not opened", "time_to_complete_s": None,
     "aborts": [{"robot": "a1", "t_s": 12.5, "state": "opening", "reason": "gap not opened"}], "min_gap_m": 0.9,
     "max_decel_mps2": 0.2, "max_decel_any_mps2": 0.3, "min_ttc_s": None, "max_spacing_error_behind_m": 0.05},
    {"index": 2, "type": "split", "at_s": 15.0, "robots": ["b0", "b1"], "requested_s": 15.0, "completed_s": None,
     "status": "refused", "reason": "platoon b has no follower at position 3", "aborts": []}],
    "completed": 1, "aborted": 1, "refused": 1, "unfinished": 0}
CUT_INS = {"events": [{"robot": "b1", "intruder": "car_7", "from_s": 5.0, "to_s": 9.0, "min_gap_m": 4.2,
                       "min_ttc_s": 2.5, "max_decel_mps2": 3.1, "max_spacing_error_behind_m": 1.7}]}
METRICS = {"followers": FOLLOWERS, "roles": ROLES, "maneuvers": MANEUVERS, "cut_ins": CUT_INS}


def _series() -> dict[int, Series]:
    t = np.arange(200, dtype=np.int64) * 100_000_000
    return {r.id: Series(t, {"x": t / 1e9 + r.id, "y": np.zeros(200), "v": np.full(200, 1.0 + r.id / 10),
                             "est_x": t / 1e9 + r.id, "est_y": np.zeros(200)}) for r in ROBOTS}


def _follower_series() -> dict[str, dict[str, np.ndarray]]:
    t = np.arange(200) * 0.1
    return {name: {"t_s": t, "spacing_error_m": np.sin(t + k), "lateral_m": np.zeros(200)}
            for k, name in enumerate(FOLLOWERS)}


def _line_colors(path, kind: str, monkeypatch) -> dict[str, str]:
    """Label -> colour of every labelled line a figure draws (read from the matplotlib artists as saved)."""
    from matplotlib.colors import to_hex

    import orchestrator.reporting.plots as plots

    seen: dict[str, str] = {}
    save = plots.save

    def spy(fig, out):
        for ax in fig.axes:
            for line in ax.get_lines():
                if not line.get_label().startswith("_"):
                    seen[line.get_label()] = to_hex(line.get_color())
        return save(fig, out)

    monkeypatch.setattr(plots, "save", spy)
    return seen


def test_a_robot_has_one_colour_in_the_speeds_the_spacing_errors_and_the_charts(tmp_path, monkeypatch):
    seen = _line_colors(tmp_path, "", monkeypatch)
    speeds = next(j for j in series_plot_jobs(ROBOTS, _series()) if j.file == "speeds.png")
    draw_job(tmp_path, speeds)
    in_speeds = dict(seen)
    seen.clear()
    errors = next(j for j in follower_plot_jobs(ROBOTS, _follower_series(), FOLLOWERS, METRICS)
                  if j.file == "spacing_errors.png")
    draw_job(tmp_path, errors)
    in_errors = dict(seen)
    assert set(in_errors) == set(FOLLOWERS)  # joiner included
    for name in FOLLOWERS:
        assert in_errors[name] == in_speeds[name] == robot_colors([r.name for r in ROBOTS])[name]
    # today's bug: a follower's colour was its index among the drawn lines, so a1 was blue in one and orange in the
    # other; now the run's spawn order decides
    assert in_speeds["a1"] == ROBOT_COLORS[1] and len(set(in_speeds.values())) == len(ROBOTS)
    from orchestrator.reporting.report import interactive_sections

    charts = "".join(body for _, body in interactive_sections(ROBOTS, _series(), _follower_series()))
    specs = [json.loads(spec.replace("<\\/", "</")) for spec in
             re.findall(r"<script type='application/json'>(.*?)</script>", charts)]
    for spec in specs:  # the speeds chart and the spacing-errors chart
        assert {line["name"]: line["color"] for line in spec["lines"]}.items() <= in_speeds.items()


def test_the_comparison_gives_a_robot_its_run_colour_in_every_channel_and_the_channel_a_line_style(
        tmp_path, monkeypatch):
    import orchestrator.batch.compare_plots as cp

    drawn: list[tuple[str, str, str]] = []
    pyplot = cp._pyplot()
    close = pyplot.close

    def spy(fig):  # the figure as saved: every line with its panel, style and colour
        drawn.extend((ax.get_title(), line.get_linestyle(), line.get_color()) for ax in fig.axes
                     for line in ax.get_lines() if len(line.get_xdata()))
        close(fig)

    monkeypatch.setattr(pyplot, "close", spy)
    t = np.arange(50, dtype=np.int64) * 100_000_000
    runs = {c: {r.id: {"t_ns": t, "x": t / 1e9, "y": np.zeros(50), "v": np.ones(50) * r.id, "pred_v": np.ones(50)}
                for r in ROBOTS} for c in ("ideal", "itsg5")}
    colors = robot_colors([r.name for r in ROBOTS])
    plot_overlay(tmp_path, runs, {r.id: r.name for r in ROBOTS}, colors, platoon_groups(ROBOTS, ROLES))
    speeds = [d for d in drawn if d[0].startswith("speeds")]
    assert {d[0] for d in speeds} == {"speeds, a", "speeds, b"}  # small multiples: one panel per platoon
    by_style = {style: {c for _, s, c in speeds if s == style} for style in ("-", "--")}
    assert by_style["-"] == by_style["--"] == set(colors.values())  # each channel: the same robot colours


def test_every_link_is_drawn_joiners_included_each_while_it_existed(tmp_path):
    links = chain(ROBOTS, METRICS)
    assert [(link.follower_name, link.predecessor_name, link.from_s, link.to_s) for link in links] == [
        ("a1", "a0", 0.0, 20.0), ("a2", "a1", 0.0, 8.0), ("a2", "joiner", 8.0, 20.0), ("joiner", "a1", 2.0, 20.0),
        ("b1", "b0", 0.0, 20.0)]
    t = np.arange(50, dtype=np.int64) * 500_000_000
    runs = {"ideal": {r.id: {"t_ns": t, "v": np.ones(50), "pred_v": np.ones(50)} for r in ROBOTS}}
    figures = plot_received_speed(tmp_path, runs, links, robot_colors([r.name for r in ROBOTS]))
    assert [title for title, _ in figures] == ["a: 4 links (a1, a2, a2, joiner)", "b: 1 links (b1)"]
    assert all(path.stat().st_size > 5_000 for _, path in figures)
    # an old run directory (no roles): the predecessors as spawned
    assert [(k.follower_name, k.predecessor_name) for k in chain(ROBOTS)] == [("a1", "a0"), ("a2", "a1"),
                                                                            ("b1", "b0")]


def test_the_maneuver_rows_are_the_metrics_json_requests():
    rows = maneuver_rows(METRICS)
    assert list(rows) == ["#0", "#1", "#2"]
    for row, request in zip(rows.values(), MANEUVERS["requests"], strict=True):
        for key in ("type", "requested_s", "completed_s", "time_to_complete_s", "min_gap_m", "min_ttc_s",
                    "max_decel_mps2", "max_decel_any_mps2", "max_spacing_error_behind_m"):
            assert row[key] == request.get(key), key
        assert row["robots"] == ", ".join(request["robots"])
    assert [r["outcome"] for r in rows.values()] == ["done", "aborted", "refused"]
    assert rows["#0"]["reason"] is None
    assert rows["#1"]["reason"] == "gap not opened"
    assert rows["#2"]["reason"] == "platoon b has no follower at position 3"


def test_the_run_report_has_a_maneuver_section_with_cut_ins_a_timeline_and_every_link(tmp_path):
    jobs = follower_plot_jobs(ROBOTS, _follower_series(), FOLLOWERS, METRICS)
    timeline = draw_job(tmp_path / "plots", next(j for j in jobs if j.file == "roles_timeline.png"))
    page = write_run_report(tmp_path, {"scenario": "hand"}, METRICS, [timeline], ROBOTS).read_text()
    section = page.split("<h2>Maneuvers and roles</h2>")[1].split("<h2>")[0]
    assert "Maneuvers (1 done, 1 aborted, 1 refused)" in section
    assert "<td>refused</td><td>platoon b has no follower at position 3</td>" in section
    assert "<h3>Cut-ins</h3>" in section and "<td>car_7</td>" in section and "<td>1.7</td>" in section
    assert 'alt="roles_timeline"' in section and page.count('alt="roles_timeline"') == 1  # not twice
    who = section.split("Who followed whom")[1]
    assert "<td>joiner</td><td>a1</td><td>2</td><td>20</td>" in who
    assert "<td>a2 (2)</td><td>joiner</td><td>8</td>" in who


def test_a_timeline_shows_every_robot_with_its_roles_hatched_in_maneuvers(tmp_path, monkeypatch):
    import orchestrator.reporting.plots as plots

    bars: list[tuple[str, str | None]] = []
    pyplot = plots.pyplot()
    real = pyplot.Axes.broken_barh

    def spy(ax, ranges, yrange, **kwargs):
        bars.append((kwargs.get("facecolors"), kwargs.get("hatch")))
        return real(ax, ranges, yrange, **kwargs)

    monkeypatch.setattr(pyplot.Axes, "broken_barh", spy)
    job = next(j for j in follower_plot_jobs(ROBOTS, _follower_series(), FOLLOWERS, METRICS)
               if j.file == "roles_timeline.png")
    assert list(job.args["rows"]) == [r.name for r in ROBOTS]
    assert job.args["marks"] == [(2.0, "#0 join"), (10.0, "#1 leave"), (15.0, "#2 split"), (5.0, "cut-in car_7")]
    draw_job(tmp_path, job)
    assert len(bars) == len(ROLES["intervals"])
    hatched = [h for _, h in bars]
    assert hatched.count("////") == 2 and hatched.count(None) == 6
    # the joiner's bar changes colour when it joins platoon a
    assert bars[-2][0] != bars[-1][0] and bars[-1][0] == bars[0][0]


@pytest.mark.parametrize("metrics", [{"followers": {"a1": {"spacing_error_rms_m": 0.1}}}, {}])
def test_an_old_run_directory_renders_without_the_new_blocks(tmp_path, metrics):
    assert maneuver_section(metrics) == ""
    page = write_run_report(tmp_path, {"scenario": "old"}, metrics, [], ROBOTS).read_text()
    assert "Maneuvers and roles" not in page and "Traceback" not in page
    assert not [j for j in follower_plot_jobs(ROBOTS, {}, metrics.get("followers"), metrics)
                if j.file in ("roles_timeline.png", "spacing_errors.png")]


@pytest.mark.slow
def test_every_figure_draws_without_a_matplotlib_warning(tmp_path, recwarn):
    import gc
    import warnings

    # what an earlier test on this worker left for the collector (an unclosed socket) is not this test's warning
    gc.collect()
    recwarn.clear()
    warnings.simplefilter("always")
    for job in [*series_plot_jobs(ROBOTS, _series()), *follower_plot_jobs(ROBOTS, _follower_series(), FOLLOWERS,
                                                                           METRICS)]:
        draw_job(tmp_path, job)
    # no followers at all (a robot alone): nothing labelled, so no legend to warn about
    for job in series_plot_jobs(ROBOTS[:1], {1: _series()[1]}):
        draw_job(tmp_path / "one", job)
    assert not [str(w.message) for w in recwarn.list if not issubclass(w.category, ResourceWarning)]
