/*
 * vmath.h — vectorized elementwise math of the cpu backend: exp and the activations built on it, over
 * whole arrays, so the hot loops neither call scalar libm expf per element nor lose vectorization.
 *
 * Provided (all f32, n >= 0 elements, n == 0 a no-op):
 *   - mc_cpu_vexp        x[i] = exp(x[i])                       in place
 *   - mc_cpu_vexp_to     dst[i] = exp(src[i])
 *   - mc_cpu_vsilu       x[i] = x[i] / (1 + exp(-x[i]))          in place (torch SiLU)
 *   - mc_cpu_vmul_silu   x[i] = x[i] · silu(z[i])                 in place (the z gate of the norms)
 *   - mc_cpu_vsigmoid_to dst[i] = 1 / (1 + exp(-src[i]))
 *   - mc_cpu_vtaps       out[c] = bias[c] + Σ_k w[k·w_stride + c]·src[k][c]   (a depthwise conv's K
 *                        taps for one token; summed in that order, bias NULL = 0)
 * The `_to` and `mul` forms take pointers that must not overlap (restrict).
 *
 * The exp (vmath.c has the derivation): Cody-Waite reduction x = n·ln2 + r, |r| <= ln2/2, a degree-7
 * polynomial for e^r and the scale 2^n put into the exponent bits. Accuracy: relative error under
 * 2^-22 (tests/cpu/test_cpu_common.c measures it: at most 2 ulp) wherever exp(x) is a normal float.
 * Edges: exp(x) below FLT_MIN (x < -87.3365) is flushed to +0 instead of a subnormal; x > 88.7228
 * (exp(x) > FLT_MAX) is +inf; exp(-inf) = +0, exp(+inf) = +inf, exp(NaN) = NaN, exp(±0) = 1 exactly.
 *
 * The results are the same bits on every x86-64 the backend runs on: the loops are compiled for
 * several instruction sets (AVX-512F, AVX2, baseline SSE2) and picked at load time, and none of them
 * contracts a multiply-add into an FMA, so the clones differ in speed only. An element's result does
 * not depend on its position in the array either (vector body and scalar tail compute the same
 * operations), so the kernels' thread-count determinism is kept.
 */
#ifndef MC_KERNELS_CPU_VMATH_H
#define MC_KERNELS_CPU_VMATH_H

#include <stdint.h>

void mc_cpu_vexp(float *restrict x, int64_t n);
void mc_cpu_vexp_to(const float *restrict src, float *restrict dst, int64_t n);
void mc_cpu_vsilu(float *restrict x, int64_t n);
void mc_cpu_vmul_silu(float *restrict x, const float *restrict z, int64_t n);
void mc_cpu_vsigmoid_to(const float *restrict src, float *restrict dst, int64_t n);
void mc_cpu_vtaps(int64_t n, int64_t K, const float *const *src, const float *w, int64_t w_stride, const float *bias,
                  float *restrict out);

#endif
