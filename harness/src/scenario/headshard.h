/*
 * headshard.h — head_shard (docs/scenarios.md §2.19, serving.md S2.11): the heads of the layer split
 * into contiguous shards with their groups, each shard run as a model of its own the way a
 * tensor-parallel rank runs it (its rows of the input projections and the conv, its heads' parameters,
 * the matching columns of out_proj), against the golden: the shards' partial outputs must sum to the
 * layer's output and each shard's cache must be its slice of the layer's cache. A configuration a
 * shard cannot compute alone gets the check `unsupported` with the reason, never a pass.
 */
#ifndef MC_HEADSHARD_H
#define MC_HEADSHARD_H

#include <stddef.h>

#include "case/case.h"
#include "golden/golden.h"
#include "scenario/session.h"

void mc_headshard_run(struct mc_session *s);

/* NULL when `shards` fits the golden's configuration (divides the heads); else why not, into buf. */
const char *mc_headshard_misfit(const struct mc_scenario_spec *sp, const struct mc_golden *g, char *buf, size_t len);

#endif
