/*
 * mamba2_internal.h — what the files of the cpu Mamba2 mixer share (mamba2.c: model, cache and ops
 * struct; mamba2_forward.c: the forward and the core alone): the model struct, its weight slots and
 * limits. Not a public header; see mamba2.c for the semantics and the variants.
 */
#ifndef MC_KERNELS_CPU_MAMBA2_INTERNAL_H
#define MC_KERNELS_CPU_MAMBA2_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "cache.h"
#include "mixcheck/backend.h"
#include "probe.h"

#define M2C_WHO "mamba2 cpu" /* prefix of every message */
#define M2C_MAX_DIM 65536
#define M2C_DEFAULT_CHUNK 256

enum m2c_slot {
    M2C_IN_PROJ,
    M2C_IN_PROJ_BIAS,
    M2C_CONV,
    M2C_CONV_BIAS,
    M2C_DT_BIAS,
    M2C_A_LOG,
    M2C_D,
    M2C_NORM,
    M2C_OUT_PROJ,
    M2C_OUT_PROJ_BIAS,
    M2C_COUNT,
};

struct mc_model {
    enum mc_dtype dtype; /* storage of x and y */
    struct mc_mamba2_config cfg;
    int64_t D, H, P, N, G, K, inner, GN, C, proj, R, gs;
    int64_t chunk; /* Q */
    int threads;
    float lo, hi, eps;
    float *w[M2C_COUNT]; /* f32 copies; NULL when absent */
    float *conv_kc;      /* [K][C] conv1d.weight transposed */
    float *a_neg;        /* [H] A = -exp(A_log) */
    struct mc_cpu_cache_shape cache_shape; /* window [B][K][C], state [B][H][P][N] */
    struct mc_cpu_probes *probes;          /* stage probes (probe.h), NULL until probe_enable */
};

/* Floats of one batch row's conv window [K][C] and recurrent state [H][P][N]. */
static inline size_t m2c_window_elems(const struct mc_model *m)
{
    return (size_t)(m->C * m->K);
}
static inline size_t m2c_state_elems(const struct mc_model *m)
{
    return (size_t)(m->H * m->P * m->N);
}

/* The forward of the ops struct (mixcheck/backend.h), in mamba2_forward.c. */
enum mc_backend_status mc_mamba2_cpu_forward(struct mc_model *model, struct mc_cache *cache,
                                             const struct mc_forward_args *args, struct mc_msg *msg);

/* The packed call on a state pool (backend.h: forward_packed), in mamba2_forward.c: one chunked SSD
 * over the packed token axis, restarting at every sequence boundary. */
enum mc_backend_status mc_mamba2_cpu_forward_packed(struct mc_model *model, struct mc_cache *pool,
                                                    const struct mc_packed_args *args, struct mc_msg *msg);

#endif
