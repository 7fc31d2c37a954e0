"""OLMo-Hybrid (transformers `OlmoHybridForCausalLM`, 5.24) in float64, from its definition (docs/models.md).

The stack: h = embed_tokens(ids); per layer by layer_types
  - "linear_attention" (OlmoHybridLinearAttentionDecoderLayer, pre-norm as Llama's):
        h = h + GDN(input_layernorm(h));  h = h + mlp(post_attention_layernorm(h))
  - "full_attention" (OlmoHybridAttentionDecoderLayer = Olmo3DecoderLayer, post-norm):
        h = h + post_attention_layernorm(attn(h));  h = h + post_feedforward_layernorm(mlp(h))
then logits = lm_head(norm(h)). Every RMSNorm is x · rsqrt(mean x² + rms_norm_eps) · w; the MLP is
down(silu(gate x) · up x).

The Gated DeltaNet (OlmoHybridGatedDeltaNet): separate q_proj, k_proj, v_proj (the conv runs over their
concatenation q | k | v, no bias, SiLU), g_proj (the output gate), a_proj, b_proj, o_proj, o_norm; β = σ(b),
doubled with linear_allow_neg_eigval; g = −exp(A_log) · softplus(a + dt_bias); q and k l2-normalised, a key head
serving Hv / Hk consecutive value heads; the gated RMSNorm per value head with eps 1e-5 (whatever rms_norm_eps
says). It is the family's float64 oracle (mixers.gdn_forward) on the family's Qwen3.5 layout: in_proj_qkv the three
projections stacked, in_proj_z = g_proj, in_proj_b = b_proj, in_proj_a = a_proj, norm = o_norm, out_proj = o_proj,
with allow_neg_eigval.

The attention (OlmoHybridAttention): q_norm over the whole q projection [Hq·hd] and k_norm over the whole k
projection [Hkv·hd] (before the split into heads), RoPE of the whole head with rope_theta (5.24 fills a missing or
null rope_parameters with the default theta 10000, so its NoPE branch is never taken), scale hd^-1/2,
hd = hidden_size // num_attention_heads; the family's oracle (models.attention_forward) with qk_norm "rms_full".
"""

import numpy as np

import mixers
import models as M

DEFAULTS = dict(
    rms_norm_eps=1e-6, tie_word_embeddings=False, attention_bias=False, hidden_act="silu",
    max_position_embeddings=65536, linear_conv_kernel_dim=4, linear_allow_neg_eigval=True,
    rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
GDN_NORM_EPS = 1e-5   # OlmoHybridGatedDeltaNet: OlmoHybridRMSNormGated(head_v_dim, eps=1e-5)
GDN_NAMES = {"in_proj_z.weight": "g_proj.weight", "in_proj_b.weight": "b_proj.weight",
             "in_proj_a.weight": "a_proj.weight", "norm.weight": "o_norm.weight", "out_proj.weight": "o_proj.weight"}


def normalise(cfg):
    """OlmoHybridConfig.__post_init__'s defaults, resolved: layer_types (full attention at i % 4 == 3, the last layer
    when that gives none), the linear_* head counts and dims, num_key_value_heads."""
    cfg = dict(cfg)
    n, H = cfg["num_hidden_layers"], cfg.get("num_attention_heads", 30)
    if cfg.get("layer_types") is None:
        lt = ["full_attention" if i % 4 == 3 else "linear_attention" for i in range(n)]
        if "full_attention" not in lt:
            lt[-1] = "full_attention"
        cfg["layer_types"] = lt
    for k in ("linear_num_key_heads", "linear_num_value_heads", "num_key_value_heads"):
        if cfg.get(k) is None:
            cfg[k] = H
    if cfg.get("linear_key_head_dim") is None:
        cfg["linear_key_head_dim"] = int(0.75 * cfg["hidden_size"] / cfg["linear_num_key_heads"])
    if cfg.get("linear_value_head_dim") is None:
        cfg["linear_value_head_dim"] = 2 * cfg["linear_key_head_dim"]
    return cfg


def kind(cfg, i):
    return "attention" if cfg["layer_types"][i] == "full_attention" else "gdn"


def gdn_config(cfg):
    """The family configuration of a linear-attention layer."""
    return dict(hidden_size=cfg["hidden_size"], linear_num_key_heads=cfg["linear_num_key_heads"],
                linear_num_value_heads=cfg["linear_num_value_heads"], linear_key_head_dim=cfg["linear_key_head_dim"],
                linear_value_head_dim=cfg["linear_value_head_dim"], linear_conv_kernel_dim=cfg["linear_conv_kernel_dim"],
                chunk_size=64, rms_norm_eps=GDN_NORM_EPS, projection_layout="qwen3_5",
                allow_neg_eigval=int(bool(cfg["linear_allow_neg_eigval"])))


def attention_config(cfg):
    """The family configuration of an attention layer."""
    H = cfg["num_attention_heads"]
    rp = cfg.get("rope_scaling") or cfg.get("rope_parameters") or {}
    theta = float(rp.get("rope_theta", cfg.get("rope_theta", 10000.0)))
    return dict(hidden_size=cfg["hidden_size"], num_attention_heads=H, num_key_value_heads=cfg["num_key_value_heads"],
                head_dim=cfg["hidden_size"] // H, cache_length=cfg["max_position_embeddings"],
                partial_rotary_factor=1.0, rope_theta=theta, rms_norm_eps=cfg["rms_norm_eps"], qk_norm="rms_full",
                attn_output_gate=0, attention_bias=int(bool(cfg["attention_bias"])))


def prefix(i, k):
    return f"model.layers.{i}." + ("self_attn." if k == "attention" else "linear_attn.")


def init_weights(cfg, rng):
    """Checkpoint-named weights (OlmoHybridForCausalLM.state_dict() keys) drawn in a fixed order: the embedding;
    per layer its mixer, its two norms and the MLP's gate, up, down; the final norm; lm_head (drawn even when
    tied). Values on the bf16-exact grid (mixers.py "Quantization")."""
    D, V, F = cfg["hidden_size"], cfg["vocab_size"], cfg["intermediate_size"]
    w = {"model.embed_tokens.weight": mixers.quantize(rng.standard_normal((V, D)), scale=1.0)}
    for i in range(cfg["num_hidden_layers"]):
        k, pre, lay = kind(cfg, i), prefix(i, kind(cfg, i)), f"model.layers.{i}."
        if k == "gdn":
            gc = gdn_config(cfg)
            fam = mixers.gdn_init(gc, rng, mixers.GRID_BITS)
            kd = gc["linear_num_key_heads"] * gc["linear_key_head_dim"]
            q, kk, v = np.split(fam.pop("in_proj_qkv.weight"), [kd, 2 * kd], axis=0)
            w[pre + "q_proj.weight"], w[pre + "k_proj.weight"], w[pre + "v_proj.weight"] = q, kk, v
            for name, val in fam.items():
                w[pre + GDN_NAMES.get(name, name)] = val
            norms = ("input_layernorm.weight", "post_attention_layernorm.weight")
        else:
            for name, val in M.attention_init(attention_config(cfg), rng, mixers.GRID_BITS).items():
                w[pre + name] = val
            norms = ("post_attention_layernorm.weight", "post_feedforward_layernorm.weight")
        for n in norms:
            w[lay + n] = mixers.quantize(1.0 + 0.1 * rng.standard_normal(D))
        w[lay + "mlp.gate_proj.weight"] = mixers.uniform_init(rng, (F, D), D)
        w[lay + "mlp.up_proj.weight"] = mixers.uniform_init(rng, (F, D), D)
        w[lay + "mlp.down_proj.weight"] = mixers.uniform_init(rng, (D, F), F)
    w["model.norm.weight"] = mixers.quantize(1.0 + 0.1 * rng.standard_normal(D))
    head = mixers.quantize(rng.standard_normal((V, D)), scale=1.0)
    w["lm_head.weight"] = w["model.embed_tokens.weight"].copy() if cfg["tie_word_embeddings"] else head
    return w


def rmsnorm(x, w, eps):
    """OlmoHybridRMSNorm: x · rsqrt(mean x² + eps) · w."""
    return w * (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps))


class OlmoHybridStack:
    """The float64 OlmoHybridForCausalLM: forward over one segment of token ids from per-layer caches (the
    interface of stacks.Stack)."""

    def __init__(self, cfg, weights):
        assert cfg.get("hidden_act", "silu") == "silu", "OLMo-Hybrid's oracle computes hidden_act silu only"
        self.cfg = cfg
        self.w = {k: np.asarray(v, dtype=np.float64) for k, v in weights.items()}
        self.n = cfg["num_hidden_layers"]
        self.kinds = [kind(cfg, i) for i in range(self.n)]
        self.mcfgs = [gdn_config(cfg) if k == "gdn" else attention_config(cfg) for k in self.kinds]
        self.mixers = [self.family_weights(i) for i in range(self.n)]
        self.eps = cfg["rms_norm_eps"]

    def family_weights(self, i):
        """Layer i's mixer weights under the family's names (the GDN's q / k / v_proj stacked into in_proj_qkv)."""
        pre = prefix(i, self.kinds[i])
        own = {k[len(pre):]: v for k, v in self.w.items() if k.startswith(pre)}
        if self.kinds[i] == "attention":
            return own
        fam = {name: own[theirs] for name, theirs in GDN_NAMES.items()}
        fam["in_proj_qkv.weight"] = np.concatenate([own["q_proj.weight"], own["k_proj.weight"], own["v_proj.weight"]])
        for name in ("conv1d.weight", "dt_bias", "A_log"):
            fam[name] = own[name]
        return fam

    def mlp(self, i, x):
        pre = f"model.layers.{i}.mlp."
        g, u, d = (self.w[pre + m + ".weight"] for m in ("gate_proj", "up_proj", "down_proj"))
        return (mixers.silu(x @ g.T) * (x @ u.T)) @ d.T

    def head(self):
        return self.w["model.embed_tokens.weight"] if self.cfg["tie_word_embeddings"] else self.w["lm_head.weight"]

    def forward(self, ids, mask, caches=None):
        """As stacks.Stack.forward: (logits, hidden [n + 1], new caches, per-position caches, mixer outputs)."""
        h = self.w["model.embed_tokens.weight"][ids]
        hidden, mixed, new_caches, per_pos = [h], [], [], []
        for i in range(self.n):
            lay = f"model.layers.{i}."
            if self.kinds[i] == "gdn":
                x = rmsnorm(h, self.w[lay + "input_layernorm.weight"], self.eps)
            else:
                x = h   # the attention reads the residual itself
            out, cache, windows, states = M.mixer_forward(self.kinds[i], self.mcfgs[i], self.mixers[i], x, mask,
                                                               None if caches is None else caches[i])
            if self.kinds[i] == "gdn":
                h = h + out
                h = h + self.mlp(i, rmsnorm(h, self.w[lay + "post_attention_layernorm.weight"], self.eps))
            else:
                h = h + rmsnorm(out, self.w[lay + "post_attention_layernorm.weight"], self.eps)
                h = h + rmsnorm(self.mlp(i, h), self.w[lay + "post_feedforward_layernorm.weight"], self.eps)
            hidden.append(h)
            mixed.append(out)
            new_caches.append(cache)
            per_pos.append((windows, states))
        logits = rmsnorm(h, self.w["model.norm.weight"], self.eps) @ self.head().T
        return logits, np.stack(hidden), new_caches, per_pos, np.stack(mixed)

    def greedy(self, ids, mask, steps):
        """Prefill, then `steps` greedy tokens through the cache: (tokens [B, G], logits [B, G, V])."""
        return M.greedy(self.forward, ids, mask, steps)
