/* dtype.c — see dtype.h. */
#include "base/dtype.h"

#include <math.h>
#include <string.h>

size_t mc_dtype_size(enum mc_dtype dtype)
{
    switch (dtype) {
    case MC_DTYPE_F64:
        return 8;
    case MC_DTYPE_F32:
        return 4;
    case MC_DTYPE_F16:
    case MC_DTYPE_BF16:
        return 2;
    }
    return 0;
}

/* Rounds x to a binary format with `precision` significand bits, minimum normal exponent `emin` and
 * largest finite value `max`; round-to-nearest-even, subnormals kept, overflow to ±inf. */
static double round_to_format(double x, int precision, int emin, double max)
{
    if (!isfinite(x) || x == 0.0)
        return x;
    int e;
    frexp(x, &e); /* |x| = f * 2^e, f in [0.5, 1): the leading bit has weight 2^(e-1) */
    int lead = e - 1;
    if (lead < emin)
        lead = emin; /* subnormal range: fixed quantum 2^(emin - precision + 1) */
    int shift = precision - 1 - lead;
    double r = ldexp(nearbyint(ldexp(x, shift)), -shift);
    if (fabs(r) > max)
        return copysign(INFINITY, x);
    return r;
}

#define F16_MAX 65504.0
#define BF16_MAX 3.38953138925153547590470800371487866880e+38

uint16_t mc_f16_from_f64(double x)
{
    uint16_t sign = signbit(x) ? 0x8000u : 0u;
    if (isnan(x))
        return (uint16_t)(sign | 0x7e00u);
    double r = round_to_format(x, 11, -14, F16_MAX);
    if (isinf(r))
        return (uint16_t)(sign | 0x7c00u);
    double a = fabs(r);
    if (a == 0.0)
        return sign;
    int e;
    frexp(a, &e);
    int lead = e - 1;
    if (lead < -14) /* subnormal: a = m * 2^-24 */
        return (uint16_t)(sign | (uint16_t)ldexp(a, 24));
    uint16_t mant = (uint16_t)(ldexp(a, -lead) * 1024.0 - 1024.0);
    return (uint16_t)(sign | (uint16_t)((lead + 15) << 10) | mant);
}

double mc_f16_to_f64(uint16_t h)
{
    int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    double s = (h & 0x8000u) ? -1.0 : 1.0;
    if (exp == 0x1f)
        return mant ? NAN : s * INFINITY;
    if (exp == 0)
        return s * ldexp((double)mant, -24);
    return s * ldexp(1024.0 + mant, exp - 25);
}

uint16_t mc_bf16_from_f64(double x)
{
    float f;
    if (isnan(x)) {
        f = NAN;
    } else {
        /* exact: the rounded value has 8 significant bits within float32's range */
        f = (float)round_to_format(x, 8, -126, BF16_MAX);
    }
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    if (isnan(x))
        bits |= 0x00400000u;
    return (uint16_t)(bits >> 16);
}

double mc_bf16_to_f64(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return (double)f;
}

void mc_dtype_from_f64(enum mc_dtype dtype, const double *src, void *dst, size_t n)
{
    switch (dtype) {
    case MC_DTYPE_F64:
        memcpy(dst, src, n * sizeof(double));
        break;
    case MC_DTYPE_F32:
        for (size_t i = 0; i < n; i++)
            ((float *)dst)[i] = (float)src[i];
        break;
    case MC_DTYPE_F16:
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = mc_f16_from_f64(src[i]);
        break;
    case MC_DTYPE_BF16:
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = mc_bf16_from_f64(src[i]);
        break;
    }
}

void mc_dtype_to_f64(enum mc_dtype dtype, const void *src, double *dst, size_t n)
{
    switch (dtype) {
    case MC_DTYPE_F64:
        memcpy(dst, src, n * sizeof(double));
        break;
    case MC_DTYPE_F32:
        for (size_t i = 0; i < n; i++)
            dst[i] = (double)((const float *)src)[i];
        break;
    case MC_DTYPE_F16:
        for (size_t i = 0; i < n; i++)
            dst[i] = mc_f16_to_f64(((const uint16_t *)src)[i]);
        break;
    case MC_DTYPE_BF16:
        for (size_t i = 0; i < n; i++)
            dst[i] = mc_bf16_to_f64(((const uint16_t *)src)[i]);
        break;
    }
}

double mc_dtype_round(enum mc_dtype dtype, double x)
{
    switch (dtype) {
    case MC_DTYPE_F64:
        return x;
    case MC_DTYPE_F32:
        return (double)(float)x;
    case MC_DTYPE_F16:
        return mc_f16_to_f64(mc_f16_from_f64(x));
    case MC_DTYPE_BF16:
        return mc_bf16_to_f64(mc_bf16_from_f64(x));
    }
    return x;
}

void mc_dtype_fill_nan(enum mc_dtype dtype, void *buf, size_t n)
{
    switch (dtype) {
    case MC_DTYPE_F64:
        for (size_t i = 0; i < n; i++)
            ((double *)buf)[i] = NAN;
        break;
    case MC_DTYPE_F32:
        for (size_t i = 0; i < n; i++)
            ((float *)buf)[i] = NAN;
        break;
    case MC_DTYPE_F16:
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)buf)[i] = 0x7e00u;
        break;
    case MC_DTYPE_BF16:
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)buf)[i] = 0x7fc0u;
        break;
    }
}

int mc_dtype_exact_bf16(double x)
{
    return mc_bf16_to_f64(mc_bf16_from_f64(x)) == x;
}

int mc_dtype_exact_f16(double x)
{
    return mc_f16_to_f64(mc_f16_from_f64(x)) == x;
}
