/*
 * rank.h — what the summary reports (Markdown, HTML) pick from a run report: the failing checks, the
 * most-drifted tensors against a baseline, the slowest checks, a check's id and worst tensor, and the
 * bug-class diagnosis of a check's case and backend in the console's words.
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

/* The bug-class diagnosis (diagnose.h) of the case and backend of check r, or NULL (none: nothing of
 * theirs failed). */
const struct mc_diagnosis *mc_rank_diagnosis_of(const struct mc_run_report *rep, const struct mc_check_result *r);

/* A diagnosis in the console's words: `line` as mc_diag_line ("likely: ...", "possibly: ...", "no class
 * fits — facts: ...", "errors, not numbers: ...", "computes in f32 inside — ..."); `also` the classes it
 * names besides, "also possible: <title> (<id>); ..." or "". */
void mc_rank_diagnosis_text(const struct mc_diagnosis *d, char *line, size_t len, char *also, size_t also_len);

/* The run's diagnosis of the backend of rep->diagnoses[i] over all its cases (mc_diagnose_summary), in
 * the console's words: "over N diagnosed case(s) (first in F): likely: ..." and `also` as above.
 * Returns 0 (nothing written) unless i is the first diagnosis of its backend and a class was named. */
int mc_rank_diagnosis_summary_text(const struct mc_run_report *rep, int i, char *line, size_t len, char *also,
                                   size_t also_len);

#endif
