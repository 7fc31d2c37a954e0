/* console.c — the console report (see report.h). */
#include <math.h>
#include <string.h>

#include "run/baseline.h"
#include "diagnosis/diagnose.h"
#include "family/family.h"
#include "report.h"

#define C_RESET "\x1b[0m"
#define C_GREEN "\x1b[32m"
#define C_RED "\x1b[31m"
#define C_YELLOW "\x1b[33m"
#define C_DIM "\x1b[2m"

static const char *paint(const struct mc_console *con, const char *code)
{
    return con->color ? code : "";
}

static double worst_headroom(const struct mc_check_result *res)
{
    double h = 0.0;
    for (int i = 0; i < res->n_tensors; i++)
        if (res->tensors[i].stats.headroom > h)
            h = res->tensors[i].stats.headroom;
    return h;
}

void mc_report_rerun_command(const struct mc_check_result *res, const char *argv0, const char *options, char *buf,
                             size_t len)
{
    snprintf(buf, len, "%s run %s --scenario %s --backend %s --dtype %s%s%s", argv0, res->case_path,
             mc_scenario_name(res->scenario), res->backend, mc_dtype_name(res->dtype), options && *options ? " " : "",
             options ? options : "");
}

/* "N of M elements outside tolerance, first failing token T (batch b)\n  worst at ...: got, expected" */
static void print_where(const struct mc_console *con, const struct mc_compare_stats *s, const char *indent)
{
    char idx[256];
    mc_compare_format_index(s, idx, sizeof idx);
    if (s->n_nonfinite > 0)
        fprintf(con->out, "%lld non-finite value(s) (%lld NaN), ", (long long)s->n_nonfinite, (long long)s->n_nan);
    fprintf(con->out, "%lld of %lld elements outside tolerance", (long long)s->n_fail, (long long)s->n_elems);
    if (s->first_fail_token >= 0)
        fprintf(con->out, ", first failing token %lld (batch %lld)", (long long)s->first_fail_token,
                (long long)s->first_fail_batch);
    fprintf(con->out, "\n%sworst at %s: got %.9g, expected %.9g\n", indent, idx, s->worst_actual, s->worst_expected);
}

static void print_tensor_diagnosis(const struct mc_console *con, const struct mc_tensor_result *t, int runs)
{
    const struct mc_compare_stats *s = &t->stats;
    fprintf(con->out, "      %s%s%s%s: ", paint(con, C_RED), t->name, paint(con, C_RESET),
            runs > 1 ? " (all runs)" : "");
    print_where(con, s, "        ");
    char atol[96];
    if (t->tol.atol_scale > 0.0) /* the absolute part in units of the compared magnitude (case/tolerance.h) */
        snprintf(atol, sizeof atol, "%.3g (%.3g x max|expected| %.3g%s)", s->atol_applied, t->tol.atol_scale,
                 s->max_abs_expected, t->tol.atol > 0.0 ? " + atol" : "");
    else
        snprintf(atol, sizeof atol, "%.3g", t->tol.atol);
    fprintf(con->out, "        max abs err %.3g, max rel err %.3g, headroom %.3g, tolerance atol %s rtol %.3g, "
                      "cosine %.9f, nmse %.3g, expected: %s\n",
            s->max_abs_err, s->max_rel_err, s->headroom, atol, t->tol.rtol, mc_compare_cosine(s),
            mc_compare_nmse(s), mc_expected_source_name(t->expected));
    const struct mc_logits_metrics *m = &t->logits;
    if (m->present)
        fprintf(con->out, "        %lld positions: top-1 agreement %.4g, top-%d overlap %.4g, KL mean %.3g max %.3g "
                          "(token %lld), max |dlogp| of the golden's top token %.3g\n",
                (long long)m->positions, mc_logits_top1_rate(m), MC_LOGITS_TOPK, mc_logits_topk_overlap(m),
                mc_logits_kl_mean(m), m->kl_max, (long long)m->worst_kl_token, m->logprob_diff_max);
}

void mc_report_console_check(const struct mc_console *con, const struct mc_check_result *res)
{
    const char *word = "PASS", *color = C_GREEN;
    switch (res->status) {
    case MC_CHECK_PASS:
        break;
    case MC_CHECK_FAIL:
        word = "FAIL";
        color = C_RED;
        break;
    case MC_CHECK_ERROR:
        word = "ERROR";
        color = C_RED;
        break;
    case MC_CHECK_UNSUPPORTED:
        word = "UNSUP";
        color = C_YELLOW;
        break;
    case MC_CHECK_SKIPPED:
        word = "SKIP";
        color = C_YELLOW;
        break;
    case MC_CHECK_NONDETERMINISTIC:
        word = "NONDET";
        color = C_RED;
        break;
    case MC_CHECK_DRIFT:
        word = "DRIFT";
        color = C_RED;
        break;
    case MC_CHECK_STATUS_COUNT:
        break;
    }
    /* a check that errored (a crash, a backend error) compared nothing worth a headroom */
    char head[32] = "";
    if (res->status != MC_CHECK_ERROR && res->status != MC_CHECK_UNSUPPORTED && res->status != MC_CHECK_SKIPPED)
        snprintf(head, sizeof head, "headroom %-9.3g", worst_headroom(res));
    fprintf(con->out, "%s%-5s%s %-24s %-22s %-10s %-4s %-18s %s(%.2fs)%s\n", paint(con, color), word,
            paint(con, C_RESET), res->case_id, mc_scenario_name(res->scenario), res->backend,
            mc_dtype_name(res->dtype), head, paint(con, C_DIM), res->duration_s, paint(con, C_RESET));
    if (res->status == MC_CHECK_PASS)
        return;
    if (res->message[0])
        fprintf(con->out, "      %s\n", res->message);
    if (res->diagnosis[0])
        fprintf(con->out, "      %sdiagnosis%s: %s\n", paint(con, C_RED), paint(con, C_RESET), res->diagnosis);
    if (res->status == MC_CHECK_SKIPPED || res->status == MC_CHECK_UNSUPPORTED)
        return;
    for (int i = 0; i < res->n_tensors; i++)
        if (!mc_compare_passed(&res->tensors[i].stats))
            print_tensor_diagnosis(con, &res->tensors[i], (int)res->tensors[i].comparisons);
    if (res->first_fail_tensor[0]) {
        /* that run's own numbers: its first failing token and worst element, not the pooled ones */
        fprintf(con->out, "      first failing run: %s\n        %s: ", res->detail, res->first_fail_tensor);
        print_where(con, &res->first_fail, "          ");
    }
    if (res->first_stage.probed) {
        char stage[512];
        mc_first_stage_format(&res->first_stage, stage, sizeof stage);
        fprintf(con->out, "      %s: %s\n", res->first_stage.name[0] ? "first failing stage" : "stage probes", stage);
    }
    char cmd[2048];
    mc_report_rerun_command(res, con->argv0, con->rerun_options, cmd, sizeof cmd);
    fprintf(con->out, "      rerun: %s\n", cmd);
}

void mc_report_console_baseline(const struct mc_console *con, const struct mc_run_report *rep)
{
    const struct mc_baseline_result *b = rep->baseline;
    if (b == NULL)
        return;
    fprintf(con->out, "\nbaseline %s: %d tensor(s) compared, %d beyond --max-drift %g\n", b->path, b->n_compared,
            b->n_drifts, b->max_drift);
    for (int i = 0; i < b->n_drifts; i++) {
        const struct mc_drift *d = &b->drifts[i];
        const struct mc_check_result *r = &rep->checks[d->check];
        const struct mc_tensor_result *t = &r->tensors[d->tensor];
        fprintf(con->out, "%s%-5s%s %-24s %-22s %-10s %-4s %s x%.3g (%s): headroom %.3g (baseline %.3g, x%.3g), max abs "
                          "err %.3g (baseline %.3g, x%.3g)\n",
                paint(con, C_RED), "DRIFT", paint(con, C_RESET), r->case_id, mc_scenario_name(r->scenario), r->backend,
                mc_dtype_name(r->dtype), t->name, d->ratio, d->headroom_ratio >= d->abs_ratio ? "headroom" : "max abs err",
                t->stats.headroom, d->old_headroom, d->headroom_ratio, t->stats.max_abs_err, d->old_max_abs_err,
                d->abs_ratio);
    }
    /* one side only: listed, and failing nothing by themselves */
    if (b->n_missing_in_baseline)
        fprintf(con->out, "%d tensor record(s) of this run are not in the baseline (not a failure):\n",
                b->n_missing_in_baseline);
    for (int i = 0; i < b->n_missing_in_baseline; i++)
        fprintf(con->out, "  missing in baseline: %s\n", b->missing_in_baseline[i]);
    if (b->n_missing_in_run)
        fprintf(con->out, "%d tensor record(s) of the baseline did not run (not a failure):\n", b->n_missing_in_run);
    for (int i = 0; i < b->n_missing_in_run; i++)
        fprintf(con->out, "  missing in run: %s\n", b->missing_in_run[i]);
}

void mc_report_console_diagnosis(const struct mc_console *con, const struct mc_diagnosis *d)
{
    char line[2048], also[1024];
    mc_diag_line(d, line, sizeof line, also, sizeof also);
    fprintf(con->out, "%sDIAG%s  %-24s %-10s %s\n", paint(con, C_YELLOW), paint(con, C_RESET), d->case_id, d->backend,
            line);
    if (also[0])
        fprintf(con->out, "      %s\n", also);
}

/* Over the run: per backend with a diagnosis, the classes its cases point to together. */
static void console_diagnosis_summary(const struct mc_console *con, const struct mc_run_report *rep)
{
    for (int i = 0; i < rep->n_diagnoses; i++) {
        if (!mc_diagnose_backend_first(rep->diagnoses, i))
            continue;
        char line[2048], also[1024];
        int cases = 0, first = 0;
        if (!mc_diag_summary_line(rep->diagnoses, rep->n_diagnoses, rep->diagnoses[i].backend, line, sizeof line, also,
                                  sizeof also, &cases, &first, NULL))
            continue;
        fprintf(con->out, "\ndiagnosis of %s over %d diagnosed case(s) (first in %d): %s\n", rep->diagnoses[i].backend,
                cases, first, line);
        if (also[0])
            fprintf(con->out, "  %s\n", also);
    }
}

void mc_report_console_problem(const struct mc_console *con, const struct mc_run_problem *p)
{
    fprintf(con->out, "%s%-5s%s %s\n", paint(con, C_RED), p->code == MC_ERR_BACKEND ? "NOTEST" : "ERROR",
            paint(con, C_RESET), p->msg);
}

void mc_report_console_summary(const struct mc_console *con, const struct mc_run_report *rep, int exit_code)
{
    console_diagnosis_summary(con, rep);
    char nondet[96] = "";
    size_t used = 0;
    if (rep->counts[MC_CHECK_NONDETERMINISTIC] > 0)
        used += (size_t)snprintf(nondet, sizeof nondet, ", %d nondeterministic", rep->counts[MC_CHECK_NONDETERMINISTIC]);
    if (rep->counts[MC_CHECK_DRIFT] > 0)
        snprintf(nondet + used, sizeof nondet - used, ", %d drifted", rep->counts[MC_CHECK_DRIFT]);
    fprintf(con->out, "\n%d case(s), %d check(s): %d passed, %d failed%s, %d errored, %d unsupported; %d problem(s); "
                      "%.2fs; exit %d\n",
            rep->n_cases, rep->n_checks, rep->counts[MC_CHECK_PASS], rep->counts[MC_CHECK_FAIL], nondet,
            rep->counts[MC_CHECK_ERROR], rep->counts[MC_CHECK_UNSUPPORTED], rep->n_problems, rep->duration_s,
            exit_code);
    if (rep->shard_count > 1)
        fprintf(con->out, "(shard %d of %d: %d of the %d selected checks)\n", rep->shard_index, rep->shard_count,
                rep->n_checks, rep->shard_checks);
    if (rep->n_not_applicable > 0)
        fprintf(con->out, "(%d backend/dtype/scenario combination(s) not scheduled: dtypes a backend does not "
                          "declare, chunk_size_invariance without an internal chunk length, head_shard at "
                          "f16/bf16)\n",
                rep->n_not_applicable);
    if (rep->n_long_skipped > 0)
        fprintf(con->out, "(%d case file(s) under long/ directories not run: add --long)\n", rep->n_long_skipped);
}
