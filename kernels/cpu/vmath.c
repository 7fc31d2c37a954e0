/*
 * vmath.c — the array exp, SiLU and sigmoid of the cpu backend (vmath.h lists them and their edges).
 *
 * exp(x), written for f32 so that a loop of it vectorizes (no table, no branch, no float -> int
 * conversion):
 *   1. n = round(x · log2 e), taken in float: t = x·log2e + 1.5·2^23 rounds the sum to an integer
 *      (the ulp of t is 1), so nf = t − 1.5·2^23 is n as a float and the low mantissa bits of t are n
 *      in two's complement.
 *   2. r = (x − nf·ln2_hi) − nf·ln2_lo (Cody-Waite): ln2_hi has 15 significant bits, so nf·ln2_hi is
 *      exact for the |n| <= 128 met here, and x − nf·ln2_hi is exact (Sterbenz: the two are within a
 *      factor 2, or n = 0); ln2_lo carries the rest of ln2. |r| <= ln2/2 (+ a rounding hair).
 *   3. e^r by its Taylor polynomial of degree 7 in Horner form: the truncation (at most
 *      e^|r|·r^8/8!) is below 1e-8 relative on |r| <= ln2/2, well under the f32 rounding of the
 *      steps (about 1 ulp).
 *   4. 2^n as the float with exponent field 127 + n: bits(t) << 23 is n << 23 modulo 2^32 (the bits
 *      of 1.5·2^23 above the 9 low ones shift out), added to bits(1.0f) in uint32 arithmetic (no
 *      signed overflow). This covers n in [-126, 127]; n = 128 (x in [88.38, 88.72]) uses 2^127 and
 *      doubles the polynomial instead, which is exact.
 *   5. x is clamped to [EXP_LO, EXP_HI] before 1.-4. (so they never see an infinite or huge value;
 *      NaN passes through and stays NaN), and the result is selected afterwards: 0 below EXP_LO,
 *      +inf above EXP_HI. EXP_LO is the smallest float whose exp is a normal float: results that
 *      would be subnormal are flushed to 0 (an absolute error below 1.2e-38).
 * Every step is a single f32 operation with no FMA (see below), so scalar tail and vector body, and
 * every instruction-set clone, give the same bits.
 *
 * SiLU v / (1 + exp(-v)) and sigmoid 1 / (1 + exp(-v)) use it as the torch definitions do: a large
 * negative v gives exp(-v) = +inf and a result of -0 (SiLU) or 0 (sigmoid), the limits.
 */
#include "vmath.h"

#include <math.h>
#include <string.h>

/* Multiply-adds stay two roundings in every clone (clang contracts within an expression by default;
 * gcc in ISO C mode does not), so the AVX2/AVX-512 clones match the baseline bit for bit. */
#if defined(__clang__)
#pragma clang fp contract(off)
#endif

/*
 * The loop functions are compiled three times — with AVX-512F, with AVX2, and for the baseline of the
 * build (no -march: SSE2) — and the dynamic loader picks the best one the CPU has (an ifunc, resolved
 * once at load). The clones are named by instruction-set feature, not by "arch=<cpu>": gcc resolves
 * an arch= clone by CPU model (__builtin_cpu_is), so any CPU newer than the compiler (an Emerald Rapids
 * under gcc 12, say) would be handed the baseline; a feature clone is chosen from the cpuid bits. Only
 * where the toolchain does this: x86-64 with glibc (ifunc) and a compiler that knows target_clones
 * (gcc >= 6, clang >= 14); elsewhere the plain baseline.
 */
#if defined(__x86_64__) && defined(__GLIBC__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define VM_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
#endif
#ifndef VM_CLONES
#define VM_CLONES
#endif

#define VM_EXP_HI 0x1.62e42ep+6f   /* 88.7228317: largest float with exp(x) <= FLT_MAX */
#define VM_EXP_LO -0x1.5d589ep+6f  /* -87.3365402: smallest float with exp(x) >= FLT_MIN */
#define VM_LOG2E 0x1.715476p+0f    /* log2(e) */
#define VM_SHIFT 0x1.8p23f         /* 1.5 · 2^23: adding it rounds to an integer */
#define VM_LN2_HI 0x1.62e400p-1f   /* ln 2, first 15 significant bits */
#define VM_LN2_LO 0x1.7f7d1cp-20f  /* ln 2 − VM_LN2_HI */

static inline float vm_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t vm_to_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* c ? a : b, as bit masks. A float ternary is not reliably branch-free for gcc: it sinks the
 * arithmetic that feeds an arm into a branch and then, under the default -ftrapping-math, will not
 * speculate it back, so the loop is left scalar ("control flow in loop"). In uint32 it if-converts. */
static inline float vm_select(int c, float a, float b)
{
    const uint32_t m = 0u - (uint32_t)c;
    return vm_from_bits((vm_to_bits(a) & m) | (vm_to_bits(b) & ~m));
}

/* exp(x) as described at the top; inlined into each loop (and each clone of it). */
static inline __attribute__((always_inline)) float vm_exp(float x)
{
    const int below = x < VM_EXP_LO, above = x > VM_EXP_HI;
    const float xc = vm_select(below, VM_EXP_LO, vm_select(above, VM_EXP_HI, x));
    const float t = xc * VM_LOG2E + VM_SHIFT;
    const float nf = t - VM_SHIFT;
    const float r = (xc - nf * VM_LN2_HI) - nf * VM_LN2_LO;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const int top = nf > 127.5f; /* n == 128: 2^127 and 2p, both exact (t − 1: an integer below 2^24) */
    p = vm_select(top, p + p, p);
    const float tn = vm_select(top, t - 1.0f, t);
    const float y = p * vm_from_bits(0x3f800000u + (vm_to_bits(tn) << 23));
    return vm_select(above, INFINITY, vm_select(below, 0.0f, y));
}

/* The loops, each compiled once per instruction set (VM_CLONES); the public functions below call them.
 * They are static and wrapped, not exported directly, because clang 14 names the ifunc of a
 * target_clones function "<name>.ifunc", leaving <name> itself undefined for callers in other files;
 * a call from the same file resolves with either compiler. */
VM_CLONES static void vm_exp_loop(float *restrict x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = vm_exp(x[i]);
}

VM_CLONES static void vm_exp_to_loop(const float *restrict src, float *restrict dst, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = vm_exp(src[i]);
}

VM_CLONES static void vm_silu_loop(float *restrict x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = x[i] / (1.0f + vm_exp(-x[i]));
}

VM_CLONES static void vm_mul_silu_loop(float *restrict x, const float *restrict z, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = x[i] * (z[i] / (1.0f + vm_exp(-z[i])));
}

VM_CLONES static void vm_sigmoid_to_loop(const float *restrict src, float *restrict dst, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = 1.0f / (1.0f + vm_exp(-src[i]));
}

void mc_cpu_vexp(float *restrict x, int64_t n)
{
    vm_exp_loop(x, n);
}

void mc_cpu_vexp_to(const float *restrict src, float *restrict dst, int64_t n)
{
    vm_exp_to_loop(src, dst, n);
}

void mc_cpu_vsilu(float *restrict x, int64_t n)
{
    vm_silu_loop(x, n);
}

void mc_cpu_vmul_silu(float *restrict x, const float *restrict z, int64_t n)
{
    vm_mul_silu_loop(x, z, n);
}

void mc_cpu_vsigmoid_to(const float *restrict src, float *restrict dst, int64_t n)
{
    vm_sigmoid_to_loop(src, dst, n);
}

VM_CLONES static void vm_segsum_exp_loop(float *restrict seg, int64_t n, float a, float *restrict out)
{
    for (int64_t i = 0; i < n; i++) {
        const float x = seg[i] + a;
        seg[i] = x;
        out[i] = vm_exp(x);
    }
}

/* The decay factors (vmath.h). The running sums are serial (one rounding per term, in segment order);
 * the exps are the vectorized loop. */
void mc_cpu_vexp_prefix(const float *restrict a, float *restrict out, int64_t n)
{
    float run = 0.0f;
    for (int64_t l = 0; l < n; l++) {
        run += a[l];
        out[l] = run;
    }
    vm_exp_loop(out, n);
}

void mc_cpu_vexp_suffix(const float *restrict a, float *restrict out, int64_t n)
{
    float run = 0.0f;
    for (int64_t l = n - 1; l >= 0; l--) {
        out[l] = run;
        run += a[l];
    }
    vm_exp_loop(out, n);
}

void mc_cpu_vexp_segsum_row(float *restrict seg, int64_t l, float al, float *restrict out)
{
    vm_segsum_exp_loop(seg, l, al, out);
    seg[l] = 0.0f;
    out[l] = 1.0f; /* exp(0), exactly as vm_exp gives it */
}

/* One delta-rule step over S [rows][cols] (vmath.h) in two passes over the rows, each row one contiguous
 * vector loop. (A pass per block of columns, the block's rows re-read from L1, was slower: at a 128-float
 * row the block's rows fall on 8 of L1's 64 sets and evict each other.) */
VM_CLONES static void vm_delta_step_loop(float *restrict S, int64_t rows, int64_t cols, const float *restrict scale,
                                         const float *restrict k, const float *restrict q, const float *restrict v,
                                         float beta, float *restrict m, float *restrict o)
{
    for (int64_t j = 0; j < cols; j++)
        m[j] = 0.0f;
    for (int64_t c = 0; c < rows; c++) {
        float *restrict sc = S + c * cols;
        const float ec = scale[c], kc = k[c];
        for (int64_t j = 0; j < cols; j++) {
            sc[j] *= ec;
            m[j] += sc[j] * kc;
        }
    }
    for (int64_t j = 0; j < cols; j++) {
        m[j] = beta * (v[j] - m[j]);
        o[j] = 0.0f;
    }
    for (int64_t c = 0; c < rows; c++) {
        float *restrict sc = S + c * cols;
        const float kc = k[c], qc = q[c];
        for (int64_t j = 0; j < cols; j++) {
            sc[j] += kc * m[j];
            o[j] += sc[j] * qc;
        }
    }
}

void mc_cpu_vdelta_step(float *restrict S, int64_t rows, int64_t cols, const float *restrict scale,
                        const float *restrict k, const float *restrict q, const float *restrict v, float beta,
                        float *restrict m, float *restrict o)
{
    vm_delta_step_loop(S, rows, cols, scale, k, q, v, beta, m, o);
}

/* The K-tap depthwise sum of mc_cpu_vtaps, one loop per common K so the tap loop is unrolled and the
 * channel loop vectorizes; the sums run bias first, then taps 0..K-1, as the generic loop does. */
VM_CLONES static void vm_taps_loop(int64_t n, int64_t K, const float *const *src, const float *w, int64_t ws,
                                   const float *bias, float *restrict out)
{
    const float *restrict s0 = src[0], *restrict w0 = w;
    if (K == 4) {
        const float *restrict s1 = src[1], *restrict s2 = src[2], *restrict s3 = src[3];
        const float *restrict w1 = w + ws, *restrict w2 = w + 2 * ws, *restrict w3 = w + 3 * ws;
        for (int64_t c = 0; c < n; c++) {
            float acc = bias ? bias[c] : 0.0f;
            acc += w0[c] * s0[c];
            acc += w1[c] * s1[c];
            acc += w2[c] * s2[c];
            acc += w3[c] * s3[c];
            out[c] = acc;
        }
    } else if (K == 3) {
        const float *restrict s1 = src[1], *restrict s2 = src[2];
        const float *restrict w1 = w + ws, *restrict w2 = w + 2 * ws;
        for (int64_t c = 0; c < n; c++) {
            float acc = bias ? bias[c] : 0.0f;
            acc += w0[c] * s0[c];
            acc += w1[c] * s1[c];
            acc += w2[c] * s2[c];
            out[c] = acc;
        }
    } else {
        for (int64_t c = 0; c < n; c++)
            out[c] = bias ? bias[c] : 0.0f;
        for (int64_t k = 0; k < K; k++) {
            const float *restrict sk = src[k], *restrict wk = w + k * ws;
            for (int64_t c = 0; c < n; c++)
                out[c] += wk[c] * sk[c];
        }
    }
}

void mc_cpu_vtaps(int64_t n, int64_t K, const float *const *src, const float *w, int64_t w_stride, const float *bias,
                  float *restrict out)
{
    if (n > 0 && K > 0)
        vm_taps_loop(n, K, src, w, w_stride, bias, out);
}
