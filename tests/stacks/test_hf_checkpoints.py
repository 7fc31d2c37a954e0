#!/usr/bin/python3
"""Goldens from checkpoints transformers wrote itself, against transformers' own float64 logits.

hf_checkpoints.py (under $MIXCHECK_HF_PYTHON or the default HF Python, tests/support/hfpython.c) writes
each variant with save_pretrained — n_groups 2 (Mamba2, Bamba), rope_theta inside rope_parameters (LFM2,
Bamba, Qwen3.5), Bamba's time_step_limit (0, 0.05), Mamba2's default limit saved as {"__float__":
"Infinity"}, tied and untied heads, a sharded checkpoint, bfloat16 weights — and its float64 logits (float32
casts promoted) on a left-padded prompt. Here (the oracle's /usr/bin/python3) generate.py from-checkpoint
makes the golden of each checkpoint on the same prompt; its logits must agree with transformers' to
LIMIT relative to max |logit| at the real positions, and mixcheck must pass the golden on the reference at
f32. Exit 77 (CTest skip) without a Python that imports torch and transformers.
Usage: test_hf_checkpoints.py MIXCHECK_BINARY [LIMIT]
"""
import os
import json
import subprocess
import sys
import tempfile

import h5py
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MIXCHECK = sys.argv[1]
# max |golden - transformers| / max |logit| with transformers' float32 casts promoted: float64 rounding of two
# operation orders is ~1e-15 (measured 3.6e-16 .. 1.7e-15); a detail read wrong is >= 1e-3 (the n_groups row:
# 0.55). 1e-10 leaves room for longer reductions and stays far below any wrong reading.
LIMIT = float(sys.argv[2]) if len(sys.argv) > 2 else 1e-10
PROMPT = ["5 17 60 3 9 41 7", "50 1 33 4"]
HF_DEFAULT = "/work/venv/bin/python"   # the default of tests/support/hfpython.c


def main():
    py = os.environ.get("MIXCHECK_HF_PYTHON") or HF_DEFAULT
    probe = subprocess.run([py, "-c", "import torch, transformers"], capture_output=True) if os.path.exists(py) else None
    if probe is None or probe.returncode != 0:
        print(f"SKIP: {py} cannot import torch and transformers (set MIXCHECK_HF_PYTHON)")
        return 77
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        p = subprocess.run([py, os.path.join(ROOT, "tests", "stacks", "hf_checkpoints.py"), tmp, json.dumps(PROMPT)],
                           capture_output=True, text=True)
        print(p.stdout.rstrip())
        if p.returncode != 0:
            print(p.stderr[-4000:])
            return 1
        names = sorted(n[:-4] for n in os.listdir(tmp) if n.endswith(".npz"))
        for name in names:
            folder, out = os.path.join(tmp, name), os.path.join(tmp, name + ".h5")
            g = subprocess.run([sys.executable, os.path.join(ROOT, "golden", "generate.py"), "from-checkpoint", folder,
                                "--out", out, "--greedy", "2"] + sum((["--prompt", r] for r in PROMPT), []),
                               capture_output=True, text=True)
            if g.returncode != 0:
                print(f"  {name}: from-checkpoint exit {g.returncode}: {g.stderr.strip()}")
                bad += 1
                continue
            hf = np.load(os.path.join(tmp, name + ".npz"))
            with h5py.File(out, "r") as f:
                gold = f["expected/logits"][()]
                mask = f["inputs/attention_mask"][()].astype(bool)
                model_type = str(f["config"].attrs["model_type"])
            if not np.array_equal(mask, hf["mask"].astype(bool)):
                print(f"  {name}: the prompts differ")
                bad += 1
                continue
            scale = float(np.max(np.abs(hf["logits"][mask])))
            rel = float(np.max(np.abs(gold[mask] - hf["logits"][mask]))) / scale
            ok = rel <= LIMIT
            bad += not ok
            case = os.path.join(tmp, name + ".yaml")
            tol = os.path.join(ROOT, "cases", "tolerances", "models.yaml")
            with open(case, "w") as f:
                f.write(f"id: hf-{name}\nwhy: \"a checkpoint transformers wrote\"\nmodel: {model_type}\ngolden: {out}\n"
                        f"tolerance: {tol}\nbackends: [reference]\ndtypes: [f32]\nscenarios:\n  prefill: {{}}\n")
            r = subprocess.run([MIXCHECK, "run", case, "-q"], capture_output=True, text=True)
            if r.returncode != 0:
                bad += 1
                print(f"  {name}: mixcheck exit {r.returncode} on the golden:\n{r.stdout[-2000:]}")
            print(f"  {name:20s} max|golden - transformers| / max|logit| {rel:.2e} (max|logit| {scale:.3g})"
                  f"{' ok' if ok else ' FAIL > %.0e' % LIMIT}; mixcheck reference f32: exit {r.returncode}")
    print(f"{len(names)} checkpoint(s), {bad} failure(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
