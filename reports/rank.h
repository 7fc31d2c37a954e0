/*
 * rank.h — what the summary reports (Markdown, HTML) pick from a run report: the failing checks, the
 * most-drifted tensors against a baseline, the slowest checks, and a check's id and worst tensor.
 */
#ifndef MC_REPORT_RANK_H
#define MC_REPORT_RANK_H

#include <stddef.h>

#include "run/baseline.h"
#include "run/runner.h"

/* "case/scenario/backend/dtype" */
void mc_rank_check_id(const struct mc_check_result *r, char *buf, size_t len);

/* 1 for a verdict a gate fails on: fail, error, nondeterministic, drift. */
int mc_rank_is_failure(enum mc_check_status status);

/* The index of the tensor with the largest headroom (the first on ties), or -1 without tensors. */
int mc_rank_worst_tensor(const struct mc_check_result *r);

/* Up to `max` indexes of checks, slowest first (ties in run order); returns how many. */
int mc_rank_slowest(const struct mc_run_report *rep, int *idx, int max);

/* Up to `max` pointers to the baseline's ratio records (baseline.h, every tensor compared), largest
 * ratio first, only those above 1 (grown); returns how many (0 without a baseline). */
int mc_rank_most_drifted(const struct mc_run_report *rep, const struct mc_drift **out, int max);

#endif
