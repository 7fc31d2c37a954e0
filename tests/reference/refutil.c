/*
 * refutil.c — test support shared by the reference mixer tests (refutil.h).
 */
#include "refutil.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

double lcg_next(struct lcg *g)
{
    g->s = g->s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(g->s >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0;
}

int64_t shape_elems(int ndim, const int64_t *dims)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= dims[i];
    return n;
}

void weight_set_free(struct weight_set *ws)
{
    for (int i = 0; i < ws->n; i++) {
        free(ws->val[i]);
        free(ws->data[i]);
    }
    memset(ws, 0, sizeof *ws);
}

double *weight_new(struct weight_set *ws, const char *name, int ndim, int64_t d0, int64_t d1, int64_t d2)
{
    assert_true(ws->n < WS_MAX);
    struct mc_weight *w = &ws->w[ws->n];
    w->name = name;
    w->ndim = ndim;
    w->dims[0] = d0;
    w->dims[1] = d1;
    w->dims[2] = d2;
    ws->val[ws->n] = calloc((size_t)shape_elems(ndim, w->dims), sizeof(double));
    assert_non_null(ws->val[ws->n]);
    return ws->val[ws->n++];
}

void weight_add(struct weight_set *ws, const char *name, int ndim, int64_t d0, int64_t d1, int64_t d2, double base,
                double scale, struct lcg *g)
{
    double *v = weight_new(ws, name, ndim, d0, d1, d2);
    const int64_t n = shape_elems(ndim, ws->w[ws->n - 1].dims);
    for (int64_t i = 0; i < n; i++)
        v[i] = base + scale * lcg_next(g);
}

int weight_index(const struct weight_set *ws, const char *name)
{
    for (int i = 0; i < ws->n; i++)
        if (strcmp(ws->w[i].name, name) == 0)
            return i;
    return -1;
}

double *weight_find(struct weight_set *ws, const char *name)
{
    int i = weight_index(ws, name);
    return i < 0 ? NULL : ws->val[i];
}

void weight_set_pack(struct weight_set *ws, enum mc_dtype dtype)
{
    for (int i = 0; i < ws->n; i++) {
        int64_t n = shape_elems(ws->w[i].ndim, ws->w[i].dims);
        free(ws->data[i]);
        if (dtype == MC_DTYPE_F32) {
            float *f = malloc((size_t)n * sizeof *f);
            assert_non_null(f);
            for (int64_t j = 0; j < n; j++)
                f[j] = (float)ws->val[i][j];
            ws->data[i] = f;
        } else {
            double *d = malloc((size_t)n * sizeof *d);
            assert_non_null(d);
            memcpy(d, ws->val[i], (size_t)n * sizeof *d);
            ws->data[i] = d;
        }
        ws->w[i].data = ws->data[i];
    }
}

double *random_x(int64_t n, uint64_t seed)
{
    struct lcg g = {seed};
    double *x = malloc((size_t)n * sizeof *x);
    assert_non_null(x);
    for (int64_t i = 0; i < n; i++)
        x[i] = lcg_next(&g);
    return x;
}

double max_abs_diff(const double *a, const double *b, int64_t n)
{
    double m = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs(a[i] - b[i]);
        if (!(d <= m))
            m = isnan(d) ? INFINITY : d;
    }
    return m;
}

double max_abs(const double *a, int64_t n)
{
    double m = 0.0;
    for (int64_t i = 0; i < n; i++)
        m = fmax(m, fabs(a[i]));
    return m;
}

void mixer_build(struct mixer *mx, enum mc_family family, const void *cfg, enum mc_dtype dtype, struct weight_set *ws,
                 struct weight_set *keep)
{
    struct mc_msg msg = {{0}};
    mx->dtype = dtype;
    mx->model = NULL;
    weight_set_pack(ws, dtype);
    struct mc_model_desc desc = {.family = family, .dtype = dtype, .config = cfg, .weights = ws->w, .n_weights = ws->n};
    enum mc_backend_status st = mx->ops->model_create(&desc, &mx->model, &msg);
    if (st != MC_BACKEND_OK)
        fail_msg("model_create: %d %s", (int)st, msg.text);
    for (int i = 0; i < ws->n; i++) {
        size_t bytes = (size_t)shape_elems(ws->w[i].ndim, ws->w[i].dims) * (dtype == MC_DTYPE_F32 ? 4 : 8);
        memset(ws->data[i], 0xff, bytes);
    }
    if (keep)
        *keep = *ws;
    else
        weight_set_free(ws);
}

void mixer_free(struct mixer *mx)
{
    mx->ops->model_destroy(mx->model);
    mx->model = NULL;
}

struct mc_cache *cache_new(struct mixer *mx, int64_t batch)
{
    struct mc_cache *c = NULL;
    struct mc_msg msg = {{0}};
    enum mc_backend_status st = mx->ops->cache_alloc(mx->model, batch, &c, &msg);
    if (st != MC_BACKEND_OK)
        fail_msg("cache_alloc: %d %s", (int)st, msg.text);
    return c;
}

double *cache_get(struct mixer *mx, struct mc_cache *c, int64_t batch)
{
    int64_t nw = batch * mx->C * mx->K, ns = batch * mx->state_row;
    double *buf = malloc((size_t)(nw + ns) * sizeof *buf);
    struct mc_msg msg = {{0}};
    assert_non_null(buf);
    enum mc_backend_status st = mx->ops->cache_export(mx->model, c, buf, ns > 0 ? buf + nw : NULL, &msg);
    if (st != MC_BACKEND_OK)
        fail_msg("cache_export: %d %s", (int)st, msg.text);
    return buf;
}

void forward_f64(struct mixer *mx, struct mc_cache *c, int64_t B, int64_t T, int64_t t0, int64_t L, const double *x,
                 const uint8_t *mask, double *y)
{
    const int64_t D = mx->D;
    double *xs = malloc((size_t)(B * L * D) * sizeof *xs);
    double *ys = malloc((size_t)(B * L * D) * sizeof *ys);
    uint8_t *ms = malloc((size_t)(B * L));
    assert_true(xs && ys && ms);
    for (int64_t b = 0; b < B; b++) {
        memcpy(xs + b * L * D, x + (b * T + t0) * D, (size_t)(L * D) * sizeof *xs);
        if (mask)
            memcpy(ms + b * L, mask + b * T + t0, (size_t)L);
    }
    for (int64_t i = 0; i < B * L * D; i++)
        ys[i] = NAN;
    struct mc_forward_args a = {.batch = B, .len = L, .x = xs, .mask = mask ? ms : NULL, .y = ys};
    struct mc_msg msg = {{0}};
    enum mc_backend_status st = mx->ops->forward(mx->model, c, &a, &msg);
    if (st != MC_BACKEND_OK)
        fail_msg("forward: %d %s", (int)st, msg.text);
    for (int64_t b = 0; b < B; b++)
        memcpy(y + (b * T + t0) * D, ys + b * L * D, (size_t)(L * D) * sizeof *ys);
    free(ms);
    free(ys);
    free(xs);
}

struct split_result check_split_invariance(struct mixer *mx, int64_t B, int64_t T, uint64_t x_seed)
{
    static const int64_t splits[][14] = {
        {1, 12},
        {12, 1},
        {3, 1, 1, 8},
        {2, 2, 2, 2, 2, 2, 1},
        {5, 1, 7},
        {4, 4, 5},
        {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
    };
    struct split_result r = {0};
    const int64_t D = mx->D, ncache = B * (mx->C * mx->K + mx->state_row);
    assert_int_equal(T, 13);
    double *x = random_x(B * T * D, x_seed);
    double *y_full = malloc((size_t)(B * T * D) * sizeof *y_full);
    double *y_nocache = malloc((size_t)(B * T * D) * sizeof *y_nocache);
    double *y_split = malloc((size_t)(B * T * D) * sizeof *y_split);
    assert_true(y_full && y_nocache && y_split);

    struct mc_cache *c_full = cache_new(mx, B);
    forward_f64(mx, c_full, B, T, 0, T, x, NULL, y_full);
    double *cache_full = cache_get(mx, c_full, B);
    forward_f64(mx, NULL, B, T, 0, T, x, NULL, y_nocache);
    assert_true(max_abs_diff(y_full, y_nocache, B * T * D) == 0.0);
    r.y_max = max_abs(y_full, B * T * D);
    r.state_max = max_abs(cache_full + B * mx->C * mx->K, B * mx->state_row);

    for (size_t s = 0; s < sizeof splits / sizeof splits[0]; s++) {
        struct mc_cache *c = cache_new(mx, B);
        int64_t t0 = 0;
        for (int i = 0; t0 < T; i++) {
            assert_true(splits[s][i] > 0);
            forward_f64(mx, c, B, T, t0, splits[s][i], x, NULL, y_split);
            t0 += splits[s][i];
        }
        assert_int_equal(t0, T);
        double *cs = cache_get(mx, c, B);
        double dy = max_abs_diff(y_full, y_split, B * T * D), dc = max_abs_diff(cache_full, cs, ncache);
        r.dy = fmax(r.dy, dy);
        r.dcache = fmax(r.dcache, dc);
        assert_true(dy <= 1e-12);
        assert_true(dc <= 1e-12);
        free(cs);
        mx->ops->cache_free(mx->model, c);
    }

    for (int64_t t0 = 1; t0 < T; t0++) {
        struct mc_cache *c = cache_new(mx, B);
        forward_f64(mx, c, B, T, 0, t0, x, NULL, y_split);
        forward_f64(mx, c, B, T, t0, 1, x, NULL, y_split);
        for (int64_t b = 0; b < B; b++) {
            double d = max_abs_diff(y_full + (b * T + t0) * D, y_split + (b * T + t0) * D, D);
            r.dstep = fmax(r.dstep, d);
            assert_true(d <= 1e-12);
        }
        mx->ops->cache_free(mx->model, c);
    }

    mx->ops->cache_free(mx->model, c_full);
    free(cache_full);
    free(y_split);
    free(y_nocache);
    free(y_full);
    free(x);
    return r;
}

double check_mask_semantics(struct mixer *mx, const double *pad_row)
{
    const int64_t D = mx->D, Lr = 9, npad = 5, T = Lr + npad, B = 3;
    const int64_t ncache1 = mx->C * mx->K + mx->state_row;
    double *s = random_x(Lr * D, 7);      /* the real tokens [Lr][D] */
    double *junk = random_x(npad * D, 8); /* what padding positions carry */
    junk[0] = NAN;                        /* a padding token must not reach anything */
    junk[D + 1] = 1e30;
    double *zeros = calloc((size_t)D, sizeof *zeros);
    const double *pad = pad_row ? pad_row : zeros;
    assert_non_null(zeros);

    /* Unpadded reference, token-prefix caches at every length. */
    double *y_ref = malloc((size_t)(Lr * D) * sizeof *y_ref);
    double *cache_at[10]; /* [Lr + 1] */
    assert_non_null(y_ref);
    struct mc_cache *c1 = cache_new(mx, 1);
    cache_at[0] = cache_get(mx, c1, 1);
    for (int64_t t = 0; t < Lr; t++) {
        forward_f64(mx, c1, 1, Lr, t, 1, s, NULL, y_ref);
        cache_at[t + 1] = cache_get(mx, c1, 1);
    }

    /* Row 0: left padding [pads, s]; row 1: right padding [s, pads]; row 2: padding in the middle
     * [s[0..2], pads, s[3..]]. Every row's final cache must be the unpadded cache after all of s. */
    double *x = malloc((size_t)(B * T * D) * sizeof *x);
    uint8_t mask[3 * 14];
    int64_t pos[3][14]; /* pos[b][t] = index into s, or -1 for padding */
    assert_non_null(x);
    for (int64_t t = 0; t < T; t++) {
        pos[0][t] = t < npad ? -1 : t - npad;
        pos[1][t] = t < Lr ? t : -1;
        pos[2][t] = t < 3 ? t : (t < 3 + npad ? -1 : t - npad);
    }
    for (int64_t b = 0; b < B; b++) {
        int64_t k = 0;
        for (int64_t t = 0; t < T; t++) {
            mask[b * T + t] = pos[b][t] >= 0;
            const double *src = pos[b][t] >= 0 ? s + pos[b][t] * D : junk + (k++) * D;
            memcpy(x + (b * T + t) * D, src, (size_t)D * sizeof *x);
        }
    }

    double *y = malloc((size_t)(B * T * D) * sizeof *y);
    assert_non_null(y);
    double worst = 0.0;
    /* Whole batch in one forward, then each row alone (B == 1), then token by token (L == 1). */
    for (int mode = 0; mode < 3; mode++) {
        double *cache[3];
        if (mode == 0) {
            struct mc_cache *c = cache_new(mx, B);
            forward_f64(mx, c, B, T, 0, T, x, mask, y);
            double *all = cache_get(mx, c, B);
            for (int64_t b = 0; b < B; b++) {
                cache[b] = malloc((size_t)ncache1 * sizeof(double));
                assert_non_null(cache[b]);
                memcpy(cache[b], all + b * mx->C * mx->K, (size_t)(mx->C * mx->K) * sizeof(double));
                memcpy(cache[b] + mx->C * mx->K, all + B * mx->C * mx->K + b * mx->state_row,
                       (size_t)mx->state_row * sizeof(double));
            }
            free(all);
            mx->ops->cache_free(mx->model, c);
        } else {
            for (int64_t b = 0; b < B; b++) {
                struct mc_cache *c = cache_new(mx, 1);
                for (int64_t t0 = 0; t0 < T; t0 += (mode == 1 ? T : 1))
                    forward_f64(mx, c, 1, T, t0, mode == 1 ? T : 1, x + b * T * D, mask + b * T, y + b * T * D);
                cache[b] = cache_get(mx, c, 1);
                mx->ops->cache_free(mx->model, c);
            }
        }
        for (int64_t b = 0; b < B; b++) {
            for (int64_t t = 0; t < T; t++) {
                const double *yr = y + (b * T + t) * D;
                if (pos[b][t] >= 0) {
                    double d = max_abs_diff(yr, y_ref + pos[b][t] * D, D);
                    worst = fmax(worst, d);
                    assert_true(d <= 1e-12);
                } else {
                    assert_true(max_abs_diff(yr, pad, D) == 0.0); /* exactly the padding row */
                }
            }
            double d = max_abs_diff(cache[b], cache_at[Lr], ncache1); /* right padding: cache at last real token */
            worst = fmax(worst, d);
            assert_true(d <= 1e-12);
            free(cache[b]);
        }
    }

    /* A padding token on a primed cache leaves it bit-identical. */
    {
        struct mc_cache *c = cache_new(mx, 1);
        uint8_t zero = 0;
        forward_f64(mx, c, 1, Lr, 0, 4, s, NULL, y);
        double *before = cache_get(mx, c, 1);
        forward_f64(mx, c, 1, 1, 0, 1, junk, &zero, y);
        double *after = cache_get(mx, c, 1);
        assert_memory_equal(before, after, (size_t)ncache1 * sizeof(double));
        assert_true(max_abs_diff(y, pad, D) == 0.0);
        /* 4 tokens in one forward vs 4 single steps: the projections may round differently. */
        assert_true(max_abs_diff(before, cache_at[4], ncache1) <= 1e-12);
        free(after);
        free(before);
        mx->ops->cache_free(mx->model, c);
    }

    mx->ops->cache_free(mx->model, c1);
    for (int64_t t = 0; t <= Lr; t++)
        free(cache_at[t]);
    free(y);
    free(x);
    free(y_ref);
    free(junk);
    free(s);
    free(zeros);
    return worst;
}

void check_f32_matches_f64(struct mixer *m64, struct mixer *m32, const char *label)
{
    const int64_t B = 2, L = 11, D = m64->D;
    const int64_t nw = B * m64->C * m64->K, ns = B * m64->state_row;
    double *x = random_x(B * L * D, 3);
    double *y64 = malloc((size_t)(B * L * D) * sizeof *y64);
    float *x32 = malloc((size_t)(B * L * D) * sizeof *x32);
    float *y32 = malloc((size_t)(B * L * D) * sizeof *y32);
    float *c32 = malloc((size_t)(nw + ns) * sizeof *c32);
    assert_true(y64 && x32 && y32 && c32);
    for (int64_t i = 0; i < B * L * D; i++)
        x32[i] = (float)x[i];
    struct mc_cache *a = cache_new(m64, B), *b = cache_new(m32, B);
    struct mc_msg msg = {{0}};
    forward_f64(m64, a, B, L, 0, L, x, NULL, y64);
    struct mc_forward_args args = {.batch = B, .len = L, .x = x32, .mask = NULL, .y = y32};
    assert_int_equal(m32->ops->forward(m32->model, b, &args, &msg), MC_BACKEND_OK);
    double *c64 = cache_get(m64, a, B);
    assert_int_equal(m32->ops->cache_export(m32->model, b, c32, ns > 0 ? c32 + nw : NULL, &msg), MC_BACKEND_OK);
    double dy = 0.0, dc = 0.0;
    for (int64_t i = 0; i < B * L * D; i++)
        dy = fmax(dy, fabs((double)y32[i] - y64[i]));
    for (int64_t i = 0; i < nw + ns; i++)
        dc = fmax(dc, fabs((double)c32[i] - c64[i]));
    if (label)
        print_message("f32 vs f64 (%s): max |dy| = %.3g, max |dcache| = %.3g\n", label, dy, dc);
    else
        print_message("f32 vs f64: max |dy| = %.3g, max |dcache| = %.3g\n", dy, dc);
    assert_true(dy < 1e-4);
    assert_true(dc < 1e-4);
    m64->ops->cache_free(m64->model, a);
    m32->ops->cache_free(m32->model, b);
    free(c64);
    free(c32);
    free(y32);
    free(x32);
    free(y64);
    free(x);
}

void check_forward_errors(struct mixer *mx, forward_errors_extra extra)
{
    const struct mc_backend_ops *ops = mx->ops;
    double x[2 * 3 * 8] = {0}, y[2 * 3 * 8];
    struct mc_msg msg = {{0}};
    assert_true(mx->D <= 8);
    struct mc_cache *c1 = cache_new(mx, 1), *c2 = cache_new(mx, 2), *bad = NULL;

    struct mc_forward_args a = {.batch = 2, .len = 3, .x = x, .mask = NULL, .y = y};
    assert_int_equal(ops->forward(mx->model, c1, &a, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "cache batch 1", "batch 2");
    a.len = 0;
    assert_int_equal(ops->forward(mx->model, c2, &a, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "len", NULL);
    a.len = 3;
    a.batch = 0;
    assert_int_equal(ops->forward(mx->model, NULL, &a, &msg), MC_BACKEND_INVALID);
    a.batch = 2;
    a.x = NULL;
    assert_int_equal(ops->forward(mx->model, c2, &a, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "x", NULL);
    a.x = x;
    a.y = NULL;
    assert_int_equal(ops->forward(mx->model, c2, &a, &msg), MC_BACKEND_INVALID);
    a.y = y;
    assert_int_equal(ops->forward(mx->model, c2, &a, &msg), MC_BACKEND_OK);

    assert_int_equal(ops->cache_alloc(mx->model, 0, &bad, &msg), MC_BACKEND_INVALID);
    assert_null(bad);
    assert_int_equal(ops->cache_copy(mx->model, c1, c2, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "batch", NULL);
    assert_int_equal(ops->cache_import(mx->model, c1, NULL, NULL, &msg), MC_BACKEND_INVALID);
    if (extra)
        extra(mx, c1, c2, &msg);

    ops->cache_free(mx->model, c2);
    ops->cache_free(mx->model, c1);
    ops->cache_free(mx->model, NULL);
    ops->model_destroy(NULL);
}

void check_cache_round_trip(struct mixer *mx, double *d_state, round_trip_extra extra)
{
    const int64_t B = 2, T = 10, D = mx->D, t0 = 6;
    const int64_t nw = B * mx->C * mx->K;
    double *x = random_x(B * T * D, 9);
    double *y_a = malloc((size_t)(B * T * D) * sizeof *y_a);
    double *y_b = malloc((size_t)(B * T * D) * sizeof *y_b);
    double *y_c = malloc((size_t)(B * T * D) * sizeof *y_c);
    assert_true(y_a && y_b && y_c);
    struct mc_msg msg = {{0}};
    struct mc_cache *a = cache_new(mx, B), *b = cache_new(mx, B), *c = cache_new(mx, B);

    forward_f64(mx, a, B, T, 0, t0, x, NULL, y_a);
    double *snap = cache_get(mx, a, B);
    double *snap_state = mx->state_row > 0 ? snap + nw : NULL;
    assert_int_equal(mx->ops->cache_import(mx->model, b, snap, snap_state, &msg), MC_BACKEND_OK);
    assert_int_equal(mx->ops->cache_copy(mx->model, c, a, &msg), MC_BACKEND_OK);
    double *snap_b = cache_get(mx, b, B);
    assert_memory_equal(snap, snap_b, (size_t)(B * (mx->C * mx->K + mx->state_row)) * sizeof(double));

    forward_f64(mx, a, B, T, t0, T - t0, x, NULL, y_a);
    forward_f64(mx, b, B, T, t0, T - t0, x, NULL, y_b);
    forward_f64(mx, c, B, T, t0, T - t0, x, NULL, y_c);
    assert_memory_equal(y_a + t0 * D, y_b + t0 * D, (size_t)((T - t0) * D) * sizeof(double));
    assert_memory_equal(y_a + (T + t0) * D, y_b + (T + t0) * D, (size_t)((T - t0) * D) * sizeof(double));
    assert_memory_equal(y_a + t0 * D, y_c + t0 * D, (size_t)((T - t0) * D) * sizeof(double));

    /* Imported into a never-used cache: seeded from the import, so it differs from a fresh prefill. */
    struct mc_cache *d = cache_new(mx, B);
    if (!d_state)
        d_state = snap_state;
    assert_int_equal(mx->ops->cache_import(mx->model, d, snap, d_state, &msg), MC_BACKEND_OK);
    forward_f64(mx, d, B, T, t0, T - t0, x, NULL, y_c);
    forward_f64(mx, NULL, B, T, t0, T - t0, x, NULL, y_b);
    assert_true(max_abs_diff(y_c + t0 * D, y_b + t0 * D, (T - t0) * D) > 1e-6);

    if (extra) {
        const struct round_trip rt = {.B = B, .T = T, .t0 = t0, .x = x, .y_a = y_a, .y_b = y_b, .snap = snap,
                                      .a = a, .b = b, .d = d, .d_state = d_state};
        extra(mx, &rt);
    }

    mx->ops->cache_free(mx->model, d);
    mx->ops->cache_free(mx->model, c);
    mx->ops->cache_free(mx->model, b);
    mx->ops->cache_free(mx->model, a);
    free(snap_b);
    free(snap);
    free(y_c);
    free(y_b);
    free(y_a);
    free(x);
}

void check_pad_row_zero(struct mixer *mx)
{
    const int64_t D = mx->D;
    double *s = random_x(9 * D, 7);
    const double zeros[8] = {0};
    uint8_t m3[3] = {1, 0, 1};
    double x3[3 * 8], y3[3 * 8];
    assert_int_equal(D, 8);
    memcpy(x3, s, sizeof zeros);
    for (int64_t j = 0; j < D; j++)
        x3[D + j] = NAN; /* NaN at the padding token */
    memcpy(x3 + 2 * D, s + D, sizeof zeros);
    forward_f64(mx, NULL, 1, 3, 0, 3, x3, m3, y3);
    assert_memory_equal(y3 + D, zeros, sizeof zeros);
    free(s);
}

double silu_d(double v)
{
    return v / (1.0 + exp(-v));
}

double softplus_d(double v)
{
    return v > 20.0 ? v : log1p(exp(v));
}

void hand_forward(const struct mc_backend_ops *ops, enum mc_family family, const void *cfg,
                  const struct mc_weight *w, int n, int64_t T, const void *x, void *y)
{
    struct mc_model_desc desc = {.family = family, .dtype = MC_DTYPE_F64, .config = cfg, .weights = w, .n_weights = n};
    struct mc_model *model = NULL;
    struct mc_msg msg = {{0}};
    assert_int_equal(ops->model_create(&desc, &model, &msg), MC_BACKEND_OK);
    struct mc_forward_args a = {.batch = 1, .len = T, .x = x, .mask = NULL, .y = y};
    assert_int_equal(ops->forward(model, NULL, &a, &msg), MC_BACKEND_OK);
    ops->model_destroy(model);
}

void check_create_desc(const struct mc_backend_ops *ops, const void *cfg, enum mc_family family,
                       enum mc_family other, struct mc_weight *w, int n)
{
    struct mc_msg msg;
    assert_int_equal(try_create_ops(ops, cfg, family, MC_DTYPE_F64, w, n, &msg), MC_BACKEND_OK);
    assert_int_equal(try_create_ops(ops, cfg, family, MC_DTYPE_F16, w, n, &msg), MC_BACKEND_UNSUPPORTED);
    expect_msg(&msg, "dtype", NULL);
    assert_int_equal(try_create_ops(ops, cfg, family, MC_DTYPE_BF16, w, n, &msg), MC_BACKEND_UNSUPPORTED);
    assert_int_equal(try_create_ops(ops, cfg, family, (enum mc_dtype)9, w, n, &msg), MC_BACKEND_INVALID);
    assert_int_equal(try_create_ops(ops, cfg, other, MC_DTYPE_F64, w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "family", NULL);
    assert_int_equal(try_create_ops(ops, NULL, family, MC_DTYPE_F64, w, n, &msg), MC_BACKEND_INVALID);
}

enum mc_backend_status try_create_ops(const struct mc_backend_ops *ops, const void *cfg, enum mc_family family,
                                      enum mc_dtype dtype, struct mc_weight *w, int n, struct mc_msg *msg)
{
    struct mc_model_desc desc = {.family = family, .dtype = dtype, .config = cfg, .weights = w, .n_weights = n};
    struct mc_model *model = (struct mc_model *)&desc; /* must be overwritten */
    memset(msg->text, 0, sizeof msg->text);
    enum mc_backend_status st = ops->model_create(&desc, &model, msg);
    if (st == MC_BACKEND_OK)
        ops->model_destroy(model);
    else
        assert_null(model);
    return st;
}

void expect_msg(const struct mc_msg *msg, const char *a, const char *b)
{
    if (!strstr(msg->text, a) || (b && !strstr(msg->text, b)))
        fail_msg("message '%s' lacks '%s' / '%s'", msg->text, a, b ? b : "");
}

void check_ops_identity(const struct mc_backend_ops *ops, enum mc_family family)
{
    assert_int_equal(ops->abi_version, MIXCHECK_ABI_VERSION);
    assert_int_equal(ops->struct_size, sizeof(struct mc_backend_ops));
    assert_string_equal(ops->name, "reference");
    assert_string_equal(ops->device, "cpu");
    assert_int_equal(ops->family, family);
    assert_int_equal(ops->dtypes, MC_DTYPE_BIT(MC_DTYPE_F32) | MC_DTYPE_BIT(MC_DTYPE_F64));
    assert_non_null(ops->forward_packed);
    if (family == MC_FAMILY_ATTENTION) { /* no stage probes defined for attention (docs/scenarios.md §1.3) */
        assert_int_equal(ops->caps, MC_CAP_PACKED);
        return;
    }
    assert_int_equal(ops->caps, MC_CAP_PACKED | MC_CAP_PROBES);
    assert_non_null(ops->probe_enable);
    assert_non_null(ops->probe_read);
}
