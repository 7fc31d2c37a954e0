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

/* "also possible: A (id); B (id)" for the classes top[from..n) */
static void also_text(const struct mc_diag_match *top, int n, int from, char *also, size_t len)
{
    size_t used = 0;
    also[0] = '\0';
    for (int k = from; k < n && used < len; k++) {
        int w = snprintf(also + used, len - used, "%s %s (%s)", k > from ? ";" : "also possible:", top[k].sig->title,
                         top[k].sig->id);
        if (w < 0)
            break;
        used += (size_t)w;
    }
}

void mc_rank_diagnosis_text(const struct mc_diagnosis *d, char *line, size_t len, char *also, size_t also_len)
{
    also[0] = '\0';
    if (d->n == 0) {
        snprintf(line, len, "no known bug class matches these failures");
        return;
    }
    mc_diag_format_best(d->top, d->n, line, len);
    also_text(d->top, d->n, mc_diag_named_in_line(d->top, d->n), also, also_len);
}

int mc_rank_diagnosis_summary_text(const struct mc_run_report *rep, int i, char *line, size_t len, char *also,
                                   size_t also_len)
{
    if (!mc_diagnose_backend_first(rep->diagnoses, i))
        return 0;
    struct mc_diag_match top[MC_DIAG_TOP];
    int cases = 0, first = 0;
    int n = mc_diagnose_summary(rep->diagnoses, rep->n_diagnoses, rep->diagnoses[i].backend, top, &cases, &first);
    if (n == 0)
        return 0;
    char what[1024];
    mc_diag_format_summary(top, n, cases, first, what, sizeof what);
    snprintf(line, len, "over %d diagnosed case(s) (first in %d): %s", cases, first, what);
    /* as the console: the line names one class when most cases name it first, else two */
    also_text(top, n, 2 * first > cases ? 1 : n > 1 ? 2 : 1, also, also_len);
    return 1;
}
