#!/usr/bin/env bash
# test_bisect.sh SOURCE_DIR SCRATCH — scripts/bisect.sh on a scratch git repository: the source tree at
# HEAD, then 8 commits, the 5th of which scales the cpu Mamba2 D term by 1 + 1e-5 (the drift of
# tests/drift, planted in the kernel: within tolerance, a drift against the baseline). `bisect.sh
# --max-drift 1.3` must name the 5th commit; without --max-drift every commit passes and it must say
# there is nothing to bisect (exit 3); after both the repository is back on its branch. One Debug
# build folder serves every step (3-4 incremental builds per bisect); the runs are restricted to two
# checks with -k. Exit 77 outside a git checkout.
set -euo pipefail
src=$1 scratch=$2
git -C "$src" rev-parse -q --verify HEAD >/dev/null 2>&1 || { echo "not a git checkout: skipped"; exit 77; }
rm -rf "$scratch"
mkdir -p "$scratch/repo"
repo=$scratch/repo build=$scratch/build
git -C "$src" archive HEAD | tar -x -C "$repo"
cd "$repo"
git init -q
git config user.email bisect@example.invalid
git config user.name bisect
git add -A
git commit -qm "base"
good=$(git rev-parse HEAD)
for i in 1 2 3 4 5 6 7 8; do
  if [ "$i" = 5 ]; then
    sed -i 's/const float dskip = m->w\[M2C_D\]\[\([^]]*\)\];/const float dskip = m->w[M2C_D][\1] * 1.00001f;/' \
      kernels/cpu/mamba2_forward.c
    [ "$(grep -c '1.00001f' kernels/cpu/mamba2_forward.c)" -ge 1 ] || { echo "the D term was not found to plant"; exit 1; }
    git commit -qam "step $i: the Mamba2 D skip scaled by 1 + 1e-5"
    planted=$(git rev-parse HEAD)
  else
    echo "note $i" >>docs/bisect-notes.txt
    git add docs/bisect-notes.txt
    git commit -qm "step $i: notes"
  fi
done
bad=$(git rev-parse HEAD)
branch=$(git symbolic-ref HEAD)
# restored NAME: back on the branch at BAD, no bisect running
restored() {
  [ "$(git symbolic-ref -q HEAD)" = "$branch" ] || { echo "FAIL: $1: not back on $branch"; exit 1; }
  [ "$(git rev-parse HEAD)" = "$bad" ] || { echo "FAIL: $1: the work tree was not restored"; exit 1; }
  [ ! -e "$(git rev-parse --git-path BISECT_START)" ] || { echo "FAIL: $1: a bisect is still running"; exit 1; }
}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug >/dev/null
sel=(cases/mamba2 --backend cpu --dtype f32 -k mamba2-decay/prefill -k mamba2-tiny/prefill)

set +e
out=$(scripts/bisect.sh "$good" "$bad" --build-dir "$build" --max-drift 1.3 "${sel[@]}" 2>&1)
rc=$?
set -e
echo "$out"
[ $rc -eq 0 ] || { echo "FAIL: bisect --max-drift exit $rc"; exit 1; }
echo "$out" | grep -q "^first bad commit: $planted " || { echo "FAIL: the planted commit $planted not found"; exit 1; }
restored "bisect --max-drift"

set +e
out=$(scripts/bisect.sh "$good" "$bad" --build-dir "$build" "${sel[@]}" 2>&1)
rc=$?
set -e
echo "$out"
[ $rc -eq 3 ] || { echo "FAIL: without --max-drift: exit $rc, expected 3 (nothing to bisect)"; exit 1; }
echo "$out" | grep -q "passes with these options: nothing to bisect" || { echo "FAIL: no 'nothing to bisect'"; exit 1; }
if echo "$out" | grep -q "first bad commit"; then echo "FAIL: found a commit without --max-drift"; exit 1; fi
restored "bisect without --max-drift"
echo "ok: --max-drift finds $planted; without it nothing to bisect"
