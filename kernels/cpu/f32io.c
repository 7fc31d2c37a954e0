/*
 * f32io.c — the f32 copies of a forward's x and y (f32io.h).
 */
#include "f32io.h"

#include <stdlib.h>

#include "common.h"

int mc_cpu_f32io_alloc(struct mc_cpu_f32io *io, enum mc_dtype dtype, int64_t n)
{
    io->dtype = dtype;
    io->n = (size_t)n;
    if (dtype == MC_DTYPE_F32)
        return 0;
    io->xf = malloc(io->n * sizeof *io->xf);
    io->yf = malloc(io->n * sizeof *io->yf);
    return io->xf && io->yf ? 0 : -1;
}

void mc_cpu_f32io_in(const struct mc_cpu_f32io *io, const void *x, void *y, const float **xf, float **yf)
{
    if (io->dtype == MC_DTYPE_F32) {
        *xf = x;
        *yf = y;
        return;
    }
    mc_cpu_to_f32(io->dtype, x, io->xf, io->n);
    *xf = io->xf;
    *yf = io->yf;
}

void mc_cpu_f32io_out(const struct mc_cpu_f32io *io, void *y)
{
    if (io->dtype != MC_DTYPE_F32)
        mc_cpu_from_f32(io->dtype, io->yf, y, io->n);
}

void mc_cpu_f32io_free(struct mc_cpu_f32io *io)
{
    free(io->yf);
    free(io->xf);
    io->xf = io->yf = NULL;
}
