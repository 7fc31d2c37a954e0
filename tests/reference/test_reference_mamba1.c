/*
 * test_reference_mamba1.c — the reference Mamba1 mixer (reference/mamba1.c), driven only through
 * its ops struct (mixcheck/backend.h) on small random configurations made with a fixed-seed LCG:
 *   - split invariance: one forward over a sequence equals any split of it into successive cached
 *     forwards (pieces of length 1 and shorter than K included), outputs and exported caches — the
 *     multi-token cached forward of docs/semantics.md §A.1 that HF Mamba1 lacks (§3.5);
 *   - L == 1 continuation equals the multi-token path;
 *   - mask semantics (docs/semantics.md §A.4): left, middle and right padding, B == 1, L == 1;
 *   - a hand-checkable case (I = N = R = 1) against the formulas of docs/semantics.md §3.3 written out;
 *   - an independent scalar oracle on a general configuration with every bias;
 *   - f32 agrees with f64;
 *   - error paths and the cache export/import/copy round trip.
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

static void weight_set_random(struct weight_set *ws, const struct mc_mamba1_config *c, uint64_t seed)
{
    struct lcg g = {seed};
    const int64_t I = c->intermediate_size, N = c->state_size, R = c->time_step_rank, D = c->hidden_size;
    memset(ws, 0, sizeof *ws);
    weight_add(ws, "in_proj.weight", 2, 2 * I, D, 0, 0.0, 1.0 / sqrt((double)D), &g);
    if (c->use_bias)
        weight_add(ws, "in_proj.bias", 1, 2 * I, 0, 0, 0.0, 0.2, &g);
    weight_add(ws, "conv1d.weight", 3, I, 1, c->conv_kernel, 0.0, 0.5, &g);
    if (c->use_conv_bias)
        weight_add(ws, "conv1d.bias", 1, I, 0, 0, 0.0, 0.2, &g);
    weight_add(ws, "x_proj.weight", 2, R + 2 * N, I, 0, 0.0, 1.0 / sqrt((double)I), &g);
    weight_add(ws, "dt_proj.weight", 2, I, R, 0, 0.0, 1.0 / sqrt((double)R), &g);
    weight_add(ws, "dt_proj.bias", 1, I, 0, 0, -1.5, 1.5, &g);
    weight_add(ws, "A_log", 2, I, N, 0, 0.3, 0.8, &g);
    weight_add(ws, "D", 1, I, 0, 0, 1.0, 0.3, &g);
    weight_add(ws, "out_proj.weight", 2, D, I, 0, 0.0, 1.0 / sqrt((double)I), &g);
    if (c->use_bias)
        weight_add(ws, "out_proj.bias", 1, D, 0, 0, 0.0, 0.2, &g);
}

static struct mc_mamba1_config small_config(int64_t conv_kernel, int32_t bias)
{
    struct mc_mamba1_config c = {
        .hidden_size = 8,
        .intermediate_size = 12,
        .state_size = 5,
        .conv_kernel = conv_kernel,
        .time_step_rank = 3,
        .use_bias = bias,
        .use_conv_bias = bias,
    };
    return c;
}

/* Creates the model, then poisons and frees the caller's buffers (the model must have copied them). */
static void mixer_init(struct mixer *mx, const struct mc_mamba1_config *cfg, enum mc_dtype dtype, uint64_t seed,
                       struct weight_set *keep)
{
    struct weight_set ws;
    *mx = (struct mixer){.ops = mc_reference_mamba1_ops(),
                         .D = cfg->hidden_size,
                         .C = cfg->intermediate_size,
                         .K = cfg->conv_kernel,
                         .state_row = cfg->intermediate_size * cfg->state_size};
    weight_set_random(&ws, cfg, seed);
    mixer_build(mx, MC_FAMILY_MAMBA1, cfg, dtype, &ws, keep);
}

/* ---- (a) split invariance, (b) L == 1 continuation -------------------------------------------- */

static void check_splits(int64_t conv_kernel, int32_t bias)
{
    const struct mc_mamba1_config cfg = small_config(conv_kernel, bias);
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
    check_splits(4, 1);
    check_splits(4, 0);
    check_splits(2, 1);
    check_splits(1, 1);
}

/* ---- (c) mask semantics ------------------------------------------------------------------------ */

static void test_mask_semantics(void **state)
{
    (void)state;
    const struct mc_mamba1_config cfg = small_config(4, 1);
    struct weight_set ws;
    struct mixer mx;
    mixer_init(&mx, &cfg, MC_DTYPE_F64, 23, &ws);
    const double worst = check_mask_semantics(&mx, weight_find(&ws, "out_proj.bias"));
    print_message("mask semantics (left/middle/right padding, B = 3 / B = 1 / L = 1): max diff = %.3g\n", worst);
    weight_set_free(&ws);
    mixer_free(&mx);

    /* Without out_proj.bias a padding token's output row is exactly zero. */
    const struct mc_mamba1_config nb = small_config(4, 0);
    struct mixer m0;
    mixer_init(&m0, &nb, MC_DTYPE_F64, 24, NULL);
    check_pad_row_zero(&m0);
    mixer_free(&m0);
}

/* ---- (d) a hand-checkable case ----------------------------------------------------------------- */

/* D = 2, I = N = R = 1, K = 2: in_proj rows xh, z; x_proj rows dt_low, B, C. Run once with a
 * dt_proj.bias that keeps delta on the log1p branch and once past the softplus threshold 20. */
static void test_hand_case(void **state)
{
    (void)state;
    const double w_in[2][2] = {{1.0, 0.25}, {0.5, -1.0}};
    const double w_conv[1][1][2] = {{{0.4, 0.9}}};
    const double b_conv[1] = {0.1};
    const double w_x[3][1] = {{0.7}, {-0.6}, {1.3}};
    const double w_dt[1][1] = {{0.8}};
    const double a_log[1][1] = {{0.2}}, d_skip[1] = {0.8};
    const double w_out[2][1] = {{0.9}, {-1.2}};
    const double u[3][2] = {{1.0, 2.0}, {-0.5, 0.5}, {0.25, -1.5}};
    const double dt_biases[2] = {-0.5, 22.0};

    for (int bi = 0; bi < 2; bi++) {
        const double b_dt[1] = {dt_biases[bi]};
        struct mc_mamba1_config cfg = {.hidden_size = 2,
                                       .intermediate_size = 1,
                                       .state_size = 1,
                                       .conv_kernel = 2,
                                       .time_step_rank = 1,
                                       .use_bias = 0,
                                       .use_conv_bias = 1};
        struct mc_weight ws[] = {
            {"in_proj.weight", 2, {2, 2}, w_in},   {"conv1d.weight", 3, {1, 1, 2}, w_conv},
            {"conv1d.bias", 1, {1}, b_conv},       {"x_proj.weight", 2, {3, 1}, w_x},
            {"dt_proj.weight", 2, {1, 1}, w_dt},   {"dt_proj.bias", 1, {1}, b_dt},
            {"A_log", 2, {1, 1}, a_log},           {"D", 1, {1}, d_skip},
            {"out_proj.weight", 2, {2, 1}, w_out},
        };
        double y[3][2];
        hand_forward(mc_reference_mamba1_ops(), MC_FAMILY_MAMBA1, &cfg, ws, 9, 3, u, y);

        /* The formulas of docs/semantics.md §3.3, one scalar at a time. */
        double prev = 0.0, h = 0.0, max_d = 0.0;
        for (int t = 0; t < 3; t++) {
            double xh = w_in[0][0] * u[t][0] + w_in[0][1] * u[t][1];
            double z = w_in[1][0] * u[t][0] + w_in[1][1] * u[t][1];
            double xc = silu_d(b_conv[0] + w_conv[0][0][0] * prev + w_conv[0][0][1] * xh);
            prev = xh;
            double dt_low = w_x[0][0] * xc, Bm = w_x[1][0] * xc, Cm = w_x[2][0] * xc;
            double delta = softplus_d(w_dt[0][0] * dt_low + b_dt[0]);
            double A = -exp(a_log[0][0]);
            h = exp(delta * A) * h + delta * Bm * xc;
            double yv = (h * Cm + d_skip[0] * xc) * silu_d(z);
            for (int j = 0; j < 2; j++)
                max_d = fmax(max_d, fabs(w_out[j][0] * yv - y[t][j]));
        }
        print_message("hand case (dt_proj.bias %g): max |dy| = %.3g\n", dt_biases[bi], max_d);
        assert_true(max_d <= 1e-15);
    }
}

/* ---- an independent scalar oracle on the general configuration --------------------------------- */

/* One row of T tokens from zero state, every formula of docs/semantics.md §3.3 written out with scalar
 * loops and no shared code: in_proj split order xh | z, conv window as explicit history indices,
 * x_proj split order dt_low | B | C, dt_proj with its bias then softplus, per-channel [N] state,
 * D skip, silu(z) gate, biases. y [T][D]. */
static void oracle_forward(struct weight_set *ws, const struct mc_mamba1_config *c, int64_t T, const double *u,
                           double *y)
{
    const int64_t D = c->hidden_size, I = c->intermediate_size, N = c->state_size, K = c->conv_kernel;
    const int64_t R = c->time_step_rank, X = R + 2 * N;
    const double *w_in = weight_find(ws, "in_proj.weight"), *b_in = weight_find(ws, "in_proj.bias");
    const double *w_conv = weight_find(ws, "conv1d.weight"), *b_conv = weight_find(ws, "conv1d.bias");
    const double *w_x = weight_find(ws, "x_proj.weight"), *w_dt = weight_find(ws, "dt_proj.weight");
    const double *b_dt = weight_find(ws, "dt_proj.bias"), *a_log = weight_find(ws, "A_log");
    const double *d_skip = weight_find(ws, "D");
    const double *w_out = weight_find(ws, "out_proj.weight"), *b_out = weight_find(ws, "out_proj.bias");
    double *proj = calloc((size_t)(T * 2 * I), sizeof *proj);
    double *h = calloc((size_t)(I * N), sizeof *h);
    double *xc = calloc((size_t)I, sizeof *xc);
    double *dbc = calloc((size_t)X, sizeof *dbc);
    double *yy = calloc((size_t)I, sizeof *yy);
    assert_true(proj && h && xc && dbc && yy);
    for (int64_t t = 0; t < T; t++)
        for (int64_t o = 0; o < 2 * I; o++) {
            double acc = b_in ? b_in[o] : 0.0;
            for (int64_t i = 0; i < D; i++)
                acc += w_in[o * D + i] * u[t * D + i];
            proj[t * 2 * I + o] = acc;
        }
    for (int64_t t = 0; t < T; t++) {
        for (int64_t ch = 0; ch < I; ch++) { /* conv(x)[t] = b + sum_k w[k] x[t-(K-1)+k], zero before 0 */
            double acc = b_conv ? b_conv[ch] : 0.0;
            for (int64_t k = 0; k < K; k++) {
                int64_t tau = t - (K - 1) + k;
                acc += w_conv[ch * K + k] * (tau >= 0 ? proj[tau * 2 * I + ch] : 0.0);
            }
            xc[ch] = silu_d(acc);
        }
        for (int64_t o = 0; o < X; o++) {
            double acc = 0.0;
            for (int64_t i = 0; i < I; i++)
                acc += w_x[o * I + i] * xc[i];
            dbc[o] = acc;
        }
        for (int64_t i = 0; i < I; i++) {
            double pre = b_dt[i];
            for (int64_t r = 0; r < R; r++)
                pre += w_dt[i * R + r] * dbc[r];
            double delta = softplus_d(pre);
            double acc = 0.0;
            for (int64_t n = 0; n < N; n++) {
                double A = -exp(a_log[i * N + n]);
                h[i * N + n] = exp(delta * A) * h[i * N + n] + delta * dbc[R + n] * xc[i];
                acc += h[i * N + n] * dbc[R + N + n];
            }
            yy[i] = (acc + d_skip[i] * xc[i]) * silu_d(proj[t * 2 * I + I + i]);
        }
        for (int64_t o = 0; o < D; o++) {
            double acc = b_out ? b_out[o] : 0.0;
            for (int64_t i = 0; i < I; i++)
                acc += w_out[o * I + i] * yy[i];
            y[t * D + o] = acc;
        }
    }
    free(yy);
    free(dbc);
    free(xc);
    free(h);
    free(proj);
}

static void test_scalar_oracle(void **state)
{
    (void)state;
    static const int64_t kernels[] = {4, 3, 1};
    for (size_t ki = 0; ki < sizeof kernels / sizeof kernels[0]; ki++) {
        const struct mc_mamba1_config cfg = small_config(kernels[ki], 1);
        struct weight_set ws;
        struct mixer mx;
        mixer_init(&mx, &cfg, MC_DTYPE_F64, 61 + ki, &ws);
        const int64_t T = 12, D = mx.D;
        double *x = random_x(T * D, 13);
        double *y = malloc((size_t)(T * D) * sizeof *y), *y_or = malloc((size_t)(T * D) * sizeof *y_or);
        assert_true(y && y_or);
        forward_f64(&mx, NULL, 1, T, 0, T, x, NULL, y);
        oracle_forward(&ws, &cfg, T, x, y_or);
        double d = max_abs_diff(y, y_or, T * D);
        print_message("scalar oracle (K %lld): max |dy| = %.3g\n", (long long)kernels[ki], d);
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
    const struct mc_mamba1_config cfg = small_config(4, 1);
    struct mixer m64, m32;
    mixer_init(&m64, &cfg, MC_DTYPE_F64, 31, NULL);
    mixer_init(&m32, &cfg, MC_DTYPE_F32, 31, NULL);
    check_f32_matches_f64(&m64, &m32, NULL);
    mixer_free(&m32);
    mixer_free(&m64);
}

/* ---- (e) error paths and the cache round trip -------------------------------------------------- */

static enum mc_backend_status try_create(const struct mc_mamba1_config *cfg, enum mc_family family, enum mc_dtype dtype,
                                         struct mc_weight *w, int n, struct mc_msg *msg)
{
    return try_create_ops(mc_reference_mamba1_ops(), cfg, family, dtype, w, n, msg);
}

static void test_create_errors(void **state)
{
    (void)state;
    struct mc_mamba1_config cfg = small_config(4, 1);
    struct weight_set ws;
    struct mc_msg msg;
    weight_set_random(&ws, &cfg, 3);
    weight_set_pack(&ws, MC_DTYPE_F64);
    const int n = ws.n;

    check_create_desc(mc_reference_mamba1_ops(), &cfg, MC_FAMILY_MAMBA1, MC_FAMILY_MAMBA2, ws.w, n);

    /* Missing weight: drop dt_proj.bias (index 6 with biases: in_proj.w, in_proj.b, conv.w, conv.b,
     * x_proj, dt_proj.w, dt_proj.b). */
    struct mc_weight w[WS_MAX + 1]; /* room for a duplicate */
    memcpy(w, ws.w, sizeof ws.w);
    assert_string_equal(w[6].name, "dt_proj.bias");
    w[6] = w[n - 1];
    assert_int_equal(try_create(&cfg, MC_FAMILY_MAMBA1, MC_DTYPE_F64, w, n - 1, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "missing weight 'dt_proj.bias'", "[12]");

    /* Wrong shapes: in_proj columns, x_proj rows, A_log as [I], conv1d.weight as [I][K]. */
    memcpy(w, ws.w, sizeof ws.w);
    w[0].dims[1] = 9;
    assert_int_equal(try_create(&cfg, MC_FAMILY_MAMBA1, MC_DTYPE_F64, w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "'in_proj.weight'", "expected shape [24, 8], got [24, 9]");
    memcpy(w, ws.w, sizeof ws.w);
    assert_string_equal(w[4].name, "x_proj.weight");
    w[4].dims[0] = 12;
    assert_int_equal(try_create(&cfg, MC_FAMILY_MAMBA1, MC_DTYPE_F64, w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "'x_proj.weight'", "expected shape [13, 12], got [12, 12]");
    memcpy(w, ws.w, sizeof ws.w);
    assert_string_equal(w[7].name, "A_log");
    w[7].ndim = 1;
    assert_int_equal(try_create(&cfg, MC_FAMILY_MAMBA1, MC_DTYPE_F64, w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "'A_log'", "expected shape [12, 5], got [12]");
    memcpy(w, ws.w, sizeof ws.w);
    w[2].ndim = 2; /* conv1d.weight as [I][K] */
    w[2].dims[1] = 4;
    assert_int_equal(try_create(&cfg, MC_FAMILY_MAMBA1, MC_DTYPE_F64, w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "'conv1d.weight'", "expected shape [12, 1, 4], got [12, 4]");

    /* Unknown, duplicated, and present-but-not-implied weights; a weight without data. */
    memcpy(w, ws.w, sizeof ws.w);
    w[7].name = "A";
    assert_int_equal(try_create(&cfg, MC_FAMILY_MAMBA1, MC_DTYPE_F64, w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "unknown weight 'A'", NULL);
    memcpy(w, ws.w, sizeof ws.w);
    w[n] = w[0];
    assert_int_equal(try_create(&cfg, MC_FAMILY_MAMBA1, MC_DTYPE_F64, w, n + 1, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "twice", NULL);
    struct mc_mamba1_config nobias = cfg;
    nobias.use_bias = 0;
    assert_int_equal(try_create(&nobias, MC_FAMILY_MAMBA1, MC_DTYPE_F64, ws.w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "in_proj.bias", "use_bias");
    nobias = cfg;
    nobias.use_conv_bias = 0;
    assert_int_equal(try_create(&nobias, MC_FAMILY_MAMBA1, MC_DTYPE_F64, ws.w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "conv1d.bias", "use_conv_bias");
    memcpy(w, ws.w, sizeof ws.w);
    w[3].data = NULL;
    assert_int_equal(try_create(&cfg, MC_FAMILY_MAMBA1, MC_DTYPE_F64, w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "conv1d.bias", "no data");

    /* Configuration. */
    struct mc_mamba1_config bad = cfg;
    bad.state_size = 0;
    assert_int_equal(try_create(&bad, MC_FAMILY_MAMBA1, MC_DTYPE_F64, ws.w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "state_size", NULL);
    bad = cfg;
    bad.time_step_rank = -1;
    assert_int_equal(try_create(&bad, MC_FAMILY_MAMBA1, MC_DTYPE_F64, ws.w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "time_step_rank", NULL);
    bad = cfg;
    bad.intermediate_size = 65537;
    assert_int_equal(try_create(&bad, MC_FAMILY_MAMBA1, MC_DTYPE_F64, ws.w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "intermediate_size", NULL);
    bad = cfg;
    bad.use_conv_bias = 2;
    assert_int_equal(try_create(&bad, MC_FAMILY_MAMBA1, MC_DTYPE_F64, ws.w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "use_conv_bias", NULL);

    weight_set_free(&ws);
}

/* Without a recurrent state an import is refused. */
static void forward_errors_mamba1(struct mixer *mx, struct mc_cache *c1, struct mc_cache *c2, struct mc_msg *msg)
{
    (void)c2;
    double win[12 * 4] = {0};
    assert_int_equal(mx->ops->cache_import(mx->model, c1, win, NULL, msg), MC_BACKEND_INVALID);
    expect_msg(msg, "recurrent_state", NULL);
}

static void test_forward_errors(void **state)
{
    (void)state;
    const struct mc_mamba1_config cfg = small_config(4, 1);
    struct mixer mx;
    mixer_init(&mx, &cfg, MC_DTYPE_F64, 41, NULL);
    check_forward_errors(&mx, forward_errors_mamba1);
    mixer_free(&mx);
}

/* Only the state seeded (zero window) differs from only the window seeded: both are read. */
static void round_trip_mamba1(struct mixer *mx, const struct round_trip *rt)
{
    const int64_t B = rt->B, T = rt->T, t0 = rt->t0, D = mx->D;
    struct mc_msg msg = {{0}};
    double *only_w = calloc((size_t)(B * (mx->C * mx->K + mx->state_row)), sizeof *only_w);
    double *only_s = calloc((size_t)(B * (mx->C * mx->K + mx->state_row)), sizeof *only_s);
    assert_true(only_w && only_s);
    memcpy(only_w, rt->snap, (size_t)(B * mx->C * mx->K) * sizeof(double));
    memcpy(only_s + B * mx->C * mx->K, rt->snap + B * mx->C * mx->K, (size_t)(B * mx->state_row) * sizeof(double));
    assert_int_equal(mx->ops->cache_import(mx->model, rt->d, only_w, only_w + B * mx->C * mx->K, &msg), MC_BACKEND_OK);
    forward_f64(mx, rt->d, B, T, t0, T - t0, rt->x, NULL, rt->y_b);
    assert_true(max_abs_diff(rt->y_a + t0 * D, rt->y_b + t0 * D, (T - t0) * D) > 1e-6);
    assert_int_equal(mx->ops->cache_import(mx->model, rt->d, only_s, only_s + B * mx->C * mx->K, &msg), MC_BACKEND_OK);
    forward_f64(mx, rt->d, B, T, t0, T - t0, rt->x, NULL, rt->y_b);
    assert_true(max_abs_diff(rt->y_a + t0 * D, rt->y_b + t0 * D, (T - t0) * D) > 1e-6);
    free(only_s);
    free(only_w);
}

/* Export -> import into a fresh cache -> continue: equals continuing the original; copy likewise.
 * An imported cache is primed: its continuation is seeded from the import, not from zeros. */
static void test_cache_round_trip(void **state)
{
    (void)state;
    const struct mc_mamba1_config cfg = small_config(4, 1);
    struct mixer mx;
    mixer_init(&mx, &cfg, MC_DTYPE_F64, 51, NULL);
    check_cache_round_trip(&mx, NULL, round_trip_mamba1);
    mixer_free(&mx);
}

static void test_ops_identity(void **state)
{
    (void)state;
    check_ops_identity(mc_reference_mamba1_ops(), MC_FAMILY_MAMBA1);
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
