"""A cache of the gain quantile tables of the propagation model, in memory and on disk.

Tabulating the quantile function of shadowing times Nakagami fading integrates the gamma CDF over a fine grid
(``radio.gain_quantiles``: about two million incomplete-gamma evaluations per distance class), which costs 0.2-0.5 s
per class, so an ITS-G5 run with the default radio spent about a second building tables that never change for the
same parameters. The tables are kept by the exact inputs that determine them (shadowing sigma, Nakagami m, the
quantile grid and a version of the computation), so a cached table is bit for bit the one computed: traces and
digests do not depend on whether the cache was warm.

Where: ``$COOPSIM_CACHE_DIR``, else ``$NUMBA_CACHE_DIR/coopsim`` (the compiled-kernel cache of an image or cluster
worker), else ``~/.cache/coopsim``. A directory that cannot be written only costs the computation; a file that
cannot be read as the expected table is ignored and recomputed. Files are ``.npy`` read with pickling refused.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

CACHE_ENV = "COOPSIM_CACHE_DIR"
"""Environment variable naming the cache directory."""

VERSION = "gain-quantiles-1"
"""Part of every key: bump it whenever ``radio.gain_quantiles`` computes differently."""

_MEMORY: dict[str, np.ndarray] = {}


def cache_dir() -> Path:
    """The directory of coopsim's computed tables (see the module docstring)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    if os.environ.get("NUMBA_CACHE_DIR"):
        return Path(os.environ["NUMBA_CACHE_DIR"]).expanduser() / "coopsim"
    return Path.home() / ".cache" / "coopsim"


def _key(sigma_db: float, m: float | None, q: np.ndarray) -> str:
    digest = hashlib.sha256(f"{VERSION}|{float(sigma_db)!r}|{m if m is None else float(m)!r}|".encode())
    digest.update(np.ascontiguousarray(q, np.float64).tobytes())
    return digest.hexdigest()[:40]


def cached_gains(compute: Callable[[float, float | None, np.ndarray], np.ndarray], sigma_db: float,
                 m: float | None, q: np.ndarray) -> np.ndarray:
    """``compute(sigma_db, m, q)``, from the cache when it holds that table (a fresh copy either way)."""
    key = _key(sigma_db, m, q)
    table = _MEMORY.get(key)
    if table is None:
        table = _load(key, len(q))
    if table is None:
        table = np.asarray(compute(sigma_db, m, q), np.float64)
        _store(key, table)
    _MEMORY[key] = table
    return table.copy()


def _load(key: str, size: int) -> np.ndarray | None:
    try:
        table = np.load(cache_dir() / f"{key}.npy", allow_pickle=False)
    except (OSError, ValueError, EOFError):
        return None
    if table.dtype != np.float64 or table.shape != (size,) or not np.all(np.isfinite(table)):
        return None
    return table


def _store(key: str, table: np.ndarray) -> None:
    directory = cache_dir()
    temporary = None
    try:
        directory.mkdir(parents=True, exist_ok=True)
        # written whole under a temporary name, then renamed: a reader never sees half a table
        with tempfile.NamedTemporaryFile(dir=directory, prefix=f".{key}.", suffix=".npy", delete=False) as handle:
            temporary = Path(handle.name)
            np.save(handle, table, allow_pickle=False)
        os.replace(temporary, directory / f"{key}.npy")
    except OSError:  # a read-only or full disk: the table is simply computed again next time
        if temporary is not None:
            temporary.unlink(missing_ok=True)
