#!/usr/bin/env bash
# A Debian bookworm base image with Python 3.11, made from Debian's own packages (debootstrap) and imported into the
# local Docker engine, for machines that reach no container registry:
#
#   sudo docker/make-base.sh                      # makes coopsim-base:bookworm unless it exists
#   docker compose -f docker/compose.yaml build   # with BASE_IMAGE=coopsim-base:bookworm in the environment
#
# Options: --name IMAGE (default coopsim-base:bookworm), --force (make it again), --mirror URL (default: the
# DEBIAN_MIRROR environment variable, else the first Debian mirror in this machine's apt sources, else Debian's
# own). Needs root, debootstrap (apt-get install debootstrap) and a running Docker engine. About one minute and
# 60 MB of packages; the image is about 150 MB. It has what the official slim Python image gives the Dockerfile:
# python3 with venv and pip, `python` on PATH, the CA certificates, no documentation.
set -euo pipefail

name=coopsim-base:bookworm
force=0
mirror=${DEBIAN_MIRROR:-}
while [ $# -gt 0 ]; do
  case $1 in
    --name) name=$2; shift 2 ;;
    --force) force=1; shift ;;
    --mirror) mirror=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "make-base.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

if [ "$(id -u)" != 0 ]; then
  echo "make-base.sh: debootstrap needs root (run it with sudo)" >&2; exit 1
fi
command -v debootstrap >/dev/null || { echo "make-base.sh: debootstrap is missing: apt-get install debootstrap" >&2; exit 1; }
docker info >/dev/null 2>&1 || { echo "make-base.sh: no Docker engine answers (start dockerd)" >&2; exit 1; }
if [ "$force" = 0 ] && docker image inspect "$name" >/dev/null 2>&1; then
  echo "make-base.sh: $name exists (--force makes it again)"; exit 0
fi
if [ -z "$mirror" ]; then
  mirror=$(grep -rhoE '^(deb|URIs:)[^#]*https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d 2>/dev/null \
           | grep -oE 'https?://[^ ]+' | grep -v security | head -n 1 || true)
  mirror=${mirror:-http://deb.debian.org/debian}
fi

root=$(mktemp -d /var/tmp/coopsim-base.XXXXXX)
trap 'rm -rf "$root"' EXIT
echo "make-base.sh: debootstrap bookworm from $mirror into $root"
debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$root" "$mirror" \
  > "$root.log" 2>&1 || { tail -n 20 "$root.log" >&2; rm -f "$root.log"; exit 1; }
rm -f "$root.log"

# what the slim images leave out: documentation, manuals, translations, apt's downloads and lists, and a dpkg
# setting that keeps them out of later installs too
mkdir -p "$root/etc/dpkg/dpkg.cfg.d"
cat > "$root/etc/dpkg/dpkg.cfg.d/01-nodoc" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
EOF
find "$root/usr/share/doc" -mindepth 1 ! -name copyright ! -type d -delete 2>/dev/null || true
rm -rf "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/locale/* \
       "$root"/var/cache/apt/archives/*.deb "$root"/var/cache/apt/*.bin "$root"/var/lib/apt/lists/* \
       "$root"/var/log/*.log "$root"/var/log/apt/*
ln -sf /usr/bin/python3 "$root/usr/local/bin/python"

tar --numeric-owner -C "$root" -c . | docker import \
  --change 'ENV LANG=C.UTF-8' \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["python3"]' \
  --message "Debian bookworm minbase with python3 and python3-venv (docker/make-base.sh)" - "$name" >/dev/null
echo "make-base.sh: imported $name ($(docker image inspect -f '{{.Size}}' "$name" | awk '{printf "%.0f MB", $1/1e6}'))"
