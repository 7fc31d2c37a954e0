"""hfapi.py — the transformers release in use, by feature detection: how hf.py calls its mixers and models.

transformers renamed and reshaped the API hf.py drives between 4.57 and today, and never in a way a
version number tells reliably. Everything here is read off the installed objects instead (signatures,
attributes), never off ``transformers.__version__``:

- **the cache argument** of a mixer's or a model's ``forward``: ``cache`` (5.24), ``cache_params``
  (Mamba, Mamba2, Gated DeltaNet up to 5.23) or ``past_key_values`` (ShortConv, attention, the hybrid
  models up to 5.23) — the first of these the signature *names*. A forward that only has ``**kwargs``
  would swallow ``cache=`` and run with no cache at all, so a cache that cannot be passed by name is an
  error (:class:`Unbridged`), never dropped;
- **``cache_position``** (up to 5.0 the mixers decide prefill / decode from ``cache_position[0] > 0``):
  passed whenever the forward names it;
- **the recurrent mask**: ``masking_utils.create_recurrent_attention_mask`` from 5.14; before it a
  stand-in with the rule the models' own helpers applied (``_update_linear_attn_mask``,
  ``_update_mamba_mask``: no mask on a primed cache or for an all-ones mask);
- **the cache layouts**: the per-model cache classes of 4.57 / 5.0 (``Mamba2Cache``, ``MambaCache``,
  ``Qwen3NextDynamicCache``, ``Lfm2HybridConvCache``, ``HybridMambaAttentionDynamicCache``), the
  ``DynamicCache`` linear-attention layers of 5.5–5.12 (one tensor per layer, ``has_previous_state`` a
  bool) and of 5.14 on (a dict of states per layer, ``has_previous_state`` a dict);
- **``create_causal_mask``**'s argument names (``input_embeds`` / ``inputs_embeds``, ``cache_position``,
  ``past_key_values`` / ``cache``).

And one assertion that no bridging can satisfy by accident: :func:`snapshot` / :func:`touched` record
every tensor a cache holds (object, version counter, shape) before a cached forward, and a forward that
leaves them all as they were did not use the cache it was given — that check is an error too.

The functions take the classes and modules they inspect as arguments, so tests/python/test_hf_bridge.py
drives them with stand-ins of every API shape without any release installed.
"""

import inspect

import torch

#: the names transformers has given a forward's cache argument, newest first
CACHE_NAMES = ("cache", "cache_params", "past_key_values")


class Unbridged(Exception):
    """The installed transformers cannot be driven the way the check asks (a cache, mask or position it
    would silently drop): the check is an error with this reason, never a run without it."""


def _signature(fn):
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def _generic(sig):
    """A signature of nothing but ``*args, **kwargs`` (and self): a wrapper's."""
    return sig is not None and all(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or n == "self"
                                   for n, p in sig.parameters.items())


def unwrapped(fn):
    """The function a decorator wraps: ``__wrapped__`` where the decorator sets it, else, for a wrapper whose
    signature is only ``*args, **kwargs`` (5.14's ``force_accelerate_hooks`` sets no ``__wrapped__``), the
    function its closure holds, preferring one of the same name as the attribute it stands for."""
    name = getattr(fn, "__name__", None)
    for _ in range(5):
        fn = inspect.unwrap(fn)
        if not _generic(_signature(fn)):
            return fn
        f = getattr(fn, "__func__", fn)
        inner = [c.cell_contents for c in (getattr(f, "__closure__", None) or ()) if inspect.isfunction(c.cell_contents)]
        if not inner:
            return fn
        fn = next((g for g in inner if g.__name__ == name), inner[0])
    return fn


def named_params(fn):
    """The parameters ``fn`` names (not ``self``, ``*args``, ``**kwargs``), seen through decorators."""
    sig = _signature(unwrapped(fn))
    if sig is None:
        return {}
    keep = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return {n: p for n, p in sig.parameters.items() if p.kind in keep and n != "self"}


def cache_name(fn):
    """The name ``fn`` gives its cache argument, or None when it names none of :data:`CACHE_NAMES`."""
    names = named_params(fn)
    return next((n for n in CACHE_NAMES if n in names), None)


def forward_kwargs(fn, what, cache=None, cache_position=None, **named):
    """The keyword arguments for ``fn``: the cache under the name the release gives it, ``cache_position``
    where ``fn`` names it, and every other argument by its own name. A cache, or any other non-None
    argument, that ``fn`` does not name raises :class:`Unbridged` (``what`` names the callee)."""
    names = named_params(fn)
    kw = {}
    if cache is not None:
        name = cache_name(fn)
        if name is None:
            raise Unbridged("%s names no cache argument (%s); passing one through **kwargs would run it "
                            "without the cache" % (what, " / ".join(CACHE_NAMES)))
        kw[name] = cache
    if "cache_position" in names and cache is not None:
        if cache_position is None:
            raise Unbridged("%s takes cache_position and none was computed" % what)
        kw["cache_position"] = cache_position
    for k, v in named.items():
        if v is None:
            continue
        if k not in names:
            raise Unbridged("%s takes no %s" % (what, k))
        kw[k] = v
    return kw


# ---- did the forward use its cache ----------------------------------------------------------------------

def _tensors(obj, path, out, depth, seen):
    if isinstance(obj, torch.Tensor):
        out.append((path, obj))
        return
    if depth == 0 or id(obj) in seen or isinstance(obj, (str, bytes, int, float, bool, type(None))):
        return
    if isinstance(obj, torch.nn.Module):
        return
    seen.add(id(obj))
    if isinstance(obj, dict):
        items = obj.items()
    elif isinstance(obj, (list, tuple)):
        items = enumerate(obj)
    elif hasattr(obj, "__dict__"):
        items = vars(obj).items()
    else:
        return
    for k, v in list(items):
        _tensors(v, path + (k,), out, depth - 1, seen)


def snapshot(cache):
    """Every tensor ``cache`` holds (through attributes, lists and dicts, 5 levels deep), with its version
    counter and shape. The snapshot keeps the tensors alive, so a replaced one cannot reuse its id."""
    out = []
    _tensors(cache, (), out, 5, set())
    return {p: (t, t._version, tuple(t.shape)) for p, t in out}


def touched(before, cache):
    """Whether ``cache`` changed since ``before`` (a tensor added, removed, replaced, resized or written
    in place)."""
    after = snapshot(cache)
    if set(after) != set(before):
        return True
    for p, (t, version, shape) in after.items():
        t0, v0, s0 = before[p]
        if t is not t0 or version != v0 or shape != s0:
            return True
    return False


def check_used(before, cache, what):
    if not touched(before, cache):
        raise Unbridged("%s returned without writing the cache it was given (no cached tensor changed): "
                        "this transformers' forward does not take the cache the way it was passed" % what)


# ---- the recurrent mask -----------------------------------------------------------------------------------

def recurrent_mask(masking_utils, config, h, mask, cache, primed):
    """The 2-D mask a recurrent mixer gets, the way the release's models build it: its own
    ``create_recurrent_attention_mask`` where it has one (5.14 on; its cache argument by the name it
    gives it), else the rule of the model helpers it replaced (Qwen3-Next / Qwen3.5
    ``_update_linear_attn_mask``, Bamba ``_update_mamba_mask``, 4.57–5.12): none on a primed cache or for
    an all-ones mask, else this forward's mask."""
    helper = getattr(masking_utils, "create_recurrent_attention_mask", None)
    if helper is not None:
        names = named_params(helper)
        kw = {"config": config, "attention_mask": mask}
        kw["inputs_embeds" if "inputs_embeds" in names else "input_embeds"] = h
        cname = cache_name(helper)
        if cname is not None:
            kw[cname] = cache
        return helper(**kw)
    if mask is None or primed or bool(torch.all(mask == 1)):
        return None
    return mask[:, -h.shape[1]:]


def causal_mask(masking_utils, config, h, mask, cache, position_ids, cache_position):
    """``create_causal_mask`` with the argument names of the installed release."""
    fn = masking_utils.create_causal_mask
    names = named_params(fn)
    kw = {"config": config, "attention_mask": mask, "position_ids": position_ids}
    kw["inputs_embeds" if "inputs_embeds" in names else "input_embeds"] = h
    if "cache_position" in names:
        kw["cache_position"] = cache_position
    cname = cache_name(fn)
    if cname is None:
        raise Unbridged("create_causal_mask names no cache argument")
    kw[cname] = cache
    return fn(**kw)


# ---- cache layouts --------------------------------------------------------------------------------------

def new_cache(cls, config, batch, dtype, device):
    """A cache of class ``cls`` built the way the release's model builds it: ``cls(config=...)``, with the
    batch size (``batch_size`` / ``max_batch_size``), dtype and device where its constructor takes them."""
    names = named_params(cls.__init__)
    kw = {"config": config}
    for n in ("batch_size", "max_batch_size"):
        if n in names:
            kw[n] = batch
    if "dtype" in names:
        kw["dtype"] = dtype
    if "device" in names:
        kw["device"] = device
    return cls(**kw)


def _per_model(cache, names):
    """The first of ``names`` that ``cache`` has (a per-model cache's per-layer list or stacked tensor)."""
    return next((getattr(cache, n) for n in names if getattr(cache, n, None) is not None), None)


CONV_NAMES = ("conv_states", "conv_cache")
REC_NAMES = ("ssm_states", "recurrent_states")


def layer_states(cache, i):
    """Layer ``i``'s cached tensors as ``{"conv", "rec", "keys", "values"}`` (each None where the layer has
    not written it), from whichever layout the cache has."""
    layers = getattr(cache, "layers", None)
    out = {"conv": None, "rec": None, "keys": None, "values": None}
    if isinstance(layers, (list, tuple)):  # DynamicCache: one layer object per model layer
        lay = layers[i]
        if hasattr(lay, "conv_states"):
            conv, rec, prev = lay.conv_states, lay.recurrent_states, lay.has_previous_state
            if isinstance(conv, dict):  # 5.14 on: states by index
                conv, rec, prev = conv.get(0), rec.get(0), prev.get(0)
            if prev:
                out["conv"], out["rec"] = conv, rec
        keys = getattr(lay, "keys", None)
        if isinstance(keys, torch.Tensor) and keys.numel():
            out["keys"], out["values"] = keys, lay.values
        return out
    conv, rec = _per_model(cache, CONV_NAMES), _per_model(cache, REC_NAMES)
    if conv is None and rec is None and getattr(cache, "key_cache", None) is None:
        raise Unbridged("%s: no cache layout known (layers, %s, %s, key_cache)"
                        % (type(cache).__name__, "/".join(CONV_NAMES), "/".join(REC_NAMES)))
    out["conv"] = conv[i] if conv is not None else None
    out["rec"] = rec[i] if rec is not None else None
    keys = getattr(cache, "key_cache", None)
    if keys is not None and len(keys) > i and isinstance(keys[i], torch.Tensor) and keys[i].numel():
        out["keys"], out["values"] = keys[i], cache.value_cache[i]
    return out


def set_layer_states(cache, i, conv, rec):
    """Write layer ``i``'s conv window and recurrent state (None: the family has none) into whichever layout
    the cache has, and mark the layer primed where the layout has a flag for it."""
    layers = getattr(cache, "layers", None)
    if isinstance(layers, (list, tuple)):
        lay = layers[i]
        if not hasattr(lay, "conv_states"):
            raise Unbridged("%s layer %d (%s) holds no conv state" % (type(cache).__name__, i, type(lay).__name__))
        kw = {"conv_states": conv, "recurrent_states": rec}
        if "conv_kernel_size" in named_params(lay.lazy_initialization):
            kw["conv_kernel_size"] = conv.shape[-1]
        lay.lazy_initialization(**kw)
        if isinstance(lay.conv_states, dict):
            lay.conv_states[0].copy_(conv)
            if rec is not None:
                lay.recurrent_states[0].copy_(rec)
            lay.has_previous_state[0] = True
        else:
            lay.conv_states.copy_(conv)
            if rec is not None:
                lay.recurrent_states.copy_(rec)
            lay.has_previous_state = True
        return
    for names, t in ((CONV_NAMES, conv), (REC_NAMES, rec)):
        if t is None:
            continue
        name = next((n for n in names if hasattr(cache, n)), None)
        if name is None:
            raise Unbridged("%s has none of %s" % (type(cache).__name__, "/".join(names)))
        store = getattr(cache, name)
        if isinstance(store, list) and store[i] is None:  # lazily filled (Qwen3NextDynamicCache)
            store[i] = t.clone()
        elif tuple(store[i].shape) != tuple(t.shape):
            raise Unbridged("%s.%s[%d] has shape %s, the import %s" % (type(cache).__name__, name, i,
                                                                       tuple(store[i].shape), tuple(t.shape)))
        else:
            store[i].copy_(t)


def output_cache(res):
    """The cache object a model's forward returned (``cache`` / ``cache_params`` / ``past_key_values``)."""
    for n in CACHE_NAMES:
        c = getattr(res, n, None)
        if c is not None:
            return c
    return None
