#!/usr/bin/env bash
# `make runner-setup RUNNER_USER=rtlab`, as root, once per lab runner host:
# what the CI jobs' non-root user needs and nothing more (docs/runner.md).
# Idempotent; says only what it changes.
#
#   the user      a system user (home /var/lib/<user>) the jobs run as; in
#                 the groups of the serial devices (dialout) and of /dev/kvm
#   SCHED_FIFO    granted where the runner starts, not here: CAP_SYS_NICE and
#                 CAP_IPC_LOCK as its only (ambient) capabilities
#                 (env/systemd/gitlab-runner-rtlab.service; env/runner-exec.sh
#                 without systemd): cyclictest -p N -m on the local board.
#                 (rtprio/memlock limits would need a root that may raise
#                 hard limits, which a container's root often may not)
#   cgroup        a cgroup v2 subtree owned by the user, where the job keeper
#                 makes one cgroup per job (systemd hosts: Delegate=yes in the
#                 runner's unit; without systemd, env/runner-exec.sh starts
#                 the runner in it)
#   idle states   /dev/cpu_dma_latency writable by the user's group
#   caches        the board images, the pinned kernel source and the compiler
#                 cache in the user's ~/.cache/rtlab, built as the user, or
#                 copied from RTLAB_SEED_CACHE (a cache of this machine that
#                 root's own `make run` filled: content-keyed, nothing rebuilt)
#   check         `rtlab doctor` as the user: what is still missing, with the fix
#
# Not done here: apt (make setup, run before this as root); registering the
# runner with GitLab (docs/runner.md).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
user=${1:-${RUNNER_USER:-rtlab}}
say() { echo "runner-setup: $*"; }
die() { echo "runner-setup: $*" >&2; exit 2; }

[ "$(id -u)" = 0 ] || die "run as root (it creates the user and grants it what the jobs need)"
case "$user" in root|"") die "RUNNER_USER must be a user of its own, not '$user'";; esac
case "$user" in *[!a-z0-9_-]*) die "RUNNER_USER=$user: lower-case letters, digits, - and _ only";; esac

home=/var/lib/$user
if ! id -u "$user" >/dev/null 2>&1; then
  say "creating the system user $user (home $home)"
  useradd --system --user-group --create-home --home-dir "$home" --shell /bin/bash "$user"
fi
home=$(getent passwd "$user" | cut -d: -f6)
for group in dialout kvm; do
  if getent group "$group" >/dev/null && ! id -nG "$user" | tr ' ' '\n' | grep -qx "$group"; then
    say "adding $user to group $group"
    usermod -aG "$group" "$user"
  fi
done

# cgroup v2: the unified hierarchy (/sys/fs/cgroup on a pure v2 host,
# /sys/fs/cgroup/unified on a hybrid one)
cg2=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/self/mounts)
if [ -n "$cg2" ]; then
  cg="$cg2/rtlab-runner-$user"
  if [ ! -d "$cg" ]; then say "a cgroup subtree for the job keeper: $cg"; mkdir "$cg"; fi
  if [ "$(stat -c %U "$cg")" != "$user" ]; then
    chown "$user": "$cg" "$cg/cgroup.procs" "$cg/cgroup.threads" "$cg/cgroup.subtree_control"
  fi
else
  say "no cgroup v2 hierarchy mounted: the job keeper will watch processes instead of a cgroup"
fi

# the venv the jobs run rtlab from: its python must be one the user can run
py=$(readlink -f "$top/.venv/bin/python" 2>/dev/null || true)
if [ -z "$py" ] || ! runuser -u "$user" -- "$top/.venv/bin/python" -c 'import rtlab' 2>/dev/null; then
  die "$user cannot run $top/.venv (python ${py:-missing}): the checkout and its venv must be readable by $user, with a python outside root's home (make runner-setup PYTHON=/usr/bin/python3 in a checkout such as /opt/rtlab)"
fi

cache="$home/.cache/rtlab"
if [ -n "${RTLAB_SEED_CACHE:-}" ] && [ -d "$RTLAB_SEED_CACHE" ]; then
  say "copying images, kernel sources, builds and compiler cache from $RTLAB_SEED_CACHE"
  install -d -o "$user" -g "$(id -gn "$user")" "$home/.cache" "$cache"
  for d in images kernel/debs kernel/src kernel/builds kernel/ccache; do
    [ -d "$RTLAB_SEED_CACHE/$d" ] || continue
    mkdir -p "$cache/$d"
    # (not the objects of a build running there now; a file that vanished
    # meanwhile, rsync's exit 24, is one that build took away)
    rc=0; rsync -a --exclude '.rtlab-build-*' --chown="$user:$(id -gn "$user")" \
      "$RTLAB_SEED_CACHE/$d/" "$cache/$d/" || rc=$?
    [ $rc = 0 ] || [ $rc = 24 ] || die "copying $RTLAB_SEED_CACHE/$d failed (rsync exit $rc)"
  done
fi
# board images as the user (content-keyed: nothing to do when seeded)
runuser -u "$user" -- env HOME="$home" "$top/.venv/bin/rtlab" images >/dev/null
# /dev/cpu_dma_latency: cyclictest holds the CPUs out of deep idle states
# through it; root-only by default (persistent: a udev rule, docs/runner.md)
if [ -c /dev/cpu_dma_latency ] && [ "$(stat -c %G /dev/cpu_dma_latency)" != "$(id -gn "$user")" ]; then
  say "/dev/cpu_dma_latency writable by group $(id -gn "$user")"
  chgrp "$(id -gn "$user")" /dev/cpu_dma_latency && chmod g+rw /dev/cpu_dma_latency
fi
say "checking as $user, as the runner service runs its jobs (rtlab doctor):"
"$here/runner-exec.sh" "$user" -- "$top/.venv/bin/rtlab" doctor --no-store || \
  say "rtlab doctor found problems (above); each names its fix"
