#!/usr/bin/python3
"""generate.py from-checkpoint on checkpoints this test writes itself (config.json + model.safetensors, F32).

For each model type: the stacks.py weights of its bundled golden are written as a checkpoint (tied models
without lm_head.weight, as a tied checkpoint is saved); from-checkpoint writes a model golden for a two-row
prompt; its logits must equal the oracle's on the same weights and prompt, and mixcheck must pass it on the
reference at f32 (prefill, decode, greedy). Then --layer N --family F writes a mixer golden of one layer on
its real input, which mixcheck passes (prefill, decode). Bad checkpoints are refused with exit 2.
Usage: test_checkpoint.py MIXCHECK_BINARY
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "golden"))
import goldens  # noqa: E402
import checkpoint as C  # noqa: E402
import stacks as S  # noqa: E402

MIXCHECK = sys.argv[1]
GEN = [sys.executable, os.path.join(ROOT, "golden", "generate.py")]
PROMPT = ["5 17 200 3 9 41 77", "250 1 33 4"]
LAYER = {"mamba2": (1, "mamba2"), "mamba": (2, "mamba1"), "lfm2": (1, "attention"), "bamba": (1, "attention"), "qwen3_5_text": (0, "gdn"),
         "granitemoehybrid": (1, "attention"), "falcon_mamba": (2, "mamba1"), "jamba": (0, "mamba1"),
         "nemotron_h": (3, "attention"), "zamba2": (3, "mamba2")}   # zamba2 layer 3: a hybrid layer's Mamba2
LAYER["qwen3_next"] = (1, "gdn")
LAYER["qwen3_5_moe_text"] = (1, "attention")
LAYER["falcon_h1"] = (3, "attention")   # slot 3: decoder layer 1's attention branch
LAYER["zamba"] = (3, "mamba1")   # zamba layer 3: a hybrid layer's Mamba1, on norm(h + T)
LAYER["lfm2_moe"] = (3, "attention")   # after a MoE layer
LAYER["olmo_hybrid"] = (2, "gdn")   # olmo_hybrid layer 2: a Gated DeltaNet with beta doubled (allow_neg_eigval)
LAYER["kimi_linear"] = (1, "attention")   # kimi_linear layer 1: MLA (the attention family's MLA option)
LAYER["minimax"] = (2, "lightning")   # minimax layer 2: lightning attention, its slopes those of layer 2 of 4
LAYER["inkling_text"] = (2, "attention")   # inkling layer 2: sliding attention, its convs and relative logits
TOL = os.path.join(ROOT, "cases", "tolerances")


def run(cmd, want=0):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != want:
        sys.exit(f"FAIL: {' '.join(cmd)}: exit {p.returncode} (want {want})\n{p.stdout}\n{p.stderr}")
    return p.stdout + p.stderr


def gen_layer(argv, want=0):
    """from-checkpoint --layer in this process (checkpoint.main_captured): the model goldens above go through
    generate.py's command line; a second interpreter per layer golden only cost time."""
    rc, stderr = C.main_captured(argv)
    if rc != want or "Traceback" in stderr:
        sys.exit(f"FAIL: from-checkpoint {' '.join(argv)}: exit {rc} (want {want})\n{stderr}")
    return stderr


def case(path, key, golden, tol, scenarios, extra=""):
    with open(path, "w") as f:
        f.write(f"id: ckpt-{os.path.basename(path)[:-5]}\nwhy: \"from-checkpoint\"\n{key}\ngolden: {golden}\n"
                f"tolerance: {tol}\n{extra}backends: [reference]\ndtypes: [f32]\nscenarios:\n{scenarios}")


def main():
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for spec in S.SPECS.values():
            cfg = S.model_config(spec)
            weights = S.init_weights(cfg, np.random.default_rng(spec.seed))
            folder = os.path.join(tmp, spec.name)
            os.makedirs(folder)
            with open(os.path.join(folder, "config.json"), "w") as f:
                json.dump(cfg, f)
            saved = dict(weights)
            if cfg["tie_word_embeddings"]:
                del saved["lm_head.weight"]
            C.write_safetensors(os.path.join(folder, "model.safetensors"), saved)
            out = os.path.join(tmp, spec.name + ".h5")
            # the prompt's ids within the vocabulary (models/inkling's is 160)
            args = sum((["--prompt", " ".join(str(int(t) % cfg["vocab_size"]) for t in p.split())] for p in PROMPT), [])
            run(GEN + ["from-checkpoint", folder, "--out", out, "--greedy", "6"] + args)
            # the logits equal the oracle's on the same weights and the same left-padded prompt
            tensors, _, root = G_read(out)
            ids, mask = tensors["inputs/input_ids"], tensors["inputs/attention_mask"]
            assert ids.shape == (2, 7) and mask[1].tolist() == [0, 0, 0, 1, 1, 1, 1], mask
            lo, _, _, _, _ = S.stack_of(cfg, weights).forward(ids, mask)
            live = mask.astype(bool)
            d = float(np.max(np.abs(lo[live] - tensors["expected/logits"][live])))
            print(f"{spec.name}: from-checkpoint logits vs oracle max|diff| {d:.1e}, kind {root['kind']}")
            failures += d > 1e-12
            tol = os.path.join(TOL, {"lfm2": "models-lfm2.yaml", "bamba": "models-bamba.yaml",
                                    "qwen3_5_text": "models-qwen3_5.yaml",
                                    "granitemoehybrid": "models-granitemoehybrid.yaml",
                                    "falcon_mamba": "models-falcon_mamba.yaml",
                                    "jamba": "models-jamba.yaml",
                                    "nemotron_h": "models-nemotron_h.yaml",
                                    "zamba2": "models-zamba2.yaml",
                                    "qwen3_next": "models-qwen3_next.yaml",
                                    "qwen3_5_moe_text": "models-qwen3_5_moe.yaml",
                                    "falcon_h1": "models-falcon_h1.yaml",
                                    "zamba": "models-zamba.yaml",
                                    "lfm2_moe": "models-lfm2_moe.yaml",
                                    "olmo_hybrid": "models-olmo_hybrid.yaml",
                                    "kimi_linear": "models-kimi_linear.yaml",
                                    "minimax": "models-minimax.yaml",
                                    "inkling_text": "models-inkling.yaml"}.get(spec.model_type,
                                                                                                "models.yaml"))
            cpath = os.path.join(tmp, spec.name + ".yaml")
            case(cpath, f"model: {spec.model_type}", out, tol,
                 "  prefill: {}\n  decode: {prefill: 3}\n  greedy: {steps: 6, top_k: 5}\n")
            print("  " + run([MIXCHECK, "run", cpath, "-q", "--color", "never"]).strip().splitlines()[0])
            # one layer on its real input activations
            layer, family = LAYER[spec.model_type]
            lout = os.path.join(tmp, f"{spec.name}-layer{layer}.h5")
            gen_layer([folder, "--out", lout, "--layer", str(layer), "--family", family] + args)
            ltol = os.path.join(TOL, "attention-inkling.yaml" if spec.model_type == "inkling_text" else
                                (family if family != "mamba1" else "mamba1") + ".yaml")
            lpath = os.path.join(tmp, f"{spec.name}-layer.yaml")
            case(lpath, f"family: {family}", lout, ltol, "  prefill: {}\n  decode: {prefill: 3}\n")
            print("  layer: " + run([MIXCHECK, "run", lpath, "-q", "--color", "never"]).strip().splitlines()[0])
            gen_layer([folder, "--out", lout, "--layer", str(layer), "--family", "shortconv" if family != "shortconv" else "gdn"] + args, 2)
        # a model golden edited after generation, or with a dataset outside the layout, is refused
        import h5py
        import shutil
        src = os.path.join(tmp, "mamba2.h5")
        for what, edit, expect in (
                ("edited", lambda f: f["expected/logits"].__setitem__((0, 0, 0), 1.5), "content checksum mismatch"),
                ("extra", lambda f: f.create_dataset("expected/extra", data=np.zeros(2)),
                 "/expected/extra: not part of the model golden layout"),
                ("token", lambda f: f["inputs/input_ids"].__setitem__((0, 0), 999), "outside [0, vocab_size 256)")):
            dst = os.path.join(tmp, f"mamba2-{what}.h5")
            shutil.copy(src, dst)
            with h5py.File(dst, "r+") as f:
                edit(f)
            cpath = os.path.join(tmp, f"mamba2-{what}.yaml")
            case(cpath, "model: mamba2", dst, os.path.join(TOL, "models.yaml"), "  prefill: {}\n")
            msg = run([MIXCHECK, "run", cpath, "--color", "never"], 2)
            if expect not in msg or dst not in msg:
                sys.exit(f"FAIL: {what}: message lacks '{expect}' or the file: {msg}")
            print(f"  {what}: refused: {expect}")
        # refused: a missing weight, a truncated file, an unknown model type
        bad = os.path.join(tmp, "bad")
        os.makedirs(bad)
        with open(os.path.join(bad, "config.json"), "w") as f:
            json.dump(S.model_config(S.SPECS["models/mamba2"]), f)
        C.write_safetensors(os.path.join(bad, "model.safetensors"), {"backbone.embeddings.weight": np.zeros((256, 32))})
        print("  " + run(GEN + ["from-checkpoint", bad, "--out", os.path.join(tmp, "x.h5"), "--prompt", "1 2"], 2).strip())
        with open(os.path.join(bad, "model.safetensors"), "wb") as f:
            f.write(b"\x10\x00")
        print("  " + run(GEN + ["from-checkpoint", bad, "--out", os.path.join(tmp, "x.h5"), "--prompt", "1 2"], 2).strip())
        with open(os.path.join(bad, "config.json"), "w") as f:
            json.dump({"model_type": "llama"}, f)
        print("  " + run(GEN + ["from-checkpoint", bad, "--out", os.path.join(tmp, "x.h5"), "--prompt", "1 2"], 2).strip())
    return 1 if failures else 0


def G_read(path):
    return goldens.read_file(path)


if __name__ == "__main__":
    sys.exit(main())
