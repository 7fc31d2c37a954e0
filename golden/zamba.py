"""The float64 oracle of Zamba2ForCausalLM (model type `zamba2`), written from the model's definition
(transformers 5.24 models/zamba2: Zamba2Config, Zamba2Model, Zamba2HybridLayer, Zamba2AttentionDecoderLayer,
Zamba2Attention, Zamba2MLP, Zamba2MambaDecoderLayer, Zamba2MambaMixer), never from the C engine.

The stack, for layers_block_type t[0..n) (`linear_attention` — the older `mamba` — or `hybrid`):

  e = embed_tokens[ids]                      (the original embeddings, kept for every hybrid layer)
  h = e
  layer i of kind `linear_attention`:  h = h + mamba_i(norm_i(h))
  layer i of kind `hybrid`, its j-th hybrid layer (j counts hybrid layers), shared block b = j % num_mem_blocks:
      c  = cat(h, e)                                            [2D]
      x  = input_layernorm_b(c)                                 (RMSNorm over 2D)
      q  = Wq_b x + Bq_j Aq_j x,  k, v likewise                 (the adapters with use_shared_attention_adapter)
      a  = o_proj_b(attention(q, k, v))                         (GQA, head_dim 2D/H, scale (head_dim / 2)^-1/2,
                                                                 RoPE on the whole head with use_mem_rope; its KV
                                                                 cache per application: layer i's)
      x2 = pre_ff_layernorm_b(a)
      gu = Wgu_b x2 + Bgu_j Agu_j x2                            (the MLP's adapter is always there)
      m  = down_b(act(gu[:F]) * gu[F:])                         (act = hidden_act: gelu is the exact erf form)
      T  = linear_i(m)                                          (a [D, D] matrix per hybrid layer)
      h  = h + mamba_i(norm_i(h + T))                           (the residual is h, without T)
  logits = lm_head(final_layernorm(h))                         (tied to the embedding by default)

Every norm is x·rsqrt(mean x² + rms_norm_eps)·w; the Mamba2 mixer's gated norm is per group (group size
intermediate / mamba_ngroups) with eps 1e-5 whatever the config says, its dt is clamped below at
time_step_min, its conv has a bias always. Shared weights are stored under every hybrid layer of their
block (`state_dict()` lists each tied copy), the adapters of application j under index j of its block's
lists.

The golden's layer list is the engine's: each hybrid layer is two entries, the shared block's application
(an attention mixer on the 2D input, whose output `mixer_outputs` holds, and after which `hidden_states` holds
h + T, the Mamba layer's pre-norm input) and then the hybrid layer's Mamba2 layer (its residual the h before the
application). A `linear_attention` layer is one entry.
"""

import math

import numpy as np

import mixers
import models as M

DEFAULTS = dict(
    vocab_size=32000, max_position_embeddings=4096, mamba_d_state=64, mamba_d_conv=4, mamba_expand=2,
    mamba_ngroups=1, time_step_min=0.001, time_step_max=0.1, time_step_floor=1e-4, n_mamba_heads=8,
    use_conv_bias=True, chunk_size=256, use_mem_eff_path=False, add_bias_linear=False, intermediate_size=None,
    hidden_act="gelu", num_attention_heads=32, num_key_value_heads=None, num_mem_blocks=1,
    use_shared_attention_adapter=False, adapter_rank=128, use_mem_rope=False, rope_parameters=None,
    rms_norm_eps=1e-5, use_long_context=False, tie_word_embeddings=True)

LAYER_KINDS = {"mamba": "linear_attention", "linear_attention": "linear_attention", "hybrid": "hybrid"}


def derived(cfg):
    """Zamba2Config.__post_init__'s derived sizes: (D, F, Hq, Hkv, head_dim, mamba head_dim)."""
    D = cfg["hidden_size"]
    F = cfg.get("intermediate_size") or 4 * D
    Hq = cfg["num_attention_heads"]
    Hkv = cfg.get("num_key_value_heads") or Hq
    return D, F, Hq, Hkv, 2 * D // Hq, int(cfg["mamba_expand"] * D) // cfg["n_mamba_heads"]


def kinds(cfg):
    return [LAYER_KINDS[t] for t in cfg["layers_block_type"]]


def hybrid_ids(cfg):
    return [i for i, t in enumerate(kinds(cfg)) if t == "hybrid"]


def mamba_config(cfg):
    D, _, _, _, _, P = derived(cfg)
    H, G = cfg["n_mamba_heads"], cfg["mamba_ngroups"]
    return dict(hidden_size=D, num_heads=H, head_dim=P, state_size=cfg["mamba_d_state"], n_groups=G,
                conv_kernel=cfg["mamba_d_conv"], chunk_size=cfg["chunk_size"], layer_norm_epsilon=1e-5,
                use_bias=int(cfg["add_bias_linear"]), use_conv_bias=1,
                time_step_limit=(float(cfg["time_step_min"]), float("inf")), norm_group_size=H * P // G)


def rope_theta(cfg):
    rp = cfg.get("rope_parameters") or {}
    return float(rp.get("rope_theta", cfg.get("rope_theta", 10000.0)))


def attention_config(cfg):
    """The attention family's configuration of a shared block's attention: 2D input (from its weights), D output,
    head_dim 2D/H, the score scale (head_dim / 2)^-1/2, RoPE on the whole head only with use_mem_rope."""
    D, _, Hq, Hkv, hd, _ = derived(cfg)
    # the k and v adapters map back to 2D = Hq·hd, which k_proj's Hkv·hd rows match only without GQA (upstream's
    # sum does not broadcast otherwise)
    assert not cfg["use_shared_attention_adapter"] or Hkv == Hq, "attention adapters need num_key_value_heads == heads"
    return dict(hidden_size=D, num_attention_heads=Hq, num_key_value_heads=Hkv, head_dim=hd,
                cache_length=cfg["max_position_embeddings"], partial_rotary_factor=1.0, rope_theta=rope_theta(cfg),
                rms_norm_eps=cfg["rms_norm_eps"], qk_norm="none", attn_output_gate=0, attention_bias=0,
                no_rope=int(not cfg["use_mem_rope"]), softmax_scale=(hd / 2) ** -0.5)


def block_of(cfg, j):
    return j % cfg.get("num_mem_blocks", 1)   # Zamba (v1): one shared block


def shared_prefix(cfg, i):
    return f"model.layers.{i}.shared_transf." if cfg.get("model_type") == "zamba" else \
        f"model.layers.{i}.shared_transformer."


def mamba_prefix(cfg, i):
    return f"model.layers.{i}.mamba_decoder." if kinds(cfg)[i] == "hybrid" else f"model.layers.{i}."


def gelu(x):
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


ACTS = {"gelu": gelu, "silu": mixers.silu}


def init_weights(cfg, rng):
    """Checkpoint-named weights (bf16-exact values, as stacks.init_weights): the embedding; per hybrid block b
    (drawn at its first application) its norms, attention, MLP; per application j its adapters (under its
    block); per layer its Mamba2 mixer and norm, per hybrid layer its linear; the final norm; lm_head. Each
    tied copy of a block is stored under every hybrid layer of the block."""
    D, F, Hq, Hkv, hd, _ = derived(cfg)
    V, r = cfg["vocab_size"], cfg["adapter_rank"]
    w = {"model.embed_tokens.weight": mixers.quantize(rng.standard_normal((V, D)), scale=1.0)}
    hyb = hybrid_ids(cfg)
    blocks = {}
    for j, i in enumerate(hyb):
        b = block_of(cfg, j)
        if b not in blocks:
            blk = {"input_layernorm.weight": mixers.quantize(1.0 + 0.1 * rng.standard_normal(2 * D)),
                   "pre_ff_layernorm.weight": mixers.quantize(1.0 + 0.1 * rng.standard_normal(D))}
            for name, rows in (("q_proj", Hq * hd), ("k_proj", Hkv * hd), ("v_proj", Hkv * hd)):
                blk[f"self_attn.{name}.weight"] = mixers.uniform_init(rng, (rows, 2 * D), 2 * D)
            blk["self_attn.o_proj.weight"] = mixers.uniform_init(rng, (D, Hq * hd), Hq * hd)
            blk["feed_forward.gate_up_proj.weight"] = mixers.uniform_init(rng, (2 * F, D), D)
            blk["feed_forward.down_proj.weight"] = mixers.uniform_init(rng, (D, F), F)
            blocks[b] = blk
        blk = blocks[b]
        # the adapters of application j, large enough to matter (a LoRA's B is zero at init, not here)
        if cfg["use_shared_attention_adapter"]:
            for name in ("q", "k", "v"):
                blk[f"self_attn.linear_{name}_adapter_list.{j}.0.weight"] = mixers.uniform_init(rng, (r, 2 * D), 2 * D)
                blk[f"self_attn.linear_{name}_adapter_list.{j}.1.weight"] = mixers.uniform_init(rng, (2 * D, r), r)
        blk[f"feed_forward.gate_up_proj_adapter_list.{j}.0.weight"] = mixers.uniform_init(rng, (r, D), D)
        blk[f"feed_forward.gate_up_proj_adapter_list.{j}.1.weight"] = mixers.uniform_init(rng, (2 * F, r), r)
    mcfg = mamba_config(cfg)
    for i, kind in enumerate(kinds(cfg)):
        pre = mamba_prefix(cfg, i)
        w[pre + "input_layernorm.weight"] = mixers.quantize(1.0 + 0.1 * rng.standard_normal(D))
        for k, v in mixers.mamba2_init(mcfg, rng).items():
            w[pre + "mamba." + k] = v
        if kind == "hybrid":
            w[f"model.layers.{i}.linear.weight"] = mixers.uniform_init(rng, (D, D), D)
    for j, i in enumerate(hyb):   # every tied copy of block b under every one of its layers
        for k, v in blocks[block_of(cfg, j)].items():
            w[shared_prefix(cfg, i) + k] = v
    w["model.final_layernorm.weight"] = mixers.quantize(1.0 + 0.1 * rng.standard_normal(D))
    head = mixers.quantize(rng.standard_normal((V, D)), scale=1.0)
    w["lm_head.weight"] = w["model.embed_tokens.weight"].copy() if cfg["tie_word_embeddings"] else head
    return w


def rmsnorm(x, w, eps):
    return w * (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps))


def entries_of(kinds, hyb):
    """The engine's entries of a shared-block stack: ("app", i, j) then ("mamba", i, j) for hybrid layer i, the
    j-th application (hyb[j] = i); ("mamba", i, None) for any other layer."""
    out = []
    for i, kind in enumerate(kinds):
        j = hyb.index(i) if kind == "hybrid" else None
        if j is not None:
            out.append(("app", i, j))
        out.append(("mamba", i, j))
    return out


class Zamba2Stack:
    """A float64 Zamba2: forward over one segment from per-entry caches (the engine's layer list, module doc)."""

    def __init__(self, cfg, weights):
        self.cfg = cfg
        self.w = {k: v.astype(np.float64) for k, v in weights.items()}
        self.kinds = kinds(cfg)
        self.hyb = hybrid_ids(cfg)
        self.mcfg = mamba_config(cfg)
        self.acfg = attention_config(cfg)
        self.eps = cfg["rms_norm_eps"]
        self.act = ACTS[cfg["hidden_act"]]
        self.entries = entries_of(self.kinds, self.hyb)
        self.n = len(self.entries)

    def mamba_forward(self, i, x, mask, win, st):
        out, windows, states, _ = mixers.mamba2_forward(self.mcfg, self.mamba_weights(i), x, mask, win, st)
        return out, windows, states

    def head(self):
        return self.w["model.embed_tokens.weight"] if self.cfg["tie_word_embeddings"] else self.w["lm_head.weight"]

    def mamba_weights(self, i):
        p = mamba_prefix(self.cfg, i) + "mamba."
        return {k[len(p):]: v for k, v in self.w.items() if k.startswith(p)}

    def attention_weights(self, i, j):
        """Application j's attention as an attention-family layer: the projections of its block; with the
        adapters, q = Wq x + B (A x) is (Wq + B A) x, exact in float64 up to rounding."""
        p = shared_prefix(self.cfg, i) + "self_attn."
        out = {"o_proj.weight": self.w[p + "o_proj.weight"]}
        for name in ("q", "k", "v"):
            W = self.w[p + f"{name}_proj.weight"]
            if self.cfg["use_shared_attention_adapter"]:
                A = self.w[p + f"linear_{name}_adapter_list.{j}.0.weight"]
                B = self.w[p + f"linear_{name}_adapter_list.{j}.1.weight"]
                W = W + B @ A
            out[f"{name}_proj.weight"] = W
        return out

    def shared_mlp(self, i, j, a):
        p = shared_prefix(self.cfg, i)
        x2 = rmsnorm(a, self.w[p + "pre_ff_layernorm.weight"], self.eps)
        ff = p + "feed_forward."
        gu = x2 @ self.w[ff + "gate_up_proj.weight"].T
        gu = gu + (x2 @ self.w[ff + f"gate_up_proj_adapter_list.{j}.0.weight"].T) @ \
            self.w[ff + f"gate_up_proj_adapter_list.{j}.1.weight"].T
        g, u = np.split(gu, 2, axis=-1)
        m = (self.act(g) * u) @ self.w[ff + "down_proj.weight"].T
        return m @ self.w[f"model.layers.{i}.linear.weight"].T

    def forward(self, ids, mask, caches=None):
        """As stacks.Stack.forward, over the engine's entries: logits [B, L, V], hidden [n + 1, B, L, D], new
        caches, per-entry per-position caches, mixer outputs [n, B, L, D]."""
        e = self.w["model.embed_tokens.weight"][ids]
        h = e
        hidden, mixed, new_caches, per_pos = [h], [], [], []
        T = None
        for k, (what, i, j) in enumerate(self.entries):
            cache = None if caches is None else caches[k]
            if what == "app":
                p = shared_prefix(self.cfg, i)
                x = rmsnorm(np.concatenate([h, e], axis=-1), self.w[p + "input_layernorm.weight"], self.eps)
                a, windows, states = M.attention_forward(self.acfg, self.attention_weights(i, j), x, mask,
                                                         *(cache if cache is not None else (None, None)))
                T = self.shared_mlp(i, j, a)
                hidden.append(h + T)   # the hybrid Mamba layer's input before its norm
                mixed.append(a)
            else:
                u = h + T if j is not None else h
                x = rmsnorm(u, self.w[mamba_prefix(self.cfg, i) + "input_layernorm.weight"], self.eps)
                win, st = cache if cache is not None else (None, None)
                out, windows, states = self.mamba_forward(i, x, mask, win, st)
                h = h + out
                T = None
                hidden.append(h)
                mixed.append(out)
            new_caches.append((windows[-1], states[-1]))
            per_pos.append((windows, states))
        logits = rmsnorm(h, self.w["model.final_layernorm.weight"], self.eps) @ self.head().T
        return logits, np.stack(hidden), new_caches, per_pos, np.stack(mixed)

    def greedy(self, ids, mask, steps):
        """Prefill, then `steps` greedy tokens through the cache: (tokens [B, G], logits [B, G, V])."""
        return M.greedy(self.forward, ids, mask, steps)


def fill_tied(cfg, w):
    """A checkpoint as save_pretrained writes it holds a tied block once, under the first hybrid layer of the block
    (Zamba2Model._tied_weights_keys); every other application's copy is that one, so it is filled in from it (a
    copy present under both names must be the same, else the checkpoint is refused). Tied lm_head likewise.
    transformers 5.24 ties the blocks only with tie_word_embeddings (PreTrainedModel.tie_weights applies
    _tied_weights_keys only then): without it every hybrid layer has a block of its own, all stored, each read
    under its layer's name (docs/findings.md 36)."""
    w = dict(w)
    if not cfg["tie_word_embeddings"]:
        return w
    first = {}
    for j, i in enumerate(hybrid_ids(cfg)):
        first.setdefault(block_of(cfg, j), i)
    for j, i in enumerate(hybrid_ids(cfg)):
        src = shared_prefix(cfg, first[block_of(cfg, j)])
        for k in [k for k in w if k.startswith(src)]:
            dst = shared_prefix(cfg, i) + k[len(src):]
            if dst in w and not np.array_equal(w[dst], w[k]):
                raise ValueError(f"{dst}: differs from its tied copy {k}")
            w[dst] = w[k]
    if cfg["tie_word_embeddings"]:
        if "lm_head.weight" in w and not np.array_equal(w["lm_head.weight"], w["model.embed_tokens.weight"]):
            raise ValueError("lm_head.weight: differs from the tied model.embed_tokens.weight")
        w["lm_head.weight"] = w["model.embed_tokens.weight"]
    return w


def retie(cfg, w):
    """Weights redrawn name by name (golden/calibration.py) made a model again: every tied copy of a block (and the
    adapters it holds) that of the block's first hybrid layer, a tied lm_head the embedding."""
    w = dict(w)
    first = {}
    for j, i in enumerate(hybrid_ids(cfg)):
        first.setdefault(block_of(cfg, j), i)
    for j, i in enumerate(hybrid_ids(cfg)):
        src = shared_prefix(cfg, first[block_of(cfg, j)])
        for k in [k for k in w if k.startswith(src)]:
            w[shared_prefix(cfg, i) + k[len(src):]] = w[k]
    if cfg.get("tie_word_embeddings", True):
        w["lm_head.weight"] = w["model.embed_tokens.weight"].copy()
    return w


# ---------------------------------------------------------------------------------------------------
# Zamba (v1): ZambaForCausalLM (transformers 5.24 models/zamba: ZambaConfig, ZambaModel, ZambaHybridLayer,
# ZambaAttentionDecoderLayer, ZambaAttention, ZambaMLP, ZambaMambaDecoderLayer, ZambaMambaMixer). The same stack
# as Zamba2's above with one shared block and no adapters:
#
#   layer i of kind `hybrid`:  c = cat(h, e); x = input_layernorm(c) (over 2D)
#       a  = o_proj(attention(q_proj x, k_proj x, v_proj x))   (GQA, head_dim attention_head_dim (2D/H by
#                                                               default), score scale (head_dim / 2)^-1/2, no
#                                                               positional embedding at all; o_proj into D)
#       m  = down(act(gate_proj x2) * up_proj x2),  x2 = pre_ff_layernorm(a)
#       T  = linear_i(m);  h = h + mamba_i(norm_i(h + T))
#   layer i of kind `mamba` / `linear_attention`:  h = h + mamba_i(norm_i(h))
#   logits = lm_head(final_layernorm(h))   (tied by default)
#
# The Mamba1 mixer of n_mamba_heads heads: the heads split the intermediate channels, each with its own x_proj
# (x_proj_weight [H, R + 2N, P]) and dt_proj (dt_proj_weight [H, P, R], dt_proj_bias [H, P]), A_log [H, P, N],
# D [H, P]; in_proj's rows interleave the two halves (row 2c the conv input of channel c, row 2c + 1 its gate:
# projected.view(B, -1, 2, L).chunk(2, dim=2)). With one head it is the Mamba1 mixer (mixers.mamba1_forward) on
# those rows reordered, the per-head tensors their [1, ...] views: only n_mamba_heads = 1 is computed here and
# in the engine (with more heads B, C and dt differ per head, which the Mamba1 family cannot express).
# ---------------------------------------------------------------------------------------------------

DEFAULTS_V1 = dict(
    vocab_size=32000, tie_word_embeddings=True, attention_hidden_size=None, intermediate_size=14848,
    num_attention_heads=16, attention_head_dim=None, num_key_value_heads=16, n_mamba_heads=2, hidden_act="gelu",
    hidden_mamba_act="silu", rms_norm_eps=1e-5, max_position_embeddings=4096, attn_layer_period=6,
    attn_layer_offset=4, mamba_d_state=16, mamba_d_conv=4, mamba_expand=2, mamba_dt_rank="auto",
    time_step_min=0.001, time_step_max=0.1, time_step_floor=1e-4, mamba_conv_bias=True, mamba_proj_bias=False,
    layers_block_type=None)


def v1_layer_types(cfg):
    """ZambaConfig.__post_init__: layers_block_type, or its default from attn_layer_period / attn_layer_offset
    (two Mamba layers, a hybrid one, then hybrid where i % period == offset over the remaining layers)."""
    if cfg.get("layers_block_type"):
        return [LAYER_KINDS[t] for t in cfg["layers_block_type"]]
    n, per, off = cfg["num_hidden_layers"], cfg["attn_layer_period"], cfg["attn_layer_offset"]
    return ["linear_attention", "linear_attention", "hybrid"] + [
        "hybrid" if i % per == off else "linear_attention" for i in range(n - 3)]


def v1_derived(cfg):
    """(D, F, Hq, Hkv, head_dim, I, R) of ZambaConfig.__post_init__."""
    D = cfg["hidden_size"]
    Hq = cfg["num_attention_heads"]
    Hkv = cfg.get("num_key_value_heads") or Hq
    hd = cfg.get("attention_head_dim") or 2 * D // Hq
    R = cfg["mamba_dt_rank"]
    R = math.ceil(D / 16) if R in (None, "auto") else int(R)
    return D, cfg["intermediate_size"], Hq, Hkv, hd, cfg["mamba_expand"] * D, R


def v1_mamba_config(cfg):
    D, _, _, _, _, I, R = v1_derived(cfg)
    assert cfg["n_mamba_heads"] == 1, "n_mamba_heads: only one Mamba head is computed"
    return mixers.mamba1_config(dict(hidden_size=D, intermediate_size=I, state_size=cfg["mamba_d_state"],
                                     conv_kernel=cfg["mamba_d_conv"], time_step_rank=R,
                                     use_bias=int(cfg["mamba_proj_bias"]), use_conv_bias=int(cfg["mamba_conv_bias"])))


def v1_attention_config(cfg):
    D, _, Hq, Hkv, hd, _, _ = v1_derived(cfg)
    return dict(hidden_size=D, num_attention_heads=Hq, num_key_value_heads=Hkv, head_dim=hd,
                cache_length=cfg["max_position_embeddings"], partial_rotary_factor=1.0, rope_theta=10000.0,
                rms_norm_eps=cfg["rms_norm_eps"], qk_norm="none", attn_output_gate=0, attention_bias=0,
                no_rope=1, softmax_scale=(hd / 2) ** -0.5)


# the Mamba1 family's names and the ZambaMambaMixer's for one head (its [1, ...] tensors)
V1_MAMBA_NAMES = {"x_proj.weight": "x_proj_weight", "dt_proj.weight": "dt_proj_weight",
                  "dt_proj.bias": "dt_proj_bias", "A_log": "A_log", "D": "D"}


def v1_to_upstream(family_w):
    """A one-head Mamba1 mixer's family-named weights as ZambaMambaMixer stores them: in_proj's rows interleaved
    (x_c at 2c, z_c at 2c + 1), the per-head tensors with their head axis."""
    out = {}
    for k, v in family_w.items():
        if k in ("in_proj.weight", "in_proj.bias"):
            I = v.shape[0] // 2
            inter = np.empty_like(v)
            inter[0::2], inter[1::2] = v[:I], v[I:]
            out[k] = inter
        elif k in V1_MAMBA_NAMES:
            out[V1_MAMBA_NAMES[k]] = v[None]
        else:
            out[k] = v
    return out


def v1_from_upstream(w):
    """v1_to_upstream's inverse: ZambaMambaMixer's one-head weights under the Mamba1 family's names."""
    back = {u: f for f, u in V1_MAMBA_NAMES.items()}
    out = {}
    for k, v in w.items():
        if k in ("in_proj.weight", "in_proj.bias"):
            out[k] = np.concatenate([v[0::2], v[1::2]], axis=0)
        elif k in back:
            if v.shape[0] != 1:
                raise ValueError(f"{k}: {v.shape[0]} Mamba heads (n_mamba_heads): only one is computed")
            out[back[k]] = v[0]
        else:
            out[k] = v
    return out


def v1_init_weights(cfg, rng):
    """Checkpoint-named weights of a Zamba (bf16-exact values): the embedding; the shared block (drawn at the
    first hybrid layer, stored under every hybrid layer: state_dict() lists each tied copy); per layer its norm
    and Mamba1 mixer, per hybrid layer its linear; the final norm; lm_head."""
    D, F, Hq, Hkv, hd, _, _ = v1_derived(cfg)
    V = cfg["vocab_size"]
    w = {"model.embed_tokens.weight": mixers.quantize(rng.standard_normal((V, D)), scale=1.0)}
    ks = v1_layer_types(cfg)
    hyb = [i for i, t in enumerate(ks) if t == "hybrid"]
    blk = {}
    if hyb:
        blk = {"input_layernorm.weight": mixers.quantize(1.0 + 0.1 * rng.standard_normal(2 * D)),
               "pre_ff_layernorm.weight": mixers.quantize(1.0 + 0.1 * rng.standard_normal(D))}
        for name, rows in (("q_proj", Hq * hd), ("k_proj", Hkv * hd), ("v_proj", Hkv * hd)):
            blk[f"self_attn.{name}.weight"] = mixers.uniform_init(rng, (rows, 2 * D), 2 * D)
        blk["self_attn.o_proj.weight"] = mixers.uniform_init(rng, (D, Hq * hd), Hq * hd)
        blk["feed_forward.gate_proj.weight"] = mixers.uniform_init(rng, (F, D), D)
        blk["feed_forward.up_proj.weight"] = mixers.uniform_init(rng, (F, D), D)
        blk["feed_forward.down_proj.weight"] = mixers.uniform_init(rng, (D, F), F)
    mcfg = v1_mamba_config(cfg)
    for i, kind in enumerate(ks):
        pre = f"model.layers.{i}.mamba_decoder." if kind == "hybrid" else f"model.layers.{i}."
        w[pre + "input_layernorm.weight"] = mixers.quantize(1.0 + 0.1 * rng.standard_normal(D))
        for k, v in v1_to_upstream(mixers.mamba1_init(mcfg, rng, mixers.GRID_BITS)).items():
            w[pre + "mamba." + k] = v
        if kind == "hybrid":
            w[f"model.layers.{i}.linear.weight"] = mixers.uniform_init(rng, (D, D), D)
    for i in hyb:
        for k, v in blk.items():
            w[shared_prefix(cfg, i) + k] = v
    w["model.final_layernorm.weight"] = mixers.quantize(1.0 + 0.1 * rng.standard_normal(D))
    head = mixers.quantize(rng.standard_normal((V, D)), scale=1.0)
    w["lm_head.weight"] = w["model.embed_tokens.weight"].copy() if cfg["tie_word_embeddings"] else head
    return w


class ZambaStack(Zamba2Stack):
    """A float64 Zamba (v1): Zamba2Stack's forward and entries with one shared block, no adapters, the MLP's
    separate gate and up projections, and the one-head Mamba1 mixer."""

    def __init__(self, cfg, weights):
        self.cfg = cfg
        self.w = {k: v.astype(np.float64) for k, v in weights.items()}
        self.kinds = v1_layer_types(cfg)
        self.hyb = [i for i, t in enumerate(self.kinds) if t == "hybrid"]
        self.mcfg = v1_mamba_config(cfg)
        self.acfg = v1_attention_config(cfg)
        self.eps = cfg["rms_norm_eps"]
        self.act = ACTS[cfg["hidden_act"]]
        self.entries = entries_of(self.kinds, self.hyb)
        self.n = len(self.entries)

    def mamba_weights(self, i):
        p = (f"model.layers.{i}.mamba_decoder.mamba." if self.kinds[i] == "hybrid" else f"model.layers.{i}.mamba.")
        return v1_from_upstream({k[len(p):]: v for k, v in self.w.items() if k.startswith(p)})

    def mamba_forward(self, i, x, mask, win, st):
        return mixers.mamba1_forward(self.mcfg, self.mamba_weights(i), x, mask, win, st)

    def attention_weights(self, i, j):
        p = shared_prefix(self.cfg, i) + "self_attn."
        return {f"{n}_proj.weight": self.w[p + f"{n}_proj.weight"] for n in ("q", "k", "v", "o")}

    def shared_mlp(self, i, j, a):
        p = shared_prefix(self.cfg, i)
        x2 = rmsnorm(a, self.w[p + "pre_ff_layernorm.weight"], self.eps)
        ff = p + "feed_forward."
        m = (self.act(x2 @ self.w[ff + "gate_proj.weight"].T) * (x2 @ self.w[ff + "up_proj.weight"].T)) @ \
            self.w[ff + "down_proj.weight"].T
        return m @ self.w[f"model.layers.{i}.linear.weight"].T


def v1_fill_tied(cfg, w):
    """ZambaModel._tied_weights_keys: the shared block stored once, under the first hybrid layer (with
    tie_word_embeddings, as Zamba2's: fill_tied); a tied lm_head the embedding."""
    c = dict(cfg, layers_block_type=v1_layer_types(cfg))
    return fill_tied(c, w)


def v1_retie(cfg, w):
    c = dict(cfg, layers_block_type=v1_layer_types(cfg))
    return retie(c, w)
