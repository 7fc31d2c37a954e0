/*
 * markdown.c — the Markdown summary (see report.h), for a CI step summary ($GITHUB_STEP_SUMMARY and
 * the like): the verdict and totals, the likely bug classes, every failing check with its diagnosis and
 * rerun command, the problems, the most-drifted tensors when the run had a baseline, and the slowest
 * checks.
 */
#include <math.h>
#include <string.h>

#include "diagnosis/diagnose.h"
#include "run/baseline.h"
#include "family/family.h"
#include "exec/provenance.h"
#include "rank.h"
#include "report.h"
#include "writer.h"

#define MD_MAX_FAILURES 50
#define MD_MAX_DRIFTED 15
#define MD_MAX_SLOWEST 10
#define MD_MAX_DIAGNOSES 50

/* Text for a table cell or a list item: '|' escaped, newlines as spaces, Markdown specials escaped. */
static void md_text(struct mc_writer *w, const char *s)
{
    for (const char *p = s; *p; p++) {
        if (*p == '\n' || *p == '\r')
            fputc(' ', w->f);
        else if (strchr("|*_`<>[]\\", *p))
            fprintf(w->f, "\\%c", *p);
        else
            fputc(*p, w->f);
    }
}

/* An inline code span; a backtick inside would end it, so it becomes a quote. */
static void md_code(struct mc_writer *w, const char *s)
{
    fputc('`', w->f);
    for (const char *p = s; *p; p++)
        fputc(*p == '`' ? '\'' : *p == '\n' || *p == '|' ? ' ' : *p, w->f);
    fputc('`', w->f);
}

static const char *status_word(enum mc_check_status s)
{
    switch (s) {
    case MC_CHECK_FAIL:
        return "FAIL";
    case MC_CHECK_ERROR:
        return "ERROR";
    case MC_CHECK_NONDETERMINISTIC:
        return "NONDETERMINISTIC";
    case MC_CHECK_DRIFT:
        return "DRIFT";
    default:
        return mc_check_status_name(s);
    }
}

/* Where a comparison failed: "N of M elements outside tolerance, first failing token T (batch b); worst
 * at `index`: got G, expected E" (the console's wording). */
static void where_text(struct mc_writer *w, const struct mc_compare_stats *s)
{
    char idx[256];
    mc_compare_format_index(s, idx, sizeof idx);
    fprintf(w->f, "%lld of %lld elements outside tolerance", (long long)s->n_fail, (long long)s->n_elems);
    if (s->n_nonfinite)
        fprintf(w->f, " (%lld non-finite, %lld NaN)", (long long)s->n_nonfinite, (long long)s->n_nan);
    if (s->first_fail_token >= 0)
        fprintf(w->f, ", first failing token %lld (batch %lld)", (long long)s->first_fail_token,
                (long long)s->first_fail_batch);
    if (s->has_worst) {
        fputs("; worst at ", w->f);
        md_code(w, idx);
        fprintf(w->f, ": got %.9g, expected %.9g", s->worst_actual, s->worst_expected);
    }
}

/* A failing tensor's numbers; "(all runs)" when they pool several comparisons (the first failing run's
 * own numbers are an item of their own). */
static void tensor_line(struct mc_writer *w, const struct mc_tensor_result *t)
{
    const struct mc_compare_stats *s = &t->stats;
    fputs("  - ", w->f);
    md_code(w, t->name);
    fputs(t->comparisons > 1 ? " (all runs): " : ": ", w->f);
    where_text(w, s);
    fprintf(w->f, "; headroom %.3g, max abs err %.3g (atol %.3g, rtol %.3g)\n", s->headroom, s->max_abs_err,
            t->tol.atol, t->tol.rtol);
}

/* "first failing run: <run>" and, when the check kept it, that run's own numbers. */
static void first_run_line(struct mc_writer *w, const struct mc_check_result *r)
{
    fputs("  - first failing run: ", w->f);
    md_text(w, r->detail);
    if (r->first_fail_tensor[0]) {
        fputs(" — ", w->f);
        md_code(w, r->first_fail_tensor);
        fputs(": ", w->f);
        where_text(w, &r->first_fail);
        fprintf(w->f, "; headroom %.3g, max abs err %.3g", r->first_fail.headroom, r->first_fail.max_abs_err);
    }
    fputc('\n', w->f);
}

/* The diagnosis of one failing check: its message, its localisation, each failing tensor (pooled over
 * its runs), the first failing run with that run's own numbers, the first failing stage and the drift
 * against the baseline, one list item each. The bug class is the case's (write_diagnoses). */
static void failure_item(struct mc_writer *w, const struct mc_run_report *rep, int k)
{
    const struct mc_check_result *r = &rep->checks[k];
    char id[512], cmd[2048];
    mc_rank_check_id(r, id, sizeof id);
    fprintf(w->f, "- **%s** ", status_word(r->status));
    md_code(w, id);
    fputc('\n', w->f);
    if (r->message[0]) {
        fputs("  - ", w->f);
        md_text(w, r->message);
        fputc('\n', w->f);
    }
    if (r->diagnosis[0]) {
        fputs("  - diagnosis: ", w->f);
        md_text(w, r->diagnosis);
        fputc('\n', w->f);
    }
    for (int t = 0; t < r->n_tensors; t++) {
        const struct mc_drift *d = mc_baseline_drift_of(rep->baseline, k, t);
        if (d) {
            fputs("  - ", w->f);
            md_code(w, r->tensors[t].name);
            fprintf(w->f, ": x%.3g over the baseline: headroom %.3g (baseline %.3g), max abs err %.3g (baseline %.3g)\n",
                    d->ratio, r->tensors[t].stats.headroom, d->old_headroom, r->tensors[t].stats.max_abs_err,
                    d->old_max_abs_err);
        }
        if (!mc_compare_passed(&r->tensors[t].stats))
            tensor_line(w, &r->tensors[t]);
    }
    if (r->detail[0] || r->first_fail_tensor[0])
        first_run_line(w, r);
    if (r->first_stage.probed) {
        char stage[512];
        mc_first_stage_format(&r->first_stage, stage, sizeof stage);
        fprintf(w->f, "  - %s: ", r->first_stage.name[0] ? "first failing stage" : "stage probes");
        md_text(w, stage);
        fputc('\n', w->f);
    }
    mc_report_rerun_command(r, "mixcheck", rep->rerun_options, cmd, sizeof cmd);
    fputs("  - rerun: ", w->f);
    md_code(w, cmd);
    fputc('\n', w->f);
}

static void write_totals(struct mc_writer *w, const struct mc_run_report *rep, int exit_code)
{
    const struct mc_provenance *p = rep->provenance;
    int failed = 0;
    for (int s = 0; s < MC_CHECK_STATUS_COUNT; s++)
        failed += mc_rank_is_failure((enum mc_check_status)s) ? rep->counts[s] : 0;
    const char *verdict = exit_code == 0 ? "passed" : exit_code == 1 ? "failed" : exit_code == 125 ? "could not test"
                                                                                                   : "input error";
    fprintf(w->f, "## mixcheck: %s (exit %d)\n\n", verdict, exit_code);
    fprintf(w->f, "%d case(s), %d check(s), %d failing, %.2f s", rep->n_cases, rep->n_checks, failed, rep->duration_s);
    if (p) {
        fputs("; commit ", w->f);
        md_code(w, p->git_describe ? p->git_describe : "unknown");
        if (p->git_dirty > 0)
            fputs(" (dirty)", w->f);
    }
    fputs("\n\n| pass | fail | error | nondeterministic | drift | unsupported | skipped | problems |\n"
          "|---:|---:|---:|---:|---:|---:|---:|---:|\n",
          w->f);
    fprintf(w->f, "| %d | %d | %d | %d | %d | %d | %d | %d |\n", rep->counts[MC_CHECK_PASS],
            rep->counts[MC_CHECK_FAIL], rep->counts[MC_CHECK_ERROR], rep->counts[MC_CHECK_NONDETERMINISTIC],
            rep->counts[MC_CHECK_DRIFT], rep->counts[MC_CHECK_UNSUPPORTED], rep->counts[MC_CHECK_SKIPPED],
            rep->n_problems);
}

/* The likely bug classes (diagnose.h): per case and backend with a failing check, and per backend over
 * the run, in the console's words. */
static void write_diagnoses(struct mc_writer *w, const struct mc_run_report *rep)
{
    if (rep->n_diagnoses == 0)
        return;
    char line[1024], also[1024];
    fprintf(w->f, "\n### Likely bug classes (%d diagnosed case(s))\n\n", rep->n_diagnoses);
    for (int i = 0; i < rep->n_diagnoses; i++)
        if (mc_rank_diagnosis_summary_text(rep, i, line, sizeof line, also, sizeof also)) {
            fputs("- **", w->f);
            md_text(w, rep->diagnoses[i].backend);
            fputs("** ", w->f);
            md_text(w, line);
            if (also[0]) {
                fputs("; ", w->f);
                md_text(w, also);
            }
            fputc('\n', w->f);
        }
    fputc('\n', w->f);
    int shown = rep->n_diagnoses < MD_MAX_DIAGNOSES ? rep->n_diagnoses : MD_MAX_DIAGNOSES;
    for (int i = 0; i < shown; i++) {
        const struct mc_diagnosis *d = &rep->diagnoses[i];
        mc_rank_diagnosis_text(d, line, sizeof line, also, sizeof also);
        fputs("- ", w->f);
        md_code(w, d->case_id);
        fputs(" on ", w->f);
        md_code(w, d->backend);
        fputs(": ", w->f);
        md_text(w, line);
        fputc('\n', w->f);
        if (also[0]) {
            fputs("  - ", w->f);
            md_text(w, also);
            fputc('\n', w->f);
        }
    }
    if (rep->n_diagnoses > shown)
        fprintf(w->f, "\n… and %d more (see the JSON report's diagnoses).\n", rep->n_diagnoses - shown);
}

static void write_failures(struct mc_writer *w, const struct mc_run_report *rep)
{
    int n = 0;
    for (int i = 0; i < rep->n_checks; i++)
        n += mc_rank_is_failure(rep->checks[i].status);
    if (n == 0)
        return;
    fprintf(w->f, "\n### Failing checks (%d)\n\n", n);
    int shown = 0;
    for (int i = 0; i < rep->n_checks && shown < MD_MAX_FAILURES; i++)
        if (mc_rank_is_failure(rep->checks[i].status)) {
            failure_item(w, rep, i);
            shown++;
        }
    if (n > shown)
        fprintf(w->f, "\n… and %d more (see the JSON or JUnit report).\n", n - shown);
}

static void write_problems(struct mc_writer *w, const struct mc_run_report *rep)
{
    if (rep->n_problems == 0)
        return;
    fprintf(w->f, "\n### Problems (%d)\n\n", rep->n_problems);
    for (int i = 0; i < rep->n_problems; i++) {
        const struct mc_run_problem *p = &rep->problems[i];
        fprintf(w->f, "- **%s** ", p->code == MC_ERR_BACKEND ? "NOTEST" : "ERROR");
        md_code(w, p->path);
        fputs(": ", w->f);
        md_text(w, p->msg);
        fputc('\n', w->f);
    }
}

static void write_drifted(struct mc_writer *w, const struct mc_run_report *rep)
{
    const struct mc_baseline_result *b = rep->baseline;
    if (b == NULL)
        return;
    const struct mc_drift *top[MD_MAX_DRIFTED];
    int n = mc_rank_most_drifted(rep, top, MD_MAX_DRIFTED);
    fputs("\n### Most drifted against the baseline\n\nBaseline ", w->f);
    md_code(w, b->path);
    fprintf(w->f, ": %d tensor(s) compared, %d beyond --max-drift %g.\n\n", b->n_compared, b->n_drifts, b->max_drift);
    if (n == 0) {
        fputs("No tensor's headroom or max abs error grew.\n", w->f);
        return;
    }
    fputs("| check | tensor | ratio | headroom (baseline) | max abs err (baseline) | status |\n"
          "|---|---|---:|---:|---:|---|\n",
          w->f);
    for (int i = 0; i < n; i++) {
        const struct mc_check_result *r = &rep->checks[top[i]->check];
        const struct mc_tensor_result *t = &r->tensors[top[i]->tensor];
        char id[512];
        mc_rank_check_id(r, id, sizeof id);
        fputs("| ", w->f);
        md_code(w, id);
        fputs(" | ", w->f);
        md_code(w, t->name);
        fprintf(w->f, " | x%.3g | %.3g (%.3g) | %.3g (%.3g) | %s |\n", top[i]->ratio, t->stats.headroom,
                top[i]->old_headroom, t->stats.max_abs_err, top[i]->old_max_abs_err,
                mc_baseline_drift_of(b, top[i]->check, top[i]->tensor) ? "**drift**" : mc_check_status_name(r->status));
    }
    if (b->n_missing_in_baseline || b->n_missing_in_run)
        fprintf(w->f, "\n%d record(s) of this run are not in the baseline, %d of the baseline did not run (not "
                      "failures).\n",
                b->n_missing_in_baseline, b->n_missing_in_run);
}

static void write_slowest(struct mc_writer *w, const struct mc_run_report *rep)
{
    int idx[MD_MAX_SLOWEST];
    int n = mc_rank_slowest(rep, idx, MD_MAX_SLOWEST);
    if (n == 0)
        return;
    fputs("\n### Slowest checks\n\n| check | status | seconds |\n|---|---|---:|\n", w->f);
    for (int i = 0; i < n; i++) {
        const struct mc_check_result *r = &rep->checks[idx[i]];
        char id[512];
        mc_rank_check_id(r, id, sizeof id);
        fputs("| ", w->f);
        md_code(w, id);
        fprintf(w->f, " | %s | %.2f |\n", mc_check_status_name(r->status), r->duration_s);
    }
}

enum mc_err_code mc_report_markdown_write(const char *path, const struct mc_run_report *rep, int exit_code,
                                          struct mc_error *err)
{
    struct mc_writer w;
    if (mc_writer_open(&w, path, err) != MC_ERR_NONE)
        return err->code;
    write_totals(&w, rep, exit_code);
    write_diagnoses(&w, rep);
    write_failures(&w, rep);
    write_problems(&w, rep);
    write_drifted(&w, rep);
    write_slowest(&w, rep);
    return mc_writer_commit(&w, err);
}
