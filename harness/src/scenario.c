/*
 * scenario.c — the scenario engine (see scenario.h). The shared machinery (a session holding one
 * model, forwards on golden token ranges, cache exports, comparisons into named tensor results)
 * comes first; one function per scenario of scenarios.md §2 follows; mc_scenario_run dispatches.
 */
#include "scenario.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dtype.h"
#include "family.h"
#include "rng.h"

const char *mc_check_status_name(enum mc_check_status status)
{
    switch (status) {
    case MC_CHECK_PASS:
        return "pass";
    case MC_CHECK_FAIL:
        return "fail";
    case MC_CHECK_ERROR:
        return "error";
    case MC_CHECK_UNSUPPORTED:
        return "unsupported";
    case MC_CHECK_SKIPPED:
        return "skipped";
    }
    return "unknown";
}

/* ---- session: one model of one backend at one dtype ------------------------------------------ */

struct session {
    const struct mc_scenario_ctx *ctx;
    const struct mc_golden *g;
    const struct mc_backend_ops *ops;
    struct mc_check_result *res;
    struct mc_model *model;
    struct mc_family_shape shape;
    struct mc_tolerance tol[MC_TENSOR_COUNT];
    size_t esz;        /* bytes per element of the model dtype */
    int broken;        /* the backend failed; stop driving it */
    struct mc_error *err;
};

/* A cache and the batch it was allocated for. */
struct cache {
    struct mc_cache *h;
    int64_t batch;
};

static void *xcalloc(size_t n, size_t size, struct session *s)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (p == NULL)
        mc_error_set(s->err, MC_ERR_NOMEM, "out of memory (%zu x %zu bytes)", n, size);
    return p;
}

/* Marks the check as errored by the backend (first message wins). */
static void backend_failed(struct session *s, enum mc_backend_status st, const char *what, const struct mc_msg *msg)
{
    if (!s->broken) {
        s->res->status = st == MC_BACKEND_UNSUPPORTED ? MC_CHECK_UNSUPPORTED : MC_CHECK_ERROR;
        snprintf(s->res->message, sizeof s->res->message, "%s: %s", what, msg->text[0] ? msg->text : "(no message)");
    }
    s->broken = 1;
}

static struct mc_tensor_result *tensor(struct session *s, const char *name, enum mc_tensor_kind kind, int bitwise)
{
    struct mc_check_result *r = s->res;
    for (int i = 0; i < r->n_tensors; i++)
        if (strcmp(r->tensors[i].name, name) == 0)
            return &r->tensors[i];
    if (r->n_tensors >= MC_CHECK_MAX_TENSORS)
        return NULL;
    struct mc_tensor_result *t = &r->tensors[r->n_tensors++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    if (bitwise) {
        t->tol.atol = 0.0;
        t->tol.rtol = 0.0;
    } else {
        t->tol = s->tol[kind];
    }
    mc_compare_stats_init(&t->stats);
    return t;
}

static void compare_into(struct session *s, const char *name, enum mc_tensor_kind kind, int bitwise,
                         const double *actual, const double *expected, const struct mc_compare_view *view)
{
    struct mc_tensor_result *t = tensor(s, name, kind, bitwise);
    if (t == NULL)
        return;
    struct mc_compare_stats one;
    mc_compare_stats_init(&one);
    mc_compare_accumulate(actual, expected, view, t->tol, &one);
    mc_compare_stats_merge(&t->stats, &one);
    t->comparisons++;
}

static enum mc_err_code session_open(struct session *s, const struct mc_scenario_ctx *ctx, struct mc_check_result *res,
                                     struct mc_error *err)
{
    enum mc_err_code rc = MC_ERR_NONE;
    const struct mc_golden *g = ctx->g;
    struct mc_weight *w = NULL;
    void **bufs = NULL;
    memset(s, 0, sizeof *s);
    s->ctx = ctx;
    s->g = g;
    s->ops = ctx->ops;
    s->res = res;
    s->err = err;
    s->esz = mc_dtype_size(ctx->dtype);
    mc_family_shape(&g->config, &s->shape);

    for (int k = 0; k < MC_TENSOR_COUNT; k++) {
        rc = mc_tolerance_lookup(&ctx->c->tolerance, ctx->ops->device, ctx->dtype, (enum mc_tensor_kind)k, &s->tol[k],
                                 err);
        if (rc != MC_ERR_NONE)
            return rc;
    }
    if (!(ctx->ops->dtypes & MC_DTYPE_BIT(ctx->dtype))) {
        res->status = MC_CHECK_UNSUPPORTED;
        snprintf(res->message, sizeof res->message, "backend '%s' does not support dtype %s", ctx->ops->name,
                 mc_dtype_name(ctx->dtype));
        s->broken = 1;
        return MC_ERR_NONE;
    }

    w = xcalloc((size_t)g->n_weights, sizeof *w, s);
    bufs = xcalloc((size_t)g->n_weights, sizeof *bufs, s);
    if (w == NULL || bufs == NULL) {
        rc = MC_ERR_NOMEM;
        goto out;
    }
    for (int i = 0; i < g->n_weights; i++) {
        const struct mc_array *a = &g->weights[i].value;
        size_t n = (size_t)mc_array_elems(a);
        bufs[i] = xcalloc(n, s->esz, s);
        if (bufs[i] == NULL) {
            rc = MC_ERR_NOMEM;
            goto out;
        }
        mc_dtype_from_f64(ctx->dtype, a->data, bufs[i], n);
        w[i].name = g->weights[i].name;
        w[i].ndim = a->ndim;
        memcpy(w[i].dims, a->dims, sizeof w[i].dims);
        w[i].data = bufs[i];
    }
    struct mc_model_desc desc = {
        .family = g->config.family,
        .dtype = ctx->dtype,
        .config = &g->config.u,
        .weights = w,
        .n_weights = g->n_weights,
        .chunk_size = 0,
        .threads = 0,
    };
    struct mc_msg msg = {{0}};
    enum mc_backend_status st = ctx->ops->model_create(&desc, &s->model, &msg);
    if (st != MC_BACKEND_OK) {
        s->model = NULL;
        backend_failed(s, st, "model_create", &msg);
    }
out:
    if (bufs != NULL)
        for (int i = 0; i < g->n_weights; i++)
            free(bufs[i]);
    free(bufs);
    free(w);
    return rc;
}

static void session_close(struct session *s)
{
    if (s->model != NULL)
        s->ops->model_destroy(s->model);
    s->model = NULL;
}

static int cache_new(struct session *s, int64_t batch, struct cache *c)
{
    c->h = NULL;
    c->batch = batch;
    if (s->broken)
        return -1;
    struct mc_msg msg = {{0}};
    enum mc_backend_status st = s->ops->cache_alloc(s->model, batch, &c->h, &msg);
    if (st != MC_BACKEND_OK) {
        c->h = NULL;
        backend_failed(s, st, "cache_alloc", &msg);
        return -1;
    }
    return 0;
}

static int cache_dup(struct session *s, const struct cache *src, struct cache *dst)
{
    if (cache_new(s, src->batch, dst) != 0)
        return -1;
    struct mc_msg msg = {{0}};
    enum mc_backend_status st = s->ops->cache_copy(s->model, dst->h, src->h, &msg);
    if (st != MC_BACKEND_OK) {
        backend_failed(s, st, "cache_copy", &msg);
        return -1;
    }
    return 0;
}

static void cache_drop(struct session *s, struct cache *c)
{
    if (c->h != NULL && s->model != NULL)
        s->ops->cache_free(s->model, c->h);
    c->h = NULL;
}

/* Token range of golden rows [r0, r0+nrows) and tokens [t0, t0+len) as a forward input. */
struct slice {
    int64_t r0, nrows, t0, len;
    int masked;            /* pass the golden's mask slice (when it has one) */
    const double *x;       /* optional [nrows][len][D] replacing the golden's hidden states */
};

/* One forward over a slice; y receives [nrows][len][D] in float64. Returns 0, or -1 when the backend
 * failed (recorded in the result) or memory ran out (recorded in err). */
static int forward(struct session *s, struct cache *c, const struct slice *sl, double *y)
{
    if (s->broken)
        return -1;
    const struct mc_golden *g = s->g;
    int64_t D = s->shape.hidden;
    size_t n = (size_t)(sl->nrows * sl->len * D);
    int rc = -1;
    double *xf = xcalloc(n, sizeof *xf, s);
    void *xb = xcalloc(n, s->esz, s);
    void *yb = xcalloc(n, s->esz, s);
    uint8_t *mask = NULL;
    if (xf == NULL || xb == NULL || yb == NULL)
        goto out;
    for (int64_t b = 0; b < sl->nrows; b++) {
        const double *src = sl->x != NULL ? sl->x + b * sl->len * D
                                          : g->hidden_states.data + ((sl->r0 + b) * g->len + sl->t0) * D;
        memcpy(xf + b * sl->len * D, src, (size_t)(sl->len * D) * sizeof *xf);
    }
    mc_dtype_from_f64(s->ctx->dtype, xf, xb, n);
    if (sl->masked && g->mask != NULL) {
        mask = xcalloc((size_t)(sl->nrows * sl->len), 1, s);
        if (mask == NULL)
            goto out;
        for (int64_t b = 0; b < sl->nrows; b++)
            memcpy(mask + b * sl->len, g->mask + (sl->r0 + b) * g->len + sl->t0, (size_t)sl->len);
    }
    mc_dtype_fill_nan(s->ctx->dtype, yb, n);
    struct mc_forward_args args = {.batch = sl->nrows, .len = sl->len, .x = xb, .mask = mask, .y = yb};
    struct mc_msg msg = {{0}};
    enum mc_backend_status st = s->ops->forward(s->model, c != NULL ? c->h : NULL, &args, &msg);
    if (st != MC_BACKEND_OK) {
        char what[96];
        snprintf(what, sizeof what, "forward(rows %lld..%lld, tokens %lld..%lld)", (long long)sl->r0,
                 (long long)(sl->r0 + sl->nrows - 1), (long long)sl->t0, (long long)(sl->t0 + sl->len - 1));
        backend_failed(s, st, what, &msg);
        goto out;
    }
    mc_dtype_to_f64(s->ctx->dtype, yb, y, n);
    rc = 0;
out:
    free(xf);
    free(xb);
    free(yb);
    free(mask);
    return rc;
}

/* Exports a cache as float64: conv [batch][C][K], state [batch][state dims] (state may be NULL). */
static int cache_read(struct session *s, const struct cache *c, double *conv, double *state)
{
    if (s->broken)
        return -1;
    enum mc_dtype edt = s->ctx->dtype == MC_DTYPE_F64 ? MC_DTYPE_F64 : MC_DTYPE_F32;
    size_t nconv = (size_t)(c->batch * s->shape.conv_channels * s->shape.conv_kernel);
    size_t nstate = (size_t)(c->batch * mc_family_state_elems(&s->shape));
    int rc = -1;
    void *cb = xcalloc(nconv, mc_dtype_size(edt), s);
    void *sb = nstate ? xcalloc(nstate, mc_dtype_size(edt), s) : NULL;
    if (cb == NULL || (nstate && sb == NULL))
        goto out;
    mc_dtype_fill_nan(edt, cb, nconv);
    if (sb != NULL)
        mc_dtype_fill_nan(edt, sb, nstate);
    struct mc_msg msg = {{0}};
    enum mc_backend_status st = s->ops->cache_export(s->model, c->h, cb, sb, &msg);
    if (st != MC_BACKEND_OK) {
        backend_failed(s, st, "cache_export", &msg);
        goto out;
    }
    mc_dtype_to_f64(edt, cb, conv, nconv);
    if (sb != NULL && state != NULL)
        mc_dtype_to_f64(edt, sb, state, nstate);
    rc = 0;
out:
    free(cb);
    free(sb);
    return rc;
}

/* Views of the golden's output and cache tensors for rows [r0, r0+nrows). */
static void output_view(const struct session *s, const struct slice *sl, const uint8_t *valid,
                        struct mc_compare_view *v)
{
    memset(v, 0, sizeof *v);
    v->ndim = 3;
    v->dims[0] = sl->nrows;
    v->dims[1] = sl->len;
    v->dims[2] = s->shape.hidden;
    v->dim_names[0] = "batch";
    v->dim_names[1] = "token";
    v->dim_names[2] = "channel";
    v->token_axis = 1;
    v->token_offset = sl->t0;
    v->batch_offset = sl->r0;
    v->valid = valid;
}

/* Compares y [nrows][len][D] with the golden output of the slice; padding is only checked finite. */
static int check_output(struct session *s, const struct slice *sl, const double *y)
{
    const struct mc_golden *g = s->g;
    int64_t D = s->shape.hidden;
    size_t n = (size_t)(sl->nrows * sl->len * D);
    double *exp = xcalloc(n, sizeof *exp, s);
    uint8_t *valid = g->mask ? xcalloc((size_t)(sl->nrows * sl->len), 1, s) : NULL;
    if (exp == NULL || (g->mask && valid == NULL)) {
        free(exp);
        free(valid);
        return -1;
    }
    for (int64_t b = 0; b < sl->nrows; b++) {
        memcpy(exp + b * sl->len * D, g->output.data + ((sl->r0 + b) * g->len + sl->t0) * D,
               (size_t)(sl->len * D) * sizeof *exp);
        if (valid)
            memcpy(valid + b * sl->len, g->mask + (sl->r0 + b) * g->len + sl->t0, (size_t)sl->len);
    }
    struct mc_compare_view v;
    output_view(s, sl, valid, &v);
    compare_into(s, "output", MC_TENSOR_OUTPUT, 0, y, exp, &v);
    free(exp);
    free(valid);
    return 0;
}

static void conv_view(const struct session *s, int64_t r0, int64_t nrows, int64_t pos, struct mc_compare_view *v)
{
    memset(v, 0, sizeof *v);
    v->ndim = 3;
    v->dims[0] = nrows;
    v->dims[1] = s->shape.conv_channels;
    v->dims[2] = s->shape.conv_kernel;
    v->dim_names[0] = "batch";
    v->dim_names[1] = "channel";
    v->dim_names[2] = "tap";
    v->token_axis = -1;
    v->token_offset = pos;
    v->batch_offset = r0;
}

static void state_view(const struct session *s, int64_t r0, int64_t nrows, int64_t pos, struct mc_compare_view *v)
{
    memset(v, 0, sizeof *v);
    v->ndim = 1 + s->shape.state_ndim;
    v->dims[0] = nrows;
    v->dim_names[0] = "batch";
    for (int d = 0; d < s->shape.state_ndim; d++) {
        v->dims[1 + d] = s->shape.state_dims[d];
        v->dim_names[1 + d] = s->shape.state_dim_names[d];
    }
    v->token_axis = -1;
    v->token_offset = pos;
    v->batch_offset = r0;
}

/* Reads the cache of golden rows [r0, r0+c->batch) at absolute position pos and compares it with the
 * golden when the golden holds that position. */
static int check_states(struct session *s, const struct cache *c, int64_t r0, int64_t pos)
{
    const struct mc_golden *g = s->g;
    int64_t ti = mc_golden_position_index(g, pos);
    if (ti < 0 || s->broken)
        return 0;
    int64_t nconv_row = s->shape.conv_channels * s->shape.conv_kernel;
    int64_t nstate_row = mc_family_state_elems(&s->shape);
    double *conv = xcalloc((size_t)(c->batch * nconv_row), sizeof *conv, s);
    double *state = nstate_row ? xcalloc((size_t)(c->batch * nstate_row), sizeof *state, s) : NULL;
    int rc = -1;
    if (conv == NULL || (nstate_row && state == NULL))
        goto out;
    if (cache_read(s, c, conv, state) != 0)
        goto out;
    struct mc_compare_view v;
    conv_view(s, r0, c->batch, pos, &v);
    compare_into(s, "conv_state", MC_TENSOR_CONV_STATE, 0, conv,
                 g->conv_state.data + (ti * g->batch + r0) * nconv_row, &v);
    if (state != NULL) {
        state_view(s, r0, c->batch, pos, &v);
        compare_into(s, "recurrent_state", MC_TENSOR_RECURRENT_STATE, 0, state,
                     g->recurrent_state.data + (ti * g->batch + r0) * nstate_row, &v);
    }
    rc = 0;
out:
    free(conv);
    free(state);
    return rc;
}

/* Forward + output check over a slice (y scratch owned here). */
static int step(struct session *s, struct cache *c, const struct slice *sl)
{
    double *y = xcalloc((size_t)(sl->nrows * sl->len * s->shape.hidden), sizeof *y, s);
    int rc = -1;
    if (y == NULL)
        return -1;
    if (forward(s, c, sl, y) == 0 && check_output(s, sl, y) == 0)
        rc = 0;
    free(y);
    return rc;
}

static int64_t total_failures(const struct session *s)
{
    int64_t n = 0;
    for (int i = 0; i < s->res->n_tensors; i++)
        n += s->res->tensors[i].stats.n_fail;
    return n;
}

/* Remembers the first run that failed, e.g. "splits [1, 2, 5]". */
static void note_detail(struct session *s, int64_t failures_before, const char *fmt, const int64_t *vals, int n)
{
    if (s->res->detail[0] != '\0' || total_failures(s) == failures_before)
        return;
    size_t used = (size_t)snprintf(s->res->detail, sizeof s->res->detail, "%s [", fmt);
    for (int i = 0; i < n && used < sizeof s->res->detail; i++)
        used += (size_t)snprintf(s->res->detail + used, sizeof s->res->detail - used, "%s%lld", i ? ", " : "",
                                 (long long)vals[i]);
    if (used < sizeof s->res->detail)
        snprintf(s->res->detail + used, sizeof s->res->detail - used, "]");
}

/* ---- scenarios ---------------------------------------------------------------------------------- */

static struct slice rows_all(const struct mc_golden *g, int64_t t0, int64_t len)
{
    struct slice sl = {.r0 = 0, .nrows = g->batch, .t0 = t0, .len = len, .masked = 1, .x = NULL};
    return sl;
}

/* prefill: M(x) without a cache, then with one; final cache against the golden at L. */
static void run_prefill(struct session *s)
{
    const struct mc_golden *g = s->g;
    struct slice sl = rows_all(g, 0, g->len);
    struct cache c;
    step(s, NULL, &sl);
    if (cache_new(s, g->batch, &c) == 0) {
        if (step(s, &c, &sl) == 0)
            check_states(s, &c, 0, g->len);
    }
    cache_drop(s, &c);
}

/* Runs tokens [0, P) as one prefill, then single tokens to L; states at every golden position. */
static void run_decode(struct session *s)
{
    const struct mc_golden *g = s->g;
    int64_t P = s->ctx->spec->prefill;
    struct cache c;
    if (cache_new(s, g->batch, &c) != 0)
        return;
    struct slice sl = rows_all(g, 0, P);
    if (step(s, &c, &sl) == 0 && check_states(s, &c, 0, P) == 0) {
        for (int64_t t = P; t < g->len && !s->broken; t++) {
            sl = rows_all(g, t, 1);
            if (step(s, &c, &sl) != 0 || check_states(s, &c, 0, t + 1) != 0)
                break;
        }
    }
    cache_drop(s, &c);
}

/* Forwards over consecutive chunks ending at points[0..n-1] and then at L. */
static void run_splits(struct session *s, const int64_t *points, int64_t n)
{
    const struct mc_golden *g = s->g;
    int64_t before = total_failures(s);
    struct cache c;
    if (cache_new(s, g->batch, &c) != 0)
        return;
    int64_t prev = 0;
    for (int64_t i = 0; i <= n && !s->broken; i++) {
        int64_t end = i < n ? points[i] : g->len;
        struct slice sl = rows_all(g, prev, end - prev);
        if (step(s, &c, &sl) != 0 || check_states(s, &c, 0, end) != 0)
            break;
        prev = end;
    }
    cache_drop(s, &c);
    note_detail(s, before, "splits", points, (int)n);
}

/* Draws a split set whose chunk lengths mix 1, shorter than the conv kernel, around the chunk size,
 * and anything up to L — the lengths the cached paths get wrong. Returns the number of points. */
static int64_t random_splits(struct mc_rng *rng, int64_t L, int64_t K, int64_t Q, int64_t *points)
{
    int64_t n = 0, pos = 0;
    while (pos < L) {
        int64_t len;
        switch (mc_rng_below(rng, 4)) {
        case 0:
            len = 1;
            break;
        case 1:
            len = K > 2 ? 1 + (int64_t)mc_rng_below(rng, (uint64_t)(K - 1)) : 1;
            break;
        case 2:
            len = Q > 1 ? Q - 1 + (int64_t)mc_rng_below(rng, 3) : 1;
            break;
        default:
            len = 1 + (int64_t)mc_rng_below(rng, (uint64_t)L);
            break;
        }
        pos += len;
        if (pos < L)
            points[n++] = pos;
    }
    return n;
}

static void run_chunked(struct session *s)
{
    const struct mc_scenario_spec *sp = s->ctx->spec;
    const struct mc_golden *g = s->g;
    for (int i = 0; i < sp->n_split_sets && !s->broken; i++)
        run_splits(s, sp->split_sets[i].points, sp->split_sets[i].n);
    if (sp->random_sets <= 0)
        return;
    int64_t *points = xcalloc((size_t)g->len, sizeof *points, s);
    if (points == NULL)
        return;
    struct mc_rng rng;
    mc_rng_seed(&rng, sp->seed + s->ctx->seed_offset);
    int64_t Q = s->shape.chunk_size > 0 ? s->shape.chunk_size : s->shape.conv_kernel;
    for (int64_t i = 0; i < sp->random_sets && !s->broken; i++) {
        int64_t n = random_splits(&rng, g->len, s->shape.conv_kernel, Q, points);
        run_splits(s, points, n);
    }
    free(points);
}

/* Row 0 of each batch row of y [B][len][D] into out [B][1][D]. */
static void first_rows(const double *y, int64_t B, int64_t len, int64_t D, double *out)
{
    for (int64_t b = 0; b < B; b++)
        memcpy(out + b * D, y + b * len * D, (size_t)D * sizeof *out);
}

/* first_token_causality: from a primed cache, (a) one token alone, (b) S tokens in one forward,
 * (c) the same S tokens with tokens 1..S-1 replaced by distractors. b[0] == a[0] under the tight
 * tolerance, c[0] == b[0] bitwise. */
static void run_first_token(struct session *s)
{
    const struct mc_golden *g = s->g;
    const struct mc_scenario_spec *sp = s->ctx->spec;
    int64_t P = sp->prefill, S = sp->len, B = g->batch, D = s->shape.hidden;
    struct cache c = {0}, ca = {0}, cb = {0}, cd = {0};
    double *ya = xcalloc((size_t)(B * D), sizeof *ya, s);
    double *yb = xcalloc((size_t)(B * S * D), sizeof *yb, s);
    double *yd = xcalloc((size_t)(B * S * D), sizeof *yd, s);
    double *xd = xcalloc((size_t)(B * S * D), sizeof *xd, s);
    double *b0 = xcalloc((size_t)(B * D), sizeof *b0, s);
    double *d0 = xcalloc((size_t)(B * D), sizeof *d0, s);
    if (!ya || !yb || !yd || !xd || !b0 || !d0)
        goto out;
    struct slice sl = rows_all(g, 0, P);
    if (cache_new(s, B, &c) != 0 || step(s, &c, &sl) != 0 || check_states(s, &c, 0, P) != 0)
        goto out;
    if (cache_dup(s, &c, &ca) != 0 || cache_dup(s, &c, &cb) != 0 || cache_dup(s, &c, &cd) != 0)
        goto out;
    struct slice sa = rows_all(g, P, 1), sb = rows_all(g, P, S);
    if (forward(s, &ca, &sa, ya) != 0 || check_output(s, &sa, ya) != 0 || check_states(s, &ca, 0, P + 1) != 0)
        goto out;
    if (forward(s, &cb, &sb, yb) != 0 || check_output(s, &sb, yb) != 0 || check_states(s, &cb, 0, P + S) != 0)
        goto out;
    /* the tokens after the first become distractors: same scale, drawn from the seed */
    struct mc_rng rng;
    mc_rng_seed(&rng, sp->seed + s->ctx->seed_offset);
    for (int64_t b = 0; b < B; b++) {
        for (int64_t t = 0; t < S; t++) {
            double *dst = xd + (b * S + t) * D;
            const double *src = g->hidden_states.data + (b * g->len + P + t) * D;
            for (int64_t d = 0; d < D; d++)
                dst[d] = t == 0 ? src[d] : 2.0 * mc_rng_normal(&rng);
        }
    }
    struct slice sd = sb;
    sd.x = xd;
    if (forward(s, &cd, &sd, yd) != 0)
        goto out;
    first_rows(yb, B, S, D, b0);
    first_rows(yd, B, S, D, d0);
    struct slice s1 = rows_all(g, P, 1);
    struct mc_compare_view v;
    output_view(s, &s1, NULL, &v);
    compare_into(s, "consistency", MC_TENSOR_CONSISTENCY, 0, b0, ya, &v);
    compare_into(s, "distractor", MC_TENSOR_CONSISTENCY, 1, d0, b0, &v);
out:
    cache_drop(s, &c);
    cache_drop(s, &ca);
    cache_drop(s, &cb);
    cache_drop(s, &cd);
    free(ya);
    free(yb);
    free(yd);
    free(xd);
    free(b0);
    free(d0);
}

/* Prefill [0,P) with the mask, `decode_steps` single tokens, then the rest in one chunk, on golden
 * rows [r0, r0+nrows) as a batch of their own. */
static void run_padded_sequence(struct session *s, int64_t r0, int64_t nrows)
{
    const struct mc_golden *g = s->g;
    const struct mc_scenario_spec *sp = s->ctx->spec;
    int64_t before = total_failures(s);
    struct cache c;
    if (cache_new(s, nrows, &c) != 0)
        return;
    int64_t t = 0;
    int64_t ends[3] = {sp->prefill, sp->prefill + sp->decode_steps, g->len};
    for (int phase = 0; phase < 3 && !s->broken; phase++) {
        while (t < ends[phase] && !s->broken) {
            int64_t len = phase == 1 ? 1 : ends[phase] - t;
            struct slice sl = {.r0 = r0, .nrows = nrows, .t0 = t, .len = len, .masked = 1, .x = NULL};
            if (step(s, &c, &sl) != 0 || check_states(s, &c, r0, t + len) != 0)
                break;
            t += len;
        }
    }
    cache_drop(s, &c);
    int64_t what[2] = {r0, nrows};
    note_detail(s, before, "padded rows (first, count)", what, 2);
}

static int64_t pad_length(const struct mc_golden *g, int64_t row)
{
    int64_t p = 0;
    while (p < g->len && g->mask[row * g->len + p] == 0)
        p++;
    return p;
}

/* left_padded_batch: the padded batch, each row as a padded batch of one (the mask must hold for
 * B == 1 too), and each row's real tokens alone without padding: all against the golden. */
static void run_left_padded(struct session *s)
{
    const struct mc_golden *g = s->g;
    run_padded_sequence(s, 0, g->batch);
    for (int64_t b = 0; b < g->batch && !s->broken; b++)
        run_padded_sequence(s, b, 1);
    for (int64_t b = 0; b < g->batch && !s->broken; b++) {
        int64_t pad = pad_length(g, b);
        if (pad == 0)
            continue;
        int64_t before = total_failures(s);
        struct cache c;
        if (cache_new(s, 1, &c) != 0)
            break;
        struct slice sl = {.r0 = b, .nrows = 1, .t0 = pad, .len = g->len - pad, .masked = 0, .x = NULL};
        if (step(s, &c, &sl) == 0)
            check_states(s, &c, b, g->len);
        cache_drop(s, &c);
        int64_t what[2] = {b, pad};
        note_detail(s, before, "unpadded row (row, pad)", what, 2);
    }
}

/* batch_invariance: each row alone equals the same row inside the batch (outputs and caches). */
static void run_batch_invariance(struct session *s)
{
    const struct mc_golden *g = s->g;
    int64_t B = g->batch, L = g->len, D = s->shape.hidden;
    int64_t nconv = s->shape.conv_channels * s->shape.conv_kernel, nstate = mc_family_state_elems(&s->shape);
    struct cache c = {0}, cr = {0};
    double *yb = xcalloc((size_t)(B * L * D), sizeof *yb, s);
    double *yr = xcalloc((size_t)(L * D), sizeof *yr, s);
    double *convb = xcalloc((size_t)(B * nconv), sizeof *convb, s);
    double *convr = xcalloc((size_t)nconv, sizeof *convr, s);
    double *stb = nstate ? xcalloc((size_t)(B * nstate), sizeof *stb, s) : NULL;
    double *str = nstate ? xcalloc((size_t)nstate, sizeof *str, s) : NULL;
    if (!yb || !yr || !convb || !convr || (nstate && (!stb || !str)))
        goto out;
    struct slice sl = rows_all(g, 0, L);
    if (cache_new(s, B, &c) != 0 || forward(s, &c, &sl, yb) != 0 || check_output(s, &sl, yb) != 0 ||
        cache_read(s, &c, convb, stb) != 0)
        goto out;
    for (int64_t b = 0; b < B && !s->broken; b++) {
        struct slice sr = {.r0 = b, .nrows = 1, .t0 = 0, .len = L, .masked = 1, .x = NULL};
        if (cache_new(s, 1, &cr) != 0 || forward(s, &cr, &sr, yr) != 0 || cache_read(s, &cr, convr, str) != 0)
            break;
        const uint8_t *valid = g->mask ? g->mask + b * L : NULL;
        struct mc_compare_view v;
        output_view(s, &sr, valid, &v);
        compare_into(s, "consistency", MC_TENSOR_CONSISTENCY, 0, yr, yb + b * L * D, &v);
        conv_view(s, b, 1, L, &v);
        compare_into(s, "consistency", MC_TENSOR_CONSISTENCY, 0, convr, convb + b * nconv, &v);
        if (nstate) {
            state_view(s, b, 1, L, &v);
            compare_into(s, "consistency", MC_TENSOR_CONSISTENCY, 0, str, stb + b * nstate, &v);
        }
        cache_drop(s, &cr);
    }
out:
    cache_drop(s, &c);
    cache_drop(s, &cr);
    free(yb);
    free(yr);
    free(convb);
    free(convr);
    free(stb);
    free(str);
}

/* ---- validation and dispatch --------------------------------------------------------------------- */

static enum mc_err_code bad_param(const struct mc_case *c, const struct mc_scenario_spec *sp, struct mc_error *err,
                                  const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static enum mc_err_code bad_param(const struct mc_case *c, const struct mc_scenario_spec *sp, struct mc_error *err,
                                  const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return mc_error_set(err, MC_ERR_INPUT, "%s:%d:%d: in 'scenarios.%s': %s (golden %s)", c->path, sp->line,
                        sp->column, mc_scenario_name(sp->kind), what, c->golden_path);
}

enum mc_err_code mc_scenario_validate(const struct mc_case *c, const struct mc_scenario_spec *sp,
                                      const struct mc_golden *g, struct mc_error *err)
{
    int64_t L = g->len;
    if (g->config.family != c->family)
        return mc_error_set(err, MC_ERR_INPUT, "%s: family '%s' but golden %s holds '%s'", c->path,
                            mc_family_name(c->family), c->golden_path, mc_family_name(g->config.family));
    if (mc_golden_position_index(g, L) < 0)
        return mc_error_set(err, MC_ERR_INPUT, "%s: golden %s holds no state at the final position %lld", c->path,
                            c->golden_path, (long long)L);
    switch (sp->kind) {
    case MC_SCENARIO_PREFILL:
        return MC_ERR_NONE;
    case MC_SCENARIO_DECODE:
        if (sp->prefill < 1 || sp->prefill >= L)
            return bad_param(c, sp, err, "prefill %lld must be in [1, %lld)", (long long)sp->prefill, (long long)L);
        return MC_ERR_NONE;
    case MC_SCENARIO_CHUNKED:
        for (int i = 0; i < sp->n_split_sets; i++) {
            const struct mc_split_set *set = &sp->split_sets[i];
            if (set->n > 0 && set->points[set->n - 1] >= L)
                return bad_param(c, sp, err, "split point %lld must be < the sequence length %lld",
                                 (long long)set->points[set->n - 1], (long long)L);
        }
        return MC_ERR_NONE;
    case MC_SCENARIO_FIRST_TOKEN_CAUSALITY:
        if (sp->prefill < 1 || sp->prefill + sp->len > L)
            return bad_param(c, sp, err, "prefill + len (%lld) must be <= the sequence length %lld",
                             (long long)(sp->prefill + sp->len), (long long)L);
        return MC_ERR_NONE;
    case MC_SCENARIO_LEFT_PADDED_BATCH:
        if (g->mask == NULL)
            return bad_param(c, sp, err, "needs a golden with /inputs/attention_mask");
        for (int64_t b = 0; b < g->batch; b++) {
            int64_t pad = pad_length(g, b);
            for (int64_t t = pad; t < L; t++)
                if (!g->mask[b * L + t])
                    return bad_param(c, sp, err, "row %lld of the golden's mask is not left padding (0 at %lld)",
                                     (long long)b, (long long)t);
            if (pad == L)
                return bad_param(c, sp, err, "row %lld of the golden's mask is all padding", (long long)b);
        }
        if (sp->prefill < 1 || sp->prefill + sp->decode_steps > L)
            return bad_param(c, sp, err, "prefill + decode (%lld) must be <= the sequence length %lld",
                             (long long)(sp->prefill + sp->decode_steps), (long long)L);
        return MC_ERR_NONE;
    case MC_SCENARIO_BATCH_INVARIANCE:
        if (g->batch < 2)
            return bad_param(c, sp, err, "needs a golden with at least 2 rows (has %lld)", (long long)g->batch);
        return MC_ERR_NONE;
    case MC_SCENARIO_SPECULATIVE_VERIFY:
    case MC_SCENARIO_RIGHT_PADDED_BATCH:
    case MC_SCENARIO_CHUNK_SIZE_INVARIANCE:
    case MC_SCENARIO_COUNT:
        break;
    }
    return mc_error_set(err, MC_ERR_INPUT, "%s:%d:%d: scenario '%s' is not implemented yet", c->path, sp->line,
                        sp->column, mc_scenario_name(sp->kind));
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

enum mc_err_code mc_scenario_run(const struct mc_scenario_ctx *ctx, struct mc_check_result *res, struct mc_error *err)
{
    double t0 = now_s();
    memset(res, 0, sizeof *res);
    snprintf(res->case_id, sizeof res->case_id, "%s", ctx->c->id);
    snprintf(res->case_path, sizeof res->case_path, "%s", ctx->c->path);
    res->family = ctx->c->family;
    res->scenario = ctx->spec->kind;
    res->backend = ctx->ops->name;
    res->device = ctx->ops->device;
    res->dtype = ctx->dtype;
    res->status = MC_CHECK_PASS;

    struct session s;
    enum mc_err_code rc = session_open(&s, ctx, res, err);
    if (rc == MC_ERR_NONE && !s.broken) {
        switch (ctx->spec->kind) {
        case MC_SCENARIO_PREFILL:
            run_prefill(&s);
            break;
        case MC_SCENARIO_DECODE:
            run_decode(&s);
            break;
        case MC_SCENARIO_CHUNKED:
            run_chunked(&s);
            break;
        case MC_SCENARIO_FIRST_TOKEN_CAUSALITY:
            run_first_token(&s);
            break;
        case MC_SCENARIO_LEFT_PADDED_BATCH:
            run_left_padded(&s);
            break;
        case MC_SCENARIO_BATCH_INVARIANCE:
            run_batch_invariance(&s);
            break;
        default:
            mc_error_set(err, MC_ERR_INTERNAL, "scenario '%s' has no runner", mc_scenario_name(ctx->spec->kind));
            break;
        }
        rc = err->code;
    }
    session_close(&s);
    if (res->status == MC_CHECK_PASS) {
        for (int i = 0; i < res->n_tensors; i++)
            if (!mc_compare_passed(&res->tensors[i].stats))
                res->status = MC_CHECK_FAIL;
    }
    res->duration_s = now_s() - t0;
    return rc;
}
