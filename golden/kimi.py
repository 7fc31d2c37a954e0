"""Kimi-Linear's float64 stack (KimiLinearForCausalLM, docs/models.md), written from the upstream definitions in
transformers' modeling_kimi_linear.py and configuration_kimi_linear.py, never from the C engine.

Per decoder layer i: h += mixer(input_layernorm(h)), the mixer Kimi Delta Attention (KimiLinearDeltaAttention,
golden/linear.py kda_forward) at layer_types[i] == "linear_attention", multi-head latent attention without
positional embedding (KimiLinearAttention, golden/models.py mla_forward) at "full_attention"; then
h += ffn(post_attention_layernorm(h)), the ffn the SwiGLU MLP (KimiLinearMLP, intermediate_size) at
mlp_layer_types[i] == "dense", the MoE (KimiLinearMoE) at "sparse": the router of KimiLinearTopkRouter (sigmoid
scores s = σ(W x); the choice on c = s + e_score_correction_bias: n_group groups ranked by the sum of their two
largest c, the topk_group best kept, the top-k c among them; weights the uncorrected s, over (their sum + 1e-20)
with norm_topk_prob, times routed_scaling_factor), SwiGLU experts of one gate_up_proj [E][2I][D] (gate rows
first) and down_proj [E][D][I], plus the shared SwiGLU expert of moe_intermediate_size · n_shared_experts. Final
RMSNorm, an untied lm_head (tie_word_embeddings False by default). Every RMSNorm of the glue has rms_norm_eps;
the latent norm of the attention is built without it (eps 1e-6, semantics.md §12.8); KDA's o_norm takes
rms_norm_eps.

The layer kinds come from layer_types, or from linear_attn_config's 1-indexed full_attn_layers / kda_layers (a
released checkpoint's spelling), or KimiLinearConfig's default (full attention where i and i % 4 == 0); the
MLP kinds from mlp_layer_types, or first_k_dense_replace (default 1) dense layers, then sparse.
"""

import numpy as np

import linear
import mixers
import models as M

ARCHITECTURE = "KimiLinearForCausalLM"

# KimiLinearConfig's defaults for the keys the stack reads (5.24)
DEFAULTS = dict(vocab_size=163840, hidden_size=2304, intermediate_size=9216, moe_intermediate_size=1024,
                num_hidden_layers=27, num_attention_heads=32, num_key_value_heads=32, n_shared_experts=1,
                routed_scaling_factor=2.446, kv_lora_rank=512, q_lora_rank=None, qk_rope_head_dim=64,
                v_head_dim=128, qk_nope_head_dim=128, n_group=1, topk_group=1, num_experts_per_tok=8,
                norm_topk_prob=True, hidden_act="silu", max_position_embeddings=1048576, rms_norm_eps=1e-5,
                tie_word_embeddings=False, attention_bias=False, num_local_experts=256, mlp_layer_types=None,
                layer_types=None, linear_head_dim=128, linear_num_heads=32, linear_conv_kernel_dim=4)
MLA_NORM_EPS = 1e-6   # KimiLinearRMSNorm(kv_lora_rank) / (q_lora_rank): the class default, not rms_norm_eps


def layer_types(cfg):
    if cfg.get("layer_types"):
        return list(cfg["layer_types"])
    lac = cfg.get("linear_attn_config") or {}
    n = cfg["num_hidden_layers"]
    if "full_attn_layers" in lac and "kda_layers" in lac:
        types = [None] * n
        for j in lac["full_attn_layers"]:
            types[j - 1] = "full_attention"
        for j in lac["kda_layers"]:
            types[j - 1] = "linear_attention"
        return types
    return ["full_attention" if i and i % 4 == 0 else "linear_attention" for i in range(n)]


def mlp_layer_types(cfg):
    if cfg.get("mlp_layer_types"):
        return list(cfg["mlp_layer_types"])
    k = cfg.get("first_k_dense_replace", 1)
    return ["dense" if i < k else "sparse" for i in range(cfg["num_hidden_layers"])]


def linear_attn(cfg, key, own):
    return (cfg.get("linear_attn_config") or {}).get(key, cfg[own])


def kda_config(cfg):
    return dict(hidden_size=cfg["hidden_size"], linear_num_heads=linear_attn(cfg, "num_heads", "linear_num_heads"),
                linear_head_dim=linear_attn(cfg, "head_dim", "linear_head_dim"),
                linear_conv_kernel_dim=linear_attn(cfg, "short_conv_kernel_size", "linear_conv_kernel_dim"),
                chunk_size=64, rms_norm_eps=float(cfg["rms_norm_eps"]))


def mla_config(cfg):
    H = cfg["num_attention_heads"]
    assert (cfg.get("num_key_value_heads") or H) == H, "KimiLinearAttention expands the latent into every head"
    return dict(M.ATTENTION_DEFAULTS, hidden_size=cfg["hidden_size"], num_attention_heads=H, num_key_value_heads=H,
                head_dim=cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"],
                cache_length=cfg["max_position_embeddings"], rms_norm_eps=MLA_NORM_EPS,
                attention_bias=int(cfg["attention_bias"]), no_rope=1, kv_lora_rank=cfg["kv_lora_rank"],
                q_lora_rank=cfg.get("q_lora_rank") or 0, qk_rope_head_dim=cfg["qk_rope_head_dim"],
                v_head_dim=cfg["v_head_dim"])


def kinds(cfg):
    return ["mla" if t == "full_attention" else "kda" for t in layer_types(cfg)]


def init_weights(cfg, rng):
    """Checkpoint-named weights in a fixed draw order: the embedding; per layer its input norm, its mixer
    (golden/linear.py kda_init, golden/models.py mla_init under model.layers.i.self_attn.), its post-attention
    norm and its MLP or MoE (router, correction bias, experts' gate_up_proj and down_proj, the shared expert's
    gate / up / down); the final norm; lm_head."""
    D, V = cfg["hidden_size"], cfg["vocab_size"]
    w = {"model.embed_tokens.weight": mixers.quantize(rng.standard_normal((V, D)), scale=1.0)}
    ks, ms = kinds(cfg), mlp_layer_types(cfg)
    for i in range(cfg["num_hidden_layers"]):
        pre = f"model.layers.{i}."
        w[pre + "input_layernorm.weight"] = mixers.quantize(1.0 + 0.1 * rng.standard_normal(D))
        mw = (linear.kda_init(kda_config(cfg), rng, mixers.GRID_BITS) if ks[i] == "kda"
              else M.mla_init(mla_config(cfg), rng, mixers.GRID_BITS))
        w.update({pre + "self_attn." + k: v for k, v in mw.items()})
        w[pre + "post_attention_layernorm.weight"] = mixers.quantize(1.0 + 0.1 * rng.standard_normal(D))
        if ms[i] == "dense":
            F = cfg["intermediate_size"]
            for m, shape, fan in (("gate_proj", (F, D), D), ("up_proj", (F, D), D), ("down_proj", (D, F), F)):
                w[pre + "mlp." + m + ".weight"] = mixers.uniform_init(rng, shape, fan)
            continue
        E, Fe = cfg["num_local_experts"], cfg["moe_intermediate_size"]
        Fs = Fe * cfg["n_shared_experts"]
        w[pre + "mlp.gate.weight"] = mixers.uniform_init(rng, (E, D), D)
        w[pre + "mlp.gate.e_score_correction_bias"] = mixers.quantize(0.1 * rng.standard_normal(E), scale=1.0)
        w[pre + "mlp.experts.gate_up_proj"] = mixers.uniform_init(rng, (E, 2 * Fe, D), D)
        w[pre + "mlp.experts.down_proj"] = mixers.uniform_init(rng, (E, D, Fe), Fe)
        for m, shape, fan in (("gate_proj", (Fs, D), D), ("up_proj", (Fs, D), D), ("down_proj", (D, Fs), Fs)):
            w[pre + "mlp.shared_experts." + m + ".weight"] = mixers.uniform_init(rng, shape, fan)
    w["model.norm.weight"] = mixers.quantize(1.0 + 0.1 * rng.standard_normal(D))
    w["lm_head.weight"] = mixers.uniform_init(rng, (V, D), D)
    return w


def rmsnorm(x, w, eps):
    return w * (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps))


def swiglu(x, gate, up, down):
    return (mixers.silu(x @ gate.T) * (x @ up.T)) @ down.T


class KimiStack:
    """KimiLinearForCausalLM in float64: forward over one segment of token ids from per-layer caches (the
    interface of stacks.Stack)."""

    def __init__(self, cfg, weights):
        self.cfg = cfg
        self.w = {k: v.astype(np.float64) for k, v in weights.items()}
        self.n = cfg["num_hidden_layers"]
        self.kinds = kinds(cfg)
        self.mlps = mlp_layer_types(cfg)
        self.kcfg, self.acfg = kda_config(cfg), mla_config(cfg)
        self.eps = float(cfg["rms_norm_eps"])
        self.mixers = []
        for i in range(self.n):
            pre = f"model.layers.{i}.self_attn."
            self.mixers.append({k[len(pre):]: v for k, v in self.w.items() if k.startswith(pre)})

    def head(self):
        return self.w["model.embed_tokens.weight"] if self.cfg["tie_word_embeddings"] else self.w["lm_head.weight"]

    def moe(self, i, x):
        """KimiLinearMoE on x [..., D] from its definition (module docstring); the golden holds no tie at a cut."""
        cfg, w, pre = self.cfg, self.w, f"model.layers.{i}.mlp."
        E, k, G, kg = cfg["num_local_experts"], cfg["num_experts_per_tok"], cfg["n_group"], cfg["topk_group"]
        per = E // G
        router, bias = w[pre + "gate.weight"], w[pre + "gate.e_score_correction_bias"]
        gate_up, down = w[pre + "experts.gate_up_proj"], w[pre + "experts.down_proj"]
        flat = x.reshape(-1, x.shape[-1])
        out = np.zeros_like(flat)
        for t, xt in enumerate(flat):
            s = 1.0 / (1.0 + np.exp(-(router @ xt)))
            c = s + bias
            gs = np.array([np.sum(np.sort(c[g * per:(g + 1) * per])[-2:]) for g in range(G)])
            groups = sorted(range(G), key=lambda g: (-gs[g], g))[:kg]
            assert kg == G or gs[groups[-1]] not in np.delete(gs, groups), "a group tie at the topk_group-th group"
            allowed = [e for e in range(E) if e // per in groups]
            top = sorted(allowed, key=lambda e: (-c[e], e))[:k]
            assert c[top[-1]] not in [c[e] for e in allowed if e not in top], "a router tie at the k-th expert"
            p = s[top]
            if cfg["norm_topk_prob"]:
                p = p / (p.sum() + 1e-20)
            p = p * cfg["routed_scaling_factor"]
            for wgt, e in zip(p, top):
                g_, u_ = np.split(gate_up[e], 2, axis=0)
                out[t] += wgt * (down[e] @ (mixers.silu(g_ @ xt) * (u_ @ xt)))
        sp = pre + "shared_experts."
        shared = swiglu(x, w[sp + "gate_proj.weight"], w[sp + "up_proj.weight"], w[sp + "down_proj.weight"])
        return out.reshape(x.shape) + shared

    def ffn(self, i, x):
        if self.mlps[i] == "dense":
            pre = f"model.layers.{i}.mlp."
            return swiglu(x, self.w[pre + "gate_proj.weight"], self.w[pre + "up_proj.weight"],
                          self.w[pre + "down_proj.weight"])
        return self.moe(i, x)

    def forward(self, ids, mask, caches=None):
        h = self.w["model.embed_tokens.weight"][ids]
        hidden, mixed, new_caches, per_pos = [h], [], [], []
        for i in range(self.n):
            pre = f"model.layers.{i}."
            x = rmsnorm(h, self.w[pre + "input_layernorm.weight"], self.eps)
            window, state = caches[i] if caches is not None else (None, None)
            if self.kinds[i] == "kda":
                out, windows, states = linear.kda_forward(self.kcfg, self.mixers[i], x, mask, window, state)
            else:
                out, windows, states = M.mla_forward(self.acfg, self.mixers[i], x, mask, window, state)
            h = h + out
            h = h + self.ffn(i, rmsnorm(h, self.w[pre + "post_attention_layernorm.weight"], self.eps))
            hidden.append(h)
            mixed.append(out)
            new_caches.append((windows[-1], states[-1]))
            per_pos.append((windows, states))
        logits = rmsnorm(h, self.w["model.norm.weight"], self.eps) @ self.head().T
        return logits, np.stack(hidden), new_caches, per_pos, np.stack(mixed)

    def greedy(self, ids, mask, steps):
        logits, _, caches, _, _ = self.forward(ids, mask)
        step_logits = logits[:, -1]
        tokens, all_logits = [], []
        for g in range(steps):
            tok = np.argmax(step_logits, axis=-1)
            tokens.append(tok)
            all_logits.append(step_logits)
            if g + 1 < steps:
                out, _, caches, _, _ = self.forward(tok[:, None], None, caches)
                step_logits = out[:, 0]
        return np.stack(tokens, axis=1).astype(np.int64), np.stack(all_logits, axis=1)
