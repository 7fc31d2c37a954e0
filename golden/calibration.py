"""Calibration sets: random tiny checkpoints with the weight statistics of released models, as model goldens.

  generate.py calibration-set MODEL_TYPE --count N --seed S --out DIR [--tolerance PROFILE]
  generate.py calibration-set --layer FAMILY --count N --seed S --out DIR [--tolerance PROFILE]

writes DIR/<model>-<seed + i>.h5 (a model golden, golden/README.md "Model goldens") and a case beside each
(DIR/<model>-<seed + i>.yaml: every model scenario but the long ones, on the backends and dtypes the caller
selects with mixcheck run's --backend / --dtype). With --layer, each golden is instead the mixer-level golden `from-checkpoint --layer` writes of the first
layer of that family of a checkpoint drawn the same way (mamba2: a Mamba2 model, mamba1: Mamba, gdn:
Qwen3.5, shortconv: LFM2, attention: LFM2, Bamba and Qwen3.5 in turn), its input the layer's real input
activation, with a mixer case. A set is what a tolerance profile is measured on
(mixcheck calibrate) and what it is validated on: two sets of different seeds never share a checkpoint, so
the set a profile was derived from and the set it is judged on stay apart.

The draw (draw()), per checkpoint, from its own seed:
  - the shape: the bundled spec of the model type with hidden size 32 or 48, 2 to 4 layers, the mixers'
    group count 1 or 2 where the model has one, vocab 128 or 256;
  - every weight matrix (projections, embedding, head) N(0, std^2) with std = 0.02 x a scale drawn
    log-uniformly from [0.5, 8] per checkpoint (HF's init_range 0.02 and the larger spread of trained weights);
    norm weights 1 + N(0, 0.1^2) (Qwen3.5's zero-centred ones N(0, 0.1^2)); Mamba's A_log = log U(1, 16), dt
    log-uniform in [1e-3, 1e-1] (dt_bias its inverse softplus), D 1 + N(0, 0.1^2); convolutions U(+-1/sqrt(K));
    every value rounded to bfloat16 (the storage of released checkpoints) — the float32 stored is bf16-exact;
  - the prompt: 2 or 3 rows of 6 to 20 tokens, left-padded to the longest.
"""

import os

import numpy as np

import checkpoint
import configkeys
import mixers
import stacks as S

MODEL_SPECS = {"mamba2": "mamba2", "mamba": "mamba", "lfm2": "lfm2", "bamba": "bamba", "qwen3_5_text": "qwen3_5",
               "granitemoehybrid": "granitemoehybrid", "falcon_mamba": "falcon_mamba", "jamba": "jamba",
               "nemotron_h": "nemotron_h"}
MODEL_SPECS["zamba2"] = "zamba2"
MODEL_SPECS["qwen3_next"] = "qwen3_next"
MODEL_SPECS["qwen3_5_moe_text"] = "qwen3_5_moe"
MODEL_SPECS["falcon_h1"] = "falcon_h1"
MODEL_SPECS["zamba"] = "zamba"
MODEL_SPECS["lfm2_moe"] = "lfm2_moe"
MODEL_SPECS["olmo_hybrid"] = "olmo_hybrid"
MODEL_SPECS["kimi_linear"] = "kimi_linear"
MODEL_SPECS["minimax"] = "minimax"
MODEL_SPECS["inkling_text"] = "inkling"


def _config(model_type, rng):
    spec = S.SPECS["models/" + MODEL_SPECS[model_type]]
    cfg = S.model_config(spec)
    D = int(rng.choice([32, 48]))
    n = int(rng.integers(2, 5))
    cfg.update(hidden_size=D, num_hidden_layers=n, vocab_size=int(rng.choice([128, 256])))
    if model_type == "mamba2":
        cfg.update(num_heads=2 * D // 16, head_dim=16, n_groups=int(rng.choice([1, 2])))
    elif model_type == "mamba":
        cfg.update(intermediate_size=2 * D, time_step_rank=int(rng.choice([2, 4])))
    elif model_type == "falcon_mamba":
        # the inner RMSNorms normalise dt_low over its R entries and B, C over N: over 2 or 4 entries (the tiny
        # shapes of mamba's draw) a near-zero vector is normalised to a direction its rounding decides, which no
        # released model has (FalconMamba-7B: R 256, N 16); so R 8 or 16 and N 16 here
        cfg.update(intermediate_size=2 * D, time_step_rank=int(rng.choice([8, 16])), state_size=16)
    elif model_type == "bamba":
        cfg.update(mamba_n_heads=2 * D // 16, mamba_d_head=16, mamba_n_groups=int(rng.choice([1, 2])),
                   attn_layer_indices=[int(rng.integers(0, n))])
    elif model_type == "lfm2":
        kinds = ["conv", "full_attention"] * 2
        rng.shuffle(kinds)
        cfg["layer_types"] = kinds[:n] if "full_attention" in kinds[:n] else kinds[:n - 1] + ["full_attention"]
    elif model_type == "qwen3_5_text":
        kinds = ["linear_attention"] * (n - 1) + ["full_attention"]
        rng.shuffle(kinds)
        cfg["layer_types"] = kinds
    elif model_type == "granitemoehybrid":
        # the multipliers around released Granite 4.0-H values (embedding 12, residual 0.22, attention 1/hd,
        # logits 6-8), the MoE top-1 or top-2 of 4 or 8 experts, RoPE or NoPE
        kinds = ["linear_attention", "full_attention"] + [str(rng.choice(["linear_attention", "full_attention"]))
                                                          for _ in range(n - 2)]
        rng.shuffle(kinds)
        E = int(rng.choice([4, 8]))
        cfg.update(mamba_n_heads=2 * D // 16, mamba_d_head=16, mamba_n_groups=int(rng.choice([1, 2])),
                   layer_types=kinds, num_local_experts=E, num_experts_per_tok=int(rng.integers(1, 3)),
                   embedding_multiplier=float(rng.choice([1.0, 4.0, 12.0])),
                   residual_multiplier=float(rng.uniform(0.2, 1.0)),
                   attention_multiplier=float(rng.uniform(0.5, 2.0)) / (D // cfg["num_attention_heads"]),
                   logits_scaling=float(rng.uniform(1.0, 8.0)),
                   position_embedding_type=None if rng.uniform() < 0.5 else "rope")
    elif model_type == "jamba":
        # attention and MoE layers by their periods (offsets drawn), every layer kind where n allows; R 8 or 16,
        # N 16 for the inner norms (see falcon_mamba); top-1 or top-2 of 4 or 8 experts
        cfg.update(attn_layer_period=2, attn_layer_offset=int(rng.integers(0, 2)), expert_layer_period=2,
                   expert_layer_offset=int(rng.integers(0, 2)), num_experts=int(rng.choice([4, 8])),
                   num_experts_per_tok=int(rng.integers(1, 3)), mamba_dt_rank=int(rng.choice([8, 16])),
                   mamba_d_state=16)
    elif model_type == "nemotron_h":
        # 3 to 6 blocks of the four kinds (a Mamba2 block always; an MoE block in most), Mamba2 with 1 or 2 groups;
        # the router what Nemotron-H varies: 4 or 8 experts in 1 or 2 groups, topk_group of them kept, top-1 or
        # top-2, norm_topk_prob on or off, routed_scaling_factor U(1, 3) (Nemotron-3 Nano: 2.5), the correction
        # bias drawn as a bias (_weights)
        nb = int(rng.integers(3, 7))
        kinds = ["linear_attention"] + [str(rng.choice(["linear_attention", "full_attention", "mlp", "moe"]))
                                        for _ in range(nb - 1)]
        rng.shuffle(kinds)
        E, G = int(rng.choice([4, 8])), int(rng.choice([1, 2]))
        kg = int(rng.integers(1, G + 1))
        cfg.update(num_hidden_layers=nb, layers_block_type=kinds, mamba_num_heads=2 * D // 16, mamba_head_dim=16,
                   n_groups=int(rng.choice([1, 2])), n_routed_experts=E, n_group=G, topk_group=kg,
                   num_experts_per_tok=int(rng.integers(1, 3)), norm_topk_prob=bool(rng.uniform() < 0.7),
                   routed_scaling_factor=float(rng.uniform(1.0, 3.0)))
    elif model_type == "zamba2":
        # 3 to 6 layers, a hybrid and a Mamba2 layer always; 1 or 2 shared blocks; q/k/v adapters on or off (off: GQA
        # drawn too), adapters of rank 2 to 8, RoPE or NoPE, Mamba2 with 1 or 2 groups
        kinds = ["hybrid", "linear_attention"] + [str(rng.choice(["hybrid", "linear_attention"])) for _ in range(n - 1)]
        rng.shuffle(kinds)
        ad = bool(rng.uniform() < 0.6)
        cfg.update(num_hidden_layers=len(kinds), layers_block_type=kinds, n_mamba_heads=2 * D // 16,
                   mamba_ngroups=int(rng.choice([1, 2])), num_mem_blocks=int(rng.choice([1, 2])),
                   use_shared_attention_adapter=ad, num_key_value_heads=4 if ad else int(rng.choice([2, 4])),
                   adapter_rank=int(rng.choice([2, 4, 8])), use_mem_rope=bool(rng.uniform() < 0.5),
                   intermediate_size=int(rng.choice([48, 64])))
    elif model_type == "qwen3_next":
        # Gated DeltaNet and gated attention layers (one attention layer at least); what Qwen3-Next's MoE varies: 4
        # or 8 experts, top-1 or top-2, norm_topk_prob on or off, decoder_sparse_step 1 or 2, an mlp_only layer or
        # none, so dense and MoE layers both occur in most draws
        kinds = ["linear_attention"] * (n - 1) + ["full_attention"]
        rng.shuffle(kinds)
        step = int(rng.choice([1, 2]))
        mlp_only = [int(rng.integers(0, n))] if rng.uniform() < 0.5 else []
        cfg.update(layer_types=kinds, num_experts=int(rng.choice([4, 8])), num_experts_per_tok=int(rng.integers(1, 3)),
                   norm_topk_prob=bool(rng.uniform() < 0.7), decoder_sparse_step=step, mlp_only_layers=mlp_only)
    elif model_type == "qwen3_5_moe_text":
        # Gated DeltaNet and gated attention layers (one attention layer at least), every layer the sparse block: 4 or
        # 8 experts, top-1 or top-2
        kinds = ["linear_attention"] * (n - 1) + ["full_attention"]
        rng.shuffle(kinds)
        cfg.update(layer_types=kinds, num_experts=int(rng.choice([4, 8])), num_experts_per_tok=int(rng.integers(1, 3)))
    elif model_type == "zamba":
        # 3 to 6 layers, a hybrid and a Mamba layer always; the shared block's attention GQA or not, its head_dim
        # 2D / heads or 8; Mamba1 of one head with dt rank 2 or 4, the in_proj / out_proj biases on or off
        kinds = ["hybrid", "mamba"] + [str(rng.choice(["hybrid", "mamba"])) for _ in range(n - 1)]
        rng.shuffle(kinds)
        cfg.update(num_hidden_layers=len(kinds), layers_block_type=kinds, num_key_value_heads=int(rng.choice([2, 4])),
                   attention_head_dim=None if rng.uniform() < 0.7 else 8, mamba_dt_rank=int(rng.choice([2, 4])),
                   mamba_proj_bias=bool(rng.uniform() < 0.3), intermediate_size=int(rng.choice([48, 64])))
    elif model_type == "lfm2_moe":
        # LFM2's layers (an attention layer always), 0 to n - 1 dense-first layers (a MoE layer always); what
        # Lfm2MoeSparseMoeBlock varies: 4 or 8 experts, top-1 to top-3, use_expert_bias mostly on, norm_topk_prob
        # on or off, routed_scaling_factor 1 or U(1, 3) (LFM2-8B-A1B: 32 experts, top-4, both on, 1.0)
        kinds = ["conv", "full_attention"] * 2
        rng.shuffle(kinds)
        cfg["layer_types"] = kinds[:n] if "full_attention" in kinds[:n] else kinds[:n - 1] + ["full_attention"]
        E = int(rng.choice([4, 8]))
        cfg.update(num_dense_layers=int(rng.integers(0, n)), num_experts=E, num_experts_per_tok=int(rng.integers(1, 4)),
                   use_expert_bias=bool(rng.uniform() < 0.8), norm_topk_prob=bool(rng.uniform() < 0.7),
                   routed_scaling_factor=1.0 if rng.uniform() < 0.5 else float(rng.uniform(1.0, 3.0)),
                   intermediate_size=int(rng.choice([48, 64])))
    if model_type == "olmo_hybrid":
        # 2 to 4 layers, one Gated DeltaNet and one attention layer at least; GQA or not; 2 key heads for 2 or 4 value
        # heads of 8 or 16; beta doubled (linear_allow_neg_eigval, the released setting) in most draws; attention
        # biases on or off; RoPE theta 10000 or 500000
        kinds = ["linear_attention", "full_attention"] + [str(rng.choice(["linear_attention", "full_attention"]))
                                                          for _ in range(n - 2)]
        rng.shuffle(kinds)
        dk = int(rng.choice([8, 16]))
        cfg.update(layer_types=kinds, num_key_value_heads=int(rng.choice([2, 4])), linear_num_key_heads=2,
                   linear_num_value_heads=int(rng.choice([2, 4])), linear_key_head_dim=dk,
                   linear_value_head_dim=int(rng.choice([8, 16])),
                   linear_allow_neg_eigval=bool(rng.uniform() < 0.8), attention_bias=bool(rng.uniform() < 0.3),
                   rope_parameters={"rope_type": "default", "rope_theta": float(rng.choice([1e4, 5e5]))},
                   max_position_embeddings=64)
    elif model_type == "kimi_linear":
        # KDA and MLA layers (one of each at least), 2 or 4 KDA heads of 8 or 16; the MLA latent of rank 8 or 16, a
        # query latent (q_lora_rank 8) or q_proj; dense and sparse MLP layers (first_k_dense_replace 1 or 2 of them
        # dense), 4 or 8 SwiGLU experts in 1 or 2 groups, top-1 or top-2, norm_topk_prob on or off,
        # routed_scaling_factor 1 .. 3 (Kimi-Linear-48B: 2.446), 1 or 2 shared experts
        kinds = ["linear_attention", "full_attention"] + [str(rng.choice(["linear_attention", "full_attention"]))
                                                          for _ in range(n - 2)]
        rng.shuffle(kinds)
        G = int(rng.choice([1, 2]))
        k_dense = int(rng.integers(1, min(2, len(kinds) - 1) + 1))
        cfg.update(num_hidden_layers=len(kinds), layer_types=kinds, mlp_layer_types=None, first_k_dense_replace=k_dense,
                   linear_num_heads=int(rng.choice([2, 4])), linear_head_dim=int(rng.choice([8, 16])),
                   kv_lora_rank=int(rng.choice([8, 16])), q_lora_rank=None if rng.uniform() < 0.6 else 8,
                   num_local_experts=int(rng.choice([4, 8])), n_group=G, topk_group=int(rng.integers(1, G + 1)),
                   num_experts_per_tok=int(rng.integers(1, 3)), norm_topk_prob=bool(rng.uniform() < 0.7),
                   routed_scaling_factor=float(rng.uniform(1.0, 3.0)), n_shared_experts=int(rng.choice([1, 2])))
        if cfg["num_local_experts"] // G < 2:
            cfg["n_group"] = cfg["topk_group"] = 1
    if model_type == "minimax":
        # 2 to 4 layers, one lightning and one softmax attention layer at least; 4 heads of 8 or 16 (head_dim given or
        # D / H), GQA or not; lightning block_size 2 to 8 (a prompt of several blocks) or 256 (one block); 4 or 8
        # experts, top-1 to top-3; each of the six residual factors 1 or drawn around MiniMax-Text-01's (alpha
        # (2 · 80)^(1/4) = 3.56, beta 1): alpha U(1, 4), beta U(0.5, 1.5); RoPE theta 1e4 or 1e7 (MiniMax-Text-01's)
        kinds = ["linear_attention", "full_attention"] + [str(rng.choice(["linear_attention", "full_attention"]))
                                                          for _ in range(n - 2)]
        rng.shuffle(kinds)
        E = int(rng.choice([4, 8]))
        f = lambda lo, hi: 1 if rng.uniform() < 0.3 else float(rng.uniform(lo, hi))   # noqa: E731
        cfg.update(layer_types=kinds, num_attention_heads=4, num_key_value_heads=int(rng.choice([2, 4])),
                   head_dim=None if rng.uniform() < 0.5 else int(rng.choice([8, 16])),
                   block_size=256 if rng.uniform() < 0.3 else int(rng.integers(2, 9)), num_local_experts=E,
                   num_experts_per_tok=int(rng.integers(1, 4)), intermediate_size=int(rng.choice([16, 32])),
                   linear_attn_alpha_factor=f(1.0, 4.0), linear_attn_beta_factor=f(0.5, 1.5),
                   full_attn_alpha_factor=f(1.0, 4.0), full_attn_beta_factor=f(0.5, 1.5),
                   mlp_alpha_factor=f(1.0, 4.0), mlp_beta_factor=f(0.5, 1.5),
                   rope_parameters={"rope_type": "default", "rope_theta": float(rng.choice([1e4, 1e7]))},
                   max_position_embeddings=64)
    if model_type == "inkling_text":
        # 2 to 4 layers, a sliding and a full attention layer at least, a dense and a sparse feed-forward at least;
        # full: 4 heads of 8 or 16 over 2 or 4 kv heads; sliding: 2 or 4 heads of 8 or 16 over 1 or 2 (Inkling's swa
        # heads have their own count and dim); a window of 2 to 8 (below the prompt: the window cuts), the full
        # layers' relative extent 3 to 24, d_rel 2 to 8, the short convs' kernel 2 to 4; 4 or 8 experts, top-1 to 3,
        # 1 or 2 shared sink experts, route_scale U(1, 8) (Inkling's 8), the head's divisor U(1, 24) (its 24)
        kinds = ["hybrid_sliding", "hybrid"] + [str(rng.choice(["hybrid_sliding", "hybrid"])) for _ in range(n - 2)]
        rng.shuffle(kinds)
        mlp = ["dense", "sparse"] + [str(rng.choice(["dense", "sparse"])) for _ in range(n - 2)]
        rng.shuffle(mlp)
        swa_kv = int(rng.choice([1, 2]))
        cfg.update(layer_types=kinds, mlp_layer_types=mlp, num_attention_heads=4,
                   num_key_value_heads=int(rng.choice([2, 4])), head_dim=int(rng.choice([8, 16])),
                   swa_num_attention_heads=swa_kv * int(rng.choice([1, 2])), swa_num_key_value_heads=swa_kv,
                   swa_head_dim=int(rng.choice([8, 16])), sliding_window_size=int(rng.integers(2, 9)),
                   rel_extent=int(rng.integers(3, 25)), d_rel=int(rng.integers(2, 9)),
                   conv_kernel_size=int(rng.integers(2, 5)), n_routed_experts=int(rng.choice([4, 8])),
                   num_experts_per_tok=int(rng.integers(1, 4)), n_shared_experts=int(rng.choice([1, 2])),
                   intermediate_size=int(rng.choice([32, 64])), moe_intermediate_size=int(rng.choice([8, 16])),
                   route_scale=float(rng.uniform(1.0, 8.0)), logits_mup_width_multiplier=float(rng.uniform(1.0, 24.0)),
                   max_position_embeddings=64)
    if model_type == "falcon_h1":
        # the Mamba2 branch of 2D or 4D channels in heads of 16 (mamba_d_ssm their product; Falcon-H1-0.5B: 1.5 D),
        # 1 or 2 groups; every multiplier drawn around the released checkpoints' values (Falcon-H1: embedding 5.7,
        # lm_head 0.04 .. 0.4, key 0.39, attention out 0.94, SSM in 1.25, out 0.24, the in_proj parts 0.18 .. 0.5,
        # MLP gate 0.88, down 0.59)
        H = 2 * D // 16 * int(rng.choice([1, 2]))
        u = lambda lo, hi: float(rng.uniform(lo, hi))   # noqa: E731
        cfg.update(mamba_n_heads=H, mamba_d_head=16, mamba_d_ssm=16 * H, mamba_n_groups=int(rng.choice([1, 2])),
                   embedding_multiplier=u(1.0, 8.0), lm_head_multiplier=u(0.03, 1.0),
                   mlp_multipliers=[u(0.5, 1.5), u(0.3, 1.5)], key_multiplier=u(0.3, 1.5),
                   attention_in_multiplier=u(0.5, 1.5), attention_out_multiplier=u(0.5, 1.5),
                   ssm_multipliers=[u(0.15, 1.0) for _ in range(5)], ssm_in_multiplier=u(0.5, 1.5),
                   ssm_out_multiplier=u(0.2, 1.2), max_position_embeddings=64)
    if model_type in ("lfm2", "bamba", "qwen3_5_text", "granitemoehybrid", "jamba", "nemotron_h", "zamba2", "qwen3_next",
                      "qwen3_5_moe_text", "zamba", "lfm2_moe", "kimi_linear"):
        cfg["max_position_embeddings"] = 64   # the KV cache: prompt and greedy steps fit
    return cfg


def _weights(cfg, rng):
    """The spec's weights by name and shape, redrawn with released-model statistics (module docstring)."""
    w = S.init_weights(configkeys.normalise(cfg), np.random.default_rng(int(rng.integers(1 << 31))))
    std = 0.02 * float(np.exp(rng.uniform(np.log(0.5), np.log(8.0))))
    zero_centred = S.zero_centred(cfg)
    out = {}
    for k, v in w.items():
        leaf = k.rsplit(".", 2)[-2] if k.endswith(".weight") else k.rsplit(".", 1)[-1]
        if k.endswith("A_log"):
            x = np.log(rng.uniform(1.0, 16.0, v.shape))
        elif k.endswith("global_scale"):   # Inkling's MLP and router scales: around 1
            x = 1.0 + 0.25 * rng.standard_normal(v.shape)
        elif k.endswith("dt_bias"):
            dt = np.exp(rng.uniform(np.log(1e-3), np.log(1e-1), v.shape))
            x = dt + np.log(-np.expm1(-dt))
        elif k.endswith(".D") or k.endswith("mixer.D") or leaf == "D":
            x = 1.0 + 0.1 * rng.standard_normal(v.shape)
        elif "conv" in k and v.ndim == 3:
            kk = v.shape[-1]
            x = rng.uniform(-1.0, 1.0, v.shape) / np.sqrt(kk)
        elif v.ndim == 1 and ("norm" in k or "layernorm" in k):
            x = (0.0 if zero_centred else 1.0) + 0.1 * rng.standard_normal(v.shape)
        elif v.ndim == 1:
            x = 0.1 * rng.standard_normal(v.shape)   # biases, small
        else:
            x = std * rng.standard_normal(v.shape)
        out[k] = mixers.to_bf16(x)
    if cfg["model_type"] == "zamba2":   # a shared block's tied copies one block again, the head the embedding
        return S.zamba.retie(configkeys.normalise(cfg), out)
    if cfg["model_type"] == "zamba":   # likewise, the one shared block
        return S.zamba.v1_retie(configkeys.normalise(cfg), out)
    nm = S.names(cfg)
    if cfg["tie_word_embeddings"]:
        out[nm["head"]] = out[nm["embed"]].copy()
    return out


def _prompt(cfg, rng):
    B = int(rng.integers(2, 4))
    lens = rng.integers(6, 21, B)
    lens[0] = lens.max()          # one row without padding
    L = int(lens.max())
    ids = np.zeros((B, L), np.int64)
    mask = np.zeros((B, L), np.int8)
    for b, n in enumerate(lens):
        ids[b, L - n:] = rng.integers(0, cfg["vocab_size"], n)
        mask[b, L - n:] = 1
    return ids, mask


def draw(model_type, seed):
    """(ModelSpec, config, weights, ids, mask) of checkpoint `seed` of a model type's calibration set."""
    rng = np.random.default_rng([0x6d63, seed, list(MODEL_SPECS).index(model_type)])
    cfg = _config(model_type, rng)
    weights = _weights(cfg, rng)
    ids, mask = _prompt(cfg, rng)
    B, L = ids.shape
    spec = S.ModelSpec(name=f"{MODEL_SPECS[model_type]}-{seed}", model_type=model_type,
                       description=f"calibration checkpoint {seed} of {model_type}", config=cfg, batch=B, length=L,
                       left_pad=tuple(int(L - m.sum()) for m in mask), greedy=4, seed=seed, positions=(L // 2, L))
    return spec, configkeys.normalise(cfg), weights, ids, mask


def case_text(spec, golden, tolerance):
    L = spec.length
    p = max(2, L // 2)
    return (f"id: calib-{spec.name}\n"
            f"why: \"calibration checkpoint {spec.seed} of {spec.model_type} (golden/calibration.py)\"\n"
            f"model: {spec.model_type}\ngolden: {golden}\ntolerance: {tolerance}\n"
            "backends: [reference, cpu]\ndtypes: [f32, bf16, f16]\nscenarios:\n"
            "  prefill: {}\n"
            f"  decode: {{prefill: {p}}}\n"
            f"  chunked: {{splits: [[1, {p}], [{max(1, L - 3)}]]}}\n"
            f"  left_padded_batch: {{prefill: {p}, decode: {min(2, L - p - 1)}}}\n"
            "  batch_invariance: {}\n")


def write_set(model_type, count, seed, out, tolerance):
    os.makedirs(out, exist_ok=True)
    written = []
    for i in range(count):
        spec, cfg, weights, ids, mask = draw(model_type, seed + i)
        g = S.assemble(spec, cfg, weights, ids, mask)
        h5 = os.path.join(out, spec.name + ".h5")
        S.write_atomic(S.identity_attrs(spec), g, h5)
        with open(os.path.join(out, spec.name + ".yaml"), "w") as f:
            f.write(case_text(spec, os.path.basename(h5), os.path.relpath(os.path.abspath(tolerance), out)))
        written.append(h5)
    return written


LAYER_MODELS = {"mamba2": ("mamba2",), "mamba1": ("mamba",), "gdn": ("qwen3_5_text",), "shortconv": ("lfm2",),
                "attention": ("lfm2", "bamba", "qwen3_5_text")}
KIND = {"mamba2": "mamba2", "mamba1": "mamba", "gdn": "gdn", "shortconv": "shortconv", "attention": "attention"}


def layer_case_text(family, name, seed, golden, tolerance, L):
    p = max(2, L // 2)
    return (f"id: calib-{name}\nwhy: \"calibration layer {seed} of {family} (golden/calibration.py)\"\n"
            f"family: {family}\ngolden: {golden}\ntolerance: {tolerance}\n"
            "backends: [reference, cpu]\ndtypes: [f32, bf16, f16]\nscenarios:\n"
            "  prefill: {}\n"
            f"  decode: {{prefill: {p}}}\n"
            f"  chunked: {{splits: [[1, {p}], [{max(1, L - 3)}]]}}\n"
            "  batch_invariance: {}\n")


def write_layer_set(family, count, seed, out, tolerance):
    """The mixer-level goldens of --layer FAMILY (module docstring), with their cases."""
    os.makedirs(out, exist_ok=True)
    written = []
    models = LAYER_MODELS[family]
    k = seed
    while len(written) < count:
        mt = models[k % len(models)]
        spec, cfg, weights, ids, mask = draw(mt, k)
        layers = [l for l in range(cfg["num_hidden_layers"]) if S.layer_kind(cfg, l) == KIND[family]]
        k += 1
        if not layers:   # a draw without a layer of the family (an LFM2 of attention layers only)
            continue
        layer, i = layers[0], k - 1 - seed
        name = f"{family}-{seed + i}"
        h5 = os.path.join(out, name + ".h5")
        checkpoint.mixer_golden(cfg, weights, ids, mask, layer, family, h5, name)
        with open(os.path.join(out, name + ".yaml"), "w") as f:
            f.write(layer_case_text(family, name, seed + i, os.path.basename(h5),
                                    os.path.relpath(os.path.abspath(tolerance), out), ids.shape[1]))
        written.append(h5)
    return written
