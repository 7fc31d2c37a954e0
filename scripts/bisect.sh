#!/usr/bin/env bash
# bisect.sh GOOD BAD [--prefix DIR] [--build CMD] [--build-dir DIR] [--max-drift R] [RUN OPTIONS...]
#
# Finds the first commit between GOOD and BAD at which `mixcheck run RUN OPTIONS` stops passing, with
# `git bisect run`, in the repository of the current directory: the mixcheck tree itself, or a port's
# repository (a plugin built with find_package(mixcheck) against an installed mixcheck). At every step
# the commit is built (a commit that does not build is skipped, exit 125) and mixcheck runs with
# --bisect (a plugin that cannot be loaded skips the commit).
#
# What is built and which mixcheck runs:
#   (default)     the mixcheck tree: only the `mixcheck` target is rebuilt, in one build folder reused
#                 by every step (so a step recompiles what the commit changed); it runs DIR/mixcheck.
#   --prefix DIR  a port repository: DIR is an installed mixcheck (`cmake --install BUILD --prefix
#                 DIR`); DIR/bin/mixcheck runs the cases, and the build folder is configured with
#                 -DCMAKE_PREFIX_PATH=DIR (its find_package(mixcheck) must find DIR) and built whole
#                 at every step. Name the plugin the port builds in the run options, e.g.
#                 --plugin build-bisect/libport.so (relative paths are from the top of the work tree).
#   --build CMD   the build of a step, run by bash at the top of the work tree instead of the default
#                 (a non-zero exit skips the commit). It sees MC_BISECT_BUILD_DIR (the build folder)
#                 and, with --prefix, MC_BISECT_PREFIX and CMAKE_PREFIX_PATH (DIR first). Without
#                 --prefix it must build the mixcheck executable into the build folder.
#   --build-dir DIR  the build folder (default build-bisect at the top of the work tree). Without
#                 --build it is configured with `cmake -S . -B DIR -DCMAKE_BUILD_TYPE=Release` (plus
#                 the prefix) unless it holds a configured build already; with --prefix, one that
#                 found another mixcheck is refused.
# A relative --prefix or --build-dir is taken from the current directory.
#
# --max-drift R: hunt for a drift within tolerance. GOOD is built and run first with RUN OPTIONS and
# its JSON report becomes the baseline; every step then runs with --baseline <that report>
# --max-drift R, so a commit is bad when a check fails or drifts by more than R over GOOD.
#
# Before bisecting, GOOD must build and pass and BAD must not pass (with the same options): a BAD that
# passes means there is nothing to find (exit 3, which is also what a drift within tolerance gives
# without --max-drift). Run options that are an input error at GOOD or BAD (mixcheck exit 2 there)
# stop it (exit 2). During the search a run that exits 2 (an input error at that commit, e.g. a case
# it does not have yet) skips the commit.
#
# The work tree must be clean (uncommitted changes to tracked files: exit 2, as checkouts could lose
# them) and no other bisect may be running. However the script ends (a result, an error, an early
# exit, SIGINT/SIGTERM/SIGHUP), it ends the bisect it started and checks out where it started: the
# branch, or the commit when it started on a detached HEAD.
#
# Exit: 0 the first bad commit was found (printed as "first bad commit: <sha> <subject>");
#       1 the bisect failed (e.g. only skipped commits left);
#       2 usage or input error (an unknown option value or commit, a dirty tree, a bisect already
#         running, no mixcheck at --prefix, a build folder that does not configure or found another
#         mixcheck, run options that are an input error at GOOD or BAD);
#       3 nothing to bisect (GOOD does not build, fails or cannot be tested; BAD passes, does not
#         build or cannot be tested);
#       128+N interrupted by signal N (130 SIGINT, 143 SIGTERM, 129 SIGHUP).
set -uo pipefail

if [ "${1:-}" = --step ]; then
  # one step of `git bisect run` (this script, copied out of the tree that bisect checks out). Writes
  # what happened to MC_BISECT_STATUS: "build" (it did not build), "nomixcheck" (it built, but there is
  # no mixcheck to run) or "run RC" (mixcheck's exit code).
  shift
  here=$(git rev-parse --short HEAD)
  bash -c "$MC_BISECT_BUILD_CMD" >"$MC_BISECT_LOG" 2>&1 || {
    echo build >"$MC_BISECT_STATUS"
    echo "bisect: $here does not build: skipped"
    exit 125
  }
  if [ ! -x "$MC_BISECT_MIXCHECK" ]; then
    echo nomixcheck >"$MC_BISECT_STATUS"
    echo "bisect: $here built, but $MC_BISECT_MIXCHECK is not there: skipped"
    exit 125
  fi
  extra=()
  if [ -n "${MC_BISECT_BASELINE:-}" ]; then extra=(--baseline "$MC_BISECT_BASELINE" --max-drift "$MC_BISECT_MAX_DRIFT"); fi
  if [ -n "${MC_BISECT_JSON:-}" ]; then extra+=(--json "$MC_BISECT_JSON"); fi
  "$MC_BISECT_MIXCHECK" run --bisect -q "$@" "${extra[@]}" >"$MC_BISECT_LOG" 2>&1
  rc=$?
  echo "run $rc" >"$MC_BISECT_STATUS"
  echo "bisect: $here: mixcheck exit $rc"
  case $rc in
    0 | 1 | 125) exit $rc ;;
    2) exit 125 ;; # an input error at this commit: it cannot be tested
    *) exit 1 ;;   # a crash of mixcheck itself
  esac
fi

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
die() { echo "bisect: $1" >&2; exit "${2:-2}"; }
for a in "$@"; do
  case $a in -h | --help) usage; exit 0 ;; esac
done
[ $# -ge 2 ] || { usage >&2; exit 2; }
good_arg=$1 bad_arg=$2
shift 2
top=$(git rev-parse --show-toplevel 2>/dev/null) || die "not inside a git work tree"
self=$(realpath "$0")
build=$top/build-bisect prefix="" build_cmd="" max_drift=""
run_opts=()
need() { [ $# -ge 2 ] && [ -n "$2" ] || die "$1 needs a value (--help)"; }
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) need "$@"; build=$(realpath -m "$2"); shift 2 ;;
    --prefix) need "$@"; prefix=$(realpath -m "$2"); shift 2 ;;
    --build) need "$@"; build_cmd=$2; shift 2 ;;
    --max-drift) need "$@"; max_drift=$2; shift 2 ;;
    *) run_opts+=("$1"); shift ;;
  esac
done
# --prefix and --build-dir are resolved from the current directory; the run options from the top
cd "$top" || exit 2
good=$(git rev-parse -q --verify "$good_arg^{commit}") || die "unknown commit '$good_arg'"
bad=$(git rev-parse -q --verify "$bad_arg^{commit}") || die "unknown commit '$bad_arg'"
if [ -n "$prefix" ]; then
  [ -d "$prefix" ] || die "--prefix $prefix: no such folder"
  mixcheck=$prefix/bin/mixcheck
  [ -x "$mixcheck" ] || die "--prefix $prefix holds no bin/mixcheck: give the folder of \`cmake --install BUILD --prefix DIR\`"
  export MC_BISECT_PREFIX=$prefix CMAKE_PREFIX_PATH=$prefix${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
else
  mixcheck=$build/mixcheck
fi
if ! git diff --quiet HEAD -- || ! git diff --cached --quiet; then
  die "the work tree has uncommitted changes; commit or stash them first (checkouts could lose them)"
fi
[ -e "$(git rev-parse --git-path BISECT_START)" ] && die "a git bisect is already running here (git bisect reset ends it)"

# From here on the tree may be checked out elsewhere: every way out goes through cleanup.
tmp=$(mktemp -d /tmp/mixcheck-bisect-XXXXXX) || exit 2
if start=$(git symbolic-ref -q --short HEAD); then start_ref=refs/heads/$start; else start=$(git rev-parse HEAD) start_ref=""; fi
child=""
# spawn [-o FILE] CMD...: runs CMD (its output to FILE) in a process group of its own and waits for it,
# so that a signal reaches the script at once (not when CMD ends) and stops all of CMD (builds
# included). The output is redirected here, not around the call: the traps must write to the script's.
spawn() {
  local out="" group=()
  if [ "$1" = -o ]; then out=$2; shift 2; fi
  command -v setsid >/dev/null && group=(setsid)
  if [ -n "$out" ]; then "${group[@]}" "$@" >"$out" 2>&1 & else "${group[@]}" "$@" & fi
  child=$!
  wait "$child"
  local rc=$?
  child=""
  return $rc
}
stop_child() {
  [ -n "$child" ] || return 0
  kill -TERM -- -"$child" 2>/dev/null || kill -TERM "$child" 2>/dev/null
  wait "$child" 2>/dev/null
  for _ in $(seq 50); do kill -0 -- -"$child" 2>/dev/null || break; sleep 0.1; done
  child=""
}
cleanup() {
  local rc=$?
  trap - EXIT
  trap '' INT TERM HUP # a second signal must not stop the restoring half way
  stop_child
  if [ -e "$(git rev-parse --git-path BISECT_START)" ]; then
    git bisect reset >/dev/null 2>&1 || echo "bisect: git bisect reset failed" >&2
  fi
  if [ -n "$start_ref" ]; then
    [ "$(git symbolic-ref -q HEAD)" = "$start_ref" ] || git checkout -q "$start" -- || true
    [ "$(git symbolic-ref -q HEAD)" = "$start_ref" ] || echo "bisect: could not check out $start again: the work tree is at $(git rev-parse --short HEAD)" >&2
  else
    git checkout -q --detach "$start" -- || true
    [ "$(git rev-parse HEAD)" = "$start" ] || echo "bisect: could not check out $start again: the work tree is at $(git rev-parse --short HEAD)" >&2
  fi
  rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT
trap 'echo "bisect: interrupted (SIGINT)" >&2; exit 130' INT
trap 'echo "bisect: interrupted (SIGTERM)" >&2; exit 143' TERM
trap 'echo "bisect: interrupted (SIGHUP)" >&2; exit 129' HUP

cp "$self" "$tmp/bisect.sh"
export MC_BISECT_BUILD_DIR=$build MC_BISECT_MIXCHECK=$mixcheck MC_BISECT_LOG=$tmp/step.log \
  MC_BISECT_STATUS=$tmp/step.status MC_BISECT_BASELINE="" MC_BISECT_MAX_DRIFT=$max_drift
if [ -n "$build_cmd" ]; then
  export MC_BISECT_BUILD_CMD=$build_cmd
else
  if [ -n "$prefix" ]; then
    export MC_BISECT_BUILD_CMD='cmake --build "$MC_BISECT_BUILD_DIR" -j"$(nproc)"'
    conf=(-DCMAKE_PREFIX_PATH="$prefix")
  else
    export MC_BISECT_BUILD_CMD='cmake --build "$MC_BISECT_BUILD_DIR" --target mixcheck -j"$(nproc)"'
    conf=()
  fi
  if [ ! -f "$build/CMakeCache.txt" ]; then
    echo "bisect: configuring $build"
    spawn -o "$tmp/configure.log" cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release "${conf[@]}" || {
      cat "$tmp/configure.log" >&2
      [ -n "$prefix" ] || echo "bisect: (a port's repository? give --prefix DIR of an installed mixcheck)" >&2
      die "$build does not configure"
    }
  fi
  if [ -n "$prefix" ]; then
    found=$(sed -n 's/^mixcheck_DIR:PATH=//p' "$build/CMakeCache.txt")
    case $found in
      "$prefix"/*) ;;
      *) die "$build uses the mixcheck package at '${found:-nowhere}', not the one under --prefix $prefix (remove it, or give another --build-dir)" ;;
    esac
  fi
fi

step() { rm -f "$tmp/step.status"; spawn bash "$tmp/bisect.sh" --step "${run_opts[@]}"; }
status() { cat "$tmp/step.status" 2>/dev/null; }
# Exits for a GOOD or BAD (name $1) that cannot be judged, from the step's status.
untestable() {
  local s
  s=$(status)
  tail -20 "$tmp/step.log" >&2
  case $s in
    build) die "$1 does not build: nothing to bisect" 3 ;;
    nomixcheck) die "$1 built, but $mixcheck is not there (--build-dir, --build)" 2 ;;
    "run 2") die "the run options are an input error at $1 (mixcheck exit 2)" 2 ;;
    "run 125") die "$1 cannot be tested (mixcheck exit 125: a plugin that does not load, or nothing it could run)" 3 ;;
  esac
}

# GOOD: builds and passes, and gives the baseline for --max-drift
git checkout -q --detach "$good" || die "cannot check out GOOD ($good)"
[ -n "$max_drift" ] && export MC_BISECT_JSON=$tmp/baseline.json
step
rc=$?
export MC_BISECT_JSON=""
[ $rc -eq 125 ] && untestable "GOOD ($good)"
[ -n "$max_drift" ] && export MC_BISECT_BASELINE=$tmp/baseline.json
if [ $rc -ne 0 ]; then
  tail -20 "$tmp/step.log" >&2
  die "GOOD ($good) does not pass with these options (exit $rc): nothing to bisect" 3
fi
# BAD: must not pass
git checkout -q --detach "$bad" || die "cannot check out BAD ($bad)"
step
rc=$?
if [ $rc -eq 0 ]; then
  die "BAD ($bad) passes with these options${max_drift:+ and --max-drift $max_drift}: nothing to bisect" 3
elif [ $rc -eq 125 ]; then
  untestable "BAD ($bad)"
fi

git bisect start "$bad" "$good" >/dev/null || die "git bisect start failed" 1
spawn -o "$tmp/bisect.log" git bisect run bash "$tmp/bisect.sh" --step "${run_opts[@]}"
[ -n "${MC_BISECT_KEEP_LOG:-}" ] && cp "$tmp/bisect.log" "$MC_BISECT_KEEP_LOG"
grep '^bisect: ' "$tmp/bisect.log"
first=$(git rev-parse -q --verify refs/bisect/bad)
if grep -q "is the first bad commit" "$tmp/bisect.log" && [ -n "$first" ]; then
  echo "first bad commit: $(git log -1 --format='%H %s' "$first")"
  exit 0
fi
tail -20 "$tmp/bisect.log" >&2
die "no first bad commit found" 1
