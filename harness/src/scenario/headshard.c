/*
 * headshard.c — head_shard (see headshard.h). A shard is described by index ranges: for every weight
 * the rows (axis 0), columns (axis 1) or third-axis entries (axis 2) it keeps, and for the cache the conv channels and state heads
 * of its slice. The shard's model is made with the backend's own model_create from its configuration
 * and sliced weights; the session then drives it (its model and shape swapped in for the shard's run).
 *
 * Mamba2 (heads h0..h1 of P channels, groups g0..g1 of N): in_proj rows z, x (h0P..h1P), B, C
 * (g0N..g1N each), dt (h0..h1); conv channels x, B, C; A_log, D, dt_bias by head; norm.weight by
 * channel; out_proj columns h0P..h1P, its bias on shard 0 only (a row-parallel projection adds it once).
 * A shard of fewer heads than a group replicates the group (S a multiple of G), as upstream does for
 * n_groups < tp. The gated norm normalises groups of norm_group_size channels: a shard can compute it
 * only when no norm group spans two shards (the full-row norm of HF, norm_group_size = I, with more
 * than one shard needs an all-reduce of the variance across ranks: unsupported).
 * GDN (qwen3_5 layout; key heads k0..k1 with their value heads): in_proj_qkv rows q, k (k0dk..k1dk), v
 * (v0dv..v1dv); in_proj_z rows v0dv..v1dv; in_proj_b, in_proj_a, A_log, dt_bias by value head;
 * conv channels as in_proj_qkv; norm.weight (per head, dv) whole; out_proj columns v0dv..v1dv.
 * KDA (heads h0..h1 of d): q_proj, k_proj, v_proj, forget_gate.f_b_proj and g_b_proj rows h0d..h1d,
 * forget_gate.dt_bias h0d..h1d, forget_gate.A_log [1][1][H][1] on axis 2, b_proj rows h0..h1; conv channels
 * q, k, v (h0d..h1d of each); the rank-d f_a_proj and g_a_proj and o_norm.weight (per head, d) whole;
 * o_proj columns h0d..h1d.
 * Mamba1, ShortConv and lightning attention cannot be split this way (the check says why).
 */
#include "scenario/headshard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "exec/isolate.h"
#include "family/family.h"

#define MAX_RANGES 5

struct ranges {
    int n;
    int64_t lo[MAX_RANGES], hi[MAX_RANGES];
};

static void add_range(struct ranges *r, int64_t lo, int64_t hi)
{
    r->lo[r->n] = lo;
    r->hi[r->n++] = hi;
}

static int64_t ranges_len(const struct ranges *r)
{
    int64_t n = 0;
    for (int i = 0; i < r->n; i++)
        n += r->hi[i] - r->lo[i];
    return n;
}

/* One shard: its configuration, and what it keeps of every weight and of the cache. */
struct shard {
    struct mc_family_config cfg;
    struct ranges conv;  /* conv channels */
    struct ranges heads; /* the state's axis 1 (Mamba2 heads, GDN value heads) */
    int index;
};

/* How a shard takes a weight: the axis it slices, and the ranges (rows or columns); whole: keep all;
 * zero: keep the shape, values zero (out_proj.bias off shard 0). */
struct take {
    int axis, whole, zero;
    struct ranges r;
};

/* Why the configuration cannot be split into `n` shards (NULL: it can); also fills shard k. */
static const char *plan(const struct mc_golden *g, int64_t n, int64_t k, struct shard *sh, char *buf, size_t len)
{
    memset(sh, 0, sizeof *sh);
    sh->cfg = g->config;
    sh->index = (int)k;
    switch (g->config.family) {
    case MC_FAMILY_MAMBA2: {
        const struct mc_mamba2_config *c = &g->config.u.mamba2;
        int64_t H = c->num_heads, P = c->head_dim, G = c->n_groups, N = c->state_size, I = H * P;
        int64_t hs = H / n, h0 = k * hs, h1 = h0 + hs, per = H / G, g0 = h0 / per, g1 = (h1 - 1) / per + 1;
        if (G % n != 0 && n % G != 0) {
            snprintf(buf, len, "%lld shards split the %lld groups unevenly (neither divides the other)", (long long)n,
                     (long long)G);
            return buf;
        }
        if (!c->no_gated_norm && (hs * P) % c->norm_group_size != 0) {
            snprintf(buf, len,
                     "the gated norm normalises groups of %lld channels (norm_group_size; n_groups %lld), which span "
                     "shards of %lld channels: a shard cannot compute it alone (tensor parallelism needs an "
                     "all-reduce of the variance across ranks here)",
                     (long long)c->norm_group_size, (long long)G, (long long)(hs * P));
            return buf;
        }
        sh->cfg.u.mamba2.num_heads = hs;
        sh->cfg.u.mamba2.n_groups = g1 - g0;
        if (c->no_gated_norm) /* no norm: its group size only has to divide the shard's channels */
            sh->cfg.u.mamba2.norm_group_size = hs * P;
        add_range(&sh->conv, h0 * P, h1 * P);
        add_range(&sh->conv, I + g0 * N, I + g1 * N);
        add_range(&sh->conv, I + G * N + g0 * N, I + G * N + g1 * N);
        add_range(&sh->heads, h0, h1);
        return NULL;
    }
    case MC_FAMILY_GDN: {
        const struct mc_gdn_config *c = &g->config.u.gdn;
        if (c->layout != MC_GDN_LAYOUT_QWEN3_5) {
            snprintf(buf, len, "head_shard slices the qwen3_5 projection layout (separate in_proj_qkv, in_proj_z, "
                               "in_proj_b, in_proj_a); this golden interleaves them per key head (qwen3_next)");
            return buf;
        }
        int64_t Hk = c->num_key_heads, dk = c->key_head_dim, dv = c->value_head_dim, r = c->num_value_heads / Hk;
        int64_t ks = Hk / n, k0 = k * ks, k1 = k0 + ks, v0 = k0 * r, v1 = k1 * r;
        sh->cfg.u.gdn.num_key_heads = ks;
        sh->cfg.u.gdn.num_value_heads = ks * r;
        add_range(&sh->conv, k0 * dk, k1 * dk);
        add_range(&sh->conv, Hk * dk + k0 * dk, Hk * dk + k1 * dk);
        add_range(&sh->conv, 2 * Hk * dk + v0 * dv, 2 * Hk * dk + v1 * dv);
        add_range(&sh->heads, v0, v1);
        return NULL;
    }
    case MC_FAMILY_KDA: {
        /* heads are independent: q, k, v, the gates' second halves and the conv channels per head; the rank-d
         * first halves of the low-rank projections (f_a_proj, g_a_proj) and o_norm are replicated */
        const struct mc_kda_config *c = &g->config.u.kda;
        int64_t H = c->num_heads, d = c->head_dim, hs = H / n, h0 = k * hs, h1 = h0 + hs;
        sh->cfg.u.kda.num_heads = hs;
        for (int part = 0; part < 3; part++)
            add_range(&sh->conv, part * H * d + h0 * d, part * H * d + h1 * d);
        add_range(&sh->heads, h0, h1);
        return NULL;
    }
    case MC_FAMILY_LIGHTNING:
        snprintf(buf, len, "lightning attention's RMSNorm normalises the whole H*hd output row, across shards, and "
                           "its decay slopes follow the head's index among all H heads: a shard is no layer of its "
                           "own (tensor parallelism needs an all-reduce of the variance and the global slopes, as "
                           "vLLM's MiniMax port does; docs/semantics.md §13.5)");
        return buf;
    case MC_FAMILY_MAMBA1:
        snprintf(buf, len, "Mamba1's x_proj computes dt, B and C from every channel: a channel shard needs an "
                           "all-reduce inside the layer, so no shard is a layer of its own");
        return buf;
    case MC_FAMILY_SHORTCONV:
        snprintf(buf, len, "ShortConv's channel count is its hidden size: a channel shard is not a layer of the "
                           "family (in_proj maps D to 3D)");
        return buf;
    default:
        snprintf(buf, len, "head_shard has no slicing rule for family %s", mc_family_name(g->config.family));
        return buf;
    }
}

/* How shard sh takes the weight called name (0), or -1 for a name it does not know. */
static int take_of(const struct mc_golden *g, const struct shard *sh, const char *name, struct take *t)
{
    memset(t, 0, sizeof *t);
    if (g->config.family == MC_FAMILY_MAMBA2) {
        const struct mc_mamba2_config *c = &g->config.u.mamba2;
        int64_t I = c->num_heads * c->head_dim, GN = c->n_groups * c->state_size, P = c->head_dim;
        int64_t h0 = sh->heads.lo[0], h1 = sh->heads.hi[0];
        if (!strcmp(name, "in_proj.weight") || !strcmp(name, "in_proj.bias")) {
            add_range(&t->r, h0 * P, h1 * P);                                  /* z */
            for (int i = 0; i < sh->conv.n; i++)                              /* x, B, C */
                add_range(&t->r, I + sh->conv.lo[i], I + sh->conv.hi[i]);
            add_range(&t->r, 2 * I + 2 * GN + h0, 2 * I + 2 * GN + h1);        /* dt */
        } else if (!strcmp(name, "conv1d.weight") || !strcmp(name, "conv1d.bias")) {
            t->r = sh->conv;
        } else if (!strcmp(name, "A_log") || !strcmp(name, "D") || !strcmp(name, "dt_bias")) {
            t->r = sh->heads;
        } else if (!strcmp(name, "norm.weight")) {
            add_range(&t->r, h0 * P, h1 * P);
        } else if (!strcmp(name, "out_proj.weight")) {
            t->axis = 1;
            add_range(&t->r, h0 * P, h1 * P);
        } else if (!strcmp(name, "out_proj.bias")) {
            t->whole = 1;
            t->zero = sh->index != 0;
        } else {
            return -1;
        }
        return 0;
    }
    if (g->config.family == MC_FAMILY_KDA) {
        const struct mc_kda_config *c = &g->config.u.kda;
        int64_t d = c->head_dim, h0 = sh->heads.lo[0], h1 = sh->heads.hi[0];
        if (!strcmp(name, "q_proj.weight") || !strcmp(name, "k_proj.weight") || !strcmp(name, "v_proj.weight") ||
            !strcmp(name, "forget_gate.f_b_proj.weight") || !strcmp(name, "forget_gate.dt_bias") ||
            !strcmp(name, "g_b_proj.weight")) {
            add_range(&t->r, h0 * d, h1 * d);
        } else if (!strcmp(name, "conv1d.weight")) {
            t->r = sh->conv;
        } else if (!strcmp(name, "b_proj.weight")) {
            t->r = sh->heads;
        } else if (!strcmp(name, "forget_gate.A_log")) { /* [1][1][H][1] */
            t->axis = 2;
            t->r = sh->heads;
        } else if (!strcmp(name, "forget_gate.f_a_proj.weight") || !strcmp(name, "g_a_proj.weight") ||
                   !strcmp(name, "o_norm.weight")) {
            t->whole = 1;
        } else if (!strcmp(name, "o_proj.weight")) {
            t->axis = 1;
            add_range(&t->r, h0 * d, h1 * d);
        } else {
            return -1;
        }
        return 0;
    }
    const struct mc_gdn_config *c = &g->config.u.gdn;
    int64_t dv = c->value_head_dim, v0 = sh->heads.lo[0], v1 = sh->heads.hi[0];
    if (!strcmp(name, "in_proj_qkv.weight") || !strcmp(name, "conv1d.weight") || !strcmp(name, "conv1d.bias")) {
        t->r = sh->conv;
    } else if (!strcmp(name, "in_proj_z.weight")) {
        add_range(&t->r, v0 * dv, v1 * dv);
    } else if (!strcmp(name, "in_proj_b.weight") || !strcmp(name, "in_proj_a.weight") || !strcmp(name, "A_log") ||
               !strcmp(name, "dt_bias")) {
        t->r = sh->heads;
    } else if (!strcmp(name, "norm.weight")) {
        t->whole = 1;
    } else if (!strcmp(name, "out_proj.weight")) {
        t->axis = 1;
        add_range(&t->r, v0 * dv, v1 * dv);
    } else {
        return -1;
    }
    return 0;
}

/* a sliced along axis (0, 1 or 2: [outer][dims[axis]][inner]) by r into out (allocated; its dims in
 * out_dims). */
static double *slice(const struct mc_array *a, const struct take *t, int64_t *out_dims)
{
    int64_t outer = 1, mid = a->ndim > t->axis ? a->dims[t->axis] : 1, inner = 1;
    for (int i = 0; i < t->axis && i < a->ndim; i++)
        outer *= a->dims[i];
    for (int i = t->axis + 1; i < a->ndim; i++)
        inner *= a->dims[i];
    memcpy(out_dims, a->dims, sizeof a->dims);
    if (t->whole) {
        double *w = calloc((size_t)mc_array_elems(a) + 1, sizeof *w);
        if (w != NULL && !t->zero)
            memcpy(w, a->data, (size_t)mc_array_elems(a) * sizeof *w);
        return w;
    }
    int64_t kept = ranges_len(&t->r);
    out_dims[t->axis] = kept;
    double *w = calloc((size_t)(outer * kept * inner) + 1, sizeof *w);
    if (w == NULL)
        return NULL;
    double *o = w;
    for (int64_t r0 = 0; r0 < outer; r0++)
        for (int i = 0; i < t->r.n; i++) {
            size_t n = (size_t)((t->r.hi[i] - t->r.lo[i]) * inner);
            memcpy(o, a->data + (r0 * mid + t->r.lo[i]) * inner, n * sizeof *o);
            o += n;
        }
    return w;
}

/* The golden's cache of every row at held position index ti, sliced to the shard: conv [B][C_s][K],
 * state [B][H_s][rest]. */
static void golden_slice(const struct mc_session *s, const struct mc_family_shape *full, const struct shard *sh,
                         int64_t ti, double *conv, double *state)
{
    const struct mc_golden *g = s->g;
    int64_t B = g->batch, C = full->conv_channels, K = full->conv_kernel, ns = mc_family_state_elems(full);
    int64_t Hs = full->state_ndim ? full->state_dims[0] : 0, per_head = Hs ? ns / Hs : 0;
    for (int64_t b = 0; b < B; b++) {
        const double *src = g->conv_state.data + (ti * B + b) * C * K;
        for (int i = 0; i < sh->conv.n; i++) {
            size_t n = (size_t)((sh->conv.hi[i] - sh->conv.lo[i]) * K);
            memcpy(conv, src + sh->conv.lo[i] * K, n * sizeof *conv);
            conv += n;
        }
        if (ns) {
            const double *ss = g->recurrent_state.data + (ti * B + b) * ns;
            size_t n = (size_t)((sh->heads.hi[0] - sh->heads.lo[0]) * per_head);
            memcpy(state, ss + sh->heads.lo[0] * per_head, n * sizeof *state);
            state += n;
        }
    }
}

/* The shard's model, made by the backend from the shard's configuration and weights (in the check's
 * dtype); NULL with the check marked (backend failure) or the error set. */
static struct mc_model *shard_model(struct mc_session *s, const struct shard *sh)
{
    const struct mc_golden *g = s->g;
    struct mc_weight *w = mc_session_calloc((size_t)g->n_weights, sizeof *w, s);
    void **bufs = mc_session_calloc((size_t)g->n_weights, sizeof *bufs, s);
    struct mc_model *model = NULL;
    if (w == NULL || bufs == NULL)
        goto out;
    for (int i = 0; i < g->n_weights; i++) {
        struct take t;
        if (take_of(g, sh, g->weights[i].name, &t) != 0) {
            mc_error_set(s->err, MC_ERR_INTERNAL, "head_shard: no slicing rule for weight '%s'", g->weights[i].name);
            goto out;
        }
        double *d = slice(&g->weights[i].value, &t, w[i].dims);
        int64_t n = 1;
        for (int j = 0; j < g->weights[i].value.ndim; j++)
            n *= w[i].dims[j];
        bufs[i] = d ? mc_session_calloc((size_t)n, s->esz, s) : NULL;
        if (d == NULL || bufs[i] == NULL) {
            free(d);
            mc_error_set(s->err, MC_ERR_NOMEM, "out of memory");
            goto out;
        }
        mc_dtype_from_f64(s->ctx->dtype, d, bufs[i], (size_t)n);
        free(d);
        w[i].name = g->weights[i].name;
        w[i].ndim = g->weights[i].value.ndim;
        w[i].data = bufs[i];
    }
    struct mc_model_desc desc = {.family = g->config.family,
                                 .dtype = s->ctx->dtype,
                                 .config = &sh->cfg.u,
                                 .weights = w,
                                 .n_weights = g->n_weights,
                                 .threads = s->ctx->threads};
    struct mc_msg msg = {{0}};
    char call[48];
    snprintf(call, sizeof call, "model_create(shard %d)", sh->index);
    mc_isolate_enter(call);
    enum mc_backend_status st = s->ops->model_create(&desc, &model, &msg);
    mc_isolate_leave();
    if (st != MC_BACKEND_OK) {
        model = NULL;
        s->res->status = st == MC_BACKEND_UNSUPPORTED ? MC_CHECK_UNSUPPORTED : MC_CHECK_ERROR;
        snprintf(s->res->message, sizeof s->res->message, "model_create(shard %d): %s", sh->index,
                 msg.text[0] ? msg.text : "(no message)");
        s->broken = 1;
    }
out:
    if (bufs != NULL)
        for (int i = 0; i < g->n_weights; i++)
            free(bufs[i]);
    free(bufs);
    free(w);
    return model;
}

void mc_headshard_run(struct mc_session *s)
{
    const struct mc_golden *g = s->g;
    int64_t n = s->ctx->spec->shards, B = g->batch, L = g->len, D = s->shape.hidden;
    struct mc_family_shape full = s->shape;
    struct mc_model *whole = s->model;
    char why[512];
    struct shard sh;
    if (s->ctx->dtype == MC_DTYPE_F16 || s->ctx->dtype == MC_DTYPE_BF16) {
        /* each shard rounds its partial output to storage before the sum (as a rank does before its
         * all-reduce): S roundings of partials that can be larger than the output, which the output
         * tolerance (one rounding of the output) does not bound */
        s->res->status = MC_CHECK_UNSUPPORTED;
        snprintf(s->res->message, sizeof s->res->message,
                 "head_shard at %s: the shards' partial outputs are each rounded to %s before they are summed, an "
                 "error no tolerance of the profile bounds; run it at f32 or f64",
                 mc_dtype_name(s->ctx->dtype), mc_dtype_name(s->ctx->dtype));
        s->broken = 1;
        return;
    }
    if (plan(g, n, 0, &sh, why, sizeof why) != NULL) {
        s->res->status = MC_CHECK_UNSUPPORTED;
        snprintf(s->res->message, sizeof s->res->message, "head_shard with %lld shards: %s", (long long)n, why);
        s->broken = 1;
        return;
    }
    /* the forwards: [0, mid) and [mid, L) with mid a held position inside the sequence, when there is one */
    int64_t mid = 0;
    for (int64_t i = 0; i < g->n_positions; i++)
        if (g->state_positions[i] > 0 && g->state_positions[i] < L && (mid == 0 || g->state_positions[i] <= L / 2))
            mid = g->state_positions[i];
    int64_t ends[2] = {mid, L};
    double *sum[2] = {mc_session_calloc((size_t)(B * L * D), sizeof(double), s),
                      mc_session_calloc((size_t)(B * L * D), sizeof(double), s)};
    double *y = mc_session_calloc((size_t)(B * L * D), sizeof *y, s);
    double *conv = mc_session_calloc((size_t)(B * full.conv_channels * full.conv_kernel), sizeof *conv, s);
    int64_t ns = mc_family_state_elems(&full);
    double *state = ns ? mc_session_calloc((size_t)(B * ns), sizeof *state, s) : NULL;
    double *gconv = mc_session_calloc((size_t)(B * full.conv_channels * full.conv_kernel), sizeof *gconv, s);
    double *gstate = ns ? mc_session_calloc((size_t)(B * ns), sizeof *gstate, s) : NULL;
    if (!sum[0] || !sum[1] || !y || !conv || !gconv || (ns && (!state || !gstate)))
        goto out;
    for (int64_t k = 0; k < n && !s->broken && s->err->code == MC_ERR_NONE; k++) {
        plan(g, n, k, &sh, why, sizeof why);
        struct mc_model *m = shard_model(s, &sh);
        if (m == NULL)
            break;
        struct mc_family_shape shape;
        mc_family_shape(&sh.cfg, &shape);
        s->model = m; /* the session drives the shard: its model and its cache shape */
        s->shape = shape;
        struct mc_session_cache c = {0};
        int64_t what[2] = {k, n};
        int tok = mc_session_run_begin(s, "shard (index, shards)", what, 2);
        if (mc_session_cache_new(s, B, &c) == 0) {
            int64_t t0 = 0;
            for (int e = 0; e < 2 && !s->broken; e++) {
                int64_t len = ends[e] - t0;
                if (len <= 0)
                    continue;
                struct mc_slice sl = {.r0 = 0, .nrows = B, .t0 = t0, .len = len, .masked = 1};
                if (mc_session_forward(s, &c, &sl, y) != 0 || mc_session_cache_read(s, &c, conv, state) != 0)
                    break;
                for (int64_t b = 0; b < B; b++) /* the partial outputs add up in f64 */
                    for (int64_t i = 0; i < len * D; i++)
                        sum[0][(b * L + t0) * D + i] += y[b * len * D + i];
                int64_t ti = mc_golden_position_index(g, ends[e]);
                if (ti >= 0) {
                    struct mc_compare_view v;
                    golden_slice(s, &full, &sh, ti, gconv, gstate);
                    mc_session_conv_view(s, 0, B, ends[e], &v);
                    mc_session_compare(s, "conv_state", MC_TENSOR_CONV_STATE, 0, conv, gconv, &v);
                    if (ns) {
                        mc_session_state_view(s, 0, B, ends[e], &v);
                        mc_session_compare(s, "recurrent_state", MC_TENSOR_RECURRENT_STATE, 0, state, gstate, &v);
                    }
                }
                t0 = ends[e];
            }
        }
        mc_session_run_end(s, tok);
        mc_session_cache_drop(s, &c);
        mc_isolate_enter("model_destroy");
        s->ops->model_destroy(m);
        mc_isolate_leave();
        s->model = whole;
        s->shape = full;
    }
    if (!s->broken && s->err->code == MC_ERR_NONE) {
        int64_t what = n;
        int tok = mc_session_run_begin(s, "the shards' outputs summed (shards)", &what, 1);
        int64_t t0 = 0;
        for (int e = 0; e < 2; e++) {
            int64_t len = ends[e] - t0;
            if (len <= 0)
                continue;
            struct mc_slice sl = {.r0 = 0, .nrows = B, .t0 = t0, .len = len, .masked = 1};
            for (int64_t b = 0; b < B; b++)
                memcpy(sum[1] + b * len * D, sum[0] + (b * L + t0) * D, (size_t)(len * D) * sizeof(double));
            mc_session_check_output(s, &sl, sum[1]);
            t0 = ends[e];
        }
        mc_session_run_end(s, tok);
    }
out:
    s->model = whole;
    s->shape = full;
    free(sum[0]);
    free(sum[1]);
    free(y);
    free(conv);
    free(state);
    free(gconv);
    free(gstate);
}

const char *mc_headshard_misfit(const struct mc_scenario_spec *sp, const struct mc_golden *g, char *buf, size_t len)
{
    int64_t heads = g->config.family == MC_FAMILY_MAMBA2 ? g->config.u.mamba2.num_heads
                    : g->config.family == MC_FAMILY_GDN  ? g->config.u.gdn.num_key_heads
                    : g->config.family == MC_FAMILY_KDA  ? g->config.u.kda.num_heads
                                                         : 0;
    if (heads > 0 && heads % sp->shards != 0) {
        snprintf(buf, len, "shards %lld must divide the %s (%lld)", (long long)sp->shards,
                 g->config.family == MC_FAMILY_GDN ? "key heads" : "heads", (long long)heads);
        return buf;
    }
    return NULL;
}
