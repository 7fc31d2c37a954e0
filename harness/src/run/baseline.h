/*
 * baseline.h — a run compared with an earlier report (`mixcheck run --baseline REPORT.json
 * --max-drift R`): each tensor of each check is matched with the (case, scenario, backend, dtype,
 * tensor) record of the baseline, and a check that passed becomes MC_CHECK_DRIFT when the headroom
 * or the max abs error of one of its tensors grew by more than R times, even within tolerance.
 * Checks on one side only are listed and fail nothing by themselves.
 *
 * The ratio is max(new, floor) / max(old, floor), the floor 1e-3 of the tolerance: 1e-3 for the
 * headroom (which is in units of the tolerance bound) and 1e-3 x atol for the max abs error. Without
 * it any rounding at all after an exact result (old 0) would be an infinite drift; with it an error
 * has to reach R/1000 of the tolerance to count, and two numbers both under the floor (0 and 0
 * included) compare as equal, ratio 1. A
 * max abs error whose floor is 0 (atol 0, old 0) is judged by the headroom alone. A non-finite new
 * value over a finite old one is an infinite ratio; an old non-finite value compares as no drift
 * (ratio 1 when both are non-finite, 0 otherwise).
 */
#ifndef MC_BASELINE_H
#define MC_BASELINE_H

#include "base/error.h"
#include "run/reportread.h"
#include "run/runner.h"

#define MC_DRIFT_FLOOR 1e-3

/* The drift ratio of one number (see above); floor <= 0 with old == 0 gives 1 (not judged). Only
 * the ratio's size is compared with R: values under the floor are as good as the floor. */
double mc_drift_ratio(double new_v, double old_v, double floor);

/* The two ratios of a tensor: headroom, and max abs error (its floor MC_DRIFT_FLOOR x atol). */
void mc_drift_ratios(double new_headroom, double old_headroom, double new_abs, double old_abs, double atol,
                     double *headroom_ratio, double *abs_ratio);

struct mc_drift {
    int check, tensor;     /* indexes into the run report */
    double ratio;          /* the larger of the two */
    double headroom_ratio, abs_ratio;
    double old_headroom, old_max_abs_err;
};

struct mc_baseline_result {
    const char *path;      /* borrowed */
    double max_drift;
    int n_compared;        /* tensors found on both sides */
    struct mc_drift *drifts; /* every tensor beyond max_drift of a check that passed, in run order */
    int n_drifts;
    struct mc_drift *ratios; /* every tensor compared, drifted or not, in run order (the reports' "most drifted") */
    int n_ratios;
    char **missing_in_baseline; /* keys "case/scenario/backend/dtype/tensor" */
    int n_missing_in_baseline;
    char **missing_in_run;
    int n_missing_in_run;
};

/* Compares the run with the baseline, marks drifted checks (status and counts) and fills out. */
enum mc_err_code mc_baseline_apply(const struct mc_report_doc *base, double max_drift, struct mc_run_report *rep,
                                   struct mc_baseline_result *out, struct mc_error *err);
void mc_baseline_result_free(struct mc_baseline_result *r);

/* The drift record of check i, tensor t, or NULL. */
const struct mc_drift *mc_baseline_drift_of(const struct mc_baseline_result *r, int check, int tensor);

#endif
