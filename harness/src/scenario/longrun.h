/*
 * longrun.h — the scenarios that run past what a golden holds (docs/scenarios.md §2.17, §2.18;
 * serving.md S2.9, S2.10): long_decode (thousands of single-token steps) and length_sweep (prefills
 * of odd and large lengths). Their inputs are drawn from the scenario's seed, exact in bf16 and f16,
 * and their expected values are the family's reference backend run in float64 on the same inputs
 * (refrun.h mc_refrun_inputs): every tensor they compare reports `expected: f64-reference`.
 */
#ifndef MC_LONGRUN_H
#define MC_LONGRUN_H

#include <stddef.h>

#include "case/case.h"
#include "golden/golden.h"
#include "scenario/session.h"

/* Runs long_decode or length_sweep (s->ctx->spec->kind). */
void mc_longrun_run(struct mc_session *s);

/* NULL when the scenario's parameters fit the golden's shape; else why not, written into buf [len]. */
const char *mc_longrun_misfit(const struct mc_scenario_spec *sp, const struct mc_golden *g, char *buf, size_t len);

#endif
