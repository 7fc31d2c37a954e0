/*
 * gdn_core.c — the Gated DeltaNet core alone (cpu.h: mc_cpu_gdn_core, for `mixcheck bench --core`):
 * conv + SiLU over q | k | v, then the chunked gated delta rule of gdn_chunk.c (the same code the
 * forward runs) for every (batch row, key head, group of its value heads). No projections, no gates
 * from projections, no norm.
 *
 * Threads: mc_cpu_parallel_for over batch rows (conv) and (row, key head, value-head group) tasks
 * (core), each owning its outputs: the bits do not depend on the thread count.
 *
 * Dimension letters: B batch, L tokens, Hk key heads, Hv value heads, r = Hv/Hk, dk/dv head dims,
 * C = 2*Hk*dk + Hv*dv conv channels, K conv width.
 */
#include "cpu.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "gdn_chunk.h"
#include "stream.h"

#define GDNC_DEFAULT_CHUNK 64
#define GDNC_MAX_DIM 65536

struct gdnc_run {
    const struct mc_cpu_gdn_core_args *a;
    int64_t C, r, groups, chunk;
    const float *qkv;     /* [B][L][C] post-conv */
    float *work;          /* [workers][work_floats] */
    size_t work_floats;
};

static void gdnc_core_task(void *ctx, int64_t task, int worker)
{
    const struct gdnc_run *f = ctx;
    const struct mc_cpu_gdn_core_args *a = f->a;
    const int64_t Hk = a->key_heads, Hv = a->value_heads, dk = a->key_dim, dv = a->value_dim, L = a->len;
    const int64_t per_b = Hk * f->groups, b = task / per_b, hk = task % per_b / f->groups, grp = task % f->groups;
    const int64_t s0 = grp * f->r / f->groups, s1 = (grp + 1) * f->r / f->groups, h0 = hk * f->r + s0;
    if (s1 == s0)
        return;
    const int64_t kd = Hk * dk, vd = Hv * dv;
    const float *rowq = f->qkv + b * L * f->C;
    const struct mc_gdn_core_args ca = {
        .n = L,
        .dk = dk,
        .dv = dv,
        .nh = s1 - s0,
        .chunk = f->chunk,
        .l2norm = 1,
        .q_scale = (float)(1.0 / sqrt((double)dk)),
        .q = rowq + hk * dk,
        .k = rowq + kd + hk * dk,
        .ld_qk = f->C,
        .v = rowq + 2 * kd + h0 * dv,
        .ld_v = f->C,
        .g = a->g + b * L * Hv + h0,
        .beta = a->beta + b * L * Hv + h0,
        .ld_gb = Hv,
        .state = a->state + (b * Hv + h0) * dk * dv,
        .o = a->o + b * L * vd + h0 * dv,
        .ld_o = vd,
    };
    float *work = f->work + (size_t)worker * f->work_floats;
    if (L == 1)
        mc_gdn_recurrent_run(&ca, work);
    else
        mc_gdn_chunk_run(&ca, work);
}

/* One block of a long core call (stream.h: mc_cpu_core_blocks): row b, tokens [t0, t0 + n). */
static enum mc_backend_status gdnc_core_block(const void *args, int64_t b, int64_t t0, int64_t n, float *window,
                                              struct mc_msg *msg)
{
    const struct mc_cpu_gdn_core_args *a = args;
    const int64_t Hv = a->value_heads, C = 2 * a->key_heads * a->key_dim + Hv * a->value_dim, row = b * a->len + t0;
    struct mc_cpu_gdn_core_args blk = *a;
    blk.batch = 1;
    blk.len = n;
    blk.qkv = a->qkv + row * C;
    blk.g = a->g + row * Hv;
    blk.beta = a->beta + row * Hv;
    blk.o = a->o + row * Hv * a->value_dim;
    blk.state = a->state + b * Hv * a->key_dim * a->value_dim;
    blk.window = window;
    return mc_cpu_gdn_core(&blk, msg);
}

enum mc_backend_status mc_cpu_gdn_core(const struct mc_cpu_gdn_core_args *a, struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    float *conv_kc = NULL, *window = NULL, *conv_out = NULL, *work = NULL;
    if (!a || !a->qkv || !a->g || !a->beta || !a->state || !a->o)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID, "gdn cpu core: needs qkv, g, beta, state and o");
    if (a->batch < 1 || a->len < 1 || a->key_heads < 1 || a->value_heads < 1 || a->key_dim < 1 || a->value_dim < 1 ||
        a->key_heads > GDNC_MAX_DIM || a->value_heads > GDNC_MAX_DIM || a->key_dim > GDNC_MAX_DIM ||
        a->value_dim > GDNC_MAX_DIM || a->value_heads % a->key_heads != 0 || a->conv_kernel < 1 ||
        a->conv_kernel > MC_CPU_CONV_MAX_K || a->chunk < 0 || a->batch > INT_MAX / a->len)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID,
                           "gdn cpu core: bad shape B=%lld L=%lld Hk=%lld Hv=%lld dk=%lld dv=%lld K=%lld chunk=%lld",
                           (long long)a->batch, (long long)a->len, (long long)a->key_heads,
                           (long long)a->value_heads, (long long)a->key_dim, (long long)a->value_dim,
                           (long long)a->conv_kernel, (long long)a->chunk);
    const int64_t block = mc_cpu_stream_tokens(a->chunk > 0 ? a->chunk : GDNC_DEFAULT_CHUNK);
    if (a->len > block)
        return mc_cpu_core_blocks(a, a->batch, a->len, block, a->window,
                                  (size_t)(a->conv_kernel * (2 * a->key_heads * a->key_dim + a->value_heads * a->value_dim)),
                                  a->conv_weight != NULL, gdnc_core_block, "gdn cpu core", msg);
    struct gdnc_run f = {.a = a};
    const int64_t B = a->batch, L = a->len, K = a->conv_kernel;
    f.C = 2 * a->key_heads * a->key_dim + a->value_heads * a->value_dim;
    f.r = a->value_heads / a->key_heads;
    const int threads = mc_cpu_threads_resolve(a->threads);
    const int64_t base = B * a->key_heads;
    f.groups = base >= 2 * (int64_t)threads ? 1 : (2 * (int64_t)threads + base - 1) / base;
    if (f.groups > f.r)
        f.groups = f.r;
    const int64_t tasks = base * f.groups, workers = tasks < threads ? tasks : threads;
    f.chunk = a->chunk > 0 ? a->chunk : GDNC_DEFAULT_CHUNK;
    if (f.chunk > L)
        f.chunk = L;
    f.work_floats = mc_gdn_chunk_work_floats(f.chunk, a->key_dim, a->value_dim);
    if (f.work_floats < mc_gdn_recurrent_work_floats(a->key_dim, a->value_dim))
        f.work_floats = mc_gdn_recurrent_work_floats(a->key_dim, a->value_dim);
    work = malloc((size_t)workers * f.work_floats * sizeof *work);
    if (a->conv_weight) {
        conv_kc = malloc((size_t)(K * f.C) * sizeof *conv_kc);
        conv_out = malloc((size_t)(B * L * f.C) * sizeof *conv_out);
        window = a->window ? a->window : calloc((size_t)(B * K * f.C), sizeof *window);
    }
    if (!work || (a->conv_weight && (!conv_kc || !conv_out || !window))) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "gdn cpu core: out of memory for B=%lld L=%lld", (long long)B,
                         (long long)L);
        goto cleanup;
    }
    f.work = work;
    f.qkv = a->qkv;
    if (a->conv_weight) {
        mc_cpu_conv_weight_kc(f.C, K, a->conv_weight, conv_kc);
        mc_cpu_conv_batch(B, L, f.C, K, a->qkv, window, conv_kc, conv_out, threads);
        f.qkv = conv_out;
    }
    mc_cpu_parallel_for(tasks, gdnc_core_task, &f, (int)workers);

cleanup:
    if (window != a->window)
        free(window);
    free(conv_out);
    free(conv_kc);
    free(work);
    return st;
}
