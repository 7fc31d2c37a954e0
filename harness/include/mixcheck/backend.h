/*
 * mixcheck/backend.h — the one interface every mixer implementation is reached through.
 *
 * The reference mixers, the optimized CPU kernels, CUDA kernels, deliberately broken mutants and
 * third-party ports loaded with dlopen all fill in a `struct mc_backend_ops` and are driven by the
 * harness through it and nothing else (docs/scenarios.md §1). The header is C11, has no dependency beyond
 * <stdint.h>/<stddef.h>, and is the plugin ABI.
 *
 * Version rules (how the ABI grows without breaking built plugins):
 *   - MIXCHECK_ABI_VERSION changes only on an incompatible change: a member of an existing struct
 *     moved, removed or retyped, an enum value renumbered. The registry refuses an ops struct (and a
 *     plugin) built for another version.
 *   - Everything else is growth at the end: new optional entries are appended to struct
 *     mc_backend_ops (never inserted), each with a capability bit where the harness must know
 *     before calling it. A backend sets struct_size = sizeof(struct mc_backend_ops) as its header
 *     defines it. The registry accepts any struct_size from MC_BACKEND_OPS_SIZE_V1 (the original
 *     struct) upward: members beyond an older backend's struct_size are treated as absent (NULL),
 *     and members of a newer backend that this mixcheck does not know are ignored.
 *   - The structs handed *to* a backend (mc_model_desc, mc_forward_args, mc_packed_args,
 *     mc_stack_desc, mc_stack_args, mc_stack_packed_args) never grow;
 *     a new argument comes with a new entry point.
 *   - An optional entry that is NULL means "not implemented": scenarios that need it report the
 *     check as `unsupported`, never as passed.
 *
 * Memory: every pointer crossing this interface is host memory. Inputs (weights, x, mask, packed
 * arguments, import buffers) belong to the harness, are valid only during the call and must not be
 * written; the backend copies what it keeps (model_create copies the weights). Outputs (y, export
 * buffers) belong to the harness and are written whole during the call. Models and caches belong to
 * the backend, from create/alloc to destroy/free. A device backend (CUDA, a torch port) moves data to
 * and from its device inside each call.
 *
 * Dimension letters (used in every shape comment): B batch, L tokens in this forward, D hidden size,
 * K conv width, C conv channels (conv_dim), H heads, P head dim, N state size, G groups; attention:
 * Hq query heads, Hkv key/value heads, hd head dim, Lmax cache length (struct mc_attention_config).
 *
 * Forward contract, identical for every family (docs/semantics.md §1.3, §A):
 *   - cache == NULL, or a cache that no forward has written yet: full prefill from a zero conv
 *     window and a zero state; a given cache is filled.
 *   - primed cache, L == 1: single-step update.
 *   - primed cache, L > 1: multi-token forward seeded from the cache (the conv sees the cached left
 *     context, the recurrence starts from the cached state); the cache advances by the whole slice.
 * Mask semantics (mixcheck's, docs/semantics.md §A.4): mask[b][t] == 0 marks a padding token. A padding token
 * never reaches the cache — the conv window and the recurrent state after it equal those before it —
 * and its output is not compared (it must only be finite). The mask is honoured whenever it is given,
 * for a batch of one and for L == 1 as well.
 *
 * Errors: every fallible op returns an enum mc_backend_status and, when it is not
 * MC_BACKEND_OK, writes a NUL-terminated human message into msg->text. An implementation never
 * exits, never prints and never aborts on bad input.
 */
#ifndef MIXCHECK_BACKEND_H
#define MIXCHECK_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped on every change to a struct or enum in this header. */
#define MIXCHECK_ABI_VERSION 1u

/* A plugin library exports one function with this name and the type mc_plugin_entry_fn. */
#define MIXCHECK_PLUGIN_ENTRY "mixcheck_plugin_backends"

#define MC_MSG_LEN 512
#define MC_MAX_DIMS 5

enum mc_family {
    MC_FAMILY_MAMBA2 = 1,
    MC_FAMILY_MAMBA1 = 2,
    MC_FAMILY_GDN = 3,       /* Gated DeltaNet (Qwen3-Next / Qwen3.5) */
    MC_FAMILY_SHORTCONV = 4, /* LFM2 ShortConv */
    MC_FAMILY_ATTENTION = 5, /* softmax attention with a KV cache (Qwen3-Next / Qwen3.5, LFM2, Bamba layers) */
    MC_FAMILY_STACK = 6,     /* a whole model (a port of ...ForCausalLM): token ids in, logits out; the stack_*
                              * entries (MC_CAP_STACK) replace model_create / forward / cache_export / cache_import */
    MC_FAMILY_LIGHTNING = 7, /* MiniMax lightning attention: linear attention with a constant decay per head */
    MC_FAMILY_KDA = 8,       /* Kimi Delta Attention: a gated delta rule with a decay per key channel */
};

/* Storage type of weights, inputs and outputs handed to a backend. f16 and bf16 travel as uint16_t
 * bit patterns (IEEE binary16 / bfloat16). */
enum mc_dtype {
    MC_DTYPE_F64 = 1,
    MC_DTYPE_F32 = 2,
    MC_DTYPE_F16 = 3,
    MC_DTYPE_BF16 = 4,
};
#define MC_DTYPE_BIT(d) (1u << (unsigned)(d))

enum mc_backend_status {
    MC_BACKEND_OK = 0,
    MC_BACKEND_UNSUPPORTED = 1, /* a configuration, dtype or option this backend does not do */
    MC_BACKEND_INVALID = 2,     /* arguments that break the contract (shapes, batch mismatch, ...) */
    MC_BACKEND_NOMEM = 3,
    MC_BACKEND_INTERNAL = 4,
};

/* Capability bits of struct mc_backend_ops.caps. */
#define MC_CAP_CHUNK_SIZE 0x1u /* honours mc_model_desc.chunk_size (an internal chunk length) */
#define MC_CAP_THREADS 0x2u    /* honours mc_model_desc.threads */
#define MC_CAP_PACKED 0x4u     /* implements forward_packed */
#define MC_CAP_PROBES 0x8u     /* implements probe_enable / probe_read */
#define MC_CAP_STACK 0x10u     /* family MC_FAMILY_STACK: implements stack_create / stack_forward / stack_cache_export */
#define MC_CAP_STACK_HIDDEN 0x20u /* stack_forward writes hidden_states, mixer_inputs, mixer_outputs when asked */
#define MC_CAP_STACK_PACKED 0x40u /* a whole stack that implements stack_forward_packed */

struct mc_msg {
    char text[MC_MSG_LEN];
};

/* ---- Per-family configurations: HF configuration names, derived sizes in comments. ---------- */

/* Mamba2 (docs/semantics.md §2.1). I = num_heads*head_dim, C = I + 2*n_groups*state_size,
 * in_proj rows = 2*I + 2*n_groups*state_size + num_heads. */
struct mc_mamba2_config {
    int64_t hidden_size;      /* D */
    int64_t num_heads;        /* H */
    int64_t head_dim;         /* P */
    int64_t state_size;       /* N */
    int64_t n_groups;         /* G, divides H; head h reads group h / (H/G) */
    int64_t conv_kernel;      /* K */
    int64_t chunk_size;       /* Q, the model's SSD chunk length (a hint; the math has no chunks) */
    int64_t norm_group_size;  /* I (HF, full row) or I/G (mamba_ssm, groupwise) */
    double layer_norm_epsilon;
    double time_step_limit[2]; /* dt clamp [lo, hi], applied in every path; hi may be +inf */
    int32_t use_bias;          /* in_proj.bias and out_proj.bias present */
    int32_t use_conv_bias;     /* conv1d.bias present */
    /* appended options (0 = the behaviour before them, the gated norm with the gate first, norm(y·silu(z))·w): */
    int32_t no_gated_norm;     /* 1: no RMSNorm, out_proj(y·silu(z)), no norm.weight (FalconH1 mamba_rms_norm false) */
    int32_t norm_before_gate;  /* 1: norm(y)·w·silu(z), the gate after the norm (FalconH1 mamba_norm_before_gate with
                                  mamba_rms_norm); needs the norm (no_gated_norm 0) */
};

/* The RMSNorms inside a Mamba1 mixer on the x_proj outputs dt_low [R], B [N] and C [N] (struct
 * mc_mamba1_config.inner_norms). */
enum mc_mamba1_inner_norms {
    MC_M1_INNER_NORMS_NONE = 0,       /* Mamba */
    MC_M1_INNER_NORMS_WEIGHTLESS = 1, /* FalconMamba: x·rsqrt(mean x² + mixer_rms_eps), no weight */
    MC_M1_INNER_NORMS_WEIGHTED = 2,   /* Jamba: the same times dt_layernorm.weight [R], b_layernorm.weight [N],
                                         c_layernorm.weight [N] */
};

/* Mamba1 (docs/semantics.md §3.1). C = I. */
struct mc_mamba1_config {
    int64_t hidden_size;       /* D */
    int64_t intermediate_size; /* I */
    int64_t state_size;        /* N */
    int64_t conv_kernel;       /* K */
    int64_t time_step_rank;    /* R */
    int32_t use_bias;
    int32_t use_conv_bias;
    /* appended options (0 = the behaviour before them): */
    int64_t inner_norms;       /* enum mc_mamba1_inner_norms */
    double mixer_rms_eps;      /* epsilon of the inner norms (FalconMamba mixer_rms_eps, Jamba rms_norm_eps) */
};

enum mc_gdn_layout {
    MC_GDN_LAYOUT_QWEN3_5 = 1,    /* in_proj_qkv, in_proj_z, in_proj_b, in_proj_a */
    MC_GDN_LAYOUT_QWEN3_NEXT = 2, /* in_proj_qkvz, in_proj_ba, per-key-head interleaved */
};

/* Gated DeltaNet (docs/semantics.md §4.1). C = 2*Hk*dk + Hv*dv. */
struct mc_gdn_config {
    int64_t hidden_size;       /* D */
    int64_t num_key_heads;     /* Hk  (linear_num_key_heads) */
    int64_t num_value_heads;   /* Hv  (linear_num_value_heads), a multiple of Hk */
    int64_t key_head_dim;      /* dk  (linear_key_head_dim) */
    int64_t value_head_dim;    /* dv  (linear_value_head_dim) */
    int64_t conv_kernel;       /* K   (linear_conv_kernel_dim) */
    int64_t chunk_size;        /* chunk length of the chunked form (a hint) */
    double rms_norm_eps;
    int32_t layout;            /* enum mc_gdn_layout */
    /* appended options (0 = the behaviour before them): */
    int32_t allow_neg_eigval;  /* 1: beta = 2 sigmoid(b), in [0, 2] (OLMo-Hybrid linear_allow_neg_eigval) */
};

/* LFM2 ShortConv (docs/semantics.md §5.1). C = D; no recurrent state. */
struct mc_shortconv_config {
    int64_t hidden_size;  /* D */
    int64_t conv_kernel;  /* K (conv_L_cache) */
    int32_t conv_bias;    /* in_proj, conv and out_proj biases present */
};

/* q/k norm of struct mc_attention_config (mixcheck's names "none", "rms", "zero_centred"). */
enum mc_qk_norm {
    MC_QK_NORM_NONE = 1,         /* no q/k norm (Bamba) */
    MC_QK_NORM_RMS = 2,          /* per-head RMSNorm, x·rsqrt(mean x² + eps)·w (LFM2 q_layernorm / k_layernorm) */
    MC_QK_NORM_ZERO_CENTRED = 3, /* per-head RMSNorm with (1 + w) (Qwen3-Next / Qwen3.5 q_norm / k_norm) */
    MC_QK_NORM_RMS_FULL = 4,     /* RMSNorm over the whole projection before the split into heads, x·rsqrt(mean x² +
                                    eps)·w with w [Hq*hd] for q and [Hkv*hd] for k (OLMo-Hybrid q_norm / k_norm) */
};

/* Softmax attention with a KV cache (docs/semantics.md §12). Rotary dims R = int(hd *
 * partial_rotary_factor), even, rotating the first R dims of each head (rotate_half, NeoX style); a
 * real token's position is the number of real tokens before it in its row, cached ones included.
 * q_proj rows = Hq*hd, doubled (query | gate per head) with attn_output_gate. The cache holds at most
 * cache_length positions; it is exported as
 *   conv_state      [B][1][1]            the number of cached positions n (C = K = 1)
 *   recurrent_state [B][2*Hkv][Lmax][hd] keys (rows 0..Hkv-1, after the k norm and RoPE) then values
 *                                        (rows Hkv..2Hkv-1); slot p < n holds position p, slots >= n are 0. */
struct mc_attention_config {
    int64_t hidden_size;          /* D */
    int64_t num_attention_heads;  /* Hq */
    int64_t num_key_value_heads;  /* Hkv, divides Hq; query head h reads kv head h / (Hq/Hkv) */
    int64_t head_dim;             /* hd */
    int64_t cache_length;         /* Lmax (mixcheck's name): positions the cache holds */
    double partial_rotary_factor; /* in (0, 1]; R = int(hd * factor) must be even and >= 2 */
    double rope_theta;            /* RoPE base */
    double rms_norm_eps;          /* epsilon of the q/k norms */
    int32_t qk_norm;              /* enum mc_qk_norm */
    int32_t attn_output_gate;     /* 1: q_proj gives query and gate per head, out = o_proj(attn ⊙ sigmoid(gate)) */
    int32_t attention_bias;       /* q_proj, k_proj, v_proj and o_proj biases present */
    /* appended options (0 = the behaviour before them): */
    int32_t no_rope;              /* 1: no rotary embedding at all (GraniteMoeHybrid position_embedding_type "nope",
                                     Jamba, Nemotron-H); partial_rotary_factor and rope_theta are then unused */
    double softmax_scale;         /* the score scale; 0 = 1/sqrt(hd) (GraniteMoeHybrid attention_multiplier) */
    /* multi-head latent attention (MLA, DeepSeek-V2 / Kimi-Linear KimiLinearAttention; docs/semantics.md §12.8),
     * on when kv_lora_rank > 0. head_dim is then the query / key head dim qk_nope_head_dim + qk_rope_head_dim,
     * num_key_value_heads equals num_attention_heads, qk_norm is none and there is no output gate; the weights
     * are q_proj (q_lora_rank 0) or q_a_proj, q_a_layernorm, q_b_proj, then kv_a_proj_with_mqa,
     * kv_a_layernorm, kv_b_proj and o_proj [D][Hq*v_head_dim]; rms_norm_eps is the two latent norms' epsilon.
     * The cache holds the latent: state [B][1][Lmax][kv_lora_rank + qk_rope_head_dim], per position the
     * normed latent then the shared rope key (rotated unless no_rope). */
    int64_t kv_lora_rank;         /* c: the key / value latent's rank; 0 = plain attention */
    int64_t q_lora_rank;          /* the query latent's rank; 0 = q_proj straight from the input */
    int64_t qk_rope_head_dim;     /* dr: the shared rope part of each key (all of it rotated unless no_rope) */
    int64_t v_head_dim;           /* dv: each head's value dim */
    /* Inkling's InklingAttention (docs/semantics.md §12.9), each 0 = off:
     * sconv_kernel K > 0: short convolutions with their input added (u + depthwise causal conv of the last K real
     * inputs, no bias) on the k and v projections before the k norm (k_sconv.conv1d.weight, v_sconv.conv1d.weight
     * [Hkv*hd][1][K]) and on o_proj's output (out_sconv.conv1d.weight [D][1][K]); the window then is
     * [B][1 + 2*Hkv*hd + D][K]: row 0 holds the count in column 0 (zeros after it), then the k, v and out windows
     * (the last K inputs, oldest first). rel_dim > 0: the relative logits, r_proj.weight [Hq*rel_dim][D] and
     * rel_logits_proj.proj [rel_dim][rel_extent]; head h at position n adds (r_h · proj)[n - s] to the score of
     * position s when n - s < rel_extent. sliding_window W > 0: position n attends to s with n - s < W only. */
    int64_t sconv_kernel;
    int64_t rel_dim;
    int64_t rel_extent;
    int64_t sliding_window;
};

/* MiniMax lightning attention (docs/semantics.md §13, HF MiniMaxLightningAttention). hd = head_dim;
 * qkv_proj rows 3*H*hd, per head q | k | v; head h decays its state by exp(-s_h) per token with
 * s_h = 2^(-8(h+1)/H) * (1 - layer_idx/(num_hidden_layers - 1 + 1e-5) + 1e-5). No conv: the cache is
 *   conv_state      [B][1][1]        the number of real tokens consumed n (C = K = 1)
 *   recurrent_state [B][H][hd][hd]   S = sum of decayed k v^T (rows key, columns value). */
struct mc_lightning_config {
    int64_t hidden_size;         /* D */
    int64_t num_attention_heads; /* H */
    int64_t head_dim;            /* hd */
    int64_t block_size;          /* the block length of the block form (a hint; the math has no blocks) */
    int64_t layer_idx;           /* the layer's index in the model, 0 <= layer_idx < num_hidden_layers */
    int64_t num_hidden_layers;   /* layers of the model (the slopes scale with layer_idx / (layers - 1)) */
    double norm_eps;             /* epsilon of the RMSNorm over the H*hd output row (HF: 1e-6) */
};

/* Kimi Delta Attention (docs/semantics.md §14, HF KimiDeltaAttention of Kimi-Linear). H heads of d for
 * q, k and v; C = 3*H*d; the log decay g [H][d] is per key channel; state [B][H][d][d] (rows key,
 * columns value). */
struct mc_kda_config {
    int64_t hidden_size; /* D */
    int64_t num_heads;   /* H   (linear_num_heads) */
    int64_t head_dim;    /* d   (linear_head_dim) */
    int64_t conv_kernel; /* K   (linear_conv_kernel_dim) */
    int64_t chunk_size;  /* chunk length of the chunked form (a hint) */
    double rms_norm_eps; /* epsilon of the gated output norm */
};

/* ---- Model creation ---------------------------------------------------------------------------- */

/* One parameter tensor under its HF name with its HF shape, data in the model dtype, row-major. */
struct mc_weight {
    const char *name;
    int32_t ndim;
    int64_t dims[MC_MAX_DIMS];
    const void *data;
};

struct mc_model_desc {
    enum mc_family family;
    enum mc_dtype dtype;             /* storage of weights, x and y */
    const void *config;              /* struct mc_<family>_config matching `family` */
    const struct mc_weight *weights; /* every parameter the configuration implies, in any order */
    int32_t n_weights;
    int64_t chunk_size;              /* internal chunk length; 0 = the backend's default */
    int32_t threads;                 /* worker threads; 0 = the backend's default */
};

/* Opaque handles: each backend defines what they point to. */
struct mc_model;
struct mc_cache;

struct mc_forward_args {
    int64_t batch;         /* B */
    int64_t len;           /* L >= 1 */
    const void *x;         /* [B][L][D] in the model dtype */
    const uint8_t *mask;   /* [B][L], 1 = real token, 0 = padding; NULL = all real */
    void *y;               /* [B][L][D] in the model dtype, written whole */
};

/* The packed call of serving engines (docs/scenarios.md §1.2): n sequences back to back along the token
 * axis, each reading and writing its own row (slot) of a state pool, a cache allocated with
 * cache_alloc for S >= n rows.
 *   - sequence i owns tokens cu_seqlens[i] .. cu_seqlens[i+1]-1 of x and y; cu_seqlens[0] = 0,
 *     non-decreasing, T = cu_seqlens[n]; a zero-length sequence changes nothing;
 *   - slots[i] in [0, S), distinct within a call;
 *   - has_initial_state[i] == 0: sequence i starts from a zero window and zero state whatever its
 *     slot holds; 1: it continues from its slot (a one-token sequence is then a decode step, a longer
 *     one a multi-token forward on a primed cache);
 *   - sequence i's outputs and its slot afterwards are exactly those of running it alone as a batch
 *     of one from its slot (or from zero); every other slot is left bit for bit as it was. */
struct mc_packed_args {
    int64_t n_seqs;                   /* n */
    const int64_t *cu_seqlens;        /* [n + 1] */
    const int64_t *slots;             /* [n] */
    const uint8_t *has_initial_state; /* [n] */
    const void *x;                    /* [T][D] in the model dtype */
    void *y;                          /* [T][D] in the model dtype, written whole */
};

/* One named intermediate of the last forward (a stage probe), for diagnosing which stage of a mixer
 * diverged first. Names and layouts per family (docs/scenarios.md §1.3):
 *   Mamba2, Mamba1: conv_out [B][L][C], dt [B][L][H] (Mamba1: [B][L][I]; after softplus and clamp),
 *                   B [B][L][G][N] (Mamba1 [B][L][N]), C (as B), scan_out [B][L][I] (before the gate),
 *                   norm_in [B][L][I] (Mamba2: the gated-norm input)
 *   GDN:            conv_out [B][L][C], beta [B][L][Hv], g [B][L][Hv], q [B][L][Hk][dk] and
 *                   k [B][L][Hk][dk] (after the l2 norm), core_out [B][L][Hv][dv] (before the norm)
 *   ShortConv:      conv_in [B][L][D], conv_out [B][L][D]
 * Data is f64 for f64 models, else f32, owned by the backend and valid until its next call. B and L
 * are the last forward's; values at padding tokens are not read. norm_in is y*silu(z) (Mamba1: the
 * out_proj input); GDN q and k come before q's dk^-1/2 scale, g is the log decay. A known name with
 * another shape is the backend's error; the harness enables probes only to diagnose a failed check
 * (docs/scenarios.md §3.6). */
struct mc_probe {
    const char *name;
    int32_t ndim;
    int64_t dims[MC_MAX_DIMS];
    const void *data;
};

/* ---- Whole stacks (MC_FAMILY_STACK, docs/models.md §7) -------------------------------------------
 * A backend that implements a whole model rather than one mixer: a port of an upstream `...ForCausalLM`
 * (a llama.cpp-style graph, a serving engine's model class, a Python model behind the adapter). It is
 * created from the upstream config.json and the checkpoint's tensors under their checkpoint names, reads
 * token ids and writes logits; one cache (cache_alloc / cache_copy / cache_free of the same ops, on the
 * stack model) holds every layer's conv window, recurrent state and KV cache. The forward contract and
 * the mask are the mixers' (above), for the whole model: a padding token reaches no layer's cache, and an
 * attention layer's position of a real token is the number of real tokens before it in its row, cached
 * ones included. Which model types it implements is its own: stack_create returns MC_BACKEND_UNSUPPORTED
 * for the others. */
struct mc_stack_desc {
    const char *model_type;          /* config.json `model_type`: "mamba2", "mamba", "lfm2", "bamba", "qwen3_5_text" */
    const char *config_json;         /* the upstream config.json text (its keys, upstream defaults for the rest) */
    enum mc_dtype dtype;             /* storage of the weights; the compute rules are upstream's for that dtype */
    const struct mc_weight *weights; /* every tensor of the checkpoint under its checkpoint name and shape
                                      * ("backbone.layers.0.mixer.in_proj.weight"); a tied head has none */
    int32_t n_weights;
    int32_t threads;                 /* worker threads; 0 = the backend's default */
};

/* One forward of the whole model. V vocab_size, n num_hidden_layers. logits, hidden_states and
 * mixer_outputs are f64 for f64 models, else f32, and written whole when given. */
struct mc_stack_args {
    int64_t batch;            /* B */
    int64_t len;              /* L >= 1 */
    const int64_t *input_ids; /* [B][L], each in [0, V) */
    const uint8_t *mask;      /* [B][L], 1 = real token, 0 = padding; NULL = all real */
    void *logits;             /* [B][L][V] */
    /* MC_CAP_STACK_HIDDEN, each NULL when not wanted (always NULL without the capability), each
     * written whole when given (they name the layer, and the stage in it, where a divergence starts):
     *   hidden_states [n + 1][B][L][D] the residual stream after the embedding and after every layer
     *                                  (the last before the final norm), as the model holds it;
     *   mixer_inputs  [n][B][L][D]     each layer's mixer input (its block norm's output);
     *   mixer_outputs [n][B][L][D]     each layer's mixer output (before its residual add) */
    void *hidden_states;
    void *mixer_inputs;
    void *mixer_outputs;
};

/* The packed call of serving engines (struct mc_packed_args) for a whole stack: n sequences of token ids
 * back to back, sequence i owning ids [cu_seqlens[i], cu_seqlens[i+1]) and row slots[i] of the pool (a
 * stack cache from cache_alloc for S >= n rows) in every layer, from its slot when has_initial_state[i],
 * else from zero whatever the slot holds; every other slot is left bit for bit as it was; sequence i's
 * logits and its slot afterwards are exactly those of running it alone as a batch of one. T = cu_seqlens[n]. */
struct mc_stack_packed_args {
    int64_t n_seqs;                   /* n */
    const int64_t *cu_seqlens;        /* [n + 1] */
    const int64_t *slots;             /* [n] */
    const uint8_t *has_initial_state; /* [n] */
    const int64_t *input_ids;         /* [T] */
    void *logits;                     /* [T][V], f64 for f64 models, else f32, written whole */
    void *hidden_states;              /* MC_CAP_STACK_HIDDEN: [n_layers + 1][T][D] or NULL (as mc_stack_args) */
};

/* The size of struct mc_backend_ops before any optional entry was appended (ABI 1, first form). */
#define MC_BACKEND_OPS_SIZE_V1 (offsetof(struct mc_backend_ops, forward_packed))

struct mc_backend_ops {
    uint32_t abi_version;   /* MIXCHECK_ABI_VERSION the backend was built against */
    uint32_t struct_size;   /* sizeof(struct mc_backend_ops) the backend was built with */
    const char *name;       /* unique, e.g. "reference", "cpu" */
    const char *device;     /* tolerance-profile device: "cpu", "cuda", or the plugin's own */
    enum mc_family family;
    uint32_t dtypes;        /* OR of MC_DTYPE_BIT(d) the backend accepts */
    uint32_t caps;          /* OR of MC_CAP_* */

    enum mc_backend_status (*model_create)(const struct mc_model_desc *desc, struct mc_model **model,
                                           struct mc_msg *msg);
    void (*model_destroy)(struct mc_model *model);

    /* A fresh cache for `batch` rows: zero window, zero state, not primed. */
    enum mc_backend_status (*cache_alloc)(struct mc_model *model, int64_t batch, struct mc_cache **cache,
                                          struct mc_msg *msg);
    /* dst <- src, including whether it is primed; both from cache_alloc with the same batch. */
    enum mc_backend_status (*cache_copy)(struct mc_model *model, struct mc_cache *dst,
                                         const struct mc_cache *src, struct mc_msg *msg);
    void (*cache_free)(struct mc_model *model, struct mc_cache *cache);
    /* Export the cache, whatever the backend keeps inside, as
     *   conv_state      [B][C][K]       the last K pre-conv inputs, oldest first (CONV-INV)
     *   recurrent_state the family's state (REC-INV): Mamba2 [B][H][P][N], Mamba1 [B][I][N],
     *                   GDN [B][Hv][dk][dv]; NULL for ShortConv; attention: conv_state [B][1][1] is the
     *                   number of cached positions and the state [B][2*Hkv][Lmax][hd] (struct
     *                   mc_attention_config)
     * in f64 when the model dtype is f64, else in f32. */
    enum mc_backend_status (*cache_export)(struct mc_model *model, const struct mc_cache *cache,
                                           void *conv_state, void *recurrent_state, struct mc_msg *msg);

    /* The inverse of cache_export: sets the window and state from the same layouts and dtypes and
     * marks the cache primed. Lets the harness start a check from a golden state (stage isolation)
     * and lets wrappers build fault variants without knowing a backend's internals. */
    enum mc_backend_status (*cache_import)(struct mc_model *model, struct mc_cache *cache, const void *conv_state,
                                           const void *recurrent_state, struct mc_msg *msg);

    /* One forward over args->len tokens; cache may be NULL (prefill without cache). */
    enum mc_backend_status (*forward)(struct mc_model *model, struct mc_cache *cache,
                                      const struct mc_forward_args *args, struct mc_msg *msg);

    /* ---- optional entries, appended (version rules above); NULL = not implemented ---- */

    /* The packed call on a state pool (struct mc_packed_args); MC_CAP_PACKED. */
    enum mc_backend_status (*forward_packed)(struct mc_model *model, struct mc_cache *pool,
                                             const struct mc_packed_args *args, struct mc_msg *msg);
    /* Stage probes (struct mc_probe); MC_CAP_PROBES. probe_enable(model, 1) makes every later forward
     * of the model record its intermediates (0 stops it); probe_read gives those of the last forward
     * as an array of *count probes owned by the backend. */
    enum mc_backend_status (*probe_enable)(struct mc_model *model, int32_t on, struct mc_msg *msg);
    enum mc_backend_status (*probe_read)(struct mc_model *model, const struct mc_probe **probes, int32_t *count,
                                         struct mc_msg *msg);

    /* Whole stacks (struct mc_stack_desc); MC_CAP_STACK, family MC_FAMILY_STACK. model_destroy,
     * cache_alloc, cache_copy and cache_free apply to the stack model; model_create, forward,
     * cache_export and cache_import may be NULL. stack_cache_export writes layer `layer`'s cache in
     * that layer's family layout (cache_export above; f64 for f64 models, else f32; recurrent_state
     * is NULL for a ShortConv layer). */
    enum mc_backend_status (*stack_create)(const struct mc_stack_desc *desc, struct mc_model **model,
                                           struct mc_msg *msg);
    enum mc_backend_status (*stack_forward)(struct mc_model *model, struct mc_cache *cache,
                                            const struct mc_stack_args *args, struct mc_msg *msg);
    enum mc_backend_status (*stack_cache_export)(struct mc_model *model, const struct mc_cache *cache, int64_t layer,
                                                 void *conv_state, void *recurrent_state, struct mc_msg *msg);
    /* The packed call of a whole stack (struct mc_stack_packed_args); MC_CAP_STACK_PACKED. */
    enum mc_backend_status (*stack_forward_packed)(struct mc_model *model, struct mc_cache *pool,
                                                   const struct mc_stack_packed_args *args, struct mc_msg *msg);

    /* Host memory the backend reaches without a copy (the Python adapter: shared memory its worker
     * process maps too); both NULL (or either) = none, and an older backend has neither. host_map
     * returns `bytes` (a multiple of the page size) of page-aligned read-write memory, or NULL when
     * it has none to give; host_unmap takes it back (the pointer and size host_map gave, every page
     * read-write again). When both are set the harness places the arguments of forward and
     * forward_packed there (x, mask, y, the packed arrays, with its guards and fences in the same
     * pages) and falls back to its own memory when host_map returns NULL. Nothing else changes: the
     * memory is the harness's, an argument is valid only during the call, inputs must not be
     * written, and every entry still takes any host pointer. Not tied to a model: called from the
     * process that makes the calls, any time after the backend is registered. */
    void *(*host_map)(size_t bytes);
    void (*host_unmap)(void *p, size_t bytes);
};

/* Plugin entry point: returns an array of *count backends; abi_version receives the library's
 * MIXCHECK_ABI_VERSION. The array and the structs it points to live as long as the library. */
typedef const struct mc_backend_ops *const *(*mc_plugin_entry_fn)(uint32_t *count, uint32_t *abi_version);

#ifdef __cplusplus
}
#endif

#endif /* MIXCHECK_BACKEND_H */
