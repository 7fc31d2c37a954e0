#!/usr/bin/env python3
"""The lightning attention and KDA mixer goldens, and the MLA golden of Kimi-Linear (attention/mla_kimi), against
upstream transformers' own modules, through their caches (docs/semantics.md §12.8, §13.6, §14.6; docs/python.md
"The goldens against upstream").

Runs under a Python with torch and transformers (not the oracle's /usr/bin/python3, which has neither); it
reads each golden as an .npz that tests/golden/test_upstream_linear.py exports from the .h5 (no h5py here).
For each golden the upstream module is built from the golden's configuration — `MiniMaxLightningAttention`
(modeling_minimax.py) with a `MiniMaxConfig` whose layer `layer_idx` of `num_hidden_layers` is a linear
attention layer, or `KimiLinearDeltaAttention` / `KimiLinearAttention` (modeling_kimi_linear.py; MLA without
RoPE, eager attention under an explicit causal mask) with a `KimiLinearConfig` — and the
golden's weights are loaded by name with load_state_dict(strict=True) (lightning's slope and decay tables are
buffers the module computes from its configuration: they are left as the module made them). Each batch row's
real tokens run alone (upstream lets padding decay the state, mixcheck skips it, §13.5 / §14.5; a padded
row's real-token outputs and caches in the golden equal the row run alone), in float64, along three paths:

  prefill   one forward over the row's real tokens with a fresh cache (MiniMaxCache / DynamicCache)
  chunked   a first forward of about a third of the tokens, then one multi-token forward on that cache
  decode    a first forward of all but the last 8 tokens (at least one), then one token at a time

and each path's outputs at every real token and its final cache (lightning: the module's linear cache
[H][hd][hd]; KDA: the conv window [C][K] and the recurrent state [H][d][d]; MLA: DynamicCache's keys (the
normed latent) and values (the rope key) side by side, [1][n][c + dr]) are compared with the golden
at the row's last position. The error is max|upstream - golden| over max|golden| of the tensor.
Usage: upstream_linear.py LIMIT NPZ...   (exit 0: every golden within LIMIT; 1: one is not; 77: no torch)
       upstream_linear.py --padded NPZ...  (the padded goldens' batches as upstream runs them, with the mask:
                                           the cache against the last real token's, reported; docs/findings.md)
"""
import json
import sys

try:
    import numpy as np
    import torch
    import transformers  # noqa: F401
    from transformers.cache_utils import DynamicCache
    from transformers.models.kimi_linear.configuration_kimi_linear import KimiLinearConfig
    from transformers.models.kimi_linear.modeling_kimi_linear import KimiLinearAttention, KimiLinearDeltaAttention
    from transformers.models.minimax.configuration_minimax import MiniMaxConfig
    from transformers.models.minimax.modeling_minimax import MiniMaxCache, MiniMaxLightningAttention
except ImportError as e:  # the CTest skip code
    print(f"SKIP: {e}")
    sys.exit(77)


def lightning_module(cfg):
    n_layers, layer = int(cfg["num_hidden_layers"]), int(cfg["layer_idx"])
    types = ["full_attention"] * n_layers
    types[layer] = "linear_attention"
    hd = int(cfg["head_dim"])
    # the config validates RoPE for its full-attention layers, which wants an even head_dim; lightning
    # attention has no RoPE, so an odd head_dim is set after the validation
    config = MiniMaxConfig(hidden_size=int(cfg["hidden_size"]), num_attention_heads=int(cfg["num_attention_heads"]),
                           num_key_value_heads=int(cfg["num_attention_heads"]), head_dim=hd + hd % 2,
                           block_size=int(cfg["block_size"]), num_hidden_layers=n_layers, layer_types=types,
                           hidden_act="silu", vocab_size=8, intermediate_size=8, num_local_experts=1,
                           num_experts_per_tok=1)
    config.head_dim = hd
    module = MiniMaxLightningAttention(config, layer).to(torch.float64).eval()
    eps = float(cfg["norm_eps"])
    if module.norm.variance_epsilon != eps:
        raise SystemExit(f"MiniMaxLightningAttention's norm eps is {module.norm.variance_epsilon}, the golden's {eps}")
    return module


def kda_module(cfg):
    config = KimiLinearConfig(hidden_size=int(cfg["hidden_size"]), num_hidden_layers=1,
                              layer_types=["linear_attention"], mlp_layer_types=["dense"],
                              linear_attn_config={"head_dim": int(cfg["linear_head_dim"]),
                                                  "num_heads": int(cfg["linear_num_heads"]),
                                                  "short_conv_kernel_size": int(cfg["linear_conv_kernel_dim"])},
                              rms_norm_eps=float(cfg["rms_norm_eps"]), hidden_act="silu", vocab_size=8,
                              num_attention_heads=2, num_key_value_heads=2)
    return KimiLinearDeltaAttention(config, 0).to(torch.float64).eval(), config


def mla_module(cfg):
    if int(cfg.get("no_rope", 0)) != 1 or float(cfg["rms_norm_eps"]) != 1e-6:
        raise SystemExit("KimiLinearAttention has no RoPE and latent norms of eps 1e-6: the golden must be no_rope "
                         "with rms_norm_eps 1e-6")
    hd, dr = int(cfg["head_dim"]), int(cfg["qk_rope_head_dim"])
    qr = int(cfg.get("q_lora_rank", 0))
    config = KimiLinearConfig(hidden_size=int(cfg["hidden_size"]), num_hidden_layers=1,
                              layer_types=["full_attention"], mlp_layer_types=["dense"],
                              num_attention_heads=int(cfg["num_attention_heads"]),
                              num_key_value_heads=int(cfg["num_key_value_heads"]),
                              kv_lora_rank=int(cfg["kv_lora_rank"]), q_lora_rank=qr or None,
                              qk_rope_head_dim=dr, qk_nope_head_dim=hd - dr, v_head_dim=int(cfg["v_head_dim"]),
                              attention_bias=bool(cfg["attention_bias"]), vocab_size=8, hidden_act="silu")
    config._attn_implementation = "eager"
    return KimiLinearAttention(config, 0).to(torch.float64).eval(), config


def load(module, z):
    state = {k[len("weights/"):]: torch.from_numpy(z[k].astype(np.float64)) for k in z.files if k.startswith("weights/")}
    own = dict(module.state_dict())
    buffers = {k for k, _ in module.named_buffers()}
    missing = sorted(set(own) - set(state) - buffers)
    unexpected = sorted(set(state) - set(own))
    if missing or unexpected:
        raise SystemExit(f"weights do not load by name: missing {missing}, unexpected {unexpected}")
    for k in buffers:  # computed by the module from its configuration
        state[k] = own[k]
    module.load_state_dict(state, strict=True)


class Lightning:
    def __init__(self, z):
        self.cfg = json.loads(str(z["config_json"]))
        self.m = lightning_module(self.cfg)
        load(self.m, z)
        self.layer = int(self.cfg["layer_idx"])

    def new_cache(self):
        return MiniMaxCache()

    def forward(self, u, cache):
        out, _ = self.m(hidden_states=u, position_embeddings=None, attention_mask=None, cache=cache)
        return out

    def caches(self, cache):
        return {"recurrent_state": cache.get_linear_cache(self.layer)[0].numpy()}


class Kda:
    def __init__(self, z):
        self.cfg = json.loads(str(z["config_json"]))
        self.m, self.config = kda_module(self.cfg)
        load(self.m, z)

    def new_cache(self):
        return DynamicCache(config=self.config)

    def forward(self, u, cache):
        return self.m(hidden_states=u, cache=cache, attention_mask=None)

    def caches(self, cache):
        return {"conv_state": cache.get_conv_state(0)[0].numpy(),
                "recurrent_state": cache.get_recurrent_state(0)[0].numpy()}


class Mla:
    def __init__(self, z):
        self.cfg = json.loads(str(z["config_json"]))
        self.m, self.config = mla_module(self.cfg)
        load(self.m, z)

    def new_cache(self):
        return DynamicCache(config=self.config)

    def forward(self, u, cache):
        past = cache.get_seq_length()
        L = u.shape[1]
        allowed = torch.arange(past + L)[None, :] <= (past + torch.arange(L))[:, None]
        mask = torch.zeros(1, 1, L, past + L, dtype=torch.float64).masked_fill(~allowed, float("-inf"))
        out, _ = self.m(hidden_states=u, attention_mask=mask, cache=cache)
        return out

    def caches(self, cache):
        layer = cache.layers[0]
        return {"recurrent_state": torch.cat([layer.keys, layer.values], dim=-1)[0].numpy()}


def make(z):
    family = str(z["family"])
    return Lightning(z) if family == "lightning" else Mla(z) if family == "attention" else Kda(z)


def compare(path):
    """The worst relative error of the three paths over the golden's rows, per tensor."""
    z = np.load(path)
    family = str(z["family"])
    impl = make(z)
    u = z["inputs/hidden_states"].astype(np.float64)
    B, L, _ = u.shape
    live = z["inputs/attention_mask"].astype(bool) if "inputs/attention_mask" in z.files else np.ones((B, L), bool)
    out_g, pos = z["expected/output"], list(z["expected/state_positions"])
    if L not in pos:
        raise SystemExit(f"{path}: the golden holds no state at its last position {L}")
    last = pos.index(L)
    worst = {"output": 0.0, "conv_state": 0.0, "recurrent_state": 0.0}
    scale = {"output": float(np.max(np.abs(out_g))) or 1.0}
    for key in ("conv_state", "recurrent_state"):
        if "expected/" + key in z.files:
            scale[key] = float(np.max(np.abs(z["expected/" + key][last]))) or 1.0
    for b in range(B):
        idx = np.flatnonzero(live[b])
        x = torch.from_numpy(u[b:b + 1, idx])
        n = len(idx)
        for splits in ([n], [max(1, n // 3), n], [max(1, n - 8)] + list(range(max(1, n - 8) + 1, n + 1))):
            cache, outs, t0 = impl.new_cache(), [], 0
            with torch.no_grad():
                for t1 in splits:
                    outs.append(impl.forward(x[:, t0:t1], cache).numpy())
                    t0 = t1
            o = np.concatenate(outs, axis=1)[0]
            worst["output"] = max(worst["output"], float(np.max(np.abs(o - out_g[b, idx]))) / scale["output"])
            for key, got in impl.caches(cache).items():
                if family == "lightning" and key == "conv_state":
                    continue
                want = z["expected/" + key][last, b]
                if family == "attention":   # the golden's [1][Lmax][c + dr]: its first n slots
                    want = want[:, :got.shape[1]]
                worst[key] = max(worst[key], float(np.max(np.abs(got - want))) / scale[key])
    if family in ("lightning", "attention"):
        del worst["conv_state"]   # the count of real tokens / cached positions: upstream keeps none
    return f"{family}/{str(z['name'])}", worst


def padded(path):
    """The golden's padded batch as upstream runs it, with the attention mask, in one prefill (a report, not a
    comparison): per row, max|upstream cache - golden cache| / max|golden| at the last position, where the
    golden holds the cache of the row's last real token (semantics.md §1.4)."""
    z = np.load(path)
    family = str(z["family"])
    impl = Lightning(z) if family == "lightning" else Kda(z)
    x = torch.from_numpy(z["inputs/hidden_states"].astype(np.float64))
    mask = torch.from_numpy(z["inputs/attention_mask"].astype(np.int64))
    cache = impl.new_cache()
    with torch.no_grad():
        if family == "lightning":
            impl.m(hidden_states=x, position_embeddings=None, attention_mask=mask, cache=cache)
            got = cache.get_linear_cache(impl.layer).numpy()
        else:
            impl.m(hidden_states=x, cache=cache, attention_mask=mask)
            got = cache.get_recurrent_state(0).numpy()
    want = z["expected/recurrent_state"][list(z["expected/state_positions"]).index(x.shape[1])]
    pads = (1 - z["inputs/attention_mask"]).sum(axis=1)
    errs = [float(np.max(np.abs(got[b] - want[b])) / np.max(np.abs(want[b]))) for b in range(x.shape[0])]
    return f"{family}/{str(z['name'])}", pads, errs


def main():
    if sys.argv[1] == "--padded":
        print(f"torch {torch.__version__}, transformers {transformers.__version__}: padded batches with the mask "
              "(reported, not compared)")
        for path in sys.argv[2:]:
            name, pads, errs = padded(path)
            print(f"  {name:20s} recurrent_state vs the last real token's, by row: " +
                  ", ".join(f"{int(p)} pads {e:.2e}" for p, e in zip(pads, errs)))
        return
    limit = float(sys.argv[1])
    bad = 0
    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    float32, tensor_float = torch.float32, torch.Tensor.float
    for promoted in (False, True):
        # Upstream's norms and the KDA kernels cast to torch.float32 inside a float64 module, and lightning
        # attention computes its slopes in the default dtype (float32) when the module is made, which bounds
        # the agreement at float32's precision (measured 1e-8 .. 2e-6). Promoted: `torch.float32` /
        # `torch.float`, `Tensor.float()` and the default dtype read as float64 while the module is made and
        # runs, so what remains is a difference of semantics.
        torch.float32 = torch.float = torch.float64 if promoted else float32
        torch.Tensor.float = torch.Tensor.double if promoted else tensor_float
        torch.set_default_dtype(torch.float64 if promoted else float32)
        print("upstream float64, its float32 casts promoted to float64 (compared with LIMIT):" if promoted else
              "upstream float64 as written (its internal float32 casts kept; reported, not compared):")
        try:
            for path in sys.argv[2:]:
                name, worst = compare(path)
                ok = max(worst.values()) <= limit or not promoted
                bad += not ok
                text = ", ".join(f"{k} {v:.2e}" for k, v in worst.items())
                print(f"  {name:20s} max relative |upstream - golden| over prefill, chunked, decode: {text}"
                      f"{'' if not promoted else ' ok' if ok else ' FAIL > %.0e' % limit}")
        finally:
            torch.float32 = torch.float = float32
            torch.Tensor.float = tensor_float
            torch.set_default_dtype(float32)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
