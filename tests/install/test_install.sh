#!/usr/bin/env bash
# test_install.sh BUILD SCRATCH MIXCHECK CMAKE CC BINDIR LIBDIR INCLUDEDIR — CTest install_package,
# run from the source root. Installs BUILD into SCRATCH/staged and moves it to SCRATCH/prefix (the
# package must be relocatable), then from the moved prefix:
#   1. configures and builds examples/plugin out of tree with find_package(mixcheck);
#   2. configures and builds consumer/ (a C file compiled with `pkg-config --cflags mixcheck` only);
#   3. runs the installed mixcheck on cases/shortconv with the out-of-tree plugin: exit 0, at least
#      one PASS, no FAIL or ERROR;
#   4. configures cases_consumer/ (find_package, mixcheck_add_case_tests on cases/shortconv): one CTest
#      per case, selected by name (-R) and label (-L), one of them run with its summary test;
#   5. (with /usr/bin/python3 and numpy) copies the prefix once more and runs a Python backend from each
#      copy's mixcheck: the mixcheck_backend package it uses is that copy's share/mixcheck/python, not the
#      source tree's python/ (where_shortconv.py checks it), and MIXCHECK_PYTHON_DIR still overrides it.
# MIXCHECK is the built command (it must exist: `cmake --install` does not build).
set -euo pipefail
build=$1 scratch=$2 built=$3 cmake=$4 cc=$5 bindir=$6 libdir=$7 includedir=$8
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "install_package: $*" >&2; exit 1; }

[ -x "$built" ] || fail "$built is missing: build the mixcheck target first"
rm -rf "$scratch"
mkdir -p "$scratch"
"$cmake" --install "$build" --prefix "$scratch/staged"
mv "$scratch/staged" "$scratch/prefix"
prefix=$scratch/prefix
[ -f "$prefix/$includedir/mixcheck/backend.h" ] || fail "$prefix/$includedir/mixcheck/backend.h not installed"

# Only the scratch prefix's packages are visible to the two projects.
export PKG_CONFIG_LIBDIR=$prefix/$libdir/pkgconfig PKG_CONFIG_PATH=
configure() { "$cmake" -S "$1" -B "$2" -DCMAKE_C_COMPILER="$cc" -DCMAKE_PREFIX_PATH="$prefix" \
                  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF; }

echo "== examples/plugin with find_package(mixcheck)"
configure examples/plugin "$scratch/plugin"
found=$(sed -n 's/^mixcheck_DIR:PATH=//p' "$scratch/plugin/CMakeCache.txt")
[ "$found" = "$prefix/$libdir/cmake/mixcheck" ] || fail "find_package(mixcheck) used '$found', not the scratch prefix"
"$cmake" --build "$scratch/plugin"
plugin=$scratch/plugin/libmixcheck_example.so
[ -f "$plugin" ] || fail "$plugin was not built"

echo "== consumer with pkg-config --cflags mixcheck"
configure "$here/consumer" "$scratch/consumer"
"$cmake" --build "$scratch/consumer"

echo "== installed mixcheck, out-of-tree plugin"
rc=0
out=$("$prefix/$bindir/mixcheck" run cases/shortconv --plugin "$plugin" --backend example --color never 2>&1) || rc=$?
echo "$out"
[ "$rc" -eq 0 ] || fail "mixcheck exited $rc"
grep -q '^PASS ' <<<"$out" || fail "no PASS line"
! grep -Eq '^(FAIL|ERROR)' <<<"$out" || fail "a check failed or errored"
echo "== mixcheck_add_case_tests from the installed package"
"$cmake" -S "$here/cases_consumer" -B "$scratch/cases" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF -DMC_CASES_DIR="$PWD/cases/shortconv"
ctest_bin=$(dirname "$cmake")/ctest
n_cases=$(ls cases/shortconv/*.yaml | wc -l)
# -FA: without the two fixture tests that frame any selection (port.cases-start, port.not-tested)
n=$("$ctest_bin" --test-dir "$scratch/cases" -N -L shortconv -FA '.*' | sed -n 's/^Total Tests: //p')
[ "$n" = "$n_cases" ] || fail "ctest -L shortconv lists $n tests, expected $n_cases"
n=$("$ctest_bin" --test-dir "$scratch/cases" -N -R 'port[.]shortconv-tiny$' -FA '.*' | sed -n 's/^Total Tests: //p')
[ "$n" = 1 ] || fail "ctest -R port.shortconv-tiny lists $n tests"
out=$("$ctest_bin" --test-dir "$scratch/cases" -R 'port[.]shortconv-tiny$' --output-on-failure -V) || fail "the case test failed"
grep -q 'all 1 case(s) run were tested' <<<"$out" || fail "no summary of the cases tested: $out"
echo "== the installed Python backend package"
pydir=${MC_PYTHON_INSTALL_DIR:-share/mixcheck/python}
[ -f "$prefix/$pydir/mixcheck_backend/worker.py" ] || fail "$prefix/$pydir/mixcheck_backend not installed"
if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
  cp -a "$prefix" "$scratch/copied"
  unset MIXCHECK_PYTHON_DIR
  for p in "$prefix" "$scratch/copied"; do
    rc=0
    out=$(MC_EXPECT_PYTHON_DIR="$p/$pydir" "$p/$bindir/mixcheck" run cases/shortconv/k4.yaml --python /usr/bin/python3 \
            --python-backend "$here/where_shortconv.py" --backend np-shortconv -k /prefill/ --color never 2>&1) || rc=$?
    echo "$out"
    [ "$rc" -eq 0 ] || fail "$p/$bindir/mixcheck with a Python backend exited $rc"
    grep -q '^PASS  shortconv-k4 .* np-shortconv' <<<"$out" || fail "no PASS line of np-shortconv"
  done
  # the check can fail: the source tree's package is not the installed one
  rc=0
  out=$(MC_EXPECT_PYTHON_DIR="$PWD/python" "$prefix/$bindir/mixcheck" list cases/shortconv/k4.yaml \
          --python /usr/bin/python3 --python-backend "$here/where_shortconv.py" 2>&1) || rc=$?
  [ "$rc" -eq 2 ] && grep -q "mixcheck_backend was imported from $(realpath "$prefix/$pydir")" <<<"$out" ||
    fail "where_shortconv.py accepted a package from the wrong place (exit $rc): $out"
  # MIXCHECK_PYTHON_DIR overrides the installed package
  mkdir -p "$scratch/override"
  cp -a "$prefix/$pydir/mixcheck_backend" "$scratch/override/"
  MIXCHECK_PYTHON_DIR="$scratch/override" MC_EXPECT_PYTHON_DIR="$scratch/override" "$prefix/$bindir/mixcheck" list \
    cases/shortconv/k4.yaml --python /usr/bin/python3 --python-backend "$here/where_shortconv.py" | grep -q np-shortconv ||
    fail "MIXCHECK_PYTHON_DIR did not override the installed package"
else
  echo "install_package: /usr/bin/python3 with numpy not found: the Python backend part is not run"
fi
echo "install_package: ok"
