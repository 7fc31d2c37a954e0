/*
 * shortconv.c — the optimized CPU LFM2 ShortConv mixer (backend "cpu", device "cpu"): HF
 * `Lfm2ShortConv` with mixcheck's semantics of docs/semantics.md §A, §5. Validated against the reference in
 * tests/cpu/test_cpu_shortconv.c.
 *
 * Variants (all in this file):
 *   - sc_row_task   one batch row, fused: Bx = B ⊙ x (the pre-conv input the cache stores), the
 *                   causal conv over the cached window + conv bias, no activation (common.h), then
 *                   y = C ⊙ conv, all vectorized over channels.
 * in_proj and out_proj on sgemm over all B·L tokens. Masks: a padding token never reaches the window
 * and its output row is out_proj.bias (zeros without conv_bias). Threads: mc_cpu_parallel_for over
 * batch rows, each owning its outputs: bitwise identical for any thread count. Dtypes: weights, x and
 * y as f32, bf16 or f16; compute, cache and cache_export in f32. No recurrent state.
 *
 * Dimension letters: B batch, L tokens, D hidden (= conv channels), K conv width (conv_L_cache).
 */
#include "cpu.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "common.h"
#include "f32io.h"
#include "probe.h"
#include "stream.h"

#define SCC_WHO "shortconv cpu"
#define SCC_MAX_DIM 65536

enum scc_slot {
    SCC_IN_PROJ,
    SCC_IN_PROJ_BIAS,
    SCC_CONV,
    SCC_CONV_BIAS,
    SCC_OUT_PROJ,
    SCC_OUT_PROJ_BIAS,
    SCC_COUNT,
};

struct mc_model {
    enum mc_dtype dtype;
    struct mc_shortconv_config cfg;
    int64_t D, K;
    int threads;
    float *w[SCC_COUNT]; /* f32 copies; NULL when absent */
    float *conv_kc;      /* [K][D] conv.weight transposed */
    struct mc_cpu_cache_shape cache_shape; /* window [B][K][D], no state */
    struct mc_cpu_probes *probes;          /* stage probes (probe.h), NULL until probe_enable */
};

static void scc_model_destroy(struct mc_model *model)
{
    if (!model)
        return;
    mc_cpu_weights_free(model->w, SCC_COUNT);
    free(model->conv_kc);
    mc_cpu_probes_free(model->probes);
    free(model);
}

static enum mc_backend_status scc_model_create(const struct mc_model_desc *desc, struct mc_model **model,
                                               struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    struct mc_model *m = NULL;
    if ((st = mc_cpu_model_desc_check(desc, model, MC_FAMILY_SHORTCONV, "shortconv", SCC_WHO, msg)) != MC_BACKEND_OK)
        goto fail;
    const struct mc_shortconv_config *c = desc->config;
    if (c->hidden_size < 1 || c->hidden_size > SCC_MAX_DIM || c->conv_kernel < 1 || c->conv_kernel > SCC_MAX_DIM) {
        st = mc_cpu_fail(msg, MC_BACKEND_INVALID,
                         "shortconv cpu config: 'hidden_size' and 'conv_L_cache' must be in [1, %d] (got %lld, %lld)",
                         SCC_MAX_DIM, (long long)c->hidden_size, (long long)c->conv_kernel);
        goto fail;
    }
    if (c->conv_bias != 0 && c->conv_bias != 1) {
        st = mc_cpu_fail(msg, MC_BACKEND_INVALID, "shortconv cpu config: 'conv_bias' must be 0 or 1 (got %d)",
                         (int)c->conv_bias);
        goto fail;
    }
    if (c->conv_kernel > MC_CPU_CONV_MAX_K) {
        st = mc_cpu_fail(msg, MC_BACKEND_UNSUPPORTED, "shortconv cpu: conv_L_cache %lld is not supported (at most %d)",
                         (long long)c->conv_kernel, MC_CPU_CONV_MAX_K);
        goto fail;
    }
    if ((st = mc_cpu_threads_check(desc, SCC_WHO, msg)) != MC_BACKEND_OK)
        goto fail;
    m = calloc(1, sizeof *m);
    if (!m) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "shortconv cpu: out of memory for the model");
        goto fail;
    }
    m->dtype = desc->dtype;
    m->cfg = *c;
    m->D = c->hidden_size;
    m->K = c->conv_kernel;
    m->threads = mc_cpu_threads_resolve(desc->threads);
    m->cache_shape = mc_cpu_cache_shape_kc(m->D, m->K, 0, "conv_state [B][D][K] (f32)");
    const struct mc_cpu_weight_spec spec[SCC_COUNT] = {
        [SCC_IN_PROJ] = {"in_proj.weight", 1, 2, {3 * m->D, m->D, 0}},
        [SCC_IN_PROJ_BIAS] = {"in_proj.bias", c->conv_bias, 1, {3 * m->D, 0, 0}},
        [SCC_CONV] = {"conv.weight", 1, 3, {m->D, 1, m->K}},
        [SCC_CONV_BIAS] = {"conv.bias", c->conv_bias, 1, {m->D, 0, 0}},
        [SCC_OUT_PROJ] = {"out_proj.weight", 1, 2, {m->D, m->D, 0}},
        [SCC_OUT_PROJ_BIAS] = {"out_proj.bias", c->conv_bias, 1, {m->D, 0, 0}},
    };
    if ((st = mc_cpu_weights_load(desc, spec, SCC_COUNT, m->w, "shortconv cpu", msg)) != MC_BACKEND_OK)
        goto fail;
    m->conv_kc = malloc((size_t)(m->K * m->D) * sizeof *m->conv_kc);
    if (!m->conv_kc) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "shortconv cpu: out of memory for the model");
        goto fail;
    }
    mc_cpu_conv_weight_kc(m->D, m->K, m->w[SCC_CONV], m->conv_kc);
    *model = m;
    return MC_BACKEND_OK;

fail:
    scc_model_destroy(m);
    return st;
}

/* ---- cache ------------------------------------------------------------------------------------- */

static size_t scc_window_elems(const struct mc_model *m)
{
    return (size_t)(m->D * m->K);
}

MC_CPU_CACHE_OPS(scc, SCC_WHO)

/* ---- forward ----------------------------------------------------------------------------------- */

struct scc_run {
    const struct mc_model *m;
    int64_t len;
    const uint8_t *mask; /* [B][L] or NULL */
    float *bcx;          /* [B][L][3D] in_proj output: B | C | x */
    float *bx;           /* [B][L][D]  B ⊙ x, then C ⊙ conv */
    float *co;           /* [B][L][D]  conv output */
    float *window;       /* [B][K][D] */
    /* the packed call: len T, row b is sequence b on the packed axis, window above is the pool's,
     * indexed by slot; NULL for a batched forward */
    const struct mc_packed_args *pk;
};

/* Row b of a forward: batch row b (tokens b·L .., window row b), or sequence b of a packed call
 * (tokens cu_seqlens[b] .., window row slots[b]): the conv of each sequence reads its own window and
 * tokens only. */
static void scc_row_cols(const struct scc_run *r, int64_t b, int64_t c0, int64_t c1)
{
    const struct mc_model *m = r->m;
    const int64_t t0 = r->pk ? r->pk->cu_seqlens[b] : b * r->len;
    const int64_t L = r->pk ? r->pk->cu_seqlens[b + 1] - t0 : r->len, D = m->D;
    const size_t slot = (size_t)(r->pk ? r->pk->slots[b] : b);
    const uint8_t *mask = r->mask ? r->mask + t0 : NULL;
    for (int64_t t = 0; t < L; t++) {
        const float *restrict row = r->bcx + (t0 + t) * 3 * D;
        float *restrict bx = r->bx + (t0 + t) * D;
        for (int64_t j = c0; j < c1; j++)
            bx[j] = row[j] * row[2 * D + j];
    }
    mc_cpu_conv_cols(L, D, c0, c1, m->K, r->bx + t0 * D, D, mask, r->window + slot * scc_window_elems(m), m->conv_kc,
                     m->w[SCC_CONV_BIAS], 0, r->co + t0 * D, D);
    for (int64_t t = 0; t < L; t++) {
        const float *restrict cg = r->bcx + (t0 + t) * 3 * D + D;
        const float *restrict co = r->co + (t0 + t) * D;
        float *restrict out = r->bx + (t0 + t) * D;
        if (mask && !mask[t]) {
            memset(out + c0, 0, (size_t)(c1 - c0) * sizeof *out);
            continue;
        }
        for (int64_t j = c0; j < c1; j++)
            out[j] = cg[j] * co[j];
    }
}

static void scc_row_task(void *ctx, int64_t b, int worker)
{
    (void)worker;
    const struct scc_run *r = ctx;
    scc_row_cols(r, b, 0, r->m->D);
}

/* A packed call's task: one (sequence, block of MC_CPU_CONV_COLS channels), so a few long sequences
 * still spread over every thread (the same bits per channel as the whole row). */
static void scc_packed_task(void *ctx, int64_t task, int worker)
{
    (void)worker;
    const struct scc_run *r = ctx;
    const int64_t D = r->m->D, nb = (D + MC_CPU_CONV_COLS - 1) / MC_CPU_CONV_COLS;
    const int64_t c0 = task % nb * MC_CPU_CONV_COLS, c1 = c0 + MC_CPU_CONV_COLS < D ? c0 + MC_CPU_CONV_COLS : D;
    scc_row_cols(r, task / nb, c0, c1);
}

static enum mc_backend_status scc_forward(struct mc_model *model, struct mc_cache *cache,
                                          const struct mc_forward_args *args, struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    const struct mc_model *m = model;
    struct mc_cpu_rows rows = {0};
    struct mc_cpu_f32io io = {0};
    float *bcx = NULL, *bx = NULL, *co = NULL;

    if ((st = mc_cpu_forward_check(model, cache, args, SCC_WHO, msg)) != MC_BACKEND_OK)
        goto cleanup;
    const int64_t Bsz = args->batch, L = args->len, M = Bsz * L, D = m->D;
    const int io_nomem = mc_cpu_f32io_alloc(&io, m->dtype, M * D);
    bcx = malloc((size_t)(M * 3 * D) * sizeof *bcx);
    bx = malloc((size_t)(M * D) * sizeof *bx);
    co = malloc((size_t)(M * D) * sizeof *co);
    const int rows_nomem = mc_cpu_rows_alloc(&rows, &m->cache_shape, cache, Bsz);
    if (io_nomem || !bcx || !bx || !co || rows_nomem) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "shortconv cpu forward: out of memory for B=%lld L=%lld scratch",
                         (long long)Bsz, (long long)L);
        goto cleanup;
    }
    mc_cpu_rows_start(&rows, &m->cache_shape, cache, Bsz);

    const float *x;
    float *y;
    mc_cpu_f32io_in(&io, args->x, args->y, &x, &y);
    struct scc_run run = {.m = m, .len = L, .mask = args->mask, .bcx = bcx, .bx = bx, .co = co,
                          .window = rows.window};
    mc_cpu_linear_tiled(M, 3 * D, D, x, D, m->w[SCC_IN_PROJ], m->w[SCC_IN_PROJ_BIAS], bcx, 3 * D, m->threads);
    mc_cpu_parallel_for(Bsz, scc_row_task, &run, m->threads);
    /* stage probes (probe.h): conv_in is B ⊙ x again (bx now holds C ⊙ conv), conv_out the conv output */
    float *p_in = mc_cpu_probe_add(m->probes, "conv_in", 3, (const int64_t[]){Bsz, L, D});
    float *p_out = mc_cpu_probe_add(m->probes, "conv_out", 3, (const int64_t[]){Bsz, L, D});
    for (int64_t t = 0; p_in && t < M; t++)
        if (!args->mask || args->mask[t])
            for (int64_t j = 0; j < D; j++)
                p_in[t * D + j] = bcx[t * 3 * D + j] * bcx[t * 3 * D + 2 * D + j];
    mc_cpu_probe_rows(p_out, D, co, D, M, args->mask);
    mc_cpu_linear_tiled(M, D, D, bx, D, m->w[SCC_OUT_PROJ], NULL, y, D, m->threads);
    mc_cpu_out_bias(M, D, args->mask, m->w[SCC_OUT_PROJ_BIAS], y);
    mc_cpu_f32io_out(&io, args->y);
    if (cache)
        cache->primed = 1;

cleanup:
    mc_cpu_rows_free(&rows);
    free(co);
    free(bx);
    free(bcx);
    mc_cpu_f32io_free(&io);
    return st;
}

/* The ops forward: scc_forward in blocks of MC_CPU_STREAM_TOKENS tokens (stream.h). */
MC_CPU_STREAM_FORWARD(scc, scc_forward, 1, SCC_WHO)

/* The packed call on a state pool (backend.h: forward_packed): in_proj and out_proj once over the T
 * packed tokens, B ⊙ x → conv → C ⊙ per sequence from its slot's window (zeros when
 * has_initial_state = 0), which then holds the sequence's last K inputs; no other slot is touched. */
static enum mc_backend_status scc_forward_packed(struct mc_model *model, struct mc_cache *pool,
                                                 const struct mc_packed_args *args, struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    const struct mc_model *m = model;
    struct mc_cpu_f32io io = {0};
    float *bcx = NULL, *bx = NULL, *co = NULL;
    int64_t T = 0;
    if ((st = mc_cpu_packed_check(model, pool, args, SCC_WHO, &T, msg)) != MC_BACKEND_OK)
        return st;
    if (T == 0)
        return MC_BACKEND_OK;
    const int64_t D = m->D;
    const int io_nomem = mc_cpu_f32io_alloc(&io, m->dtype, T * D);
    bcx = malloc((size_t)(T * 3 * D) * sizeof *bcx);
    bx = malloc((size_t)(T * D) * sizeof *bx);
    co = malloc((size_t)(T * D) * sizeof *co);
    if (io_nomem || !bcx || !bx || !co) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "shortconv cpu forward_packed: out of memory for T=%lld scratch",
                         (long long)T);
        goto cleanup;
    }
    mc_cpu_packed_reset(&m->cache_shape, pool, args);
    const float *x;
    float *y;
    mc_cpu_f32io_in(&io, args->x, args->y, &x, &y);
    struct scc_run run = {.m = m, .len = T, .bcx = bcx, .bx = bx, .co = co, .window = pool->window, .pk = args};
    mc_cpu_linear_tiled(T, 3 * D, D, x, D, m->w[SCC_IN_PROJ], m->w[SCC_IN_PROJ_BIAS], bcx, 3 * D, m->threads);
    mc_cpu_parallel_for(args->n_seqs * ((D + MC_CPU_CONV_COLS - 1) / MC_CPU_CONV_COLS), scc_packed_task, &run,
                        m->threads);
    mc_cpu_linear_tiled(T, D, D, bx, D, m->w[SCC_OUT_PROJ], NULL, y, D, m->threads);
    mc_cpu_out_bias(T, D, NULL, m->w[SCC_OUT_PROJ_BIAS], y);
    mc_cpu_f32io_out(&io, args->y);
    pool->primed = 1;

cleanup:
    free(co);
    free(bx);
    free(bcx);
    mc_cpu_f32io_free(&io);
    return st;
}

/* ---- the core alone (cpu.h: mc_cpu_shortconv_core) -------------------------------------------- */

/* One block of a long core call (stream.h: mc_cpu_core_blocks): row b, tokens [t0, t0 + n). */
static enum mc_backend_status scc_core_block(const void *args, int64_t b, int64_t t0, int64_t n, float *window,
                                             struct mc_msg *msg)
{
    const struct mc_cpu_shortconv_core_args *a = args;
    const int64_t D = a->hidden, row = b * a->len + t0;
    struct mc_cpu_shortconv_core_args blk = *a;
    blk.batch = 1;
    blk.len = n;
    blk.bcx = a->bcx + row * 3 * D;
    blk.y = a->y + row * D;
    blk.window = window;
    return mc_cpu_shortconv_core(&blk, msg);
}

enum mc_backend_status mc_cpu_shortconv_core(const struct mc_cpu_shortconv_core_args *a, struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    float *conv_kc = NULL, *window = NULL, *co = NULL;
    if (!a || !a->bcx || !a->conv_weight || !a->y)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID, "shortconv cpu core: needs bcx, conv_weight and y");
    if (a->batch < 1 || a->len < 1 || a->hidden < 1 || a->hidden > SCC_MAX_DIM || a->conv_kernel < 1 ||
        a->conv_kernel > MC_CPU_CONV_MAX_K || a->batch > INT_MAX / a->len)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID, "shortconv cpu core: bad shape B=%lld L=%lld D=%lld K=%lld",
                           (long long)a->batch, (long long)a->len, (long long)a->hidden, (long long)a->conv_kernel);
    const int64_t block = mc_cpu_stream_tokens(1);
    if (a->len > block)
        return mc_cpu_core_blocks(a, a->batch, a->len, block, a->window, (size_t)(a->conv_kernel * a->hidden), 1,
                                  scc_core_block, "shortconv cpu core", msg);
    struct mc_model m = {0};
    m.D = a->hidden;
    m.K = a->conv_kernel;
    m.threads = mc_cpu_threads_resolve(a->threads);
    const int64_t Bsz = a->batch, L = a->len;
    conv_kc = malloc((size_t)(m.K * m.D) * sizeof *conv_kc);
    co = malloc((size_t)(Bsz * L * m.D) * sizeof *co);
    window = a->window ? a->window : calloc((size_t)(Bsz * m.K * m.D), sizeof *window);
    if (!conv_kc || !co || !window) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "shortconv cpu core: out of memory for B=%lld L=%lld", (long long)Bsz,
                         (long long)L);
        goto cleanup;
    }
    mc_cpu_conv_weight_kc(m.D, m.K, a->conv_weight, conv_kc);
    m.conv_kc = conv_kc;
    struct scc_run run = {.m = &m, .len = L, .bcx = (float *)(uintptr_t)a->bcx, /* read only */
                          .bx = a->y, .co = co, .window = window};
    mc_cpu_parallel_for(Bsz, scc_row_task, &run, m.threads);

cleanup:
    if (window != a->window)
        free(window);
    free(co);
    free(conv_kc);
    return st;
}

/* The ops forward_packed: scc_forward_packed over the packed axis in blocks (stream.h). */
MC_CPU_STREAM_PACKED(scc, scc_forward_packed, 1, SCC_WHO)

MC_CPU_PROBE_OPS(scc, SCC_WHO)

static const struct mc_backend_ops scc_ops = {
    .abi_version = MIXCHECK_ABI_VERSION,
    .struct_size = sizeof(struct mc_backend_ops),
    .name = "cpu",
    .device = "cpu",
    .family = MC_FAMILY_SHORTCONV,
    .dtypes = MC_DTYPE_BIT(MC_DTYPE_F32) | MC_DTYPE_BIT(MC_DTYPE_BF16) | MC_DTYPE_BIT(MC_DTYPE_F16),
    .caps = MC_CAP_THREADS | MC_CAP_PACKED | MC_CAP_PROBES,
    .model_create = scc_model_create,
    .model_destroy = scc_model_destroy,
    .cache_alloc = scc_cache_alloc,
    .cache_copy = scc_cache_copy,
    .cache_free = scc_cache_free,
    .cache_export = scc_cache_export,
    .cache_import = scc_cache_import,
    .forward = scc_forward_streamed,
    .forward_packed = scc_forward_packed_streamed,
    .probe_enable = scc_probe_enable,
    .probe_read = scc_probe_read,
};

const struct mc_backend_ops *mc_cpu_shortconv_ops(void)
{
    return &scc_ops;
}
