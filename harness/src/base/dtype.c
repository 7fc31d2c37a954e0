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

/* The conversions work on the bits (frexp/ldexp cost several times more, and every reduced-precision
 * check converts each tensor through them).
 *
 * Rounds |x| (bits a, not NaN or inf) to `mbits` fraction bits with minimum normal exponent emin,
 * round-to-nearest-even: the format's bits without the sign (the exponent field may overflow). */
static uint32_t round_bits(uint64_t a, int mbits, int emin)
{
    int e = (int)(a >> 52) - 1023;
    if (e < -1022)
        return 0; /* zero, or a float64 subnormal: far below any 16-bit format's smallest value */
    uint64_t m = (a & 0x000fffffffffffffull) | 0x0010000000000000ull;
    int q = (e < emin ? emin : e) - mbits; /* the exponent of the result's last bit */
    int s = 52 + q - e;                    /* bits of m below it */
    if (s >= 64)
        return 0;
    uint64_t r = m >> s, rem = m & ((1ull << s) - 1), half = 1ull << (s - 1);
    if (rem > half || (rem == half && (r & 1)))
        r++;
    /* normal: the implicit bit of r adds one to the exponent field (and a carry out of the fraction
     * lands there too); subnormal: r is the fraction itself (r = 2^mbits is the smallest normal) */
    return e < emin ? (uint32_t)r : ((uint32_t)(e - emin) << mbits) + (uint32_t)r;
}
uint16_t mc_f16_from_f64(double x)
{
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    uint16_t sign = (uint16_t)((b >> 48) & 0x8000u);
    uint64_t a = b & 0x7fffffffffffffffull;
    if (a > 0x7ff0000000000000ull) /* NaN: quiet, the payload's top 9 bits kept */
        return (uint16_t)(sign | 0x7e00u | (uint16_t)((a >> 42) & 0x1ffu));
    if (a == 0x7ff0000000000000ull)
        return (uint16_t)(sign | 0x7c00u);
    uint32_t r = round_bits(a, 10, -14);
    return (uint16_t)(sign | (r >= 0x7c00u ? 0x7c00u : r));
}
double mc_f16_to_f64(uint16_t h)
{
    uint64_t sign = (uint64_t)(h & 0x8000u) << 48;
    int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    double v;
    if (exp == 0x1f) {
        if (mant == 0)
            return (h & 0x8000u) ? -INFINITY : INFINITY;
        /* a NaN keeps its sign and payload, as the hardware's conversions do (compare.h n_nan_bare) */
        uint64_t nan_bits = sign | 0x7ff0000000000000ull | (uint64_t)mant << 42;
        memcpy(&v, &nan_bits, sizeof v);
        return v;
    }
    if (exp == 0) {
        v = (double)mant * 0x1p-24; /* exact */
        return (h & 0x8000u) ? -v : v;
    }
    uint64_t bits = sign | ((uint64_t)(exp - 15 + 1023) << 52) | ((uint64_t)mant << 42);
    memcpy(&v, &bits, sizeof v);
    return v;
}
uint16_t mc_bf16_from_f64(double x)
{
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    uint16_t sign = (uint16_t)((b >> 48) & 0x8000u);
    uint64_t a = b & 0x7fffffffffffffffull;
    if (a > 0x7ff0000000000000ull) /* NaN: quiet, the payload's top 6 bits kept */
        return (uint16_t)(sign | 0x7fc0u | (uint16_t)((a >> 45) & 0x3fu));
    if (a == 0x7ff0000000000000ull)
        return (uint16_t)(sign | 0x7f80u);
    uint32_t r = round_bits(a, 7, -126);
    return (uint16_t)(sign | (r >= 0x7f80u ? 0x7f80u : r));
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

#define NAN_PLANTED_F64 0x7ffc000000000000ull
#define NAN_PLANTED_F32 0x7fe00000u
#define NAN_PLANTED_F16 0x7f00u
#define NAN_PLANTED_BF16 0x7fe0u

double mc_dtype_nan_planted(void)
{
    uint64_t bits = NAN_PLANTED_F64;
    double v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

void mc_dtype_fill_nan(enum mc_dtype dtype, void *buf, size_t n)
{
    const uint64_t f64 = NAN_PLANTED_F64;
    const uint32_t f32 = NAN_PLANTED_F32;
    const uint16_t f16 = NAN_PLANTED_F16, bf16 = NAN_PLANTED_BF16;
    switch (dtype) {
    case MC_DTYPE_F64:
        for (size_t i = 0; i < n; i++)
            memcpy((unsigned char *)buf + 8 * i, &f64, 8);
        break;
    case MC_DTYPE_F32:
        for (size_t i = 0; i < n; i++)
            memcpy((unsigned char *)buf + 4 * i, &f32, 4);
        break;
    case MC_DTYPE_F16:
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)buf)[i] = f16;
        break;
    case MC_DTYPE_BF16:
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)buf)[i] = bf16;
        break;
    }
}

/* On the grid without a round trip: bf16 values are the floats whose low 16 bits are zero; f16 values are
 * floats of at most 11 significant bits within ±65504 and multiples of 2^-24 below 2^-14 (or ±inf). Equal
 * to the round trip through mc_*_from_f64 on 10^8 values (every f16, bf16 and float pattern and their
 * neighbours among them). */
int mc_dtype_exact_bf16(double x)
{
    float f = (float)x;
    if (!((double)f == x))
        return 0; /* not a float (NaN included) */
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return (b & 0xffffu) == 0;
}

int mc_dtype_exact_f16(double x)
{
    float f = (float)x;
    if (!((double)f == x))
        return 0;
    double a = fabs(x);
    if (a > 65504.0)
        return isinf(a);
    if (a < 0x1p-14)
        return a * 0x1p24 == nearbyint(a * 0x1p24); /* a multiple of the subnormal quantum */
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return (b & 0x1fffu) == 0;
}
