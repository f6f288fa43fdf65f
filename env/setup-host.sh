#!/usr/bin/env bash
# Idempotent host set-up for rtlab on Debian 12: apt packages, foreign
# architectures for board images. Quiet when everything is already there.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export DEBIAN_FRONTEND=noninteractive

# The architectures (rtlab/targets/arch.py, one entry each) say which QEMU
# and cross-toolchain packages and which foreign dpkg architectures this host
# needs: read with the system python3 and its stdlib (no venv yet, the
# Makefile makes it after this script). A host without python3 gets it first.
if ! command -v python3 >/dev/null 2>&1; then
  echo "setup: installing python3 (to read rtlab/targets/arch.py)"
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends python3 >/dev/null
fi
arch_query() { python3 -I "$here/../rtlab/targets/arch.py" "$@"; }
# assignments, not process substitutions: a failing query stops the script (set -e)
foreign_archs=$(arch_query --foreign)
arch_pkgs=$(arch_query --host-packages)

need_update=0
# the other arches' packages (arm64, armhf) are fetched for board images
# read once, then matched: `dpkg ... | grep -q` under pipefail is false
# whenever grep's early exit gives dpkg a SIGPIPE, which re-added arm64 and
# forced an apt-get update on every other run
foreign=$(dpkg --print-foreign-architectures)
for arch in $foreign_archs; do
  if ! grep -qx "$arch" <<< "$foreign"; then
    echo "setup: adding dpkg architecture $arch"
    dpkg --add-architecture "$arch"
    need_update=1
  fi
done

mapfile -t pkgs < <(grep -vE '^\s*(#|$)' "$here/apt-packages.txt" | awk '{print $1}')
mapfile -t more <<< "$arch_pkgs"
pkgs+=("${more[@]}")
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

# an apt index older than a day, or none for a foreign arch, is refreshed once
if [ ! -d /var/lib/apt/lists ] || [ -z "$(ls /var/lib/apt/lists/*_Packages* 2>/dev/null)" ]; then
  need_update=1
fi
for arch in $foreign_archs; do
  ls /var/lib/apt/lists/*binary-"$arch"_Packages* >/dev/null 2>&1 || need_update=1
done
if [ ${#missing[@]} -gt 0 ] || [ $need_update = 1 ]; then
  echo "setup: apt-get update"
  # a mirror caught mid-sync fails one index ("File has unexpected size",
  # exit 100) while every other index is fine: try again, then go on with
  # what apt has; a package that then cannot be installed or fetched still
  # fails loudly below (or in the image build), naming itself
  updated=0
  for attempt in 1 2 3; do
    if apt-get update -qq; then updated=1; break; fi
    [ $attempt -lt 3 ] && { echo "setup: apt-get update failed (attempt $attempt of 3), again in 10 s"; sleep 10; }
  done
  [ $updated = 1 ] || echo "setup: apt-get update still reports errors (above); going on with the indexes apt has"
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  # no package's service starts while it is installed (sshd would listen on
  # every address of the machine): Debian's policy-rc.d, unless the host has
  # one of its own already
  guard=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    guard=/usr/sbin/policy-rc.d
    printf '#!/bin/sh\n# rtlab setup: no service starts during apt-get install\nexit 101\n' > "$guard"
    chmod 755 "$guard"
    trap 'rm -f "$guard"' EXIT
  fi
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  if [ -n "$guard" ]; then rm -f "$guard"; trap - EXIT; fi
  # openssh-server installed here enables the machine's ssh service for the
  # next boot: the multi-host lab starts sshd inside its exporter hosts alone.
  # (A host that had sshd before keeps it as it was: it is not in $missing.)
  if [[ " ${missing[*]} " == *" openssh-server "* ]] && command -v systemctl >/dev/null 2>&1; then
    systemctl disable ssh >/dev/null 2>&1 || true
  fi
fi
# influxd is started on demand by rtlab, never as a system service
if command -v systemctl >/dev/null 2>&1 && systemctl is-enabled influxdb >/dev/null 2>&1; then
  systemctl disable --now influxdb >/dev/null 2>&1 || true
fi
# lava-dispatcher enables lava-worker (it would poll a LAVA server that is not
# there) and tftpd-hpa starts a TFTP daemon: rtlab runs lava-run itself; the
# LAVA server, its scheduler and PostgreSQL are started by `rtlab lava lab up`
for svc in lava-worker tftpd-hpa lava-server-gunicorn lava-scheduler lava-publisher lava-celery-worker lava-coordinator postgresql; do
  if command -v systemctl >/dev/null 2>&1 && systemctl is-enabled "$svc" >/dev/null 2>&1; then
    systemctl disable --now "$svc" >/dev/null 2>&1 || true
  fi
done
exit 0
