/*
 * shard.h — splitting the checks of a run over N shards (`mixcheck run --shard K/N`, Bazel's
 * TEST_TOTAL_SHARDS / TEST_SHARD_INDEX): every selected check gets an expected cost, and the checks are
 * dealt out by longest-processing-time: most expensive first (ties by id), each to the shard with the
 * least cost so far (ties to the lowest shard). A group that alone costs more than 1/N of the whole is dealt out
 * check by check instead. The split depends only on the set of checks, so every
 * shard computes the same plan on its own, the shards together run each check exactly once, and their
 * costs differ by at most one group's.
 *
 * The expected cost of a check is the size of its case's golden file (what the forwards read and compare
 * scales with it) times a weight per scenario: the scenario's mean time per golden byte in the bundled
 * suite relative to prefill (measured here; chunk_size_invariance 2.6, right_padded_batch 2.3, ...,
 * 1 for a scenario the table does not name).
 */
#ifndef MC_SHARD_H
#define MC_SHARD_H

#include <stdint.h>

#include "base/error.h"

struct mc_shard_item {
    char *id;          /* "case/scenario/backend/dtype" (owned by the caller) */
    char *group;       /* "case/dtype": dealt out together (owned by the caller) */
    double cost;
};

/* The checks of one shard: their ids, sorted. */
struct mc_shard_plan {
    int index, count;  /* 1-based shard K of N */
    char **ids;        /* borrowed from the items */
    int n;
    double cost, max_cost; /* this shard's expected cost; the largest shard's */
};

/* The relative cost weight of a scenario (by name). */
double mc_shard_scenario_weight(const char *scenario);

/* Deals items[0..n) into `count` shards and keeps those of shard `index` (1..count). Sorts items. */
enum mc_err_code mc_shard_assign(struct mc_shard_item *items, int n, int index, int count, struct mc_shard_plan *out,
                                 struct mc_error *err);
/* 1 when the check id is in the plan's shard. */
int mc_shard_has(const struct mc_shard_plan *p, const char *id);
void mc_shard_plan_free(struct mc_shard_plan *p);

#endif
