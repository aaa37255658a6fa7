#!/usr/bin/env bash
# docker/engine.sh start|stop: what `make test` does around the tests for the Docker tests (tests/test_docker.py).
#   start  as root on Debian: installs docker.io, docker-compose and debootstrap when missing and starts dockerd
#          in the background when no engine answers (its log in $STATE_DIR/dockerd.log, its pid in
#          $STATE_DIR/dockerd.pid); overlay2 first, then the vfs storage driver if dockerd does not come up
#   stop   stops the dockerd that `start` started (by its pid), nothing else
# Never fails: without root or an engine that can run here, the Docker tests skip and say why.
set -u
STATE_DIR=${STATE_DIR:-.venv}
pidfile=$STATE_DIR/dockerd.pid
log=$STATE_DIR/dockerd.log

engine_up() { timeout 10 docker info >/dev/null 2>&1; }

start() {
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    missing=""
    for p in docker.io docker-compose debootstrap; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
    if [ -n "$missing" ]; then
      echo "docker/engine.sh: installing$missing"
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null 2>&1 \
        || { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive \
             apt-get install -y -qq --no-install-recommends $missing >/dev/null 2>&1; } \
        || echo "docker/engine.sh: could not install$missing; the Docker tests will skip"
    fi
  fi
  engine_up && return 0
  if [ "$(id -u)" != 0 ] || ! command -v dockerd >/dev/null; then
    echo "docker/engine.sh: no Docker engine answers and dockerd cannot be started here (needs root and dockerd)"
    return 0
  fi
  mkdir -p "$STATE_DIR"
  for options in "" "--storage-driver=vfs"; do
    # shellcheck disable=SC2086
    nohup dockerd $options > "$log" 2>&1 &
    echo $! > "$pidfile"
    for _ in $(seq 60); do
      engine_up && { echo "docker/engine.sh: started dockerd $options(pid $(cat "$pidfile"), log $log)"; return 0; }
      kill -0 "$(cat "$pidfile")" 2>/dev/null || break
      sleep 0.5
    done
    stop quiet
    echo "docker/engine.sh: dockerd $options did not come up: $(tail -n 1 "$log")"
  done
  return 0
}

stop() {
  [ -f "$pidfile" ] || return 0
  pid=$(cat "$pidfile")
  rm -f "$pidfile"
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid"
  for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
  [ "${1:-}" = quiet ] || echo "docker/engine.sh: stopped dockerd (pid $pid)"
  return 0
}

case ${1:-} in
  start) start ;;
  stop) stop ;;
  *) echo "usage: docker/engine.sh start|stop" >&2; exit 2 ;;
esac
