#!/usr/bin/python3
"""test_hf_bridge.py — the HF adapter (python/mixcheck_backend/hf.py) against stand-ins of every transformers
API shape from 4.57 to today, without any old release installed.

Each shape is a stand-in mixer (a tiny recurrent layer: a K-tap window and a decaying state) whose forward
has that release's signature and keeps its state in that release's cache layout:

    cache        5.24: forward(hidden_states, cache, attention_mask, **kwargs), DynamicCache, layers of dicts
    cache_params 5.14-5.23: the same under cache_params
    flat         5.5-5.12: cache_params, layer states one tensor each, has_previous_state a bool
    past_kv      ShortConv / attention up to 5.23: past_key_values
    per_model    4.57 / 5.0: cache_params + cache_position, a per-model cache class (stacked tensors)

Through the adapter's own code (hf._HF: cache_alloc / export / import / forward, hfapi), every shape must give
the unsplit forward's output when the sequence is split into a prefill and a continued forward on the cache,
and after an export / import round trip; the cache_position a per-model mixer sees must be what the release's
model passes. And the two ways a release can drop a cache silently are errors: a forward that names no cache
argument (only **kwargs), and one that takes the cache but writes nothing into it. The mask helper: the
release's create_recurrent_attention_mask where it has one (under its cache argument's name), else the
stand-in rule. hf-attention (hf.HFAttention) with a stand-in attention and create_causal_mask of the 5.24 and
the older shapes (past_key_values, cache_position, input_embeds), and hf-model (hf.HFModel.forward) with
stand-in models that build their own cache (5.5 on), that take a per-model cache and cache_position (4.57 /
5.0 Mamba: arange(conv_kernel) first), and that name no cache argument (an error), split and unsplit alike.
hf-lightning (hf.HFLightning) with a stand-in MiniMaxCache and lightning layer: the count of real tokens it
exports beside the linear cache, split and round trip, a cache left unwritten an error, and the mask of each
release (generate()'s whole 2-D mask up to 5.14, create_recurrent_attention_mask's from 5.15).

Needs torch and transformers (hf.py imports them): run under $MIXCHECK_HF_PYTHON or /work/venv/bin/python,
exit 77 (CTest: skipped) where neither imports them.
"""

import os
import subprocess
import sys
import traceback
import types

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def reexec():
    """Run under an interpreter with torch and transformers, or exit 77."""
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
        return
    except ImportError:
        pass
    py = os.environ.get("MIXCHECK_HF_PYTHON", "/work/venv/bin/python")
    if os.path.exists(py) and not os.environ.get("MIXCHECK_TEST_REEXEC") and \
            subprocess.run([py, "-c", "import torch, transformers"], capture_output=True).returncode == 0:
        os.environ["MIXCHECK_TEST_REEXEC"] = "1"
        os.execv(py, [py, os.path.abspath(__file__)] + sys.argv[1:])
    print("SKIP: no Python with torch and transformers (set MIXCHECK_HF_PYTHON)")
    sys.exit(77)


reexec()
sys.path.insert(0, os.path.join(ROOT, "python"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from mixcheck_backend import Options  # noqa: E402
from mixcheck_backend import hf, hfapi  # noqa: E402

D, K, B = 3, 4, 2
DECAY = 0.5


# ---- stand-in caches, one per layout -------------------------------------------------------------------

class IndexedLayer:
    """A 5.14+ linear-attention cache layer: states by index."""

    def __init__(self):
        self.conv_states, self.recurrent_states = {0: None}, {0: None}
        self.has_previous_state = {0: False}

    def lazy_initialization(self, conv_states=None, recurrent_states=None, state_idx=0, conv_kernel_size=None):
        if conv_states is not None:
            self.conv_states[state_idx] = torch.zeros(*conv_states.shape[:-1], conv_kernel_size or conv_states.shape[-1],
                                                      dtype=conv_states.dtype)
        if recurrent_states is not None:
            self.recurrent_states[state_idx] = torch.zeros_like(recurrent_states)

    def get(self):
        return (self.conv_states[0], self.recurrent_states[0]) if self.has_previous_state[0] else (None, None)

    def put(self, conv, rec):
        if self.conv_states[0] is None:
            self.lazy_initialization(conv, rec)
        self.conv_states[0].copy_(conv)
        self.recurrent_states[0].copy_(rec)
        self.has_previous_state[0] = True


class FlatLayer:
    """A 5.5-5.12 linear-attention cache layer: one tensor each, a bool flag, no conv_kernel_size."""

    def __init__(self):
        self.conv_states = self.recurrent_states = None
        self.has_previous_state = False

    def lazy_initialization(self, conv_states=None, recurrent_states=None):
        if conv_states is not None:
            self.conv_states = torch.zeros_like(conv_states)
        if recurrent_states is not None:
            self.recurrent_states = torch.zeros_like(recurrent_states)

    def get(self):
        return (self.conv_states, self.recurrent_states) if self.has_previous_state else (None, None)

    def put(self, conv, rec):
        if self.conv_states is None:
            self.lazy_initialization(conv, rec)
        self.conv_states.copy_(conv)
        self.recurrent_states.copy_(rec)
        self.has_previous_state = True


def dynamic_cache(layer_cls):
    class StandInDynamicCache:
        def __init__(self, config=None):
            self.layers = [layer_cls()]

        def has_previous_state(self, layer_idx=None):
            lay = self.layers[0]
            return lay.has_previous_state[0] if isinstance(lay.has_previous_state, dict) else lay.has_previous_state
    return StandInDynamicCache


class PerModelCache:
    """A 4.57 / 5.0 per-model cache: stacked per-layer tensors, allocated with the batch; no flag."""

    def __init__(self, config, batch_size, dtype=torch.float16, device=None):
        self.conv_states = torch.zeros(1, batch_size, D, K, dtype=dtype)
        self.ssm_states = torch.zeros(1, batch_size, D, 1, dtype=dtype)


# ---- stand-in mixers: one recurrence, each shape's signature and cache access ----------------------------

def step(window, state, x, w):
    """The recurrence every stand-in computes: the K-tap window shifts in x, the state decays and adds x."""
    ys = []
    for t in range(x.shape[1]):
        window = torch.cat([window[..., 1:], x[:, t, :, None]], dim=-1)
        state = DECAY * state + x[:, t, :, None]
        ys.append(w * (window.sum(-1) + state[..., 0]))
    return torch.stack(ys, 1), window, state


class Base(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(D))
        self.seen = []  # what each forward was given: (cache_position, attention_mask)

    def run(self, h, get, put):
        window, state = get()
        if window is None:
            window, state = torch.zeros(h.shape[0], D, K, dtype=h.dtype), torch.zeros(h.shape[0], D, 1, dtype=h.dtype)
        y, window, state = step(window, state, h, self.w)
        put(window, state)
        return y


class CacheMixer(Base):  # 5.24
    def forward(self, hidden_states, cache=None, attention_mask=None, **kwargs):
        self.seen.append((None, attention_mask))
        if cache is None:
            return self.run(hidden_states, lambda: (None, None), lambda *a: None)
        return self.run(hidden_states, cache.layers[0].get, cache.layers[0].put)


class CacheParamsMixer(Base):  # 5.5-5.23 (with either layer layout)
    def forward(self, hidden_states, cache_params=None, attention_mask=None, **kwargs):
        self.seen.append((None, attention_mask))
        if cache_params is None:
            return self.run(hidden_states, lambda: (None, None), lambda *a: None)
        return self.run(hidden_states, cache_params.layers[0].get, cache_params.layers[0].put)


class PastKVMixer(Base):  # ShortConv / attention up to 5.23
    def forward(self, hidden_states, past_key_values=None, attention_mask=None, **kwargs):
        self.seen.append((None, attention_mask))
        if past_key_values is None:
            return self.run(hidden_states, lambda: (None, None), lambda *a: None)
        return self.run(hidden_states, past_key_values.layers[0].get, past_key_values.layers[0].put)


class PerModelMixer(Base):  # 4.57 / 5.0: prefill or decode from cache_position[0]
    def forward(self, hidden_states, cache_params=None, cache_position=None, attention_mask=None):
        self.seen.append((cache_position, attention_mask))
        if cache_params is None:
            return self.run(hidden_states, lambda: (None, None), lambda *a: None)
        primed = cache_position[0] > 0

        def get():
            return (cache_params.conv_states[0], cache_params.ssm_states[0]) if primed else (None, None)

        def put(window, state):
            cache_params.conv_states[0].copy_(window)
            cache_params.ssm_states[0].copy_(state)
        return self.run(hidden_states, get, put)


def hooks(fn):
    """A decorator that keeps no __wrapped__ (5.14's force_accelerate_hooks): the wrapper is all the
    signature shows."""
    def wrapped(self, *args, **kwargs):
        return fn(self, *args, **kwargs)
    return wrapped


class DecoratedMixer(CacheParamsMixer):  # 5.14: the forward behind a hook decorator
    forward = hooks(CacheParamsMixer.forward)


class KwargsOnlyMixer(Base):  # a release whose forward swallows cache= in **kwargs
    def forward(self, hidden_states, attention_mask=None, **kwargs):
        return self.run(hidden_states, lambda: (None, None), lambda *a: None)


class IgnoringMixer(Base):  # names the cache, never uses it
    def forward(self, hidden_states, cache_params=None, attention_mask=None, **kwargs):
        return self.run(hidden_states, lambda: (None, None), lambda *a: None)


class Cfg:
    conv_kernel = K


def make(mixer_cls, cache_cls=None, fresh="tokens", dynamic=None, masking=None):
    """An hf._HF adapter around a stand-in, with hf's DynamicCache and masking_utils replaced."""
    class StandIn(hf._HF):
        name, family = "standin", "mamba1"
        fresh_positions = fresh

        def build(self, c):
            self.cache_cls = cache_cls
            return Cfg(), mixer_cls()

    hf.DynamicCache = dynamic or dynamic_cache(IndexedLayer)
    hf.masking_utils = masking or types.SimpleNamespace()
    opts = Options(conv_shape=(D, K), state_shape=(D, 1), hidden=D)
    return StandIn("mamba1", "f64", {}, {"w": np.linspace(0.5, 1.5, D)}, opts)


X = np.random.default_rng(7).standard_normal((B, 9, D))


def unsplit(be):
    return be.forward(be.cache_alloc(B), X, None)


def check_split_and_roundtrip(be):
    want = unsplit(be)
    c = be.cache_alloc(B)
    y = np.concatenate([be.forward(c, X[:, :5], None), be.forward(c, X[:, 5:], None)], 1)
    np.testing.assert_allclose(y, want, rtol=0, atol=1e-12, err_msg="prefill + continued forward")
    c = be.cache_alloc(B)
    be.forward(c, X[:, :5], None)
    conv, rec = be.cache_export(c)
    c2 = be.cache_import(be.cache_alloc(B), conv, rec)
    np.testing.assert_allclose(be.forward(c2, X[:, 5:], None), want[:, 5:], rtol=0, atol=1e-12,
                               err_msg="after export / import")
    c3 = be.cache_copy(c)
    np.testing.assert_allclose(be.forward(c3, X[:, 5:6], None), want[:, 5:6], rtol=0, atol=1e-12,
                               err_msg="decode on a copy")


def test_cache_524():
    check_split_and_roundtrip(make(CacheMixer))


def test_cache_params_indexed_layers():
    check_split_and_roundtrip(make(CacheParamsMixer))


def test_cache_params_flat_layers():
    check_split_and_roundtrip(make(CacheParamsMixer, dynamic=dynamic_cache(FlatLayer)))


def test_forward_behind_a_decorator():
    assert list(hfapi.named_params(DecoratedMixer().forward)) == ["hidden_states", "cache_params", "attention_mask"]
    check_split_and_roundtrip(make(DecoratedMixer))


def test_past_key_values():
    check_split_and_roundtrip(make(PastKVMixer))


def test_per_model_cache_and_cache_position():
    be = make(PerModelMixer, cache_cls=PerModelCache)
    check_split_and_roundtrip(be)
    # generate()'s positions: arange(L) on a fresh cache, then the ones after
    be.mixer.seen.clear()
    c = be.cache_alloc(B)
    be.forward(c, X[:, :5], None)
    be.forward(c, X[:, 5:7], None)
    be.forward(c, X[:, 7:8], None)
    got = [p.tolist() for p, _ in be.mixer.seen]
    assert got == [[0, 1, 2, 3, 4], [5, 6], [7]], got
    # an imported cache is primed: its first forward's positions start past the window
    be.mixer.seen.clear()
    be.forward(be.cache_import(be.cache_alloc(B), *be.cache_export(c)), X[:, :1], None)
    assert be.mixer.seen[0][0].tolist() == [K], be.mixer.seen[0][0]


def test_mamba_models_prefill_positions():
    # MambaModel / Mamba2Model (4.57 / 5.0) pass arange(conv_kernel) with a fresh cache, whatever L is
    be = make(PerModelMixer, cache_cls=PerModelCache, fresh="conv_kernel")
    c = be.cache_alloc(B)
    be.forward(c, X[:, :2], None)
    be.forward(c, X[:, 2:3], None)
    got = [p.tolist() for p, _ in be.mixer.seen]
    assert got == [list(range(K)), [K]], got


def expect_unbridged(fn, text):
    try:
        fn()
    except hfapi.Unbridged as e:
        assert text in str(e), str(e)
        return
    raise AssertionError("no Unbridged error (%s)" % text)


def test_kwargs_only_forward_is_an_error_not_a_run_without_cache():
    be = make(KwargsOnlyMixer)
    be.forward(None, X, None)  # no cache asked for: runs
    expect_unbridged(lambda: be.forward(be.cache_alloc(B), X, None), "names no cache argument")


def test_a_cache_left_untouched_is_an_error():
    be = make(IgnoringMixer)
    expect_unbridged(lambda: be.forward(be.cache_alloc(B), X, None), "without writing the cache")


def test_per_model_mixer_given_no_position_would_error():
    def fn(hidden_states, cache_params=None, cache_position=None):
        pass
    expect_unbridged(lambda: hfapi.forward_kwargs(fn, "fn", cache=object()), "cache_position")
    assert hfapi.forward_kwargs(fn, "fn") == {}


def test_mask_helper_of_the_release():
    calls = []

    def create_recurrent_attention_mask(config, inputs_embeds, attention_mask, past_key_values=None, **kwargs):
        calls.append(past_key_values)
        return None if past_key_values.has_previous_state() else attention_mask[:, -inputs_embeds.shape[1]:]
    be = make(CacheMixer, masking=types.SimpleNamespace(create_recurrent_attention_mask=create_recurrent_attention_mask))
    c = be.cache_alloc(B)
    mask = np.ones((B, 5), np.uint8)
    mask[1, :2] = 0
    be.forward(c, X[:, :5], mask)
    be.forward(c, X[:, 5:7], np.ones((B, 2), np.uint8))
    assert calls == [c, c], calls
    m0, m1 = be.mixer.seen[0][1], be.mixer.seen[1][1]
    assert m0.tolist() == mask.tolist() and m1 is None, (m0, m1)


def test_mask_stand_in_without_the_helper():
    be = make(CacheMixer)  # masking_utils without create_recurrent_attention_mask (4.57-5.12)
    c = be.cache_alloc(B)
    mask = np.ones((B, 5), np.uint8)
    mask[1, :2] = 0
    be.forward(c, X[:, :5], mask)                    # fresh cache, padded: the mask
    be.forward(c, X[:, 5:7], mask[:, :2])            # primed cache: none
    be.forward(be.cache_alloc(B), X[:, :5], np.ones((B, 5), np.uint8))  # all ones: none
    got = [m for _, m in be.mixer.seen]
    assert got[0].tolist() == mask.tolist() and got[1] is None and got[2] is None, got


def test_forward_kwargs_names():
    def new(hidden_states, position_embeddings, attention_mask=None, cache=None, **kwargs):
        pass

    def old(hidden_states, position_embeddings, attention_mask=None, past_key_values=None, cache_position=None, **kw):
        pass
    c, pos = object(), torch.arange(3)
    assert hfapi.forward_kwargs(new, "new", cache=c, cache_position=pos, position_embeddings=1) == \
        {"cache": c, "position_embeddings": 1}
    assert hfapi.forward_kwargs(old, "old", cache=c, cache_position=pos, position_embeddings=1) == \
        {"past_key_values": c, "cache_position": pos, "position_embeddings": 1}
    expect_unbridged(lambda: hfapi.forward_kwargs(new, "new", seq_idx=1), "takes no seq_idx")


def test_causal_mask_argument_names():
    got = {}

    def old(config, input_embeds, attention_mask, cache_position, past_key_values, position_ids=None):
        got.update(input_embeds=input_embeds, cache_position=cache_position, past_key_values=past_key_values)

    def new(config, inputs_embeds, attention_mask, cache=None, position_ids=None, **kwargs):
        got.update(inputs_embeds=inputs_embeds, cache=cache)
    hfapi.causal_mask(types.SimpleNamespace(create_causal_mask=old), None, "h", None, "c", None, "p")
    assert got == {"input_embeds": "h", "cache_position": "p", "past_key_values": "c"}, got
    got.clear()
    hfapi.causal_mask(types.SimpleNamespace(create_causal_mask=new), None, "h", None, "c", None, "p")
    assert got == {"inputs_embeds": "h", "cache": "c"}, got


def test_layer_states_of_every_layout():
    conv, rec = torch.ones(B, D, K), torch.full((B, D, 1), 2.0)
    for cache in (dynamic_cache(IndexedLayer)(), dynamic_cache(FlatLayer)(), PerModelCache(None, B, torch.float64)):
        hfapi.set_layer_states(cache, 0, conv, rec)
        st = hfapi.layer_states(cache, 0)
        assert torch.equal(st["conv"].to(conv.dtype), conv) and torch.equal(st["rec"].to(rec.dtype), rec), type(cache)
    lazy = types.SimpleNamespace(conv_states=[None], recurrent_states=[None])  # Qwen3NextDynamicCache
    hfapi.set_layer_states(lazy, 0, conv, rec)
    assert torch.equal(hfapi.layer_states(lazy, 0)["conv"], conv)
    kv = types.SimpleNamespace(key_cache=[torch.ones(B, 1, 3, 2)], value_cache=[torch.zeros(B, 1, 3, 2)],
                               conv_cache=[torch.zeros(B, D, K)])  # Lfm2HybridConvCache
    assert hfapi.layer_states(kv, 0)["keys"].shape == (B, 1, 3, 2)
    expect_unbridged(lambda: hfapi.layer_states(types.SimpleNamespace(), 0), "no cache layout known")


def test_output_cache():
    c = object()
    assert hfapi.output_cache(types.SimpleNamespace(cache_params=c, past_key_values=None)) is c
    assert hfapi.output_cache(types.SimpleNamespace(past_key_values=c)) is c
    assert hfapi.output_cache(types.SimpleNamespace(logits=1)) is None


# ---- hf-attention: the attention call and create_causal_mask in each shape -------------------------------

NEG = -1e9


def additive_mask(full, L):
    """[B][1][L][T+L]: query i (slot T+i) sees the real slots up to its own."""
    B, S = full.shape
    T = S - L
    keep = torch.tril(torch.ones(L, S, dtype=torch.bool), diagonal=T)[None] & (full[:, None, :] == 1)
    return torch.where(keep, 0.0, NEG).to(torch.float64)[:, None]


def causal_mask_new(config, inputs_embeds, attention_mask, cache=None, position_ids=None, **kwargs):
    return additive_mask(attention_mask, inputs_embeds.shape[1])


def causal_mask_old(config, input_embeds, attention_mask, cache_position, past_key_values, position_ids=None):
    assert cache_position.tolist() == list(range(attention_mask.shape[1] - input_embeds.shape[1],
                                                 attention_mask.shape[1])), cache_position
    return additive_mask(attention_mask, input_embeds.shape[1])


class AttnBase(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(D))

    def attend(self, h, mask, cache):
        k = v = (h * self.w)[:, None]  # [B][1][L][D]
        if cache is not None:
            k, v = cache.update(k, v, 0)
        scores = h[:, None] @ k.transpose(-1, -2) / D ** 0.5 + mask
        return (torch.softmax(scores, -1) @ v)[:, 0], None


class AttnNew(AttnBase):  # 5.24
    def forward(self, hidden_states, position_embeddings, attention_mask=None, cache=None, **kwargs):
        return self.attend(hidden_states, attention_mask, cache)


class AttnOld(AttnBase):  # up to 5.23 (cache_position up to 5.0)
    def forward(self, hidden_states, position_embeddings, attention_mask=None, past_key_values=None,
                cache_position=None, **kwargs):
        if past_key_values is not None:
            T = past_key_values.get_seq_length(0)
            assert cache_position.tolist() == list(range(T, T + hidden_states.shape[1])), cache_position
        return self.attend(hidden_states, attention_mask, past_key_values)


class NoRotary(torch.nn.Module):
    def forward(self, h, pos):
        return torch.ones(1), torch.zeros(1)  # (cos, sin) the stand-ins do not use


def make_attention(cls, causal):
    class StandIn(hf.HFAttention):
        name = "standin-attention"

        def build(self, c):
            self.rotary = NoRotary()
            return Cfg(), cls()
    hf.masking_utils = types.SimpleNamespace(create_causal_mask=causal)
    opts = Options(conv_shape=(1, 1), state_shape=(2, 16, D), hidden=D)
    config = {"attn_output_gate": 1, "qk_norm": "zero_centred", "cache_length": 16}
    return StandIn("attention", "f64", config, {"w": np.linspace(0.5, 1.5, D)}, opts)


def test_attention_shapes():
    for cls, causal in ((AttnNew, causal_mask_new), (AttnOld, causal_mask_old)):
        be = make_attention(cls, causal)
        want = be.forward(be.cache_alloc(B), X, None)
        c = be.cache_alloc(B)
        y = np.concatenate([be.forward(c, X[:, :5], None), be.forward(c, X[:, 5:], None)], 1)
        np.testing.assert_allclose(y, want, rtol=0, atol=1e-12, err_msg=cls.__name__)
        c = be.cache_alloc(B)
        be.forward(c, X[:, :5], None)
        c2 = be.cache_import(be.cache_alloc(B), *be.cache_export(c))
        np.testing.assert_allclose(be.forward(c2, X[:, 5:], None), want[:, 5:], rtol=0, atol=1e-12,
                                   err_msg=cls.__name__ + " after export / import")


# ---- hf-model: the whole model's cache argument, cache class and positions in each shape -------------------

class ModelBase(torch.nn.Module):
    """A one-layer 'model': the stand-in recurrence over the token ids as its input."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.linspace(0.5, 1.5, D, dtype=torch.float64))
        self.positions = []

    def run(self, input_ids, get, put):
        h = input_ids[..., None].to(torch.float64) * torch.ones(D, dtype=torch.float64) / 7
        window, state = get()
        if window is None:
            window = torch.zeros(h.shape[0], D, K, dtype=h.dtype)
            state = torch.zeros(h.shape[0], D, 1, dtype=h.dtype)
        y, window, state = step(window, state, h, self.w)
        put(window, state)
        return y


class ModelNew(ModelBase):  # 5.5 on: builds its DynamicCache-like cache itself, returns it
    def forward(self, input_ids, attention_mask=None, cache=None, use_cache=None, **kwargs):
        if use_cache and cache is None:
            cache = dynamic_cache(IndexedLayer)()
        lay = cache.layers[0] if cache is not None else None
        y = self.run(input_ids, lay.get if lay else (lambda: (None, None)), lay.put if lay else (lambda *a: None))
        return types.SimpleNamespace(logits=y, cache=cache)


class ModelPerModel(ModelBase):  # 4.57 / 5.0 Mamba: a per-model cache handed in, cache_position decides
    def forward(self, input_ids, attention_mask=None, cache_params=None, use_cache=None, cache_position=None):
        self.positions.append(None if cache_position is None else cache_position.tolist())
        primed = cache_params is not None and cache_position[0] > 0

        def put(window, state):
            cache_params.conv_states[0].copy_(window)
            cache_params.ssm_states[0].copy_(state)
        y = self.run(input_ids, (lambda: (cache_params.conv_states[0], cache_params.ssm_states[0])) if primed
                     else (lambda: (None, None)), put if cache_params is not None else (lambda *a: None))
        return types.SimpleNamespace(logits=y, cache_params=cache_params)


class ModelKwargsOnly(ModelNew):  # names no cache argument: a cache handed back would be swallowed
    def forward(self, input_ids, attention_mask=None, use_cache=None, **kwargs):
        return ModelNew.forward(self, input_ids, attention_mask, kwargs.get("cache"), use_cache)


def make_model(model, cache_cls=None):
    be = object.__new__(hf.HFModel)  # HFModel.__init__ builds from the installed transformers; set its result
    be.dtype, be.device, be.tdtype, be.out_dtype = "f64", torch.device("cpu"), torch.float64, torch.float64
    be.model, be.cls, be.hf_config, be.cache_cls = model, type(model), Cfg(), cache_cls
    be.local_mask, be.takes_positions, be.capture, be.layers = True, False, None, [None]
    be.options = types.SimpleNamespace(layers=[("mamba1", (D, K), (D, 1))])
    return be


IDS = np.random.default_rng(3).integers(0, 9, (B, 9))


def check_model_split(be):
    want = be.forward(be.cache_alloc(B), IDS, None)
    c = be.cache_alloc(B)
    y = np.concatenate([be.forward(c, IDS[:, :5], None), be.forward(c, IDS[:, 5:8], None),
                        be.forward(c, IDS[:, 8:], None)], 1)
    np.testing.assert_allclose(y, want, rtol=0, atol=1e-12)
    return c


def test_model_builds_its_own_cache():
    c = check_model_split(make_model(ModelNew()))
    assert isinstance(c.hf.layers[0], IndexedLayer)


def test_model_per_model_cache_and_positions():
    m = ModelPerModel()
    check_model_split(make_model(m, cache_cls=PerModelCache))
    # MambaModel's convention: arange(conv_kernel) on the fresh cache, then the positions after it
    assert m.positions[1:] == [list(range(K)), [K, K + 1, K + 2], [K + 3]], m.positions


def test_model_without_a_cache_argument_is_an_error():
    be = make_model(ModelKwargsOnly())
    c = be.cache_alloc(B)
    be.forward(c, IDS[:, :5], None)  # the first forward: the model builds its cache and returns it
    expect_unbridged(lambda: be.forward(c, IDS[:, 5:], None), "names no cache argument")


# ---- hf-lightning: MiniMaxCache's linear cache, the count beside it, the mask of each release --------------

class LinearCache:  # MiniMaxCache: one state per layer in a list, [] for the layers before it
    def __init__(self):
        self.linear_cache = []

    def set_linear_cache(self, i, s):
        while len(self.linear_cache) <= i:
            self.linear_cache.append([])
        self.linear_cache[i] = s

    def get_linear_cache(self, i):
        return self.linear_cache[i] if i < len(self.linear_cache) else None


class Lightning(torch.nn.Module):  # a decaying sum of the masked inputs, state [B][1][1][D], prefill / loop
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(D))
        self.seen = []

    def forward(self, hidden_states, position_embeddings, attention_mask, past_key_values=None, **kwargs):
        self.seen.append(attention_mask)
        x = hidden_states * self.w
        if attention_mask is not None:
            x = x * attention_mask[:, -x.shape[1]:, None]
        s = past_key_values.get_linear_cache(1) if past_key_values is not None else None
        s = torch.zeros(x.shape[0], 1, 1, D, dtype=x.dtype) if s is None else s
        ys = []
        for t in range(x.shape[1]):
            s = DECAY * s + x[:, t][:, None, None]
            ys.append(s[:, 0, 0])
        if past_key_values is not None:
            past_key_values.set_linear_cache(1, s)
        return torch.stack(ys, 1), s


class IgnoringLightning(Lightning):
    def forward(self, hidden_states, position_embeddings, attention_mask, past_key_values=None, **kwargs):
        return super().forward(hidden_states, position_embeddings, attention_mask, None)


def make_lightning(helper):
    class StandIn(hf.HFLightning):
        name = "standin-lightning"

        def build(self, c):
            self.layer, self.model_helper = 1, helper
            return Cfg(), Lightning()

    opts = Options(conv_shape=(1, 1), state_shape=(1, 1, D), hidden=D)
    return StandIn("lightning", "f64", {}, {"w": np.linspace(0.5, 1.5, D)}, opts)


def test_lightning_cache_count_and_roundtrip():
    saved = hf.MiniMaxCache
    hf.MiniMaxCache = LinearCache
    try:
        be = make_lightning(helper=False)
        want = be.forward(be.cache_alloc(B), X, None)
        c = be.cache_alloc(B)
        mask = np.ones((B, 5), np.uint8)
        mask[1, :2] = 0
        be.forward(c, X[:, :5], mask)
        conv, rec = be.cache_export(c)
        assert conv.reshape(B).tolist() == [5, 3], conv  # the real tokens each row consumed
        c = be.cache_alloc(B)
        y = np.concatenate([be.forward(c, X[:, :5], None), be.forward(c, X[:, 5:], None)], 1)
        np.testing.assert_allclose(y, want, rtol=0, atol=1e-12, err_msg="lightning prefill + continued forward")
        conv, rec = be.cache_export(c)
        c2 = be.cache_import(be.cache_alloc(B), conv, rec)
        np.testing.assert_allclose(be.cache_export(c2)[1], rec, rtol=0, atol=0)
        np.testing.assert_allclose(be.forward(c2, X[:, :1], None)[:, 0], DECAY * rec[:, 0, 0] + X[:, 0] *
                                   np.linspace(0.5, 1.5, D), rtol=0, atol=1e-12, err_msg="after import")
        be.mixer = IgnoringLightning()  # takes the cache, never writes it: an error, not a run without it
        expect_unbridged(lambda: be.forward(be.cache_alloc(B), X[:, :5], None), "without writing")
    finally:
        hf.MiniMaxCache = saved


def test_lightning_mask_of_each_release():
    saved = hf.MiniMaxCache
    hf.MiniMaxCache = LinearCache
    try:
        mask = np.ones((B, 5), np.uint8)
        mask[1, :2] = 0
        # up to 5.14: the model hands the layer generate()'s 2-D mask of every token so far
        be = make_lightning(helper=False)
        c = be.cache_alloc(B)
        be.forward(c, X[:, :5], mask)
        be.forward(c, X[:, 5:7], np.ones((B, 2), np.uint8))
        m0, m1 = be.mixer.seen
        assert m0.tolist() == mask.tolist() and m1.tolist() == np.concatenate([mask, np.ones((B, 2))], 1).tolist()
        # from 5.15: the release's create_recurrent_attention_mask, given the whole 2-D mask
        calls = []

        def create_recurrent_attention_mask(config, inputs_embeds, attention_mask, cache=None, **kwargs):
            calls.append(attention_mask.shape)
            return None if inputs_embeds.shape[1] == 1 else attention_mask[:, -inputs_embeds.shape[1]:]
        hf.masking_utils = types.SimpleNamespace(create_recurrent_attention_mask=create_recurrent_attention_mask)
        be = make_lightning(helper=True)
        c = be.cache_alloc(B)
        be.forward(c, X[:, :5], mask)
        be.forward(c, X[:, 5:6], np.ones((B, 1), np.uint8))
        assert calls == [(B, 5), (B, 6)], calls
        m0, m1 = be.mixer.seen
        assert m0.tolist() == mask.tolist() and m1 is None, (m0, m1)
    finally:
        hf.MiniMaxCache = saved


def main():
    tests = [(n, f) for n, f in sorted(globals().items()) if n.startswith("test_") and callable(f)]
    saved = hf.DynamicCache, hf.masking_utils
    passed = failed = 0
    for n, f in tests:
        try:
            f()
            passed += 1
            print("PASS", n)
        except Exception:
            failed += 1
            print("FAIL", n)
            traceback.print_exc()
        finally:
            hf.DynamicCache, hf.masking_utils = saved
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
