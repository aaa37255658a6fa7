#!/bin/sh
# Used by docker/Dockerfile's build stage: pip-install.sh deps|project, in /src with pyproject.toml there.
#   deps     the project's dependencies and those of the extras in $EXTRAS (comma-separated), plus setuptools
#   project  the project itself, without dependencies or build isolation
# Where the packages come from: the wheels in /tmp/wheelhouse when there are any (`make wheelhouse` on the host,
# then no index at all), else the index of PIP_INDEX_URL (default PyPI) and PIP_EXTRA_INDEX_URL, trusting the
# system's CA certificates plus any *.crt / *.pem in /tmp/ca (docker/ca/ in the repository).
set -eu
for var in PIP_INDEX_URL PIP_EXTRA_INDEX_URL PIP_TRUSTED_HOST; do
  eval "[ -n \"\${$var:-}\" ] || unset $var"
done
if ls /tmp/wheelhouse/*.whl >/dev/null 2>&1; then
  export PIP_NO_INDEX=1 PIP_FIND_LINKS=/tmp/wheelhouse
  source="the wheelhouse ($(ls /tmp/wheelhouse/*.whl | wc -l) wheels, no index)"
else
  source="${PIP_INDEX_URL:-the default index}${PIP_EXTRA_INDEX_URL:+ and $PIP_EXTRA_INDEX_URL}"
  extra=$(ls /tmp/ca/*.crt /tmp/ca/*.pem 2>/dev/null || true)
  if [ -n "$extra" ]; then
    # shellcheck disable=SC2086
    cat /etc/ssl/certs/ca-certificates.crt $extra > /tmp/pip-ca.pem
    export PIP_CERT=/tmp/pip-ca.pem
    source="$source, trusting the system CAs and $(echo "$extra" | wc -l) from docker/ca"
  fi
fi
case ${1:-} in
  deps)
    echo "pip-install.sh: dependencies${EXTRAS:+ with extras $EXTRAS} from $source"
    python - > /tmp/requirements.txt <<'PY'
import os, tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
wanted = [e.strip() for e in os.environ.get("EXTRAS", "").split(",") if e.strip()]
unknown = [e for e in wanted if e not in project["optional-dependencies"]]
if unknown:
    raise SystemExit(f"EXTRAS: no extra {', '.join(unknown)} (there are {', '.join(project['optional-dependencies'])})")
reqs = [*project["dependencies"], *(r for e in wanted for r in project["optional-dependencies"][e])]
print("\n".join(["setuptools>=68", *(r for r in reqs if not r.startswith(project["name"]))]))
PY
    pip install --no-compile -r /tmp/requirements.txt ;;
  project)
    pip install --no-compile --no-deps --no-build-isolation . ;;
  *) echo "usage: pip-install.sh deps|project" >&2; exit 2 ;;
esac
