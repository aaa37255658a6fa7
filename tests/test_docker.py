"""The compose file is valid and the image copies what exists (no Docker engine is needed for these checks)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_dockerfile_copies_existing_paths_and_installs_the_project():
    text = (REPO / "docker" / "Dockerfile").read_text()
    sources = [src for line in re.findall(r"^COPY (.+)$", text, re.M) for src in line.split()[:-1]]
    assert sources, "no COPY lines"
    for src in sources:
        assert (REPO / src).exists(), src
    assert "pip install --no-cache-dir ." in text


def test_compose_file_validates():
    exe = shutil.which("docker-compose")
    if exe is None:
        pytest.skip("docker-compose is not installed (make test installs it)")
    proc = subprocess.run([exe, "-f", "docker/compose.yaml", "config"], cwd=REPO, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "platoon:" in proc.stdout and "/runs/platoon" in proc.stdout
