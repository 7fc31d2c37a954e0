/*
 * test_cpu_mamba2.c — the cpu Mamba2 mixer (kernels/cpu/mamba2.c, the chunked SSD) against the
 * reference (reference/mamba2.c, the exact sequential recurrence) run in f64, both only through their
 * ops structs, on small random configurations (n_groups 1 and 2 with H/G = 3, L not a multiple of Q,
 * Q > L, Q = 1, chunk sizes 8/16/5/1000):
 *   - cpu f32 vs reference f64 for prefill, primed multi-token forwards and L == 1 steps, outputs and
 *     exported caches;
 *   - split invariance, chunk-size invariance;
 *   - thread-count invariance: 1, 2 and 3 threads give bitwise identical outputs and caches;
 *   - masks: left, right and middle padding against the reference and against the row alone;
 *   - bf16 / f16 storage against the reference on the same rounded inputs and weights;
 *   - cache export / import / copy round trip; error paths.
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

#include "cpu.h"
#include "cpu_testutil.h"
#include "reference.h"

/*
 * Tolerances, cpu f32 against the reference in f64 on the same f32-exact inputs. Outputs here are
 * O(0.1..1) and states O(1e-2..1); the f32 chunked SSD rounds like the f32 sequential reference
 * (measured worst over this file: output max abs 3.6e-7, state max abs 3.7e-9, headroom 0.024 at the
 * numbers below, reported by the tests with print_message). The bound is >10x the measurement and far
 * below what a wrong chunk boundary, a lost initial state or a misplaced decay gives (>= 1e-3).
 */
#define TOL_F32_ATOL 1e-5
#define TOL_F32_RTOL 1e-4
/* cpu against cpu along two paths (split / chunk size / padding): f32 rounding of two summation
 * orders, measured max abs 1.2e-7 (Q=1 vs Q=1000). */
#define TOL_SELF_ATOL 5e-6
#define TOL_SELF_RTOL 5e-5
/*
 * bf16 / f16 storage: the reference runs in f64 on the same rounded weights and x, so the difference
 * is the f32 compute (above) plus the one rounding of y to the storage dtype: half an ulp, 2^-8
 * relative for bf16 (8 significant bits) and 2^-11 for f16. rtol is that bound plus margin; atol
 * covers outputs near zero (the f32 compute error ~1e-6, and f16 subnormal steps 6e-8). Measured
 * headroom 0.75 (bf16) and 0.62 (f16): the rounding itself nearly reaches the bound, so it cannot be
 * much tighter. Caches are f32 and compare at the f32 tolerance (measured max abs 3e-9).
 */
#define TOL_BF16_ATOL 2e-5
#define TOL_BF16_RTOL (1.0 / 256.0 * 1.25)
#define TOL_F16_ATOL 2e-5
#define TOL_F16_RTOL (1.0 / 2048.0 * 1.5)

/* ---- fixtures ---------------------------------------------------------------------------------- */

struct m2t {
    struct mc_mamba2_config cfg;
    struct tu_weights ws;
    int64_t D, C, conv_elems, state_elems;
};

/* which: 0 = one group, bias, full-row norm, no dt limit; 1 = two groups of 3 heads, groupwise norm,
 * no in/out bias, dt limit [0.01, 0.6]. */
static void m2t_init(struct m2t *t, int which, uint64_t seed)
{
    memset(t, 0, sizeof *t);
    if (which == 0) {
        t->cfg = (struct mc_mamba2_config){
            .hidden_size = 8, .num_heads = 4, .head_dim = 3, .state_size = 5, .n_groups = 1, .conv_kernel = 4,
            .chunk_size = 8, .norm_group_size = 12, .layer_norm_epsilon = 1e-5,
            .time_step_limit = {0.0, INFINITY}, .use_bias = 1, .use_conv_bias = 1,
        };
    } else {
        t->cfg = (struct mc_mamba2_config){
            .hidden_size = 10, .num_heads = 6, .head_dim = 4, .state_size = 6, .n_groups = 2, .conv_kernel = 3,
            .chunk_size = 5, .norm_group_size = 12, .layer_norm_epsilon = 1e-5,
            .time_step_limit = {0.01, 0.6}, .use_bias = 0, .use_conv_bias = 1,
        };
    }
    const struct mc_mamba2_config *c = &t->cfg;
    const int64_t inner = c->num_heads * c->head_dim, GN = c->n_groups * c->state_size;
    t->D = c->hidden_size;
    t->C = inner + 2 * GN;
    t->conv_elems = t->C * c->conv_kernel;
    t->state_elems = inner * c->state_size;
    const int64_t proj = 2 * inner + 2 * GN + c->num_heads, D = t->D;
    struct tu_lcg g = {seed};
    tu_weights_add(&t->ws, "in_proj.weight", 2, proj, D, 0, 0.0, 1.0 / sqrt((double)D), &g);
    if (c->use_bias)
        tu_weights_add(&t->ws, "in_proj.bias", 1, proj, 0, 0, 0.0, 0.2, &g);
    tu_weights_add(&t->ws, "conv1d.weight", 3, t->C, 1, c->conv_kernel, 0.0, 0.5, &g);
    if (c->use_conv_bias)
        tu_weights_add(&t->ws, "conv1d.bias", 1, t->C, 0, 0, 0.0, 0.2, &g);
    tu_weights_add(&t->ws, "dt_bias", 1, c->num_heads, 0, 0, -1.0, 1.5, &g);
    tu_weights_add(&t->ws, "A_log", 1, c->num_heads, 0, 0, 0.3, 0.8, &g);
    tu_weights_add(&t->ws, "D", 1, c->num_heads, 0, 0, 1.0, 0.3, &g);
    tu_weights_add(&t->ws, "norm.weight", 1, inner, 0, 0, 1.0, 0.2, &g);
    tu_weights_add(&t->ws, "out_proj.weight", 2, D, inner, 0, 0.0, 1.0 / sqrt((double)inner), &g);
    if (c->use_bias)
        tu_weights_add(&t->ws, "out_proj.bias", 1, D, 0, 0, 0.0, 0.2, &g);
    /* f32-exact weights, so the f64 reference and the f32 kernel see the same numbers */
    tu_weights_round(&t->ws, MC_DTYPE_F32);
}

static void m2t_free(struct m2t *t)
{
    tu_weights_free(&t->ws);
}

static void m2t_model(struct m2t *t, struct tu_model *tm, const struct mc_backend_ops *ops, enum mc_dtype dtype,
                      int64_t chunk, int32_t threads)
{
    tu_model_create(tm, ops, MC_FAMILY_MAMBA2, &t->cfg, &t->ws, dtype, chunk, threads, t->D, t->conv_elems,
                    t->state_elems);
}

static double *m2t_input(const struct m2t *t, int64_t B, int64_t L, uint64_t seed, enum mc_dtype round_to)
{
    struct tu_lcg g = {seed};
    double *x = tu_calloc((size_t)(B * L * t->D), sizeof(double));
    tu_fill(x, (size_t)(B * L * t->D), 1.0, &g);
    tu_round(round_to, x, (size_t)(B * L * t->D));
    return x;
}

/* Output, conv window and state of one run. */
struct m2t_out {
    double *y, *conv, *state;
};

static void m2t_out_alloc(const struct m2t *t, struct m2t_out *o, int64_t B, int64_t L)
{
    o->y = tu_calloc((size_t)(B * L * t->D), sizeof(double));
    o->conv = tu_calloc((size_t)(B * t->conv_elems), sizeof(double));
    o->state = tu_calloc((size_t)(B * t->state_elems), sizeof(double));
}

static void m2t_out_free(struct m2t_out *o)
{
    free(o->y);
    free(o->conv);
    free(o->state);
}

/* Compares two runs; returns the worst headroom (the comparisons fail the test past 1). */
static double m2t_compare(const char *label, const struct m2t *t, const struct m2t_out *a, const struct m2t_out *b,
                          int64_t B, int64_t L, const uint8_t *mask, double atol, double rtol, int report)
{
    char what[160];
    snprintf(what, sizeof what, "%s output", label);
    struct tu_cmp cy = tu_compare(what, a->y, b->y, (size_t)(B * L * t->D), t->D, mask, atol, rtol);
    snprintf(what, sizeof what, "%s conv_state", label);
    struct tu_cmp cc = tu_compare(what, a->conv, b->conv, (size_t)(B * t->conv_elems), 1, NULL, atol, rtol);
    snprintf(what, sizeof what, "%s recurrent_state", label);
    struct tu_cmp cs = tu_compare(what, a->state, b->state, (size_t)(B * t->state_elems), 1, NULL, atol, rtol);
    if (report) {
        snprintf(what, sizeof what, "%s output", label);
        tu_report(what, &cy);
        snprintf(what, sizeof what, "%s recurrent_state", label);
        tu_report(what, &cs);
    }
    double h = cy.headroom > cs.headroom ? cy.headroom : cs.headroom;
    return h > cc.headroom ? h : cc.headroom;
}

static const int64_t chunk_sizes[] = {0, 8, 16, 5, 1, 1000};
#define N_CHUNKS ((int)(sizeof chunk_sizes / sizeof chunk_sizes[0]))

/* ---- cpu f32 vs reference f64 ------------------------------------------------------------------ */

static void test_prefill_vs_reference(void **state)
{
    (void)state;
    static const int64_t lens[] = {1, 3, 7, 16, 23, 40};
    double worst = 0;
    for (int which = 0; which < 2; which++) {
        struct m2t t;
        m2t_init(&t, which, 101 + (uint64_t)which);
        struct tu_model ref;
        m2t_model(&t, &ref, mc_reference_mamba2_ops(), MC_DTYPE_F64, 0, 0);
        for (int li = 0; li < (int)(sizeof lens / sizeof lens[0]); li++) {
            const int64_t B = 2, L = lens[li];
            double *x = m2t_input(&t, B, L, 7 + (uint64_t)L, MC_DTYPE_F32);
            struct m2t_out want, got, nocache;
            m2t_out_alloc(&t, &want, B, L);
            m2t_out_alloc(&t, &got, B, L);
            m2t_out_alloc(&t, &nocache, B, L);
            tu_run(&ref, B, L, x, NULL, NULL, 0, 1, NULL, want.y, want.conv, want.state, NULL);
            for (int ci = 0; ci < N_CHUNKS; ci++) {
                struct tu_model cpu;
                m2t_model(&t, &cpu, mc_cpu_mamba2_ops(), MC_DTYPE_F32, chunk_sizes[ci], 1);
                tu_run(&cpu, B, L, x, NULL, NULL, 0, 1, NULL, got.y, got.conv, got.state, NULL);
                char label[96];
                snprintf(label, sizeof label, "cfg%d L=%lld Q=%lld prefill", which, (long long)L,
                         (long long)chunk_sizes[ci]);
                const double h = m2t_compare(label, &t, &got, &want, B, L, NULL, TOL_F32_ATOL, TOL_F32_RTOL, 0);
                worst = h > worst ? h : worst;
                /* no cache at all: the same outputs */
                tu_run(&cpu, B, L, x, NULL, NULL, 0, 0, NULL, nocache.y, NULL, NULL, NULL);
                tu_compare("no-cache output", nocache.y, got.y, (size_t)(B * L * t.D), t.D, NULL, 0, 0);
                tu_model_destroy(&cpu);
            }
            m2t_out_free(&nocache);
            m2t_out_free(&got);
            m2t_out_free(&want);
            free(x);
        }
        tu_model_destroy(&ref);
        m2t_free(&t);
    }
    print_message("  prefill cpu f32 vs reference f64: worst headroom %.3f (atol %g rtol %g)\n", worst, TOL_F32_ATOL,
                  TOL_F32_RTOL);
}

/* Primed multi-token forwards and L == 1 steps: the same splits on both backends. */
static void test_primed_vs_reference(void **state)
{
    (void)state;
    static const int64_t splits[][6] = {
        {9, 13, 1, 1, 1, 15}, {1, 1, 1, 20, 2, 15}, {17, 2, 3, 14, 1, 3}, {5, 5, 5, 5, 5, 15},
    };
    const int64_t B = 2, L = 40;
    for (int which = 0; which < 2; which++) {
        struct m2t t;
        m2t_init(&t, which, 201 + (uint64_t)which);
        struct tu_model ref;
        m2t_model(&t, &ref, mc_reference_mamba2_ops(), MC_DTYPE_F64, 0, 0);
        double *x = m2t_input(&t, B, L, 33, MC_DTYPE_F32);
        for (int si = 0; si < 4; si++) {
            struct m2t_out want;
            m2t_out_alloc(&t, &want, B, L);
            tu_run(&ref, B, L, x, NULL, splits[si], 6, 1, NULL, want.y, want.conv, want.state, NULL);
            for (int ci = 0; ci < N_CHUNKS; ci++) {
                struct tu_model cpu;
                struct m2t_out got;
                m2t_out_alloc(&t, &got, B, L);
                m2t_model(&t, &cpu, mc_cpu_mamba2_ops(), MC_DTYPE_F32, chunk_sizes[ci], 2);
                tu_run(&cpu, B, L, x, NULL, splits[si], 6, 1, NULL, got.y, got.conv, got.state, NULL);
                char label[96];
                snprintf(label, sizeof label, "cfg%d splits%d Q=%lld", which, si, (long long)chunk_sizes[ci]);
                m2t_compare(label, &t, &got, &want, B, L, NULL, TOL_F32_ATOL, TOL_F32_RTOL,
                            si == 0 && ci == 1);
                tu_model_destroy(&cpu);
                m2t_out_free(&got);
            }
            m2t_out_free(&want);
        }
        free(x);
        tu_model_destroy(&ref);
        m2t_free(&t);
    }
}

/* ---- invariances ------------------------------------------------------------------------------- */

static void test_split_and_chunk_invariance(void **state)
{
    (void)state;
    static const int64_t splits[][5] = {
        {1, 2, 3, 4, 35}, {3, 11, 17, 8, 6}, {8, 16, 8, 7, 6}, {44, 1, 0, 0, 0},
    };
    static const int n_splits[] = {5, 5, 5, 2};
    const int64_t B = 2, L = 45;
    for (int which = 0; which < 2; which++) {
        struct m2t t;
        m2t_init(&t, which, 301 + (uint64_t)which);
        double *x = m2t_input(&t, B, L, 44, MC_DTYPE_F32);
        struct m2t_out base;
        m2t_out_alloc(&t, &base, B, L);
        struct tu_model cpu0;
        m2t_model(&t, &cpu0, mc_cpu_mamba2_ops(), MC_DTYPE_F32, 1000, 1);
        tu_run(&cpu0, B, L, x, NULL, NULL, 0, 1, NULL, base.y, base.conv, base.state, NULL);
        tu_model_destroy(&cpu0);
        for (int ci = 0; ci < N_CHUNKS; ci++) {
            struct tu_model cpu;
            m2t_model(&t, &cpu, mc_cpu_mamba2_ops(), MC_DTYPE_F32, chunk_sizes[ci], 1);
            struct m2t_out got;
            m2t_out_alloc(&t, &got, B, L);
            char label[96];
            snprintf(label, sizeof label, "cfg%d Q=%lld whole vs Q=1000", which, (long long)chunk_sizes[ci]);
            tu_run(&cpu, B, L, x, NULL, NULL, 0, 1, NULL, got.y, got.conv, got.state, NULL);
            m2t_compare(label, &t, &got, &base, B, L, NULL, TOL_SELF_ATOL, TOL_SELF_RTOL, ci == 4);
            for (int si = 0; si < 4; si++) {
                snprintf(label, sizeof label, "cfg%d Q=%lld splits%d", which, (long long)chunk_sizes[ci], si);
                tu_run(&cpu, B, L, x, NULL, splits[si], n_splits[si], 1, NULL, got.y, got.conv, got.state, NULL);
                m2t_compare(label, &t, &got, &base, B, L, NULL, TOL_SELF_ATOL, TOL_SELF_RTOL, 0);
            }
            m2t_out_free(&got);
            tu_model_destroy(&cpu);
        }
        m2t_out_free(&base);
        free(x);
        m2t_free(&t);
    }
}

static void test_thread_invariance_bitwise(void **state)
{
    (void)state;
    const int64_t B = 3, L = 37;
    static const int64_t splits[] = {20, 1, 16};
    for (int which = 0; which < 2; which++) {
        struct m2t t;
        m2t_init(&t, which, 401 + (uint64_t)which);
        double *x = m2t_input(&t, B, L, 55, MC_DTYPE_F32);
        uint8_t *mask = tu_calloc((size_t)(B * L), 1);
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < L; i++)
                mask[b * L + i] = !(b == 1 && i < 6) && !(b == 2 && (i % 7) == 3);
        for (int dt = 0; dt < 2; dt++) {
            const enum mc_dtype dtype = dt ? MC_DTYPE_BF16 : MC_DTYPE_F32;
            for (int ci = 1; ci < N_CHUNKS; ci++) {
                struct tu_model cpu[3];
                for (int th = 1; th <= 3; th++)
                    m2t_model(&t, &cpu[th - 1], mc_cpu_mamba2_ops(), dtype, chunk_sizes[ci], th);
                tu_assert_same_bits(cpu, 3, B, L, x, mask, splits, 3);
                for (int th = 1; th <= 3; th++)
                    tu_model_destroy(&cpu[th - 1]);
            }
        }
        free(mask);
        free(x);
        m2t_free(&t);
    }
}

/* ---- masks ------------------------------------------------------------------------------------- */

/* Pattern 0, in three calls: row 0 left-padded (6 pads), 1 right-padded (last 9 pads), 2 middle
 * padding (scattered), 3 none. Pattern 1, in one call: row 0 a single real token (the direct step, no
 * chunks, no shared C·Bᵀ) beside rows of several chunks, with heads sharing a group's C·Bᵀ (H > G in
 * both configurations). The shared Gram matrices are numbered over the rows that have chunks only;
 * numbering the one-token row too once handed a long row's last chunk an unwritten matrix. */
static void test_masks(void **state)
{
    (void)state;
    const int64_t B = 4, L = 29;
    static const int64_t splits3[] = {12, 1, 16};
    for (int which = 0; which < 2; which++)
    for (int pat = 0; pat < 2; pat++) {
        struct m2t t;
        m2t_init(&t, which, 501 + (uint64_t)which);
        double *x = m2t_input(&t, B, L, 66, MC_DTYPE_F32);
        uint8_t *mask = tu_calloc((size_t)(B * L), 1);
        for (int64_t i = 0; i < L; i++) {
            if (pat == 0) { /* left, right and inner padding, run in three calls */
                mask[0 * L + i] = i >= 6;
                mask[1 * L + i] = i < L - 9;
                mask[2 * L + i] = !(i == 0 || i == 4 || i == 5 || (i >= 13 && i <= 17) || i == 27);
            } else { /* one call mixing a one-token row (direct step) with rows of several chunks */
                mask[0 * L + i] = i == L - 1;
                mask[1 * L + i] = i >= 3;
                mask[2 * L + i] = i < L - 2;
            }
            mask[3 * L + i] = 1;
        }
        const int64_t *splits = pat == 0 ? splits3 : NULL;
        const int n_splits = pat == 0 ? 3 : 0;
        struct tu_model ref;
        m2t_model(&t, &ref, mc_reference_mamba2_ops(), MC_DTYPE_F64, 0, 0);
        struct m2t_out want;
        m2t_out_alloc(&t, &want, B, L);
        tu_run(&ref, B, L, x, mask, splits, n_splits, 1, NULL, want.y, want.conv, want.state, NULL);
        for (int ci = 0; ci < N_CHUNKS; ci++) {
            struct tu_model cpu;
            m2t_model(&t, &cpu, mc_cpu_mamba2_ops(), MC_DTYPE_F32, chunk_sizes[ci], 2);
            struct m2t_out got;
            m2t_out_alloc(&t, &got, B, L);
            tu_run(&cpu, B, L, x, mask, splits, n_splits, 1, NULL, got.y, got.conv, got.state, NULL);
            char label[96];
            snprintf(label, sizeof label, "cfg%d pattern %d Q=%lld masked", which, pat, (long long)chunk_sizes[ci]);
            m2t_compare(label, &t, &got, &want, B, L, mask, TOL_F32_ATOL, TOL_F32_RTOL, 0);
            /* a padding row's output is out_proj.bias (or 0) and finite */
            const double *bias = tu_weights_find(&t.ws, "out_proj.bias");
            for (int64_t r = 0; r < B * L; r++)
                if (!mask[r])
                    for (int64_t j = 0; j < t.D; j++)
                        assert_true(got.y[r * t.D + j] == (bias ? (double)(float)bias[j] : 0.0));
            /* each padded row equals its real tokens run alone, unpadded */
            for (int64_t b = 0; b < 3; b++) {
                int64_t n = 0;
                for (int64_t i = 0; i < L; i++)
                    n += mask[b * L + i];
                double *xr = tu_calloc((size_t)(n * t.D), sizeof(double));
                double *yp = tu_calloc((size_t)(n * t.D), sizeof(double));
                for (int64_t i = 0, k = 0; i < L; i++)
                    if (mask[b * L + i]) {
                        memcpy(xr + k * t.D, x + (b * L + i) * t.D, (size_t)t.D * sizeof(double));
                        memcpy(yp + k * t.D, got.y + (b * L + i) * t.D, (size_t)t.D * sizeof(double));
                        k++;
                    }
                struct m2t_out alone;
                m2t_out_alloc(&t, &alone, 1, n);
                tu_run(&cpu, 1, n, xr, NULL, NULL, 0, 1, NULL, alone.y, alone.conv, alone.state, NULL);
                tu_compare("padded row vs alone: output", yp, alone.y, (size_t)(n * t.D), t.D, NULL, TOL_SELF_ATOL,
                           TOL_SELF_RTOL);
                /* the window holds in_proj outputs: a batch of 1 and of 4 may round differently in BLAS */
                tu_compare("padded row vs alone: conv_state", got.conv + b * t.conv_elems, alone.conv,
                           (size_t)t.conv_elems, 1, NULL, TOL_SELF_ATOL, TOL_SELF_RTOL);
                tu_compare("padded row vs alone: recurrent_state", got.state + b * t.state_elems, alone.state,
                           (size_t)t.state_elems, 1, NULL, TOL_SELF_ATOL, TOL_SELF_RTOL);
                m2t_out_free(&alone);
                free(yp);
                free(xr);
            }
            m2t_out_free(&got);
            tu_model_destroy(&cpu);
        }
        m2t_out_free(&want);
        tu_model_destroy(&ref);
        free(mask);
        free(x);
        m2t_free(&t);
    }
}

/* An L == 1 forward on a padding token leaves the cache as it was, B == 1 included. */
static void test_mask_single_token(void **state)
{
    (void)state;
    struct m2t t;
    m2t_init(&t, 1, 601);
    struct tu_model cpu;
    m2t_model(&t, &cpu, mc_cpu_mamba2_ops(), MC_DTYPE_F32, 0, 1);
    double *x = m2t_input(&t, 1, 8, 77, MC_DTYPE_F32);
    static const uint8_t mask[8] = {1, 1, 1, 1, 1, 1, 1, 0};
    static const int64_t splits[] = {7, 1};
    struct m2t_out a, b;
    m2t_out_alloc(&t, &a, 1, 8);
    m2t_out_alloc(&t, &b, 1, 7);
    tu_run(&cpu, 1, 8, x, mask, splits, 2, 1, NULL, a.y, a.conv, a.state, NULL);
    tu_run(&cpu, 1, 7, x, NULL, NULL, 0, 1, NULL, b.y, b.conv, b.state, NULL);
    tu_compare("conv after a padded step", a.conv, b.conv, (size_t)t.conv_elems, 1, NULL, 0, 0);
    tu_compare("state after a padded step", a.state, b.state, (size_t)t.state_elems, 1, NULL, 0, 0);
    m2t_out_free(&a);
    m2t_out_free(&b);
    free(x);
    tu_model_destroy(&cpu);
    m2t_free(&t);
}

/* ---- bf16 / f16 storage ------------------------------------------------------------------------ */

static void test_half_storage(void **state)
{
    (void)state;
    static const enum mc_dtype dtypes[] = {MC_DTYPE_BF16, MC_DTYPE_F16};
    static const int64_t splits[] = {17, 1, 1, 12};
    const int64_t B = 2, L = 31;
    for (int di = 0; di < 2; di++) {
        const enum mc_dtype dt = dtypes[di];
        const double atol = dt == MC_DTYPE_BF16 ? TOL_BF16_ATOL : TOL_F16_ATOL;
        const double rtol = dt == MC_DTYPE_BF16 ? TOL_BF16_RTOL : TOL_F16_RTOL;
        for (int which = 0; which < 2; which++) {
            struct m2t t;
            m2t_init(&t, which, 701 + (uint64_t)which);
            tu_weights_round(&t.ws, dt);
            double *x = m2t_input(&t, B, L, 88, dt);
            struct tu_model ref, cpu;
            m2t_model(&t, &ref, mc_reference_mamba2_ops(), MC_DTYPE_F64, 0, 0);
            m2t_model(&t, &cpu, mc_cpu_mamba2_ops(), dt, 8, 2);
            struct m2t_out want, got;
            m2t_out_alloc(&t, &want, B, L);
            m2t_out_alloc(&t, &got, B, L);
            tu_run(&ref, B, L, x, NULL, splits, 4, 1, NULL, want.y, want.conv, want.state, NULL);
            tu_run(&cpu, B, L, x, NULL, splits, 4, 1, NULL, got.y, got.conv, got.state, NULL);
            char what[64];
            snprintf(what, sizeof what, "%s cfg%d output", dt == MC_DTYPE_BF16 ? "bf16" : "f16", which);
            struct tu_cmp cy = tu_compare(what, got.y, want.y, (size_t)(B * L * t.D), t.D, NULL, atol, rtol);
            tu_report(what, &cy);
            tu_compare("half conv_state", got.conv, want.conv, (size_t)(B * t.conv_elems), 1, NULL, TOL_F32_ATOL,
                       TOL_F32_RTOL);
            struct tu_cmp cs = tu_compare("half recurrent_state", got.state, want.state, (size_t)(B * t.state_elems),
                                          1, NULL, TOL_F32_ATOL, TOL_F32_RTOL);
            tu_report("half recurrent_state (f32 cache)", &cs);
            m2t_out_free(&want);
            m2t_out_free(&got);
            tu_model_destroy(&cpu);
            tu_model_destroy(&ref);
            free(x);
            m2t_free(&t);
        }
    }
}

/* ---- cache round trip -------------------------------------------------------------------------- */

static void test_cache_roundtrip(void **state)
{
    (void)state;
    struct m2t t;
    m2t_init(&t, 1, 801);
    struct tu_model cpu;
    m2t_model(&t, &cpu, mc_cpu_mamba2_ops(), MC_DTYPE_F32, 5, 1);
    const struct mc_backend_ops *ops = cpu.ops;
    const int64_t B = 2, L = 13;
    double *x = m2t_input(&t, B, L, 99, MC_DTYPE_F32);
    struct mc_cache *c1 = NULL, *c2 = NULL, *c3 = NULL;
    struct mc_msg msg;
    struct m2t_out a;
    m2t_out_alloc(&t, &a, B, L);
    tu_run(&cpu, B, L, x, NULL, NULL, 0, 1, NULL, a.y, a.conv, a.state, &c1);
    float *conv = tu_calloc((size_t)(B * t.conv_elems), sizeof(float));
    float *st = tu_calloc((size_t)(B * t.state_elems), sizeof(float));
    assert_int_equal(ops->cache_export(cpu.model, c1, conv, st, &msg), MC_BACKEND_OK);
    assert_int_equal(ops->cache_alloc(cpu.model, B, &c2, &msg), MC_BACKEND_OK);
    assert_int_equal(ops->cache_import(cpu.model, c2, conv, st, &msg), MC_BACKEND_OK);
    assert_int_equal(ops->cache_alloc(cpu.model, B, &c3, &msg), MC_BACKEND_OK);
    assert_int_equal(ops->cache_copy(cpu.model, c3, c2, &msg), MC_BACKEND_OK);
    /* continuing from the original, the imported and the copied cache gives the same bits */
    struct m2t_out o1, o2, o3;
    m2t_out_alloc(&t, &o1, B, L);
    m2t_out_alloc(&t, &o2, B, L);
    m2t_out_alloc(&t, &o3, B, L);
    tu_run(&cpu, B, L, x, NULL, NULL, 0, 1, c1, o1.y, o1.conv, o1.state, NULL);
    tu_run(&cpu, B, L, x, NULL, NULL, 0, 1, c2, o2.y, o2.conv, o2.state, NULL);
    tu_run(&cpu, B, L, x, NULL, NULL, 0, 1, c3, o3.y, o3.conv, o3.state, NULL);
    m2t_compare("import", &t, &o2, &o1, B, L, NULL, 0, 0, 0);
    m2t_compare("copy", &t, &o3, &o1, B, L, NULL, 0, 0, 0);
    /* exported window layout is [B][C][K], oldest first: its last column is the last pre-conv input,
     * so a primed continuation differs from a fresh prefill */
    struct m2t_out fresh;
    m2t_out_alloc(&t, &fresh, B, L);
    tu_run(&cpu, B, L, x, NULL, NULL, 0, 1, NULL, fresh.y, fresh.conv, fresh.state, NULL);
    assert_true(fabs(fresh.y[0] - o1.y[0]) > 1e-6);
    /* a NULL export pointer is skipped */
    assert_int_equal(ops->cache_export(cpu.model, c1, NULL, st, &msg), MC_BACKEND_OK);
    assert_int_equal(ops->cache_import(cpu.model, c2, NULL, st, &msg), MC_BACKEND_INVALID);
    m2t_out_free(&fresh);
    m2t_out_free(&o1);
    m2t_out_free(&o2);
    m2t_out_free(&o3);
    m2t_out_free(&a);
    ops->cache_free(cpu.model, c1);
    ops->cache_free(cpu.model, c2);
    ops->cache_free(cpu.model, c3);
    free(conv);
    free(st);
    free(x);
    tu_model_destroy(&cpu);
    m2t_free(&t);
}

/* ---- error paths ------------------------------------------------------------------------------- */

static enum mc_backend_status try_create(struct m2t *t, enum mc_family family, enum mc_dtype dtype,
                                         const struct mc_mamba2_config *cfg, int n_weights, int64_t chunk,
                                         int32_t threads, struct mc_msg *msg)
{
    tu_weights_pack(&t->ws, dtype == MC_DTYPE_F64 || dtype > MC_DTYPE_BF16 ? MC_DTYPE_F32 : dtype);
    const struct mc_model_desc desc = {.family = family, .dtype = dtype, .config = cfg, .weights = t->ws.w,
                                       .n_weights = n_weights, .chunk_size = chunk, .threads = threads};
    struct mc_model *m = NULL;
    memset(msg, 0, sizeof *msg);
    const enum mc_backend_status st = mc_cpu_mamba2_ops()->model_create(&desc, &m, msg);
    if (st == MC_BACKEND_OK)
        mc_cpu_mamba2_ops()->model_destroy(m);
    else
        assert_null(m);
    return st;
}

static void test_errors(void **state)
{
    (void)state;
    const struct mc_backend_ops *ops = mc_cpu_mamba2_ops();
    assert_string_equal(ops->name, "cpu");
    assert_string_equal(ops->device, "cpu");
    assert_int_equal(ops->family, MC_FAMILY_MAMBA2);
    assert_int_equal(ops->abi_version, MIXCHECK_ABI_VERSION);
    assert_true(ops->caps & MC_CAP_CHUNK_SIZE);
    assert_true(ops->caps & MC_CAP_THREADS);
    assert_false(ops->dtypes & MC_DTYPE_BIT(MC_DTYPE_F64));

    struct m2t t;
    m2t_init(&t, 0, 901);
    struct mc_msg msg;
    struct mc_mamba2_config cfg = t.cfg;
    assert_int_equal(try_create(&t, MC_FAMILY_MAMBA2, MC_DTYPE_F32, &cfg, t.ws.n, 0, 0, &msg), MC_BACKEND_OK);
    assert_int_equal(try_create(&t, MC_FAMILY_MAMBA1, MC_DTYPE_F32, &cfg, t.ws.n, 0, 0, &msg), MC_BACKEND_INVALID);
    assert_int_equal(try_create(&t, MC_FAMILY_MAMBA2, MC_DTYPE_F64, &cfg, t.ws.n, 0, 0, &msg),
                     MC_BACKEND_UNSUPPORTED);
    assert_non_null(strstr(msg.text, "dtype"));
    assert_int_equal(try_create(&t, MC_FAMILY_MAMBA2, (enum mc_dtype)99, &cfg, t.ws.n, 0, 0, &msg),
                     MC_BACKEND_INVALID);
    assert_int_equal(try_create(&t, MC_FAMILY_MAMBA2, MC_DTYPE_F32, &cfg, t.ws.n - 1, 0, 0, &msg),
                     MC_BACKEND_INVALID);
    assert_non_null(strstr(msg.text, "missing weight"));
    assert_int_equal(try_create(&t, MC_FAMILY_MAMBA2, MC_DTYPE_F32, &cfg, t.ws.n, -1, 0, &msg), MC_BACKEND_INVALID);
    assert_int_equal(try_create(&t, MC_FAMILY_MAMBA2, MC_DTYPE_F32, &cfg, t.ws.n, 0, -2, &msg), MC_BACKEND_INVALID);
    assert_int_equal(try_create(&t, MC_FAMILY_MAMBA2, MC_DTYPE_F32, NULL, t.ws.n, 0, 0, &msg), MC_BACKEND_INVALID);
    cfg.n_groups = 3; /* 4 heads */
    assert_int_equal(try_create(&t, MC_FAMILY_MAMBA2, MC_DTYPE_F32, &cfg, t.ws.n, 0, 0, &msg), MC_BACKEND_INVALID);
    cfg = t.cfg;
    cfg.time_step_limit[0] = 0.5;
    cfg.time_step_limit[1] = 0.1;
    assert_int_equal(try_create(&t, MC_FAMILY_MAMBA2, MC_DTYPE_F32, &cfg, t.ws.n, 0, 0, &msg), MC_BACKEND_INVALID);
    cfg = t.cfg;
    cfg.conv_kernel = 65; /* valid, but wider than the cpu backend takes */
    assert_int_equal(try_create(&t, MC_FAMILY_MAMBA2, MC_DTYPE_F32, &cfg, t.ws.n, 0, 0, &msg),
                     MC_BACKEND_UNSUPPORTED);
    cfg = t.cfg;
    cfg.hidden_size = 9; /* weights no longer match */
    assert_int_equal(try_create(&t, MC_FAMILY_MAMBA2, MC_DTYPE_F32, &cfg, t.ws.n, 0, 0, &msg), MC_BACKEND_INVALID);
    assert_non_null(strstr(msg.text, "expected shape"));
    cfg = t.cfg;
    cfg.use_bias = 0; /* bias weights given but not implied */
    assert_int_equal(try_create(&t, MC_FAMILY_MAMBA2, MC_DTYPE_F32, &cfg, t.ws.n, 0, 0, &msg), MC_BACKEND_INVALID);
    assert_int_equal(ops->model_create(NULL, NULL, &msg), MC_BACKEND_INVALID);

    /* forward / cache errors */
    struct tu_model cpu;
    m2t_model(&t, &cpu, ops, MC_DTYPE_F32, 0, 1);
    struct mc_cache *c = NULL, *c3 = NULL;
    assert_int_equal(ops->cache_alloc(cpu.model, 0, &c, &msg), MC_BACKEND_INVALID);
    assert_int_equal(ops->cache_alloc(cpu.model, 2, &c, &msg), MC_BACKEND_OK);
    assert_int_equal(ops->cache_alloc(cpu.model, 3, &c3, &msg), MC_BACKEND_OK);
    assert_int_equal(ops->cache_copy(cpu.model, c, c3, &msg), MC_BACKEND_INVALID);
    float x[2 * 3 * 8] = {0}, y[2 * 3 * 8];
    struct mc_forward_args args = {.batch = 2, .len = 3, .x = x, .mask = NULL, .y = y};
    assert_int_equal(ops->forward(cpu.model, c3, &args, &msg), MC_BACKEND_INVALID);
    assert_non_null(strstr(msg.text, "batch"));
    args.len = 0;
    assert_int_equal(ops->forward(cpu.model, c, &args, &msg), MC_BACKEND_INVALID);
    args.len = 3;
    args.x = NULL;
    assert_int_equal(ops->forward(cpu.model, c, &args, &msg), MC_BACKEND_INVALID);
    args.x = x;
    assert_int_equal(ops->forward(cpu.model, c, &args, &msg), MC_BACKEND_OK);
    assert_int_equal(ops->forward(NULL, c, &args, &msg), MC_BACKEND_INVALID);
    assert_int_equal(ops->cache_export(cpu.model, NULL, NULL, NULL, &msg), MC_BACKEND_INVALID);
    ops->cache_free(cpu.model, c);
    ops->cache_free(cpu.model, c3);
    ops->cache_free(cpu.model, NULL);
    ops->model_destroy(NULL);
    tu_model_destroy(&cpu);
    m2t_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prefill_vs_reference),
        cmocka_unit_test(test_primed_vs_reference),
        cmocka_unit_test(test_split_and_chunk_invariance),
        cmocka_unit_test(test_thread_invariance_bitwise),
        cmocka_unit_test(test_masks),
        cmocka_unit_test(test_mask_single_token),
        cmocka_unit_test(test_half_storage),
        cmocka_unit_test(test_cache_roundtrip),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
