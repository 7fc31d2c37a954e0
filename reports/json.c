/* json.c — the JSON report (see report.h): one record per case/scenario/backend/dtype/tensor. */
#include <math.h>
#include <string.h>

#include "run/baseline.h"
#include "diagnosis/diagnose.h"
#include "family/family.h"
#include "exec/provenance.h"
#include "report.h"
#include "writer.h"

static void kv_str(struct mc_writer *w, const char *k, const char *v, int comma)
{
    fprintf(w->f, "%s\"%s\": ", comma ? ", " : "", k);
    if (v)
        mc_writer_json_string(w, v);
    else
        fputs("null", w->f);
}

static void kv_num(struct mc_writer *w, const char *k, double v)
{
    fprintf(w->f, ", \"%s\": ", k);
    mc_writer_json_number(w, v);
}

static void kv_int(struct mc_writer *w, const char *k, long long v)
{
    fprintf(w->f, ", \"%s\": %lld", k, v);
}

/* long_decode's error per step (scenario.h struct mc_step_profile), kept apart from the other keys */
static void write_by_step(struct mc_writer *w, const struct mc_step_profile *p)
{
    fputs(", \"by_step\": {", w->f);
    fprintf(w->f, "\"first_token\": %lld", (long long)p->first_token);
    kv_int(w, "steps", p->steps);
    kv_int(w, "steps_per_entry", p->per_bucket);
    fputs(", \"max_abs_err\": [", w->f);
    for (int i = 0; i < p->n_buckets; i++) {
        fputs(i ? ", " : "", w->f);
        mc_writer_json_number(w, p->max_abs_err[i]);
    }
    fputs("], \"headroom\": [", w->f);
    for (int i = 0; i < p->n_buckets; i++) {
        fputs(i ? ", " : "", w->f);
        mc_writer_json_number(w, p->headroom[i]);
    }
    fputs("]}", w->f);
}

/* A profile value: 4 significant digits (a plot's precision), null when not finite. */
static void profile_number(struct mc_writer *w, float v)
{
    if (isfinite(v))
        fprintf(w->f, "%.4g", (double)v);
    else
        fputs("null", w->f);
}

/* "by_position": the tensor's error profile (compare.h): the first position of every bucket that holds
 * a compared element, with its worst abs error and headroom (null = non-finite). */
static void write_profile(struct mc_writer *w, const struct mc_position_profile *p)
{
    fprintf(w->f, ", \"by_position\": {\"bucket_width\": %lld, \"positions\": [", (long long)p->width);
    int first = 1;
    for (int b = 0; b < p->n; b++)
        if (!(p->max_abs_err[b] < 0.0f)) {
            fprintf(w->f, "%s%lld", first ? "" : ", ", (long long)mc_compare_profile_position(p, b));
            first = 0;
        }
    for (int k = 0; k < 2; k++) {
        fputs(k ? "], \"headroom\": [" : "], \"max_abs_err\": [", w->f);
        first = 1;
        for (int b = 0; b < p->n; b++)
            if (!(p->max_abs_err[b] < 0.0f)) {
                fputs(first ? "" : ", ", w->f);
                profile_number(w, k ? p->headroom[b] : p->max_abs_err[b]);
                first = 0;
            }
    }
    fputs("]}", w->f);
}

/* "first_stage": the first-stage diagnosis of a failed check with stage probes (probes.h); name null
 * when every probed stage was within tolerance. */
static void write_first_stage(struct mc_writer *w, const struct mc_first_stage *f)
{
    fputs(", \"first_stage\": {", w->f);
    kv_str(w, "name", f->name[0] ? f->name : NULL, 0);
    kv_int(w, "forwards", f->forwards);
    if (f->name[0]) {
        kv_str(w, "against", f->against, 1);
        kv_str(w, "call", f->call, 1);
        kv_int(w, "batch", f->batch);
        kv_int(w, "token", f->token);
        fputs(", \"index\": {", w->f);
        for (int d = 0; d < f->ndim; d++)
            fprintf(w->f, "%s\"%s\": %lld", d ? ", " : "", f->index_names[d], (long long)f->index[d]);
        fputc('}', w->f);
        kv_num(w, "got", f->got);
        kv_num(w, "want", f->want);
        kv_num(w, "abs_err", f->abs_err);
        kv_num(w, "rel_err", f->rel_err);
        kv_num(w, "atol", f->atol);
        kv_num(w, "rtol", f->rtol);
        kv_num(w, "headroom", f->headroom);
        kv_int(w, "failing", f->failing);
        kv_int(w, "elements", f->elements);
    }
    fputc('}', w->f);
}

static void write_record(struct mc_writer *w, const struct mc_check_result *r, const struct mc_tensor_result *t,
                         const struct mc_drift *drift, int flags)
{
    fputs("    {", w->f);
    kv_str(w, "case", r->case_id, 0);
    kv_str(w, "case_path", r->case_path, 1);
    kv_str(w, "family", mc_family_name(r->family), 1);
    if (r->model_type[0])
        kv_str(w, "model_type", r->model_type, 1);
    kv_str(w, "scenario", mc_scenario_name(r->scenario), 1);
    kv_str(w, "backend", r->backend, 1);
    kv_str(w, "device", r->device, 1);
    kv_str(w, "dtype", mc_dtype_name(r->dtype), 1);
    /* the profile the tolerances came from (the case's or a --tolerance file) and the device used in it */
    kv_str(w, "tolerance_profile", r->tolerance_path[0] ? r->tolerance_path : NULL, 1);
    kv_str(w, "tolerance_device", r->tolerance_device[0] ? r->tolerance_device : NULL, 1);
    kv_str(w, "tensor", t ? t->name : NULL, 1);
    const char *status = mc_check_status_name(r->status);
    /* a tensor's own verdict; "nondeterministic" only where that is the check's verdict (a determinism
     * difference an aliasing copy explains stays "fail") */
    if (t && (r->status == MC_CHECK_PASS || r->status == MC_CHECK_FAIL || r->status == MC_CHECK_NONDETERMINISTIC))
        status = mc_compare_passed(&t->stats)                                                       ? "pass"
                 : r->status == MC_CHECK_NONDETERMINISTIC && strcmp(t->name, "determinism") == 0 ? "nondeterministic"
                                                                                                  : "fail";
    else if (t && r->status == MC_CHECK_DRIFT)
        status = drift ? "drift" : "pass";
    kv_str(w, "status", status, 1);
    if (drift) {
        fputs(", \"drift\": {\"ratio\": ", w->f);
        mc_writer_json_number(w, drift->ratio);
        kv_num(w, "headroom_ratio", drift->headroom_ratio);
        kv_num(w, "max_abs_err_ratio", drift->abs_ratio);
        kv_num(w, "baseline_headroom", drift->old_headroom);
        kv_num(w, "baseline_max_abs_err", drift->old_max_abs_err);
        fputc('}', w->f);
    }
    if (t) {
        const struct mc_compare_stats *s = &t->stats;
        kv_num(w, "headroom", s->headroom);
        kv_num(w, "max_abs_err", s->max_abs_err);
        kv_num(w, "max_rel_err", s->max_rel_err);
        if (s->first_fail_token >= 0)
            kv_int(w, "first_fail_token", s->first_fail_token);
        else
            fputs(", \"first_fail_token\": null", w->f);
        fputs(", \"worst_index\": ", w->f);
        if (s->has_worst) {
            fputc('{', w->f);
            for (int d = 0; d < s->worst_ndim; d++)
                fprintf(w->f, "%s\"%s\": %lld", d ? ", " : "", s->worst_names[d], (long long)s->worst_index[d]);
            fputc('}', w->f);
        } else {
            fputs("null", w->f);
        }
        kv_int(w, "elements", s->n_elems);
        kv_int(w, "failing", s->n_fail);
        kv_int(w, "nonfinite", s->n_nonfinite);
        kv_int(w, "nan", s->n_nan);
        kv_num(w, "cosine", mc_compare_cosine(s));
        kv_num(w, "nmse", mc_compare_nmse(s));
        kv_num(w, "atol", t->tol.atol);
        kv_num(w, "rtol", t->tol.rtol);
        if (t->tol.atol_scale > 0.0) {
            kv_num(w, "atol_scale", t->tol.atol_scale);
            kv_num(w, "atol_applied", s->atol_applied);
        }
        kv_num(w, "max_abs_expected", s->max_abs_expected);
        kv_int(w, "comparisons", t->comparisons);
        kv_str(w, "expected", mc_expected_source_name(t->expected), 1);
        if (strcmp(r->by_step.tensor, t->name) == 0)
            write_by_step(w, &r->by_step);
        if (t->logits.present) {
            const struct mc_logits_metrics *m = &t->logits;
            fputs(", \"logits_metrics\": {\"positions\": ", w->f);
            fprintf(w->f, "%lld", (long long)m->positions);
            kv_num(w, "top1_agreement", mc_logits_top1_rate(m));
            kv_int(w, "top_k", MC_LOGITS_TOPK);
            kv_num(w, "topk_overlap", mc_logits_topk_overlap(m));
            kv_num(w, "kl_mean", mc_logits_kl_mean(m));
            kv_num(w, "kl_max", m->kl_max);
            if (m->worst_kl_token >= 0)
                kv_int(w, "kl_max_token", m->worst_kl_token);
            kv_num(w, "logprob_diff_max", m->logprob_diff_max);
            fputc('}', w->f);
        }
        if (!(flags & MC_JSON_NO_PROFILE))
            write_profile(w, &s->profile);
    }
    if (r->diagnosis[0])
        kv_str(w, "diagnosis", r->diagnosis, 1);
    if (r->message[0])
        kv_str(w, "message", r->message, 1);
    if (r->detail[0])
        kv_str(w, "detail", r->detail, 1);
    if (t && strcmp(r->first_fail_tensor, t->name) == 0) {
        /* the first failing run's own numbers for this tensor (the keys above pool every run) */
        const struct mc_compare_stats *f = &r->first_fail;
        fputs(", \"first_failing_run\": {", w->f);
        kv_str(w, "run", r->detail, 0);
        if (f->first_fail_token >= 0)
            kv_int(w, "first_fail_token", f->first_fail_token);
        else
            fputs(", \"first_fail_token\": null", w->f);
        fputs(", \"worst_index\": ", w->f);
        if (f->has_worst) {
            fputc('{', w->f);
            for (int d = 0; d < f->worst_ndim; d++)
                fprintf(w->f, "%s\"%s\": %lld", d ? ", " : "", f->worst_names[d], (long long)f->worst_index[d]);
            fputc('}', w->f);
        } else {
            fputs("null", w->f);
        }
        kv_num(w, "headroom", f->headroom);
        kv_num(w, "max_abs_err", f->max_abs_err);
        kv_int(w, "failing", f->n_fail);
        fputc('}', w->f);
    }
    if (r->first_stage.probed)
        write_first_stage(w, &r->first_stage);
    kv_num(w, "duration_s", r->duration_s);
    fputc('}', w->f);
}

/* 1 for the backends a kill matrix is about: deliberately broken variants ("mutant.*") and variants
 * that must not be flagged ("nonbug.*"). */
static int is_variant(const char *backend)
{
    /* the mutant library's whole stacks are "stack.<bug>"; "stack.correct" is its control */
    return strncmp(backend, "mutant.", 7) == 0 || strncmp(backend, "nonbug.", 7) == 0 ||
           (strncmp(backend, "stack.", 6) == 0 && strcmp(backend, "stack.correct") != 0);
}

/* "kill_matrix": one record per (variant, scenario) that ran; caught = some check of it failed, and
 * failing_tensors names the tensors that did (e.g. a variant that survives the first-token probe but
 * not the golden comparison of the same scenario shows "output" without "consistency"). */
static void write_kill_matrix(struct mc_writer *w, const struct mc_run_report *rep)
{
    int any = 0;
    for (int i = 0; i < rep->n_checks; i++) {
        const struct mc_check_result *r = &rep->checks[i];
        if (!is_variant(r->backend))
            continue;
        int seen_before = 0;
        for (int j = 0; j < i && !seen_before; j++)
            seen_before = rep->checks[j].scenario == r->scenario && strcmp(rep->checks[j].backend, r->backend) == 0;
        if (seen_before)
            continue;
        int caught = 0, n_names = 0;
        const char *names[MC_CHECK_MAX_TENSORS * 2];
        for (int j = i; j < rep->n_checks; j++) {
            const struct mc_check_result *o = &rep->checks[j];
            if (o->scenario != r->scenario || strcmp(o->backend, r->backend) != 0)
                continue;
            caught |= o->status == MC_CHECK_FAIL || o->status == MC_CHECK_ERROR || o->status == MC_CHECK_NONDETERMINISTIC;
            for (int t = 0; t < o->n_tensors; t++) {
                if (mc_compare_passed(&o->tensors[t].stats))
                    continue;
                int known = 0;
                for (int k = 0; k < n_names; k++)
                    known |= strcmp(names[k], o->tensors[t].name) == 0;
                if (!known && n_names < (int)(sizeof names / sizeof names[0]))
                    names[n_names++] = o->tensors[t].name;
            }
        }
        fputs(any ? ",\n    {" : ",\n  \"kill_matrix\": [\n    {", w->f);
        any = 1;
        kv_str(w, "mutant", r->backend, 0);
        kv_str(w, "family", mc_family_name(r->family), 1);
        kv_str(w, "scenario", mc_scenario_name(r->scenario), 1);
        fprintf(w->f, ", \"caught\": %s, \"failing_tensors\": [", caught ? "true" : "false");
        for (int k = 0; k < n_names; k++) {
            fputs(k ? ", " : "", w->f);
            mc_writer_json_string(w, names[k]);
        }
        fputs("]}", w->f);
    }
    if (any)
        fputs("\n  ]", w->f);
}

static void key_list(struct mc_writer *w, const char *name, char *const *keys, int n)
{
    fprintf(w->f, ", \"%s\": [", name);
    for (int i = 0; i < n; i++) {
        fputs(i ? ",\n      " : "\n      ", w->f);
        mc_writer_json_string(w, keys[i]);
    }
    fputs(n ? "\n    ]" : "]", w->f);
}

static void write_match(struct mc_writer *w, const struct mc_diag_match *m, int comma)
{
    fputs(comma ? ", {" : "{", w->f);
    kv_str(w, "class", m->sig->id, 0);
    kv_str(w, "title", m->sig->title, 1);
    kv_str(w, "hint", m->sig->hint, 1);
    kv_int(w, "score", m->score);
    kv_int(w, "known_weight", m->known);
    kv_int(w, "total_weight", m->total);
    kv_str(w, "evidence", m->evidence, 1);
    char line[1024];
    mc_diag_format(m, line, sizeof line);
    kv_str(w, "message", line, 1);
    fputc('}', w->f);
}

static const char *verdict_name(enum mc_diag_verdict v)
{
    switch (v) {
    case MC_DIAG_LIKELY:
        return "likely";
    case MC_DIAG_POSSIBLY:
        return "possibly";
    case MC_DIAG_NO_CLASS:
        return "no class";
    case MC_DIAG_ERRORS:
        return "errors";
    case MC_DIAG_PRECISION:
        return "precision";
    }
    return "?";
}

/* "diagnoses": per (case, backend) with a failing or errored check, the verdict (likely / possibly / no
 * class / errors / precision), its line, the facts, the experiments, and the classes that fit, best first;
 * "diagnosis_summary": per backend over the run (diagnose.h). */
static void write_diagnoses(struct mc_writer *w, const struct mc_run_report *rep)
{
    fputs(",\n  \"diagnoses\": [", w->f);
    for (int i = 0; i < rep->n_diagnoses; i++) {
        const struct mc_diagnosis *d = &rep->diagnoses[i];
        fputs(i ? ",\n    {" : "\n    {", w->f);
        kv_str(w, "case", d->case_id, 0);
        kv_str(w, "backend", d->backend, 1);
        kv_str(w, "family", mc_family_name(d->family), 1);
        char line[2048], also[1024];
        mc_diag_line(d, line, sizeof line, also, sizeof also);
        kv_str(w, "verdict", verdict_name(d->verdict), 1);
        kv_str(w, "message", line, 1);
        kv_str(w, "facts", d->facts, 1);
        kv_str(w, "experiments", d->experiments, 1);
        if (d->verdict == MC_DIAG_PRECISION)
            kv_str(w, "precision", d->precision, 1);
        fputs(", \"likely\": [", w->f);
        for (int k = 0; k < d->n; k++)
            write_match(w, &d->top[k], k);
        fputs("]}", w->f);
    }
    fputs(rep->n_diagnoses ? "\n  ]" : "]", w->f);
    fputs(",\n  \"diagnosis_summary\": [", w->f);
    int any = 0;
    for (int i = 0; i < rep->n_diagnoses; i++) {
        if (!mc_diagnose_backend_first(rep->diagnoses, i))
            continue;
        const char *backend = rep->diagnoses[i].backend;
        struct mc_diag_match top[MC_DIAG_TOP];
        int cases = 0, first = 0, named = 0, likely_first = 0;
        char line[2048], also[1024];
        enum mc_diag_verdict v = MC_DIAG_NO_CLASS;
        mc_diag_summary_line(rep->diagnoses, rep->n_diagnoses, backend, line, sizeof line, also, sizeof also, &cases,
                             &first, &v);
        /* the errors and precision verdicts name no class */
        int n = v == MC_DIAG_ERRORS || v == MC_DIAG_PRECISION
                    ? 0
                    : mc_diagnose_summary(rep->diagnoses, rep->n_diagnoses, backend, top, &named, &likely_first);
        const char *verdict = verdict_name(v);
        fputs(any ? ",\n    {" : "\n    {", w->f);
        any = 1;
        kv_str(w, "backend", backend, 0);
        kv_int(w, "cases", cases);
        kv_int(w, "cases_naming_first", first);
        kv_str(w, "verdict", verdict, 1);
        kv_str(w, "message", line, 1);
        fputs(", \"likely\": [", w->f);
        for (int k = 0; k < n; k++)
            write_match(w, &top[k], k);
        fputs("]}", w->f);
    }
    fputs(any ? "\n  ]" : "]", w->f);
}

/* "baseline": the comparison with --baseline (baseline.h); records on one side only fail nothing. */
static void write_baseline(struct mc_writer *w, const struct mc_baseline_result *b)
{
    if (b == NULL)
        return;
    fputs(",\n  \"baseline\": {", w->f);
    kv_str(w, "path", b->path, 0);
    kv_num(w, "max_drift", b->max_drift);
    kv_num(w, "floor", MC_DRIFT_FLOOR);
    kv_int(w, "compared", b->n_compared);
    kv_int(w, "drifted", b->n_drifts);
    key_list(w, "missing_in_baseline", b->missing_in_baseline, b->n_missing_in_baseline);
    key_list(w, "missing_in_run", b->missing_in_run, b->n_missing_in_run);
    fputc('}', w->f);
}

/* "provenance": how the numbers were made (provenance.h) and the goldens they were compared with. */
/* The Python backends (provenance.h): null without any; a "" field of the provenance is null here. */
static void json_python(struct mc_writer *w, const struct mc_provenance_python *py)
{
    fputs("\"python\": ", w->f);
    if (!py->present) {
        fputs("null,\n    ", w->f);
        return;
    }
    fputc('{', w->f);
    kv_str(w, "interpreter", py->interpreter, 0);
    kv_str(w, "executable", py->executable[0] ? py->executable : NULL, 1);
    kv_str(w, "version", py->version[0] ? py->version : NULL, 1);
    fputs(", \"packages\": {", w->f);
    for (int i = 0; i < py->n_packages; i++)
        kv_str(w, py->packages[i].name, py->packages[i].version[0] ? py->packages[i].version : NULL, i > 0);
    fputs("}, \"specs\": [", w->f);
    for (int i = 0; i < py->n_specs; i++) {
        fputs(i ? ", {" : "{", w->f);
        kv_str(w, "spec", py->specs[i].spec, 0);
        kv_str(w, "path", py->specs[i].path[0] ? py->specs[i].path : NULL, 1);
        kv_str(w, "sha256", py->specs[i].sha256[0] ? py->specs[i].sha256 : NULL, 1);
        fputc('}', w->f);
    }
    fputs("]},\n    ", w->f);
}

static void write_provenance(struct mc_writer *w, const struct mc_run_report *rep)
{
    const struct mc_provenance *p = rep->provenance;
    fputs("  \"provenance\": {", w->f);
    if (p) {
        kv_str(w, "mixcheck_version", p->version, 0);
        kv_str(w, "git_describe", p->git_describe, 1);
        kv_str(w, "git_commit", p->git_commit, 1);
        fprintf(w->f, ", \"git_dirty\": %s", p->git_dirty < 0 ? "null" : p->git_dirty ? "true" : "false");
        kv_str(w, "compiler", p->compiler, 1);
        kv_str(w, "build_type", p->build_type, 1);
        kv_str(w, "openblas", p->blas, 1);
        kv_str(w, "cpu_model", p->cpu_model, 1);
        if (p->threads > 0)
            kv_int(w, "threads", p->threads);
        else
            fputs(", \"threads\": null", w->f);
        kv_str(w, "openblas_num_threads", p->openblas_num_threads_set ? p->openblas_num_threads : NULL, 1);
        kv_int(w, "jobs", p->jobs);
        fprintf(w->f, ", \"isolate\": %s", p->isolate ? "true" : "false");
        kv_int(w, "seeds", p->seeds > 1 ? p->seeds : 1);
        kv_str(w, "started_utc", p->started_utc, 1);
        kv_str(w, "command_line", p->command_line, 1);
        fputs(",\n    \"plugins\": [", w->f);
        for (int i = 0; i < p->n_plugins; i++) {
            fputs(i ? ", {" : "{", w->f);
            kv_str(w, "path", p->plugins[i].path, 0);
            kv_str(w, "sha256", p->plugins[i].sha256[0] ? p->plugins[i].sha256 : NULL, 1);
            fputc('}', w->f);
        }
        fputs("],\n    ", w->f);
        json_python(w, &p->python);
    } else {
        fputs("\n    ", w->f);
    }
    fputs("\"goldens\": [", w->f);
    for (int i = 0; i < rep->n_goldens; i++) {
        const struct mc_run_golden *g = &rep->goldens[i];
        fputs(i ? ",\n      {" : "\n      {", w->f);
        kv_str(w, "case", g->case_id, 0);
        kv_str(w, "case_path", g->case_path, 1);
        kv_str(w, "golden", g->golden_path, 1);
        kv_str(w, "content_sha256", g->content_sha256, 1);
        fputc('}', w->f);
    }
    fputs(rep->n_goldens ? "\n    ]}" : "]}", w->f);
}

enum mc_err_code mc_report_json_write(const char *path, const struct mc_run_report *rep, int exit_code,
                                      struct mc_error *err)
{
    return mc_report_json_write_flags(path, rep, exit_code, 0, err);
}

enum mc_err_code mc_report_json_write_flags(const char *path, const struct mc_run_report *rep, int exit_code,
                                            int flags, struct mc_error *err)
{
    struct mc_writer w;
    if (mc_writer_open(&w, path, err) != MC_ERR_NONE)
        return err->code;
    fprintf(w.f, "{\n  \"format\": \"mixcheck-report\",\n  \"format_version\": %d,\n", MC_REPORT_FORMAT_VERSION);
    fprintf(w.f, "  \"started_unix\": %lld,\n  \"duration_s\": ", (long long)rep->started_unix);
    mc_writer_json_number(&w, rep->duration_s);
    fputs(",\n", w.f);
    write_provenance(&w, rep);
    fprintf(w.f, ",\n  \"summary\": {\"cases\": %d, \"checks\": %d, \"pass\": %d, \"fail\": %d, \"error\": %d, "
                 "\"unsupported\": %d, \"skipped\": %d, \"nondeterministic\": %d, \"drift\": %d, "
                 "\"problems\": %d, \"exit_code\": %d},\n",
            rep->n_cases, rep->n_checks, rep->counts[MC_CHECK_PASS], rep->counts[MC_CHECK_FAIL],
            rep->counts[MC_CHECK_ERROR], rep->counts[MC_CHECK_UNSUPPORTED], rep->counts[MC_CHECK_SKIPPED],
            rep->counts[MC_CHECK_NONDETERMINISTIC], rep->counts[MC_CHECK_DRIFT], rep->n_problems, exit_code);
    if (rep->shard_count > 1) {
        fprintf(w.f, "  \"shard\": {\"index\": %d, \"count\": %d, \"checks_all_shards\": %d, \"plan_sha256\": ",
                rep->shard_index, rep->shard_count, rep->shard_checks);
        mc_writer_json_string(&w, rep->shard_plan_sha256);
        fputs(", \"must_test\": [", w.f);
        for (int i = 0; i < rep->n_must_test; i++) {
            fputs(i ? ", " : "", w.f);
            mc_writer_json_string(&w, rep->must_test[i]);
        }
        fputs("]},\n", w.f);
    }
    fputs("  \"problems\": [", w.f);
    for (int i = 0; i < rep->n_problems; i++) {
        const struct mc_run_problem *p = &rep->problems[i];
        fputs(i ? ",\n    {" : "\n    {", w.f);
        kv_str(&w, "path", p->path, 0);
        kv_str(&w, "case", p->case_id[0] ? p->case_id : NULL, 1);
        kv_str(&w, "scenario", p->scenario[0] ? p->scenario : NULL, 1);
        kv_str(&w, "kind", p->code == MC_ERR_BACKEND ? "untestable" : p->code == MC_ERR_USAGE ? "not_run" : "input", 1);
        kv_str(&w, "message", p->msg, 1);
        fputc('}', w.f);
    }
    fputs(rep->n_problems ? "\n  ],\n" : "],\n", w.f);
    fputs("  \"results\": [", w.f);
    int first = 1;
    for (int i = 0; i < rep->n_checks; i++) {
        const struct mc_check_result *r = &rep->checks[i];
        int n = r->n_tensors ? r->n_tensors : 1;
        for (int k = 0; k < n; k++) {
            fputs(first ? "\n" : ",\n", w.f);
            first = 0;
            write_record(&w, r, r->n_tensors ? &r->tensors[k] : NULL,
                         r->n_tensors ? mc_baseline_drift_of(rep->baseline, i, k) : NULL, flags);
        }
    }
    fputs(first ? "]" : "\n  ]", w.f);
    write_kill_matrix(&w, rep);
    write_diagnoses(&w, rep);
    write_baseline(&w, rep->baseline);
    fputs("\n}\n", w.f);
    return mc_writer_commit(&w, err);
}
