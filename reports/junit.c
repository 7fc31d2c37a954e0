/*
 * junit.c — the JUnit XML report (see report.h): a testsuite per case, a testcase per check, and a
 * testsuite "problems" with a testcase per problem, named by its case and scenario where known. The
 * structure is the one Jenkins' junit-10.xsd describes (xunit plugin), plus what pytest and other
 * common writers add and readers accept: `skipped` on <testsuites>, and <properties> in a <testcase>
 * (its worst headroom, tensor and max abs error). A failing testcase's text is the console's diagnosis of
 * the check, the bug class of its case and backend included.
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

/* "N/M elements fail (K non-finite), first failing token T, worst at I: got G expected E" */
static void where_text(char *buf, size_t len, const struct mc_compare_stats *s)
{
    char idx[256];
    mc_compare_format_index(s, idx, sizeof idx);
    snprintf(buf, len, "%lld/%lld elements fail (%lld non-finite), first failing token %lld, worst at %s: got %.9g "
                       "expected %.9g",
             (long long)s->n_fail, (long long)s->n_elems, (long long)s->n_nonfinite, (long long)s->first_fail_token,
             idx, s->worst_actual, s->worst_expected);
}

/* The bug class of the check's case and backend (diagnose.h), in the console's words. */
static void write_bug_class(struct mc_writer *w, const struct mc_run_report *rep, const struct mc_check_result *r)
{
    const struct mc_diagnosis *d = mc_rank_diagnosis_of(rep, r);
    if (d == NULL)
        return;
    char line[1024], also[1024];
    mc_rank_diagnosis_text(d, line, sizeof line, also, sizeof also);
    mc_writer_xml_text(w, "bug class of ");
    mc_writer_xml_text(w, d->case_id);
    mc_writer_xml_text(w, " on ");
    mc_writer_xml_text(w, d->backend);
    mc_writer_xml_text(w, ": ");
    mc_writer_xml_text(w, line);
    fputc('\n', w->f);
    if (also[0]) {
        mc_writer_xml_text(w, also);
        fputc('\n', w->f);
    }
}

/* The text of a failing testcase, as the console prints a failing check: its message and localisation,
 * each failing tensor (labelled "(all runs)" when pooled over several comparisons), the first failing
 * run with that run's own numbers, the first failing stage, the case's bug class, the rerun command. */
static void write_failure_text(struct mc_writer *w, const struct mc_run_report *rep, const struct mc_check_result *r)
{
    char line[1024], where[768];
    if (r->message[0]) {
        mc_writer_xml_text(w, r->message);
        fputc('\n', w->f);
    }
    if (r->diagnosis[0]) {
        mc_writer_xml_text(w, "diagnosis: ");
        mc_writer_xml_text(w, r->diagnosis);
        fputc('\n', w->f);
    }
    for (int i = 0; i < r->n_tensors; i++) {
        const struct mc_tensor_result *t = &r->tensors[i];
        if (mc_compare_passed(&t->stats))
            continue;
        where_text(where, sizeof where, &t->stats);
        snprintf(line, sizeof line, "%s%s: %s, max abs %.3g, max rel %.3g, headroom %.3g, atol %.3g rtol %.3g\n",
                 t->name, t->comparisons > 1 ? " (all runs)" : "", where, t->stats.max_abs_err, t->stats.max_rel_err,
                 t->stats.headroom, t->tol.atol, t->tol.rtol);
        mc_writer_xml_text(w, line);
    }
    if (r->detail[0] || r->first_fail_tensor[0]) {
        mc_writer_xml_text(w, "first failing run: ");
        mc_writer_xml_text(w, r->detail);
        fputc('\n', w->f);
        if (r->first_fail_tensor[0]) {
            /* that run's own numbers, not the pooled ones above */
            where_text(where, sizeof where, &r->first_fail);
            snprintf(line, sizeof line, "  %s: %s, max abs %.3g, headroom %.3g\n", r->first_fail_tensor, where,
                     r->first_fail.max_abs_err, r->first_fail.headroom);
            mc_writer_xml_text(w, line);
        }
    }
    if (r->first_stage.probed) {
        char stage[512];
        mc_first_stage_format(&r->first_stage, stage, sizeof stage);
        snprintf(line, sizeof line, "%s: %s\n", r->first_stage.name[0] ? "first failing stage" : "stage probes",
                 stage);
        mc_writer_xml_text(w, line);
    }
    write_bug_class(w, rep, r);
    mc_report_rerun_command(r, "mixcheck", rep->rerun_options, line, sizeof line);
    mc_writer_xml_text(w, line);
}

static void write_drift_text(struct mc_writer *w, const struct mc_run_report *rep, int check)
{
    const struct mc_check_result *r = &rep->checks[check];
    for (int t = 0; t < r->n_tensors; t++) {
        const struct mc_drift *d = mc_baseline_drift_of(rep->baseline, check, t);
        if (d == NULL)
            continue;
        char line[512];
        snprintf(line, sizeof line, "%s: x%.3g over the baseline: headroom %.3g (baseline %.3g), max abs err %.3g "
                                    "(baseline %.3g)\n",
                 r->tensors[t].name, d->ratio, r->tensors[t].stats.headroom, d->old_headroom,
                 r->tensors[t].stats.max_abs_err, d->old_max_abs_err);
        mc_writer_xml_text(w, line);
    }
}

static void property_at(struct mc_writer *w, const char *indent, const char *name, const char *value)
{
    fputs(indent, w->f);
    fputs("<property name=\"", w->f);
    mc_writer_xml_text(w, name);
    fputs("\" value=\"", w->f);
    mc_writer_xml_text(w, value ? value : "");
    fputs("\"/>\n", w->f);
}

static void property(struct mc_writer *w, const char *name, const char *value)
{
    property_at(w, "    ", name, value);
}

/* A check's numbers as properties of its testcase: the worst headroom over its tensors (what a
 * passing check has to say), that tensor and its max abs error. */
static void testcase_properties(struct mc_writer *w, const struct mc_check_result *r)
{
    int worst = -1;
    for (int i = 0; i < r->n_tensors; i++)
        if (worst < 0 || r->tensors[i].stats.headroom > r->tensors[worst].stats.headroom)
            worst = i;
    if (worst < 0)
        return;
    const struct mc_tensor_result *t = &r->tensors[worst];
    char num[64];
    fputs("      <properties>\n", w->f);
    if (isfinite(t->stats.headroom))
        snprintf(num, sizeof num, "%.6g", t->stats.headroom);
    else
        snprintf(num, sizeof num, "inf");
    property_at(w, "        ", "headroom", num);
    property_at(w, "        ", "worst_tensor", t->name);
    snprintf(num, sizeof num, "%.6g", t->stats.max_abs_err);
    property_at(w, "        ", "max_abs_err", num);
    fputs("      </properties>\n", w->f);
}

/* The run's provenance (provenance.h) as <properties>, the first child of the first <testsuite>
 * (where the JUnit schema allows them); the goldens as golden:<case id> = "<path> sha256:<hex>". */
static void write_properties(struct mc_writer *w, const struct mc_run_report *rep)
{
    const struct mc_provenance *p = rep->provenance;
    char num[64];
    fputs("    <properties>\n", w->f);
    if (p) {
        property(w, "mixcheck.version", p->version);
        property(w, "mixcheck.git_describe", p->git_describe);
        property(w, "mixcheck.git_commit", p->git_commit);
        property(w, "mixcheck.git_dirty", p->git_dirty < 0 ? "unknown" : p->git_dirty ? "true" : "false");
        property(w, "compiler", p->compiler);
        property(w, "build_type", p->build_type);
        property(w, "openblas", p->blas);
        property(w, "cpu_model", p->cpu_model);
        snprintf(num, sizeof num, "%d", p->threads);
        property(w, "threads", p->threads > 0 ? num : "default");
        property(w, "openblas_num_threads", p->openblas_num_threads_set ? p->openblas_num_threads : "unset");
        snprintf(num, sizeof num, "%d", p->jobs);
        property(w, "jobs", num);
        snprintf(num, sizeof num, "%d", p->seeds > 1 ? p->seeds : 1);
        property(w, "seeds", num);
        property(w, "started_utc", p->started_utc);
        property(w, "command_line", p->command_line);
        for (int i = 0; i < p->n_plugins; i++) {
            char name[600], value[700];
            snprintf(name, sizeof name, "plugin:%d", i);
            snprintf(value, sizeof value, "%s sha256:%s", p->plugins[i].path,
                     p->plugins[i].sha256[0] ? p->plugins[i].sha256 : "unreadable");
            property(w, name, value);
        }
        const struct mc_provenance_python *py = &p->python;
        if (py->present) {
            char value[1200];
            snprintf(value, sizeof value, "%s (%s) %s", py->interpreter, py->executable[0] ? py->executable : "?",
                     py->version[0] ? py->version : "unknown");
            property(w, "python", value);
            for (int i = 0; i < py->n_packages; i++) {
                char name[80];
                snprintf(name, sizeof name, "python:%s", py->packages[i].name);
                property(w, name, py->packages[i].version[0] ? py->packages[i].version : "absent");
            }
            for (int i = 0; i < py->n_specs; i++) {
                char name[64];
                snprintf(name, sizeof name, "python_spec:%d", i);
                snprintf(value, sizeof value, "%s %s sha256:%s", py->specs[i].spec,
                         py->specs[i].path[0] ? py->specs[i].path : "(no file)",
                         py->specs[i].sha256[0] ? py->specs[i].sha256 : "unreadable");
                property(w, name, value);
            }
        }
    }
    for (int i = 0; i < rep->n_goldens; i++) {
        char name[160], value[640];
        snprintf(name, sizeof name, "golden:%s", rep->goldens[i].case_id);
        snprintf(value, sizeof value, "%s sha256:%s", rep->goldens[i].golden_path, rep->goldens[i].content_sha256);
        property(w, name, value);
    }
    fputs("    </properties>\n", w->f);
}

enum mc_err_code mc_report_junit_write(const char *path, const struct mc_run_report *rep, struct mc_error *err)
{
    struct mc_writer w;
    if (mc_writer_open(&w, path, err) != MC_ERR_NONE)
        return err->code;
    int failures = rep->counts[MC_CHECK_FAIL] + rep->counts[MC_CHECK_NONDETERMINISTIC] + rep->counts[MC_CHECK_DRIFT];
    int errors = rep->counts[MC_CHECK_ERROR] + rep->n_problems;
    int skipped = rep->counts[MC_CHECK_UNSUPPORTED] + rep->counts[MC_CHECK_SKIPPED];
    fprintf(w.f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    fprintf(w.f, "<testsuites name=\"mixcheck\" tests=\"%d\" failures=\"%d\" errors=\"%d\" skipped=\"%d\" "
                 "time=\"%.3f\">\n",
            rep->n_checks + rep->n_problems, failures, errors, skipped, rep->duration_s);
    for (int i = 0; i < rep->n_checks;) {
        const char *cid = rep->checks[i].case_id;
        int j = i;
        int f = 0, e = 0, s = 0;
        double t = 0;
        while (j < rep->n_checks && strcmp(rep->checks[j].case_id, cid) == 0) {
            f += rep->checks[j].status == MC_CHECK_FAIL || rep->checks[j].status == MC_CHECK_NONDETERMINISTIC ||
                 rep->checks[j].status == MC_CHECK_DRIFT;
            e += rep->checks[j].status == MC_CHECK_ERROR;
            s += rep->checks[j].status == MC_CHECK_UNSUPPORTED || rep->checks[j].status == MC_CHECK_SKIPPED;
            t += rep->checks[j].duration_s;
            j++;
        }
        fputs("  <testsuite name=\"", w.f);
        mc_writer_xml_text(&w, cid);
        fprintf(w.f, "\" tests=\"%d\" failures=\"%d\" errors=\"%d\" skipped=\"%d\" time=\"%.3f\"", j - i, f, e, s, t);
        if (rep->provenance && rep->provenance->started_utc[0])
            fprintf(w.f, " timestamp=\"%s\"", rep->provenance->started_utc);
        fputs(">\n", w.f);
        if (i == 0)
            write_properties(&w, rep);
        for (int k = i; k < j; k++) {
            const struct mc_check_result *r = &rep->checks[k];
            fputs("    <testcase classname=\"mixcheck.", w.f);
            mc_writer_xml_text(&w, r->case_id);
            fprintf(w.f, "\" name=\"%s/%s/%s\" time=\"%.3f\"", mc_scenario_name(r->scenario), r->backend,
                    mc_dtype_name(r->dtype), r->duration_s);
            if (r->status == MC_CHECK_PASS && r->n_tensors == 0) {
                fputs("/>\n", w.f);
                continue;
            }
            fputs(">\n", w.f);
            testcase_properties(&w, r);
            if (r->status == MC_CHECK_UNSUPPORTED || r->status == MC_CHECK_SKIPPED) {
                fputs("      <skipped message=\"", w.f);
                mc_writer_xml_text(&w, r->message);
                fputs("\"/>\n", w.f);
            } else if (r->status != MC_CHECK_PASS) {
                int failed = r->status == MC_CHECK_FAIL || r->status == MC_CHECK_NONDETERMINISTIC ||
                             r->status == MC_CHECK_DRIFT;
                const char *tag = failed ? "failure" : "error";
                fprintf(w.f, "      <%s message=\"%s\">", tag,
                        r->status == MC_CHECK_FAIL    ? "tolerance exceeded"
                        : r->status == MC_CHECK_DRIFT ? "drift beyond the baseline"
                        : failed                      ? "nondeterministic"
                                                      : "backend error");
                if (r->status == MC_CHECK_DRIFT)
                    write_drift_text(&w, rep, k);
                write_failure_text(&w, rep, r);
                fprintf(w.f, "</%s>\n", tag);
            }
            fputs("    </testcase>\n", w.f);
        }
        fputs("  </testsuite>\n", w.f);
        i = j;
    }
    if (rep->n_problems) {
        fprintf(w.f, "  <testsuite name=\"problems\" tests=\"%d\" failures=\"0\" errors=\"%d\" skipped=\"0\" "
                     "time=\"0.000\">\n",
                rep->n_problems, rep->n_problems);
        if (rep->n_checks == 0)
            write_properties(&w, rep);
        for (int i = 0; i < rep->n_problems; i++) {
            /* named by case and scenario where the problem has them, else by its file (or option) */
            const struct mc_run_problem *p = &rep->problems[i];
            fputs("    <testcase classname=\"mixcheck.", w.f);
            mc_writer_xml_text(&w, p->case_id[0] ? p->case_id : "problems");
            fputs("\" name=\"", w.f);
            if (p->case_id[0]) {
                mc_writer_xml_text(&w, p->case_id);
                fputc('/', w.f);
                mc_writer_xml_text(&w, p->scenario[0] ? p->scenario : "case");
            } else {
                mc_writer_xml_text(&w, p->path);
            }
            fputs("\" time=\"0.000\">\n      <properties>\n", w.f);
            property_at(&w, "        ", "path", p->path);
            fputs("      </properties>\n      <error message=\"", w.f);
            mc_writer_xml_text(&w, rep->problems[i].msg);
            fputs("\"/>\n    </testcase>\n", w.f);
        }
        fputs("  </testsuite>\n", w.f);
    }
    fputs("</testsuites>\n", w.f);
    return mc_writer_commit(&w, err);
}
