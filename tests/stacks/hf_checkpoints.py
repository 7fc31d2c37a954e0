#!/usr/bin/env python3
"""The transformers side of test_hf_checkpoints.py: runs under a Python with torch and transformers.

Usage: hf_checkpoints.py OUT_DIR PROMPT_JSON
For each variant below: the upstream config class with the variant's keys, a model drawn with a fixed
seed, written with save_pretrained (safetensors; sharded where the variant says so; in bfloat16 where it
says so), read back, and run in float64 with upstream's float32 casts promoted to float64 (as
golden/upstream.py does) on the prompt (left-padded rows, attention_mask, position_ids over real tokens);
its logits go to OUT_DIR/NAME.npz beside the checkpoint OUT_DIR/NAME/. Exit 77 without torch/transformers.
"""
import json
import os
import sys

try:
    import numpy as np
    import torch
    import transformers
except ImportError as e:
    print(f"SKIP: {e}")
    sys.exit(77)

TINY = {
    "mamba2": dict(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_heads=4, head_dim=16, expand=2,
                   state_size=8, n_groups=1, conv_kernel=4, chunk_size=8),
    "mamba": dict(vocab_size=64, hidden_size=32, num_hidden_layers=2, intermediate_size=64, state_size=8,
                  conv_kernel=4, time_step_rank=4),
    "lfm2": dict(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                 intermediate_size=48, block_auto_adjust_ff_dim=False, conv_L_cache=3, max_position_embeddings=64,
                 layer_types=["conv", "full_attention"]),
    "bamba": dict(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  intermediate_size=48, mamba_n_heads=4, mamba_d_head=16, mamba_d_state=8, mamba_chunk_size=8,
                  mamba_n_groups=1, attn_layer_indices=[1], max_position_embeddings=64),
    "qwen3_5_text": dict(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, head_dim=16, intermediate_size=48, linear_num_key_heads=2,
                         linear_num_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=8,
                         max_position_embeddings=64, layer_types=["linear_attention", "full_attention"]),
    "granitemoehybrid": dict(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                             num_key_value_heads=2, mamba_n_heads=4, mamba_d_head=16, mamba_d_state=8,
                             mamba_chunk_size=8, shared_intermediate_size=32, intermediate_size=24,
                             num_local_experts=4, num_experts_per_tok=2, embedding_multiplier=6.0,
                             residual_multiplier=0.4, attention_multiplier=0.2, logits_scaling=3.0,
                             max_position_embeddings=64, layer_types=["mamba", "attention"]),
    "falcon_mamba": dict(vocab_size=64, hidden_size=32, num_hidden_layers=2, state_size=8, conv_kernel=4,
                         time_step_rank=4, mixer_rms_eps=1e-5),
    "jamba": dict(vocab_size=64, hidden_size=32, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                  intermediate_size=24, attn_layer_period=2, attn_layer_offset=1, expert_layer_period=2,
                  expert_layer_offset=0, num_experts=4, num_experts_per_tok=2, mamba_d_state=8, mamba_dt_rank=4,
                  max_position_embeddings=64),
    "nemotron_h": dict(vocab_size=64, hidden_size=32, mamba_num_heads=4, mamba_head_dim=16, ssm_state_size=8,
                       n_groups=2, chunk_size=8, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                       intermediate_size=24, n_routed_experts=8, n_group=2, topk_group=1, num_experts_per_tok=2,
                       moe_intermediate_size=16, moe_shared_expert_intermediate_size=24, routed_scaling_factor=2.0,
                       max_position_embeddings=64,
                       layers_block_type=["linear_attention", "moe", "full_attention", "mlp", "linear_attention",
                                          "moe"]),
}
TINY["qwen3_next"] = dict(vocab_size=64, hidden_size=32, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                          head_dim=16, intermediate_size=40, linear_num_key_heads=2, linear_num_value_heads=4,
                          linear_key_head_dim=8, linear_value_head_dim=8, num_experts=8, num_experts_per_tok=2,
                          moe_intermediate_size=16, shared_expert_intermediate_size=24, max_position_embeddings=64,
                          layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention"],
                          mlp_only_layers=[2])
TINY["qwen3_5_moe_text"] = dict(vocab_size=64, hidden_size=32, num_hidden_layers=4, num_attention_heads=4,
                                num_key_value_heads=2, head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4,
                                linear_key_head_dim=8, linear_value_head_dim=8, num_experts=8, num_experts_per_tok=2,
                                moe_intermediate_size=16, shared_expert_intermediate_size=24,
                                max_position_embeddings=64)
CONFIGS = {"mamba2": "Mamba2Config", "mamba": "MambaConfig", "lfm2": "Lfm2Config", "bamba": "BambaConfig",
           "qwen3_5_text": "Qwen3_5TextConfig", "granitemoehybrid": "GraniteMoeHybridConfig",
           "falcon_mamba": "FalconMambaConfig", "jamba": "JambaConfig", "nemotron_h": "NemotronHConfig"}
CONFIGS["qwen3_next"] = "Qwen3NextConfig"
CONFIGS["qwen3_5_moe_text"] = "Qwen3_5MoeTextConfig"
MODELS = {"mamba2": "Mamba2ForCausalLM", "mamba": "MambaForCausalLM", "lfm2": "Lfm2ForCausalLM",
          "bamba": "BambaForCausalLM", "qwen3_5_text": "Qwen3_5ForCausalLM",
          "granitemoehybrid": "GraniteMoeHybridForCausalLM", "falcon_mamba": "FalconMambaForCausalLM",
          "jamba": "JambaForCausalLM", "nemotron_h": "NemotronHForCausalLM"}
MODELS["qwen3_next"] = "Qwen3NextForCausalLM"
MODELS["qwen3_5_moe_text"] = "Qwen3_5MoeForCausalLM"

# name: (model type, keys over TINY, save options)
VARIANTS = {
    "mamba2-default-tsl": ("mamba2", {}, {}),
    "mamba2-groups2": ("mamba2", {"n_groups": 2}, {}),
    "mamba2-tied": ("mamba2", {"tie_word_embeddings": True}, {}),
    "mamba2-sharded": ("mamba2", {}, {"max_shard_size": "20KB"}),
    "mamba2-bf16": ("mamba2", {}, {"bf16": True}),
    "mamba-tied": ("mamba", {}, {}),
    "mamba-untied": ("mamba", {"tie_word_embeddings": False}, {}),
    "lfm2-rope500": ("lfm2", {"rope_parameters": {"rope_type": "default", "rope_theta": 500.0}}, {}),
    "bamba-groups2": ("bamba", {"mamba_n_groups": 2}, {}),
    "bamba-rope500": ("bamba", {"rope_parameters": {"rope_type": "default", "rope_theta": 500.0}}, {}),
    "bamba-tsl": ("bamba", {"time_step_limit": [0.0, 0.05]}, {}),
    "qwen3_5-rope500": ("qwen3_5_text", {"rope_parameters": {"rope_type": "default", "rope_theta": 500.0,
                                                             "partial_rotary_factor": 0.25}}, {}),
    # NoPE (the default), the older layer_types names "mamba" / "attention", every multiplier; then RoPE
    "granitemoehybrid-nope": ("granitemoehybrid", {}, {}),
    # tied by default; mixer_rms_eps 1e-5 (not the default 1e-6) so the key is seen read
    "falcon_mamba-tied": ("falcon_mamba", {}, {}),
    # the experts saved one module each (conversion mapping "jamba"), a MoE and a dense layer of each kind
    "jamba-moe": ("jamba", {}, {}),
    # every block kind, the grouped router (2 groups, 1 kept) with a drawn correction bias, routed_scaling_factor 2,
    # Mamba2 with 2 groups; then the older pattern spelling, the mamba_* names and norm_topk_prob off
    "nemotron_h-moe": ("nemotron_h", {}, {}),
    "nemotron_h-pattern": ("nemotron_h", {"layers_block_type": None, "hybrid_override_pattern": "M*E-ME",
                                          "mamba_n_groups": 1, "norm_topk_prob": False, "time_step_min": 0.02}, {}),
    # the interleaved GDN projections, gated attention, the MoE with its gated shared expert at 0, 1, 3 and the dense
    # MLP at the mlp_only layer 2; then no layer_types (full_attention_interval 2), decoder_sparse_step 2,
    # norm_topk_prob off, partial rotary 0.5
    "qwen3_next-moe": ("qwen3_next", {}, {}),
    "qwen3_next-step": ("qwen3_next", {"layer_types": None, "full_attention_interval": 2, "decoder_sparse_step": 2,
                                       "mlp_only_layers": None, "norm_topk_prob": False,
                                       "partial_rotary_factor": 0.5}, {}),
    # Qwen3.5-MoE's text model: Qwen3.5's GDN projections, the sparse block on every layer, full_attention_interval 2
    "qwen3_5_moe-moe": ("qwen3_5_moe_text", {"full_attention_interval": 2}, {}),
    "granitemoehybrid-rope": ("granitemoehybrid", {"position_embedding_type": "rope",
                                                   "rope_parameters": {"rope_type": "default", "rope_theta": 500.0}},
                              {}),
}

# Zamba2: two alternating tied blocks with q/k/v adapters and RoPE, 2 groups; then one block, no attention
# adapters, GQA, NoPE, an untied head (5.24 then ties no block: docs/findings.md 36), time_step_min 0.02, the older
# layer name
TINY["zamba2"] = dict(vocab_size=64, hidden_size=32, num_hidden_layers=4,
                      layers_block_type=["linear_attention", "hybrid", "hybrid", "linear_attention"], n_mamba_heads=4,
                      mamba_d_state=8, mamba_ngroups=2, chunk_size=8, num_attention_heads=4, num_key_value_heads=4,
                      intermediate_size=24, num_mem_blocks=2, adapter_rank=4, use_shared_attention_adapter=True,
                      use_mem_rope=True, max_position_embeddings=64)
CONFIGS["zamba2"] = "Zamba2Config"
MODELS["zamba2"] = "Zamba2ForCausalLM"
VARIANTS["zamba2-two-blocks"] = ("zamba2", {}, {})
VARIANTS["zamba2-one-block-untied"] = ("zamba2", {"num_mem_blocks": 1, "use_shared_attention_adapter": False,
                                                  "num_key_value_heads": 2, "use_mem_rope": False,
                                                  "tie_word_embeddings": False, "time_step_min": 0.02,
                                                  "layers_block_type": ["mamba", "hybrid", "mamba", "hybrid"]}, {})

# FalconH1: every multiplier away from 1, the Mamba2 branch with 2 groups and mamba_d_ssm of its own; then a tied
# head, the attention's biases, mamba_d_ssm null (mamba_expand x hidden) and RoPE theta 500. (With the Mamba2
# projections' biases, mamba_proj_bias / projectors_bias, upstream's left-padded row is not the row alone: the
# bias of the padding's in_proj reaches the first real tokens' convolution, docs/findings.md 39; the golden
# follows the row alone, so that variant is not compared here.)
TINY["falcon_h1"] = dict(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, intermediate_size=40, max_position_embeddings=64, mamba_d_ssm=48,
                         mamba_n_heads=4, mamba_d_head=12, mamba_n_groups=2, mamba_d_state=8, mamba_chunk_size=8,
                         mamba_rms_norm=True, mamba_norm_before_gate=False, embedding_multiplier=2.0,
                         lm_head_multiplier=0.4, mlp_multipliers=[0.9, 0.6], key_multiplier=0.7,
                         attention_in_multiplier=1.1, attention_out_multiplier=0.8,
                         ssm_multipliers=[0.5, 0.9, 1.2, 0.7, 0.6], ssm_in_multiplier=1.3, ssm_out_multiplier=0.5)
CONFIGS["falcon_h1"] = "FalconH1Config"
MODELS["falcon_h1"] = "FalconH1ForCausalLM"
VARIANTS["falcon_h1-mup"] = ("falcon_h1", {}, {})
VARIANTS["falcon_h1-tied-bias"] = ("falcon_h1", {"tie_word_embeddings": True, "attention_bias": True,
                                                 "mamba_d_ssm": None, "mamba_n_heads": 4, "mamba_d_head": "auto",
                                                 "rope_parameters": {"rope_type": "default", "rope_theta": 500.0}},
                                   {})
# FalconH1Config's defaults for the Mamba2 branch's norm, mamba_rms_norm false (no norm: no mamba.norm.weight in the
# checkpoint, y · silu(gate)) with mamba_norm_before_gate true; and the norm with the gate after it
VARIANTS["falcon_h1-norm-defaults"] = ("falcon_h1", {"mamba_rms_norm": False, "mamba_norm_before_gate": True}, {})
VARIANTS["falcon_h1-norm-before-gate"] = ("falcon_h1", {"mamba_rms_norm": True, "mamba_norm_before_gate": True}, {})


# Zamba: one head of Mamba1 (the only n_mamba_heads computed), the tied shared block applied twice, GQA; then the
# default layer pattern of attn_layer_period 2 / offset 0 (mamba, mamba, hybrid, hybrid, mamba, hybrid), an untied
# head, attention_head_dim 8, no conv bias. Not mamba_proj_bias: upstream zeroes the pads before in_proj, so a left-
# padded row's conv window holds in_proj's bias at its pads (docs/findings.md 41)
TINY["zamba"] = dict(vocab_size=64, hidden_size=32, num_hidden_layers=5,
                     layers_block_type=["mamba", "hybrid", "mamba", "hybrid", "mamba"], n_mamba_heads=1,
                     mamba_d_state=8, mamba_dt_rank=4, num_attention_heads=4, num_key_value_heads=2,
                     intermediate_size=24, max_position_embeddings=64)
CONFIGS["zamba"] = "ZambaConfig"
MODELS["zamba"] = "ZambaForCausalLM"
VARIANTS["zamba-tied"] = ("zamba", {}, {})
VARIANTS["zamba-pattern-untied"] = ("zamba", {"layers_block_type": None, "num_hidden_layers": 6,
                                              "attn_layer_period": 2, "attn_layer_offset": 0,
                                              "tie_word_embeddings": False, "attention_head_dim": 8,
                                              "mamba_conv_bias": False}, {})

# LFM2-MoE: ShortConv and attention, the dense MLP at the 2 first layers, the sigmoid-routed MoE with a drawn
# expert_bias (a float32 buffer) at the others, routed_scaling_factor 1.5; then one dense layer, no expert bias,
# norm_topk_prob off, an untied head and RoPE theta 500
TINY["lfm2_moe"] = dict(vocab_size=64, hidden_size=32, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                        intermediate_size=40, moe_intermediate_size=16, num_experts=8, num_experts_per_tok=2,
                        num_dense_layers=2, routed_scaling_factor=1.5, conv_L_cache=3, max_position_embeddings=64,
                        layer_types=["conv", "full_attention", "conv", "full_attention"])
CONFIGS["lfm2_moe"] = "Lfm2MoeConfig"
MODELS["lfm2_moe"] = "Lfm2MoeForCausalLM"
VARIANTS["lfm2_moe-bias"] = ("lfm2_moe", {}, {})
VARIANTS["lfm2_moe-one-dense-untied"] = ("lfm2_moe", {"num_dense_layers": 1, "use_expert_bias": False,
                                                      "norm_topk_prob": False, "tie_word_embeddings": False,
                                                      "rope_parameters": {"rope_type": "default", "rope_theta": 500.0}},
                                         {})


# OLMo-Hybrid: GDN (2 key heads for 4 value heads, beta doubled) and post-norm attention (GQA), RoPE; then the default
# layer pattern (full attention at i % 4 == 3: layers 3 and 5 of 6 the last), the Config's linear_* defaults, beta not
# doubled, a tied head, attention biases
TINY["olmo_hybrid"] = dict(vocab_size=64, hidden_size=32, num_hidden_layers=4, num_attention_heads=4,
                           num_key_value_heads=2, intermediate_size=40, linear_num_key_heads=2, linear_num_value_heads=4,
                           linear_key_head_dim=8, linear_value_head_dim=8, max_position_embeddings=64,
                           layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention"],
                           pad_token_id=0, eos_token_id=1)
CONFIGS["olmo_hybrid"] = "OlmoHybridConfig"
MODELS["olmo_hybrid"] = "OlmoHybridForCausalLM"
VARIANTS["olmo_hybrid-gqa"] = ("olmo_hybrid", {}, {})
VARIANTS["olmo_hybrid-defaults-tied"] = ("olmo_hybrid", {"layer_types": None, "num_hidden_layers": 5,
                                                         "linear_num_key_heads": None, "linear_num_value_heads": None,
                                                         "linear_key_head_dim": None, "linear_value_head_dim": None,
                                                         "linear_allow_neg_eigval": False, "tie_word_embeddings": True,
                                                         "attention_bias": True, "rope_parameters":
                                                         {"rope_type": "default", "rope_theta": 500.0}}, {})
# Kimi-Linear: KDA and NoPE MLA layers, the dense-first MLP, the sigmoid-grouped MoE with its shared experts. One with a
# query latent (q_lora_rank), the attention's biases, 2 groups of 4 experts and 2 shared experts; one as a released
# config writes its layers (linear_attn_config's 1-indexed lists, first_k_dense_replace 2), one group, top-1 expert,
# norm_topk_prob off
TINY["kimi_linear"] = dict(vocab_size=64, hidden_size=32, num_hidden_layers=4, intermediate_size=40,
                           moe_intermediate_size=16, num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=16,
                           qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=8, max_position_embeddings=64,
                           layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention"],
                           mlp_layer_types=["dense", "sparse", "sparse", "sparse"], num_local_experts=8,
                           num_experts_per_tok=2, n_group=2, topk_group=1, linear_num_heads=2, linear_head_dim=8,
                           linear_conv_kernel_dim=4, pad_token_id=0, bos_token_id=1, eos_token_id=2)
CONFIGS["kimi_linear"] = "KimiLinearConfig"
MODELS["kimi_linear"] = "KimiLinearForCausalLM"
VARIANTS["kimi_linear-qlora"] = ("kimi_linear", {"q_lora_rank": 8, "attention_bias": True, "n_shared_experts": 2}, {})
VARIANTS["kimi_linear-released"] = ("kimi_linear", {"layer_types": None, "mlp_layer_types": None,
                                                    "linear_attn_config": {"full_attn_layers": [2, 4],
                                                                           "kda_layers": [1, 3], "head_dim": 8,
                                                                           "num_heads": 2,
                                                                           "short_conv_kernel_size": 4},
                                                    "first_k_dense_replace": 2, "n_group": 1, "topk_group": 1,
                                                    "num_experts_per_tok": 1, "norm_topk_prob": False}, {})


# MiniMax: lightning (block_size 2: the prompt of 7 in several blocks, the last one partial) and softmax attention
# (GQA), the MoE of 4 experts, the six residual factors distinct; then the default pattern (full attention at even i),
# head_dim 16 given, top-1 of 4, a tied head, rope_theta 500, every factor 1
TINY["minimax"] = dict(vocab_size=64, hidden_size=32, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                       intermediate_size=16, num_local_experts=4, num_experts_per_tok=2, block_size=2,
                       max_position_embeddings=64,
                       layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention"],
                       linear_attn_alpha_factor=1.75, linear_attn_beta_factor=0.625, full_attn_alpha_factor=1.375,
                       full_attn_beta_factor=0.875, mlp_alpha_factor=1.5, mlp_beta_factor=0.75)
CONFIGS["minimax"] = "MiniMaxConfig"
MODELS["minimax"] = "MiniMaxForCausalLM"
VARIANTS["minimax-scaled"] = ("minimax", {}, {})
VARIANTS["minimax-defaults-tied"] = ("minimax", {"layer_types": None, "num_hidden_layers": 3, "head_dim": 16,
                                                 "num_experts_per_tok": 1, "tie_word_embeddings": True,
                                                 "rope_parameters": {"rope_type": "default", "rope_theta": 500.0},
                                                 "linear_attn_alpha_factor": 1, "linear_attn_beta_factor": 1,
                                                 "full_attn_alpha_factor": 1, "full_attn_beta_factor": 1,
                                                 "mlp_alpha_factor": 1, "mlp_beta_factor": 1, "block_size": 256}, {})

# Inkling: sliding (2 heads of 16 over 1, a window of 3) and full attention (GQA 4/2 of 8, relative extent 5), short
# convs of 3, d_rel 4, the dense MLP and the MoE of 4 experts top-2 with 2 shared sink experts, the head's divisor 3;
# then the defaults' patterns: local_layer_ids [0, 1] (layer 2 full), dense_mlp_idx 1 (layer 0 dense), one shared
# expert, top-1, conv kernel 2, saved in bfloat16 (save_pretrained writes the resolved layer_types and mlp_layer_types)
TINY["inkling_text"] = dict(vocab_size=64, hidden_size=32, num_hidden_layers=4, num_attention_heads=4,
                            num_key_value_heads=2, head_dim=8, swa_num_attention_heads=2, swa_num_key_value_heads=1,
                            swa_head_dim=16, sliding_window_size=3, d_rel=4, rel_extent=5, conv_kernel_size=3,
                            max_position_embeddings=64, intermediate_size=24, moe_intermediate_size=8,
                            n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=2, route_scale=2.5,
                            logits_mup_width_multiplier=3.0,
                            layer_types=["hybrid_sliding", "hybrid", "hybrid_sliding", "hybrid"],
                            mlp_layer_types=["dense", "sparse", "dense", "sparse"])
CONFIGS["inkling_text"] = "InklingTextConfig"
MODELS["inkling_text"] = "InklingForCausalLM"
VARIANTS["inkling-mixed"] = ("inkling_text", {}, {})
VARIANTS["inkling-defaults-bf16"] = ("inkling_text", {"layer_types": None, "mlp_layer_types": None, "num_hidden_layers": 3,
                                                     "local_layer_ids": [0, 1], "dense_mlp_idx": 1,
                                                     "n_shared_experts": 1, "num_experts_per_tok": 1,
                                                     "conv_kernel_size": 2}, {"bf16": True})

LIGHTNING_BUFFERS = ("self_attn.slope_rate", "self_attn.query_decay", "self_attn.key_decay", "self_attn.diagonal_decay")


def promoted(on):
    """Upstream's float32 casts read as float64 inside a float64 model (golden/upstream.py)."""
    f32 = promoted.saved
    torch.float32 = torch.float = torch.float64 if on else f32[0]
    torch.Tensor.float = torch.Tensor.double if on else f32[1]
    torch.set_default_dtype(torch.float64 if on else f32[0])


promoted.saved = (torch.float32, torch.Tensor.float)


def main():
    out, prompt = sys.argv[1], json.loads(sys.argv[2])
    rows = [[int(t) for t in p.split()] for p in prompt]
    L = max(len(r) for r in rows)
    ids = np.zeros((len(rows), L), np.int64)
    mask = np.zeros((len(rows), L), np.int64)
    for b, r in enumerate(rows):
        ids[b, L - len(r):] = r
        mask[b, L - len(r):] = 1
    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    for name, (mt, keys, save) in VARIANTS.items():
        cfg = getattr(transformers, CONFIGS[mt])(**{**TINY[mt], **keys})
        torch.manual_seed(7)
        model = getattr(transformers, MODELS[mt])(cfg).eval()
        with torch.no_grad():   # draw every parameter, so that norms and biases are not all ones / zeros
            for p in model.parameters():
                p.add_(0.05 * torch.randn_like(p))
            for n, b in model.named_buffers():   # Nemotron-H's router correction bias is a buffer
                if n.endswith(("e_score_correction_bias", "feed_forward.expert_bias")):   # (and LFM2-MoE's)
                    b.add_(0.1 * torch.randn_like(b))
        folder = os.path.join(out, name)
        if save.get("bf16"):
            model = model.to(torch.bfloat16)
        model.save_pretrained(folder, max_shard_size=save.get("max_shard_size", "50GB"))
        # read back as from_pretrained reads it (the index of a sharded checkpoint, tied heads, bfloat16), then
        # into a model built with the casts promoted: its rotary frequencies are computed at construction
        # a mixture of experts in float64 needs upstream's eager expert loop: the default grouped_mm kernel
        # takes no float64 (docs/findings.md 16)
        extra = {"experts_implementation": "eager"} if getattr(cfg, "num_local_experts", 0) or \
            getattr(cfg, "num_experts", 0) else {}
        loaded = getattr(transformers, MODELS[mt]).from_pretrained(folder, dtype=torch.float64, **extra)
        state = {k: v.detach().clone() for k, v in loaded.state_dict().items()}
        try:
            promoted(True)
            back = getattr(transformers, MODELS[mt])(loaded.config).to(torch.float64).eval()
            if mt == "minimax":
                # MiniMaxLightningAttention's decay buffers are functions of the config, which save_pretrained stores
                # in the model's dtype and from_pretrained loads over the config's (float32 here: 1.0e-9 / 2.0e-9 of
                # max |logit| off the float64 slopes; bf16 ones off by up to 2^-9; docs/findings.md 52): the float64
                # model keeps its own, computed from the config as the golden's are, and loads every parameter
                own = back.state_dict()
                for k in [k for k in state if k.endswith(LIGHTNING_BUFFERS)]:
                    state[k] = own[k]
            back.load_state_dict(state, strict=True)
            with torch.no_grad():
                t_ids, t_mask = torch.from_numpy(ids), torch.from_numpy(mask)
                pos = (t_mask.cumsum(-1) - 1).clamp(min=0)
                logits = back(input_ids=t_ids, attention_mask=t_mask, position_ids=pos, use_cache=False).logits
        finally:
            promoted(False)
        np.savez(os.path.join(out, name + ".npz"), logits=logits.double().numpy(), mask=mask, ids=ids)
        files = sorted(os.listdir(folder))
        print(f"  {name}: {mt}, wrote {', '.join(files)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
