/*
 * test_reference_mamba2.c — the reference Mamba2 mixer (reference/mamba2.c), driven only through
 * its ops struct (mixcheck/backend.h) on small random configurations made with a fixed-seed LCG:
 *   - split invariance: one forward over a sequence equals any split of it into successive cached
 *     forwards (pieces of length 1 and shorter than K included), outputs and exported caches;
 *   - L == 1 continuation equals the multi-token path;
 *   - mask semantics (docs/semantics.md §A.4): left, middle and right padding, B == 1, L == 1;
 *   - a hand-checkable case (H = P = N = G = 1) against the formulas of docs/semantics.md §2 written out;
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

static void weight_set_random(struct weight_set *ws, const struct mc_mamba2_config *c, uint64_t seed)
{
    struct lcg g = {seed};
    const int64_t I = c->num_heads * c->head_dim, GN = c->n_groups * c->state_size;
    const int64_t C = I + 2 * GN, proj = 2 * I + 2 * GN + c->num_heads, D = c->hidden_size;
    memset(ws, 0, sizeof *ws);
    weight_add(ws, "in_proj.weight", 2, proj, D, 0, 0.0, 1.0 / sqrt((double)D), &g);
    if (c->use_bias)
        weight_add(ws, "in_proj.bias", 1, proj, 0, 0, 0.0, 0.2, &g);
    weight_add(ws, "conv1d.weight", 3, C, 1, c->conv_kernel, 0.0, 0.5, &g);
    if (c->use_conv_bias)
        weight_add(ws, "conv1d.bias", 1, C, 0, 0, 0.0, 0.2, &g);
    weight_add(ws, "dt_bias", 1, c->num_heads, 0, 0, -1.5, 1.5, &g);
    weight_add(ws, "A_log", 1, c->num_heads, 0, 0, 0.3, 0.8, &g);
    weight_add(ws, "D", 1, c->num_heads, 0, 0, 1.0, 0.3, &g);
    weight_add(ws, "norm.weight", 1, I, 0, 0, 1.0, 0.2, &g);
    weight_add(ws, "out_proj.weight", 2, D, I, 0, 0.0, 1.0 / sqrt((double)I), &g);
    if (c->use_bias)
        weight_add(ws, "out_proj.bias", 1, D, 0, 0, 0.0, 0.2, &g);
}

static struct mc_mamba2_config small_config(int64_t norm_group_size)
{
    struct mc_mamba2_config c = {
        .hidden_size = 8,
        .num_heads = 4,
        .head_dim = 3,
        .state_size = 5,
        .n_groups = 2,
        .conv_kernel = 4,
        .chunk_size = 4,
        .norm_group_size = norm_group_size,
        .layer_norm_epsilon = 1e-5,
        .time_step_limit = {0.02, 0.9}, /* both ends bind for some tokens with dt_bias in [-3, 0] */
        .use_bias = 1,
        .use_conv_bias = 1,
    };
    return c;
}

/* Creates the model, then poisons and frees the caller's buffers (the model must have copied them). */
static void mixer_init(struct mixer *mx, const struct mc_mamba2_config *cfg, enum mc_dtype dtype, uint64_t seed,
                       struct weight_set *keep)
{
    struct weight_set ws;
    *mx = (struct mixer){.ops = mc_reference_mamba2_ops(),
                         .D = cfg->hidden_size,
                         .C = cfg->num_heads * cfg->head_dim + 2 * cfg->n_groups * cfg->state_size,
                         .K = cfg->conv_kernel,
                         .state_row = cfg->num_heads * cfg->head_dim * cfg->state_size};
    weight_set_random(&ws, cfg, seed);
    mixer_build(mx, MC_FAMILY_MAMBA2, cfg, dtype, &ws, keep);
}

/* ---- (a) split invariance, (b) L == 1 continuation -------------------------------------------- */

static void check_splits(int64_t norm_group_size)
{
    const struct mc_mamba2_config cfg = small_config(norm_group_size);
    struct mixer mx;
    mixer_init(&mx, &cfg, MC_DTYPE_F64, 11, NULL);
    const struct split_result r = check_split_invariance(&mx, 2, 13, 5);
    print_message("split invariance (norm_group_size %lld): max |dy| = %.3g, max |dcache| = %.3g\n",
                  (long long)norm_group_size, r.dy, r.dcache);
    print_message("L == 1 continuation: max |dy| = %.3g\n", r.dstep);
    mixer_free(&mx);
}

static void test_split_invariance_full_row_norm(void **state)
{
    (void)state;
    check_splits(12); /* I: HF's full-row gated norm */
}

static void test_split_invariance_groupwise_norm(void **state)
{
    (void)state;
    check_splits(6); /* I/G: mamba_ssm's groupwise gated norm */
}

/* ---- (c) mask semantics ------------------------------------------------------------------------ */

static void test_mask_semantics(void **state)
{
    (void)state;
    const struct mc_mamba2_config cfg = small_config(6);
    struct weight_set ws;
    struct mixer mx;
    mixer_init(&mx, &cfg, MC_DTYPE_F64, 23, &ws);
    const double worst = check_mask_semantics(&mx, weight_find(&ws, "out_proj.bias"));
    print_message("mask semantics (left/middle/right padding, B = 3 / B = 1 / L = 1): max diff = %.3g\n", worst);
    weight_set_free(&ws);
    mixer_free(&mx);
}

/* ---- (d) a hand-checkable case ----------------------------------------------------------------- */

/* D = 2, H = P = N = G = 1, K = 2, I = 1: in_proj rows z, x, B, C, dt; conv channels x, B, C. */
static void test_hand_case(void **state)
{
    (void)state;
    const double w_in[5][2] = {{0.5, -1.0}, {1.0, 0.25}, {-0.5, 0.75}, {0.3, 0.6}, {0.2, -0.4}};
    const double w_conv[3][1][2] = {{{0.4, 0.9}}, {{-0.3, 1.1}}, {{0.7, 0.5}}};
    const double b_conv[3] = {0.1, -0.2, 0.05};
    const double dt_bias[1] = {-0.5}, a_log[1] = {0.2}, d_skip[1] = {0.8}, w_norm[1] = {1.5};
    const double w_out[2][1] = {{0.9}, {-1.2}};
    const double u[3][2] = {{1.0, 2.0}, {-0.5, 0.5}, {0.25, -1.5}};
    const double eps = 0.5;
    const double lim[2][2] = {{0.0, INFINITY}, {0.0, 0.5}};

    for (int li = 0; li < 2; li++) {
        struct mc_mamba2_config cfg = {.hidden_size = 2,
                                       .num_heads = 1,
                                       .head_dim = 1,
                                       .state_size = 1,
                                       .n_groups = 1,
                                       .conv_kernel = 2,
                                       .chunk_size = 1,
                                       .norm_group_size = 1,
                                       .layer_norm_epsilon = eps,
                                       .time_step_limit = {lim[li][0], lim[li][1]},
                                       .use_bias = 0,
                                       .use_conv_bias = 1};
        struct mc_weight ws[] = {
            {"in_proj.weight", 2, {5, 2}, w_in},
            {"conv1d.weight", 3, {3, 1, 2}, w_conv},
            {"conv1d.bias", 1, {3}, b_conv},
            {"dt_bias", 1, {1}, dt_bias},
            {"A_log", 1, {1}, a_log},
            {"D", 1, {1}, d_skip},
            {"norm.weight", 1, {1}, w_norm},
            {"out_proj.weight", 2, {2, 1}, w_out},
        };
        double y[3][2];
        hand_forward(mc_reference_mamba2_ops(), MC_FAMILY_MAMBA2, &cfg, ws, 8, 3, u, y);

        /* The formulas of docs/semantics.md §2.3-2.7, one scalar at a time. */
        double prev[3] = {0, 0, 0}, s = 0.0, max_d = 0.0;
        for (int t = 0; t < 3; t++) {
            double p[5];
            for (int r = 0; r < 5; r++)
                p[r] = w_in[r][0] * u[t][0] + w_in[r][1] * u[t][1];
            double xbc[3];
            for (int c = 0; c < 3; c++) {
                xbc[c] = silu_d(b_conv[c] + w_conv[c][0][0] * prev[c] + w_conv[c][0][1] * p[1 + c]);
                prev[c] = p[1 + c];
            }
            double v = p[4] + dt_bias[0];
            double dt = v > 20.0 ? v : log1p(exp(v));
            dt = fmin(fmax(dt, lim[li][0]), lim[li][1]);
            double A = -exp(a_log[0]);
            s = exp(dt * A) * s + dt * xbc[0] * xbc[1];
            double yv = s * xbc[2] + d_skip[0] * xbc[0];
            double h = yv * silu_d(p[0]);
            double hn = h / sqrt(h * h + eps) * w_norm[0];
            for (int j = 0; j < 2; j++)
                max_d = fmax(max_d, fabs(w_out[j][0] * hn - y[t][j]));
        }
        print_message("hand case (time_step_limit [%g, %g]): max |dy| = %.3g\n", lim[li][0], lim[li][1], max_d);
        assert_true(max_d <= 1e-14);
    }
}

/* ---- an independent scalar oracle on the general configuration --------------------------------- */

/* One row of T tokens from zero state, every formula of docs/semantics.md §2.3-2.7 written out with scalar
 * loops and no shared code: in_proj split order z | x | B | C | dt, group h / (H/G), conv window
 * as explicit history indices, groupwise gated norm, biases. y [T][D]. */
static void oracle_forward(struct weight_set *ws, const struct mc_mamba2_config *c, int64_t T, const double *u,
                           double *y)
{
    const int64_t D = c->hidden_size, H = c->num_heads, P = c->head_dim, N = c->state_size, G = c->n_groups;
    const int64_t K = c->conv_kernel, I = H * P, GN = G * N, C = I + 2 * GN, proj = 2 * I + 2 * GN + H;
    const double *w_in = weight_find(ws, "in_proj.weight"), *b_in = weight_find(ws, "in_proj.bias");
    const double *w_conv = weight_find(ws, "conv1d.weight"), *b_conv = weight_find(ws, "conv1d.bias");
    const double *dt_bias = weight_find(ws, "dt_bias"), *a_log = weight_find(ws, "A_log");
    const double *d_skip = weight_find(ws, "D"), *w_norm = weight_find(ws, "norm.weight");
    const double *w_out = weight_find(ws, "out_proj.weight"), *b_out = weight_find(ws, "out_proj.bias");
    double *zx = calloc((size_t)(T * proj), sizeof *zx);
    double *st = calloc((size_t)(H * P * N), sizeof *st);
    double *yy = calloc((size_t)I, sizeof *yy);
    double *xbc = calloc((size_t)C, sizeof *xbc);
    assert_true(zx && st && yy && xbc);
    for (int64_t t = 0; t < T; t++)
        for (int64_t o = 0; o < proj; o++) {
            double acc = b_in ? b_in[o] : 0.0;
            for (int64_t i = 0; i < D; i++)
                acc += w_in[o * D + i] * u[t * D + i];
            zx[t * proj + o] = acc;
        }
    for (int64_t t = 0; t < T; t++) {
        for (int64_t ch = 0; ch < C; ch++) { /* conv(x)[t] = b + sum_k w[k] x[t-(K-1)+k], zero before 0 */
            double acc = b_conv ? b_conv[ch] : 0.0;
            for (int64_t k = 0; k < K; k++) {
                int64_t tau = t - (K - 1) + k;
                acc += w_conv[ch * K + k] * (tau >= 0 ? zx[tau * proj + I + ch] : 0.0);
            }
            xbc[ch] = silu_d(acc);
        }
        for (int64_t h = 0; h < H; h++) {
            int64_t g = h / (H / G);
            double v = zx[t * proj + I + C + h] + dt_bias[h];
            double dt = v > 20.0 ? v : log1p(exp(v));
            dt = fmin(fmax(dt, c->time_step_limit[0]), c->time_step_limit[1]);
            double A = -exp(a_log[h]);
            for (int64_t p = 0; p < P; p++) {
                double acc = 0.0;
                for (int64_t n = 0; n < N; n++) {
                    double *sv = &st[(h * P + p) * N + n];
                    *sv = exp(dt * A) * *sv + dt * xbc[h * P + p] * xbc[I + g * N + n];
                    acc += *sv * xbc[I + GN + g * N + n];
                }
                yy[h * P + p] = acc + d_skip[h] * xbc[h * P + p];
            }
        }
        for (int64_t j0 = 0; j0 < I; j0 += c->norm_group_size) {
            double ss = 0.0;
            for (int64_t i = j0; i < j0 + c->norm_group_size; i++) {
                yy[i] *= silu_d(zx[t * proj + i]);
                ss += yy[i] * yy[i];
            }
            for (int64_t i = j0; i < j0 + c->norm_group_size; i++)
                yy[i] = yy[i] / sqrt(ss / (double)c->norm_group_size + c->layer_norm_epsilon) * w_norm[i];
        }
        for (int64_t o = 0; o < D; o++) {
            double acc = b_out ? b_out[o] : 0.0;
            for (int64_t i = 0; i < I; i++)
                acc += w_out[o * I + i] * yy[i];
            y[t * D + o] = acc;
        }
    }
    free(xbc);
    free(yy);
    free(st);
    free(zx);
}

static void test_scalar_oracle(void **state)
{
    (void)state;
    static const int64_t group_sizes[] = {12, 6, 3};
    for (size_t gi = 0; gi < sizeof group_sizes / sizeof group_sizes[0]; gi++) {
        const struct mc_mamba2_config cfg = small_config(group_sizes[gi]);
        struct weight_set ws;
        struct mixer mx;
        mixer_init(&mx, &cfg, MC_DTYPE_F64, 61 + gi, &ws);
        const int64_t T = 12, D = mx.D;
        double *x = random_x(T * D, 13);
        double *y = malloc((size_t)(T * D) * sizeof *y), *y_or = malloc((size_t)(T * D) * sizeof *y_or);
        assert_true(y && y_or);
        forward_f64(&mx, NULL, 1, T, 0, T, x, NULL, y);
        oracle_forward(&ws, &cfg, T, x, y_or);
        double d = max_abs_diff(y, y_or, T * D);
        print_message("scalar oracle (norm_group_size %lld): max |dy| = %.3g\n", (long long)group_sizes[gi], d);
        assert_true(d <= 1e-12);
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
    const struct mc_mamba2_config cfg = small_config(6);
    struct mixer m64, m32;
    mixer_init(&m64, &cfg, MC_DTYPE_F64, 31, NULL);
    mixer_init(&m32, &cfg, MC_DTYPE_F32, 31, NULL);
    check_f32_matches_f64(&m64, &m32, NULL);
    mixer_free(&m32);
    mixer_free(&m64);
}

/* ---- (e) error paths and the cache round trip -------------------------------------------------- */

static enum mc_backend_status try_create(const struct mc_mamba2_config *cfg, enum mc_family family, enum mc_dtype dtype,
                                         struct mc_weight *w, int n, struct mc_msg *msg)
{
    return try_create_ops(mc_reference_mamba2_ops(), cfg, family, dtype, w, n, msg);
}

static void test_create_errors(void **state)
{
    (void)state;
    struct mc_mamba2_config cfg = small_config(12);
    struct weight_set ws;
    struct mc_msg msg;
    weight_set_random(&ws, &cfg, 3);
    weight_set_pack(&ws, MC_DTYPE_F64);
    const int n = ws.n;

    check_create_desc(mc_reference_mamba2_ops(), &cfg, MC_FAMILY_MAMBA2, MC_FAMILY_GDN, ws.w, n);

    /* Missing weight: drop dt_bias (index 4 with use_bias = 1: in_proj.w, in_proj.b, conv.w, conv.b, dt_bias). */
    struct mc_weight w[WS_MAX + 1]; /* room for a duplicate */
    memcpy(w, ws.w, sizeof ws.w);
    assert_string_equal(w[4].name, "dt_bias");
    w[4] = w[n - 1];
    assert_int_equal(try_create(&cfg, MC_FAMILY_MAMBA2, MC_DTYPE_F64, w, n - 1, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "missing weight 'dt_bias'", "[4]");

    /* Wrong shape. */
    memcpy(w, ws.w, sizeof ws.w);
    w[0].dims[1] = 9;
    assert_int_equal(try_create(&cfg, MC_FAMILY_MAMBA2, MC_DTYPE_F64, w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "'in_proj.weight'", "expected shape [48, 8], got [48, 9]");
    memcpy(w, ws.w, sizeof ws.w);
    w[2].ndim = 2; /* conv1d.weight as [C][K] */
    w[2].dims[1] = 4;
    assert_int_equal(try_create(&cfg, MC_FAMILY_MAMBA2, MC_DTYPE_F64, w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "'conv1d.weight'", "expected shape [32, 1, 4], got [32, 4]");

    /* Unknown, duplicated, and present-but-not-implied weights; a weight without data. */
    memcpy(w, ws.w, sizeof ws.w);
    w[5].name = "A";
    assert_int_equal(try_create(&cfg, MC_FAMILY_MAMBA2, MC_DTYPE_F64, w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "unknown weight 'A'", NULL);
    memcpy(w, ws.w, sizeof ws.w);
    w[n] = w[0];
    assert_int_equal(try_create(&cfg, MC_FAMILY_MAMBA2, MC_DTYPE_F64, w, n + 1, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "twice", NULL);
    struct mc_mamba2_config nobias = cfg;
    nobias.use_bias = 0;
    assert_int_equal(try_create(&nobias, MC_FAMILY_MAMBA2, MC_DTYPE_F64, ws.w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "in_proj.bias", "use_bias");
    memcpy(w, ws.w, sizeof ws.w);
    w[3].data = NULL;
    assert_int_equal(try_create(&cfg, MC_FAMILY_MAMBA2, MC_DTYPE_F64, w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "conv1d.bias", "no data");

    /* Configuration. */
    struct mc_mamba2_config bad = cfg;
    bad.n_groups = 3;
    assert_int_equal(try_create(&bad, MC_FAMILY_MAMBA2, MC_DTYPE_F64, ws.w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "n_groups", NULL);
    bad = cfg;
    bad.norm_group_size = 5;
    assert_int_equal(try_create(&bad, MC_FAMILY_MAMBA2, MC_DTYPE_F64, ws.w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "norm_group_size", NULL);
    bad = cfg;
    bad.state_size = 0;
    assert_int_equal(try_create(&bad, MC_FAMILY_MAMBA2, MC_DTYPE_F64, ws.w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "state_size", NULL);
    bad = cfg;
    bad.time_step_limit[0] = 1.0;
    bad.time_step_limit[1] = 0.5;
    assert_int_equal(try_create(&bad, MC_FAMILY_MAMBA2, MC_DTYPE_F64, ws.w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "time_step_limit", NULL);
    bad = cfg;
    bad.layer_norm_epsilon = 0.0;
    assert_int_equal(try_create(&bad, MC_FAMILY_MAMBA2, MC_DTYPE_F64, ws.w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "layer_norm_epsilon", NULL);

    weight_set_free(&ws);
}

static void test_forward_errors(void **state)
{
    (void)state;
    const struct mc_mamba2_config cfg = small_config(12);
    struct mixer mx;
    mixer_init(&mx, &cfg, MC_DTYPE_F64, 41, NULL);
    check_forward_errors(&mx, NULL);
    mixer_free(&mx);
}

/* Export -> import into a fresh cache -> continue: equals continuing the original; copy likewise.
 * An imported cache is primed: its continuation is seeded from the import, not from zeros. */
static void test_cache_round_trip(void **state)
{
    (void)state;
    const struct mc_mamba2_config cfg = small_config(6);
    struct mixer mx;
    mixer_init(&mx, &cfg, MC_DTYPE_F64, 51, NULL);
    check_cache_round_trip(&mx, NULL, NULL);
    mixer_free(&mx);
}

static void test_ops_identity(void **state)
{
    (void)state;
    check_ops_identity(mc_reference_mamba2_ops(), MC_FAMILY_MAMBA2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ops_identity),
        cmocka_unit_test(test_split_invariance_full_row_norm),
        cmocka_unit_test(test_split_invariance_groupwise_norm),
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
