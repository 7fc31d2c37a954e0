#!/usr/bin/env bash
# tests/fuzz/run.sh BUILD_DIR [SECONDS] — runs fuzz_case_yaml and fuzz_golden (built with
# -DMIXCHECK_FUZZ=ON into BUILD_DIR) for SECONDS each (default 60), side by side (one process each:
# the two take SECONDS together, not 2·SECONDS, on a machine of two cores or more), from their seed corpora; new corpus entries go to BUILD_DIR/fuzz-corpus/<target>/ (the committed seeds are
# never written), findings (crash-*, leak-*, timeout-*, oom-*) to BUILD_DIR/fuzz-findings/. Exits
# non-zero on a finding. Extra arguments after SECONDS go to libFuzzer (e.g. -jobs=4 -workers=4).
#
# fuzz_golden runs in its structured mode (edit scripts over the seed goldens, see fuzz_golden.c).
# With MC_FUZZ_GOLDEN_RAW=1 in the environment it fuzzes raw file bytes instead, which mostly finds
# libhdf5's own problems: a damaged file can make HDF5 ask for hundreds of GB (it copes with a NULL
# from malloc), leak a few bytes on error paths, or loop for a long time. Hence
# allocator_may_return_null=1, a malloc limit above any real golden, and lsan-hdf5.supp.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: run.sh BUILD_DIR [SECONDS] [libFuzzer args...]}" && pwd)
secs=${2:-60}
shift $(( $# >= 2 ? 2 : 1 ))
export ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1
export LSAN_OPTIONS=suppressions=$here/lsan-hdf5.supp
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
mkdir -p "$build/fuzz-findings"
run_one() {
  local t=$1 seeds work
  shift
  seeds=$here/corpus_yaml
  [ "$t" = fuzz_golden ] && seeds=$here/corpus_golden_edits   # edit scripts over corpus_golden/*.h5
  [ "$t" = fuzz_golden ] && [ "${MC_FUZZ_GOLDEN_RAW:-0}" = 1 ] && seeds=$here/corpus_golden
  work=$build/fuzz-corpus/$t
  mkdir -p "$work"
  "$build/tests/fuzz/$t" -max_total_time="$secs" -timeout=20 -rss_limit_mb=4096 -malloc_limit_mb=1000000 \
    -print_final_stats=1 -artifact_prefix="$build/fuzz-findings/$t-" "$@" "$work" "$seeds" \
    > "$build/fuzz-findings/$t.log" 2>&1
}
targets=(fuzz_case_yaml fuzz_golden)
pids=()
for t in "${targets[@]}"; do
  echo "== $t: ${secs}s"
  run_one "$t" "$@" &
  pids+=($!)
done
status=0
for i in "${!targets[@]}"; do
  t=${targets[$i]}
  if ! wait "${pids[$i]}"; then
    echo "$t: FINDING (log: $build/fuzz-findings/$t.log)"
    grep -E "ERROR|SUMMARY|Test unit written" "$build/fuzz-findings/$t.log" | head -20 || true
    status=1
  else
    echo "$t:"
    grep -E "^stat::number_of_executed_units|^Done" "$build/fuzz-findings/$t.log" || true
  fi
done
exit $status
