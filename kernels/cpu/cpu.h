/*
 * cpu.h — the optimized CPU backend ("cpu", device "cpu"): one ops struct per family, each validated
 * against the reference (tests/cpu) before it is timed. f32/bf16/f16 storage, f32 compute and cache,
 * OpenBLAS sgemm for the projections and the chunk matrix products, pthreads over (batch, head).
 * Every family also implements the packed call of serving engines (backend.h: forward_packed,
 * MC_CAP_PACKED): one pass over the packed token axis on a state pool, the chunked families on one
 * chunk grid restarting at every sequence boundary (mamba2_forward.c, gdn_packed.c), in blocks of
 * whole chunks (stream.h: mc_cpu_packed_streamed).
 */
#ifndef MC_KERNELS_CPU_H
#define MC_KERNELS_CPU_H

#include "mixcheck/backend.h"

/* Mamba2 mixer from the cached state: the chunked SSD (docs/semantics.md §2.4) with Q = mc_model_desc.chunk_size,
 * else the configuration's chunk_size; a single-token row takes the direct recurrent step. Static storage. */
const struct mc_backend_ops *mc_cpu_mamba2_ops(void);

/* Mamba1 mixer, vectorized selective scan (docs/semantics.md §3.3, §A.1). Static storage. */
const struct mc_backend_ops *mc_cpu_mamba1_ops(void);

/* LFM2 ShortConv mixer, fused B⊙x → conv → C⊙ (docs/semantics.md §5). Static storage. */
const struct mc_backend_ops *mc_cpu_shortconv_ops(void);

/* Gated DeltaNet mixer, chunked gated delta rule (docs/semantics.md §4.4) from the cached state, both projection
 * layouts. Static storage. */
const struct mc_backend_ops *mc_cpu_gdn_ops(void);

/* Softmax attention with a KV cache (docs/semantics.md §12): per-row token loop over the cached keys,
 * RoPE from a precomputed table, GQA, q/k norms, output gate, the packed call on a KV pool. Static
 * storage. */
const struct mc_backend_ops *mc_cpu_attention_ops(void);

/* MiniMax lightning attention (docs/semantics.md §13): the block form of §13.4 per (row, head) from the
 * cached state, blocks of mc_model_desc.chunk_size (else block_size) tokens. Static storage. */
const struct mc_backend_ops *mc_cpu_lightning_ops(void);

/* Kimi Delta Attention (docs/semantics.md §14): the chunked per-channel gated delta rule (kda_chunk.h) from
 * the cached state. Static storage. */
const struct mc_backend_ops *mc_cpu_kda_ops(void);

/* ---- recurrent cores alone (`mixcheck bench --core`) -------------------------------------------
 *
 * The recurrent part of each mixer without projections, gates taken from projections, or norms:
 * depthwise causal conv (+ SiLU where the mixer has it) followed by the family's scan, the same code
 * the forward runs. They exist so the core can be timed at the shape other libraries' scan kernels
 * are timed at (ggml's SSM_SCAN, say). f32 throughout, every token real (no mask), no dtype
 * conversion. `window` and `state` are in/out, so consecutive calls continue one sequence; a NULL
 * window starts from zeros and is not kept. Shapes are checked (MC_BACKEND_INVALID with a message),
 * allocation failure is MC_BACKEND_NOMEM; nothing prints. Results do not depend on `threads`
 * (0 = mc_cpu_threads_resolve's default). A call longer than the streaming block (stream.h:
 * mc_cpu_stream_tokens) runs each row in blocks of that many tokens on its carried window and state,
 * so scratch scales with the block, not B·L; a failure in a later block leaves window and state
 * advanced to the blocks before it (the cores are a timing entry, not the backend interface).
 */

/* Mamba2: conv + SiLU over x | B | C, then the scan of every (row, head) — the sequential scan, or the
 * chunked SSD at chunk length Q (0: 256), as the forward — y = scan + D·x.
 * No dt softplus/clamp (dt is given), no z gate, no gated norm. */
struct mc_cpu_mamba2_core_args {
    int64_t batch, len;                                        /* B, L >= 1 */
    int64_t heads, head_dim, state_size, groups, conv_kernel; /* H, P, N, G (divides H), K */
    int64_t chunk;                                             /* Q; 0 = 256 */
    int32_t threads;
    const float *xbc;         /* [B][L][C] pre-conv x | B | C, C = H*P + 2*G*N */
    const float *conv_weight; /* [C][K] conv1d.weight (no bias); NULL = xbc is already post-conv + SiLU */
    const float *dt;          /* [B][L][H] step sizes, as they enter the recurrence */
    const float *a;           /* [H] A = -exp(A_log) */
    const float *d;           /* [H] skip D, or NULL for none */
    float *window;            /* [B][K][C] the last K pre-conv rows, oldest first; or NULL */
    float *state;             /* [B][H][P][N] */
    float *y;                 /* [B][L][H*P] out */
};
enum mc_backend_status mc_cpu_mamba2_core(const struct mc_cpu_mamba2_core_args *args, struct mc_msg *msg);

/* Gated DeltaNet: conv + SiLU over q | k | v, then the chunked gated delta rule of every (row, key
 * head) with l2-normalised q, k and q scaled by dk^-1/2; value head h reads key head h / (Hv/Hk).
 * No gate projections (g and beta are given), no gated norm. */
struct mc_cpu_gdn_core_args {
    int64_t batch, len;                                  /* B, L >= 1 */
    int64_t key_heads, value_heads, key_dim, value_dim; /* Hk, Hv (multiple of Hk), dk, dv */
    int64_t conv_kernel, chunk;                          /* K; chunk 0 = 64 */
    int32_t threads;
    const float *qkv;         /* [B][L][C] pre-conv q | k | v, C = 2*Hk*dk + Hv*dv */
    const float *conv_weight; /* [C][K] or NULL (qkv already post-conv + SiLU) */
    const float *g;           /* [B][L][Hv] log decay (<= 0) */
    const float *beta;        /* [B][L][Hv] */
    float *window;            /* [B][K][C] or NULL */
    float *state;             /* [B][Hv][dk][dv] */
    float *o;                 /* [B][L][Hv*dv] out */
};
enum mc_backend_status mc_cpu_gdn_core(const struct mc_cpu_gdn_core_args *args, struct mc_msg *msg);

/* Kimi Delta Attention: conv + SiLU over q | k | v, then the chunked per-channel gated delta rule of
 * kda_chunk.c (the forward's code; q and k l2-normed inside, q scaled by d^-1/2) for every (row, head).
 * No projections, no output norm or gate: the core output o. The decay of channel c is
 * g = a_neg[h] · softplus(f[c]) (<= 0), β = σ(b_raw). */
struct mc_cpu_kda_core_args {
    int64_t batch, len;             /* B, L >= 1 */
    int64_t heads, head_dim;        /* H, d; I = H·d */
    int64_t conv_kernel, chunk;     /* K; chunk 0 = 64 */
    int32_t threads;
    const float *qkv;         /* [B][L][3I] pre-conv q | k | v */
    const float *conv_weight; /* [3I][K] or NULL (qkv already post-conv + SiLU) */
    const float *conv_weight_kc; /* [K][3I] conv_weight transposed (mc_cpu_conv_weight_kc), or NULL: transposed
                                  * in the call */
    const float *f;           /* [B][L][I] the softplus input of each channel's decay */
    const float *a_neg;       /* [H] -exp(A_log) */
    const float *b_raw;       /* [B][L][H] */
    float *window;            /* [B][K][3I] or NULL */
    float *state;             /* [B][H][d][d] */
    float *o;                 /* [B][L][I] out */
};
enum mc_backend_status mc_cpu_kda_core(const struct mc_cpu_kda_core_args *args, struct mc_msg *msg);

/* Mamba1: conv + SiLU over x, then the selective scan of every (row, channel), y = h·C + D·x.
 * No x_proj / dt_proj (delta, B and C are given), no z gate. */
struct mc_cpu_mamba1_core_args {
    int64_t batch, len;                          /* B, L >= 1 */
    int64_t channels, state_size, conv_kernel;   /* I, N, K */
    int32_t threads;
    const float *x;           /* [B][L][I] pre-conv */
    const float *conv_weight; /* [I][K] or NULL (x already post-conv + SiLU) */
    const float *delta;       /* [B][L][I] after softplus */
    const float *a;           /* [I][N] A = -exp(A_log) */
    const float *bc;          /* [B][L][2N] B | C */
    const float *d;           /* [I] or NULL */
    float *window;            /* [B][K][I] or NULL */
    float *state;             /* [B][I][N] */
    float *y;                 /* [B][L][I] out */
};
enum mc_backend_status mc_cpu_mamba1_core(const struct mc_cpu_mamba1_core_args *args, struct mc_msg *msg);

/* ShortConv: y = C ⊙ conv(B ⊙ x) over the in_proj output (no activation, no bias). */
struct mc_cpu_shortconv_core_args {
    int64_t batch, len, hidden, conv_kernel; /* B, L >= 1, D, K */
    int32_t threads;
    const float *bcx;         /* [B][L][3D] B | C | x */
    const float *conv_weight; /* [D][K] */
    float *window;            /* [B][K][D] or NULL */
    float *y;                 /* [B][L][D] out */
};
enum mc_backend_status mc_cpu_shortconv_core(const struct mc_cpu_shortconv_core_args *args, struct mc_msg *msg);

#endif
