/*
 * array.h — a dense float64 array: what the goldens (golden.h, stackgolden.h) hold their tensors in.
 * h5read.h reads one from a dataset (mc_h5_array_read).
 */
#ifndef MC_ARRAY_H
#define MC_ARRAY_H

#include <stdint.h>

#include "family/family.h" /* MC_MAX_DIMS */

/* A dense float64 array owned by its holder. */
struct mc_array {
    int ndim;
    int64_t dims[MC_MAX_DIMS];
    double *data;
};

int64_t mc_array_elems(const struct mc_array *a);

/* The largest finite |value| of the array (0 for an empty one): a tensor's magnitude (case/tolerance.h). */
double mc_array_max_abs(const struct mc_array *a);

#endif
