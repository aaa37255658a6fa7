#!/bin/sh
# coopsim-compose run|compare SCENARIO [coopsim options...]: what docker/compose.yaml's orchestrator, platoon and
# scenario services run in the image. It runs `coopsim run|compare SCENARIO --out /runs/NAME ...` and adds:
#   - the results folder checked first: one the container's user cannot write is said in those words (exit 2);
#   - NAME: $RUN_NAME, else SCENARIO's name and the UTC time (a new directory per run). An existing non-empty
#     $RUN_NAME is kept (exit 2) unless OVERWRITE=1, which replaces it;
#   - ROBOTS (vehicles.count, in one platoon unless PLATOON_SIZE says otherwise), PLATOON_SIZE and SET (more
#     path=value overrides, separated by spaces) as --set options;
#   - a last line naming the run directory as the caller sees it ($COOPSIM_RUNS_SHOWN_AS, default runs) and, when
#     the run failed, what failed: the federate and the simulated time from run.json.
# The exit code is coopsim's.
set -u
if [ $# -lt 2 ]; then
  echo "usage: coopsim-compose run|compare SCENARIO [coopsim options...]" >&2
  exit 2
fi
command=$1 scenario=$2
shift 2
runs=${COOPSIM_RUNS:-/runs}  # the results folder inside the container
shown=${COOPSIM_RUNS_SHOWN_AS:-runs}
me="$(id -u):$(id -g)"

probe="$runs/.coopsim-write-test.$$"
if ! [ -d "$runs" ] || ! touch "$probe" 2>/dev/null; then
  echo "coopsim-compose: error: the results folder $shown (mounted at $runs) is not writable by user $me:" \
       "create it as that user before starting (mkdir -p $shown) or give it to that user (chown $me $shown);" \
       "compose runs the services as \$UID:\$GID (export UID GID=\$(id -g))" >&2
  exit 2
fi
rm -f "$probe"

name=${RUN_NAME:-}
if [ -z "$name" ]; then
  stem=$(basename "$scenario" .yaml)
  [ "$command" = compare ] && stem="$stem-compare"
  name="$stem-$(date -u +%Y%m%d-%H%M%S)"
  n=2
  while [ -e "$runs/$name" ]; do name="$stem-$(date -u +%Y%m%d-%H%M%S)-$n"; n=$((n + 1)); done
else
  case $name in */*|.|..) echo "coopsim-compose: error: RUN_NAME must be a plain name, got '$name'" >&2; exit 2 ;; esac
  if [ -e "$runs/$name" ] && [ -n "$(ls -A "$runs/$name" 2>/dev/null)" ]; then
    if [ "${OVERWRITE:-0}" = 1 ]; then
      rm -rf "${runs:?}/$name" || { echo "coopsim-compose: error: cannot replace $shown/$name" >&2; exit 2; }
    else
      echo "coopsim-compose: error: $shown/$name holds a previous run; set OVERWRITE=1 to replace it, or another" \
           "RUN_NAME (without RUN_NAME every run gets a new directory)" >&2
      exit 2
    fi
  fi
fi
out="$runs/$name"

set -- "$command" "$scenario" --out "$out" "$@"
if [ -n "${ROBOTS:-}" ]; then
  set -- "$@" --set "vehicles.count=$ROBOTS" --set "platoon.size=${PLATOON_SIZE:-null}"
elif [ -n "${PLATOON_SIZE:-}" ]; then
  set -- "$@" --set "platoon.size=$PLATOON_SIZE"
fi
for override in ${SET:-}; do
  set -- "$@" --set "$override"
done

coopsim "$@"
code=$?
if [ $code -eq 0 ]; then
  echo "coopsim-compose: results in $shown/$name"
elif [ -f "$out/run.json" ]; then
  python - "$out/run.json" "$shown/$name" "$code" <<'PY'
import json, sys
info = json.load(open(sys.argv[1]))
error = info.get("error") or {}
if error:  # the message names the federate and the simulated time: "federate 'physics' failed at t = ..."
    what = f"the run failed: {error.get('message') or error.get('federate')}"
else:
    what = f"the run ended '{info.get('status')}' at simulated t = {info.get('sim_time_s', 0):.3f} s"
print(f"coopsim-compose: {what} (exit code {sys.argv[3]}); what was recorded is in {sys.argv[2]}", file=sys.stderr)
PY
else
  echo "coopsim-compose: coopsim $command ended with exit code $code; run directory $shown/$name" >&2
fi
exit $code
