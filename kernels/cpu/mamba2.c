/*
 * mamba2.c — the optimized CPU Mamba2 mixer (backend "cpu", device "cpu"): HF `Mamba2Mixer` with
 * mixcheck's semantics of mixers.md §A, the recurrent core as the chunked SSD of §2.4 (what
 * `mamba_chunk_scan_combined` computes) seeded from the cached state. Validated against the
 * sequential reference in tests/cpu/test_cpu_mamba2.c.
 *
 * Variants (all in this file):
 *   - m2c_chunk_core   chunked SSD of one (batch row, head) over its real tokens, chunk length Q:
 *                      per chunk (q <= Q tokens, the last one shorter — the same as neutral padding
 *                      with a = 0, x = B = C = 0, so the final state is exact, REC-INV):
 *                        E[l][s]  = Σ_{k=s+1..l} a_k     (stable masked segsum, s <= l)
 *                        G        = Cc·Bcᵀ                (sgemm)          [q][q]; computed once
 *                                   per (row, group, chunk) by m2c_gram_task and shared by the H/G heads
 *                                   of the group (per head when that buffer would pass 256 MiB)
 *                        Y        = (Cc·Sᵀ) ⊙ exp(Acum)   (sgemm, state→output)
 *                        Y       += (G ⊙ exp(E))·Xd       (sgemm, intra-chunk)
 *                        S        = exp(Acum[q-1])·S + Xdᵀ·(exp(E[q-1][·]) ⊙ Bc)   (sgemm, beta = decay:
 *                                   the inter-chunk recurrence as a loop over chunks)
 *                        y        = Y + D·x
 *                      Q = mc_model_desc.chunk_size, else the configuration's chunk_size.
 *   - m2c_step         the direct recurrent step for a row with one real token (decode).
 * Front and back end as the reference: in_proj sgemm over all B·L tokens; fused causal conv over the
 * cached window (common.h), SiLU; dt = clamp(softplus(dt_raw + dt_bias), time_step_limit) in every
 * path; head h reads group h / (H/G); D skip; gated RMSNorm (gate before norm, groups of
 * norm_group_size); out_proj sgemm.
 *
 * Masks: the real tokens of a row are gathered into a list and the chunked core runs over that list,
 * so any mask pattern (left, right, middle padding) is the unpadded row: a padding token never reaches
 * the window or the state, and its output row is out_proj.bias (zeros without use_bias).
 *
 * Threads: mc_cpu_parallel_for over batch rows (conv) and (batch, head) pairs (core); every task owns
 * its outputs and per-worker scratch, so outputs and caches are bitwise identical for any thread
 * count. Dtypes: weights, x and y stored as f32, bf16 or f16; everything else (compute, cache,
 * cache_export) is f32.
 *
 * Dimension letters: B batch, L tokens, D hidden, H heads, P head dim, N state, G groups, K conv width,
 * I = H*P (named `inner`: <cblas.h> defines I), C = I + 2*G*N conv channels, proj = 2*I + 2*G*N + H,
 * Q chunk length, q the length of one chunk.
 */
#include "cpu.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define M2C_MAX_DIM 65536
#define M2C_DEFAULT_CHUNK 256
#define M2C_GRAM_MAX_BYTES ((size_t)256 << 20) /* shared C·Bᵀ buffer cap per forward */

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
};

struct mc_cache {
    int64_t batch;
    int primed;
    float *window; /* [B][K][C] the last K pre-conv inputs, oldest row first */
    float *state;  /* [B][H][P][N] */
};

/* ---- model ------------------------------------------------------------------------------------- */

static enum mc_backend_status m2c_check_dim(const char *name, int64_t v, struct mc_msg *msg)
{
    if (v < 1 || v > M2C_MAX_DIM)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID, "mamba2 cpu config: '%s' must be in [1, %d] (got %lld)", name,
                           M2C_MAX_DIM, (long long)v);
    return MC_BACKEND_OK;
}

static enum mc_backend_status m2c_config_validate(const struct mc_mamba2_config *c, struct mc_msg *msg)
{
    enum mc_backend_status st;
    if ((st = m2c_check_dim("hidden_size", c->hidden_size, msg)) ||
        (st = m2c_check_dim("num_heads", c->num_heads, msg)) || (st = m2c_check_dim("head_dim", c->head_dim, msg)) ||
        (st = m2c_check_dim("state_size", c->state_size, msg)) || (st = m2c_check_dim("n_groups", c->n_groups, msg)) ||
        (st = m2c_check_dim("conv_kernel", c->conv_kernel, msg)) ||
        (st = m2c_check_dim("norm_group_size", c->norm_group_size, msg)))
        return st;
    if (c->chunk_size < 0)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID, "mamba2 cpu config: 'chunk_size' must be >= 0 (got %lld)",
                           (long long)c->chunk_size);
    if (c->num_heads % c->n_groups != 0)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID,
                           "mamba2 cpu config: 'num_heads' (%lld) must be a multiple of 'n_groups' (%lld)",
                           (long long)c->num_heads, (long long)c->n_groups);
    const int64_t inner = c->num_heads * c->head_dim;
    if (inner % c->norm_group_size != 0)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID,
                           "mamba2 cpu config: 'num_heads*head_dim' (%lld) must be a multiple of 'norm_group_size' "
                           "(%lld)",
                           (long long)inner, (long long)c->norm_group_size);
    const int64_t proj = 2 * inner + 2 * c->n_groups * c->state_size + c->num_heads;
    if (proj > INT_MAX)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID, "mamba2 cpu config: in_proj rows %lld exceed the BLAS limit %d",
                           (long long)proj, INT_MAX);
    if (!(c->layer_norm_epsilon > 0.0) || !isfinite(c->layer_norm_epsilon))
        return mc_cpu_fail(msg, MC_BACKEND_INVALID,
                           "mamba2 cpu config: 'layer_norm_epsilon' must be finite and > 0 (got %g)",
                           c->layer_norm_epsilon);
    const double lo = c->time_step_limit[0], hi = c->time_step_limit[1];
    if (isnan(lo) || isnan(hi) || isinf(lo) || lo < 0.0 || hi < lo)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID,
                           "mamba2 cpu config: 'time_step_limit' must satisfy 0 <= lo <= hi, lo finite (got [%g, %g])",
                           lo, hi);
    if ((c->use_bias != 0 && c->use_bias != 1) || (c->use_conv_bias != 0 && c->use_conv_bias != 1))
        return mc_cpu_fail(msg, MC_BACKEND_INVALID,
                           "mamba2 cpu config: 'use_bias' and 'use_conv_bias' must be 0 or 1 (got %d, %d)",
                           (int)c->use_bias, (int)c->use_conv_bias);
    if (c->conv_kernel > MC_CPU_CONV_MAX_K)
        return mc_cpu_fail(msg, MC_BACKEND_UNSUPPORTED, "mamba2 cpu: conv_kernel %lld is not supported (at most %d)",
                           (long long)c->conv_kernel, MC_CPU_CONV_MAX_K);
    return MC_BACKEND_OK;
}

static void m2c_model_destroy(struct mc_model *model)
{
    if (!model)
        return;
    for (int s = 0; s < M2C_COUNT; s++)
        free(model->w[s]);
    free(model->conv_kc);
    free(model->a_neg);
    free(model);
}

static enum mc_backend_status m2c_model_create(const struct mc_model_desc *desc, struct mc_model **model,
                                               struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    struct mc_model *m = NULL;

    if (!desc || !model) {
        st = mc_cpu_fail(msg, MC_BACKEND_INVALID, "mamba2 cpu: model_create needs a descriptor and an output handle");
        goto fail;
    }
    *model = NULL;
    if (desc->family != MC_FAMILY_MAMBA2) {
        st = mc_cpu_fail(msg, MC_BACKEND_INVALID, "mamba2 cpu: descriptor family is %d, expected mamba2 (%d)",
                         (int)desc->family, (int)MC_FAMILY_MAMBA2);
        goto fail;
    }
    if (mc_cpu_dtype_bytes(desc->dtype) == 0) {
        const int known = desc->dtype == MC_DTYPE_F64;
        st = mc_cpu_fail(msg, known ? MC_BACKEND_UNSUPPORTED : MC_BACKEND_INVALID,
                         "mamba2 cpu: dtype %d %s (supported: f32, bf16, f16)", (int)desc->dtype,
                         known ? "is not supported" : "is not a known dtype");
        goto fail;
    }
    if (!desc->config) {
        st = mc_cpu_fail(msg, MC_BACKEND_INVALID, "mamba2 cpu: descriptor has no configuration");
        goto fail;
    }
    if ((st = m2c_config_validate(desc->config, msg)) != MC_BACKEND_OK)
        goto fail;
    if (desc->chunk_size < 0) {
        st = mc_cpu_fail(msg, MC_BACKEND_INVALID, "mamba2 cpu: chunk_size must be >= 0 (got %lld)",
                         (long long)desc->chunk_size);
        goto fail;
    }
    if (desc->threads < 0) {
        st = mc_cpu_fail(msg, MC_BACKEND_INVALID, "mamba2 cpu: threads must be >= 0 (got %d)", (int)desc->threads);
        goto fail;
    }

    m = calloc(1, sizeof *m);
    if (!m) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "mamba2 cpu: out of memory for the model");
        goto fail;
    }
    m->dtype = desc->dtype;
    m->cfg = *(const struct mc_mamba2_config *)desc->config;
    m->D = m->cfg.hidden_size;
    m->H = m->cfg.num_heads;
    m->P = m->cfg.head_dim;
    m->N = m->cfg.state_size;
    m->G = m->cfg.n_groups;
    m->K = m->cfg.conv_kernel;
    m->inner = m->H * m->P;
    m->GN = m->G * m->N;
    m->C = m->inner + 2 * m->GN;
    m->proj = m->inner + m->C + m->H;
    m->R = m->H / m->G;
    m->gs = m->cfg.norm_group_size;
    m->chunk = desc->chunk_size > 0 ? desc->chunk_size : m->cfg.chunk_size > 0 ? m->cfg.chunk_size : M2C_DEFAULT_CHUNK;
    m->threads = mc_cpu_threads_resolve(desc->threads);
    m->lo = (float)m->cfg.time_step_limit[0];
    m->hi = (float)m->cfg.time_step_limit[1];
    m->eps = (float)m->cfg.layer_norm_epsilon;

    const struct mc_cpu_weight_spec spec[M2C_COUNT] = {
        [M2C_IN_PROJ] = {"in_proj.weight", 1, 2, {m->proj, m->D, 0}},
        [M2C_IN_PROJ_BIAS] = {"in_proj.bias", m->cfg.use_bias, 1, {m->proj, 0, 0}},
        [M2C_CONV] = {"conv1d.weight", 1, 3, {m->C, 1, m->K}},
        [M2C_CONV_BIAS] = {"conv1d.bias", m->cfg.use_conv_bias, 1, {m->C, 0, 0}},
        [M2C_DT_BIAS] = {"dt_bias", 1, 1, {m->H, 0, 0}},
        [M2C_A_LOG] = {"A_log", 1, 1, {m->H, 0, 0}},
        [M2C_D] = {"D", 1, 1, {m->H, 0, 0}},
        [M2C_NORM] = {"norm.weight", 1, 1, {m->inner, 0, 0}},
        [M2C_OUT_PROJ] = {"out_proj.weight", 1, 2, {m->D, m->inner, 0}},
        [M2C_OUT_PROJ_BIAS] = {"out_proj.bias", m->cfg.use_bias, 1, {m->D, 0, 0}},
    };
    if ((st = mc_cpu_weights_load(desc, spec, M2C_COUNT, m->w, "mamba2 cpu", msg)) != MC_BACKEND_OK)
        goto fail;
    m->conv_kc = malloc((size_t)(m->K * m->C) * sizeof *m->conv_kc);
    m->a_neg = malloc((size_t)m->H * sizeof *m->a_neg);
    if (!m->conv_kc || !m->a_neg) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "mamba2 cpu: out of memory for the model");
        goto fail;
    }
    mc_cpu_conv_weight_kc(m->C, m->K, m->w[M2C_CONV], m->conv_kc);
    for (int64_t h = 0; h < m->H; h++)
        m->a_neg[h] = -expf(m->w[M2C_A_LOG][h]);
    *model = m;
    return MC_BACKEND_OK;

fail:
    m2c_model_destroy(m);
    return st;
}

/* ---- cache ------------------------------------------------------------------------------------- */

static size_t m2c_window_elems(const struct mc_model *m)
{
    return (size_t)(m->C * m->K);
}
static size_t m2c_state_elems(const struct mc_model *m)
{
    return (size_t)(m->H * m->P * m->N);
}

static void m2c_cache_free(struct mc_model *model, struct mc_cache *cache)
{
    (void)model;
    if (!cache)
        return;
    free(cache->state);
    free(cache->window);
    free(cache);
}

static enum mc_backend_status m2c_cache_alloc(struct mc_model *model, int64_t batch, struct mc_cache **cache,
                                              struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    struct mc_cache *c = NULL;
    if (!model || !cache) {
        st = mc_cpu_fail(msg, MC_BACKEND_INVALID, "mamba2 cpu: cache_alloc needs a model and an output handle");
        goto fail;
    }
    *cache = NULL;
    if (batch < 1 || batch > INT_MAX) {
        st = mc_cpu_fail(msg, MC_BACKEND_INVALID, "mamba2 cpu: cache batch must be in [1, %d] (got %lld)", INT_MAX,
                         (long long)batch);
        goto fail;
    }
    c = calloc(1, sizeof *c);
    if (!c) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "mamba2 cpu: out of memory for a cache");
        goto fail;
    }
    c->batch = batch;
    c->window = calloc((size_t)batch * m2c_window_elems(model), sizeof(float));
    c->state = calloc((size_t)batch * m2c_state_elems(model), sizeof(float));
    if (!c->window || !c->state) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "mamba2 cpu: out of memory for a cache of batch %lld",
                         (long long)batch);
        goto fail;
    }
    *cache = c;
    return MC_BACKEND_OK;

fail:
    m2c_cache_free(model, c);
    return st;
}

static enum mc_backend_status m2c_cache_copy(struct mc_model *model, struct mc_cache *dst, const struct mc_cache *src,
                                             struct mc_msg *msg)
{
    if (!model || !dst || !src)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID, "mamba2 cpu: cache_copy needs a model, a destination and a source");
    if (dst->batch != src->batch)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID,
                           "mamba2 cpu: cache_copy batch mismatch (destination %lld, source %lld)",
                           (long long)dst->batch, (long long)src->batch);
    if (dst == src)
        return MC_BACKEND_OK;
    memcpy(dst->window, src->window, (size_t)src->batch * m2c_window_elems(model) * sizeof(float));
    memcpy(dst->state, src->state, (size_t)src->batch * m2c_state_elems(model) * sizeof(float));
    dst->primed = src->primed;
    return MC_BACKEND_OK;
}

static enum mc_backend_status m2c_cache_export(struct mc_model *model, const struct mc_cache *cache, void *conv_state,
                                               void *recurrent_state, struct mc_msg *msg)
{
    if (!model || !cache)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID, "mamba2 cpu: cache_export needs a model and a cache");
    /* f32 for every storage dtype; a NULL output is skipped */
    if (conv_state) {
        for (int64_t b = 0; b < cache->batch; b++)
            mc_cpu_window_to_ck(model->C, model->K, cache->window + (size_t)b * m2c_window_elems(model),
                                (float *)conv_state + (size_t)b * m2c_window_elems(model));
    }
    if (recurrent_state)
        memcpy(recurrent_state, cache->state, (size_t)cache->batch * m2c_state_elems(model) * sizeof(float));
    return MC_BACKEND_OK;
}

static enum mc_backend_status m2c_cache_import(struct mc_model *model, struct mc_cache *cache, const void *conv_state,
                                               const void *recurrent_state, struct mc_msg *msg)
{
    if (!model || !cache)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID, "mamba2 cpu: cache_import needs a model and a cache");
    if (!conv_state || !recurrent_state)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID,
                           "mamba2 cpu: cache_import needs conv_state [B][C][K] and recurrent_state [B][H][P][N] (f32)");
    for (int64_t b = 0; b < cache->batch; b++)
        mc_cpu_window_from_ck(model->C, model->K, (const float *)conv_state + (size_t)b * m2c_window_elems(model),
                              cache->window + (size_t)b * m2c_window_elems(model));
    memcpy(cache->state, recurrent_state, (size_t)cache->batch * m2c_state_elems(model) * sizeof(float));
    cache->primed = 1;
    return MC_BACKEND_OK;
}

/* ---- forward ----------------------------------------------------------------------------------- */

/* Everything a forward's parallel tasks read, and where they write. */
struct m2c_run {
    const struct mc_model *m;
    int64_t batch, len, Q; /* Q: the chunk length actually used, min(chunk, L) */
    const uint8_t *mask;   /* [B][L] or NULL */
    float *zx;             /* [B][L][proj]   in_proj output: z | xBC_raw | dt_raw */
    float *xbc;            /* [B][L][C]      after conv + SiLU: x | B | C */
    float *dt;             /* [B][L][H]      clamped softplus */
    float *hn;             /* [B][L][I]      core output y (then gated norm) */
    float *window;         /* [B][K][C] */
    float *state;          /* [B][H][P][N] */
    const int64_t *idx;    /* [B][L] real token positions of each row, in order */
    const int64_t *n_real; /* [B] */
    float *gram;           /* C·Bᵀ of every (row, group, chunk), q×q each, or NULL: computed per head */
    const int64_t *gram_off; /* [B] offset of row b's first Gram matrix in gram */
    float *scratch;        /* [workers][scratch_elems] */
    size_t scratch_elems;
};

static size_t m2c_scratch_elems(const struct mc_model *m, int64_t Q)
{
    /* E [Q][Q], G [Q][Q], Xd [Q][P], Bc [Q][N], Cc [Q][N], Bs [Q][N], Y [Q][P], acum [Q], a [Q] */
    return (size_t)(2 * Q * Q + 2 * Q * m->P + 3 * Q * m->N + 2 * Q);
}

/* Conv task: one batch row, conv without activation into xbc (SiLU comes in m2c_silu_task). */
static void m2c_conv_task(void *ctx, int64_t b, int worker)
{
    (void)worker;
    const struct m2c_run *r = ctx;
    const struct mc_model *m = r->m;
    const int64_t L = r->len;
    mc_cpu_conv_row(L, m->C, m->K, r->zx + b * L * m->proj + m->inner, m->proj, r->mask ? r->mask + b * L : NULL,
                    r->window + (size_t)b * m2c_window_elems(m), m->conv_kc, m->w[M2C_CONV_BIAS], 0,
                    r->xbc + b * L * m->C, m->C);
}

#define M2C_ROW_BLOCK 64

/* Elementwise task over a block of M2C_ROW_BLOCK token rows: SiLU of the conv output, dt. */
static void m2c_silu_dt_task(void *ctx, int64_t blk, int worker)
{
    (void)worker;
    const struct m2c_run *r = ctx;
    const struct mc_model *m = r->m;
    const int64_t M = r->batch * r->len, r0 = blk * M2C_ROW_BLOCK;
    const int64_t r1 = r0 + M2C_ROW_BLOCK < M ? r0 + M2C_ROW_BLOCK : M;
    const float *dt_bias = m->w[M2C_DT_BIAS];
    for (int64_t t = r0; t < r1; t++) {
        float *row = r->xbc + t * m->C;
        for (int64_t c = 0; c < m->C; c++)
            row[c] = mc_cpu_silu(row[c]);
        const float *raw = r->zx + t * m->proj + m->inner + m->C; /* [H] */
        float *dt = r->dt + t * m->H;
        for (int64_t h = 0; h < m->H; h++) {
            float v = mc_cpu_softplus(raw[h] + dt_bias[h]);
            if (v < m->lo)
                v = m->lo;
            if (v > m->hi)
                v = m->hi;
            dt[h] = v;
        }
    }
}

/* The direct recurrent step of one (row, head) for the real token at position t. */
static void m2c_step(const struct m2c_run *r, int64_t b, int64_t h, int64_t t, float *s)
{
    const struct mc_model *m = r->m;
    const int64_t P = m->P, N = m->N, g = h / m->R;
    const int64_t row = b * r->len + t;
    const float *xr = r->xbc + row * m->C;
    const float *restrict xh = xr + h * P;
    const float *restrict bg = xr + m->inner + g * N;
    const float *restrict cg = xr + m->inner + m->GN + g * N;
    const float dt = r->dt[row * m->H + h];
    const float decay = expf(dt * m->a_neg[h]);
    const float dskip = m->w[M2C_D][h];
    float *yo = r->hn + row * m->inner + h * P;
    for (int64_t p = 0; p < P; p++) {
        const float dx = dt * xh[p];
        float *restrict sp = s + p * N;
        float acc = 0.0f;
        for (int64_t n = 0; n < N; n++) {
            sp[n] = decay * sp[n] + dx * bg[n];
            acc += sp[n] * cg[n];
        }
        yo[p] = acc + dskip * xh[p];
    }
}


/* Chunked SSD of one (row b, head h) over the row's real tokens idx[0..n) (variants block above). */
static void m2c_chunk_core(const struct m2c_run *r, int64_t b, int64_t h, float *s, float *scratch)
{
    const struct mc_model *m = r->m;
    const int64_t P = m->P, N = m->N, Q = r->Q, g = h / m->R;
    const int64_t L = r->len, n = r->n_real[b];
    const int64_t *idx = r->idx + b * L;
    const float a_h = m->a_neg[h], dskip = m->w[M2C_D][h];

    float *E = scratch;        /* [Q][Q] segsum exponents, then exp */
    float *Gm = E + Q * Q;     /* [Q][Q] C·Bᵀ, then masked by exp(E) */
    float *Xd = Gm + Q * Q;    /* [Q][P] dt·x */
    float *Bc = Xd + Q * P;    /* [Q][N] */
    float *Cc = Bc + Q * N;    /* [Q][N] */
    float *Bs = Cc + Q * N;    /* [Q][N] B scaled by the decay to the chunk end */
    float *Y = Bs + Q * N;     /* [Q][P] */
    float *acum = Y + Q * P;   /* [Q] inclusive cumsum of a */
    float *av = acum + Q;      /* [Q] a = A·dt per token */

    for (int64_t c0 = 0; c0 < n; c0 += Q) {
        const int64_t q = n - c0 < Q ? n - c0 : Q;
        /* gather the chunk's rows */
        float run = 0.0f;
        for (int64_t l = 0; l < q; l++) {
            const int64_t row = b * L + idx[c0 + l];
            const float *xr = r->xbc + row * m->C;
            const float dt = r->dt[row * m->H + h];
            const float *restrict xh = xr + h * P;
            float *restrict xd = Xd + l * P;
            for (int64_t p = 0; p < P; p++)
                xd[p] = xh[p] * dt;
            memcpy(Bc + l * N, xr + m->inner + g * N, (size_t)N * sizeof(float));
            memcpy(Cc + l * N, xr + m->inner + m->GN + g * N, (size_t)N * sizeof(float));
            av[l] = a_h * dt;
            run += av[l];
            acum[l] = run;
        }
        /* stable masked segsum, exponentiated: E[l][s] = exp(Σ_{k=s+1..l} a_k) for s <= l, summed from
         * the diagonal leftwards (no difference of cumsums) */
        for (int64_t l = 0; l < q; l++) {
            float *restrict el = E + l * q;
            float acc = 0.0f;
            el[l] = 1.0f;
            for (int64_t s2 = l - 1; s2 >= 0; s2--) {
                acc += av[s2 + 1];
                el[s2] = expf(acc);
            }
        }
        /* G = Cc·Bcᵀ [q][q] (shared by the heads of a group when precomputed), masked:
         * G[l][s] *= exp(E[l][s]) for s <= l, 0 above */
        const float *gsrc = Gm;
        if (r->gram)
            gsrc = r->gram + r->gram_off[b] + (g * ((n + Q - 1) / Q) + c0 / Q) * Q * Q;
        else
            mc_cpu_sgemm(0, 1, q, q, N, 1.0f, Cc, N, Bc, N, 0.0f, Gm, q);
        for (int64_t l = 0; l < q; l++) {
            float *restrict gl = Gm + l * q;
            const float *restrict el = E + l * q;
            const float *gs = gsrc + l * q;
            for (int64_t s2 = 0; s2 <= l; s2++)
                gl[s2] = gs[s2] * el[s2];
            for (int64_t s2 = l + 1; s2 < q; s2++)
                gl[s2] = 0.0f;
        }
        /* state -> output: Y = (Cc·Sᵀ) scaled by exp(acum[l]) per row */
        mc_cpu_sgemm(0, 1, q, P, N, 1.0f, Cc, N, s, N, 0.0f, Y, P);
        for (int64_t l = 0; l < q; l++) {
            const float f = expf(acum[l]);
            float *restrict yl = Y + l * P;
            for (int64_t p = 0; p < P; p++)
                yl[p] *= f;
        }
        /* intra-chunk: Y += Gmasked·Xd */
        mc_cpu_sgemm(0, 0, q, P, q, 1.0f, Gm, q, Xd, P, 1.0f, Y, P);
        /* chunk state and inter-chunk step: S = exp(acum[q-1])·S + Xdᵀ·(decay_to_end ⊙ Bc) */
        const float *elast = E + (q - 1) * q; /* exp(Σ_{k=l+1..q-1} a_k) */
        for (int64_t l = 0; l < q; l++) {
            const float f = elast[l];
            const float *restrict bl = Bc + l * N;
            float *restrict bsl = Bs + l * N;
            for (int64_t k = 0; k < N; k++)
                bsl[k] = bl[k] * f;
        }
        mc_cpu_sgemm(1, 0, P, N, q, 1.0f, Xd, P, Bs, N, expf(acum[q - 1]), s, N);
        /* D skip and scatter to the token rows */
        for (int64_t l = 0; l < q; l++) {
            const int64_t row = b * L + idx[c0 + l];
            const float *restrict xh = r->xbc + row * m->C + h * P;
            const float *restrict yl = Y + l * P;
            float *restrict yo = r->hn + row * m->inner + h * P;
            for (int64_t p = 0; p < P; p++)
                yo[p] = yl[p] + dskip * xh[p];
        }
    }
}

/* Gram task: C·Bᵀ of one (row, group, chunk), over the row's real tokens; task numbers run over
 * rows, then groups, then chunks. */
static void m2c_gram_task(void *ctx, int64_t task, int worker)
{
    const struct m2c_run *r = ctx;
    const struct mc_model *m = r->m;
    const int64_t N = m->N, Q = r->Q, L = r->len;
    int64_t b = 0, rest = task;
    for (;; b++) {
        const int64_t per_row = m->G * ((r->n_real[b] + Q - 1) / Q);
        if (rest < per_row)
            break;
        rest -= per_row;
    }
    const int64_t n = r->n_real[b], nch = (n + Q - 1) / Q, g = rest / nch, c = rest % nch;
    const int64_t c0 = c * Q, q = n - c0 < Q ? n - c0 : Q;
    float *Bc = r->scratch + (size_t)worker * r->scratch_elems, *Cc = Bc + Q * N;
    for (int64_t l = 0; l < q; l++) {
        const float *xr = r->xbc + (b * L + r->idx[b * L + c0 + l]) * m->C;
        memcpy(Bc + l * N, xr + m->inner + g * N, (size_t)N * sizeof(float));
        memcpy(Cc + l * N, xr + m->inner + m->GN + g * N, (size_t)N * sizeof(float));
    }
    mc_cpu_sgemm(0, 1, q, q, N, 1.0f, Cc, N, Bc, N, 0.0f, r->gram + r->gram_off[b] + (g * nch + c) * Q * Q, q);
}

static void m2c_core_task(void *ctx, int64_t task, int worker)
{
    const struct m2c_run *r = ctx;
    const struct mc_model *m = r->m;
    const int64_t b = task / m->H, h = task % m->H;
    float *s = r->state + (size_t)b * m2c_state_elems(m) + (size_t)(h * m->P * m->N);
    if (r->n_real[b] == 1)
        m2c_step(r, b, h, r->idx[b * r->len], s);
    else if (r->n_real[b] > 1)
        m2c_chunk_core(r, b, h, s, r->scratch + (size_t)worker * r->scratch_elems);
}

/* Gated RMSNorm over a block of token rows (gate before norm, groups of gs); padding rows are left
 * alone (their output is set from out_proj.bias afterwards). */
static void m2c_norm_task(void *ctx, int64_t blk, int worker)
{
    (void)worker;
    const struct m2c_run *r = ctx;
    const struct mc_model *m = r->m;
    const int64_t M = r->batch * r->len, r0 = blk * M2C_ROW_BLOCK;
    const int64_t r1 = r0 + M2C_ROW_BLOCK < M ? r0 + M2C_ROW_BLOCK : M;
    const int64_t inner = m->inner, gs = m->gs;
    const float *w_norm = m->w[M2C_NORM];
    for (int64_t t = r0; t < r1; t++) {
        float *row = r->hn + t * inner;
        const float *z = r->zx + t * m->proj;
        if (r->mask && !r->mask[t]) {
            memset(row, 0, (size_t)inner * sizeof *row);
            continue;
        }
        for (int64_t j0 = 0; j0 < inner; j0 += gs) {
            float ss = 0.0f;
            for (int64_t i = j0; i < j0 + gs; i++) {
                row[i] = row[i] * mc_cpu_silu(z[i]);
                ss += row[i] * row[i];
            }
            const float rstd = 1.0f / sqrtf(ss / (float)gs + m->eps);
            for (int64_t i = j0; i < j0 + gs; i++)
                row[i] = row[i] * rstd * w_norm[i];
        }
    }
}

static enum mc_backend_status m2c_forward(struct mc_model *model, struct mc_cache *cache,
                                          const struct mc_forward_args *args, struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    const struct mc_model *m = model;
    float *tmp_window = NULL, *tmp_state = NULL;
    float *xf = NULL, *yf = NULL, *zx = NULL, *xbc = NULL, *dt = NULL, *hn = NULL, *scratch = NULL;
    int64_t *idx = NULL, *n_real = NULL, *gram_off = NULL;
    float *gram = NULL;

    if (!model || !args) {
        st = mc_cpu_fail(msg, MC_BACKEND_INVALID, "mamba2 cpu: forward needs a model and arguments");
        goto cleanup;
    }
    if (args->batch < 1 || args->len < 1) {
        st = mc_cpu_fail(msg, MC_BACKEND_INVALID, "mamba2 cpu: forward needs batch >= 1 and len >= 1 (got B=%lld L=%lld)",
                         (long long)args->batch, (long long)args->len);
        goto cleanup;
    }
    if (args->batch > INT_MAX / args->len) {
        st = mc_cpu_fail(msg, MC_BACKEND_INVALID, "mamba2 cpu: B*L = %lld*%lld exceeds the BLAS limit %d",
                         (long long)args->batch, (long long)args->len, INT_MAX);
        goto cleanup;
    }
    if (!args->x || !args->y) {
        st = mc_cpu_fail(msg, MC_BACKEND_INVALID, "mamba2 cpu: forward needs x [B][L][D] and y [B][L][D]");
        goto cleanup;
    }
    if (cache && cache->batch != args->batch) {
        st = mc_cpu_fail(msg, MC_BACKEND_INVALID, "mamba2 cpu: cache batch %lld does not match forward batch %lld",
                         (long long)cache->batch, (long long)args->batch);
        goto cleanup;
    }

    const int64_t Bsz = args->batch, L = args->len, M = Bsz * L;
    const int64_t Q = m->chunk < L ? m->chunk : L;
    const int workers = (int)(m->threads < Bsz * m->H ? m->threads : Bsz * m->H);
    const size_t scratch_elems = m2c_scratch_elems(m, Q);

    /* every allocation before the cache is touched, so a failure leaves it unchanged */
    if (m->dtype != MC_DTYPE_F32) {
        xf = malloc((size_t)(M * m->D) * sizeof *xf);
        yf = malloc((size_t)(M * m->D) * sizeof *yf);
    }
    zx = malloc((size_t)(M * m->proj) * sizeof *zx);
    xbc = malloc((size_t)(M * m->C) * sizeof *xbc);
    dt = malloc((size_t)(M * m->H) * sizeof *dt);
    hn = malloc((size_t)(M * m->inner) * sizeof *hn);
    idx = malloc((size_t)M * sizeof *idx);
    gram_off = malloc((size_t)Bsz * sizeof *gram_off);
    n_real = malloc((size_t)Bsz * sizeof *n_real);
    scratch = malloc((size_t)workers * scratch_elems * sizeof *scratch);
    if (!cache) {
        tmp_window = calloc((size_t)Bsz * m2c_window_elems(m), sizeof(float));
        tmp_state = calloc((size_t)Bsz * m2c_state_elems(m), sizeof(float));
    }
    if ((m->dtype != MC_DTYPE_F32 && (!xf || !yf)) || !zx || !xbc || !dt || !hn || !idx || !n_real || !gram_off || !scratch ||
        (!cache && (!tmp_window || !tmp_state))) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "mamba2 cpu forward: out of memory for B=%lld L=%lld scratch",
                         (long long)Bsz, (long long)L);
        goto cleanup;
    }
    if (cache && !cache->primed) { /* case (a) with a cache: start from zeros, fill it */
        memset(cache->window, 0, (size_t)Bsz * m2c_window_elems(m) * sizeof(float));
        memset(cache->state, 0, (size_t)Bsz * m2c_state_elems(m) * sizeof(float));
    }

    const float *x = args->x;
    float *y = args->y;
    if (m->dtype != MC_DTYPE_F32) {
        mc_cpu_to_f32(m->dtype, args->x, xf, (size_t)(M * m->D));
        x = xf;
        y = yf;
    }
    for (int64_t b = 0; b < Bsz; b++) {
        int64_t cnt = 0;
        for (int64_t t = 0; t < L; t++)
            if (!args->mask || args->mask[b * L + t])
                idx[b * L + cnt++] = t;
        n_real[b] = cnt;
    }
    /* One Gram matrix C·Bᵀ per (row, group, chunk) when the heads of a group share it (H > G) and it
     * fits M2C_GRAM_MAX_BYTES; otherwise each head computes its own (the same sgemm on the same data:
     * the same bits). Allocated after the cache may have been reset, so its failure falls back too. */
    int64_t n_gram = 0, gram_elems = 0;
    for (int64_t b = 0; b < Bsz; b++) {
        const int64_t nch = n_real[b] > 1 ? (n_real[b] + Q - 1) / Q : 0; /* one token: direct step */
        gram_off[b] = gram_elems;
        n_gram += m->G * nch;
        gram_elems += m->G * nch * Q * Q;
    }
    if (m->R > 1 && n_gram > 0 && (size_t)gram_elems <= M2C_GRAM_MAX_BYTES / sizeof(float))
        gram = malloc((size_t)gram_elems * sizeof *gram);

    struct m2c_run run = {
        .m = m,
        .batch = Bsz,
        .len = L,
        .Q = Q,
        .mask = args->mask,
        .zx = zx,
        .xbc = xbc,
        .dt = dt,
        .hn = hn,
        .window = cache ? cache->window : tmp_window,
        .state = cache ? cache->state : tmp_state,
        .idx = idx,
        .n_real = n_real,
        .gram = gram,
        .gram_off = gram_off,
        .scratch = scratch,
        .scratch_elems = scratch_elems,
    };
    const int64_t row_blocks = (M + M2C_ROW_BLOCK - 1) / M2C_ROW_BLOCK;

    mc_cpu_linear_tiled(M, m->proj, m->D, x, m->D, m->w[M2C_IN_PROJ], m->w[M2C_IN_PROJ_BIAS], zx, m->proj,
                        m->threads);
    mc_cpu_parallel_for(Bsz, m2c_conv_task, &run, m->threads);
    mc_cpu_parallel_for(row_blocks, m2c_silu_dt_task, &run, m->threads);
    if (gram)
        mc_cpu_parallel_for(n_gram, m2c_gram_task, &run, workers);
    mc_cpu_parallel_for(Bsz * m->H, m2c_core_task, &run, workers);
    mc_cpu_parallel_for(row_blocks, m2c_norm_task, &run, m->threads);
    mc_cpu_linear_tiled(M, m->D, m->inner, hn, m->inner, m->w[M2C_OUT_PROJ], NULL, y, m->D, m->threads);
    const float *b_out = m->w[M2C_OUT_PROJ_BIAS];
    for (int64_t t = 0; t < M; t++) {
        const int real_token = !args->mask || args->mask[t];
        float *yr = y + t * m->D;
        for (int64_t j = 0; j < m->D; j++) {
            const float bias = b_out ? b_out[j] : 0.0f;
            yr[j] = real_token ? yr[j] + bias : bias;
        }
    }
    if (m->dtype != MC_DTYPE_F32)
        mc_cpu_from_f32(m->dtype, yf, args->y, (size_t)(M * m->D));
    if (cache)
        cache->primed = 1;

cleanup:
    free(tmp_state);
    free(tmp_window);
    free(scratch);
    free(gram);
    free(gram_off);
    free(n_real);
    free(idx);
    free(hn);
    free(dt);
    free(xbc);
    free(zx);
    free(yf);
    free(xf);
    return st;
}

/* ---- the core alone (cpu.h: mc_cpu_mamba2_core) ----------------------------------------------- */

/* Conv + SiLU of one batch row of the core-only entry (the forward's conv task reads in_proj rows). */
struct m2c_core_conv {
    const struct mc_cpu_mamba2_core_args *a;
    int64_t C;
    const float *conv_kc;
    float *window; /* [B][K][C] */
    float *xbc;    /* [B][L][C] */
};

static void m2c_core_conv_task(void *ctx, int64_t b, int worker)
{
    (void)worker;
    const struct m2c_core_conv *cc = ctx;
    const int64_t L = cc->a->len, C = cc->C, K = cc->a->conv_kernel;
    mc_cpu_conv_row(L, C, K, cc->a->xbc + b * L * C, C, NULL, cc->window + b * K * C, cc->conv_kc, NULL, 1,
                    cc->xbc + b * L * C, C);
}

enum mc_backend_status mc_cpu_mamba2_core(const struct mc_cpu_mamba2_core_args *a, struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    float *conv_kc = NULL, *window = NULL, *xbc = NULL, *a_neg = NULL, *dskip = NULL, *scratch = NULL, *gram = NULL;
    int64_t *idx = NULL, *n_real = NULL, *gram_off = NULL;
    if (!a || !a->xbc || !a->dt || !a->a || !a->state || !a->y)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID, "mamba2 cpu core: needs xbc, dt, a, state and y");
    if (a->batch < 1 || a->len < 1 || a->heads < 1 || a->head_dim < 1 || a->state_size < 1 || a->groups < 1 ||
        a->conv_kernel < 1 || a->conv_kernel > MC_CPU_CONV_MAX_K || a->chunk < 0 || a->heads % a->groups != 0 ||
        a->heads > M2C_MAX_DIM || a->head_dim > M2C_MAX_DIM || a->state_size > M2C_MAX_DIM ||
        a->batch > INT_MAX / a->len)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID,
                           "mamba2 cpu core: bad shape B=%lld L=%lld H=%lld P=%lld N=%lld G=%lld K=%lld chunk=%lld",
                           (long long)a->batch, (long long)a->len, (long long)a->heads, (long long)a->head_dim,
                           (long long)a->state_size, (long long)a->groups, (long long)a->conv_kernel,
                           (long long)a->chunk);
    struct mc_model m = {0};
    m.H = a->heads;
    m.P = a->head_dim;
    m.N = a->state_size;
    m.G = a->groups;
    m.K = a->conv_kernel;
    m.inner = m.H * m.P;
    m.GN = m.G * m.N;
    m.C = m.inner + 2 * m.GN;
    m.R = m.H / m.G;
    m.chunk = a->chunk > 0 ? a->chunk : M2C_DEFAULT_CHUNK;
    m.threads = mc_cpu_threads_resolve(a->threads);
    const int64_t Bsz = a->batch, L = a->len, M = Bsz * L, Q = m.chunk < L ? m.chunk : L;
    const int workers = (int)(m.threads < Bsz * m.H ? m.threads : Bsz * m.H);
    const size_t scratch_elems = m2c_scratch_elems(&m, Q);

    a_neg = malloc((size_t)m.H * sizeof *a_neg);
    dskip = calloc((size_t)m.H, sizeof *dskip);
    idx = malloc((size_t)M * sizeof *idx);
    n_real = malloc((size_t)Bsz * sizeof *n_real);
    gram_off = malloc((size_t)Bsz * sizeof *gram_off);
    scratch = malloc((size_t)workers * scratch_elems * sizeof *scratch);
    if (a->conv_weight) {
        conv_kc = malloc((size_t)(m.K * m.C) * sizeof *conv_kc);
        xbc = malloc((size_t)(M * m.C) * sizeof *xbc);
        window = a->window ? a->window : calloc((size_t)(Bsz * m.K * m.C), sizeof *window);
    }
    if (!a_neg || !dskip || !idx || !n_real || !gram_off || !scratch || (a->conv_weight && (!conv_kc || !xbc || !window))) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "mamba2 cpu core: out of memory for B=%lld L=%lld", (long long)Bsz,
                         (long long)L);
        goto cleanup;
    }
    memcpy(a_neg, a->a, (size_t)m.H * sizeof *a_neg);
    if (a->d)
        memcpy(dskip, a->d, (size_t)m.H * sizeof *dskip);
    m.a_neg = a_neg;
    m.w[M2C_D] = dskip;
    for (int64_t b = 0; b < Bsz; b++) {
        for (int64_t t = 0; t < L; t++)
            idx[b * L + t] = t;
        n_real[b] = L;
        gram_off[b] = 0;
    }
    if (a->conv_weight) {
        mc_cpu_conv_weight_kc(m.C, m.K, a->conv_weight, conv_kc);
        struct m2c_core_conv cc = {.a = a, .C = m.C, .conv_kc = conv_kc, .window = window, .xbc = xbc};
        mc_cpu_parallel_for(Bsz, m2c_core_conv_task, &cc, m.threads);
    }
    /* the shared C·Bᵀ per (row, group, chunk), as in the forward; per head when it does not fit */
    const int64_t nch = L > 1 ? (L + Q - 1) / Q : 0, n_gram = Bsz * m.G * nch;
    for (int64_t b = 0; b < Bsz; b++)
        gram_off[b] = b * m.G * nch * Q * Q;
    if (m.R > 1 && n_gram > 0 && (size_t)(n_gram * Q * Q) <= M2C_GRAM_MAX_BYTES / sizeof(float))
        gram = malloc((size_t)(n_gram * Q * Q) * sizeof *gram);
    struct m2c_run run = {
        .m = &m,
        .batch = Bsz,
        .len = L,
        .Q = Q,
        .xbc = a->conv_weight ? xbc : (float *)(uintptr_t)a->xbc, /* read only */
        .dt = (float *)(uintptr_t)a->dt,                          /* read only */
        .hn = a->y,
        .state = a->state,
        .idx = idx,
        .n_real = n_real,
        .gram = gram,
        .gram_off = gram_off,
        .scratch = scratch,
        .scratch_elems = scratch_elems,
    };
    if (gram)
        mc_cpu_parallel_for(n_gram, m2c_gram_task, &run, workers);
    mc_cpu_parallel_for(Bsz * m.H, m2c_core_task, &run, workers);

cleanup:
    if (window != a->window)
        free(window);
    free(xbc);
    free(conv_kc);
    free(gram);
    free(scratch);
    free(gram_off);
    free(n_real);
    free(idx);
    free(dskip);
    free(a_neg);
    return st;
}

static const struct mc_backend_ops m2c_ops = {
    .abi_version = MIXCHECK_ABI_VERSION,
    .struct_size = sizeof(struct mc_backend_ops),
    .name = "cpu",
    .device = "cpu",
    .family = MC_FAMILY_MAMBA2,
    .dtypes = MC_DTYPE_BIT(MC_DTYPE_F32) | MC_DTYPE_BIT(MC_DTYPE_BF16) | MC_DTYPE_BIT(MC_DTYPE_F16),
    .caps = MC_CAP_CHUNK_SIZE | MC_CAP_THREADS,
    .model_create = m2c_model_create,
    .model_destroy = m2c_model_destroy,
    .cache_alloc = m2c_cache_alloc,
    .cache_copy = m2c_cache_copy,
    .cache_free = m2c_cache_free,
    .cache_export = m2c_cache_export,
    .cache_import = m2c_cache_import,
    .forward = m2c_forward,
};

const struct mc_backend_ops *mc_cpu_mamba2_ops(void)
{
    return &m2c_ops;
}
