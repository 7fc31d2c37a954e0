"""Inkling's text model (transformers `InklingForCausalLM`, model_type inkling_text, 5.24) in float64, from its
definition (docs/models.md "Inkling").

The stack: e = embed_tokens(ids); h = embed_norm(e) (InklingNormedEmbedding: an RMSNorm of the looked-up row, eps
rms_norm_eps). Per layer i, every one an attention layer of kind layer_types[i] ("hybrid": full causal attention
with num_attention_heads / num_key_value_heads / head_dim and rel_extent; "hybrid_sliding": the swa_* heads and
head dim, a window of sliding_window_size positions, whose relative extent is the window), InklingDecoderLayer:
    x = input_layernorm(h);            h = h + sconv_a(attn(x))
    x = post_attention_layernorm(h);   h = h + sconv_m(ffn(x))
then logits = lm_head(norm(h) / logits_mup_width_multiplier). Every
RMSNorm is w · x · rsqrt(mean x² + rms_norm_eps).

A short convolution sconv (InklingShortConvolution) of C channels and kernel K = conv_kernel_size is a depthwise
causal conv without bias or activation plus its input: sconv(u)_t = u_t + Σ_j w[c, j] · u_{t-K+1+j}, over the row's
real tokens only (a padding token never enters the window: upstream zeroes it, which is the same for left padding).

attn(x) (InklingAttention), per row and real token at position n (the number of real tokens before it, cached ones
included):
    q = q_proj x,  k = sconv_k(k_proj x),  v = sconv_v(v_proj x),  r = r_proj x  (H heads of d_rel)
    q_h ← q_norm(q_h), k_j ← k_norm(k_j)            per-head RMSNorms, no rotary embedding
    score(h, s) = q_h · k_{j(h)}[s] / hd + b_h(n, s),   b_h(n, s) = (r_h · proj)[n - s] when n - s < extent, else 0
over the cached positions s ≤ n (sliding: n - s < sliding_window_size), softmax, · v, o_proj. proj is
rel_logits_proj.proj [d_rel][extent].
ffn(x): "dense" (mlp_layer_types) InklingMLP: down(silu(gate x) · up x) · global_scale; "sparse" InklingMoE: router
logits z = gate.weight x over the E routed then the S shared experts (E + S rows), σ = sigmoid(z); the k =
num_experts_per_tok routed experts of the largest σ_e + e_score_correction_bias_e; the weights of the k chosen and of
the S shared σ divided by the sum of those k + S σ (upstream: a softmax of their log-sigmoids — the shared experts a
sink), times route_scale · gate.global_scale; the output Σ_k w_k · down_e(silu(gate_e x) · up_e x) (gate_e, up_e the
halves of experts.gate_up_proj[e], gate rows first) plus Σ_s γ_s · down_s(silu(gate_s x) · up_s x) of the shared
experts (shared_experts.gate_proj / up_proj / down_proj [S][...]).

The cache of layer i (golden/README.md "Model goldens"): the count n, the keys (after k_norm) and values of the
cached positions, and the four conv windows [C][K] (the last K conv inputs, oldest first): k_sconv's and
v_sconv's (C = Hkv·hd), attn_sconv's and mlp_sconv's (C = D). In a golden: conv_state [B][1 + 2·Hkv·hd + 2·D][K]
(row 0 holds n in column 0, then the four windows in that order), recurrent_state [B][2·Hkv][Lmax][hd] (keys, then
values; slots ≥ n are 0), Lmax = max_position_embeddings.

Refused (a ValueError naming the key): log_scaling_n_floor set (upstream scales by the position counted with the
left padding's slots, mixcheck's position counts real tokens; not computed here), shared_expert_sink false (5.24
never reads it: the sink is always on), unpadded_vocab_size below vocab_size (the head's columns beyond it dropped:
not computed), hidden_act other than silu. tie_word_embeddings is inert (InklingForCausalLM ties nothing).
"""

import numpy as np

import mixers

DEFAULTS = dict(   # InklingTextConfig's defaults (transformers 5.24) of the keys this oracle reads
    vocab_size=201024, unpadded_vocab_size=None, hidden_size=6144, num_hidden_layers=66, num_attention_heads=64,
    num_key_value_heads=8, head_dim=128, swa_num_attention_heads=64, swa_num_key_value_heads=16, swa_head_dim=128,
    sliding_window_size=512, d_rel=16, rel_extent=1024, log_scaling_n_floor=None, log_scaling_alpha=0.1,
    local_layer_ids=None, layer_types=None, max_position_embeddings=131072, rms_norm_eps=1e-6, conv_kernel_size=4,
    mlp_layer_types=None, intermediate_size=24576, hidden_act="silu", moe_intermediate_size=3072,
    n_routed_experts=256, num_experts_per_tok=6, n_shared_experts=2, shared_expert_sink=True, route_scale=8.0,
    logits_mup_width_multiplier=24.0, rms_norm_eps_moe_gate=1e-6, tie_word_embeddings=False)
ALIASES = {   # InklingTextConfig.attribute_map: the name a checkpoint may use -> the field
    "embedding_multiplier": "logits_mup_width_multiplier", "sliding_window": "sliding_window_size",
    "num_local_experts": "n_routed_experts", "sconv_kernel_size": "conv_kernel_size",
    "model_max_length": "max_position_embeddings"}


def normalise(cfg):
    """InklingTextConfig.__post_init__ resolved: the aliases, layer_types from local_layer_ids (or every i with
    (i + 1) % 6 != 0 sliding), mlp_layer_types from dense_mlp_idx (or every layer sparse), dense_intermediate_size;
    the refusals of the module docstring."""
    cfg = dict(cfg)
    for alias, field in ALIASES.items():
        if alias in cfg:
            v = cfg.pop(alias)
            if field in cfg and cfg[field] != v:
                raise ValueError(f"'{alias}' ({v}) and '{field}' ({cfg[field]}) disagree: {alias} is {field}")
            cfg[field] = v
    for k, v in DEFAULTS.items():
        cfg.setdefault(k, v)
    n = cfg["num_hidden_layers"]
    if cfg["layer_types"] is None:
        local = set(cfg["local_layer_ids"]) if cfg["local_layer_ids"] is not None else {
            i for i in range(n) if (i + 1) % 6}
        cfg["layer_types"] = ["hybrid_sliding" if i in local else "hybrid" for i in range(n)]
    if len(cfg["layer_types"]) != n or any(t not in ("hybrid", "hybrid_sliding") for t in cfg["layer_types"]):
        raise ValueError(f"'layer_types': {n} entries of 'hybrid' / 'hybrid_sliding', got {cfg['layer_types']}")
    if cfg["mlp_layer_types"] is None:
        dense = cfg.pop("dense_mlp_idx", 0) or 0
        cfg["mlp_layer_types"] = ["dense" if i < dense else "sparse" for i in range(n)]
    cfg.pop("dense_mlp_idx", None)
    if len(cfg["mlp_layer_types"]) != n or any(t not in ("dense", "sparse") for t in cfg["mlp_layer_types"]):
        raise ValueError(f"'mlp_layer_types': {n} entries of 'dense' / 'sparse', got {cfg['mlp_layer_types']}")
    if cfg.get("dense_intermediate_size") is not None:   # the experts' width was intermediate_size (#49416)
        cfg["moe_intermediate_size"] = cfg["intermediate_size"]
        cfg["intermediate_size"] = cfg.pop("dense_intermediate_size")
    cfg.pop("dense_intermediate_size", None)
    if cfg["log_scaling_n_floor"] is not None:
        raise ValueError("'log_scaling_n_floor': the logarithmic query scaling is not computed (upstream scales by "
                         "the position counted over the left padding's slots, mixcheck counts real tokens)")
    if cfg["shared_expert_sink"] is not True:
        raise ValueError("'shared_expert_sink' false: InklingForCausalLM 5.24 never reads it (the shared experts are "
                         "always scored in the router's softmax)")
    if cfg["hidden_act"] != "silu":
        raise ValueError(f"'hidden_act' {cfg['hidden_act']!r}: Inkling's oracle computes silu only")
    if cfg["conv_kernel_size"] < 1:
        raise ValueError("'conv_kernel_size' must be >= 1")
    u = cfg["unpadded_vocab_size"]
    if u is not None and u < cfg["vocab_size"]:
        raise ValueError(f"'unpadded_vocab_size' {u} below vocab_size {cfg['vocab_size']}: the head's columns beyond "
                         "it dropped is not computed")
    cfg["tie_word_embeddings"] = False   # inert: InklingForCausalLM._tied_weights_keys is empty, nothing is tied
    return cfg


def sliding(cfg, i):
    return cfg["layer_types"][i] == "hybrid_sliding"


def attn_dims(cfg, i):
    """(Hq, Hkv, hd, window or None, extent) of layer i."""
    if sliding(cfg, i):
        W = cfg["sliding_window_size"]
        return cfg["swa_num_attention_heads"], cfg["swa_num_key_value_heads"], cfg["swa_head_dim"], W, W
    return cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"], None, cfg["rel_extent"]


def init_weights(cfg, rng):
    """InklingForCausalLM.state_dict() keys drawn in a fixed order: the embedding and its norm; per layer its input
    norm, q / k / v / r / o projections, the k and v convs, the q and k norms, the relative-logits profiles, attn_sconv,
    its post-attention norm, the feed-forward (dense: gate, up, down, global_scale; sparse: the router with its
    global_scale and correction bias, the routed experts, the shared experts), mlp_sconv; the final norm; lm_head.
    Values on the bf16-exact grid (mixers.py "Quantization")."""
    D, V, K = cfg["hidden_size"], cfg["vocab_size"], cfg["conv_kernel_size"]
    dr = cfg["d_rel"]
    w = {"model.embed_tokens.weight": mixers.quantize(rng.standard_normal((V, D)), scale=1.0),
         "model.embed_tokens.embed_norm.weight": mixers.quantize(1.0 + 0.1 * rng.standard_normal(D))}

    def norm(n):
        return mixers.quantize(1.0 + 0.1 * rng.standard_normal(n))

    def conv(c):   # [C][1][K]: a kernel of the scale of the identity it is added to
        return mixers.uniform_init(rng, (c, 1, K), K)

    for i in range(cfg["num_hidden_layers"]):
        lay, at = f"model.layers.{i}.", f"model.layers.{i}.self_attn."
        Hq, Hkv, hd, _, E = attn_dims(cfg, i)
        w[lay + "input_layernorm.weight"] = norm(D)
        w[at + "q_proj.weight"] = mixers.uniform_init(rng, (Hq * hd, D), D)
        w[at + "k_proj.weight"] = mixers.uniform_init(rng, (Hkv * hd, D), D)
        w[at + "v_proj.weight"] = mixers.uniform_init(rng, (Hkv * hd, D), D)
        w[at + "r_proj.weight"] = mixers.uniform_init(rng, (Hq * dr, D), D)
        w[at + "o_proj.weight"] = mixers.uniform_init(rng, (D, Hq * hd), Hq * hd)
        w[at + "k_sconv.conv1d.weight"] = conv(Hkv * hd)
        w[at + "v_sconv.conv1d.weight"] = conv(Hkv * hd)
        w[at + "q_norm.weight"] = norm(hd)
        w[at + "k_norm.weight"] = norm(hd)
        # the profiles: of the order of the scores (q·k / hd with unit-RMS q and k is O(1 / sqrt(hd)))
        w[at + "rel_logits_proj.proj"] = mixers.quantize(0.5 * rng.standard_normal((dr, E)), scale=2.0)
        w[lay + "attn_sconv.conv1d.weight"] = conv(D)
        w[lay + "post_attention_layernorm.weight"] = norm(D)
        if cfg["mlp_layer_types"][i] == "dense":
            F = cfg["intermediate_size"]
            w[lay + "mlp.gate_proj.weight"] = mixers.uniform_init(rng, (F, D), D)
            w[lay + "mlp.up_proj.weight"] = mixers.uniform_init(rng, (F, D), D)
            w[lay + "mlp.down_proj.weight"] = mixers.uniform_init(rng, (D, F), F)
            w[lay + "mlp.global_scale"] = mixers.quantize(1.0 + 0.25 * rng.standard_normal(1))
        else:
            E_, S, Fe = cfg["n_routed_experts"], cfg["n_shared_experts"], cfg["moe_intermediate_size"]
            w[lay + "mlp.gate.weight"] = mixers.uniform_init(rng, (E_ + S, D), D)
            w[lay + "mlp.gate.global_scale"] = mixers.quantize(1.0 + 0.25 * rng.standard_normal(1))
            w[lay + "mlp.gate.e_score_correction_bias"] = mixers.quantize(0.05 * rng.standard_normal(E_), scale=0.25)
            w[lay + "mlp.experts.gate_up_proj"] = mixers.uniform_init(rng, (E_, 2 * Fe, D), D)
            w[lay + "mlp.experts.down_proj"] = mixers.uniform_init(rng, (E_, D, Fe), Fe)
            w[lay + "mlp.shared_experts.gate_proj"] = mixers.uniform_init(rng, (S, Fe, D), D)
            w[lay + "mlp.shared_experts.up_proj"] = mixers.uniform_init(rng, (S, Fe, D), D)
            w[lay + "mlp.shared_experts.down_proj"] = mixers.uniform_init(rng, (S, D, Fe), Fe)
        w[lay + "mlp_sconv.conv1d.weight"] = conv(D)
    w["model.norm.weight"] = norm(D)
    w["lm_head.weight"] = mixers.quantize(rng.standard_normal((V, D)), scale=1.0)
    return w


def rmsnorm(x, w, eps):
    """InklingRMSNorm: w · x · rsqrt(mean x² + eps)."""
    return w * (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps))


def sconv(conv_w, u, live, window):
    """InklingShortConvolution over a segment u [B, L, C] from window [B, C, K] (the last K inputs): out_t = u_t +
    Σ_j w[:, j] · window_t[:, j]; a padding token neither enters the window nor is computed (its output is u_t).
    Returns (out [B, L, C], windows [L + 1, B, C, K])."""
    wk = conv_w[:, 0, :]
    out = u.copy()
    windows = [window.copy()]
    for t in range(u.shape[1]):
        window = mixers.roll_window(window, u[:, t], live[:, t])
        out[:, t] = np.where(live[:, t, None], u[:, t] + np.sum(wk * window, axis=2), u[:, t])
        windows.append(window.copy())
    return out, np.stack(windows)


def moe(cfg, w, lay, x):
    """InklingMoE on x [..., D] (the module docstring)."""
    E, S, k = cfg["n_routed_experts"], cfg["n_shared_experts"], cfg["num_experts_per_tok"]
    router = w[lay + "mlp.gate.weight"]
    bias = w[lay + "mlp.gate.e_score_correction_bias"]
    scale = cfg["route_scale"] * float(w[lay + "mlp.gate.global_scale"][0])
    gate_up, down = w[lay + "mlp.experts.gate_up_proj"], w[lay + "mlp.experts.down_proj"]
    sg, su, sd = (w[lay + "mlp.shared_experts." + n] for n in ("gate_proj", "up_proj", "down_proj"))
    flat = x.reshape(-1, x.shape[-1])
    out = np.zeros_like(flat)
    for t, xt in enumerate(flat):
        z = router @ xt
        sig = 1.0 / (1.0 + np.exp(-z))
        choice = sig[:E] + bias
        top = sorted(range(E), key=lambda e: (-choice[e], e))[:k]
        assert len(set(choice[top[-1:]]) & set(np.delete(choice, top))) == 0, "a router tie at the k-th expert"
        picked = np.concatenate([sig[top], sig[E:]])
        wt = picked / picked.sum() * scale
        for wgt, e in zip(wt[:k], top):
            gate, up = np.split(gate_up[e], 2, axis=0)
            out[t] += wgt * (down[e] @ (mixers.silu(gate @ xt) * (up @ xt)))
        for s in range(S):
            out[t] += wt[k + s] * (sd[s] @ (mixers.silu(sg[s] @ xt) * (su[s] @ xt)))
    return out.reshape(x.shape)


def dense(w, lay, x):
    """InklingMLP: down(silu(gate x) · up x) · global_scale."""
    g, u, d = (w[lay + f"mlp.{n}.weight"] for n in ("gate_proj", "up_proj", "down_proj"))
    return ((mixers.silu(x @ g.T) * (x @ u.T)) @ d.T) * float(w[lay + "mlp.global_scale"][0])


def zero_cache(cfg, i, B):
    D, K, Lmax = cfg["hidden_size"], cfg["conv_kernel_size"], cfg["max_position_embeddings"]
    _, Hkv, hd, _, _ = attn_dims(cfg, i)
    return dict(n=np.zeros(B, np.int64), kv=np.zeros((B, 2 * Hkv, Lmax, hd)),
                kw=np.zeros((B, Hkv * hd, K)), vw=np.zeros((B, Hkv * hd, K)),
                aw=np.zeros((B, D, K)), mw=np.zeros((B, D, K)))


def attention(cfg, w, i, x, live, cache):
    """InklingAttention of layer i on x [B, L, D] from cache (updated in place: n, kv, kw, vw). Returns (o_proj
    output [B, L, D] (0 at padding), per-position counts [L + 1, B], kv [L + 1, ...], k and v windows [L + 1, ...])."""
    at = f"model.layers.{i}.self_attn."
    Hq, Hkv, hd, W, extent = attn_dims(cfg, i)
    B, L, _ = x.shape
    dr, eps = cfg["d_rel"], cfg["rms_norm_eps"]
    q = (x @ w[at + "q_proj.weight"].T).reshape(B, L, Hq, hd)
    k, kws = sconv(w[at + "k_sconv.conv1d.weight"], x @ w[at + "k_proj.weight"].T, live, cache["kw"])
    v, vws = sconv(w[at + "v_sconv.conv1d.weight"], x @ w[at + "v_proj.weight"].T, live, cache["vw"])
    k, v = k.reshape(B, L, Hkv, hd), v.reshape(B, L, Hkv, hd)
    r = (x @ w[at + "r_proj.weight"].T).reshape(B, L, Hq, dr)
    prof = w[at + "rel_logits_proj.proj"]   # [d_rel][extent]
    q = rmsnorm(q, w[at + "q_norm.weight"], eps)
    k = rmsnorm(k, w[at + "k_norm.weight"], eps)
    n, kv = cache["n"].copy(), cache["kv"].copy()
    att = np.zeros((B, L, Hq * hd))
    ns, kvs = [n.copy()], [kv.copy()]
    grp = Hq // Hkv
    for t in range(L):
        for b in range(B):
            if not live[b, t]:
                continue
            p = int(n[b])
            assert p < kv.shape[2], "max_position_embeddings too small for the golden"
            kv[b, :Hkv, p] = k[b, t]
            kv[b, Hkv:, p] = v[b, t]
            lo = 0 if W is None else max(0, p - W + 1)
            dist = p - np.arange(lo, p + 1)
            for h in range(Hq):
                j = h // grp
                s = kv[b, j, lo:p + 1] @ q[b, t, h] / hd
                rel = r[b, t, h] @ prof
                s = s + np.where(dist < extent, rel[np.minimum(dist, extent - 1)], 0.0)
                e = np.exp(s - s.max())
                att[b, t, h * hd:(h + 1) * hd] = (e / e.sum()) @ kv[b, Hkv + j, lo:p + 1]
            n[b] = p + 1
        ns.append(n.copy())
        kvs.append(kv.copy())
    cache["n"], cache["kv"], cache["kw"], cache["vw"] = n, kv, kws[-1], vws[-1]
    y = np.where(live[:, :, None], att @ w[at + "o_proj.weight"].T, 0.0)
    return y, np.stack(ns), np.stack(kvs), kws, vws


def mixer_config(cfg, i, cache_length):
    """The attention family's configuration of layer i (docs/semantics.md §12.9), its cache of cache_length."""
    Hq, Hkv, hd, W, E = attn_dims(cfg, i)
    return dict(hidden_size=cfg["hidden_size"], num_attention_heads=Hq, num_key_value_heads=Hkv, head_dim=hd,
                cache_length=cache_length, partial_rotary_factor=1.0, rope_theta=10000.0,
                rms_norm_eps=cfg["rms_norm_eps"], qk_norm="rms", attn_output_gate=0, attention_bias=0, no_rope=1,
                softmax_scale=1.0 / hd, sconv_kernel=cfg["conv_kernel_size"], rel_dim=cfg["d_rel"], rel_extent=E,
                sliding_window=W or 0)


def mixer_weights(w, i):
    """Layer i's mixer under the family's names: self_attn.* and the layer's attn_sconv as out_sconv."""
    pre = f"model.layers.{i}.self_attn."
    fw = {k[len(pre):]: v for k, v in w.items() if k.startswith(pre)}
    fw["out_sconv.conv1d.weight"] = w[f"model.layers.{i}.attn_sconv.conv1d.weight"]
    return fw


def mixer_forward(cfg, w, i, x, mask):
    """Layer i's mixer (the attention with its out conv) alone on x [B, L, D] from zeros, as a layer golden holds
    it: (output [B, L, D], conv_state [L + 1, B, 1 + 2·Hkv·hd + D, K], recurrent_state [L + 1, B, 2·Hkv, Lmax, hd]),
    weights under checkpoint names (w), the KV cache of cfg's max_position_embeddings."""
    B, L, _ = x.shape
    live = np.ones((B, L), bool) if mask is None else mask.astype(bool)
    c = zero_cache(cfg, i, B)
    y, ns, kvs, kws, vws = attention(cfg, w, i, x, live, c)
    out, aws = sconv(w[f"model.layers.{i}.attn_sconv.conv1d.weight"], y, live, c["aw"])
    count = np.zeros((L + 1, B, 1, cfg["conv_kernel_size"]))
    count[:, :, 0, 0] = ns
    return out, np.concatenate([count, kws, vws, aws], axis=2), kvs


class InklingStack:
    """The float64 InklingForCausalLM: forward over one segment of token ids from per-layer caches (the interface of
    stacks.Stack)."""

    def __init__(self, cfg, weights):
        self.cfg = normalise(cfg)
        self.w = {k: np.asarray(v, dtype=np.float64) for k, v in weights.items()}
        self.n = self.cfg["num_hidden_layers"]
        self.eps = self.cfg["rms_norm_eps"]

    def embed(self, ids):
        return rmsnorm(self.w["model.embed_tokens.weight"][ids], self.w["model.embed_tokens.embed_norm.weight"],
                       self.eps)

    def forward(self, ids, mask, caches=None):
        """As stacks.Stack.forward: (logits, hidden [n + 1], new caches, per-position caches (conv_state,
        recurrent_state) in the golden layout, mixer outputs (attn_sconv's output, the residual's addend))."""
        cfg, w = self.cfg, self.w
        B, L = ids.shape
        live = np.ones((B, L), bool) if mask is None else mask.astype(bool)
        h = self.embed(ids)
        hidden, mixed, new_caches, per_pos = [h], [], [], []
        for i in range(self.n):
            lay = f"model.layers.{i}."
            c = {k: v.copy() for k, v in (caches[i] if caches is not None else zero_cache(cfg, i, B)).items()}
            x = rmsnorm(h, w[lay + "input_layernorm.weight"], self.eps)
            y, ns, kvs, kws, vws = attention(cfg, w, i, x, live, c)
            out, aws = sconv(w[lay + "attn_sconv.conv1d.weight"], y, live, c["aw"])
            h = h + out
            x = rmsnorm(h, w[lay + "post_attention_layernorm.weight"], self.eps)
            f = dense(w, lay, x) if cfg["mlp_layer_types"][i] == "dense" else moe(cfg, w, lay, x)
            f, mws = sconv(w[lay + "mlp_sconv.conv1d.weight"], f, live, c["mw"])
            h = h + f
            c["aw"], c["mw"] = aws[-1], mws[-1]
            hidden.append(h)
            mixed.append(out)
            new_caches.append(c)
            K = cfg["conv_kernel_size"]
            count = np.zeros((L + 1, B, 1, K))
            count[:, :, 0, 0] = ns
            per_pos.append((np.concatenate([count, kws, vws, aws, mws], axis=2), kvs))
        logits = (rmsnorm(h, w["model.norm.weight"], self.eps) / cfg["logits_mup_width_multiplier"]) @ \
            w["lm_head.weight"].T
        return logits, np.stack(hidden), new_caches, per_pos, np.stack(mixed)

    def greedy(self, ids, mask, steps):
        """Prefill, then `steps` greedy tokens through the cache: (tokens [B, G], logits [B, G, V])."""
        import models as M
        return M.greedy(self.forward, ids, mask, steps)
