/*
 * f32io.h — the f32 copies of a forward's x and y in the cpu backend. Every cpu family computes in
 * f32: for a bf16 / f16 model, x is converted into an f32 copy before the math and y is computed into
 * one and rounded to the model dtype after it; an f32 model's x and y are used in place. One struct
 * per call, zero-initialized, so that the call's clean-up may free it on every path.
 *
 *     struct mc_cpu_f32io io = {0};
 *     ... mc_cpu_f32io_alloc(&io, m->dtype, M * D) with the other allocations ...
 *     mc_cpu_f32io_in(&io, args->x, args->y, &x, &y);   the math reads x, writes y
 *     mc_cpu_f32io_out(&io, args->y);
 *   cleanup:
 *     mc_cpu_f32io_free(&io);
 */
#ifndef MC_KERNELS_CPU_F32IO_H
#define MC_KERNELS_CPU_F32IO_H

#include <stddef.h>
#include <stdint.h>

#include "mixcheck/backend.h"

struct mc_cpu_f32io {
    enum mc_dtype dtype; /* the model's storage dtype */
    size_t n;            /* elements of x and of y */
    float *xf, *yf;      /* [n] each; NULL for an f32 model */
};

/* Allocates io's f32 copies of n elements for a model of dtype (none for F32). Returns 0, or -1
 * when out of memory (mc_cpu_f32io_free still frees what was allocated). */
int mc_cpu_f32io_alloc(struct mc_cpu_f32io *io, enum mc_dtype dtype, int64_t n);

/* The f32 x and y the math runs on: *xf = x converted into io->xf and *yf = io->yf, or x and y
 * themselves for an f32 model. */
void mc_cpu_f32io_in(const struct mc_cpu_f32io *io, const void *x, void *y, const float **xf, float **yf);

/* y (the model dtype) = io->yf rounded to it; nothing for an f32 model (y was written in place). */
void mc_cpu_f32io_out(const struct mc_cpu_f32io *io, void *y);

void mc_cpu_f32io_free(struct mc_cpu_f32io *io);

#endif
