/*
 * kda_chunk.h — the per-channel gated delta rule core of the cpu Kimi Delta Attention (docs/semantics.md
 * §14.4), f32 with the in-chunk cumulative log decays in double, for one head of one batch row (or packed
 * sequence) over a list of token rows.
 *
 * Variant: mc_kda_chunk_run, the chunked form (§14.4) for any chunk length Q >= 1: per chunk of n <= Q
 * tokens, γ = the in-chunk cumulative sum of g per key channel; the strictly lower system
 * (I + M), M[i][j] = Σ_c β_i k_ic k_jc e^(γ_ic − γ_jc), solved for [V⊙β | K⊙β⊙e^γ] (the UT transform,
 * OpenBLAS strsm); V' = U − W S; O = (Q̂ ⊙ e^γ) S + P V' with P[i][j] = Σ_c q_ic k_jc e^(γ_ic − γ_jc)
 * (j <= i); S ← e^(γ_last) ⊙ S + (K ⊙ e^(γ_last − γ))ᵀ V'. The pair decays e^(γ_i − γ_j) are formed
 * without overflow: inside a sub-block of MC_KDA_SUB tokens one exp per (i, j, c); across sub-blocks
 * I > J as e^(γ_i − γ_r)·e^(γ_r − γ_j) with γ_r at the last token of J, both factors <= 1, so the pair
 * products are sgemm. A chunk of one token is the recurrent step. Pure function of its arguments.
 *
 * Dimension letters: n tokens, d head dim (q, k, v), Q chunk length.
 */
#ifndef MC_KERNELS_CPU_KDA_CHUNK_H
#define MC_KERNELS_CPU_KDA_CHUNK_H

#include <stddef.h>
#include <stdint.h>

/* eps of the q/k l2norm, x / sqrt(Σx² + eps) (docs/semantics.md §14.3). */
#define MC_KDA_L2NORM_EPS 1e-6f
/* Tokens per sub-block of the pair decays (above). */
#define MC_KDA_SUB 16

/*
 *   n, d, chunk  tokens (>= 1), head dim, chunk length Q >= 1
 *   rows         [n]           the token rows, in order (real tokens only)
 *   q, k, v      [rows][ld]    post-conv q, k, v of the head at row r: q[r*ld + c] (before the l2norm)
 *   q_scale      d^{-1/2}
 *   f            [rows][ld_f]  f_b(f_a(u)) + dt_bias of the head's channels: the softplus input
 *   a_neg        -exp(A_log) of the head; g = a_neg · softplus(f) (<= 0)
 *   b_raw        [rows][ld_b]  b_proj(u) of the head (β = σ(b_raw)) at b_raw[r*ld_b]
 *   state        [d][d]        in/out: S (rows key, columns value)
 *   o            [rows][ld_o]  out: the core output o_t of the head
 */
struct mc_kda_core_args {
    int64_t n, d, chunk;
    const int64_t *rows;
    const float *q, *k, *v;
    int64_t ld;
    float q_scale;
    const float *f;
    int64_t ld_f;
    float a_neg;
    const float *b_raw;
    int64_t ld_b;
    float *state;
    float *o;
    int64_t ld_o;
};

/* Bytes of scratch mc_kda_chunk_run needs for chunk length Q and head dim d. */
size_t mc_kda_chunk_work_bytes(int64_t chunk, int64_t d);

/* The chunked form; work holds mc_kda_chunk_work_bytes(chunk, d) bytes, 8-byte aligned. */
void mc_kda_chunk_run(const struct mc_kda_core_args *a, void *work);

/* Variant: the recurrent form, token by token (decode: a call of one token per row): row c of S decays by
 * e^(g_c), m = Sᵀk̂, δ = β(v − m), S += k̂δᵀ, o = Sᵀq̂, two passes over S a token instead of the chunk's
 * products. The same math as mc_kda_chunk_run (a chunk of one token), other roundings. `chunk` is not read;
 * work holds mc_kda_recurrent_work_bytes(d) bytes. */
size_t mc_kda_recurrent_work_bytes(int64_t d);
void mc_kda_recurrent_run(const struct mc_kda_core_args *a, void *work);

#endif
