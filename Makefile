# Two commands for a newcomer: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP_RUN  := $(VENV)/.installed-run
STAMP_TEST := $(VENV)/.installed-test
APT_PACKAGES := tshark mosquitto docker.io docker-compose debootstrap chromium

.PHONY: demo test test-fast test-under-load venv install install-test system-deps lint bench clean clean-numba wheelhouse docker-engine

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

# the install compiles the kernels (orchestrator/warm.py) so that the first run is as fast as the next ones
$(STAMP_RUN): pyproject.toml | $(PY)
	$(PIP) install -q -e .
	$(PY) -m orchestrator.warm
	touch $@

$(STAMP_TEST): pyproject.toml | $(PY)
	$(PIP) install -q -e '.[test]'
	touch $@ $(STAMP_RUN)

venv install: $(STAMP_RUN)

install-test: $(STAMP_TEST) system-deps

# System packages the tests use (tshark dissects our pcap captures). Root on Debian: install when missing.
system-deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing system packages:$$missing"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

demo: $(STAMP_RUN)
	$(VENV)/bin/coopsim demo --out runs/demo

# One pytest worker per core (pytest-xdist); a test file stays on one worker (--dist loadfile), so the fixtures a
# module or a session shares (a run, a host, the Docker image) are made once per worker, never twice in a file.
PYTEST_WORKERS ?= auto
PYTEST := $(PY) -m pytest -q -p no:cacheprovider -n $(PYTEST_WORKERS) --dist loadfile

# COOPSIM_FULL_FUZZ=1: the fuzz corpora run every case (a plain pytest runs a fixed subset of them)
test: install-test
	$(VENV)/bin/ruff check .
	@docker/engine.sh start; COOPSIM_FULL_FUZZ=1 $(PYTEST); status=$$?; \
	  docker/engine.sh stop; exit $$status

# The unmarked tier, for iteration (under 3 minutes on 2 cores; the README's "Tests" section has the tiers)
FAST := not slow and not external and not browser and not docker and not cold_compile
test-fast: $(STAMP_TEST)
	$(PYTEST) -m "$(FAST)"

# `make test` with two CPU-bound processes beside it (the suite must not depend on an idle machine); the two are
# started here and ended by their process ids, whatever the outcome
test-under-load: install-test
	@$(PY) -c 'while True: pass' & one=$$!; $(PY) -c 'while True: pass' & two=$$!; \
	  trap 'kill $$one $$two 2>/dev/null' EXIT INT TERM; \
	  echo "busy processes $$one and $$two beside the suite"; \
	  $(MAKE) --no-print-directory test

# The Docker tests' engine (tests/test_docker.py): docker.io, docker-compose and debootstrap installed when missing,
# dockerd started when none answers (`make test` stops it again; docker/engine.sh stop by hand otherwise)
docker-engine:
	@docker/engine.sh start

# wheels for the image with this machine's pip settings (index, proxy CA, local wheels); docker/Dockerfile then
# installs from them with no index at all (docs/docker.md). WHEEL_EXTRAS: the extras images may ask for.
WHEEL_EXTRAS ?= sumo
wheelhouse: | $(PY)
	$(PIP) wheel -q --wheel-dir docker/wheelhouse ".[$(WHEEL_EXTRAS)]" "setuptools>=68"
	rm -f docker/wheelhouse/coopsim-*.whl

lint: $(STAMP_TEST)
	$(VENV)/bin/ruff check .

# every speed target in one table, beside the fused-kernel limit and SUMO (bench/suite.py; figures in
# docs/benchmarks.md); the single benchmarks (bench/bench_*.py) take their own options
bench: $(STAMP_RUN)
	$(PY) bench/suite.py

# numba's on-disk cache is checked per file; every kernel keeps its compiled helpers in its own file
# (tests/test_architecture.py), so edits never leave stale machine code. This only frees the disk.
clean-numba:
	find orchestrator federates comms_models controllers tests \( -name '*.nbi' -o -name '*.nbc' \) -delete

clean: clean-numba
	rm -rf $(VENV) runs .pytest_cache
