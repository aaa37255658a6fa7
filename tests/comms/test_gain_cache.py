"""The gain table cache gives back exactly what the computation gives, survives a damaged or hostile cache file
and a directory it cannot write, and a run's digest does not depend on whether the cache was warm."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest

from comms_models.itsg5 import gain_cache
from comms_models.itsg5.params import RadioParams
from comms_models.itsg5.radio import _quantile_grid, build_tables, gain_quantiles
from orchestrator.runner import run_scenario
from orchestrator.scenario.loader import parse_scenario


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(gain_cache.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(gain_cache, "_MEMORY", {})
    return tmp_path / "cache"


def test_a_cached_table_is_bit_for_bit_the_computed_one(cache):
    q = _quantile_grid()
    direct = gain_quantiles(6.0, 1.5, q)
    first = gain_cache.cached_gains(gain_quantiles, 6.0, 1.5, q)
    assert len(list(cache.glob("*.npy"))) == 1
    gain_cache._MEMORY.clear()  # the next one comes from the disk
    calls = []
    second = gain_cache.cached_gains(lambda *a: calls.append(a) or gain_quantiles(*a), 6.0, 1.5, q)
    assert calls == [] and np.array_equal(direct, first) and np.array_equal(direct, second)
    second[0] = -1.0  # a caller may change its copy without changing the cache
    assert gain_cache.cached_gains(gain_quantiles, 6.0, 1.5, q)[0] == direct[0]


def test_every_input_is_part_of_the_key(cache):
    q = _quantile_grid()
    tables = [gain_cache.cached_gains(gain_quantiles, s, m, q) for s, m in ((6.0, 1.5), (6.0, 0.75), (3.0, 1.5),
                                                                          (6.0, None))]
    assert len(list(cache.glob("*.npy"))) == 4
    assert all(not np.array_equal(a, b) for i, a in enumerate(tables) for b in tables[i + 1:])


@pytest.mark.parametrize("damage", ["garbage", "wrong_shape", "not_finite", "pickled"])
def test_a_damaged_or_hostile_cache_file_is_ignored_and_replaced(cache, damage):
    q = _quantile_grid()
    gain_cache.cached_gains(gain_quantiles, 6.0, 1.5, q)
    (path,) = cache.glob("*.npy")
    if damage == "garbage":
        path.write_bytes(b"\x93NUMPY not really")
    elif damage == "wrong_shape":
        np.save(path, np.ones(3))
    elif damage == "not_finite":
        np.save(path, np.full(len(q), np.nan))
    else:  # an object array would need unpickling to load: refused, never run
        path.write_bytes(pickle.dumps(np.ones(len(q))))
    gain_cache._MEMORY.clear()
    table = gain_cache.cached_gains(gain_quantiles, 6.0, 1.5, q)
    assert np.array_equal(table, gain_quantiles(6.0, 1.5, q))
    assert np.array_equal(np.load(path, allow_pickle=False), table)  # replaced by the good table


@pytest.mark.slow
def test_a_directory_that_cannot_be_written_only_costs_the_computation(tmp_path, monkeypatch):
    blocked = tmp_path / "file-not-dir"
    blocked.write_text("x")
    monkeypatch.setenv(gain_cache.CACHE_ENV, str(blocked / "cache"))
    monkeypatch.setattr(gain_cache, "_MEMORY", {})
    q = _quantile_grid()
    assert np.array_equal(gain_cache.cached_gains(gain_quantiles, 6.0, 1.5, q), gain_quantiles(6.0, 1.5, q))
    assert build_tables(RadioParams()).gain_q.shape[0] >= 1


def test_the_cache_directory_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv(gain_cache.CACHE_ENV, raising=False)
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba"))
    assert gain_cache.cache_dir() == tmp_path / "numba" / "coopsim"
    monkeypatch.delenv("NUMBA_CACHE_DIR")
    assert gain_cache.cache_dir() == gain_cache.Path.home() / ".cache" / "coopsim"


RUN = """
name: cache-digest
duration_s: 2.0
step_s: 0.01
vehicles: {count: 4}
leader: {profile: constant, params: {speed_mps: 1.0}}
controller: {type: ela_cacc}
channel: {type: itsg5}
outputs: {plots: false, report: false}
"""


@pytest.mark.slow
def test_a_runs_digest_does_not_depend_on_the_cache(cache, tmp_path):
    cold = run_scenario(parse_scenario(RUN), tmp_path / "cold").run_info["digest"]
    assert any(cache.glob("*.npy"))
    gain_cache._MEMORY.clear()
    warm_disk = run_scenario(parse_scenario(RUN), tmp_path / "disk").run_info["digest"]
    warm_memory = run_scenario(parse_scenario(RUN), tmp_path / "memory").run_info["digest"]
    assert cold == warm_disk == warm_memory
    assert os.listdir(cache)  # still there for the next process
