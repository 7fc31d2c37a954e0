"""Float64 oracles of the two linear-attention mixer families without a softmax: MiniMax's lightning
attention (docs/semantics.md §13) and Kimi Delta Attention (KDA, docs/semantics.md §14). Imported by
golden/goldens.py (never run on its own).

lightning: linear attention S ← exp(−s_h)·S + k vᵀ, o = Sᵀ q per head, with a constant decay rate s_h per
head (the ALiBi-like slopes of HF `MiniMaxLightningAttention`, scaled by the layer's depth), SiLU on the
qkv projection, an RMSNorm over the whole H·hd output row, a sigmoid output gate from the layer input.
kda: the gated delta rule of Gated DeltaNet with a log decay per key channel g [H][d] (a low-rank
projection through softplus), short convs on q, k and v, l2-normalised q and k, and a sigmoid-gated
RMSNorm per head on the output.

Each oracle is a plain token-by-token loop written from the math, never from the C code; its self-test
checks it against the blocked / chunked forms upstream runs (HF's intra/inter block decomposition of
lightning attention with its query, key and diagonal decays; the chunked per-channel delta rule with the
UT transform), against split invariance and against each padded row run alone. The helpers come from
golden/mixers.py (quantize, uniform_init, finish_golden, Reporter, ...). Keep each family in functions of
its own.
"""

import numpy as np

import mixers


# ---------------------------------------------------------------------------------------------------
# lightning attention (docs/semantics.md §13)
# ---------------------------------------------------------------------------------------------------

LIGHTNING_DEFAULTS = dict(block_size=256, layer_idx=0, num_hidden_layers=1, norm_eps=1e-6)
LIGHTNING_INT_ATTRS = ("hidden_size", "num_attention_heads", "head_dim", "block_size", "layer_idx",
                       "num_hidden_layers")


def lightning_config(spec_config):
    cfg = dict(LIGHTNING_DEFAULTS)
    cfg.update(spec_config)
    assert 0 <= cfg["layer_idx"] < cfg["num_hidden_layers"], "invalid lightning config"
    return cfg


def lightning_slopes(cfg):
    """s_h = 2^(−8(h+1)/H) · (1 − layer_idx/(num_hidden_layers − 1 + 1e-5) + 1e-5), h = 0..H−1 (§13.1)."""
    H = cfg["num_attention_heads"]
    factor = 1.0 - cfg["layer_idx"] / (cfg["num_hidden_layers"] - 1 + 1e-5) + 1e-5
    return 2.0 ** (-8.0 * (np.arange(H) + 1) / H) * factor


def lightning_init(cfg, rng, bits):
    """nn.Linear default init for the three projections, the norm weight around its init (ones). Draw order
    fixed."""
    D, H, hd = cfg["hidden_size"], cfg["num_attention_heads"], cfg["head_dim"]
    inner = H * hd
    w = {}
    w["qkv_proj.weight"] = mixers.uniform_init(rng, (3 * inner, D), D, bits)
    w["output_gate.weight"] = mixers.uniform_init(rng, (inner, D), D, bits)
    w["norm.weight"] = mixers.quantize(1.0 + 0.1 * rng.standard_normal(inner))
    w["out_proj.weight"] = mixers.uniform_init(rng, (D, inner), inner, bits)
    return w


def lightning_qkv(cfg, w, u):
    """silu(qkv_proj(u)) viewed [..., H, 3·hd] and split per head into q, k, v [..., H, hd]."""
    H, hd = cfg["num_attention_heads"], cfg["head_dim"]
    qkv = mixers.silu(u @ w["qkv_proj.weight"].T).reshape(u.shape[:-1] + (H, 3 * hd))
    return qkv[..., :hd], qkv[..., hd:2 * hd], qkv[..., 2 * hd:]


def lightning_back(cfg, w, u, o, live):
    """RMSNorm over the whole H·hd row (eps norm_eps), times sigmoid(output_gate(u)), out_proj; pads give 0."""
    o = o.reshape(o.shape[:-2] + (-1,))
    on = o / np.sqrt(np.mean(o * o, axis=-1, keepdims=True) + cfg["norm_eps"]) * w["norm.weight"]
    y = on / (1.0 + np.exp(-(u @ w["output_gate.weight"].T)))
    return np.where(live[:, :, None], y @ w["out_proj.weight"].T, 0.0)


def lightning_forward(cfg, w, u, mask=None, window=None, state=None, probes=None):
    """THE ORACLE for lightning attention, token by token in float64: per real token and head,
    S ← exp(−s_h)·S + k vᵀ, o = Sᵀ q (the updated state); n ← n + 1. Padding tokens are skipped (no decay,
    no write, not counted). window [B, 1, 1] is the count n of real tokens consumed, state [B, H, hd, hd]
    (rows key, columns value). probes is accepted and ignored (the family defines no stage probes).
    Returns (out [B, L, D], windows [L+1, B, 1, 1], states [L+1, B, H, hd, hd])."""
    H, hd = cfg["num_attention_heads"], cfg["head_dim"]
    Bsz, L, _ = u.shape
    live = np.ones((Bsz, L), bool) if mask is None else mask.astype(bool)
    window = np.zeros((Bsz, 1, 1)) if window is None else window.copy()
    state = np.zeros((Bsz, H, hd, hd)) if state is None else state.copy()
    q, k, v = lightning_qkv(cfg, w, u)
    decay = np.exp(-lightning_slopes(cfg))                                    # [H]
    o = np.zeros((Bsz, L, H, hd))
    windows, states = [window.copy()], [state.copy()]
    for t in range(L):
        on = live[:, t]
        S = decay[None, :, None, None] * state + k[:, t, :, :, None] * v[:, t, :, None, :]
        state = np.where(on[:, None, None, None], S, state)
        window = np.where(on[:, None, None], window + 1.0, window)
        o[:, t] = np.einsum("bhij,bhi->bhj", state, q[:, t])
        windows.append(window.copy())
        states.append(state.copy())
    return lightning_back(cfg, w, u, o, live), np.stack(windows), np.stack(states)


def lightning_block_form(cfg, w, u, state, block):
    """HF's prefill form (MiniMaxLightningAttention without a cache), from state [B, H, hd, hd]: per block of
    b ≤ `block` tokens, o = (Q Kᵀ ⊙ Dg) V + (Q ⊙ qdecay) S with Dg[i][j] = exp(−s(i−j)) for i ≥ j,
    qdecay[i] = exp(−s(i+1)); S ← exp(−s·b)·S + (K ⊙ kdecay)ᵀ V with kdecay[j] = exp(−s(b−1−j)). No padding.
    Returns (out, final state)."""
    H, hd = cfg["num_attention_heads"], cfg["head_dim"]
    Bsz, L, _ = u.shape
    q, k, v = (np.moveaxis(x, 1, 2) for x in lightning_qkv(cfg, w, u))       # [B, H, L, hd]
    s = lightning_slopes(cfg)[None, :, None, None]
    outs, S = [], state.copy()
    for c0 in range(0, L, block):
        b = min(block, L - c0)
        qb, kb, vb = q[:, :, c0:c0 + b], k[:, :, c0:c0 + b], v[:, :, c0:c0 + b]
        i = np.arange(b)
        lag = (i[:, None] - i[None, :]).astype(float)
        diag = np.where(lag >= 0, np.exp(-s * np.maximum(lag, 0)), 0.0)      # [1, H, b, b]
        qdecay = np.exp(-s[..., 0] * (i + 1))[..., None]                      # [1, H, b, 1]
        kdecay = np.exp(-s[..., 0] * (b - 1 - i))[..., None]
        outs.append((qb @ np.swapaxes(kb, -1, -2) * diag) @ vb + (qb * qdecay) @ S)
        S = S * np.exp(-s * b) + np.swapaxes(kb * kdecay, -1, -2) @ vb
    o = np.moveaxis(np.concatenate(outs, axis=2), 1, 2)
    return lightning_back(cfg, w, u, o, np.ones((Bsz, L), bool)), S


def lightning_make_golden(spec):
    cfg = lightning_config(spec.config)
    rng = np.random.default_rng(spec.seed)
    weights = lightning_init(cfg, rng, spec.proj_grid_bits)
    config = {k: np.int64(cfg[k]) for k in LIGHTNING_INT_ATTRS}
    config["norm_eps"] = np.float64(cfg["norm_eps"])
    g = mixers.finish_golden(spec, cfg, rng, weights, lightning_forward, config)
    live = np.ones((spec.batch, spec.length), bool) if spec.mask() is None else spec.mask().astype(bool)
    total = -np.outer(live.sum(axis=1), lightning_slopes(cfg))
    g.notes.append("slopes " + " ".join(f"{x:.4g}" for x in lightning_slopes(cfg)) + "; cumulative log decay per "
                   "head, by row: " + "; ".join(" ".join(f"{x:.4g}" for x in row) for row in total))
    return g


def lightning_selftest():
    report = mixers.Reporter()
    for spec in linear_specs("lightning", ("tiny", "odd", "decay")):
        cfg = lightning_config(spec.config)
        g = lightning_make_golden(spec)
        w, u = mixers.float64_weights(g), g.tensors["inputs/hidden_states"].astype(np.float64)
        L = u.shape[1]
        out, windows, states = lightning_forward(cfg, w, u)
        print(f"{spec.name}: L={L}, max|output| = {np.abs(out).max():.3g}, max|state| = {np.abs(states).max():.3g}")
        for block in (3, 8, cfg["block_size"], L):
            for s in (0, 3, 11):
                b_out, b_state = lightning_block_form(cfg, w, u[:, s:], states[s], block)
                report(f"block form b={block:<3} from cache at {s:<2}",
                       {"output": mixers.maxdiff(b_out, out[:, s:]),
                        "recurrent_state": mixers.maxdiff(b_state, states[L])}, 1e-12)
        mixers.split_selftest(spec.name, lambda w_, u_, **kw: lightning_forward(cfg, w_, u_, **kw), w, u,
                              (1, 3, 8, 9), (out, windows, states), report)
    for spec in linear_specs("lightning", ("leftpad", "rightpad")):
        cfg = lightning_config(spec.config)
        mixers.padding_selftest(spec, lightning_make_golden(spec),
                                lambda w_, u_, **kw: lightning_forward(cfg, w_, u_, **kw), report)
    return report.ok


# ---------------------------------------------------------------------------------------------------
# Kimi Delta Attention (docs/semantics.md §14)
# ---------------------------------------------------------------------------------------------------

KDA_DEFAULTS = dict(rms_norm_eps=1e-6)
KDA_INT_ATTRS = ("hidden_size", "linear_num_heads", "linear_head_dim", "linear_conv_kernel_dim", "chunk_size")
KDA_L2NORM_EPS = 1e-6       # x / sqrt(Σx² + 1e-6), fixed upstream (§14.3), not a config value


def kda_config(spec_config):
    cfg = dict(KDA_DEFAULTS)
    cfg.update(spec_config)
    return cfg


def kda_dims(cfg):
    """(D, H, d, K, C) with C = 3·H·d."""
    D, H, d, K = (cfg[k] for k in ("hidden_size", "linear_num_heads", "linear_head_dim", "linear_conv_kernel_dim"))
    return D, H, d, K, 3 * H * d


def kda_init(cfg, rng, bits, a_range=(1.0, 16.0)):
    """HF KimiLinear init (FLA's): nn.Linear default for every projection, exp(A_log) ~ U(a_range), dt_bias the
    inverse softplus of a log-uniform dt in [0.001, 0.1]; o_norm.weight around its init (ones). Draw order
    fixed."""
    D, H, d, K, C = kda_dims(cfg)
    inner = H * d
    w = {}
    for name in ("q_proj", "k_proj", "v_proj"):
        w[name + ".weight"] = mixers.uniform_init(rng, (inner, D), D, bits)
    w["conv1d.weight"] = mixers.uniform_init(rng, (C, 1, K), K)
    w["forget_gate.f_a_proj.weight"] = mixers.uniform_init(rng, (d, D), D, bits)
    w["forget_gate.f_b_proj.weight"] = mixers.uniform_init(rng, (inner, d), d, bits)
    w["forget_gate.dt_bias"] = mixers.dt_bias_init(rng, inner)
    w["forget_gate.A_log"] = mixers.quantize(np.log(rng.uniform(a_range[0], a_range[1], (1, 1, H, 1))))
    w["b_proj.weight"] = mixers.uniform_init(rng, (H, D), D, bits)
    w["g_a_proj.weight"] = mixers.uniform_init(rng, (d, D), D, bits)
    w["g_b_proj.weight"] = mixers.uniform_init(rng, (inner, d), d, bits)
    w["o_norm.weight"] = mixers.quantize(1.0 + 0.1 * rng.standard_normal(d))
    w["o_proj.weight"] = mixers.uniform_init(rng, (D, inner), inner, bits)
    return w


def kda_front(cfg, w, u):
    """The pre-conv input mixed = q_proj(u) | k_proj(u) | v_proj(u) [..., C], the log decay
    g = −exp(A_log[h])·softplus(f_b(f_a(u)) + dt_bias) [..., H, d] (≤ 0, per key channel), β = σ(b_proj(u))
    [..., H] and the output gate g_b(g_a(u)) [..., H, d]."""
    D, H, d, K, C = kda_dims(cfg)
    lead = u.shape[:-1]
    mixed = np.concatenate([u @ w[n + ".weight"].T for n in ("q_proj", "k_proj", "v_proj")], axis=-1)
    f = (u @ w["forget_gate.f_a_proj.weight"].T) @ w["forget_gate.f_b_proj.weight"].T + w["forget_gate.dt_bias"]
    g = (-np.exp(w["forget_gate.A_log"].reshape(H, 1)) * mixers.softplus(f.reshape(lead + (H, d))))
    beta = 1.0 / (1.0 + np.exp(-(u @ w["b_proj.weight"].T)))
    gate = ((u @ w["g_a_proj.weight"].T) @ w["g_b_proj.weight"].T).reshape(lead + (H, d))
    return mixed, g, beta, gate


def kda_l2norm(x):
    """x / sqrt(Σx² + 1e-6) over the last axis (FLA's l2norm, eps inside the sqrt)."""
    return x / np.sqrt(np.sum(x * x, axis=-1, keepdims=True) + KDA_L2NORM_EPS)


def kda_heads(cfg, xc):
    """Post-conv channels [..., C] -> q̂ = l2norm(q)·d^-1/2, k̂ = l2norm(k), v, each [..., H, d]."""
    D, H, d, K, C = kda_dims(cfg)
    lead = xc.shape[:-1]
    q, k, v = (xc[..., i * H * d:(i + 1) * H * d].reshape(lead + (H, d)) for i in range(3))
    return kda_l2norm(q) * d ** -0.5, kda_l2norm(k), v


def kda_back(cfg, w, o, gate, live):
    """Per-head RMSNorm over d (eps rms_norm_eps) times o_norm.weight, times sigmoid(gate), then o_proj; pads
    give 0 (no bias)."""
    y = o / np.sqrt(np.mean(o * o, axis=-1, keepdims=True) + cfg["rms_norm_eps"]) * w["o_norm.weight"]
    y = y / (1.0 + np.exp(-gate))
    out = y.reshape(y.shape[:-2] + (-1,)) @ w["o_proj.weight"].T
    return np.where(live[:, :, None], out, 0.0)


def kda_forward(cfg, w, u, mask=None, window=None, state=None, probes=None):
    """THE ORACLE for KDA, token by token in float64: per real token and head, with S [d][d] (rows key),
    S ← diag(exp(g_t))·S (row i scaled by its channel's decay), δ = β(v − Sᵀk̂), S ← S + k̂δᵀ, o = Sᵀq̂ (the
    updated state). window [B, C, K] / state [B, H, d, d] (zeros when None); padding tokens are skipped. probes
    is accepted and ignored. Returns (out [B, L, D], windows [L+1, B, C, K], states [L+1, B, H, d, d])."""
    D, H, d, K, C = kda_dims(cfg)
    Bsz, L, _ = u.shape
    live = np.ones((Bsz, L), bool) if mask is None else mask.astype(bool)
    window = np.zeros((Bsz, C, K)) if window is None else window.copy()
    state = np.zeros((Bsz, H, d, d)) if state is None else state.copy()
    mixed, g, beta, gate = kda_front(cfg, w, u)
    conv_w = w["conv1d.weight"][:, 0, :]
    o = np.zeros((Bsz, L, H, d))
    windows, states = [window.copy()], [state.copy()]
    for t in range(L):
        on = live[:, t]
        window = mixers.roll_window(window, mixed[:, t], on)
        qh, kh, v = kda_heads(cfg, mixers.silu(np.sum(conv_w * window, axis=2)))
        S = state * np.exp(g[:, t])[:, :, :, None]                            # row i × exp(g_i)
        m = np.einsum("bhij,bhi->bhj", S, kh)                                 # Sᵀ k̂
        delta = beta[:, t, :, None] * (v - m)
        S = S + kh[:, :, :, None] * delta[:, :, None, :]
        state = np.where(on[:, None, None, None], S, state)
        o[:, t] = np.einsum("bhij,bhi->bhj", state, qh)
        windows.append(window.copy())
        states.append(state.copy())
    return kda_back(cfg, w, o, gate, live), np.stack(windows), np.stack(states)


def kda_chunked_core(qh, kh, v, beta, g, S, Q):
    """The chunked per-channel delta rule (HF chunk_kimi_delta_attention's algebra, written from §14.4), float64:
    q̂, k̂, v [B, L, H, d], g [B, L, H, d], β [B, L, H], state S [B, H, d, d], chunk Q, last chunk zero-padded
    (g = 0, β = 0, k = 0 are neutral). γ = in-chunk cumsum of g per channel; A[i][j] = −Σ_c β_i k_ic k_jc
    exp(γ_ic − γ_jc) for j < i; T = (I − A)^-1 by forward substitution. Returns o [B, L, H, d] and the state."""
    Bsz, L, H, d = qh.shape
    pad = (-L) % Q

    def heads_first(x):
        x = np.concatenate([x, np.zeros((Bsz, pad) + x.shape[2:])], axis=1)
        return np.moveaxis(x, 1, 2)

    qh, kh, v, beta, g = map(heads_first, (qh, kh, v, beta, g))
    incl, strict = np.tril(np.ones((Q, Q), bool)), np.tril(np.ones((Q, Q), bool), -1)
    outs = []
    for c0 in range(0, L + pad, Q):
        q_, k_, v_, b_, g_ = (x[:, :, c0:c0 + Q] for x in (qh, kh, v, beta, g))
        gam = np.cumsum(g_, axis=2)                                           # [B, H, Q, d]
        diff = gam[:, :, :, None, :] - gam[:, :, None, :, :]                  # γ_i − γ_j [B, H, Q, Q, d]
        dec = np.where(incl[..., None], np.exp(np.where(incl[..., None], diff, 0.0)), 0.0)
        kb = k_ * b_[..., None]
        A = np.where(strict, -np.einsum("bhic,bhjc,bhijc->bhij", kb, k_, dec), 0.0)
        T = np.zeros_like(A)
        for i in range(Q):                                                    # T = (I − A)^-1, lower
            T[..., i, :] = np.eye(Q)[i] + np.einsum("bhj,bhjk->bhk", A[..., i, :i], T[..., :i, :])
        U = T @ (v_ * b_[..., None])
        W = T @ (kb * np.exp(gam))
        Vn = U - W @ S
        intra = np.where(incl, np.einsum("bhic,bhjc,bhijc->bhij", q_, k_, dec), 0.0)
        outs.append((q_ * np.exp(gam)) @ S + intra @ Vn)
        S = S * np.exp(gam[:, :, -1, :])[..., None] + np.swapaxes(k_ * np.exp(gam[:, :, -1:, :] - gam), -1, -2) @ Vn
    o = np.moveaxis(np.concatenate(outs, axis=2), 2, 1)[:, :L]
    return o, S


def kda_chunked_forward(cfg, w, u, window, state, Q):
    """Self-test formulation: conv over cat(window, segment), chunked core from the cached state."""
    mixed, g, beta, gate = kda_front(cfg, w, u)
    conv, new_window = mixers.conv_over_cache(window, mixed, w["conv1d.weight"][:, 0, :])
    qh, kh, v = kda_heads(cfg, mixers.silu(conv))
    o, S = kda_chunked_core(qh, kh, v, beta, g, state, Q)
    return kda_back(cfg, w, o, gate, np.ones(u.shape[:2], bool)), new_window, S


def kda_make_golden(spec):
    cfg = kda_config(spec.config)
    rng = np.random.default_rng(spec.seed)
    weights = kda_init(cfg, rng, spec.proj_grid_bits, spec.a_range or (1.0, 16.0))
    config = {k: np.int64(cfg[k]) for k in KDA_INT_ATTRS}
    config["rms_norm_eps"] = np.float64(cfg["rms_norm_eps"])
    g = mixers.finish_golden(spec, cfg, rng, weights, kda_forward, config)
    w64 = mixers.float64_weights(g)
    _, logdecay, _, _ = kda_front(cfg, w64, g.tensors["inputs/hidden_states"].astype(np.float64))
    live = np.ones(logdecay.shape[:2], bool) if spec.mask() is None else spec.mask().astype(bool)
    total = np.sum(np.where(live[..., None, None], logdecay, 0.0), axis=1)          # [B, H, d]
    g.notes.append("cumulative log decay per head, min..max over its channels, by row: " + "; ".join(
        " ".join(f"{row[h].min():.4g}..{row[h].max():.4g}" for h in range(row.shape[0])) for row in total))
    return g


def kda_selftest():
    report = mixers.Reporter()
    for spec in linear_specs("kda", ("tiny", "odd", "decay")):
        cfg = kda_config(spec.config)
        g = kda_make_golden(spec)
        w, u = mixers.float64_weights(g), g.tensors["inputs/hidden_states"].astype(np.float64)
        L = u.shape[1]
        out, windows, states = kda_forward(cfg, w, u)
        print(f"{spec.name}: L={L}, max|output| = {np.abs(out).max():.3g}, max|state| = {np.abs(states).max():.3g}")
        for Q in (3, 8, 64):
            for s in (0, 3, 11):
                c_out, c_win, c_state = kda_chunked_forward(cfg, w, u[:, s:], windows[s], states[s], Q)
                report(f"chunked Q={Q:<2} from cache at {s:<2}",
                       {"output": mixers.maxdiff(c_out, out[:, s:]), "conv_state": mixers.maxdiff(c_win, windows[L]),
                        "recurrent_state": mixers.maxdiff(c_state, states[L])}, 1e-11)
        mixers.split_selftest(spec.name, lambda w_, u_, **kw: kda_forward(cfg, w_, u_, **kw), w, u, (1, 3, 8, 9),
                              (out, windows, states), report)
    for spec in linear_specs("kda", ("leftpad", "rightpad")):
        cfg = kda_config(spec.config)
        mixers.padding_selftest(spec, kda_make_golden(spec), lambda w_, u_, **kw: kda_forward(cfg, w_, u_, **kw),
                                report)
    return report.ok


# ---------------------------------------------------------------------------------------------------
# the bundled goldens and the registration (golden/goldens.py: FAMILIES and SPECS)
# ---------------------------------------------------------------------------------------------------

LINEAR_SPEC_ARGS = [
    # lightning attention
    ("lightning", "tiny", "baseline: prefill/decode/chunked equivalence, state S[key][value] per head, slopes "
     "2^(-8(h+1)/H) in head order (slope order), block_size 8 below L (block-boundary decay)",
     dict(hidden_size=32, num_attention_heads=4, head_dim=8, block_size=8, layer_idx=1, num_hidden_layers=4),
     dict(batch=2, length=20, seed=61)),
    ("lightning", "odd", "H 3 (not a power of two: HF's slopes, not the ALiBi interleave), hd 5, D 19, block 4 "
     "with L 19 ending in a partial block, last layer of 3 (slopes scaled by ~1e-5: almost no decay)",
     dict(hidden_size=19, num_attention_heads=3, head_dim=5, block_size=4, layer_idx=2, num_hidden_layers=3),
     dict(batch=2, length=19, seed=62)),
    ("lightning", "leftpad", "left padding with garbage at pads: pads never decay, write or count in the cache "
     "(8.4, 8.6)",
     dict(hidden_size=32, num_attention_heads=4, head_dim=8, block_size=8, layer_idx=0, num_hidden_layers=4),
     dict(batch=3, length=20, seed=63, left_pad=(0, 3, 9))),
    ("lightning", "rightpad", "right padding with garbage at pads: count and state frozen at each row's last "
     "real token; a pad that decays the state shows (8.5)",
     dict(hidden_size=32, num_attention_heads=4, head_dim=8, block_size=8, layer_idx=0, num_hidden_layers=4),
     dict(batch=3, length=20, seed=64, right_pad=(0, 5, 12))),
    ("lightning", "decay", "long decaying sequence: 300 tokens, H 8 (slopes 0.5 .. 0.0039, cumulative log "
     "decay down to -150), block 64 ending in a partial block: decays across many block boundaries, the "
     "256-token streaming block",
     dict(hidden_size=32, num_attention_heads=8, head_dim=16, block_size=64, layer_idx=0, num_hidden_layers=2),
     dict(batch=1, length=300, seed=65, positions=(0, 64, 256, 300))),
    ("lightning", "minimax", "MiniMax-Text-01 head shape (hd 128, block 256; 2 of its 64 heads, hidden 128): "
     "realistic per-head sizes and magnitudes",
     dict(hidden_size=128, num_attention_heads=2, head_dim=128, block_size=256, layer_idx=0, num_hidden_layers=2),
     dict(batch=1, length=16, seed=66, positions=(0, 16), proj_grid_bits=mixers.BIG_PROJ_GRID_BITS)),
    # KDA
    ("kda", "tiny", "baseline: prefill/decode/chunked equivalence and first-token causality, conv window of "
     "q | k | v, decay per key channel (a gate broadcast per head shows), sigmoid-gated norm per head",
     dict(hidden_size=32, linear_num_heads=2, linear_head_dim=8, linear_conv_kernel_dim=4, chunk_size=8),
     dict(batch=2, length=20, seed=71)),
    ("kda", "odd", "odd sizes (D 21, H 3, d 5, K 3), L 19 not a multiple of chunk 8 (8.12)",
     dict(hidden_size=21, linear_num_heads=3, linear_head_dim=5, linear_conv_kernel_dim=3, chunk_size=8),
     dict(batch=2, length=19, seed=72)),
    ("kda", "leftpad", "left padding with garbage at pads: pads never reach the conv window or the state (8.4, "
     "8.6)",
     dict(hidden_size=32, linear_num_heads=2, linear_head_dim=8, linear_conv_kernel_dim=4, chunk_size=8),
     dict(batch=3, length=20, seed=73, left_pad=(0, 3, 9))),
    ("kda", "rightpad", "right padding with garbage at pads: cache frozen at each row's last real token (8.5)",
     dict(hidden_size=32, linear_num_heads=2, linear_head_dim=8, linear_conv_kernel_dim=4, chunk_size=8),
     dict(batch=3, length=20, seed=74, right_pad=(0, 5, 12))),
    ("kda", "decay", "long decaying sequence: 300 tokens, d 64, exp(A_log) ~ U(8, 16): cumulative log decays "
     "from -3.5 to -376 across the channels of one head (a decay taken per head shows), chunks of 64 (8.12)",
     dict(hidden_size=64, linear_num_heads=2, linear_head_dim=64, linear_conv_kernel_dim=4, chunk_size=64),
     dict(batch=1, length=300, seed=75, positions=(0, 64, 256, 300), a_range=(8.0, 16.0))),
    ("kda", "kimi", "Kimi-Linear head shape (d 128, K 4, chunk 64; 2 of its 32 heads, hidden 128): realistic "
     "per-head sizes and magnitudes",
     dict(hidden_size=128, linear_num_heads=2, linear_head_dim=128, linear_conv_kernel_dim=4, chunk_size=64),
     dict(batch=1, length=16, seed=76, positions=(0, 16), proj_grid_bits=mixers.BIG_PROJ_GRID_BITS)),
]


def linear_all_specs():
    return [mixers.GoldenSpec(name, family, why, config, **kw) for family, name, why, config, kw in LINEAR_SPEC_ARGS]


def linear_specs(family, names):
    by_key = {s.key: s for s in linear_all_specs()}
    return [by_key[f"{family}/{n}"] for n in names]


LINEAR_FAMILIES = {"lightning": mixers.Family(make_golden=lightning_make_golden, selftest=lightning_selftest),
                   "kda": mixers.Family(make_golden=kda_make_golden, selftest=kda_selftest)}
