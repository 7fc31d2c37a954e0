/*
 * mamba1.c — the optimized CPU Mamba1 mixer (backend "cpu", device "cpu"): HF `MambaMixer` with
 * mixcheck's semantics of docs/semantics.md §A — a multi-token forward on a primed cache convolves with the
 * cached K-column window and starts the scan from the cached state (§A.1, §3.5) — computed as the
 * selective scan of §3.3. Validated against the reference in tests/cpu/test_cpu_mamba1.c.
 *
 * Variants (all in this file):
 *   - m1c_scan_task    the selective scan of one (batch row, block of M1C_CHAN_BLOCK channels) over the
 *                      row's real tokens: per token and channel, delta, delta·u and the gate are
 *                      computed once (hoisted out of the N loop); the N loop is split into
 *                      e[n] = exp(delta·A[i][n]) (the only per-element exp: A varies with n; vmath.h's
 *                      array exp over the N entries), the state
 *                      update s = e·s + du·B (vectorizes), and the C dot product in M1C_LANES
 *                      independent partial sums (vectorizes; a fixed order, so no thread dependence).
 * Front and back end as the reference: in_proj, x_proj, dt_proj and out_proj on sgemm over all B·L
 * tokens; fused causal conv + SiLU over the cached window (common.h); delta = softplus(dt_proj(dt_low)
 * + dt_proj.bias) (the bias added once); y = (h·C + D·u)·silu(z).
 *
 * Masks: a padding token never reaches the window or the state, and its output row is out_proj.bias
 * (zeros without use_bias). Threads: mc_cpu_parallel_for over batch rows (conv) and (batch, channel
 * block) pairs (scan), each task owning its outputs: bitwise identical for any thread count.
 * Dtypes: weights, x and y as f32, bf16 or f16; compute, cache and cache_export in f32.
 *
 * Dimension letters: B batch, L tokens, D hidden, I intermediate (= conv channels; named `inner`:
 * <cblas.h> defines I), N state, K conv width, R time_step_rank, xdim = R + 2N x_proj rows.
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

#define M1C_WHO "mamba1 cpu"
#define M1C_MAX_DIM 65536
#define M1C_CHAN_BLOCK 16 /* channels per scan task */
#define M1C_LANES 8       /* partial sums of the C dot product */
#define M1C_ROW_BLOCK 64  /* token rows per elementwise task */

enum m1c_slot {
    M1C_IN_PROJ,
    M1C_IN_PROJ_BIAS,
    M1C_CONV,
    M1C_CONV_BIAS,
    M1C_X_PROJ,
    M1C_DT_PROJ,
    M1C_DT_PROJ_BIAS,
    M1C_A_LOG,
    M1C_D,
    M1C_OUT_PROJ,
    M1C_OUT_PROJ_BIAS,
    M1C_DT_NORM, /* inner_norms WEIGHTED (Jamba) only */
    M1C_B_NORM,
    M1C_C_NORM,
    M1C_COUNT,
};

struct mc_model {
    enum mc_dtype dtype; /* storage of x and y */
    struct mc_mamba1_config cfg;
    int64_t D, inner, N, K, R, xdim;
    int threads;
    float *w[M1C_COUNT]; /* f32 copies; NULL when absent */
    float *conv_kc;      /* [K][I] conv1d.weight transposed */
    float *a_neg;        /* [I][N] A = -exp(A_log) */
    struct mc_cpu_cache_shape cache_shape; /* window [B][K][I], state [B][I][N] */
    struct mc_cpu_probes *probes;          /* stage probes (probe.h), NULL until probe_enable */
};

/* ---- model ------------------------------------------------------------------------------------- */

static enum mc_backend_status m1c_config_validate(const struct mc_mamba1_config *c, struct mc_msg *msg)
{
    enum mc_backend_status st;
    if ((st = mc_cpu_check_dim(M1C_WHO, "hidden_size", c->hidden_size, M1C_MAX_DIM, msg)) ||
        (st = mc_cpu_check_dim(M1C_WHO, "intermediate_size", c->intermediate_size, M1C_MAX_DIM, msg)) ||
        (st = mc_cpu_check_dim(M1C_WHO, "state_size", c->state_size, M1C_MAX_DIM, msg)) ||
        (st = mc_cpu_check_dim(M1C_WHO, "conv_kernel", c->conv_kernel, M1C_MAX_DIM, msg)) ||
        (st = mc_cpu_check_dim(M1C_WHO, "time_step_rank", c->time_step_rank, M1C_MAX_DIM, msg)))
        return st;
    if ((c->use_bias != 0 && c->use_bias != 1) || (c->use_conv_bias != 0 && c->use_conv_bias != 1))
        return mc_cpu_fail(msg, MC_BACKEND_INVALID,
                           "mamba1 cpu config: 'use_bias' and 'use_conv_bias' must be 0 or 1 (got %d, %d)",
                           (int)c->use_bias, (int)c->use_conv_bias);
    if (c->conv_kernel > MC_CPU_CONV_MAX_K)
        return mc_cpu_fail(msg, MC_BACKEND_UNSUPPORTED, "mamba1 cpu: conv_kernel %lld is not supported (at most %d)",
                           (long long)c->conv_kernel, MC_CPU_CONV_MAX_K);
    if (c->inner_norms < MC_M1_INNER_NORMS_NONE || c->inner_norms > MC_M1_INNER_NORMS_WEIGHTED ||
        (c->inner_norms != MC_M1_INNER_NORMS_NONE && (!(c->mixer_rms_eps > 0.0) || !isfinite(c->mixer_rms_eps))))
        return mc_cpu_fail(msg, MC_BACKEND_INVALID,
                           "mamba1 cpu config: 'inner_norms' must be 0, 1 or 2 and 'mixer_rms_eps' finite and > 0 with "
                           "them (got %lld, %g)",
                           (long long)c->inner_norms, c->mixer_rms_eps);
    return MC_BACKEND_OK;
}

static void m1c_model_destroy(struct mc_model *model)
{
    if (!model)
        return;
    mc_cpu_weights_free(model->w, M1C_COUNT);
    free(model->conv_kc);
    free(model->a_neg);
    mc_cpu_probes_free(model->probes);
    free(model);
}

static enum mc_backend_status m1c_model_create(const struct mc_model_desc *desc, struct mc_model **model,
                                               struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    struct mc_model *m = NULL;

    if ((st = mc_cpu_model_desc_check(desc, model, MC_FAMILY_MAMBA1, "mamba1", M1C_WHO, msg)) != MC_BACKEND_OK)
        goto fail;
    if ((st = m1c_config_validate(desc->config, msg)) != MC_BACKEND_OK)
        goto fail;
    if ((st = mc_cpu_threads_check(desc, M1C_WHO, msg)) != MC_BACKEND_OK)
        goto fail;

    m = calloc(1, sizeof *m);
    if (!m) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "mamba1 cpu: out of memory for the model");
        goto fail;
    }
    m->dtype = desc->dtype;
    m->cfg = *(const struct mc_mamba1_config *)desc->config;
    m->D = m->cfg.hidden_size;
    m->inner = m->cfg.intermediate_size;
    m->N = m->cfg.state_size;
    m->K = m->cfg.conv_kernel;
    m->R = m->cfg.time_step_rank;
    m->xdim = m->R + 2 * m->N;
    m->threads = mc_cpu_threads_resolve(desc->threads);
    m->cache_shape = mc_cpu_cache_shape_kc(m->inner, m->K, (size_t)(m->inner * m->N),
                                           "conv_state [B][C][K] and recurrent_state [B][I][N] (f32)");

    const struct mc_cpu_weight_spec spec[M1C_COUNT] = {
        [M1C_IN_PROJ] = {"in_proj.weight", 1, 2, {2 * m->inner, m->D, 0}},
        [M1C_IN_PROJ_BIAS] = {"in_proj.bias", m->cfg.use_bias, 1, {2 * m->inner, 0, 0}},
        [M1C_CONV] = {"conv1d.weight", 1, 3, {m->inner, 1, m->K}},
        [M1C_CONV_BIAS] = {"conv1d.bias", m->cfg.use_conv_bias, 1, {m->inner, 0, 0}},
        [M1C_X_PROJ] = {"x_proj.weight", 1, 2, {m->xdim, m->inner, 0}},
        [M1C_DT_PROJ] = {"dt_proj.weight", 1, 2, {m->inner, m->R, 0}},
        [M1C_DT_PROJ_BIAS] = {"dt_proj.bias", 1, 1, {m->inner, 0, 0}},
        [M1C_A_LOG] = {"A_log", 1, 2, {m->inner, m->N, 0}},
        [M1C_D] = {"D", 1, 1, {m->inner, 0, 0}},
        [M1C_OUT_PROJ] = {"out_proj.weight", 1, 2, {m->D, m->inner, 0}},
        [M1C_OUT_PROJ_BIAS] = {"out_proj.bias", m->cfg.use_bias, 1, {m->D, 0, 0}},
        [M1C_DT_NORM] = {"dt_layernorm.weight", m->cfg.inner_norms == MC_M1_INNER_NORMS_WEIGHTED, 1, {m->R, 0, 0}},
        [M1C_B_NORM] = {"b_layernorm.weight", m->cfg.inner_norms == MC_M1_INNER_NORMS_WEIGHTED, 1, {m->N, 0, 0}},
        [M1C_C_NORM] = {"c_layernorm.weight", m->cfg.inner_norms == MC_M1_INNER_NORMS_WEIGHTED, 1, {m->N, 0, 0}},
    };
    if ((st = mc_cpu_weights_load(desc, spec, M1C_COUNT, m->w, "mamba1 cpu", msg)) != MC_BACKEND_OK)
        goto fail;
    m->conv_kc = malloc((size_t)(m->K * m->inner) * sizeof *m->conv_kc);
    m->a_neg = malloc((size_t)(m->inner * m->N) * sizeof *m->a_neg);
    if (!m->conv_kc || !m->a_neg) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "mamba1 cpu: out of memory for the model");
        goto fail;
    }
    mc_cpu_conv_weight_kc(m->inner, m->K, m->w[M1C_CONV], m->conv_kc);
    for (int64_t k = 0; k < m->inner * m->N; k++)
        m->a_neg[k] = -expf(m->w[M1C_A_LOG][k]);
    *model = m;
    return MC_BACKEND_OK;

fail:
    m1c_model_destroy(m);
    return st;
}
/* ---- cache ------------------------------------------------------------------------------------- */

static size_t m1c_window_elems(const struct mc_model *m)
{
    return (size_t)(m->inner * m->K);
}

MC_CPU_CACHE_OPS(m1c, M1C_WHO)

/* ---- forward ----------------------------------------------------------------------------------- */

/* Everything a forward's parallel tasks read, and where they write. */
struct m1c_run {
    const struct mc_model *m;
    int64_t batch, len;
    const uint8_t *mask; /* [B][L] or NULL */
    float *xz;           /* [B][L][2I]    in_proj output: xh | z; NULL = no z gate (the core alone) */
    float *xc;           /* [B][L][I]     after conv + SiLU (0 on padding rows) */
    float *dbc;          /* [B][L][xdim]  x_proj output: dt_low | B | C */
    float *delta;        /* [B][L][I]     dt_proj(dt_low), then softplus(· + dt_proj.bias) */
    float *yg;           /* [B][L][I]     gated scan output */
    float *window;       /* [B][K][I] */
    float *state;        /* [B][I][N] */
    float *scratch;      /* [workers][N] */
    float *scan_out;     /* [B][L][I] the stage probe of the ungated scan output (probe.h), or NULL */
    /* the packed call: batch 1, len T, row b of the tasks is sequence b, window and state above are
     * the pool's, indexed by slot; NULL for a batched forward */
    const struct mc_packed_args *pk;
};

/* Row b of a forward's tasks: its tokens [m1c_row_start, + m1c_row_len) on the token axis and its
 * window / state row. A batched forward's row b is batch row b; a packed call's is sequence b on the
 * packed axis, with its slot, so every per-row step restarts at the sequence boundaries. */
static int64_t m1c_row_start(const struct m1c_run *r, int64_t b)
{
    return r->pk ? r->pk->cu_seqlens[b] : b * r->len;
}
static int64_t m1c_row_len(const struct m1c_run *r, int64_t b)
{
    return r->pk ? r->pk->cu_seqlens[b + 1] - r->pk->cu_seqlens[b] : r->len;
}
static size_t m1c_row_slot(const struct m1c_run *r, int64_t b)
{
    return (size_t)(r->pk ? r->pk->slots[b] : b);
}

static void m1c_conv_task(void *ctx, int64_t b, int worker)
{
    (void)worker;
    const struct m1c_run *r = ctx;
    const struct mc_model *m = r->m;
    const int64_t t0 = m1c_row_start(r, b), n = m1c_row_len(r, b), inner = m->inner;
    mc_cpu_conv_row(n, inner, m->K, r->xz + t0 * 2 * inner, 2 * inner, r->mask ? r->mask + t0 : NULL,
                    r->window + m1c_row_slot(r, b) * m1c_window_elems(m), m->conv_kc, m->w[M1C_CONV_BIAS], 1,
                    r->xc + t0 * inner, inner);
}

/* delta = softplus(dt_proj(dt_low) + dt_proj.bias), once per (token, channel), over a row block. */
static void m1c_delta_task(void *ctx, int64_t blk, int worker)
{
    (void)worker;
    const struct m1c_run *r = ctx;
    const struct mc_model *m = r->m;
    const int64_t M = r->batch * r->len, r0 = blk * M1C_ROW_BLOCK;
    const int64_t r1 = r0 + M1C_ROW_BLOCK < M ? r0 + M1C_ROW_BLOCK : M;
    const float *b_dt = m->w[M1C_DT_PROJ_BIAS];
    for (int64_t t = r0; t < r1; t++) {
        float *d = r->delta + t * m->inner;
        for (int64_t i = 0; i < m->inner; i++)
            d[i] = mc_cpu_softplus(d[i] + b_dt[i]);
    }
}

/* Selective scan of one (row b, channel block) over the row's real tokens (variants block above). */
static void m1c_scan_task(void *ctx, int64_t task, int worker)
{
    const struct m1c_run *r = ctx;
    const struct mc_model *m = r->m;
    const int64_t inner = m->inner, N = m->N, xdim = m->xdim;
    const int64_t n_blocks = (inner + M1C_CHAN_BLOCK - 1) / M1C_CHAN_BLOCK;
    const int64_t b = task / n_blocks, i0 = (task % n_blocks) * M1C_CHAN_BLOCK;
    const int64_t i1 = i0 + M1C_CHAN_BLOCK < inner ? i0 + M1C_CHAN_BLOCK : inner;
    const int64_t t0 = m1c_row_start(r, b), L = m1c_row_len(r, b);
    const size_t slot = m1c_row_slot(r, b);
    const float *d_skip = m->w[M1C_D];
    float *restrict e = r->scratch + (size_t)worker * (size_t)N; /* [N] exp(delta·A) */
    for (int64_t t = 0; t < L; t++) {
        const int64_t row = t0 + t;
        float *yo = r->yg + row * inner;
        if (r->mask && !r->mask[row]) {
            for (int64_t i = i0; i < i1; i++)
                yo[i] = 0.0f;
            continue;
        }
        const float *restrict bm = r->dbc + row * xdim + m->R;
        const float *restrict cm = bm + N;
        for (int64_t i = i0; i < i1; i++) {
            const float d = r->delta[row * inner + i], u = r->xc[row * inner + i];
            const float du = d * u;
            const float *restrict a = m->a_neg + i * N;
            float *restrict s = r->state + (slot * (size_t)inner + (size_t)i) * (size_t)N;
            for (int64_t n = 0; n < N; n++)
                e[n] = d * a[n];
            mc_cpu_vexp(e, N);
            for (int64_t n = 0; n < N; n++)
                s[n] = e[n] * s[n] + du * bm[n];
            float lane[M1C_LANES] = {0};
            int64_t n = 0;
            for (; n + M1C_LANES <= N; n += M1C_LANES)
                for (int k = 0; k < M1C_LANES; k++)
                    lane[k] += s[n + k] * cm[n + k];
            for (int k = 0; n < N; n++, k++)
                lane[k] += s[n] * cm[n];
            float acc = 0.0f;
            for (int k = 0; k < M1C_LANES; k++)
                acc += lane[k];
            yo[i] = acc + d_skip[i] * u;
        }
        if (r->scan_out)
            memcpy(r->scan_out + row * inner + i0, yo + i0, (size_t)(i1 - i0) * sizeof *yo);
        if (r->xz) /* the gate y·silu(z) over the block; no xz: the core alone */
            mc_cpu_vmul_silu(yo + i0, r->xz + row * 2 * inner + inner + i0, i1 - i0);
    }
}

/* The forward over the M = batch·len token rows of `run` (f32 x and y), in `rows` rows of tasks
 * (batch rows, or the sequences of a packed call): projections over all M rows at once, conv and
 * scan per row. */
/* The inner norms (FalconMamba, Jamba) of x_proj's rows dbc [M][xdim] in place: dt_low, B and C each
 * x·rsqrt(mean x² + eps) in f32, times its weight when weighted. */
static void m1c_inner_norms(const struct mc_model *m, float *dbc, int64_t M)
{
    if (m->cfg.inner_norms == MC_M1_INNER_NORMS_NONE)
        return;
    const float *nw[3] = {m->w[M1C_DT_NORM], m->w[M1C_B_NORM], m->w[M1C_C_NORM]};
    const int64_t off[3] = {0, m->R, m->R + m->N}, len[3] = {m->R, m->N, m->N};
    const float eps = (float)m->cfg.mixer_rms_eps;
    for (int64_t r = 0; r < M; r++)
        for (int part = 0; part < 3; part++) {
            float *restrict v = dbc + r * m->xdim + off[part], ss = 0.0f;
            for (int64_t j = 0; j < len[part]; j++)
                ss += v[j] * v[j];
            const float inv = 1.0f / sqrtf(ss / (float)len[part] + eps);
            if (nw[part] != NULL)
                for (int64_t j = 0; j < len[part]; j++)
                    v[j] = v[j] * inv * nw[part][j];
            else
                for (int64_t j = 0; j < len[part]; j++)
                    v[j] *= inv;
        }
}

static void m1c_run_all(const struct m1c_run *run, const float *x, float *y, int64_t rows, int workers)
{
    const struct mc_model *m = run->m;
    const int64_t M = run->batch * run->len, inner = m->inner;
    const int64_t n_blocks = (inner + M1C_CHAN_BLOCK - 1) / M1C_CHAN_BLOCK;
    void *ctx = (void *)(uintptr_t)run; /* the tasks only read it */
    mc_cpu_linear_tiled(M, 2 * inner, m->D, x, m->D, m->w[M1C_IN_PROJ], m->w[M1C_IN_PROJ_BIAS], run->xz, 2 * inner,
                        m->threads);
    mc_cpu_parallel_for(rows, m1c_conv_task, ctx, m->threads);
    mc_cpu_linear_tiled(M, m->xdim, inner, run->xc, inner, m->w[M1C_X_PROJ], NULL, run->dbc, m->xdim, m->threads);
    m1c_inner_norms(m, run->dbc, M);
    mc_cpu_linear_tiled(M, inner, m->R, run->dbc, m->xdim, m->w[M1C_DT_PROJ], NULL, run->delta, inner, m->threads);
    mc_cpu_parallel_for((M + M1C_ROW_BLOCK - 1) / M1C_ROW_BLOCK, m1c_delta_task, ctx, m->threads);
    mc_cpu_parallel_for(rows * n_blocks, m1c_scan_task, ctx, workers);
    mc_cpu_linear_tiled(M, m->D, inner, run->yg, inner, m->w[M1C_OUT_PROJ], NULL, y, m->D, m->threads);
    mc_cpu_out_bias(M, m->D, run->mask, m->w[M1C_OUT_PROJ_BIAS], y);
}

static enum mc_backend_status m1c_forward(struct mc_model *model, struct mc_cache *cache,
                                          const struct mc_forward_args *args, struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    const struct mc_model *m = model;
    struct mc_cpu_rows rows = {0};
    struct mc_cpu_f32io io = {0};
    float *xz = NULL, *xc = NULL, *dbc = NULL, *delta = NULL, *yg = NULL, *scratch = NULL;

    if ((st = mc_cpu_forward_check(model, cache, args, M1C_WHO, msg)) != MC_BACKEND_OK)
        goto cleanup;

    const int64_t Bsz = args->batch, L = args->len, M = Bsz * L, inner = m->inner;
    const int64_t n_blocks = (inner + M1C_CHAN_BLOCK - 1) / M1C_CHAN_BLOCK;
    const int workers = (int)(m->threads < Bsz * n_blocks ? m->threads : Bsz * n_blocks);

    /* every allocation before the cache is touched, so a failure leaves it unchanged */
    const int io_nomem = mc_cpu_f32io_alloc(&io, m->dtype, M * m->D);
    xz = malloc((size_t)(M * 2 * inner) * sizeof *xz);
    xc = malloc((size_t)(M * inner) * sizeof *xc);
    dbc = malloc((size_t)(M * m->xdim) * sizeof *dbc);
    delta = malloc((size_t)(M * inner) * sizeof *delta);
    yg = malloc((size_t)(M * inner) * sizeof *yg);
    scratch = malloc((size_t)workers * (size_t)m->N * sizeof *scratch);
    const int rows_nomem = mc_cpu_rows_alloc(&rows, &m->cache_shape, cache, Bsz);
    if (io_nomem || !xz || !xc || !dbc || !delta || !yg || !scratch || rows_nomem) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "mamba1 cpu forward: out of memory for B=%lld L=%lld scratch",
                         (long long)Bsz, (long long)L);
        goto cleanup;
    }
    mc_cpu_rows_start(&rows, &m->cache_shape, cache, Bsz);

    const float *x;
    float *y;
    mc_cpu_f32io_in(&io, args->x, args->y, &x, &y);
    struct m1c_run run = {
        .m = m,
        .batch = Bsz,
        .len = L,
        .mask = args->mask,
        .xz = xz,
        .xc = xc,
        .dbc = dbc,
        .delta = delta,
        .yg = yg,
        .window = rows.window,
        .state = rows.state,
        .scratch = scratch,
    };

    /* stage probes (probe.h): NULL unless recording */
    struct mc_cpu_probes *pr = m->probes;
    const uint8_t *pm = args->mask;
    float *p_conv = mc_cpu_probe_add(pr, "conv_out", 3, (const int64_t[]){Bsz, L, inner});
    float *p_dt = mc_cpu_probe_add(pr, "dt", 3, (const int64_t[]){Bsz, L, inner});
    float *p_b = mc_cpu_probe_add(pr, "B", 3, (const int64_t[]){Bsz, L, m->N});
    float *p_c = mc_cpu_probe_add(pr, "C", 3, (const int64_t[]){Bsz, L, m->N});
    run.scan_out = mc_cpu_probe_add(pr, "scan_out", 3, (const int64_t[]){Bsz, L, inner});
    float *p_norm = mc_cpu_probe_add(pr, "norm_in", 3, (const int64_t[]){Bsz, L, inner});
    m1c_run_all(&run, x, y, Bsz, workers);
    mc_cpu_probe_rows(p_conv, inner, xc, inner, M, pm);
    mc_cpu_probe_rows(p_dt, inner, delta, inner, M, pm);
    mc_cpu_probe_rows(p_b, m->N, dbc + m->R, m->xdim, M, pm);
    mc_cpu_probe_rows(p_c, m->N, dbc + m->R + m->N, m->xdim, M, pm);
    mc_cpu_probe_rows(p_norm, inner, yg, inner, M, pm);
    mc_cpu_f32io_out(&io, args->y);
    if (cache)
        cache->primed = 1;

cleanup:
    mc_cpu_rows_free(&rows);
    free(scratch);
    free(yg);
    free(delta);
    free(dbc);
    free(xc);
    free(xz);
    mc_cpu_f32io_free(&io);
    return st;
}


/* ---- the packed call on a state pool (backend.h: forward_packed) -------------------------------
 *
 * The n sequences lie back to back on one token axis of T tokens: in_proj, x_proj, dt_proj, softplus
 * and out_proj run once over all T rows; the conv and the selective scan (sequential per channel)
 * run per sequence over its own tokens, from its slot's window and state (zeros when
 * has_initial_state = 0), and leave its last K inputs and its final state in that slot only. A
 * sequence never reads another's tokens or state: the scan restarts at every boundary. */
static enum mc_backend_status m1c_forward_packed(struct mc_model *model, struct mc_cache *pool,
                                                 const struct mc_packed_args *args, struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    const struct mc_model *m = model;
    struct mc_cpu_f32io io = {0};
    float *xz = NULL, *xc = NULL, *dbc = NULL, *delta = NULL, *yg = NULL, *scratch = NULL;
    int64_t T = 0;
    if ((st = mc_cpu_packed_check(model, pool, args, M1C_WHO, &T, msg)) != MC_BACKEND_OK)
        return st;
    if (T == 0)
        return MC_BACKEND_OK;
    const int64_t n = args->n_seqs, inner = m->inner;
    const int64_t n_blocks = (inner + M1C_CHAN_BLOCK - 1) / M1C_CHAN_BLOCK;
    const int workers = (int)(m->threads < n * n_blocks ? m->threads : n * n_blocks);

    /* every allocation before the pool is touched, so a failure leaves it unchanged */
    const int io_nomem = mc_cpu_f32io_alloc(&io, m->dtype, T * m->D);
    xz = malloc((size_t)(T * 2 * inner) * sizeof *xz);
    xc = malloc((size_t)(T * inner) * sizeof *xc);
    dbc = malloc((size_t)(T * m->xdim) * sizeof *dbc);
    delta = malloc((size_t)(T * inner) * sizeof *delta);
    yg = malloc((size_t)(T * inner) * sizeof *yg);
    scratch = malloc((size_t)workers * (size_t)m->N * sizeof *scratch);
    if (io_nomem || !xz || !xc || !dbc || !delta || !yg || !scratch) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "mamba1 cpu forward_packed: out of memory for T=%lld scratch",
                         (long long)T);
        goto cleanup;
    }
    mc_cpu_packed_reset(&m->cache_shape, pool, args);
    const float *x;
    float *y;
    mc_cpu_f32io_in(&io, args->x, args->y, &x, &y);
    const struct m1c_run run = {
        .m = m,
        .batch = 1,
        .len = T,
        .xz = xz,
        .xc = xc,
        .dbc = dbc,
        .delta = delta,
        .yg = yg,
        .window = pool->window,
        .state = pool->state,
        .scratch = scratch,
        .pk = args,
    };
    m1c_run_all(&run, x, y, n, workers);
    mc_cpu_f32io_out(&io, args->y);
    pool->primed = 1;

cleanup:
    free(scratch);
    free(yg);
    free(delta);
    free(dbc);
    free(xc);
    free(xz);
    mc_cpu_f32io_free(&io);
    return st;
}

/* ---- the core alone (cpu.h: mc_cpu_mamba1_core) ----------------------------------------------- */

/* One block of a long core call (stream.h: mc_cpu_core_blocks): row b, tokens [t0, t0 + n). */
static enum mc_backend_status m1c_core_block(const void *args, int64_t b, int64_t t0, int64_t n, float *window,
                                             struct mc_msg *msg)
{
    const struct mc_cpu_mamba1_core_args *a = args;
    const int64_t I = a->channels, N = a->state_size, row = b * a->len + t0;
    struct mc_cpu_mamba1_core_args blk = *a;
    blk.batch = 1;
    blk.len = n;
    blk.x = a->x + row * I;
    blk.delta = a->delta + row * I;
    blk.bc = a->bc + row * 2 * N;
    blk.y = a->y + row * I;
    blk.state = a->state + b * I * N;
    blk.window = window;
    return mc_cpu_mamba1_core(&blk, msg);
}

enum mc_backend_status mc_cpu_mamba1_core(const struct mc_cpu_mamba1_core_args *a, struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    float *conv_kc = NULL, *window = NULL, *xc = NULL, *dskip = NULL, *scratch = NULL;
    if (!a || !a->x || !a->delta || !a->a || !a->bc || !a->state || !a->y)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID, "mamba1 cpu core: needs x, delta, a, bc, state and y");
    if (a->batch < 1 || a->len < 1 || a->channels < 1 || a->channels > M1C_MAX_DIM || a->state_size < 1 ||
        a->state_size > M1C_MAX_DIM || a->conv_kernel < 1 || a->conv_kernel > MC_CPU_CONV_MAX_K ||
        a->batch > INT_MAX / a->len)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID, "mamba1 cpu core: bad shape B=%lld L=%lld I=%lld N=%lld K=%lld",
                           (long long)a->batch, (long long)a->len, (long long)a->channels,
                           (long long)a->state_size, (long long)a->conv_kernel);
    const int64_t block = mc_cpu_stream_tokens(1);
    if (a->len > block)
        return mc_cpu_core_blocks(a, a->batch, a->len, block, a->window, (size_t)(a->conv_kernel * a->channels),
                                  a->conv_weight != NULL, m1c_core_block, "mamba1 cpu core", msg);
    struct mc_model m = {0};
    m.inner = a->channels;
    m.N = a->state_size;
    m.K = a->conv_kernel;
    m.R = 0;
    m.xdim = 2 * m.N;
    m.threads = mc_cpu_threads_resolve(a->threads);
    const int64_t Bsz = a->batch, L = a->len, M = Bsz * L;
    const int64_t n_blocks = (m.inner + M1C_CHAN_BLOCK - 1) / M1C_CHAN_BLOCK;
    const int workers = (int)(m.threads < Bsz * n_blocks ? m.threads : Bsz * n_blocks);
    dskip = calloc((size_t)m.inner, sizeof *dskip);
    scratch = malloc((size_t)workers * (size_t)m.N * sizeof *scratch);
    if (a->conv_weight) {
        conv_kc = malloc((size_t)(m.K * m.inner) * sizeof *conv_kc);
        xc = malloc((size_t)(M * m.inner) * sizeof *xc);
        window = a->window ? a->window : calloc((size_t)(Bsz * m.K * m.inner), sizeof *window);
    }
    if (!dskip || !scratch || (a->conv_weight && (!conv_kc || !xc || !window))) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "mamba1 cpu core: out of memory for B=%lld L=%lld", (long long)Bsz,
                         (long long)L);
        goto cleanup;
    }
    if (a->d)
        memcpy(dskip, a->d, (size_t)m.inner * sizeof *dskip);
    m.w[M1C_D] = dskip;
    m.a_neg = (float *)(uintptr_t)a->a; /* read only */
    if (a->conv_weight) {
        mc_cpu_conv_weight_kc(m.inner, m.K, a->conv_weight, conv_kc);
        mc_cpu_conv_batch(Bsz, L, m.inner, m.K, a->x, window, conv_kc, xc, m.threads);
    }
    struct m1c_run run = {
        .m = &m,
        .batch = Bsz,
        .len = L,
        .xc = a->conv_weight ? xc : (float *)(uintptr_t)a->x,   /* read only */
        .dbc = (float *)(uintptr_t)a->bc,                        /* read only */
        .delta = (float *)(uintptr_t)a->delta,                   /* read only */
        .yg = a->y,
        .state = a->state,
        .scratch = scratch,
    };
    mc_cpu_parallel_for(Bsz * n_blocks, m1c_scan_task, &run, workers);

cleanup:
    if (window != a->window)
        free(window);
    free(xc);
    free(conv_kc);
    free(scratch);
    free(dskip);
    return st;
}

/* ---- the ops forward: m1c_forward in blocks of MC_CPU_STREAM_TOKENS tokens (stream.h) ---------- */

MC_CPU_STREAM_FORWARD(m1c, m1c_forward, 1, M1C_WHO)
/* The ops forward_packed: m1c_forward_packed over the packed axis in blocks (stream.h). */
MC_CPU_STREAM_PACKED(m1c, m1c_forward_packed, 1, M1C_WHO)

MC_CPU_PROBE_OPS(m1c, M1C_WHO)

static const struct mc_backend_ops m1c_ops = {
    .abi_version = MIXCHECK_ABI_VERSION,
    .struct_size = sizeof(struct mc_backend_ops),
    .name = "cpu",
    .device = "cpu",
    .family = MC_FAMILY_MAMBA1,
    .dtypes = MC_DTYPE_BIT(MC_DTYPE_F32) | MC_DTYPE_BIT(MC_DTYPE_BF16) | MC_DTYPE_BIT(MC_DTYPE_F16),
    .caps = MC_CAP_THREADS | MC_CAP_PACKED | MC_CAP_PROBES,
    .model_create = m1c_model_create,
    .model_destroy = m1c_model_destroy,
    .cache_alloc = m1c_cache_alloc,
    .cache_copy = m1c_cache_copy,
    .cache_free = m1c_cache_free,
    .cache_export = m1c_cache_export,
    .cache_import = m1c_cache_import,
    .forward = m1c_forward_streamed,
    .forward_packed = m1c_forward_packed_streamed,
    .probe_enable = m1c_probe_enable,
    .probe_read = m1c_probe_read,
};

const struct mc_backend_ops *mc_cpu_mamba1_ops(void)
{
    return &m1c_ops;
}
