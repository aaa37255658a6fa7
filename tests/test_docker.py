"""The image and the compose file. Without an engine: the Dockerfile copies what exists and is built the way its
comments say, ``docker-compose config`` accepts the compose file, and every service of the default profile runs as
a local process with the service's command and environment (the orchestrator and three ``coopsim host`` processes
on loopback), giving the digest of a run in one process. With a real Docker engine (tests marked ``docker``; ``make
test`` starts one as root, see docker/engine.sh): the image built once per session through compose (from the
official Python image when it is there or can be pulled, else from docker/make-base.sh's Debian base, with the
packages from ``make wheelhouse``), compose up of the default scenario and of ROBOTS=8 with the in-process
digests, a federate container killed mid-run, every shipped scenario, the ``single`` profile's comparison, the
SUMO variant, and the results folder's rules."""

from __future__ import annotations

import json
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

pytestmark = pytest.mark.docker  # needs a Docker engine

REPO = Path(__file__).resolve().parents[1]
DOCKER = REPO / "docker"
HOSTS = ("physics", "v2x", "control")
BASE = "python:3.11-slim-bookworm"


def test_dockerfile_is_multi_stage_non_root_and_copies_existing_paths():
    text = (DOCKER / "Dockerfile").read_text()
    copies = [line.split() for line in re.findall(r"^COPY (.+)$", text, re.M)]
    sources = [src for words in copies if not words[0].startswith("--from") for src in words[:-1]]
    assert sources, "no COPY lines"
    for src in sources:
        assert (REPO / src).exists(), src
    # the base is a build argument, the official slim Python image by default, the same for both stages
    assert re.search(r"^ARG BASE_IMAGE=python:3\.11-slim-bookworm$", text, re.M)
    stages = re.findall(r"^FROM (\S+)(?: AS (\S+))?$", text, re.M)
    assert stages == [("${BASE_IMAGE}", "build"), ("${BASE_IMAGE}", "")]
    for arg in ("EXTRAS", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST"):
        assert re.search(rf'^ARG {arg}=""$', text, re.M), arg
    assert ["--from=build", "/opt/venv", "/opt/venv"] in copies  # the runtime takes only the environment
    runtime = text.split("\nFROM ${BASE_IMAGE}\n", 1)[1]
    assert "docker/wheelhouse" not in runtime and "docker/ca" not in runtime  # wheels and CA stay in the build
    user = re.findall(r"^USER (\S+)$", text, re.M)
    assert user == ["coopsim"] and "useradd --uid 1000" in text
    # every kernel compiled and the font cache built before the scenarios are copied, in directories any UID may
    # read and extend
    assert runtime.index("python -m orchestrator.warm") < runtime.index("COPY scenarios scenarios")
    assert "import matplotlib.pyplot" in runtime
    assert "NUMBA_CACHE_DIR=/var/cache/coopsim/numba" in text and "MPLCONFIGDIR=/var/cache/coopsim/matplotlib" in text
    assert "chmod -R a+rwX /var/cache/coopsim" in text
    # no entry point, so the image also runs `dask worker` for a cluster
    assert "ENTRYPOINT" not in text and re.search(r'^CMD \["coopsim", "compare"', text, re.M)


def test_the_classic_builder_and_buildkit_ignore_the_same_files():
    ours = (DOCKER / "Dockerfile.dockerignore").read_text()
    assert (REPO / ".dockerignore").read_text() == ours
    ignored = {line for line in ours.splitlines() if line and not line.startswith("#")}
    assert {".git", ".venv", "runs", "tests"} <= ignored
    assert not any(p.startswith(("docker", "README", "scenarios", "pyproject")) for p in ignored)


def test_make_wheelhouse_uses_this_machines_pip_and_the_image_installs_without_an_index():
    make = (REPO / "Makefile").read_text()
    assert re.search(r"^wheelhouse:", make, re.M)
    assert '$(PIP) wheel -q --wheel-dir docker/wheelhouse ".[$(WHEEL_EXTRAS)]"' in make
    script = (DOCKER / "pip-install.sh").read_text()
    assert "PIP_NO_INDEX=1 PIP_FIND_LINKS=/tmp/wheelhouse" in script and "PIP_CERT=/tmp/pip-ca.pem" in script
    for folder in ("wheelhouse", "ca"):  # in the build context, never in git
        assert (DOCKER / folder / ".gitignore").read_text().splitlines()[1:] == ["*", "!.gitignore"]


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
        assert yaml.safe_load(proc.stdout)["services"]["orchestrator"]["environment"]["ROBOTS"] == robots
        # what the local runs below execute is what compose itself would: the same commands and users
        resolved = yaml.safe_load(proc.stdout)["services"]
        ours = compose({**env, "ROBOTS": robots})["services"]
        assert set(resolved) == set(ours)
        for name, service in resolved.items():
            assert service["command"] == ours[name]["command"] and service["user"] == ours[name]["user"]
            assert service["image"] == "coopsim:latest" and service["build"]["args"]["BASE_IMAGE"] == BASE


def test_compose_services_start_in_order_with_health_checks_as_the_caller():
    services = compose({})["services"]
    default = {name for name, s in services.items() if "profiles" not in s}
    assert default == {"orchestrator", *HOSTS}
    assert services["platoon"]["profiles"] == ["single"]  # the one-container form stays
    assert services["platoon"]["command"][:2] == ["coopsim-compose", "compare"]
    for name in HOSTS:
        assert services[name]["command"][:2] == ["coopsim", "host"]
        assert services[name]["healthcheck"]["test"][0] == "CMD"
    assert services["orchestrator"]["depends_on"] == {h: {"condition": "service_healthy"} for h in HOSTS}
    for s in services.values():
        assert s["user"] == "1000:1000" and s["image"] == "coopsim:latest"
        assert s["build"]["args"] == {"BASE_IMAGE": BASE, "EXTRAS": "", "PIP_INDEX_URL": "", "PIP_EXTRA_INDEX_URL": "",
                                      "PIP_TRUSTED_HOST": ""}
    assert compose({"UID": "1234", "GID": "99"})["services"]["orchestrator"]["user"] == "1234:99"
    assert compose({"IMAGE_TAG": "sumo"})["services"]["physics"]["image"] == "coopsim:sumo"
    assert compose({"EXTRAS": "sumo"})["services"]["physics"]["build"]["args"]["EXTRAS"] == "sumo"
    assert "../runs:/runs" in services["orchestrator"]["volumes"]
    # the orchestrator and the one-container forms run through the wrapper: a new run directory each time
    for name in ("orchestrator", "platoon", "scenario"):
        assert services[name]["command"][0] == "coopsim-compose"
        assert "--out" not in services[name]["command"] and services[name]["environment"]["RUN_NAME"] == ""


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
        bin_dir = str(Path(sys.executable).parent)  # `coopsim` and `python` of this environment for the wrapper
        return {**os.environ, "PYTHONPATH": str(REPO), "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
                "COOPSIM_RUNS": str(self.runs),
                **{k: str(v) for k, v in (service.get("environment") or {}).items()}}

    def coopsim(self, service: Mapping[str, Any], names: list[str]) -> list[str]:
        command = service["command"]
        if command[0] == "coopsim-compose":  # the wrapper the image installs, with this interpreter's coopsim
            return self.argv(command[1:], names, ["sh", str(DOCKER / "compose-run.sh")])
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
                               [f"vehicles.count={robots}", "platoon.size=null"] if robots else [])
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


# -- a real Docker engine -----------------------------------------------------------------------------------------
PROJECT = "coopsim-test"  # compose project of these tests: its containers and network only
UID_GID = "4321"  # a user the image does not know: results must still be written and owned by it
SHORT = "outputs.plots=false outputs.report=false"


class Engine:
    """The Docker CLI and compose command of this machine, the image's environment for compose, and the results
    folder the services write into."""

    def __init__(self, compose_cmd: list[str], runs: Path) -> None:
        self.compose_cmd = compose_cmd
        self.runs = runs
        self.env: dict[str, str] = {}
        self.timings: dict[str, float] = {}

    def compose(self, *args: str, env: Mapping[str, str] = (), timeout: float = 600,
                **popen: Any) -> subprocess.CompletedProcess:
        return subprocess.run(self.argv(*args), cwd=REPO, env=self.environ(env), capture_output=True, text=True,
                              timeout=timeout, **popen)

    def argv(self, *args: str) -> list[str]:
        return [*self.compose_cmd, "-f", str(DOCKER / "compose.yaml"), "-p", PROJECT, *args]

    def environ(self, env: Mapping[str, str] = ()) -> dict[str, str]:
        keep = {k: v for k, v in os.environ.items() if k not in (
            "ROBOTS", "SCENARIO", "RUN_NAME", "OVERWRITE", "PLATOON_SIZE", "SET", "EXTRAS", "IMAGE_TAG", "RUNS_DIR")}
        return {**keep, "UID": UID_GID, "GID": UID_GID, "RUNS_DIR": str(self.runs), "RUNS_SHOWN_AS": str(self.runs),
                **self.env, **dict(env)}

    def up(self, env: Mapping[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
        """``compose up`` of the orchestrator (the hosts start as its dependencies), as docs/docker.md says."""
        return self.compose("up", "--exit-code-from", "orchestrator", "orchestrator", env=env, timeout=timeout)

    def container(self, service: str) -> str:
        proc = self.compose("ps", "-q", service, timeout=60)
        assert proc.returncode == 0 and proc.stdout.strip(), proc.stderr
        return proc.stdout.split()[0]


def docker(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)


def _engine_or_skip_reason() -> tuple[list[str] | None, str]:
    if shutil.which("docker") is None:
        return None, "no docker CLI (make test installs docker.io as root)"
    try:
        info = docker("info", "--format", "{{.ServerVersion}}", timeout=30)
    except subprocess.TimeoutExpired:
        return None, "docker info did not answer within 30 s"
    if info.returncode != 0:
        why = (info.stderr.strip().splitlines() or ["no answer"])[-1]
        return None, f"no Docker engine answers ({why}); make test starts dockerd as root (docker/engine.sh)"
    if docker("compose", "version", timeout=30).returncode == 0:
        return ["docker", "compose"], ""
    if shutil.which("docker-compose"):
        return ["docker-compose"], ""
    return None, "neither `docker compose` nor docker-compose is installed (make test installs docker-compose)"


def _base_image() -> str:
    """The official slim Python image when the engine has it or can pull it, else docker/make-base.sh's."""
    wanted = os.environ.get("BASE_IMAGE")
    if wanted:
        return wanted
    if docker("image", "inspect", BASE).returncode == 0 or docker("pull", BASE, timeout=300).returncode == 0:
        return BASE
    made = subprocess.run([str(DOCKER / "make-base.sh")], capture_output=True, text=True, timeout=1200)
    assert made.returncode == 0, f"no registry answers and docker/make-base.sh failed:\n{made.stdout}{made.stderr}"
    return "coopsim-base:bookworm"


def _build(engine: Engine, tag: str, extras: str = "") -> float:
    started = time.perf_counter()
    proc = engine.compose("build", "orchestrator", env={"IMAGE_TAG": tag, "EXTRAS": extras}, timeout=3600)
    took = time.perf_counter() - started
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    return took


@pytest.fixture(scope="session")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    """The engine with the image built once for the session: the base (registry or debootstrap), the wheels of
    ``make wheelhouse`` (this machine's pip settings) and ``compose build``; the results folder owned by
    UID_GID. The compose project is taken down before and after."""
    compose_cmd, reason = _engine_or_skip_reason()
    if compose_cmd is None:
        pytest.skip(reason)
    runs = tmp_path_factory.mktemp("docker") / "runs"
    runs.mkdir()
    os.chown(runs, int(UID_GID), int(UID_GID)) if os.geteuid() == 0 else runs.chmod(0o777)
    engine = Engine(compose_cmd, runs)
    started = time.perf_counter()
    engine.env["BASE_IMAGE"] = _base_image()
    engine.timings["base_s"] = time.perf_counter() - started
    started = time.perf_counter()
    wheels = subprocess.run(["make", "-s", "wheelhouse", f"PY={sys.executable}"], cwd=REPO, capture_output=True,
                            text=True, timeout=1800)
    assert wheels.returncode == 0, wheels.stdout + wheels.stderr
    engine.timings["wheelhouse_s"] = time.perf_counter() - started
    engine.env["IMAGE_TAG"] = "test"
    engine.compose("down", "--remove-orphans", timeout=120)
    engine.timings["build_s"] = _build(engine, "test")
    print(f"\ndocker tests: base {engine.env['BASE_IMAGE']}, " +
          ", ".join(f"{k} {v:.0f}" for k, v in engine.timings.items()))
    try:
        yield engine
    finally:
        engine.compose("down", "--remove-orphans", timeout=120)


def _in_process(scenario: str, overrides: list[str], out: Path) -> dict[str, Any]:
    result = run_scenario(parse_scenario((REPO / scenario).read_text(), str(REPO / scenario), overrides), out)
    assert result.ok, result.error
    return result.run_info


def _unchanged_caches(container: str) -> None:
    """Nothing compiled and no font cache built in the container: its layer holds no new cache file."""
    diff = docker("diff", container)
    assert diff.returncode == 0, diff.stderr
    changed = [line for line in diff.stdout.splitlines() if "/var/cache/coopsim/" in line]
    assert not changed, changed


def _started(container: str) -> float:
    from datetime import datetime

    stamp = docker("inspect", "--format", "{{.State.StartedAt}}", container).stdout.strip()
    return datetime.fromisoformat(stamp[:26].rstrip("Z") + "+00:00").timestamp()


def _seconds_to_healthy(engine: Engine) -> float:
    """From the start of the last host to the start of the orchestrator, which compose starts once every host's
    health check passed (an upper bound of the time to healthy)."""
    return _started(engine.container("orchestrator")) - max(_started(engine.container(h)) for h in HOSTS)


@pytest.mark.docker
@pytest.mark.parametrize("robots", [None, "8"])
def test_compose_up_gives_the_in_process_digest(engine, robots):
    name = f"robots-{robots or 'default'}"
    # the default run draws its plots in the container (matplotlib with the image's font cache)
    env = {"RUN_NAME": name, "SET": "duration_s=5" + ("" if robots is None else f" {SHORT}"),
           **({"ROBOTS": robots} if robots else {})}
    proc = engine.up(env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    run_dir = engine.runs / name
    assert f"coopsim-compose: results in {run_dir}" in out
    info = json.loads((run_dir / "run.json").read_text())
    assert info["status"] == "ok" and info["robots"] == int(robots or 4)
    overrides = ["duration_s=5", "outputs.plots=false", "outputs.report=false",
                 *([f"vehicles.count={robots}", "platoon.size=null"] if robots else [])]
    assert info["digest"] == _in_process("scenarios/platoon.yaml", overrides, engine.runs.parent / name)["digest"]
    # the results belong to the calling user, not root; nothing compiled at start in any container
    assert {(p.stat().st_uid, p.stat().st_gid) for p in [run_dir, *run_dir.rglob("*")]} == {(4321, 4321)}
    if robots is None:
        assert (run_dir / "report.html").exists() and list((run_dir / "plots").glob("*.png"))
    for service in (*HOSTS, "orchestrator"):
        _unchanged_caches(engine.container(service))
    if robots is None:  # the hosts' first start in the session (compose leaves them running after a run)
        healthy = _seconds_to_healthy(engine)
        print(f"\nhosts healthy {healthy:.1f} s after the last one started")
        assert healthy < 20  # within 5 s on a quiet machine (docs/docker.md); CI shares its cores


@pytest.mark.docker
def test_a_killed_federate_container_is_named_in_composes_output(engine):
    name = "killed"
    # paced at real time, so that the 40 s run is surely still going when the host is killed
    with subprocess.Popen(engine.argv("up", "--exit-code-from", "orchestrator", "orchestrator"), cwd=REPO,
                          env=engine.environ({"RUN_NAME": name, "SET": f"execution.realtime=1 {SHORT}"}),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        try:
            started = engine.runs / name / "scenario.resolved.yaml"
            deadline = time.monotonic() + 300
            while not started.exists() and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.2)
            assert started.exists(), "the run never started"
            time.sleep(3)
            killed = docker("kill", engine.container("physics"))
            assert killed.returncode == 0, killed.stderr
            out, _ = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode not in (0, None), out
    info = json.loads((engine.runs / name / "run.json").read_text())
    assert info["status"] == "failed" and info["error"]["federate"] == "physics"
    t = info["error"]["sim_time_s"]
    assert 0 < t < 40
    # what compose printed: the federate, the simulated time and the run directory
    assert f"the run failed: federate 'physics' failed at t = {t:.3f} s" in out, out
    assert f"what was recorded is in {engine.runs / name}" in out, out


SCENARIOS = {  # every shipped scenario but the SUMO one, with what makes it short enough
    "scenarios/platoon_dynamic.yaml": "duration_s=3",
    "scenarios/platoon_track.yaml": "duration_s=3",
    "scenarios/two_platoons.yaml": "duration_s=11",  # the joiner starts at 10 s
    "scenarios/highway_maneuvers.yaml": 'duration_s=8 maneuvers=[{"at_s":1,"type":"join","robot":"j_tail",'
                                        '"platoon":"p1"},{"at_s":3,"type":"leave","robot":"p1_3"}]',
}


@pytest.mark.docker
def test_every_shipped_scenario_runs_under_compose_and_compiles_nothing(engine):
    for i, (scenario, sets) in enumerate(SCENARIOS.items()):
        name = f"scenario-{i}"
        proc = engine.up({"SCENARIO": scenario, "RUN_NAME": name, "SET": f"{sets} {SHORT}"})
        assert proc.returncode == 0, scenario + "\n" + proc.stdout + proc.stderr
        assert json.loads((engine.runs / name / "run.json").read_text())["status"] == "ok", scenario
        _unchanged_caches(engine.container("orchestrator"))
        _unchanged_caches(engine.container("physics"))


@pytest.mark.docker
def test_the_single_profile_compares_the_channels_in_one_container(engine):
    proc = engine.compose("--profile", "single", "up", "--exit-code-from", "platoon", "platoon",
                          env={"RUN_NAME": "single", "SET": "duration_s=3"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    comparison = json.loads((engine.runs / "single" / "comparison.json").read_text())
    assert comparison["ok"] and (engine.runs / "single" / "comparison.html").exists()


@pytest.mark.docker
def test_results_never_overwrite_a_run_unless_asked_and_an_unwritable_folder_says_so(engine, tmp_path):
    def run(**env: str) -> subprocess.CompletedProcess:
        return engine.compose("run", "--rm", "--no-deps", "orchestrator", env={"SET": "duration_s=0.5", **env},
                              timeout=300)

    previous = engine.runs / "kept"
    previous.mkdir()
    (previous / "run.json").write_text("{}")
    proc = run(RUN_NAME="kept")
    assert proc.returncode == 2 and f"{previous} holds a previous run; set OVERWRITE=1" in proc.stderr, proc.stderr
    assert (previous / "run.json").read_text() == "{}"
    # without RUN_NAME: a new directory per run, named after the scenario and the time (the hosts are not up,
    # so this one fails, but in a directory of its own)
    before = set(engine.runs.iterdir())
    run()
    new = set(engine.runs.iterdir()) - before
    assert len(new) == 1 and next(iter(new)).name.startswith("platoon-"), new
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o755)
    proc = run(RUNS_DIR=str(locked), RUNS_SHOWN_AS="./locked")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"the results folder ./locked (mounted at /runs) is not writable by user {UID_GID}:{UID_GID}" in proc.stderr


@pytest.mark.docker
def test_the_sumo_variant_runs_the_sumo_scenario_with_the_in_process_digest(engine):
    engine.timings["sumo_build_s"] = _build(engine, "test-sumo", "sumo")
    print(f"\nSUMO variant built in {engine.timings['sumo_build_s']:.0f} s")
    sets = f"duration_s=6 {SHORT}"  # the cut-in at 5 s included
    proc = engine.up({"SCENARIO": "scenarios/highway_sumo.yaml", "RUN_NAME": "sumo", "SET": sets,
                      "IMAGE_TAG": "test-sumo", "EXTRAS": "sumo"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    info = json.loads((engine.runs / "sumo" / "run.json").read_text())
    assert info["status"] == "ok"
    assert (engine.runs / "sumo" / "trace" / "traffic.parquet").exists()  # SUMO's cars and their lane changes
    reference = _in_process("scenarios/highway_sumo.yaml", sets.split(), engine.runs.parent / "sumo-in-process")
    assert info["digest"] == reference["digest"]
