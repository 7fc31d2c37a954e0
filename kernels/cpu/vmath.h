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
 * The decay factors of a chunked scan (Mamba2 SSD, gated delta rule), from per-token log decays
 * a[0..n) (<= 0). Each factor is the exp of a sum over its own segment, accumulated from that segment's
 * terms only, never the difference of two cumulative sums: once the in-chunk cumulative sum reaches
 * hundreds, its f32 spacing (6e-5 at 1000) becomes the absolute error of every exponent taken from a
 * difference, i.e. a relative error of the decay (docs/semantics.md §8.12, the unstable segsum).
 *   - mc_cpu_vexp_prefix  out[l] = exp(a_0 + … + a_l)             (chunk start to token l; summed left
 *                         to right)
 *   - mc_cpu_vexp_suffix  out[l] = exp(a_{l+1} + … + a_{n−1})      (token l to the chunk end, out[n−1]
 *                         = 1; summed right to left)
 *   - mc_cpu_vexp_segsum_row   row l of the decay matrix E[l][s] = exp(a_{s+1} + … + a_l), s <= l:
 *                         seg[0..l) holds row l−1's exponents on entry (nothing when l == 0); a_l is
 *                         added to each, seg[l] = 0, and out[s] = exp(seg[s]) for s <= l (out[l] = 1).
 *                         Called for l = 0, 1, … on one seg buffer it walks the rows of a chunk; each
 *                         exponent is summed over its own segment, oldest term first.
 * One step of a delta rule (a recurrent decode token) on a state S [rows][cols] (rows key, columns value, row
 * c contiguous), scale[c] the decay of row c (one value for every row in GDN, one per key channel in KDA):
 *   - mc_cpu_vdelta_step  S_c ← S_c · scale[c]; m = Σ_c S_c · k[c]; δ = beta · (v − m);
 *                         S_c ← S_c + k[c] · δ; o = Σ_c S_c · q[c]   (o = Sᵀq on the updated S)
 *                         every sum over the rows in order; m [cols] is scratch (it ends holding δ)
 * The `_to`, `mul` and decay forms take pointers that must not overlap (restrict).
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
void mc_cpu_vexp_prefix(const float *restrict a, float *restrict out, int64_t n);
void mc_cpu_vexp_suffix(const float *restrict a, float *restrict out, int64_t n);
void mc_cpu_vexp_segsum_row(float *restrict seg, int64_t l, float al, float *restrict out);
void mc_cpu_vdelta_step(float *restrict S, int64_t rows, int64_t cols, const float *restrict scale,
                        const float *restrict k, const float *restrict q, const float *restrict v, float beta,
                        float *restrict m, float *restrict o);
void mc_cpu_vtaps(int64_t n, int64_t K, const float *const *src, const float *w, int64_t w_stride, const float *bias,
                  float *restrict out);

#endif
