/*
 * html.c — the HTML report (see report.h): one self-contained page, no network and no external
 * script or style. It holds the totals, a headroom matrix (a table per family, a row per case and
 * backend, a column per scenario, each cell the worst headroom over the dtypes and tensors of those
 * checks, coloured by the worst verdict), the likely bug classes (per backend over the run, per case
 * and backend), and for each failing or most-drifted check a plot of its tensors' headroom against
 * token position (against decode step for long_decode) as inline SVG (svg.c); when nothing failed or
 * drifted, the five checks closest to their tolerance get one instead. Above a plot, each tensor's
 * numbers (labelled "(all runs)" when pooled over several comparisons), the first failing run with its
 * own numbers, the first failing stage and the bug class of the check's case and backend, in the
 * console's words. With a baseline, each plotted tensor's curve in the baseline's run is drawn dashed
 * next to the run's (baseprof.h). A short inline script counts the plotted lines into the page (body
 * attributes data-polylines, data-baselines) and measures the matrix (data-matrix-right: the right edge of its widest table, in
 * CSS px; data-page-width), which the CTest reads back from a headless browser.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "diagnosis/diagnose.h"
#include "run/baseline.h"
#include "family/family.h"
#include "exec/provenance.h"
#include "baseprof.h"
#include "rank.h"
#include "report.h"
#include "svg.h"
#include "writer.h"

#define HTML_MAX_FAILURE_PLOTS 40
#define HTML_MAX_DRIFT_PLOTS 15
#define HTML_CLOSEST_PLOTS 5

static const char style[] =
    "body{font-family:sans-serif;margin:1.5em;color:#222}"
    "table{border-collapse:collapse;font-size:12px}"
    "th,td{border:1px solid #ccc;padding:2px 5px;text-align:right;white-space:nowrap}"
    "th{background:#f4f4f4;vertical-align:bottom}td.row{text-align:left}"
    "td.fail{background:#f4a6a6;font-weight:bold}td.drift{background:#f7c98b;font-weight:bold}"
    "td.na{background:#eee;color:#888}td a{color:inherit}"
    ".plot{margin:1.5em 0;border-top:1px solid #ddd;padding-top:.5em}.plot h3{font-size:14px;margin:.3em 0}"
    ".plot p{font-size:12px;margin:.2em 0;color:#444}.pass{color:#080}.bad{color:#b00}"
    ".matrix{overflow-x:auto}table.matrix{margin:0 0 1em 0}caption{text-align:left;font-weight:bold;padding:4px 0}"
    "th.s{vertical-align:bottom;padding:4px 2px}"
    "th.s div{writing-mode:vertical-rl;transform:rotate(180deg);margin:0 auto}"
    "td.row{white-space:normal;overflow-wrap:anywhere;max-width:14em}";

/* The severity of a verdict in a matrix cell: the worst of its checks wins. */
static int severity(enum mc_check_status s)
{
    switch (s) {
    case MC_CHECK_UNSUPPORTED:
    case MC_CHECK_SKIPPED:
        return 0;
    case MC_CHECK_PASS:
        return 1;
    case MC_CHECK_DRIFT:
        return 2;
    default:
        return 3;
    }
}

struct row_key {
    const char *case_id, *backend;
    int family; /* the table it sits in (family_slot) */
};

/* Families get a table each, in enum order; a value outside the enum shares the last slot. */
#define FAMILY_SLOTS 10
static int family_slot(enum mc_family f)
{
    return (unsigned)f < FAMILY_SLOTS ? (int)f : FAMILY_SLOTS - 1;
}

static int find_row(const struct row_key *rows, int n, const struct mc_check_result *r)
{
    for (int i = 0; i < n; i++)
        if (strcmp(rows[i].case_id, r->case_id) == 0 && strcmp(rows[i].backend, r->backend) == 0)
            return i;
    return -1;
}

static double check_headroom(const struct mc_check_result *r)
{
    int t = mc_rank_worst_tensor(r);
    return t < 0 ? 0.0 : r->tensors[t].stats.headroom;
}

static void headroom_text(FILE *f, double h)
{
    if (isfinite(h))
        fprintf(f, "%.2g", h);
    else
        fputs("inf", f);
}

/* The checks that get a plot: failing ones first, then the most drifted; plotted[i] = 1. */
static void choose_plots(const struct mc_run_report *rep, unsigned char *plotted)
{
    int n = 0;
    for (int i = 0; i < rep->n_checks && n < HTML_MAX_FAILURE_PLOTS; i++)
        if (mc_rank_is_failure(rep->checks[i].status)) {
            plotted[i] = 1;
            n++;
        }
    const struct mc_drift *top[HTML_MAX_DRIFT_PLOTS];
    int nd = mc_rank_most_drifted(rep, top, HTML_MAX_DRIFT_PLOTS);
    for (int i = 0; i < nd; i++)
        plotted[top[i]->check] = 1;
    /* nothing failed or drifted: the checks closest to their tolerance, whose margins are the news */
    for (int k = 0; k < HTML_CLOSEST_PLOTS && n == 0 && nd == 0; k++) {
        int best = -1;
        for (int i = 0; i < rep->n_checks; i++)
            if (!plotted[i] && rep->checks[i].n_tensors > 0 &&
                (best < 0 || check_headroom(&rep->checks[i]) > check_headroom(&rep->checks[best])))
                best = i;
        if (best >= 0)
            plotted[best] = 1;
    }
}

/* One matrix cell: check k, the worst of its (case, backend, scenario). */
static void write_cell(struct mc_writer *w, const struct mc_run_report *rep, const unsigned char *plotted, int k)
{
    FILE *f = w->f;
    if (k < 0) {
        fputs("<td></td>", f);
        return;
    }
    const struct mc_check_result *r = &rep->checks[k];
    double h = check_headroom(r);
    int sev = severity(r->status);
    char id[512];
    mc_rank_check_id(r, id, sizeof id);
    if (sev == 1) {
        double t = isfinite(h) ? (h < 1 ? h : 1) : 1;
        fprintf(f, "<td style=\"background:hsl(%.0f,70%%,85%%)\"", 120.0 - 70.0 * t);
    } else {
        fprintf(f, "<td class=\"%s\"", sev == 0 ? "na" : sev == 2 ? "drift" : "fail");
    }
    fputs(" title=\"", f);
    mc_writer_xml_text(w, id);
    fprintf(f, ": %s\">", mc_check_status_name(r->status));
    if (plotted[k])
        fprintf(f, "<a href=\"#check-%d\">", k);
    if (sev == 0)
        fputs("n/a", f);
    else if (r->n_tensors == 0) /* compared nothing: the verdict, short enough for a narrow column */
        fputs(r->status == MC_CHECK_NONDETERMINISTIC ? "nondet" : r->status == MC_CHECK_ERROR ? "error"
                                                                                             : mc_check_status_name(r->status),
              f);
    else
        headroom_text(f, h);
    fputs(plotted[k] ? "</a></td>" : "</td>", f);
}

/* The headroom matrix: a table per family (its cases' rows, the scenarios its checks ran as columns),
 * the scenario names written upwards so that the columns are as narrow as their numbers and the
 * tables fit a window of about 1400 px whatever the scenarios (the page's script measures them). */
static void write_matrix(struct mc_writer *w, const struct mc_run_report *rep, const unsigned char *plotted)
{
    FILE *f = w->f;
    struct row_key *rows = calloc((size_t)rep->n_checks + 1, sizeof *rows);
    int *cell = malloc(((size_t)rep->n_checks + 1) * MC_SCENARIO_COUNT * sizeof *cell); /* worst check per cell */
    int n_rows = 0, used[FAMILY_SLOTS][MC_SCENARIO_COUNT];
    memset(used, 0, sizeof used);
    if (rows == NULL || cell == NULL) {
        fputs("<p>(out of memory for the matrix)</p>\n", f);
        free(rows);
        free(cell);
        return;
    }
    for (int i = 0; i < rep->n_checks; i++) {
        const struct mc_check_result *r = &rep->checks[i];
        int row = find_row(rows, n_rows, r);
        if (row < 0) {
            row = n_rows++;
            rows[row] = (struct row_key){r->case_id, r->backend, family_slot(r->family)};
            for (int s = 0; s < MC_SCENARIO_COUNT; s++)
                cell[row * MC_SCENARIO_COUNT + s] = -1;
        }
        int *c = &cell[row * MC_SCENARIO_COUNT + (int)r->scenario];
        used[rows[row].family][r->scenario] = 1;
        if (*c < 0) {
            *c = i;
        } else {
            const struct mc_check_result *o = &rep->checks[*c];
            int sr = severity(r->status), so = severity(o->status);
            if (sr > so || (sr == so && check_headroom(r) > check_headroom(o)))
                *c = i;
        }
    }
    fputs("<h2>Headroom matrix</h2>\n<p>Worst headroom (error / tolerance, &lt; 1 passes) over the dtypes and "
          "tensors of each case, backend and scenario, a table per family; red: failed, errored or "
          "nondeterministic; orange: drifted from the baseline; grey: unsupported. Linked cells have a plot "
          "below.</p>\n<div class=\"matrix\">\n",
          f);
    for (int fam = 0; fam < FAMILY_SLOTS; fam++) {
        int any = 0;
        for (int row = 0; row < n_rows && !any; row++)
            any = rows[row].family == fam;
        if (!any)
            continue;
        fputs("<table class=\"matrix\" data-family=\"", f);
        mc_writer_xml_text(w, mc_family_name((enum mc_family)fam));
        fputs("\"><caption>", f);
        mc_writer_xml_text(w, mc_family_name((enum mc_family)fam));
        fputs("</caption>\n<tr><th>case</th><th>backend</th>", f);
        for (int s = 0; s < MC_SCENARIO_COUNT; s++)
            if (used[fam][s]) {
                fputs("<th class=\"s\"><div>", f);
                mc_writer_xml_text(w, mc_scenario_name((enum mc_scenario_kind)s));
                fputs("</div></th>", f);
            }
        fputs("</tr>\n", f);
        for (int row = 0; row < n_rows; row++) {
            if (rows[row].family != fam)
                continue;
            fputs("<tr><td class=\"row\">", f);
            mc_writer_xml_text(w, rows[row].case_id);
            fputs("</td><td class=\"row\">", f);
            mc_writer_xml_text(w, rows[row].backend);
            fputs("</td>", f);
            for (int s = 0; s < MC_SCENARIO_COUNT; s++)
                if (used[fam][s])
                    write_cell(w, rep, plotted, cell[row * MC_SCENARIO_COUNT + s]);
            fputs("</tr>\n", f);
        }
        fputs("</table>\n", f);
    }
    fputs("</div>\n", f);
    free(rows);
    free(cell);
}

/* "first failing run: <run>" and, when the check kept it, that run's own numbers (the tensor lines pool
 * every run). */
static void first_run_text(struct mc_writer *w, const struct mc_check_result *r)
{
    FILE *f = w->f;
    const struct mc_compare_stats *s = &r->first_fail;
    fputs("<p class=\"firstrun\">first failing run: ", f);
    mc_writer_xml_text(w, r->detail);
    if (r->first_fail_tensor[0]) {
        char idx[256];
        mc_compare_format_index(s, idx, sizeof idx);
        fputs(" — ", f);
        mc_writer_xml_text(w, r->first_fail_tensor);
        fputs(": headroom ", f);
        headroom_text(f, s->headroom);
        fprintf(f, ", max abs err %.3g, %lld of %lld elements outside tolerance", s->max_abs_err, (long long)s->n_fail,
                (long long)s->n_elems);
        if (s->first_fail_token >= 0)
            fprintf(f, ", first failing position %lld (batch %lld)", (long long)s->first_fail_token,
                    (long long)s->first_fail_batch);
        if (s->has_worst) {
            fputs("; worst at ", f);
            mc_writer_xml_text(w, idx);
            fprintf(f, ": got %.9g, expected %.9g", s->worst_actual, s->worst_expected);
        }
    }
    fputs("</p>\n", f);
}

/* The bug class of a case on a backend (diagnose.h) in the console's words, as a <p> or <li>. */
static void bug_class_text(struct mc_writer *w, const struct mc_diagnosis *d, const char *tag)
{
    char line[1024], also[1024];
    mc_rank_diagnosis_text(d, line, sizeof line, also, sizeof also);
    fprintf(w->f, "<%s class=\"bugclass\">bug class of ", tag);
    mc_writer_xml_text(w, d->case_id);
    fputs(" on ", w->f);
    mc_writer_xml_text(w, d->backend);
    fputs(": ", w->f);
    mc_writer_xml_text(w, line);
    if (also[0]) {
        fputs("<br>", w->f);
        mc_writer_xml_text(w, also);
    }
    fprintf(w->f, "</%s>\n", tag);
}

/* The likely bug classes: per backend over the run, then per case and backend with a failing check. */
static void write_diagnoses(struct mc_writer *w, const struct mc_run_report *rep)
{
    if (rep->n_diagnoses == 0)
        return;
    FILE *f = w->f;
    char line[1024], also[1024];
    fprintf(f, "<h2>Likely bug classes (%d diagnosed case(s))</h2>\n<ul>\n", rep->n_diagnoses);
    for (int i = 0; i < rep->n_diagnoses; i++)
        if (mc_rank_diagnosis_summary_text(rep, i, line, sizeof line, also, sizeof also)) {
            fputs("<li class=\"bugsummary\"><b>", f);
            mc_writer_xml_text(w, rep->diagnoses[i].backend);
            fputs("</b> ", f);
            mc_writer_xml_text(w, line);
            if (also[0]) {
                fputs("<br>", f);
                mc_writer_xml_text(w, also);
            }
            fputs("</li>\n", f);
        }
    for (int i = 0; i < rep->n_diagnoses; i++)
        bug_class_text(w, &rep->diagnoses[i], "li");
    fputs("</ul>\n", f);
}

/* One check's plot: a series per tensor with a profile, headroom against position, and with a baseline
 * (bp, may be NULL) that tensor's curve in the baseline's run. */
static void write_plot(struct mc_writer *w, const struct mc_run_report *rep, const struct mc_baseprof *bp, int k)
{
    FILE *f = w->f;
    const struct mc_check_result *r = &rep->checks[k];
    char id[512];
    mc_rank_check_id(r, id, sizeof id);
    fprintf(f, "<div class=\"plot\" id=\"check-%d\"><h3>", k);
    mc_writer_xml_text(w, id);
    fprintf(f, " — <span class=\"%s\">%s</span></h3>\n", r->status == MC_CHECK_PASS ? "pass" : "bad",
            mc_check_status_name(r->status));
    if (r->message[0]) {
        fputs("<p>", f);
        mc_writer_xml_text(w, r->message);
        fputs("</p>\n", f);
    }
    if (r->diagnosis[0]) {
        fputs("<p>diagnosis: ", f);
        mc_writer_xml_text(w, r->diagnosis);
        fputs("</p>\n", f);
    }
    struct mc_svg_series series[2 * MC_CHECK_MAX_TENSORS];
    int of_tensor[MC_CHECK_MAX_TENSORS]; /* the tensor of each run series */
    char labels[MC_CHECK_MAX_TENSORS][MC_TENSOR_NAME_LEN + 16];
    double *buf = malloc((size_t)MC_CHECK_MAX_TENSORS * 4 * MC_PROFILE_BUCKETS * sizeof *buf);
    int n = 0;
    for (int t = 0; t < r->n_tensors && buf != NULL; t++) {
        const struct mc_tensor_result *tr = &r->tensors[t];
        const struct mc_position_profile *p = &tr->stats.profile;
        double *x = buf + (size_t)n * 2 * MC_PROFILE_BUCKETS, *y = x + MC_PROFILE_BUCKETS;
        int m = 0;
        for (int b = 0; b < p->n; b++)
            if (!(p->max_abs_err[b] < 0.0f)) {
                x[m] = (double)mc_compare_profile_position(p, b);
                y[m++] = (double)p->headroom[b];
            }
        const struct mc_drift *d = mc_baseline_drift_of(rep->baseline, k, t);
        fputs("<p>", f);
        mc_writer_xml_text(w, tr->name);
        fprintf(f, "%s: headroom ", tr->comparisons > 1 ? " (all runs)" : "");
        headroom_text(f, tr->stats.headroom);
        fprintf(f, ", max abs err %.3g, %lld of %lld elements outside tolerance", tr->stats.max_abs_err,
                (long long)tr->stats.n_fail, (long long)tr->stats.n_elems);
        if (tr->stats.first_fail_token >= 0)
            fprintf(f, ", first failing position %lld", (long long)tr->stats.first_fail_token);
        if (d)
            fprintf(f, "; x%.3g over the baseline (headroom %.3g)", d->ratio, d->old_headroom);
        if (p->width > 1)
            fprintf(f, "; %lld positions per point (max)", (long long)p->width);
        fputs("</p>\n", f);
        if (m == 0)
            continue;
        of_tensor[n] = t;
        series[n++] = (struct mc_svg_series){.label = tr->name, .x = x, .y = y, .n = m};
    }
    /* the baseline's curve of each plotted tensor, dashed in its colour */
    int n_run = n, n_base = 0;
    for (int i = 0; i < n_run && bp != NULL; i++) {
        const struct mc_tensor_result *tr = &r->tensors[of_tensor[i]];
        char key[1024];
        mc_report_key(key, sizeof key, r->case_id, mc_scenario_name(r->scenario), r->backend, mc_dtype_name(r->dtype),
                      tr->name);
        double *x = buf + (size_t)(MC_CHECK_MAX_TENSORS + n_base) * 2 * MC_PROFILE_BUCKETS, *y = x + MC_PROFILE_BUCKETS;
        int m = mc_baseprof_headroom(bp, key, x, y, MC_PROFILE_BUCKETS);
        if (m == 0)
            continue;
        snprintf(labels[n_base], sizeof labels[n_base], "%s (baseline)", tr->name);
        series[n++] = (struct mc_svg_series){.label = labels[n_base], .x = x, .y = y, .n = m, .baseline = 1,
                                             .color = i + 1};
        n_base++;
    }
    if (bp != NULL && n_run > 0)
        fprintf(f, "<p class=\"basecurves\">baseline: %s</p>\n",
                n_base == n_run ? "each tensor's curve dashed in its colour"
                : n_base > 0    ? "dashed, for the tensors the baseline has per-position numbers of"
                                : "it has no per-position numbers of these tensors (they are not in it, or it was written without them)");
    if (r->detail[0] || r->first_fail_tensor[0])
        first_run_text(w, r);
    if (r->first_stage.probed) {
        char stage[512];
        mc_first_stage_format(&r->first_stage, stage, sizeof stage);
        fprintf(f, "<p>%s: ", r->first_stage.name[0] ? "first failing stage" : "stage probes");
        mc_writer_xml_text(w, stage);
        fputs("</p>\n", f);
    }
    const struct mc_diagnosis *dg = mc_rank_is_failure(r->status) ? mc_rank_diagnosis_of(rep, r) : NULL;
    if (dg)
        bug_class_text(w, dg, "p");
    int long_decode = strcmp(mc_scenario_name(r->scenario), "long_decode") == 0;
    struct mc_svg_plot plot = {.x_label = long_decode ? "decode step" : "token position",
                               .y_label = "headroom (error / tolerance)",
                               .threshold = 1.0,
                               .threshold_label = "tolerance",
                               .log_y = 1};
    if (n > 0)
        mc_svg_write(f, &plot, series, n);
    else
        fputs("<p>(no per-position numbers: nothing was compared)</p>\n", f);
    free(buf);
    fputs("</div>\n", f);
}

enum mc_err_code mc_report_html_write(const char *path, const struct mc_run_report *rep, int exit_code,
                                      struct mc_error *err)
{
    unsigned char *plotted = calloc((size_t)rep->n_checks + 1, 1);
    if (plotted == NULL)
        return mc_error_set(err, MC_ERR_NOMEM, "out of memory");
    struct mc_writer w;
    if (mc_writer_open(&w, path, err) != MC_ERR_NONE) {
        free(plotted);
        return err->code;
    }
    FILE *f = w.f;
    const struct mc_provenance *p = rep->provenance;
    fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>mixcheck report</title>\n"
               "<style>%s</style></head>\n<body>\n",
            style);
    fprintf(f, "<h1>mixcheck: %s (exit %d)</h1>\n<p>", exit_code == 0 ? "passed" : exit_code == 1 ? "failed"
                                                                   : exit_code == 125           ? "could not test"
                                                                                                : "input error",
            exit_code);
    fprintf(f, "%d case(s), %d check(s): %d passed, %d failed, %d errored, %d nondeterministic, %d drifted, %d "
               "unsupported, %d skipped; %d problem(s); %.2f s",
            rep->n_cases, rep->n_checks, rep->counts[MC_CHECK_PASS], rep->counts[MC_CHECK_FAIL],
            rep->counts[MC_CHECK_ERROR], rep->counts[MC_CHECK_NONDETERMINISTIC], rep->counts[MC_CHECK_DRIFT],
            rep->counts[MC_CHECK_UNSUPPORTED], rep->counts[MC_CHECK_SKIPPED], rep->n_problems, rep->duration_s);
    if (p) {
        fputs(".<br>commit ", f);
        mc_writer_xml_text(&w, p->git_describe ? p->git_describe : "unknown");
        fputs(", started ", f);
        mc_writer_xml_text(&w, p->started_utc);
    }
    if (rep->baseline) {
        fputs(".<br>baseline ", f);
        mc_writer_xml_text(&w, rep->baseline->path);
        fprintf(f, ": %d tensor(s) compared, %d beyond --max-drift %g", rep->baseline->n_compared,
                rep->baseline->n_drifts, rep->baseline->max_drift);
    }
    fputs(".</p>\n", f);
    for (int i = 0; i < rep->n_problems; i++) {
        fputs("<p class=\"bad\">problem: ", f);
        mc_writer_xml_text(&w, rep->problems[i].msg);
        fputs("</p>\n", f);
    }
    choose_plots(rep, plotted);
    write_matrix(&w, rep, plotted);
    write_diagnoses(&w, rep);
    int n_plots = 0;
    for (int i = 0; i < rep->n_checks; i++)
        n_plots += plotted[i];
    fprintf(f, "<h2>Error against position (%d check(s))</h2>\n<p>Each line is a tensor's worst headroom at each "
               "token position (per decode step for long_decode; when a tensor spans more than 256 positions, "
               "each point is the worst of a bucket of positions); the black dashed line is the tolerance; crosses on "
               "the top edge are non-finite values; with a baseline, its curve of each tensor is dashed in the "
               "tensor's colour. <span id=\"drawn\"></span></p>\n",
            n_plots);
    struct mc_baseprof bp;
    int have_bp = rep->baseline && rep->baseline->path && mc_baseprof_open(&bp, rep->baseline->path) == 0;
    for (int i = 0; i < rep->n_checks; i++)
        if (plotted[i])
            write_plot(&w, rep, have_bp ? &bp : NULL, i);
    if (have_bp)
        mc_baseprof_close(&bp);
    fputs("<script>\n(function () {\n"
          "  var n = document.querySelectorAll('svg polyline.series').length;\n"
          "  document.body.setAttribute('data-polylines', String(n));\n"
          "  document.body.setAttribute('data-baselines', String(document.querySelectorAll('svg polyline.baseline').length));\n"
          "  var e = document.getElementById('drawn');\n"
          "  if (e) e.textContent = n + ' line(s) drawn.';\n"
          "  var right = 0;\n"
          "  document.querySelectorAll('table.matrix').forEach(function (t) {\n"
          "    right = Math.max(right, Math.ceil(t.getBoundingClientRect().right));\n"
          "  });\n"
          "  document.body.setAttribute('data-matrix-right', String(right));\n"
          "  document.body.setAttribute('data-page-width', String(document.documentElement.scrollWidth));\n"
          "})();\n</script>\n</body></html>\n",
          f);
    free(plotted);
    return mc_writer_commit(&w, err);
}
