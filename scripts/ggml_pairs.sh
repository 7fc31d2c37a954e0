#!/usr/bin/env bash
# ggml_pairs.sh GGML_DIR [PAIRS] [OPS] — mixcheck's cpu cores against ggml-cpu at ggml's own perf shapes, in
# alternating pairs (docs/performance.md "Against ggml"). Not part of CI and fetches nothing: GGML_DIR is a
# checkout of ggml (or of llama.cpp's ggml/); this builds its test-backend-ops there (Release, native flags,
# CPU only, in GGML_DIR/build-mixcheck) and then runs, PAIRS times (default 5), each op of OPS (a comma list of
# mamba2, gdn, kda; default all three: ggml's perf mode runs every perf case of an op, about a minute a pair for
# GATED_DELTA_NET) right before
# mixcheck's bench at the same shape (ggml at its own thread count, the CPU count; mixcheck at 2):
#   SSM_SCAN         d_state 128, head_dim 64, 48 heads, 1 group, 512 tokens  vs  bench --shape ssm_scan
#   GATED_DELTA_NET  32 heads of 128, 512 tokens (ggml's PP-512)             vs  bench --core --family gdn --len 512
#   GATED_DELTA_NET  kda=1: 32 heads of 128, one token (ggml's only KDA perf case: a decode step)
#                                                                             vs  bench --core --family kda --len 1
# It prints each pair's tokens/s and, per op, the medians and their ratio (mixcheck / ggml). Run it on a quiet
# machine: only pairs run back to back are comparable. ggml's SSM_SCAN is the scan alone; mixcheck's core
# also runs the conv and its SiLU (ggml's SSM_CONV, a separate op there). Its GATED_DELTA_NET graph includes
# the l2 norms of q and k, as mixcheck's core does; with kda=1 it takes the per-channel log decay g itself,
# where mixcheck's KDA core also computes it (a_neg · softplus(f)) and β = σ(b).
set -euo pipefail
ggml=${1:?usage: scripts/ggml_pairs.sh GGML_DIR [PAIRS] [OPS]}
pairs=${2:-5}
ops=,${3:-mamba2,gdn,kda},
cd "$(dirname "$0")/.."
mixcheck=build/mixcheck
[ -x "$mixcheck" ] || { echo "ggml_pairs: build mixcheck first (scripts/bootstrap.sh)" >&2; exit 2; }
src=$ggml
[ -f "$ggml/ggml/CMakeLists.txt" ] && src=$ggml/ggml # a llama.cpp checkout
[ -f "$src/tests/test-backend-ops.cpp" ] || { echo "ggml_pairs: no tests/test-backend-ops.cpp under $src" >&2; exit 2; }
bdir=$src/build-mixcheck
if [ ! -x "$bdir/bin/test-backend-ops" ]; then
  cmake -S "$src" -B "$bdir" -DCMAKE_BUILD_TYPE=Release -DGGML_BUILD_TESTS=ON -DGGML_BUILD_EXAMPLES=OFF \
        -DGGML_NATIVE=ON -DGGML_OPENMP=OFF >/dev/null
  cmake --build "$bdir" -j"$(nproc)" --target test-backend-ops >/dev/null
fi
tbo=$bdir/bin/test-backend-ops
export OPENBLAS_NUM_THREADS=2

# tokens/s of ggml's case whose parameters match $2 (us/run over $3 tokens)
ggml_tps() {
  local us
  us=$("$tbo" perf -b CPU -o "$1" 2>/dev/null | grep -F "$2" | grep -Eo '[0-9.]+ us/run' | head -1 | cut -d' ' -f1)
  [ -n "$us" ] || { echo "ggml_pairs: no $1 case with $2 in test-backend-ops perf" >&2; exit 1; }
  awk -v us="$us" -v n="$3" 'BEGIN { printf "%.0f", n / (us * 1e-6) }'
}
# tokens/s of mixcheck's bench (the first table row)
mc_tps() {
  "$mixcheck" bench "$@" --reps 7 --threads 2 2>/dev/null | awk '$2 == "core" { print $8; exit }'
}
median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

run_op() {
  local name=$1 op=$2 match=$3 tokens=$4
  shift 4
  local g_all="" m_all=""
  for i in $(seq "$pairs"); do
    local g m
    g=$(ggml_tps "$op" "$match" "$tokens")
    m=$(mc_tps "$@")
    [ -n "$m" ] || { echo "ggml_pairs: mixcheck bench $* gave no core row" >&2; exit 1; }
    echo "$name pair $i: ggml $g tokens/s, mixcheck $m tokens/s"
    g_all="$g_all $g"
    m_all="$m_all $m"
  done
  local gm mm
  gm=$(echo "$g_all" | median)
  mm=$(echo "$m_all" | median)
  awk -v n="$name" -v g="$gm" -v m="$mm" -v p="$pairs" \
      'BEGIN { printf "%s: median of %d pairs: ggml %.0f, mixcheck %.0f tokens/s: %.2fx\n", n, p, g, m, m / g }'
}

[[ $ops == *,mamba2,* ]] && run_op "Mamba2 core (SSM_SCAN)" SSM_SCAN "n_head=48,n_group=1,n_seq_tokens=512" 512 --shape ssm_scan
[[ $ops == *,gdn,* ]] && run_op "GDN core (GATED_DELTA_NET)" GATED_DELTA_NET "head_count=32,head_size=128,n_seq_tokens=512,n_seqs=1,v_repeat=1,permuted=0,kda=0" \
       512 --core --family gdn --len 512
[[ $ops == *,kda,* ]] && run_op "KDA core, decode (GATED_DELTA_NET kda=1)" GATED_DELTA_NET \
       "head_count=32,head_size=128,n_seq_tokens=1,n_seqs=1,v_repeat=1,permuted=0,kda=1" 1 --core --family kda --len 1
exit 0
