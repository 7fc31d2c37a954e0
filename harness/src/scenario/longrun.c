/*
 * longrun.c — long_decode and length_sweep (see longrun.h). Both run the backend through the session
 * machinery on inputs of their own (mc_slice.x) and compare with the family's reference run in
 * float64 on the same inputs and the golden's weights, both rounded to the check's dtype first
 * (exact for the bundled goldens and for the inputs drawn here), so the error measured is the
 * backend's own at any dtype.
 */
#include "scenario/longrun.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "family/family.h"
#include "golden/refrun.h"
#include "base/rng.h"

/* Largest [rows][tokens][D] a length_sweep input may have (elements): 2^26 doubles are 512 MiB per
 * buffer, and the sweep holds a few. A longer sweep needs a golden with a smaller D. */
#define LONGRUN_MAX_ELEMS (1LL << 26)
/* long_decode bounds the error growth (the `growth` tensor) from this many steps on */
#define LONGRUN_GROWTH_STEPS 100
/* length_sweep runs lengths above this as a batch of one (the golden's rows below it) */
#define LONGRUN_BATCH_LIMIT 8192

/* N(0,1) draws rounded to bf16 (8 significant bits), zero below the f16 normal range: exact in
 * bf16, f16, f32 and f64, so every dtype sees the same input and the reference the same values. */
static void draw_inputs(struct mc_rng *rng, double *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double v = mc_dtype_round(MC_DTYPE_BF16, mc_rng_normal(rng));
        x[i] = fabs(v) < 0x1p-14 ? 0.0 : v;
    }
}

/* The expected values: the reference in f64 on x [rows][len][D]. -1 (an input problem of the case,
 * recorded in the session's error) when the family has no reference or it fails. */
static int reference_run(struct mc_session *s, const double *x, int64_t rows, int64_t len, double *y, double *conv,
                         double *state)
{
    const struct mc_scenario_ctx *ctx = s->ctx;
    char why[512];
    if (ctx->ref_ops == NULL || !(ctx->ref_ops->dtypes & MC_DTYPE_BIT(MC_DTYPE_F64))) {
        mc_error_set(s->err, MC_ERR_INPUT, "%s:%d:%d: scenario '%s' needs the family's reference backend in f64 "
                     "for its expected values", ctx->c->path, ctx->spec->line, ctx->spec->column,
                     mc_scenario_name(ctx->spec->kind));
        return -1;
    }
    if (mc_refrun_inputs(s->g, ctx->ref_ops, ctx->dtype, x, rows, len, y, conv, state, why, sizeof why) != 0) {
        mc_error_set(s->err, MC_ERR_INPUT, "%s:%d:%d: scenario '%s': %s", ctx->c->path, ctx->spec->line,
                     ctx->spec->column, mc_scenario_name(ctx->spec->kind), why);
        return -1;
    }
    return 0;
}

/* Tokens [t0, t0+len) of x [rows][L][D] into out [rows][len][D]. */
static void take_tokens(const double *x, int64_t rows, int64_t L, int64_t D, int64_t t0, int64_t len, double *out)
{
    for (int64_t b = 0; b < rows; b++)
        memcpy(out + b * len * D, x + (b * L + t0) * D, (size_t)(len * D) * sizeof *out);
}

/* Compares the cache c (rows rows) with the reference cache after `pos` tokens. */
static void check_cache(struct mc_session *s, const struct mc_session_cache *c, const double *conv_ref,
                        const double *state_ref, int64_t pos)
{
    static const struct mc_cache_compare how = {"conv_state", "recurrent_state", MC_TENSOR_CONV_STATE,
                                                MC_TENSOR_RECURRENT_STATE, 0};
    mc_session_compare_cache(s, c, &how, conv_ref, state_ref, 0, pos);
}

/* Compares y [rows][len][D] with the reference's yref [rows][len][D] as one "output" tensor whose
 * token axis starts at t0. */
static void check_output(struct mc_session *s, int64_t rows, int64_t t0, int64_t len, const double *y,
                         const double *yref)
{
    struct mc_slice sl = {.r0 = 0, .nrows = rows, .t0 = t0, .len = len};
    struct mc_compare_view v;
    mc_session_output_view(s, &sl, NULL, &v);
    mc_session_compare(s, "output", MC_TENSOR_OUTPUT, 0, y, yref, &v);
}

/* ---- long_decode ------------------------------------------------------------------------------- */

/* The error of step t (y, yref [rows][steps][D]) under tol: worst |a-b| and worst headroom, +inf
 * for a non-finite pair. */
static void step_error(const double *y, const double *yref, int64_t rows, int64_t steps, int64_t D, int64_t t,
                       struct mc_tolerance tol, double *abs_err, double *headroom)
{
    double e = 0.0, h = 0.0;
    for (int64_t b = 0; b < rows; b++) {
        const double *a = y + (b * steps + t) * D, *r = yref + (b * steps + t) * D;
        for (int64_t d = 0; d < D; d++) {
            if (!isfinite(a[d]) || !isfinite(r[d])) {
                e = h = INFINITY;
                continue;
            }
            double err = fabs(a[d] - r[d]), bound = tol.atol + tol.rtol * fabs(r[d]);
            e = err > e ? err : e;
            double hr = bound > 0 ? err / bound : err > 0 ? INFINITY : 0.0;
            h = hr > h ? hr : h;
        }
    }
    *abs_err = e;
    *headroom = h;
}

/* Root mean square of y - yref over steps [t0, t1) (y, yref [rows][steps][D]); +inf when a pair is
 * not finite. */
static double rms_error(const double *y, const double *yref, int64_t rows, int64_t steps, int64_t D, int64_t t0,
                        int64_t t1)
{
    double sum = 0.0;
    for (int64_t b = 0; b < rows; b++)
        for (int64_t i = (b * steps + t0) * D; i < (b * steps + t1) * D; i++) {
            if (!isfinite(y[i]) || !isfinite(yref[i]))
                return INFINITY;
            sum += (y[i] - yref[i]) * (y[i] - yref[i]);
        }
    return sqrt(sum / (double)(rows * (t1 - t0) * D));
}

/* The per-step profile (scenario.h struct mc_step_profile) and the growth bound: the root mean square
 * error over the last tenth of the steps against the first tenth, under the `growth` tolerance
 * (|e_last - e_first| <= atol + rtol * e_first). The RMS, not the worst element: the worst element of
 * a reduced-precision output is one storage rounding of the largest output of the stretch, which
 * wanders with the outputs' scale; the RMS of a stationary error does not. */
static void record_steps(struct mc_session *s, const double *y, const double *yref, int64_t rows, int64_t P,
                         int64_t steps)
{
    int64_t D = s->shape.hidden;
    struct mc_step_profile *p = &s->res->by_step;
    struct mc_tolerance tol = s->tol[MC_TENSOR_OUTPUT];
    int64_t tenth = steps / 10 > 0 ? steps / 10 : 1;
    double e_first, e_last;
    memset(p, 0, sizeof *p);
    snprintf(p->tensor, sizeof p->tensor, "output");
    p->first_token = P;
    p->steps = steps;
    p->per_bucket = (steps + MC_STEP_BUCKETS - 1) / MC_STEP_BUCKETS;
    p->n_buckets = (int)((steps + p->per_bucket - 1) / p->per_bucket);
    for (int64_t t = 0; t < steps; t++) {
        double e, h;
        step_error(y, yref, rows, steps, D, t, tol, &e, &h);
        int64_t k = t / p->per_bucket;
        if (t % p->per_bucket == 0 || e > p->max_abs_err[k])
            p->max_abs_err[k] = (float)e;
        if (t % p->per_bucket == 0 || h > p->headroom[k])
            p->headroom[k] = (float)h;
    }
    if (steps < LONGRUN_GROWTH_STEPS)
        return; /* a tenth of fewer than 10 steps says nothing about growth: by_step only */
    e_first = rms_error(y, yref, rows, steps, D, 0, tenth);
    e_last = rms_error(y, yref, rows, steps, D, steps - tenth, steps);
    struct mc_compare_view v = {.ndim = 1, .dims = {1}, .dim_names = {"step"}, .token_axis = -1,
                                .token_offset = P + steps - tenth};
    mc_session_compare(s, "growth", MC_TENSOR_GROWTH, 0, &e_last, &e_first, &v);
}

/* long_decode (`steps: N`, `prefill: P`, `seed`): P tokens as one prefill, then N single-token
 * forwards on the same cache, all on drawn inputs. Against the reference's one forward over the same
 * P + N tokens: the prefill's outputs, the N decode outputs as one [B][N][D] tensor, the cache after
 * the last step, and the error per step (by_step) with its growth bound (growth). */
static void run_long_decode(struct mc_session *s)
{
    const struct mc_scenario_spec *sp = s->ctx->spec;
    int64_t B = s->g->batch, D = s->shape.hidden, P = sp->prefill, N = sp->steps, L = P + N;
    int64_t nconv = B * s->shape.conv_channels * s->shape.conv_kernel, nstate = B * mc_family_state_elems(&s->shape);
    struct mc_session_cache c = {0};
    double *x = mc_session_calloc((size_t)(B * L * D), sizeof *x, s);
    double *yref = mc_session_calloc((size_t)(B * L * D), sizeof *yref, s);
    double *conv_ref = mc_session_calloc((size_t)nconv, sizeof *conv_ref, s);
    double *state_ref = nstate ? mc_session_calloc((size_t)nstate, sizeof *state_ref, s) : NULL;
    double *xs = mc_session_calloc((size_t)(B * P * D), sizeof *xs, s);
    double *ys = mc_session_calloc((size_t)(B * P * D), sizeof *ys, s);
    double *y = mc_session_calloc((size_t)(B * N * D), sizeof *y, s);
    double *yr = mc_session_calloc((size_t)(B * N * D), sizeof *yr, s);
    double *x1 = mc_session_calloc((size_t)(B * D), sizeof *x1, s);
    double *y1 = mc_session_calloc((size_t)(B * D), sizeof *y1, s);
    if (!x || !yref || !conv_ref || (nstate && !state_ref) || !xs || !ys || !y || !yr || !x1 || !y1)
        goto out;
    struct mc_rng rng;
    mc_rng_seed(&rng, sp->seed + s->ctx->seed_offset);
    draw_inputs(&rng, x, (size_t)(B * L * D));
    if (reference_run(s, x, B, L, yref, conv_ref, state_ref) != 0 || mc_session_cache_new(s, B, &c) != 0)
        goto out;
    take_tokens(x, B, L, D, 0, P, xs);
    struct mc_slice sl = {.r0 = 0, .nrows = B, .t0 = 0, .len = P, .x = xs};
    int tok = mc_session_run_begin(s, "prefill on drawn inputs (tokens)", &P, 1);
    if (mc_session_forward(s, &c, &sl, ys) == 0) {
        take_tokens(yref, B, L, D, 0, P, xs); /* xs now holds the reference's prefill outputs */
        check_output(s, B, 0, P, ys, xs);
    }
    mc_session_run_end(s, tok);
    int64_t what[2] = {P, N};
    tok = mc_session_run_begin(s, "decode steps on drawn inputs (from token, steps)", what, 2);
    for (int64_t t = 0; t < N && !s->broken; t++) {
        take_tokens(x, B, L, D, P + t, 1, x1);
        struct mc_slice st = {.r0 = 0, .nrows = B, .t0 = P + t, .len = 1, .x = x1};
        if (mc_session_forward(s, &c, &st, y1) != 0)
            break;
        for (int64_t b = 0; b < B; b++)
            memcpy(y + (b * N + t) * D, y1 + b * D, (size_t)D * sizeof *y);
    }
    if (!s->broken) {
        take_tokens(yref, B, L, D, P, N, yr);
        check_output(s, B, P, N, y, yr);
        check_cache(s, &c, conv_ref, state_ref, L);
        record_steps(s, y, yr, B, P, N);
    }
    mc_session_run_end(s, tok);
out:
    mc_session_cache_drop(s, &c);
    free(x);
    free(yref);
    free(conv_ref);
    free(state_ref);
    free(xs);
    free(ys);
    free(y);
    free(yr);
    free(x1);
    free(y1);
}

/* ---- length_sweep ------------------------------------------------------------------------------ */

/* length_sweep (`lengths: [...]`, `seed`): for each length T, one prefill of T drawn tokens into a
 * fresh cache; output and final cache against the reference on the same tokens. Lengths above
 * LONGRUN_BATCH_LIMIT run as a batch of one. */
static void run_length_sweep(struct mc_session *s)
{
    const struct mc_scenario_spec *sp = s->ctx->spec;
    int64_t D = s->shape.hidden;
    for (int i = 0; i < sp->n_lengths && !s->broken; i++) {
        int64_t T = sp->lengths[i], B = T > LONGRUN_BATCH_LIMIT ? 1 : s->g->batch;
        int64_t nconv = B * s->shape.conv_channels * s->shape.conv_kernel;
        int64_t nstate = B * mc_family_state_elems(&s->shape);
        struct mc_session_cache c = {0};
        double *x = mc_session_calloc((size_t)(B * T * D), sizeof *x, s);
        double *y = mc_session_calloc((size_t)(B * T * D), sizeof *y, s);
        double *yref = mc_session_calloc((size_t)(B * T * D), sizeof *yref, s);
        double *conv_ref = mc_session_calloc((size_t)nconv, sizeof *conv_ref, s);
        double *state_ref = nstate ? mc_session_calloc((size_t)nstate, sizeof *state_ref, s) : NULL;
        int64_t what[2] = {T, B};
        int tok = mc_session_run_begin(s, "prefill on drawn inputs (tokens, rows)", what, 2);
        if (x && y && yref && conv_ref && (nstate == 0 || state_ref)) {
            struct mc_rng rng;
            /* one stream per length: a length's inputs do not depend on the lengths listed before it */
            mc_rng_seed(&rng, sp->seed + s->ctx->seed_offset + 0x9e3779b97f4a7c15ull * (uint64_t)T);
            draw_inputs(&rng, x, (size_t)(B * T * D));
            struct mc_slice sl = {.r0 = 0, .nrows = B, .t0 = 0, .len = T, .x = x};
            if (reference_run(s, x, B, T, yref, conv_ref, state_ref) == 0 && mc_session_cache_new(s, B, &c) == 0 &&
                mc_session_forward(s, &c, &sl, y) == 0) {
                check_output(s, B, 0, T, y, yref);
                check_cache(s, &c, conv_ref, state_ref, T);
            }
        }
        mc_session_run_end(s, tok);
        mc_session_cache_drop(s, &c);
        free(x);
        free(y);
        free(yref);
        free(conv_ref);
        free(state_ref);
        if (s->err->code != MC_ERR_NONE)
            break;
    }
}

/* ---- dispatch and validation --------------------------------------------------------------------- */

void mc_longrun_run(struct mc_session *s)
{
    s->live_reference = 1;
    switch (s->ctx->spec->kind) {
    case MC_SCENARIO_LONG_DECODE:
        run_long_decode(s);
        break;
    case MC_SCENARIO_LENGTH_SWEEP:
        run_length_sweep(s);
        break;
    default:
        break;
    }
}

const char *mc_longrun_misfit(const struct mc_scenario_spec *sp, const struct mc_golden *g, char *buf, size_t len)
{
    struct mc_family_shape sh;
    mc_family_shape(&g->config, &sh);
    /* a KV cache holds a fixed number of positions: nothing runs past it */
    int64_t cap = g->config.family == MC_FAMILY_ATTENTION ? g->config.u.attention.cache_length : 0;
    int64_t most = sp->kind == MC_SCENARIO_LONG_DECODE ? sp->prefill + sp->steps
                   : sp->n_lengths > 0                  ? sp->lengths[sp->n_lengths - 1]
                                                        : 0;
    if (cap > 0 && most > cap) {
        snprintf(buf, len, "%lld tokens exceed the KV cache of the golden's configuration (cache_length %lld)",
                 (long long)most, (long long)cap);
        return buf;
    }
    if (sp->kind == MC_SCENARIO_LONG_DECODE) {
        if (g->batch * (sp->prefill + sp->steps) * sh.hidden > LONGRUN_MAX_ELEMS) {
            snprintf(buf, len, "prefill + steps (%lld) x %lld rows x D %lld exceeds %lld elements",
                     (long long)(sp->prefill + sp->steps), (long long)g->batch, (long long)sh.hidden,
                     (long long)LONGRUN_MAX_ELEMS);
            return buf;
        }
        return NULL;
    }
    for (int i = 0; i < sp->n_lengths; i++) {
        int64_t T = sp->lengths[i], B = T > LONGRUN_BATCH_LIMIT ? 1 : g->batch;
        if (B * T * sh.hidden > LONGRUN_MAX_ELEMS) {
            snprintf(buf, len, "length %lld x %lld row(s) x D %lld exceeds %lld elements: sweep long lengths on a "
                     "golden with a small D", (long long)T, (long long)B, (long long)sh.hidden,
                     (long long)LONGRUN_MAX_ELEMS);
            return buf;
        }
    }
    return NULL;
}
