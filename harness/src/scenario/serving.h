/*
 * serving.h — the serving-path scenarios (docs/scenarios.md §2.13-2.16, docs/semantics.md §9,
 * S2): packed_prefill, slot_pool, mixed_step and prefix_resume, driving a backend's forward_packed on
 * state pools with the session machinery of session.h. Expected values come from the golden: the
 * outputs of every row, and caches at the positions it holds (/expected/state_positions).
 */
#ifndef MC_SERVING_H
#define MC_SERVING_H

#include <stddef.h>

#include "case/case.h"
#include "golden/golden.h"
#include "scenario/session.h"

/* Runs the serving scenario s->ctx->spec->kind. A backend without forward_packed gets the check
 * `unsupported` ("backend X has no packed call (forward_packed)"). */
void mc_serving_run(struct mc_session *s);

/* Fills `elems` elements of a raw pool image (f64 when esz is 8, else f32) with a NaN whose payload
 * names pool row `row`, so a row copied elsewhere shows as changed. */
void mc_serving_poison_row(void *raw, size_t esz, int64_t elems, int64_t row);

/* NULL when the scenario's parameters fit the golden; else why not, written into buf [len]. */
const char *mc_serving_misfit(const struct mc_scenario_spec *sp, const struct mc_golden *g, char *buf, size_t len);

#endif
