/*
 * goldenread.h — what the golden readers (golden.c for mixer goldens, stackgolden.c for model goldens)
 * share on top of h5read.h: reading one float dataset into an mc_array. Owned by golden.c.
 */
#ifndef MC_GOLDENREAD_H
#define MC_GOLDENREAD_H

#include "golden/golden.h"
#include "golden/h5read.h"

/* Dataset `name` under `rule` (shape) and `want` (element type) into a, NaN/Inf refused; the reader's
 * error code otherwise (a->data set once read, freed by the array's holder). */
enum mc_err_code mc_golden_array_read(struct mc_h5_reader *r, const char *name, enum mc_h5_want want,
                                      const struct mc_h5_shape_rule *rule, struct mc_array *a);

#endif
