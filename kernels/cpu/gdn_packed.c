/*
 * gdn_packed.c — the packed call of the cpu Gated DeltaNet (backend.h: forward_packed, docs/scenarios.md
 * §1.2): n sequences back to back on one packed token axis of T tokens, each reading and writing its
 * own slot of a state pool. Kept apart from gdn_forward.c; the delta-rule core is gdn_chunk.h's, called
 * as it is.
 *
 * Phases (each a mc_cpu_parallel_for over tasks that write disjoint outputs, so the bits do not depend
 * on the thread count):
 *   1. x to f32 and in_proj over all T tokens at once (one GEMM of T rows);
 *   2. conv + SiLU per (sequence, block of GDN_CONV_BLOCK channels) from the sequence's slot window
 *      (zeros when has_initial_state = 0), over its own tokens only, leaving its last K inputs there;
 *   3. gates g, β per token;
 *   4. the chunked gated delta rule over the packed axis on ONE chunk grid (tokens 0, Q, 2Q, ... of the
 *      packed axis, as FLA's varlen chunk kernels lay it), per (key head, group of its value heads):
 *      a chunk may straddle sequences, and everything that crosses tokens restarts at each sequence
 *      boundary inside it. Each segment (the tokens of one sequence inside one chunk) runs as one chunk
 *      of the core (mc_gdn_chunk_run with n = the segment's length <= Q): its cumulative decay starts
 *      at the segment's first token, its UT transform and intra-chunk attention see only the segment's
 *      tokens (no entry between two sequences), and its entering state is its own slot's — the state
 *      the sequence's previous segment left there, or its initial state (zeroed when
 *      has_initial_state = 0) when the sequence begins in this chunk; its final state goes back to that
 *      slot only. A sequence of a single token is the recurrent step (mc_gdn_recurrent_run), as the
 *      batched forward's decode row;
 *   5. gated RMSNorm per token and head, out_proj over all T tokens, y in the storage dtype.
 *
 * Dimension letters as gdn.c; T packed tokens, Q chunk length.
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "common.h"
#include "gdn_chunk.h"
#include "gdn_internal.h"
#include "stream.h"
#include "vmath.h"

struct gdn_pk {
    const struct mc_model *m;
    const struct mc_packed_args *pk;
    int64_t T, chunk, groups;
    const int64_t *tok_seq; /* [T] */
    float *pj;              /* [T][proj] in_proj output: q | k | v | z | b | a */
    float *qkv;             /* [T][C] conv + SiLU */
    float *g, *beta;        /* [T][Hv] */
    float *hn;              /* [T][Hv*dv] core output, then gated norm */
    float *window;          /* the pool's, [S][C*K] channel-blocked */
    float *state;           /* the pool's, [S][Hv][dk][dv] */
    float *work;            /* [workers][work_floats] */
    size_t work_floats;
};

static int64_t gdn_pk_ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

static void gdn_pk_task_conv(void *ctx, int64_t task, int worker)
{
    (void)worker;
    const struct gdn_pk *f = ctx;
    const struct mc_model *m = f->m;
    const int64_t nb = gdn_pk_ceil_div(m->C, GDN_CONV_BLOCK), i = task / nb, c0 = task % nb * GDN_CONV_BLOCK;
    const int64_t w = m->C - c0 < GDN_CONV_BLOCK ? m->C - c0 : GDN_CONV_BLOCK;
    const int64_t t0 = f->pk->cu_seqlens[i], n = f->pk->cu_seqlens[i + 1] - t0;
    if (n == 0)
        return;
    mc_cpu_conv_row(n, w, m->K, f->pj + t0 * m->proj + c0, m->proj, NULL,
                    f->window + f->pk->slots[i] * m->C * m->K + c0 * m->K, m->w_conv + c0 * m->K, NULL, 1,
                    f->qkv + t0 * m->C + c0, m->C);
}

/* β = σ(b), g = −exp(A_log)·softplus(a + dt_bias) for a block of packed tokens (gdn_internal.h). */
static void gdn_pk_task_gates(void *ctx, int64_t task, int worker)
{
    (void)worker;
    const struct gdn_pk *f = ctx;
    const int64_t i1 = (task + 1) * GDN_ROW_BLOCK < f->T ? (task + 1) * GDN_ROW_BLOCK : f->T;
    mc_gdn_cpu_gates_rows(f->m, f->pj, f->beta, f->g, task * GDN_ROW_BLOCK, i1);
}

/* The core of one (key head, group of its value heads) over the packed axis: one chunk grid, each
 * segment of a chunk one core chunk on its own slot's state (the opening block, phase 4). */
static void gdn_pk_task_core(void *ctx, int64_t task, int worker)
{
    const struct gdn_pk *f = ctx;
    const struct mc_model *m = f->m;
    const struct mc_packed_args *pk = f->pk;
    const int64_t hk = task / f->groups, grp = task % f->groups;
    const int64_t s0 = grp * m->r / f->groups, s1 = (grp + 1) * m->r / f->groups, h0 = hk * m->r + s0;
    if (s1 == s0)
        return;
    const int64_t Q = f->chunk, T = f->T, se = m->Hv * m->dk * m->dv;
    float *work = f->work + (size_t)worker * f->work_floats;
    for (int64_t c0 = 0; c0 < T; c0 += Q) {
        const int64_t c1 = T - c0 < Q ? T : c0 + Q;
        for (int64_t a0 = c0, a1; a0 < c1; a0 = a1) {
            const int64_t i = f->tok_seq[a0];
            a1 = pk->cu_seqlens[i + 1] < c1 ? pk->cu_seqlens[i + 1] : c1; /* the segment [a0, a1) */
            const float *rowq = f->qkv + a0 * m->C;
            const struct mc_gdn_core_args a = {
                .n = a1 - a0,
                .dk = m->dk,
                .dv = m->dv,
                .nh = s1 - s0,
                .chunk = Q,
                .l2norm = 1,
                .q_scale = (float)(1.0 / sqrt((double)m->dk)),
                .q = rowq + hk * m->dk,
                .k = rowq + m->kd + hk * m->dk,
                .ld_qk = m->C,
                .v = rowq + 2 * m->kd + h0 * m->dv,
                .ld_v = m->C,
                .g = f->g + a0 * m->Hv + h0,
                .beta = f->beta + a0 * m->Hv + h0,
                .ld_gb = m->Hv,
                .state = f->state + pk->slots[i] * se + h0 * m->dk * m->dv,
                .o = f->hn + a0 * m->vd + h0 * m->dv,
                .ld_o = m->vd,
            };
            if (pk->cu_seqlens[i + 1] - pk->cu_seqlens[i] == 1)
                mc_gdn_recurrent_run(&a, work);
            else
                mc_gdn_chunk_run(&a, work);
        }
    }
}

/* Gated RMSNorm per head over dv, norm before gate, for a block of packed tokens (gdn_internal.h). */
static void gdn_pk_task_norm(void *ctx, int64_t task, int worker)
{
    (void)worker;
    const struct gdn_pk *f = ctx;
    const int64_t i1 = (task + 1) * GDN_ROW_BLOCK < f->T ? (task + 1) * GDN_ROW_BLOCK : f->T;
    mc_gdn_cpu_norm_rows(f->m, f->pj, f->hn, task * GDN_ROW_BLOCK, i1);
}

/* The packed call over all T tokens at once (no blocks; mc_gdn_cpu_forward_packed adds them). */
static enum mc_backend_status gdn_pk_forward(struct mc_model *model, struct mc_cache *pool,
                                             const struct mc_packed_args *args, struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    const struct mc_model *m = model;
    struct gdn_pk f = {0};
    float *xf = NULL, *yf = NULL;
    int64_t *tok_seq = NULL, T = 0;
    if ((st = mc_cpu_packed_check(model, pool, args, GDN_WHO, &T, msg)) != MC_BACKEND_OK)
        return st;
    if (T == 0)
        return MC_BACKEND_OK;
    f.m = m;
    f.pk = args;
    f.T = T;
    f.chunk = m->chunk < T ? m->chunk : T;
    f.groups = m->Hk >= 2 * (int64_t)m->threads ? 1 : gdn_pk_ceil_div(2 * (int64_t)m->threads, m->Hk);
    if (f.groups > m->r)
        f.groups = m->r;
    const int64_t core_tasks = m->Hk * f.groups;
    const int64_t workers = core_tasks < m->threads ? core_tasks : m->threads;
    f.work_floats = mc_gdn_chunk_work_floats(f.chunk, m->dk, m->dv);
    if (f.work_floats < mc_gdn_recurrent_work_floats(m->dk, m->dv))
        f.work_floats = mc_gdn_recurrent_work_floats(m->dk, m->dv);

    /* every allocation before the pool is touched, so a failure leaves it unchanged */
    xf = malloc((size_t)(T * m->D) * sizeof *xf);
    yf = malloc((size_t)(T * m->D) * sizeof *yf);
    tok_seq = malloc((size_t)T * sizeof *tok_seq);
    f.pj = malloc((size_t)(T * m->proj) * sizeof *f.pj);
    f.qkv = malloc((size_t)(T * m->C) * sizeof *f.qkv);
    f.g = malloc((size_t)(T * m->Hv) * sizeof *f.g);
    f.beta = malloc((size_t)(T * m->Hv) * sizeof *f.beta);
    f.hn = malloc((size_t)(T * m->vd) * sizeof *f.hn);
    f.work = malloc((size_t)workers * f.work_floats * sizeof *f.work);
    if (!xf || !yf || !tok_seq || !f.pj || !f.qkv || !f.g || !f.beta || !f.hn || !f.work) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "gdn cpu forward_packed: out of memory for T=%lld scratch",
                         (long long)T);
        goto cleanup;
    }
    mc_cpu_packed_reset(&m->cache_shape, pool, args);
    mc_cpu_packed_token_seq(args, tok_seq);
    f.tok_seq = tok_seq;
    f.window = pool->window;
    f.state = pool->state;
    mc_cpu_to_f32(m->dtype, args->x, xf, (size_t)(T * m->D));

    const int64_t row_blocks = gdn_pk_ceil_div(T, GDN_ROW_BLOCK);
    mc_cpu_linear_tiled(T, m->proj, m->D, xf, m->D, m->w_proj, NULL, f.pj, m->proj, m->threads);
    mc_cpu_parallel_for(args->n_seqs * gdn_pk_ceil_div(m->C, GDN_CONV_BLOCK), gdn_pk_task_conv, &f, m->threads);
    mc_cpu_parallel_for(row_blocks, gdn_pk_task_gates, &f, m->threads);
    mc_cpu_parallel_for(core_tasks, gdn_pk_task_core, &f, m->threads);
    mc_cpu_parallel_for(row_blocks, gdn_pk_task_norm, &f, m->threads);
    mc_cpu_linear_tiled(T, m->D, m->vd, f.hn, m->vd, m->w_out, NULL, yf, m->D, m->threads);
    mc_cpu_from_f32(m->dtype, yf, args->y, (size_t)(T * m->D));
    pool->primed = 1;

cleanup:
    free(f.work);
    free(f.hn);
    free(f.beta);
    free(f.g);
    free(f.qkv);
    free(f.pj);
    free(tok_seq);
    free(yf);
    free(xf);
    return st;
}

enum mc_backend_status mc_gdn_cpu_forward_packed(struct mc_model *model, struct mc_cache *pool,
                                                 const struct mc_packed_args *args, struct mc_msg *msg)
{
    if (!model)
        return gdn_pk_forward(model, pool, args, msg);
    return mc_cpu_packed_streamed(model, pool, args, msg, gdn_pk_forward, &model->cache_shape, model->D,
                                  model->elem_bytes, mc_cpu_packed_block_tokens(model->chunk), GDN_WHO);
}
