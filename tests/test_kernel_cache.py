"""``core.kernel_cache.depends_on``: a cached kernel whose helper and constant live in another file compiles again
after that file is edited, where numba alone would load the stale machine code (shown too, so the test can fail)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .tools.imports import REPO

HELPER = "from numba import njit\n\nSCALE = {scale}\n\n\n@njit(cache=True)\ndef helper(x):\n    return x + {add}\n"
KERNEL = (
    "from numba import njit\n\nimport helper as h\nfrom helper import SCALE, helper\n{declare}\n\n"
    "@njit(cache=True)\ndef kernel(x):\n    return helper(x) * SCALE\n\n\n{call}"
)
DECLARED = ("from core.kernel_cache import depends_on\n", "depends_on(globals(), h)\n")


def _run(folder: Path) -> tuple[int, int]:
    """The kernel's value at 1 and whether it was loaded from the cache (1) or compiled (0), in a new process."""
    code = "import kernel\nv = kernel.kernel(1)\nprint(v, sum(kernel.kernel.stats.cache_hits.values()))\n"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(folder / "cache"), "PYTHONPATH": f"{folder}{os.pathsep}{REPO}"}
    out = subprocess.run([sys.executable, "-c", code], cwd=folder, env=env, capture_output=True, text=True,
                         check=True)
    value, hits = out.stdout.split()
    return int(value), int(hits)


@pytest.mark.parametrize("declared", [True, False])
def test_an_edit_of_a_declared_module_compiles_the_kernel_again(tmp_path, declared):
    imports, call = DECLARED if declared else ("", "")
    (tmp_path / "kernel.py").write_text(KERNEL.format(declare=imports, call=call))
    (tmp_path / "helper.py").write_text(HELPER.format(scale=3, add=1))
    assert _run(tmp_path) == (6, 0)  # (1 + 1) * 3, compiled
    assert _run(tmp_path) == (6, 1)  # loaded from the cache: the stamp is stable
    (tmp_path / "helper.py").write_text(HELPER.format(scale=10, add=100))
    value, hits = _run(tmp_path)
    if declared:
        assert (value, hits) == (1010, 0)  # (1 + 100) * 10: the edit is seen
    else:
        assert (value, hits) == (6, 1)  # numba alone: the old helper and constant, from the cache
