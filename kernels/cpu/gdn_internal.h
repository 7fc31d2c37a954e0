/*
 * gdn_internal.h — what the files of the cpu Gated DeltaNet share (gdn.c: model, weights, cache;
 * gdn_forward.c: the forward): the model and cache structs and the tiling constants. Not a public
 * header; see gdn.c for the layout of a forward.
 */
#ifndef MC_KERNELS_CPU_GDN_INTERNAL_H
#define MC_KERNELS_CPU_GDN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "mixcheck/backend.h"

#include "cache.h"
#include "probe.h"

#define GDN_WHO "gdn cpu"     /* prefix of every message */
#define GDN_MAX_DIM 65536      /* dimensions above this are refused, as in the reference */
#define GDN_DEFAULT_CHUNK 64   /* §4.4 and FLA's default */
#define GDN_CONV_BLOCK 256     /* channels per conv task */
#define GDN_TILE 512           /* rows and outputs per projection task */
#define GDN_ROW_BLOCK 64       /* tokens per elementwise task */

struct mc_model {
    enum mc_dtype dtype; /* storage of weights, x, y */
    size_t elem_bytes;
    struct mc_gdn_config cfg;
    int64_t D, Hk, Hv, dk, dv, K, r, kd, vd, C, proj, chunk;
    int threads;
    float *w_proj;  /* [proj][D]: q | k | v | z | b | a */
    float *w_conv;  /* channel-blocked: block at c0 holds [K][w] at offset c0*K, w = its width */
    float *a_neg;   /* [Hv] −exp(A_log) */
    float *dt_bias; /* [Hv] */
    float *w_norm;  /* [dv] */
    float *w_out;   /* [D][Hv*dv] */
    struct mc_cpu_cache_shape cache_shape; /* window channel-blocked like w_conv, state [B][Hv][dk][dv] */
    struct mc_cpu_probes *probes;          /* stage probes (probe.h), NULL until probe_enable */
};

/* The elementwise phases the forward and the packed call share (gdn_forward.c), over tokens [i0, i1)
 * of the in_proj output pj [T][proj] (q | k | v | z | b | a):
 *   gates: beta [T][Hv] = σ(b), g [T][Hv] = −exp(A_log)·softplus(a + dt_bias);
 *   norm:  hn [T][Hv*dv] (the core's output) in place, the gated RMSNorm per head over dv, norm
 *          before gate (§4.3 step 7): hn · rsqrt(mean hn² + eps) · w_norm · silu(z). */
void mc_gdn_cpu_gates_rows(const struct mc_model *m, const float *pj, float *beta, float *g, int64_t i0, int64_t i1);
void mc_gdn_cpu_norm_rows(const struct mc_model *m, const float *pj, float *hn, int64_t i0, int64_t i1);

/* The forward of the ops struct (mixcheck/backend.h), in gdn_forward.c. */
enum mc_backend_status mc_gdn_cpu_forward(struct mc_model *model, struct mc_cache *cache,
                                          const struct mc_forward_args *args, struct mc_msg *msg);

/* The packed call of the ops struct (backend.h: forward_packed), in gdn_packed.c. */
enum mc_backend_status mc_gdn_cpu_forward_packed(struct mc_model *model, struct mc_cache *pool,
                                                 const struct mc_packed_args *args, struct mc_msg *msg);

#endif
