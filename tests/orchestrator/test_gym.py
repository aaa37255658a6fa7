"""The Gymnasium environment (``orchestrator.gym``): Gymnasium's own checker, a policy that is a built-in law gives
that law's trace, deterministic and cheap resets, episode ends, and the vector of copies."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

gymnasium = pytest.importorskip("gymnasium")

import orchestrator.gym  # noqa: E402, F401 - registers coopsim/Platoon-v0
from orchestrator.gym import episodes  # noqa: E402
from orchestrator.gym.env import PlatoonEnv  # noqa: E402
from orchestrator.gym.observation import INDEX  # noqa: E402
from orchestrator.runner import run_scenario  # noqa: E402
from orchestrator.scenario.loader import parse_scenario  # noqa: E402
from tests.timing import best_times  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
PLATOON = REPO / "scenarios" / "platoon.yaml"

# A straight platoon whose leader's speed swings (sinusoid), followers on Rajamani's ACC: a law an agent can compute
# from its observation alone (own speed, range-sensor gap and rate), with no memory.
ACC_PLATOON = """
version: 1
name: acc_platoon
seed: 7
duration_s: 12.0
step_s: 0.01
vehicles:
  count: 4
  template: {preset: auna_rc_1to10, model: kinematic}
platoon: {size: 4}
leader: {profile: sinusoid, params: {speed_mps: 1.0, amplitude_mps: 0.4, frequency_hz: 0.25, start_s: 1.0}}
controller: {type: acc, period_s: 0.02, time_gap_s: 0.8, lambda_gain: 1.5, standstill_m: 0.4}
channel: {type: ideal}
outputs: {trace: true, plots: false, report: false}
"""
ACC = {"T": 0.8, "lam": 1.5, "r": 0.4, "v_des": 100 / 3.6, "kp": 1.0, "u_max": 1.5}  # the block above + defaults


def acc_policy(obs: np.ndarray) -> np.ndarray:
    """Rajamani's ACC (``controllers.acc``) from the observation, with the scenario's gains: min(u_cc, u_acc)."""
    v, gap, rate, seen = obs[INDEX["v"]], obs[INDEX["gap"]], obs[INDEX["gap_rate"]], obs[INDEX["gap_seen"]]
    u_cc = min(max(-ACC["kp"] * (v - ACC["v_des"]), -ACC["u_max"]), ACC["u_max"])
    if not seen:
        return np.array([u_cc])
    delta = -gap + ACC["T"] * v + ACC["r"]
    u_acc = -(1.0 / ACC["T"]) * (-rate + ACC["lam"] * delta)
    return np.array([min(u_cc, u_acc)])


def traced(scenario_text: str, tmp_path: Path, seed: int) -> dict[int, dict[str, np.ndarray]]:
    """x, y, v per robot and time of a normal run of the scenario (``coopsim run``'s trace)."""
    result = run_scenario(parse_scenario(scenario_text), tmp_path / "run", seed=seed)
    assert result.ok
    table = pq.read_table(tmp_path / "run" / "trace" / "vehicles.parquet",
                          columns=["t_ns", "robot", "x", "y", "v"]).to_pydict()
    out: dict[int, dict[str, np.ndarray]] = {}
    for robot in set(table["robot"]):
        rows = [k for k, r in enumerate(table["robot"]) if r == robot]
        out[robot] = {key: np.array([table[key][k] for k in rows]) for key in ("t_ns", "x", "y", "v")}
    return out


def drive(env: PlatoonEnv, seed: int, policy) -> tuple[dict[int, np.ndarray], list[float], int]:
    """One episode: (t_ns, x, y, v) of every robot at every decision instant, the rewards, the number of steps."""
    obs, info = env.reset(seed=seed)
    rows: dict[int, list] = {}
    rewards = []

    def record() -> None:
        state = env.live.scheduler.bus["state"]
        for k, rid in enumerate(state["id"].tolist()):
            rows.setdefault(rid, []).append((env.live.scheduler.now_ns, state["x"][k], state["y"][k], state["v"][k]))

    record()
    while True:
        obs, reward, terminated, truncated, info = env.step(policy(obs, info))
        rewards.append(reward)
        record()
        if terminated or truncated:
            return {rid: np.array(r) for rid, r in rows.items()}, rewards, len(rewards)


def compare(agent: dict[int, np.ndarray], run: dict[int, dict[str, np.ndarray]]) -> float:
    """Largest difference of x, y, v between the environment's trace and the run's, at the environment's instants."""
    worst = 0.0
    for rid, rows in agent.items():
        t = rows[:, 0].astype(np.int64)
        at = np.searchsorted(run[rid]["t_ns"], t)
        assert np.array_equal(run[rid]["t_ns"][at], t)
        for col, key in ((1, "x"), (2, "y"), (3, "v")):
            worst = max(worst, float(np.abs(rows[:, col] - run[rid][key][at]).max()))
    return worst


def test_gymnasium_make_builds_the_registered_environment_and_check_env_passes():
    env = gymnasium.make("coopsim/Platoon-v0", scenario=str(PLATOON))
    inner = env.unwrapped
    assert isinstance(inner, PlatoonEnv)
    assert inner.agent_names == ["robot3"] and inner.agent_ids.tolist() == [4]  # the last follower
    # the AuNa 1:10 preset's limits: 6 m/s^2 braking, 3 m/s^2 accelerating
    assert inner.action_space.low.tolist() == [-6.0] and inner.action_space.high.tolist() == [3.0]
    from gymnasium.utils.env_checker import check_env

    check_env(inner, skip_render_check=True)
    obs, _ = env.reset(seed=42)
    assert inner.observation_space.contains(obs)
    # at t = 0 the follower starts at its law's desired gap (r + h v = 1 m + 1 s x 1 m/s) at 1 m/s
    assert obs[INDEX["v"]] == 1.0 and obs[INDEX["desired_gap"]] == pytest.approx(2.0)
    env.close()


def test_a_policy_that_is_the_acc_law_gives_the_acc_runs_trace(tmp_path):
    """The ACC computed from the observation drives robot3 (id 4); every robot's x, y and v at every decision equal
    those of a normal run. The policy repeats the law's arithmetic on the same float64 inputs (own speed, sensed gap and
    rate are the ports' values, unrounded), so the traces agree to the last bit; 1e-12 m leaves room only for a
    different order of the same operations, not for a command a step late (mm) or a wrong gain (cm)."""
    run = traced(ACC_PLATOON, tmp_path, seed=7)
    env = PlatoonEnv(parse_scenario(ACC_PLATOON, overrides=["outputs.trace=false"]))
    accels = []

    def policy(obs, info):
        accels.append(acc_policy(obs)[0])
        return acc_policy(obs)

    agent, _, steps = drive(env, 7, policy)
    assert steps == 600  # 12 s at 20 ms
    assert compare(agent, run) <= 1e-12
    assert np.ptp(accels) > 0.3  # the law had work to do (the leader's speed swings by 0.8 m/s)
    assert max(np.abs(accels)) < 3.0  # within the vehicle's limits, which the action space would clip
    late = PlatoonEnv(parse_scenario(ACC_PLATOON, overrides=["outputs.trace=false"]))
    held: list[np.ndarray] = [np.zeros(1)]

    def one_late(obs, info):  # the same law acting one decision late: the comparison must see it
        out, held[0] = held[0], acc_policy(obs)
        return out

    agent_late, _, _ = drive(late, 7, one_late)
    assert compare(agent_late, run) > 1e-4


def test_passing_the_elacc_laws_own_acceleration_gives_the_platoon_runs_trace_bit_for_bit(tmp_path):
    """On the AuNa S-curve the extended look-ahead CACC steers and accelerates; the agent hands back the law's
    acceleration (``info["law_accel"]``) and the robots' trace is that of ``coopsim run`` exactly."""
    text = PLATOON.read_text()
    short = ["duration_s=14.0", "outputs.plots=false", "outputs.report=false"]
    run = traced(text.replace("duration_s: 40.0", "duration_s: 14.0").replace("plots: true", "plots: false")
                 .replace("report: true", "report: false"), tmp_path, seed=42)
    env = PlatoonEnv(PLATOON, overrides=short)
    agent, _, steps = drive(env, 42, lambda obs, info: info["law_accel"])
    assert steps == 700
    assert compare(agent, run) == 0.0
    # the curve began: the leader (id 1) has moved sideways by metres, robot3 (id 4), 6 s behind it, by centimetres
    assert np.ptp(agent[1][:, 2]) > 1.0 and np.ptp(agent[4][:, 2]) > 0.05


def test_over_its_g5_every_episode_of_a_seed_is_the_runs_trace(tmp_path):
    """ITS-G5 draws every loss and delay from keyed streams of the seed; an episode is a copy of the world set up
    with that seed, so the first episode, one after another seed and a fresh environment's all give the run's trace
    exactly (a copy that shared a stream, a cache or a station's state with another would not)."""
    text = PLATOON.read_text().replace("duration_s: 40.0", "duration_s: 6.0").replace("type: ideal", "type: itsg5")
    run = traced(text.replace("plots: true", "plots: false").replace("report: true", "report: false"), tmp_path, 9)
    overrides = ["duration_s=6.0", "channel.type=itsg5"]
    env = PlatoonEnv(PLATOON, overrides=overrides)
    law = lambda obs, info: info["law_accel"]  # noqa: E731
    first, _, _ = drive(env, 9, law)
    drive(env, 10, law)
    again, _, _ = drive(env, 9, law)
    assert compare(first, run) == 0.0 and compare(again, run) == 0.0
    assert env.live.federates["v2x"].model.__class__.__name__ == "ItsG5Channel"


def test_reset_is_deterministic_per_seed_and_follows_the_seed():
    """With odometry and GNSS noise (keyed by the seed), an episode depends on its seed only: the same seed twice
    (with another in between) gives the same observations bit for bit, another seed other ones."""
    env = PlatoonEnv(PLATOON, overrides=["duration_s=2.0", "physics.estimate=odometry_gnss"])
    policy = lambda obs, info: np.array([0.1 * np.sin(info["t_s"])])  # noqa: E731
    first, _, _ = drive(env, 5, policy)
    other, _, _ = drive(env, 6, policy)
    again, _, _ = drive(env, 5, policy)
    fresh, _, _ = drive(PlatoonEnv(PLATOON, overrides=["duration_s=2.0", "physics.estimate=odometry_gnss"]), 5, policy)
    for rid in first:
        assert np.array_equal(first[rid], again[rid]) and np.array_equal(first[rid], fresh[rid])
    assert any(not np.array_equal(first[rid], other[rid]) for rid in first)
    obs_a = env.reset(seed=5)[0]
    obs_b = env.reset(seed=6)[0]
    assert not np.array_equal(obs_a, obs_b)  # the estimate's noise at t = 0 differs
    obs_c = env.reset(seed=5)[0]
    assert np.array_equal(obs_a, obs_c) and env.seed_used == 5


def test_reset_copies_the_built_world_and_costs_a_fraction_of_building_it(monkeypatch):
    """A reset neither rebuilds the world nor resolves the robots again (both are made to fail after the first
    build), also with a seed never used before; and it costs less than a new environment's first reset (a third of it
    for a seed seen before)."""
    env = PlatoonEnv(PLATOON)
    env.reset(seed=1)

    def forbidden(*args, **kwargs):
        raise AssertionError("reset rebuilt the world")

    with monkeypatch.context() as patch:
        patch.setattr(episodes, "build_world", forbidden)
        patch.setattr(episodes, "expand_robots", forbidden)
        env.reset(seed=2)
        env.reset(seed=12345)
        env.reset()
    seeds = iter(range(100, 10_000))
    reset_new, reset_seen, first = best_times(lambda: env.reset(seed=next(seeds)), lambda: env.reset(seed=1),
                                              lambda: PlatoonEnv(PLATOON).reset(seed=1), rounds=5)
    # against a new environment's first reset (the scenario read, the world built, its first instant run: 7.5 ms
    # quiet): a seed seen before is one copy of the kept world (0.14 x); a new seed also sets the copy up and runs
    # its first instant (0.59 x), still cheaper than building, which it never does (made to fail above)
    assert reset_seen < first / 3 and reset_new < first, (reset_seen, reset_new, first)


def test_a_collision_terminates_with_the_penalty_and_the_end_truncates():
    env = PlatoonEnv(PLATOON, overrides=["duration_s=30.0"])
    env.reset(seed=1)
    full = np.array([3.0])
    steps = 0
    while True:
        _, reward, terminated, truncated, info = env.step(full)
        steps += 1
        if terminated or truncated:
            break
    assert terminated and not truncated
    assert reward < -env.weights.collision
    assert env.live.federates["physics"].collisions[0][1:] == (3, 4)  # robot3 (id 4) ran into robot2 (id 3)
    # at 3 m/s^2 from a 1 m bumper gap closing at about 1.5 m/s: well within the first 2 s
    assert steps * env.period_s < 2.0
    short = PlatoonEnv(PLATOON, overrides=["duration_s=1.0"])
    _, info = short.reset(seed=1)
    ends = []
    for _ in range(50):
        _, _, terminated, truncated, info = short.step(info["law_accel"])
        ends.append((terminated, truncated))
    assert ends[-1] == (False, True) and all(end == (False, False) for end in ends[:-1])  # 1 s at 20 ms: 50 steps
    assert info["t_s"] == 1.0


def test_the_reward_is_the_documented_one():
    """r = -(w_e e^2 + w_j j^2): a constant acceleration after the first step has no jerk, and e is the true spacing
    error (ground truth, rear axle to rear axle for the look-ahead CACC)."""
    env = PlatoonEnv(PLATOON, overrides=["duration_s=1.0"])
    env.reset(seed=1)
    _, _, _, _, info = env.step(np.array([0.5]))
    assert info["jerk_mps3"][0] == pytest.approx(0.5 / 0.02)
    _, second, _, _, info = env.step(np.array([0.5]))
    assert info["jerk_mps3"][0] == 0.0
    state = env.live.scheduler.bus["state"]
    gap = np.hypot(state["x"][2] - state["x"][3], state["y"][2] - state["y"][3])
    error = gap - info["desired_gap_m"][0]
    assert info["spacing_error_m"][0] == pytest.approx(error, abs=1e-12)
    assert second == pytest.approx(-(error**2))


def test_a_vector_of_copies_steps_each_like_a_single_environment():
    vec = gymnasium.make_vec("coopsim/Platoon-v0", num_envs=3, vectorization_mode="vector_entry_point",
                             scenario=str(PLATOON), overrides=["duration_s=1.0"])
    obs, _ = vec.reset(seed=[3, 4, 5])
    assert obs.shape == (3, len(INDEX))
    single = PlatoonEnv(PLATOON, overrides=["duration_s=1.0"])
    actions = np.array([[0.2], [-0.3], [0.0]])
    singles = []
    for k in range(3):
        single.reset(seed=3 + k)
        singles.append([single.step(actions[k])[:2] for _ in range(5)])
    for step in range(5):
        obs, reward, _, _, _ = vec.step(actions)
        for k in range(3):
            assert np.array_equal(obs[k], singles[k][step][0]) and reward[k] == singles[k][step][1]
    vec.close()


def test_seedless_resets_give_the_same_episodes_in_every_environment_and_copies_differ():
    """Without a seed, the first episode runs the scenario's seed and the generator that draws the later episodes'
    seeds is seeded by it (not by the operating system), so two fresh environments, like two processes, run the same
    sequence; copy k of a vector starts from the scenario's seed + k."""

    def seeds(env: PlatoonEnv) -> list[int | None]:
        out = []
        for _ in range(3):
            env.reset()
            out.append(env.seed_used)
        return out

    first, again = seeds(PlatoonEnv(PLATOON)), seeds(PlatoonEnv(PLATOON))
    assert first == again and first[0] == 42 and len(set(first)) == 3  # scenarios/platoon.yaml: seed 42
    original = PlatoonEnv(PLATOON)
    assert [seeds(original.sibling(k))[0] for k in (1, 2)] == [43, 44]


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_a_non_finite_action_is_refused(bad):
    env = PlatoonEnv(PLATOON, overrides=["duration_s=1.0"])
    env.reset(seed=1)
    with pytest.raises(ValueError, match="finite"):
        env.step(np.array([bad]))


def test_resets_with_ever_new_seeds_keep_a_bounded_memory():
    """Each new seed's set-up world is kept (at most ``SEEDS_KEPT``) with what its copies share; an evicted one takes
    its shared objects with it, so training with a new seed per episode does not grow the environment."""
    from orchestrator.gym.episodes import SEEDS_KEPT

    env = PlatoonEnv(PLATOON)
    env.reset(seed=1)
    episodes = env._episodes
    base = len(episodes._shared)
    for seed in range(2, 2 + 3 * SEEDS_KEPT):
        env.reset(seed=seed)
    assert len(episodes._set_up) == SEEDS_KEPT and len(episodes._shared) == base
