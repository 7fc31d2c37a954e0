/* probes.c — see probes.h. */
#include "scenario/probes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "exec/isolate.h"
#include "golden/golden.h"
#include "scenario/session.h"

/* ---- the rerun's state ------------------------------------------------------------------------ */

struct mc_probe_session {
    struct mc_probe_spec spec[MC_PROBE_MAX];
    int n_spec;
    int done;                 /* a stage failed: nothing more to compare */
    /* the reference model on the weights rounded to the dtype, in f64 (NULL: none) */
    const struct mc_backend_ops *ref;
    struct mc_model *ref_model;
    /* the cache before the forward in progress, float64 (mc_probes_before) */
    double *pre_conv, *pre_state;
    int pre_zero;             /* no cache, or one that holds zeros */
    int pre_ok;
};

static struct mc_probe_session *probe_state(struct mc_session *s)
{
    if (s->probe == NULL) {
        s->probe = calloc(1, sizeof *s->probe);
        if (s->probe == NULL) {
            mc_error_set(s->err, MC_ERR_NOMEM, "out of memory");
            return NULL;
        }
        s->probe->n_spec = mc_probe_specs(&s->g->config, s->probe->spec);
    }
    return s->probe;
}

/* The reference model in f64 on the golden's weights rounded to the check's dtype (as refrun.c does);
 * none when the family has no reference with probes, or the check is of the f64 reference itself. */
static void ref_model_open(struct mc_session *s, struct mc_probe_session *p)
{
    const struct mc_backend_ops *ref = s->ctx->ref_ops;
    if (p->ref_model != NULL || ref == NULL || (ref == s->ops && s->ctx->dtype == MC_DTYPE_F64) ||
        !mc_probes_capable(ref) ||
        !(ref->dtypes & MC_DTYPE_BIT(MC_DTYPE_F64)))
        return;
    const struct mc_golden *g = s->g;
    struct mc_weight *w = calloc((size_t)g->n_weights, sizeof *w);
    double **data = calloc((size_t)g->n_weights, sizeof *data);
    int ok = w != NULL && data != NULL;
    for (int i = 0; ok && i < g->n_weights; i++) {
        const struct mc_array *a = &g->weights[i].value;
        int64_t n = mc_array_elems(a);
        data[i] = malloc((size_t)(n ? n : 1) * sizeof *data[i]);
        if (data[i] == NULL) {
            ok = 0;
            break;
        }
        for (int64_t k = 0; k < n; k++)
            data[i][k] = mc_dtype_round(s->ctx->dtype, a->data[k]);
        w[i] = (struct mc_weight){.name = g->weights[i].name, .ndim = a->ndim, .data = data[i]};
        memcpy(w[i].dims, a->dims, sizeof w[i].dims);
    }
    if (ok) {
        struct mc_model_desc desc = {.family = g->config.family,
                                     .dtype = MC_DTYPE_F64,
                                     .config = &g->config.u,
                                     .weights = w,
                                     .n_weights = g->n_weights};
        struct mc_msg msg = {{0}};
        struct mc_model *m = NULL;
        if (ref->model_create(&desc, &m, &msg) == MC_BACKEND_OK) {
            if (ref->probe_enable(m, 1, &msg) == MC_BACKEND_OK) {
                p->ref = ref;
                p->ref_model = m;
            } else {
                ref->model_destroy(m);
            }
        }
    } else {
        mc_error_set(s->err, MC_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; data != NULL && i < g->n_weights; i++)
        free(data[i]);
    free(data);
    free(w);
}

static void probes_model(struct mc_session *s)
{
    if (!s->ctx->probes || s->broken || s->model == NULL || !mc_probes_capable(s->ops))
        return;
    struct mc_probe_session *p = probe_state(s);
    if (p == NULL)
        return;
    struct mc_msg msg = {{0}};
    mc_isolate_enter("probe_enable");
    enum mc_backend_status st = s->ops->probe_enable(s->model, 1, &msg);
    mc_isolate_leave();
    if (st != MC_BACKEND_OK) {
        mc_session_backend_failed(s, st, "probe_enable", &msg);
        return;
    }
    ref_model_open(s, p);
}

static void probes_close(struct mc_session *s)
{
    struct mc_probe_session *p = s->probe;
    if (p == NULL)
        return;
    if (p->ref_model != NULL)
        p->ref->model_destroy(p->ref_model);
    free(p->pre_conv);
    free(p->pre_state);
    free(p);
    s->probe = NULL;
}

/* ---- one forward -------------------------------------------------------------------------------- */

static int active(const struct mc_session *s)
{
    return s->probe != NULL && !s->probe->done && !s->broken && mc_probes_capable(s->ops);
}

static int probes_before(struct mc_session *s, const struct mc_session_cache *c, const struct mc_slice *sl)
{
    if (!active(s))
        return 0;
    struct mc_probe_session *p = s->probe;
    size_t nconv = (size_t)(sl->nrows * s->shape.conv_channels * s->shape.conv_kernel);
    size_t nstate = (size_t)(sl->nrows * mc_family_state_elems(&s->shape));
    free(p->pre_conv);
    free(p->pre_state);
    p->pre_conv = calloc(nconv ? nconv : 1, sizeof *p->pre_conv);
    p->pre_state = calloc(nstate ? nstate : 1, sizeof *p->pre_state);
    p->pre_ok = 0;
    if (p->pre_conv == NULL || p->pre_state == NULL) {
        mc_error_set(s->err, MC_ERR_NOMEM, "out of memory");
        return -1;
    }
    p->pre_zero = 1;
    if (c != NULL) {
        if (mc_session_cache_read(s, c, p->pre_conv, nstate ? p->pre_state : NULL) != 0)
            return -1;
        for (size_t i = 0; i < nconv && p->pre_zero; i++)
            p->pre_zero = p->pre_conv[i] == 0.0;
        for (size_t i = 0; i < nstate && p->pre_zero; i++)
            p->pre_zero = p->pre_state[i] == 0.0;
    }
    p->pre_ok = 1;
    return 0;
}

/* "[a, b, c]" of dims [n] into buf. */
static void dims_text(char *buf, size_t len, int n, const int64_t *d)
{
    size_t used = 0;
    int w = snprintf(buf, len, "[");
    used = w > 0 ? (size_t)w : 0;
    for (int i = 0; i < n && used < len; i++) {
        w = snprintf(buf + used, len - used, "%s%lld", i ? ", " : "", (long long)d[i]);
        used += w > 0 ? (size_t)w : 0;
    }
    if (used < len)
        snprintf(buf + used, len - used, "]");
}

/* Reads the probes of the last forward of (ops, model) into vals[spec] (float64, [nrows][len][...],
 * NULL where the backend gave none). A probe that breaks the table is the backend's error when
 * `own` (the backend under test), else silently dropped. Returns 0, or -1 when the session broke. */
static int read_probes(struct mc_session *s, const struct mc_backend_ops *ops, struct mc_model *model,
                       enum mc_dtype pdt, const struct mc_slice *sl, int own, double *vals[MC_PROBE_MAX])
{
    struct mc_probe_session *p = s->probe;
    const struct mc_probe *pr = NULL;
    int32_t count = 0;
    struct mc_msg msg = {{0}};
    mc_isolate_enter("probe_read");
    enum mc_backend_status st = ops->probe_read(model, &pr, &count, &msg);
    mc_isolate_leave();
    if (st != MC_BACKEND_OK) {
        if (own)
            mc_session_backend_failed(s, st, "probe_read", &msg);
        return own ? -1 : 0;
    }
    if (count < 0 || count > 64 || (count > 0 && pr == NULL)) { /* 64: far more stages than any family has */
        if (own) {
            char what[128];
            snprintf(what, sizeof what, "returned %d probes at %p", (int)count, (const void *)pr);
            mc_session_violation(s, "probe_read", what);
        }
        return own ? -1 : 0;
    }
    for (int32_t i = 0; i < count; i++) {
        const struct mc_probe *q = &pr[i];
        int k = 0;
        while (k < p->n_spec && (q->name == NULL || strcmp(q->name, p->spec[k].name) != 0))
            k++;
        if (k == p->n_spec || vals[k] != NULL)
            continue; /* a stage this family does not define (or a repeat): not compared */
        const struct mc_probe_spec *sp = &p->spec[k];
        int64_t want[MC_MAX_DIMS] = {sl->nrows, sl->len};
        for (int d = 0; d < sp->ndim; d++)
            want[2 + d] = sp->dims[d];
        int ok = q->ndim == 2 + sp->ndim && q->data != NULL;
        for (int d = 0; ok && d < q->ndim; d++)
            ok = q->dims[d] == want[d];
        if (!ok) {
            if (own) {
                char got[96], exp[96], what[320];
                if (q->ndim >= 0 && q->ndim <= MC_MAX_DIMS)
                    dims_text(got, sizeof got, q->ndim, q->dims);
                else
                    snprintf(got, sizeof got, "of rank %d", (int)q->ndim);
                dims_text(exp, sizeof exp, 2 + sp->ndim, want);
                snprintf(what, sizeof what, "probe '%s' %s shape %s, expected %s ([B][L]%s%s%s%s%s%s)", sp->name,
                         q->data == NULL ? "has no data; " : "has", got, exp, sp->ndim > 0 ? "[" : "",
                         sp->ndim > 0 ? sp->dim_names[0] : "", sp->ndim > 0 ? "]" : "", sp->ndim > 1 ? "[" : "",
                         sp->ndim > 1 ? sp->dim_names[1] : "", sp->ndim > 1 ? "]" : "");
                mc_session_violation(s, "probe_read", what);
                return -1;
            }
            continue;
        }
        size_t n = 1;
        for (int d = 0; d < q->ndim; d++)
            n *= (size_t)q->dims[d];
        vals[k] = malloc((n ? n : 1) * sizeof *vals[k]);
        if (vals[k] == NULL) {
            mc_error_set(s->err, MC_ERR_NOMEM, "out of memory");
            return -1;
        }
        mc_dtype_to_f64(pdt, q->data, vals[k], n);
    }
    return 0;
}

/* The reference's probes for the same call: the cache read before the forward imported into a fresh
 * reference cache, the same (rounded) inputs and mask. Returns 1 when it ran. */
static int reference_probes(struct mc_session *s, const struct mc_slice *sl, const double *xr, const uint8_t *mask,
                            double *vals[MC_PROBE_MAX])
{
    struct mc_probe_session *p = s->probe;
    if (p->ref_model == NULL || !p->pre_ok)
        return 0;
    const struct mc_backend_ops *ref = p->ref;
    size_t n = (size_t)(sl->nrows * sl->len * s->shape.hidden);
    double *y = malloc((n ? n : 1) * sizeof *y);
    struct mc_cache *cache = NULL;
    struct mc_msg msg = {{0}};
    int ran = 0;
    if (y == NULL) {
        mc_error_set(s->err, MC_ERR_NOMEM, "out of memory");
        return 0;
    }
    if (ref->cache_alloc(p->ref_model, sl->nrows, &cache, &msg) == MC_BACKEND_OK &&
        ref->cache_import(p->ref_model, cache, p->pre_conv, s->shape.state_ndim ? p->pre_state : NULL, &msg) ==
            MC_BACKEND_OK) {
        struct mc_forward_args a = {.batch = sl->nrows, .len = sl->len, .x = xr, .mask = mask, .y = y};
        if (ref->forward(p->ref_model, cache, &a, &msg) == MC_BACKEND_OK &&
            read_probes(s, ref, p->ref_model, MC_DTYPE_F64, sl, 0, vals) == 0)
            ran = 1;
    }
    if (cache != NULL)
        ref->cache_free(p->ref_model, cache);
    free(y);
    return ran;
}

/* The golden's probes on the slice, when it holds them and the call is a prefill of its inputs from a
 * zero cache. Returns 1 when it filled vals. */
static int golden_probes(struct mc_session *s, const struct mc_slice *sl, double *vals[MC_PROBE_MAX])
{
    struct mc_probe_session *p = s->probe;
    const struct mc_golden *g = s->g;
    if (!g->has_probes || sl->x != NULL || sl->t0 != 0 || !p->pre_ok || !p->pre_zero ||
        (g->mask != NULL && !sl->masked))
        return 0;
    for (int k = 0; k < p->n_spec; k++) {
        const struct mc_array *a = &g->probes[k];
        if (a->ndim == 0)
            continue;
        int64_t inner = 1;
        for (int d = 2; d < a->ndim; d++)
            inner *= a->dims[d];
        const int64_t n = sl->nrows * sl->len * inner;
        vals[k] = malloc((size_t)(n > 0 ? n : 1) * sizeof *vals[k]);
        if (vals[k] == NULL) {
            mc_error_set(s->err, MC_ERR_NOMEM, "out of memory");
            return 0;
        }
        for (int64_t b = 0; b < sl->nrows; b++)
            memcpy(vals[k] + b * sl->len * inner, a->data + ((sl->r0 + b) * g->len + sl->t0) * inner,
                   (size_t)(sl->len * inner) * sizeof *vals[k]);
    }
    return 1;
}

/* Compares one stage token-major (the earliest failing token first); fills f when it fails. */
static int compare_stage(const struct mc_probe_spec *sp, const struct mc_slice *sl, const uint8_t *mask,
                         const double *got, const double *want, struct mc_tolerance tol, struct mc_first_stage *f)
{
    int64_t inner = 1;
    for (int d = 0; d < sp->ndim; d++)
        inner *= sp->dims[d];
    int64_t failing = 0, elements = 0, first_b = -1, first_t = -1, first_e = -1;
    double headroom = 0.0;
    for (int64_t t = 0; t < sl->len; t++) {
        for (int64_t b = 0; b < sl->nrows; b++) {
            if (mask != NULL && !mask[b * sl->len + t])
                continue;
            const int64_t base = (b * sl->len + t) * inner;
            for (int64_t e = 0; e < inner; e++) {
                double a = got[base + e], w = want[base + e];
                double diff = fabs(a - w), bound = tol.atol + tol.rtol * fabs(w);
                int fails = !isfinite(a) || !isfinite(w) || !(diff <= bound);
                double h = !isfinite(diff) ? INFINITY : bound > 0 ? diff / bound : (diff > 0 ? INFINITY : 0.0);
                elements++;
                if (h > headroom || isnan(h))
                    headroom = isnan(h) ? INFINITY : h;
                if (fails && failing++ == 0) {
                    first_b = b;
                    first_t = t;
                    first_e = e;
                }
            }
        }
    }
    if (failing == 0)
        return 0;
    snprintf(f->name, sizeof f->name, "%s", sp->name);
    f->batch = sl->r0 + first_b;
    f->token = sl->t0 + first_t;
    f->ndim = sp->ndim;
    int64_t rest = first_e;
    for (int d = sp->ndim - 1; d >= 0; d--) {
        f->index[d] = rest % sp->dims[d];
        rest /= sp->dims[d];
        snprintf(f->index_names[d], sizeof f->index_names[d], "%s", sp->dim_names[d]);
    }
    const int64_t at = (first_b * sl->len + first_t) * inner + first_e;
    f->got = got[at];
    f->want = want[at];
    f->abs_err = fabs(f->got - f->want);
    f->rel_err = f->want != 0.0 ? f->abs_err / fabs(f->want) : INFINITY;
    f->atol = tol.atol;
    f->rtol = tol.rtol;
    f->failing = failing;
    f->elements = elements;
    f->headroom = headroom;
    return 1;
}

static void probes_after(struct mc_session *s, const struct mc_slice *sl, const double *xr, const uint8_t *mask,
                     const char *call)
{
    if (!active(s))
        return;
    struct mc_probe_session *p = s->probe;
    double *got[MC_PROBE_MAX] = {0}, *want[MC_PROBE_MAX] = {0};
    const enum mc_dtype pdt = s->ctx->dtype == MC_DTYPE_F64 ? MC_DTYPE_F64 : MC_DTYPE_F32;
    if (read_probes(s, s->ops, s->model, pdt, sl, 1, got) != 0)
        goto out;
    int any = 0;
    for (int k = 0; k < p->n_spec; k++)
        any |= got[k] != NULL;
    if (!any)
        goto out; /* this path records none (the packed call, say) */
    const char *against = "golden";
    struct mc_tolerance tol = s->tol[MC_TENSOR_OUTPUT];
    if (!golden_probes(s, sl, want)) {
        against = "reference";
        if (s->ctx->dtype == MC_DTYPE_F16 || s->ctx->dtype == MC_DTYPE_BF16)
            tol = s->tol[MC_TENSOR_REF_OUTPUT];
        if (!reference_probes(s, sl, xr, mask, want))
            goto out;
    }
    struct mc_first_stage *f = &s->res->first_stage;
    f->probed = 1;
    f->forwards++;
    for (int k = 0; k < p->n_spec; k++) {
        if (got[k] == NULL || want[k] == NULL)
            continue;
        if (compare_stage(&p->spec[k], sl, mask, got[k], want[k], tol, f)) {
            snprintf(f->against, sizeof f->against, "%s", against);
            snprintf(f->call, sizeof f->call, "%s", call);
            p->done = 1;
            break;
        }
    }
out:
    for (int k = 0; k < MC_PROBE_MAX; k++) {
        free(got[k]);
        free(want[k]);
    }
}

const struct mc_session_probe_hooks mc_probe_hooks = {
    .model = probes_model,
    .close = probes_close,
    .before = probes_before,
    .after = probes_after,
};
