#!/usr/bin/env bash
# env/runner-exec.sh USER [NAME=VALUE...] -- COMMAND...: as root, run COMMAND as the lab
# runner's user with exactly what `make runner-setup` granted it, as the
# runner service gets it from systemd (env/systemd/gitlab-runner-rtlab.service:
# User=, Delegate=yes, AmbientCapabilities=) on a host whose PID 1 is not
# systemd: in the user's cgroup subtree (rtlab-runner-USER); with
# CAP_SYS_NICE and CAP_IPC_LOCK as its only capabilities (SCHED_FIFO and
# mlockall for the local board's tools; the bounding set holds nothing else,
# and no new privileges: no setuid program gives it more); the user's groups;
# a clean environment (HOME, USER, LOGNAME, SHELL, PATH; LANG=C.UTF-8).
#   env/runner-exec.sh rtlab -- gitlab-runner run --config /var/lib/rtlab/.gitlab-runner/config.toml
# NAME=VALUE before -- adds a variable to that environment.
set -euo pipefail
die() { echo "runner-exec: $*" >&2; exit 2; }
[ "$(id -u)" = 0 ] || die "run as root (it drops to the runner's user)"
user=${1:-}; shift || true
extra=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do
  [[ "$1" =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || die "not NAME=VALUE before --: $1"
  extra+=("$1"); shift
done
[ "${1:-}" = -- ] && shift
[ -n "$user" ] && [ $# -gt 0 ] || die "usage: runner-exec.sh USER [NAME=VALUE...] -- COMMAND..."
id -u "$user" >/dev/null 2>&1 || die "no user $user: make runner-setup RUNNER_USER=$user first"
case "$user" in root) die "not root: the runner's own user";; esac
cg2=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/self/mounts)
cg="$cg2/rtlab-runner-$user"
if [ -n "$cg2" ] && [ -d "$cg" ]; then
  echo $$ > "$cg/cgroup.procs"
fi
home=$(getent passwd "$user" | cut -d: -f6)
caps=+sys_nice,+ipc_lock
exec setpriv --reuid="$user" --regid="$(id -g "$user")" --init-groups --reset-env \
  --inh-caps="$caps" --ambient-caps="$caps" --bounding-set=-all,"$caps" --no-new-privs -- \
  env LANG=C.UTF-8 HOME="$home" "${extra[@]}" "$@"
