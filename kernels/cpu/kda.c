/*
 * kda.c — the optimized CPU Kimi Delta Attention mixer (backend "cpu", device "cpu"): HF
 * `KimiDeltaAttention` with mixcheck's semantics of docs/semantics.md §A, §14. Validated against the
 * reference in tests/cpu/test_cpu_kda.c.
 *
 * Variants:
 *   - kdc_conv_task  one batch row (or packed sequence): the depthwise causal conv + SiLU over q | k | v
 *                    from its cached window (common.h, vectorized over channels).
 *   - kdc_head_task  one (row, head): the chunked per-channel delta rule (kda_chunk.h) over the row's
 *                    real tokens (the recurrent form when there is one: a decode step), then the per-head
 *                    RMSNorm with the sigmoid gate.
 * The projections on sgemm over all B·L tokens: one [q | k | v | f_a | b | g_a] matrix on the layer
 * input, then the low-rank f_b and g_b. Padding: the chunks are cut from each row's real tokens and the
 * conv skips the pads, so a pad never reaches the window or the state; its output row is 0. Threads:
 * mc_cpu_parallel_for over rows and (row, head), each task owning its outputs: bitwise identical for any
 * thread count. Dtypes: weights, x and y as f32, bf16 or f16; compute, cache and cache_export in f32.
 *
 * Dimension letters: B batch, L tokens, D hidden, H heads, d head dim, inner = H·d, C = 3·inner conv
 * channels, K conv width, Q chunk length, proj = C + 2d + H.
 */
#include "cpu.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "common.h"
#include "f32io.h"
#include "kda_chunk.h"
#include "probe.h"
#include "stream.h"
#include "vmath.h"

#define KDC_WHO "kda cpu"
#define KDC_MAX_DIM 65536
#define KDC_DEFAULT_CHUNK 64

enum kdc_slot {
    KDC_Q,
    KDC_K,
    KDC_V,
    KDC_CONV,
    KDC_F_A,
    KDC_F_B,
    KDC_DT_BIAS,
    KDC_A_LOG,
    KDC_B,
    KDC_G_A,
    KDC_G_B,
    KDC_O_NORM,
    KDC_O_PROJ,
    KDC_COUNT,
};

struct mc_model {
    enum mc_dtype dtype;
    struct mc_kda_config cfg;
    int64_t D, H, d, K, inner, C, proj, chunk;
    int threads;
    float *w[KDC_COUNT];                   /* f32 copies */
    float *proj_w;                         /* [proj][D]: q | k | v | f_a | b | g_a */
    float *conv_kc;                        /* [K][C] conv1d.weight transposed */
    struct mc_cpu_cache_shape cache_shape; /* window [B][K][C], state [B][H][d][d] */
    struct mc_cpu_probes *probes;          /* always NULL: the family defines no stage probes */
};

static void kdc_model_destroy(struct mc_model *model)
{
    if (!model)
        return;
    mc_cpu_weights_free(model->w, KDC_COUNT);
    free(model->proj_w);
    free(model->conv_kc);
    free(model);
}

static enum mc_backend_status kdc_model_create(const struct mc_model_desc *desc, struct mc_model **model,
                                               struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    struct mc_model *m = NULL;
    if ((st = mc_cpu_model_desc_check(desc, model, MC_FAMILY_KDA, "kda", KDC_WHO, msg)) != MC_BACKEND_OK)
        goto fail;
    const struct mc_kda_config *c = desc->config;
    if ((st = mc_cpu_check_dim(KDC_WHO, "hidden_size", c->hidden_size, KDC_MAX_DIM, msg)) ||
        (st = mc_cpu_check_dim(KDC_WHO, "linear_num_heads", c->num_heads, KDC_MAX_DIM, msg)) ||
        (st = mc_cpu_check_dim(KDC_WHO, "linear_head_dim", c->head_dim, KDC_MAX_DIM, msg)) ||
        (st = mc_cpu_check_dim(KDC_WHO, "linear_conv_kernel_dim", c->conv_kernel, KDC_MAX_DIM, msg)) ||
        (st = mc_cpu_threads_check(desc, KDC_WHO, msg)))
        goto fail;
    if (c->chunk_size < 0 || desc->chunk_size < 0 || !(c->rms_norm_eps > 0.0) || !isfinite(c->rms_norm_eps)) {
        st = mc_cpu_fail(msg, MC_BACKEND_INVALID,
                         "kda cpu config: needs chunk_size >= 0 and a finite rms_norm_eps > 0 (got %lld, %lld, %g)",
                         (long long)c->chunk_size, (long long)desc->chunk_size, c->rms_norm_eps);
        goto fail;
    }
    if (c->conv_kernel > MC_CPU_CONV_MAX_K) {
        st = mc_cpu_fail(msg, MC_BACKEND_UNSUPPORTED, "kda cpu: linear_conv_kernel_dim %lld is not supported (at most %d)",
                         (long long)c->conv_kernel, MC_CPU_CONV_MAX_K);
        goto fail;
    }
    if (3 * c->num_heads * c->head_dim + 2 * c->head_dim + c->num_heads > INT_MAX) {
        st = mc_cpu_fail(msg, MC_BACKEND_INVALID, "kda cpu config: projection rows exceed the BLAS limit %d", INT_MAX);
        goto fail;
    }
    m = calloc(1, sizeof *m);
    if (!m) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "kda cpu: out of memory for the model");
        goto fail;
    }
    m->dtype = desc->dtype;
    m->cfg = *c;
    m->D = c->hidden_size;
    m->H = c->num_heads;
    m->d = c->head_dim;
    m->K = c->conv_kernel;
    m->inner = m->H * m->d;
    m->C = 3 * m->inner;
    m->proj = m->C + 2 * m->d + m->H;
    m->chunk = desc->chunk_size > 0 ? desc->chunk_size : c->chunk_size > 0 ? c->chunk_size : KDC_DEFAULT_CHUNK;
    if (m->chunk > 1024)
        m->chunk = 1024; /* longer chunks only cost memory: the math has no chunks */
    m->threads = mc_cpu_threads_resolve(desc->threads);
    m->cache_shape = mc_cpu_cache_shape_kc(m->C, m->K, (size_t)(m->H * m->d * m->d),
                                           "conv_state [B][C][K] and recurrent_state [B][H][d][d] (f32)");
    const int64_t D = m->D, d = m->d, inner = m->inner;
    const struct mc_cpu_weight_spec spec[KDC_COUNT] = {
        [KDC_Q] = {"q_proj.weight", 1, 2, {inner, D}},
        [KDC_K] = {"k_proj.weight", 1, 2, {inner, D}},
        [KDC_V] = {"v_proj.weight", 1, 2, {inner, D}},
        [KDC_CONV] = {"conv1d.weight", 1, 3, {m->C, 1, m->K}},
        [KDC_F_A] = {"forget_gate.f_a_proj.weight", 1, 2, {d, D}},
        [KDC_F_B] = {"forget_gate.f_b_proj.weight", 1, 2, {inner, d}},
        [KDC_DT_BIAS] = {"forget_gate.dt_bias", 1, 1, {inner}},
        [KDC_A_LOG] = {"forget_gate.A_log", 1, 4, {1, 1, m->H, 1}},
        [KDC_B] = {"b_proj.weight", 1, 2, {m->H, D}},
        [KDC_G_A] = {"g_a_proj.weight", 1, 2, {d, D}},
        [KDC_G_B] = {"g_b_proj.weight", 1, 2, {inner, d}},
        [KDC_O_NORM] = {"o_norm.weight", 1, 1, {d}},
        [KDC_O_PROJ] = {"o_proj.weight", 1, 2, {D, inner}},
    };
    if ((st = mc_cpu_weights_load(desc, spec, KDC_COUNT, m->w, KDC_WHO, msg)) != MC_BACKEND_OK)
        goto fail;
    m->proj_w = malloc((size_t)(m->proj * D) * sizeof *m->proj_w);
    m->conv_kc = malloc((size_t)(m->K * m->C) * sizeof *m->conv_kc);
    if (!m->proj_w || !m->conv_kc) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "kda cpu: out of memory for the model");
        goto fail;
    }
    const struct {
        enum kdc_slot slot;
        int64_t row, rows;
    } parts[] = {{KDC_Q, 0, inner},         {KDC_K, inner, inner},       {KDC_V, 2 * inner, inner},
                 {KDC_F_A, m->C, d},         {KDC_B, m->C + d, m->H},     {KDC_G_A, m->C + d + m->H, d}};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        memcpy(m->proj_w + parts[i].row * D, m->w[parts[i].slot], (size_t)(parts[i].rows * D) * sizeof(float));
    mc_cpu_conv_weight_kc(m->C, m->K, m->w[KDC_CONV], m->conv_kc);
    *model = m;
    return MC_BACKEND_OK;

fail:
    kdc_model_destroy(m);
    return st;
}

MC_CPU_CACHE_OPS(kdc, KDC_WHO)

/* ---- forward ----------------------------------------------------------------------------------- */

struct kdc_run {
    const struct mc_model *m;
    int64_t len;          /* L (batched) or T (packed) */
    const uint8_t *mask;  /* [B][L] or NULL */
    float *pj;            /* [rows][proj] */
    float *qkv;           /* [rows][C] after conv + SiLU */
    float *f;             /* [rows][inner] f_b(f_a(u)) + dt_bias */
    float *gate;          /* [rows][inner] g_b(g_a(u)), then the normed gated output */
    float *o;             /* [rows][inner] core output */
    float *window;        /* [B or pool][K][C] */
    float *state;         /* [B or pool][H][d][d] */
    const struct mc_packed_args *pk;
    unsigned char *work;  /* [workers][work_bytes] */
    size_t work_bytes;
    int64_t *rows;        /* [workers][L or T] */
    int64_t rows_cap;
};

static void kdc_row(const struct kdc_run *r, int64_t b, int64_t *t0, int64_t *n, const uint8_t **mask, int64_t *slot)
{
    *t0 = r->pk ? r->pk->cu_seqlens[b] : b * r->len;
    *n = r->pk ? r->pk->cu_seqlens[b + 1] - *t0 : r->len;
    *mask = r->mask && !r->pk ? r->mask + *t0 : NULL;
    *slot = r->pk ? r->pk->slots[b] : b;
}

static void kdc_conv_task(void *ctx, int64_t b, int worker)
{
    (void)worker;
    const struct kdc_run *r = ctx;
    const struct mc_model *m = r->m;
    int64_t t0, n, slot;
    const uint8_t *mask;
    kdc_row(r, b, &t0, &n, &mask, &slot);
    mc_cpu_conv_row(n, m->C, m->K, r->pj + t0 * m->proj, m->proj, mask,
                    r->window + (size_t)slot * (size_t)(m->K * m->C), m->conv_kc, NULL, 1, r->qkv + t0 * m->C, m->C);
}

static void kdc_head_task(void *ctx, int64_t task, int worker)
{
    const struct kdc_run *r = ctx;
    const struct mc_model *m = r->m;
    const int64_t H = m->H, d = m->d, inner = m->inner, b = task / H, h = task % H;
    int64_t t0, n, slot;
    const uint8_t *mask;
    kdc_row(r, b, &t0, &n, &mask, &slot);
    int64_t *rows = r->rows + (size_t)worker * (size_t)r->rows_cap, nr = 0;
    for (int64_t t = 0; t < n; t++)
        if (!mask || mask[t])
            rows[nr++] = t0 + t;
    if (nr > 0) {
        const struct mc_kda_core_args a = {
            .n = nr, .d = d, .chunk = m->chunk, .rows = rows,
            .q = r->qkv + h * d, .k = r->qkv + inner + h * d, .v = r->qkv + 2 * inner + h * d, .ld = m->C,
            .q_scale = (float)(1.0 / sqrt((double)d)),
            .f = r->f + h * d, .ld_f = inner,
            .a_neg = -expf(m->w[KDC_A_LOG][h]),
            .b_raw = r->pj + m->C + d + h, .ld_b = m->proj,
            .state = r->state + (slot * H + h) * d * d,
            .o = r->o + h * d, .ld_o = inner,
        };
        if (nr == 1) /* one real token (a decode step): the recurrent form */
            mc_kda_recurrent_run(&a, r->work + (size_t)worker * r->work_bytes);
        else
            mc_kda_chunk_run(&a, r->work + (size_t)worker * r->work_bytes);
    }
    /* the per-head RMSNorm, · o_norm.weight, · sigmoid(gate) */
    const float eps = (float)m->cfg.rms_norm_eps, *wn = m->w[KDC_O_NORM];
    for (int64_t i = 0; i < nr; i++) {
        const float *o = r->o + rows[i] * inner + h * d;
        float *g = r->gate + rows[i] * inner + h * d;
        float ss = 0.0f;
        for (int64_t j = 0; j < d; j++)
            ss += o[j] * o[j];
        const float rstd = 1.0f / sqrtf(ss / (float)d + eps);
        for (int64_t j = 0; j < d; j++)
            g[j] = wn[j] * (o[j] * rstd) / (1.0f + expf(-g[j]));
    }
}

static enum mc_backend_status kdc_run_all(const struct mc_model *m, struct kdc_run *run, int64_t M, int64_t n_rows,
                                          int64_t rows_cap, const float *x, float *y, struct mc_msg *msg)
{
    const int64_t D = m->D, d = m->d, inner = m->inner;
    const int64_t tasks = n_rows * m->H;
    const size_t nw = (size_t)(tasks < m->threads ? tasks : m->threads) + 1;
    run->work_bytes = mc_kda_chunk_work_bytes(m->chunk, d);
    if (run->work_bytes < mc_kda_recurrent_work_bytes(d))
        run->work_bytes = mc_kda_recurrent_work_bytes(d);
    run->work_bytes = (run->work_bytes + 63) & ~(size_t)63;
    run->rows_cap = rows_cap;
    run->work = malloc(nw * run->work_bytes);
    run->rows = malloc(nw * (size_t)rows_cap * sizeof *run->rows);
    if (!run->work || !run->rows) {
        free(run->work);
        free(run->rows);
        return mc_cpu_fail(msg, MC_BACKEND_NOMEM, "kda cpu forward: out of memory for the chunk scratch");
    }
    mc_cpu_linear_tiled(M, m->proj, D, x, D, m->proj_w, NULL, run->pj, m->proj, m->threads);
    mc_cpu_linear_tiled(M, inner, d, run->pj + m->C, m->proj, m->w[KDC_F_B], m->w[KDC_DT_BIAS], run->f, inner,
                        m->threads);
    mc_cpu_linear_tiled(M, inner, d, run->pj + m->C + d + m->H, m->proj, m->w[KDC_G_B], NULL, run->gate, inner,
                        m->threads);
    mc_cpu_parallel_for(n_rows, kdc_conv_task, run, m->threads);
    memset(run->o, 0, (size_t)(M * inner) * sizeof *run->o);
    if (!run->pk && run->mask) /* pads: a zero gated output (the head tasks write real tokens only) */
        for (int64_t t = 0; t < M; t++)
            if (!run->mask[t])
                memset(run->gate + t * inner, 0, (size_t)inner * sizeof *run->gate);
    mc_cpu_parallel_for(tasks, kdc_head_task, run, m->threads);
    mc_cpu_linear_tiled(M, D, inner, run->gate, inner, m->w[KDC_O_PROJ], NULL, y, D, m->threads);
    mc_cpu_out_bias(M, D, run->pk ? NULL : run->mask, NULL, y);
    free(run->work);
    free(run->rows);
    return MC_BACKEND_OK;
}

static enum mc_backend_status kdc_forward(struct mc_model *model, struct mc_cache *cache,
                                          const struct mc_forward_args *args, struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    const struct mc_model *m = model;
    struct mc_cpu_rows rows = {0};
    struct mc_cpu_f32io io = {0};
    float *pj = NULL, *qkv = NULL, *f = NULL, *gate = NULL, *o = NULL;
    if ((st = mc_cpu_forward_check(model, cache, args, KDC_WHO, msg)) != MC_BACKEND_OK)
        goto cleanup;
    const int64_t Bsz = args->batch, L = args->len, M = Bsz * L, D = m->D, inner = m->inner;
    const int io_nomem = mc_cpu_f32io_alloc(&io, m->dtype, M * D);
    pj = malloc((size_t)(M * m->proj) * sizeof *pj);
    qkv = malloc((size_t)(M * m->C) * sizeof *qkv);
    f = malloc((size_t)(M * inner) * sizeof *f);
    gate = malloc((size_t)(M * inner) * sizeof *gate);
    o = malloc((size_t)(M * inner) * sizeof *o);
    const int rows_nomem = mc_cpu_rows_alloc(&rows, &m->cache_shape, cache, Bsz);
    if (io_nomem || !pj || !qkv || !f || !gate || !o || rows_nomem) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "kda cpu forward: out of memory for B=%lld L=%lld scratch",
                         (long long)Bsz, (long long)L);
        goto cleanup;
    }
    mc_cpu_rows_start(&rows, &m->cache_shape, cache, Bsz);
    const float *x;
    float *y;
    mc_cpu_f32io_in(&io, args->x, args->y, &x, &y);
    struct kdc_run run = {.m = m, .len = L, .mask = args->mask, .pj = pj, .qkv = qkv, .f = f, .gate = gate,
                          .o = o, .window = rows.window, .state = rows.state};
    if ((st = kdc_run_all(m, &run, M, Bsz, L, x, y, msg)) != MC_BACKEND_OK)
        goto cleanup;
    mc_cpu_f32io_out(&io, args->y);
    if (cache)
        cache->primed = 1;

cleanup:
    mc_cpu_rows_free(&rows);
    free(o);
    free(gate);
    free(f);
    free(qkv);
    free(pj);
    mc_cpu_f32io_free(&io);
    return st;
}

MC_CPU_STREAM_FORWARD(kdc, kdc_forward, model->chunk, KDC_WHO)

/* The packed call on a state pool (backend.h: forward_packed): the projections once over the T packed
 * tokens, the conv and the chunked core per sequence from its slot (zeros when has_initial_state = 0). */
static enum mc_backend_status kdc_forward_packed(struct mc_model *model, struct mc_cache *pool,
                                                 const struct mc_packed_args *args, struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    const struct mc_model *m = model;
    struct mc_cpu_f32io io = {0};
    float *pj = NULL, *qkv = NULL, *f = NULL, *gate = NULL, *o = NULL;
    int64_t T = 0;
    if ((st = mc_cpu_packed_check(model, pool, args, KDC_WHO, &T, msg)) != MC_BACKEND_OK)
        return st;
    if (T == 0)
        return MC_BACKEND_OK;
    const int64_t D = m->D, inner = m->inner;
    const int io_nomem = mc_cpu_f32io_alloc(&io, m->dtype, T * D);
    pj = malloc((size_t)(T * m->proj) * sizeof *pj);
    qkv = malloc((size_t)(T * m->C) * sizeof *qkv);
    f = malloc((size_t)(T * inner) * sizeof *f);
    gate = malloc((size_t)(T * inner) * sizeof *gate);
    o = malloc((size_t)(T * inner) * sizeof *o);
    if (io_nomem || !pj || !qkv || !f || !gate || !o) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "kda cpu forward_packed: out of memory for T=%lld scratch",
                         (long long)T);
        goto cleanup;
    }
    const float *x;
    float *y;
    mc_cpu_f32io_in(&io, args->x, args->y, &x, &y);
    mc_cpu_packed_reset(&m->cache_shape, pool, args);
    struct kdc_run run = {.m = m, .len = T, .pj = pj, .qkv = qkv, .f = f, .gate = gate, .o = o,
                          .window = pool->window, .state = pool->state, .pk = args};
    if ((st = kdc_run_all(m, &run, T, args->n_seqs, T, x, y, msg)) != MC_BACKEND_OK)
        goto cleanup;
    mc_cpu_f32io_out(&io, args->y);
    pool->primed = 1;

cleanup:
    free(o);
    free(gate);
    free(f);
    free(qkv);
    free(pj);
    mc_cpu_f32io_free(&io);
    return st;
}

MC_CPU_STREAM_PACKED(kdc, kdc_forward_packed, model->chunk, KDC_WHO)

static const struct mc_backend_ops kdc_ops = {
    .abi_version = MIXCHECK_ABI_VERSION,
    .struct_size = sizeof(struct mc_backend_ops),
    .name = "cpu",
    .device = "cpu",
    .family = MC_FAMILY_KDA,
    .dtypes = MC_DTYPE_BIT(MC_DTYPE_F32) | MC_DTYPE_BIT(MC_DTYPE_BF16) | MC_DTYPE_BIT(MC_DTYPE_F16),
    .caps = MC_CAP_THREADS | MC_CAP_PACKED | MC_CAP_CHUNK_SIZE,
    .model_create = kdc_model_create,
    .model_destroy = kdc_model_destroy,
    .cache_alloc = kdc_cache_alloc,
    .cache_copy = kdc_cache_copy,
    .cache_free = kdc_cache_free,
    .cache_export = kdc_cache_export,
    .cache_import = kdc_cache_import,
    .forward = kdc_forward_streamed,
    .forward_packed = kdc_forward_packed_streamed,
};

const struct mc_backend_ops *mc_cpu_kda_ops(void)
{
    return &kdc_ops;
}
