"""hf.py — Hugging Face ``transformers`` mixers as mixcheck backends.

    mixcheck run cases/ --python /work/venv/bin/python --python-backend mixcheck_backend.hf

registers seven mixer backends, each wrapping the installed transformers mixer class with transformers' own
cache class (``DynamicCache`` built from the model's config, one linear-attention layer; for attention a
``DynamicCache`` that also keeps the 2-D padding mask, see ``HFAttention``):

    hf-mamba2     Mamba2Mixer              (transformers.models.mamba2)
    hf-mamba      MambaMixer               (transformers.models.mamba)
    hf-gdn        Qwen3NextGatedDeltaNet / Qwen3_5GatedDeltaNet, by the golden's projection_layout
    hf-shortconv  Lfm2ShortConv            (transformers.models.lfm2)
    hf-attention  Qwen3NextAttention (output gate, zero-centred q/k norms), Lfm2Attention (plain RMS
                  q/k norms) or BambaAttention (no q/k norm, biases), by the golden's configuration
    hf-lightning  MiniMaxLightningAttention with MiniMaxCache (transformers.models.minimax)
    hf-kda        KimiLinearDeltaAttention  (transformers.models.kimi_linear, 5.20 on)

and one whole-stack backend (family ``stack``, docs/models.md §7):

    hf-model      the ...ForCausalLM of the case's model_type (Mamba2ForCausalLM, MambaForCausalLM,
                  Lfm2ForCausalLM, BambaForCausalLM, Qwen3_5ForCausalLM), with the model's own cache

The golden's weights are loaded by their HF names with ``load_state_dict(strict=True)``. Each forward
goes the way the HF model sends it: the 2-D padding mask through ``create_recurrent_attention_mask``
(which drops it for single-token forwards and all-ones masks) and then into the mixer with the cache.
The only adaptation is the one docs/semantics.md §A.5 asks of a wrapper: Mamba2's gated-norm group
size is set from the golden's ``norm_group_size`` (where the release's norm has one). Runs on
``--python-device`` (torch device name); host<->device copies happen here. Needs torch and transformers
in the interpreter; they are imported when the module is, so the zygote pays for it once per run.

Every transformers release from 4.57 on is driven through hfapi.py, which reads the release's API off
its signatures and classes (the cache argument's name, ``cache_position``, the per-model cache classes
of 4.57 / 5.0 and the cache-layer layouts after them, the mask helper); what it cannot bridge is the
check's error, and a cached forward that leaves its cache untouched is an error too (hfapi.check_used).
"""

import copy
import importlib
import sys

import numpy as np
import torch
# every transformers module is imported here, not in the methods: the zygote imports this module
# once per run, and each forked worker then starts with them loaded
import transformers
from transformers import DynamicCache
from transformers import masking_utils

from . import hfapi
from .hfapi import Unbridged


def _optional(module, *names):
    """The classes of a model module, or None each where this transformers lacks it (the backend then
    reports its checks unsupported, naming the version)."""
    try:
        mod = importlib.import_module("transformers." + module)
        return [getattr(mod, n) for n in names]
    except (ImportError, AttributeError):
        return [None] * len(names)


Mamba2Config, = _optional("models.mamba2.configuration_mamba2", "Mamba2Config")
Mamba2Mixer, = _optional("models.mamba2.modeling_mamba2", "Mamba2Mixer")
# the per-model cache classes of 4.57 / 5.0, which the models build instead of DynamicCache (None later)
Mamba2Cache, = _optional("models.mamba2.modeling_mamba2", "Mamba2Cache")
MambaCache, = _optional("models.mamba.modeling_mamba", "MambaCache")
Qwen3NextDynamicCache, = _optional("models.qwen3_next.modeling_qwen3_next", "Qwen3NextDynamicCache")
Qwen3_5DynamicCache, = _optional("models.qwen3_5.modeling_qwen3_5", "Qwen3_5DynamicCache")
Lfm2HybridConvCache, = _optional("models.lfm2.modeling_lfm2", "Lfm2HybridConvCache")
MambaConfig, = _optional("models.mamba.configuration_mamba", "MambaConfig")
MambaMixer, = _optional("models.mamba.modeling_mamba", "MambaMixer")
Qwen3NextConfig, = _optional("models.qwen3_next.configuration_qwen3_next", "Qwen3NextConfig")
Qwen3NextGatedDeltaNet, = _optional("models.qwen3_next.modeling_qwen3_next", "Qwen3NextGatedDeltaNet")
Qwen3_5TextConfig, = _optional("models.qwen3_5.configuration_qwen3_5", "Qwen3_5TextConfig")
Qwen3_5GatedDeltaNet, = _optional("models.qwen3_5.modeling_qwen3_5", "Qwen3_5GatedDeltaNet")
Lfm2Config, = _optional("models.lfm2.configuration_lfm2", "Lfm2Config")
Lfm2ShortConv, = _optional("models.lfm2.modeling_lfm2", "Lfm2ShortConv")
Qwen3NextAttention, Qwen3NextRotaryEmbedding = _optional("models.qwen3_next.modeling_qwen3_next",
                                                         "Qwen3NextAttention", "Qwen3NextRotaryEmbedding")
Lfm2Attention, Lfm2RotaryEmbedding = _optional("models.lfm2.modeling_lfm2", "Lfm2Attention", "Lfm2RotaryEmbedding")
MiniMaxConfig, = _optional("models.minimax.configuration_minimax", "MiniMaxConfig")
MiniMaxLightningAttention, MiniMaxCache = _optional("models.minimax.modeling_minimax", "MiniMaxLightningAttention",
                                                    "MiniMaxCache")
KimiLinearConfig, = _optional("models.kimi_linear.configuration_kimi_linear", "KimiLinearConfig")
KimiLinearDeltaAttention, = _optional("models.kimi_linear.modeling_kimi_linear", "KimiLinearDeltaAttention")
BambaConfig, = _optional("models.bamba.configuration_bamba", "BambaConfig")
BambaAttention, BambaRotaryEmbedding = _optional("models.bamba.modeling_bamba", "BambaAttention",
                                                 "BambaRotaryEmbedding")


def _need(what, *classes):
    if any(c is None for c in classes):
        raise Unsupported("transformers %s has no %s" % (transformers.__version__, what))


from . import Backend, Invalid, StackBackend, Unsupported  # noqa: E402

TORCH_DTYPES = {"f64": torch.float64, "f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def _expand(inter, hidden):
    """HF derives intermediate_size as int(expand * hidden_size); its config validates expand as an int."""
    return inter // hidden if inter % hidden == 0 else 1


def _set_expand(cfg, inter, hidden):
    """A fractional expand (e.g. 48 / 32) the config's validation refuses: set past it, so that the mixer
    derives the golden's intermediate size."""
    if inter % hidden:
        object.__setattr__(cfg, "expand", inter / hidden)


class _HF(Backend):
    dtypes = ("f64", "f32", "f16", "bf16")
    #: state_dict() buffers the module computes itself and the checkpoint does not carry
    computed_buffers = ()

    def __init__(self, family, dtype, config, weights, options):
        super().__init__(family, dtype, config, weights, options)
        # one thread unless asked: a run already has a worker per check in parallel (-j)
        torch.set_num_threads(options.threads if options.threads > 0 else 1)
        self.device = torch.device(options.device)
        self.tdtype = TORCH_DTYPES[dtype]
        self.hf_config, self.mixer = self.build(config)
        self.mixer.eval()
        state = {k: self.tensor(v) for k, v in weights.items()}
        # buffers the module computes from its configuration (lightning's slope and decay tables): its own
        for k, b in self.mixer.named_buffers():
            if k in self.computed_buffers and k not in state:
                state[k] = b
        self.mixer.load_state_dict(state, strict=True)
        self.mixer.to(device=self.device, dtype=self.tdtype)

    # ---- helpers -------------------------------------------------------------------------------
    def tensor(self, a):
        """numpy (bf16 as uint16 bits) -> torch on the device, in the model dtype."""
        t = torch.from_numpy(np.ascontiguousarray(a))
        if self.dtype == "bf16" and a.dtype == np.uint16:
            t = t.view(torch.int16).view(torch.bfloat16)
        return t.to(self.device)

    def numpy_out(self, t):
        t = t.detach().to("cpu")
        if self.dtype == "bf16":
            return t.contiguous().view(torch.int16).numpy().view(np.uint16)
        return t.numpy()

    @staticmethod
    def state_numpy(t):
        return t.detach().to("cpu").float().numpy() if t.dtype != torch.float64 else t.detach().cpu().numpy()

    # ---- the cache: the release's own class and layout (hfapi) ---------------------------------------
    #: the per-model cache class the release's model builds (4.57 / 5.0), set by build(); None: DynamicCache
    cache_cls = None
    #: the cache_position of a fresh cache's first forward where the mixer takes one: "tokens" (arange(L),
    #: generate()'s) or "conv_kernel" (arange(conv_kernel), what MambaModel / Mamba2Model pass, whose
    #: Mamba1 mixer tells its prefill by that length)
    fresh_positions = "tokens"

    def cache_config(self):
        """The config the cache is built from (the mixer's, unless a per-model cache needs more layers)."""
        return self.hf_config

    def cache_alloc(self, batch):
        if self.cache_cls is not None:
            cache = hfapi.new_cache(self.cache_cls, self.cache_config(), batch, self.tdtype, self.device)
        else:
            cache = DynamicCache(config=self.cache_config())
            lay = cache.layers[0] if isinstance(getattr(cache, "layers", None), list) and cache.layers else None
            if lay is None or not hasattr(lay, "conv_states"):
                raise Unbridged("transformers %s: DynamicCache(config) has no recurrent layer for this mixer and the "
                                "model module no cache class of its own" % transformers.__version__)
        cache._mixcheck_batch = batch  # HF's layers learn it at the first forward; an export may come first
        cache._mixcheck_next = 0       # the next forward's first cache_position; 0: nothing cached yet
        return cache

    def cache_copy(self, cache):
        return copy.deepcopy(cache)

    def cache_export(self, cache):
        st = hfapi.layer_states(cache, 0)
        B = getattr(cache, "_mixcheck_batch", None)
        written = cache._mixcheck_next > 0
        conv_np = self.state_numpy(st["conv"]) if written and st["conv"] is not None else None
        rec_np = self.state_numpy(st["rec"]) if written and st["rec"] is not None else None
        if conv_np is None:  # nothing written yet: the zero window
            conv_np = np.zeros((B,) + self.options.conv_shape)
        if self.options.state_shape and rec_np is None:
            rec_np = np.zeros((B,) + self.options.state_shape)
        return conv_np, (rec_np if self.options.state_shape else None)

    def cache_import(self, cache, conv_state, recurrent_state):
        conv = torch.from_numpy(np.array(conv_state)).to(self.device, self.tdtype)
        rec = None
        if recurrent_state is not None:  # HF keeps its recurrent state in f32 (f64 for an f64 model)
            rec = torch.from_numpy(np.array(recurrent_state)).to(self.device, self.state_dtype())
        hfapi.set_layer_states(cache, 0, conv, rec)
        # a primed cache: its next forward continues it (any cache_position past the window)
        cache._mixcheck_next = max(cache._mixcheck_next, conv.shape[-1])
        return cache

    def state_dtype(self):
        return torch.float64 if self.dtype == "f64" else torch.float32

    def positions(self, cache, L):
        start = cache._mixcheck_next
        n = self.hf_config.conv_kernel if start == 0 and self.fresh_positions == "conv_kernel" else L
        return torch.arange(start, start + n, device=self.device)

    def forward(self, cache, x, mask):
        with torch.no_grad():
            h = self.tensor(x)
            m = None
            if mask is not None:
                m = hfapi.recurrent_mask(masking_utils, self.hf_config, h,
                                         torch.from_numpy(np.array(mask, np.int64)).to(self.device), cache,
                                         primed=cache is not None and cache._mixcheck_next > 0)
            what = type(self.mixer).__name__ + ".forward"
            pos = self.positions(cache, h.shape[1]) if cache is not None else None
            kw = hfapi.forward_kwargs(self.mixer.forward, what, cache=cache, cache_position=pos, attention_mask=m)
            before = hfapi.snapshot(cache) if cache is not None else None
            y = self.mixer(h, **kw)
            if cache is not None:
                hfapi.check_used(before, cache, what)
                cache._mixcheck_next = int(pos[-1]) + 1
        return self.numpy_out(y)


class HFMamba2(_HF):
    name = "hf-mamba2"
    family = "mamba2"
    fresh_positions = "conv_kernel"

    def build(self, c):
        for key in ("no_gated_norm", "norm_before_gate"):   # FalconH1Mixer's norm options: not bridged yet
            if c.get(key):
                raise Unsupported("the mamba2 option %s=%d (FalconH1) is not bridged to a transformers mixer class"
                                  % (key, c[key]))
        _need("Mamba2Mixer", Mamba2Config, Mamba2Mixer)
        inter = c["num_heads"] * c["head_dim"]
        heads = c["num_heads"]
        if inter % c["hidden_size"]:  # validated as hidden_size * int(expand) == num_heads * head_dim
            if c["hidden_size"] % c["head_dim"]:
                raise Unsupported("Mamba2Config cannot hold intermediate size %d with hidden_size %d"
                                  % (inter, c["hidden_size"]))
            heads = c["hidden_size"] // c["head_dim"]
        cfg = Mamba2Config(hidden_size=c["hidden_size"], num_heads=heads, head_dim=c["head_dim"],
                           state_size=c["state_size"], n_groups=c["n_groups"], conv_kernel=c["conv_kernel"],
                           chunk_size=c["chunk_size"], layer_norm_epsilon=c["layer_norm_epsilon"],
                           time_step_limit=tuple(c["time_step_limit"]), use_bias=c["use_bias"],
                           use_conv_bias=c["use_conv_bias"], expand=_expand(inter, c["hidden_size"]),
                           num_hidden_layers=1, vocab_size=8)
        _set_expand(cfg, inter, c["hidden_size"])
        object.__setattr__(cfg, "num_heads", c["num_heads"])
        mixer = Mamba2Mixer(cfg, layer_idx=0)
        if mixer.intermediate_size != inter:
            raise Unsupported("Mamba2Mixer derives intermediate_size %d from expand, the golden has %d"
                              % (mixer.intermediate_size, inter))
        # docs/semantics.md §A.5; a release whose gated norm has no group size (up to 5.22) normalises the
        # whole row, and a golden with n_groups > 1 shows it
        if hasattr(mixer.norm, "group_size"):
            mixer.norm.group_size = c["norm_group_size"]
        self.cache_cls = Mamba2Cache
        return cfg, mixer


class HFMamba(_HF):
    name = "hf-mamba"
    family = "mamba1"
    fresh_positions = "conv_kernel"

    def build(self, c):
        if c.get("inner_norms"):   # FalconMambaMixer's / JambaMambaMixer's inner norms: not bridged yet
            raise Unsupported("the mamba1 option inner_norms=%d (FalconMamba, Jamba) is not bridged to a transformers "
                              "mixer class" % c["inner_norms"])
        _need("MambaMixer", MambaConfig, MambaMixer)
        cfg = MambaConfig(hidden_size=c["hidden_size"], state_size=c["state_size"], conv_kernel=c["conv_kernel"],
                          expand=_expand(c["intermediate_size"], c["hidden_size"]), time_step_rank=c["time_step_rank"],
                          use_bias=c["use_bias"], use_conv_bias=c["use_conv_bias"], num_hidden_layers=1,
                          vocab_size=8)
        _set_expand(cfg, c["intermediate_size"], c["hidden_size"])
        mixer = MambaMixer(cfg, layer_idx=0)
        if mixer.intermediate_size != c["intermediate_size"]:
            raise Unsupported("MambaMixer derives intermediate_size %d from expand, the golden has %d"
                              % (mixer.intermediate_size, c["intermediate_size"]))
        self.cache_cls = MambaCache
        return cfg, mixer


class HFGatedDeltaNet(_HF):
    name = "hf-gdn"
    family = "gdn"

    def build(self, c):
        kw = dict(hidden_size=c["hidden_size"], linear_num_key_heads=c["linear_num_key_heads"],
                  linear_num_value_heads=c["linear_num_value_heads"], linear_key_head_dim=c["linear_key_head_dim"],
                  linear_value_head_dim=c["linear_value_head_dim"],
                  linear_conv_kernel_dim=c["linear_conv_kernel_dim"], rms_norm_eps=c["rms_norm_eps"],
                  num_hidden_layers=1, layer_types=["linear_attention"], vocab_size=8, num_attention_heads=2,
                  num_key_value_heads=1, head_dim=8)
        if c["projection_layout"] == "qwen3_next":
            _need("Qwen3NextGatedDeltaNet", Qwen3NextConfig, Qwen3NextGatedDeltaNet)
            cfg = Qwen3NextConfig(**kw)
            self.cache_cls = Qwen3NextDynamicCache
            return cfg, Qwen3NextGatedDeltaNet(cfg, layer_idx=0)
        _need("Qwen3_5GatedDeltaNet", Qwen3_5TextConfig, Qwen3_5GatedDeltaNet)
        cfg = Qwen3_5TextConfig(**kw)
        self.cache_cls = Qwen3_5DynamicCache
        return cfg, Qwen3_5GatedDeltaNet(cfg, layer_idx=0)


class HFShortConv(_HF):
    name = "hf-shortconv"
    family = "shortconv"

    def build(self, c):
        _need("Lfm2ShortConv", Lfm2Config, Lfm2ShortConv)
        cfg = Lfm2Config(hidden_size=c["hidden_size"], conv_L_cache=c["conv_L_cache"], conv_bias=c["conv_bias"],
                         num_hidden_layers=1, layer_types=["conv"], vocab_size=8, num_attention_heads=2,
                         num_key_value_heads=1, intermediate_size=16)
        self.cache_cls = Lfm2HybridConvCache
        return cfg, Lfm2ShortConv(cfg, layer_idx=0)

    def cache_config(self):
        if self.cache_cls is None:
            return self.hf_config
        # Lfm2HybridConvCache (4.57 / 5.0) counts positions from its first attention layer: give it one,
        # after the conv layer 0 the mixer uses
        cfg = copy.deepcopy(self.hf_config)
        object.__setattr__(cfg, "layer_types", ["conv", "full_attention"])
        object.__setattr__(cfg, "num_hidden_layers", 2)
        return cfg


class HFKda(_HF):
    """Kimi Delta Attention (docs/semantics.md §14) through ``KimiLinearDeltaAttention`` and the
    ``DynamicCache`` a ``KimiLinearConfig`` of one linear-attention layer builds (its conv window ``[C][K]``
    and state ``[H][d][d]``, the layouts mixcheck exports)."""
    name = "hf-kda"
    family = "kda"

    def build(self, c):
        _need("KimiLinearDeltaAttention (Kimi-Linear, transformers 5.20 on)", KimiLinearConfig,
              KimiLinearDeltaAttention)
        cfg = KimiLinearConfig(hidden_size=c["hidden_size"], num_hidden_layers=1, layer_types=["linear_attention"],
                               mlp_layer_types=["dense"],
                               linear_attn_config={"head_dim": c["linear_head_dim"], "num_heads": c["linear_num_heads"],
                                                   "short_conv_kernel_size": c["linear_conv_kernel_dim"]},
                               rms_norm_eps=c["rms_norm_eps"], hidden_act="silu", vocab_size=8,
                               num_attention_heads=2, num_key_value_heads=2)
        mixer = KimiLinearDeltaAttention(cfg, 0)
        if (mixer.num_heads, mixer.head_dim, mixer.conv_kernel_size) != \
                (c["linear_num_heads"], c["linear_head_dim"], c["linear_conv_kernel_dim"]):
            raise Unsupported("KimiLinearDeltaAttention derives heads %d, head_dim %d, conv kernel %d from its "
                              "config, the golden has %d, %d, %d"
                              % (mixer.num_heads, mixer.head_dim, mixer.conv_kernel_size, c["linear_num_heads"],
                                 c["linear_head_dim"], c["linear_conv_kernel_dim"]))
        return cfg, mixer

    def state_dtype(self):
        # the module writes its state back as float32 whatever the model dtype (update_recurrent_state(....to(
        # torch.float32))): an imported state is held the same way
        return torch.float32


class _LinearCache:
    """A ``MiniMaxCache`` (the linear cache: one ``[B][H][hd][hd]`` state per lightning layer, ``[]`` for
    the layers before it) and beside it the count of real tokens each row has consumed: mixcheck's
    ``conv_state [B][1][1]`` (docs/semantics.md §13.4), which HF does not keep. Each forward adds its mask's
    real tokens; an import sets it."""

    def __init__(self, hf, batch):
        self.hf = hf
        self.batch = batch
        self.counts = np.zeros(batch)
        self.seen = None   # [B][T] int64: the 2-D mask of every token so far, as generate() grows it
        self.next_pos = 0  # the next cache_position (4.57's forward takes one; the module does not read it)


class HFLightning(_HF):
    """Lightning attention (docs/semantics.md §13) through ``MiniMaxLightningAttention``, the golden's layer
    ``layer_idx`` of ``num_hidden_layers`` (the slopes depend on both), with ``MiniMaxCache``: the cache
    ``MiniMaxModel`` builds itself (``MiniMaxCache()``, every release). The mask is the one the model passes
    its linear-attention layers: from 5.15 ``create_recurrent_attention_mask`` (the model module imports it),
    before that the 2-D mask of every token so far itself (the module reads it only in its prefill branch)."""
    name = "hf-lightning"
    family = "lightning"
    computed_buffers = ("slope_rate", "query_decay", "key_decay", "diagonal_decay")

    def build(self, c):
        _need("MiniMaxLightningAttention", MiniMaxConfig, MiniMaxLightningAttention, MiniMaxCache)
        n, layer, hd = c["num_hidden_layers"], c["layer_idx"], c["head_dim"]
        types = ["full_attention"] * n
        types[layer] = "linear_attention"
        # the config validates RoPE for its softmax layers, which wants an even head_dim; lightning attention
        # has no RoPE, so an odd head_dim is set past the validation
        cfg = MiniMaxConfig(hidden_size=c["hidden_size"], num_attention_heads=c["num_attention_heads"],
                            num_key_value_heads=c["num_attention_heads"], head_dim=hd + hd % 2,
                            block_size=c["block_size"], num_hidden_layers=n, layer_types=types, hidden_act="silu",
                            vocab_size=8, intermediate_size=8, num_local_experts=1, num_experts_per_tok=1)
        object.__setattr__(cfg, "head_dim", hd)
        mixer = MiniMaxLightningAttention(cfg, layer)
        if mixer.head_dim != hd or mixer.block_size != c["block_size"]:
            raise Unsupported("MiniMaxLightningAttention derives head_dim %d, block_size %d, the golden has %d, %d"
                              % (mixer.head_dim, mixer.block_size, hd, c["block_size"]))
        # upstream's output norm has a fixed eps (MiniMaxRMSNorm's default): another one it cannot express
        if mixer.norm.variance_epsilon != c["norm_eps"]:
            raise Unsupported("MiniMaxLightningAttention's norm eps is %g (fixed), the golden's %g"
                              % (mixer.norm.variance_epsilon, c["norm_eps"]))
        self.layer = layer
        # whether MiniMaxModel builds its linear layers' mask with the release's helper (5.15 on)
        self.model_helper = hasattr(sys.modules[MiniMaxLightningAttention.__module__],
                                    "create_recurrent_attention_mask")
        return cfg, mixer

    def cache_alloc(self, batch):
        return _LinearCache(MiniMaxCache(), batch)

    def model_mask(self, cache, h, mask):
        """The mask MiniMaxModel hands this layer for a forward of ``mask`` ([B][L], None: all real), and the
        2-D mask of every token so far after it."""
        B, L = h.shape[0], h.shape[1]
        cur = torch.ones((B, L), dtype=torch.int64, device=self.device) if mask is None else \
            torch.from_numpy(np.array(mask, np.int64)).to(self.device)
        past = cache.seen if cache is not None and cache.seen is not None else \
            torch.zeros((B, 0), dtype=torch.int64, device=self.device)
        full = torch.cat([past, cur], dim=1)
        if self.model_helper:
            m = hfapi.recurrent_mask(masking_utils, self.hf_config, h, full, cache.hf if cache is not None else None,
                                     primed=cache is not None and self.state(cache) is not None)
        else:  # up to 5.14 the model passes generate()'s attention_mask as it is
            m = None if mask is None and past.shape[1] == 0 else full
        return m, full

    def state(self, cache):
        s = cache.hf.get_linear_cache(self.layer)
        return s if isinstance(s, torch.Tensor) else None

    def cache_export(self, cache):
        s = self.state(cache)
        rec = self.state_numpy(s) if s is not None else np.zeros((cache.batch,) + self.options.state_shape)
        return cache.counts.reshape(cache.batch, 1, 1).copy(), rec

    def cache_import(self, cache, conv_state, recurrent_state):
        # the linear cache in the model dtype: what the module's prefill allocates and its cached loop keeps
        s = torch.from_numpy(np.array(recurrent_state)).to(self.device, self.tdtype)
        cache.hf.set_linear_cache(self.layer, s)
        cache.counts = np.array(conv_state, np.float64).reshape(cache.batch).copy()
        cache.next_pos = max(cache.next_pos, 1)
        # the mask history of a cache that held counts[b] real tokens (right-aligned; rounded to whole tokens)
        n = np.clip(np.nan_to_num(cache.counts), 0, 1 << 20).astype(np.int64)
        T = int(n.max()) if cache.batch else 0
        seen = np.zeros((cache.batch, T), np.int64)
        for b in range(cache.batch):
            seen[b, T - n[b]:] = 1
        cache.seen = torch.from_numpy(seen).to(self.device)
        return cache

    def forward(self, cache, x, mask):
        with torch.no_grad():
            h = self.tensor(x)
            B, L = h.shape[0], h.shape[1]
            hf = cache.hf if cache is not None else None
            m, full = self.model_mask(cache, h, mask)
            what = type(self.mixer).__name__ + ".forward"
            pos = torch.arange(cache.next_pos, cache.next_pos + L, device=self.device) if cache is not None else None
            kw = hfapi.forward_kwargs(self.mixer.forward, what, cache=hf, cache_position=pos)
            names = hfapi.named_params(self.mixer.forward)
            for k in ("position_embeddings", "attention_mask"):
                if k not in names:
                    raise Unbridged("%s takes no %s" % (what, k))
            kw.update(position_embeddings=None, attention_mask=m)  # no RoPE in a lightning layer
            before = hfapi.snapshot(hf) if hf is not None else None
            y = self.mixer(h, **kw)[0]
            if cache is not None:
                hfapi.check_used(before, hf, what)
                cache.next_pos += L
                cache.seen = full
                cache.counts += np.ones(B) * L if mask is None else np.array(mask, np.float64).sum(axis=1)
        return self.numpy_out(y)


class _KVCache(DynamicCache):
    """transformers' ``DynamicCache`` (one full-attention layer) plus what an HF caller keeps beside it:
    the 2-D padding mask of every token the cache has seen (``generate`` grows ``attention_mask`` the
    same way). HF stores a padding token's key and value in a slot and masks it; mixcheck's export
    (docs/semantics.md §12.5) holds only the real tokens, so export gathers the unmasked slots of each
    row and import lays a row's n keys out in slots 0..n-1 with the rest masked."""

    def __init__(self, batch):
        super().__init__()
        self.batch = batch
        self.seen = None  # [B][T] int64, 1 real, 0 padding; None before any token

    def length(self):
        return 0 if self.seen is None else self.seen.shape[1]


class HFAttention(_HF):
    """The attention family (docs/semantics.md §12) through the transformers attention class closest to
    the golden's configuration, called the way the HF model calls it: position embeddings from the
    model's rotary class at ``position_ids`` = the running count of real tokens (``generate``'s
    ``cumsum(attention_mask) - 1``, pads at 1), the 4-D mask from ``create_causal_mask`` over the
    cache's mask history and this slice's, and the eager attention path."""
    name = "hf-attention"
    family = "attention"

    def build(self, c):
        gate, norm, bias = c["attn_output_gate"], c["qk_norm"], c["attention_bias"]
        if c.get("kv_lora_rank"):   # MLA (KimiLinearAttention): not bridged yet
            raise Unsupported("the MLA option (kv_lora_rank=%d) is not bridged to a transformers attention class"
                              % c["kv_lora_rank"])
        if c.get("no_rope") or c.get("softmax_scale"):   # GraniteMoeHybridAttention's options: not bridged yet
            raise Unsupported("the attention options no_rope=%d / softmax_scale=%g are not bridged to a transformers "
                              "attention class" % (c.get("no_rope", 0), c.get("softmax_scale", 0.0)))
        rope = {"rope_type": "default", "rope_theta": c["rope_theta"],
                "partial_rotary_factor": c["partial_rotary_factor"]}
        kw = dict(hidden_size=c["hidden_size"], num_attention_heads=c["num_attention_heads"],
                  num_key_value_heads=c["num_key_value_heads"], head_dim=c["head_dim"], num_hidden_layers=1,
                  vocab_size=8, rope_parameters=rope)
        if gate and norm == "zero_centred" and not bias:
            _need("Qwen3NextAttention", Qwen3NextConfig, Qwen3NextAttention, Qwen3NextRotaryEmbedding)
            cfg = Qwen3NextConfig(rms_norm_eps=c["rms_norm_eps"], layer_types=["full_attention"], **kw)
            make, rot = Qwen3NextAttention, Qwen3NextRotaryEmbedding
        elif not gate and norm == "rms" and not bias:
            _need("Lfm2Attention", Lfm2Config, Lfm2Attention, Lfm2RotaryEmbedding)
            cfg = Lfm2Config(norm_eps=c["rms_norm_eps"], layer_types=["full_attention"], **kw)
            make, rot = Lfm2Attention, Lfm2RotaryEmbedding  # its checkpoint names: _renamed
        elif not gate and norm == "none":
            _need("BambaAttention", BambaConfig, BambaAttention, BambaRotaryEmbedding)
            cfg = BambaConfig(attention_bias=bool(bias), attn_layer_indices=[0], mamba_n_heads=1, mamba_n_groups=1, **kw)
            make, rot = BambaAttention, BambaRotaryEmbedding
        else:
            raise Unsupported("no transformers attention class has attn_output_gate=%d with qk_norm %s and "
                              "attention_bias=%d" % (gate, norm, bias))
        # set past what a config's __post_init__ hard-codes (Bamba: partial_rotary_factor 0.5)
        if "rope_parameters" in hfapi.named_params(type(cfg).__init__):
            cfg.rope_parameters = dict(cfg.rope_parameters or {}, **rope)
        else:  # 4.57: the rotary classes read rope_theta and partial_rotary_factor off the config
            object.__setattr__(cfg, "rope_theta", c["rope_theta"])
            object.__setattr__(cfg, "partial_rotary_factor", c["partial_rotary_factor"])
        object.__setattr__(cfg, "head_dim", c["head_dim"])
        cfg._attn_implementation = "eager"
        self.rotary = rot(cfg)
        mod = make(cfg, layer_idx=0)
        if mod.head_dim != c["head_dim"]:
            raise Unsupported("%s derives head_dim %d, the golden has %d" % (make.__name__, mod.head_dim,
                                                                            c["head_dim"]))
        return cfg, mod

    def __init__(self, family, dtype, config, weights, options):
        super().__init__(family, dtype, config, self._renamed(config, weights), options)
        self.rotary.to(device=self.device)
        self.lmax = config["cache_length"]

    def _renamed(self, config, weights):
        # the renames depend on the class build() picks; decide them the same way here
        gate, norm = config["attn_output_gate"], config["qk_norm"]
        if gate or norm != "rms":
            return weights
        ren = {"o_proj.": "out_proj.", "q_norm.": "q_layernorm.", "k_norm.": "k_layernorm."}
        out = {}
        for k, v in weights.items():
            for a, b in ren.items():
                if k.startswith(a):
                    k = b + k[len(a):]
            out[k] = v
        return out

    def cache_alloc(self, batch):
        return _KVCache(batch)

    def cache_copy(self, cache):
        return copy.deepcopy(cache)

    def cache_export(self, cache):
        B = cache.batch
        hkv2, lmax, hd = self.options.state_shape
        counts = np.zeros((B, 1, 1))
        kv = np.zeros((B, hkv2, lmax, hd))
        if cache.length() == 0:
            return counts, kv
        st = hfapi.layer_states(cache, 0)
        keys, values = self.state_numpy(st["keys"]), self.state_numpy(st["values"])  # [B][Hkv][T][hd]
        seen = cache.seen.cpu().numpy()
        for b in range(B):
            real = np.nonzero(seen[b])[0]
            if len(real) > lmax:
                raise Invalid("row %d holds %d positions, the cache %d" % (b, len(real), lmax))
            counts[b, 0, 0] = len(real)
            kv[b, :hkv2 // 2, :len(real)] = keys[b][:, real]
            kv[b, hkv2 // 2:, :len(real)] = values[b][:, real]
        return counts, kv

    def cache_import(self, cache, conv_state, recurrent_state):
        B = cache.batch
        counts = np.array(conv_state).reshape(B)
        kv = np.array(recurrent_state)
        hkv = kv.shape[1] // 2
        fresh = _KVCache(B)
        fresh.imported_counts = counts  # checked by the forward that uses them (§12.5)
        ok = np.isfinite(counts) & (counts == np.floor(counts)) & (counts >= 0) & (counts <= self.lmax)
        n = counts.astype(np.int64) if ok.all() else np.where(ok, counts, 0).astype(np.int64)
        T = int(n.max()) if B else 0
        fresh.bad_rows = [b for b in range(B) if not ok[b]]
        if T > 0:
            seen = np.zeros((B, T), np.int64)
            for b in range(B):
                seen[b, :n[b]] = 1
            k = torch.from_numpy(np.ascontiguousarray(kv[:, :hkv, :T])).to(self.device, self.tdtype)
            v = torch.from_numpy(np.ascontiguousarray(kv[:, hkv:, :T])).to(self.device, self.tdtype)
            fresh.update(k, v, 0)
            fresh.seen = torch.from_numpy(seen).to(self.device)
        return fresh

    def forward(self, cache, x, mask):
        with torch.no_grad():
            h = self.tensor(x)
            B, L = h.shape[0], h.shape[1]
            cur = torch.ones((B, L), dtype=torch.int64, device=self.device) if mask is None else \
                torch.from_numpy(np.array(mask, np.int64)).to(self.device)
            if cache is not None and getattr(cache, "bad_rows", None):
                raise Invalid("imported count of row %d is not an integer in [0, %d]" % (cache.bad_rows[0],
                                                                                          self.lmax))
            past = cache.seen if cache is not None and cache.seen is not None else \
                torch.zeros((B, 0), dtype=torch.int64, device=self.device)
            full = torch.cat([past, cur], dim=1)
            if int(full.sum(dim=1).max()) > self.lmax:
                raise Invalid("the forward would exceed the cache's %d positions" % self.lmax)
            pos = (full.cumsum(-1) - 1).masked_fill(full == 0, 1)[:, past.shape[1]:]
            cos_sin = self.rotary(h, pos)
            # the slots this forward writes: after every slot cached so far, pads' included
            slots = torch.arange(past.shape[1], past.shape[1] + L, device=self.device)
            m = hfapi.causal_mask(masking_utils, self.hf_config, h, full, cache, pos, slots)
            what = type(self.mixer).__name__ + ".forward"
            kw = hfapi.forward_kwargs(self.mixer.forward, what, cache=cache, cache_position=slots,
                                      position_embeddings=cos_sin, attention_mask=m)
            before = hfapi.snapshot(cache) if cache is not None else None
            y, _ = self.mixer(h, **kw)
            if cache is not None:
                hfapi.check_used(before, cache, what)
                cache.seen = full
        return self.numpy_out(y)


class _StackCache:
    """One cache of a whole stack: the model's own cache object (every layer's conv window, recurrent state
    and KV cache: the ``DynamicCache`` the model's forward builds at the first forward, or in 4.57 / 5.0 the
    model module's cache class, built the way ``generate()`` builds it), and beside it what ``generate()``
    keeps: the 2-D padding mask of every token the cache has seen (it grows ``attention_mask`` the same
    way) and, where the release counts positions its own way (MambaModel's ``arange(conv_kernel)``
    prefill), the next ``cache_position``."""

    def __init__(self, batch):
        self.batch = batch
        self.hf = None    # the model's cache object, None before any forward
        self.seen = None  # [B][T] int64, 1 real, 0 padding
        self.next_pos = None  # the next cache_position where generate()'s count is not the tokens seen


class HFModel(StackBackend):
    """A whole ``...ForCausalLM`` of the installed transformers (docs/models.md §7), called the way
    ``generate()`` calls it: ``use_cache=True`` with the model's own cache object, ``attention_mask`` the
    2-D mask of every token so far (cached ones included), ``position_ids`` = ``cumsum(mask) - 1`` with
    pads at 1 for the models whose forward takes them. Hidden states and mixer outputs come from forward
    hooks (the embedding, every decoder layer, every layer's mixer input and output): HF's own ``output_hidden_states``
    ends with the final-normed state, mixcheck's with the residual stream before the final norm."""
    name = "hf-model"
    dtypes = ("f64", "f32", "f16", "bf16")
    hidden = True
    # the mixer module of a decoder layer, by attribute (Mamba/Mamba2 mixer, Bamba mamba, Qwen3.5
    # linear_attn, LFM2 conv, attention self_attn)
    MIXERS = ("mixer", "mamba", "linear_attn", "conv", "self_attn")

    def __init__(self, family, dtype, config, weights, options):
        super().__init__(family, dtype, config, weights, options)
        import json
        import inspect
        from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
        torch.set_num_threads(options.threads if options.threads > 0 else 1)
        self.device = torch.device(options.device)
        self.tdtype = TORCH_DTYPES[dtype]
        self.out_dtype = torch.float64 if dtype == "f64" else torch.float32
        model_type = config["model_type"]
        cfg = json.loads(config["config_json"])
        arch = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(model_type)
        cls = getattr(transformers, arch, None) if arch else None
        if cls is None:
            raise Unsupported("transformers %s has no causal LM class for model_type %r"
                              % (transformers.__version__, model_type))
        hf_config = transformers.AutoConfig.for_model(**cfg)
        torch.manual_seed(0)  # the random init every weight below replaces
        model = cls(hf_config)
        model.eval()
        # strictly by name: every state_dict() key from the checkpoint, none extra; a tied head is the
        # embedding's alias in state_dict() and absent from a tied checkpoint
        state = {k: self.tensor(v) for k, v in weights.items()}
        own = model.state_dict()
        expected = set(own)
        # persistent buffers the model computes from its config (MiniMaxLightningAttention's slope_rate and decays)
        # are not weights: a golden does not store them, the model keeps its own
        for k in {n for n, _ in model.named_buffers() if n in expected} - set(state):
            state[k] = own[k]
        tied = {k for k in getattr(model, "_tied_weights_keys", None) or {}} if hf_config.tie_word_embeddings \
            else set()
        missing, unexpected = sorted(expected - set(state) - tied), sorted(set(state) - expected)
        if missing or unexpected:
            raise Invalid("the checkpoint does not load into %s by name: missing %s, unexpected %s"
                          % (cls.__name__, missing[:4], unexpected[:4]))
        for k in tied:
            if k not in state:
                src = model._tied_weights_keys[k] if isinstance(model._tied_weights_keys, dict) else \
                    self._embedding_key(model, k)  # up to 5.0 a list: tied to the input embedding
                if src is None or src not in state:
                    raise Invalid("tied %s: no source weight in the checkpoint" % k)
                state[k] = state[src]
        model.load_state_dict(state, strict=True)
        model.to(device=self.device, dtype=self.tdtype)
        if hf_config.tie_word_embeddings and model.get_output_embeddings() is not None and \
                model.get_output_embeddings().weight is not model.get_input_embeddings().weight:
            model.tie_weights()
        self.model, self.hf_config, self.cls = model, hf_config, cls
        params = inspect.signature(model.forward).parameters
        self.takes_positions = "position_ids" in params
        # A model without attention layers (MambaModel; Mamba2Model up to 5.12) hands attention_mask to every
        # mixer as it is, and the mixer multiplies its [B][L] slice's states by it: it takes the mask of this
        # forward's tokens (what generate() passes at the first step; later steps it passes none; from 5.14
        # Mamba2Model slices it with create_recurrent_attention_mask, which the [B][L] mask passes through).
        # The others build their masks from the 2-D mask of every token so far, as generate() grows it.
        # (Nemotron-H's attention block is its `mixer`, a NemotronHAttention: found by its class name.)
        self.local_mask = not any(isinstance(getattr(lay, "self_attn", None), torch.nn.Module) or
                                  type(getattr(lay, "mixer", None)).__name__.endswith("Attention") or
                                  isinstance(getattr(lay, "shared_transformer", None), torch.nn.Module) or
                                  isinstance(getattr(lay, "shared_transf", None), torch.nn.Module)
                                  for lay in model.base_model.layers)
        # up to 5.0 a model module has its own cache class, which generate() builds and passes in (BambaModel
        # returns no cache without one); from 5.5 the models build a DynamicCache themselves
        mod = sys.modules[cls.__module__]
        self.cache_cls = next((o for n, o in sorted(vars(mod).items()) if isinstance(o, type) and n.endswith("Cache")
                               and o.__module__ == mod.__name__), None)
        if self.cache_cls is not None and "config" not in hfapi.named_params(self.cache_cls.__init__):
            self.cache_cls = None  # a cache the model builds itself from nothing (MiniMaxModel: MiniMaxCache())
        # the hooks: the embedding's output, every decoder layer's, every mixer's
        self.capture = None
        self.layers = model.base_model.layers
        # FalconH1: a decoder layer holds a Mamba2 mixer (`mamba`) and attention (`self_attn`) in parallel, which
        # mixcheck reads as two mixer slots, 2i and 2i + 1 (docs/models.md §1)
        self.pairs = all(isinstance(getattr(lay, "mamba", None), torch.nn.Module) and
                         isinstance(getattr(lay, "self_attn", None), torch.nn.Module) for lay in self.layers)
        # mixcheck's entries: one per layer, and (Zamba2) an application of a shared block before its hybrid layer's
        # Mamba2 (harness/src/family/stackconfig.c): ("app", i) then ("layer", i)
        self.entries = []
        for i, layer in enumerate(self.layers):
            if isinstance(getattr(layer, "shared_transformer", None), torch.nn.Module) or \
                    isinstance(getattr(layer, "shared_transf", None), torch.nn.Module):   # (Zamba: shared_transf)
                self.entries.append(("app", i))
            self.entries.append(("layer", i))
        n_entries = 2 * len(self.layers) if self.pairs else len(self.entries)
        if n_entries != options.n_layers:
            raise Invalid("%s has %d layers, mixcheck reads %d from the config" % (cls.__name__, n_entries,
                                                                                options.n_layers))
        model.get_input_embeddings().register_forward_hook(self.hook("embedding"))
        if self.pairs:  # the residual entering layer 0: the embedding times embedding_multiplier (FalconH1Model)
            self.layers[0].register_forward_pre_hook(self.pre_hook("residual0"), with_kwargs=True)
        for i, layer in enumerate(self.layers if self.pairs else ()):
            layer.register_forward_hook(self.hook(("layer", i)))
            # both slots' input is the layer's input norm (the Mamba2 mixer's own input; the attention's is it
            # times attention_in_multiplier)
            for slot, mixer in ((2 * i, layer.mamba), (2 * i + 1, layer.self_attn)):
                mixer.register_forward_hook(self.hook(("mixer", slot)))
                layer.mamba.register_forward_pre_hook(self.pre_hook(("input", slot)), with_kwargs=True)
        for k, (what, i) in enumerate(self.entries if not self.pairs else ()):
            layer = self.layers[i]
            if what == "app":  # its hidden state h + T (the Mamba2's input before its norm), its attention's output
                shared = getattr(layer, "shared_transformer", None) or layer.shared_transf
                layer.mamba_decoder.register_forward_pre_hook(self.sum_hook(("layer", k)), with_kwargs=True)
                shared.self_attn.register_forward_hook(self.hook(("mixer", k)))
                shared.register_forward_pre_hook(self.zero_hook(("input", k)), with_kwargs=True)
                continue
            layer.register_forward_hook(self.hook(("layer", k)))
            host = layer.mamba_decoder if isinstance(getattr(layer, "mamba_decoder", None), torch.nn.Module) else layer
            mixer = next((getattr(host, a) for a in self.MIXERS if isinstance(getattr(host, a, None),
                                                                             torch.nn.Module)), None)
            if mixer is None:
                raise Unsupported("%s layer %d: no mixer module (%s)" % (cls.__name__, i, "/".join(self.MIXERS)))
            # Inkling: mixcheck's mixer output is the attention's after the layer's attn_sconv (its residual's addend)
            out_mod = host.attn_sconv if isinstance(getattr(host, "attn_sconv", None), torch.nn.Module) else mixer
            out_mod.register_forward_hook(self.hook(("mixer", k)))
            mixer.register_forward_pre_hook(self.pre_hook(("input", k)), with_kwargs=True)

    @staticmethod
    def _embedding_key(model, tied):
        emb = model.get_input_embeddings().weight
        return next((n for n, p in model.named_parameters(remove_duplicate=False) if p is emb and n != tied), None)

    def hook(self, key):
        def grab(module, args, output):
            if self.capture is not None:
                t = output[0] if isinstance(output, tuple) else output
                self.capture[key] = t.detach()
        return grab

    def pre_hook(self, key):
        def grab(module, args, kwargs):
            if self.capture is not None:  # a mixer's input: its first argument, by position or as hidden_states
                t = args[0] if args else kwargs.get("hidden_states")
                if t is not None:
                    self.capture[key] = t.detach()
        return grab

    def sum_hook(self, key):
        def grab(module, args, kwargs):  # Zamba2MambaDecoderLayer(hidden_states, transformer_hidden_states=T)
            if self.capture is not None:
                h = args[0] if args else kwargs.get("hidden_states")
                t = kwargs.get("transformer_hidden_states")
                self.capture[key] = (h if t is None else h + t).detach()
        return grab

    def zero_hook(self, key):
        def grab(module, args, kwargs):  # an application's 2D input has no place in the [n][B][L][D] mixer inputs
            if self.capture is not None:
                h = args[0] if args else kwargs.get("hidden_states")
                self.capture[key] = torch.zeros_like(h).detach()
        return grab

    def tensor(self, a):
        t = torch.from_numpy(np.ascontiguousarray(a))
        if self.dtype == "bf16" and a.dtype == np.uint16:
            t = t.view(torch.int16).view(torch.bfloat16)
        return t

    def out(self, t):
        return t.detach().to("cpu", self.out_dtype).numpy()

    def cache_alloc(self, batch):
        return _StackCache(batch)

    def cache_copy(self, cache):
        return copy.deepcopy(cache)

    def forward(self, cache, input_ids, mask, want_hidden=False):
        B, L = input_ids.shape
        if cache is not None and cache.batch != B:
            raise Invalid("batch %d on a cache of %d rows" % (B, cache.batch))
        with torch.no_grad():
            ids = torch.from_numpy(np.array(input_ids, np.int64)).to(self.device)
            cur = torch.ones((B, L), dtype=torch.int64, device=self.device) if mask is None else \
                torch.from_numpy(np.array(mask, np.int64)).to(self.device)
            past = cache.seen if cache is not None and cache.seen is not None else \
                torch.zeros((B, 0), dtype=torch.int64, device=self.device)
            full = torch.cat([past, cur], dim=1)
            kw = dict(input_ids=ids, attention_mask=cur if self.local_mask else full, use_cache=cache is not None)
            what = self.cls.__name__ + ".forward"
            before = None
            if cache is not None and cache.hf is None and self.cache_cls is not None:
                # generate()'s first step up to 5.0: the model's cache class, cache_position from 0 (MambaModel
                # and Mamba2Model: arange(conv_kernel), their prepare_inputs_for_generation's)
                cache.hf = hfapi.new_cache(self.cache_cls, self.hf_config, B, self.tdtype, self.device)
                n = self.hf_config.conv_kernel if self.local_mask and hasattr(self.hf_config, "conv_kernel") else L
                kw.update(hfapi.forward_kwargs(self.model.forward, what, cache=cache.hf,
                                               cache_position=torch.arange(0, n, device=self.device)))
                cache.next_pos = n
                before = hfapi.snapshot(cache.hf)
            elif cache is not None and cache.hf is not None:
                # a cache the model made at its first forward, passed back under the name the release gives
                # it, with cache_position (the slots after every token cached so far) where it takes one
                start = past.shape[1] if cache.next_pos is None else cache.next_pos
                slots = torch.arange(start, start + L, device=self.device)
                kw.update(hfapi.forward_kwargs(self.model.forward, what, cache=cache.hf, cache_position=slots))
                if cache.next_pos is not None:
                    cache.next_pos += L
                before = hfapi.snapshot(cache.hf)
            if self.takes_positions:
                kw["position_ids"] = (full.cumsum(-1) - 1).masked_fill(full == 0, 1)[:, past.shape[1]:]
            self.capture = {} if want_hidden else None
            try:
                res = self.model(**kw)
            finally:
                got, self.capture = self.capture, None
            if cache is not None:
                if cache.hf is None:  # the model's own cache class, created by its forward (generate()'s first step)
                    cache.hf = hfapi.output_cache(res)
                    if cache.hf is None:
                        raise Unbridged("%s returned no cache with use_cache=True" % what)
                else:
                    hfapi.check_used(before, cache.hf, what)
                cache.seen = full
            logits = self.out(res.logits)
            if not want_hidden:
                return logits
            n = 2 * len(self.layers) if self.pairs else len(self.entries)
            need = ["embedding"] + [(k, i) for k in ("layer", "input", "mixer") for i in range(n)
                                    if k != "layer" or not self.pairs or i < n // 2]
            lost = [k for k in need if k not in got]
            if lost:
                raise Invalid("no output captured from %s" % (lost[0],))
            if self.pairs:  # slot 2i: the residual as it was (the layer's input); slot 2i + 1: the layer's output
                levels = [got["residual0"]]
                for i in range(n // 2):
                    levels += [levels[-1], got[("layer", i)]]
                hidden = np.stack([self.out(t) for t in levels])
            else:
                hidden = np.stack([self.out(got["embedding"])] + [self.out(got[("layer", i)]) for i in range(n)])
            inputs = np.stack([self.out(got[("input", i)]) for i in range(n)])
            mixers = np.stack([self.out(got[("mixer", i)]) for i in range(n)])
            return logits, hidden, inputs, mixers

    def _inkling_export(self, cache, layer, conv, rec, k, v, full_seen):
        """An Inkling layer's cache in mixcheck's layout (docs/semantics.md §12.9): conv [B][1 + 2 kvd + 2 D][K] the
        count of real tokens, then the conv states 0..3 of the layer's LinearAttention cache layer ([B][C][K], the last
        K inputs with the pads zeroed: the same for left padding); rec the keys and values at their positions. A
        sliding layer's cache keeps only its last sliding_window - 1 slots (DynamicSlidingWindowLayer): the positions
        before them stay zero (docs/findings.md 53)."""
        i = self.entries[layer][1]
        D = self.hf_config.hidden_size
        kvd = (conv.shape[1] - 1 - 2 * D) // 2
        lay = cache.hf.layers[i]
        start = 1
        for idx, n in enumerate((kvd, kvd, D, D)):
            cs = lay.conv_states.get(idx) if isinstance(lay.conv_states, dict) else None
            if isinstance(cs, torch.Tensor):
                conv[:, start:start + n] = cs.detach().to("cpu", torch.float64).numpy()[:, :, -conv.shape[2]:]
            start += n
        hkv = rec.shape[1] // 2
        T, kept = full_seen.shape[1], k.shape[2]
        for b in range(conv.shape[0]):
            conv[b, 0, 0] = full_seen[b].sum()
            before = np.cumsum(full_seen[b]) - 1   # a real token's position: the real tokens before it
            for j in range(kept):
                t = T - kept + j
                if full_seen[b, t] and before[t] < rec.shape[2]:
                    rec[b, :hkv, before[t]] = k[b][:, j]
                    rec[b, hkv:, before[t]] = v[b][:, j]
        return conv, rec

    def cache_export(self, cache, layer):
        family, conv_shape, state_shape = self.options.layers[layer]
        B = cache.batch
        conv = np.zeros((B,) + conv_shape)
        rec = np.zeros((B,) + state_shape) if state_shape else None
        if cache.hf is None:  # nothing written yet: the zero window and state
            return conv, rec
        if family == "lightning":  # MiniMaxCache's linear cache: S [B][H][hd][hd]; the count of real tokens consumed
            i = self.entries[layer][1]
            lin = getattr(cache.hf, "linear_cache", None)
            S = lin[i] if lin is not None and i < len(lin) else None
            if isinstance(S, torch.Tensor):
                rec = S.detach().to("cpu", torch.float64).numpy().reshape((B,) + tuple(state_shape))
            conv[:, 0, 0] = cache.seen.cpu().numpy().sum(axis=1)
            return conv, rec
        st = hfapi.layer_states(cache.hf, layer // 2 if self.pairs else self.entries[layer][1])  # (a Zamba2 application: its layer's KV)
        if family == "attention":
            hkv2, lmax, hd = state_shape
            if st["keys"] is None:
                return conv, rec
            k = st["keys"].detach().to("cpu", torch.float64).numpy()  # [B][Hkv][T][hd], pads' slots included
            v = st["values"].detach().to("cpu", torch.float64).numpy()
            full_seen = cache.seen.cpu().numpy()
            seen = full_seen[:, -k.shape[2]:]
            if conv_shape[0] > 1:  # Inkling: the count, then its four conv states (k, v, attn_sconv, mlp_sconv)
                return self._inkling_export(cache, layer, conv, rec, k, v, full_seen)
            # MLA (KimiLinearAttention): one "head", keys the normed latent [B][1][T][c], values the rope key
            # [B][1][T][dr]; mixcheck's state [B][1][Lmax][c + dr] holds them side by side
            mla = hkv2 == 1 and k.shape[1] == 1 and k.shape[3] + v.shape[3] == hd
            for b in range(B):
                real = np.nonzero(seen[b])[0]
                if len(real) > lmax:
                    raise Invalid("layer %d row %d holds %d positions, the cache %d" % (layer, b, len(real), lmax))
                conv[b, 0, 0] = len(real)
                if mla:
                    rec[b, 0, :len(real)] = np.concatenate([k[b, 0][real], v[b, 0][real]], axis=-1)
                    continue
                rec[b, :hkv2 // 2, :len(real)] = k[b][:, real]
                rec[b, hkv2 // 2:, :len(real)] = v[b][:, real]
            return conv, rec
        if st["conv"] is not None:
            conv = st["conv"].detach().to("cpu", torch.float64).numpy()
        if state_shape and st["rec"] is not None:
            rec = st["rec"].detach().to("cpu", torch.float64).numpy()
            if rec.shape != (B,) + tuple(state_shape) and rec.shape[1:2] == (1,) and rec.size == B * int(
                    np.prod(state_shape)):   # ZambaMambaMixer's state [B][n_mamba_heads = 1][I][N]
                rec = rec.reshape((B,) + tuple(state_shape))
        return conv, rec


MIXCHECK_BACKENDS = [HFMamba2, HFMamba, HFGatedDeltaNet, HFShortConv, HFAttention, HFLightning, HFKda, HFModel]
