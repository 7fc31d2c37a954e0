/* experiment.c — see experiment.h. */
#include "experiment/experiment.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "scenario/session.h"

/* An experiment's "hypothesis" comparison counts as explained when it passes the tolerance or its error is
 * at most this share of the port's error against the golden (NMSE ratio: 1e-4 is a hundredth in RMS):
 * the wrong model accounts for the failure, up to the port's own rounding. */
#define EXPLAINED_NMSE_SHARE 1e-4
/* f32_reference: the port's RMS error at f64 is "the size of float32 rounding" when within this factor
 * of the f32 reference's on the same call, either way (a chunked f32 kernel sums in another order than
 * the sequential reference, which moves its error by a few times, not by orders of magnitude). */
#define F32_RATIO 30.0
/* f32_paths: one intermediate of a path kept in float32 errs by at most what the whole call in float32 does:
 * the port's RMS error at f64 within this factor of the f32 reference's on the same calls (the fifth held-out
 * set's f32 decode state, window and KV cache and f32 chunk state: 2e-5 .. 0.27; structures of one path of the
 * fourth: a decode-only l2-norm epsilon placement 4.6 .. 22, decode-only norm epsilons 440 .. 1e4) */
#define PATH_F32_RATIO 1.5

const char *mc_experiment_name(enum mc_experiment_kind kind)
{
    static const char *const names[MC_EXP_COUNT] = {
        "golden_state_decode", "zero_window", "zero_state", "dt_inside_clamp", "f32_reference", "zeroed_cache",
        "cache_copy", "f32_paths"};
    return kind >= 0 && kind < MC_EXP_COUNT ? names[kind] : "?";
}

static struct mc_slice rows(const struct mc_golden *g, int64_t t0, int64_t len)
{
    struct mc_slice sl = {.r0 = 0, .nrows = g->batch, .t0 = t0, .len = len, .masked = 1, .x = NULL};
    return sl;
}

int64_t mc_experiment_split(const struct mc_scenario_ctx *ctx)
{
    const struct mc_case *c = ctx->c;
    const enum mc_scenario_kind prefer[2] = {MC_SCENARIO_DECODE, MC_SCENARIO_FIRST_TOKEN_CAUSALITY};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < c->n_scenarios; i++) {
            const struct mc_scenario_spec *sp = &c->scenarios[i];
            if (sp->kind == prefer[k] && sp->prefill > 0 && sp->prefill < ctx->g->len &&
                mc_golden_position_index(ctx->g, sp->prefill) >= 0)
                return sp->prefill;
        }
    return -1;
}

/* The golden's cache has a recurrent state / a conv window to zero (attention's KV cache is its state, but
 * zeroing it is no history-less continuation; lightning attention has no conv window). */
static int has_state(const struct mc_golden *g)
{
    struct mc_family_shape sh;
    mc_family_shape(&g->config, &sh);
    return g->config.family != MC_FAMILY_ATTENTION && mc_family_state_elems(&sh) > 0;
}

static int has_window(const struct mc_golden *g)
{
    struct mc_family_shape sh;
    mc_family_shape(&g->config, &sh);
    return g->config.family != MC_FAMILY_ATTENTION && sh.conv_channels * sh.conv_kernel > 0;
}

static int clamp_binds(const struct mc_golden *g)
{
    if (g->config.family != MC_FAMILY_MAMBA2)
        return 0;
    const double *lim = g->config.u.mamba2.time_step_limit;
    return lim[0] > 0.0 || isfinite(lim[1]);
}

static int have_reference(const struct mc_scenario_ctx *ctx)
{
    return ctx->ref_ops != NULL && ctx->ref_ops != ctx->ops && (ctx->ref_ops->dtypes & MC_DTYPE_BIT(ctx->dtype));
}

int mc_experiment_applies(enum mc_experiment_kind kind, const struct mc_scenario_ctx *ctx)
{
    enum mc_family f = ctx->c->family;
    if (f == MC_FAMILY_STACK || (ctx->c->model_type && ctx->c->model_type[0] != '\0'))
        return 0;
    int64_t P = mc_experiment_split(ctx);
    switch (kind) {
    case MC_EXP_GOLDEN_STATE_DECODE:
        return P > 0;
    case MC_EXP_ZERO_WINDOW:
        return P > 0 && has_window(ctx->g) && have_reference(ctx);
    case MC_EXP_ZERO_STATE:
        return P > 0 && has_state(ctx->g) && have_reference(ctx);
    case MC_EXP_DT_INSIDE_CLAMP:
        return P > 0 && clamp_binds(ctx->g) && have_reference(ctx);
    case MC_EXP_F32_REFERENCE:
        return ctx->dtype == MC_DTYPE_F64 && ctx->ref_ops != NULL && ctx->ref_ops != ctx->ops &&
               (ctx->ref_ops->dtypes & MC_DTYPE_BIT(MC_DTYPE_F32));
    case MC_EXP_ZEROED_CACHE:
        return 1;
    case MC_EXP_CACHE_COPY:
        return P > 0;
    case MC_EXP_F32_PATHS:
        return P > 0 && P < ctx->g->len && ctx->dtype == MC_DTYPE_F64 && ctx->ref_ops != NULL &&
               ctx->ref_ops != ctx->ops && (ctx->ref_ops->dtypes & MC_DTYPE_BIT(MC_DTYPE_F32));
    case MC_EXP_COUNT:
        break;
    }
    return 0;
}

/* ---- the session of the reference beside the port's ------------------------------------------------ */

struct side {
    struct mc_scenario_ctx ctx;
    struct mc_check_result *res;
    struct mc_session s;
    int open;
};

/* Opens the reference at `dtype` on golden g (NULL: the port's), its comparisons discarded. */
static int side_open(struct side *r, const struct mc_scenario_ctx *port, enum mc_dtype dtype, const struct mc_golden *g,
                     struct mc_error *err)
{
    memset(r, 0, sizeof *r);
    r->ctx = *port;
    r->ctx.ops = port->ref_ops;
    r->ctx.dtype = dtype;
    r->ctx.ref = NULL;
    r->ctx.probes = NULL;
    if (dtype != port->dtype)
        r->ctx.weights = NULL;
    if (g != NULL)
        r->ctx.g = g;
    r->res = calloc(1, sizeof *r->res);
    if (r->res == NULL)
        return -1;
    if (mc_session_open(&r->s, &r->ctx, r->res, err) != MC_ERR_NONE)
        return -1;
    r->open = 1;
    return r->s.broken ? -1 : 0;
}

static void side_close(struct side *r)
{
    if (r->open)
        mc_session_close(&r->s);
    free(r->res);
    r->res = NULL;
    r->open = 0;
}

/* The golden cache at token P (pointers into the golden), or -1. */
static int golden_cache(const struct mc_session *s, int64_t P, const double **conv, const double **state)
{
    const struct mc_golden *g = s->g;
    int64_t ti = mc_golden_position_index(g, P);
    if (ti < 0)
        return -1;
    int64_t nconv = s->shape.conv_channels * s->shape.conv_kernel, nstate = mc_family_state_elems(&s->shape);
    *conv = g->conv_state.data + ti * g->batch * nconv;
    *state = nstate ? g->recurrent_state.data + ti * g->batch * nstate : NULL;
    return 0;
}

/* A fresh cache holding conv / state (each NULL: zeros). */
static int cache_from(struct mc_session *s, const double *conv, const double *state, int zero_conv, int zero_state,
                      struct mc_session_cache *c)
{
    const struct mc_golden *g = s->g;
    int64_t nconv = g->batch * s->shape.conv_channels * s->shape.conv_kernel;
    int64_t nstate = g->batch * mc_family_state_elems(&s->shape);
    double *cv = mc_session_calloc((size_t)(nconv ? nconv : 1), sizeof *cv, s);
    double *st = nstate ? mc_session_calloc((size_t)nstate, sizeof *st, s) : NULL;
    int rc = -1;
    if (cv == NULL || (nstate && st == NULL))
        goto out;
    if (conv && !zero_conv)
        memcpy(cv, conv, (size_t)nconv * sizeof *cv);
    if (state && st && !zero_state)
        memcpy(st, state, (size_t)nstate * sizeof *st);
    if (mc_session_cache_new(s, g->batch, c) == 0)
        rc = mc_session_cache_write(s, c, cv, st);
out:
    free(cv);
    free(st);
    return rc;
}

/* Runs slice sl (or, step_by_step, each of its tokens as its own call) on cache c, writing the outputs
 * into full [B][L][D] at the slice's place. */
static int run_into(struct mc_session *s, struct mc_session_cache *c, struct mc_slice sl, int step_by_step, double *full)
{
    const struct mc_golden *g = s->g;
    int64_t D = s->shape.hidden;
    int64_t n = step_by_step ? 1 : sl.len, t_end = sl.t0 + sl.len;
    double *y = mc_session_calloc((size_t)(sl.nrows * n * D), sizeof *y, s);
    if (y == NULL)
        return -1;
    int rc = 0;
    for (int64_t t = sl.t0; t < t_end && rc == 0; t += n) {
        struct mc_slice one = sl;
        one.t0 = t;
        one.len = n;
        rc = mc_session_forward(s, c, &one, y);
        for (int64_t b = 0; rc == 0 && b < sl.nrows; b++)
            memcpy(full + ((sl.r0 + b) * g->len + t) * D, y + b * n * D, (size_t)(n * D) * sizeof *y);
    }
    free(y);
    return rc;
}

/* ---- the experiments ----------------------------------------------------------------------------------- */

static void golden_state_decode(struct mc_session *s, int64_t P)
{
    const double *conv, *state;
    struct mc_session_cache c = {0};
    if (golden_cache(s, P, &conv, &state) != 0)
        return;
    struct mc_slice sl = rows(s->g, P, 1);
    int tok = mc_session_run_begin(s, "decode from the golden cache at token", &P, 1);
    if (cache_from(s, conv, state, 0, 0, &c) == 0)
        mc_session_step(s, &c, &sl);
    mc_session_run_end(s, tok);
    mc_session_cache_drop(s, &c);
}

/* The port continues from the golden cache at P; the reference from the same cache with the window (or
 * the state) zeroed; "hypothesis" compares the two. */
static void zeroed_part(struct mc_session *s, struct side *ref, int64_t P, int zero_conv, int zero_state)
{
    const struct mc_golden *g = s->g;
    const double *conv, *state;
    struct mc_session_cache c = {0}, rc = {0};
    size_t n = (size_t)(g->batch * g->len * s->shape.hidden);
    double *yp = mc_session_calloc(n, sizeof *yp, s), *yh = mc_session_calloc(n, sizeof *yh, s);
    struct mc_slice sl = rows(g, P, g->len - P);
    if (yp == NULL || yh == NULL || golden_cache(s, P, &conv, &state) != 0)
        goto out;
    if (cache_from(s, conv, state, 0, 0, &c) != 0 || run_into(s, &c, sl, 0, yp) != 0)
        goto out;
    if (cache_from(&ref->s, conv, state, zero_conv, zero_state, &rc) != 0 || run_into(&ref->s, &rc, sl, 0, yh) != 0)
        goto out;
    double *ys = mc_session_calloc((size_t)(sl.nrows * sl.len * s->shape.hidden), sizeof *ys, s);
    if (ys == NULL)
        goto out;
    for (int64_t b = 0; b < sl.nrows; b++)
        memcpy(ys + b * sl.len * s->shape.hidden, yp + (b * g->len + P) * s->shape.hidden,
               (size_t)(sl.len * s->shape.hidden) * sizeof *ys);
    mc_session_check_output_against(s, &sl, ys, g->output.data, "output", MC_TENSOR_OUTPUT);
    mc_session_check_output_against(s, &sl, ys, yh, "hypothesis", MC_TENSOR_OUTPUT);
    free(ys);
out:
    mc_session_cache_drop(s, &c);
    mc_session_cache_drop(&ref->s, &rc);
    free(yp);
    free(yh);
}

/* Prefill [0, P), then decode to L one token at a time, on the port and on the reference over golden g's
 * inputs; "name" compares the port's decode outputs with the reference's. */
static void decode_vs_reference(struct mc_session *s, struct side *ref, int64_t P, const char *name)
{
    const struct mc_golden *g = s->g;
    size_t n = (size_t)(g->batch * g->len * s->shape.hidden);
    double *yp = mc_session_calloc(n, sizeof *yp, s), *yr = mc_session_calloc(n, sizeof *yr, s);
    struct mc_session_cache c = {0}, rc = {0};
    struct mc_slice pre = rows(g, 0, P), dec = rows(g, P, g->len - P);
    if (yp == NULL || yr == NULL)
        goto out;
    if (mc_session_cache_new(s, g->batch, &c) != 0 || run_into(s, &c, pre, 0, yp) != 0 || run_into(s, &c, dec, 1, yp) != 0)
        goto out;
    if (mc_session_cache_new(&ref->s, g->batch, &rc) != 0 || run_into(&ref->s, &rc, pre, 0, yr) != 0 ||
        run_into(&ref->s, &rc, dec, 1, yr) != 0)
        goto out;
    double *ys = mc_session_calloc((size_t)(dec.nrows * dec.len * s->shape.hidden), sizeof *ys, s);
    if (ys == NULL)
        goto out;
    for (int64_t b = 0; b < dec.nrows; b++)
        memcpy(ys + b * dec.len * s->shape.hidden, yp + (b * g->len + P) * s->shape.hidden,
               (size_t)(dec.len * s->shape.hidden) * sizeof *ys);
    mc_session_check_output_against(s, &dec, ys, yr, name, MC_TENSOR_OUTPUT);
    free(ys);
out:
    mc_session_cache_drop(s, &c);
    mc_session_cache_drop(&ref->s, &rc);
    free(yp);
    free(yr);
}

static void f32_reference(struct mc_session *s, struct side *ref)
{
    const struct mc_golden *g = s->g;
    size_t n = (size_t)(g->batch * g->len * s->shape.hidden);
    double *y = mc_session_calloc(n, sizeof *y, s);
    struct mc_session_cache c = {0}, rc = {0};
    struct mc_slice sl = rows(g, 0, g->len);
    if (y == NULL)
        goto out;
    if (mc_session_cache_new(&ref->s, g->batch, &rc) != 0 || run_into(&ref->s, &rc, sl, 0, y) != 0)
        goto out;
    mc_session_check_output_against(s, &sl, y, g->output.data, "ref32", MC_TENSOR_OUTPUT);
    if (mc_session_cache_new(s, g->batch, &c) == 0)
        mc_session_step(s, &c, &sl);
out:
    mc_session_cache_drop(s, &c);
    mc_session_cache_drop(&ref->s, &rc);
    free(y);
}

/* The prefill of P tokens, then the rest as decode steps (`step` 1) or as one continued forward (0), on
 * session s; y [B][L][D] receives every output. 0, or -1 when a call failed. */
static int path_run(struct mc_session *s, int64_t P, int step, double *y)
{
    struct mc_session_cache c = {0};
    int rc = mc_session_cache_new(s, s->g->batch, &c) != 0 || run_into(s, &c, rows(s->g, 0, P), 0, y) != 0 ||
                     run_into(s, &c, rows(s->g, P, s->g->len - P), step, y) != 0
                 ? -1
                 : 0;
    mc_session_cache_drop(s, &c);
    return rc;
}

/* f32_paths: per path (decode steps "dec", the continued forward "cont"), the port at f64 ("<path>64") and
 * the f32 reference ("<path>32") against the golden on the tokens after the prefill. */
static void f32_paths(struct mc_session *s, struct side *ref, int64_t P)
{
    const struct mc_golden *g = s->g;
    const int64_t D = s->shape.hidden, R = g->len - P;
    size_t n = (size_t)(g->batch * g->len * D);
    double *yp = mc_session_calloc(n, sizeof *yp, s), *yr = mc_session_calloc(n, sizeof *yr, s);
    double *pk = mc_session_calloc((size_t)(g->batch * R * D), sizeof *pk, s);
    struct mc_slice rest = rows(g, P, R);
    for (int step = 1; step >= 0 && yp != NULL && yr != NULL && pk != NULL; step--) {
        if (path_run(s, P, step, yp) != 0 || path_run(&ref->s, P, step, yr) != 0)
            break;
        const double *src[2] = {yp, yr};
        const char *name[2][2] = {{"cont64", "cont32"}, {"dec64", "dec32"}};
        for (int k = 0; k < 2; k++) {
            for (int64_t b = 0; b < g->batch; b++)
                memcpy(pk + b * R * D, src[k] + (b * g->len + P) * D, (size_t)(R * D) * sizeof *pk);
            mc_session_check_output_against(s, &rest, pk, g->output.data, name[step][k], MC_TENSOR_OUTPUT);
        }
    }
    free(pk);
    free(yp);
    free(yr);
}

static void zeroed_cache(struct mc_session *s)
{
    const struct mc_golden *g = s->g;
    double *ys = mc_session_calloc((size_t)(g->batch * g->len * s->shape.hidden), sizeof *ys, s);
    struct mc_session_cache c = {0};
    struct mc_slice sl = rows(g, 0, g->len);
    if (ys == NULL)
        return;
    if (mc_session_cache_new(s, g->batch, &c) == 0 && mc_session_forward(s, &c, &sl, ys) == 0)
        mc_session_check_output_against(s, &sl, ys, g->output.data, "fresh", MC_TENSOR_OUTPUT);
    mc_session_cache_drop(s, &c);
    if (cache_from(s, NULL, NULL, 1, 1, &c) == 0 && mc_session_forward(s, &c, &sl, ys) == 0)
        mc_session_check_output_against(s, &sl, ys, g->output.data, "zeroed", MC_TENSOR_OUTPUT);
    mc_session_cache_drop(s, &c);
    free(ys);
}

static void cache_copy(struct mc_session *s, int64_t P)
{
    const struct mc_golden *g = s->g;
    int64_t nconv = g->batch * s->shape.conv_channels * s->shape.conv_kernel;
    int64_t nstate = g->batch * mc_family_state_elems(&s->shape);
    double *conv = mc_session_calloc((size_t)(nconv ? nconv : 1), sizeof *conv, s);
    double *state = nstate ? mc_session_calloc((size_t)nstate, sizeof *state, s) : NULL;
    struct mc_session_cache c = {0}, d = {0};
    struct mc_slice sl = rows(g, 0, P);
    double *y = mc_session_calloc((size_t)(g->batch * P * s->shape.hidden), sizeof *y, s);
    if (conv == NULL || (nstate && state == NULL) || y == NULL)
        goto out;
    if (mc_session_cache_new(s, g->batch, &c) != 0 || mc_session_forward(s, &c, &sl, y) != 0 ||
        mc_session_cache_read(s, &c, conv, state) != 0 || mc_session_cache_dup(s, &c, &d) != 0)
        goto out;
    mc_session_check_cache_same(s, &d, "copy", conv, state, 0, P);
out:
    mc_session_cache_drop(s, &c);
    mc_session_cache_drop(s, &d);
    free(conv);
    free(state);
    free(y);
}

enum mc_err_code mc_experiment_run(enum mc_experiment_kind kind, const struct mc_scenario_ctx *ctx,
                                   struct mc_check_result *res, struct mc_error *err)
{
    double t0 = mc_clock_now_s();
    memset(res, 0, sizeof *res);
    snprintf(res->case_id, sizeof res->case_id, "%s", ctx->c->id);
    snprintf(res->case_path, sizeof res->case_path, "%s", ctx->c->path);
    snprintf(res->detail, sizeof res->detail, "experiment %s", mc_experiment_name(kind));
    res->family = ctx->c->family;
    res->scenario = ctx->spec->kind;
    res->backend = ctx->ops->name;
    res->device = ctx->ops->device;
    res->dtype = ctx->dtype;
    res->status = MC_CHECK_PASS;
    if (!mc_experiment_applies(kind, ctx)) {
        res->status = MC_CHECK_SKIPPED;
        return MC_ERR_NONE;
    }
    int64_t P = mc_experiment_split(ctx);
    struct mc_golden wide;
    struct mc_scenario_ctx pctx = *ctx;
    pctx.probes = NULL;
    pctx.ref = NULL;
    if (kind == MC_EXP_DT_INSIDE_CLAMP) {
        wide = *ctx->g;
        wide.config.u.mamba2.time_step_limit[0] = 0.0;
        wide.config.u.mamba2.time_step_limit[1] = INFINITY;
    }
    struct mc_session s;
    struct side ref = {0}, ref2 = {0};
    enum mc_err_code rc = mc_session_open(&s, &pctx, res, err);
    if (rc == MC_ERR_NONE && !s.broken) {
        switch (kind) {
        case MC_EXP_GOLDEN_STATE_DECODE:
            golden_state_decode(&s, P);
            break;
        case MC_EXP_ZERO_WINDOW:
        case MC_EXP_ZERO_STATE:
            if (side_open(&ref, ctx, ctx->dtype, NULL, err) == 0)
                zeroed_part(&s, &ref, P, kind == MC_EXP_ZERO_WINDOW, kind == MC_EXP_ZERO_STATE);
            break;
        case MC_EXP_DT_INSIDE_CLAMP:
            /* the control (the clamp as configured) and the hypothesis (every dt inside it) */
            if (side_open(&ref, ctx, ctx->dtype, NULL, err) == 0)
                decode_vs_reference(&s, &ref, P, "control");
            mc_session_close(&s);
            pctx.g = &wide;
            if (!s.broken && err->code == MC_ERR_NONE && mc_session_open(&s, &pctx, res, err) == MC_ERR_NONE &&
                !s.broken && side_open(&ref2, ctx, ctx->dtype, &wide, err) == 0)
                decode_vs_reference(&s, &ref2, P, "hypothesis");
            break;
        case MC_EXP_F32_REFERENCE:
            if (side_open(&ref, ctx, MC_DTYPE_F32, NULL, err) == 0)
                f32_reference(&s, &ref);
            break;
        case MC_EXP_ZEROED_CACHE:
            zeroed_cache(&s);
            break;
        case MC_EXP_CACHE_COPY:
            cache_copy(&s, P);
            break;
        case MC_EXP_F32_PATHS:
            if (side_open(&ref, ctx, MC_DTYPE_F32, NULL, err) == 0)
                f32_paths(&s, &ref, P);
            break;
        case MC_EXP_COUNT:
            break;
        }
        rc = err->code;
    }
    side_close(&ref);
    side_close(&ref2);
    mc_session_close(&s);
    mc_check_verdict(res);
    res->duration_s = mc_clock_now_s() - t0;
    return rc;
}

/* ---- reading the result back ----------------------------------------------------------------------------- */

static const struct mc_tensor_result *tensor(const struct mc_check_result *res, const char *name)
{
    for (int i = 0; i < res->n_tensors; i++)
        if (strcmp(res->tensors[i].name, name) == 0)
            return &res->tensors[i];
    return NULL;
}

static int passed(const struct mc_tensor_result *t)
{
    return mc_compare_passed(&t->stats);
}

/* "right (headroom 0.02)" / "wrong (headroom 3.1e+04, nmse 0.2)" */
static void how(const struct mc_tensor_result *t, char *buf, size_t len)
{
    if (passed(t))
        snprintf(buf, len, "right (headroom %.2g)", t->stats.headroom);
    else
        snprintf(buf, len, "wrong (headroom %.3g, nmse %.2g)", t->stats.headroom, mc_compare_nmse(&t->stats));
}

static int explained(const struct mc_tensor_result *hyp, const struct mc_tensor_result *out)
{
    if (passed(hyp))
        return 1;
    double nh = mc_compare_nmse(&hyp->stats), no = mc_compare_nmse(&out->stats);
    return nh == nh && no == no && hyp->stats.n_nonfinite == 0 && nh <= EXPLAINED_NMSE_SHARE * no;
}

void mc_experiment_outcome(enum mc_experiment_kind kind, const struct mc_check_result *res,
                           struct mc_experiment_outcome *o)
{
    memset(o, 0, sizeof *o);
    o->kind = kind;
    if (res->status == MC_CHECK_SKIPPED || res->status == MC_CHECK_UNSUPPORTED)
        return;
    if (res->status == MC_CHECK_ERROR) {
        snprintf(o->text, sizeof o->text, "%s could not run: %.180s", mc_experiment_name(kind), res->message);
        return;
    }
    char a[96], b[96];
    const struct mc_tensor_result *out = tensor(res, "output"), *hyp = tensor(res, "hypothesis");
    switch (kind) {
    case MC_EXP_GOLDEN_STATE_DECODE:
        if (out == NULL)
            return;
        how(out, a, sizeof a);
        o->verdict = passed(out) ? MC_EXP_HOLDS : MC_EXP_REFUTED;
        snprintf(o->text, sizeof o->text, "decode from the golden cache imported with cache_import: %s", a);
        return;
    case MC_EXP_ZERO_WINDOW:
    case MC_EXP_ZERO_STATE:
        if (out == NULL || hyp == NULL)
            return;
        /* ratio: the headroom of the port's own continuation from the golden cache (< 1: it is right) */
        o->ratio = out->stats.headroom > 1e-300 ? out->stats.headroom : 1e-300;
        if (passed(out)) {
            /* the continued forward from a right cache is right: neither hypothesis explains a failure */
            o->verdict = MC_EXP_REFUTED;
            snprintf(o->text, sizeof o->text,
                     "continued from the golden cache, the port's multi-token forward is right (headroom %.2g)",
                     out->stats.headroom);
            return;
        }
        o->verdict = explained(hyp, out) ? MC_EXP_HOLDS : MC_EXP_REFUTED;
        snprintf(o->text, sizeof o->text,
                 "continued from the golden cache, the output %s the reference's from that cache with the %s zeroed "
                 "(nmse %.2g against it, %.2g against the golden)",
                 o->verdict == MC_EXP_HOLDS ? "equals" : "is not",
                 kind == MC_EXP_ZERO_WINDOW ? "conv window" : "state", mc_compare_nmse(&hyp->stats),
                 mc_compare_nmse(&out->stats));
        return;
    case MC_EXP_DT_INSIDE_CLAMP: {
        const struct mc_tensor_result *ctl = tensor(res, "control");
        if (ctl == NULL || hyp == NULL)
            return;
        how(ctl, a, sizeof a);
        how(hyp, b, sizeof b);
        o->verdict = !passed(ctl) && passed(hyp) ? MC_EXP_HOLDS : MC_EXP_REFUTED;
        snprintf(o->text, sizeof o->text,
                 "decode against the reference with the configured dt clamp: %s; with every dt inside it "
                 "(time_step_limit (0, inf)): %s",
                 a, b);
        return;
    }
    case MC_EXP_F32_REFERENCE: {
        const struct mc_tensor_result *r32 = tensor(res, "ref32");
        if (out == NULL || r32 == NULL || passed(out))
            return;
        double np = mc_compare_nmse(&out->stats), nr = mc_compare_nmse(&r32->stats);
        if (!(np == np) || !(nr > 0.0))
            return;
        o->ratio = sqrt(np / nr);
        o->verdict = o->ratio <= F32_RATIO && o->ratio >= 1.0 / F32_RATIO ? MC_EXP_HOLDS : MC_EXP_REFUTED;
        snprintf(o->text, sizeof o->text,
                 "the port's prefill error at f64 is %.2g times the f32 reference's on the same call (nmse %.2g "
                 "against %.2g)",
                 o->ratio, np, nr);
        return;
    }
    case MC_EXP_ZEROED_CACHE: {
        const struct mc_tensor_result *fr = tensor(res, "fresh"), *ze = tensor(res, "zeroed");
        if (fr == NULL || ze == NULL)
            return;
        how(fr, a, sizeof a);
        how(ze, b, sizeof b);
        /* the hypothesis: a cache fresh from cache_alloc does not hold zeros; ratio: the headroom of the
         * prefill on the zero-imported cache (>= 1: a multi-token forward on a primed all-zero cache is wrong,
         * although it is the fresh prefill's math: the primed flag picks another path) */
        o->verdict = !passed(fr) && passed(ze) ? MC_EXP_HOLDS : MC_EXP_REFUTED;
        o->ratio = ze->stats.headroom > 1e-300 ? ze->stats.headroom : 1e-300;
        snprintf(o->text, sizeof o->text,
                 "prefill on a cache fresh from cache_alloc: %s; on one with zeros imported first: %s", a, b);
        return;
    }
    case MC_EXP_CACHE_COPY: {
        const struct mc_tensor_result *cp = tensor(res, "copy");
        if (cp == NULL)
            return;
        /* the hypothesis: cache_copy does not copy the cache */
        o->verdict = passed(cp) ? MC_EXP_REFUTED : MC_EXP_HOLDS;
        if (passed(cp))
            snprintf(o->text, sizeof o->text, "cache_copy of a primed cache exports bit for bit as its source");
        else
            snprintf(o->text, sizeof o->text,
                     "cache_copy of a primed cache differs from its source in %lld of %lld exported elements "
                     "(first at batch row %lld)",
                     (long long)cp->stats.n_fail, (long long)cp->stats.n_elems, (long long)cp->stats.first_fail_batch);
        return;
    }
    case MC_EXP_F32_PATHS: {
        /* a path the port gets right at f64 says nothing; one whose error is at most PATH_F32_RATIO times the
         * f32 reference's on the same calls is float32 rounding; one further off is not */
        const char *label[2] = {"decode steps", "continued forward"}, *t64[2] = {"dec64", "cont64"},
                   *t32[2] = {"dec32", "cont32"};
        int f32_sized = 0, other = 0;
        size_t used = 0;
        o->text[0] = '\0';
        for (int p = 0; p < 2; p++) {
            const struct mc_tensor_result *r64 = tensor(res, t64[p]), *r32 = tensor(res, t32[p]);
            if (r64 == NULL || r32 == NULL)
                continue;
            int w;
            if (passed(r64)) {
                w = snprintf(o->text + used, sizeof o->text - used, "%s%s: right at f64", used ? "; " : "", label[p]);
            } else {
                double np = mc_compare_nmse(&r64->stats), nr = mc_compare_nmse(&r32->stats);
                double ratio = np == np && nr > 0.0 ? sqrt(np / nr) : INFINITY;
                int sized = ratio <= PATH_F32_RATIO;
                f32_sized += sized;
                other += !sized;
                if (ratio > o->ratio || !(ratio == ratio))
                    o->ratio = ratio;
                w = snprintf(o->text + used, sizeof o->text - used,
                             "%s%s: the port's error at f64 %.2g times the f32 reference's on the same calls (nmse %.2g "
                             "against %.2g)",
                             used ? "; " : "", label[p], ratio, np, nr);
            }
            if (w > 0 && (size_t)w < sizeof o->text - used)
                used += (size_t)w;
        }
        if (f32_sized + other == 0)
            return;
        o->verdict = f32_sized > 0 && other == 0 ? MC_EXP_HOLDS : MC_EXP_REFUTED;
        return;
    }
    case MC_EXP_COUNT:
        break;
    }
}
