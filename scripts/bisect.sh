#!/usr/bin/env bash
# bisect.sh GOOD BAD [--build-dir DIR] [--max-drift R] [RUN OPTIONS...]
#
# Finds the first commit between GOOD and BAD at which `mixcheck run RUN OPTIONS` stops passing, with
# `git bisect run`. At every step mixcheck is rebuilt (only the `mixcheck` target, in one build folder
# reused by every step, so a step recompiles what the commit changed): a commit that does not build is
# skipped (exit 125), and the run gets --bisect (a plugin that cannot be loaded skips the commit).
#
# --max-drift R: hunt for a drift within tolerance. GOOD is built and run first with RUN OPTIONS and
# its JSON report becomes the baseline; every step then runs with --baseline <that report>
# --max-drift R, so a commit is bad when a check fails or drifts by more than R over GOOD.
#
# Before bisecting, GOOD must pass and BAD must not (with the same options): a BAD that passes means
# there is nothing to find (exit 3, which is also what a drift within tolerance gives without
# --max-drift); options that are wrong at GOOD (exit 2 there) stop it before the search. During the
# search a run that exits 2 (an input error at that commit, e.g. a case it does not have yet) skips
# the commit. The work tree must be clean; it is restored (git bisect reset) however the script ends.
#
# Options: --build-dir DIR (default build-bisect at the top of the work tree; configured with
# `cmake -S . -B DIR -DCMAKE_BUILD_TYPE=Release` unless DIR holds a configured build already).
# Exit: 0 the first bad commit was found (printed as "first bad commit: <sha> <subject>"), 1 bisect
# failed (e.g. only skipped commits left), 2 usage error, 3 nothing to bisect (GOOD fails or BAD passes).
set -uo pipefail

if [ "${1:-}" = --step ]; then
  # one step of `git bisect run` (this script, copied out of the tree that bisect checks out)
  cmake --build "$MC_BISECT_BUILD" --target mixcheck -j"$(nproc)" >"$MC_BISECT_LOG" 2>&1 || {
    echo "bisect: $(git rev-parse --short HEAD) does not build: skipped"
    exit 125
  }
  extra=()
  if [ -n "${MC_BISECT_BASELINE:-}" ]; then extra=(--baseline "$MC_BISECT_BASELINE" --max-drift "$MC_BISECT_MAX_DRIFT"); fi
  shift
  "$MC_BISECT_BUILD/mixcheck" run --bisect -q "$@" "${extra[@]}" >"$MC_BISECT_LOG" 2>&1
  rc=$?
  echo "bisect: $(git rev-parse --short HEAD): mixcheck exit $rc"
  case $rc in
    0 | 1 | 125) exit $rc ;;
    2) exit 125 ;; # an input error at this commit: it cannot be tested
    *) exit 1 ;;   # a crash of mixcheck itself
  esac
fi

usage() { sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 2 ] || usage
good=$1 bad=$2
shift 2
top=$(git rev-parse --show-toplevel 2>/dev/null) || { echo "bisect: not inside a git work tree" >&2; exit 2; }
cd "$top" || exit 2
build=$top/build-bisect max_drift=""
run_opts=()
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) build=$(realpath -m "$2"); shift 2 ;;
    --max-drift) max_drift=$2; shift 2 ;;
    -h | --help) usage ;;
    *) run_opts+=("$1"); shift ;;
  esac
done
good=$(git rev-parse -q --verify "$good^{commit}") || { echo "bisect: unknown commit '$good'" >&2; exit 2; }
bad=$(git rev-parse -q --verify "$bad^{commit}") || { echo "bisect: unknown commit '$bad'" >&2; exit 2; }
if ! git diff --quiet HEAD -- || ! git diff --cached --quiet; then
  echo "bisect: the work tree has uncommitted changes; commit or stash them first" >&2
  exit 2
fi

tmp=$(mktemp -d /tmp/mixcheck-bisect-XXXXXX)
start=$(git symbolic-ref -q --short HEAD || git rev-parse HEAD)
cleanup() {
  git bisect reset >/dev/null 2>&1 || git checkout -q "$start"
  rm -rf "$tmp"
}
trap cleanup EXIT
cp "$0" "$tmp/bisect.sh"
export MC_BISECT_BUILD=$build MC_BISECT_LOG=$tmp/step.log MC_BISECT_BASELINE="" MC_BISECT_MAX_DRIFT=$max_drift
if [ ! -f "$build/CMakeCache.txt" ]; then
  echo "bisect: configuring $build"
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >"$tmp/configure.log" 2>&1 || {
    cat "$tmp/configure.log" >&2
    exit 2
  }
fi

# GOOD: passes, and gives the baseline for --max-drift
git checkout -q "$good" || exit 2
if [ -n "$max_drift" ]; then
  cmake --build "$build" --target mixcheck -j"$(nproc)" >"$tmp/step.log" 2>&1 || { cat "$tmp/step.log" >&2; echo "bisect: GOOD does not build" >&2; exit 3; }
  "$build/mixcheck" run -q "${run_opts[@]}" --json "$tmp/baseline.json" >"$tmp/good.log" 2>&1
  rc=$?
  export MC_BISECT_BASELINE=$tmp/baseline.json
else
  bash "$tmp/bisect.sh" --step "${run_opts[@]}"
  rc=$?
fi
if [ $rc -ne 0 ]; then
  [ -f "$tmp/good.log" ] && tail -20 "$tmp/good.log" >&2
  tail -20 "$tmp/step.log" >&2
  echo "bisect: GOOD ($good) does not pass with these options (exit $rc): nothing to bisect" >&2
  exit 3
fi
# BAD: must not pass
git checkout -q "$bad" || exit 2
bash "$tmp/bisect.sh" --step "${run_opts[@]}"
rc=$?
if [ $rc -eq 0 ]; then
  echo "bisect: BAD ($bad) passes with these options${max_drift:+ and --max-drift $max_drift}: nothing to bisect" >&2
  exit 3
elif [ $rc -eq 125 ]; then
  tail -20 "$tmp/step.log" >&2
  echo "bisect: BAD ($bad) cannot be tested (does not build, or an input error)" >&2
  exit 3
fi

git bisect start "$bad" "$good" >/dev/null || exit 1
git bisect run bash "$tmp/bisect.sh" --step "${run_opts[@]}" >"$tmp/bisect.log" 2>&1
[ -n "${MC_BISECT_KEEP_LOG:-}" ] && cp "$tmp/bisect.log" "$MC_BISECT_KEEP_LOG"
grep '^bisect: ' "$tmp/bisect.log"
first=$(git rev-parse -q --verify refs/bisect/bad)
if grep -q "is the first bad commit" "$tmp/bisect.log" && [ -n "$first" ]; then
  echo "first bad commit: $(git log -1 --format='%H %s' "$first")"
  exit 0
fi
tail -20 "$tmp/bisect.log" >&2
echo "bisect: no first bad commit found" >&2
exit 1
