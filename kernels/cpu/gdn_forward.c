/*
 * gdn_forward.c — the forward of the cpu Gated DeltaNet (gdn_internal.h; the phases are listed in
 * gdn.c's opening block). Every phase is a mc_cpu_parallel_for over tasks that write disjoint
 * outputs, each computed the same way whatever the partition, so the result is bitwise the same for
 * any thread count.
 *
 * Variants: the core of a batch row is the chunked form (mc_gdn_chunk_run) or, for a row with a
 * single real token (decode), the recurrent step (mc_gdn_recurrent_run).
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "gdn_chunk.h"
#include "gdn_internal.h"
#include "vmath.h"

struct gdn_fwd {
    const struct mc_model *m;
    int64_t B, L, M;
    const void *x;       /* [B][L][D] storage dtype */
    void *y;             /* [B][L][D] storage dtype */
    int64_t *start;      /* [B] first compact row of batch row b */
    int64_t *count;      /* [B] real tokens of batch row b */
    int64_t *pos;        /* [B*L] compact row of token (b, t), −1 for padding */
    int64_t *rows;       /* [M] b*L + t of compact row i */
    float *xr;           /* [M][D] gathered x; later the out_proj result */
    float *pj;           /* [M][proj] in_proj output: mixed_qkv | z | b | a */
    float *qkv;          /* [M][C] conv + SiLU output: q | k | v */
    float *g, *beta;     /* [M][Hv] */
    float *hn;           /* [M][Hv*dv] core output, then gated norm */
    float *window;       /* [B][C*K] channel-blocked */
    float *state;        /* [B][Hv][dk][dv] */
    int64_t chunk;       /* chunk length clipped to the longest row */
    int64_t groups;      /* value-head groups per key head in the core tasks */
    float *work;         /* [workers][work_floats] core scratch */
    size_t work_floats;
    /* the current projection: y[M][n_out] = x[M][n_in] · w[n_out][n_in]ᵀ */
    const float *lin_x, *lin_w;
    float *lin_y;
    int64_t lin_in, lin_out;
};

static int64_t gdn_ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

/* ---- phase tasks ------------------------------------------------------------------------------- */

static void gdn_task_gather(void *ctx, int64_t task, int worker)
{
    (void)worker;
    struct gdn_fwd *f = ctx;
    const struct mc_model *m = f->m;
    const int64_t i1 = (task + 1) * GDN_ROW_BLOCK < f->M ? (task + 1) * GDN_ROW_BLOCK : f->M;
    for (int64_t i = task * GDN_ROW_BLOCK; i < i1; i++)
        mc_cpu_to_f32(m->dtype, (const char *)f->x + (size_t)(f->rows[i] * m->D) * m->elem_bytes, f->xr + i * m->D,
                      (size_t)m->D);
}

/* One GDN_TILE × GDN_TILE tile of the current projection. */
static void gdn_task_linear(void *ctx, int64_t task, int worker)
{
    (void)worker;
    struct gdn_fwd *f = ctx;
    const int64_t nt = gdn_ceil_div(f->lin_out, GDN_TILE);
    const int64_t r0 = task / nt * GDN_TILE, c0 = task % nt * GDN_TILE;
    const int64_t mr = f->M - r0 < GDN_TILE ? f->M - r0 : GDN_TILE;
    const int64_t nc = f->lin_out - c0 < GDN_TILE ? f->lin_out - c0 : GDN_TILE;
    mc_cpu_sgemm(0, 1, mr, nc, f->lin_in, 1.0f, f->lin_x + r0 * f->lin_in, f->lin_in, f->lin_w + c0 * f->lin_in,
                 f->lin_in, 0.0f, f->lin_y + r0 * f->lin_out + c0, f->lin_out);
}

static void gdn_linear(struct gdn_fwd *f, const float *x, const float *w, float *y, int64_t n_in, int64_t n_out)
{
    f->lin_x = x;
    f->lin_w = w;
    f->lin_y = y;
    f->lin_in = n_in;
    f->lin_out = n_out;
    mc_cpu_parallel_for(gdn_ceil_div(f->M, GDN_TILE) * gdn_ceil_div(n_out, GDN_TILE), gdn_task_linear, f,
                        f->m->threads);
}

/* Conv + SiLU of one batch row over one block of channels, advancing that block of the window. */
static void gdn_task_conv(void *ctx, int64_t task, int worker)
{
    (void)worker;
    struct gdn_fwd *f = ctx;
    const struct mc_model *m = f->m;
    const int64_t nb = gdn_ceil_div(m->C, GDN_CONV_BLOCK), b = task / nb, c0 = task % nb * GDN_CONV_BLOCK;
    const int64_t w = m->C - c0 < GDN_CONV_BLOCK ? m->C - c0 : GDN_CONV_BLOCK;
    if (f->count[b] == 0)
        return;
    mc_cpu_conv_row(f->count[b], w, m->K, f->pj + f->start[b] * m->proj + c0, m->proj, NULL,
                    f->window + b * m->C * m->K + c0 * m->K, m->w_conv + c0 * m->K, NULL, 1,
                    f->qkv + f->start[b] * m->C + c0, m->C);
}

void mc_gdn_cpu_gates_rows(const struct mc_model *m, const float *pj, float *beta, float *g, int64_t i0, int64_t i1)
{
    for (int64_t i = i0; i < i1; i++) {
        const float *braw = pj + i * m->proj + m->C + m->vd, *araw = braw + m->Hv;
        mc_cpu_vsigmoid_to(braw, beta + i * m->Hv, m->Hv);
        for (int64_t h = 0; m->cfg.allow_neg_eigval && h < m->Hv; h++) /* OLMo-Hybrid: beta = 2 sigmoid(b) */
            beta[i * m->Hv + h] *= 2.0f;
        for (int64_t h = 0; h < m->Hv; h++)
            g[i * m->Hv + h] = m->a_neg[h] * mc_cpu_softplus(araw[h] + m->dt_bias[h]);
    }
}

/* β and g for a block of tokens (mc_gdn_cpu_gates_rows). */
static void gdn_task_gates(void *ctx, int64_t task, int worker)
{
    (void)worker;
    struct gdn_fwd *f = ctx;
    const int64_t i1 = (task + 1) * GDN_ROW_BLOCK < f->M ? (task + 1) * GDN_ROW_BLOCK : f->M;
    mc_gdn_cpu_gates_rows(f->m, f->pj, f->beta, f->g, task * GDN_ROW_BLOCK, i1);
}

/* The core for one (batch row, key head, group of its value heads). */
static void gdn_task_core(void *ctx, int64_t task, int worker)
{
    struct gdn_fwd *f = ctx;
    const struct mc_model *m = f->m;
    const int64_t per_b = m->Hk * f->groups, b = task / per_b, hk = task % per_b / f->groups;
    const int64_t grp = task % f->groups;
    const int64_t s0 = grp * m->r / f->groups, s1 = (grp + 1) * m->r / f->groups, h0 = hk * m->r + s0;
    const int64_t n = f->count[b];
    if (n == 0 || s1 == s0)
        return;
    const float *rowq = f->qkv + f->start[b] * m->C;
    const struct mc_gdn_core_args a = {
        .n = n,
        .dk = m->dk,
        .dv = m->dv,
        .nh = s1 - s0,
        .chunk = f->chunk,
        .l2norm = 1,
        .q_scale = (float)(1.0 / sqrt((double)m->dk)),
        .q = rowq + hk * m->dk,
        .k = rowq + m->kd + hk * m->dk,
        .ld_qk = m->C,
        .v = rowq + 2 * m->kd + h0 * m->dv,
        .ld_v = m->C,
        .g = f->g + f->start[b] * m->Hv + h0,
        .beta = f->beta + f->start[b] * m->Hv + h0,
        .ld_gb = m->Hv,
        .state = f->state + (b * m->Hv + h0) * m->dk * m->dv,
        .o = f->hn + f->start[b] * m->vd + h0 * m->dv,
        .ld_o = m->vd,
    };
    float *work = f->work + (size_t)worker * f->work_floats;
    if (n == 1)
        mc_gdn_recurrent_run(&a, work);
    else
        mc_gdn_chunk_run(&a, work);
}

void mc_gdn_cpu_norm_rows(const struct mc_model *m, const float *pj, float *hn, int64_t i0, int64_t i1)
{
    const float eps = (float)m->cfg.rms_norm_eps;
    for (int64_t i = i0; i < i1; i++) {
        for (int64_t h = 0; h < m->Hv; h++) {
            float *o = hn + i * m->vd + h * m->dv;
            const float *z = pj + i * m->proj + m->C + h * m->dv;
            float ss = 0.0f;
            for (int64_t j = 0; j < m->dv; j++)
                ss += o[j] * o[j];
            const float rstd = 1.0f / sqrtf(ss / (float)m->dv + eps);
            for (int64_t j = 0; j < m->dv; j++)
                o[j] = m->w_norm[j] * (o[j] * rstd);
            mc_cpu_vmul_silu(o, z, m->dv); /* the gate: · silu(z) */
        }
    }
}

/* The gated RMSNorm for a block of tokens (mc_gdn_cpu_norm_rows). */
static void gdn_task_norm(void *ctx, int64_t task, int worker)
{
    (void)worker;
    struct gdn_fwd *f = ctx;
    const int64_t i1 = (task + 1) * GDN_ROW_BLOCK < f->M ? (task + 1) * GDN_ROW_BLOCK : f->M;
    mc_gdn_cpu_norm_rows(f->m, f->pj, f->hn, task * GDN_ROW_BLOCK, i1);
}

/* y rows of a block of tokens in the storage dtype; a padding row is 0. */
static void gdn_task_scatter(void *ctx, int64_t task, int worker)
{
    (void)worker;
    struct gdn_fwd *f = ctx;
    const struct mc_model *m = f->m;
    const int64_t n = f->B * f->L, i1 = (task + 1) * GDN_ROW_BLOCK < n ? (task + 1) * GDN_ROW_BLOCK : n;
    for (int64_t row = task * GDN_ROW_BLOCK; row < i1; row++) {
        char *dst = (char *)f->y + (size_t)(row * m->D) * m->elem_bytes;
        if (f->pos[row] < 0)
            memset(dst, 0, (size_t)m->D * m->elem_bytes);
        else
            mc_cpu_from_f32(m->dtype, f->xr + f->pos[row] * m->D, dst, (size_t)m->D);
    }
}

/* ---- stage probes (probe.h) --------------------------------------------------------------------- */

/* probe[b][t][0..n) = src[i][0..n) (stride ld) for every compact row i = (b, t); padding stays 0. */
static void gdn_probe_scatter(const struct gdn_fwd *f, float *probe, int64_t n, const float *src, int64_t ld)
{
    if (probe)
        for (int64_t i = 0; i < f->M; i++)
            memcpy(probe + f->rows[i] * n, src + i * ld, (size_t)n * sizeof *probe);
}

/* After the core, before the norm: conv_out, beta, g, q and k (l2-normalized as the cores do it, not
 * scaled), core_out. Nothing when the model does not record. */
static void gdn_record_probes(const struct gdn_fwd *f)
{
    const struct mc_model *m = f->m;
    struct mc_cpu_probes *pr = m->probes;
    if (!mc_cpu_probes_on(pr))
        return;
    const int64_t B = f->B, L = f->L;
    gdn_probe_scatter(f, mc_cpu_probe_add(pr, "conv_out", 3, (const int64_t[]){B, L, m->C}), m->C, f->qkv, m->C);
    gdn_probe_scatter(f, mc_cpu_probe_add(pr, "beta", 3, (const int64_t[]){B, L, m->Hv}), m->Hv, f->beta, m->Hv);
    gdn_probe_scatter(f, mc_cpu_probe_add(pr, "g", 3, (const int64_t[]){B, L, m->Hv}), m->Hv, f->g, m->Hv);
    float *q = mc_cpu_probe_add(pr, "q", 4, (const int64_t[]){B, L, m->Hk, m->dk});
    float *k = mc_cpu_probe_add(pr, "k", 4, (const int64_t[]){B, L, m->Hk, m->dk});
    for (int64_t i = 0; q && k && i < f->M; i++)
        for (int64_t h = 0; h < m->Hk; h++) {
            const float *row = f->qkv + i * m->C;
            mc_gdn_row_normalize(row + h * m->dk, q + (f->rows[i] * m->Hk + h) * m->dk, m->dk, 1, 1.0f);
            mc_gdn_row_normalize(row + m->kd + h * m->dk, k + (f->rows[i] * m->Hk + h) * m->dk, m->dk, 1, 1.0f);
        }
    gdn_probe_scatter(f, mc_cpu_probe_add(pr, "core_out", 4, (const int64_t[]){B, L, m->Hv, m->dv}), m->vd, f->hn,
                      m->vd);
}

/* ---- the forward ------------------------------------------------------------------------------- */

/* malloc of n floats; n == 0 gives NULL without failing (*ok untouched). */
static float *gdn_alloc(size_t n, int *ok)
{
    if (n == 0)
        return NULL;
    float *p = malloc(n * sizeof *p);
    if (!p)
        *ok = 0;
    return p;
}

enum mc_backend_status mc_gdn_cpu_forward(struct mc_model *model, struct mc_cache *cache,
                                          const struct mc_forward_args *args, struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    struct gdn_fwd f = {0};
    float *tmp_window = NULL, *tmp_state = NULL;
    int64_t *index = NULL;

    if ((st = mc_cpu_forward_check(model, cache, args, GDN_WHO, msg)) != MC_BACKEND_OK)
        goto cleanup;
    const struct mc_model *m = model;

    f.m = m;
    f.B = args->batch;
    f.L = args->len;
    f.x = args->x;
    f.y = args->y;
    const int64_t B = f.B, L = f.L;
    index = malloc((size_t)(2 * B + 2 * B * L) * sizeof *index);
    if (!index) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "gdn cpu: out of memory for the token index of B=%lld L=%lld",
                      (long long)B, (long long)L);
        goto cleanup;
    }
    f.start = index;
    f.count = index + B;
    f.pos = index + 2 * B;
    f.rows = index + 2 * B + B * L;
    int64_t longest = 0;
    for (int64_t b = 0; b < B; b++) {
        f.start[b] = f.M;
        for (int64_t t = 0; t < L; t++) {
            const int real = !args->mask || args->mask[b * L + t];
            f.pos[b * L + t] = real ? f.M : -1;
            if (real)
                f.rows[f.M++] = b * L + t;
        }
        f.count[b] = f.M - f.start[b];
        longest = f.count[b] > longest ? f.count[b] : longest;
    }
    const int64_t M = f.M;

    /* Core tasks: (b, key head, group); groups split the r value heads of a key head when there are
     * too few key heads to feed the threads (the bits do not depend on the grouping). */
    const int64_t base = B * m->Hk;
    f.groups = base >= 2 * (int64_t)m->threads ? 1 : gdn_ceil_div(2 * (int64_t)m->threads, base);
    if (f.groups > m->r)
        f.groups = m->r;
    const int64_t core_tasks = base * f.groups;
    const int64_t workers = core_tasks < m->threads ? core_tasks : m->threads;
    f.chunk = m->chunk < longest ? m->chunk : longest;
    if (f.chunk < 1)
        f.chunk = 1;
    f.work_floats = mc_gdn_chunk_work_floats(f.chunk, m->dk, m->dv);
    if (f.work_floats < mc_gdn_recurrent_work_floats(m->dk, m->dv))
        f.work_floats = mc_gdn_recurrent_work_floats(m->dk, m->dv);

    /* Every allocation before the cache is touched: a failure leaves it as it was. */
    int ok = 1;
    f.xr = gdn_alloc((size_t)(M * m->D), &ok);
    f.pj = gdn_alloc((size_t)(M * m->proj), &ok);
    f.qkv = gdn_alloc((size_t)(M * m->C), &ok);
    f.g = gdn_alloc((size_t)(M * m->Hv), &ok);
    f.beta = gdn_alloc((size_t)(M * m->Hv), &ok);
    f.hn = gdn_alloc((size_t)(M * m->vd), &ok);
    f.work = gdn_alloc(M ? (size_t)workers * f.work_floats : 0, &ok);
    if (!cache) {
        tmp_window = calloc((size_t)(B * m->C * m->K), sizeof *tmp_window);
        tmp_state = calloc((size_t)(B * m->Hv * m->dk * m->dv), sizeof *tmp_state);
        ok = ok && tmp_window && tmp_state;
    }
    if (!ok) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "gdn cpu: out of memory for the scratch of B=%lld L=%lld (%lld real tokens)",
                      (long long)B, (long long)L, (long long)M);
        goto cleanup;
    }
    if (cache) {
        if (!cache->primed) { /* case (a) with a cache: start from zeros, fill it */
            memset(cache->window, 0, (size_t)(B * m->C * m->K) * sizeof(float));
            memset(cache->state, 0, (size_t)(B * m->Hv * m->dk * m->dv) * sizeof(float));
        }
        f.window = cache->window;
        f.state = cache->state;
    } else {
        f.window = tmp_window;
        f.state = tmp_state;
    }

    if (M > 0) {
        const int64_t row_blocks = gdn_ceil_div(M, GDN_ROW_BLOCK);
        mc_cpu_parallel_for(row_blocks, gdn_task_gather, &f, m->threads);
        gdn_linear(&f, f.xr, m->w_proj, f.pj, m->D, m->proj);
        mc_cpu_parallel_for(B * gdn_ceil_div(m->C, GDN_CONV_BLOCK), gdn_task_conv, &f, m->threads);
        mc_cpu_parallel_for(row_blocks, gdn_task_gates, &f, m->threads);
        mc_cpu_parallel_for(core_tasks, gdn_task_core, &f, m->threads);
        gdn_record_probes(&f);
        mc_cpu_parallel_for(row_blocks, gdn_task_norm, &f, m->threads);
        gdn_linear(&f, f.hn, m->w_out, f.xr, m->vd, m->D);
    }
    mc_cpu_parallel_for(gdn_ceil_div(B * L, GDN_ROW_BLOCK), gdn_task_scatter, &f, m->threads);
    if (cache)
        cache->primed = 1;

cleanup:
    free(f.work);
    free(f.hn);
    free(f.beta);
    free(f.g);
    free(f.qkv);
    free(f.pj);
    free(f.xr);
    free(tmp_state);
    free(tmp_window);
    free(index);
    return st;
}
