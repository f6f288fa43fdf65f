# Sourced by the CI jobs (.gitlab-ci.yml): put the kernel commit under test
# (KERNEL_REPO at KERNEL_SHA) in the runner's kernel work tree and hold it
# there for the rest of the job. Sets KERNEL_TREE.
#
# One work tree per runner (RTLAB_CI_KERNEL_DIR), not one per commit: the
# kernel's object paths stay the same, so ccache turns a one-file commit into
# a one-file rebuild. A lock on fd 9 keeps it at this commit while the job
# uses it: shared while jobs of the same commit run, exclusive to move it.
# Without KERNEL_REPO, the pinned Debian source (`rtlab kernel source`) is
# the kernel under test (rtlab's own merge requests and schedules).
_kt_fail() { echo "kernel-tree: $*" >&2; return 1; }
# git on the work tree runs none of its own hooks or fsmonitor (the tree is
# a merge request's: rtlab/kernel/git.py)
_kt_git() { git -c core.hooksPath=/dev/null -c core.fsmonitor=false "$@"; }
: "${RTLAB:=$RTLAB_HOME/.venv/bin/rtlab}"
if [ -z "${KERNEL_REPO:-}" ]; then
  KERNEL_TREE=$("$RTLAB" kernel source | python3 -c 'import json,sys; print(json.load(sys.stdin)["path"])') \
    || _kt_fail "no pinned kernel source" || return 1
  KERNEL_SHA=$(_kt_git -C "$KERNEL_TREE" rev-parse HEAD) || return 1
else
  [ -n "${KERNEL_SHA:-}" ] || _kt_fail "KERNEL_REPO given without KERNEL_SHA" || return 1
  KERNEL_TREE=${RTLAB_CI_KERNEL_DIR:-${RTLAB_CACHE:-$HOME/.cache/rtlab}/ci/kernel}
  mkdir -p "$(dirname "$KERNEL_TREE")"
  exec 9>"$KERNEL_TREE.lock"
  _at_sha() { [ "$(_kt_git -C "$KERNEL_TREE" rev-parse HEAD 2>/dev/null)" = "$KERNEL_SHA" ] &&
              [ -z "$(_kt_git -C "$KERNEL_TREE" status --porcelain --untracked-files=no)" ]; }
  flock -s 9
  if ! _at_sha; then
    flock -u 9; flock -x 9
    if ! _at_sha; then
      [ -d "$KERNEL_TREE/.git" ] || _kt_git clone -q --no-checkout "$KERNEL_REPO" "$KERNEL_TREE" || return 1
      _kt_git -C "$KERNEL_TREE" fetch -q "$KERNEL_REPO" '+refs/heads/*:refs/remotes/kernel/*' "$KERNEL_SHA" \
        || _kt_git -C "$KERNEL_TREE" fetch -q "$KERNEL_REPO" '+refs/heads/*:refs/remotes/kernel/*' || return 1
      _kt_git -C "$KERNEL_TREE" checkout -q -f --detach "$KERNEL_SHA" \
        || _kt_fail "$KERNEL_SHA not in $KERNEL_REPO" || return 1
    fi
    flock -s 9   # converts the lock: other jobs of this commit may share the tree
  fi
fi
export KERNEL_TREE KERNEL_SHA
export RTLAB_KERNEL_SHA=$KERNEL_SHA
export RTLAB_KERNEL_SUBJECT=$(_kt_git -C "$KERNEL_TREE" log -1 --format=%s "$KERNEL_SHA")
echo "kernel under test: $KERNEL_SHA ($RTLAB_KERNEL_SUBJECT) in $KERNEL_TREE"
