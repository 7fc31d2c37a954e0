#!/usr/bin/python3
"""make_golden_seeds.py — writes the seed corpus of fuzz_golden (tests/fuzz/corpus_golden/): minimal
valid goldens of every family (B 1, L 2, tiny sizes, uncompressed, stamped with content_sha256 as
golden/generate.py does), one per HDF5 superblock flavour, plus a padded one with an attention mask.
Values are arbitrary: the fuzzer needs structure, not numerics. Run from anywhere with Debian's
/usr/bin/python3; the output is committed."""
import os
import sys

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "golden"))
from goldens import content_sha256  # noqa: E402

B, L = 1, 2


def vals(*shape, dtype="f4"):
    n = int(np.prod(shape))
    return (np.arange(n, dtype=np.float64).reshape(shape) / 8 - 0.5).astype(dtype)


def write(path, family, config, weights, C, K, state_dims, libver, mask=False):
    T = L + 1
    t = {f"weights/{k}": v for k, v in weights.items()}
    t["inputs/hidden_states"] = vals(B, L, config["hidden_size"])
    if mask:
        t["inputs/attention_mask"] = np.array([[0, 1]], np.int8)
    t["expected/output"] = vals(B, L, config["hidden_size"], dtype="f8")
    t["expected/state_positions"] = np.arange(T, dtype=np.int64)
    t["expected/conv_state"] = vals(T, B, C, K, dtype="f8")
    if state_dims:
        t["expected/recurrent_state"] = vals(T, B, *state_dims, dtype="f8")
    with h5py.File(path, "w", libver=libver) as f:
        for k, v in {"format": "mixcheck-golden", "format_version": np.int64(1), "family": family, "name": "seed",
                     "description": "fuzz seed", "seed": np.int64(0), "generator": "tests/fuzz/make_golden_seeds.py",
                     "generator_version": "1", "content_sha256": content_sha256(t)}.items():
            f.attrs[k] = v
        g = f.create_group("config")
        for k, v in config.items():
            g.attrs[k] = v
        for k, v in t.items():
            f.create_dataset(k, data=v, track_times=False)


def main():
    out = os.path.join(HERE, "corpus_golden")
    os.makedirs(out, exist_ok=True)
    i64 = np.int64
    # shortconv: D 2, K 2
    sc = dict(hidden_size=i64(2), conv_L_cache=i64(2), conv_bias=i64(0))
    scw = {"in_proj.weight": vals(6, 2), "conv.weight": vals(2, 1, 2), "out_proj.weight": vals(2, 2)}
    write(os.path.join(out, "shortconv.h5"), "shortconv", sc, scw, 2, 2, None, "earliest")
    write(os.path.join(out, "shortconv_latest.h5"), "shortconv", sc, scw, 2, 2, None, "latest")
    write(os.path.join(out, "shortconv_mask.h5"), "shortconv", sc, scw, 2, 2, None, "earliest", mask=True)
    # mamba2: D 2, H 1, P 2, N 1, G 1, K 2 -> I 2, C 4, proj 7
    m2 = dict(hidden_size=i64(2), num_heads=i64(1), head_dim=i64(2), state_size=i64(1), n_groups=i64(1),
              conv_kernel=i64(2), chunk_size=i64(2), norm_group_size=i64(2), layer_norm_epsilon=1e-5,
              time_step_limit=np.array([0.0, np.inf]), use_bias=i64(0), use_conv_bias=i64(0))
    m2w = {"in_proj.weight": vals(7, 2), "conv1d.weight": vals(4, 1, 2), "dt_bias": vals(1), "A_log": vals(1),
           "D": vals(1), "norm.weight": vals(2), "out_proj.weight": vals(2, 2)}
    write(os.path.join(out, "mamba2.h5"), "mamba2", m2, m2w, 4, 2, (1, 2, 1), "earliest")
    # mamba1: D 2, I 2, N 1, K 2, R 1
    m1 = dict(hidden_size=i64(2), intermediate_size=i64(2), state_size=i64(1), conv_kernel=i64(2),
              time_step_rank=i64(1), use_bias=i64(0), use_conv_bias=i64(0))
    m1w = {"in_proj.weight": vals(4, 2), "conv1d.weight": vals(2, 1, 2), "x_proj.weight": vals(3, 2),
           "dt_proj.weight": vals(2, 1), "dt_proj.bias": vals(2), "A_log": vals(2, 1), "D": vals(2),
           "out_proj.weight": vals(2, 2)}
    write(os.path.join(out, "mamba1.h5"), "mamba1", m1, m1w, 2, 2, (2, 1), "earliest")
    # gdn (qwen3_5): D 2, Hk 1, Hv 1, dk 1, dv 1, K 2 -> key_dim 1, value_dim 1, C 3
    gd = dict(hidden_size=i64(2), linear_num_key_heads=i64(1), linear_num_value_heads=i64(1),
              linear_key_head_dim=i64(1), linear_value_head_dim=i64(1), linear_conv_kernel_dim=i64(2),
              chunk_size=i64(2), rms_norm_eps=1e-6, projection_layout="qwen3_5")
    gdw = {"in_proj_qkv.weight": vals(3, 2), "in_proj_z.weight": vals(1, 2), "in_proj_b.weight": vals(1, 2),
           "in_proj_a.weight": vals(1, 2), "conv1d.weight": vals(3, 1, 2), "dt_bias": vals(1), "A_log": vals(1),
           "norm.weight": vals(1), "out_proj.weight": vals(2, 1)}
    write(os.path.join(out, "gdn.h5"), "gdn", gd, gdw, 3, 2, (1, 1, 1), "earliest")
    return 0


if __name__ == "__main__":
    sys.exit(main())
