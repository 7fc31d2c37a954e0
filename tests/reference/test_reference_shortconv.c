/*
 * test_reference_shortconv.c — the reference LFM2 ShortConv mixer (reference/shortconv.c), driven
 * only through its ops struct (mixcheck/backend.h) on small random configurations made with a
 * fixed-seed LCG:
 *   - split invariance: one forward over a sequence equals any split of it into successive cached
 *     forwards (pieces of length 1 and shorter than K included), outputs and exported windows, for
 *     K = 1..4 with and without biases;
 *   - L == 1 continuation equals the multi-token path;
 *   - mask semantics (docs/semantics.md §A.4): left, middle and right padding, B == 1, L == 1;
 *   - a hand-checkable case (D = 2, K = 2) against the formulas of docs/semantics.md §5.2 written out;
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
#include "refutil.h"

/* ---- fixtures ---------------------------------------------------------------------------------- */

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

/* Creates the model, then poisons and frees the caller's buffers (the model must have copied them). */
static void mixer_init(struct mixer *mx, const struct mc_shortconv_config *cfg, enum mc_dtype dtype, uint64_t seed,
                       struct weight_set *keep)
{
    struct weight_set ws;
    *mx = (struct mixer){.ops = mc_reference_shortconv_ops(),
                         .D = cfg->hidden_size,
                         .C = cfg->hidden_size,
                         .K = cfg->conv_kernel,
                         .state_row = 0};
    weight_set_random(&ws, cfg, seed);
    mixer_build(mx, MC_FAMILY_SHORTCONV, cfg, dtype, &ws, keep);
}

/* ---- (a) split invariance, (b) L == 1 continuation -------------------------------------------- */

static void check_splits(int64_t conv_kernel, int32_t bias)
{
    const struct mc_shortconv_config cfg = small_config(conv_kernel, bias);
    struct mixer mx;
    mixer_init(&mx, &cfg, MC_DTYPE_F64, 11, NULL);
    const struct split_result r = check_split_invariance(&mx, 2, 13, 5);
    print_message("split invariance (K %lld, biases %d): max |dy| = %.3g, max |dcache| = %.3g\n",
                  (long long)conv_kernel, (int)bias, r.dy, r.dcache);
    print_message("L == 1 continuation (K %lld): max |dy| = %.3g\n", (long long)conv_kernel, r.dstep);
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
    const double worst = check_mask_semantics(&mx, weight_find(&ws, "out_proj.bias"));
    print_message("mask semantics (left/middle/right padding, B = 3 / B = 1 / L = 1): max diff = %.3g\n", worst);
    weight_set_free(&ws);
    mixer_free(&mx);

    /* Without out_proj.bias a padding token's output row is exactly zero. */
    const struct mc_shortconv_config nb = small_config(4, 0);
    struct mixer m0;
    mixer_init(&m0, &nb, MC_DTYPE_F64, 24, NULL);
    check_pad_row_zero(&m0);
    mixer_free(&m0);
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
        {"in_proj.weight", 2, {6, 2}, w_in},   {"in_proj.bias", 1, {6}, b_in},
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

        /* The formulas of docs/semantics.md §5.2, one scalar at a time. */
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

/* One row of T tokens from a zero window, every formula of docs/semantics.md §5.2 written out with scalar
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
    check_f32_matches_f64(&m64, &m32, NULL);
    mixer_free(&m32);
    mixer_free(&m64);
}

/* ---- (e) error paths and the cache round trip -------------------------------------------------- */

static enum mc_backend_status try_create(const struct mc_shortconv_config *cfg, enum mc_family family,
                                         enum mc_dtype dtype, struct mc_weight *w, int n, struct mc_msg *msg)
{
    return try_create_ops(mc_reference_shortconv_ops(), cfg, family, dtype, w, n, msg);
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

    check_create_desc(mc_reference_shortconv_ops(), &cfg, MC_FAMILY_SHORTCONV, MC_FAMILY_MAMBA1, ws.w, n);

    /* Missing weight: drop conv.weight (index 2 with biases: in_proj.w, in_proj.b, conv.w). */
    struct mc_weight w[WS_MAX + 1]; /* room for a duplicate */
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

/* The refused import names conv_state; a window alone imports and a NULL window exports (there is
 * no recurrent state); no model is refused. */
static void forward_errors_shortconv(struct mixer *mx, struct mc_cache *c1, struct mc_cache *c2, struct mc_msg *msg)
{
    (void)c2;
    const struct mc_backend_ops *ops = mx->ops;
    expect_msg(msg, "conv_state", NULL);
    double win[8 * 4] = {0};
    assert_int_equal(ops->cache_import(mx->model, c1, win, NULL, msg), MC_BACKEND_OK);
    assert_int_equal(ops->cache_export(mx->model, c1, NULL, NULL, msg), MC_BACKEND_OK);
    assert_int_equal(ops->cache_export(NULL, c1, win, NULL, msg), MC_BACKEND_INVALID);
}

static void test_forward_errors(void **state)
{
    (void)state;
    const struct mc_shortconv_config cfg = small_config(4, 1);
    struct mixer mx;
    mixer_init(&mx, &cfg, MC_DTYPE_F64, 41, NULL);
    check_forward_errors(&mx, forward_errors_shortconv);
    mixer_free(&mx);
}

/* The never-used cache got a non-NULL state pointer (d_state): never read or written, and it ends with
 * the window a ends with (d and a absorbed the same tokens from the same window). */
static void round_trip_shortconv(struct mixer *mx, const struct round_trip *rt)
{
    const int64_t B = rt->B;
    struct mc_msg msg = {{0}};
    double *snap_d = malloc((size_t)(B * mx->C * mx->K) * sizeof *snap_d);
    assert_non_null(snap_d);
    assert_int_equal(mx->ops->cache_export(mx->model, rt->d, snap_d, rt->d_state, &msg), MC_BACKEND_OK);
    assert_true(*rt->d_state == 123.0);
    double *snap_a = cache_get(mx, rt->a, B);
    assert_memory_equal(snap_a, snap_d, (size_t)(B * mx->C * mx->K) * sizeof(double));
    free(snap_a);
    free(snap_d);
}

/* Export -> import into a fresh cache -> continue: equals continuing the original; copy likewise.
 * An imported cache is primed: its continuation is seeded from the import, not from zeros. */
static void test_cache_round_trip(void **state)
{
    (void)state;
    const struct mc_shortconv_config cfg = small_config(4, 1);
    struct mixer mx;
    mixer_init(&mx, &cfg, MC_DTYPE_F64, 51, NULL);
    double dummy_state = 123.0; /* a non-NULL state pointer is ignored, never read or written */
    check_cache_round_trip(&mx, &dummy_state, round_trip_shortconv);
    mixer_free(&mx);
}

static void test_ops_identity(void **state)
{
    (void)state;
    check_ops_identity(mc_reference_shortconv_ops(), MC_FAMILY_SHORTCONV);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ops_identity),     cmocka_unit_test(test_split_invariance),
        cmocka_unit_test(test_mask_semantics),   cmocka_unit_test(test_hand_case),
        cmocka_unit_test(test_scalar_oracle),    cmocka_unit_test(test_f32_matches_f64),
        cmocka_unit_test(test_create_errors),    cmocka_unit_test(test_forward_errors),
        cmocka_unit_test(test_cache_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
