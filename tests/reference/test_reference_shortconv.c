/*
 * test_reference_shortconv.c — the reference LFM2 ShortConv mixer (reference/shortconv.c), driven
 * only through its ops struct (mixcheck/backend.h) on small random configurations made with a
 * fixed-seed LCG:
 *   - split invariance: one forward over a sequence equals any split of it into successive cached
 *     forwards (pieces of length 1 and shorter than K included), outputs and exported windows, for
 *     K = 1..4 with and without biases;
 *   - L == 1 continuation equals the multi-token path;
 *   - mask semantics (mixers.md §A.4): left, middle and right padding, B == 1, L == 1;
 *   - a hand-checkable case (D = 2, K = 2) against the formulas of mixers.md §5.2 written out;
 *   - an independent scalar oracle on a general configuration with every bias;
 *   - f32 agrees with f64;
 *   - error paths and the cache export/import/copy round trip (no recurrent state: NULL accepted).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "reference.h"

#define NW 6 /* most weights a ShortConv configuration implies */

/* ---- fixtures ---------------------------------------------------------------------------------- */

struct lcg {
    uint64_t s;
};

/* Uniform in [-1, 1). */
static double lcg_next(struct lcg *g)
{
    g->s = g->s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(g->s >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0;
}

/* A set of weights in HF names and shapes, values kept in double and handed over in the model dtype. */
struct weight_set {
    int n;
    struct mc_weight w[NW];
    double *val[NW]; /* f64 values */
    void *data[NW];  /* in the model dtype */
};

static void weight_set_free(struct weight_set *ws)
{
    for (int i = 0; i < ws->n; i++) {
        free(ws->val[i]);
        free(ws->data[i]);
    }
    memset(ws, 0, sizeof *ws);
}

static int64_t shape_elems(int ndim, const int64_t *dims)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= dims[i];
    return n;
}

/* Adds one weight filled with base + scale*U[-1,1). */
static void weight_add(struct weight_set *ws, const char *name, int ndim, int64_t d0, int64_t d1, int64_t d2,
                       double base, double scale, struct lcg *g)
{
    assert_true(ws->n < NW);
    struct mc_weight *w = &ws->w[ws->n];
    w->name = name;
    w->ndim = ndim;
    w->dims[0] = d0;
    w->dims[1] = d1;
    w->dims[2] = d2;
    int64_t n = shape_elems(ndim, w->dims);
    ws->val[ws->n] = malloc((size_t)n * sizeof(double));
    assert_non_null(ws->val[ws->n]);
    for (int64_t i = 0; i < n; i++)
        ws->val[ws->n][i] = base + scale * lcg_next(g);
    ws->n++;
}

static double *weight_find(struct weight_set *ws, const char *name)
{
    for (int i = 0; i < ws->n; i++)
        if (strcmp(ws->w[i].name, name) == 0)
            return ws->val[i];
    return NULL;
}

/* Converts the f64 values to the model dtype and points the mc_weight entries at them. */
static void weight_set_pack(struct weight_set *ws, enum mc_dtype dtype)
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

static void weight_set_random(struct weight_set *ws, const struct mc_shortconv_config *c, uint64_t seed)
{
    struct lcg g = {seed};
    const int64_t D = c->hidden_size;
    memset(ws, 0, sizeof *ws);
    weight_add(ws, "in_proj.weight", 2, 3 * D, D, 0, 0.0, 1.0 / sqrt((double)D), &g);
    if (c->conv_bias)
        weight_add(ws, "in_proj.bias", 1, 3 * D, 0, 0, 0.0, 0.2, &g);
    weight_add(ws, "conv.weight", 3, D, 1, c->conv_kernel, 0.0, 0.5, &g);
    if (c->conv_bias)
        weight_add(ws, "conv.bias", 1, D, 0, 0, 0.0, 0.2, &g);
    weight_add(ws, "out_proj.weight", 2, D, D, 0, 0.0, 1.0 / sqrt((double)D), &g);
    if (c->conv_bias)
        weight_add(ws, "out_proj.bias", 1, D, 0, 0, 0.0, 0.2, &g);
}

static struct mc_shortconv_config small_config(int64_t conv_kernel, int32_t bias)
{
    struct mc_shortconv_config c = {.hidden_size = 8, .conv_kernel = conv_kernel, .conv_bias = bias};
    return c;
}

struct mixer {
    const struct mc_backend_ops *ops;
    struct mc_model *model;
    struct mc_shortconv_config cfg;
    enum mc_dtype dtype;
    int64_t D, C, K; /* C = D */
};

/* Creates the model, then poisons and frees the caller's buffers (the model must have copied them). */
static void mixer_init(struct mixer *mx, const struct mc_shortconv_config *cfg, enum mc_dtype dtype, uint64_t seed,
                       struct weight_set *keep)
{
    struct weight_set ws;
    struct mc_msg msg = {{0}};
    memset(mx, 0, sizeof *mx);
    mx->ops = mc_reference_shortconv_ops();
    mx->cfg = *cfg;
    mx->dtype = dtype;
    mx->D = cfg->hidden_size;
    mx->K = cfg->conv_kernel;
    mx->C = cfg->hidden_size;
    weight_set_random(&ws, cfg, seed);
    weight_set_pack(&ws, dtype);
    struct mc_model_desc desc = {
        .family = MC_FAMILY_SHORTCONV, .dtype = dtype, .config = cfg, .weights = ws.w, .n_weights = ws.n};
    enum mc_backend_status st = mx->ops->model_create(&desc, &mx->model, &msg);
    if (st != MC_BACKEND_OK)
        fail_msg("model_create: %d %s", (int)st, msg.text);
    for (int i = 0; i < ws.n; i++) {
        size_t bytes = (size_t)shape_elems(ws.w[i].ndim, ws.w[i].dims) * (dtype == MC_DTYPE_F32 ? 4 : 8);
        memset(ws.data[i], 0xff, bytes);
    }
    if (keep)
        *keep = ws;
    else
        weight_set_free(&ws);
}

static void mixer_free(struct mixer *mx)
{
    mx->ops->model_destroy(mx->model);
    mx->model = NULL;
}

static struct mc_cache *cache_new(struct mixer *mx, int64_t batch)
{
    struct mc_cache *c = NULL;
    struct mc_msg msg = {{0}};
    enum mc_backend_status st = mx->ops->cache_alloc(mx->model, batch, &c, &msg);
    if (st != MC_BACKEND_OK)
        fail_msg("cache_alloc: %d %s", (int)st, msg.text);
    return c;
}

/* Exported conv window of an f64 model, [B][D][K]; the recurrent-state pointer is NULL (there is
 * none). */
static double *cache_get(struct mixer *mx, struct mc_cache *c, int64_t batch)
{
    int64_t nw = batch * mx->C * mx->K;
    double *buf = malloc((size_t)nw * sizeof *buf);
    struct mc_msg msg = {{0}};
    assert_non_null(buf);
    enum mc_backend_status st = mx->ops->cache_export(mx->model, c, buf, NULL, &msg);
    if (st != MC_BACKEND_OK)
        fail_msg("cache_export: %d %s", (int)st, msg.text);
    return buf;
}

/* x [B][L][D] of an f64 model, rows of L tokens read from a [B][T][D] array at token offset t0. */
static void forward_f64(struct mixer *mx, struct mc_cache *c, int64_t B, int64_t T, int64_t t0, int64_t L,
                        const double *x, const uint8_t *mask, double *y)
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

static double max_abs_diff(const double *a, const double *b, int64_t n)
{
    double m = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs(a[i] - b[i]);
        if (!(d <= m))
            m = isnan(d) ? INFINITY : d;
    }
    return m;
}

static double *random_x(int64_t n, uint64_t seed)
{
    struct lcg g = {seed};
    double *x = malloc((size_t)n * sizeof *x);
    assert_non_null(x);
    for (int64_t i = 0; i < n; i++)
        x[i] = lcg_next(&g);
    return x;
}

/* ---- (a) split invariance, (b) L == 1 continuation -------------------------------------------- */

static void check_splits(int64_t conv_kernel, int32_t bias)
{
    const struct mc_shortconv_config cfg = small_config(conv_kernel, bias);
    struct mixer mx;
    mixer_init(&mx, &cfg, MC_DTYPE_F64, 11, NULL);
    const int64_t B = 2, T = 13, D = mx.D;
    double *x = random_x(B * T * D, 5);
    double *y_full = malloc((size_t)(B * T * D) * sizeof *y_full);
    double *y_nocache = malloc((size_t)(B * T * D) * sizeof *y_nocache);
    double *y_split = malloc((size_t)(B * T * D) * sizeof *y_split);
    assert_true(y_full && y_nocache && y_split);

    struct mc_cache *c_full = cache_new(&mx, B);
    forward_f64(&mx, c_full, B, T, 0, T, x, NULL, y_full);
    double *cache_full = cache_get(&mx, c_full, B);
    forward_f64(&mx, NULL, B, T, 0, T, x, NULL, y_nocache);
    assert_true(max_abs_diff(y_full, y_nocache, B * T * D) == 0.0);

    static const int64_t splits[][14] = {
        {1, 12},
        {12, 1},
        {3, 1, 1, 8},
        {2, 2, 2, 2, 2, 2, 1},
        {5, 1, 7},
        {4, 4, 5},
        {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
    };
    const int64_t ncache = B * mx.C * mx.K;
    double worst_y = 0.0, worst_c = 0.0;
    for (size_t s = 0; s < sizeof splits / sizeof splits[0]; s++) {
        struct mc_cache *c = cache_new(&mx, B);
        int64_t t0 = 0;
        for (int i = 0; t0 < T; i++) {
            assert_true(splits[s][i] > 0);
            forward_f64(&mx, c, B, T, t0, splits[s][i], x, NULL, y_split);
            t0 += splits[s][i];
        }
        assert_int_equal(t0, T);
        double *cs = cache_get(&mx, c, B);
        double dy = max_abs_diff(y_full, y_split, B * T * D), dc = max_abs_diff(cache_full, cs, ncache);
        worst_y = fmax(worst_y, dy);
        worst_c = fmax(worst_c, dc);
        assert_true(dy <= 1e-12);
        assert_true(dc <= 1e-12);
        free(cs);
        mx.ops->cache_free(mx.model, c);
    }
    print_message("split invariance (K %lld, biases %d): max |dy| = %.3g, max |dcache| = %.3g\n",
                  (long long)conv_kernel, (int)bias, worst_y, worst_c);

    /* (b) prefill t0 tokens, then one L == 1 step, for every t0: equals the full forward's row t0. */
    double worst_step = 0.0;
    for (int64_t t0 = 1; t0 < T; t0++) {
        struct mc_cache *c = cache_new(&mx, B);
        forward_f64(&mx, c, B, T, 0, t0, x, NULL, y_split);
        forward_f64(&mx, c, B, T, t0, 1, x, NULL, y_split);
        for (int64_t b = 0; b < B; b++) {
            double d = max_abs_diff(y_full + (b * T + t0) * D, y_split + (b * T + t0) * D, D);
            worst_step = fmax(worst_step, d);
            assert_true(d <= 1e-12);
        }
        mx.ops->cache_free(mx.model, c);
    }
    print_message("L == 1 continuation (K %lld): max |dy| = %.3g\n", (long long)conv_kernel, worst_step);

    mx.ops->cache_free(mx.model, c_full);
    free(cache_full);
    free(y_split);
    free(y_nocache);
    free(y_full);
    free(x);
    mixer_free(&mx);
}

static void test_split_invariance(void **state)
{
    (void)state;
    for (int64_t k = 1; k <= 4; k++) {
        check_splits(k, 1);
        check_splits(k, 0);
    }
}

/* ---- (c) mask semantics ------------------------------------------------------------------------ */

static void test_mask_semantics(void **state)
{
    (void)state;
    const struct mc_shortconv_config cfg = small_config(4, 1);
    struct weight_set ws;
    struct mixer mx;
    mixer_init(&mx, &cfg, MC_DTYPE_F64, 23, &ws);
    weight_set_pack(&ws, MC_DTYPE_F64); /* restore the poisoned copies: out_proj.bias is read below */
    const double *out_bias = weight_find(&ws, "out_proj.bias");
    const int64_t D = mx.D, Lr = 9, npad = 5, T = Lr + npad, B = 3;
    const int64_t ncache1 = mx.C * mx.K;
    double *s = random_x(Lr * D, 7);      /* the real tokens [Lr][D] */
    double *junk = random_x(npad * D, 8); /* what padding positions carry */
    junk[0] = NAN;                        /* a padding token must not reach anything */
    junk[D + 1] = 1e30;

    /* Unpadded reference, token-prefix caches at every length. */
    double *y_ref = malloc((size_t)(Lr * D) * sizeof *y_ref);
    double *cache_at[10]; /* [Lr + 1] */
    assert_non_null(y_ref);
    struct mc_cache *c1 = cache_new(&mx, 1);
    cache_at[0] = cache_get(&mx, c1, 1);
    for (int64_t t = 0; t < Lr; t++) {
        forward_f64(&mx, c1, 1, Lr, t, 1, s, NULL, y_ref);
        cache_at[t + 1] = cache_get(&mx, c1, 1);
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
            struct mc_cache *c = cache_new(&mx, B);
            forward_f64(&mx, c, B, T, 0, T, x, mask, y);
            double *all = cache_get(&mx, c, B);
            for (int64_t b = 0; b < B; b++) {
                cache[b] = malloc((size_t)ncache1 * sizeof(double));
                assert_non_null(cache[b]);
                memcpy(cache[b], all + b * ncache1, (size_t)ncache1 * sizeof(double));
            }
            free(all);
            mx.ops->cache_free(mx.model, c);
        } else {
            for (int64_t b = 0; b < B; b++) {
                struct mc_cache *c = cache_new(&mx, 1);
                for (int64_t t0 = 0; t0 < T; t0 += (mode == 1 ? T : 1))
                    forward_f64(&mx, c, 1, T, t0, mode == 1 ? T : 1, x + b * T * D, mask + b * T, y + b * T * D);
                cache[b] = cache_get(&mx, c, 1);
                mx.ops->cache_free(mx.model, c);
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
                    assert_true(max_abs_diff(yr, out_bias, D) == 0.0); /* exactly out_proj.bias */
                }
            }
            double d = max_abs_diff(cache[b], cache_at[Lr], ncache1); /* right padding: cache at last real token */
            worst = fmax(worst, d);
            assert_true(d <= 1e-12);
            free(cache[b]);
        }
    }
    print_message("mask semantics (left/middle/right padding, B = 3 / B = 1 / L = 1): max diff = %.3g\n", worst);

    /* A padding token on a primed cache leaves it bit-identical; without out_proj.bias its output
     * row is exactly zero. */
    {
        struct mc_cache *c = cache_new(&mx, 1);
        uint8_t zero = 0;
        forward_f64(&mx, c, 1, Lr, 0, 4, s, NULL, y);
        double *before = cache_get(&mx, c, 1);
        forward_f64(&mx, c, 1, 1, 0, 1, junk, &zero, y);
        double *after = cache_get(&mx, c, 1);
        assert_memory_equal(before, after, (size_t)ncache1 * sizeof(double));
        assert_true(max_abs_diff(y, out_bias, D) == 0.0);
        /* 4 tokens in one forward vs 4 single steps: the projections may round differently. */
        assert_true(max_abs_diff(before, cache_at[4], ncache1) <= 1e-12);
        free(after);
        free(before);
        mx.ops->cache_free(mx.model, c);

        const struct mc_shortconv_config nb = small_config(4, 0);
        struct mixer m0;
        mixer_init(&m0, &nb, MC_DTYPE_F64, 24, NULL);
        const double zeros[8] = {0};
        uint8_t m3[3] = {1, 0, 1};
        double x3[3 * 8], y3[3 * 8];
        memcpy(x3, s, sizeof zeros);
        memcpy(x3 + D, junk, sizeof zeros); /* NaN at the padding token */
        memcpy(x3 + 2 * D, s + D, sizeof zeros);
        forward_f64(&m0, NULL, 1, 3, 0, 3, x3, m3, y3);
        assert_memory_equal(y3 + D, zeros, sizeof zeros);
        mixer_free(&m0);
    }

    mx.ops->cache_free(mx.model, c1);
    for (int64_t t = 0; t <= Lr; t++)
        free(cache_at[t]);
    free(y);
    free(x);
    free(y_ref);
    free(junk);
    free(s);
    weight_set_free(&ws);
    mixer_free(&mx);
}

/* ---- (d) a hand-checkable case ----------------------------------------------------------------- */

/* D = 2, K = 2, biases on: in_proj rows B0 B1 | C0 C1 | x0 x1. Run once from a zero window and once
 * from an imported window, whose columns the first token's conv must read. */
static void test_hand_case(void **state)
{
    (void)state;
    const double w_in[6][2] = {{1.0, 0.25}, {0.5, -1.0}, {-0.3, 0.8}, {1.2, 0.4}, {0.6, -0.7}, {-0.9, 0.2}};
    const double b_in[6] = {0.1, -0.2, 0.3, 0.05, -0.15, 0.25};
    const double w_conv[2][1][2] = {{{0.4, 0.9}}, {{-0.6, 1.1}}};
    const double b_conv[2] = {0.1, -0.3};
    const double w_out[2][2] = {{0.9, -0.4}, {-1.2, 0.7}};
    const double b_out[2] = {0.02, -0.05};
    const double u[3][2] = {{1.0, 2.0}, {-0.5, 0.5}, {0.25, -1.5}};
    const double seed_win[2][2] = {{0.0, 0.0}, {0.7, -1.3}}; /* [case][channel]: the column at k = K-1 */

    const struct mc_shortconv_config cfg = {.hidden_size = 2, .conv_kernel = 2, .conv_bias = 1};
    const struct mc_weight ws[] = {
        {"in_proj.weight", 2, {6, 2}, w_in},  {"in_proj.bias", 1, {6}, b_in},
        {"conv.weight", 3, {2, 1, 2}, w_conv}, {"conv.bias", 1, {2}, b_conv},
        {"out_proj.weight", 2, {2, 2}, w_out}, {"out_proj.bias", 1, {2}, b_out},
    };
    const struct mc_model_desc desc = {
        .family = MC_FAMILY_SHORTCONV, .dtype = MC_DTYPE_F64, .config = &cfg, .weights = ws, .n_weights = 6};
    const struct mc_backend_ops *ops = mc_reference_shortconv_ops();
    struct mc_model *model = NULL;
    struct mc_msg msg = {{0}};
    assert_int_equal(ops->model_create(&desc, &model, &msg), MC_BACKEND_OK);

    for (int ci = 0; ci < 2; ci++) {
        struct mc_cache *cache = NULL;
        assert_int_equal(ops->cache_alloc(model, 1, &cache, &msg), MC_BACKEND_OK);
        if (ci == 1) {
            const double win[2][2] = {{-5.0, seed_win[1][0]}, {9.0, seed_win[1][1]}}; /* column 0 is never read */
            assert_int_equal(ops->cache_import(model, cache, win, NULL, &msg), MC_BACKEND_OK);
        }
        double y[3][2];
        struct mc_forward_args a = {.batch = 1, .len = 3, .x = u, .mask = NULL, .y = y};
        assert_int_equal(ops->forward(model, cache, &a, &msg), MC_BACKEND_OK);
        double win_out[2][2];
        assert_int_equal(ops->cache_export(model, cache, win_out, NULL, &msg), MC_BACKEND_OK);

        /* The formulas of mixers.md §5.2, one scalar at a time. */
        double prev[2] = {seed_win[ci][0], seed_win[ci][1]}, bx_hist[3][2], max_d = 0.0;
        for (int t = 0; t < 3; t++) {
            double p[6];
            for (int r = 0; r < 6; r++)
                p[r] = b_in[r] + w_in[r][0] * u[t][0] + w_in[r][1] * u[t][1];
            double yv[2];
            for (int c = 0; c < 2; c++) {
                double bx = p[c] * p[4 + c];
                double co = b_conv[c] + w_conv[c][0][0] * prev[c] + w_conv[c][0][1] * bx;
                prev[c] = bx;
                bx_hist[t][c] = bx;
                yv[c] = p[2 + c] * co;
            }
            for (int j = 0; j < 2; j++)
                max_d = fmax(max_d, fabs(b_out[j] + w_out[j][0] * yv[0] + w_out[j][1] * yv[1] - y[t][j]));
        }
        for (int c = 0; c < 2; c++) /* CONV-INV: the last K = 2 pre-conv inputs Bx, oldest first */
            max_d = fmax(max_d, fmax(fabs(win_out[c][0] - bx_hist[1][c]), fabs(win_out[c][1] - bx_hist[2][c])));
        print_message("hand case (%s window): max |dy|, |dwindow| = %.3g\n", ci ? "imported" : "zero", max_d);
        assert_true(max_d <= 1e-15);
        ops->cache_free(model, cache);
    }
    ops->model_destroy(model);
}

/* ---- an independent scalar oracle on the general configuration --------------------------------- */

/* One row of T tokens from a zero window, every formula of mixers.md §5.2 written out with scalar
 * loops and no shared code: in_proj split order B | C | x, Bx = B ⊙ x, conv window as explicit
 * history indices, no activation, y = C ⊙ conv, biases. y [T][D]. */
static void oracle_forward(struct weight_set *ws, const struct mc_shortconv_config *c, int64_t T, const double *u,
                           double *y)
{
    const int64_t D = c->hidden_size, K = c->conv_kernel;
    const double *w_in = weight_find(ws, "in_proj.weight"), *b_in = weight_find(ws, "in_proj.bias");
    const double *w_conv = weight_find(ws, "conv.weight"), *b_conv = weight_find(ws, "conv.bias");
    const double *w_out = weight_find(ws, "out_proj.weight"), *b_out = weight_find(ws, "out_proj.bias");
    double *proj = calloc((size_t)(T * 3 * D), sizeof *proj);
    double *yy = calloc((size_t)D, sizeof *yy);
    assert_true(proj && yy);
    for (int64_t t = 0; t < T; t++)
        for (int64_t o = 0; o < 3 * D; o++) {
            double acc = b_in ? b_in[o] : 0.0;
            for (int64_t i = 0; i < D; i++)
                acc += w_in[o * D + i] * u[t * D + i];
            proj[t * 3 * D + o] = acc;
        }
    for (int64_t t = 0; t < T; t++) {
        for (int64_t ch = 0; ch < D; ch++) { /* conv(Bx)[t] = b + sum_k w[k] Bx[t-(K-1)+k], zero before 0 */
            double acc = b_conv ? b_conv[ch] : 0.0;
            for (int64_t k = 0; k < K; k++) {
                int64_t tau = t - (K - 1) + k;
                double bx = tau >= 0 ? proj[tau * 3 * D + ch] * proj[tau * 3 * D + 2 * D + ch] : 0.0;
                acc += w_conv[ch * K + k] * bx;
            }
            yy[ch] = proj[t * 3 * D + D + ch] * acc;
        }
        for (int64_t o = 0; o < D; o++) {
            double acc = b_out ? b_out[o] : 0.0;
            for (int64_t i = 0; i < D; i++)
                acc += w_out[o * D + i] * yy[i];
            y[t * D + o] = acc;
        }
    }
    free(yy);
    free(proj);
}

static void test_scalar_oracle(void **state)
{
    (void)state;
    for (int64_t K = 1; K <= 4; K++) {
        const struct mc_shortconv_config cfg = small_config(K, 1);
        struct weight_set ws;
        struct mixer mx;
        mixer_init(&mx, &cfg, MC_DTYPE_F64, 61 + (uint64_t)K, &ws);
        const int64_t T = 12, D = mx.D;
        double *x = random_x(T * D, 13);
        double *y = malloc((size_t)(T * D) * sizeof *y), *y_or = malloc((size_t)(T * D) * sizeof *y_or);
        assert_true(y && y_or);
        forward_f64(&mx, NULL, 1, T, 0, T, x, NULL, y);
        oracle_forward(&ws, &cfg, T, x, y_or);
        double d = max_abs_diff(y, y_or, T * D);
        print_message("scalar oracle (K %lld): max |dy| = %.3g\n", (long long)K, d);
        assert_true(d <= 1e-14);
        free(y_or);
        free(y);
        free(x);
        weight_set_free(&ws);
        mixer_free(&mx);
    }
}

/* ---- f32 against f64 --------------------------------------------------------------------------- */

static void test_f32_matches_f64(void **state)
{
    (void)state;
    const struct mc_shortconv_config cfg = small_config(4, 1);
    struct mixer m64, m32;
    mixer_init(&m64, &cfg, MC_DTYPE_F64, 31, NULL);
    mixer_init(&m32, &cfg, MC_DTYPE_F32, 31, NULL);
    const int64_t B = 2, L = 11, D = m64.D;
    const int64_t nw = B * m64.C * m64.K;
    double *x = random_x(B * L * D, 3);
    double *y64 = malloc((size_t)(B * L * D) * sizeof *y64);
    float *x32 = malloc((size_t)(B * L * D) * sizeof *x32);
    float *y32 = malloc((size_t)(B * L * D) * sizeof *y32);
    float *c32 = malloc((size_t)nw * sizeof *c32);
    assert_true(y64 && x32 && y32 && c32);
    for (int64_t i = 0; i < B * L * D; i++)
        x32[i] = (float)x[i];
    struct mc_cache *a = cache_new(&m64, B), *b = cache_new(&m32, B);
    struct mc_msg msg = {{0}};
    forward_f64(&m64, a, B, L, 0, L, x, NULL, y64);
    struct mc_forward_args args = {.batch = B, .len = L, .x = x32, .mask = NULL, .y = y32};
    assert_int_equal(m32.ops->forward(m32.model, b, &args, &msg), MC_BACKEND_OK);
    double *c64 = cache_get(&m64, a, B);
    assert_int_equal(m32.ops->cache_export(m32.model, b, c32, NULL, &msg), MC_BACKEND_OK);
    double dy = 0.0, dc = 0.0;
    for (int64_t i = 0; i < B * L * D; i++)
        dy = fmax(dy, fabs((double)y32[i] - y64[i]));
    for (int64_t i = 0; i < nw; i++)
        dc = fmax(dc, fabs((double)c32[i] - c64[i]));
    print_message("f32 vs f64: max |dy| = %.3g, max |dcache| = %.3g\n", dy, dc);
    assert_true(dy < 1e-4);
    assert_true(dc < 1e-4);
    m64.ops->cache_free(m64.model, a);
    m32.ops->cache_free(m32.model, b);
    free(c64);
    free(c32);
    free(y32);
    free(x32);
    free(y64);
    free(x);
    mixer_free(&m32);
    mixer_free(&m64);
}

/* ---- (e) error paths and the cache round trip -------------------------------------------------- */

static enum mc_backend_status try_create(const struct mc_shortconv_config *cfg, enum mc_family family,
                                         enum mc_dtype dtype, struct mc_weight *w, int n, struct mc_msg *msg)
{
    const struct mc_backend_ops *ops = mc_reference_shortconv_ops();
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

static void expect_msg(const struct mc_msg *msg, const char *a, const char *b)
{
    if (!strstr(msg->text, a) || (b && !strstr(msg->text, b)))
        fail_msg("message '%s' lacks '%s' / '%s'", msg->text, a, b ? b : "");
}

static void test_create_errors(void **state)
{
    (void)state;
    struct mc_shortconv_config cfg = small_config(3, 1);
    struct weight_set ws;
    struct mc_msg msg;
    weight_set_random(&ws, &cfg, 3);
    weight_set_pack(&ws, MC_DTYPE_F64);
    const int n = ws.n;

    assert_int_equal(try_create(&cfg, MC_FAMILY_SHORTCONV, MC_DTYPE_F64, ws.w, n, &msg), MC_BACKEND_OK);
    assert_int_equal(try_create(&cfg, MC_FAMILY_SHORTCONV, MC_DTYPE_F16, ws.w, n, &msg), MC_BACKEND_UNSUPPORTED);
    expect_msg(&msg, "dtype", NULL);
    assert_int_equal(try_create(&cfg, MC_FAMILY_SHORTCONV, MC_DTYPE_BF16, ws.w, n, &msg), MC_BACKEND_UNSUPPORTED);
    assert_int_equal(try_create(&cfg, MC_FAMILY_SHORTCONV, (enum mc_dtype)9, ws.w, n, &msg), MC_BACKEND_INVALID);
    assert_int_equal(try_create(&cfg, MC_FAMILY_MAMBA1, MC_DTYPE_F64, ws.w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "family", NULL);
    assert_int_equal(try_create(NULL, MC_FAMILY_SHORTCONV, MC_DTYPE_F64, ws.w, n, &msg), MC_BACKEND_INVALID);

    /* Missing weight: drop conv.weight (index 2 with biases: in_proj.w, in_proj.b, conv.w). */
    struct mc_weight w[NW + 1]; /* room for a duplicate */
    memcpy(w, ws.w, sizeof ws.w);
    assert_string_equal(w[2].name, "conv.weight");
    w[2] = w[n - 1];
    assert_int_equal(try_create(&cfg, MC_FAMILY_SHORTCONV, MC_DTYPE_F64, w, n - 1, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "missing weight 'conv.weight'", "[8, 1, 3]");

    /* Wrong shapes: in_proj rows 2D (a B | C split without x), conv.weight as [D][K], out_proj. */
    memcpy(w, ws.w, sizeof ws.w);
    w[0].dims[0] = 16;
    assert_int_equal(try_create(&cfg, MC_FAMILY_SHORTCONV, MC_DTYPE_F64, w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "'in_proj.weight'", "expected shape [24, 8], got [16, 8]");
    memcpy(w, ws.w, sizeof ws.w);
    w[2].ndim = 2;
    w[2].dims[1] = 3;
    assert_int_equal(try_create(&cfg, MC_FAMILY_SHORTCONV, MC_DTYPE_F64, w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "'conv.weight'", "expected shape [8, 1, 3], got [8, 3]");
    memcpy(w, ws.w, sizeof ws.w);
    assert_string_equal(w[4].name, "out_proj.weight");
    w[4].dims[1] = 24;
    assert_int_equal(try_create(&cfg, MC_FAMILY_SHORTCONV, MC_DTYPE_F64, w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "'out_proj.weight'", "expected shape [8, 8], got [8, 24]");
    memcpy(w, ws.w, sizeof ws.w);
    w[1].ndim = 7;
    assert_int_equal(try_create(&cfg, MC_FAMILY_SHORTCONV, MC_DTYPE_F64, w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "'in_proj.bias'", "got ndim 7");

    /* Unknown (Mamba's conv name), duplicated, and present-but-not-implied weights; no data. */
    memcpy(w, ws.w, sizeof ws.w);
    w[2].name = "conv1d.weight";
    assert_int_equal(try_create(&cfg, MC_FAMILY_SHORTCONV, MC_DTYPE_F64, w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "unknown weight 'conv1d.weight'", NULL);
    memcpy(w, ws.w, sizeof ws.w);
    w[n] = w[3];
    assert_int_equal(try_create(&cfg, MC_FAMILY_SHORTCONV, MC_DTYPE_F64, w, n + 1, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "twice", NULL);
    struct mc_shortconv_config nobias = cfg;
    nobias.conv_bias = 0;
    assert_int_equal(try_create(&nobias, MC_FAMILY_SHORTCONV, MC_DTYPE_F64, ws.w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "in_proj.bias", "conv_bias");
    memcpy(w, ws.w, sizeof ws.w);
    w[5].data = NULL;
    assert_int_equal(try_create(&cfg, MC_FAMILY_SHORTCONV, MC_DTYPE_F64, w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "out_proj.bias", "no data");
    /* With biases on, dropping one bias is a missing weight. */
    memcpy(w, ws.w, sizeof ws.w);
    assert_string_equal(w[3].name, "conv.bias");
    w[3] = w[n - 1];
    assert_int_equal(try_create(&cfg, MC_FAMILY_SHORTCONV, MC_DTYPE_F64, w, n - 1, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "missing weight 'conv.bias'", NULL);

    /* Configuration. */
    struct mc_shortconv_config bad = cfg;
    bad.conv_kernel = 0;
    assert_int_equal(try_create(&bad, MC_FAMILY_SHORTCONV, MC_DTYPE_F64, ws.w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "conv_L_cache", NULL);
    bad = cfg;
    bad.hidden_size = -8;
    assert_int_equal(try_create(&bad, MC_FAMILY_SHORTCONV, MC_DTYPE_F64, ws.w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "hidden_size", NULL);
    bad = cfg;
    bad.conv_bias = 3;
    assert_int_equal(try_create(&bad, MC_FAMILY_SHORTCONV, MC_DTYPE_F64, ws.w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "conv_bias", NULL);

    weight_set_free(&ws);
}

static void test_forward_errors(void **state)
{
    (void)state;
    const struct mc_shortconv_config cfg = small_config(4, 1);
    struct mixer mx;
    mixer_init(&mx, &cfg, MC_DTYPE_F64, 41, NULL);
    const struct mc_backend_ops *ops = mx.ops;
    double x[2 * 3 * 8] = {0}, y[2 * 3 * 8];
    struct mc_msg msg = {{0}};
    struct mc_cache *c1 = cache_new(&mx, 1), *c2 = cache_new(&mx, 2), *bad = NULL;

    struct mc_forward_args a = {.batch = 2, .len = 3, .x = x, .mask = NULL, .y = y};
    assert_int_equal(ops->forward(mx.model, c1, &a, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "cache batch 1", "batch 2");
    a.len = 0;
    assert_int_equal(ops->forward(mx.model, c2, &a, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "len", NULL);
    a.len = 3;
    a.batch = 0;
    assert_int_equal(ops->forward(mx.model, NULL, &a, &msg), MC_BACKEND_INVALID);
    a.batch = 2;
    a.x = NULL;
    assert_int_equal(ops->forward(mx.model, c2, &a, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "x", NULL);
    a.x = x;
    a.y = NULL;
    assert_int_equal(ops->forward(mx.model, c2, &a, &msg), MC_BACKEND_INVALID);
    a.y = y;
    assert_int_equal(ops->forward(mx.model, c2, &a, &msg), MC_BACKEND_OK);

    assert_int_equal(ops->cache_alloc(mx.model, 0, &bad, &msg), MC_BACKEND_INVALID);
    assert_null(bad);
    assert_int_equal(ops->cache_copy(mx.model, c1, c2, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "batch", NULL);
    assert_int_equal(ops->cache_import(mx.model, c1, NULL, NULL, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "conv_state", NULL);
    double win[8 * 4] = {0};
    assert_int_equal(ops->cache_import(mx.model, c1, win, NULL, &msg), MC_BACKEND_OK);
    assert_int_equal(ops->cache_export(mx.model, c1, NULL, NULL, &msg), MC_BACKEND_OK);
    assert_int_equal(ops->cache_export(NULL, c1, win, NULL, &msg), MC_BACKEND_INVALID);

    ops->cache_free(mx.model, c2);
    ops->cache_free(mx.model, c1);
    ops->cache_free(mx.model, NULL);
    ops->model_destroy(NULL);
    mixer_free(&mx);
}

/* Export -> import into a fresh cache -> continue: equals continuing the original; copy likewise.
 * An imported cache is primed: its continuation is seeded from the import, not from zeros. */
static void test_cache_round_trip(void **state)
{
    (void)state;
    const struct mc_shortconv_config cfg = small_config(4, 1);
    struct mixer mx;
    mixer_init(&mx, &cfg, MC_DTYPE_F64, 51, NULL);
    const int64_t B = 2, T = 10, D = mx.D, t0 = 6;
    double *x = random_x(B * T * D, 9);
    double *y_a = malloc((size_t)(B * T * D) * sizeof *y_a);
    double *y_b = malloc((size_t)(B * T * D) * sizeof *y_b);
    double *y_c = malloc((size_t)(B * T * D) * sizeof *y_c);
    assert_true(y_a && y_b && y_c);
    struct mc_msg msg = {{0}};
    struct mc_cache *a = cache_new(&mx, B), *b = cache_new(&mx, B), *c = cache_new(&mx, B);

    forward_f64(&mx, a, B, T, 0, t0, x, NULL, y_a);
    double *snap = cache_get(&mx, a, B);
    assert_int_equal(mx.ops->cache_import(mx.model, b, snap, NULL, &msg), MC_BACKEND_OK);
    assert_int_equal(mx.ops->cache_copy(mx.model, c, a, &msg), MC_BACKEND_OK);
    double *snap_b = cache_get(&mx, b, B);
    assert_memory_equal(snap, snap_b, (size_t)(B * mx.C * mx.K) * sizeof(double));

    forward_f64(&mx, a, B, T, t0, T - t0, x, NULL, y_a);
    forward_f64(&mx, b, B, T, t0, T - t0, x, NULL, y_b);
    forward_f64(&mx, c, B, T, t0, T - t0, x, NULL, y_c);
    assert_memory_equal(y_a + t0 * D, y_b + t0 * D, (size_t)((T - t0) * D) * sizeof(double));
    assert_memory_equal(y_a + (T + t0) * D, y_b + (T + t0) * D, (size_t)((T - t0) * D) * sizeof(double));
    assert_memory_equal(y_a + t0 * D, y_c + t0 * D, (size_t)((T - t0) * D) * sizeof(double));

    /* Imported into a never-used cache: seeded from the import, so it differs from a fresh prefill. */
    struct mc_cache *d = cache_new(&mx, B);
    double dummy_state = 123.0; /* a non-NULL state pointer is ignored, never read or written */
    assert_int_equal(mx.ops->cache_import(mx.model, d, snap, &dummy_state, &msg), MC_BACKEND_OK);
    forward_f64(&mx, d, B, T, t0, T - t0, x, NULL, y_c);
    forward_f64(&mx, NULL, B, T, t0, T - t0, x, NULL, y_b);
    assert_true(max_abs_diff(y_c + t0 * D, y_b + t0 * D, (T - t0) * D) > 1e-6);

    double *snap_d = malloc((size_t)(B * mx.C * mx.K) * sizeof *snap_d);
    assert_non_null(snap_d);
    assert_int_equal(mx.ops->cache_export(mx.model, d, snap_d, &dummy_state, &msg), MC_BACKEND_OK);
    assert_true(dummy_state == 123.0);
    double *snap_a = cache_get(&mx, a, B); /* d and a absorbed the same tokens from the same window */
    assert_memory_equal(snap_a, snap_d, (size_t)(B * mx.C * mx.K) * sizeof(double));
    free(snap_a);
    free(snap_d);

    mx.ops->cache_free(mx.model, d);
    mx.ops->cache_free(mx.model, c);
    mx.ops->cache_free(mx.model, b);
    mx.ops->cache_free(mx.model, a);
    free(snap_b);
    free(snap);
    free(y_c);
    free(y_b);
    free(y_a);
    free(x);
    mixer_free(&mx);
}

static void test_ops_identity(void **state)
{
    (void)state;
    const struct mc_backend_ops *ops = mc_reference_shortconv_ops();
    assert_int_equal(ops->abi_version, MIXCHECK_ABI_VERSION);
    assert_int_equal(ops->struct_size, sizeof(struct mc_backend_ops));
    assert_string_equal(ops->name, "reference");
    assert_string_equal(ops->device, "cpu");
    assert_int_equal(ops->family, MC_FAMILY_SHORTCONV);
    assert_int_equal(ops->dtypes, MC_DTYPE_BIT(MC_DTYPE_F32) | MC_DTYPE_BIT(MC_DTYPE_F64));
    assert_int_equal(ops->caps, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ops_identity),
        cmocka_unit_test(test_split_invariance),
        cmocka_unit_test(test_mask_semantics),
        cmocka_unit_test(test_hand_case),
        cmocka_unit_test(test_scalar_oracle),
        cmocka_unit_test(test_f32_matches_f64),
        cmocka_unit_test(test_create_errors),
        cmocka_unit_test(test_forward_errors),
        cmocka_unit_test(test_cache_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
