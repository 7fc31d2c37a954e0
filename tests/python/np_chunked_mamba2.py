"""np_chunked_mamba2.py — a numpy Mamba2 mixer (docs/semantics.md §2) with an internal chunk length, as a
mixcheck Python backend: the chunked SSD scan (§2.4) over chunks of ``options.chunk_size`` tokens (the
configuration's ``chunk_size`` when mixcheck asks for none), so the class declares ``chunked = True`` and
``chunk_size_invariance`` runs it at each chunk length of a case.

    mixcheck run cases/mamba2/tiny.yaml --python /usr/bin/python3 \\
        --python-backend tests/python/np_chunked_mamba2.py:NumpyChunkedMamba2

Every forward is case (b) of §2.5 (case (a) on a fresh cache, whose window and state are zero): the
depthwise conv over cat(cached window, segment), then the chunked scan from the cached state. One row at
a time over its real tokens only: a padding token never reaches the cache and outputs out_proj.bias.

With MC_TEST_CHUNK_LOG set, every model appends the chunk length it was created with (0 = none asked
for) to that file, one line each: the test reads which lengths reached the backend.

OneTokenChunks is a mutant of it: its kernel for chunks of one token (Q = 1) drops the D skip term, a
bug only a run at chunk length 1 can show.
"""

import os

import numpy as np

from mixcheck_backend import Backend, Unsupported


def silu(v):
    return v / (1.0 + np.exp(-v))


def softplus(v):
    return np.where(v > 20.0, v, np.log1p(np.exp(np.minimum(v, 20.0))))


def segsum(v):
    """out[..., i, j] = sum of v[j+1..i] over the last axis for i >= j, -inf above the diagonal."""
    T = v.shape[-1]
    rep = np.broadcast_to(v[..., :, None], v.shape + (T,))
    strict = np.tril(np.ones((T, T), bool), -1)
    out = np.cumsum(np.where(strict, rep, 0.0), axis=-2)
    return np.where(np.tril(np.ones((T, T), bool)), out, -np.inf)


class Cache:
    def __init__(self, window, state):
        self.window = window  # [B][C][K], oldest first
        self.state = state    # [B][H][P][N]


class NumpyChunkedMamba2(Backend):
    name = "np-chunked-mamba2"
    family = "mamba2"
    dtypes = ("f64", "f32")
    chunked = True
    skip_in_one_token_chunks = True

    def __init__(self, family, dtype, config, weights, options):
        super().__init__(family, dtype, config, weights, options)
        if options.device != "cpu":
            raise Unsupported("numpy runs on the cpu only (asked for %s)" % options.device)
        log = os.environ.get("MC_TEST_CHUNK_LOG")
        if log:
            with open(log, "a") as f:
                f.write("%d\n" % options.chunk_size)
        c = config
        self.ct = np.float64 if dtype == "f64" else np.float32
        self.D, self.H, self.P, self.N = c["hidden_size"], c["num_heads"], c["head_dim"], c["state_size"]
        self.G, self.K = c["n_groups"], c["conv_kernel"]
        self.I, self.GN = self.H * self.P, self.G * self.N
        self.C = self.I + 2 * self.GN
        self.gs, self.eps = c["norm_group_size"], c["layer_norm_epsilon"]
        self.lo, self.hi = c["time_step_limit"]
        self.Q = options.chunk_size if options.chunk_size > 0 else c["chunk_size"]
        w = {k: v.astype(self.ct) for k, v in weights.items()}
        zeros = np.zeros
        self.in_w, self.out_w = w["in_proj.weight"], w["out_proj.weight"]
        self.in_b = w.get("in_proj.bias", zeros(self.in_w.shape[0], self.ct))
        self.out_b = w.get("out_proj.bias", zeros(self.D, self.ct))
        self.conv_w = w["conv1d.weight"].reshape(self.C, self.K)
        self.conv_b = w.get("conv1d.bias", zeros(self.C, self.ct))
        self.dt_bias, self.A = w["dt_bias"], -np.exp(w["A_log"])
        self.Dskip, self.norm_w = w["D"], w["norm.weight"]

    def cache_alloc(self, batch):
        return Cache(np.zeros((batch, self.C, self.K), self.ct), np.zeros((batch, self.H, self.P, self.N), self.ct))

    def cache_copy(self, cache):
        return Cache(cache.window.copy(), cache.state.copy())

    def cache_export(self, cache):
        return cache.window, cache.state

    def cache_import(self, cache, conv_state, recurrent_state):
        cache.window[...] = conv_state
        cache.state[...] = recurrent_state
        return cache

    def _scan(self, x, dt, Bh, Ch, S):
        """The chunked SSD scan of one row from state S [H][P][N]: x [L][H][P], dt [L][H], Bh / Ch
        [L][H][N]. Returns y [L][H][P] (D skip included) and the final state."""
        L, Q = x.shape[0], self.Q
        pad = (-L) % Q
        nc = (L + pad) // Q

        def chunks(v):  # zero-padded to nc*Q tokens, then [nc][Q][...]
            v = np.concatenate([v, np.zeros((pad,) + v.shape[1:], v.dtype)])
            return v.reshape((nc, Q) + v.shape[1:])

        Xd, a, Bc, Cc = chunks(x * dt[..., None]), chunks(self.A * dt), chunks(Bh), chunks(Ch)
        Acum = np.cumsum(a, axis=1)                                     # [nc][Q][H]
        Lmat = np.exp(segsum(np.moveaxis(a, 1, -1)))                    # [nc][H][Q(l)][Q(s)]
        Ydiag = np.einsum("clhn,cshn,chls,cshp->clhp", Cc, Bc, Lmat, Xd)
        Sc = np.einsum("clhn,clh,clhp->chpn", Bc, np.exp(Acum[:, -1:, :] - Acum), Xd)
        Sall = np.concatenate([S[None], Sc])                            # [nc+1][H][P][N]
        wtot = np.concatenate([np.zeros((1, self.H), a.dtype), Acum[:, -1, :]])
        Snew = np.einsum("hzc,chpn->zhpn", np.exp(segsum(np.moveaxis(wtot, 0, -1))), Sall)
        Yoff = np.einsum("clhn,chpn,clh->clhp", Cc, Snew[:-1], np.exp(Acum))
        y = (Ydiag + Yoff).reshape(nc * Q, self.H, self.P)[:L]
        if Q > 1 or self.skip_in_one_token_chunks:
            y = y + self.Dskip[None, :, None] * x
        return y, Snew[-1]

    def _row(self, window, state, u):
        """One row: window [C][K] and state [H][P][N] updated in place, u [L][D] real tokens -> [L][D]."""
        L = u.shape[0]
        zxbcdt = u @ self.in_w.T + self.in_b
        z, xbc_raw, dt_raw = zxbcdt[:, :self.I], zxbcdt[:, self.I:self.I + self.C], zxbcdt[:, self.I + self.C:]
        dt = np.clip(softplus(dt_raw + self.dt_bias), self.lo, self.hi).astype(self.ct)
        full = np.concatenate([window, xbc_raw.T], axis=1)             # [C][K + L]
        conv = sum(self.conv_w[:, k, None] * full[:, k + 1:k + 1 + L] for k in range(self.K))
        xbc = silu(conv.T + self.conv_b)                               # [L][C]
        x = xbc[:, :self.I].reshape(L, self.H, self.P)
        rep = self.H // self.G
        Bh = np.repeat(xbc[:, self.I:self.I + self.GN].reshape(L, self.G, self.N), rep, axis=1)
        Ch = np.repeat(xbc[:, self.I + self.GN:].reshape(L, self.G, self.N), rep, axis=1)
        y, S = self._scan(x, dt, Bh, Ch, state)
        window[...] = full[:, -self.K:]
        state[...] = S
        hg = y.reshape(L, self.I) * silu(z)                            # gate before the norm
        grouped = hg.reshape(L, self.I // self.gs, self.gs)
        rstd = 1.0 / np.sqrt(np.mean(grouped * grouped, axis=-1, keepdims=True) + self.eps)
        return (self.norm_w * (grouped * rstd).reshape(L, self.I)) @ self.out_w.T + self.out_b

    def forward(self, cache, x, mask):
        B, L, _ = x.shape
        c = cache if cache is not None else self.cache_alloc(B)
        y = np.empty((B, L, self.D), self.ct)
        y[...] = self.out_b  # what a padding position outputs
        for b in range(B):
            real = np.arange(L) if mask is None else np.flatnonzero(mask[b])
            if real.size:
                y[b, real] = self._row(c.window[b], c.state[b], x[b, real].astype(self.ct))
        return y.astype(x.dtype, copy=False)


class OneTokenChunks(NumpyChunkedMamba2):
    name = "np-chunk1-mutant"
    skip_in_one_token_chunks = False


class SingleStepBranch(NumpyChunkedMamba2):
    """The cached branch of HF ``Mamba2Mixer.torch_forward`` before #46084, written from its description: the
    branch is chosen from the cache state alone ("has a previous state"), so an L-token forward on a primed
    cache runs as one step: all L inputs rolled into the window, one conv output from the final window, the
    first token's dt, one recurrent step, that output for every row (gated by each row's own z). Right for a
    fresh prefill and for single-token decode. The diagnosis must name it 8.1 (tests/python/test_python.c)."""
    name = "np-single-step-branch"
    chunked = False

    def cache_alloc(self, batch):
        c = super().cache_alloc(batch)
        c.primed = False
        return c

    def cache_copy(self, cache):
        c = super().cache_copy(cache)
        c.primed = getattr(cache, "primed", False)
        return c

    def cache_import(self, cache, conv_state, recurrent_state):
        cache = super().cache_import(cache, conv_state, recurrent_state)
        cache.primed = True
        return cache

    def _step_branch(self, window, state, u):
        L = u.shape[0]
        zxbcdt = u @ self.in_w.T + self.in_b
        z, xbc_raw, dt_raw = zxbcdt[:, :self.I], zxbcdt[:, self.I:self.I + self.C], zxbcdt[:, self.I + self.C:]
        window[...] = np.concatenate([window, xbc_raw.T], axis=1)[:, -self.K:]
        xbc = silu(np.sum(window * self.conv_w, axis=1) + self.conv_b)  # [C]: one conv output
        dt = np.clip(softplus(dt_raw[0] + self.dt_bias), self.lo, self.hi).astype(self.ct)  # token 0's dt
        x = xbc[:self.I].reshape(self.H, self.P)
        rep = self.H // self.G
        Bh = np.repeat(xbc[self.I:self.I + self.GN].reshape(self.G, self.N), rep, axis=0)
        Ch = np.repeat(xbc[self.I + self.GN:].reshape(self.G, self.N), rep, axis=0)
        state[...] = np.exp(dt * self.A)[:, None, None] * state + (dt[:, None] * x)[:, :, None] * Bh[:, None, :]
        y = np.einsum("hpn,hn->hp", state, Ch) + self.Dskip[:, None] * x
        hg = y.reshape(1, self.I) * silu(z)                              # every row the same y, its own z
        grouped = hg.reshape(L, self.I // self.gs, self.gs)
        rstd = 1.0 / np.sqrt(np.mean(grouped * grouped, axis=-1, keepdims=True) + self.eps)
        return (self.norm_w * (grouped * rstd).reshape(L, self.I)) @ self.out_w.T + self.out_b

    def forward(self, cache, x, mask):
        B, L, _ = x.shape
        c = cache if cache is not None else self.cache_alloc(B)
        primed = getattr(c, "primed", False)
        y = np.empty((B, L, self.D), self.ct)
        y[...] = self.out_b
        for b in range(B):
            real = np.arange(L) if mask is None else np.flatnonzero(mask[b])
            if real.size:
                row = self._step_branch if primed else self._row
                y[b, real] = row(c.window[b], c.state[b], x[b, real].astype(self.ct))
        c.primed = True
        return y.astype(x.dtype, copy=False)


MIXCHECK_BACKENDS = [NumpyChunkedMamba2, OneTokenChunks, SingleStepBranch]
