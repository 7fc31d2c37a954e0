"""mixcheck model-level goldens: whole `...ForCausalLM` stacks in float64 (docs/models.md).

The stack glue is written from the upstream modeling files (transformers `Mamba2ForCausalLM`,
`MambaForCausalLM`, `Lfm2ForCausalLM`, `GraniteMoeHybridForCausalLM`, ...): embedding lookup (times
embedding_multiplier), per layer RMSNorm -> mixer -> residual (lfm2: then RMSNorm -> SwiGLU feed-forward ->
residual; granitemoehybrid: the block outputs times residual_multiplier, the feed-forward a top-k mixture of
experts plus a shared MLP), final RMSNorm, LM head (tied to the embedding or not, per config; divided by
logits_scaling). The mixer layers are the float64 sequential oracles of mixers.py (mamba2_forward,
mamba1_forward, shortconv_forward) and models.py (attention_forward), never the C code under test. Weights are stored under the
upstream checkpoint names (`state_dict()` keys), so they load into the upstream class with
load_state_dict(strict=True) (docs/models.md).

A model golden holds (golden/README.md "Model goldens"): root `kind = "model"`; /config with `model_type`
and `config_json` (the upstream config.json); /weights/<checkpoint name>; /inputs/input_ids [B, L] and
/inputs/attention_mask [B, L] (left padding); /expected/logits [B, L, V]; /expected/hidden_states
[n_layers + 1, B, L, D] (the residual stream after the embedding and after every layer);
/expected/mixer_outputs [n_layers, B, L, D] (each layer's mixer output, for localisation); the caches of
every layer at /expected/state_positions; and a greedy continuation /expected/greedy_tokens [B, G] with
/expected/greedy_logits [B, G, V], greedy_logits[:, g] being the logits greedy_tokens[:, g] is the argmax
of (g = 0: the prompt's last position; g > 0: the decode step that fed token g - 1 through the cache).

Commands (reached through generate.py):
  generate.py list models                    the model goldens and their sizes
  generate.py regenerate models/NAME ...     write model goldens
  generate.py check [--selftest] models/NAME ...
"""

import json
import os
import sys
from dataclasses import dataclass
from typing import Optional

import numpy as np

import configkeys   # what each config.json key does (golden/configkeys.py)
import goldens   # the golden files: format, checksum, read / compare (golden/goldens.py)
import mixers    # the mixer families' float64 oracle (golden/mixers.py)
import models as M   # the attention family's oracle (golden/models.py)
import zamba     # Zamba2's shared blocks with per-application adapters (golden/zamba.py)
import olmo_hybrid   # OLMo-Hybrid's pre-norm GDN and post-norm attention layers (golden/olmo_hybrid.py)
import kimi      # Kimi-Linear: KDA and MLA layers, its MoE (golden/kimi.py)
import linear    # the lightning family's oracle (golden/linear.py)
import minimax   # MiniMax's lightning / softmax attention layers, MoE and residual scalings (golden/minimax.py)
import inkling   # Inkling's attention layers with short convs and relative logits, its MoE (golden/inkling.py)

MODELS_DIR = os.path.join(mixers.GOLDEN_DIR, "models")


# ---------------------------------------------------------------------------------------------------
# specs
# ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ModelSpec:
    name: str
    model_type: str
    description: str
    config: dict              # the upstream config.json (HF names); model defaults fill the rest
    batch: int
    length: int
    left_pad: tuple           # per-row leading padding tokens
    greedy: int               # G, greedy tokens generated through the cache
    seed: int
    positions: tuple          # state positions stored for every layer

    @property
    def key(self):
        return f"models/{self.name}"

    @property
    def path(self):
        return os.path.join(MODELS_DIR, self.name + ".h5")

    def mask(self):
        t = np.arange(self.length)[None, :]
        return (t >= np.array(self.left_pad)[:, None]).astype(np.int8)


# Upstream config defaults for the keys the glue reads (transformers Mamba2Config / MambaConfig).
MODEL_DEFAULTS = {
    "mamba2": dict(layer_norm_epsilon=1e-5, residual_in_fp32=True, tie_word_embeddings=False, n_groups=1,
                   conv_kernel=4, use_bias=False, use_conv_bias=True, chunk_size=256),
    "mamba": dict(layer_norm_epsilon=1e-5, residual_in_fp32=True, tie_word_embeddings=True, conv_kernel=4,
                  use_bias=False, use_conv_bias=True, expand=2),
    "lfm2": dict(norm_eps=1e-5, tie_word_embeddings=True, conv_bias=False, conv_L_cache=3, rope_theta=1000000.0,
                 block_auto_adjust_ff_dim=True, block_ffn_dim_multiplier=1.0, block_multiple_of=256),
}
MODEL_DEFAULTS["bamba"] = dict(rms_norm_eps=1e-5, tie_word_embeddings=False, mamba_n_groups=1, mamba_d_conv=4,
                               mamba_expand=2, mamba_chunk_size=256, mamba_conv_bias=True, mamba_proj_bias=False,
                               rope_theta=10000.0, partial_rotary_factor=0.5, attention_bias=False, mlp_bias=False)
MODEL_DEFAULTS["qwen3_5_text"] = dict(rms_norm_eps=1e-6, tie_word_embeddings=False, attention_bias=False,
                                      linear_conv_kernel_dim=4, partial_rotary_factor=0.25,
                                      rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
MODEL_DEFAULTS["granitemoehybrid"] = dict(
    rms_norm_eps=1e-6, tie_word_embeddings=False, mamba_n_heads=128, mamba_n_groups=1, mamba_d_state=256,
    mamba_d_conv=4, mamba_expand=2, mamba_chunk_size=256, mamba_conv_bias=True, mamba_proj_bias=False,
    attention_bias=False, attention_multiplier=1.0, embedding_multiplier=1.0, residual_multiplier=1.0,
    logits_scaling=1.0, num_local_experts=8, num_experts_per_tok=2, shared_intermediate_size=1024,
    intermediate_size=11008, position_embedding_type=None, max_position_embeddings=2048)
MODEL_DEFAULTS["falcon_mamba"] = dict(MODEL_DEFAULTS["mamba"], mixer_rms_eps=1e-6)
MODEL_DEFAULTS["jamba"] = dict(
    rms_norm_eps=1e-6, tie_word_embeddings=False, num_attention_heads=32, num_key_value_heads=8,
    attn_layer_period=8, attn_layer_offset=4, expert_layer_period=2, expert_layer_offset=1, num_experts=16,
    num_experts_per_tok=2, mamba_d_state=16, mamba_d_conv=4, mamba_expand=2, mamba_dt_rank="auto",
    mamba_conv_bias=True, mamba_proj_bias=False, intermediate_size=14336, max_position_embeddings=262144)
MODEL_DEFAULTS["nemotron_h"] = dict(
    layer_norm_epsilon=1e-5, tie_word_embeddings=False, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
    max_position_embeddings=4096, attention_bias=False, intermediate_size=21504, mlp_hidden_act="relu2",
    mlp_bias=False, ssm_state_size=128, mamba_num_heads=128, mamba_head_dim=64, mamba_hidden_act="silu", n_groups=8,
    conv_kernel=4, chunk_size=128, use_conv_bias=True, use_bias=False, time_step_min=0.001, n_routed_experts=8,
    num_experts_per_tok=2, moe_intermediate_size=7688, moe_shared_expert_intermediate_size=7688,
    moe_latent_size=None, routed_scaling_factor=1.0, n_group=1, topk_group=1, norm_topk_prob=True,
    num_nextn_predict_layers=0)
MODEL_DEFAULTS["qwen3_next"] = dict(
    rms_norm_eps=1e-6, tie_word_embeddings=False, attention_bias=False, linear_conv_kernel_dim=4,
    partial_rotary_factor=0.25, rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, hidden_act="silu",
    decoder_sparse_step=1, mlp_only_layers=[], norm_topk_prob=True, num_experts=512, num_experts_per_tok=10,
    moe_intermediate_size=512, shared_expert_intermediate_size=512, intermediate_size=5632)
MODEL_DEFAULTS["qwen3_5_moe_text"] = dict(
    rms_norm_eps=1e-6, tie_word_embeddings=False, attention_bias=False, linear_conv_kernel_dim=4,
    partial_rotary_factor=0.25, rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, hidden_act="silu",
    num_experts=256, num_experts_per_tok=8, moe_intermediate_size=512, shared_expert_intermediate_size=512)
MODEL_DEFAULTS["falcon_h1"] = dict(
    rms_norm_eps=1e-5, tie_word_embeddings=False, num_attention_heads=32, num_key_value_heads=8,
    intermediate_size=14336, max_position_embeddings=8192, hidden_act="silu", attention_bias=False, mlp_bias=False,
    mamba_d_ssm=1024, mamba_n_heads=128, mamba_d_head="auto", mamba_n_groups=1, mamba_d_state=256, mamba_d_conv=4,
    mamba_expand=2, mamba_chunk_size=256, mamba_conv_bias=True, mamba_proj_bias=False, mamba_norm_before_gate=True,
    mamba_rms_norm=False, projectors_bias=False,
    rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, lm_head_multiplier=1.0,
    embedding_multiplier=1.0, mlp_multipliers=[1.0, 1.0], key_multiplier=1.0, attention_out_multiplier=1.0,
    attention_in_multiplier=1.0, ssm_multipliers=[1.0, 1.0, 1.0, 1.0, 1.0], ssm_in_multiplier=1.0,
    ssm_out_multiplier=1.0)
ARCHITECTURES = {"mamba2": "Mamba2ForCausalLM", "mamba": "MambaForCausalLM", "lfm2": "Lfm2ForCausalLM",
                 "bamba": "BambaForCausalLM", "qwen3_5_text": "Qwen3_5ForCausalLM",
                 "granitemoehybrid": "GraniteMoeHybridForCausalLM", "falcon_mamba": "FalconMambaForCausalLM",
                 "jamba": "JambaForCausalLM", "nemotron_h": "NemotronHForCausalLM"}
ARCHITECTURES["qwen3_next"] = "Qwen3NextForCausalLM"
ARCHITECTURES["qwen3_5_moe_text"] = "Qwen3_5MoeForCausalLM"
ARCHITECTURES["falcon_h1"] = "FalconH1ForCausalLM"

SPECS = {s.key: s for s in [
    ModelSpec("mamba2", "mamba2",
              "4-layer Mamba2 stack, untied head, left-padded batch of 3, 16 greedy tokens",
              dict(vocab_size=256, hidden_size=32, num_hidden_layers=4, num_heads=4, head_dim=16, expand=2,
                   state_size=16, n_groups=1, conv_kernel=4, chunk_size=8, tie_word_embeddings=False),
              batch=3, length=12, left_pad=(0, 3, 7), greedy=16, seed=101, positions=(6, 12)),
    ModelSpec("mamba", "mamba",
              "4-layer Mamba1 stack, head tied to the embedding, left-padded batch of 3, 16 greedy tokens",
              dict(vocab_size=256, hidden_size=32, num_hidden_layers=4, intermediate_size=64, state_size=8,
                   conv_kernel=4, time_step_rank=4, tie_word_embeddings=True),
              batch=3, length=12, left_pad=(0, 4, 9), greedy=16, seed=102, positions=(6, 12)),
    ModelSpec("lfm2", "lfm2",
              "4-layer LFM2 hybrid (conv, attention, conv, attention; GQA 4/2, q/k layernorm, RoPE), SwiGLU "
              "feed-forward, tied head, left-padded batch of 3, 16 greedy tokens",
              dict(vocab_size=256, hidden_size=32, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                   intermediate_size=48, block_auto_adjust_ff_dim=False, conv_L_cache=3, rope_theta=10000.0,
                   max_position_embeddings=32, layer_types=["conv", "full_attention", "conv", "full_attention"]),
              batch=3, length=12, left_pad=(0, 3, 7), greedy=16, seed=103, positions=(6, 12)),
    ModelSpec("bamba", "bamba",
              "4-layer Bamba hybrid (Mamba2, attention, Mamba2, Mamba2; GQA 4/2, partial rotary 0.5), SwiGLU "
              "feed-forward, untied head, left-padded batch of 3, 16 greedy tokens",
              dict(vocab_size=256, hidden_size=32, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                   intermediate_size=48, mamba_n_heads=4, mamba_d_head=16, mamba_d_state=16, mamba_chunk_size=8,
                   attn_layer_indices=[1], max_position_embeddings=32),
              batch=3, length=12, left_pad=(0, 4, 6), greedy=16, seed=104, positions=(6, 12)),
    ModelSpec("qwen3_5", "qwen3_5_text",
              "4-layer Qwen3.5 text hybrid (3 Gated DeltaNet, gated attention with q/k norm and partial rotary "
              "0.25), zero-centred RMSNorm, dense SwiGLU MLP, untied head, left-padded batch of 3, 16 greedy tokens",
              dict(vocab_size=256, hidden_size=32, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                   head_dim=16, intermediate_size=48, linear_num_key_heads=2, linear_num_value_heads=4,
                   linear_key_head_dim=8, linear_value_head_dim=8, max_position_embeddings=32,
                   layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"]),
              batch=3, length=12, left_pad=(0, 2, 8), greedy=16, seed=105, positions=(6, 12)),
    ModelSpec("granitemoehybrid", "granitemoehybrid",
              "4-layer GraniteMoeHybrid (Mamba2, NoPE attention with attention_multiplier 0.3, Mamba2, NoPE attention; "
              "GQA 4/2), a top-2 of 4 experts MoE plus a shared SwiGLU MLP in every layer, embedding_multiplier 3, "
              "residual_multiplier 0.6, logits_scaling 1.5, untied head, left-padded batch of 3, 16 greedy tokens",
              dict(vocab_size=256, hidden_size=32, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                   mamba_n_heads=4, mamba_d_head=16, mamba_d_state=16, mamba_chunk_size=8,
                   shared_intermediate_size=32, intermediate_size=24, num_local_experts=4, num_experts_per_tok=2,
                   embedding_multiplier=3.0, residual_multiplier=0.6, attention_multiplier=0.3, logits_scaling=1.5,
                   max_position_embeddings=32,
                   layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention"]),
              batch=3, length=12, left_pad=(0, 4, 8), greedy=16, seed=106, positions=(6, 12)),
    ModelSpec("falcon_mamba", "falcon_mamba",
              "4-layer FalconMamba stack (Mamba1 mixers with weightless RMSNorms on dt, B and C), head tied to the "
              "embedding, left-padded batch of 3, 16 greedy tokens",
              dict(vocab_size=256, hidden_size=32, num_hidden_layers=4, intermediate_size=64, state_size=8,
                   conv_kernel=4, time_step_rank=4, tie_word_embeddings=True),
              batch=3, length=12, left_pad=(0, 3, 9), greedy=16, seed=107, positions=(6, 12)),
    ModelSpec("jamba", "jamba",
              "4-layer Jamba (Mamba1 with weighted inner norms, NoPE attention at layer 1 and 3: attn_layer_period 2, "
              "offset 1), a top-2 of 4 MoE (softmax over every expert, not renormalised) at layers 0 and 2 "
              "(expert_layer_period 2, offset 0) and a SwiGLU MLP at 1 and 3, untied head, left-padded batch of 3, "
              "16 greedy tokens",
              dict(vocab_size=256, hidden_size=32, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                   attn_layer_period=2, attn_layer_offset=1, expert_layer_period=2, expert_layer_offset=0,
                   num_experts=4, num_experts_per_tok=2, intermediate_size=24, mamba_d_state=8, mamba_dt_rank=4,
                   max_position_embeddings=32),
              batch=3, length=12, left_pad=(0, 5, 8), greedy=16, seed=108, positions=(6, 12)),
    ModelSpec("nemotron_h", "nemotron_h",
              "8-block Nemotron-H (pattern M-M*E-*E: Mamba2 with 2 groups and its per-group gated norm, a relu² MLP, "
              "NoPE attention with head_dim 16 (GQA 4/2), a sigmoid-routed MoE of 8 relu² experts in 2 groups, top-1 "
              "group, top-2 experts, with correction bias, norm_topk_prob and routed_scaling_factor 2.5, plus a shared "
              "relu² expert), untied head, left-padded batch of 3, 16 greedy tokens",
              dict(vocab_size=256, hidden_size=32, layers_block_type=["linear_attention", "mlp", "linear_attention",
                                                                      "full_attention", "moe", "mlp",
                                                                      "full_attention", "moe"],
                   mamba_num_heads=4, mamba_head_dim=16, ssm_state_size=16, n_groups=2, chunk_size=8,
                   num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=32,
                   intermediate_size=48, n_routed_experts=8, n_group=2, topk_group=1, num_experts_per_tok=2,
                   moe_intermediate_size=16, moe_shared_expert_intermediate_size=24, routed_scaling_factor=2.5),
              batch=3, length=12, left_pad=(0, 4, 7), greedy=16, seed=109, positions=(6, 12)),
    ModelSpec("qwen3_next", "qwen3_next",
              "5-layer Qwen3-Next (Gated DeltaNet in the interleaved in_proj_qkvz / in_proj_ba layout at 0, 1, 3, gated "
              "attention with q/k norm and partial rotary 0.25 at 2, 4), zero-centred RMSNorm, a top-2 of 8 MoE "
              "(softmax over every expert, norm_topk_prob) plus a shared SwiGLU expert behind its sigmoid gate at "
              "layers 0, 2, 3, the dense SwiGLU MLP at the mlp_only_layers 1, 4, untied head, left-padded batch of 3, "
              "16 greedy tokens",
              dict(vocab_size=256, hidden_size=32, num_hidden_layers=5, num_attention_heads=4, num_key_value_heads=2,
                   head_dim=16, intermediate_size=48, linear_num_key_heads=2, linear_num_value_heads=4,
                   linear_key_head_dim=8, linear_value_head_dim=8, max_position_embeddings=32,
                   layer_types=["linear_attention", "linear_attention", "full_attention", "linear_attention",
                                "full_attention"],
                   num_experts=8, num_experts_per_tok=2, moe_intermediate_size=16, shared_expert_intermediate_size=24,
                   decoder_sparse_step=1, mlp_only_layers=[1, 4]),
              batch=3, length=12, left_pad=(0, 3, 6), greedy=16, seed=110, positions=(6, 12)),
    ModelSpec("qwen3_5_moe", "qwen3_5_moe_text",
              "4-layer Qwen3.5-MoE text model (Gated DeltaNet in Qwen3.5's projections at 0, 2, gated attention with "
              "q/k norm and partial rotary 0.25 at 1, 3), zero-centred RMSNorm, on every layer a top-2 of 8 MoE "
              "(softmax over every expert, renormalised) plus a shared SwiGLU expert behind its sigmoid gate, untied "
              "head, left-padded batch of 3, 16 greedy tokens",
              dict(vocab_size=256, hidden_size=32, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                   head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8,
                   linear_value_head_dim=8, max_position_embeddings=32,
                   layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention"],
                   num_experts=8, num_experts_per_tok=2, moe_intermediate_size=16, shared_expert_intermediate_size=24),
              batch=3, length=12, left_pad=(0, 4, 7), greedy=16, seed=111, positions=(6, 12)),
    ModelSpec("falcon_h1", "falcon_h1",
              "3-layer FalconH1 (every layer a Mamba2 mixer (mamba_d_ssm 48, 2 groups, the gated norm) and RoPE "
              "attention (GQA 4/2) in parallel on the same norm, summed), SwiGLU MLP, every µP multiplier away from 1 "
              "(embedding, lm_head, MLP gate / down, key, attention in / out, SSM in / out and the five in_proj "
              "parts), untied head, left-padded batch of 3, 16 greedy tokens",
              dict(vocab_size=256, hidden_size=32, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
                   intermediate_size=48, max_position_embeddings=32, mamba_d_ssm=48, mamba_n_heads=4,
                   mamba_d_head=12, mamba_n_groups=2, mamba_d_state=16, mamba_chunk_size=8, mamba_rms_norm=True,
                   mamba_norm_before_gate=False, embedding_multiplier=1.7, lm_head_multiplier=0.35,
                   mlp_multipliers=[0.8, 1.3], key_multiplier=0.6, attention_in_multiplier=1.2,
                   attention_out_multiplier=0.9, ssm_multipliers=[0.7, 1.1, 0.9, 1.2, 0.8], ssm_in_multiplier=1.15,
                   ssm_out_multiplier=0.75),
              batch=3, length=12, left_pad=(0, 3, 8), greedy=16, seed=110, positions=(6, 12)),
]}


MODEL_DEFAULTS["zamba2"] = dict(zamba.DEFAULTS)
ARCHITECTURES["zamba2"] = "Zamba2ForCausalLM"

SPECS.update({s.key: s for s in [   # Zamba2: shared blocks, adapters per application (golden/zamba.py)
    ModelSpec("zamba2", "zamba2",
              "6-layer Zamba2 (linear_attention, hybrid, linear_attention, hybrid, hybrid, linear_attention: Mamba2 "
              "with 2 groups; two alternating shared blocks of attention on cat(hidden, embeddings) (MHA 4, head_dim "
              "16, RoPE) and a GELU MLP (F 48), q/k/v and MLP adapters of rank 4 per application, a linear per hybrid "
              "layer), tied head, left-padded batch of 3, 16 greedy tokens",
              dict(vocab_size=256, hidden_size=32,
                   layers_block_type=["linear_attention", "hybrid", "linear_attention", "hybrid", "hybrid",
                                      "linear_attention"],
                   n_mamba_heads=4, mamba_d_state=16, mamba_ngroups=2, mamba_d_conv=4, chunk_size=8,
                   num_attention_heads=4, num_key_value_heads=4, intermediate_size=48, num_mem_blocks=2,
                   use_shared_attention_adapter=True, adapter_rank=4, use_mem_rope=True,
                   rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, max_position_embeddings=32),
              batch=3, length=12, left_pad=(0, 3, 8), greedy=16, seed=112, positions=(6, 12)),
]})


MODEL_DEFAULTS["zamba"] = dict(zamba.DEFAULTS_V1)
ARCHITECTURES["zamba"] = "ZambaForCausalLM"

SPECS.update({s.key: s for s in [   # Zamba (v1): one shared block, Mamba1 layers (golden/zamba.py)
    ModelSpec("zamba", "zamba",
              "5-layer Zamba (mamba, hybrid, mamba, hybrid, mamba: Mamba1 of one head, I 64, dt rank 2; one shared "
              "block of attention on cat(hidden, embeddings) (GQA 4/2, head_dim 16, no positional embedding) and a "
              "GELU MLP (F 48), a linear per hybrid layer), tied head, left-padded batch of 3, 16 greedy tokens",
              dict(vocab_size=256, hidden_size=32,
                   layers_block_type=["mamba", "hybrid", "mamba", "hybrid", "mamba"],
                   n_mamba_heads=1, mamba_d_state=16, mamba_d_conv=4, mamba_expand=2,
                   num_attention_heads=4, num_key_value_heads=2, intermediate_size=48, max_position_embeddings=32),
              batch=3, length=12, left_pad=(0, 3, 8), greedy=16, seed=113, positions=(6, 12)),
]})


MODEL_DEFAULTS["lfm2_moe"] = dict(   # Lfm2MoeConfig's defaults (transformers 5.24)
    norm_eps=1e-5, tie_word_embeddings=True, conv_bias=False, conv_L_cache=3,
    rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, max_position_embeddings=128000,
    intermediate_size=7168, moe_intermediate_size=1792, num_attention_heads=32, num_key_value_heads=8,
    num_dense_layers=2, num_experts=32, num_experts_per_tok=4, use_expert_bias=True, routed_scaling_factor=1.0,
    norm_topk_prob=True)
ARCHITECTURES["lfm2_moe"] = "Lfm2MoeForCausalLM"

SPECS.update({s.key: s for s in [   # LFM2-MoE: LFM2's layers, dense-first then the sigmoid-routed MoE
    ModelSpec("lfm2_moe", "lfm2_moe",
              "4-layer LFM2-MoE (conv, attention, conv, attention; GQA 4/2, q/k layernorm, RoPE), the dense "
              "SwiGLU MLP (F 48) at the num_dense_layers 2 first layers, then a sigmoid-routed top-2 of 8 SwiGLU "
              "experts (Fe 16) with expert_bias, norm_topk_prob and routed_scaling_factor 1.5, tied head, left-padded "
              "batch of 3, 16 greedy tokens",
              dict(vocab_size=256, hidden_size=32, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                   intermediate_size=48, moe_intermediate_size=16, num_dense_layers=2, num_experts=8,
                   num_experts_per_tok=2, routed_scaling_factor=1.5, conv_L_cache=3,
                   rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, max_position_embeddings=32,
                   layer_types=["conv", "full_attention", "conv", "full_attention"]),
              batch=3, length=12, left_pad=(0, 3, 7), greedy=16, seed=114, positions=(6, 12)),
]})

MODEL_DEFAULTS["olmo_hybrid"] = dict(olmo_hybrid.DEFAULTS)
ARCHITECTURES["olmo_hybrid"] = "OlmoHybridForCausalLM"

SPECS.update({s.key: s for s in [   # OLMo-Hybrid (golden/olmo_hybrid.py)
    ModelSpec("olmo_hybrid", "olmo_hybrid",
              "4-layer OLMo-Hybrid (Gated DeltaNet at 0, 2: separate q/k/v/a/b/g projections, 2 key heads for 4 value "
              "heads, beta doubled by linear_allow_neg_eigval, pre-norm; attention at 1, 3: GQA 4/2, q/k norms over the "
              "whole projection, RoPE, post-norm), SwiGLU MLP, untied head, left-padded batch of 3, 16 greedy tokens",
              dict(vocab_size=256, hidden_size=32, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                   intermediate_size=48, linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8,
                   linear_value_head_dim=8, max_position_embeddings=32,
                   layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention"],
                   pad_token_id=None, eos_token_id=None),   # the Config's 100277 / 100257 lie outside a vocab of 256
              batch=3, length=12, left_pad=(0, 3, 7), greedy=16, seed=115, positions=(6, 12)),
]})

MODEL_DEFAULTS["kimi_linear"] = dict(kimi.DEFAULTS)
ARCHITECTURES["kimi_linear"] = kimi.ARCHITECTURE

SPECS.update({s.key: s for s in [   # Kimi-Linear: KDA + NoPE MLA, dense-first MLP then its MoE (golden/kimi.py)
    ModelSpec("kimi_linear", "kimi_linear",
              "5-layer Kimi-Linear (Kimi Delta Attention (2 heads of 8, short convs of 4) at 0, 2, 4; multi-head "
              "latent attention without positional embedding (4 heads, nope 8 + rope 4, value 8, kv_lora_rank 16) at "
              "1, 3), the dense SwiGLU MLP at 0, 1 (mlp_layer_types), the MoE at 2, 3, 4 (8 SwiGLU experts in 2 "
              "groups, top-1 group, top-2 experts by sigmoid score plus correction bias, renormalised, times "
              "routed_scaling_factor 2.446, plus a shared expert), untied head, left-padded batch of 3, 16 greedy "
              "tokens",
              dict(vocab_size=256, hidden_size=32, num_hidden_layers=5, intermediate_size=48, moe_intermediate_size=16,
                   num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=16, q_lora_rank=None,
                   qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=8, max_position_embeddings=32,
                   layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention",
                                "linear_attention"],
                   mlp_layer_types=["dense", "dense", "sparse", "sparse", "sparse"],
                   num_local_experts=8, num_experts_per_tok=2, n_group=2, topk_group=1, n_shared_experts=1,
                   linear_num_heads=2, linear_head_dim=8, linear_conv_kernel_dim=4,
                   pad_token_id=0, bos_token_id=1, eos_token_id=2),
              batch=3, length=12, left_pad=(0, 3, 7), greedy=16, seed=114, positions=(6, 12)),
]})


MODEL_DEFAULTS["minimax"] = dict(minimax.DEFAULTS)
ARCHITECTURES["minimax"] = "MiniMaxForCausalLM"

SPECS.update({s.key: s for s in [   # MiniMax (golden/minimax.py)
    ModelSpec("minimax", "minimax",
              "4-layer MiniMax (lightning attention at 0, 2: 4 heads of hd 8, block_size 4 below the prompt, slopes "
              "scaled by depth; softmax attention at 1, 3: GQA 4/2, RoPE), a softmax top-2 of 4 SwiGLU experts (Fe 16, "
              "renormalised) on every layer, the residual scalings alpha / beta of each layer kind and of the MoE "
              "all distinct, untied head, left-padded batch of 3, 16 greedy tokens",
              dict(vocab_size=256, hidden_size=32, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                   head_dim=8, intermediate_size=16, num_local_experts=4, num_experts_per_tok=2, block_size=4,
                   rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, max_position_embeddings=32,
                   layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention"],
                   linear_attn_alpha_factor=1.75, linear_attn_beta_factor=0.625, full_attn_alpha_factor=1.375,
                   full_attn_beta_factor=0.875, mlp_alpha_factor=1.5, mlp_beta_factor=0.75),
              batch=3, length=12, left_pad=(0, 3, 7), greedy=16, seed=116, positions=(6, 12)),
]})


MODEL_DEFAULTS["inkling_text"] = {}   # InklingTextConfig's defaults are golden/inkling.py's (normalise)
ARCHITECTURES["inkling_text"] = "InklingForCausalLM"

SPECS.update({s.key: s for s in [   # Inkling (golden/inkling.py)
    ModelSpec("inkling", "inkling_text",
              "4-layer Inkling text model (sliding attention at 0, 2: 2 heads of hd 16 over 1 kv head, a window of 4; "
              "full attention at 1, 3: GQA 4/2 of hd 8, relative extent 6 below the prompt), short convs of kernel 3 "
              "on k / v and after each block, the relative-logits profiles of d_rel 4, the normed embedding; dense "
              "MLP (global_scale) at 0, 2, a sigmoid top-2 of 4 experts with 2 shared sink experts at 1, 3 "
              "(route_scale 2.5, correction bias); the head on norm(h) / 3, untied, 160 tokens; left-padded batch of 3, "
              "12 greedy tokens",
              dict(vocab_size=160, hidden_size=32, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                   head_dim=8, swa_num_attention_heads=2, swa_num_key_value_heads=1, swa_head_dim=16,
                   sliding_window_size=4, d_rel=4, rel_extent=6, max_position_embeddings=24, conv_kernel_size=3,
                   layer_types=["hybrid_sliding", "hybrid", "hybrid_sliding", "hybrid"],
                   mlp_layer_types=["dense", "sparse", "dense", "sparse"], intermediate_size=24,
                   moe_intermediate_size=8, n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=2,
                   route_scale=2.5, logits_mup_width_multiplier=3.0, rms_norm_eps=1e-6,
                   pad_token_id=0, bos_token_id=1, eos_token_id=2),
              batch=3, length=12, left_pad=(0, 3, 7), greedy=12, seed=119, positions=(6, 12)),
]})


def model_config(spec):
    cfg = dict(MODEL_DEFAULTS[spec.model_type])
    cfg.update(spec.config)
    if spec.model_type == "nemotron_h":   # NemotronHConfig.num_hidden_layers: the number of blocks
        cfg["num_hidden_layers"] = len(cfg["layers_block_type"])
    if spec.model_type == "zamba2":   # Zamba2Config: one entry of layers_block_type per layer
        cfg["num_hidden_layers"] = len(cfg["layers_block_type"])
    if spec.model_type == "zamba":   # ZambaConfig likewise
        cfg["num_hidden_layers"] = len(cfg["layers_block_type"])
    cfg["model_type"] = spec.model_type
    cfg["architectures"] = [ARCHITECTURES[spec.model_type]]
    if spec.model_type == "olmo_hybrid":   # OlmoHybridConfig.__post_init__'s defaults
        cfg = olmo_hybrid.normalise(cfg)
    if spec.model_type == "minimax":   # MiniMaxConfig.__post_init__'s defaults
        cfg = minimax.normalise(cfg)
    if spec.model_type == "inkling_text":   # InklingTextConfig.__post_init__'s defaults
        cfg = inkling.normalise(cfg)
    return cfg


# ---------------------------------------------------------------------------------------------------
# layers: each kind has init (its checkpoint-named weights under a prefix), a float64 forward over one
# segment from its cache, and its cache's zero value
# ---------------------------------------------------------------------------------------------------

def rmsnorm(x, w, eps, zero_centred=False):
    """Mamba2RMSNorm / MambaRMSNorm / Lfm2RMSNorm / BambaRMSNorm: x * rsqrt(mean(x^2) + eps) * weight;
    Qwen3_5RMSNorm (zero_centred): the same times (1 + weight)."""
    return (1.0 + w if zero_centred else w) * (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps))


def ffn_size(cfg):
    """The SwiGLU feed-forward's intermediate size (Bamba: intermediate_size; LFM2: lfm2_ffn_size;
    GraniteMoeHybrid's shared MLP: shared_intermediate_size)."""
    if cfg["model_type"] == "granitemoehybrid":
        return cfg["shared_intermediate_size"]
    return lfm2_ffn_size(cfg) if cfg["model_type"] == "lfm2" else cfg["intermediate_size"]   # (Lfm2MoeMLP: as given)


def lfm2_ffn_size(cfg):
    """Lfm2MLP's intermediate size: block_auto_adjust_ff_dim takes 2/3 of it, times the multiplier, rounded
    up to block_multiple_of."""
    size = cfg["intermediate_size"]
    if cfg["block_auto_adjust_ff_dim"]:
        size = int(2 * size / 3)
        if cfg["block_ffn_dim_multiplier"] is not None:
            size = int(cfg["block_ffn_dim_multiplier"] * size)
            size = cfg["block_multiple_of"] * ((size + cfg["block_multiple_of"] - 1) // cfg["block_multiple_of"])
    return size


def granite(cfg):
    return cfg["model_type"] == "granitemoehybrid"


# ---- LFM2-MoE (Lfm2MoeForCausalLM, transformers 5.24 models/lfm2_moe) ----------------------------------------------
# LFM2's layers, names and glue; the feed-forward of layer i is Lfm2MoeMLP (w1, w3, w2 of intermediate_size as given)
# below num_dense_layers and Lfm2MoeSparseMoeBlock from there on.
LFM2_TYPES = ("lfm2", "lfm2_moe")


def lfm2_moe(cfg):
    return cfg["model_type"] == "lfm2_moe"


def lfm2_moe_init(cfg, pre, nm, rng):
    """Lfm2MoeSparseMoeBlock's parameters under layer prefix pre: the router gate.weight [E, D], the experts'
    gate_up_proj [E, 2 Fe, D] (gate rows first) and down_proj [E, D, Fe], and (use_expert_bias) the expert_bias buffer
    [E], drawn large enough beside the sigmoid scores' spread to change the choice of some tokens."""
    D, E, Fe = cfg["hidden_size"], cfg["num_experts"], cfg["moe_intermediate_size"]
    router, gate_up, down, bias = (pre + n for n in nm["moe"])
    w = {router: mixers.uniform_init(rng, (E, D), D), gate_up: mixers.uniform_init(rng, (E, 2 * Fe, D), D),
         down: mixers.uniform_init(rng, (E, D, Fe), Fe)}
    if cfg["use_expert_bias"]:
        w[bias] = mixers.quantize(0.1 * rng.standard_normal(E), scale=1.0)
    return w


def lfm2_moe_forward(cfg, w, pre, nm, x):
    """Lfm2MoeSparseMoeBlock on the feed-forward norm x [..., D], from its definition: scores s = sigmoid(W x); the
    choice the k largest s + b (b the expert_bias; without use_expert_bias the k largest s); their weights the s of
    those k, divided by (their sum + 1e-6) with norm_topk_prob, times routed_scaling_factor; the output the weighted
    sum of the experts' down_e(silu(gate_e x) * up_e x) (gate_up_proj's first Fe rows the gate). No tie at the k-th
    choice in a golden (float64 draws; asserted)."""
    router, gate_up, down, bias = (w.get(pre + n) for n in nm["moe"])
    k = cfg["num_experts_per_tok"]
    flat = x.reshape(-1, x.shape[-1])
    out = np.zeros_like(flat)
    for t, xt in enumerate(flat):
        sc = 1.0 / (1.0 + np.exp(-(router @ xt)))
        c = sc + bias if cfg["use_expert_bias"] else sc
        top = sorted(range(len(c)), key=lambda e: (-c[e], e))[:k]
        assert c[top[-1]] not in np.delete(c, top), "a router tie at the k-th expert"
        p = sc[top]
        if cfg["norm_topk_prob"]:
            p = p / (p.sum() + 1e-6)
        p = p * cfg["routed_scaling_factor"]
        for wgt, e in zip(p, top):
            gate, up = np.split(gate_up[e], 2, axis=0)
            out[t] += wgt * (down[e] @ (mixers.silu(gate @ xt) * (up @ xt)))
    return out.reshape(x.shape)


def moe_layer(cfg, i):
    """Whether layer i's feed-forward has the mixture of experts: every layer of GraniteMoeHybrid (with experts),
    Jamba's at i % expert_layer_period == expert_layer_offset (with more than one expert)."""
    if granite(cfg):
        return cfg["num_local_experts"] > 0
    if cfg["model_type"] == "jamba":
        return cfg["num_experts"] > 1 and i % cfg["expert_layer_period"] == cfg["expert_layer_offset"]
    if cfg["model_type"] == "qwen3_5_moe_text":   # Qwen3_5MoeDecoderLayer: the sparse block on every layer
        return True
    if lfm2_moe(cfg):   # Lfm2MoeDecoderLayer: the dense MLP below num_dense_layers, the sparse block from there
        return i >= cfg["num_dense_layers"]
    if qwen3_next(cfg):   # Qwen3NextDecoderLayer: the sparse step, outside mlp_only_layers
        return (i not in (cfg.get("mlp_only_layers") or []) and cfg["num_experts"] > 0
                and (i + 1) % cfg["decoder_sparse_step"] == 0)
    return False


def qwen3_next(cfg):
    return cfg["model_type"] == "qwen3_next"


def qwen_moe(cfg):
    """Qwen3-Next and Qwen3.5-MoE: the sparse block with its gated shared expert."""
    return cfg["model_type"] in ("qwen3_next", "qwen3_5_moe_text")


def nemotron(cfg):
    return cfg["model_type"] == "nemotron_h"


# Nemotron-H's block kinds (layers_block_type, older names included): a Mamba2 mixer, attention, or a block that
# is its feed-forward alone (no sequence mixer, no cache)
NEMOTRON_KINDS = {"linear_attention": "mamba2", "mamba": "mamba2", "full_attention": "attention",
                  "attention": "attention", "mlp": "mlp", "moe": "moe"}
NO_MIXER = ("mlp", "moe")


def zero_centred(cfg):
    return cfg["model_type"] in ("qwen3_5_text", "qwen3_next", "qwen3_5_moe_text")


def falcon(cfg):
    return cfg["model_type"] == "falcon_h1"


# FalconH1: every decoder layer j runs two mixers in parallel on the same input norm (FalconH1DecoderLayer); the
# stack's mixer slots are 2j (the Mamba2 branch, `mamba.`) and 2j + 1 (the attention branch, `self_attn.`)
FALCON_BRANCHES = ("mamba2", "attention")
FALCON_PREFIX = {"mamba2": "mamba.", "attention": "self_attn."}


def falcon_mamba_dims(cfg):
    """FalconH1Mixer's intermediate size (mamba_d_ssm, or mamba_expand x hidden_size when null), heads, head size
    (mamba_d_head "auto": intermediate // heads) and groups x state."""
    inner = cfg["mamba_d_ssm"] if cfg.get("mamba_d_ssm") is not None else int(cfg["mamba_expand"] * cfg["hidden_size"])
    H = cfg["mamba_n_heads"]
    P = inner // H if cfg.get("mamba_d_head", "auto") == "auto" else cfg["mamba_d_head"]
    assert H * P == inner, "mamba_n_heads x mamba_d_head != the Mamba intermediate size"
    return inner, H, P, cfg["mamba_n_groups"] * cfg["mamba_d_state"]


def falcon_mup_vector(cfg):
    """The five in_proj output parts' multipliers (ssm_multipliers: z, x, B, C, dt), one per in_proj row, from
    their definition: the rows [0, I) are z, [I, 2I) x, then B and C (G x N each), then dt (H)."""
    inner, H, _, gn = falcon_mamba_dims(cfg)
    m = cfg["ssm_multipliers"]
    return np.concatenate([np.full(inner, m[0]), np.full(inner, m[1]), np.full(gn, m[2]), np.full(gn, m[3]),
                           np.full(H, m[4])])


def layer_kind(cfg, i):
    """The family of layer i: the model's mixer; lfm2 "shortconv" / "attention" per layer_types; bamba
    "attention" at attn_layer_indices, "mamba2" elsewhere."""
    if cfg["model_type"] in LFM2_TYPES:   # Lfm2MoeDecoderLayer too: attention unless "conv"
        return "attention" if cfg["layer_types"][i] == "full_attention" else "shortconv"
    if cfg["model_type"] == "bamba":
        return "attention" if i in cfg["attn_layer_indices"] else "mamba2"
    if cfg["model_type"] == "qwen3_5_text":
        return "attention" if cfg["layer_types"][i] == "full_attention" else "gdn"
    if qwen_moe(cfg):   # Qwen3NextConfig / Qwen3_5MoeTextConfig: layer_types, or full attention every full_attention_interval-th layer
        types = cfg.get("layer_types") or ["linear_attention" if (j + 1) % cfg.get("full_attention_interval", 4)
                                           else "full_attention" for j in range(cfg["num_hidden_layers"])]
        return "attention" if types[i] == "full_attention" else "gdn"
    if cfg["model_type"] == "falcon_mamba":   # FalconMambaMixer: MambaMixer with the inner norms
        return "mamba"
    if cfg["model_type"] == "jamba":   # JambaConfig.layers_block_type
        return "attention" if i % cfg["attn_layer_period"] == cfg["attn_layer_offset"] else "mamba"
    if nemotron(cfg):   # NemotronHConfig.layers_block_type: the block kinds M * - E
        return NEMOTRON_KINDS[cfg["layers_block_type"][i]]
    if falcon(cfg):   # i is a mixer slot: 2j the Mamba2 branch of decoder layer j, 2j + 1 its attention
        return FALCON_BRANCHES[i % 2]
    if granite(cfg):   # GraniteMoeHybridConfig: linear_attention (mamba) unless full_attention (attention)
        types = cfg.get("layer_types") or ["linear_attention"] * cfg["num_hidden_layers"]
        return "attention" if types[i] in ("full_attention", "attention") else "mamba2"
    return cfg["model_type"]


# lfm2 checkpoint names of the attention parameters that the attention family (models.py) names otherwise
LFM2_ATTENTION_NAMES = {"o_proj.weight": "out_proj.weight", "q_norm.weight": "q_layernorm.weight",
                        "k_norm.weight": "k_layernorm.weight"}


def mixer_config(cfg, kind=None):
    """The mixer-level (mixers.py / models.py) configuration of one layer of the model."""
    kind = kind or cfg["model_type"]
    if kind == "shortconv":
        return dict(hidden_size=cfg["hidden_size"], conv_L_cache=cfg["conv_L_cache"], conv_bias=int(cfg["conv_bias"]))
    if cfg["model_type"] in ("bamba", "granitemoehybrid") and kind == "mamba2":
        H, D = cfg["mamba_n_heads"], cfg["hidden_size"]
        P = cfg["mamba_d_head"] if cfg.get("mamba_d_head", "auto") != "auto" else cfg["mamba_expand"] * D // H
        return dict(hidden_size=D, num_heads=H, head_dim=P, state_size=cfg["mamba_d_state"],
                    n_groups=cfg["mamba_n_groups"], conv_kernel=cfg["mamba_d_conv"], chunk_size=cfg["mamba_chunk_size"],
                    layer_norm_epsilon=cfg["rms_norm_eps"], use_bias=int(cfg["mamba_proj_bias"]),
                    use_conv_bias=int(cfg["mamba_conv_bias"]),
                    time_step_limit=tuple(cfg.get("time_step_limit") or (0.0, float("inf"))),
                    norm_group_size=configkeys.gated_norm_group_size(cfg, H * P, cfg["mamba_n_groups"]))
    if nemotron(cfg) and kind == "mamba2":   # NemotronHMamba2Mixer: dt clamped to (time_step_min, inf)
        H, P, G = cfg["mamba_num_heads"], cfg["mamba_head_dim"], cfg["n_groups"]
        return dict(hidden_size=cfg["hidden_size"], num_heads=H, head_dim=P, state_size=cfg["ssm_state_size"],
                    n_groups=G, conv_kernel=cfg["conv_kernel"], chunk_size=cfg["chunk_size"],
                    layer_norm_epsilon=cfg["layer_norm_epsilon"], use_bias=int(cfg["use_bias"]),
                    use_conv_bias=int(cfg["use_conv_bias"]), time_step_limit=(float(cfg["time_step_min"]), float("inf")),
                    norm_group_size=H * P // G)   # NemotronHRMSNormGated: per group in every release
    if nemotron(cfg) and kind == "attention":   # NemotronHAttention: no rotary embedding, head_dim ** -0.5
        H = cfg["num_attention_heads"]
        return dict(hidden_size=cfg["hidden_size"], num_attention_heads=H,
                    num_key_value_heads=cfg.get("num_key_value_heads") or H, head_dim=cfg["head_dim"],
                    cache_length=cfg["max_position_embeddings"], partial_rotary_factor=1.0, rope_theta=10000.0,
                    rms_norm_eps=cfg["layer_norm_epsilon"], qk_norm="none", attn_output_gate=0, attention_bias=0,
                    no_rope=1, softmax_scale=0.0)
    if falcon(cfg) and kind == "mamba2":
        # FalconH1Mixer: without mamba_rms_norm (the default) no norm at all (nn.Identity), y * silu(gate); with it
        # FalconH1RMSNormGated per group, the gate after the norm when mamba_norm_before_gate (the default)
        inner, H, P, _ = falcon_mamba_dims(cfg)
        G = cfg["mamba_n_groups"]
        rms_norm = bool(cfg["mamba_rms_norm"])
        return dict(hidden_size=cfg["hidden_size"], num_heads=H, head_dim=P, state_size=cfg["mamba_d_state"],
                    n_groups=G, conv_kernel=cfg["mamba_d_conv"], chunk_size=cfg["mamba_chunk_size"],
                    layer_norm_epsilon=cfg["rms_norm_eps"], use_bias=int(cfg["mamba_proj_bias"]),
                    use_conv_bias=int(cfg["mamba_conv_bias"]),
                    time_step_limit=tuple(cfg.get("time_step_limit") or (0.0, float("inf"))),
                    norm_group_size=inner // G, no_gated_norm=int(not rms_norm),
                    norm_before_gate=int(rms_norm and bool(cfg["mamba_norm_before_gate"])))
    if falcon(cfg) and kind == "attention":   # FalconH1Attention (LlamaAttention): RoPE, head_dim ** -0.5, no q/k norm
        H = cfg["num_attention_heads"]
        theta, prf = configkeys.rope_params(cfg)
        return dict(hidden_size=cfg["hidden_size"], num_attention_heads=H,
                    num_key_value_heads=cfg.get("num_key_value_heads") or H,
                    head_dim=cfg.get("head_dim") or cfg["hidden_size"] // H, cache_length=cfg["max_position_embeddings"],
                    partial_rotary_factor=prf, rope_theta=theta, rms_norm_eps=cfg["rms_norm_eps"], qk_norm="none",
                    attn_output_gate=0, attention_bias=int(cfg["attention_bias"]))
    if kind in NO_MIXER:
        return None
    if kind == "gdn":
        m = {k: cfg[k] for k in ("hidden_size", "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                                 "linear_value_head_dim", "linear_conv_kernel_dim")}
        m.update(chunk_size=64, rms_norm_eps=cfg["rms_norm_eps"],
                 projection_layout="qwen3_next" if qwen3_next(cfg) else "qwen3_5")
        return m
    if kind == "attention" and cfg["model_type"] in ("qwen3_5_text", "qwen3_next", "qwen3_5_moe_text"):
        theta, prf = configkeys.rope_params(cfg)
        return dict(hidden_size=cfg["hidden_size"], num_attention_heads=cfg["num_attention_heads"],
                    num_key_value_heads=cfg["num_key_value_heads"], head_dim=cfg["head_dim"],
                    cache_length=cfg["max_position_embeddings"], partial_rotary_factor=prf,
                    rope_theta=theta, rms_norm_eps=cfg["rms_norm_eps"], qk_norm="zero_centred",
                    attn_output_gate=1, attention_bias=int(cfg["attention_bias"]))
    if kind == "attention" and cfg["model_type"] == "jamba":   # JambaAttention: no rotary embedding, 1/sqrt(hd)
        H = cfg["num_attention_heads"]
        return dict(hidden_size=cfg["hidden_size"], num_attention_heads=H,
                    num_key_value_heads=cfg.get("num_key_value_heads") or H,
                    head_dim=cfg.get("head_dim") or cfg["hidden_size"] // H, cache_length=cfg["max_position_embeddings"],
                    partial_rotary_factor=1.0, rope_theta=10000.0, rms_norm_eps=cfg["rms_norm_eps"], qk_norm="none",
                    attn_output_gate=0, attention_bias=0, no_rope=1, softmax_scale=0.0)
    if kind == "mamba" and cfg["model_type"] == "jamba":   # JambaMambaMixer: the inner norms with weights
        D = cfg["hidden_size"]
        R = cfg["mamba_dt_rank"]
        R = -(-D // 16) if R == "auto" else R
        return dict(hidden_size=D, intermediate_size=cfg["mamba_expand"] * D, state_size=cfg["mamba_d_state"],
                    conv_kernel=cfg["mamba_d_conv"], time_step_rank=R, use_bias=int(cfg["mamba_proj_bias"]),
                    use_conv_bias=int(cfg["mamba_conv_bias"]), inner_norms=2, mixer_rms_eps=float(cfg["rms_norm_eps"]))
    if kind == "attention" and granite(cfg):   # GraniteMoeHybridAttention: scaling = attention_multiplier
        H = cfg["num_attention_heads"]
        rope = cfg.get("position_embedding_type") == "rope"
        theta, prf = configkeys.rope_params(cfg) if rope else (10000.0, 1.0)
        return dict(hidden_size=cfg["hidden_size"], num_attention_heads=H,
                    num_key_value_heads=cfg.get("num_key_value_heads") or H,
                    head_dim=cfg.get("head_dim") or cfg["hidden_size"] // H, cache_length=cfg["max_position_embeddings"],
                    partial_rotary_factor=prf, rope_theta=theta, rms_norm_eps=cfg["rms_norm_eps"], qk_norm="none",
                    attn_output_gate=0, attention_bias=int(cfg["attention_bias"]), no_rope=int(not rope),
                    softmax_scale=float(cfg["attention_multiplier"]))
    if kind == "attention" and cfg["model_type"] == "bamba":
        H = cfg["num_attention_heads"]
        theta, prf = configkeys.rope_params(cfg)
        return dict(hidden_size=cfg["hidden_size"], num_attention_heads=H, num_key_value_heads=cfg["num_key_value_heads"],
                    head_dim=cfg["hidden_size"] // H, cache_length=cfg["max_position_embeddings"],
                    partial_rotary_factor=prf, rope_theta=theta,
                    rms_norm_eps=cfg["rms_norm_eps"], qk_norm="none", attn_output_gate=0,
                    attention_bias=int(cfg["attention_bias"]))
    if kind == "attention":
        H = cfg["num_attention_heads"]
        return dict(hidden_size=cfg["hidden_size"], num_attention_heads=H, num_key_value_heads=cfg["num_key_value_heads"],
                    head_dim=cfg["hidden_size"] // H, cache_length=cfg["max_position_embeddings"],
                    partial_rotary_factor=1.0, rope_theta=configkeys.rope_params(cfg)[0], rms_norm_eps=cfg["norm_eps"],
                    qk_norm="rms", attn_output_gate=0, attention_bias=0)
    if cfg["model_type"] == "mamba2":
        m = {k: cfg[k] for k in ("hidden_size", "num_heads", "head_dim", "state_size", "n_groups", "conv_kernel",
                                 "chunk_size", "layer_norm_epsilon")}
        m.update(use_bias=int(cfg["use_bias"]), use_conv_bias=int(cfg["use_conv_bias"]),
                 time_step_limit=tuple(cfg.get("time_step_limit") or (0.0, float("inf"))),
                 norm_group_size=configkeys.gated_norm_group_size(cfg, cfg["num_heads"] * cfg["head_dim"],
                                                                  cfg["n_groups"]))
        assert cfg["num_heads"] * cfg["head_dim"] == cfg["expand"] * cfg["hidden_size"], "num_heads * head_dim != expand * D"
        return m
    m = {k: cfg[k] for k in ("hidden_size", "intermediate_size", "state_size", "conv_kernel", "time_step_rank")}
    m.update(use_bias=int(cfg["use_bias"]), use_conv_bias=int(cfg["use_conv_bias"]))
    if cfg["model_type"] == "falcon_mamba":   # the weightless RMSNorms on dt, B and C (mixers.py inner_norms 1)
        m.update(inner_norms=1, mixer_rms_eps=float(cfg["mixer_rms_eps"]))
    return m


def mixer_init(kind, mcfg, rng):
    """Family-named weights of one mixer layer."""
    if kind == "mamba2":
        return mixers.mamba2_init(mcfg, rng)
    if kind == "mamba":
        return mixers.mamba1_init(mcfg, rng, mixers.GRID_BITS)
    if kind == "shortconv":
        return mixers.shortconv_init(mcfg, rng, mixers.GRID_BITS)
    if kind == "gdn":
        return mixers.gdn_init(mcfg, rng, mixers.GRID_BITS)
    return M.attention_init(mcfg, rng, mixers.GRID_BITS)


mixer_forward = M.mixer_forward   # one segment through one layer's mixer (golden/models.py)


def names(cfg):
    """Checkpoint names of the glue: embedding, final norm, head, and per layer its prefix, block norm,
    mixer prefix, and (lfm2, bamba) feed-forward norm and prefix and its three matrices."""
    if cfg["model_type"] == "olmo_hybrid":   # its layers are golden/olmo_hybrid.py's; the glue's outer names
        return dict(embed="model.embed_tokens.weight", final="model.norm.weight", head="lm_head.weight",
                    layer="model.layers.{}.", norm="input_layernorm.weight", ffn_norm="post_attention_layernorm.weight",
                    ffn="mlp.", mlp=("gate_proj", "up_proj", "down_proj"))
    if cfg["model_type"] == "inkling_text":   # its layers are golden/inkling.py's; the glue's outer names
        return dict(embed="model.embed_tokens.weight", final="model.norm.weight", head="lm_head.weight",
                    layer="model.layers.{}.", norm="input_layernorm.weight", ffn_norm="post_attention_layernorm.weight",
                    ffn="mlp.", mlp=("gate_proj", "up_proj", "down_proj"))
    if cfg["model_type"] == "minimax":   # its layers are golden/minimax.py's; the glue's outer names
        return dict(embed="model.embed_tokens.weight", final="model.norm.weight", head="lm_head.weight",
                    layer="model.layers.{}.", norm="input_layernorm.weight", ffn_norm="post_attention_layernorm.weight",
                    ffn=None, moe=("mlp.gate.weight", "mlp.experts.gate_up_proj", "mlp.experts.down_proj"))
    if nemotron(cfg):   # every block's module is `mixer`; its norm is the block's one norm
        return dict(embed="model.embeddings.weight", final="model.norm_f.weight", head="lm_head.weight",
                    layer="model.layers.{}.", norm="norm.weight", ffn_norm=None, ffn=None)
    if falcon(cfg):
        return dict(embed="model.embed_tokens.weight", final="model.final_layernorm.weight", head="lm_head.weight",
                    layer="model.layers.{}.", norm="input_layernorm.weight", ffn_norm="pre_ff_layernorm.weight",
                    ffn="feed_forward.", mlp=("gate_proj", "up_proj", "down_proj"))
    if granite(cfg):   # the shared MLP's gate and up are one input_linear [2F, D] (gate rows first)
        return dict(embed="model.embed_tokens.weight", final="model.norm.weight", head="lm_head.weight",
                    layer="model.layers.{}.", norm="input_layernorm.weight", ffn_norm="post_attention_layernorm.weight",
                    ffn="shared_mlp.", mlp=("input_linear", None, "output_linear"),
                    moe=("block_sparse_moe.router.weight", "block_sparse_moe.experts.gate_up_proj",
                         "block_sparse_moe.experts.down_proj"))
    if cfg["model_type"] in ("qwen3_5_text", "qwen3_next", "qwen3_5_moe_text"):   # Qwen3-Next, Qwen3.5-MoE: its MoE layers' mlp is the sparse block
        return dict(embed="model.embed_tokens.weight", final="model.norm.weight", head="lm_head.weight",
                    layer="model.layers.{}.", norm="input_layernorm.weight", ffn_norm="post_attention_layernorm.weight",
                    ffn="mlp.", mlp=("gate_proj", "up_proj", "down_proj"),
                    moe=("mlp.gate.weight", "mlp.experts.gate_up_proj", "mlp.experts.down_proj"))
    if cfg["model_type"] == "jamba":
        return dict(embed="model.embed_tokens.weight", final="model.final_layernorm.weight", head="lm_head.weight",
                    layer="model.layers.{}.", norm="input_layernorm.weight", ffn_norm="pre_ff_layernorm.weight",
                    ffn="feed_forward.", mlp=("gate_proj", "up_proj", "down_proj"),
                    moe=("feed_forward.router.weight", "feed_forward.experts.gate_up_proj",
                         "feed_forward.experts.down_proj"))
    if cfg["model_type"] == "bamba":
        return dict(embed="model.embed_tokens.weight", final="model.final_layernorm.weight", head="lm_head.weight",
                    layer="model.layers.{}.", norm="input_layernorm.weight", ffn_norm="pre_ff_layernorm.weight",
                    ffn="feed_forward.", mlp=("gate_proj", "up_proj", "down_proj"))
    if cfg["model_type"] in LFM2_TYPES:   # LFM2-MoE: its MoE layers' feed_forward is Lfm2MoeSparseMoeBlock
        return dict(embed="model.embed_tokens.weight", final="model.embedding_norm.weight", head="lm_head.weight",
                    layer="model.layers.{}.", norm="operator_norm.weight", ffn_norm="ffn_norm.weight",
                    ffn="feed_forward.", mlp=("w1", "w3", "w2"),
                    moe=("feed_forward.gate.weight", "feed_forward.experts.gate_up_proj",
                         "feed_forward.experts.down_proj", "feed_forward.expert_bias"))
    return dict(embed="backbone.embeddings.weight", final="backbone.norm_f.weight", head="lm_head.weight",
                layer="backbone.layers.{}.", norm="norm.weight", ffn_norm=None, ffn=None)


def mixer_prefix(cfg, i):
    if falcon(cfg):   # slot i: decoder layer i // 2's branch
        return names(cfg)["layer"].format(i // 2) + FALCON_PREFIX[layer_kind(cfg, i)]
    n = names(cfg)["layer"].format(i)
    if cfg["model_type"] in ("bamba", "granitemoehybrid", "jamba"):
        return n + ("self_attn." if layer_kind(cfg, i) == "attention" else "mamba.")
    if cfg["model_type"] in ("qwen3_5_text", "qwen3_next", "qwen3_5_moe_text"):
        return n + ("self_attn." if layer_kind(cfg, i) == "attention" else "linear_attn.")
    if cfg["model_type"] in LFM2_TYPES:
        return n + ("self_attn." if layer_kind(cfg, i) == "attention" else "conv.")
    return n + "mixer."


def checkpoint_name(cfg, i, family_name):
    """A mixer parameter's checkpoint name (lfm2 names three attention parameters its own way)."""
    if cfg["model_type"] in LFM2_TYPES and layer_kind(cfg, i) == "attention":
        family_name = LFM2_ATTENTION_NAMES.get(family_name, family_name)
    return mixer_prefix(cfg, i) + family_name




def init_weights(cfg, rng):
    """Checkpoint-named weights, drawn in a fixed order: embedding, then per layer its norm, its mixer and
    (lfm2) its feed-forward norm and w1, w3, w2, then the final norm, then lm_head (drawn even when tied, so
    the draw order does not depend on tying). Stored as float32 values on the bf16-exact grid
    (mixers.py "Quantization")."""
    if cfg["model_type"] == "zamba2":   # shared blocks, adapters per application (golden/zamba.py)
        return zamba.init_weights(cfg, rng)
    if cfg["model_type"] == "zamba":   # one shared block, Mamba1 layers (golden/zamba.py)
        return zamba.v1_init_weights(cfg, rng)
    if cfg["model_type"] == "olmo_hybrid":   # golden/olmo_hybrid.py
        return olmo_hybrid.init_weights(cfg, rng)
    if cfg["model_type"] == "kimi_linear":   # KDA and MLA layers, its MoE (golden/kimi.py)
        return kimi.init_weights(cfg, rng)
    if cfg["model_type"] == "minimax":   # golden/minimax.py
        return minimax.init_weights(cfg, rng)
    if cfg["model_type"] == "inkling_text":   # golden/inkling.py
        return inkling.init_weights(cfg, rng)
    D, V = cfg["hidden_size"], cfg["vocab_size"]
    nm = names(cfg)
    w = {nm["embed"]: mixers.quantize(rng.standard_normal((V, D)), scale=1.0)}
    if falcon(cfg):
        return falcon_init(cfg, nm, w, rng)
    for i in range(cfg["num_hidden_layers"]):
        pre = nm["layer"].format(i)
        kind = layer_kind(cfg, i)
        centre = 0.0 if zero_centred(cfg) else 1.0   # Qwen3_5RMSNorm holds w of 1 + w
        w[pre + nm["norm"]] = mixers.quantize(centre + 0.1 * rng.standard_normal(D))
        if kind in NO_MIXER:   # Nemotron-H's MLP / MoE block: its weights under `mixer.`
            w.update(nemotron_ffn_init(cfg, kind, pre + "mixer.", rng))
            continue
        for k, v in mixer_init(kind, mixer_config(cfg, kind), rng).items():
            w[checkpoint_name(cfg, i, k)] = v
        if nm["ffn"] and granite(cfg):   # shared MLP (fused gate | up), then the MoE: router, experts
            F, E, Fe = ffn_size(cfg), cfg["num_local_experts"], cfg["intermediate_size"]
            w[pre + nm["ffn_norm"]] = mixers.quantize(centre + 0.1 * rng.standard_normal(D))
            w[pre + "shared_mlp.input_linear.weight"] = mixers.uniform_init(rng, (2 * F, D), D)
            w[pre + "shared_mlp.output_linear.weight"] = mixers.uniform_init(rng, (D, F), F)
            if E > 0:
                router, gate_up, down = (pre + n for n in nm["moe"])
                w[router] = mixers.uniform_init(rng, (E, D), D)
                w[gate_up] = mixers.uniform_init(rng, (E, 2 * Fe, D), D)
                w[down] = mixers.uniform_init(rng, (E, D, Fe), Fe)
        elif lfm2_moe(cfg) and moe_layer(cfg, i):   # Lfm2MoeSparseMoeBlock: router, experts, expert_bias
            w[pre + nm["ffn_norm"]] = mixers.quantize(centre + 0.1 * rng.standard_normal(D))
            w.update(lfm2_moe_init(cfg, pre, nm, rng))
        elif nm["ffn"] and qwen_moe(cfg) and moe_layer(cfg, i):
            # Qwen3NextSparseMoeBlock: router, experts, the shared expert and its gate
            E, Fe, Fs = cfg["num_experts"], cfg["moe_intermediate_size"], cfg["shared_expert_intermediate_size"]
            w[pre + nm["ffn_norm"]] = mixers.quantize(centre + 0.1 * rng.standard_normal(D))
            router, gate_up, down = (pre + n for n in nm["moe"])
            w[router] = mixers.uniform_init(rng, (E, D), D)
            w[gate_up] = mixers.uniform_init(rng, (E, 2 * Fe, D), D)
            w[down] = mixers.uniform_init(rng, (E, D, Fe), Fe)
            for m, shape, fan in (("gate_proj", (Fs, D), D), ("up_proj", (Fs, D), D), ("down_proj", (D, Fs), Fs)):
                w[pre + "mlp.shared_expert." + m + ".weight"] = mixers.uniform_init(rng, shape, fan)
            w[pre + "mlp.shared_expert_gate.weight"] = mixers.uniform_init(rng, (1, D), D)
        elif nm["ffn"] and moe_layer(cfg, i):   # Jamba's JambaSparseMoeBlock: router and experts, no MLP
            E, Fe = cfg["num_experts"], cfg["intermediate_size"]
            w[pre + nm["ffn_norm"]] = mixers.quantize(centre + 0.1 * rng.standard_normal(D))
            router, gate_up, down = (pre + n for n in nm["moe"])
            w[router] = mixers.uniform_init(rng, (E, D), D)
            w[gate_up] = mixers.uniform_init(rng, (E, 2 * Fe, D), D)
            w[down] = mixers.uniform_init(rng, (E, D, Fe), Fe)
        elif nm["ffn"]:
            F = ffn_size(cfg)
            gate, up, down = (pre + nm["ffn"] + m + ".weight" for m in nm["mlp"])
            w[pre + nm["ffn_norm"]] = mixers.quantize(centre + 0.1 * rng.standard_normal(D))
            w[gate] = mixers.uniform_init(rng, (F, D), D)
            w[up] = mixers.uniform_init(rng, (F, D), D)
            w[down] = mixers.uniform_init(rng, (D, F), F)
    w[nm["final"]] = mixers.quantize((0.0 if zero_centred(cfg) else 1.0) + 0.1 * rng.standard_normal(D))
    head = mixers.quantize(rng.standard_normal((V, D)), scale=1.0)
    # state_dict() holds lm_head.weight under its own name whether tied or not; tied, it is the embedding
    w[nm["head"]] = w[nm["embed"]].copy() if cfg["tie_word_embeddings"] else head
    return w


def falcon_init(cfg, nm, w, rng):
    """FalconH1's weights after the embedding: per decoder layer input_layernorm, the Mamba2 branch, the attention
    branch, pre_ff_layernorm and the MLP's gate, up, down; then the final norm and the head."""
    D, V, F = cfg["hidden_size"], cfg["vocab_size"], cfg["intermediate_size"]
    for j in range(cfg["num_hidden_layers"]):
        pre = nm["layer"].format(j)
        w[pre + nm["norm"]] = mixers.quantize(1.0 + 0.1 * rng.standard_normal(D))
        for slot in (2 * j, 2 * j + 1):
            kind = layer_kind(cfg, slot)
            for k, v in mixer_init(kind, mixer_config(cfg, kind), rng).items():
                w[mixer_prefix(cfg, slot) + k] = v
        w[pre + nm["ffn_norm"]] = mixers.quantize(1.0 + 0.1 * rng.standard_normal(D))
        gate, up, down = (pre + nm["ffn"] + m + ".weight" for m in nm["mlp"])
        w[gate] = mixers.uniform_init(rng, (F, D), D)
        w[up] = mixers.uniform_init(rng, (F, D), D)
        w[down] = mixers.uniform_init(rng, (D, F), F)
    w[nm["final"]] = mixers.quantize(1.0 + 0.1 * rng.standard_normal(D))
    head = mixers.quantize(rng.standard_normal((V, D)), scale=1.0)
    w[nm["head"]] = w[nm["embed"]].copy() if cfg["tie_word_embeddings"] else head
    return w


def nemotron_ffn_init(cfg, kind, pre, rng):
    """Nemotron-H's feed-forward blocks: the relu² MLP (up_proj [F, D], down_proj [D, F]); the MoE: the router
    (gate.weight [E, D], gate.e_score_correction_bias [E], large enough to change the choice), the experts
    (experts.up_proj [E, Fe, D], experts.down_proj [E, D, Fe]) and the shared expert (shared_experts.up_proj /
    down_proj)."""
    D = cfg["hidden_size"]
    w = {}
    if kind == "mlp":
        F = cfg["intermediate_size"]
        w[pre + "up_proj.weight"] = mixers.uniform_init(rng, (F, D), D)
        w[pre + "down_proj.weight"] = mixers.uniform_init(rng, (D, F), F)
        return w
    E, Fe, Fs = cfg["n_routed_experts"], cfg["moe_intermediate_size"], cfg["moe_shared_expert_intermediate_size"]
    w[pre + "gate.weight"] = mixers.uniform_init(rng, (E, D), D)
    w[pre + "gate.e_score_correction_bias"] = mixers.quantize(0.1 * rng.standard_normal(E), scale=1.0)
    w[pre + "experts.up_proj"] = mixers.uniform_init(rng, (E, Fe, D), D)
    w[pre + "experts.down_proj"] = mixers.uniform_init(rng, (E, D, Fe), Fe)
    w[pre + "shared_experts.up_proj.weight"] = mixers.uniform_init(rng, (Fs, D), D)
    w[pre + "shared_experts.down_proj.weight"] = mixers.uniform_init(rng, (D, Fs), Fs)
    return w


def relu2(x):
    """relu(x)² (ACT2FN["relu2"])."""
    return np.maximum(x, 0.0) ** 2


def layer_weights(cfg, w64, i):
    """Family-named weights of layer i's mixer. FalconH1's branches carry the multipliers upstream applies to a
    projection's output, as row scalings (exact in float64: (W x) m = (m W) x): the Mamba2 branch's in_proj rows
    times the five ssm_multipliers parts (mup_vector), the attention branch's k_proj rows times key_multiplier."""
    if falcon(cfg):
        p = mixer_prefix(cfg, i)
        out = {k[len(p):]: v.copy() for k, v in w64.items() if k.startswith(p)}
        if layer_kind(cfg, i) == "mamba2":
            mup = falcon_mup_vector(cfg)
            out["in_proj.weight"] = out["in_proj.weight"] * mup[:, None]
            if "in_proj.bias" in out:
                out["in_proj.bias"] = out["in_proj.bias"] * mup
        else:
            for k in ("k_proj.weight", "k_proj.bias"):
                if k in out:
                    out[k] = out[k] * cfg["key_multiplier"]
        return out
    out = {}
    for k, v in w64.items():
        p = mixer_prefix(cfg, i)
        if k.startswith(p):
            fam = k[len(p):]
            if cfg["model_type"] in LFM2_TYPES and layer_kind(cfg, i) == "attention":
                fam = {v2: k2 for k2, v2 in LFM2_ATTENTION_NAMES.items()}.get(fam, fam)
            out[fam] = v
    return out


# ---------------------------------------------------------------------------------------------------
# the stack
# ---------------------------------------------------------------------------------------------------

class Stack:
    """A float64 model: forward over one segment of token ids from per-layer caches."""

    def __init__(self, cfg, weights):
        self.cfg = cfg
        self.nm = names(cfg)
        self.w = {k: v.astype(np.float64) for k, v in weights.items()}
        self.n = cfg["num_hidden_layers"] * (2 if falcon(cfg) else 1)   # FalconH1: two mixer slots a layer
        self.kinds = [layer_kind(cfg, i) for i in range(self.n)]
        self.mcfgs = [mixer_config(cfg, k) for k in self.kinds]
        self.mixers = [layer_weights(cfg, self.w, i) for i in range(self.n)]
        self.eps = cfg.get("layer_norm_epsilon", cfg.get("norm_eps", cfg.get("rms_norm_eps")))
        self.zc = zero_centred(cfg)

    def head(self):
        return self.w[self.nm["embed"]] if self.cfg["tie_word_embeddings"] else self.w[self.nm["head"]]

    def ffn(self, i, h):
        """Lfm2MLP / BambaMLP on the feed-forward norm of h: down(silu(gate x) * up x); GraniteMoeHybrid: its
        shared MLP (gate | up in one input_linear) plus its mixture of experts on the same x."""
        pre = self.nm["layer"].format(i)
        x = rmsnorm(h, self.w[pre + self.nm["ffn_norm"]], self.eps, self.zc)
        if granite(self.cfg):
            gate, up = np.split(self.w[pre + "shared_mlp.input_linear.weight"], 2, axis=0)
            out = (mixers.silu(x @ gate.T) * (x @ up.T)) @ self.w[pre + "shared_mlp.output_linear.weight"].T
            if self.cfg["num_local_experts"] > 0:
                out = out + self.moe(i, x)
            return out
        if qwen_moe(self.cfg) and moe_layer(self.cfg, i):
            # Qwen3NextSparseMoeBlock: the experts plus sigmoid(shared_expert_gate x) times the shared expert
            sp = pre + "mlp.shared_expert."
            shared = ((mixers.silu(x @ self.w[sp + "gate_proj.weight"].T) * (x @ self.w[sp + "up_proj.weight"].T))
                      @ self.w[sp + "down_proj.weight"].T)
            gate = 1.0 / (1.0 + np.exp(-(x @ self.w[pre + "mlp.shared_expert_gate.weight"].T)))
            return self.moe(i, x) + gate * shared
        if lfm2_moe(self.cfg) and moe_layer(self.cfg, i):   # Lfm2MoeSparseMoeBlock alone
            return lfm2_moe_forward(self.cfg, self.w, pre, self.nm, x)
        if moe_layer(self.cfg, i):   # Jamba: the mixture of experts alone
            return self.moe(i, x)
        gate, up, down = (self.w[pre + self.nm["ffn"] + m + ".weight"] for m in self.nm["mlp"])
        return (mixers.silu(x @ gate.T) * (x @ up.T)) @ down.T

    def moe(self, i, x):
        """The mixture of experts of layer i on x [..., D], from its definition: router logits r = W x; the k
        experts of the largest r (a tie: the lower index; none in a golden drawn in float64); their weights
        the softmax over those k logits (GraniteMoeHybrid), or the softmax over every expert's logit taken at those
        k, not renormalised (Jamba); the output the weighted sum of down_e(silu(gate_e x) * up_e x)."""
        pre = self.nm["layer"].format(i)
        router, gate_up, down = (self.w[pre + n] for n in self.nm["moe"])
        k = self.cfg["num_experts_per_tok"]
        flat = x.reshape(-1, x.shape[-1])
        out = np.zeros_like(flat)
        for t, xt in enumerate(flat):
            r = router @ xt
            top = sorted(range(len(r)), key=lambda e: (-r[e], e))[:k]
            assert len(set(r[top[-1:]]) & set(np.delete(r, top))) == 0, "a router tie at the k-th expert"
            if self.cfg["model_type"] == "jamba":
                p = (np.exp(r - r.max()) / np.exp(r - r.max()).sum())[top]
            elif qwen_moe(self.cfg):   # the softmax over every expert at the k, divided by their sum with norm_topk_prob
                p = (np.exp(r - r.max()) / np.exp(r - r.max()).sum())[top]   # (Qwen3.5-MoE: always)
                p = p / p.sum() if self.cfg.get("norm_topk_prob", True) else p
            else:
                p = np.exp(r[top] - r[top].max())
                p = p / p.sum()
            for wgt, e in zip(p, top):
                gate, up = np.split(gate_up[e], 2, axis=0)
                out[t] += wgt * (down[e] @ (mixers.silu(gate @ xt) * (up @ xt)))
        return out.reshape(x.shape)

    def nemotron_ffn(self, i, x):
        """Nemotron-H's feed-forward blocks on the block norm x [..., D]: the MLP down(relu(up x)²) (NemotronHMLP,
        no gate); the MoE (NemotronHMoE) from its definition: scores s = sigmoid(W x); the choice on c = s + b (the
        correction bias): the n_group groups of E / n_group experts ranked by the sum of their two largest c, the
        topk_group best kept, the k largest c among the kept experts; their weights the uncorrected s, divided by
        (their sum + 1e-20) with norm_topk_prob, times routed_scaling_factor; the output the weighted sum of the
        experts' down_e(relu(up_e x)²) plus the shared expert's. The golden holds no tie at a cut (float64 draws;
        asserted)."""
        pre = self.nm["layer"].format(i) + "mixer."
        w, cfg = self.w, self.cfg
        if self.kinds[i] == "mlp":
            return relu2(x @ w[pre + "up_proj.weight"].T) @ w[pre + "down_proj.weight"].T
        E, k, G, kg = cfg["n_routed_experts"], cfg["num_experts_per_tok"], cfg["n_group"], cfg["topk_group"]
        per = E // G
        router, bias = w[pre + "gate.weight"], w[pre + "gate.e_score_correction_bias"]
        up, down = w[pre + "experts.up_proj"], w[pre + "experts.down_proj"]
        flat = x.reshape(-1, x.shape[-1])
        out = np.zeros_like(flat)
        for t, xt in enumerate(flat):
            sc = 1.0 / (1.0 + np.exp(-(router @ xt)))
            c = sc + bias
            gs = np.array([np.sum(np.sort(c[g * per:(g + 1) * per])[-2:]) for g in range(G)])
            groups = sorted(range(G), key=lambda g: (-gs[g], g))[:kg]
            assert kg == G or gs[groups[-1]] not in np.delete(gs, groups), "a group tie at the topk_group-th group"
            allowed = [e for e in range(E) if e // per in groups]
            top = sorted(allowed, key=lambda e: (-c[e], e))[:k]
            rest = [c[e] for e in allowed if e not in top]
            assert c[top[-1]] not in rest, "a router tie at the k-th expert"
            p = sc[top]
            if cfg["norm_topk_prob"]:
                p = p / (p.sum() + 1e-20)
            p = p * cfg["routed_scaling_factor"]
            for wgt, e in zip(p, top):
                out[t] += wgt * (down[e] @ relu2(up[e] @ xt))
        shared = relu2(x @ w[pre + "shared_experts.up_proj.weight"].T) @ w[pre + "shared_experts.down_proj.weight"].T
        return out.reshape(x.shape) + shared

    def forward(self, ids, mask, caches=None):
        """ids [B, L]; mask [B, L] or None; caches: per-layer (window, state) or None. Returns logits
        [B, L, V], hidden [n + 1, B, L, D], new caches, per-layer per-position caches, and each layer's
        mixer output [n, B, L, D]."""
        if falcon(self.cfg):
            return self.falcon_forward(ids, mask, caches)
        h = self.w[self.nm["embed"]][ids] * self.mult("embedding_multiplier")
        hidden, mixed = [h], []
        new_caches, per_pos = [], []
        for i in range(self.n):
            x = rmsnorm(h, self.w[self.nm["layer"].format(i) + self.nm["norm"]], self.eps, self.zc)
            if self.kinds[i] in NO_MIXER:   # Nemotron-H's MLP / MoE block: norm -> feed-forward -> residual, no cache
                h = h + self.nemotron_ffn(i, x)
                hidden.append(h)
                mixed.append(np.zeros_like(h))   # no mixer: nothing mixed
                new_caches.append(None)
                per_pos.append(None)
                continue
            out, cache, windows, states = mixer_forward(self.kinds[i], self.mcfgs[i], self.mixers[i], x, mask,
                                                        None if caches is None else caches[i])
            h = h + out * self.mult("residual_multiplier")
            if self.nm["ffn"]:
                h = h + self.ffn(i, h) * self.mult("residual_multiplier")
            hidden.append(h)
            mixed.append(out)
            new_caches.append(cache)
            per_pos.append((windows, states))
        logits = rmsnorm(h, self.w[self.nm["final"]], self.eps, self.zc) @ self.head().T / self.mult("logits_scaling")
        return logits, np.stack(hidden), new_caches, per_pos, np.stack(mixed)

    def falcon_forward(self, ids, mask, caches):
        """FalconH1ForCausalLM from its definition: h = embed(ids) x embedding_multiplier; per decoder layer j,
        x = input_layernorm(h), the Mamba2 branch on x x ssm_in_multiplier (its in_proj parts times ssm_multipliers)
        times ssm_out_multiplier plus the attention branch on x x attention_in_multiplier (its keys times
        key_multiplier) times attention_out_multiplier, added to h; then h + down(up(x') silu(gate(x') g)) d with x'
        = pre_ff_layernorm(h) and (g, d) = mlp_multipliers; logits = lm_head(final_layernorm(h)) x
        lm_head_multiplier. Slot 2j's hidden state is h before the layer (its branch adds nothing alone), slot
        2j + 1's the layer's output; each slot's mixer output is its branch before its out multiplier."""
        cfg, w, nm = self.cfg, self.w, self.nm
        h = w[nm["embed"]][ids] * cfg["embedding_multiplier"]
        hidden, mixed, new_caches, per_pos = [h], [], [], []
        ins = {"mamba2": cfg["ssm_in_multiplier"], "attention": cfg["attention_in_multiplier"]}
        outs = {"mamba2": cfg["ssm_out_multiplier"], "attention": cfg["attention_out_multiplier"]}
        for j in range(cfg["num_hidden_layers"]):
            pre = nm["layer"].format(j)
            x = rmsnorm(h, w[pre + nm["norm"]], self.eps)
            branch = np.zeros_like(h)
            for slot in (2 * j, 2 * j + 1):
                kind = self.kinds[slot]
                out, cache, windows, states = mixer_forward(kind, self.mcfgs[slot], self.mixers[slot], x * ins[kind],
                                                            mask, None if caches is None else caches[slot])
                branch = branch + out * outs[kind]
                mixed.append(out)
                new_caches.append(cache)
                per_pos.append((windows, states))
            hidden.append(h)   # slot 2j: the residual as it was
            h = h + branch
            xf = rmsnorm(h, w[pre + nm["ffn_norm"]], self.eps)
            gate, up, down = (w[pre + nm["ffn"] + m + ".weight"] for m in nm["mlp"])
            g_mult, d_mult = cfg["mlp_multipliers"]
            h = h + ((xf @ up.T) * mixers.silu((xf @ gate.T) * g_mult)) @ down.T * d_mult
            hidden.append(h)
        logits = rmsnorm(h, w[nm["final"]], self.eps) @ self.head().T * cfg["lm_head_multiplier"]
        return logits, np.stack(hidden), new_caches, per_pos, np.stack(mixed)

    def mult(self, key):
        """GraniteMoeHybrid's multipliers (1 for the models without them)."""
        return float(self.cfg[key]) if granite(self.cfg) else 1.0

    def greedy(self, ids, mask, steps):
        """Prefill, then `steps` greedy tokens through the cache: (tokens [B, G], logits [B, G, V])."""
        return M.greedy(self.forward, ids, mask, steps)


def stack_of(cfg, weights):
    """The float64 model of cfg: Stack, or Zamba2's own (golden/zamba.py)."""
    if cfg["model_type"] == "zamba":
        return zamba.ZambaStack(cfg, weights)
    if cfg["model_type"] == "olmo_hybrid":
        return olmo_hybrid.OlmoHybridStack(cfg, weights)
    if cfg["model_type"] == "kimi_linear":
        return kimi.KimiStack(cfg, weights)
    if cfg["model_type"] == "minimax":
        return minimax.MiniMaxStack(cfg, weights)
    if cfg["model_type"] == "inkling_text":
        return inkling.InklingStack(cfg, weights)
    return zamba.Zamba2Stack(cfg, weights) if cfg["model_type"] == "zamba2" else Stack(cfg, weights)


def margin_note(logits, mask=None):
    """One line: the smallest gap between the top two logits over the compared positions."""
    top2 = np.sort(logits, axis=-1)[..., -2:]
    gap = top2[..., 1] - top2[..., 0]
    if mask is not None:
        gap = gap[mask.astype(bool)]
    return f"top-1 margin min {np.min(gap):.3g}, median {np.median(gap):.3g}"


def build(spec):
    cfg = model_config(spec)
    rng = np.random.default_rng(spec.seed)
    weights = init_weights(cfg, rng)
    mask = spec.mask()
    ids = rng.integers(0, cfg["vocab_size"], size=(spec.batch, spec.length)).astype(np.int64)
    ids = np.where(mask.astype(bool), ids, 0)   # pad token id 0 (never looked at: masked)
    return assemble(spec, cfg, weights, ids, mask)


def assemble(spec, cfg, weights, ids, mask):
    """The Golden of a model: cfg (config.json), checkpoint-named weights, ids [B, L], mask [B, L]."""
    st = stack_of(cfg, weights)
    logits, hidden, _, per_pos, mixed = st.forward(ids, mask)
    tokens, glogits = st.greedy(ids, mask, spec.greedy)
    pos = np.array(spec.positions, dtype=np.int64)
    tensors = {"weights/" + k: v for k, v in weights.items()}
    tensors["inputs/input_ids"] = ids
    tensors["inputs/attention_mask"] = mask
    tensors["expected/logits"] = logits
    tensors["expected/hidden_states"] = hidden
    tensors["expected/mixer_outputs"] = mixed
    tensors["expected/state_positions"] = pos
    for i, cached in enumerate(per_pos):
        if cached is None:   # a block without a mixer has no cache
            continue
        windows, states = cached
        tensors[f"expected/layers/{i}/conv_state"] = windows[pos]
        if states is not None:
            tensors[f"expected/layers/{i}/recurrent_state"] = states[pos]
    tensors["expected/greedy_tokens"] = tokens
    tensors["expected/greedy_logits"] = glogits
    for k, v in tensors.items():
        assert np.all(np.isfinite(v)), f"{spec.name}: non-finite values in {k}"
    config = {"model_type": spec.model_type, "config_json": configkeys.dumps(cfg)}
    notes = [margin_note(logits, mask), "greedy " + margin_note(glogits)]
    return mixers.Golden(config, tensors, notes)


def identity_attrs(spec):
    return {"format": goldens.FORMAT, "format_version": np.int64(goldens.FORMAT_VERSION), "kind": "model",
            "model_type": spec.model_type, "name": spec.name, "description": spec.description,
            "seed": np.int64(spec.seed)}


# ---------------------------------------------------------------------------------------------------
# self-test: padding and the cache, at the stack level
# ---------------------------------------------------------------------------------------------------

def selftest(spec, report):
    """A left-padded row equals the row alone (logits, hidden states); the greedy logits through the
    cache equal a full no-cache forward of prompt + generated tokens; a prompt split in two equals one pass."""
    cfg = model_config(spec)
    rng = np.random.default_rng(spec.seed)
    weights = init_weights(cfg, rng)
    mask = spec.mask()
    ids = np.where(mask.astype(bool), rng.integers(0, cfg["vocab_size"], size=(spec.batch, spec.length)), 0)
    st = stack_of(cfg, weights)
    logits, hidden, _, _, _ = st.forward(ids, mask)
    d = {"logits": 0.0, "hidden": 0.0}
    for b, p in enumerate(spec.left_pad):
        lo, ho, _, _, _ = st.forward(ids[b:b + 1, p:], None)
        d["logits"] = max(d["logits"], mixers.maxdiff(lo[0], logits[b, p:]))
        d["hidden"] = max(d["hidden"], mixers.maxdiff(ho[:, 0], hidden[:, b, p:]))
    report(f"{spec.key} left pad vs rows alone", d, 1e-12)
    tokens, glogits = st.greedy(ids, mask, spec.greedy)
    full = np.concatenate([ids, tokens[:, :-1]], axis=1)
    fmask = np.concatenate([mask, np.ones_like(tokens[:, :-1], dtype=np.int8)], axis=1)
    lf, _, _, _, _ = st.forward(full, fmask)
    report(f"{spec.key} greedy cached vs full", {"logits": mixers.maxdiff(lf[:, spec.length - 1:], glogits)}, 1e-12)
    s = spec.length // 2
    l1, _, c1, _, _ = st.forward(ids[:, :s], mask[:, :s])
    l2, _, _, _, _ = st.forward(ids[:, s:], mask[:, s:], c1)
    both = np.concatenate([l1, l2], axis=1)
    live = mask.astype(bool)
    report(f"{spec.key} split at {s} vs one pass", {"logits": mixers.maxdiff(both[live], logits[live])}, 1e-12)


# ---------------------------------------------------------------------------------------------------
# files and commands
# ---------------------------------------------------------------------------------------------------

def write(spec_attrs, g, path, provenance=None):
    """As goldens.write, with the model golden's identity attributes."""
    import h5py
    with h5py.File(path, "w") as f:
        for k, v in {**spec_attrs, **(provenance or goldens.provenance_attrs()),
                     "content_sha256": goldens.content_sha256(g.tensors)}.items():
            f.attrs[k] = v
        cfg = f.create_group("config")
        for k, v in g.config.items():
            cfg.attrs[k] = v
        for key, v in g.tensors.items():
            f.create_dataset(key, data=v, chunks=v.shape, shuffle=True, compression="gzip",
                             compression_opts=9, track_times=False)


def write_atomic(attrs, g, path, provenance=None):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    try:
        write(attrs, g, tmp, provenance)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def wants_models(argv):
    """True when a generate.py list / regenerate / check command line is about model goldens (handled here by
    main; `from-checkpoint` is golden/checkpoint.py's, which generate.py dispatches to first)."""
    if not argv:
        return False
    return argv[0] in ("list", "regenerate", "check") and any(a == "models" or a.startswith("models/")
                                                                for a in argv[1:])


def select(names):
    picked = []
    for n in names:
        if n.startswith("-"):
            continue
        if n == "models":
            picked += list(SPECS.values())
        elif n in SPECS:
            picked.append(SPECS[n])
        else:
            print(f"unknown model golden {n} (known: {' '.join(SPECS)}, or `models`)", file=sys.stderr)
            sys.exit(2)
    return picked


def cmd_list(names):
    total = 0
    for spec in select(names):
        size = os.path.getsize(spec.path) if os.path.exists(spec.path) else None
        total += size or 0
        print(f"{spec.key:<20} {('%d' % size) if size is not None else 'missing':>9} bytes  {spec.model_type} "
              f"B={spec.batch} L={spec.length} G={spec.greedy} layers={spec.config['num_hidden_layers']}")
    print(f"total {total} bytes")
    return 0


def cmd_regenerate(names):
    for spec in select(names):
        g = build(spec)
        print(f"{spec.key} -> golden/models/{spec.name}.h5")
        for note in g.notes:
            print(f"  {note}")
        old = goldens.read_file(spec.path) if os.path.exists(spec.path) else (None, {}, {})
        keep = (goldens.bit_identical(g.tensors, old[0]) and not goldens.attr_differences(g.config, old[1])
                and all(k in old[2] for k in goldens.PROVENANCE_KEYS))
        write_atomic(identity_attrs(spec), g, spec.path,
                     {k: old[2][k] for k in goldens.PROVENANCE_KEYS} if keep else None)
        for key, text, _ in goldens.compare(g.tensors, old[0]):
            if text != "max|change| = 0.000e+00":
                print(f"  {key:<36} {text}")
        print(f"  {os.path.getsize(spec.path)} bytes")
    return 0


def cmd_check(names, selftest_first):
    ok = True
    specs = select(names)
    if selftest_first:
        rep = mixers.Reporter()
        for spec in specs:
            selftest(spec, rep)
        ok &= rep.ok
    for spec in specs:
        if not os.path.exists(spec.path):
            print(f"{spec.key}: MISSING {spec.path}")
            ok = False
            continue
        g = build(spec)
        stored, stored_config, stored_root = goldens.read_file(spec.path)
        rows = goldens.compare(g.tensors, stored)
        ident = identity_attrs(spec)
        changed = (["config/" + k for k in goldens.attr_differences(g.config, stored_config)]
                   + goldens.attr_differences(ident, stored_root, keys=sorted(ident)))
        recorded = stored_root.get("content_sha256")
        if isinstance(recorded, bytes):
            recorded = recorded.decode("utf-8", "replace")
        same = all(m for _, _, m in rows) and not changed and recorded == goldens.content_sha256(stored)
        print(f"{spec.key}: {'ok' if same else 'DIFFERS'}")
        for key, text, match in rows:
            if not match:
                print(f"  {key:<36} {text}")
        if changed:
            print(f"  attributes differ: {' '.join(changed)}")
        ok &= same
    return 0 if ok else 1


def main(argv):
    """generate.py list / regenerate / check on model goldens (argv as generate.py got it; wants_models(argv))."""
    names = [a for a in argv[1:] if not a.startswith("-")]
    if argv[0] == "list":
        return cmd_list(names)
    if argv[0] == "regenerate":
        if "--all" in argv:
            print("regenerate: model goldens are named (models/NAME or models), not --all", file=sys.stderr)
            return 2
        return cmd_regenerate(names)
    return cmd_check(names, "--selftest" in argv)
