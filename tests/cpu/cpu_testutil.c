/*
 * cpu_testutil.c — fixtures shared by the cpu backend tests (cpu_testutil.h).
 */
#include "cpu_testutil.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/dtype.h"

double tu_lcg_next(struct tu_lcg *g)
{
    g->s = g->s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(g->s >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0;
}

void *tu_calloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    assert_non_null(p);
    return p;
}

static int64_t tu_elems(int ndim, const int64_t *dims)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= dims[i];
    return n;
}

void tu_weights_add(struct tu_weights *ws, const char *name, int ndim, int64_t d0, int64_t d1, int64_t d2, double base,
                    double scale, struct tu_lcg *g)
{
    assert_true(ws->n < TU_MAX_WEIGHTS);
    struct mc_weight *w = &ws->w[ws->n];
    w->name = name;
    w->ndim = ndim;
    w->dims[0] = d0;
    w->dims[1] = d1;
    w->dims[2] = d2;
    const int64_t n = tu_elems(ndim, w->dims);
    ws->val[ws->n] = tu_calloc((size_t)n, sizeof(double));
    for (int64_t i = 0; i < n; i++)
        ws->val[ws->n][i] = base + scale * tu_lcg_next(g);
    ws->n++;
}

void tu_weights_pack(struct tu_weights *ws, enum mc_dtype dtype)
{
    for (int i = 0; i < ws->n; i++) {
        const int64_t n = tu_elems(ws->w[i].ndim, ws->w[i].dims);
        free(ws->data[i]);
        ws->data[i] = tu_calloc((size_t)n, mc_dtype_size(dtype));
        mc_dtype_from_f64(dtype, ws->val[i], ws->data[i], (size_t)n);
        ws->w[i].data = ws->data[i];
    }
}

void tu_round(enum mc_dtype dtype, double *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        v[i] = mc_dtype_round(dtype, v[i]);
}

void tu_weights_round(struct tu_weights *ws, enum mc_dtype dtype)
{
    for (int i = 0; i < ws->n; i++)
        tu_round(dtype, ws->val[i], (size_t)tu_elems(ws->w[i].ndim, ws->w[i].dims));
}

void tu_weights_free(struct tu_weights *ws)
{
    for (int i = 0; i < ws->n; i++) {
        free(ws->val[i]);
        free(ws->data[i]);
    }
    memset(ws, 0, sizeof *ws);
}

double *tu_weights_find(struct tu_weights *ws, const char *name)
{
    for (int i = 0; i < ws->n; i++)
        if (strcmp(ws->w[i].name, name) == 0)
            return ws->val[i];
    return NULL;
}

void tu_model_create(struct tu_model *tm, const struct mc_backend_ops *ops, enum mc_family family,
                     const void *config, struct tu_weights *ws, enum mc_dtype dtype, int64_t chunk_size,
                     int32_t threads, int64_t D, int64_t conv_elems, int64_t state_elems)
{
    memset(tm, 0, sizeof *tm);
    tu_weights_pack(ws, dtype);
    struct mc_model_desc desc = {
        .family = family,
        .dtype = dtype,
        .config = config,
        .weights = ws->w,
        .n_weights = ws->n,
        .chunk_size = chunk_size,
        .threads = threads,
    };
    struct mc_msg msg = {{0}};
    const enum mc_backend_status st = ops->model_create(&desc, &tm->model, &msg);
    if (st != MC_BACKEND_OK)
        fail_msg("%s model_create: status %d: %s", ops->name, (int)st, msg.text);
    tm->ops = ops;
    tm->dtype = dtype;
    tm->D = D;
    tm->conv_elems = conv_elems;
    tm->state_elems = state_elems;
}

void tu_model_destroy(struct tu_model *tm)
{
    if (tm->ops && tm->model)
        tm->ops->model_destroy(tm->model);
    memset(tm, 0, sizeof *tm);
}

static enum mc_dtype tu_export_dtype(enum mc_dtype model_dtype)
{
    return model_dtype == MC_DTYPE_F64 ? MC_DTYPE_F64 : MC_DTYPE_F32;
}

/* The shared body of tu_run and tu_run_raw: y_raw [B][L][D] in the model dtype. */
static void tu_run_core(struct tu_model *tm, int64_t B, int64_t L, const double *x, const uint8_t *mask,
                        const int64_t *splits, int n_splits, int use_cache, const struct mc_cache *start, void *y_raw,
                        void *conv_raw, void *state_raw, struct mc_cache **out_cache)
{
    const struct mc_backend_ops *ops = tm->ops;
    const size_t es = mc_dtype_size(tm->dtype), D = (size_t)tm->D;
    struct mc_msg msg = {{0}};
    struct mc_cache *cache = NULL;
    enum mc_backend_status st;
    int64_t one[1] = {L};
    if (n_splits == 0) {
        splits = one;
        n_splits = 1;
    }
    if (use_cache) {
        st = ops->cache_alloc(tm->model, B, &cache, &msg);
        if (st != MC_BACKEND_OK)
            fail_msg("cache_alloc: %s", msg.text);
        if (start) {
            st = ops->cache_copy(tm->model, cache, start, &msg);
            if (st != MC_BACKEND_OK)
                fail_msg("cache_copy: %s", msg.text);
        }
    } else {
        assert_int_equal(n_splits, 1);
    }
    int64_t t0 = 0;
    for (int s = 0; s < n_splits; s++) {
        const int64_t len = splits[s];
        assert_true(len >= 1 && t0 + len <= L);
        double *xs = tu_calloc((size_t)(B * len) * D, sizeof(double));
        uint8_t *ms = mask ? tu_calloc((size_t)(B * len), 1) : NULL;
        for (int64_t b = 0; b < B; b++) {
            memcpy(xs + (size_t)(b * len) * D, x + (size_t)(b * L + t0) * D, (size_t)len * D * sizeof(double));
            if (mask)
                memcpy(ms + b * len, mask + b * L + t0, (size_t)len);
        }
        void *xr = tu_calloc((size_t)(B * len) * D, es);
        void *yr = tu_calloc((size_t)(B * len) * D, es);
        mc_dtype_from_f64(tm->dtype, xs, xr, (size_t)(B * len) * D);
        mc_dtype_fill_nan(tm->dtype, yr, (size_t)(B * len) * D);
        const struct mc_forward_args args = {.batch = B, .len = len, .x = xr, .mask = ms, .y = yr};
        st = ops->forward(tm->model, cache, &args, &msg);
        if (st != MC_BACKEND_OK)
            fail_msg("%s forward (piece %d, len %lld): status %d: %s", ops->name, s, (long long)len, (int)st,
                     msg.text);
        for (int64_t b = 0; b < B; b++)
            memcpy((char *)y_raw + (size_t)(b * L + t0) * D * es, (char *)yr + (size_t)(b * len) * D * es,
                   (size_t)len * D * es);
        free(yr);
        free(xr);
        free(ms);
        free(xs);
        t0 += len;
    }
    assert_int_equal(t0, L);
    if (cache && (conv_raw || state_raw)) {
        st = ops->cache_export(tm->model, cache, conv_raw, tm->state_elems ? state_raw : NULL, &msg);
        if (st != MC_BACKEND_OK)
            fail_msg("cache_export: %s", msg.text);
    }
    if (out_cache)
        *out_cache = cache;
    else if (cache)
        ops->cache_free(tm->model, cache);
}

void tu_run(struct tu_model *tm, int64_t B, int64_t L, const double *x, const uint8_t *mask, const int64_t *splits,
            int n_splits, int use_cache, const struct mc_cache *start, double *y, double *conv, double *state,
            struct mc_cache **out_cache)
{
    const enum mc_dtype ed = tu_export_dtype(tm->dtype);
    const size_t ny = (size_t)(B * L * tm->D), nc = (size_t)(B * tm->conv_elems), ns = (size_t)(B * tm->state_elems);
    void *yr = tu_calloc(ny, mc_dtype_size(tm->dtype));
    void *cr = tu_calloc(nc, mc_dtype_size(ed));
    void *sr = tu_calloc(ns, mc_dtype_size(ed));
    tu_run_core(tm, B, L, x, mask, splits, n_splits, use_cache, start, yr, conv ? cr : NULL, state ? sr : NULL,
                out_cache);
    mc_dtype_to_f64(tm->dtype, yr, y, ny);
    if (conv)
        mc_dtype_to_f64(ed, cr, conv, nc);
    if (state && ns)
        mc_dtype_to_f64(ed, sr, state, ns);
    free(sr);
    free(cr);
    free(yr);
}

void tu_run_raw(struct tu_model *tm, int64_t B, int64_t L, const double *x, const uint8_t *mask, const int64_t *splits,
                int n_splits, void *y_bytes, void *conv_bytes, void *state_bytes)
{
    tu_run_core(tm, B, L, x, mask, splits, n_splits, 1, NULL, y_bytes, conv_bytes, state_bytes, NULL);
}

void tu_assert_same_bits(struct tu_model *tm, int n_models, int64_t B, int64_t L, const double *x,
                         const uint8_t *mask, const int64_t *splits, int n_splits)
{
    const size_t ed = mc_dtype_size(tu_export_dtype(tm[0].dtype));
    const size_t ny = (size_t)(B * L * tm[0].D) * mc_dtype_size(tm[0].dtype);
    const size_t nc = (size_t)(B * tm[0].conv_elems) * ed, ns = (size_t)(B * (tm[0].state_elems + 1)) * ed;
    void *y1 = tu_calloc(ny, 1), *c1 = tu_calloc(nc, 1), *s1 = tu_calloc(ns, 1);
    void *yn = tu_calloc(ny, 1), *cn = tu_calloc(nc, 1), *sn = tu_calloc(ns, 1);
    tu_run_raw(&tm[0], B, L, x, mask, splits, n_splits, y1, c1, s1);
    for (int i = 1; i < n_models; i++) {
        tu_run_raw(&tm[i], B, L, x, mask, splits, n_splits, yn, cn, sn);
        assert_memory_equal(y1, yn, ny);
        assert_memory_equal(c1, cn, nc);
        assert_memory_equal(s1, sn, ns);
    }
    free(y1);
    free(c1);
    free(s1);
    free(yn);
    free(cn);
    free(sn);
}

struct tu_cmp tu_compare(const char *what, const double *a, const double *b, size_t n, int64_t row,
                         const uint8_t *skip_mask, double atol, double rtol)
{
    struct tu_cmp c = {0, 0, 0, -1};
    for (size_t i = 0; i < n; i++) {
        if (skip_mask && !skip_mask[(int64_t)i / row])
            continue;
        if (!isfinite(a[i]) || !isfinite(b[i]))
            fail_msg("%s[%zu]: non-finite (got %g, expected %g)", what, i, a[i], b[i]);
        const double err = fabs(a[i] - b[i]);
        const double rel = b[i] != 0.0 ? err / fabs(b[i]) : (err > 0 ? INFINITY : 0.0);
        const double h = err / (atol + rtol * fabs(b[i]));
        if (err > c.max_abs)
            c.max_abs = err;
        if (rel > c.max_rel && isfinite(rel))
            c.max_rel = rel;
        if (h > c.headroom) {
            c.headroom = h;
            c.worst = (int64_t)i;
        }
    }
    if (c.headroom > 1.0)
        fail_msg("%s[%lld]: got %.9g, expected %.9g (|err| %.3g > atol %.3g + rtol %.3g·|b|; headroom %.3g)", what,
                 (long long)c.worst, a[c.worst], b[c.worst], fabs(a[c.worst] - b[c.worst]), atol, rtol, c.headroom);
    return c;
}

void tu_fill(double *v, size_t n, double scale, struct tu_lcg *g)
{
    for (size_t i = 0; i < n; i++)
        v[i] = scale * tu_lcg_next(g);
}

void tu_report(const char *label, const struct tu_cmp *c)
{
    print_message("  measured %-40s max abs %.3e  max rel %.3e  headroom %.3f\n", label, c->max_abs, c->max_rel,
                  c->headroom);
}
