/*
 * test_cpu_common.c — the cpu backend's shared infrastructure (kernels/cpu/common.h):
 *   - f32 <-> bf16 / f16 conversion against the harness's independent implementation (dtype.h), on
 *     special values, boundaries, subnormals and random bit patterns;
 *   - the parallel-for runs every task exactly once for any thread count; thread-count resolution;
 *   - the fused causal conv against a plain loop written from docs/semantics.md §0.4, with masks, bias and
 *     SiLU, as successive segments;
 *   - the array exp / SiLU / sigmoid (vmath.h) against double libm: a strided sweep of every float in
 *     [-104, 89] plus random ones and the special values, the measured worst error printed; and each
 *     element's result independent of its position and of the call's length (the kernels' thread-count
 *     determinism rests on it);
 *   - the decay factors (exps of prefix, suffix and segment sums) against their definition, bitwise,
 *     and against the f64 exp of the exact segment sums over a long strongly decaying sequence.
 */
#include <float.h>
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
#include "base/dtype.h"
#include "vmath.h"

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

/* docs/semantics.md §0.4 / §11 conv_segment, with a padding token skipped, in double. win [C][K]. */
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

/* ---- vmath ---------------------------------------------------------------------------------- */

#define VM_REL_BOUND 0x1p-22 /* vmath.h's promise for exp where the result is a normal float */

/* Error of got against the exact want in units of the last place of want rounded to f32 (a normal
 * float: the caller checks). */
static double ulps(float got, double want)
{
    int e;
    frexp(want, &e);
    return fabs((double)got - want) / ldexp(1.0, e - 24);
}

/* Accumulates the worst exp error over a block of inputs; returns the count of normal results. */
struct vm_worst {
    double rel, ulp;
    float at;
    long normal;
};

static void vexp_check_block(const float *in, const float *out, int64_t n, struct vm_worst *w)
{
    for (int64_t i = 0; i < n; i++) {
        const double want = exp((double)in[i]);
        if (want > FLT_MAX) {
            if (!(isinf(out[i]) && out[i] > 0))
                fail_msg("exp(%a) = %a, want +inf", (double)in[i], (double)out[i]);
        } else if (want < FLT_MIN) { /* flushed to +0, or a hair under FLT_MIN at the boundary */
            if (!(out[i] >= 0.0f && out[i] < FLT_MIN * 1.0001f) || signbit(out[i]))
                fail_msg("exp(%a) = %a, want +0 or about FLT_MIN (exact %a)", (double)in[i], (double)out[i], want);
        } else {
            const double rel = fabs((double)out[i] - want) / want, u = ulps(out[i], want);
            if (!(rel <= VM_REL_BOUND))
                fail_msg("exp(%a) = %a, exact %a: relative error %g > 2^-22", (double)in[i], (double)out[i], want, rel);
            if (rel > w->rel)
                w->rel = rel, w->at = in[i];
            if (u > w->ulp)
                w->ulp = u;
            w->normal++;
        }
    }
}

static void test_vexp(void **state)
{
    (void)state;
    enum { BLK = 4096 };
    static float in[BLK], out[BLK];
    struct vm_worst w = {0};
    /* every 257th float of [-104, 89] by bit pattern (about 8.7M), both signs walked from 0 outwards */
    const uint32_t stride = 257, lim[2] = {0x42b20000u /* 89 */, 0x42d00000u /* 104, negated below */};
    for (int neg = 0; neg < 2; neg++) {
        for (uint32_t b = 0; b <= lim[neg];) {
            int64_t k = 0;
            for (; k < BLK && b <= lim[neg]; k++, b += stride)
                in[k] = neg ? -bits_f32(b) : bits_f32(b);
            mc_cpu_vexp_to(in, out, k);
            vexp_check_block(in, out, k, &w);
        }
    }
    /* random floats of the range, and the neighbourhood of the edges and of n = 128 */
    struct tu_lcg g = {2024};
    for (int rep = 0; rep < 256; rep++) {
        for (int k = 0; k < BLK; k++)
            in[k] = (float)(-104.0 + 193.0 * (tu_lcg_next(&g) * 0.5 + 0.5));
        memcpy(out, in, sizeof out);
        mc_cpu_vexp(out, BLK);
        vexp_check_block(in, out, BLK, &w);
    }
    static const float edges[] = {88.72f, 0x1.62e42ep+6f, 0x1.62e42cp+6f, 0x1.62e430p+6f, 88.3762626f, 88.3762665f,
                                  88.0f, -87.0f, -87.3365f, -0x1.5d589ep+6f, -0x1.5d58a0p+6f, -87.5f, -88.0f,
                                  -103.9f, 0.34657359f, -0.34657359f, 1e-7f, -1e-7f, 1.0f, -1.0f, 10.0f, -10.0f};
    const int64_t n_edges = (int64_t)(sizeof edges / sizeof edges[0]);
    mc_cpu_vexp_to(edges, out, n_edges);
    vexp_check_block(edges, out, n_edges, &w);
    assert_true(out[1] < INFINITY && out[1] > 3.4e38f); /* exp of the largest x with a finite result */
    assert_true(isinf(out[3]));
    assert_true(out[9] >= FLT_MIN * 0.9999f && out[10] == 0.0f);
    print_message("vexp: %ld normal results, max relative error %.3g (2^%.2f) at x = %a, max %.3f ulp\n", w.normal,
                  w.rel, log2(w.rel), (double)w.at, w.ulp);
    assert_true(w.ulp <= 2.0);

    /* special values: exact 1 at ±0 and for tiny x, the infinities, NaN */
    static const float sp[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 0x1p-149f, -0x1p-149f, INFINITY, -INFINITY, NAN, -NAN,
                               1e30f, -1e30f, FLT_MAX, -FLT_MAX};
    float so[sizeof sp / sizeof sp[0]];
    mc_cpu_vexp_to(sp, so, (int64_t)(sizeof sp / sizeof sp[0]));
    for (int i = 0; i < 6; i++)
        assert_true(so[i] == 1.0f);
    assert_true(isinf(so[6]) && so[6] > 0);
    assert_true(so[7] == 0.0f && !signbit(so[7]));
    assert_true(isnan(so[8]) && isnan(so[9]));
    assert_true(isinf(so[10]) && so[10] > 0 && so[12] == INFINITY);
    assert_true(so[11] == 0.0f && so[13] == 0.0f);
    mc_cpu_vexp(so, 0); /* n == 0: nothing */
    assert_true(so[0] == 1.0f);
}

/* silu / sigmoid / x·silu(z) against double over [-100, 100]: relative error bounded (the exp's error
 * and three roundings) where exp(-v) is finite; beyond, the exact value is below 1e-36 and the result
 * is -0 / +0. */
static void test_vsilu(void **state)
{
    (void)state;
    enum { NV = 400001 };
    float *v = malloc(NV * sizeof *v), *s = malloc(NV * sizeof *s), *sg = malloc(NV * sizeof *sg);
    float *xs = malloc(NV * sizeof *xs), *z = malloc(NV * sizeof *z);
    assert_non_null(v && s && sg && xs && z);
    struct tu_lcg g = {99};
    for (int i = 0; i < NV; i++) {
        v[i] = (float)(-100.0 + 200.0 * i / (NV - 1));
        z[i] = (float)(tu_lcg_next(&g) * 4.0);
    }
    memcpy(s, v, NV * sizeof *s);
    memcpy(xs, z, NV * sizeof *xs);
    mc_cpu_vsilu(s, NV);
    mc_cpu_vsigmoid_to(v, sg, NV);
    mc_cpu_vmul_silu(xs, v, NV); /* z · silu(v) */
    double worst_silu = 0, worst_sig = 0, worst_mul = 0;
    for (int i = 0; i < NV; i++) {
        const double x = v[i], sig = 1.0 / (1.0 + exp(-x)), silu = x * sig, mul = (double)z[i] * silu;
        if (x < -87.0) {
            assert_true(fabs(s[i]) <= 1e-35f && fabs(sg[i]) <= 1e-36f && fabs(xs[i]) <= 1e-35f);
            continue;
        }
        if (silu != 0.0)
            worst_silu = fmax(worst_silu, fabs(s[i] - silu) / fabs(silu));
        else
            assert_true(s[i] == 0.0f);
        worst_sig = fmax(worst_sig, fabs(sg[i] - sig) / sig);
        if (mul != 0.0)
            worst_mul = fmax(worst_mul, fabs(xs[i] - mul) / fabs(mul));
    }
    print_message("vsilu: max relative error %.3g (2^%.2f); vsigmoid %.3g; vmul_silu %.3g\n", worst_silu,
                  log2(worst_silu), worst_sig, worst_mul);
    assert_true(worst_silu <= 0x1p-21 && worst_sig <= 0x1p-21 && worst_mul <= 0x1p-21);
    static const float sp[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN};
    float so[5];
    memcpy(so, sp, sizeof so);
    mc_cpu_vsilu(so, 5);
    assert_true(so[0] == 0.0f && !signbit(so[0]) && so[1] == 0.0f && signbit(so[1]));
    assert_true(so[2] == INFINITY && isnan(so[3]) && isnan(so[4])); /* -inf·sigmoid(-inf): NaN, as torch */
    free(v);
    free(s);
    free(sg);
    free(xs);
    free(z);
}

/* dst[0..len) = function fn of src (fn 0 exp, 1 SiLU, 2 sigmoid), or for fn 3 z · silu(src), through
 * the in-place form where there is one. */
static void vm_apply(int fn, const float *src, const float *z, float *dst, int64_t len)
{
    if (fn == 2) {
        mc_cpu_vsigmoid_to(src, dst, len);
        return;
    }
    memcpy(dst, fn == 3 ? z : src, (size_t)len * sizeof *dst);
    if (fn == 0)
        mc_cpu_vexp(dst, len);
    else if (fn == 1)
        mc_cpu_vsilu(dst, len);
    else
        mc_cpu_vmul_silu(dst, src, len);
}

/* One element's result does not depend on where it sits in the array or on the call's length (vector
 * body, masked or scalar tail): compared bitwise with one-element calls. */
static void test_vmath_position(void **state)
{
    (void)state;
    enum { NP = 300 };
    float src[NP], z[NP], one[NP], a[NP + 16], b[NP];
    struct tu_lcg g = {5};
    for (int i = 0; i < NP; i++) {
        src[i] = (float)(tu_lcg_next(&g) * 110.0);
        z[i] = (float)(tu_lcg_next(&g) * 3.0);
    }
    for (int fn = 0; fn < 4; fn++) {
        for (int i = 0; i < NP; i++)
            vm_apply(fn, src + i, z + i, one + i, 1);
        for (int off = 0; off < 16; off += 3) {
            for (int len = 1; len <= NP - 40; len += len < 70 ? 1 : 37) {
                for (int st = 0; st + len <= NP; st += 41) {
                    vm_apply(fn, src + st, z + st, a + off, len);
                    if (memcmp(a + off, one + st, (size_t)len * sizeof *a) != 0)
                        fail_msg("function %d: offset %d, length %d, start %d differs from one-element calls", fn,
                                 off, len, st);
                }
            }
        }
    }
    mc_cpu_vexp_to(src, b, NP);
    memcpy(a, src, sizeof src);
    mc_cpu_vexp(a, NP);
    assert_memory_equal(a, b, sizeof b);
}

/* The decay factors of vmath.h: each the exp of a sum over its own segment, summed in the documented
 * order (compared bitwise with that loop), and close to the f64 exp of the exact segment sum whatever
 * the size of the sums around it. With a = -3.3 per token the cumulative sum reaches -990 after 300
 * tokens, where exp(γ_i − γ_j) of the f32 cumulative sums would err by up to 6e-5 relative (its
 * spacing); a segment sum of k terms errs by at most about k·2^-24 of itself (one token: ~7e-7). */
static void test_vexp_decays(void **state)
{
    (void)state;
    enum { NA = 300 };
    static float a[NA], pre[NA], suf[NA], seg[NA], row[NA], want[NA];
    struct tu_lcg g = {11};
    for (int i = 0; i < NA; i++)
        a[i] = (float)(-3.3 * (1.0 + 0.2 * tu_lcg_next(&g)));
    mc_cpu_vexp_prefix(a, pre, NA);
    mc_cpu_vexp_suffix(a, suf, NA);
    float run = 0.0f;
    for (int l = 0; l < NA; l++) {
        run += a[l];
        want[l] = run;
    }
    mc_cpu_vexp(want, NA);
    assert_memory_equal(pre, want, sizeof want);
    run = 0.0f;
    for (int l = NA - 1; l >= 0; l--) {
        want[l] = run;
        run += a[l];
    }
    mc_cpu_vexp(want, NA);
    assert_memory_equal(suf, want, sizeof want);
    assert_true(suf[NA - 1] == 1.0f);

    double worst = 0.0;
    for (int l = 0; l < NA; l++) {
        mc_cpu_vexp_segsum_row(seg, l, a[l], row);
        assert_true(row[l] == 1.0f && seg[l] == 0.0f);
        double exact = 0.0; /* Σ_{s<k<=l} a_k, in f64, for s from l down */
        for (int s2 = l - 1; s2 >= 0; s2--) {
            exact += (double)a[s2 + 1];
            const double e = exp(exact);
            if (e < 1e-30)
                break; /* f32 flush region and below: nothing a state keeps */
            /* k = l - s2 terms, each addition rounding by at most 2^-24 of a partial sum (<= |exact|),
             * plus the exp's 2 ulp: the exponent errs by <= k·2^-24·|exact|, relative error of the decay */
            const double rel = fabs((double)row[s2] - e) / e, bound = 0x1p-24 * ((l - s2) * fabs(exact) + 4.0);
            worst = fmax(worst, rel / bound);
            if (rel > bound)
                fail_msg("row %d, column %d: exp(segment sum) %.9g, exact %.9g (rel %.2e > %.2e)", l, s2,
                         (double)row[s2], e, rel, bound);
        }
    }
    print_message("vexp decays: segment-sum rows, worst error %.3g of the bound over 300 rows (cumulative sum "
                  "%.1f)\n", worst, (double)run);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conversions),
        cmocka_unit_test(test_parallel_for),
        cmocka_unit_test(test_conv_row),
        cmocka_unit_test(test_vexp),
        cmocka_unit_test(test_vsilu),
        cmocka_unit_test(test_vmath_position),
        cmocka_unit_test(test_vexp_decays),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
