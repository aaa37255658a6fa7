"""ela_cacc's per-row parameters (``Controller.row_params``): a group keeps values per row only while some differ
from its law's, and the desired gap and spacing error are read per row for the rows asked about (1, 2 or none,
through ``Controller.at_rows``), each row with its own spacing policy D = r + h v (controller facts, section 1:
D_i = r_i + h_i v_i; on an arc of curvature k the chord 2 sin(atan(k D) / 2) / k)."""

from __future__ import annotations

import numpy as np
import pytest

from controllers.ela_cacc import ElaCacc
from core.robot_blocks import ControllerSpec, DriveSpec, InitialState
from core.robots import RobotSpec
from federates.control.groups import FollowerGroups

R_M = 2.0
GAPS_S = (0.6, 1.2, 0.8)  # the followers' own time gaps h_i


def _block(h: float | None) -> dict:
    block = {"type": "ela_cacc", "period_s": 0.01, "predict": "none", "lateral": None, "fallback": None,
             "standstill_m": R_M}
    return block if h is None else {**block, "time_gap_s": h}


def _groups(gaps: tuple[float | None, ...]) -> FollowerGroups:
    """Followers 2, 3, ... behind leader 1, with these time gaps (None: the law's default), in one group."""
    robots = [RobotSpec(1, "lead", driver=DriveSpec("constant", {"speed_mps": 10.0}))]
    robots += [RobotSpec(2 + k, f"f{k}", predecessor=1 + k, leader=1, initial=InitialState(v=10.0),
                         controller=ControllerSpec.from_plain(_block(h))) for k, h in enumerate(gaps)]
    groups = FollowerGroups(10_000_000, 0.01)
    groups.spawn(robots, np.arange(1, len(robots)), np.array([r.id for r in robots], np.int64))
    assert len(groups.by_key) == 1  # blocks that differ only in row parameters share one group
    return groups


def _law(groups: FollowerGroups) -> ElaCacc:
    law = next(iter(groups.by_key.values())).pipeline.law
    assert isinstance(law, ElaCacc)
    return law


def _chord(d: np.ndarray, k: float) -> np.ndarray:
    return 2.0 * np.sin(np.arctan(k * d) / 2.0) / k


def test_a_group_whose_rows_share_the_laws_parameters_keeps_none_of_its_own() -> None:
    groups = _groups((0.6, 0.6, 0.6))
    law = _law(groups)
    assert law.row_values == {}
    np.testing.assert_allclose(law.desired_gap(np.array([5.0])), [R_M + 0.6 * 5.0], rtol=1e-15)  # any count
    np.testing.assert_allclose(law.desired_gap(np.array([5.0, 10.0])), R_M + 0.6 * np.array([5.0, 10.0]))
    assert law.desired_gap(np.empty(0)).shape == (0,)


def test_the_rows_values_go_once_they_no_longer_differ_and_an_emptied_group_has_none() -> None:
    groups = _groups(GAPS_S)
    law = _law(groups)
    np.testing.assert_array_equal(law.row_values["time_gap_s"], GAPS_S)
    groups.leave(3)  # h = 1.2 leaves: 0.6 and 0.8 remain, the law's own is the first block's 0.6
    np.testing.assert_array_equal(law.row_values["time_gap_s"], [0.6, 0.8])
    groups.leave(4)
    assert law.row_values == {}
    np.testing.assert_allclose(law.desired_gap(np.array([10.0])), [R_M + 0.6 * 10.0])
    groups.leave(2)
    assert law.row_values == {} and law.desired_gap(np.empty(0)).shape == (0,)


@pytest.mark.parametrize("rows", [[1], [2, 0], []])
def test_desired_gap_of_the_rows_asked_about_is_each_ones_own(rows: list[int]) -> None:
    groups = _groups(GAPS_S)
    law = _law(groups).at_rows(rows)
    v = np.array([8.0, 12.0, 3.0])[: len(rows)]
    d = R_M + np.array(GAPS_S)[rows] * v
    np.testing.assert_allclose(law.desired_gap(v), d, rtol=1e-15)
    k = np.full(len(rows), 0.02)  # a 50 m arc
    np.testing.assert_allclose(law.desired_gap(v, k), _chord(d, 0.02), rtol=1e-12)
    assert law.desired_gap(v).shape == (len(rows),)


def test_the_whole_group_gets_every_rows_own_gap_and_a_wrong_count_is_an_error() -> None:
    law = _law(_groups(GAPS_S))
    v = np.array([8.0, 12.0, 3.0])
    np.testing.assert_allclose(law.desired_gap(v), R_M + np.array(GAPS_S) * v, rtol=1e-15)
    with pytest.raises(ValueError, match="1 values for a group of 3 rows"):
        law.desired_gap(np.array([8.0]))  # one speed no longer stands for every row
    with pytest.raises(ValueError, match="2 values for a group of 3 rows"):
        law.desired_gap(np.array([8.0, 12.0]))


@pytest.mark.parametrize("rows", [[1], [2, 0], []])
def test_spacing_error_of_the_rows_asked_about_uses_each_ones_time_gap(rows: list[int]) -> None:
    law = _law(_groups(GAPS_S)).at_rows(rows)
    n = len(rows)
    v = np.array([8.0, 12.0, 3.0])[:n]
    gap = np.array([20.0, 11.0, 7.0])[:n]  # rear axle to rear axle, on a straight along x
    ego = {"x": np.zeros(n), "y": np.zeros(n), "yaw": np.zeros(n), "v": v}
    pred = {"x": gap, "y": np.zeros(n), "yaw": np.zeros(n), "v": v, "yaw_rate": np.zeros(n)}
    # z . e(th) on a straight: the gap less D = r + h v, with the row's own h
    np.testing.assert_allclose(law.spacing_error(ego, pred), gap - (R_M + np.array(GAPS_S)[rows] * v), rtol=1e-14)


def test_a_robots_law_and_a_blocks_law_have_their_own_parameters() -> None:
    groups = _groups(GAPS_S)
    for robot, h in zip((2, 3, 4), GAPS_S, strict=True):
        np.testing.assert_allclose(groups.law_at(robot).desired_gap(np.array([10.0])), [R_M + h * 10.0])
    assert groups.law_at(99) is None
    # a block with h = 1.2 joined to a group made by an h = 0.6 block: the law a joiner with it runs
    block_law = groups.law_of_block(ControllerSpec.from_plain(_block(1.2)), "joiner")
    assert block_law.row_values == {} and block_law.params.time_gap_s == 1.2
    np.testing.assert_allclose(block_law.desired_gap(np.array([10.0, 5.0])), R_M + 1.2 * np.array([10.0, 5.0]))
