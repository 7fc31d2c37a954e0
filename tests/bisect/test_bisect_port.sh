#!/usr/bin/env bash
# test_bisect_port.sh SOURCE BUILD SCRATCH MIXCHECK CMAKE CC BINDIR — CTest test_bisect_port:
# scripts/bisect.sh on a port's repository. Installs BUILD into SCRATCH/prefix (as install_package
# does), then makes a scratch git repository of examples/plugin's sources, built with
# find_package(mixcheck) against that prefix, in 5 commits on branch main:
#   c1 the port (examples/plugin made to compute in f64, so that the f64 tolerance of shortconv-tiny,
#      atol 1e-14 rtol 1e-12, judges it: it matches the golden to the last bit),
#   c2 notes, c3 the first output channel of every token scaled by 1 + 1e-6 (a relative error of 1e-6,
#      a headroom near 1e6), c4 a comment in the source (a rebuild), c5 notes;
# and a branch `broken` off c1 whose source does not compile. Every run is shortconv-tiny/prefill on
# backend example in f64. Checks: the script names c3 (the default port build with --prefix, and a
# --build command); every exit path (GOOD fails, BAD passes, GOOD or BAD does not build, usage errors
# before and after the first checkout, a dirty tree, a bisect already running, only skipped commits,
# SIGTERM during the search) has its exit code and leaves the repository on main at c5, clean, with
# no bisect running; a run started on a detached HEAD ends there. MIXCHECK is the built command
# (cmake --install does not build).
set -euo pipefail
src=$1 build=$2 scratch=$3 built=$4 cmake=$5 cc=$6 bindir=$7
fail() { echo "FAIL: $*" >&2; exit 1; }
[ -x "$built" ] || fail "$built is missing: build the mixcheck target first"
[ "$bindir" = bin ] || { echo "CMAKE_INSTALL_BINDIR is $bindir: bisect.sh --prefix looks for bin/mixcheck: skipped"; exit 77; }
bisect=$src/scripts/bisect.sh
rm -rf "$scratch"
mkdir -p "$scratch"
"$cmake" --install "$build" --prefix "$scratch/prefix" >/dev/null
prefix=$scratch/prefix
[ -x "$prefix/bin/mixcheck" ] || fail "no bin/mixcheck installed"
export CC=$cc
# the cmake used by the script's default build and by the --build commands below
PATH=$(dirname "$cmake"):$PATH

repo=$scratch/port
mkdir -p "$repo"
cd "$repo"
git init -q
git symbolic-ref HEAD refs/heads/main
git config user.email bisect@example.invalid
git config user.name bisect
git config advice.detachedHead false
cp "$src"/examples/plugin/CMakeLists.txt "$src"/examples/plugin/shortconv_port.c .
sed -i -E 's/\bfloat\b/double/g; s/MC_DTYPE_F32/MC_DTYPE_F64/g; s/([0-9])f\b/\1/g; s/in f32 only/in f64 only/' shortconv_port.c
grep -q 'MC_DTYPE_BIT(MC_DTYPE_F64)' shortconv_port.c || fail "the port was not made f64"
git add -A
git commit -qm "c1: the ShortConv port in f64"
c1=$(git rev-parse HEAD)
echo "notes 2" >NOTES
git add NOTES
git commit -qm "c2: notes"
c2=$(git rev-parse HEAD)
sed -i 's|^\( *\)linear(m->out_w, m->out_b, y, D, D, o);|&\n\1o[0] *= 1.0 + 1e-6; /* rescaled first channel */|' shortconv_port.c
grep -q 'o\[0\] \*= 1.0 + 1e-6;' shortconv_port.c || fail "the drift was not planted"
git commit -qam "c3: the first output channel scaled by 1 + 1e-6"
c3=$(git rev-parse HEAD)
echo "/* the port's math is in the header comment */" >>shortconv_port.c
git commit -qam "c4: a comment"
c4=$(git rev-parse HEAD)
echo "notes 5" >>NOTES
git commit -qam "c5: notes"
c5=$(git rev-parse HEAD)
git checkout -q -b broken "$c1"
echo "this does not compile" >>shortconv_port.c
git commit -qam "broken: a syntax error"
broken=$(git rev-parse HEAD)
git checkout -q main

sel=("$src/cases/shortconv/tiny.yaml" --backend example --dtype f64 --scenario prefill)
plugin="build-bisect/libmixcheck_example.so"

# restored: on main at c5, no tracked change, no bisect running
restored() {
  [ "$(git symbolic-ref -q HEAD)" = refs/heads/main ] || fail "$1: not back on main (HEAD: $(git rev-parse --short HEAD), $(git symbolic-ref -q HEAD || echo detached))"
  [ "$(git rev-parse HEAD)" = "$c5" ] || fail "$1: main moved"
  [ -z "$(git status --porcelain --untracked-files=no)" ] || fail "$1: the work tree has changes"
  [ ! -e "$(git rev-parse --git-path BISECT_START)" ] || fail "$1: a bisect is still running"
  [ -z "$(git for-each-ref refs/bisect)" ] || fail "$1: refs/bisect left behind"
}
# expect RC PATTERN NAME ARGS...: runs bisect.sh ARGS, wants exit RC, output matching PATTERN, the tree restored
expect() {
  local want=$1 pattern=$2 name=$3 rc=0 out
  shift 3
  out=$("$bisect" "$@" 2>&1) || rc=$?
  echo "== $name: exit $rc"
  echo "$out" | sed 's/^/   /'
  [ "$rc" = "$want" ] || fail "$name: exit $rc, expected $want"
  grep -Eq -- "$pattern" <<<"$out" || fail "$name: no line matching '$pattern'"
  restored "$name"
}

expect 0 "^first bad commit: $c3 c3: " "the default port build with --prefix" \
  "$c1" "$c5" --prefix "$prefix" "${sel[@]}" --plugin "$plugin"
found=$(sed -n 's/^mixcheck_DIR:PATH=//p' build-bisect/CMakeCache.txt)
[ "$found" = "$prefix/lib/cmake/mixcheck" ] || [ "$found" = "$prefix/lib64/cmake/mixcheck" ] ||
  fail "the default build found mixcheck at '$found', not in the prefix"

cmd='cmake -S . -B "$MC_BISECT_BUILD_DIR" -DCMAKE_BUILD_TYPE=Debug >/dev/null && cmake --build "$MC_BISECT_BUILD_DIR"'
expect 0 "^first bad commit: $c3 c3: " "a --build command" \
  "$c1" "$c5" --prefix "$prefix" --build "$cmd" --build-dir "$scratch/b2" "${sel[@]}" --plugin "$scratch/b2/libmixcheck_example.so"
found=$(sed -n 's/^mixcheck_DIR:PATH=//p' "$scratch/b2/CMakeCache.txt")
case $found in "$prefix"/*) ;; *) fail "the --build command found mixcheck at '$found', not in the prefix" ;; esac

expect 3 "GOOD \($c3\) does not pass with these options \(exit 1\): nothing to bisect" "GOOD fails" \
  "$c3" "$c5" --prefix "$prefix" "${sel[@]}" --plugin "$plugin"
# (from a folder below the top, the script named by a relative path: a relative --prefix is taken from
# there, the plugin from the top)
(cd build-bisect && bisect=$(realpath --relative-to=. "$bisect") && expect 3 "BAD \($c2\) passes with these options: nothing to bisect" "BAD passes" \
  "$c1" "$c2" --prefix ../../prefix "${sel[@]}" --plugin "$plugin")
expect 3 "GOOD \($broken\) does not build: nothing to bisect" "GOOD does not build" \
  broken "$c5" --prefix "$prefix" "${sel[@]}" --plugin "$plugin"
expect 3 "BAD \($broken\) does not build: nothing to bisect" "BAD does not build" \
  "$c1" broken --prefix "$prefix" "${sel[@]}" --plugin "$plugin"
expect 2 "the run options are an input error at GOOD \($c1\)" "an unknown scenario (an input error at GOOD)" \
  "$c1" "$c5" --prefix "$prefix" "${sel[@]}" --plugin "$plugin" --scenario no_such_scenario
expect 2 "nowhere: no such folder" "a --prefix that does not exist" \
  "$c1" "$c5" --prefix "$scratch/nowhere" "${sel[@]}" --plugin "$plugin"
expect 2 "holds no bin/mixcheck" "a --prefix without mixcheck" \
  "$c1" "$c5" --prefix "$repo" "${sel[@]}" --plugin "$plugin"
expect 2 "unknown commit 'no-such-rev'" "an unknown commit" \
  no-such-rev "$c5" --prefix "$prefix" "${sel[@]}" --plugin "$plugin"
expect 2 "--build needs a value" "--build without a value" "$c1" "$c5" --prefix "$prefix" --build
expect 2 "^usage|^bisect.sh GOOD BAD" "one argument" "$c1"
# a port build folder configured against another mixcheck is refused, not silently used
mkdir -p "$scratch/other"
printf 'mixcheck_DIR:PATH=/usr/lib/cmake/mixcheck\n' >"$scratch/other/CMakeCache.txt"
expect 2 "uses the mixcheck package at '/usr/lib/cmake/mixcheck', not the one under --prefix" "a build folder of another mixcheck" \
  "$c1" "$c5" --prefix "$prefix" --build-dir "$scratch/other" "${sel[@]}" --plugin "$plugin"

cfg='cmake -S . -B build-bisect >/dev/null && cmake --build build-bisect'
# only skipped commits between GOOD and BAD: the bisect cannot decide (exit 1)
skip_mid="case \$(git rev-parse HEAD) in $c1|$c5) ;; *) exit 1 ;; esac; $cfg"
expect 1 "no first bad commit found" "every commit between skipped" \
  "$c1" "$c5" --prefix "$prefix" --build "$skip_mid" "${sel[@]}" --plugin "$plugin"

# a dirty tree: refused before any checkout, the change kept
echo "/* work in progress */" >>shortconv_port.c
rc=0
out=$("$bisect" "$c1" "$c5" --prefix "$prefix" "${sel[@]}" --plugin "$plugin" 2>&1) || rc=$?
echo "== a dirty tree: exit $rc"; echo "   $out"
[ "$rc" = 2 ] || fail "a dirty tree: exit $rc, expected 2"
grep -q "uncommitted changes" <<<"$out" || fail "a dirty tree: no message"
tail -1 shortconv_port.c | grep -q "work in progress" || fail "a dirty tree: the change was lost"
[ "$(git symbolic-ref -q HEAD)" = refs/heads/main ] || fail "a dirty tree: HEAD moved"
git checkout -q -- shortconv_port.c
restored "a dirty tree"

# a bisect already running (the user's own) is left alone
git bisect start "$c5" "$c1" >/dev/null
at=$(git rev-parse HEAD)
rc=0
out=$("$bisect" "$c1" "$c5" --prefix "$prefix" "${sel[@]}" --plugin "$plugin" 2>&1) || rc=$?
echo "== a bisect already running: exit $rc"; echo "   $out"
[ "$rc" = 2 ] || fail "a bisect already running: exit $rc, expected 2"
[ -e "$(git rev-parse --git-path BISECT_START)" ] || fail "a bisect already running: it was ended"
[ "$(git rev-parse HEAD)" = "$at" ] || fail "a bisect already running: HEAD moved"
git bisect reset >/dev/null 2>&1
restored "a bisect already running"

# started on a detached HEAD: it ends on that commit, still detached
git checkout -q --detach "$c4"
rc=0
out=$("$bisect" "$c1" "$c5" --prefix "$prefix" "${sel[@]}" --plugin "$plugin" 2>&1) || rc=$?
echo "== a detached start: exit $rc"
[ "$rc" = 0 ] || fail "a detached start: exit $rc"
grep -q "^first bad commit: $c3 " <<<"$out" || fail "a detached start: c3 not found"
git symbolic-ref -q HEAD >/dev/null && fail "a detached start: ended on a branch"
[ "$(git rev-parse HEAD)" = "$c4" ] || fail "a detached start: ended at $(git rev-parse --short HEAD), not c4"
git checkout -q main
restored "a detached start"

# SIGTERM while a step between GOOD and BAD builds (the build sleeps there): the script stops at once,
# the build with it, and the tree is restored
marker=$scratch/sleeping
rm -f "$marker"
slow="case \$(git rev-parse HEAD) in $c1|$c5) ;; *) sleep 120 & echo \$! >$marker; wait ;; esac; $cfg"
"$bisect" "$c1" "$c5" --prefix "$prefix" --build "$slow" "${sel[@]}" --plugin "$plugin" >"$scratch/term.log" 2>&1 &
pid=$!
for _ in $(seq 300); do [ -s "$marker" ] && break; sleep 0.1; done
[ -s "$marker" ] || { kill "$pid" 2>/dev/null; cat "$scratch/term.log"; fail "SIGTERM: the search never reached a middle commit"; }
[ -e "$(git rev-parse --git-path BISECT_START)" ] || fail "SIGTERM: no bisect running during the search"
t0=$(date +%s)
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
elapsed=$(($(date +%s) - t0))
echo "== SIGTERM during the search: exit $rc after ${elapsed}s"
sed 's/^/   /' "$scratch/term.log"
[ "$rc" = 143 ] || fail "SIGTERM: exit $rc, expected 143"
[ "$elapsed" -le 15 ] || fail "SIGTERM: the script took ${elapsed}s to stop"
grep -q "interrupted (SIGTERM)" "$scratch/term.log" || fail "SIGTERM: no message"
sleeper=$(cat "$marker")
for _ in $(seq 50); do kill -0 "$sleeper" 2>/dev/null || break; sleep 0.1; done
! kill -0 "$sleeper" 2>/dev/null || { kill "$sleeper"; fail "SIGTERM: the step's build was left running"; }
restored "SIGTERM"

echo "ok: bisect.sh names c3 in a port repository, and every exit path restores main"
