"""Kernels whose compiled helpers or constants live in other modules, cached safely.

numba's on-disk cache (``cache=True``) keys a compiled function by the stamp (modification time and size) of the
file that defines it and nothing else: helpers it calls from another file are compiled into its machine code, and
module constants are frozen into it, so after an edit of that other file the cache would keep loading the old code.
``depends_on(globals(), module, ...)`` at the end of a kernel module adds the stamps of the named modules' files to
the stamp of every cached kernel defined there: an edit of any of them misses the cache and compiles the kernel
again. ``tests/test_architecture.py`` checks that a cached kernel calls compiled functions and reads constants of
other modules only when its module names them this way.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any


def _stamp(path: str) -> tuple[float, int]:
    st = os.stat(path)
    return st.st_mtime, st.st_size  # what numba itself stamps a kernel's own file with


def depends_on(namespace: dict[str, Any], *modules: ModuleType) -> None:
    """The cached kernels defined in the module of ``namespace`` (its ``globals()``) miss numba's cache whenever
    the file of one of ``modules`` changes. Call it once, after the module's last kernel, before any is run."""
    extra = tuple(_stamp(str(m.__file__)) for m in modules)
    for value in list(namespace.values()):
        py_func = getattr(value, "py_func", None)
        cache = getattr(value, "_cache", None)
        if py_func is None or py_func.__module__ != namespace["__name__"] or cache is None:
            continue  # not a kernel of this module
        cache_file = getattr(cache, "_cache_file", None)
        if cache_file is None:
            continue  # compiled anew in each process (no ``cache=True``): nothing can go stale
        if not hasattr(cache_file, "_source_stamp"):  # pragma: no cover - a numba that keeps its stamp elsewhere
            raise RuntimeError(f"{py_func.__qualname__}: numba's cache has no source stamp to extend; "
                               "core/kernel_cache.py needs updating for this numba version")
        cache_file._source_stamp = (cache_file._source_stamp, extra)
