/*
 * gdn_chunk.h — the gated delta rule core of the cpu Gated DeltaNet (docs/semantics.md §4.4), f32, for one
 * key head of one batch row and a range of the value heads that read it (GVA, §4.3 step 5).
 *
 * Variants:
 *   - mc_gdn_chunk_run       the chunked form (UT transform per chunk, OpenBLAS sgemm/strsm), any
 *                            chunk length >= 1; a last chunk shorter than the chunk length is run
 *                            as a shorter chunk, which is exactly the zero-padded chunk of §4.4
 *                            (g = 0, β = 0, k = 0 rows are neutral) without the padding work.
 *   - mc_gdn_recurrent_run   the recurrent form of §4.4, token by token (the decode step).
 * Both are pure functions of their arguments (no threads inside, no global state), so a caller
 * running tasks on several threads gets the same bits for any thread count.
 *
 * Dimension letters: n tokens, dk key head dim, dv value head dim, nh value heads in the range,
 * c chunk length.
 */
#ifndef MC_KERNELS_CPU_GDN_CHUNK_H
#define MC_KERNELS_CPU_GDN_CHUNK_H

#include <stddef.h>
#include <stdint.h>

/* eps of the q/k l2norm, inside the rsqrt (docs/semantics.md §4.4). */
#define MC_GDN_L2NORM_EPS 1e-6f

/*
 * One key head of one batch row over n tokens, and nh value heads that read it. Value head s of the
 * range (s < nh) reads column s of g/beta, columns s*dv.. of v and o, and state + s*dk*dv.
 *
 *   n        tokens (>= 1)
 *   dk, dv   head dims
 *   nh       value heads in the range (>= 1)
 *   chunk    chunk length c >= 1 (ignored by the recurrent form)
 *   l2norm   nonzero: q̂ = l2norm(q)·q_scale, k̂ = l2norm(k) (eps inside the rsqrt); zero: q and k
 *            are used as given (q_scale still multiplies q)
 *   q_scale  dk^{-1/2} in the mixer
 *   q, k     [n][ld_qk]   the key head's q and k (post-conv)
 *   v        [n][ld_v]    value head s at v[t*ld_v + s*dv + j]
 *   g, beta  [n][ld_gb]   log decay (<= 0) and β of value head s at [t*ld_gb + s]
 *   state    [nh][dk][dv] in/out: S of each value head (rows key, columns value)
 *   o        [n][ld_o]    out: o_t of value head s at o[t*ld_o + s*dv + j]; must not overlap inputs
 */
struct mc_gdn_core_args {
    int64_t n, dk, dv, nh, chunk;
    int l2norm;
    float q_scale;
    const float *q, *k;
    int64_t ld_qk;
    const float *v;
    int64_t ld_v;
    const float *g, *beta;
    int64_t ld_gb;
    float *state;
    float *o;
    int64_t ld_o;
};

/* dst[0..dk) = src · rsqrt(Σ src² + eps) · scale (l2norm), or src · scale: how the cores normalize q
 * and k (the stage probes use it too). */
void mc_gdn_row_normalize(const float *src, float *dst, int64_t dk, int l2norm, float scale);

/* Floats of scratch mc_gdn_chunk_run needs for chunk length `chunk` (already clipped to n by the
 * caller if it likes) and head dims dk, dv. */
size_t mc_gdn_chunk_work_floats(int64_t chunk, int64_t dk, int64_t dv);

/* The chunked form; work holds mc_gdn_chunk_work_floats(min(chunk, n), dk, dv) floats. */
void mc_gdn_chunk_run(const struct mc_gdn_core_args *a, float *work);

/* Floats of scratch mc_gdn_recurrent_run needs. */
size_t mc_gdn_recurrent_work_floats(int64_t dk, int64_t dv);

/* The recurrent form (decay, delta, update, output with the updated state). */
void mc_gdn_recurrent_run(const struct mc_gdn_core_args *a, float *work);

#endif
