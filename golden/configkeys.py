"""What each key of a checkpoint's config.json does to the computation, per model type.

A checkpoint (generate.py from-checkpoint) brings an upstream config.json. Every key in it is one of:
  - honoured: the oracle (golden/stacks.py) and the C engine (harness/src/family/stackconfig.c) read it,
    with the upstream default when it is absent; a value the oracle cannot compute is refused;
  - inert: it cannot change the logits of a forward (token ids, the initialisers' parameters, dropout at
    inference, the dtype the weights were saved in, ...), listed here with the reason;
  - refused: anything else. check() raises ConfigError naming the key and its value, which from-checkpoint
    turns into exit 2 — nothing is silently defaulted.

Where upstream changed behaviour between releases, the golden records which behaviour it follows under
the key `mixcheck_semantics` of its config_json (semantics()):
  - mamba2_gated_norm: Mamba2's and Bamba's gated RMSNorm normalises groups of intermediate_size // n_groups
    channels from transformers 5.23.0 on ("per_group"); releases up to 5.22.x normalise the whole row
    ("full_row"). The two agree when n_groups is 1.
The rope parameters follow transformers' precedence (rope_params()): the `rope_parameters` dict (or its
legacy name `rope_scaling`), then top-level `rope_theta` / `partial_rotary_factor`, then the model's default.
"""

import json
import math
import re

# -------------------------------------------------------------------------------------------------
# JSON as transformers writes it
# -------------------------------------------------------------------------------------------------

NONFINITE = {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}


def _decode_float_objects(obj):
    """transformers writes a non-finite float as {"__float__": "Infinity"} (its JSON encoder)."""
    if set(obj) == {"__float__"} and obj["__float__"] in NONFINITE:
        return NONFINITE[obj["__float__"]]
    return obj


def loads(text):
    """JSON, plus the two ways upstream writes a non-finite float — the bare Infinity / -Infinity / NaN of
    Python's json module and transformers' {"__float__": "Infinity"} — read as floats."""
    return json.loads(text, object_hook=_decode_float_objects, parse_constant=lambda c: NONFINITE[c])


def load_json(path):
    """A config.json (loads()); ConfigError naming the file, line and column when it is not JSON."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        return loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}:{e.lineno}:{e.colno}: not JSON: {e.msg}") from None


def _encode_nonfinite(v):
    if isinstance(v, float) and not math.isfinite(v):
        return {"__float__": "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")}
    if isinstance(v, dict):
        return {k: _encode_nonfinite(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_encode_nonfinite(x) for x in v]
    return v


def dumps(cfg):
    """The config as strict JSON (RFC 8259: no bare Infinity), non-finite floats as transformers writes
    them; what a golden's config_json holds and the C reader accepts."""
    return json.dumps(_encode_nonfinite(cfg), sort_keys=True, allow_nan=False)


class ConfigError(ValueError):
    pass


# -------------------------------------------------------------------------------------------------
# the key tables
# -------------------------------------------------------------------------------------------------

# Keys that cannot change the computation of a forward, for every model type, with the reason.
INERT_COMMON = {
    "transformers_version": "the release that wrote the file (read for mixcheck_semantics only)",
    "architectures": "the class name; model_type decides the stack",
    "model_type": "checked against the model types mixcheck knows",
    "_name_or_path": "where the checkpoint came from",
    "dtype": "the dtype the weights were saved in (read from the safetensors header instead)",
    "torch_dtype": "the dtype the weights were saved in (older name)",
    "output_hidden_states": "what a forward returns, not what it computes",
    "output_attentions": "what a forward returns, not what it computes",
    "return_dict": "what a forward returns, not what it computes",
    "use_cache": "whether a forward returns a cache; the scenarios pass one explicitly",
    "pad_token_id": "a token id: padding is the attention mask's business",
    "bos_token_id": "a token id",
    "eos_token_id": "a token id",
    "sep_token_id": "a token id",
    "decoder_start_token_id": "a token id",
    "id2label": "labels of classification heads, not the LM head",
    "label2id": "labels of classification heads, not the LM head",
    "problem_type": "classification heads only",
    "initializer_range": "the initialiser's scale; the weights come from the checkpoint",
    "chunk_size_feed_forward": "a memory knob of feed-forward chunking: the same function",
    "is_encoder_decoder": "false for every model type here",
    "tokenizer_class": "the tokenizer; mixcheck takes token ids",
    "task_specific_params": "generation presets",
    "generation_config": "generation presets",
    "keys_to_ignore_at_inference": "which outputs a pipeline drops",
    "num_logits_to_keep": "how many positions' logits a forward returns, not their values",
    "tie_embedding": "an old name of tie_word_embeddings (Lfm2Config); read as that",
}

# Keys of the Mamba-style initialisers: the weights come from the checkpoint.
INERT_MAMBA_INIT = {
    "time_step_min": "dt_bias initialisation only",
    "time_step_max": "dt_bias initialisation only",
    "time_step_floor": "dt_bias initialisation only",
    "time_step_scale": "dt_proj initialisation only",
    "time_step_init_scheme": "dt_proj initialisation only",
    "rescale_prenorm_residual": "out_proj initialisation only",
}

_SILU = ("silu",)


def _one_of(*allowed):
    def check(v):
        return None if v in allowed else f"mixcheck's oracle computes only {', '.join(map(repr, allowed))}"
    return check


def _false(v):
    return None if v in (False, 0, None) else "mixcheck's oracle has no such parameters (only false is read)"


def _none(v):
    return None if v is None else "mixcheck's oracle does not compute it (only null is read)"


def _any(v):
    return None


NEMOTRON_BLOCKS = ("linear_attention", "full_attention", "mlp", "moe", "mamba", "attention")


def _block_types(v):
    if v is None:
        return None
    if not isinstance(v, list) or not v or not all(x in NEMOTRON_BLOCKS for x in v):
        return f"must list the blocks, each one of {', '.join(NEMOTRON_BLOCKS[:4])}"
    return None


def _pattern(v):
    if v is None:
        return None
    return None if isinstance(v, str) and v and set(v) <= set("M*-E") else "must be a string of M, *, - and E"


def _time_step_limit(v):
    if v is None:
        return None
    if (not isinstance(v, (list, tuple)) or len(v) != 2 or
            not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v)):
        return "must be [lo, hi] (numbers; hi may be Infinity)"
    lo, hi = v
    if math.isnan(lo) or math.isnan(hi) or lo < 0 or hi < lo:
        return "must be 0 <= lo <= hi"
    return None


def _rope_dict(v):
    if v is None:
        return None
    if not isinstance(v, dict):
        return "must be an object"
    if any(isinstance(x, dict) for x in v.values()):
        return "per-layer-type rope parameters are not read by mixcheck's oracle"
    t = v.get("rope_type", v.get("type", "default"))
    if t != "default":
        return (f"rope_type {t!r}: mixcheck's oracle computes only the default rotary embedding "
                "(linear, dynamic, yarn, longrope, llama3 scaling are not implemented)")
    extra = set(v) - {"rope_type", "type", "rope_theta", "partial_rotary_factor"}
    if extra:
        return f"holds {sorted(extra)}, which the default rotary embedding does not read"
    for k in ("rope_theta", "partial_rotary_factor"):
        if k in v and (not isinstance(v[k], (int, float)) or isinstance(v[k], bool) or not v[k] > 0):
            return f"{k} must be a positive number"
    if "partial_rotary_factor" in v and not v["partial_rotary_factor"] <= 1:
        return "partial_rotary_factor must be <= 1"
    return None


def _mixcheck_semantics(v):
    if not isinstance(v, dict):
        return "must be an object"
    for k, x in v.items():
        if k not in SEMANTICS:
            return f"unknown entry {k!r} (known: {', '.join(SEMANTICS)})"
        if x not in SEMANTICS[k]:
            return f"{k}: {x!r} is not one of {', '.join(SEMANTICS[k])}"
    return None


ROPE_KEYS = {"rope_parameters": _rope_dict, "rope_scaling": _rope_dict, "rope_theta": _any,
             "partial_rotary_factor": _any}

# Honoured keys per model type, each with its value check (None: any value the oracle reads is fine).
HONOURED = {
    "mamba2": {
        "vocab_size": _any, "hidden_size": _any, "num_hidden_layers": _any, "tie_word_embeddings": _any,
        "num_heads": _any, "head_dim": _any, "state_size": _any, "n_groups": _any, "expand": _any,
        "conv_kernel": _any, "chunk_size": _any, "layer_norm_epsilon": _any, "use_bias": _any,
        "use_conv_bias": _any, "hidden_act": _one_of(*_SILU), "residual_in_fp32": _any,
        "time_step_limit": _time_step_limit,
        # Mamba2Mixer has no dt_proj: time_step_rank is read by no layer of Mamba2ForCausalLM
        "time_step_rank": _any,
    },
    "mamba": {
        "vocab_size": _any, "hidden_size": _any, "num_hidden_layers": _any, "tie_word_embeddings": _any,
        "intermediate_size": _any, "expand": _any, "state_size": _any, "conv_kernel": _any,
        "time_step_rank": _any, "use_bias": _any, "use_conv_bias": _any, "hidden_act": _one_of(*_SILU),
        "layer_norm_epsilon": _any, "residual_in_fp32": _any,
        # implementation choices of MambaMixer's slow path: the same recurrence
        "use_mambapy": _any, "use_associative_scan": _any,
    },
    "lfm2": {
        "vocab_size": _any, "hidden_size": _any, "num_hidden_layers": _any, "tie_word_embeddings": _any,
        "intermediate_size": _any, "block_ff_dim": _any, "num_attention_heads": _any,
        "num_key_value_heads": _any, "max_position_embeddings": _any, "norm_eps": _any, "conv_bias": _any,
        "conv_L_cache": _any, "block_multiple_of": _any, "block_ffn_dim_multiplier": _any,
        "block_auto_adjust_ff_dim": _any, "layer_types": _any, "full_attn_idxs": _any, **ROPE_KEYS,
    },
    "bamba": {
        "vocab_size": _any, "hidden_size": _any, "num_hidden_layers": _any, "tie_word_embeddings": _any,
        "intermediate_size": _any, "num_attention_heads": _any, "num_key_value_heads": _any,
        "hidden_act": _one_of(*_SILU), "rms_norm_eps": _any, "max_position_embeddings": _any,
        "attn_layer_indices": _any, "mamba_n_heads": _any, "mamba_d_head": _any, "mamba_n_groups": _any,
        "mamba_d_state": _any, "mamba_d_conv": _any, "mamba_expand": _any, "mamba_chunk_size": _any,
        "mamba_conv_bias": _any, "mamba_proj_bias": _any, "time_step_limit": _time_step_limit,
        "attention_bias": _any, "mlp_bias": _false, **ROPE_KEYS,
    },
    "qwen3_5_text": {
        "vocab_size": _any, "hidden_size": _any, "num_hidden_layers": _any, "tie_word_embeddings": _any,
        "intermediate_size": _any, "num_attention_heads": _any, "num_key_value_heads": _any, "head_dim": _any,
        "hidden_act": _one_of(*_SILU), "max_position_embeddings": _any, "rms_norm_eps": _any,
        "attention_bias": _any, "linear_conv_kernel_dim": _any, "linear_key_head_dim": _any,
        "linear_value_head_dim": _any, "linear_num_key_heads": _any, "linear_num_value_heads": _any,
        "layer_types": _any, **ROPE_KEYS,
    },
    "falcon_mamba": {
        "vocab_size": _any, "hidden_size": _any, "num_hidden_layers": _any, "tie_word_embeddings": _any,
        "intermediate_size": _any, "expand": _any, "state_size": _any, "conv_kernel": _any,
        "time_step_rank": _any, "use_bias": _any, "use_conv_bias": _any, "hidden_act": _one_of(*_SILU),
        "layer_norm_epsilon": _any, "residual_in_fp32": _any, "mixer_rms_eps": _any,
        # implementation choices of FalconMambaMixer's slow path (use_falcon_mambapy: the config's older name of
        # use_mambapy): the same recurrence
        "use_mambapy": _any, "use_falcon_mambapy": _any, "use_associative_scan": _any,
    },
    "jamba": {
        "vocab_size": _any, "hidden_size": _any, "num_hidden_layers": _any, "tie_word_embeddings": _any,
        "intermediate_size": _any, "num_attention_heads": _any, "num_key_value_heads": _any, "head_dim": _any,
        "hidden_act": _one_of(*_SILU), "rms_norm_eps": _any, "max_position_embeddings": _any,
        "attn_layer_period": _any, "attn_layer_offset": _any, "expert_layer_period": _any,
        "expert_layer_offset": _any, "num_experts": _any, "num_local_experts": _any, "num_experts_per_tok": _any,
        "mamba_d_state": _any, "mamba_d_conv": _any, "mamba_expand": _any, "mamba_dt_rank": _any,
        "mamba_conv_bias": _any, "mamba_proj_bias": _any,
        # implementation choices of the Mamba mixer's slow path (use_mamba_kernels: deprecated, no effect in 5.24)
        "use_mambapy": _any, "use_associative_scan": _any, "use_mamba_kernels": _any,
    },
    "granitemoehybrid": {
        "vocab_size": _any, "hidden_size": _any, "num_hidden_layers": _any, "tie_word_embeddings": _any,
        "intermediate_size": _any, "shared_intermediate_size": _any, "num_local_experts": _any,
        "num_experts_per_tok": _any, "num_attention_heads": _any, "num_key_value_heads": _any, "head_dim": _any,
        "hidden_act": _one_of(*_SILU), "rms_norm_eps": _any, "max_position_embeddings": _any,
        "attention_bias": _any, "attention_multiplier": _any, "embedding_multiplier": _any,
        "residual_multiplier": _any, "logits_scaling": _any, "position_embedding_type": _one_of(None, "nope", "rope"),
        "layer_types": _any, "layers_block_type": _any, "mamba_n_heads": _any, "mamba_d_head": _any,
        "mamba_n_groups": _any, "mamba_d_state": _any, "mamba_d_conv": _any, "mamba_expand": _any,
        "mamba_chunk_size": _any, "mamba_conv_bias": _any, "mamba_proj_bias": _any,
        "time_step_limit": _time_step_limit, **ROPE_KEYS,
    },
    "nemotron_h": {
        "vocab_size": _any, "hidden_size": _any, "layers_block_type": _block_types, "layer_types": _block_types,
        "hybrid_override_pattern": _pattern,
        # NemotronHForCausalLM ties nothing (_tied_weights_keys is empty): a true here would still be untied
        "tie_word_embeddings": lambda v: None if v in (False, 0, None) else
        "NemotronHForCausalLM ties no weights (its lm_head is its own; only false is read)",
        "num_attention_heads": _any, "num_key_value_heads": _any, "head_dim": _any,
        "max_position_embeddings": _any, "intermediate_size": _any, "mlp_hidden_act": _one_of("relu2"),
        "mlp_bias": _false, "layer_norm_epsilon": _any,
        "ssm_state_size": _any, "mamba_num_heads": _any, "mamba_head_dim": _any, "mamba_hidden_act": _one_of(*_SILU),
        "n_groups": _any, "mamba_n_groups": _any, "conv_kernel": _any, "mamba_d_conv": _any, "chunk_size": _any,
        "mamba_chunk_size": _any, "use_conv_bias": _any, "mamba_conv_bias": _any, "use_bias": _any,
        # NemotronHMamba2Mixer clamps dt to (time_step_min, inf)
        "time_step_min": _any, "mamba_dt_min": _any,
        "n_routed_experts": _any, "num_local_experts": _any, "num_experts_per_tok": _any,
        "moe_intermediate_size": _any, "moe_shared_expert_intermediate_size": _any, "n_group": _any,
        "topk_group": _any, "norm_topk_prob": _any, "routed_scaling_factor": _any,
        "moe_latent_size": lambda v: None if v is None else
        "the MoE's latent projections (fc1_latent_proj / fc2_latent_proj) are not computed (only null is read)",
        "num_nextn_predict_layers": lambda v: None if v in (0, None) else
        "multi-token prediction layers are not computed (only 0 is read)",
    },
}
ZAMBA2_LAYERS = ("linear_attention", "mamba", "hybrid")
HONOURED["zamba2"] = {
    "vocab_size": _any, "hidden_size": _any, "num_hidden_layers": _any, "max_position_embeddings": _any,
    "layers_block_type": lambda v: None if v is None or (isinstance(v, list) and v and all(x in ZAMBA2_LAYERS for x in v))
    else "must list the layers, each \"linear_attention\" (or \"mamba\") or \"hybrid\"",
    "layer_types": lambda v: None if v is None or (isinstance(v, list) and v and all(x in ZAMBA2_LAYERS for x in v))
    else "must list the layers, each \"linear_attention\" (or \"mamba\") or \"hybrid\"",
    "mamba_d_state": _any, "mamba_d_conv": _any, "mamba_expand": _any, "mamba_ngroups": _any, "n_mamba_heads": _any,
    "chunk_size": _any,
    # Zamba2MambaMixer clamps dt to (time_step_min, inf)
    "time_step_min": _any,
    "use_conv_bias": lambda v: None if v in (True, 1, None) else
    "upstream adds the conv bias in a prefill whatever it says and in a decode step only with it (only true is read)",
    "add_bias_linear": _false, "intermediate_size": _any, "hidden_act": _one_of("gelu"),
    "num_attention_heads": _any, "num_key_value_heads": _any, "num_mem_blocks": _any,
    "use_shared_attention_adapter": _any, "adapter_rank": _any, "use_mem_rope": _any, "rms_norm_eps": _any,
    "use_long_context": _false, "tie_word_embeddings": _any, **ROPE_KEYS,
}
HONOURED["qwen3_next"] = {
    **HONOURED["qwen3_5_text"],
    # Qwen3NextConfig.__post_init__: without layer_types, full attention every full_attention_interval-th layer
    "full_attention_interval": _any,
    # Qwen3NextSparseMoeBlock and where it sits (Qwen3NextDecoderLayer)
    "num_experts": _any, "num_experts_per_tok": _any, "moe_intermediate_size": _any,
    "shared_expert_intermediate_size": _any, "norm_topk_prob": _any, "decoder_sparse_step": _any,
    "mlp_only_layers": _any,
}
HONOURED["qwen3_5_moe_text"] = {
    **HONOURED["qwen3_5_text"],
    "full_attention_interval": _any,   # Qwen3_5MoeTextConfig.__post_init__, as Qwen3-Next's
    # Qwen3_5MoeSparseMoeBlock on every layer (its router always renormalises)
    "num_experts": _any, "num_experts_per_tok": _any, "moe_intermediate_size": _any,
    "shared_expert_intermediate_size": _any,
}
del HONOURED["qwen3_5_moe_text"]["intermediate_size"]   # Qwen3_5MoeTextConfig has no dense MLP
HONOURED["zamba"] = {
    "vocab_size": _any, "hidden_size": _any, "num_hidden_layers": _any, "max_position_embeddings": _any,
    "layers_block_type": lambda v: None if v is None or (isinstance(v, list) and v and all(x in ZAMBA2_LAYERS for x in v))
    else "must list the layers, each \"mamba\" (or \"linear_attention\") or \"hybrid\"",
    "layer_types": lambda v: None if v is None or (isinstance(v, list) and v and all(x in ZAMBA2_LAYERS for x in v))
    else "must list the layers, each \"mamba\" (or \"linear_attention\") or \"hybrid\"",
    "attn_layer_period": _any, "attn_layer_offset": _any,
    "mamba_d_state": _any, "mamba_d_conv": _any, "mamba_expand": _any, "mamba_dt_rank": _any, "mamba_conv_bias": _any,
    "mamba_proj_bias": _any,
    # ZambaMambaMixer gives each head its own x_proj and dt_proj: B, C and dt per head, not a Mamba1 mixer
    "n_mamba_heads": lambda v: None if v == 1 and v is not True else
    "only one Mamba head is computed (each head has its own x_proj and dt_proj: B, C and dt per head)",
    "intermediate_size": _any, "hidden_act": _one_of("gelu"), "hidden_mamba_act": _one_of("silu"),
    "num_attention_heads": _any, "num_key_value_heads": _any, "attention_head_dim": _any,
    # the width of cat(hidden, embeddings); another value is refused by the engine (q/k/v_proj read 2 hidden_size)
    "attention_hidden_size": _any, "rms_norm_eps": _any, "tie_word_embeddings": _any,
}
for _t in HONOURED.values():
    _t["mixcheck_semantics"] = _mixcheck_semantics

INERT = {
    "mamba2": {**INERT_COMMON, **INERT_MAMBA_INIT},
    "mamba": {**INERT_COMMON, **INERT_MAMBA_INIT},
    "lfm2": dict(INERT_COMMON),
    "bamba": {**INERT_COMMON, "attention_dropout": "dropout is off at inference",
              "z_loss_coefficient": "a training loss term"},
    "qwen3_5_text": {**INERT_COMMON, "attention_dropout": "dropout is off at inference"},
    "falcon_mamba": {**INERT_COMMON, **INERT_MAMBA_INIT},
    "jamba": {**INERT_COMMON, "attention_dropout": "dropout is off at inference",
              "output_router_logits": "the router logits as an extra output; the logits do not change",
              "router_aux_loss_coef": "a training loss term"},
    "granitemoehybrid": {**INERT_COMMON, "attention_dropout": "dropout is off at inference",
                         "output_router_logits": "the router logits as an extra output; the logits do not change",
                         "router_aux_loss_coef": "a training loss term"},
    "nemotron_h": {
        **INERT_COMMON, "attention_dropout": "dropout is off at inference",
        "hidden_dropout": "read by no layer of NemotronHForCausalLM",
        "output_router_logits": "the router logits as an extra output; the logits do not change",
        "num_hidden_layers": "NemotronHConfig derives it from layers_block_type (a value given is ignored)",
        "time_step_max": "dt_bias initialisation only", "time_step_floor": "dt_bias initialisation only",
        "mamba_dt_max": "dt_bias initialisation only (time_step_max)",
        "mamba_dt_init_floor": "dt_bias initialisation only (time_step_floor)",
        "rescale_prenorm_residual": "out_proj initialisation only",
        "time_step_limit": "read by no layer: NemotronHMamba2Mixer's dt limit is (time_step_min, inf)",
        "mamba_dt_limit": "read by no layer (time_step_limit)",
        "expand": "read by no layer: the Mamba2 intermediate size is mamba_num_heads x mamba_head_dim",
        "mamba_expand": "read by no layer (expand)",
        "mamba_proj_bias": "read by no layer (use_bias sets the Mamba2 projections' bias)",
        "attention_bias": "NemotronHAttention builds its projections without bias whatever it says",
        "residual_in_fp32": "NemotronHBlock reads no such key: the residual is added in the model dtype",
        "mamba_ssm_cache_dtype": "read by no layer in 5.24 (the cache holds the state in the dtype it is given)",
        "n_shared_experts": "NemotronHMoE has one shared expert whatever it says",
        "moe_shared_expert_overlap": "read by no layer",
        "sliding_window": "NemotronHAttention has no sliding window (the causal mask is the full one)",
        "use_mamba_kernels": "deprecated, no effect in 5.24 (the implementation is chosen by what is installed)",
        "mtp_layers_block_type": "the multi-token prediction layers' kinds: no such layers (num_nextn_predict_layers 0)",
        "mtp_hybrid_override_pattern": "the multi-token prediction layers' kinds (older name)",
    },
}
INERT["zamba2"] = {
    **INERT_COMMON, "attention_dropout": "dropout is off at inference",
    "time_step_max": "dt_bias initialisation only", "time_step_floor": "dt_bias initialisation only",
    "use_mem_eff_path": "the fused training path only (Zamba2MambaMixer uses it in training without a cache)",
    "use_mamba_kernels": "deprecated, no effect in 5.24 (the implementation is chosen by what is installed)",
    "attention_head_dim": "Zamba2Config derives it (2 hidden_size / num_attention_heads; a value given is overwritten)",
    "head_dim": "the attribute_map alias of attention_head_dim (derived)",
    "attention_hidden_size": "Zamba2Config derives it (2 hidden_size)",
    "mamba_headdim": "Zamba2Config derives it (mamba_expand hidden_size / n_mamba_heads)",
    "hybrid_layer_ids": "Zamba2Config derives it from layers_block_type",
    "kv_channels": "Zamba2Config derives it; read by no layer",
    "num_query_groups": "Zamba2Config derives it; read by no layer",
}
INERT["zamba"] = {
    **INERT_COMMON, "attention_dropout": "dropout is off at inference",
    "time_step_min": "dt_proj_bias initialisation only (ZambaMambaMixer does not clamp dt)",
    "time_step_max": "dt_proj_bias initialisation only", "time_step_floor": "dt_proj_bias initialisation only",
    "use_mamba_kernels": "deprecated, no effect in 5.24 (the implementation is chosen by what is installed)",
    "use_associative_scan": "the same recurrence by torch's associative scan (compiled only) or the loop",
    "num_logits_to_keep": "how many prompt positions generate() asks logits for; the logits computed do not change",
}

INERT["qwen3_next"] = {**INERT_COMMON, "attention_dropout": "dropout is off at inference",
                       "output_router_logits": "the router logits as an extra output; the logits do not change",
                       "router_aux_loss_coef": "a training loss term"}

INERT["qwen3_5_moe_text"] = dict(INERT["qwen3_next"])

# OLMo-Hybrid (OlmoHybridConfig, transformers 5.24): Gated DeltaNet and attention layers by layer_types
def _olmo_layer_types(v):
    if v is None:
        return None
    if (not isinstance(v, list) or not all(x in ("linear_attention", "full_attention") for x in v)
            or "linear_attention" not in v or "full_attention" not in v):
        return ("must list the layers, each \"linear_attention\" or \"full_attention\", with at least one of each "
                "(OlmoHybridConfig.validate_architecture)")
    return None


HONOURED["olmo_hybrid"] = {
    "vocab_size": _any, "hidden_size": _any, "num_hidden_layers": _any, "intermediate_size": _any,
    "num_attention_heads": _any, "num_key_value_heads": _any, "hidden_act": _one_of(*_SILU),
    "max_position_embeddings": _any, "rms_norm_eps": _any, "tie_word_embeddings": _any, "attention_bias": _any,
    "layer_types": _olmo_layer_types, "linear_num_key_heads": _any, "linear_num_value_heads": _any,
    "linear_key_head_dim": _any, "linear_value_head_dim": _any, "linear_conv_kernel_dim": _any,
    "linear_allow_neg_eigval": _any, "mixcheck_semantics": _mixcheck_semantics,
    "rope_parameters": _rope_dict, "rope_scaling": _rope_dict, "rope_theta": _any,
}
INERT["olmo_hybrid"] = {
    **INERT_COMMON, "attention_dropout": "dropout is off at inference",
    "linear_a_log_min": "A_log initialisation only", "linear_a_log_max": "A_log initialisation only",
    "linear_dt_min": "dt_bias initialisation only", "linear_dt_max": "dt_bias initialisation only",
    "linear_dt_init_floor": "dt_bias initialisation only",
    "partial_rotary_factor": "OlmoHybridRotaryEmbedding rotates the whole head (it reads no partial_rotary_factor)",
}

# Kimi-Linear (KimiLinearConfig, transformers 5.24): the keys it writes are its attribute_map's names
# (model_max_length, moe_renormalize, num_expert_group, num_experts, num_experts_per_token, num_shared_experts);
# the field names are read as well (normalise)
KIMI_LAYERS = ("linear_attention", "full_attention")
HONOURED["kimi_linear"] = {
    "vocab_size": _any, "hidden_size": _any, "num_hidden_layers": _any, "rms_norm_eps": _any,
    "tie_word_embeddings": _any, "intermediate_size": _any, "moe_intermediate_size": _any,
    "layer_types": lambda v: None if v is None or (isinstance(v, list) and v and all(x in KIMI_LAYERS for x in v))
    else "must list the layers, each \"linear_attention\" or \"full_attention\"",
    "mlp_layer_types": lambda v: None if v is None or (isinstance(v, list) and v and all(x in ("dense", "sparse")
                                                                                       for x in v))
    else "must list the layers, each \"dense\" or \"sparse\"",
    "first_k_dense_replace": _any, "linear_attn_config": _any,
    # KimiLinearDeltaAttention
    "linear_num_heads": _any, "linear_head_dim": _any, "linear_conv_kernel_dim": _any, "hidden_act": _one_of("silu"),
    # KimiLinearAttention (MLA without positional embedding)
    "num_attention_heads": _any, "num_key_value_heads": _any, "kv_lora_rank": _any, "q_lora_rank": _any,
    "qk_rope_head_dim": _any, "qk_nope_head_dim": _any, "v_head_dim": _any, "attention_bias": _any,
    "model_max_length": _any, "max_position_embeddings": _any,
    # KimiLinearMoE and KimiLinearTopkRouter
    "num_experts": _any, "num_local_experts": _any, "num_experts_per_token": _any, "num_experts_per_tok": _any,
    "num_expert_group": _any, "n_group": _any, "topk_group": _any, "moe_renormalize": _any, "norm_topk_prob": _any,
    "routed_scaling_factor": _any, "num_shared_experts": _any, "n_shared_experts": _any,
}
INERT["kimi_linear"] = {
    **INERT_COMMON, "attention_dropout": "dropout is off at inference",
    "output_router_logits": "the router logits as an extra output; the logits do not change",
    "pretraining_tp": "tensor-parallel degree of pretraining; KimiLinearForCausalLM reads it nowhere",
    "head_dim": "KimiLinearConfig sets it to qk_rope_head_dim; no layer reads it",
    "qk_head_dim": "KimiLinearConfig derives it (qk_nope_head_dim + qk_rope_head_dim)",
}

# Values an inert key must still have for it to be inert.
INERT_VALUES = {"is_encoder_decoder": _false, "attention_dropout": lambda v: None if v in (0, 0.0, None) else
                "dropout at inference is not computed by mixcheck (only 0 is read)"}

# FalconH1 (FalconH1Config, transformers 5.24): every decoder layer a Mamba2 mixer and attention in parallel
def _hybrid_layers(v):
    if v is None:
        return None
    if not isinstance(v, list) or not all(x == "hybrid" for x in v):
        return "every FalconH1 layer is \"hybrid\" (a Mamba2 mixer and attention in parallel)"
    return None


def _list_of(n):
    def check(v):
        if v is None:
            return None
        if (not isinstance(v, list) or len(v) != n or
                not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in v)):
            return f"must be a list of {n} finite numbers"
        return None
    return check


def _finite(v):
    return None if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else "must be finite"


HONOURED["falcon_h1"] = {
    "vocab_size": _any, "hidden_size": _any, "tie_word_embeddings": _any, "intermediate_size": _any,
    "num_hidden_layers": lambda v: None if isinstance(v, int) and 1 <= v <= 32 else
    "1 to 32 decoder layers (two mixer slots each in the stack engine's 64)",
    "num_attention_heads": _any, "num_key_value_heads": _any, "head_dim": _any, "hidden_act": _one_of(*_SILU),
    "rms_norm_eps": _any, "max_position_embeddings": _any, "attention_bias": _any, "mlp_bias": _false,
    "mamba_d_ssm": _any, "mamba_n_heads": _any, "mamba_d_head": _any, "mamba_n_groups": _any, "mamba_d_state": _any,
    "mamba_d_conv": _any, "mamba_expand": _any, "mamba_chunk_size": _any, "mamba_conv_bias": _any,
    "mamba_proj_bias": _any, "projectors_bias": _any,
    "mamba_rms_norm": _any, "mamba_norm_before_gate": _any,   # the Mamba2 options no_gated_norm / norm_before_gate
    "time_step_limit": _time_step_limit, "layers_block_type": _hybrid_layers, "layer_types": _hybrid_layers,
    "embedding_multiplier": _finite, "lm_head_multiplier": _finite, "mlp_multipliers": _list_of(2),
    "key_multiplier": _finite, "attention_in_multiplier": _finite, "attention_out_multiplier": _finite,
    "ssm_multipliers": _list_of(5), "ssm_in_multiplier": _finite, "ssm_out_multiplier": _finite,
    "mixcheck_semantics": _mixcheck_semantics, **ROPE_KEYS,
}
INERT["falcon_h1"] = {**INERT_COMMON, **INERT_MAMBA_INIT, "attention_dropout": "dropout is off at inference"}

# LFM2-MoE (Lfm2MoeConfig, transformers 5.24): LFM2's layers, the dense-first MLP, the sigmoid-routed MoE
def _lfm2_layer_types(v):
    if isinstance(v, list) and v and all(x in ("conv", "full_attention") for x in v):
        return None
    return "must list the layers, each \"conv\" or \"full_attention\" (Lfm2MoeModel indexes it: no default)"


HONOURED["lfm2_moe"] = {
    "vocab_size": _any, "hidden_size": _any, "num_hidden_layers": _any, "tie_word_embeddings": _any,
    "intermediate_size": _any, "moe_intermediate_size": _any, "num_attention_heads": _any,
    "num_key_value_heads": _any, "max_position_embeddings": _any, "norm_eps": _any, "conv_bias": _any,
    "conv_L_cache": _any, "layer_types": _lfm2_layer_types, "num_dense_layers": _any, "num_experts": _any,
    "num_experts_per_tok": _any, "use_expert_bias": _any, "routed_scaling_factor": _finite, "norm_topk_prob": _any,
    "head_dim": _any, "mixcheck_semantics": _mixcheck_semantics, **ROPE_KEYS,
}
INERT["lfm2_moe"] = {**INERT_COMMON,
                     "output_router_logits": "the router logits as an extra output; the logits do not change"}

# MiniMax (MiniMaxConfig, transformers 5.24): lightning and softmax attention layers by layer_types, the MoE, the
# residual scalings
def _minimax_layer_types(v):
    if v is None or (isinstance(v, list) and all(x in ("linear_attention", "full_attention") for x in v)):
        return None
    return "must list the layers, each \"linear_attention\" or \"full_attention\" (or be null: full attention at even i)"


HONOURED["minimax"] = {
    "vocab_size": _any, "hidden_size": _any, "num_hidden_layers": _any, "intermediate_size": _any,
    "num_attention_heads": _any, "num_key_value_heads": _any, "head_dim": _any, "hidden_act": _one_of(*_SILU),
    "max_position_embeddings": _any, "rms_norm_eps": _any, "tie_word_embeddings": _any, "sliding_window": _none,
    "num_experts_per_tok": _any, "num_local_experts": _any, "num_experts": _any, "layer_types": _minimax_layer_types,
    "block_size": _any, "full_attn_alpha_factor": _finite, "full_attn_beta_factor": _finite,
    "linear_attn_alpha_factor": _finite, "linear_attn_beta_factor": _finite, "mlp_alpha_factor": _finite,
    "mlp_beta_factor": _finite, "mixcheck_semantics": _mixcheck_semantics, **ROPE_KEYS,
    # MiniMax-Text-01's own key, which MiniMaxConfig 5.24 does not read: the config reader refuses it without
    # layer_types (its layers would fall back to the alternating default), and with layer_types reads layer_types
    "attn_type_list": _any,
}
INERT["minimax"] = {
    **INERT_COMMON, "attention_dropout": "dropout is off at inference",
    "router_jitter_noise": "the router's input noise, applied in training only (MiniMaxSparseMoeBlock)",
    "output_router_logits": "the router logits as an extra output; the logits do not change",
    "router_aux_loss_coef": "the weight of the auxiliary load-balancing loss; the logits do not change",
}

# Inkling (InklingTextConfig, transformers 5.24, InklingForCausalLM): attention layers of two kinds with short convs
# and relative logits, the dense MLP or the sink-routed MoE, the normed embedding, the head's divisor
def _inkling_list(allowed):
    def check(v):
        if v is None or (isinstance(v, list) and all(x in allowed for x in v)):
            return None
        return "must list the layers, each " + " or ".join(f'"{a}"' for a in allowed) + " (or be null)"
    return check


HONOURED["inkling_text"] = {
    "vocab_size": _any, "hidden_size": _any, "num_hidden_layers": _any, "num_attention_heads": _any,
    "num_key_value_heads": _any, "head_dim": _any, "swa_num_attention_heads": _any, "swa_num_key_value_heads": _any,
    "swa_head_dim": _any, "sliding_window_size": _any, "sliding_window": _any, "d_rel": _any, "rel_extent": _any,
    "local_layer_ids": _any, "layer_types": _inkling_list(("hybrid", "hybrid_sliding")),
    "mlp_layer_types": _inkling_list(("dense", "sparse")), "dense_mlp_idx": _any, "dense_intermediate_size": _any,
    "max_position_embeddings": _any, "model_max_length": _any, "rms_norm_eps": _any, "conv_kernel_size": _any,
    "sconv_kernel_size": _any, "intermediate_size": _any, "hidden_act": _one_of(*_SILU),
    "moe_intermediate_size": _any, "n_routed_experts": _any, "num_local_experts": _any, "num_experts_per_tok": _any,
    "n_shared_experts": _any, "route_scale": _finite, "logits_mup_width_multiplier": _finite,
    "embedding_multiplier": _finite,
    # the logarithmic query scaling counts the left padding's slots as positions upstream: not computed
    "log_scaling_n_floor": _none,
    # 5.24 never reads it: the shared experts are always in the router's softmax
    "shared_expert_sink": lambda v: None if v in (True, None) else
    "InklingForCausalLM 5.24 never reads it (the shared experts are always the router's sink; only true is read)",
    # the head's columns beyond it dropped: not computed (check() compares it with vocab_size)
    "unpadded_vocab_size": _any, "mixcheck_semantics": _mixcheck_semantics,
}
INERT["inkling_text"] = {
    **INERT_COMMON, "attention_dropout": "dropout is off at inference",
    "log_scaling_alpha": "read only with log_scaling_n_floor, which is refused unless null",
    "rms_norm_eps_moe_gate": "read by no layer of InklingForCausalLM 5.24 (InklingTopkRouter has no norm)",
    "tie_word_embeddings": "InklingForCausalLM ties nothing (_tied_weights_keys is empty): the head is lm_head",
    "number_of_conv_states": "the cache's count of conv states a layer (4), set by InklingTextConfig itself",
    "num_mtp_layers": "the multi-token prediction layers: not part of InklingForCausalLM (model.mtp.* not loaded)",
    "chain_hidden_post_norm": "the multi-token prediction layers only",
    "mtp_hidden_states_first": "the multi-token prediction layers only",
    "mtp_local_layer_ids": "the multi-token prediction layers only",
}

SEMANTICS = {"mamba2_gated_norm": ("per_group", "full_row")}
GATED_NORM_TYPES = ("mamba2", "bamba", "granitemoehybrid")
PER_GROUP_SINCE = (5, 23, 0)


def _release(v):
    m = re.match(r"^(\d+)\.(\d+)\.(\d+)", str(v or ""))
    return tuple(int(x) for x in m.groups()) if m else None


def semantics(cfg):
    """{entry: choice} of the version-dependent behaviours that apply to the model type: the config's own
    `mixcheck_semantics` entry, else what its transformers_version did, else the newest behaviour."""
    out = {}
    given = cfg.get("mixcheck_semantics") or {}
    if cfg.get("model_type") in GATED_NORM_TYPES:
        rel = _release(cfg.get("transformers_version"))
        out["mamba2_gated_norm"] = given.get("mamba2_gated_norm") or (
            "full_row" if rel is not None and rel < PER_GROUP_SINCE else "per_group")
    return out


def gated_norm_group_size(cfg, intermediate, n_groups):
    return intermediate // n_groups if semantics(cfg).get("mamba2_gated_norm") == "per_group" else intermediate


# transformers' defaults where the model class sets its own (Lfm2Config.default_theta; Bamba hard-codes a
# partial rotary factor of 0.5 over any top-level value; Qwen3.5 defaults it to 0.25)
ROPE_DEFAULTS = {"lfm2": (1000000.0, 1.0), "bamba": (10000.0, 0.5), "qwen3_5_text": (10000.0, 0.25),
                 "granitemoehybrid": (10000.0, 1.0)}
ROPE_DEFAULTS["qwen3_next"] = (10000.0, 0.25)
ROPE_DEFAULTS["qwen3_5_moe_text"] = (10000.0, 0.25)   # Qwen3NextConfig: partial_rotary_factor 0.25 unless given
ROPE_DEFAULTS["falcon_h1"] = (10000.0, 1.0)
ROPE_DEFAULTS["lfm2_moe"] = (1000000.0, 1.0)   # Lfm2MoeConfig.default_theta
ROPE_DEFAULTS["olmo_hybrid"] = (10000.0, 1.0)   # the whole head whatever partial_rotary_factor says


def rope_params(cfg):
    """(rope_theta, partial_rotary_factor) as transformers resolves them: rope_parameters (or rope_scaling)
    first, then the top-level keys, then the model's default (Bamba: 0.5 whatever the top level says)."""
    theta0, prf0 = ROPE_DEFAULTS[cfg["model_type"]]
    rp = cfg.get("rope_scaling") or cfg.get("rope_parameters") or {}
    theta = rp.get("rope_theta", cfg.get("rope_theta", theta0))
    if cfg["model_type"] == "bamba":
        prf = rp.get("partial_rotary_factor", prf0)
    else:
        prf = rp.get("partial_rotary_factor", cfg.get("partial_rotary_factor", prf0))
    return float(theta), float(prf)


def check(cfg, where):
    """Raises ConfigError for the first key of cfg that is neither honoured nor inert, or whose value the
    oracle cannot compute; `where` names the file in the message."""
    mt = cfg.get("model_type")
    if mt not in HONOURED:
        raise ConfigError(f"{where}: model_type {mt!r} is not one of {', '.join(HONOURED)}")
    honoured, inert = HONOURED[mt], INERT[mt]
    for key in sorted(cfg):
        v = cfg[key]
        if key in honoured:
            why = honoured[key](v)
        elif key in inert:
            why = INERT_VALUES.get(key, _any)(v)
        else:
            why = f"not a key of {mt} that mixcheck reads or knows to be inert"
        if why:
            shown = json.dumps(_encode_nonfinite(v), allow_nan=False)
            shown = shown if len(shown) <= 80 else shown[:77] + "..."
            raise ConfigError(f"{where}: '{key}' = {shown}: {why}")
    if mt == "kimi_linear" and cfg.get("num_key_value_heads") not in (None, cfg.get("num_attention_heads", 32)):
        raise ConfigError(f"{where}: 'num_key_value_heads' = {cfg['num_key_value_heads']}: KimiLinearAttention expands "
                          "the latent into every head (only num_attention_heads is read)")
    if mt == "inkling_text" and cfg.get("unpadded_vocab_size") is not None and (
            cfg["unpadded_vocab_size"] < cfg.get("vocab_size", 201024)):
        raise ConfigError(f"{where}: 'unpadded_vocab_size' = {cfg['unpadded_vocab_size']}: below vocab_size, the "
                          "head's columns beyond it dropped is not computed")
    if "rope_scaling" in cfg and "rope_parameters" in cfg and cfg["rope_scaling"] != cfg["rope_parameters"]:
        raise ConfigError(f"{where}: 'rope_scaling' and 'rope_parameters' both given and different")
    if mt == "lfm2_moe" and rope_params(cfg)[1] != 1.0:
        raise ConfigError(f"{where}: 'partial_rotary_factor' = {rope_params(cfg)[1]}: Lfm2MoeAttention rotates the "
                          "whole head (only 1.0 is read)")
    if mt == "lfm2_moe" and cfg.get("head_dim") is not None and (
            cfg["head_dim"] * cfg.get("num_attention_heads", 32) != cfg.get("hidden_size", 2048)):
        raise ConfigError(f"{where}: 'head_dim' = {cfg['head_dim']}: only hidden_size / num_attention_heads is computed")
    if mt == "lfm2" and rope_params(cfg)[1] != 1.0:
        raise ConfigError(f"{where}: 'partial_rotary_factor' = {rope_params(cfg)[1]}: Lfm2Attention rotates the whole "
                          "head (only 1.0 is read)")
    if mt == "falcon_h1" and bool(cfg.get("projectors_bias", False)) != bool(cfg.get("mamba_proj_bias", False)):
        raise ConfigError(f"{where}: 'projectors_bias' and 'mamba_proj_bias' differ: the Mamba2 family has one bias "
                          "flag for in_proj and out_proj")
    if mt == "lfm2" and "layer_types" in cfg and cfg.get("full_attn_idxs") is not None:
        derived = ["full_attention" if i in cfg["full_attn_idxs"] else "conv"
                   for i in range(cfg.get("num_hidden_layers", 0))]
        if derived != cfg["layer_types"]:
            raise ConfigError(f"{where}: 'full_attn_idxs' {cfg['full_attn_idxs']} and 'layer_types' disagree")


def normalise(cfg):
    """The upstream aliases transformers resolves at load time, resolved (Lfm2Config: tie_embedding,
    block_ff_dim, layer_types from full_attn_idxs; Bamba: mamba_d_head "auto"), so that the golden's
    config_json says what was computed. Returns a new dict."""
    cfg = dict(cfg)
    if cfg["model_type"] == "lfm2_moe" and "tie_embedding" in cfg:   # Lfm2MoeConfig.__post_init__ pops it
        cfg["tie_word_embeddings"] = cfg.pop("tie_embedding")
    if cfg["model_type"] == "lfm2":
        if "tie_embedding" in cfg:
            cfg["tie_word_embeddings"] = cfg.pop("tie_embedding")
        if "block_ff_dim" in cfg:
            cfg["intermediate_size"] = cfg.pop("block_ff_dim")
        if cfg.get("layer_types") is None:
            idx = cfg.get("full_attn_idxs")
            idx = list(range(cfg["num_hidden_layers"])) if idx is None else idx
            cfg["layer_types"] = ["full_attention" if i in idx else "conv" for i in range(cfg["num_hidden_layers"])]
    if cfg["model_type"] == "bamba" and cfg.get("mamba_d_head", "auto") == "auto":
        cfg["mamba_d_head"] = cfg.get("mamba_expand", 2) * cfg["hidden_size"] // cfg["mamba_n_heads"]
    if cfg["model_type"] == "jamba":
        if "num_local_experts" in cfg:   # the attribute_map alias of num_experts
            cfg.setdefault("num_experts", cfg.pop("num_local_experts"))
        if cfg.get("mamba_dt_rank", "auto") == "auto":
            cfg["mamba_dt_rank"] = -(-cfg["hidden_size"] // 16)
    if cfg["model_type"] == "granitemoehybrid":
        if cfg.get("mamba_d_head", "auto") == "auto":
            cfg["mamba_d_head"] = cfg.get("mamba_expand", 2) * cfg["hidden_size"] // cfg.get("mamba_n_heads", 128)
        if "layers_block_type" in cfg:   # the attribute_map alias of layer_types
            cfg.setdefault("layer_types", cfg.pop("layers_block_type"))
        old = {"mamba": "linear_attention", "attention": "full_attention"}   # what the 5.24 config converts
        if cfg.get("layer_types") is not None:
            cfg["layer_types"] = [old.get(t, t) for t in cfg["layer_types"]]
    if cfg["model_type"] == "kimi_linear":   # KimiLinearConfig.attribute_map: the names 5.24 writes, read as its fields
        for old, new in (("model_max_length", "max_position_embeddings"), ("moe_renormalize", "norm_topk_prob"),
                         ("num_expert_group", "n_group"), ("num_experts", "num_local_experts"),
                         ("num_experts_per_token", "num_experts_per_tok"), ("num_shared_experts", "n_shared_experts")):
            if old in cfg:
                cfg[new] = cfg.pop(old)
        if cfg.get("num_key_value_heads") is None:
            cfg["num_key_value_heads"] = cfg["num_attention_heads"]
    if cfg["model_type"] == "nemotron_h":   # NemotronHConfig.__post_init__: the mamba_* aliases, the pattern
        for old, new in (("mamba_n_groups", "n_groups"), ("mamba_d_conv", "conv_kernel"), ("mamba_expand", "expand"),
                         ("mamba_dt_min", "time_step_min"), ("mamba_dt_max", "time_step_max"),
                         ("mamba_dt_limit", "time_step_limit"), ("mamba_dt_init_floor", "time_step_floor"),
                         ("mamba_conv_bias", "use_conv_bias"), ("mamba_chunk_size", "chunk_size"),
                         ("num_local_experts", "n_routed_experts")):
            if old in cfg:
                cfg[new] = cfg.pop(old)
        if cfg.get("layers_block_type") is None and cfg.get("layer_types") is not None:
            cfg["layers_block_type"] = cfg["layer_types"]
        cfg.pop("layer_types", None)
        pattern = cfg.pop("hybrid_override_pattern", None)
        if cfg.get("layers_block_type") is None and pattern is not None:
            kinds = {"M": "linear_attention", "*": "full_attention", "-": "mlp", "E": "moe"}
            cfg["layers_block_type"] = [kinds[c] for c in pattern]
        if cfg.get("layers_block_type") is None:   # NemotronHConfig's default
            cfg["layers_block_type"] = ["linear_attention", "moe", "full_attention", "mlp"]
        old = {"mamba": "linear_attention", "attention": "full_attention"}
        cfg["layers_block_type"] = [old.get(t, t) for t in cfg["layers_block_type"]]
        cfg["num_hidden_layers"] = len(cfg["layers_block_type"])
    if cfg["model_type"] in ("qwen3_next", "qwen3_5_moe_text"):   # __post_init__: layer_types from the interval
        interval = cfg.pop("full_attention_interval", 4)
        if cfg.get("layer_types") is None:
            cfg["layer_types"] = ["linear_attention" if (i + 1) % interval else "full_attention"
                                  for i in range(cfg["num_hidden_layers"])]
        if cfg["model_type"] == "qwen3_next" and cfg.get("mlp_only_layers") is None:
            cfg["mlp_only_layers"] = []
    if cfg["model_type"] == "falcon_h1":   # FalconH1Config.__post_init__
        if cfg.get("mamba_d_ssm") is None:
            cfg["mamba_d_ssm"] = int(cfg.get("mamba_expand", 2) * cfg["hidden_size"])
        if cfg.get("mamba_d_head", "auto") == "auto":
            cfg["mamba_d_head"] = cfg["mamba_d_ssm"] // cfg.get("mamba_n_heads", 128)
        if cfg.get("num_key_value_heads", 8) is None:
            cfg["num_key_value_heads"] = cfg.get("num_attention_heads", 32)
        if cfg.get("mlp_multipliers") is None:
            cfg["mlp_multipliers"] = [1.0, 1.0]
        if cfg.get("ssm_multipliers") is None:
            cfg["ssm_multipliers"] = [1.0] * 5
        cfg.pop("layers_block_type", None)   # every layer "hybrid" (checked)
        cfg.pop("layer_types", None)
    if cfg["model_type"] == "olmo_hybrid":   # OlmoHybridConfig.__post_init__ (golden/olmo_hybrid.py normalise)
        import olmo_hybrid
        cfg = olmo_hybrid.normalise(cfg)
    if cfg["model_type"] == "minimax":   # MiniMaxConfig.__post_init__ (golden/minimax.py normalise)
        import minimax
        cfg = minimax.normalise(cfg)
    if cfg["model_type"] == "inkling_text":   # InklingTextConfig.__post_init__ (golden/inkling.py normalise)
        import inkling
        cfg = inkling.normalise(cfg)
    if "rope_scaling" in cfg:
        cfg["rope_parameters"] = cfg.pop("rope_scaling")
    sem = semantics(cfg)
    if sem:
        cfg["mixcheck_semantics"] = sem
    return cfg
