#!/usr/bin/env python3
"""Zamba2's float64 oracle (golden/zamba.py) on checkpoints transformers itself writes.

Runs under a Python with torch and transformers ($MIXCHECK_HF_PYTHON or /work/venv/bin/python; exit 77, the CTest
skip code, without them). For each variant: Zamba2ForCausalLM drawn with a fixed seed from a Zamba2Config, written
with save_pretrained (safetensors), its tensors read back by name (the tied copies of a shared block filled in from
the one the checkpoint holds, zamba.fill_tied), and the oracle's logits on a left-padded prompt compared with
upstream's in float64 with its float32 casts promoted (as golden/upstream.py); limit 1e-10 of max |logit|.
Usage: test_zamba2_checkpoint.py
"""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIMIT = 1e-10

VARIANTS = {
    # one shared block, no attention adapters, no rotary embedding, untied head, one group
    "one-block": dict(vocab_size=64, hidden_size=32, num_hidden_layers=5,
                      layers_block_type=["hybrid", "linear_attention", "hybrid", "linear_attention", "hybrid"],
                      n_mamba_heads=4, mamba_d_state=8, mamba_ngroups=1, chunk_size=8, num_attention_heads=4,
                      num_key_value_heads=2, intermediate_size=24, num_mem_blocks=1, adapter_rank=8,
                      use_shared_attention_adapter=False, use_mem_rope=False, tie_word_embeddings=False,
                      max_position_embeddings=64),
    # two alternating blocks, q/k/v adapters, RoPE theta 500, time_step_min 0.02, 2 groups, the older layer name
    "two-blocks": dict(vocab_size=64, hidden_size=32, num_hidden_layers=6,
                       layers_block_type=["mamba", "hybrid", "hybrid", "mamba", "hybrid", "hybrid"],
                       n_mamba_heads=4, mamba_d_state=8, mamba_ngroups=2, chunk_size=8, num_attention_heads=4,
                       num_key_value_heads=4, intermediate_size=24, num_mem_blocks=2, adapter_rank=4,
                       use_shared_attention_adapter=True, use_mem_rope=True, time_step_min=0.02,
                       rope_parameters={"rope_type": "default", "rope_theta": 500.0}, max_position_embeddings=64),
}


def run():
    import json
    import numpy as np
    import torch
    import transformers
    from safetensors.numpy import load_file
    sys.path.insert(0, os.path.join(ROOT, "golden"))
    import zamba
    bad = 0
    f32, tf = torch.float32, torch.Tensor.float
    for name, keys in VARIANTS.items():
        torch.manual_seed(7)
        model = transformers.Zamba2ForCausalLM(transformers.Zamba2Config(**keys)).eval()
        with torch.no_grad():   # the adapters' and norms' init is too small to matter: draw them as weights
            for k, p in model.named_parameters():
                if "adapter" in k or "norm" in k or k.endswith(".D"):
                    p.add_(0.1 * torch.randn_like(p))
        with tempfile.TemporaryDirectory() as tmp:
            model.save_pretrained(tmp)
            cfg = json.load(open(os.path.join(tmp, "config.json")))
            w = {}
            for fn in sorted(os.listdir(tmp)):
                if fn.endswith(".safetensors"):
                    w.update(load_file(os.path.join(tmp, fn)))
        full = dict(zamba.DEFAULTS)
        full.update(cfg)
        w = zamba.fill_tied(full, {k: v.astype(np.float64) for k, v in w.items()})
        expected = set(model.state_dict().keys())
        if set(w) != expected:
            print(f"{name}: names differ: missing {sorted(expected - set(w))}, extra {sorted(set(w) - expected)}")
            bad += 1
            continue
        st = zamba.Zamba2Stack(full, w)
        ids = np.array([[5, 17, 40, 3, 22, 9, 61, 2, 33, 14], [0, 0, 0, 8, 12, 50, 7, 1, 29, 44]])
        mask = np.array([[1] * 10, [0] * 3 + [1] * 7])
        ids = np.where(mask.astype(bool), ids, 0)
        ours = st.forward(ids, mask)[0]
        try:
            torch.float32 = torch.float = torch.float64
            torch.Tensor.float = torch.Tensor.double
            torch.set_default_dtype(torch.float64)
            m64 = transformers.Zamba2ForCausalLM(transformers.Zamba2Config(**keys)).to(torch.float64).eval()
            m64.load_state_dict({k: torch.from_numpy(v) for k, v in w.items()}, strict=True)
            tm = torch.from_numpy(mask)
            with torch.no_grad():
                up = m64(input_ids=torch.from_numpy(ids), attention_mask=tm,
                         position_ids=(tm.cumsum(-1) - 1).clamp(min=0), use_cache=False).logits.numpy()
        finally:
            torch.float32 = torch.float = f32
            torch.Tensor.float = tf
            torch.set_default_dtype(f32)
        live = mask.astype(bool)
        diff = float(np.max(np.abs(ours[live] - up[live])))
        scale = float(np.max(np.abs(up[live])))
        ok = diff <= LIMIT * scale
        bad += not ok
        print(f"{name:12s} {len(w)} tensors, max|oracle - upstream| {diff:.3e} = {diff / scale:.2e} of max|logit| "
              f"{scale:.3f} {'ok' if ok else 'FAIL'}")
    return bad


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--inner":
        sys.exit(1 if run() else 0)
    py = os.environ.get("MIXCHECK_HF_PYTHON", "/work/venv/bin/python")
    if not os.path.exists(py):
        print(f"SKIP: no Python with torch/transformers at {py} (set MIXCHECK_HF_PYTHON)")
        sys.exit(77)
    probe = subprocess.run([py, "-c", "import torch, transformers, safetensors"], capture_output=True)
    if probe.returncode != 0:
        print(f"SKIP: {py} cannot import torch/transformers/safetensors")
        sys.exit(77)
    sys.exit(subprocess.run([py, os.path.abspath(__file__), "--inner"]).returncode)


if __name__ == "__main__":
    main()
