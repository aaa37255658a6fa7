"""The image and the compose file, checked without a Docker engine: the Dockerfile copies what exists and is built
the way its comments say, ``docker-compose config`` accepts the compose file, and every service of the default
profile runs as a local process with the service's command and environment (the orchestrator and three
``coopsim host`` processes on loopback), giving the digest of a run in one process."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.runner import run_scenario
from orchestrator.scenario import ScenarioError, parse_scenario
from tests.orchestrator.processes import free_port, stop

REPO = Path(__file__).resolve().parents[1]
DOCKER = REPO / "docker"
HOSTS = ("physics", "v2x", "control")


def test_dockerfile_is_multi_stage_non_root_and_copies_existing_paths():
    text = (DOCKER / "Dockerfile").read_text()
    copies = [line.split() for line in re.findall(r"^COPY (.+)$", text, re.M)]
    sources = [src for words in copies if not words[0].startswith("--from") for src in words[:-1]]
    assert sources, "no COPY lines"
    for src in sources:
        assert (REPO / src).exists(), src
    stages = re.findall(r"^FROM (\S+)(?: AS (\S+))?$", text, re.M)
    assert len(stages) == 2 and stages[0][1] == "build"
    assert ["--from=build", "/opt/venv", "/opt/venv"] in copies  # the runtime takes only the environment
    assert 'pip install --no-cache-dir ".[cluster,mcap]"' in text
    user = re.findall(r"^USER (\S+)$", text, re.M)
    assert user == ["coopsim"] and "useradd --uid 1000" in text
    # the numba cache is warmed by a run at build time, in a directory any UID may read
    assert re.search(r"coopsim run scenarios/platoon\.yaml .*--set duration_s=1", text)
    assert "NUMBA_CACHE_DIR=/var/cache/coopsim/numba" in text and "chmod -R a+rwX /var/cache/coopsim" in text
    # no entry point, so the image also runs `dask worker` for a cluster
    assert "ENTRYPOINT" not in text and re.search(r'^CMD \["coopsim", "compare"', text, re.M)


def interpolate(value: Any, env: Mapping[str, str]) -> Any:
    """Compose's ``${VAR}`` and ``${VAR:-default}`` (default when unset or empty), through lists and mappings."""
    if isinstance(value, str):
        return re.sub(r"\$\{(\w+)(?::-([^}]*))?\}", lambda m: env.get(m[1]) or (m[2] or ""), value)
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    return value


def compose(env: Mapping[str, str]) -> dict[str, Any]:
    """docker/compose.yaml with its anchors merged and the variables of ``env`` substituted."""
    return interpolate(yaml.safe_load((DOCKER / "compose.yaml").read_text()), env)


def test_compose_file_validates():
    exe = shutil.which("docker-compose")
    if exe is None:
        pytest.skip("docker-compose is not installed (make test installs it)")
    proc = subprocess.run([exe, "-f", "docker/compose.yaml", "config", "-q"], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    env = {k: v for k, v in os.environ.items() if k not in ("ROBOTS", "SCENARIO")}
    for robots in ("4", "8"):
        proc = subprocess.run([exe, "-f", "docker/compose.yaml", "config"], cwd=REPO, capture_output=True,
                              text=True, timeout=60, env={**env, "ROBOTS": robots})
        assert proc.returncode == 0, proc.stderr
        assert f"vehicles.count={robots}" in proc.stdout
        # what the local runs below execute is what compose itself would: the same commands and users
        resolved = yaml.safe_load(proc.stdout)["services"]
        ours = compose({**env, "ROBOTS": robots})["services"]
        assert set(resolved) == set(ours)
        for name, service in resolved.items():
            assert service["command"] == ours[name]["command"] and service["user"] == ours[name]["user"]


def test_compose_services_start_in_order_with_health_checks_as_the_caller():
    services = compose({})["services"]
    default = {name for name, s in services.items() if "profiles" not in s}
    assert default == {"orchestrator", *HOSTS}
    assert services["platoon"]["profiles"] == ["single"]  # the one-container form stays
    assert "/runs/platoon" in services["platoon"]["command"]
    for name in HOSTS:
        assert services[name]["command"][:2] == ["coopsim", "host"]
        assert services[name]["healthcheck"]["test"][0] == "CMD"
    assert services["orchestrator"]["depends_on"] == {h: {"condition": "service_healthy"} for h in HOSTS}
    for s in services.values():
        assert s["user"] == "1000:1000" and s["image"] == "coopsim:latest"
    assert compose({"UID": "1234", "GID": "99"})["services"]["orchestrator"]["user"] == "1234:99"
    assert "../runs:/runs" in services["orchestrator"]["volumes"]


# -- the services as local processes ------------------------------------------------------------------------------
class LocalCompose:
    """Runs compose services as processes here: service names and 0.0.0.0 become 127.0.0.1, each compose port a
    free port (other tests on this machine may hold the fixed ones), ``/runs`` a directory, ``coopsim`` and
    ``python`` this interpreter."""

    def __init__(self, runs: Path) -> None:
        self.runs = runs
        self.ports: dict[str, str] = {}
        self.procs: list[subprocess.Popen] = []

    def localise(self, arg: str, names: list[str]) -> str:
        arg = re.sub(r"\b(?:0\.0\.0\.0|" + "|".join(map(re.escape, names)) + r")(?=:\d)", "127.0.0.1", arg)
        arg = re.sub(r"\b(5\d{4})\b", lambda m: self.ports.setdefault(m[1], str(free_port())), arg)
        return re.sub(r"^/runs(?=/|$)", str(self.runs), arg)

    def argv(self, command: list[str], names: list[str], entry: list[str]) -> list[str]:
        return [*entry, *(self.localise(a, names) for a in command)]

    def env(self, service: Mapping[str, Any]) -> dict[str, str]:
        return {**os.environ, "PYTHONPATH": str(REPO), **{k: str(v) for k, v in
                                                          (service.get("environment") or {}).items()}}

    def coopsim(self, service: Mapping[str, Any], names: list[str]) -> list[str]:
        command = service["command"]
        assert command[0] == "coopsim", command  # the image has no entry point
        return self.argv(command[1:], names, [sys.executable, "-m", "orchestrator.cli"])

    def start(self, name: str, service: Mapping[str, Any], names: list[str]) -> None:
        argv = self.coopsim(service, names)
        log = (self.runs.parent / f"{name}.log").open("w")
        self.procs.append(subprocess.Popen(argv, cwd=REPO, env=self.env(service), stdout=log,
                                           stderr=subprocess.STDOUT))

    def wait_healthy(self, service: Mapping[str, Any], names: list[str]) -> None:
        check = service["healthcheck"]
        test = check["test"]
        assert test[0] == "CMD" and test[1] == "python"
        argv = self.argv(test[2:], names, [sys.executable])
        for _ in range(int(check["retries"]) * 3):  # a loaded machine: three times compose's patience
            if subprocess.run(argv, cwd=REPO, capture_output=True, timeout=30).returncode == 0:
                return
            time.sleep(float(check["interval"].rstrip("s")))
        raise AssertionError(f"never healthy: {argv}")

    def run(self, service: Mapping[str, Any], names: list[str]) -> subprocess.CompletedProcess:
        argv = self.coopsim(service, names)
        return subprocess.run(argv, cwd=REPO, env=self.env(service), capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def local_compose(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCompose, Path]]:
    """The three hosts of the compose file, started as their services say and healthy; a short copy of the
    platoon scenario to give as SCENARIO."""
    root = tmp_path_factory.mktemp("compose")
    short = root / "short.yaml"
    short.write_text((REPO / "scenarios" / "platoon.yaml").read_text().replace("duration_s: 40.0", "duration_s: 3.0")
                     .replace("plots: true", "plots: false").replace("report: true", "report: false"))
    (root / "runs").mkdir()
    local = LocalCompose(root / "runs")
    services = compose({"SCENARIO": str(short)})["services"]
    names = list(services)
    try:
        for name in HOSTS:
            local.start(name, services[name], names)
        for name in HOSTS:
            local.wait_healthy(services[name], names)
        yield local, short
    finally:
        for proc in local.procs:
            stop(proc)


@pytest.mark.parametrize("robots", [None, "8"])
def test_the_compose_services_give_the_in_process_digest(local_compose, robots):
    local, short = local_compose
    env = {"SCENARIO": str(short), "RUN_NAME": f"robots-{robots or 'default'}", **({"ROBOTS": robots} if robots
                                                                                     else {})}
    services = compose(env)["services"]
    proc = local.run(services["orchestrator"], list(services))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run_dir = local.runs / env["RUN_NAME"]
    info = yaml.safe_load((run_dir / "run.json").read_text())
    assert info["status"] == "ok" and info["robots"] == int(robots or 4)
    resolved = yaml.safe_load((run_dir / "scenario.resolved.yaml").read_text())
    remote = resolved["execution"]["remote"]
    assert set(remote) == set(HOSTS) and all(a.startswith("127.0.0.1:") for a in remote.values())
    assert {a.rsplit(":", 1)[1] for a in remote.values()} == {local.ports[p] for p in ("50051", "50052", "50053")}
    # the same scenario and robot count in this process
    reference = parse_scenario(short.read_text(), str(short),
                               [f"vehicles.count={robots or 4}", "platoon.size=null"])
    result = run_scenario(reference, local.runs.parent / f"in-process-{robots}")
    assert result.ok and result.run_info["robots"] == int(robots or 4)
    assert info["digest"] == result.run_info["digest"]


def test_a_bad_remote_address_is_an_error_naming_the_field():
    with pytest.raises(ScenarioError, match=r"execution\.remote.*remote\.physics must be 'host:port'"):
        parse_scenario((REPO / "scenarios" / "platoon.yaml").read_text(),
                       overrides=["execution.remote={physics: 'physics'}"])
    with pytest.raises(ScenarioError, match=r"execution\.remote"):
        parse_scenario((REPO / "scenarios" / "platoon.yaml").read_text(),
                       overrides=["execution.remote={sumo: '127.0.0.1:50051'}"])
