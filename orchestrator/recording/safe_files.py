"""Writing output files that are complete or absent, never through a link.

A run directory handed to ``coopsim metrics``, ``coopsim mcap`` or ``coopsim compare`` is input that may have been
made by anyone: a ``plots`` entry that is a link to a system directory, or a ``report.html`` that is a link to some
other file, must not make coopsim write there. And a disk that fills up must not leave a ``run.json`` of 0 bytes or
a report cut in the middle. So every output file goes through ``write_atomic``:

- its directory must be a real directory (``lstat``), not a link to one;
- an existing link in the file's place is refused, not followed;
- the bytes go to a new temporary file beside it (``O_CREAT | O_EXCL | O_NOFOLLOW``) which then replaces the file
  in one ``os.replace``: a reader sees the old file or the whole new one, and a failed write leaves no trace.

``OutputPathError`` is bad input (exit 2); ``is_disk_full`` tells an ``OSError`` of a full disk or quota apart.
"""

from __future__ import annotations

import errno
import io
import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any

DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
"""A full file system, an exhausted quota, a file grown past the file system's limit."""


class OutputPathError(ValueError):
    """An output path is a link, or something other than the regular file or directory expected there."""


def is_disk_full(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or what caused it) is a full disk or quota."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS:
            return True
        exc = getattr(exc, "cause", None) or exc.__cause__
        seen += 1
    return False


def _kind(path: Path) -> int | None:
    """The ``st_mode`` of ``path`` itself (a link is not followed); None when nothing is there."""
    try:
        return os.lstat(path).st_mode
    except FileNotFoundError:
        return None


def _refuse_link(path: Path, what: str) -> OutputPathError:
    return OutputPathError(f"{path} is a symbolic link: coopsim does not write {what} through links (remove the "
                           "link, or give another directory)")


def check_dir(path: Path) -> None:
    """Raise OutputPathError when ``path`` exists and is a link or not a directory."""
    mode = _kind(path)
    if mode is None:
        return
    if stat.S_ISLNK(mode):
        raise _refuse_link(path, "into a directory")
    if not stat.S_ISDIR(mode):
        raise OutputPathError(f"{path} is not a directory")


def check_file(path: Path) -> None:
    """Raise OutputPathError when ``path`` exists and is a link or not a regular file (a directory, a FIFO ...)."""
    mode = _kind(path)
    if mode is None:
        return
    if stat.S_ISLNK(mode):
        raise _refuse_link(path, "a file")
    if not stat.S_ISREG(mode):
        raise OutputPathError(f"{path} is not a regular file")


def ensure_dir(path: Path) -> Path:
    """``path`` as a real directory, created when missing (with its parents, which the caller named); a link or a
    file in its place is refused."""
    path = Path(path)
    check_dir(path)
    path.mkdir(parents=True, exist_ok=True)
    check_dir(path)  # a link put there meanwhile
    return path


def check_outputs(root: Path, files: Iterable[str] = (), dirs: Iterable[str] = ()) -> None:
    """Refuse, before anything is written, a link (or a non-regular entry) among ``files`` and ``dirs`` (paths
    relative to ``root``) and among the entries of each directory of ``dirs`` that exists (e.g. ``plots/*.png``).
    ``root`` itself is the directory the user named and may be a link."""
    root = Path(root)
    for name in dirs:
        path = root / name
        check_dir(path)
        if _kind(path) is not None:
            for entry in sorted(os.listdir(path)):
                check_file(path / entry)
    for name in files:
        parts = Path(name).parts
        for k in range(1, len(parts)):
            check_dir(root.joinpath(*parts[:k]))
        check_file(root / name)


def write_atomic(path: Path, data: bytes | str) -> Path:
    """Write ``data`` (str as UTF-8) to ``path`` whole or not at all, never through a link (see the module)."""
    path = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    parent = path.parent
    check_dir(parent)
    check_file(path)
    temp = parent / f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.part"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        try:
            view = memoryview(payload)
            while view:
                written = os.write(fd, view)
                view = view[written:]
        finally:
            os.close(fd)
        os.replace(temp, path)  # a link that appeared meanwhile is replaced, never followed
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return path


def save_figure(fig: Any, path: Path, dpi: int = 110) -> Path:
    """A matplotlib figure written as a PNG with ``write_atomic``."""
    buffer = io.BytesIO()
    fig.savefig(buffer, dpi=dpi, format="png")
    return write_atomic(path, buffer.getvalue())
