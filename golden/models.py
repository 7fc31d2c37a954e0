"""Float64 oracles of the model-level layers, imported by golden/goldens.py and golden/stacks.py (never run on
its own).

attention: softmax attention with a KV cache (docs/semantics.md §12), the fifth mixer family: GQA, RoPE
with partial rotary (rotate_half, NeoX style) or none (`no_rope`: GraniteMoeHybrid's "nope"), per-head q/k
RMSNorm (plain as LFM2, zero-centred as Qwen3-Next / Qwen3.5), the Qwen3-Next output gate, optional q/k/v/o
biases (Bamba's attention_bias), a score scale of its own (`softmax_scale`: GraniteMoeHybrid's
attention_multiplier; 0 is 1/sqrt(hd)).
The oracle is a token-by-token loop over each row's own cache, written from the spec, never from the C
code; its self-test checks it against the whole-sequence form upstream runs (eager attention over a
causal + padding mask with position_ids derived from the mask, cos/sin tables of cat(freqs, freqs)).

The families here use the helpers of golden/mixers.py (quantize, uniform_init, finish_golden, Reporter, ...);
golden/goldens.py adds their Family (ATTENTION_FAMILY) and GoldenSpecs (attention_specs()) to its FAMILIES
and SPECS, after the four families of mixers.py. Keep each family in functions of its own.
"""

import numpy as np

import linear   # the lightning family's oracle (golden/linear.py), for mixer_forward
import mixers


# ---------------------------------------------------------------------------------------------------
# attention (docs/semantics.md §12)
# ---------------------------------------------------------------------------------------------------

ATTENTION_DEFAULTS = dict(partial_rotary_factor=1.0, rope_theta=10000.0, rms_norm_eps=1e-6, qk_norm="none",
                          attn_output_gate=0, attention_bias=0, no_rope=0, softmax_scale=0.0,
                          kv_lora_rank=0, q_lora_rank=0, qk_rope_head_dim=0, v_head_dim=0)
# the options appended after the first goldens: stored only by a golden that sets them (absent reads as 0)
ATTENTION_OPTION_ATTRS = (("no_rope", np.int64), ("softmax_scale", np.float64), ("kv_lora_rank", np.int64),
                          ("q_lora_rank", np.int64), ("qk_rope_head_dim", np.int64), ("v_head_dim", np.int64))
ATTENTION_INT_ATTRS = ("hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim", "cache_length",
                       "attn_output_gate", "attention_bias")
ATTENTION_FLOAT_ATTRS = ("partial_rotary_factor", "rope_theta", "rms_norm_eps")


def attention_config(spec):
    """Defaults, then the spec's values; cache_length defaults to the golden's length."""
    cfg = dict(ATTENTION_DEFAULTS, cache_length=spec.length)
    cfg.update(spec.config)
    return cfg


def attention_dims(cfg):
    """(D, Hq, Hkv, hd, Lmax, R) with R = int(hd * partial_rotary_factor), as upstream truncates (MLA: R is
    qk_rope_head_dim, rotated whole)."""
    hd = cfg["head_dim"]
    if cfg.get("kv_lora_rank"):
        R = 0 if cfg.get("no_rope") else cfg["qk_rope_head_dim"]
        assert cfg["num_attention_heads"] == cfg["num_key_value_heads"] and 0 < cfg["qk_rope_head_dim"] < hd
        return (cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], hd, cfg["cache_length"], R)
    R = 0 if cfg.get("no_rope") else int(hd * cfg["partial_rotary_factor"])
    assert (cfg.get("no_rope") or (R >= 2 and R % 2 == 0)) and cfg["num_attention_heads"] % cfg["num_key_value_heads"] == 0
    return (cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], hd, cfg["cache_length"], R)


def mla_init(cfg, rng, bits):
    """MLA's weights (§12.8), nn.Linear default init, the latent norms' weights around 1; draw order fixed:
    q_proj or q_a_proj (+ bias), q_a_layernorm, q_b_proj; kv_a_proj_with_mqa (+ bias), kv_a_layernorm,
    kv_b_proj; o_proj (+ bias). Biases with attention_bias where KimiLinearAttention has them."""
    D, H, _, hd, _, _ = attention_dims(cfg)
    c, dr, dv, qr, bias = (cfg["kv_lora_rank"], cfg["qk_rope_head_dim"], cfg["v_head_dim"], cfg["q_lora_rank"],
                           cfg["attention_bias"])
    w = {}

    def lin(name, rows, fan_in, with_bias):
        w[name + ".weight"] = mixers.uniform_init(rng, (rows, fan_in), fan_in, bits)
        if with_bias:
            w[name + ".bias"] = mixers.uniform_init(rng, (rows,), fan_in)

    def norm(name, n):
        w[name + ".weight"] = mixers.quantize(1.0 + rng.uniform(-0.5, 0.5, n), scale=1.0)
    if qr:
        lin("q_a_proj", qr, D, bias)
        norm("q_a_layernorm", qr)
        lin("q_b_proj", H * hd, qr, False)
    else:
        lin("q_proj", H * hd, D, False)
    lin("kv_a_proj_with_mqa", c + dr, D, bias)
    norm("kv_a_layernorm", c)
    lin("kv_b_proj", H * (hd - dr + dv), c, False)
    lin("o_proj", D, H * dv, bias)
    return w


def mla_rms(v, weight, eps):
    """The latent norms (kv_a_layernorm, q_a_layernorm): v·rsqrt(mean v² + eps)·w over the last axis."""
    return v / np.sqrt(np.mean(v * v, axis=-1, keepdims=True) + eps) * weight


def mla_project(cfg, w, u):
    """q [B, L, H, hd] (before RoPE), the normed latent [B, L, c] and the rope key [B, L, dr] (before RoPE)."""
    D, H, _, hd, _, _ = attention_dims(cfg)
    B, L, _ = u.shape
    c = cfg["kv_lora_rank"]

    def lin(name, x):
        y = x @ w[name + ".weight"].T
        return y + w[name + ".bias"] if name + ".bias" in w else y
    if cfg["q_lora_rank"]:
        q = lin("q_b_proj", mla_rms(lin("q_a_proj", u), w["q_a_layernorm.weight"], cfg["rms_norm_eps"]))
    else:
        q = lin("q_proj", u)
    kva = lin("kv_a_proj_with_mqa", u)
    return q.reshape(B, L, H, hd), mla_rms(kva[..., :c], w["kv_a_layernorm.weight"], cfg["rms_norm_eps"]), kva[..., c:]


def mla_expand(cfg, w, latent):
    """kv_b_proj of latents [..., c] -> (k_nope [..., H, dn], v [..., H, dv]): per head dn key rows then dv
    value rows (KimiLinearAttention.expand_kv's view and split)."""
    _, H, _, hd, _, _ = attention_dims(cfg)
    dn = hd - cfg["qk_rope_head_dim"]
    e = (latent @ w["kv_b_proj.weight"].T).reshape(latent.shape[:-1] + (H, dn + cfg["v_head_dim"]))
    return e[..., :dn], e[..., dn:]


def mla_rotate(cfg, v, pos):
    """RoPE of a rope part v [dr] at position pos (rotate_half over all dr dims); identity with no_rope."""
    if cfg.get("no_rope"):
        return v.copy()
    return attention_rotate(dict(cfg, kv_lora_rank=0, head_dim=len(v), partial_rotary_factor=1.0), v, pos)


def mla_forward(cfg, w, u, mask=None, window=None, state=None):
    """THE ORACLE for MLA (§12.8): per row and real token, slot n of the row's cache ← [latent | RoPE(k_rope, n)],
    q_h's rope part rotated at n; per head the keys [k_nope_h(latent_s) | k_rope_s], values v_h(latent_s)
    expanded from the cached latents, softmax(q_h·k_h[s] · scale) over s ≤ n; n ← n + 1. Pads skipped.
    window [B, 1, 1] is the count, state [B, 1, Lmax, c + dr]."""
    D, H, _, hd, Lmax, _ = attention_dims(cfg)
    B, L, _ = u.shape
    c, dr, dv = cfg["kv_lora_rank"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
    dn = hd - dr
    live = np.ones((B, L), bool) if mask is None else mask.astype(bool)
    window = np.zeros((B, 1, 1)) if window is None else window.copy()
    state = np.zeros((B, 1, Lmax, c + dr)) if state is None else state.copy()
    q, latent, krope = mla_project(cfg, w, u)
    att = np.zeros((B, L, H * dv))
    windows, states = [window.copy()], [state.copy()]
    for t in range(L):
        for b in range(B):
            if not live[b, t]:
                continue
            n = int(window[b, 0, 0])
            assert n < Lmax, "cache_length too small for the golden"
            state[b, 0, n, :c] = latent[b, t]
            state[b, 0, n, c:] = mla_rotate(cfg, krope[b, t], n)
            kn, vv = mla_expand(cfg, w, state[b, 0, :n + 1, :c])       # [n+1, H, dn], [n+1, H, dv]
            kr = state[b, 0, :n + 1, c:]                               # [n+1, dr]
            for h in range(H):
                qn, qr = q[b, t, h, :dn], mla_rotate(cfg, q[b, t, h, dn:], n)
                s = (kn[:, h] @ qn + kr @ qr) * attention_scale(cfg)
                p = np.exp(s - s.max())
                att[b, t, h * dv:(h + 1) * dv] = (p / p.sum()) @ vv[:, h]
            window[b, 0, 0] = n + 1
        windows.append(window.copy())
        states.append(state.copy())
    return attention_out(cfg, w, att, live), np.stack(windows), np.stack(states)


def mla_upstream_form(cfg, w, u, mask):
    """KimiLinearAttention's whole-sequence form (no cache): the latent expanded into every position's keys
    k = cat(k_nope, k_rope broadcast over heads) and values, RoPE on the rope parts at position_ids =
    cumsum(mask) - 1 (none with no_rope), eager attention over a causal + padding mask at qk_head_dim^-1/2."""
    D, H, _, hd, _, R = attention_dims(cfg)
    B, L, _ = u.shape
    dr = cfg["qk_rope_head_dim"]
    live = np.ones((B, L), bool) if mask is None else mask.astype(bool)
    pos = np.cumsum(live, axis=1) - 1
    q, latent, krope = mla_project(cfg, w, u)
    kn, v = mla_expand(cfg, w, latent)                                      # [B, L, H, dn], [B, L, H, dv]
    if R:
        inv = 1.0 / cfg["rope_theta"] ** (np.arange(0, R, 2) / R)
        emb = np.concatenate([pos[..., None] * inv] * 2, axis=-1)           # [B, L, R]
        cos, sin = np.cos(emb), np.sin(emb)

        def rope(x, cs, sn):
            return x * cs + np.concatenate([-x[..., R // 2:], x[..., :R // 2]], axis=-1) * sn
        q = np.concatenate([q[..., :hd - dr], rope(q[..., hd - dr:], cos[:, :, None], sin[:, :, None])], axis=-1)
        krope = rope(krope, cos, sin)
    k = np.concatenate([kn, np.broadcast_to(krope[:, :, None], (B, L, H, dr))], axis=-1)
    scores = np.einsum("bthd,bshd->bhts", q, k) * attention_scale(cfg)
    allowed = np.tril(np.ones((L, L), bool))[None] & live[:, None, :]
    scores = np.where(allowed[:, None], scores, -np.inf)
    scores = scores - np.max(np.where(np.isfinite(scores), scores, -1e300), axis=-1, keepdims=True)
    p = np.where(allowed[:, None], np.exp(scores), 0.0)
    p = p / np.maximum(p.sum(-1, keepdims=True), 1e-300)
    o = np.einsum("bhts,bshd->bthd", p, v)
    return attention_out(cfg, w, o.reshape(B, L, H * cfg["v_head_dim"]), live)


def attention_init(cfg, rng, bits):
    """nn.Linear default init for the projections (biases with attention_bias); q/k norm weights around their
    neutral value (0 for zero-centred, 1 for plain RMSNorm) so the norm's weight matters. Draw order fixed."""
    if cfg.get("kv_lora_rank"):
        return mla_init(cfg, rng, bits)
    D, Hq, Hkv, hd, _, _ = attention_dims(cfg)
    qrows = Hq * hd * (2 if cfg["attn_output_gate"] else 1)
    bias = cfg["attention_bias"]
    w = {}
    for name, rows, fan_in in (("q_proj", qrows, D), ("k_proj", Hkv * hd, D), ("v_proj", Hkv * hd, D),
                               ("o_proj", D, Hq * hd)):
        w[name + ".weight"] = mixers.uniform_init(rng, (rows, fan_in), fan_in, bits)
        if bias:
            w[name + ".bias"] = mixers.uniform_init(rng, (rows,), fan_in)
    if cfg["qk_norm"] != "none":
        centre = 0.0 if cfg["qk_norm"] == "zero_centred" else 1.0
        full = cfg["qk_norm"] == "rms_full"   # one weight per channel of the whole projection
        for name, n in (("q_norm.weight", Hq * hd if full else hd), ("k_norm.weight", Hkv * hd if full else hd)):
            w[name] = mixers.quantize(centre + rng.uniform(-0.5, 0.5, n), scale=1.0)
    return w


def attention_qk_norm(cfg, w, v, name):
    """Per-head RMSNorm over the last axis (hd): v·rsqrt(mean v² + eps)·w, or ·(1 + w) when zero-centred."""
    if cfg["qk_norm"] in ("none", "rms_full"):   # rms_full: applied to the projection (attention_project)
        return v
    scale = w[name] + (1.0 if cfg["qk_norm"] == "zero_centred" else 0.0)
    return v / np.sqrt(np.mean(v * v, axis=-1, keepdims=True) + cfg["rms_norm_eps"]) * scale


def attention_rotate(cfg, v, pos):
    """RoPE of one head vector v [hd] at integer position pos: the pairs (i, i + R/2), i < R/2, rotated by
    pos·theta^(-2i/R); dims R.. pass through (every dim with no_rope, R = 0)."""
    _, _, _, hd, _, R = attention_dims(cfg)
    if R == 0:
        return v.copy()
    half = R // 2
    ang = pos * cfg["rope_theta"] ** (-np.arange(half) * 2.0 / R)
    c, s = np.cos(ang), np.sin(ang)
    out = v.copy()
    out[:half] = v[:half] * c - v[half:R] * s
    out[half:R] = v[half:R] * c + v[:half] * s
    return out


def attention_project(cfg, w, u):
    """q [B, L, Hq, hd], gate [B, L, Hq, hd] or None, k and v [B, L, Hkv, hd] (before norms and RoPE)."""
    _, Hq, Hkv, hd, _, _ = attention_dims(cfg)
    B, L, _ = u.shape

    def lin(name):
        y = u @ w[name + ".weight"].T
        return y + w[name + ".bias"] if name + ".bias" in w else y
    q = lin("q_proj")
    gate = None
    if cfg["attn_output_gate"]:
        q = q.reshape(B, L, Hq, 2 * hd)      # per head: query | gate (torch.chunk of the head's 2·hd rows)
        q, gate = q[..., :hd], q[..., hd:]
    else:
        q = q.reshape(B, L, Hq, hd)
    k = lin("k_proj")
    if cfg["qk_norm"] == "rms_full":   # OLMo-Hybrid: q_norm / k_norm over the whole projection, before the heads
        q = attention_full_norm(cfg, q.reshape(B, L, Hq * hd), w["q_norm.weight"]).reshape(B, L, Hq, hd)
        k = attention_full_norm(cfg, k, w["k_norm.weight"])
    return q, gate, k.reshape(B, L, Hkv, hd), lin("v_proj").reshape(B, L, Hkv, hd)


def attention_full_norm(cfg, v, weight):
    """qk_norm rms_full: RMSNorm over the whole projection row (Hq·hd or Hkv·hd), v·rsqrt(mean v² + eps)·w."""
    return v / np.sqrt(np.mean(v * v, axis=-1, keepdims=True) + cfg["rms_norm_eps"]) * weight


def attention_scale(cfg):
    """The score scale: softmax_scale, or 1/sqrt(hd) when it is 0."""
    return cfg.get("softmax_scale") or 1.0 / np.sqrt(cfg["head_dim"])


def attention_out(cfg, w, att, live):
    """o_proj of the attention rows [B, L, Hq·hd]; a padding row's output is o_proj.bias (zeros without it)."""
    y = att @ w["o_proj.weight"].T
    pad = w.get("o_proj.bias", np.zeros(cfg["hidden_size"]))
    return np.where(live[:, :, None], y + pad, pad)


def attention_forward(cfg, w, u, mask=None, window=None, state=None):
    """THE ORACLE for attention: per row and real token, k ← RoPE(k_norm(k), n), v into slot n of the row's
    cache, q ← RoPE(q_norm(q), n), softmax(q·K[0..n]ᵀ / sqrt(hd)) · V[0..n] per query head (kv head
    h // (Hq/Hkv)), times sigmoid(gate) when gated; n ← n + 1. Padding tokens are skipped (no position,
    never cached). window [B, 1, 1] is the count n, state [B, 2·Hkv, Lmax, hd] keys then values.
    Returns (out [B, L, D], windows [L+1, B, 1, 1], states [L+1, B, 2·Hkv, Lmax, hd]). MLA: mla_forward."""
    if cfg.get("kv_lora_rank"):
        return mla_forward(cfg, w, u, mask, window, state)
    D, Hq, Hkv, hd, Lmax, _ = attention_dims(cfg)
    B, L, _ = u.shape
    live = np.ones((B, L), bool) if mask is None else mask.astype(bool)
    window = np.zeros((B, 1, 1)) if window is None else window.copy()
    state = np.zeros((B, 2 * Hkv, Lmax, hd)) if state is None else state.copy()
    q, gate, k, v = attention_project(cfg, w, u)
    att = np.zeros((B, L, Hq * hd))
    windows, states = [window.copy()], [state.copy()]
    r = Hq // Hkv
    for t in range(L):
        for b in range(B):
            if not live[b, t]:
                continue
            n = int(window[b, 0, 0])
            assert n < Lmax, "cache_length too small for the golden"
            for j in range(Hkv):
                state[b, j, n] = attention_rotate(cfg, attention_qk_norm(cfg, w, k[b, t, j], "k_norm.weight"), n)
                state[b, Hkv + j, n] = v[b, t, j]
            for h in range(Hq):
                qh = attention_rotate(cfg, attention_qk_norm(cfg, w, q[b, t, h], "q_norm.weight"), n)
                keys, vals = state[b, h // r, :n + 1], state[b, Hkv + h // r, :n + 1]
                s = keys @ qh * attention_scale(cfg)
                p = np.exp(s - s.max())
                o = (p / p.sum()) @ vals
                if gate is not None:
                    o = o / (1.0 + np.exp(-gate[b, t, h]))
                att[b, t, h * hd:(h + 1) * hd] = o
            window[b, 0, 0] = n + 1
        windows.append(window.copy())
        states.append(state.copy())
    return attention_out(cfg, w, att, live), np.stack(windows), np.stack(states)


def attention_upstream_form(cfg, w, u, mask):
    """The whole-sequence form upstream runs (eager attention, no cache): position_ids = cumsum(mask) - 1,
    cos/sin = cat(freqs, freqs) on the first R dims and rotate_half, causal + padding additive mask,
    repeat_kv for GQA. Real tokens' outputs only (pads get the bias, as in the oracle). MLA: mla_upstream_form."""
    if cfg.get("kv_lora_rank"):
        return mla_upstream_form(cfg, w, u, mask)
    D, Hq, Hkv, hd, _, R = attention_dims(cfg)
    B, L, _ = u.shape
    live = np.ones((B, L), bool) if mask is None else mask.astype(bool)
    pos = np.cumsum(live, axis=1) - 1                                       # [B, L]
    inv = 1.0 / cfg["rope_theta"] ** (np.arange(0, R, 2) / max(R, 1))
    freqs = pos[..., None] * inv                                            # [B, L, R/2]
    emb = np.concatenate([freqs, freqs], axis=-1)
    cos, sin = np.cos(emb)[:, :, None], np.sin(emb)[:, :, None]             # [B, L, 1, R]

    def rope(x):
        xr, xp = x[..., :R], x[..., R:]
        rot = np.concatenate([-xr[..., R // 2:], xr[..., :R // 2]], axis=-1)
        return np.concatenate([xr * cos + rot * sin, xp], axis=-1)
    q, gate, k, v = attention_project(cfg, w, u)
    q = rope(attention_qk_norm(cfg, w, q, "q_norm.weight"))
    k = rope(attention_qk_norm(cfg, w, k, "k_norm.weight"))
    r = Hq // Hkv
    k, v = np.repeat(k, r, axis=2), np.repeat(v, r, axis=2)                 # repeat_kv
    scores = np.einsum("bthd,bshd->bhts", q, k) * (cfg.get("softmax_scale") or 1.0 / np.sqrt(hd))
    allowed = np.tril(np.ones((L, L), bool))[None] & live[:, None, :]       # [B, t, s]
    scores = np.where(allowed[:, None], scores, -np.inf)
    scores = scores - np.max(np.where(np.isfinite(scores), scores, -1e300), axis=-1, keepdims=True)
    p = np.where(allowed[:, None], np.exp(scores), 0.0)
    p = p / np.maximum(p.sum(-1, keepdims=True), 1e-300)
    o = np.einsum("bhts,bshd->bthd", p, v)
    if gate is not None:
        o = o / (1.0 + np.exp(-gate))
    return attention_out(cfg, w, o.reshape(B, L, Hq * hd), live)


def attention_make_golden(spec):
    cfg = attention_config(spec)
    rng = np.random.default_rng(spec.seed)
    weights = attention_init(cfg, rng, spec.proj_grid_bits)
    config = {k: np.int64(cfg[k]) for k in ATTENTION_INT_ATTRS}
    config.update({k: np.float64(cfg[k]) for k in ATTENTION_FLOAT_ATTRS})
    config["qk_norm"] = cfg["qk_norm"]
    config.update({k: t(cfg[k]) for k, t in ATTENTION_OPTION_ATTRS if cfg[k]})
    return mixers.finish_golden(spec, cfg, rng, weights, attention_forward, config)


def attention_selftest():
    report = mixers.Reporter()
    for spec in attention_specs():
        cfg = attention_config(spec)
        g = attention_make_golden(spec)
        w, u = mixers.float64_weights(g), g.tensors["inputs/hidden_states"].astype(np.float64)
        mask = g.tensors.get("inputs/attention_mask")
        live = np.ones(u.shape[:2], bool) if mask is None else mask.astype(bool)
        out, windows, states = attention_forward(cfg, w, u, mask)
        up = attention_upstream_form(cfg, w, u, mask)
        report(f"{spec.name} token loop vs upstream whole-sequence form",
               {"output": mixers.maxdiff(np.where(live[..., None], out, 0), np.where(live[..., None], up, 0))}, 1e-13)
        if mask is None:
            mixers.split_selftest(spec.name, lambda w_, u_, **kw: attention_forward(cfg, w_, u_, **kw), w, u,
                                  (1, 3, 8, 9), (out, windows, states), report)
        else:   # each row's real tokens alone: same outputs, caches frozen through padding
            d = {"output": 0.0, "pad output": 0.0, "conv_state": 0.0, "recurrent_state": 0.0}
            pad_out = w.get("o_proj.bias", np.zeros(u.shape[2]))
            for b in range(u.shape[0]):
                idx = np.flatnonzero(live[b])
                o, ws, ss = attention_forward(cfg, w, u[b:b + 1, idx])
                consumed = np.concatenate([[0], np.cumsum(live[b])])
                d["output"] = max(d["output"], mixers.maxdiff(o[0], out[b, idx]))
                d["pad output"] = max(d["pad output"], mixers.maxdiff(out[b, ~live[b]], pad_out))
                d["conv_state"] = max(d["conv_state"], mixers.maxdiff(ws[consumed, 0], windows[:, b]))
                d["recurrent_state"] = max(d["recurrent_state"], mixers.maxdiff(ss[consumed, 0], states[:, b]))
            report(f"{spec.name} padded rows vs rows alone", d, 1e-13)
    return report.ok


ATTENTION_SPEC_ARGS = [
    ("tiny", "baseline: multi-head attention, full rotary, no norms or gate: prefill/decode/chunked "
     "equivalence of the KV cache, cache layout (count, keys after RoPE, values)",
     dict(hidden_size=16, num_attention_heads=2, num_key_value_heads=2, head_dim=8),
     dict(batch=2, length=14, seed=51)),
    ("qwen3next", "Qwen3-Next / Qwen3.5 full attention: output gate per head (query | gate halves), "
     "zero-centred q/k norms (1 + w), partial rotary 0.25 (4 of 16 dims), GQA 4/2",
     dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=16, partial_rotary_factor=0.25,
          qk_norm="zero_centred", attn_output_gate=1),
     dict(batch=2, length=16, seed=52)),
    ("lfm2", "LFM2 attention: GQA 4/1 (query head -> kv head h // 4), plain RMSNorm q/k norms, full rotary, "
     "rope_theta 1e6",
     dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=1, head_dim=8, qk_norm="rms",
          rope_theta=1000000.0, rms_norm_eps=1e-5),
     dict(batch=2, length=14, seed=53)),
    ("leftpad", "left padding (pads 0, 3, 7 carrying garbage) on the Qwen3-Next layout: pads never reach the "
     "KV cache, positions count real tokens only (RoPE positions shifted by the pads are wrong)",
     dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=16, partial_rotary_factor=0.25,
          qk_norm="zero_centred", attn_output_gate=1),
     dict(batch=3, length=14, seed=54, left_pad=(0, 3, 7))),
    ("rightpad", "Bamba attention (partial rotary 0.5, q/k/v/o biases, no q/k norm, GQA 4/2) right-padded: "
     "cache and count frozen at each row's last real token",
     dict(hidden_size=24, num_attention_heads=4, num_key_value_heads=2, head_dim=8, partial_rotary_factor=0.5,
          attention_bias=1),
     dict(batch=3, length=14, seed=55, right_pad=(0, 4, 9))),
    ("nope", "GraniteMoeHybrid attention: no positional embedding (position_embedding_type \"nope\": no_rope) and "
     "the score scale attention_multiplier 0.5 instead of 1/sqrt(hd) = 0.354, GQA 4/2: keys cached unrotated, a "
     "rotation or the default scale moves every output (unpadded, for the serving scenarios; padding at the model level)",
     dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=8, no_rope=1, softmax_scale=0.5),
     dict(batch=3, length=14, seed=56)),
    ("mla", "multi-head latent attention (DeepSeek-V2 form, §12.8) in odd shapes: a query latent (q_lora_rank 6, "
     "q_a_layernorm), the key / value latent of rank 7 (kv_a_layernorm) expanded by kv_b_proj into 3 heads of nope "
     "dim 5 and value dim 3, a shared rope key of 4 dims rotated at its position, biases on q_a / kv_a / o_proj, "
     "scale (5 + 4)^-1/2: the cache holds the latent and the rotated rope key (11 per position), every serving call",
     dict(hidden_size=24, num_attention_heads=3, num_key_value_heads=3, head_dim=9, kv_lora_rank=7, q_lora_rank=6,
          qk_rope_head_dim=4, v_head_dim=3, attention_bias=1, rope_theta=500.0),
     dict(batch=3, length=14, seed=57)),
    ("mla_kimi", "Kimi-Linear's KimiLinearAttention: MLA without any positional embedding (no_rope: the rope key "
     "is shared across heads but never rotated), q_proj straight from the input, latent rank 12, 4 heads of nope "
     "dim 8 and rope dim 4, value dim 6, no biases; left padding (pads 0, 3, 7 carrying garbage) never reaches "
     "the latent cache",
     dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=4, head_dim=12, kv_lora_rank=12,
          qk_rope_head_dim=4, v_head_dim=6, no_rope=1),
     dict(batch=3, length=14, seed=58, left_pad=(0, 3, 7))),
]


def attention_specs():
    return [mixers.GoldenSpec(name, "attention", why, config, **kw) for name, why, config, kw in ATTENTION_SPEC_ARGS]


# ---------------------------------------------------------------------------------------------------
# registration (golden/goldens.py: FAMILIES["attention"], and SPECS after the mixers.py goldens)
# ---------------------------------------------------------------------------------------------------

ATTENTION_FAMILY = mixers.Family(make_golden=attention_make_golden, selftest=attention_selftest)


def greedy(forward, ids, mask, steps):
    """Greedy generation through a stack's cache: `forward(ids, mask, caches=None)` returns (logits [B, L, V], _,
    caches, _, _); the prefill of ids, then `steps` tokens, each the argmax of the last logits fed alone (no
    mask: no pads after the prefill). Returns (tokens [B, G], the logits each was taken of [B, G, V])."""
    logits, _, caches, _, _ = forward(ids, mask)
    step_logits = logits[:, -1]
    tokens, all_logits = [], []
    for g in range(steps):
        tok = np.argmax(step_logits, axis=-1)
        tokens.append(tok)
        all_logits.append(step_logits)
        if g + 1 < steps:
            out, _, caches, _, _ = forward(tok[:, None], None, caches)
            step_logits = out[:, 0]
    return np.stack(tokens, axis=1).astype(np.int64), np.stack(all_logits, axis=1)


def mixer_forward(kind, mcfg, w, u, mask, cache):
    """One segment through one mixer from cache (window, state) or zeros; returns out, (window, state)
    after the segment and the per-position caches (windows [L+1], states [L+1] or None)."""
    window, state = cache if cache is not None else (None, None)
    if kind == "mamba2":
        out, windows, states, _ = mixers.mamba2_forward(mcfg, w, u, mask, window, state)
    elif kind == "mamba":
        out, windows, states = mixers.mamba1_forward(mcfg, w, u, mask, window, state)
    elif kind == "shortconv":
        out, windows, states = mixers.shortconv_forward(mcfg, w, u, mask, window, state)
    elif kind == "gdn":
        out, windows, states = mixers.gdn_forward(mcfg, w, u, mask, window, state)
    elif kind == "lightning":
        out, windows, states = linear.lightning_forward(mcfg, w, u, mask, window, state)
    else:
        out, windows, states = attention_forward(mcfg, w, u, mask, window, state)
    return out, (windows[-1], None if states is None else states[-1]), windows, states
