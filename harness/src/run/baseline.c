/* baseline.c — drift against a baseline report (see baseline.h). */
#include "run/baseline.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "family/family.h"

double mc_drift_ratio(double new_v, double old_v, double floor)
{
    if (!isfinite(old_v))
        return isfinite(new_v) ? 0.0 : 1.0;
    if (!isfinite(new_v))
        return INFINITY;
    double den = old_v > floor ? old_v : floor, num = new_v > floor ? new_v : floor;
    if (den <= 0.0)
        return 1.0;
    return num / den;
}

void mc_drift_ratios(double new_headroom, double old_headroom, double new_abs, double old_abs, double atol,
                     double *headroom_ratio, double *abs_ratio)
{
    *headroom_ratio = mc_drift_ratio(new_headroom, old_headroom, MC_DRIFT_FLOOR);
    *abs_ratio = mc_drift_ratio(new_abs, old_abs, MC_DRIFT_FLOOR * (atol > 0 ? atol : 0.0));
}

static int push_key(char ***list, int *n, const char *key)
{
    char **p = realloc(*list, (size_t)(*n + 1) * sizeof *p);
    if (p == NULL)
        return -1;
    *list = p;
    if ((p[*n] = mc_strdup(key)) == NULL)
        return -1;
    (*n)++;
    return 0;
}

enum mc_err_code mc_baseline_apply(const struct mc_report_doc *base, double max_drift, struct mc_run_report *rep,
                                   struct mc_baseline_result *out, struct mc_error *err)
{
    memset(out, 0, sizeof *out);
    out->path = base->path;
    out->max_drift = max_drift;
    unsigned char *seen = calloc((size_t)base->n_records + 1, 1);
    int cap = 0, cap_ratios = 0;
    if (seen == NULL)
        return mc_error_set(err, MC_ERR_NOMEM, "out of memory");
    for (int i = 0; i < rep->n_checks && err->code == MC_ERR_NONE; i++) {
        struct mc_check_result *r = &rep->checks[i];
        int n = r->n_tensors ? r->n_tensors : 1, drifted = 0;
        for (int t = 0; t < n; t++) {
            const struct mc_tensor_result *tr = r->n_tensors ? &r->tensors[t] : NULL;
            char key[1024];
            mc_report_key(key, sizeof key, r->case_id, mc_scenario_name(r->scenario), r->backend,
                          mc_dtype_name(r->dtype), tr ? tr->name : "");
            const struct mc_report_record *b = mc_report_find(base, key);
            if (b == NULL) {
                if (push_key(&out->missing_in_baseline, &out->n_missing_in_baseline, key) != 0)
                    mc_error_set(err, MC_ERR_NOMEM, "out of memory");
                continue;
            }
            seen[b - base->records] = 1;
            if (tr == NULL || !b->has_numbers)
                continue;
            out->n_compared++;
            double rh, ra;
            mc_drift_ratios(tr->stats.headroom, b->headroom, tr->stats.max_abs_err, b->max_abs_err, tr->tol.atol, &rh,
                            &ra);
            struct mc_drift rec = {.check = i,
                                   .tensor = t,
                                   .ratio = rh > ra ? rh : ra,
                                   .headroom_ratio = rh,
                                   .abs_ratio = ra,
                                   .old_headroom = b->headroom,
                                   .old_max_abs_err = b->max_abs_err};
            if (out->n_ratios == cap_ratios) {
                cap_ratios = cap_ratios ? 2 * cap_ratios : 64;
                struct mc_drift *d = realloc(out->ratios, (size_t)cap_ratios * sizeof *d);
                if (d == NULL) {
                    mc_error_set(err, MC_ERR_NOMEM, "out of memory");
                    break;
                }
                out->ratios = d;
            }
            out->ratios[out->n_ratios++] = rec;
            /* a check that failed (or errored) keeps its own verdict: drift is news only about a pass */
            if (r->status != MC_CHECK_PASS || !(rh > max_drift || ra > max_drift))
                continue;
            if (out->n_drifts == cap) {
                cap = cap ? 2 * cap : 16;
                struct mc_drift *d = realloc(out->drifts, (size_t)cap * sizeof *d);
                if (d == NULL) {
                    mc_error_set(err, MC_ERR_NOMEM, "out of memory");
                    break;
                }
                out->drifts = d;
            }
            out->drifts[out->n_drifts++] = rec;
            drifted = 1;
        }
        if (drifted) {
            rep->counts[r->status]--;
            r->status = MC_CHECK_DRIFT;
            rep->counts[MC_CHECK_DRIFT]++;
        }
    }
    for (int k = 0; k < base->n_records && err->code == MC_ERR_NONE; k++)
        if (!seen[k] && push_key(&out->missing_in_run, &out->n_missing_in_run, base->records[k].key) != 0)
            mc_error_set(err, MC_ERR_NOMEM, "out of memory");
    free(seen);
    return err->code;
}

void mc_baseline_result_free(struct mc_baseline_result *r)
{
    for (int i = 0; i < r->n_missing_in_baseline; i++)
        free(r->missing_in_baseline[i]);
    for (int i = 0; i < r->n_missing_in_run; i++)
        free(r->missing_in_run[i]);
    free(r->missing_in_baseline);
    free(r->missing_in_run);
    free(r->drifts);
    free(r->ratios);
    memset(r, 0, sizeof *r);
}

const struct mc_drift *mc_baseline_drift_of(const struct mc_baseline_result *r, int check, int tensor)
{
    if (r == NULL)
        return NULL;
    for (int i = 0; i < r->n_drifts; i++)
        if (r->drifts[i].check == check && r->drifts[i].tensor == tensor)
            return &r->drifts[i];
    return NULL;
}
