/*
 * cpu_familytest.c — the shared family checks (cpu_familytest.h).
 */
#include "cpu_familytest.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define FT_B 3
#define FT_L 33

static void ft_model(const struct ft_family *f, struct tu_model *tm, const struct mc_backend_ops *ops,
                     enum mc_dtype dtype, int32_t threads)
{
    tu_model_create(tm, ops, f->family, f->config, f->ws, dtype, 0, threads, f->D, f->conv_elems, f->state_elems);
}

/* rows: 0 left-padded, 1 right-padded, 2 middle padding */
static void ft_mask(uint8_t *mask)
{
    for (int64_t i = 0; i < FT_L; i++) {
        mask[0 * FT_L + i] = i >= 5;
        mask[1 * FT_L + i] = i < FT_L - 8;
        mask[2 * FT_L + i] = !(i == 0 || i == 6 || (i >= 11 && i <= 14) || i == 30);
    }
}

struct ft_out {
    double *y, *conv, *state;
};

static void ft_out_alloc(const struct ft_family *f, struct ft_out *o)
{
    o->y = tu_calloc((size_t)(FT_B * FT_L * f->D), sizeof(double));
    o->conv = tu_calloc((size_t)(FT_B * f->conv_elems), sizeof(double));
    o->state = tu_calloc((size_t)(FT_B * (f->state_elems ? f->state_elems : 1)), sizeof(double));
}

static void ft_out_free(struct ft_out *o)
{
    free(o->y);
    free(o->conv);
    free(o->state);
}

static void ft_check(const char *label, const struct ft_family *f, const struct ft_out *got, const struct ft_out *want,
                     const uint8_t *mask, double atol, double rtol, double state_atol, double state_rtol, int report)
{
    char what[128];
    snprintf(what, sizeof what, "%s %s output", f->name, label);
    struct tu_cmp cy = tu_compare(what, got->y, want->y, (size_t)(FT_B * FT_L * f->D), f->D, mask, atol, rtol);
    if (report)
        tu_report(what, &cy);
    snprintf(what, sizeof what, "%s %s conv_state", f->name, label);
    tu_compare(what, got->conv, want->conv, (size_t)(FT_B * f->conv_elems), 1, NULL, state_atol, state_rtol);
    if (f->state_elems) {
        snprintf(what, sizeof what, "%s %s recurrent_state", f->name, label);
        struct tu_cmp cs = tu_compare(what, got->state, want->state, (size_t)(FT_B * f->state_elems), 1, NULL,
                                      state_atol, state_rtol);
        if (report)
            tu_report(what, &cs);
    }
}

void ft_vs_reference(const struct ft_family *f)
{
    static const int64_t splits[][6] = {
        {33, 0, 0, 0, 0, 0}, {1, 1, 1, 1, 1, 28}, {9, 13, 1, 1, 1, 8}, {2, 3, 17, 1, 9, 1},
    };
    static const int n_splits[] = {1, 6, 6, 6};
    struct tu_lcg g = {4242};
    double *x = tu_calloc((size_t)(FT_B * FT_L * f->D), sizeof(double));
    tu_fill(x, (size_t)(FT_B * FT_L * f->D), 1.0, &g);
    tu_round(MC_DTYPE_F32, x, (size_t)(FT_B * FT_L * f->D));
    uint8_t mask[FT_B * FT_L];
    ft_mask(mask);
    struct tu_model ref, cpu;
    ft_model(f, &ref, f->ref, MC_DTYPE_F64, 0);
    ft_model(f, &cpu, f->cpu, MC_DTYPE_F32, 2);
    struct ft_out want, got, whole;
    ft_out_alloc(f, &want);
    ft_out_alloc(f, &got);
    ft_out_alloc(f, &whole);
    for (int masked = 0; masked < 2; masked++) {
        const uint8_t *mk = masked ? mask : NULL;
        tu_run(&cpu, FT_B, FT_L, x, mk, NULL, 0, 1, NULL, whole.y, whole.conv, whole.state, NULL);
        for (int si = 0; si < 4; si++) {
            tu_run(&ref, FT_B, FT_L, x, mk, splits[si], n_splits[si], 1, NULL, want.y, want.conv, want.state, NULL);
            tu_run(&cpu, FT_B, FT_L, x, mk, splits[si], n_splits[si], 1, NULL, got.y, got.conv, got.state, NULL);
            char label[64];
            snprintf(label, sizeof label, "%s splits%d", masked ? "masked" : "unmasked", si);
            ft_check(label, f, &got, &want, mk, f->f32_atol, f->f32_rtol, f->f32_atol, f->f32_rtol, si == 2);
            /* split invariance of the cpu backend itself */
            ft_check("split vs whole", f, &got, &whole, mk, f->f32_atol, f->f32_rtol, f->f32_atol, f->f32_rtol, 0);
        }
        /* padding outputs are out_proj.bias (or 0) */
        if (masked) {
            const double *bias = tu_weights_find(f->ws, f->out_bias ? f->out_bias : "out_proj.bias");
            for (int64_t r = 0; r < FT_B * FT_L; r++)
                if (!mask[r])
                    for (int64_t j = 0; j < f->D; j++)
                        assert_true(got.y[r * f->D + j] == (bias ? bias[j] : 0.0));
        }
    }
    /* no cache: the prefill outputs */
    tu_run(&cpu, FT_B, FT_L, x, NULL, NULL, 0, 1, NULL, whole.y, whole.conv, whole.state, NULL);
    tu_run(&cpu, FT_B, FT_L, x, NULL, NULL, 0, 0, NULL, got.y, NULL, NULL, NULL);
    tu_compare("no-cache output", got.y, whole.y, (size_t)(FT_B * FT_L * f->D), f->D, NULL, 0, 0);
    ft_out_free(&want);
    ft_out_free(&got);
    ft_out_free(&whole);
    tu_model_destroy(&cpu);
    tu_model_destroy(&ref);
    free(x);
}

void ft_thread_invariance(const struct ft_family *f)
{
    static const int64_t splits[] = {17, 1, 15};
    struct tu_lcg g = {4343};
    double *x = tu_calloc((size_t)(FT_B * FT_L * f->D), sizeof(double));
    tu_fill(x, (size_t)(FT_B * FT_L * f->D), 1.0, &g);
    uint8_t mask[FT_B * FT_L];
    ft_mask(mask);
    for (int dt = 0; dt < 2; dt++) {
        const enum mc_dtype dtype = dt ? MC_DTYPE_F16 : MC_DTYPE_F32;
        struct tu_model cpu[3];
        for (int th = 1; th <= 3; th++)
            ft_model(f, &cpu[th - 1], f->cpu, dtype, th);
        tu_assert_same_bits(cpu, 3, FT_B, FT_L, x, mask, splits, 3);
        for (int th = 1; th <= 3; th++)
            tu_model_destroy(&cpu[th - 1]);
    }
    free(x);
}

void ft_half_storage(const struct ft_family *f)
{
    static const int64_t splits[] = {12, 1, 1, 19};
    static const enum mc_dtype dtypes[] = {MC_DTYPE_BF16, MC_DTYPE_F16};
    for (int di = 0; di < 2; di++) {
        const enum mc_dtype dt = dtypes[di];
        struct tu_weights rounded = {0};
        /* a copy of the weights rounded to the storage dtype, for both backends */
        for (int i = 0; i < f->ws->n; i++) {
            struct tu_lcg g0 = {1};
            const struct mc_weight *w = &f->ws->w[i];
            int64_t flat = 1; /* more dims than tu_weights_add takes (KDA's A_log [1][1][H][1]): added flat */
            for (int d = 0; d < w->ndim; d++)
                flat *= w->dims[d];
            if (w->ndim > 3)
                tu_weights_add(&rounded, w->name, 1, flat, 0, 0, 0, 0, &g0);
            else
                tu_weights_add(&rounded, w->name, w->ndim, w->dims[0], w->dims[1], w->dims[2], 0, 0, &g0);
            if (w->ndim > 3) { /* then given its own shape: the same elements */
                rounded.w[i].ndim = w->ndim;
                memcpy(rounded.w[i].dims, w->dims, sizeof w->dims);
            }
            size_t n = 1;
            for (int d = 0; d < w->ndim; d++)
                n *= (size_t)w->dims[d];
            memcpy(rounded.val[i], f->ws->val[i], n * sizeof(double));
        }
        tu_weights_round(&rounded, dt);
        struct ft_family fr = *f;
        fr.ws = &rounded;
        struct tu_lcg g = {4444};
        double *x = tu_calloc((size_t)(FT_B * FT_L * f->D), sizeof(double));
        tu_fill(x, (size_t)(FT_B * FT_L * f->D), 1.0, &g);
        tu_round(dt, x, (size_t)(FT_B * FT_L * f->D));
        uint8_t mask[FT_B * FT_L];
        ft_mask(mask);
        struct tu_model ref, cpu;
        ft_model(&fr, &ref, f->ref, MC_DTYPE_F64, 0);
        ft_model(&fr, &cpu, f->cpu, dt, 2);
        struct ft_out want, got;
        ft_out_alloc(f, &want);
        ft_out_alloc(f, &got);
        tu_run(&ref, FT_B, FT_L, x, mask, splits, 4, 1, NULL, want.y, want.conv, want.state, NULL);
        tu_run(&cpu, FT_B, FT_L, x, mask, splits, 4, 1, NULL, got.y, got.conv, got.state, NULL);
        ft_check(dt == MC_DTYPE_BF16 ? "bf16" : "f16", f, &got, &want, mask,
                 dt == MC_DTYPE_BF16 ? f->bf16_atol : f->f16_atol, dt == MC_DTYPE_BF16 ? f->bf16_rtol : f->f16_rtol,
                 f->f32_atol, f->f32_rtol, 1);
        ft_out_free(&want);
        ft_out_free(&got);
        tu_model_destroy(&cpu);
        tu_model_destroy(&ref);
        free(x);
        tu_weights_free(&rounded);
    }
}

void ft_cache_roundtrip(const struct ft_family *f)
{
    struct tu_model cpu;
    ft_model(f, &cpu, f->cpu, MC_DTYPE_F32, 1);
    const struct mc_backend_ops *ops = f->cpu;
    struct tu_lcg g = {4545};
    double *x = tu_calloc((size_t)(FT_B * FT_L * f->D), sizeof(double));
    tu_fill(x, (size_t)(FT_B * FT_L * f->D), 1.0, &g);
    struct mc_cache *c1 = NULL, *c2 = NULL;
    struct mc_msg msg;
    struct ft_out a, o1, o2;
    ft_out_alloc(f, &a);
    ft_out_alloc(f, &o1);
    ft_out_alloc(f, &o2);
    tu_run(&cpu, FT_B, FT_L, x, NULL, NULL, 0, 1, NULL, a.y, a.conv, a.state, &c1);
    float *conv = tu_calloc((size_t)(FT_B * f->conv_elems), sizeof(float));
    float *st = tu_calloc((size_t)(FT_B * (f->state_elems + 1)), sizeof(float));
    assert_int_equal(ops->cache_export(cpu.model, c1, conv, f->state_elems ? st : NULL, &msg), MC_BACKEND_OK);
    assert_int_equal(ops->cache_alloc(cpu.model, FT_B, &c2, &msg), MC_BACKEND_OK);
    assert_int_equal(ops->cache_import(cpu.model, c2, conv, f->state_elems ? st : NULL, &msg), MC_BACKEND_OK);
    tu_run(&cpu, FT_B, FT_L, x, NULL, NULL, 0, 1, c1, o1.y, o1.conv, o1.state, NULL);
    tu_run(&cpu, FT_B, FT_L, x, NULL, NULL, 0, 1, c2, o2.y, o2.conv, o2.state, NULL);
    ft_check("import", f, &o2, &o1, NULL, 0, 0, 0, 0, 0);
    ops->cache_free(cpu.model, c1);
    ops->cache_free(cpu.model, c2);
    ft_out_free(&a);
    ft_out_free(&o1);
    ft_out_free(&o2);
    free(conv);
    free(st);
    free(x);
    tu_model_destroy(&cpu);
}

void ft_errors(const struct ft_family *f)
{
    const struct mc_backend_ops *ops = f->cpu;
    assert_string_equal(ops->name, "cpu");
    assert_string_equal(ops->device, "cpu");
    assert_int_equal(ops->family, f->family);
    assert_true(ops->caps & MC_CAP_THREADS);
    assert_false(ops->dtypes & MC_DTYPE_BIT(MC_DTYPE_F64));
    struct mc_msg msg;
    struct mc_model *m = NULL;
    tu_weights_pack(f->ws, MC_DTYPE_F32);
    struct mc_model_desc desc = {.family = f->family, .dtype = MC_DTYPE_F64, .config = f->config,
                                 .weights = f->ws->w, .n_weights = f->ws->n};
    assert_int_equal(ops->model_create(&desc, &m, &msg), MC_BACKEND_UNSUPPORTED);
    desc.dtype = MC_DTYPE_F32;
    desc.family = f->family == MC_FAMILY_MAMBA2 ? MC_FAMILY_MAMBA1 : MC_FAMILY_MAMBA2;
    assert_int_equal(ops->model_create(&desc, &m, &msg), MC_BACKEND_INVALID);
    desc.family = f->family;
    desc.n_weights = f->ws->n - 1;
    assert_int_equal(ops->model_create(&desc, &m, &msg), MC_BACKEND_INVALID);
    assert_non_null(strstr(msg.text, "missing weight"));
    desc.n_weights = f->ws->n;
    desc.threads = -1;
    assert_int_equal(ops->model_create(&desc, &m, &msg), MC_BACKEND_INVALID);
    desc.threads = 0;
    desc.config = NULL;
    assert_int_equal(ops->model_create(&desc, &m, &msg), MC_BACKEND_INVALID);
    desc.config = f->config;
    assert_int_equal(ops->model_create(&desc, &m, &msg), MC_BACKEND_OK);
    struct mc_cache *c2 = NULL, *c3 = NULL;
    assert_int_equal(ops->cache_alloc(m, 0, &c2, &msg), MC_BACKEND_INVALID);
    assert_int_equal(ops->cache_alloc(m, 2, &c2, &msg), MC_BACKEND_OK);
    assert_int_equal(ops->cache_alloc(m, 3, &c3, &msg), MC_BACKEND_OK);
    assert_int_equal(ops->cache_copy(m, c2, c3, &msg), MC_BACKEND_INVALID);
    float *x = tu_calloc((size_t)(2 * 3 * f->D), sizeof(float)), *y = tu_calloc((size_t)(2 * 3 * f->D), sizeof(float));
    struct mc_forward_args args = {.batch = 2, .len = 3, .x = x, .mask = NULL, .y = y};
    assert_int_equal(ops->forward(m, c3, &args, &msg), MC_BACKEND_INVALID);
    args.len = 0;
    assert_int_equal(ops->forward(m, c2, &args, &msg), MC_BACKEND_INVALID);
    args.len = 3;
    args.y = NULL;
    assert_int_equal(ops->forward(m, c2, &args, &msg), MC_BACKEND_INVALID);
    args.y = y;
    assert_int_equal(ops->forward(m, c2, &args, &msg), MC_BACKEND_OK);
    assert_int_equal(ops->forward(m, NULL, &args, &msg), MC_BACKEND_OK);
    assert_int_equal(ops->cache_import(m, c2, NULL, NULL, &msg), MC_BACKEND_INVALID);
    ops->cache_free(m, c2);
    ops->cache_free(m, c3);
    ops->cache_free(m, NULL);
    ops->model_destroy(m);
    ops->model_destroy(NULL);
    free(x);
    free(y);
}

/* ---- the suite ----------------------------------------------------------------------------------- */

static struct ft_family *ft_suite_fam;
static int (*ft_suite_setup)(int which);

static int setup0(void **state)
{
    (void)state;
    return ft_suite_setup(0);
}

static int setup1(void **state)
{
    (void)state;
    return ft_suite_setup(1);
}

static int teardown(void **state)
{
    (void)state;
    tu_weights_free(ft_suite_fam->ws);
    return 0;
}

static void test_vs_reference(void **state)
{
    (void)state;
    ft_vs_reference(ft_suite_fam);
}

static void test_threads(void **state)
{
    (void)state;
    ft_thread_invariance(ft_suite_fam);
}

static void test_half(void **state)
{
    (void)state;
    ft_half_storage(ft_suite_fam);
}

static void test_roundtrip(void **state)
{
    (void)state;
    ft_cache_roundtrip(ft_suite_fam);
}

static void test_errors(void **state)
{
    (void)state;
    ft_errors(ft_suite_fam);
    assert_int_equal(!!(ft_suite_fam->cpu->caps & MC_CAP_CHUNK_SIZE), !!ft_suite_fam->chunked);
}

int ft_run_suite(struct ft_family *f, int (*setup)(int which))
{
    ft_suite_fam = f;
    ft_suite_setup = setup;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_vs_reference, setup0, teardown),
        cmocka_unit_test_setup_teardown(test_vs_reference, setup1, teardown),
        cmocka_unit_test_setup_teardown(test_threads, setup0, teardown),
        cmocka_unit_test_setup_teardown(test_threads, setup1, teardown),
        cmocka_unit_test_setup_teardown(test_half, setup0, teardown),
        cmocka_unit_test_setup_teardown(test_half, setup1, teardown),
        cmocka_unit_test_setup_teardown(test_roundtrip, setup1, teardown),
        cmocka_unit_test_setup_teardown(test_errors, setup0, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
