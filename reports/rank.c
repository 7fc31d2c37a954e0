/* rank.c — see rank.h. */
#include "rank.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnosis/diagnose.h"
#include "family/family.h"

void mc_rank_check_id(const struct mc_check_result *r, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s/%s/%s", r->case_id, mc_scenario_name(r->scenario), r->backend, mc_dtype_name(r->dtype));
}

int mc_rank_is_failure(enum mc_check_status status)
{
    return status == MC_CHECK_FAIL || status == MC_CHECK_ERROR || status == MC_CHECK_NONDETERMINISTIC ||
           status == MC_CHECK_DRIFT;
}

int mc_rank_worst_tensor(const struct mc_check_result *r)
{
    int w = -1;
    for (int i = 0; i < r->n_tensors; i++)
        if (w < 0 || r->tensors[i].stats.headroom > r->tensors[w].stats.headroom)
            w = i;
    return w;
}

/* Insertion into a short sorted list: keeps the `max` largest keys, earlier entries first on ties. */
static int keep_top(double *keys, int *vals, int n, int max, double key, int val)
{
    if (n == max && !(key > keys[n - 1]))
        return n;
    int at = n < max ? n : max - 1;
    while (at > 0 && key > keys[at - 1]) {
        keys[at] = keys[at - 1];
        vals[at] = vals[at - 1];
        at--;
    }
    keys[at] = key;
    vals[at] = val;
    return n < max ? n + 1 : n;
}

int mc_rank_slowest(const struct mc_run_report *rep, int *idx, int max)
{
    if (max <= 0)
        return 0;
    double *keys = malloc((size_t)max * sizeof *keys);
    if (keys == NULL)
        return 0;
    int n = 0;
    for (int i = 0; i < rep->n_checks; i++)
        n = keep_top(keys, idx, n, max, rep->checks[i].duration_s, i);
    free(keys);
    return n;
}

int mc_rank_most_drifted(const struct mc_run_report *rep, const struct mc_drift **out, int max)
{
    const struct mc_baseline_result *b = rep->baseline;
    if (b == NULL || max <= 0)
        return 0;
    double *keys = malloc((size_t)max * sizeof *keys);
    int *idx = malloc((size_t)max * sizeof *idx);
    int n = 0;
    if (keys != NULL && idx != NULL)
        for (int i = 0; i < b->n_ratios; i++)
            if (b->ratios[i].ratio > 1.0)
                n = keep_top(keys, idx, n, max, b->ratios[i].ratio, i);
    for (int i = 0; i < n; i++)
        out[i] = &b->ratios[idx[i]];
    free(keys);
    free(idx);
    return n;
}

const struct mc_diagnosis *mc_rank_diagnosis_of(const struct mc_run_report *rep, const struct mc_check_result *r)
{
    for (int i = 0; i < rep->n_diagnoses; i++) {
        const struct mc_diagnosis *d = &rep->diagnoses[i];
        if (strcmp(d->case_id, r->case_id) == 0 && d->backend && r->backend && strcmp(d->backend, r->backend) == 0)
            return d;
    }
    return NULL;
}

void mc_rank_diagnosis_text(const struct mc_diagnosis *d, char *line, size_t len, char *also, size_t also_len)
{
    mc_diag_line(d, line, len, also, also_len);
}

int mc_rank_diagnosis_summary_text(const struct mc_run_report *rep, int i, char *line, size_t len, char *also,
                                   size_t also_len)
{
    if (!mc_diagnose_backend_first(rep->diagnoses, i))
        return 0;
    char what[2048];
    int cases = 0, first = 0;
    if (!mc_diag_summary_line(rep->diagnoses, rep->n_diagnoses, rep->diagnoses[i].backend, what, sizeof what, also,
                              also_len, &cases, &first, NULL))
        return 0;
    snprintf(line, len, "over %d diagnosed case(s) (first in %d): %s", cases, first, what);
    return 1;
}
