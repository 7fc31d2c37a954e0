/* test_dtype.c — f16 / bf16 rounding from float64: round-to-nearest-even, subnormals, overflow,
 * NaN, and exact round trips. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "base/dtype.h"

static void test_f16_known_values(void **state)
{
    (void)state;
    assert_int_equal(mc_f16_from_f64(1.0), 0x3c00);
    assert_int_equal(mc_f16_from_f64(-2.0), 0xc000);
    assert_int_equal(mc_f16_from_f64(65504.0), 0x7bff);
    assert_int_equal(mc_f16_from_f64(65520.0), 0x7c00); /* rounds up past max: inf */
    assert_int_equal(mc_f16_from_f64(ldexp(1.0, -24)), 0x0001); /* smallest subnormal */
    assert_int_equal(mc_f16_from_f64(ldexp(1.0, -26)), 0x0000); /* below half of it: +0 */
    assert_int_equal(mc_f16_from_f64(-0.0), 0x8000);
    assert_true(isnan(mc_f16_to_f64(mc_f16_from_f64(NAN))));
    /* ties to even: 1 + 2^-11 is halfway between 1 and 1 + 2^-10 -> 1 */
    assert_int_equal(mc_f16_from_f64(1.0 + ldexp(1.0, -11)), 0x3c00);
    assert_int_equal(mc_f16_from_f64(1.0 + 3.0 * ldexp(1.0, -11)), 0x3c02);
}

static void test_bf16_known_values(void **state)
{
    (void)state;
    assert_int_equal(mc_bf16_from_f64(1.0), 0x3f80);
    assert_int_equal(mc_bf16_from_f64(1.0 + ldexp(1.0, -8)), 0x3f80); /* tie -> even */
    assert_int_equal(mc_bf16_from_f64(1.0 + 3.0 * ldexp(1.0, -8)), 0x3f82);
    /* double rounding through float32 would get this one wrong: just above the tie */
    assert_int_equal(mc_bf16_from_f64(1.0 + ldexp(1.0, -8) + ldexp(1.0, -40)), 0x3f81);
    assert_true(isinf(mc_bf16_to_f64(mc_bf16_from_f64(1e39))));
    assert_true(isnan(mc_bf16_to_f64(mc_bf16_from_f64(NAN))));
}

static void test_round_trips(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 0x10000; h++) {
        double v = mc_f16_to_f64((uint16_t)h);
        if (!isnan(v))
            assert_int_equal(mc_f16_from_f64(v), h);
        double w = mc_bf16_to_f64((uint16_t)h);
        if (!isnan(w))
            assert_int_equal(mc_bf16_from_f64(w), h);
    }
}

/* Between every two neighbouring finite values of the grid (of one sign), the midpoint rounds to the
 * one with the even last bit, and the doubles either side of the midpoint to the nearer one; past the
 * largest finite value, the midpoint to the next (the overflow threshold) goes to infinity. A
 * property of the grid itself, not a comparison with another conversion. */
static void check_midpoints(uint16_t (*from)(double), double (*to)(uint16_t), uint16_t inf)
{
    for (uint32_t sign = 0; sign <= 0x8000u; sign += 0x8000u) {
        for (uint32_t h = 0; h < inf; h++) {
            uint16_t lo = (uint16_t)(sign | h), hi = (uint16_t)(sign | (h + 1));
            double a = to(lo), b = to(hi), mid = (a + b) / 2; /* exact: a, b have few significant bits */
            uint16_t even = (h & 1) ? hi : lo;
            if (hi == (sign | inf)) /* a + (a - previous)/2 past the largest finite value */
                mid = a + (a - to((uint16_t)(sign | (h - 1)))) / 2, b = sign ? -INFINITY : INFINITY, even = hi;
            assert_int_equal(from(mid), even);
            assert_int_equal(from(nextafter(mid, a)), lo);
            assert_int_equal(from(nextafter(mid, b)), hi);
        }
    }
}

static void test_midpoints(void **state)
{
    (void)state;
    check_midpoints(mc_f16_from_f64, mc_f16_to_f64, 0x7c00u);
    check_midpoints(mc_bf16_from_f64, mc_bf16_to_f64, 0x7f80u);
}

/* The grid tests: every finite value of each grid is on it, the doubles next to it are not (they have
 * more significant bits), NaN never is, the infinities are. */
static void test_on_grid(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 0x10000; h++) {
        double v = mc_f16_to_f64((uint16_t)h), w = mc_bf16_to_f64((uint16_t)h);
        if (isfinite(v)) {
            assert_true(mc_dtype_exact_f16(v));
            assert_false(mc_dtype_exact_f16(nextafter(v, INFINITY)));
            assert_false(mc_dtype_exact_f16(nextafter(v, -INFINITY)));
        }
        if (isfinite(w)) {
            assert_true(mc_dtype_exact_bf16(w));
            assert_false(mc_dtype_exact_bf16(nextafter(w, INFINITY)));
            assert_false(mc_dtype_exact_bf16(nextafter(w, -INFINITY)));
        }
    }
    assert_false(mc_dtype_exact_f16(NAN));
    assert_false(mc_dtype_exact_bf16(NAN));
    assert_true(mc_dtype_exact_f16(INFINITY) && mc_dtype_exact_bf16(-INFINITY));
    assert_false(mc_dtype_exact_f16(65536.0)); /* a float, beyond f16's largest finite value */
    assert_true(mc_dtype_exact_bf16(65536.0));
    assert_false(mc_dtype_exact_f16(0x1p-25)); /* below the smallest f16 subnormal */
}

static void test_buffers(void **state)
{
    (void)state;
    double src[3] = {1.5, -0.1, 3.0}, back[3];
    float f[3];
    mc_dtype_from_f64(MC_DTYPE_F32, src, f, 3);
    mc_dtype_to_f64(MC_DTYPE_F32, f, back, 3);
    assert_true(back[1] == (double)(float)-0.1);
    mc_dtype_fill_nan(MC_DTYPE_F32, f, 3);
    assert_true(isnan(f[0]) && isnan(f[2]));
    uint16_t h[3];
    mc_dtype_fill_nan(MC_DTYPE_BF16, h, 3);
    assert_true(isnan(mc_bf16_to_f64(h[1])));
    mc_dtype_fill_nan(MC_DTYPE_F16, h, 3);
    assert_true(isnan(mc_f16_to_f64(h[1])));
    assert_true(mc_dtype_round(MC_DTYPE_BF16, 1.0 + ldexp(1.0, -9)) == 1.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f16_known_values),
        cmocka_unit_test(test_bf16_known_values),
        cmocka_unit_test(test_round_trips),
        cmocka_unit_test(test_midpoints),
        cmocka_unit_test(test_on_grid),
        cmocka_unit_test(test_buffers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
