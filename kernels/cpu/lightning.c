/*
 * lightning.c — the optimized CPU lightning attention mixer (backend "cpu", device "cpu"): HF
 * `MiniMaxLightningAttention` with mixcheck's semantics of docs/semantics.md §A, §13. Validated against the
 * reference in tests/cpu/test_cpu_lightning.c.
 *
 * Variants (all in this file):
 *   - la_head_task   one (batch row, head): the block form of §13.4 over the row's real tokens in blocks
 *                    of Q (mc_model_desc.chunk_size, else the configuration's block_size): per block
 *                    O = (Q Kᵀ ⊙ Λ) V + (Q ⊙ λ^(i+1)) S and S ← λ^b S + (K ⊙ λ^(b-1-j))ᵀ V on sgemm,
 *                    with the powers λ^n = exp(-s_h n) from a table computed in double. A block of one
 *                    token is the recurrent step S ← λS + k vᵀ, o = Sᵀq.
 *   - la_norm_task   one token: the RMSNorm over the whole H·hd row, the sigmoid output gate.
 * qkv_proj (+ SiLU), output_gate and out_proj on sgemm over all B·L tokens. Padding: the blocks are cut
 * from each row's real tokens only, so a pad never decays, writes or counts; its output row is 0.
 * Threads: mc_cpu_parallel_for over (row, head) and over tokens, each task owning its outputs: bitwise
 * identical for any thread count. Dtypes: weights, x and y as f32, bf16 or f16; compute, cache and
 * cache_export in f32. The cache: conv_state [B][1][1] is the count of real tokens consumed (no conv),
 * recurrent_state [B][H][hd][hd].
 *
 * Dimension letters: B batch, L tokens, D hidden, H heads, hd head dim, inner = H·hd, Q block length.
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
#include "vmath.h"

#define LAC_WHO "lightning cpu"
#define LAC_MAX_DIM 65536
#define LAC_DEFAULT_BLOCK 64 /* when neither the descriptor nor the configuration gives one */

enum lac_slot {
    LAC_QKV,
    LAC_GATE,
    LAC_NORM,
    LAC_OUT_PROJ,
    LAC_COUNT,
};

struct mc_model {
    enum mc_dtype dtype;
    struct mc_lightning_config cfg;
    int64_t D, H, hd, inner, chunk; /* chunk: the block length Q */
    int threads;
    float *w[LAC_COUNT];                   /* f32 copies */
    float *pw;                             /* [H][Q + 1]: exp(-s_h n), n = 0..Q */
    struct mc_cpu_cache_shape cache_shape; /* window [B][1] (the count), state [B][H][hd][hd] */
    struct mc_cpu_probes *probes;          /* always NULL: the family defines no stage probes */
};

static void lac_model_destroy(struct mc_model *model)
{
    if (!model)
        return;
    mc_cpu_weights_free(model->w, LAC_COUNT);
    free(model->pw);
    free(model);
}

static enum mc_backend_status lac_model_create(const struct mc_model_desc *desc, struct mc_model **model,
                                               struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    struct mc_model *m = NULL;
    if ((st = mc_cpu_model_desc_check(desc, model, MC_FAMILY_LIGHTNING, "lightning", LAC_WHO, msg)) != MC_BACKEND_OK)
        goto fail;
    const struct mc_lightning_config *c = desc->config;
    if ((st = mc_cpu_check_dim(LAC_WHO, "hidden_size", c->hidden_size, LAC_MAX_DIM, msg)) ||
        (st = mc_cpu_check_dim(LAC_WHO, "num_attention_heads", c->num_attention_heads, LAC_MAX_DIM, msg)) ||
        (st = mc_cpu_check_dim(LAC_WHO, "head_dim", c->head_dim, LAC_MAX_DIM, msg)) ||
        (st = mc_cpu_check_dim(LAC_WHO, "num_hidden_layers", c->num_hidden_layers, LAC_MAX_DIM, msg)) ||
        (st = mc_cpu_threads_check(desc, LAC_WHO, msg)))
        goto fail;
    if (c->layer_idx < 0 || c->layer_idx >= c->num_hidden_layers || c->block_size < 0 || desc->chunk_size < 0 ||
        !(c->norm_eps > 0.0) || !isfinite(c->norm_eps)) {
        st = mc_cpu_fail(msg, MC_BACKEND_INVALID,
                         "lightning cpu config: needs 0 <= layer_idx < num_hidden_layers, block_size and chunk_size "
                         ">= 0 and a finite norm_eps > 0 (got layer_idx %lld of %lld, block_size %lld, chunk_size "
                         "%lld, norm_eps %g)",
                         (long long)c->layer_idx, (long long)c->num_hidden_layers, (long long)c->block_size,
                         (long long)desc->chunk_size, c->norm_eps);
        goto fail;
    }
    if (3 * c->num_attention_heads * c->head_dim > INT_MAX) {
        st = mc_cpu_fail(msg, MC_BACKEND_INVALID, "lightning cpu config: qkv_proj rows exceed the BLAS limit %d",
                         INT_MAX);
        goto fail;
    }
    m = calloc(1, sizeof *m);
    if (!m) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "lightning cpu: out of memory for the model");
        goto fail;
    }
    m->dtype = desc->dtype;
    m->cfg = *c;
    m->D = c->hidden_size;
    m->H = c->num_attention_heads;
    m->hd = c->head_dim;
    m->inner = m->H * m->hd;
    m->chunk = desc->chunk_size > 0 ? desc->chunk_size : c->block_size > 0 ? c->block_size : LAC_DEFAULT_BLOCK;
    if (m->chunk > 1024)
        m->chunk = 1024; /* longer blocks only cost memory ([Q][Q] per worker): the math has no blocks */
    m->threads = mc_cpu_threads_resolve(desc->threads);
    m->cache_shape = mc_cpu_cache_shape_kc(1, 1, (size_t)(m->H * m->hd * m->hd),
                                           "conv_state [B][1][1] and recurrent_state [B][H][hd][hd] (f32)");
    const struct mc_cpu_weight_spec spec[LAC_COUNT] = {
        [LAC_QKV] = {"qkv_proj.weight", 1, 2, {3 * m->inner, m->D}},
        [LAC_GATE] = {"output_gate.weight", 1, 2, {m->inner, m->D}},
        [LAC_NORM] = {"norm.weight", 1, 1, {m->inner}},
        [LAC_OUT_PROJ] = {"out_proj.weight", 1, 2, {m->D, m->inner}},
    };
    if ((st = mc_cpu_weights_load(desc, spec, LAC_COUNT, m->w, LAC_WHO, msg)) != MC_BACKEND_OK)
        goto fail;
    m->pw = malloc((size_t)(m->H * (m->chunk + 1)) * sizeof *m->pw);
    if (!m->pw) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "lightning cpu: out of memory for the decay table");
        goto fail;
    }
    /* s_h = 2^(-8(h+1)/H) · (1 - layer_idx/(num_hidden_layers - 1 + 1e-5) + 1e-5) (§13.1), in double */
    const double factor = 1.0 - (double)c->layer_idx / ((double)c->num_hidden_layers - 1.0 + 1e-5) + 1e-5;
    for (int64_t h = 0; h < m->H; h++) {
        const double s = pow(2.0, -8.0 * (double)(h + 1) / (double)m->H) * factor;
        for (int64_t n = 0; n <= m->chunk; n++)
            m->pw[h * (m->chunk + 1) + n] = (float)exp(-s * (double)n);
    }
    *model = m;
    return MC_BACKEND_OK;

fail:
    lac_model_destroy(m);
    return st;
}

MC_CPU_CACHE_OPS(lac, LAC_WHO)

/* ---- forward ----------------------------------------------------------------------------------- */

struct lac_run {
    const struct mc_model *m;
    int64_t len;           /* L (batched), or T (packed) */
    const uint8_t *mask;   /* [B][L] or NULL */
    float *qkv;            /* [rows][3·inner] after SiLU: per head q | k | v */
    float *gate;           /* [rows][inner] output_gate projection, then the gated normed output */
    float *o;              /* [rows][inner] the heads' outputs */
    float *count;          /* [B or pool][1] */
    float *state;          /* [B or pool][H][hd][hd] */
    const struct mc_packed_args *pk; /* the packed call: row b is sequence b; NULL for a batched forward */
    float *work;           /* [workers][work_floats] */
    size_t work_floats;
    int64_t *rows;         /* [workers][Q]: the token rows of the block a worker runs */
};

static size_t lac_work_floats(const struct mc_model *m)
{
    const size_t Q = (size_t)m->chunk, hd = (size_t)m->hd;
    return 4 * Q * hd + Q * Q + hd * hd;
}

/* Tokens of row b: first packed/batched row index, count, mask, slot. */
static void lac_row(const struct lac_run *r, int64_t b, int64_t *t0, int64_t *n, const uint8_t **mask,
                    int64_t *slot)
{
    *t0 = r->pk ? r->pk->cu_seqlens[b] : b * r->len;
    *n = r->pk ? r->pk->cu_seqlens[b + 1] - *t0 : r->len;
    *mask = r->mask && !r->pk ? r->mask + *t0 : NULL;
    *slot = r->pk ? r->pk->slots[b] : b;
}

static void lac_head_task(void *ctx, int64_t task, int worker)
{
    const struct lac_run *r = ctx;
    const struct mc_model *m = r->m;
    const int64_t H = m->H, hd = m->hd, inner = m->inner, Q = m->chunk, b = task / H, h = task % H;
    int64_t t0, n, slot;
    const uint8_t *mask;
    lac_row(r, b, &t0, &n, &mask, &slot);
    float *restrict S = r->state + (slot * H + h) * hd * hd; /* [hd][hd] */
    const float *pw = m->pw + h * (Q + 1);
    float *w = r->work + (size_t)worker * r->work_floats;
    float *qb = w, *kb = qb + Q * hd, *vb = kb + Q * hd, *ob = vb + Q * hd; /* [Q][hd] each */
    float *att = ob + Q * hd;                                              /* [Q][Q] */
    float *snew = att + Q * Q;                                             /* [hd][hd] */
    int64_t *rows = r->rows + (size_t)worker * (size_t)Q;
    int64_t t = 0;
    while (t < n) {
        /* the next block: up to Q real tokens, gathered */
        int64_t nb = 0;
        for (; t < n && nb < Q; t++)
            if (!mask || mask[t])
                rows[nb++] = t0 + t;
        if (nb == 0)
            break;
        for (int64_t i = 0; i < nb; i++) {
            const float *src = r->qkv + rows[i] * 3 * inner + h * 3 * hd;
            memcpy(qb + i * hd, src, (size_t)hd * sizeof *qb);
            memcpy(kb + i * hd, src + hd, (size_t)hd * sizeof *kb);
            memcpy(vb + i * hd, src + 2 * hd, (size_t)hd * sizeof *vb);
        }
        /* intra: (Q Kᵀ ⊙ Λ) V, Λ[i][j] = λ^(i-j) for j <= i */
        mc_cpu_sgemm(0, 1, nb, nb, hd, 1.0f, qb, hd, kb, hd, 0.0f, att, nb);
        for (int64_t i = 0; i < nb; i++)
            for (int64_t j = 0; j < nb; j++)
                att[i * nb + j] = j <= i ? att[i * nb + j] * pw[i - j] : 0.0f;
        mc_cpu_sgemm(0, 0, nb, hd, nb, 1.0f, att, nb, vb, hd, 0.0f, ob, hd);
        /* inter: (Q ⊙ λ^(i+1)) S; then q is free: reuse qb for K ⊙ λ^(b-1-j) */
        for (int64_t i = 0; i < nb; i++)
            for (int64_t c = 0; c < hd; c++)
                qb[i * hd + c] *= pw[i + 1];
        mc_cpu_sgemm(0, 0, nb, hd, hd, 1.0f, qb, hd, S, hd, 1.0f, ob, hd);
        for (int64_t j = 0; j < nb; j++)
            for (int64_t c = 0; c < hd; c++)
                kb[j * hd + c] *= pw[nb - 1 - j];
        /* S ← λ^b S + (K ⊙ λ^(b-1-j))ᵀ V */
        memcpy(snew, S, (size_t)(hd * hd) * sizeof *snew);
        mc_cpu_sgemm(1, 0, hd, hd, nb, 1.0f, kb, hd, vb, hd, pw[nb], snew, hd);
        memcpy(S, snew, (size_t)(hd * hd) * sizeof *S);
        for (int64_t i = 0; i < nb; i++)
            memcpy(r->o + rows[i] * inner + h * hd, ob + i * hd, (size_t)hd * sizeof *ob);
    }
}

/* One token: RMSNorm over the whole H·hd row, · norm.weight, · sigmoid(gate) (written into gate). */
static void lac_norm_task(void *ctx, int64_t row, int worker)
{
    (void)worker;
    const struct lac_run *r = ctx;
    const struct mc_model *m = r->m;
    const int64_t inner = m->inner;
    float *restrict g = r->gate + row * inner;
    const float *restrict o = r->o + row * inner;
    if (r->mask && !r->pk && !r->mask[row]) {
        memset(g, 0, (size_t)inner * sizeof *g);
        return;
    }
    float ss = 0.0f;
    for (int64_t i = 0; i < inner; i++)
        ss += o[i] * o[i];
    const float rstd = 1.0f / sqrtf(ss / (float)inner + (float)m->cfg.norm_eps);
    const float *restrict wn = m->w[LAC_NORM];
    for (int64_t i = 0; i < inner; i++)
        g[i] = wn[i] * (o[i] * rstd) / (1.0f + expf(-g[i]));
}

/* Shared by the batched and the packed forward: rows token rows of x (f32) into y (f32). */
static enum mc_backend_status lac_run_all(const struct mc_model *m, struct lac_run *run, int64_t rows,
                                          int64_t n_rows_seq, const float *x, float *y, struct mc_msg *msg)
{
    const int64_t D = m->D, inner = m->inner;
    const int64_t tasks = n_rows_seq * m->H;
    const int workers = (int)(tasks < m->threads ? tasks : m->threads);
    run->work_floats = lac_work_floats(m);
    const size_t nw = (size_t)(workers > 0 ? workers : 1);
    run->work = malloc(nw * run->work_floats * sizeof(float));
    run->rows = malloc(nw * (size_t)m->chunk * sizeof *run->rows);
    if (!run->work || !run->rows) {
        free(run->work);
        free(run->rows);
        return mc_cpu_fail(msg, MC_BACKEND_NOMEM, "lightning cpu forward: out of memory for the block scratch");
    }
    mc_cpu_linear_tiled(rows, 3 * inner, D, x, D, m->w[LAC_QKV], NULL, run->qkv, 3 * inner, m->threads);
    mc_cpu_vsilu(run->qkv, rows * 3 * inner);
    mc_cpu_linear_tiled(rows, inner, D, x, D, m->w[LAC_GATE], NULL, run->gate, inner, m->threads);
    memset(run->o, 0, (size_t)(rows * inner) * sizeof *run->o);
    mc_cpu_parallel_for(tasks, lac_head_task, run, m->threads);
    mc_cpu_parallel_for(rows, lac_norm_task, run, m->threads);
    mc_cpu_linear_tiled(rows, D, inner, run->gate, inner, m->w[LAC_OUT_PROJ], NULL, y, D, m->threads);
    mc_cpu_out_bias(rows, D, run->pk ? NULL : run->mask, NULL, y);
    /* the count of real tokens of each row (slot) */
    for (int64_t b = 0; b < n_rows_seq; b++) {
        int64_t t0, n, slot;
        const uint8_t *mask;
        lac_row(run, b, &t0, &n, &mask, &slot);
        int64_t real = 0;
        for (int64_t t = 0; t < n; t++)
            real += !mask || mask[t];
        run->count[slot] += (float)real;
    }
    free(run->work);
    free(run->rows);
    return MC_BACKEND_OK;
}

static enum mc_backend_status lac_forward(struct mc_model *model, struct mc_cache *cache,
                                          const struct mc_forward_args *args, struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    const struct mc_model *m = model;
    struct mc_cpu_rows rows = {0};
    struct mc_cpu_f32io io = {0};
    float *qkv = NULL, *gate = NULL, *o = NULL;
    if ((st = mc_cpu_forward_check(model, cache, args, LAC_WHO, msg)) != MC_BACKEND_OK)
        goto cleanup;
    const int64_t Bsz = args->batch, L = args->len, M = Bsz * L, D = m->D, inner = m->inner;
    const int io_nomem = mc_cpu_f32io_alloc(&io, m->dtype, M * D);
    qkv = malloc((size_t)(M * 3 * inner) * sizeof *qkv);
    gate = malloc((size_t)(M * inner) * sizeof *gate);
    o = malloc((size_t)(M * inner) * sizeof *o);
    const int rows_nomem = mc_cpu_rows_alloc(&rows, &m->cache_shape, cache, Bsz);
    if (io_nomem || !qkv || !gate || !o || rows_nomem) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "lightning cpu forward: out of memory for B=%lld L=%lld scratch",
                         (long long)Bsz, (long long)L);
        goto cleanup;
    }
    mc_cpu_rows_start(&rows, &m->cache_shape, cache, Bsz);
    const float *x;
    float *y;
    mc_cpu_f32io_in(&io, args->x, args->y, &x, &y);
    struct lac_run run = {.m = m, .len = L, .mask = args->mask, .qkv = qkv, .gate = gate, .o = o,
                          .count = rows.window, .state = rows.state};
    if ((st = lac_run_all(m, &run, M, Bsz, x, y, msg)) != MC_BACKEND_OK)
        goto cleanup;
    mc_cpu_f32io_out(&io, args->y);
    if (cache)
        cache->primed = 1;

cleanup:
    mc_cpu_rows_free(&rows);
    free(o);
    free(gate);
    free(qkv);
    mc_cpu_f32io_free(&io);
    return st;
}

MC_CPU_STREAM_FORWARD(lac, lac_forward, model->chunk, LAC_WHO)

/* The packed call on a state pool (backend.h: forward_packed): the projections once over the T packed
 * tokens, the block form per (sequence, head) from its slot (zeros when has_initial_state = 0). */
static enum mc_backend_status lac_forward_packed(struct mc_model *model, struct mc_cache *pool,
                                                 const struct mc_packed_args *args, struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    const struct mc_model *m = model;
    struct mc_cpu_f32io io = {0};
    float *qkv = NULL, *gate = NULL, *o = NULL;
    int64_t T = 0;
    if ((st = mc_cpu_packed_check(model, pool, args, LAC_WHO, &T, msg)) != MC_BACKEND_OK)
        return st;
    if (T == 0)
        return MC_BACKEND_OK;
    const int64_t D = m->D, inner = m->inner;
    const int io_nomem = mc_cpu_f32io_alloc(&io, m->dtype, T * D);
    qkv = malloc((size_t)(T * 3 * inner) * sizeof *qkv);
    gate = malloc((size_t)(T * inner) * sizeof *gate);
    o = malloc((size_t)(T * inner) * sizeof *o);
    if (io_nomem || !qkv || !gate || !o) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "lightning cpu forward_packed: out of memory for T=%lld scratch",
                         (long long)T);
        goto cleanup;
    }
    const float *x;
    float *y;
    mc_cpu_f32io_in(&io, args->x, args->y, &x, &y);
    struct lac_run run = {.m = m, .len = T, .qkv = qkv, .gate = gate, .o = o, .count = pool->window,
                          .state = pool->state, .pk = args};
    mc_cpu_packed_reset(&m->cache_shape, pool, args);
    if ((st = lac_run_all(m, &run, T, args->n_seqs, x, y, msg)) != MC_BACKEND_OK)
        goto cleanup;
    mc_cpu_f32io_out(&io, args->y);
    pool->primed = 1;

cleanup:
    free(o);
    free(gate);
    free(qkv);
    mc_cpu_f32io_free(&io);
    return st;
}

MC_CPU_STREAM_PACKED(lac, lac_forward_packed, model->chunk, LAC_WHO)

static const struct mc_backend_ops lac_ops = {
    .abi_version = MIXCHECK_ABI_VERSION,
    .struct_size = sizeof(struct mc_backend_ops),
    .name = "cpu",
    .device = "cpu",
    .family = MC_FAMILY_LIGHTNING,
    .dtypes = MC_DTYPE_BIT(MC_DTYPE_F32) | MC_DTYPE_BIT(MC_DTYPE_BF16) | MC_DTYPE_BIT(MC_DTYPE_F16),
    .caps = MC_CAP_THREADS | MC_CAP_PACKED | MC_CAP_CHUNK_SIZE,
    .model_create = lac_model_create,
    .model_destroy = lac_model_destroy,
    .cache_alloc = lac_cache_alloc,
    .cache_copy = lac_cache_copy,
    .cache_free = lac_cache_free,
    .cache_export = lac_cache_export,
    .cache_import = lac_cache_import,
    .forward = lac_forward_streamed,
    .forward_packed = lac_forward_packed_streamed,
};

const struct mc_backend_ops *mc_cpu_lightning_ops(void)
{
    return &lac_ops;
}
