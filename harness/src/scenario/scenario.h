/*
 * scenario.h — the scenario engine (docs/scenarios.md §2): drives one backend, at one dtype, through one
 * scenario of a case, against the case's golden, and records one result per compared tensor.
 *
 * Every forward gets its output NaN-poisoned first and every cache export its buffers NaN-poisoned,
 * so an element a backend forgot to write fails. Outputs are compared at every forward, cache states
 * at every position the run passes through that the golden holds a state for.
 */
#ifndef MC_SCENARIO_H
#define MC_SCENARIO_H

#include "base/error.h"
#include "case/case.h"
#include "golden/golden.h"
#include "verdict/check.h"

/* Checks that a scenario's parameters fit the golden (lengths, batch, mask); MC_ERR_INPUT naming the
 * case file, the scenario's line:column and the parameter otherwise. */
enum mc_err_code mc_scenario_validate(const struct mc_case *c, const struct mc_scenario_spec *spec,
                                      const struct mc_golden *g, struct mc_error *err);

/* The MC_ERR_INPUT of a scenario parameter that does not fit: "<case file>:<line>:<column>: in
 * 'scenarios.<name>': <what> (golden <path>)", `what` from fmt (printf, cut at 511 bytes). Every
 * validator of scenario parameters (mc_scenario_validate, stackcheck.c's) words its refusals so. */
enum mc_err_code mc_scenario_bad_param(const struct mc_case *c, const struct mc_scenario_spec *sp,
                                       struct mc_error *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Runs one check. Backend failures become res->status (ERROR / UNSUPPORTED); the return value is an
 * error only for problems of the inputs (tolerance missing, ...) or memory. */
enum mc_err_code mc_scenario_run(const struct mc_scenario_ctx *ctx, struct mc_check_result *res,
                                 struct mc_error *err);

#endif
