/*
 * casenames.h — the name tables that the case and tolerance-profile schemas share (internal to
 * harness/src); the public lookups over them (mc_scenario_name, mc_dtype_from_name, ...) are
 * declared in case.h.
 */
#ifndef MC_CASENAMES_H
#define MC_CASENAMES_H

#include "case/case.h"

#define MC_CASE_DTYPE_COUNT 4

/* Indexed by enum mc_scenario_kind. */
extern const char *const mc_case_scenario_names[MC_SCENARIO_COUNT];

/* Indexed by enum mc_tensor_kind; index MC_TENSOR_COUNT is the dtype's `default`. */
extern const char *const mc_case_tensor_names[MC_TENSOR_COUNT + 1];

/* In the documentation's order; index i names dtype mc_case_dtypes[i]. */
extern const char *const mc_case_dtype_names[MC_CASE_DTYPE_COUNT];
extern const enum mc_dtype mc_case_dtypes[MC_CASE_DTYPE_COUNT];

#endif
