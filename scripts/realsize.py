#!/usr/bin/python3
"""realsize.py MIXCHECK [OUT_DIR] [--only NAME] — whole models at real layer sizes through every model scenario.

Not part of CI (minutes, and hundreds of MB of golden): two models of realistic layer shapes, their weights drawn
as the bundled model goldens' are (golden/stacks.py init_weights), written as Hugging Face checkpoints
(config.json + model.safetensors) and turned into model goldens by `generate.py from-checkpoint` (the float64
oracle), then run by `mixcheck run` on `cpu` at f32 through the scenarios of the bundled model cases:
  - mamba2-130m: mamba2-130m's stack (24 layers, D 768, 24 heads of 64, N 128, one group, K 4, chunk 256,
    tied embedding) over a vocabulary of 4096 (the released one, 50 288, would add 38 M parameters to the
    embedding and nothing to the layers);
  - qwen3-next-like: Qwen3-Next's layer kinds at D 1024 (8 layers: Gated DeltaNet of 8 key / 16 value heads of
    128 in the interleaved layout, gated attention of 8 heads of 128 with 2 KV heads and partial rotary 0.25 at
    every fourth, a top-2 of 4 MoE of 512 plus a shared expert of 512), vocabulary 4096.
For each: the time of the golden's generation (not mixcheck's), of `mixcheck run` (wall), and where the run's
time went: the checks' own time (the JSON's duration_s, summed; the engine and comparisons inside the workers)
against the wall time (the golden read and checksummed, the expected values and isolation in the parent).
OUT_DIR (default build/realsize) keeps the checkpoints, goldens, cases and reports.
"""
import json
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "golden"))
import checkpoint as C  # noqa: E402
import configkeys as K  # noqa: E402
import stacks as S  # noqa: E402

MODELS = {
    "mamba2-130m": ("mamba2", dict(vocab_size=4096, hidden_size=768, num_hidden_layers=24, num_heads=24, head_dim=64,
                                   expand=2, state_size=128, n_groups=1, conv_kernel=4, chunk_size=256,
                                   tie_word_embeddings=True)),
    "qwen3-next-like": ("qwen3_next", dict(
        vocab_size=4096, hidden_size=1024, num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=2,
        head_dim=128, intermediate_size=1024, linear_num_key_heads=8, linear_num_value_heads=16,
        linear_key_head_dim=128, linear_value_head_dim=128, max_position_embeddings=256,
        layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"] * 2,
        num_experts=4, num_experts_per_tok=2, moe_intermediate_size=512, shared_expert_intermediate_size=512,
        decoder_sparse_step=1, mlp_only_layers=[])),
}
# the scenarios of the bundled model cases (cases/models/*.yaml), at a prompt of 64 tokens
SCENARIOS = """  prefill: {}
  decode: {prefill: 48}
  chunked: {splits: [[1, 2, 3], [16, 40, 60]]}
  first_token_causality: {prefill: 40, len: 4, seed: 3}
  left_padded_batch: {prefill: 48, decode: 2}
  batch_invariance: {}
  speculative_verify: {prefill: 40, len: 5, accept: 3, seed: 11}
  packed_prefill: {sequences: 2, seed: 7}
  greedy: {steps: 8, top_k: 5}
"""


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    mixcheck = argv[1]
    rest = [a for a in argv[2:] if not a.startswith("--")]
    out = os.path.abspath(rest[0] if rest else os.path.join(ROOT, "build", "realsize"))
    only = argv[argv.index("--only") + 1] if "--only" in argv else None
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(20261204)
    rows = [" ".join(str(int(t)) for t in rng.integers(0, 4096, 64)), " ".join(str(int(t)) for t in rng.integers(0, 4096, 57))]
    worst = 0
    for name, (mt, over) in MODELS.items():
        if only and name != only:
            continue
        spec = S.SPECS["models/" + ("mamba2" if mt == "mamba2" else "qwen3_next")]
        cfg = dict(S.model_config(spec), **over)
        folder = os.path.join(out, name)
        t0 = time.time()
        weights = S.init_weights(K.normalise(cfg), np.random.default_rng(spec.seed))
        n_par = sum(v.size for v in weights.values())
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "config.json"), "w") as f:
            f.write(K.dumps(cfg))
        saved = dict(weights)
        if cfg.get("tie_word_embeddings"):
            saved.pop("lm_head.weight", None)
        C.write_safetensors(os.path.join(folder, "model.safetensors"), saved, "F32")
        golden = os.path.join(out, name + ".h5")
        rc, err = C.main_captured([folder, "--out", golden, "--prompt", rows[0], "--prompt", rows[1], "--greedy", "8"])
        if rc != 0:
            print(f"{name}: from-checkpoint exit {rc}: {err.strip()}", file=sys.stderr)
            return 1
        t_gen = time.time() - t0
        profile = os.path.join(ROOT, "cases", "tolerances", "models-%s.yaml" % mt)   # the model type's, else the
        if not os.path.exists(profile):                                                # models' common profile
            profile = os.path.join(ROOT, "cases", "tolerances", "models.yaml")
        case = os.path.join(out, name + ".yaml")
        with open(case, "w") as f:
            f.write(f"id: realsize-{name}\nwhy: \"{name}: every model scenario at real layer sizes\"\nmodel: {mt}\n"
                    f"golden: {golden}\ntolerance: {profile}\nbackends: [cpu]\ndtypes: [f32]\nscenarios:\n"
                    + SCENARIOS)
        report = os.path.join(out, name + ".json")
        t0 = time.time()
        p = subprocess.run([mixcheck, "run", case, "--backend", "cpu", "--dtype", "f32", "-q", "--json", report],
                           capture_output=True, text=True)
        wall = time.time() - t0
        summary = (p.stdout + p.stderr).strip().splitlines()
        with open(report) as f:
            res = json.load(f)["results"]
        checks, seen = {}, set()
        for r in res:   # one record per tensor, each carrying its check's duration: count a check once
            cid = (r["scenario"], r["backend"], r["dtype"])
            if cid not in seen:
                seen.add(cid)
                checks[r["scenario"]] = checks.get(r["scenario"], 0.0) + (r.get("duration_s") or 0.0)
        busy = sum(checks.values())
        print(f"{name}: {n_par / 1e6:.1f} M parameters ({os.path.getsize(golden) / 2**20:.0f} MiB golden, generated "
              f"in {t_gen:.1f} s); mixcheck run: {wall:.1f} s wall, exit {p.returncode}: "
              f"{summary[-1] if summary else ''}")
        jobs = os.cpu_count() or 1
        print(f"  the checks' own time {busy:.1f} s over {jobs} worker(s) (by scenario: "
              + ", ".join(f"{k} {v:.1f}" for k, v in sorted(checks.items(), key=lambda kv: -kv[1]))
              + f"); the rest of the wall, about {max(wall - busy / min(jobs, len(checks) or 1), 0.0):.1f} s, is the "
              "parent's: the golden read and checksummed, its weights rounded, the workers forked")
        worst = max(worst, p.returncode)
    return worst


if __name__ == "__main__":
    sys.exit(main(sys.argv))
