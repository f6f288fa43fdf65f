# Sourced by the CI jobs (.gitlab-ci.yml): which store branch this pipeline's
# runs are filed under and which branch's baseline the regression verdict
# compares them with. Sets RTLAB_KERNEL_BRANCH and RTLAB_BASELINE_BRANCH
# (empty: budgets only), RTLAB_VERDICT_FOR (what the pipeline is, said in
# the gate log) and RTLAB_BASE_SHA (the baseline commit for paired boots,
# from KERNEL_BASE_SHA; empty: none). Variables come from the kernel
# project's trigger (merge request pipelines from a fork can set them):
# checked here, quoted always.
#
#   kernel merge request  KERNEL_SHA + KERNEL_MR_IID (+ KERNEL_TARGET_BRANCH,
#                         KERNEL_MR_SOURCE_BRANCH): filed under the source
#                         branch, compared with the target branch's baseline
#   kernel push           KERNEL_SHA + KERNEL_BRANCH: filed under the branch,
#                         compared with the branch's earlier runs (its baseline)
#   rtlab merge request   compared with the target branch's baseline
#   rtlab push/schedule   budgets only (these runs feed the baselines)
_vd_fail() { echo "verdict: $*" >&2; return 1; }
_vd_branch() {  # a branch name git would accept, never an option or a query
  [ -n "$2" ] || _vd_fail "$1 is empty" || return 1
  git check-ref-format --branch "$2" >/dev/null 2>&1 || _vd_fail "$1=$2 is not a branch name" || return 1
  case "$2" in -*) _vd_fail "$1=$2 is not a branch name"; return 1;; esac
}
RTLAB_BASELINE_BRANCH=""
RTLAB_VERDICT_FOR="budgets only"
if [ -n "${KERNEL_SHA:-}" ] && [ -n "${KERNEL_REPO:-}" ] && [ -n "${KERNEL_MR_IID:-}" ]; then
  case "$KERNEL_MR_IID" in *[!0-9]*) _vd_fail "KERNEL_MR_IID=$KERNEL_MR_IID is not a merge request number"; return 1;; esac
  _vd_branch KERNEL_TARGET_BRANCH "${KERNEL_TARGET_BRANCH:-}" || return 1
  RTLAB_BASELINE_BRANCH=$KERNEL_TARGET_BRANCH
  if [ -n "${KERNEL_MR_SOURCE_BRANCH:-}" ]; then
    _vd_branch KERNEL_MR_SOURCE_BRANCH "$KERNEL_MR_SOURCE_BRANCH" || return 1
    RTLAB_KERNEL_BRANCH=$KERNEL_MR_SOURCE_BRANCH
  else
    RTLAB_KERNEL_BRANCH="mr-$KERNEL_MR_IID"   # never the target's name: the MR must not feed its own baseline
  fi
  RTLAB_VERDICT_FOR="kernel merge request !$KERNEL_MR_IID into $KERNEL_TARGET_BRANCH"
elif [ -n "${KERNEL_SHA:-}" ] && [ -n "${KERNEL_REPO:-}" ]; then
  _vd_branch KERNEL_BRANCH "${KERNEL_BRANCH:-}" || return 1
  RTLAB_KERNEL_BRANCH=$KERNEL_BRANCH
  RTLAB_BASELINE_BRANCH=$KERNEL_BRANCH
  RTLAB_VERDICT_FOR="kernel push to $KERNEL_BRANCH"
else
  RTLAB_KERNEL_BRANCH="${RTLAB_KERNEL_BRANCH:-${CI_MERGE_REQUEST_SOURCE_BRANCH_NAME:-${CI_COMMIT_BRANCH:-}}}"
  if [ "${CI_PIPELINE_SOURCE:-}" = merge_request_event ]; then
    _vd_branch CI_MERGE_REQUEST_TARGET_BRANCH_NAME "${CI_MERGE_REQUEST_TARGET_BRANCH_NAME:-}" || return 1
    RTLAB_BASELINE_BRANCH=$CI_MERGE_REQUEST_TARGET_BRANCH_NAME
    RTLAB_VERDICT_FOR="rtlab merge request into $CI_MERGE_REQUEST_TARGET_BRANCH_NAME"
  fi
fi
# the baseline commit (KERNEL_BASE_SHA: a merge request's diff base, a
# push's previous commit) for board classes whose baseline is paired boots
# (`rtlab baseline method`); a new branch's all-zero "before" is none
RTLAB_BASE_SHA=""
if [ -n "${KERNEL_BASE_SHA:-}" ] && [ -n "${KERNEL_REPO:-}" ]; then
  case "$KERNEL_BASE_SHA" in
    *[!0-9a-f]*) _vd_fail "KERNEL_BASE_SHA=$KERNEL_BASE_SHA is not a commit id"; return 1;;
  esac
  [ ${#KERNEL_BASE_SHA} -ge 7 ] && [ ${#KERNEL_BASE_SHA} -le 40 ] \
    || _vd_fail "KERNEL_BASE_SHA=$KERNEL_BASE_SHA is not a commit id" || return 1
  case "$KERNEL_BASE_SHA" in *[!0]*) RTLAB_BASE_SHA=$KERNEL_BASE_SHA;; esac
fi
if [ "${RTLAB_REGRESSION:-1}" != 1 ]; then
  RTLAB_BASELINE_BRANCH=""
  RTLAB_VERDICT_FOR="$RTLAB_VERDICT_FOR (RTLAB_REGRESSION=$RTLAB_REGRESSION: budgets only)"
fi
export RTLAB_KERNEL_BRANCH RTLAB_BASELINE_BRANCH RTLAB_VERDICT_FOR RTLAB_BASE_SHA
echo "verdict: $RTLAB_VERDICT_FOR; runs filed under branch '${RTLAB_KERNEL_BRANCH}'${RTLAB_BASELINE_BRANCH:+, baseline: branch '$RTLAB_BASELINE_BRANCH'}${RTLAB_BASE_SHA:+ (or commit $RTLAB_BASE_SHA where paired)}, ${RTLAB_REPEAT:-1} repeats"
