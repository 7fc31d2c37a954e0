"""np_shortconv.py — a numpy port of the LFM2 ShortConv mixer (docs/semantics.md §5) as a mixcheck
Python backend: the template a port author copies.

    mixcheck run cases/shortconv --python /usr/bin/python3 \\
        --python-backend examples/python/np_shortconv.py

runs every ShortConv case through this file as backend `np-shortconv`. The math per batch row and real
token: B, C, x = in_proj(u) split in three; the conv window caches the last K values of B*x per channel,
oldest first; y = out_proj(C * (conv(B*x) + conv.bias)); no activation. A padding token (mask 0) is
skipped: it never enters the window, and its output is out_proj.bias. Vectorised over tokens with
sliding_window_view: no Python loop over elements, one over batch rows.
"""

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from mixcheck_backend import Backend, Unsupported


class Cache:
    def __init__(self, window):
        self.window = window  # [B][D][K] in the compute dtype, oldest first


class NumpyShortConv(Backend):
    name = "np-shortconv"
    family = "shortconv"
    dtypes = ("f64", "f32")

    def __init__(self, family, dtype, config, weights, options):
        super().__init__(family, dtype, config, weights, options)
        if options.device != "cpu":
            raise Unsupported("numpy runs on the cpu only (asked for %s)" % options.device)
        self.ct = np.float64 if dtype == "f64" else np.float32  # compute in the storage precision
        self.D, self.K = config["hidden_size"], config["conv_L_cache"]
        w = {k: v.astype(self.ct) for k, v in weights.items()}
        zeros = np.zeros
        self.in_w, self.out_w = w["in_proj.weight"], w["out_proj.weight"]
        self.conv_w = w["conv.weight"].reshape(self.D, self.K)
        self.in_b = w.get("in_proj.bias", zeros(3 * self.D, self.ct))
        self.conv_b = w.get("conv.bias", zeros(self.D, self.ct))
        self.out_b = w.get("out_proj.bias", zeros(self.D, self.ct))

    def cache_alloc(self, batch):
        return Cache(np.zeros((batch, self.D, self.K), self.ct))

    def cache_copy(self, cache):
        return Cache(cache.window.copy())

    def cache_export(self, cache):
        return cache.window, None

    def cache_import(self, cache, conv_state, recurrent_state):
        cache.window[...] = conv_state
        return cache

    def _row(self, window, u):
        """One row: window [D][K] (updated in place), u [n][D] real tokens only -> out [n][D]."""
        bcx = u @ self.in_w.T + self.in_b
        bx = bcx[:, : self.D] * bcx[:, 2 * self.D:]
        ext = np.concatenate([window.T, bx])                      # [K + n][D], oldest first
        taps = sliding_window_view(ext, self.K, axis=0)[1:]        # [n][D][K]: the window at each token
        co = np.einsum("tdk,dk->td", taps, self.conv_w) + self.conv_b
        window[...] = ext[-self.K:].T
        return (bcx[:, self.D: 2 * self.D] * co) @ self.out_w.T + self.out_b

    def forward(self, cache, x, mask):
        B, L, _ = x.shape
        win = cache.window if cache is not None else np.zeros((B, self.D, self.K), self.ct)
        y = np.empty((B, L, self.D), self.ct)
        y[...] = self.out_b  # what a padding position outputs
        for b in range(B):
            real = slice(None) if mask is None else np.flatnonzero(mask[b])
            y[b, real] = self._row(win[b], x[b, real].astype(self.ct))
        return y.astype(x.dtype, copy=False)

    def forward_packed(self, pool, cu_seqlens, slots, has_initial_state, x):
        y = np.empty(x.shape, self.ct)
        for i, s in enumerate(slots):
            lo, hi = cu_seqlens[i], cu_seqlens[i + 1]
            if hi == lo:
                continue
            if not has_initial_state[i]:
                pool.window[s] = 0
            y[lo:hi] = self._row(pool.window[s], x[lo:hi].astype(self.ct))
        return y.astype(x.dtype, copy=False)


MIXCHECK_BACKENDS = [NumpyShortConv]
