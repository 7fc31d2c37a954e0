"""MiniMax (transformers `MiniMaxForCausalLM`, 5.24) in float64, from its definition (docs/models.md).

The stack: h = embed_tokens(ids); per layer i of kind layer_types[i] (MiniMaxConfig's default: "full_attention"
at even i, "linear_attention" at odd i), MiniMaxDecoderLayer:
    x = input_layernorm(h);             h = α_a · x + β_a · mixer(x)
    x = post_attention_layernorm(h);    h = α_m · x + β_m · moe(x)
the residual of each add being the block norm's output, not the stream before it; (α_a, β_a) the layer kind's
(linear_attn_alpha_factor, linear_attn_beta_factor) or (full_attn_alpha_factor, full_attn_beta_factor), (α_m, β_m)
(mlp_alpha_factor, mlp_beta_factor). Then logits = lm_head(norm(h)). Every RMSNorm is
w · x · rsqrt(mean x² + rms_norm_eps).

The mixers:
  - "linear_attention": MiniMaxLightningAttention, the lightning family's oracle (linear.lightning_forward) with
    layer_idx i and the model's num_hidden_layers (the slopes scale with depth), block_size, head_dim (or
    hidden_size // num_attention_heads), and its output norm's eps 1e-6 (MiniMaxRMSNorm's default: upstream does
    not pass rms_norm_eps). Its checkpoint names are the family's (qkv_proj, output_gate, norm, out_proj); the
    buffers slope_rate, query_decay, key_decay, diagonal_decay are functions of the configuration, not weights.
  - "full_attention": MiniMaxAttention, the attention family's oracle (models.attention_forward): GQA, RoPE of the
    whole head with rope_parameters' theta, scale head_dim^-1/2, no q/k norm, no biases.
The MoE (MiniMaxSparseMoeBlock, Mixtral's): router logits r = gate.weight x, p = softmax(r) over every expert, the
k = num_experts_per_tok largest p (a tie: the lower index), divided by their sum (always), the output the weighted
sum of down_e(silu(gate_e x) · up_e x), gate_e and up_e the two halves of experts.gate_up_proj[e] (gate rows
first).
"""

import numpy as np

import linear
import mixers
import models as M

DEFAULTS = dict(   # MiniMaxConfig's defaults (transformers 5.24)
    rms_norm_eps=1e-5, tie_word_embeddings=False, hidden_act="silu", max_position_embeddings=4096 * 32,
    num_key_value_heads=8, head_dim=None, sliding_window=None, num_experts_per_tok=2, num_local_experts=8,
    rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, block_size=256,
    full_attn_alpha_factor=1, full_attn_beta_factor=1, linear_attn_alpha_factor=1, linear_attn_beta_factor=1,
    mlp_alpha_factor=1, mlp_beta_factor=1, router_jitter_noise=0.0)
LIGHTNING_NORM_EPS = 1e-6   # MiniMaxLightningAttention: MiniMaxRMSNorm(H·hd) with its default eps
FACTORS = {"lightning": ("linear_attn_alpha_factor", "linear_attn_beta_factor"),
           "attention": ("full_attn_alpha_factor", "full_attn_beta_factor")}


def normalise(cfg):
    """MiniMaxConfig.__post_init__'s defaults, resolved: num_key_value_heads, layer_types."""
    cfg = dict(cfg)
    if cfg.get("layer_types") is None and cfg.get("attn_type_list") is not None:
        raise ValueError("'attn_type_list' without 'layer_types': MiniMaxConfig 5.24 does not read it (its layers fall "
                         "back to full attention at even i); give layer_types")
    if cfg.get("num_experts") is not None:   # attribute_map: num_experts is num_local_experts
        cfg["num_local_experts"] = cfg.pop("num_experts")
    cfg.pop("num_experts", None)
    if cfg.get("num_key_value_heads") is None:
        cfg["num_key_value_heads"] = cfg["num_attention_heads"]
    if cfg.get("layer_types") is None:
        cfg["layer_types"] = ["full_attention" if (i + 1) % 2 else "linear_attention"
                              for i in range(cfg["num_hidden_layers"])]
    return cfg


def kind(cfg, i):
    return "lightning" if cfg["layer_types"][i] == "linear_attention" else "attention"


def head_dim(cfg):
    return cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]


def lightning_config(cfg, i):
    """The family configuration of linear-attention layer i."""
    return dict(hidden_size=cfg["hidden_size"], num_attention_heads=cfg["num_attention_heads"], head_dim=head_dim(cfg),
                block_size=cfg["block_size"], layer_idx=i, num_hidden_layers=cfg["num_hidden_layers"],
                norm_eps=LIGHTNING_NORM_EPS)


def attention_config(cfg):
    """The family configuration of a full-attention layer."""
    rp = cfg.get("rope_parameters") or {}
    return dict(hidden_size=cfg["hidden_size"], num_attention_heads=cfg["num_attention_heads"],
                num_key_value_heads=cfg["num_key_value_heads"], head_dim=head_dim(cfg),
                cache_length=cfg["max_position_embeddings"], partial_rotary_factor=1.0,
                rope_theta=float(rp.get("rope_theta", 1000000.0)), rms_norm_eps=cfg["rms_norm_eps"], qk_norm="none",
                attn_output_gate=0, attention_bias=0)


def mixer_config(cfg, i):
    return lightning_config(cfg, i) if kind(cfg, i) == "lightning" else attention_config(cfg)


def prefix(i):
    return f"model.layers.{i}.self_attn."


def init_weights(cfg, rng):
    """Checkpoint-named weights (MiniMaxForCausalLM.state_dict() keys but the lightning buffers) drawn in a fixed
    order: the embedding; per layer its input norm, its mixer, its post-attention norm, the router and the
    experts' gate_up_proj and down_proj; the final norm; lm_head (drawn even when tied). Values on the bf16-exact
    grid (mixers.py "Quantization")."""
    D, V = cfg["hidden_size"], cfg["vocab_size"]
    E, Fe = cfg["num_local_experts"], cfg["intermediate_size"]
    w = {"model.embed_tokens.weight": mixers.quantize(rng.standard_normal((V, D)), scale=1.0)}
    for i in range(cfg["num_hidden_layers"]):
        lay = f"model.layers.{i}."
        w[lay + "input_layernorm.weight"] = mixers.quantize(1.0 + 0.1 * rng.standard_normal(D))
        if kind(cfg, i) == "lightning":
            fam = linear.lightning_init(lightning_config(cfg, i), rng, mixers.GRID_BITS)
        else:
            fam = M.attention_init(attention_config(cfg), rng, mixers.GRID_BITS)
        for name, val in fam.items():
            w[prefix(i) + name] = val
        w[lay + "post_attention_layernorm.weight"] = mixers.quantize(1.0 + 0.1 * rng.standard_normal(D))
        w[lay + "mlp.gate.weight"] = mixers.uniform_init(rng, (E, D), D)
        w[lay + "mlp.experts.gate_up_proj"] = mixers.uniform_init(rng, (E, 2 * Fe, D), D)
        w[lay + "mlp.experts.down_proj"] = mixers.uniform_init(rng, (E, D, Fe), Fe)
    w["model.norm.weight"] = mixers.quantize(1.0 + 0.1 * rng.standard_normal(D))
    head = mixers.quantize(rng.standard_normal((V, D)), scale=1.0)
    w["lm_head.weight"] = w["model.embed_tokens.weight"].copy() if cfg["tie_word_embeddings"] else head
    return w


def rmsnorm(x, w, eps):
    """MiniMaxRMSNorm: w · x · rsqrt(mean x² + eps)."""
    return w * (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps))


def moe(w, lay, k, x):
    """MiniMaxSparseMoeBlock on x [..., D]: softmax over every expert's logit, the k largest, renormalised."""
    router, gate_up, down = (w[lay + n] for n in ("mlp.gate.weight", "mlp.experts.gate_up_proj",
                                                  "mlp.experts.down_proj"))
    flat = x.reshape(-1, x.shape[-1])
    out = np.zeros_like(flat)
    for t, xt in enumerate(flat):
        r = router @ xt
        p = np.exp(r - r.max())
        p = p / p.sum()
        top = sorted(range(len(p)), key=lambda e: (-p[e], e))[:k]
        assert len(set(p[top[-1:]]) & set(np.delete(p, top))) == 0, "a router tie at the k-th expert"
        wt = p[top] / p[top].sum()
        for wgt, e in zip(wt, top):
            gate, up = np.split(gate_up[e], 2, axis=0)
            out[t] += wgt * (down[e] @ (mixers.silu(gate @ xt) * (up @ xt)))
    return out.reshape(x.shape)


class MiniMaxStack:
    """The float64 MiniMaxForCausalLM: forward over one segment of token ids from per-layer caches (the interface
    of stacks.Stack)."""

    def __init__(self, cfg, weights):
        assert cfg.get("hidden_act", "silu") == "silu", "MiniMax's oracle computes hidden_act silu only"
        assert cfg.get("sliding_window") is None, "MiniMax's oracle computes full causal attention only"
        self.cfg = cfg
        self.w = {k: np.asarray(v, dtype=np.float64) for k, v in weights.items()}
        self.n = cfg["num_hidden_layers"]
        self.kinds = [kind(cfg, i) for i in range(self.n)]
        self.mcfgs = [mixer_config(cfg, i) for i in range(self.n)]
        self.mixers = [{k[len(prefix(i)):]: v for k, v in self.w.items() if k.startswith(prefix(i))}
                       for i in range(self.n)]
        self.eps = cfg["rms_norm_eps"]

    def head(self):
        return self.w["model.embed_tokens.weight"] if self.cfg["tie_word_embeddings"] else self.w["lm_head.weight"]

    def forward(self, ids, mask, caches=None):
        """As stacks.Stack.forward: (logits, hidden [n + 1], new caches, per-position caches, mixer outputs)."""
        cfg = self.cfg
        h = self.w["model.embed_tokens.weight"][ids]
        hidden, mixed, new_caches, per_pos = [h], [], [], []
        for i in range(self.n):
            lay = f"model.layers.{i}."
            x = rmsnorm(h, self.w[lay + "input_layernorm.weight"], self.eps)
            out, cache, windows, states = M.mixer_forward(self.kinds[i], self.mcfgs[i], self.mixers[i], x, mask,
                                                               None if caches is None else caches[i])
            a, b = (float(cfg[f]) for f in FACTORS[self.kinds[i]])
            h = a * x + b * out
            x = rmsnorm(h, self.w[lay + "post_attention_layernorm.weight"], self.eps)
            h = float(cfg["mlp_alpha_factor"]) * x + float(cfg["mlp_beta_factor"]) * moe(
                self.w, lay, cfg["num_experts_per_tok"], x)
            hidden.append(h)
            mixed.append(out)
            new_caches.append(cache)
            per_pos.append((windows, states))
        logits = rmsnorm(h, self.w["model.norm.weight"], self.eps) @ self.head().T
        return logits, np.stack(hidden), new_caches, per_pos, np.stack(mixed)

    def greedy(self, ids, mask, steps):
        """Prefill, then `steps` greedy tokens through the cache: (tokens [B, G], logits [B, G, V])."""
        return M.greedy(self.forward, ids, mask, steps)
