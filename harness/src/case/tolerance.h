/*
 * tolerance.h — the tolerance-profile loader's entry for a profile named by another file (internal
 * to harness/src; the public API, mc_tolerance_load and friends, is in case.h).
 */
#ifndef MC_TOLERANCE_H
#define MC_TOLERANCE_H

#include "case/case.h"
#include "case/yamldoc.h"

/* As mc_tolerance_load; ref (may be NULL) names the key that pointed at path, so that a profile
 * that cannot be read is reported at that key. */
enum mc_err_code mc_tolerance_load_ref(const char *path, const struct mc_yaml_ref *ref, struct mc_tolerance_profile *p,
                                       struct mc_error *err);

#endif
