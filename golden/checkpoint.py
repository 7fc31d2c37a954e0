"""generate.py from-checkpoint: goldens from a Hugging Face checkpoint folder (config.json + model.safetensors).

  generate.py from-checkpoint DIR --out FILE.h5 (--prompt "ID ID ..." ... | --prompt-file F) [--greedy G]
      a model-level golden (golden/README.md "Model goldens") of the checkpoint on the prompt(s): one row per
      --prompt or per line of the file, left-padded to the longest, greedy continuation of G tokens
  generate.py from-checkpoint DIR --out FILE.h5 --prompt ... --layer N --family F
      a mixer-level golden of layer N (family F: mamba2, mamba1, shortconv, attention, gdn) whose input is the
      layer's real input activation on the prompt (its block norm's output) and whose weights are the layer's

The safetensors file is read here with numpy (an 8-byte little-endian header length, a JSON header naming
each tensor's dtype, shape and byte range, then the bytes). The model types are those of golden/stacks.py;
every float64 number comes from its oracle, never from the C code under test.
"""

import argparse
import contextlib
import io
import json
import os
import sys
import traceback

import numpy as np

import goldens   # the golden file writer (golden/goldens.py)
import mixers    # GoldenSpec, Golden and the mixer families' config attributes (golden/mixers.py)
import configkeys as K   # what each config.json key does (golden/configkeys.py)
import stacks as S

SAFETENSORS_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4"}


def read_safetensors(path, names=None):
    """{name: float32 / float64 ndarray} of a safetensors file (F64, F32, F16, BF16 and integer tensors), or of
    the tensors `names` of it. Every defect is a ValueError naming the file and the tensor."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise ValueError(f"{path}: cannot read: {e.strerror}") from None
    if len(raw) < 8:
        raise ValueError(f"{path}: not a safetensors file (shorter than its header length)")
    n = int.from_bytes(raw[:8], "little")
    if n > len(raw) - 8:
        raise ValueError(f"{path}: header length {n} exceeds the file ({len(raw)} bytes): truncated?")
    try:
        header = json.loads(raw[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: the header is not JSON ({e}): truncated or not a safetensors file") from None
    if not isinstance(header, dict):
        raise ValueError(f"{path}: the header is not a JSON object")
    body = raw[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__" or (names is not None and name not in names):
            continue
        if not isinstance(info, dict) or not {"dtype", "shape", "data_offsets"} <= set(info):
            raise ValueError(f"{path}: {name}: header entry without dtype, shape and data_offsets")
        try:
            lo, hi = (int(x) for x in info["data_offsets"])
            shape = tuple(int(x) for x in info["shape"])
        except (TypeError, ValueError):
            raise ValueError(f"{path}: {name}: data_offsets / shape are not integers") from None
        if not 0 <= lo <= hi <= len(body):
            raise ValueError(f"{path}: {name}: data_offsets {lo}..{hi} outside the data ({len(body)} bytes): truncated?")
        buf, dt = body[lo:hi], info["dtype"]
        width = {"BF16": 2, "F16": 2, "F32": 4, "F64": 8, "I64": 8, "I32": 4}.get(dt)
        if width is None:
            raise ValueError(f"{path}: {name}: dtype {dt} is not read (F64, F32, F16, BF16, I64, I32)")
        if len(buf) != width * int(np.prod(shape)):
            raise ValueError(f"{path}: {name}: {len(buf)} bytes for shape {list(shape)} of {dt}")
        if dt == "BF16":
            v = (np.frombuffer(buf, "<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            v = np.frombuffer(buf, SAFETENSORS_DTYPES[dt])
        v = v.reshape(shape).astype(np.float32 if dt != "F64" else np.float64)
        if not np.all(np.isfinite(v)):
            bad = int(np.flatnonzero(~np.isfinite(v.ravel()))[0])
            raise ValueError(f"{path}: {name}: a non-finite value ({v.ravel()[bad]}) at flat index {bad}")
        out[name] = v
    return out


def read_weights(folder):
    """Every tensor of a checkpoint folder: model.safetensors, or the shards model.safetensors.index.json
    names (its weight_map: tensor -> file), each tensor from the file the index gives."""
    index = os.path.join(folder, "model.safetensors.index.json")
    single = os.path.join(folder, "model.safetensors")
    if not os.path.exists(index):
        if not os.path.exists(single):
            raise ValueError(f"{folder}: neither model.safetensors nor model.safetensors.index.json")
        return read_safetensors(single)
    try:
        with open(index, encoding="utf-8") as f:
            wm = json.load(f).get("weight_map")
    except (OSError, json.JSONDecodeError, AttributeError) as e:
        raise ValueError(f"{index}: not a safetensors index ({e})") from None
    if not isinstance(wm, dict) or not wm:
        raise ValueError(f"{index}: no weight_map")
    out = {}
    for shard in sorted(set(wm.values())):
        if not isinstance(shard, str) or os.path.basename(shard) != shard:
            raise ValueError(f"{index}: shard {shard!r} is not a file name in the folder")
        want = {k for k, v in wm.items() if v == shard}
        got = read_safetensors(os.path.join(folder, shard), want)
        missing = sorted(want - set(got))
        if missing:
            raise ValueError(f"{os.path.join(folder, shard)}: {missing[0]}: named by the index, not in the shard")
        out.update(got)
    return out


def write_safetensors(path, tensors, dtype="F32"):
    """Writes {name: float32 ndarray} as safetensors of `dtype` (F32, F16, or BF16 — the values must then be
    bf16-exact, their upper 16 bits stored): what the tests build their checkpoints with."""
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        v = np.ascontiguousarray(tensors[name], np.float32)
        if dtype == "BF16":
            b = (v.view(np.uint32) >> 16).astype("<u2").tobytes()
        elif dtype == "F16":
            b = v.astype("<f2").tobytes()
        else:
            b = v.astype("<f4").tobytes()
        header[name] = {"dtype": dtype, "shape": list(v.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h + b"".join(blobs))


MULTIMODAL_TEXT = {"qwen3_5": ("qwen3_5_text", "model.language_model.", "model.", ("model.visual.", "mtp."))}
MULTIMODAL_TEXT["qwen3_5_moe"] = ("qwen3_5_moe_text", "model.language_model.", "model.", ("model.visual.", "mtp."))
# The names a checkpoint stores that the model's state_dict() calls otherwise: transformers' conversion mapping
# (conversion_mapping.py, "granitemoe", which granitemoehybrid uses) renames them on load and back on
# save_pretrained, so 5.24 writes the MoE under its older names; pure renames, the layouts are the same
# ([E, 2F, D] gate rows first, [E, D, F], [E, D]). (old suffix, state_dict suffix)
CHECKPOINT_RENAMES = {"granitemoehybrid": (("block_sparse_moe.input_linear.weight", "block_sparse_moe.experts.gate_up_proj"),
                                           ("block_sparse_moe.output_linear.weight", "block_sparse_moe.experts.down_proj"),
                                           ("block_sparse_moe.router.layer.weight", "block_sparse_moe.router.weight"))}
# OLMo-Hybrid's conversion mapping ("olmo_hybrid", transformers 5.24): the checkpoint names its layers' norms
# attention_layer_norm / feedforward_layer_norm (state_dict(): input_layernorm / post_attention_layernorm, on every
# layer kind) and stores the GDN's conv as q_conv1d, k_conv1d, v_conv1d, concatenated along dim 0 into conv1d
CHECKPOINT_RENAMES["olmo_hybrid"] = (("attention_layer_norm.weight", "input_layernorm.weight"),
                                     ("feedforward_layer_norm.weight", "post_attention_layernorm.weight"))


def merge_olmo_convs(folder, w):
    """OLMo-Hybrid's q_conv1d / k_conv1d / v_conv1d of each GDN layer, concatenated (Concatenate(dim=0)) into its
    conv1d.weight, as from_pretrained does."""
    for k in [k for k in w if k.endswith("linear_attn.q_conv1d.weight")]:
        pre = k[:-len("q_conv1d.weight")]
        parts = [pre + p + "_conv1d.weight" for p in "qkv"]
        if not all(p in w for p in parts):
            raise ValueError(f"{folder}: {pre}: q_conv1d, k_conv1d and v_conv1d must all be given")
        if pre + "conv1d.weight" in w:
            raise ValueError(f"{folder}: both {pre}conv1d.weight and {pre}q/k/v_conv1d.weight")
        w[pre + "conv1d.weight"] = np.concatenate([w.pop(p) for p in parts], axis=0)


def merge_expert_lists(folder, w, n_experts, module="feed_forward"):
    """Jamba's checkpoint stores each expert as its own module (feed_forward.experts.<e>.{gate,up,down}_proj.weight,
    [F, D], [F, D], [D, F]); its conversion mapping ("jamba": MergeModulelist then Concatenate) makes them
    feed_forward.experts.gate_up_proj [E, 2F, D] (each expert's gate rows, then its up rows) and
    feed_forward.experts.down_proj [E, D, F]. The same, in place; a layer missing one of its experts is refused.
    Qwen3-Next's released checkpoints (module "mlp": mlp.experts.<e>.{gate,up,down}_proj.weight) are read by the same
    mapping ("qwen3_next": "qwen2_moe")."""
    layers = sorted({k.split(".experts.")[0] for k in w
                     if f".{module}.experts." in k and k.endswith("_proj.weight") and k.split(".experts.")[1][0].isdigit()})
    for pre in layers:
        parts = {}
        for part in ("gate_proj", "up_proj", "down_proj"):
            names = [f"{pre}.experts.{e}.{part}.weight" for e in range(n_experts)]
            gone = [n for n in names if n not in w]
            if gone:
                raise ValueError(f"{folder}: {pre}: {len(gone)} of {n_experts} experts' {part}.weight missing "
                                 f"(first {gone[0]})")
            parts[part] = np.stack([w.pop(n) for n in names])
        w[pre + ".experts.gate_up_proj"] = np.concatenate([parts["gate_proj"], parts["up_proj"]], axis=1)
        w[pre + ".experts.down_proj"] = parts["down_proj"]


def kimi_released_layout(folder, w, n_experts):
    """Kimi-Linear's released layout, the one save_pretrained writes back (the "kimi_linear" conversion mapping of
    transformers 5.24): the forget gate's f_a_proj / f_b_proj / dt_bias / A_log directly under self_attn., three
    convolutions q_conv1d / k_conv1d / v_conv1d [C/3, 1, K] (stacked in that order into conv1d), the feed-forward
    module block_sparse_moe. (mlp. in the state_dict), its experts one module each as experts.<e>.w1 (gate) /
    w3 (up) / w2 (down) (merged into experts.gate_up_proj [E, 2F, D], gate rows first, and experts.down_proj
    [E, D, F]). The same, in place; a tensor present in both layouts, or a layer missing an expert, is refused."""
    def put(k, v):
        if k in w:
            raise ValueError(f"{folder}: {k} given in both layouts")
        w[k] = v
    for k in [k for k in w if ".block_sparse_moe." in k]:
        put(k.replace(".block_sparse_moe.", ".mlp."), w.pop(k))
    for part in ("f_a_proj.weight", "f_b_proj.weight", "dt_bias", "A_log"):
        for k in [k for k in w if k.endswith(".self_attn." + part)]:
            put(k[:-len(part)] + "forget_gate." + part, w.pop(k))
    for k in [k for k in w if k.endswith(".self_attn.q_conv1d.weight")]:
        pre = k[:-len("q_conv1d.weight")]
        names = [pre + c + "_conv1d.weight" for c in "qkv"]
        if any(n not in w for n in names):
            raise ValueError(f"{folder}: {pre}: q_conv1d, k_conv1d and v_conv1d must all be given")
        put(pre + "conv1d.weight", np.concatenate([w.pop(n) for n in names], axis=0))
    layers = sorted({k.split(".experts.")[0] for k in w if ".mlp.experts." in k and k.endswith(".weight")
                     and k.split(".experts.")[1][0].isdigit()})
    for pre in layers:
        parts = {}
        for part in ("w1", "w3", "w2"):
            names = [f"{pre}.experts.{e}.{part}.weight" for e in range(n_experts)]
            gone = [n for n in names if n not in w]
            if gone:
                raise ValueError(f"{folder}: {pre}: {len(gone)} of {n_experts} experts' {part}.weight missing "
                                 f"(first {gone[0]})")
            parts[part] = np.stack([w.pop(n) for n in names])
        put(pre + ".experts.gate_up_proj", np.concatenate([parts["w1"], parts["w3"]], axis=1))
        put(pre + ".experts.down_proj", parts["w2"])


def merge_nemotron_experts(folder, w, n_experts):
    """Nemotron-H's released checkpoints store each expert as its own module (mixer.experts.<e>.up_proj.weight
    [Fe, D], mixer.experts.<e>.down_proj.weight [D, Fe]) under `backbone.`; its conversion mapping ("nemotron_h":
    backbone. -> model., MergeModulelist) stacks them into mixer.experts.up_proj [E, Fe, D] and
    mixer.experts.down_proj [E, D, Fe]. The same, in place; a layer missing one of its experts is refused, and the
    multi-token prediction weights (mtp.*, which NemotronHForCausalLM ignores on load) are dropped."""
    for k in [k for k in w if k.startswith("backbone.")]:
        new = "model." + k[len("backbone."):]
        if new in w:
            raise ValueError(f"{folder}: both {k} and {new}: one tensor under two names")
        w[new] = w.pop(k)
    for k in [k for k in w if k.startswith("mtp.")]:
        del w[k]
    layers = sorted({k.split(".experts.")[0] for k in w
                     if ".mixer.experts." in k and k.endswith("_proj.weight") and k.split(".experts.")[1][0].isdigit()})
    for pre in layers:
        for part in ("up_proj", "down_proj"):
            names = [f"{pre}.experts.{e}.{part}.weight" for e in range(n_experts)]
            gone = [n for n in names if n not in w]
            if gone:
                raise ValueError(f"{folder}: {pre}: {len(gone)} of {n_experts} experts' {part}.weight missing "
                                 f"(first {gone[0]})")
            if f"{pre}.experts.{part}" in w:
                raise ValueError(f"{folder}: {pre}: experts.{part} both stacked and per expert")
            w[f"{pre}.experts.{part}"] = np.stack([w.pop(n) for n in names])


def merge_lfm2_moe_experts(folder, w, n_experts):
    """LFM2-MoE's released checkpoints store each expert as its own Lfm2MoeMLP (feed_forward.experts.<e>.{w1, w3,
    w2}.weight, [F, D], [F, D], [D, F]); its conversion mapping ("lfm2_moe": MergeModulelist then Concatenate) makes
    them feed_forward.experts.gate_up_proj [E, 2F, D] (each expert's w1 rows, then its w3 rows) and
    feed_forward.experts.down_proj [E, D, F]. The same, in place; a layer missing one of its experts is refused."""
    layers = sorted({k.split(".experts.")[0] for k in w if ".feed_forward.experts." in k
                     and k.split(".experts.")[1][0].isdigit() and k.endswith(".weight")})
    for pre in layers:
        parts = {}
        for part in ("w1", "w3", "w2"):
            names = [f"{pre}.experts.{e}.{part}.weight" for e in range(n_experts)]
            gone = [n for n in names if n not in w]
            if gone:
                raise ValueError(f"{folder}: {pre}: {len(gone)} of {n_experts} experts' {part}.weight missing "
                                 f"(first {gone[0]})")
            parts[part] = [w.pop(n) for n in names]
        for stacked in ("gate_up_proj", "down_proj"):
            if f"{pre}.experts.{stacked}" in w:
                raise ValueError(f"{folder}: {pre}: experts.{stacked} both stacked and per expert")
        w[f"{pre}.experts.gate_up_proj"] = np.stack([np.concatenate([g, u], axis=0)
                                                      for g, u in zip(parts["w1"], parts["w3"])])
        w[f"{pre}.experts.down_proj"] = np.stack(parts["w2"])


MINIMAX_BUFFERS = ("slope_rate", "query_decay", "key_decay", "diagonal_decay")


def merge_minimax(folder, w, cfg):
    """MiniMax's checkpoints as save_pretrained 5.24 writes them and as released (its conversion mapping "minimax":
    "mixtral"): each layer's MoE as block_sparse_moe.gate.weight [E, D] and one module per expert,
    block_sparse_moe.experts.<e>.{w1, w3, w2}.weight ([F, D] gate, [F, D] up, [D, F] down); from_pretrained makes
    them mlp.gate.weight, mlp.experts.gate_up_proj [E, 2F, D] (each expert's w1 rows, then its w3 rows) and
    mlp.experts.down_proj [E, D, F]. The same, in place (a layer missing one of its experts refused). The lightning
    layers' persistent buffers (self_attn.slope_rate, query_decay, key_decay, diagonal_decay) are functions of the
    configuration, not weights: dropped, after slope_rate is checked against the slopes the configuration gives, within
    its storage rounding (a checkpoint whose stored slopes are not its config's runs upstream on the stored ones:
    refused; stored rounded to bf16 they are read as the config's exact slopes, docs/findings.md 52)."""
    import linear
    import minimax
    E = cfg["num_local_experts"]
    layers = sorted({k.split(".block_sparse_moe.")[0] for k in w if ".block_sparse_moe." in k})
    for pre in layers:
        gate = f"{pre}.block_sparse_moe.gate.weight"
        if gate not in w:
            raise ValueError(f"{folder}: {pre}: block_sparse_moe experts without {gate}")
        for new in ("mlp.gate.weight", "mlp.experts.gate_up_proj", "mlp.experts.down_proj"):
            if f"{pre}.{new}" in w:
                raise ValueError(f"{folder}: {pre}: both block_sparse_moe.* and {new}: one tensor under two names")
        w[f"{pre}.mlp.gate.weight"] = w.pop(gate)
        parts = {}
        for part in ("w1", "w3", "w2"):
            names = [f"{pre}.block_sparse_moe.experts.{e}.{part}.weight" for e in range(E)]
            gone = [n for n in names if n not in w]
            if gone:
                raise ValueError(f"{folder}: {pre}: {len(gone)} of {E} experts' {part}.weight missing (first {gone[0]})")
            parts[part] = [w.pop(n) for n in names]
        w[f"{pre}.mlp.experts.gate_up_proj"] = np.stack([np.concatenate([g, u], axis=0)
                                                         for g, u in zip(parts["w1"], parts["w3"])])
        w[f"{pre}.mlp.experts.down_proj"] = np.stack(parts["w2"])
    for i in range(cfg["num_hidden_layers"]):
        pre = f"model.layers.{i}.self_attn."
        if minimax.kind(cfg, i) == "lightning" and pre + "slope_rate" in w:
            want = linear.lightning_slopes(minimax.lightning_config(cfg, i))
            got = np.asarray(w[pre + "slope_rate"], np.float64).reshape(-1)
            # stored in the checkpoint's dtype (bf16 for a bf16 model: within 2^-8 relative)
            if got.shape != want.shape or not np.allclose(got, want, rtol=2.0 ** -8, atol=0.0):
                raise ValueError(f"{folder}: {pre}slope_rate: the stored slopes are not those of the config (layer {i} "
                                 f"of {cfg['num_hidden_layers']}, {cfg['num_attention_heads']} heads)")
        for b in MINIMAX_BUFFERS:
            w.pop(pre + b, None)


def load_checkpoint(folder, semantics=None):
    """(config with the model's defaults, checkpoint-named float32 weights) of a checkpoint folder. Every
    config key is honoured or refused (configkeys.py); the text part of a multimodal checkpoint is read
    as its text model; `semantics` ({entry: choice}) overrides mixcheck_semantics."""
    where = os.path.join(folder, "config.json")
    if not os.path.exists(where):
        raise ValueError(f"{folder}: no config.json")
    raw = K.load_json(where)
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: not a JSON object")
    rename = None
    mm = MULTIMODAL_TEXT.get(raw.get("model_type"))
    if mm is not None:
        text = raw.get("text_config")
        if not isinstance(text, dict):
            raise ValueError(f"{where}: model_type {raw['model_type']!r} without a text_config: no text model to read")
        text = dict(text)
        text.setdefault("model_type", mm[0])
        if text["model_type"] != mm[0]:
            raise ValueError(f"{where}: text_config.model_type {text['model_type']!r} is not {mm[0]!r}")
        if "transformers_version" in raw:
            text.setdefault("transformers_version", raw["transformers_version"])
        text.setdefault("tie_word_embeddings", raw.get("tie_word_embeddings", False))
        raw, rename, where = text, mm, where + " (text_config)"
    mt = raw.get("model_type")
    if mt not in S.MODEL_DEFAULTS:
        raise ValueError(f"{where}: model_type {mt!r} is not one of {', '.join(S.MODEL_DEFAULTS)}")
    if semantics:
        raw = dict(raw)
        raw["mixcheck_semantics"] = {**(raw.get("mixcheck_semantics") or {}), **semantics}
    unpadded = raw.get("unpadded_vocab_size") if mt == "inkling_text" else None
    if isinstance(unpadded, int) and not isinstance(unpadded, bool) and 1 <= unpadded < raw.get("vocab_size", 201024):
        # InklingForCausalLM slices its logits to the first unpadded_vocab_size columns: the model that computes
        # those logits is the one of vocab_size unpadded_vocab_size, whose embedding and head are the first rows
        # of the stored ones (a prompt may use only those ids). The golden's config says so.
        raw = dict(raw, vocab_size=unpadded, unpadded_vocab_size=None)
    else:
        unpadded = None
    K.check(raw, where)
    # the model's defaults fill what the file leaves out, except the rope keys: their defaults depend on
    # which of them the file gives (configkeys.rope_params resolves them as transformers does)
    cfg = {k: v for k, v in S.MODEL_DEFAULTS[mt].items() if k not in K.ROPE_KEYS}
    cfg.update(raw)
    cfg = K.normalise(cfg)
    w = read_weights(folder)
    if rename is not None:
        _, old, new, dropped = rename
        w = {(new + k[len(old):] if k.startswith(old) else k): v for k, v in w.items()
             if not k.startswith(dropped)}
    if mt == "jamba":
        merge_expert_lists(folder, w, cfg["num_experts"])
    if mt == "nemotron_h":
        merge_nemotron_experts(folder, w, cfg["n_routed_experts"])
    if mt == "lfm2_moe":   # one Lfm2MoeMLP per expert in the released layout
        merge_lfm2_moe_experts(folder, w, cfg["num_experts"])
    if mt == "kimi_linear":   # the released layout save_pretrained writes (transformers' "kimi_linear" mapping)
        kimi_released_layout(folder, w, cfg["num_local_experts"])
    if mt in ("qwen3_next", "qwen3_5_moe_text"):   # one module per expert, as Jamba's; the multi-token prediction weights (mtp.*), which
        # Qwen3NextForCausalLM ignores on load (_keys_to_ignore_on_load_unexpected), dropped
        for k in [k for k in w if k.startswith("mtp.")]:
            del w[k]
        merge_expert_lists(folder, w, cfg["num_experts"], module="mlp")
    for old, new in CHECKPOINT_RENAMES.get(mt, ()):
        for k in [k for k in w if k.endswith("." + old)]:
            if k[:-len(old)] + new in w:
                raise ValueError(f"{folder}: both {k} and {k[:-len(old)] + new}: one tensor under two names")
            w[k[:-len(old)] + new] = w.pop(k)
    if mt == "olmo_hybrid":
        merge_olmo_convs(folder, w)
    if mt == "inkling_text":   # the multi-token prediction weights, which InklingForCausalLM ignores on load
        for k in [k for k in w if k.startswith("model.mtp.")]:   # (_keys_to_ignore_on_load_unexpected)
            del w[k]
        if unpadded is not None:   # the rows of the padded vocabulary (above), which no logit reads
            for k in ("model.embed_tokens.weight", "lm_head.weight"):
                if k in w and w[k].ndim == 2 and w[k].shape[0] > unpadded:
                    w[k] = w[k][:unpadded]
    if mt == "minimax":   # Mixtral's expert modules, the lightning buffers
        merge_minimax(folder, w, cfg)
    if mt == "zamba2":   # a tied block stored once, under its first hybrid layer (golden/zamba.py fill_tied)
        w = S.zamba.fill_tied(cfg, w)
    if mt == "zamba":   # likewise Zamba's one shared block (golden/zamba.py v1_fill_tied)
        w = S.zamba.v1_fill_tied(cfg, w)
    nm = S.names(cfg)
    if cfg["tie_word_embeddings"] and nm["embed"] in w:
        w[nm["head"]] = w[nm["embed"]].copy()   # tied: the head is the embedding (a tied checkpoint stores only it)
    want = S.init_weights(cfg, np.random.default_rng(0))
    missing, extra = sorted(set(want) - set(w)), sorted(set(w) - set(want))
    if missing or extra:
        raise ValueError(f"{folder}: the weights do not match the config: missing {missing[:5]}, unexpected "
                         f"{extra[:5]}")
    for k, v in want.items():
        if w[k].shape != v.shape:
            raise ValueError(f"{folder}: {k}: shape {list(w[k].shape)}, the config makes it {list(v.shape)}")
    return cfg, {k: w[k] for k in want}


def prompts(args, vocab):
    rows = [[int(t) for t in p.split()] for p in (args.prompt or [])]
    if args.prompt_file:
        with open(args.prompt_file) as f:
            rows += [[int(t) for t in line.split()] for line in f if line.strip()]
    if not rows or any(not r for r in rows):
        raise ValueError("give the prompt's token ids: --prompt \"ID ID ...\" (one per row) or --prompt-file")
    bad = [t for r in rows for t in r if not 0 <= t < vocab]
    if bad:
        raise ValueError(f"token id {bad[0]} outside [0, vocab_size {vocab})")
    L = max(len(r) for r in rows)
    ids = np.zeros((len(rows), L), np.int64)
    mask = np.zeros((len(rows), L), np.int8)
    for b, r in enumerate(rows):
        ids[b, L - len(r):] = r
        mask[b, L - len(r):] = 1
    return ids, mask


def _write_layer_golden(kind, family, mcfg, fw, x, ids, mask, layer, out, name):
    """A mixer golden of `family` (the oracle's `kind`) of one layer: weights fw (float32, as stored), input x, the
    oracle's outputs and caches on the stored values, the family's configuration attributes."""
    w64 = {k: v.astype(np.float64) for k, v in fw.items()}
    x32 = x.astype(np.float32)   # the golden's input as stored; the oracle reads the stored values
    y, _, windows, states = S.mixer_forward(kind, mcfg, w64, x32.astype(np.float64), mask, None)
    if family == "mamba2":
        config = {k: np.int64(mcfg[k]) for k in ("hidden_size", "num_heads", "head_dim", "state_size", "n_groups",
                                                 "conv_kernel", "chunk_size", "norm_group_size", "use_bias",
                                                 "use_conv_bias")}
        config["layer_norm_epsilon"] = np.float64(mcfg["layer_norm_epsilon"])
        config["time_step_limit"] = np.array(mcfg["time_step_limit"], dtype=np.float64)
        config.update({k: np.int64(1) for k in mixers.MAMBA2_OPTION_ATTRS if mcfg.get(k)})   # FalconH1's norms
    elif family == "mamba1":
        config = {k: np.int64(mcfg[k]) for k in mixers.MAMBA1_INT_ATTRS}
        config.update({k: t(mcfg[k]) for k, t in mixers.MAMBA1_OPTION_ATTRS if mcfg.get(k)})   # the inner norms
    elif family == "shortconv":
        config = {k: np.int64(mcfg[k]) for k in ("hidden_size", "conv_L_cache", "conv_bias")}
    elif family == "lightning":   # MiniMax's lightning layer (its layer_idx and the model's num_hidden_layers)
        import linear
        config = {k: np.int64(mcfg[k]) for k in linear.LIGHTNING_INT_ATTRS}
        config["norm_eps"] = np.float64(mcfg["norm_eps"])
    elif family == "gdn":
        config = {k: np.int64(mcfg[k]) for k in mixers.GDN_INT_ATTRS}
        config["rms_norm_eps"] = np.float64(mcfg["rms_norm_eps"])
        config["projection_layout"] = mcfg["projection_layout"]
        if mcfg.get("allow_neg_eigval"):   # the option appended to the family (OLMo-Hybrid), stored when set
            config["allow_neg_eigval"] = np.int64(1)
    else:
        config = {k: np.int64(mcfg[k]) for k in M_ATTR_INTS}
        config.update({k: np.float64(mcfg[k]) for k in M_ATTR_FLOATS})
        config["qk_norm"] = mcfg["qk_norm"]
        # the options appended to the family (GraniteMoeHybrid's NoPE and score scale), stored when set
        config.update({k: t(mcfg[k]) for k, t in M_ATTR_OPTIONS if mcfg.get(k)})
    _write_golden_file(family, config, fw, x32, mask, y, windows, states, ids, layer, out, name)


def _write_golden_file(family, config, fw, x32, mask, y, windows, states, ids, layer, out, name):
    """A layer golden of `family` on disk: its weights fw and input x32 as stored, the oracle's output y and the
    caches after every position (windows, states; states None for a family without one), its configuration."""
    tensors = {"weights/" + k: v for k, v in fw.items()}
    tensors["inputs/hidden_states"] = x32
    tensors["inputs/attention_mask"] = mask
    tensors["expected/output"] = y
    tensors["expected/state_positions"] = np.arange(ids.shape[1] + 1, dtype=np.int64)
    tensors["expected/conv_state"] = windows
    if states is not None:
        tensors["expected/recurrent_state"] = states
    spec = mixers.GoldenSpec(name=name, family=family, description=f"layer {layer} of the checkpoint {name}",
                             config={}, batch=ids.shape[0], length=ids.shape[1], seed=0)
    tmp = out + ".tmp"
    goldens.write(spec, mixers.Golden(config, tensors, []), tmp)
    os.replace(tmp, out)


def kimi_mixer_golden(cfg, weights, ids, mask, layer, family, out, name):
    """Kimi-Linear's layer golden: layer `layer`'s KDA or MLA (the attention family's MLA option) on its input norm
    of the oracle's residual stream (golden/kimi.py)."""
    import linear
    kind = S.kimi.kinds(cfg)[layer]
    fam = "kda" if kind == "kda" else "attention"
    if fam != family:
        raise ValueError(f"layer {layer} is a {fam} layer, not {family}")
    st = S.kimi.KimiStack(cfg, weights)
    _, hidden, _, _, _ = st.forward(ids, mask)
    x = S.kimi.rmsnorm(hidden[layer], st.w[f"model.layers.{layer}.input_layernorm.weight"], st.eps)
    pre = f"model.layers.{layer}.self_attn."
    fw = {k[len(pre):]: v.astype(np.float32) for k, v in weights.items() if k.startswith(pre)}
    w64 = {k: v.astype(np.float64) for k, v in fw.items()}
    x32 = x.astype(np.float32)
    if fam == "kda":
        mcfg = st.kcfg
        y, windows, states = linear.kda_forward(mcfg, w64, x32.astype(np.float64), mask)
        config = {k: np.int64(mcfg[k]) for k in linear.KDA_INT_ATTRS}
        config["rms_norm_eps"] = np.float64(mcfg["rms_norm_eps"])
    else:
        mcfg = dict(st.acfg, cache_length=ids.shape[1])   # the golden's KV cache: its prompt
        y, windows, states = S.M.mla_forward(mcfg, w64, x32.astype(np.float64), mask)
        config = {k: np.int64(mcfg[k]) for k in M_ATTR_INTS}
        config.update({k: np.float64(mcfg[k]) for k in M_ATTR_FLOATS})
        config["qk_norm"] = mcfg["qk_norm"]
        config.update({k: t(mcfg[k]) for k, t in M_ATTR_OPTIONS if mcfg.get(k)})
    _write_golden_file(family, config, fw, x32, mask, y, windows, states, ids, layer, out, name)


def zamba_mixer_golden(cfg, weights, ids, mask, layer, family, out, name):
    """Zamba2 / Zamba: the Mamba2 / one-head Mamba1 of upstream layer `layer` (a hybrid layer's: on norm(h + T)) on
    its real input, written as a layer golden of the family (Zamba's under the family's names: in_proj's rows in
    the family's order, the per-head tensors without their head axis); a shared block's attention reads a 2D input,
    not a layer golden of the attention family's."""
    v2 = cfg["model_type"] == "zamba2"
    want, kind = ("mamba2", "mamba2") if v2 else ("mamba1", "mamba")
    if family != want:
        raise ValueError(f"layer {layer} of a {cfg['model_type']} checkpoint: only its {want} mixer has a layer golden "
                         "(its shared block's attention reads cat(hidden, embeddings), 2 hidden_size wide)")
    st = (S.zamba.Zamba2Stack if v2 else S.zamba.ZambaStack)(cfg, weights)
    k = next((k for k, (what, i, _) in enumerate(st.entries) if what == "mamba" and i == layer), None)
    if k is None:
        raise ValueError(f"layer {layer}: a {cfg['model_type']} checkpoint has {len(st.kinds)} layers")
    _, hidden, _, _, _ = st.forward(ids, mask)
    pre = f"model.layers.{layer}.mamba_decoder." if st.kinds[layer] == "hybrid" else f"model.layers.{layer}."
    x = S.zamba.rmsnorm(hidden[k], st.w[pre + "input_layernorm.weight"], st.eps)
    fw = {kk: v.astype(np.float32) for kk, v in st.mamba_weights(layer).items()}
    _write_layer_golden(kind, family, st.mcfg, fw, x, ids, mask, layer, out, name)


def inkling_mixer_golden(cfg, weights, ids, mask, layer, family, out, name):
    """Inkling's layer golden: layer `layer`'s attention with Inkling's options (its k / v convs, relative logits,
    window, and the layer's attn_sconv as the family's out_sconv) on input_layernorm of the oracle's residual stream
    (golden/inkling.py), its KV cache of the prompt's length."""
    import inkling
    if family != "attention":
        raise ValueError(f"layer {layer} is an attention layer, not {family}")
    st = inkling.InklingStack(cfg, weights)
    if not 0 <= layer < st.n:
        raise ValueError(f"layer {layer}: the checkpoint has {st.n} layers")
    _, hidden, _, _, _ = st.forward(ids, mask)
    x32 = inkling.rmsnorm(hidden[layer], st.w[f"model.layers.{layer}.input_layernorm.weight"], st.eps).astype(np.float32)
    fw = {k: v.astype(np.float32) for k, v in inkling.mixer_weights(weights, layer).items()}
    lcfg = dict(st.cfg, max_position_embeddings=ids.shape[1])
    w32 = {k: v.astype(np.float64) for k, v in weights.items()}
    y, windows, states = inkling.mixer_forward(lcfg, w32, layer, x32.astype(np.float64), mask)
    mcfg = inkling.mixer_config(st.cfg, layer, ids.shape[1])
    config = {k: np.int64(mcfg[k]) for k in M_ATTR_INTS}
    config.update({k: np.float64(mcfg[k]) for k in M_ATTR_FLOATS})
    config["qk_norm"] = mcfg["qk_norm"]
    config.update({k: t(mcfg[k]) for k, t in M_ATTR_OPTIONS if mcfg.get(k)})
    _write_golden_file(family, config, fw, x32, mask, y, windows, states, ids, layer, out, name)


def mixer_golden(cfg, weights, ids, mask, layer, family, out, name):
    """A mixer-level golden of one layer on its real input activations."""
    if cfg["model_type"] == "inkling_text":
        return inkling_mixer_golden(cfg, weights, ids, mask, layer, family, out, name)
    if cfg["model_type"] == "kimi_linear":
        return kimi_mixer_golden(cfg, weights, ids, mask, layer, family, out, name)
    if cfg["model_type"] in ("zamba2", "zamba"):
        return zamba_mixer_golden(cfg, weights, ids, mask, layer, family, out, name)
    if cfg["model_type"] == "minimax":   # either layer kind on input_layernorm(h) (golden/minimax.py)
        kind = S.minimax.kind(cfg, layer)
        if kind != family:
            raise ValueError(f"layer {layer} is a {kind} layer, not {family}")
        st = S.minimax.MiniMaxStack(cfg, weights)
        _, hidden, _, _, _ = st.forward(ids, mask)
        x = S.minimax.rmsnorm(hidden[layer], st.w[f"model.layers.{layer}.input_layernorm.weight"], st.eps)
        fw = {k: v.astype(np.float32) for k, v in st.mixers[layer].items()}
        return _write_layer_golden(kind, family, st.mcfgs[layer], fw, x, ids, mask, layer, out, name)
    olmo = cfg["model_type"] == "olmo_hybrid"
    kind = S.olmo_hybrid.kind(cfg, layer) if olmo else S.layer_kind(cfg, layer)
    if kind in S.NO_MIXER:
        raise ValueError(f"layer {layer} is a {kind} block without a sequence mixer (Nemotron-H): no mixer golden")
    fam_of = {"mamba2": "mamba2", "mamba": "mamba1", "shortconv": "shortconv", "attention": "attention", "gdn": "gdn"}
    if fam_of[kind] != family:
        raise ValueError(f"layer {layer} is a {fam_of[kind]} layer, not {family}")
    st = S.olmo_hybrid.OlmoHybridStack(cfg, weights) if olmo else S.Stack(cfg, weights)
    _, hidden, _, _, _ = st.forward(ids, mask)
    if olmo:   # a GDN layer reads input_layernorm(h), an attention layer (post-norm) h itself
        x = (S.olmo_hybrid.rmsnorm(hidden[layer], st.w[f"model.layers.{layer}.input_layernorm.weight"], st.eps)
             if kind == "gdn" else hidden[layer])
    elif S.falcon(cfg):   # slot `layer` of decoder layer layer // 2: its norm times the branch's in multiplier
        x = S.rmsnorm(hidden[layer], st.w[st.nm["layer"].format(layer // 2) + st.nm["norm"]], st.eps, st.zc)
        x = x * cfg["ssm_in_multiplier" if kind == "mamba2" else "attention_in_multiplier"]
    else:
        x = S.rmsnorm(hidden[layer], st.w[st.nm["layer"].format(layer) + st.nm["norm"]], st.eps, st.zc)
    fam = st.mixers[layer] if olmo else S.layer_weights(cfg, weights, layer)   # OLMo: q/k/v_proj stacked
    fw = {k: v.astype(np.float32) for k, v in fam.items()}
    _write_layer_golden(kind, family, st.mcfgs[layer], fw, x, ids, mask, layer, out, name)


def main(argv):
    ap = argparse.ArgumentParser(prog="generate.py from-checkpoint",
                                 description="a golden from a Hugging Face checkpoint folder")
    ap.add_argument("dir")
    ap.add_argument("--out", required=True, help="the golden file to write")
    ap.add_argument("--prompt", action="append", help="token ids of one row, space separated (repeatable)")
    ap.add_argument("--prompt-file", help="token ids, one row per line")
    ap.add_argument("--greedy", type=int, default=16, help="greedy tokens to generate (model golden)")
    ap.add_argument("--layer", type=int, help="write a mixer-level golden of this layer")
    ap.add_argument("--family", help="the layer's family (with --layer)")
    ap.add_argument("--name", help="the golden's name (default: the folder's name)")
    ap.add_argument("--semantics", action="append", default=[], metavar="ENTRY=CHOICE",
                    help="a version-dependent behaviour to follow instead of the checkpoint's transformers_version: "
                         + "; ".join(f"{k}={'|'.join(v)}" for k, v in K.SEMANTICS.items()))
    args = ap.parse_args(argv)
    try:
        sem = {}
        for item in args.semantics:
            k, eq, v = item.partition("=")
            if not eq or k not in K.SEMANTICS or v not in K.SEMANTICS[k]:
                raise ValueError(f"--semantics {item!r}: one of " +
                                 ", ".join(f"{k}={c}" for k, cs in K.SEMANTICS.items() for c in cs))
            sem[k] = v
        cfg, weights = load_checkpoint(args.dir, sem)
        ids, mask = prompts(args, cfg["vocab_size"])
        name = args.name or os.path.basename(os.path.normpath(args.dir))
        if (args.layer is None) != (args.family is None):
            raise ValueError("--layer and --family go together")
        if args.layer is not None:
            slots = cfg["num_hidden_layers"] * (2 if S.falcon(cfg) else 1)   # FalconH1: two mixer slots a layer
            if not 0 <= args.layer < slots:
                raise ValueError(f"--layer {args.layer}: the model has {slots} "
                                 f"{'mixer slots (two a decoder layer)' if S.falcon(cfg) else 'layers'}")
            mixer_golden(cfg, weights, ids, mask, args.layer, args.family, args.out, name)
            print(f"{args.out}: layer {args.layer} ({args.family}), B={ids.shape[0]} L={ids.shape[1]}; its case's "
                  f"tolerance: cases/tolerances/checkpoint-{args.family}.yaml (measured on checkpoints' layers; the "
                  f"bundled {args.family}.yaml is for the bundled goldens)")
            return 0
        if args.greedy < 1:
            raise ValueError("--greedy must be >= 1")
        L = ids.shape[1]
        for key in ("max_position_embeddings", "model_max_length"):   # model_max_length: Kimi's and Inkling's alias
            if key in cfg and isinstance(cfg[key], int):
                # every attention layer's KV cache holds max_position_embeddings positions (mixcheck's cache_length,
                # at most 65536 in the attention family; released configs say 131072 to 10240000): only the prompt
                # and its continuation are needed, and nothing else reads it, since the oracle computes only the
                # default RoPE (configkeys refuses other rope types; Kimi's MLA has no RoPE)
                cfg[key] = min(cfg[key], L + args.greedy)
        spec = S.ModelSpec(name=name, model_type=cfg["model_type"], description=f"checkpoint {name}", config=cfg,
                           batch=ids.shape[0], length=L, left_pad=tuple(int(L - m.sum()) for m in mask),
                           greedy=args.greedy, seed=0, positions=(L,))
        if len(json.dumps(cfg, sort_keys=True)) > 4000:
            # the reader caps string attributes at 4096 bytes: keep the keys, drop what no layer reads
            cfg = {k: v for k, v in cfg.items() if k not in ("id2label", "label2id", "task_specific_params",
                                                             "quantization_config", "vision_config")}
            if len(json.dumps(cfg, sort_keys=True)) > 4000:
                raise ValueError(f"{args.dir}/config.json: more than 4000 bytes once serialized (the golden reader's "
                                 "cap on a string attribute)")
        g = S.assemble(spec, cfg, weights, ids, mask)
        S.write_atomic(S.identity_attrs(spec), g, args.out)
        print(f"{args.out}: {cfg['model_type']} model, B={ids.shape[0]} L={L} G={args.greedy}")
        return 0
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"from-checkpoint: {e}", file=sys.stderr)
        return 2



def main_captured(argv):
    """main(argv) as a call, for tests that run from-checkpoint many times without an interpreter each:
    (exit code, what it wrote to stderr); argparse's refusals give their exit code, an exception that
    escapes main the traceback a run would print (exit 1). stdout is discarded."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            rc = main(argv)
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else 2
        except Exception:  # noqa: BLE001 - what the process would die of
            err.write(traceback.format_exc())
            rc = 1
    return rc, err.getvalue()

M_ATTR_INTS = ("hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim", "cache_length",
               "attn_output_gate", "attention_bias")
M_ATTR_FLOATS = ("partial_rotary_factor", "rope_theta", "rms_norm_eps")
# the appended options (models.py ATTENTION_OPTION_ATTRS): absent from a golden reads as 0
M_ATTR_OPTIONS = (("no_rope", np.int64), ("softmax_scale", np.float64), ("kv_lora_rank", np.int64),
                  ("q_lora_rank", np.int64), ("qk_rope_head_dim", np.int64), ("v_head_dim", np.int64),
                  ("sconv_kernel", np.int64), ("rel_dim", np.int64), ("rel_extent", np.int64),
                  ("sliding_window", np.int64))
