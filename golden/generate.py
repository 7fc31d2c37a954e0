#!/usr/bin/python3
"""mixcheck golden-file generator: an independent float64 oracle for the recurrent sequence mixers.

The expected values come from a plain token-by-token recurrence (no chunks) written from the math spec
(shared/spec/mixers.md §2.3, §2.7, §11), never from the C code under test. Weights and inputs are drawn
from numpy.random.default_rng(seed), quantized to a coarse float32 grid so the files compress, and the
float64 computation uses exactly the stored (quantized) values. See golden/README.md for the file layout.

Commands (paths are relative to this script's directory, whatever the cwd):
  generate.py list                          names, families, file sizes
  generate.py regenerate [NAME ...]         recompute, write <file>.tmp, rename; print per-tensor changes
  generate.py check [--selftest] [NAME ...] recompute in memory, compare with the files (exit 0 / 1);
                                            --selftest first cross-checks the oracle against the chunked
                                            SSD formulation and split invariance
Nothing is written unless `regenerate` is given.

Families are pluggable: a family supplies make_golden(spec) (config attributes, weights, inputs and the
expected tensors at every position 0..L) plus its own self-test. Only mamba2 exists so far.
"""

import argparse
import os
import platform
import sys
from dataclasses import dataclass, field
from typing import Callable, Optional

import h5py
import numpy as np

GENERATOR = "golden/generate.py"
GENERATOR_VERSION = "1.0"
FORMAT = "mixcheck-golden"
FORMAT_VERSION = 1
GOLDEN_DIR = os.path.dirname(os.path.abspath(__file__))

# check: a tensor matches when max|new - stored| <= CHECK_RTOL * max(1, max|stored|); this only has to
# absorb last-bit libm differences between machines.
CHECK_RTOL = 1e-12

# Quantization (README "Quantization"): every stored weight / input value is rounded to float32, then to
# bfloat16 (round to nearest even). Tensors with a known init scale are then rounded (half to even) to
# the power-of-two grid step = 2**(ceil(log2(scale)) - GRID_BITS): at most 2**GRID_BITS steps per scale,
# so every value has <= GRID_BITS + 1 significant bits, stays bf16-representable, and compresses well.
GRID_BITS = 7


# ---------------------------------------------------------------------------------------------------
# numeric helpers
# ---------------------------------------------------------------------------------------------------

def to_bf16(v):
    """float64 -> float32 -> bfloat16 (round to nearest even on the float32 bits); returned as float32."""
    bits = np.ascontiguousarray(v, dtype=np.float32).view(np.uint32)
    bits = (bits + (np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1)))) & np.uint32(0xFFFF0000)
    return bits.view(np.float32)


def quantize(v, scale=None):
    """The stored float32 value of a draw: bf16, then (if scale is given) the power-of-two grid."""
    q = to_bf16(v)
    if scale is not None:
        step = 2.0 ** (int(np.ceil(np.log2(scale))) - GRID_BITS)
        q = (np.round(q.astype(np.float64) / step) * step).astype(np.float32)
        # Grid rounding of a bf16 value only ever clears low mantissa bits: still bf16-representable.
        assert not np.any(q.view(np.uint32) & np.uint32(0xFFFF))
    return q


def uniform_init(rng, shape, fan_in):
    """nn.Linear / nn.Conv1d default init: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), quantized to that bound."""
    bound = 1.0 / np.sqrt(fan_in)
    return quantize(rng.uniform(-bound, bound, size=shape), scale=bound)


def softplus(x):
    """torch.nn.functional.softplus (beta 1, threshold 20): x if x > 20 else log1p(exp(x))."""
    return np.where(x > 20.0, x, np.log1p(np.exp(np.minimum(x, 20.0))))


def silu(x):
    return x / (1.0 + np.exp(-x))


# ---------------------------------------------------------------------------------------------------
# golden registry
# ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class GoldenSpec:
    name: str
    family: str
    description: str          # one line: the bug class this golden guards
    config: dict              # HF config names; family defaults fill the rest
    batch: int
    length: int
    seed: int
    positions: Optional[tuple] = None   # state positions to store; None = every position 0..L
    left_pad: Optional[tuple] = None    # per-row count of leading padding tokens (mask 0); None = no mask
    require_dt_clamps: bool = False     # fail unless both time_step_limit bounds bind on some token

    @property
    def path(self):
        return os.path.join(GOLDEN_DIR, self.family, self.name + ".h5")


@dataclass
class Golden:
    """Everything that goes into one file (positions already selected)."""
    config: dict                              # attribute name -> numpy scalar / array
    tensors: dict                             # "weights/..", "inputs/..", "expected/.." -> ndarray
    notes: list = field(default_factory=list)  # diagnostics printed by regenerate / check


@dataclass(frozen=True)
class Family:
    make_golden: Callable     # GoldenSpec -> Golden (expected tensors at every position 0..L)
    selftest: Callable        # () -> bool; prints its numbers


# ---------------------------------------------------------------------------------------------------
# Mamba2 (mixers.md §2)
# ---------------------------------------------------------------------------------------------------

MAMBA2_DEFAULTS = dict(n_groups=1, conv_kernel=4, layer_norm_epsilon=1e-5,
                       time_step_limit=(0.0, float("inf")), use_bias=0, use_conv_bias=1)


@dataclass(frozen=True)
class Mamba2Dims:
    D: int; H: int; P: int; N: int; G: int; K: int; I: int; GN: int; C: int; proj: int; gs: int

    @classmethod
    def of(cls, cfg):
        D, H, P, N, G, K = (cfg[k] for k in ("hidden_size", "num_heads", "head_dim", "state_size",
                                              "n_groups", "conv_kernel"))
        I, GN = H * P, G * N
        gs = cfg["norm_group_size"]
        assert H % G == 0 and I % gs == 0 and gs in (I, I // G), "invalid mamba2 config"
        return cls(D, H, P, N, G, K, I, GN, I + 2 * GN, 2 * I + 2 * GN + H, gs)


def mamba2_config(spec_config):
    cfg = dict(MAMBA2_DEFAULTS)
    cfg.update(spec_config)
    cfg.setdefault("norm_group_size", cfg["num_heads"] * cfg["head_dim"])
    return cfg


def mamba2_init(cfg, rng):
    """Realistic init (mixers.md §2.2, scenarios.md §4), quantized; draw order is fixed (README)."""
    d = Mamba2Dims.of(cfg)
    w = {}
    w["in_proj.weight"] = uniform_init(rng, (d.proj, d.D), d.D)
    if cfg["use_bias"]:
        w["in_proj.bias"] = uniform_init(rng, (d.proj,), d.D)
    w["conv1d.weight"] = uniform_init(rng, (d.C, 1, d.K), d.K)   # depthwise: fan_in = K
    if cfg["use_conv_bias"]:
        w["conv1d.bias"] = uniform_init(rng, (d.C,), d.K)
    # dt log-uniform in [time_step_min, time_step_max] = [0.001, 0.1], floor 1e-4, stored as softplus^-1.
    dt = np.exp(rng.uniform(0.0, 1.0, d.H) * (np.log(0.1) - np.log(0.001)) + np.log(0.001))
    dt = np.maximum(dt, 1e-4)
    w["dt_bias"] = quantize(dt + np.log(-np.expm1(-dt)))
    w["A_log"] = quantize(np.log(rng.uniform(1.0, 16.0, d.H)))
    # D and norm.weight are perturbed from their all-ones init so per-head / per-channel indexing errors show.
    w["D"] = quantize(1.0 + 0.1 * rng.standard_normal(d.H))
    w["norm.weight"] = quantize(1.0 + 0.1 * rng.standard_normal(d.I))
    w["out_proj.weight"] = uniform_init(rng, (d.D, d.I), d.I)
    if cfg["use_bias"]:
        w["out_proj.bias"] = uniform_init(rng, (d.D,), d.I)
    return w


def mamba2_front(cfg, w, u):
    """in_proj and dt for all tokens at once (per-token maps): z, xBC_raw, dt (clamped), dt (unclamped)."""
    d = Mamba2Dims.of(cfg)
    zxbcdt = u @ w["in_proj.weight"].T
    if "in_proj.bias" in w:
        zxbcdt = zxbcdt + w["in_proj.bias"]
    z = zxbcdt[..., :d.I]
    xbc_raw = zxbcdt[..., d.I:d.I + d.C]
    dt_raw = zxbcdt[..., d.I + d.C:]
    dt_free = softplus(dt_raw + w["dt_bias"])
    lo, hi = cfg["time_step_limit"]
    return z, xbc_raw, np.minimum(np.maximum(dt_free, lo), hi), dt_free


def mamba2_split_heads(cfg, xbc):
    """xBC [..., C] -> x [..., H, P], B and C expanded to heads [..., H, N] (head h uses group h // (H/G))."""
    d = Mamba2Dims.of(cfg)
    lead = xbc.shape[:-1]
    x = xbc[..., :d.I].reshape(lead + (d.H, d.P))
    heads_per_group = d.H // d.G
    Bh = np.repeat(xbc[..., d.I:d.I + d.GN].reshape(lead + (d.G, d.N)), heads_per_group, axis=-2)
    Ch = np.repeat(xbc[..., d.I + d.GN:].reshape(lead + (d.G, d.N)), heads_per_group, axis=-2)
    return x, Bh, Ch


def mamba2_back(cfg, w, y, z):
    """Gated RMSNorm, gate before norm, over groups of norm_group_size (§2.7), then out_proj."""
    d = Mamba2Dims.of(cfg)
    hg = y * silu(z)
    grouped = hg.reshape(hg.shape[:-1] + (d.I // d.gs, d.gs))
    rstd = 1.0 / np.sqrt(np.mean(grouped * grouped, axis=-1, keepdims=True) + cfg["layer_norm_epsilon"])
    out = (w["norm.weight"] * (grouped * rstd).reshape(hg.shape)) @ w["out_proj.weight"].T
    if "out_proj.bias" in w:
        out = out + w["out_proj.bias"]
    return out


def mamba2_zero_cache(cfg, batch):
    d = Mamba2Dims.of(cfg)
    return np.zeros((batch, d.C, d.K)), np.zeros((batch, d.H, d.P, d.N))


def mamba2_forward(cfg, w, u, mask=None, window=None, state=None):
    """THE ORACLE: the plain sequential recurrence over one segment (mixers.md §11), float64.

    u [B, L, D]; mask [B, L] (0 = padding) or None; window [B, C, K] / state [B, H, P, N] the cache before
    the segment (zeros when None). A padding token is skipped: window and state stay as they were and its
    output is out_proj.bias (zero without bias).
    Returns (out [B, L, D], windows [L+1, B, C, K], states [L+1, B, H, P, N], dt_free [B, L, H]) where
    windows[t] / states[t] is the cache after the first t tokens of the segment.
    """
    d = Mamba2Dims.of(cfg)
    Bsz, L, _ = u.shape
    live = np.ones((Bsz, L), bool) if mask is None else mask.astype(bool)
    zero_window, zero_state = mamba2_zero_cache(cfg, Bsz)
    window = zero_window if window is None else window.copy()
    state = zero_state if state is None else state.copy()
    z, xbc_raw, dt, dt_free = mamba2_front(cfg, w, u)
    conv_w = w["conv1d.weight"][:, 0, :]                      # [C, K]; column K-1 is the current token
    conv_b = w.get("conv1d.bias", np.zeros(d.C))
    A = -np.exp(w["A_log"])                                    # [H]
    windows, states = [window.copy()], [state.copy()]
    y = np.zeros((Bsz, L, d.H, d.P))
    for t in range(L):
        on = live[:, t]
        # conv window: drop the oldest column, append this token's pre-conv input (CONV-INV)
        shifted = np.concatenate([window[:, :, 1:], xbc_raw[:, t, :, None]], axis=2)
        window = np.where(on[:, None, None], shifted, window)
        xbc = silu(conv_b + np.sum(conv_w * window, axis=2))  # [B, C]
        x, Bh, Ch = mamba2_split_heads(cfg, xbc)               # [B, H, P], [B, H, N], [B, H, N]
        dt_t = dt[:, t, :]                                     # [B, H]
        decay = np.exp(dt_t * A)[:, :, None, None]
        stepped = decay * state + (dt_t[:, :, None] * x)[:, :, :, None] * Bh[:, :, None, :]
        state = np.where(on[:, None, None, None], stepped, state)
        y[:, t] = np.einsum("bhpn,bhn->bhp", state, Ch) + w["D"][None, :, None] * x
        windows.append(window.copy())
        states.append(state.copy())
    out = mamba2_back(cfg, w, y.reshape(Bsz, L, d.I), z)
    pad_out = w.get("out_proj.bias", np.zeros(d.D))
    out = np.where(live[:, :, None], out, pad_out)
    return out, np.stack(windows), np.stack(states), dt_free


def mamba2_make_golden(spec):
    cfg = mamba2_config(spec.config)
    d = Mamba2Dims.of(cfg)
    rng = np.random.default_rng(spec.seed)
    weights = mamba2_init(cfg, rng)
    hidden = quantize(rng.standard_normal((spec.batch, spec.length, d.D)), scale=1.0)
    mask = None
    if spec.left_pad is not None:
        mask = (np.arange(spec.length)[None, :] >= np.array(spec.left_pad)[:, None]).astype(np.int8)

    w64 = {k: v.astype(np.float64) for k, v in weights.items()}
    out, windows, states, dt_free = mamba2_forward(cfg, w64, hidden.astype(np.float64), mask)

    notes = []
    lo, hi = cfg["time_step_limit"]
    if lo > 0.0 or np.isfinite(hi):
        real = dt_free if mask is None else dt_free[mask.astype(bool)]
        n_lo, n_hi = int(np.sum(real < lo)), int(np.sum(real > hi))
        notes.append(f"dt clamped: {n_lo} low (< {lo}), {n_hi} high (> {hi}) of {real.size} real-token dt "
                     f"values (unclamped range {real.min():.3g} .. {real.max():.3g})")
        if spec.require_dt_clamps and (n_lo == 0 or n_hi == 0):
            raise RuntimeError(f"{spec.name}: time_step_limit must bind on both sides")

    config = {k: np.int64(cfg[k]) for k in ("hidden_size", "num_heads", "head_dim", "state_size", "n_groups",
                                            "conv_kernel", "chunk_size", "norm_group_size", "use_bias",
                                            "use_conv_bias")}
    config["layer_norm_epsilon"] = np.float64(cfg["layer_norm_epsilon"])
    config["time_step_limit"] = np.array(cfg["time_step_limit"], dtype=np.float64)

    tensors = {"weights/" + k: v for k, v in weights.items()}
    tensors["inputs/hidden_states"] = hidden
    if mask is not None:
        tensors["inputs/attention_mask"] = mask
    tensors["expected/output"] = out
    tensors["expected/conv_state"] = windows
    tensors["expected/recurrent_state"] = states
    return Golden(config, tensors, notes)


# ---------------------------------------------------------------------------------------------------
# Mamba2 self-test: the oracle against the chunked SSD formulation (mixers.md §2.4 / §2.5) and split
# invariance. Only the in_proj / dt front end and the norm / out_proj back end are shared.
# ---------------------------------------------------------------------------------------------------

def segsum(v):
    """Stable segment sum over the last axis: out[..., i, j] = sum_{k=j+1..i} v[k] (i >= j), -inf above."""
    T = v.shape[-1]
    rep = np.broadcast_to(v[..., :, None], v.shape + (T,))            # rep[..., i, j] = v[i]
    strict = np.tril(np.ones((T, T), bool), -1)
    out = np.cumsum(np.where(strict, rep, 0.0), axis=-2)
    return np.where(np.tril(np.ones((T, T), bool)), out, -np.inf)


def ssd_chunked(x, dt, A, Bh, Ch, Dskip, S_init, Q):
    """Chunked SSD scan of mixers.md §2.4 steps (1)-(4), float64, from S_init. x [B,L,H,P], dt [B,L,H],
    Bh / Ch [B,L,H,N]. Returns y [B,L,H,P] (D skip included) and the final state [B,H,P,N]."""
    Bsz, L, H, P = x.shape
    pad = (-L) % Q
    nc = (L + pad) // Q

    def chunks(v):  # zero-pad the time axis to nc*Q, then [B, nc, Q, ...]
        v = np.concatenate([v, np.zeros((Bsz, pad) + v.shape[2:])], axis=1)
        return v.reshape((Bsz, nc, Q) + v.shape[2:])

    Xd, a, Bc, Cc = chunks(x * dt[..., None]), chunks(A * dt), chunks(Bh), chunks(Ch)
    Acum = np.cumsum(a, axis=2)                                           # [B, nc, Q, H]
    Lmat = np.exp(segsum(np.moveaxis(a, 2, -1)))                          # [B, nc, H, Q(l), Q(s)]
    Gm = np.einsum("bclhn,bcshn->bclsh", Cc, Bc)
    Ydiag = np.einsum("bclsh,bchls,bcshp->bclhp", Gm, Lmat, Xd)
    decay_s = np.exp(Acum[:, :, -1:, :] - Acum)
    Sc = np.einsum("bclhn,bclh,bclhp->bchpn", Bc, decay_s, Xd)
    Sall = np.concatenate([S_init[:, None], Sc], axis=1)                  # [B, nc+1, H, P, N]
    wtot = np.concatenate([np.zeros((Bsz, 1, H)), Acum[:, :, -1, :]], axis=1)   # [B, nc+1, H]
    decay_chunk = np.exp(segsum(np.moveaxis(wtot, 1, -1)))                # [B, H, nc+1, nc+1]
    Snew = np.einsum("bhzc,bchpn->bzhpn", decay_chunk, Sall)
    Yoff = np.einsum("bclhn,bchpn,bclh->bclhp", Cc, Snew[:, :-1], np.exp(Acum))
    y = (Ydiag + Yoff).reshape(Bsz, nc * Q, H, P)[:, :L] + Dskip[None, None, :, None] * x
    return y, Snew[:, -1]


def mamba2_chunked_forward(cfg, w, u, window, state, Q):
    """Case (b) of mixers.md §2.5 (case (a) with a zero cache): conv over cat(window, segment), keep the
    last L outputs, chunked scan from the cached state. Returns out, final window, final state."""
    d = Mamba2Dims.of(cfg)
    L = u.shape[1]
    z, xbc_raw, dt, _ = mamba2_front(cfg, w, u)
    Xc = np.concatenate([window, np.moveaxis(xbc_raw, 1, 2)], axis=2)    # [B, C, K+L]
    conv_w = w["conv1d.weight"][:, 0, :]
    conv = sum(conv_w[None, :, k, None] * Xc[:, :, k + 1:k + 1 + L] for k in range(d.K))
    xbc = silu(np.moveaxis(conv, 1, 2) + w.get("conv1d.bias", 0.0))     # [B, L, C]
    x, Bh, Ch = mamba2_split_heads(cfg, xbc)
    y, S_final = ssd_chunked(x, dt, -np.exp(w["A_log"]), Bh, Ch, w["D"], state, Q)
    out = mamba2_back(cfg, w, y.reshape(u.shape[0], L, d.I), z)
    return out, Xc[:, :, -d.K:], S_final


def maxdiff(a, b):
    return float(np.max(np.abs(a - b))) if np.size(a) else 0.0


def float64_weights(g):
    return {k[len("weights/"):]: v.astype(np.float64) for k, v in g.tensors.items() if k.startswith("weights/")}


def mamba2_selftest():
    ok = True

    def report(label, diffs, limit):
        nonlocal ok
        worst = max(diffs.values())
        ok &= worst <= limit
        text = ", ".join(f"{k} {v:.1e}" for k, v in diffs.items())
        print(f"  {label:<38} max|diff|: {text}{'' if worst <= limit else '  FAIL (> %.0e)' % limit}")

    for name in ("tiny", "groups2", "ragged", "dtlimit"):
        spec = SPECS[name]
        cfg = mamba2_config(spec.config)
        g = mamba2_make_golden(spec)
        w, u = float64_weights(g), g.tensors["inputs/hidden_states"].astype(np.float64)
        L = u.shape[1]
        out, windows, states, _ = mamba2_forward(cfg, w, u)
        print(f"{name}: L={L}, max|output| = {np.abs(out).max():.3g}, max|state| = {np.abs(states).max():.3g}")
        # chunked SSD (from zero, and continued from a cached split point) against the sequential oracle
        for Q in sorted({cfg["chunk_size"], 5, L}):
            for s in (0, 3, 11):
                c_out, c_win, c_state = mamba2_chunked_forward(cfg, w, u[:, s:], windows[s], states[s], Q)
                report(f"chunked SSD Q={Q:<2} from cache at {s:<2}",
                       {"output": maxdiff(c_out, out[:, s:]), "conv_state": maxdiff(c_win, windows[L]),
                        "recurrent_state": maxdiff(c_state, states[L])}, 1e-12)
        # split invariance of the oracle itself: prefix, then continuations from the cache
        splits = (0, 1, 3, 8, 9, L)
        seg_out, win, st, d_win, d_st = [], None, None, 0.0, 0.0
        for a, b in zip(splits[:-1], splits[1:]):
            o, ws, ss, _ = mamba2_forward(cfg, w, u[:, a:b], window=win, state=st)
            seg_out.append(o)
            win, st = ws[-1], ss[-1]
            d_win, d_st = max(d_win, maxdiff(win, windows[b])), max(d_st, maxdiff(st, states[b]))
        report(f"split invariance at {splits[1:-1]}",
               {"output": maxdiff(np.concatenate(seg_out, axis=1), out), "conv_state": d_win,
                "recurrent_state": d_st}, 1e-13)

    # left padding: a padded row's cache stays zero through its pads, then its real tokens (outputs and
    # caches) equal that row run alone, unpadded
    spec = SPECS["leftpad"]
    cfg = mamba2_config(spec.config)
    g = mamba2_make_golden(spec)
    w, u = float64_weights(g), g.tensors["inputs/hidden_states"].astype(np.float64)
    diffs = dict.fromkeys(("output", "conv_state", "recurrent_state"), 0.0)

    def frozen(v, p):  # the unpadded row's caches at positions 0..L of a row with p leading pads
        return np.concatenate([np.repeat(v[:1], p, axis=0), v])

    for b, p in enumerate(spec.left_pad):
        o, ws, ss, _ = mamba2_forward(cfg, w, u[b:b + 1, p:])
        for key, alone, padded in (("output", o[0], g.tensors["expected/output"][b, p:]),
                                   ("conv_state", frozen(ws, p)[:, 0], g.tensors["expected/conv_state"][:, b]),
                                   ("recurrent_state", frozen(ss, p)[:, 0],
                                    g.tensors["expected/recurrent_state"][:, b])):
            diffs[key] = max(diffs[key], maxdiff(alone, padded))
    report(f"leftpad {spec.left_pad} vs rows alone", diffs, 1e-13)
    return ok


FAMILIES = {"mamba2": Family(make_golden=mamba2_make_golden, selftest=mamba2_selftest)}

# name -> spec. Config keys are HF names; see the README table for the bug class each one guards.
SPECS = {s.name: s for s in [
    GoldenSpec("tiny", "mamba2",
               "baseline: prefill/decode/chunked equivalence, conv window and state layout (G=1, full-row norm)",
               dict(hidden_size=32, num_heads=4, head_dim=16, state_size=8, chunk_size=8),
               batch=2, length=24, seed=1),
    GoldenSpec("groups2", "mamba2",
               "n_groups=2 head->group mapping (h // (H/G)), groupwise gated norm (I/G), in/out_proj bias",
               dict(hidden_size=48, num_heads=6, head_dim=16, state_size=8, n_groups=2, norm_group_size=48,
                    chunk_size=8, use_bias=1),
               batch=2, length=20, seed=2),
    GoldenSpec("ragged", "mamba2",
               "L=29 not a multiple of chunk_size: non-neutral chunk padding, state at a ragged tail",
               dict(hidden_size=32, num_heads=8, head_dim=8, state_size=16, chunk_size=8),
               batch=1, length=29, seed=3),
    GoldenSpec("dtlimit", "mamba2",
               "time_step_limit (0.005, 0.05) binding on both sides: dt clamp missing in any path, K=3",
               dict(hidden_size=32, num_heads=4, head_dim=16, state_size=8, conv_kernel=3, chunk_size=8,
                    time_step_limit=(0.005, 0.05)),
               batch=2, length=16, seed=4, require_dt_clamps=True),
    GoldenSpec("leftpad", "mamba2",
               "left padding with non-zero garbage at pads: pads must never reach conv window or state",
               dict(hidden_size=32, num_heads=4, head_dim=16, state_size=8, n_groups=2, chunk_size=8),
               batch=3, length=20, seed=5, left_pad=(0, 3, 9)),
    GoldenSpec("m130m", "mamba2",
               "mamba2-130m layer shape (H=24, P=64, N=128, chunk 256): realistic sizes and magnitudes",
               dict(hidden_size=768, num_heads=24, head_dim=64, state_size=128, chunk_size=256,
                    norm_group_size=1536),
               batch=1, length=32, seed=6, positions=(0, 16, 32)),
]}


# ---------------------------------------------------------------------------------------------------
# building, writing, comparing files
# ---------------------------------------------------------------------------------------------------

def build(spec):
    """Compute a golden in memory, with the expected states reduced to spec.positions."""
    g = FAMILIES[spec.family].make_golden(spec)
    positions = np.arange(spec.length + 1) if spec.positions is None else np.array(spec.positions)
    assert np.all(np.diff(positions) > 0) and positions[0] >= 0 and positions[-1] <= spec.length
    g.tensors["expected/state_positions"] = positions.astype(np.int64)
    for key in ("expected/conv_state", "expected/recurrent_state"):
        g.tensors[key] = g.tensors[key][positions]
    for key, v in g.tensors.items():
        assert np.all(np.isfinite(v)), f"{spec.name}: non-finite values in {key}"
    return g


def identity_attrs(spec):
    """Root attributes that identify a golden (compared by check)."""
    return {"format": FORMAT, "format_version": np.int64(FORMAT_VERSION), "family": spec.family,
            "name": spec.name, "description": spec.description, "seed": np.int64(spec.seed)}


def provenance_attrs():
    """Root attributes that record how a file was made (not compared by check)."""
    return {"generator": GENERATOR, "generator_version": GENERATOR_VERSION, "numpy_version": np.__version__,
            "h5py_version": h5py.__version__, "python_version": platform.python_version()}


def write(spec, g, path):
    with h5py.File(path, "w") as f:
        for k, v in {**identity_attrs(spec), **provenance_attrs()}.items():
            f.attrs[k] = v
        cfg = f.create_group("config")
        for k, v in g.config.items():
            cfg.attrs[k] = v
        for key, v in g.tensors.items():   # one chunk per tensor, byte shuffle + gzip 9
            f.create_dataset(key, data=v, chunks=v.shape, shuffle=True, compression="gzip",
                             compression_opts=9, track_times=False)


def read_file(path):
    """(tensors, config attributes, root attributes) of a golden file."""
    tensors = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda k, obj: tensors.__setitem__(k, obj[()]) if isinstance(obj, h5py.Dataset) else None)
        config = dict(f["config"].attrs) if "config" in f else {}
        return tensors, config, dict(f.attrs)


def compare(new, old):
    """Per-tensor rows (key, text, matches) of new against old (None: no previous file). A tensor matches
    when max|new - old| <= CHECK_RTOL * max(1, max|old|)."""
    rows = []
    for key in sorted(set(new) | set(old or {})):
        if old is None or key not in old:
            rows.append((key, "new", False))
        elif key not in new:
            rows.append((key, "removed", False))
        elif new[key].shape != old[key].shape:
            rows.append((key, f"shape {old[key].shape} -> {new[key].shape}", False))
        else:
            a, b = np.asarray(new[key], np.float64), np.asarray(old[key], np.float64)
            diff = maxdiff(a, b)
            limit = CHECK_RTOL * max(1.0, float(np.max(np.abs(b))) if b.size else 0.0)
            rows.append((key, f"max|change| = {diff:.3e}", diff <= limit))
    return rows


def attr_differences(new, old, keys=None):
    """Names of attributes that differ (over `keys`, or over all names in either dict)."""
    keys = sorted(set(new) | set(old)) if keys is None else keys
    return [k for k in keys
            if k not in new or k not in old or not np.array_equal(np.asarray(new[k]), np.asarray(old[k]))]


def select(names):
    unknown = [n for n in names if n not in SPECS]
    if unknown:
        print(f"unknown golden(s): {' '.join(unknown)} (known: {' '.join(SPECS)})", file=sys.stderr)
        sys.exit(2)
    return [SPECS[n] for n in (names or SPECS)]


def cmd_list(args):
    total = 0
    for spec in select(args.names):
        size = os.path.getsize(spec.path) if os.path.exists(spec.path) else None
        total += size or 0
        shape = ", ".join(f"{k}={v}" for k, v in spec.config.items())
        print(f"{spec.name:<8} {spec.family:<7} {('%d' % size) if size is not None else 'missing':>9} bytes  "
              f"B={spec.batch} L={spec.length} {shape}")
    print(f"total {total} bytes")


def cmd_regenerate(args):
    for spec in select(args.names):
        g = build(spec)
        print(f"{spec.name} -> {os.path.relpath(spec.path, os.path.dirname(GOLDEN_DIR))}")
        for note in g.notes:
            print(f"  {note}")
        old = read_file(spec.path) if os.path.exists(spec.path) else (None, {}, {})
        os.makedirs(os.path.dirname(spec.path), exist_ok=True)
        tmp = spec.path + ".tmp"
        write(spec, g, tmp)
        os.replace(tmp, spec.path)
        for key, text, _ in compare(g.tensors, old[0]):
            print(f"  {key:<28} {text}")
        changed = attr_differences(g.config, old[1]) if old[0] is not None else []
        if changed:
            print(f"  config changed: {' '.join(changed)}")
        print(f"  {os.path.getsize(spec.path)} bytes")
    return 0


def cmd_check(args):
    specs = select(args.names)
    ok = True
    if args.selftest:
        for fam_name, fam in FAMILIES.items():
            print(f"selftest {fam_name}:")
            ok &= fam.selftest()
    for spec in specs:
        if not os.path.exists(spec.path):
            print(f"{spec.name}: MISSING {spec.path}")
            ok = False
            continue
        g = build(spec)
        stored, stored_config, stored_root = read_file(spec.path)
        rows = compare(g.tensors, stored)
        identity = identity_attrs(spec)
        changed = (["config/" + k for k in attr_differences(g.config, stored_config)]
                   + attr_differences(identity, stored_root, keys=sorted(identity)))
        same = all(match for _, _, match in rows) and not changed
        print(f"{spec.name}: {'ok' if same else 'DIFFERS'}")
        for note in g.notes:
            print(f"  {note}")
        if not same:
            for key, text, match in rows:
                if not match:
                    print(f"  {key:<28} {text}")
            if changed:
                print(f"  attributes differ: {' '.join(changed)}")
        ok &= same
    return 0 if ok else 1


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("list", help="names, families, sizes")
    p.add_argument("names", nargs="*")
    p.set_defaults(func=cmd_list)
    p = sub.add_parser("regenerate", help="recompute and atomically rewrite golden files")
    p.add_argument("names", nargs="*")
    p.set_defaults(func=cmd_regenerate)
    p = sub.add_parser("check", help="recompute in memory and compare with the files (exit 0/1)")
    p.add_argument("--selftest", action="store_true",
                   help="first cross-check the oracle (chunked SSD, split invariance, left padding)")
    p.add_argument("names", nargs="*")
    p.set_defaults(func=cmd_check)
    args = ap.parse_args(argv)
    return args.func(args) or 0


if __name__ == "__main__":
    sys.exit(main())
