/* test_compare.c — comparator edge cases: NaN, ±Inf, -0, denormals, the atol/rtol boundary,
 * headroom, first failing token, worst index, merging, cosine and NMSE. */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "verdict/compare.h"
#include "verdict/logits.h"

/* A [1][n][1] output-like view: batch, token, channel. */
static struct mc_compare_view tokens_view(int64_t n)
{
    struct mc_compare_view v = {0};
    v.ndim = 3;
    v.dims[0] = 1;
    v.dims[1] = n;
    v.dims[2] = 1;
    v.dim_names[0] = "batch";
    v.dim_names[1] = "token";
    v.dim_names[2] = "channel";
    v.token_axis = 1;
    return v;
}

static struct mc_compare_stats run(const double *a, const double *b, int64_t n, double atol, double rtol)
{
    struct mc_compare_view v = tokens_view(n);
    struct mc_compare_stats s;
    mc_compare_stats_init(&s);
    struct mc_tolerance tol = {.atol = atol, .rtol = rtol};
    mc_compare_accumulate(a, b, &v, tol, &s);
    return s;
}

static void test_equal_passes_with_zero_headroom(void **state)
{
    (void)state;
    double a[3] = {1.0, -2.0, 0.5}, b[3] = {1.0, -2.0, 0.5};
    struct mc_compare_stats s = run(a, b, 3, 1e-6, 1e-6);
    assert_true(mc_compare_passed(&s));
    assert_int_equal(s.n_fail, 0);
    assert_true(s.headroom == 0.0);
    assert_int_equal(s.first_fail_token, -1);
    assert_true(fabs(mc_compare_cosine(&s) - 1.0) < 1e-15);
    assert_true(mc_compare_nmse(&s) == 0.0);
}

static void test_nan_in_actual_fails(void **state)
{
    (void)state;
    double a[3] = {1.0, NAN, 0.5}, b[3] = {1.0, 2.0, 0.5};
    struct mc_compare_stats s = run(a, b, 3, 1e9, 1e9); /* no tolerance can hide a NaN */
    assert_false(mc_compare_passed(&s));
    assert_int_equal(s.n_nonfinite, 1);
    assert_int_equal(s.n_nan, 1);
    assert_int_equal(s.first_fail_token, 1);
    assert_true(isinf(s.headroom));
    assert_int_equal(s.worst_index[1], 1);
}

static void test_nan_in_both_fails(void **state)
{
    (void)state;
    double a[1] = {NAN}, b[1] = {NAN};
    struct mc_compare_stats s = run(a, b, 1, 1.0, 1.0);
    assert_false(mc_compare_passed(&s));
    assert_int_equal(s.n_nonfinite, 1);
}

static void test_infinities(void **state)
{
    (void)state;
    double a[4] = {INFINITY, -INFINITY, INFINITY, 1.0}, b[4] = {INFINITY, -INFINITY, 1.0, -INFINITY};
    struct mc_compare_stats s = run(a, b, 4, 1.0, 1.0);
    assert_int_equal(s.n_nonfinite, 4); /* no infinity passes, not even against an equal one */
    assert_int_equal(s.n_fail, 4);
    assert_int_equal(s.first_fail_token, 0);
    assert_true(isinf(s.worst_actual) && s.worst_actual > 0);
}

static void test_signed_zero_and_denormals(void **state)
{
    (void)state;
    double tiny = DBL_TRUE_MIN;
    double a[3] = {-0.0, tiny, 4.0 * tiny}, b[3] = {0.0, tiny, 4.0 * tiny};
    struct mc_compare_stats s = run(a, b, 3, 0.0, 0.0); /* bitwise-equal values pass a zero tolerance */
    assert_true(mc_compare_passed(&s));
    double c[1] = {2.0 * tiny}, d[1] = {tiny};
    s = run(c, d, 1, 0.0, 0.0); /* a denormal difference fails a zero tolerance: headroom inf */
    assert_false(mc_compare_passed(&s));
    assert_true(isinf(s.headroom));
    s = run(c, d, 1, tiny, 0.0); /* |a-b| = tiny <= atol */
    assert_true(mc_compare_passed(&s));
}

static void test_tolerance_boundary(void **state)
{
    (void)state;
    /* |a - b| == atol + rtol*|b| passes; just above fails. Values chosen exact in binary. */
    double b[1] = {2.0};
    double at[1] = {2.0 + 0.25 + 0.125 * 2.0};
    struct mc_compare_stats s = run(at, b, 1, 0.25, 0.125);
    assert_true(mc_compare_passed(&s));
    assert_true(s.headroom == 1.0);
    double over[1] = {nextafter(at[0], 10.0)};
    s = run(over, b, 1, 0.25, 0.125);
    assert_false(mc_compare_passed(&s));
    assert_true(s.headroom > 1.0);
    /* rtol scales with |expected|, not |actual| */
    double neg_b[1] = {-2.0}, neg_a[1] = {-2.0 - 0.5};
    s = run(neg_a, neg_b, 1, 0.25, 0.125);
    assert_true(mc_compare_passed(&s));
}

static void test_first_fail_token_and_metrics(void **state)
{
    (void)state;
    double b[5] = {1, 1, 1, 1, 1}, a[5] = {1, 1.5, 1, 3, 1};
    struct mc_compare_stats s = run(a, b, 5, 0.1, 0.0);
    assert_int_equal(s.n_fail, 2);
    assert_int_equal(s.first_fail_token, 1);
    assert_int_equal(s.worst_index[1], 3); /* the larger error */
    assert_true(fabs(s.max_abs_err - 2.0) < 1e-15);
    assert_true(fabs(s.max_rel_err - 2.0) < 1e-15);
    assert_true(fabs(s.headroom - 20.0) < 1e-12);
    /* NMSE = sum (a-b)^2 / sum b^2 = (0.25 + 4) / 5 */
    assert_true(fabs(mc_compare_nmse(&s) - 4.25 / 5.0) < 1e-15);
}

static void test_offsets_and_padding(void **state)
{
    (void)state;
    struct mc_compare_view v = tokens_view(3);
    v.token_offset = 10;
    v.batch_offset = 2;
    uint8_t valid[3] = {0, 1, 1};
    v.valid = valid;
    double a[3] = {123.0, 1.0, 5.0}, b[3] = {0.0, 1.0, 1.0};
    struct mc_compare_stats s;
    mc_compare_stats_init(&s);
    struct mc_tolerance tol = {.atol = 1e-6, .rtol = 0};
    mc_compare_accumulate(a, b, &v, tol, &s);
    assert_int_equal(s.n_elems, 2); /* the padding token is not compared */
    assert_int_equal(s.first_fail_token, 12);
    assert_int_equal(s.worst_index[0], 2);
    assert_int_equal(s.worst_index[1], 12);
    /* ... but it must be finite */
    double c[3] = {NAN, 1.0, 1.0};
    mc_compare_stats_init(&s);
    mc_compare_accumulate(c, b, &v, tol, &s);
    assert_false(mc_compare_passed(&s));
    assert_int_equal(s.n_nonfinite, 1);
    assert_int_equal(s.first_fail_token, 10);
}

static void test_merge_keeps_worst_and_first(void **state)
{
    (void)state;
    double b[2] = {1, 1}, a1[2] = {1, 1.2}, a2[2] = {1.5, 1};
    struct mc_compare_view v = tokens_view(2);
    struct mc_tolerance tol = {.atol = 0.1, .rtol = 0};
    struct mc_compare_stats one, two, all;
    mc_compare_stats_init(&one);
    mc_compare_stats_init(&two);
    mc_compare_stats_init(&all);
    mc_compare_accumulate(a1, b, &v, tol, &one);
    v.token_offset = 7;
    mc_compare_accumulate(a2, b, &v, tol, &two);
    mc_compare_stats_merge(&all, &two);
    mc_compare_stats_merge(&all, &one);
    assert_int_equal(all.n_fail, 2);
    assert_int_equal(all.first_fail_token, 1);
    assert_int_equal(all.worst_index[1], 7);
    assert_true(fabs(all.headroom - 5.0) < 1e-12);
    assert_int_equal(all.n_elems, 4);
}

/* The profile: per position the worst abs error and headroom, +inf for a non-finite element, -1 where
 * nothing was compared. */
static void test_profile_per_position(void **state)
{
    (void)state;
    double a[5] = {1.0, 2.5, 3.0, NAN, 5.0}, b[5] = {1.0, 2.0, 3.0, 4.0, 5.0};
    struct mc_compare_view v = tokens_view(5);
    v.token_offset = 2; /* positions 2..6 */
    struct mc_compare_stats s;
    mc_compare_stats_init(&s);
    struct mc_tolerance tol = {.atol = 0.1, .rtol = 0.0};
    mc_compare_accumulate(a, b, &v, tol, &s);
    const struct mc_position_profile *p = &s.profile;
    assert_int_equal(p->width, 1);
    assert_int_equal(p->n, 7);
    assert_true(p->max_abs_err[0] == -1.0f && p->max_abs_err[1] == -1.0f);
    assert_true(p->max_abs_err[2] == 0.0f && p->headroom[2] == 0.0f);
    assert_true(fabsf(p->max_abs_err[3] - 0.5f) < 1e-7f && fabsf(p->headroom[3] - 5.0f) < 1e-5f);
    assert_true(isinf(p->max_abs_err[5]) && isinf(p->headroom[5]));
    assert_true(p->max_abs_err[6] == 0.0f);
    /* a state-like view without a token axis lands on its token_offset */
    struct mc_compare_view sv = {.ndim = 1, .dims = {2}, .dim_names = {"h"}, .token_axis = -1, .token_offset = 9};
    double sa[2] = {0.0, 0.25}, sb[2] = {0.0, 0.0};
    mc_compare_accumulate(sa, sb, &sv, tol, &s);
    assert_int_equal(p->n, 10);
    assert_true(fabsf(p->headroom[9] - 2.5f) < 1e-5f);
}

/* Long tensors fold into at most 256 buckets keeping the max, and the result does not depend on the
 * order of the comparisons (merged or accumulated). */
static void test_profile_folds_and_merges(void **state)
{
    (void)state;
    enum { N = 1000 };
    static double a[N], b[N];
    for (int i = 0; i < N; i++) {
        b[i] = 1.0;
        a[i] = 1.0 + 1e-6 * (i % 7);
    }
    a[777] = 1.5;
    struct mc_tolerance tol = {.atol = 1e-3, .rtol = 0.0};
    struct mc_compare_view v = tokens_view(N);
    struct mc_compare_stats whole;
    mc_compare_stats_init(&whole);
    mc_compare_accumulate(a, b, &v, tol, &whole);
    const struct mc_position_profile *p = &whole.profile;
    assert_int_equal(p->width, 4); /* 1000 positions: 256 x 4 */
    assert_int_equal(p->n, 250);
    assert_true(fabsf(p->max_abs_err[777 / 4] - 0.5f) < 1e-6f);
    assert_true(fabsf(p->headroom[777 / 4] - 500.0f) < 1e-3f);
    assert_int_equal(mc_compare_profile_position(p, 194), 776);
    /* the second half first, then the first half, in two stats merged */
    struct mc_compare_view hi = tokens_view(N / 2), lo = tokens_view(N / 2);
    hi.token_offset = N / 2;
    struct mc_compare_stats s1, s2;
    mc_compare_stats_init(&s1);
    mc_compare_stats_init(&s2);
    mc_compare_accumulate(a + N / 2, b + N / 2, &hi, tol, &s1);
    mc_compare_accumulate(a, b, &lo, tol, &s2);
    assert_int_equal(s2.profile.width, 2);
    mc_compare_stats_merge(&s2, &s1);
    assert_int_equal(s2.profile.width, 4);
    assert_int_equal(s2.profile.n, p->n);
    for (int i = 0; i < MC_PROFILE_BUCKETS; i++) {
        assert_true(s2.profile.max_abs_err[i] == p->max_abs_err[i]);
        assert_true(s2.profile.headroom[i] == p->headroom[i]);
    }
}

static void test_format_index(void **state)
{
    (void)state;
    double b[2] = {0, 0}, a[2] = {0, 1};
    struct mc_compare_stats s = run(a, b, 2, 0.5, 0);
    char buf[128];
    mc_compare_format_index(&s, buf, sizeof buf);
    assert_string_equal(buf, "batch=0 token=1 channel=0");
}

/* atol_scale: the absolute tolerance in units of the array's largest |expected| (padding and non-finite
 * expected values excluded from it); merged stats keep the largest magnitude and applied atol. */
static void test_atol_scale(void **state)
{
    (void)state;
    double b[4] = {8.0, -0.5, 0.25, 1.0}, a[4] = {8.0, -0.5, 0.25 + 0.079, 1.0};
    struct mc_compare_view v = tokens_view(4);
    struct mc_compare_stats s;
    mc_compare_stats_init(&s);
    struct mc_tolerance tol = {.atol_scale = 0.01}; /* 0.01 * 8 = 0.08 */
    mc_compare_accumulate(a, b, &v, tol, &s);
    assert_true(mc_compare_passed(&s));
    assert_true(s.max_abs_expected == 8.0);
    assert_true(fabs(s.atol_applied - 0.08) < 1e-15);
    assert_true(fabs(s.headroom - 0.079 / 0.08) < 1e-12);
    a[2] = 0.25 + 0.081;
    mc_compare_stats_init(&s);
    mc_compare_accumulate(a, b, &v, tol, &s);
    assert_false(mc_compare_passed(&s));
    /* the same error against a smaller array fails: the scale is the array's own */
    double b2[4] = {1.0, -0.5, 0.25, 1.0}, a2[4] = {1.0, -0.5, 0.25 + 0.079, 1.0};
    mc_compare_stats_init(&s);
    mc_compare_accumulate(a2, b2, &v, tol, &s);
    assert_false(mc_compare_passed(&s));
    assert_true(s.max_abs_expected == 1.0);
    /* padding does not count towards M */
    uint8_t valid[4] = {0, 1, 1, 1};
    v.valid = valid;
    mc_compare_stats_init(&s);
    mc_compare_accumulate(a, b, &v, tol, &s);
    assert_true(s.max_abs_expected == 1.0);
    assert_false(mc_compare_passed(&s));
    assert_true(fabs(mc_tolerance_atol_at(tol, 3.0) - 0.03) < 1e-15);
    /* a magnitude known beforehand (a model case's golden) applies when larger than the array's own */
    v.valid = NULL;
    tol.magnitude = 8.0;
    mc_compare_stats_init(&s);
    mc_compare_accumulate(a2, b2, &v, tol, &s);
    assert_true(mc_compare_passed(&s));
    assert_true(s.max_abs_expected == 8.0);
    tol.magnitude = 0.5;
    mc_compare_stats_init(&s);
    mc_compare_accumulate(a2, b2, &v, tol, &s);
    assert_true(s.max_abs_expected == 1.0);
}

/* The top-k overlap of the logits metrics: ties go to the lower index (all-equal golden rows: top 5 is
 * {0..4}), one strictly larger value enters first, and a candidate row with NaN in it is skipped by
 * top-k (it counts as disagreeing). */
static void test_logits_topk_overlap(void **state)
{
    (void)state;
    enum { V = 10, N = 4 };
    double gold[N][V] = {{0}}, cand[N][V] = {{0}};
    cand[0][0] = -1.0;       /* top 5 {1..5}: overlap 4/5 (with ties to the higher index it would be 5/5) */
                             /* row 1 equals the golden: 5/5 */
    cand[2][9] = 1.0;        /* top 5 {9, 0..3}: 4/5 */
    cand[3][4] = 0.0 / 0.0;  /* not finite: 0 */
    struct mc_logits_metrics m;
    mc_logits_metrics_init(&m);
    mc_logits_accumulate(&cand[0][0], &gold[0][0], N, V, NULL, NULL, &m);
    assert_int_equal(m.positions, N);
    assert_true(fabs(m.topk_overlap_sum - 2.6) < 1e-12);
    assert_int_equal(m.top1_agree, 1); /* only row 1: rows 0 (argmax 1 vs 0) and 2 (9 vs 0) disagree, row 3 is not finite */
    assert_true(isinf(m.kl_max));
    /* fewer than k values that are not NaN on the golden side: the missing ones match nothing */
    double g2[V], c2[V];
    for (int v = 0; v < V; v++)
        g2[v] = v < 7 ? 0.0 / 0.0 : (double)v, c2[v] = (double)v;
    mc_logits_metrics_init(&m);
    mc_logits_accumulate(c2, g2, 1, V, NULL, NULL, &m);
    assert_true(fabs(m.topk_overlap_sum - 3.0 / 5.0) < 1e-12); /* golden top {9, 8, 7}, candidate {9..5} */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_equal_passes_with_zero_headroom),
        cmocka_unit_test(test_nan_in_actual_fails),
        cmocka_unit_test(test_nan_in_both_fails),
        cmocka_unit_test(test_infinities),
        cmocka_unit_test(test_signed_zero_and_denormals),
        cmocka_unit_test(test_tolerance_boundary),
        cmocka_unit_test(test_first_fail_token_and_metrics),
        cmocka_unit_test(test_offsets_and_padding),
        cmocka_unit_test(test_merge_keeps_worst_and_first),
        cmocka_unit_test(test_format_index),
        cmocka_unit_test(test_profile_per_position),
        cmocka_unit_test(test_profile_folds_and_merges),
        cmocka_unit_test(test_atol_scale),
        cmocka_unit_test(test_logits_topk_overlap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
