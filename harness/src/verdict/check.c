/* check.c — see check.h. */
#include "verdict/check.h"

#include <stdio.h>
#include <string.h>

const char *mc_check_status_name(enum mc_check_status status)
{
    switch (status) {
    case MC_CHECK_PASS:
        return "pass";
    case MC_CHECK_FAIL:
        return "fail";
    case MC_CHECK_ERROR:
        return "error";
    case MC_CHECK_UNSUPPORTED:
        return "unsupported";
    case MC_CHECK_SKIPPED:
        return "skipped";
    case MC_CHECK_NONDETERMINISTIC:
        return "nondeterministic";
    case MC_CHECK_DRIFT:
        return "drift";
    case MC_CHECK_STATUS_COUNT:
        break;
    }
    return "unknown";
}

const char *mc_expected_source_name(enum mc_expected_source e)
{
    switch (e) {
    case MC_EXPECTED_GOLDEN:
        return "golden";
    case MC_EXPECTED_F64_REFERENCE:
        return "f64-reference";
    case MC_EXPECTED_SELF:
        return "self";
    }
    return "unknown";
}

void mc_first_stage_format(const struct mc_first_stage *f, char *buf, size_t len)
{
    if (!f->probed) {
        snprintf(buf, len, "no stage probes compared");
        return;
    }
    if (f->name[0] == '\0') {
        snprintf(buf, len,
                 "every probed stage within tolerance over %lld forward%s: the divergence is after the last probe "
                 "(the norm, gate or out_proj) or in the cache update",
                 (long long)f->forwards, f->forwards == 1 ? "" : "s");
        return;
    }
    char idx[96] = "";
    size_t used = 0;
    for (int i = 0; i < f->ndim && used < sizeof idx; i++) {
        int w = snprintf(idx + used, sizeof idx - used, ", %s %lld", f->index_names[i], (long long)f->index[i]);
        used += w > 0 ? (size_t)w : 0;
    }
    snprintf(buf, len,
             "%s: token %lld, batch %lld%s, got %.9g, want %.9g (abs err %.3g, rel err %.3g; atol %.3g, rtol %.3g; "
             "%lld of %lld elements fail) in %s against the %s",
             f->name, (long long)f->token, (long long)f->batch, idx, f->got, f->want, f->abs_err, f->rel_err, f->atol,
             f->rtol, (long long)f->failing, (long long)f->elements, f->call, f->against);
}

void mc_check_verdict(struct mc_check_result *res)
{
    if (res->status != MC_CHECK_PASS)
        return;
    const struct mc_tensor_result *snapshot = NULL;
    for (int i = 0; i < res->n_tensors; i++)
        if (strcmp(res->tensors[i].name, "snapshot") == 0 && !mc_compare_passed(&res->tensors[i].stats))
            snapshot = &res->tensors[i];
    if (snapshot != NULL) {
        /* a copy's run changed its source: the copies were not independent, which explains two runs
         * on them that differ (no nondeterminism verdict) and anything that ran on a copy later */
        res->status = MC_CHECK_FAIL;
        snprintf(res->message, sizeof res->message,
                 "the cache the copies were made from changed while a copy ran (%lld of %lld elements): "
                 "cache_copy shares storage between the copies, or a forward writes its source; other "
                 "differences of this check may come from it",
                 (long long)snapshot->stats.n_fail, (long long)snapshot->stats.n_elems);
        return;
    }
    for (int i = 0; i < res->n_tensors; i++) {
        const struct mc_tensor_result *t = &res->tensors[i];
        if (mc_compare_passed(&t->stats))
            continue;
        if (strcmp(t->name, "determinism") == 0) {
            /* it explains whatever else differs between two paths: say so first */
            res->status = MC_CHECK_NONDETERMINISTIC;
            snprintf(res->message, sizeof res->message,
                     "the same forward on two copies of the same cache gave different results (%lld of %lld "
                     "elements differ): the backend is nondeterministic; other differences of this check may "
                     "come from it",
                     (long long)t->stats.n_fail, (long long)t->stats.n_elems);
            return;
        }
        res->status = MC_CHECK_FAIL;
    }
}
