/*
 * test_cpu_common.c — the cpu backend's shared infrastructure (kernels/cpu/common.h):
 *   - f32 <-> bf16 / f16 conversion against the harness's independent implementation (dtype.h), on
 *     special values, boundaries, subnormals and random bit patterns;
 *   - the parallel-for runs every task exactly once for any thread count; thread-count resolution;
 *   - the fused causal conv against a plain loop written from mixers.md §0.4, with masks, bias and
 *     SiLU, as successive segments.
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

#include "common.h"
#include "cpu_testutil.h"
#include "dtype.h"

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void check_one(float v)
{
    const uint16_t hb = mc_bf16_from_f64((double)v), cb = mc_cpu_f32_to_bf16(v);
    const uint16_t hh = mc_f16_from_f64((double)v), ch = mc_cpu_f32_to_f16(v);
    if (isnan(v)) {
        assert_true(isnan(mc_cpu_bf16_to_f32(cb)));
        assert_true(isnan(mc_cpu_f16_to_f32(ch)));
        return;
    }
    if (hb != cb)
        fail_msg("bf16(%a): harness %04x, cpu %04x", (double)v, hb, cb);
    if (hh != ch)
        fail_msg("f16(%a): harness %04x, cpu %04x", (double)v, hh, ch);
    assert_true(mc_cpu_bf16_to_f32(cb) == (float)mc_bf16_to_f64(cb));
    assert_true(mc_cpu_f16_to_f32(ch) == (float)mc_f16_to_f64(ch));
}

static void test_conversions(void **state)
{
    (void)state;
    static const float special[] = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65520.0f, 65519.99f, 65536.0f, 1e30f,
                                    -1e30f, 3.4e38f, 0x1p-14f, 0x1p-24f, 0x1p-25f, 0x1.8p-25f, 0x1p-26f,
                                    0x1.ffcp-15f, 1.00390625f, 1.01171875f, 1e-40f};
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) {
        check_one(special[i]);
        check_one(-special[i]);
    }
    check_one(INFINITY);
    check_one(-INFINITY);
    check_one(NAN);
    struct tu_lcg g = {12345};
    for (int i = 0; i < 200000; i++) {
        g.s = g.s * 6364136223846793005ull + 1442695040888963407ull;
        check_one(bits_f32((uint32_t)(g.s >> 32)));
    }
    /* every f16 and bf16 pattern round-trips */
    for (uint32_t h = 0; h < 65536; h++) {
        const float f = mc_cpu_f16_to_f32((uint16_t)h), b = mc_cpu_bf16_to_f32((uint16_t)h);
        if (!isnan(f))
            assert_int_equal(mc_cpu_f32_to_f16(f), h);
        if (!isnan(b))
            assert_int_equal(mc_cpu_f32_to_bf16(b), h);
    }
    float buf[3] = {1.0f / 3.0f, 2.0f, -7.1f};
    uint16_t hbuf[3];
    float back[3];
    assert_int_equal(mc_cpu_from_f32(MC_DTYPE_BF16, buf, hbuf, 3), 0);
    assert_int_equal(mc_cpu_to_f32(MC_DTYPE_BF16, hbuf, back, 3), 0);
    mc_cpu_round_f32(MC_DTYPE_BF16, buf, 3);
    assert_memory_equal(buf, back, sizeof buf);
    assert_int_equal(mc_cpu_to_f32(MC_DTYPE_F64, hbuf, back, 3), -1);
    assert_int_equal(mc_cpu_from_f32(MC_DTYPE_F64, buf, hbuf, 3), -1);
    assert_int_equal(mc_cpu_dtype_bytes(MC_DTYPE_F16), 2);
    assert_int_equal(mc_cpu_dtype_bytes(MC_DTYPE_F64), 0);
}

struct count_ctx {
    int *hits; /* [n] */
    int max_worker;
};

static void count_task(void *ctx, int64_t task, int worker)
{
    struct count_ctx *c = ctx;
    c->hits[task]++; /* each task owns its slot */
    assert_true(worker >= 0 && worker < c->max_worker);
}

static void test_parallel_for(void **state)
{
    (void)state;
    for (int th = 0; th <= 9; th++) {
        for (int64_t n = 0; n < 40; n += 7) {
            int hits[40] = {0};
            struct count_ctx c = {hits, th < 1 ? 1 : th};
            const int used = mc_cpu_parallel_for(n, count_task, &c, th);
            assert_int_equal(used, n == 0 ? 0 : (th < 1 ? 1 : (th < n ? th : (int)n)));
            for (int64_t i = 0; i < n; i++)
                assert_int_equal(hits[i], 1);
        }
    }
    assert_int_equal(mc_cpu_threads_resolve(3), 3);
    assert_int_equal(mc_cpu_threads_resolve(100000), MC_CPU_MAX_THREADS);
    setenv("MIXCHECK_THREADS", "5", 1);
    assert_int_equal(mc_cpu_threads_resolve(0), 5);
    assert_int_equal(mc_cpu_threads_resolve(2), 2);
    setenv("MIXCHECK_THREADS", "x", 1);
    assert_int_equal(mc_cpu_threads_resolve(0), 1);
    setenv("MIXCHECK_THREADS", "-3", 1);
    assert_int_equal(mc_cpu_threads_resolve(0), 1);
    unsetenv("MIXCHECK_THREADS");
    assert_int_equal(mc_cpu_threads_resolve(0), 1);
}

/* mixers.md §0.4 / §11 conv_segment, with a padding token skipped, in double. win [C][K]. */
static void naive_conv(int64_t L, int64_t C, int64_t K, const double *x, const uint8_t *mask, double *win,
                       const double *w, const double *bias, int silu, double *out)
{
    for (int64_t c = 0; c < C; c++) {
        for (int64_t t = 0; t < L; t++) {
            if (mask && !mask[t]) {
                out[t * C + c] = 0;
                continue;
            }
            for (int64_t k = 0; k + 1 < K; k++)
                win[c * K + k] = win[c * K + k + 1];
            win[c * K + K - 1] = x[t * C + c];
            double acc = bias ? bias[c] : 0;
            for (int64_t k = 0; k < K; k++)
                acc += w[c * K + k] * win[c * K + k];
            out[t * C + c] = silu ? acc / (1 + exp(-acc)) : acc;
        }
    }
}

static void test_conv_row(void **state)
{
    (void)state;
    static const int64_t kernels[] = {1, 2, 3, 4, 7};
    static const int64_t seg[] = {1, 2, 5, 1, 9};
    const int64_t C = 13, L = 18;
    struct tu_lcg g = {77};
    for (int ki = 0; ki < 5; ki++) {
        const int64_t K = kernels[ki];
        for (int variant = 0; variant < 4; variant++) {
            const int silu = variant & 1, use_mask = variant & 2;
            double xd[18 * 13], wd[13 * 7], bd[13], wind[13 * 7], outd[18 * 13];
            float xf[18 * 13], wf[13 * 7], wkc[7 * 13], bf[13], winf[7 * 13], outf[18 * 13], wck[13 * 7];
            uint8_t mask[18];
            for (int64_t i = 0; i < L * C; i++)
                xf[i] = (float)tu_lcg_next(&g), xd[i] = xf[i];
            for (int64_t i = 0; i < C * K; i++) {
                wf[i] = (float)tu_lcg_next(&g), wd[i] = wf[i];
                winf[i] = (float)tu_lcg_next(&g), wind[i] = winf[i];
            }
            for (int64_t i = 0; i < C; i++)
                bf[i] = (float)tu_lcg_next(&g), bd[i] = bf[i];
            for (int64_t t = 0; t < L; t++)
                mask[t] = !use_mask || (t % 3 != 1);
            mc_cpu_conv_weight_kc(C, K, wf, wkc);
            float win_kc[7 * 13];
            mc_cpu_window_from_ck(C, K, winf, win_kc);
            naive_conv(L, C, K, xd, use_mask ? mask : NULL, wind, wd, bd, silu, outd);
            for (int64_t t0 = 0, s = 0; t0 < L; t0 += seg[s], s++)
                mc_cpu_conv_row(seg[s], C, K, xf + t0 * C, C, use_mask ? mask + t0 : NULL, win_kc, wkc,
                                variant == 2 ? NULL : bf, silu, outf + t0 * C, C);
            if (variant == 2) { /* no bias: redo the naive one */
                for (int64_t i = 0; i < C * K; i++)
                    wind[i] = winf[i];
                naive_conv(L, C, K, xd, mask, wind, wd, NULL, silu, outd);
            }
            for (int64_t i = 0; i < L * C; i++)
                if (fabs(outf[i] - outd[i]) > 1e-5 * (1 + fabs(outd[i])))
                    fail_msg("K=%lld variant %d out[%lld]: %g vs %g", (long long)K, variant, (long long)i,
                             (double)outf[i], outd[i]);
            mc_cpu_window_to_ck(C, K, win_kc, wck);
            for (int64_t i = 0; i < C * K; i++)
                assert_true(wck[i] == (float)wind[i]); /* the window holds inputs: exact */
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conversions),
        cmocka_unit_test(test_parallel_for),
        cmocka_unit_test(test_conv_row),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
