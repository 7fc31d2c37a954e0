/*
 * weightset.h — a golden's weights converted once to a storage dtype. The runner builds one per
 * (case, dtype) and every check of the case copies from it, so a large layer is not re-rounded to
 * f16/bf16 for each check; the pristine copy is also what "the backend did not write its weights"
 * is checked against.
 */
#ifndef MC_WEIGHTSET_H
#define MC_WEIGHTSET_H

#include "base/error.h"
#include "golden/golden.h"
#include "mixcheck/backend.h"

struct mc_weightset {
    enum mc_dtype dtype;
    int n;        /* = golden n_weights, same order */
    void **data;  /* data[i]: the weight's elements in dtype */
};

enum mc_err_code mc_weightset_build(const struct mc_golden *g, enum mc_dtype dtype, struct mc_weightset *ws,
                                    struct mc_error *err);
void mc_weightset_free(struct mc_weightset *ws);

#endif
