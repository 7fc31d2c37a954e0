/*
 * dtype.h — storage types handed to backends: sizes, conversion from and to the harness's float64,
 * rounding to a dtype, and NaN poisoning. f16 and bf16 are rounded from float64 in one step
 * (round-to-nearest-even, no double rounding through float32); overflow gives ±inf.
 */
#ifndef MC_DTYPE_H
#define MC_DTYPE_H

#include <stddef.h>
#include <stdint.h>

#include "mixcheck/backend.h"

size_t mc_dtype_size(enum mc_dtype dtype);

/* dst[i] = src[i] rounded to dtype, stored in dtype's layout. */
void mc_dtype_from_f64(enum mc_dtype dtype, const double *src, void *dst, size_t n);
/* dst[i] = the exact float64 value of src[i]. */
void mc_dtype_to_f64(enum mc_dtype dtype, const void *src, double *dst, size_t n);
/* The float64 value x becomes when stored in dtype. */
double mc_dtype_round(enum mc_dtype dtype, double x);
/* Fills n elements with the harness's planted NaN in dtype (poison before a backend writes). */
void mc_dtype_fill_nan(enum mc_dtype dtype, void *buf, size_t n);
/* The planted NaN as a float64: quiet, with payload bit 50 set (fraction 0xc000000000000), which every
 * conversion here and the hardware's keep through f32 / f16 / bf16 and which arithmetic passes on. So a
 * NaN with no payload (only the quiet bit) was made by a backend, never planted (compare.h n_nan_bare);
 * conversions of NaN keep their sign and as much of the payload as the narrower format holds. */
double mc_dtype_nan_planted(void);

uint16_t mc_f16_from_f64(double x);
double mc_f16_to_f64(uint16_t h);
uint16_t mc_bf16_from_f64(double x);
double mc_bf16_to_f64(uint16_t h);
/* 1 when the finite value x is exactly a bfloat16 / binary16 value (rounding it there and back keeps it). */
int mc_dtype_exact_bf16(double x);
int mc_dtype_exact_f16(double x);

#endif
