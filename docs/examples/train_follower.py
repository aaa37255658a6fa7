"""Train the last follower of the AuNa platoon with PPO (stable-baselines3) and compare it with the built-in CACC.

    pip install -e '.[gym]' stable-baselines3        # stable-baselines3 is not one of coopsim's extras
    python docs/examples/train_follower.py --timesteps 200000
    python docs/examples/train_follower.py --baseline-only   # the CACC's figures alone (no stable-baselines3)

The agent drives robot3's acceleration; its extended look-ahead CACC still steers it. The baseline is the same
environment with the law's own acceleration handed back (``info["law_accel"]``), which is exactly ``coopsim run``
of the scenario. Both are evaluated on the same seeds and compared on the reward, the RMS and largest spacing error
and the RMS jerk. Not run by the test suite (training takes minutes to hours).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import gymnasium
import numpy as np

import orchestrator.gym  # noqa: F401 - registers coopsim/Platoon-v0

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "platoon.yaml"
Policy = Callable[[np.ndarray, dict], np.ndarray]


def make_env(duration_s: float) -> gymnasium.Env:
    """The environment as PPO likes it: actions in [-1, 1] (rescaled to the vehicle's limits)."""
    env = gymnasium.make("coopsim/Platoon-v0", scenario=str(SCENARIO), overrides=[f"duration_s={duration_s}"])
    return gymnasium.wrappers.RescaleAction(env, -1.0, 1.0)


def evaluate(env: gymnasium.Env, policy: Policy, seeds: list[int]) -> dict[str, float]:
    """Mean episode reward, RMS and largest |spacing error| [m], RMS jerk [m/s^3] and collisions over ``seeds``."""
    rewards, errors, jerks, collisions = [], [], [], 0
    for seed in seeds:
        obs, info = env.reset(seed=seed)
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, info = env.step(policy(obs, info))
            total += reward
            errors.append(float(info["spacing_error_m"][0]))
            jerks.append(float(info["jerk_mps3"][0]))
            collisions += int(terminated)
            done = terminated or truncated
        rewards.append(total)
    e, j = np.array(errors), np.array(jerks)
    return {"reward": float(np.mean(rewards)), "rms_error_m": float(np.sqrt(np.mean(e**2))),
            "max_error_m": float(np.abs(e).max()), "rms_jerk_mps3": float(np.sqrt(np.mean(j**2))),
            "collisions": float(collisions)}


def cacc(env: gymnasium.Env) -> Policy:
    """The built-in law's own acceleration, mapped into the rescaled action range."""
    box = env.unwrapped.action_space

    def policy(obs: np.ndarray, info: dict) -> np.ndarray:
        return 2.0 * (info["law_accel"] - box.low) / (box.high - box.low) - 1.0

    return policy


def train(env: gymnasium.Env, timesteps: int, seed: int) -> Policy:
    """PPO on the environment; its deterministic action as a policy."""
    from stable_baselines3 import PPO

    model = PPO("MlpPolicy", env, seed=seed, n_steps=2048, batch_size=256, gamma=0.99, verbose=1)
    model.learn(total_timesteps=timesteps)
    return lambda obs, info: model.predict(obs, deterministic=True)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--timesteps", type=int, default=200_000, help="PPO training steps (decisions of 20 ms)")
    parser.add_argument("--duration", type=float, default=40.0, help="episode length [s] (the scenario's: 40)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--baseline-only", action="store_true", help="evaluate the CACC alone")
    args = parser.parse_args()
    env = make_env(args.duration)
    seeds = [1000 + k for k in range(3)]
    rows = {"CACC (built-in)": evaluate(env, cacc(env), seeds)}
    if not args.baseline_only:
        rows["PPO"] = evaluate(env, train(make_env(args.duration), args.timesteps, args.seed), seeds)
    print(f"{'policy':<16} {'reward':>10} {'RMS e [m]':>10} {'max |e| [m]':>12} {'RMS jerk':>10} {'collisions':>10}")
    for name, r in rows.items():
        print(f"{name:<16} {r['reward']:>10.3f} {r['rms_error_m']:>10.4f} {r['max_error_m']:>12.4f} "
              f"{r['rms_jerk_mps3']:>10.3f} {r['collisions']:>10.0f}")


if __name__ == "__main__":
    main()
