/* runner.c — see runner.h. */
#include "run/runner.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/sha256.h"
#include "diagnosis/diagnose.h"
#include "experiment/experiment.h"
#include "family/family.h"
#include "golden/golden.h"
#include "exec/isolate.h"
#include "stack/stackcheck.h"
#include "family/stackconfig.h"
#include "golden/stackgolden.h"
#include "run/shard.h"

/* ---- discovery ------------------------------------------------------------------------------------ */

struct strlist {
    char **v;
    int n, cap;
};

static int strlist_push(struct strlist *l, const char *s)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        char **v = realloc(l->v, (size_t)cap * sizeof *v);
        if (v == NULL)
            return -1;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n] = strdup(s);
    if (l->v[l->n] == NULL)
        return -1;
    l->n++;
    return 0;
}

static int has_yaml_suffix(const char *name)
{
    size_t n = strlen(name);
    return (n > 5 && strcmp(name + n - 5, ".yaml") == 0) || (n > 4 && strcmp(name + n - 4, ".yml") == 0);
}

/* Case files under dir, recursively; `tolerances/` is skipped, and so is every `long/` directory
 * unless include_long (the cases for --long; *n_long counts the files left out). */
static enum mc_err_code walk(const char *dir, int include_long, int *n_long, struct strlist *out,
                             struct mc_error *err)
{
    struct dirent **ents = NULL;
    int n = scandir(dir, &ents, NULL, alphasort);
    if (n < 0)
        return mc_error_set(err, MC_ERR_USAGE, "%s: cannot read directory: %s", dir, strerror(errno));
    enum mc_err_code rc = MC_ERR_NONE;
    for (int i = 0; i < n; i++) {
        const char *name = ents[i]->d_name;
        if (rc != MC_ERR_NONE || name[0] == '.')
            continue;
        size_t len = strlen(dir) + strlen(name) + 2;
        char *path = malloc(len);
        if (path == NULL) {
            rc = mc_error_set(err, MC_ERR_NOMEM, "out of memory");
            continue;
        }
        snprintf(path, len, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", name);
        struct stat st;
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
            if (strcmp(name, "long") == 0 && !include_long) {
                struct strlist skipped = {0};
                int ignored = 0;
                rc = walk(path, 1, &ignored, &skipped, err);
                *n_long += skipped.n;
                mc_run_files_free(skipped.v, skipped.n);
            } else if (strcmp(name, "tolerances") != 0) {
                rc = walk(path, include_long, n_long, out, err);
            }
        } else if (has_yaml_suffix(name)) {
            if (strlist_push(out, path) != 0)
                rc = mc_error_set(err, MC_ERR_NOMEM, "out of memory");
        }
        free(path);
    }
    for (int i = 0; i < n; i++)
        free(ents[i]);
    free(ents);
    return rc;
}

enum mc_err_code mc_run_discover(const char *const *paths, int n_paths, char ***files, int *n_files,
                                 struct mc_error *err)
{
    int n_long = 0;
    return mc_run_discover_long(paths, n_paths, 1, &n_long, files, n_files, err);
}

enum mc_err_code mc_run_discover_long(const char *const *paths, int n_paths, int include_long, int *n_long,
                                      char ***files, int *n_files, struct mc_error *err)
{
    struct strlist l = {0};
    *n_long = 0;
    enum mc_err_code rc = MC_ERR_NONE;
    for (int i = 0; i < n_paths && rc == MC_ERR_NONE; i++) {
        struct stat st;
        if (stat(paths[i], &st) != 0) {
            rc = mc_error_set(err, MC_ERR_USAGE, "%s: %s", paths[i], strerror(errno));
        } else if (S_ISDIR(st.st_mode)) {
            rc = walk(paths[i], include_long, n_long, &l, err);
        } else if (strlist_push(&l, paths[i]) != 0) {
            rc = mc_error_set(err, MC_ERR_NOMEM, "out of memory");
        }
    }
    if (rc != MC_ERR_NONE) {
        mc_run_files_free(l.v, l.n);
        *files = NULL;
        *n_files = 0;
        return rc;
    }
    *files = l.v;
    *n_files = l.n;
    return MC_ERR_NONE;
}

void mc_run_files_free(char **files, int n_files)
{
    for (int i = 0; i < n_files; i++)
        free(files[i]);
    free(files);
}

/* ---- filters ----------------------------------------------------------------------------------------- */

int mc_run_pattern_match(const char *pattern, const char *id)
{
    if (strpbrk(pattern, "*?[") != NULL)
        return fnmatch(pattern, id, 0) == 0;
    return strstr(id, pattern) != NULL;
}

/* Counts, per -k pattern, the scheduled checks whose id it matches (for "matched no check"). */
static void count_pattern_hits(const struct mc_run_filter *f, const char *case_id, enum mc_scenario_kind scenario,
                               const char *backend, enum mc_dtype dtype, int *hits)
{
    char id[512];
    snprintf(id, sizeof id, "%s/%s/%s/%s", case_id, mc_scenario_name(scenario), backend, mc_dtype_name(dtype));
    for (int i = 0; i < f->n_patterns; i++)
        hits[i] += mc_run_pattern_match(f->patterns[i], id);
}

int mc_run_filter_match(const struct mc_run_filter *f, const char *case_id, enum mc_family family,
                        enum mc_scenario_kind scenario, const char *backend, enum mc_dtype dtype)
{
    if (f->family && strcmp(f->family, mc_family_name(family)) != 0)
        return 0;
    if (f->scenario && strcmp(f->scenario, mc_scenario_name(scenario)) != 0)
        return 0;
    if (f->backend && strcmp(f->backend, backend) != 0)
        return 0;
    if (f->dtype && strcmp(f->dtype, mc_dtype_name(dtype)) != 0)
        return 0;
    if (f->n_patterns == 0 && f->shard == NULL)
        return 1;
    char id[512];
    snprintf(id, sizeof id, "%s/%s/%s/%s", case_id, mc_scenario_name(scenario), backend, mc_dtype_name(dtype));
    if (f->shard && !mc_shard_has(f->shard, id))
        return 0;
    if (f->n_patterns == 0)
        return 1;
    for (int i = 0; i < f->n_patterns; i++)
        if (mc_run_pattern_match(f->patterns[i], id))
            return 1;
    return 0;
}

/* ---- report ------------------------------------------------------------------------------------------- */

/* `case_id` and `scenario` may be NULL (not known, or not one scenario's problem). */
static enum mc_err_code add_problem(struct mc_run_report *rep, const char *path, const char *case_id,
                                    const char *scenario, const struct mc_error *e, const struct mc_run_callbacks *cb,
                                    struct mc_error *err)
{
    if (rep->n_problems == rep->cap_problems) {
        int cap = rep->cap_problems ? 2 * rep->cap_problems : 8;
        struct mc_run_problem *v = realloc(rep->problems, (size_t)cap * sizeof *v);
        if (v == NULL)
            return mc_error_set(err, MC_ERR_NOMEM, "out of memory");
        rep->problems = v;
        rep->cap_problems = cap;
    }
    struct mc_run_problem *p = &rep->problems[rep->n_problems++];
    snprintf(p->path, sizeof p->path, "%s", path);
    snprintf(p->case_id, sizeof p->case_id, "%s", case_id ? case_id : "");
    snprintf(p->scenario, sizeof p->scenario, "%s", scenario ? scenario : "");
    p->code = e->code;
    snprintf(p->msg, sizeof p->msg, "%s", e->msg);
    if (cb && cb->on_problem)
        cb->on_problem(p, cb->user);
    return MC_ERR_NONE;
}

static struct mc_check_result *next_check(struct mc_run_report *rep, struct mc_error *err)
{
    if (rep->n_checks == rep->cap_checks) {
        /* some 50 KB a result, thousands of them: kept out of the workers' forks (isolate.h) */
        int cap = rep->cap_checks ? 2 * rep->cap_checks : 64;
        struct mc_check_result *v = mc_isolate_private_resize(rep->checks, (size_t)rep->cap_checks * sizeof *v,
                                                              (size_t)cap * sizeof *v);
        if (v == NULL) {
            mc_error_set(err, MC_ERR_NOMEM, "out of memory");
            return NULL;
        }
        rep->checks = v;
        rep->cap_checks = cap;
    }
    return &rep->checks[rep->n_checks];
}

/* What became of a selected (backend, scenario, dtype): outcome 0 a check gave a verdict, 1 the backend
 * answered unsupported (or the check was skipped), 2 it was not scheduled; `reason` says why for 1 and 2. */
enum { COMBO_RAN, COMBO_UNSUPPORTED, COMBO_NOT_SCHEDULED };

static void note_combo(struct mc_run_report *rep, const char *backend, enum mc_scenario_kind kind, enum mc_dtype dtype,
                       int outcome, const char *reason, struct mc_error *err)
{
    struct mc_run_combo *c = NULL;
    for (int i = rep->n_combos - 1; i >= 0 && c == NULL; i--)
        if (rep->combos[i].scenario == kind && rep->combos[i].dtype == dtype && strcmp(rep->combos[i].backend, backend) == 0)
            c = &rep->combos[i];
    if (c == NULL) {
        if (rep->n_combos == rep->cap_combos) {
            int cap = rep->cap_combos ? 2 * rep->cap_combos : 32;
            struct mc_run_combo *v = realloc(rep->combos, (size_t)cap * sizeof *v);
            if (v == NULL) {
                mc_error_set(err, MC_ERR_NOMEM, "out of memory");
                return;
            }
            rep->combos = v;
            rep->cap_combos = cap;
        }
        c = &rep->combos[rep->n_combos++];
        *c = (struct mc_run_combo){.backend = backend, .scenario = kind, .dtype = dtype};
    }
    c->ran += outcome == COMBO_RAN;
    c->unsupported += outcome == COMBO_UNSUPPORTED;
    c->not_scheduled += outcome == COMBO_NOT_SCHEDULED;
    if (outcome != COMBO_RAN && c->reason[0] == '\0')
        snprintf(c->reason, sizeof c->reason, "%s", reason && reason[0] ? reason : "no reason given");
}

/* A check's result, for note_combo. */
static void note_result(struct mc_run_report *rep, const struct mc_check_result *res, struct mc_error *err)
{
    int unsup = res->status == MC_CHECK_UNSUPPORTED || res->status == MC_CHECK_SKIPPED;
    note_combo(rep, res->backend, res->scenario, res->dtype, unsup ? COMBO_UNSUPPORTED : COMBO_RAN, res->message, err);
}

/* Why mc_run_applies says no. */
static void not_scheduled(struct mc_run_report *rep, const struct mc_backend_ops *ops, enum mc_scenario_kind kind,
                          enum mc_dtype dtype, struct mc_error *err)
{
    char why[256];
    if (!(ops->dtypes & MC_DTYPE_BIT(dtype)))
        snprintf(why, sizeof why, "not scheduled: the backend does not declare dtype %s", mc_dtype_name(dtype));
    else if (kind == MC_SCENARIO_HEAD_SHARD)
        snprintf(why, sizeof why, "not scheduled: head_shard runs at f32 and f64 only");
    else if (kind == MC_SCENARIO_CHUNK_SIZE_INVARIANCE)
        snprintf(why, sizeof why, "not scheduled: chunk_size_invariance needs an internal chunk length "
                                  "(MC_CAP_CHUNK_SIZE)");
    else
        snprintf(why, sizeof why, "not scheduled: the backend implements none of this stack's layer families");
    note_combo(rep, ops->name, kind, dtype, COMBO_NOT_SCHEDULED, why, err);
}

/* The experiments of one backend's diagnosis, each a job: the kinds, in job order. */
struct exp_jobs {
    const struct mc_job *base;
    enum mc_experiment_kind kind[MC_EXP_COUNT];
};

static void run_experiment_job(struct mc_job *job, void *user)
{
    const struct exp_jobs *x = user;
    mc_experiment_run(x->kind[job - x->base], &job->ctx, &job->res, &job->err);
}

/* The context the experiments of `backend` run in: one of its checks' at f64, else at f32 (the
 * experiments compare at full precision), else none. */
static const struct mc_scenario_ctx *experiment_ctx(const struct mc_job *jobs, int n, const char *backend)
{
    const struct mc_scenario_ctx *f32 = NULL;
    for (int i = 0; i < n; i++) {
        if (strcmp(jobs[i].ctx.ops->name, backend) != 0)
            continue;
        if (jobs[i].ctx.dtype == MC_DTYPE_F64)
            return &jobs[i].ctx;
        if (jobs[i].ctx.dtype == MC_DTYPE_F32 && f32 == NULL)
            f32 = &jobs[i].ctx;
    }
    return f32;
}

/* Runs the experiments the diagnosis asks for on `backend` (isolated, like checks) into exp[]. */
static void run_experiments(const struct mc_case *c, const struct mc_golden *g, const struct mc_check_result *checks,
                            int n_checks, const struct mc_job *jobs, int n_jobs, const char *backend,
                            const struct mc_run_options *opt, struct mc_experiment_outcome exp[MC_EXP_COUNT],
                            struct mc_error *err)
{
    memset(exp, 0, sizeof(*exp) * MC_EXP_COUNT);
    const struct mc_scenario_ctx *base = experiment_ctx(jobs, n_jobs, backend);
    if (base == NULL || (base->ref_ops != NULL && base->ops == base->ref_ops) || opt->no_experiments)
        return;
    int want[MC_EXP_COUNT];
    mc_diagnose_experiments(c, g, checks, n_checks, backend, want);
    struct mc_job *ej = calloc(MC_EXP_COUNT, sizeof *ej);
    struct exp_jobs x = {.base = ej};
    int ne = 0;
    for (int k = 0; ej != NULL && k < MC_EXP_COUNT; k++) {
        if (!want[k] || !mc_experiment_applies((enum mc_experiment_kind)k, base))
            continue;
        ej[ne].ctx = *base;
        ej[ne].ctx.probes = NULL;
        x.kind[ne++] = (enum mc_experiment_kind)k;
    }
    struct mc_isolate_options iso = {.isolate = opt->isolate, .jobs = opt->jobs, .timeout_s = opt->timeout_s};
    if (ej != NULL && ne > 0 && mc_isolate_run(ej, ne, &iso, run_experiment_job, &x, err) == MC_ERR_NONE)
        for (int i = 0; i < ne; i++)
            if (ej[i].err.code == MC_ERR_NONE)
                mc_experiment_outcome(x.kind[i], &ej[i].res, &exp[x.kind[i]]);
    free(ej);
}

/* The diagnosis of every backend with a failing check among the case's checks [first, rep->n_checks):
 * once per case, after its checks (diagnose.h), with the experiments it asks for run on the backend
 * (jobs: the case's checks as they were scheduled; NULL for a model case). */
static void diagnose_case(const struct mc_case *c, const struct mc_golden *g, int first, struct mc_run_report *rep,
                          const struct mc_job *jobs, int n_jobs, const struct mc_run_options *opt,
                          const struct mc_run_callbacks *cb, struct mc_error *err)
{
    for (int i = first; i < rep->n_checks; i++) {
        const char *backend = rep->checks[i].backend;
        int seen = 0;
        for (int j = first; j < i && !seen; j++)
            seen = strcmp(rep->checks[j].backend, backend) == 0;
        if (seen)
            continue;
        if (rep->n_diagnoses == rep->cap_diagnoses) {
            int cap = rep->cap_diagnoses ? 2 * rep->cap_diagnoses : 8;
            struct mc_diagnosis *v = realloc(rep->diagnoses, (size_t)cap * sizeof *v);
            if (v == NULL) {
                mc_error_set(err, MC_ERR_NOMEM, "out of memory");
                return;
            }
            rep->diagnoses = v;
            rep->cap_diagnoses = cap;
        }
        struct mc_experiment_outcome exp[MC_EXP_COUNT];
        memset(exp, 0, sizeof exp);
        if (jobs != NULL && opt != NULL) {
            struct mc_error e = {0};
            run_experiments(c, g, rep->checks + first, rep->n_checks - first, jobs, n_jobs, backend, opt, exp, &e);
        }
        struct mc_diagnosis *d = &rep->diagnoses[rep->n_diagnoses];
        if (!mc_diagnose_case(c, g, rep->checks + first, rep->n_checks - first, backend, exp, d))
            continue;
        rep->n_diagnoses++;
        if (cb && cb->on_diagnosis)
            cb->on_diagnosis(d, cb->user);
    }
}

/* ---- running ------------------------------------------------------------------------------------------ */

int mc_run_applies(const struct mc_backend_ops *ops, enum mc_scenario_kind kind, enum mc_dtype dtype)
{
    if (!(ops->dtypes & MC_DTYPE_BIT(dtype)))
        return 0;
    /* head_shard sums partial outputs each rounded to storage at f16/bf16: f32 and f64 only (headshard.h) */
    if (kind == MC_SCENARIO_HEAD_SHARD && dtype != MC_DTYPE_F32 && dtype != MC_DTYPE_F64)
        return 0;
    return kind != MC_SCENARIO_CHUNK_SIZE_INVARIANCE || (ops->caps & MC_CAP_CHUNK_SIZE);
}

/* 1 when a scenario draws parameters from its seed (split points, distractors, the serving scenarios'
 * cuts, slots and orders, the accept sweep's order, the inputs of long_decode and length_sweep). */
static int randomised(const struct mc_scenario_spec *sp)
{
    switch (sp->kind) {
    case MC_SCENARIO_CHUNKED:
        return sp->random_sets > 0;
    case MC_SCENARIO_FIRST_TOKEN_CAUSALITY:
    case MC_SCENARIO_SPECULATIVE_VERIFY:
    case MC_SCENARIO_PACKED_PREFILL:
    case MC_SCENARIO_SLOT_POOL:
    case MC_SCENARIO_MIXED_STEP:
    case MC_SCENARIO_PREFIX_RESUME: /* the split points before the export are always drawn */
    case MC_SCENARIO_LONG_DECODE:
    case MC_SCENARIO_LENGTH_SWEEP:
        return 1;
    default:
        return 0;
    }
}

/* Folds one seed's result into the first: tensors merge by name (worst headroom wins), the worst
 * status wins, and the first failing seed is named in the detail. */
static void merge_seed(struct mc_check_result *into, const struct mc_check_result *r, uint64_t seed)
{
    for (int i = 0; i < r->n_tensors; i++) {
        int k = 0;
        while (k < into->n_tensors && strcmp(into->tensors[k].name, r->tensors[i].name) != 0)
            k++;
        if (k == into->n_tensors) {
            if (k == MC_CHECK_MAX_TENSORS)
                continue;
            into->tensors[into->n_tensors++] = r->tensors[i];
            continue;
        }
        mc_compare_stats_merge(&into->tensors[k].stats, &r->tensors[i].stats);
        into->tensors[k].comparisons += r->tensors[i].comparisons;
    }
    if (r->status != MC_CHECK_PASS && into->status == MC_CHECK_PASS) {
        into->status = r->status;
        snprintf(into->message, sizeof into->message, "%s", r->message);
        snprintf(into->detail, sizeof into->detail, "seed offset %llu: %.200s", (unsigned long long)seed, r->detail);
        memcpy(into->first_fail_tensor, r->first_fail_tensor, sizeof into->first_fail_tensor);
        into->first_fail = r->first_fail;
        into->first_stage = r->first_stage;
    }
    into->duration_s += r->duration_s;
}

/* Runs one check, over several seeds when asked and the scenario is randomised. */
static enum mc_err_code run_check(struct mc_scenario_ctx *ctx, const struct mc_run_options *opt,
                                  struct mc_check_result *res, struct mc_error *err)
{
    if (mc_scenario_run(ctx, res, err) != MC_ERR_NONE)
        return err->code;
    if (opt->seeds <= 1 || !randomised(ctx->spec))
        return MC_ERR_NONE;
    struct mc_check_result *more = malloc(sizeof *more);
    if (more == NULL)
        return mc_error_set(err, MC_ERR_NOMEM, "out of memory");
    uint64_t base = ctx->seed_offset;
    for (int k = 1; k < opt->seeds; k++) {
        ctx->seed_offset = base + (uint64_t)k * 1000003u;
        if (mc_scenario_run(ctx, more, err) != MC_ERR_NONE)
            break;
        merge_seed(res, more, ctx->seed_offset);
    }
    ctx->seed_offset = base;
    free(more);
    return err->code;
}
/* A backend of the case's family, or for a model case a whole-stack backend of that name (docs/models.md
 * §7), else one of any family its layers may have. */
static const struct mc_backend_ops *case_find(const struct mc_registry *reg, const char *name, const struct mc_case *c)
{
    enum mc_family fams[4] = {c->family};
    enum mc_model_type t;
    const struct mc_backend_ops *whole = c->model_type != NULL ? mc_registry_find(reg, name, MC_FAMILY_STACK) : NULL;
    if (whole != NULL)
        return whole;
    int n = c->model_type != NULL && mc_model_type_from_name(c->model_type, &t) == 0 ? mc_model_type_families(t, fams) : 1;
    for (int i = 0; i < n; i++) {
        const struct mc_backend_ops *o = mc_registry_find(reg, name, fams[i]);
        if (o != NULL)
            return o;
    }
    return NULL;
}

/* The backends to run on a case: the case's own list plus every backend a plugin registered for its
 * family (a loaded port runs everywhere it applies), or only the one --backend names, which also runs
 * on cases that do not list it when it is registered for their family. */
static int case_backends(const struct mc_case *c, const struct mc_registry *reg, const struct mc_run_options *opt,
                         const char **names)
{
    const char *only = opt->filter.backend;
    if (only != NULL) {
        int listed = 0;
        for (int i = 0; i < c->n_backends; i++)
            listed |= strcmp(c->backends[i], only) == 0;
        if (listed || case_find(reg, only, c) != NULL) {
            names[0] = only;
            return 1;
        }
        return 0;
    }
    int n = 0;
    for (int i = 0; i < c->n_backends; i++)
        names[n++] = c->backends[i];
    for (int i = 0; i < reg->n; i++) {
        const struct mc_backend_ops *o = reg->entries[i].ops;
        if (reg->entries[i].plugin == 0 || case_find(reg, o->name, c) != o)
            continue;
        int listed = 0;
        for (int k = 0; k < n; k++)
            listed |= strcmp(names[k], o->name) == 0;
        if (!listed)
            names[n++] = o->name;
    }
    return n;
}

/* Room case_backends needs for a case's names. */
static int max_backends(const struct mc_case *c, const struct mc_registry *reg)
{
    return c->n_backends + reg->n + 1;
}

/* The checks of a case the filters select: counted, and those a backend does not do (dtype,
 * internal chunks) counted apart. A backend the registry lacks counts as selected: running the case
 * reports it. Needs no golden, so a filtered-out case costs only its YAML. */
static enum mc_err_code count_selected(const struct mc_case *c, const struct mc_registry *reg,
                                       const struct mc_run_options *opt, int *selected, int *not_applicable,
                                       struct mc_run_report *note, struct mc_error *err)
{
    const char **names = calloc((size_t)max_backends(c, reg), sizeof *names);
    if (names == NULL)
        return mc_error_set(err, MC_ERR_NOMEM, "out of memory");
    *selected = *not_applicable = 0;
    int n = case_backends(c, reg, opt, names);
    for (int bi = 0; bi < n; bi++) {
        const struct mc_backend_ops *ops = case_find(reg, names[bi], c);
        for (int si = 0; si < c->n_scenarios; si++)
            for (int di = 0; di < c->n_dtypes; di++) {
                if (!mc_run_filter_match(&opt->filter, c->id, c->family, c->scenarios[si].kind, names[bi],
                                         c->dtypes[di]))
                    continue;
                if (ops == NULL || mc_run_applies(ops, c->scenarios[si].kind, c->dtypes[di])) {
                    (*selected)++;
                } else {
                    (*not_applicable)++;
                    if (note != NULL)
                        not_scheduled(note, ops, c->scenarios[si].kind, c->dtypes[di], err);
                }
            }
    }
    free(names);
    return MC_ERR_NONE;
}

/* Loads a case and, when the filters select a check of it, its golden, and validates every
 * scenario. Returns 0 when the case is ready to run, 1 when the filters leave nothing of it (its
 * golden is not even read), -1 after recording a problem. */
static int prepare_case(const char *path, const struct mc_registry *reg, const struct mc_run_options *opt,
                        struct mc_case *c, struct mc_golden *g, struct mc_run_report *rep,
                        const struct mc_run_callbacks *cb, struct mc_error *err)
{
    struct mc_error e = {0};
    int loaded = 0;
    const char *scenario = NULL; /* the scenario that does not fit the golden */
    if (mc_case_load(path, c, &e) == MC_ERR_NONE) {
        loaded = 1;
        int selected = 0, not_applicable = 0;
        if (count_selected(c, reg, opt, &selected, &not_applicable, NULL, err) != MC_ERR_NONE)
            return -1;
        if (selected == 0) {
            /* what was selected of it, none scheduled: noted for the backends under test */
            rep->n_not_applicable += not_applicable;
            if (not_applicable > 0 && count_selected(c, reg, opt, &selected, &not_applicable, rep, err) != MC_ERR_NONE)
                return -1;
            return 1;
        }
        if (c->model_type != NULL)
            return 2; /* a model case: run_model_case reads its golden */
        if (mc_golden_load(c->golden_path, g, &e) == MC_ERR_NONE) {
            if (g->config.family != c->family)
                mc_error_set(&e, MC_ERR_INPUT, "%s:%d:%d: in 'family': '%s' but golden %s holds '%s'", path,
                             c->family_line, c->family_column, mc_family_name(c->family), c->golden_path,
                             mc_family_name(g->config.family));
            for (int i = 0; i < c->n_scenarios && e.code == MC_ERR_NONE; i++)
                if (mc_scenario_validate(c, &c->scenarios[i], g, &e) != MC_ERR_NONE)
                    scenario = mc_scenario_name(c->scenarios[i].kind);
        } else if (e.code != MC_ERR_NOMEM) {
            mc_error_prefix(&e, "%s:%d:%d: in 'golden'", path, c->golden_line, c->golden_column);
        }
    }
    if (e.code == MC_ERR_NONE)
        return 0;
    if (e.code == MC_ERR_NOMEM)
        mc_error_set(err, MC_ERR_NOMEM, "%s", e.msg);
    else
        add_problem(rep, path, loaded ? c->id : NULL, scenario, &e, cb, err);
    return -1;
}

/* The device whose tolerances apply to a backend: its own, or the one --device-profile maps it to. */
static const char *tolerance_device(const struct mc_run_options *opt, const char *device)
{
    for (int i = 0; i < opt->n_device_map; i++)
        if (strcmp(opt->device_map[i].device, device) == 0)
            return opt->device_map[i].as;
    return device;
}

/* The profile for (device, dtype): the first --tolerance profile that covers it, else the case's. */
static const struct mc_tolerance_profile *tolerance_profile(const struct mc_case *c, const struct mc_run_options *opt,
                                                            const char *device, enum mc_dtype dtype)
{
    for (int i = 0; i < opt->n_tolerances; i++)
        if (mc_tolerance_covers(opt->tolerances[i], device, dtype))
            return opt->tolerances[i];
    return &c->tolerance;
}

/* Appends a zeroed job to a case's list, growing it as checks are scheduled: a job carries a whole
 * check result (some 50 KB), so the list holds the case's checks, not every (backend, scenario, dtype)
 * the case could name (fresh pages the parent would zero, and its workers inherit, for nothing). */
static struct mc_job *job_push(struct mc_job **jobs, int *n, int *cap, struct mc_error *err)
{
    if (*n == *cap) {
        int grown = *cap ? 2 * *cap : 16;
        struct mc_job *v = realloc(*jobs, (size_t)grown * sizeof *v);
        if (v == NULL) {
            mc_error_set(err, MC_ERR_NOMEM, "out of memory");
            return NULL;
        }
        *jobs = v;
        *cap = grown;
    }
    struct mc_job *job = &(*jobs)[(*n)++];
    memset(job, 0, sizeof *job);
    return job;
}

/* Runs one job in this process: the job function of mc_isolate_run. */
static void run_job(struct mc_job *job, void *user)
{
    const struct mc_run_options *opt = user;
    run_check(&job->ctx, opt, &job->res, &job->err);
}

/* Every selected (backend, scenario, dtype) of a case, run (isolated) and reported in a fixed order. */
static void run_case(const struct mc_case *c, const struct mc_golden *g, const struct mc_registry *reg,
                     const struct mc_run_options *opt, const struct mc_run_callbacks *cb, struct mc_run_report *rep,
                     int *pattern_hits, struct mc_error *err)
{
    int nb = max_backends(c, reg);
    int cap = 0, n = 0;
    struct mc_refrun refs[MC_CASE_MAX_DTYPES] = {{0}};
    int have_ref[MC_CASE_MAX_DTYPES] = {0};
    struct mc_weightset wsets[MC_CASE_MAX_DTYPES] = {{0}};
    const char **names = calloc((size_t)nb, sizeof *names);
    struct mc_job *jobs = NULL;
    if (names == NULL) {
        mc_error_set(err, MC_ERR_NOMEM, "out of memory");
        goto out;
    }
    int n_names = case_backends(c, reg, opt, names);
    /* the weights in each selected dtype, converted once for all checks of the case */
    int used[MC_CASE_MAX_DTYPES] = {0};
    for (int di = 0; di < c->n_dtypes; di++) {
        for (int bi = 0; bi < n_names && !used[di]; bi++) {
            const struct mc_backend_ops *ops = mc_registry_find(reg, names[bi], c->family);
            for (int si = 0; si < c->n_scenarios && ops != NULL && !used[di]; si++)
                used[di] = mc_run_filter_match(&opt->filter, c->id, c->family, c->scenarios[si].kind, names[bi],
                                               c->dtypes[di]) &&
                           mc_run_applies(ops, c->scenarios[si].kind, c->dtypes[di]);
        }
        if (used[di] && mc_weightset_build(g, c->dtypes[di], &wsets[di], err) != MC_ERR_NONE)
            goto out;
    }
    /* one reference run per selected reduced dtype of the case, shared by its checks (refrun.h) */
    const struct mc_backend_ops *ref_ops = mc_registry_find(reg, "reference", c->family);
    for (int di = 0; di < c->n_dtypes && ref_ops != NULL; di++) {
        enum mc_dtype dt = c->dtypes[di];
        if (!used[di] || (dt != MC_DTYPE_F16 && dt != MC_DTYPE_BF16) || !(ref_ops->dtypes & MC_DTYPE_BIT(MC_DTYPE_F64)))
            continue;
        char why[512];
        if (mc_refrun_build(g, ref_ops, dt, &refs[di], why, sizeof why) != 0) {
            struct mc_error e = {0};
            mc_error_set(&e, MC_ERR_INPUT, "%s: %s", c->path, why);
            add_problem(rep, c->path, c->id, NULL, &e, cb, err);
            goto out;
        }
        have_ref[di] = 1;
    }
    for (int bi = 0; bi < n_names && err->code == MC_ERR_NONE; bi++) {
        const struct mc_backend_ops *ops = mc_registry_find(reg, names[bi], c->family);
        if (ops == NULL) {
            struct mc_error e = {0};
            mc_error_set(&e, MC_ERR_BACKEND, "%s: backend '%s' is not available for %s (load it with --plugin)",
                         c->path, names[bi], mc_family_name(c->family));
            add_problem(rep, c->path, c->id, NULL, &e, cb, err);
            continue;
        }
        const char *tdev = tolerance_device(opt, ops->device);
        for (int di = 0; di < c->n_dtypes; di++) {
            const struct mc_tolerance_profile *prof = tolerance_profile(c, opt, tdev, c->dtypes[di]);
            int scheduled = 0;
            for (int si = 0; si < c->n_scenarios; si++) {
                const struct mc_scenario_spec *sp = &c->scenarios[si];
                if (!mc_run_filter_match(&opt->filter, c->id, c->family, sp->kind, names[bi], c->dtypes[di]))
                    continue;
                if (!mc_run_applies(ops, sp->kind, c->dtypes[di])) {
                    rep->n_not_applicable++;
                    not_scheduled(rep, ops, sp->kind, c->dtypes[di], err);
                    continue;
                }
                if (!mc_tolerance_covers(prof, tdev, c->dtypes[di])) {
                    if (!scheduled++) {
                        struct mc_error e = {0};
                        mc_error_set(&e, MC_ERR_INPUT,
                                     "%s: no tolerances for device '%s' at %s in %s (backend '%s'%s%s); give a profile "
                                     "that covers it with --tolerance FILE, or check it against another device's "
                                     "numbers with --device-profile %s=cpu",
                                     c->path, tdev, mc_dtype_name(c->dtypes[di]), prof->path, ops->name,
                                     tdev != ops->device ? ", device mapped from " : "",
                                     tdev != ops->device ? ops->device : "", ops->device);
                        add_problem(rep, c->path, c->id, mc_scenario_name(sp->kind), &e, cb, err);
                    }
                    continue;
                }
                count_pattern_hits(&opt->filter, c->id, sp->kind, names[bi], c->dtypes[di], pattern_hits);
                struct mc_scenario_ctx ctx = {.c = c,
                                              .spec = sp,
                                              .g = g,
                                              .ops = ops,
                                              .dtype = c->dtypes[di],
                                              .seed_offset = opt->seed_offset,
                                              .threads = opt->threads,
                                              .ref_ops = ref_ops,
                                              .ref = have_ref[di] ? &refs[di] : NULL,
                                              .weights = &wsets[di],
                                              .tolerance = prof,
                                              .tolerance_device = tdev};
                struct mc_job *job = job_push(&jobs, &n, &cap, err);
                if (job == NULL)
                    goto out;
                job->ctx = ctx;
            }
        }
    }
    struct mc_isolate_options iso = {.isolate = opt->isolate, .jobs = opt->jobs, .timeout_s = opt->timeout_s};
    if (err->code != MC_ERR_NONE || mc_isolate_run(jobs, n, &iso, run_job, (void *)opt, err) != MC_ERR_NONE)
        goto out;
    int first_check = rep->n_checks;
    for (int i = 0; i < n && err->code == MC_ERR_NONE; i++) {
        if (jobs[i].err.code != MC_ERR_NONE) {
            add_problem(rep, c->path, c->id, mc_scenario_name(jobs[i].ctx.spec->kind), &jobs[i].err, cb, err);
            continue;
        }
        struct mc_check_result *res = next_check(rep, err);
        if (res == NULL)
            break;
        *res = jobs[i].res;
        rep->n_checks++;
        rep->counts[res->status]++;
        note_result(rep, res, err);
        if (cb && cb->on_check)
            cb->on_check(res, cb->user);
    }
    if (err->code == MC_ERR_NONE)
        diagnose_case(c, g, first_check, rep, jobs, n, opt, cb, err);
out:
    for (int di = 0; di < MC_CASE_MAX_DTYPES; di++) {
        if (have_ref[di])
            mc_refrun_free(&refs[di]);
        mc_weightset_free(&wsets[di]);
    }
    free(names);
    free(jobs);
}

/* Records a "ran no check" problem (exit 2): something the user asked for that selected nothing. */
static void not_run(struct mc_run_report *rep, const char *path, const struct mc_run_callbacks *cb,
                    struct mc_error *err, const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void not_run(struct mc_run_report *rep, const char *path, const struct mc_run_callbacks *cb,
                    struct mc_error *err, const char *fmt, ...)
{
    struct mc_error e = {.code = MC_ERR_USAGE};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e.msg, sizeof e.msg, fmt, ap);
    va_end(ap);
    add_problem(rep, path, NULL, NULL, &e, cb, err);
}

/* The filters of a run as text, for "no check matches": "--family gdn --dtype f64 -k x". */
static void describe_filters(const struct mc_run_filter *f, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
#define ADD(...) (used += used < len ? (size_t)snprintf(buf + used, len - used, __VA_ARGS__) : 0)
    if (f->family)
        ADD(" --family %s", f->family);
    if (f->scenario)
        ADD(" --scenario %s", f->scenario);
    if (f->backend)
        ADD(" --backend %s", f->backend);
    if (f->dtype)
        ADD(" --dtype %s", f->dtype);
    for (int i = 0; i < f->n_patterns; i++)
        ADD(" -k '%s'", f->patterns[i]);
#undef ADD
}

/* After the run: every path, plugin and -k pattern the user gave must have selected a check (a plugin:
 * some backend of it was selected for a scenario and dtype of a case, run or not: `combos`, the run's
 * own or, for a shard, the whole plan's; account_backends judges whether one ran). */
static void account_requests(const char *const *paths, int n_paths, const int *path_checks, const int *pattern_hits,
                             const struct mc_registry *reg, const struct mc_run_options *opt,
                             const struct mc_run_report *combos, const struct mc_run_callbacks *cb,
                             struct mc_run_report *rep, struct mc_error *err)
{
    char filters[512];
    describe_filters(&opt->filter, filters, sizeof filters);
    for (int i = 0; i < n_paths && n_paths > 1; i++)
        if (path_checks[i] == 0)
            not_run(rep, paths[i], cb, err, "%s: no check of it ran (filters:%s)", paths[i],
                    filters[0] ? filters : " none");
    for (int i = 0; i < opt->filter.n_patterns; i++)
        if (pattern_hits[i] == 0)
            not_run(rep, "-k", cb, err, "-k '%s' matched no check that ran", opt->filter.patterns[i]);
    for (int k = 1;; k++) {
        const char *origin = NULL;
        char names[512] = "";
        size_t used = 0;
        int ran = 0;
        for (int i = 0; i < reg->n; i++) {
            const struct mc_registry_entry *e = &reg->entries[i];
            if (e->plugin != k)
                continue;
            origin = e->origin;
            if (used < sizeof names)
                used += (size_t)snprintf(names + used, sizeof names - used, "%s%s (%s)", used ? ", " : "",
                                         e->ops->name, mc_family_name(e->ops->family));
            for (int c = 0; c < combos->n_combos && !ran; c++)
                ran = strcmp(combos->combos[c].backend, e->ops->name) == 0;
        }
        if (origin == NULL)
            break;
        if (!ran)
            not_run(rep, origin, cb, err, "plugin %s: none of its backends ran a check (backends: %s; filters:%s)",
                    origin, names, filters[0] ? filters : " none");
    }
}

/* The backends under test: each plugin's and Python spec's backends and the one --backend names, by
 * name (a name a plugin registers for several families once), with where each came from. */
static int backends_under_test(const struct mc_registry *reg, const struct mc_run_options *opt, const char **names,
                               const char **origins)
{
    int n = 0;
    for (int i = 0; i < reg->n; i++) {
        const struct mc_registry_entry *e = &reg->entries[i];
        int explicit = opt->filter.backend && strcmp(opt->filter.backend, e->ops->name) == 0;
        if (e->plugin == 0 && !explicit)
            continue;
        int seen = 0;
        for (int k = 0; k < n && !seen; k++)
            seen = strcmp(names[k], e->ops->name) == 0;
        if (!seen && n < MC_REGISTRY_MAX) {
            names[n] = e->ops->name;
            origins[n++] = e->plugin ? e->origin : "--backend";
        }
    }
    return n;
}

/* Counts over the combinations of `combos` that are backend `name`'s. */
static void backend_outcome(const struct mc_run_report *combos, const char *name, int *n, int *ran, int *unsup,
                            int *unscheduled)
{
    *n = *ran = *unsup = *unscheduled = 0;
    for (int i = 0; i < combos->n_combos; i++) {
        const struct mc_run_combo *c = &combos->combos[i];
        if (strcmp(c->backend, name) != 0)
            continue;
        (*n)++;
        *ran += c->ran;
        *unsup += c->unsupported;
        *unscheduled += c->not_scheduled;
    }
}

/* A backend under test that was selected for some scenario and dtype (`combos`) but gave no verdict on
 * any: not tested (MC_ERR_BACKEND, exit 125), one problem naming it and then one per scenario/dtype with
 * the reason, unless --allow-unsupported. Returns how many backends were not tested. */
static int account_backends(const struct mc_registry *reg, const struct mc_run_options *opt,
                            const struct mc_run_report *combos, const struct mc_run_callbacks *cb,
                            struct mc_run_report *rep, struct mc_error *err)
{
    const char *names[MC_REGISTRY_MAX], *origins[MC_REGISTRY_MAX];
    int nb = backends_under_test(reg, opt, names, origins), untested = 0;
    for (int b = 0; b < nb && err->code == MC_ERR_NONE; b++) {
        int n, ran, unsup, unscheduled;
        backend_outcome(combos, names[b], &n, &ran, &unsup, &unscheduled);
        if (n == 0 || ran > 0)
            continue;
        untested++;
        if (opt->allow_unsupported)
            continue;
        struct mc_error e = {.code = MC_ERR_BACKEND};
        snprintf(e.msg, sizeof e.msg,
                 "backend '%s' (%s) was not tested: none of its checks ran (%d unsupported, %d not scheduled, over %d "
                 "scenario/dtype combination(s)); --allow-unsupported accepts that",
                 names[b], origins[b], unsup, unscheduled, n);
        add_problem(rep, origins[b], NULL, NULL, &e, cb, err);
        for (int i = 0; i < combos->n_combos && err->code == MC_ERR_NONE; i++) {
            const struct mc_run_combo *c = &combos->combos[i];
            if (strcmp(c->backend, names[b]) != 0)
                continue;
            snprintf(e.msg, sizeof e.msg, "backend '%s' not tested at %s/%s: %s%s (%d case(s))", names[b],
                     mc_scenario_name(c->scenario), mc_dtype_name(c->dtype), c->unsupported ? "unsupported: " : "",
                     c->reason, c->unsupported + c->not_scheduled);
            add_problem(rep, origins[b], NULL, mc_scenario_name(c->scenario), &e, cb, err);
        }
    }
    return untested;
}

/* Records the golden of a case about to run (provenance of the report); 0, or -1 out of memory. */
static int add_golden_sha(struct mc_run_report *rep, const struct mc_case *c, const char *sha, struct mc_error *err)
{
    if (rep->n_goldens == rep->cap_goldens) {
        int cap = rep->cap_goldens ? 2 * rep->cap_goldens : 16;
        struct mc_run_golden *p = realloc(rep->goldens, (size_t)cap * sizeof *p);
        if (p == NULL) {
            mc_error_set(err, MC_ERR_NOMEM, "out of memory");
            return -1;
        }
        rep->goldens = p;
        rep->cap_goldens = cap;
    }
    struct mc_run_golden *o = &rep->goldens[rep->n_goldens++];
    snprintf(o->case_id, sizeof o->case_id, "%s", c->id);
    snprintf(o->case_path, sizeof o->case_path, "%s", c->path);
    snprintf(o->golden_path, sizeof o->golden_path, "%s", c->golden_path);
    snprintf(o->content_sha256, sizeof o->content_sha256, "%s", sha);
    return 0;
}

static int add_golden(struct mc_run_report *rep, const struct mc_case *c, const struct mc_golden *g,
                      struct mc_error *err)
{
    return add_golden_sha(rep, c, g->content_sha256, err);
}

/* ---- model cases (docs/models.md §3) ------------------------------------------------------------ */

/* Which backend each layer runs on for backend `name` under test: the layers the case names (all when it
 * names none) whose family `name` is registered for, the others on `other` (--stack-backend, by default
 * the reference; without --stack-backend, `fallback` gets each layer's cpu backend, which a layer the
 * reference has no dtype for runs on, stackcheck.h). Returns how many layers run on the backend under
 * test (0: it has none of this stack's families), or -1 with `missing` naming a family `other` lacks. A
 * whole-stack backend runs every layer itself (`whole`): each layer's reference is then what
 * localisation compares its layers with. */
static int assign_layers(const struct mc_case *c, const struct mc_stack_golden *g, const struct mc_registry *reg,
                         const char *name, int whole, const char *other, const struct mc_backend_ops **ops,
                         const struct mc_backend_ops **fallback, uint8_t *under, enum mc_family *missing)
{
    int n = 0;
    for (int64_t l = 0; l < g->config.n_layers; l++) {
        enum mc_family fam = g->config.layers[l].family;
        if (!mc_stack_layer_has_mixer(&g->config, l)) { /* a feed-forward block: the engine's, on no backend */
            ops[l] = fallback[l] = NULL;
            under[l] = 0;
            continue;
        }
        int named = c->n_layers == 0;
        for (int i = 0; i < c->n_layers; i++)
            named |= c->layers[i] == l;
        if (whole) {
            ops[l] = mc_registry_find(reg, "reference", fam);
            under[l] = 0;
            n++;
            if (ops[l] == NULL) {
                *missing = fam;
                return -1;
            }
            continue;
        }
        const struct mc_backend_ops *o = named ? mc_registry_find(reg, name, fam) : NULL;
        under[l] = o != NULL;
        n += o != NULL;
        ops[l] = o != NULL ? o : mc_registry_find(reg, other ? other : "reference", fam);
        fallback[l] = o == NULL && other == NULL ? mc_registry_find(reg, "cpu", fam) : NULL;
        if (ops[l] == NULL) {
            *missing = fam;
            return -1;
        }
    }
    return n;
}

/* The model checks of one backend under test, for mc_isolate_run: jobs[i] carries the identity of the
 * check (reported if its child dies), stack[i] what the stack engine needs. */
struct model_jobs {
    const struct mc_job *jobs;
    const struct mc_stack_ctx *stack;
};

/* Runs one model check in this process (in its child when isolated): the job function of mc_isolate_run. */
static void run_model_job(struct mc_job *job, void *user)
{
    const struct model_jobs *mj = user;
    if (mc_stack_check_run(&mj->stack[job - mj->jobs], &job->res, &job->err) == MC_ERR_NONE)
        mc_error_clear(&job->err);
}

/* Every selected (backend, scenario, dtype) of a model case, each run in its own child process with the
 * check's time limit (isolate.h, as mixer checks are), and reported in a fixed order. */
static void run_model_case(const struct mc_case *c, const struct mc_registry *reg, const struct mc_run_options *opt,
                           const struct mc_run_callbacks *cb, struct mc_run_report *rep, int *pattern_hits,
                           struct mc_error *err)
{
    struct mc_stack_golden g;
    struct mc_error e = {0};
    if (mc_stack_golden_load(c->golden_path, &g, &e) != MC_ERR_NONE) {
        if (e.code == MC_ERR_NOMEM)
            mc_error_set(err, MC_ERR_NOMEM, "%s", e.msg);
        else {
            mc_error_prefix(&e, "%s:%d:%d: in 'golden'", c->path, c->golden_line, c->golden_column);
            add_problem(rep, c->path, c->id, NULL, &e, cb, err);
        }
        return;
    }
    for (int i = 0; i < c->n_scenarios && e.code == MC_ERR_NONE; i++)
        mc_stack_check_validate(c, &c->scenarios[i], &g, &e);
    if (e.code != MC_ERR_NONE) {
        add_problem(rep, c->path, c->id, NULL, &e, cb, err);
        mc_stack_golden_free(&g);
        return;
    }
    if (add_golden_sha(rep, c, g.content_sha256, err) != 0) {
        mc_stack_golden_free(&g);
        return;
    }
    rep->n_cases++;
    int64_t nl = g.config.n_layers;
    int cap = c->n_scenarios * c->n_dtypes;
    const char **names = calloc((size_t)max_backends(c, reg), sizeof *names);
    const struct mc_backend_ops **ops = calloc((size_t)nl, sizeof *ops);
    uint8_t *under = calloc((size_t)nl, 1);
    struct mc_job *jobs = calloc((size_t)cap, sizeof *jobs);
    struct mc_stack_ctx *stack = calloc((size_t)cap, sizeof *stack);
    const struct mc_backend_ops **ref_ops = calloc((size_t)nl, sizeof *ref_ops);
    const struct mc_backend_ops **fallback = calloc((size_t)nl, sizeof *fallback);
    if (names == NULL || ops == NULL || under == NULL || jobs == NULL || stack == NULL || ref_ops == NULL ||
        fallback == NULL) {
        mc_error_set(err, MC_ERR_NOMEM, "out of memory");
        goto out;
    }
    int n_names = case_backends(c, reg, opt, names);
    /* every layer on the reference: the stack that f16/bf16 prefills are also compared with */
    int have_ref = 1;
    for (int64_t l = 0; l < nl; l++)
        have_ref &= !mc_stack_layer_has_mixer(&g.config, l) ||
                    (ref_ops[l] = mc_registry_find(reg, "reference", g.config.layers[l].family)) != NULL;
    for (int bi = 0; bi < n_names && err->code == MC_ERR_NONE; bi++) {
        const struct mc_backend_ops *bops = case_find(reg, names[bi], c);
        enum mc_family missing = c->family;
        int covered = assign_layers(c, &g, reg, names[bi], bops != NULL && bops->family == MC_FAMILY_STACK,
                                    opt->stack_backend, ops, fallback, under, &missing);
        if (covered < 0 || bops == NULL) {
            mc_error_set(&e, MC_ERR_BACKEND, "%s: backend '%s' is not available for %s (load it with --plugin)",
                         c->path, covered < 0 ? (opt->stack_backend ? opt->stack_backend : "reference") : names[bi],
                         mc_family_name(missing));
            add_problem(rep, c->path, c->id, NULL, &e, cb, err);
            mc_error_clear(&e);
            continue;
        }
        const char *tdev = tolerance_device(opt, bops->device);
        int n = 0;
        for (int di = 0; di < c->n_dtypes && err->code == MC_ERR_NONE; di++) {
            const struct mc_tolerance_profile *prof = tolerance_profile(c, opt, tdev, c->dtypes[di]);
            int reported = 0;
            for (int si = 0; si < c->n_scenarios && err->code == MC_ERR_NONE; si++) {
                const struct mc_scenario_spec *sp = &c->scenarios[si];
                if (!mc_run_filter_match(&opt->filter, c->id, c->family, sp->kind, names[bi], c->dtypes[di]))
                    continue;
                if (covered == 0 || !mc_run_applies(bops, sp->kind, c->dtypes[di])) {
                    rep->n_not_applicable++;
                    if (covered == 0)
                        note_combo(rep, bops->name, sp->kind, c->dtypes[di], COMBO_NOT_SCHEDULED,
                                   "not scheduled: the backend implements none of this stack's layer families", err);
                    else
                        not_scheduled(rep, bops, sp->kind, c->dtypes[di], err);
                    continue;
                }
                if (!mc_tolerance_covers(prof, tdev, c->dtypes[di])) {
                    if (!reported++) {
                        mc_error_set(&e, MC_ERR_INPUT, "%s: no tolerances for device '%s' at %s in %s (backend '%s')",
                                     c->path, tdev, mc_dtype_name(c->dtypes[di]), prof->path, bops->name);
                        add_problem(rep, c->path, c->id, mc_scenario_name(sp->kind), &e, cb, err);
                        mc_error_clear(&e);
                    }
                    continue;
                }
                count_pattern_hits(&opt->filter, c->id, sp->kind, names[bi], c->dtypes[di], pattern_hits);
                stack[n] = (struct mc_stack_ctx){.c = c, .spec = sp, .g = &g, .layer_ops = ops, .under_test = under,
                                                 .ops = bops, .dtype = c->dtypes[di], .threads = opt->threads,
                                                 .seed_offset = opt->seed_offset, .tolerance = prof,
                                                 .tolerance_device = tdev, .ref_layer_ops = have_ref ? ref_ops : NULL,
                                                 .fallback_layer_ops = fallback};
                jobs[n++] = (struct mc_job){.ctx = {.c = c, .spec = sp, .ops = bops, .dtype = c->dtypes[di]}};
            }
        }
        /* this backend's layer assignment (ops, under) is shared by its checks: run them before the next */
        struct model_jobs mj = {.jobs = jobs, .stack = stack};
        struct mc_isolate_options iso = {.isolate = opt->isolate, .jobs = opt->jobs, .timeout_s = opt->timeout_s};
        if (err->code != MC_ERR_NONE || mc_isolate_run(jobs, n, &iso, run_model_job, &mj, err) != MC_ERR_NONE)
            break;
        for (int i = 0; i < n && err->code == MC_ERR_NONE; i++) {
            if (jobs[i].err.code != MC_ERR_NONE) {
                if (jobs[i].err.code == MC_ERR_NOMEM)
                    mc_error_set(err, MC_ERR_NOMEM, "%s", jobs[i].err.msg);
                else
                    add_problem(rep, c->path, c->id, mc_scenario_name(jobs[i].ctx.spec->kind), &jobs[i].err, cb, err);
                continue;
            }
            struct mc_check_result *res = next_check(rep, err);
            if (res == NULL)
                break;
            *res = jobs[i].res;
            if (res->model_type[0] == '\0') /* a check whose child died before reporting */
                snprintf(res->model_type, sizeof res->model_type, "%s", c->model_type);
            rep->n_checks++;
            rep->counts[res->status]++;
            note_result(rep, res, err);
            if (cb && cb->on_check)
                cb->on_check(res, cb->user);
        }
    }
out:
    free(names);
    free(ops);
    free(under);
    free(jobs);
    free(stack);
    free(ref_ops);
    free(fallback);
    mc_stack_golden_free(&g);
}

/* The whole plan of a sharded run, as every shard computes it: the checks the filters select over every
 * case file that runs (long/ directories only with --long), with their expected cost (shard.h), and what
 * the accounting of requests needs: the checks per path and per -k pattern, and in `combos` every
 * selected (backend, scenario, dtype), scheduled ("ran") or not. Case files that do not load are left
 * to the run itself, which reports them. */
struct plan {
    struct mc_shard_item *items;
    int n_items, cap;
    int *path_items;                       /* [n_paths] */
    int pattern_hits[MC_RUN_MAX_PATTERNS];
    struct mc_run_report combos;           /* only its combos are used */
};

static void plan_free(struct plan *p)
{
    for (int i = 0; i < p->n_items; i++) {
        free(p->items[i].id);
        free(p->items[i].group);
    }
    free(p->items);
    free(p->path_items);
    mc_run_report_free(&p->combos);
}

static void plan_add(struct plan *p, const struct mc_case *c, const char *backend, enum mc_scenario_kind k,
                     enum mc_dtype dt, double bytes, const struct mc_run_filter *f, struct mc_error *err)
{
    if (p->n_items == p->cap) {
        int cap = p->cap ? 2 * p->cap : 256;
        struct mc_shard_item *v = realloc(p->items, (size_t)cap * sizeof *v);
        if (v == NULL) {
            mc_error_set(err, MC_ERR_NOMEM, "out of memory");
            return;
        }
        p->items = v;
        p->cap = cap;
    }
    char id[512];
    snprintf(id, sizeof id, "%s/%s/%s/%s", c->id, mc_scenario_name(k), backend, mc_dtype_name(dt));
    for (int i = 0; i < f->n_patterns; i++)
        p->pattern_hits[i] += mc_run_pattern_match(f->patterns[i], id);
    struct mc_shard_item *it = &p->items[p->n_items];
    it->id = mc_strdup(id);
    snprintf(id, sizeof id, "%s/%s", c->id, mc_dtype_name(dt));
    it->group = mc_strdup(id);
    it->cost = bytes * mc_shard_scenario_weight(mc_scenario_name(k));
    if (it->id == NULL || it->group == NULL) {
        free(it->id);
        free(it->group);
        mc_error_set(err, MC_ERR_NOMEM, "out of memory");
    } else {
        p->n_items++;
    }
}

static enum mc_err_code plan_build(const char *const *paths, int n_paths, const struct mc_registry *reg,
                                   const struct mc_run_options *opt, struct plan *p, struct mc_error *err)
{
    memset(p, 0, sizeof *p);
    if ((p->path_items = calloc((size_t)n_paths + 1, sizeof *p->path_items)) == NULL)
        return mc_error_set(err, MC_ERR_NOMEM, "out of memory");
    for (int pi = 0; pi < n_paths && err->code == MC_ERR_NONE; pi++) {
        char **files = NULL;
        int n_files = 0, n_long = 0, before = p->n_items;
        if (mc_run_discover_long(&paths[pi], 1, opt->long_cases, &n_long, &files, &n_files, err) != MC_ERR_NONE)
            break;
        for (int i = 0; i < n_files && err->code == MC_ERR_NONE; i++) {
            struct mc_case c = {0};
            struct mc_error e = {0};
            if (mc_case_load(files[i], &c, &e) != MC_ERR_NONE) {
                mc_case_free(&c);
                continue;
            }
            struct stat st;
            double bytes = stat(c.golden_path, &st) == 0 ? (double)st.st_size : 1.0;
            const char **names = calloc((size_t)max_backends(&c, reg), sizeof *names);
            int nb = names ? case_backends(&c, reg, opt, names) : 0;
            if (names == NULL)
                mc_error_set(err, MC_ERR_NOMEM, "out of memory");
            for (int bi = 0; bi < nb && err->code == MC_ERR_NONE; bi++) {
                const struct mc_backend_ops *ops = case_find(reg, names[bi], &c);
                for (int si = 0; si < c.n_scenarios; si++)
                    for (int di = 0; di < c.n_dtypes && err->code == MC_ERR_NONE; di++) {
                        enum mc_scenario_kind k = c.scenarios[si].kind;
                        if (!mc_run_filter_match(&opt->filter, c.id, c.family, k, names[bi], c.dtypes[di]))
                            continue;
                        if (ops && !mc_run_applies(ops, k, c.dtypes[di])) {
                            not_scheduled(&p->combos, ops, k, c.dtypes[di], err);
                            continue;
                        }
                        if (ops)
                            note_combo(&p->combos, ops->name, k, c.dtypes[di], COMBO_RAN, NULL, err);
                        plan_add(p, &c, names[bi], k, c.dtypes[di], bytes, &opt->filter, err);
                    }
            }
            free(names);
            mc_case_free(&c);
        }
        p->path_items[pi] = p->n_items - before;
        mc_run_files_free(files, n_files);
    }
    return err->code;
}

static int by_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The plan's fingerprint: the SHA-256 of the shard count and every check id, sorted. */
static enum mc_err_code plan_sha256(const struct plan *p, int count, char out[65], struct mc_error *err)
{
    char **ids = calloc((size_t)p->n_items + 1, sizeof *ids);
    if (ids == NULL)
        return mc_error_set(err, MC_ERR_NOMEM, "out of memory");
    for (int i = 0; i < p->n_items; i++)
        ids[i] = p->items[i].id;
    if (p->n_items > 1)
        qsort(ids, (size_t)p->n_items, sizeof *ids, by_str);
    struct mc_sha256 h;
    uint8_t digest[MC_SHA256_DIGEST_BYTES];
    char head[64];
    int n = snprintf(head, sizeof head, "mixcheck shard plan: %d shard(s), %d check(s)\n", count, p->n_items);
    mc_sha256_init(&h);
    mc_sha256_update(&h, head, (size_t)n);
    for (int i = 0; i < p->n_items; i++) {
        mc_sha256_update(&h, ids[i], strlen(ids[i]));
        mc_sha256_update(&h, "\n", 1);
    }
    mc_sha256_final(&h, digest);
    mc_sha256_hex(digest, out);
    free(ids);
    return MC_ERR_NONE;
}

static enum mc_err_code run_all(const char *const *paths, int n_paths, const struct mc_registry *reg,
                                const struct mc_run_options *opt, const struct mc_run_callbacks *cb,
                                struct mc_run_report *rep, struct mc_error *err);

/* A shard's accounting, over the whole plan (the same in every shard): a selection that is empty, or a
 * path, -k pattern or plugin that selected no check, is what the unsharded run says it is; a backend
 * under test none of whose selected combinations is scheduled is not tested; one with checks in the
 * plan is judged by mixcheck merge from every shard's results (must_test). */
static void account_plan(const char *const *paths, int n_paths, const struct plan *p, const struct mc_registry *reg,
                         const struct mc_run_options *opt, const struct mc_run_callbacks *cb, struct mc_run_report *rep,
                         struct mc_error *err)
{
    int not_sched = 0;
    for (int i = 0; i < p->combos.n_combos; i++)
        not_sched += p->combos.combos[i].not_scheduled;
    if (p->n_items == 0) {
        if (!opt->allow_unsupported && account_backends(reg, opt, &p->combos, cb, rep, err) > 0)
            return;
        char filters[512];
        describe_filters(&opt->filter, filters, sizeof filters);
        if (not_sched > 0)
            mc_error_set(err, MC_ERR_USAGE,
                         "no check ran: the %d selected combination(s) (filters:%s) are ones their backends do not "
                         "do (a dtype a backend does not declare, chunk_size_invariance without an internal chunk "
                         "length), in every shard of the plan",
                         not_sched, filters[0] ? filters : " none");
        else
            mc_error_set(err, MC_ERR_USAGE, "no check matches the filters (%s), in any shard of the plan",
                         filters[0] ? filters + 1 : "none");
        return;
    }
    account_requests(paths, n_paths, p->path_items, p->pattern_hits, reg, opt, &p->combos, cb, rep, err);
    account_backends(reg, opt, &p->combos, cb, rep, err);
    const char *names[MC_REGISTRY_MAX], *origins[MC_REGISTRY_MAX];
    int nb = backends_under_test(reg, opt, names, origins);
    for (int b = 0; b < nb && !opt->allow_unsupported; b++) {
        int n, ran, unsup, unscheduled;
        backend_outcome(&p->combos, names[b], &n, &ran, &unsup, &unscheduled);
        if (ran > 0)
            rep->must_test[rep->n_must_test++] = names[b];
    }
}

enum mc_err_code mc_run(const char *const *paths, int n_paths, const struct mc_registry *reg,
                        const struct mc_run_options *opt, const struct mc_run_callbacks *cb,
                        struct mc_run_report *rep, struct mc_error *err)
{
    if (opt->stack_backend != NULL && !mc_registry_has_name(reg, opt->stack_backend)) {
        char known[1024];
        memset(rep, 0, sizeof *rep);
        mc_registry_names(reg, known, sizeof known);
        return mc_error_set(err, MC_ERR_USAGE, "--stack-backend: unknown backend '%s' (known: %s)", opt->stack_backend,
                            known);
    }
    if (opt->shard_count <= 1)
        return run_all(paths, n_paths, reg, opt, cb, rep, err);
    struct plan p;
    struct mc_shard_plan shard = {0};
    struct mc_run_options o = *opt;
    char sha[65] = "";
    memset(rep, 0, sizeof *rep);
    if (plan_build(paths, n_paths, reg, opt, &p, err) == MC_ERR_NONE &&
        plan_sha256(&p, opt->shard_count, sha, err) == MC_ERR_NONE &&
        mc_shard_assign(p.items, p.n_items, opt->shard_index, opt->shard_count, &shard, err) == MC_ERR_NONE) {
        o.filter.shard = &shard;
        if (run_all(paths, n_paths, reg, &o, cb, rep, err) == MC_ERR_NONE)
            account_plan(paths, n_paths, &p, reg, opt, cb, rep, err);
        rep->shard_index = opt->shard_index;
        rep->shard_count = opt->shard_count;
        rep->shard_checks = p.n_items;
        snprintf(rep->shard_plan_sha256, sizeof rep->shard_plan_sha256, "%s", sha);
    }
    mc_shard_plan_free(&shard);
    plan_free(&p);
    return err->code;
}

static enum mc_err_code run_all(const char *const *paths, int n_paths, const struct mc_registry *reg,
                                const struct mc_run_options *opt, const struct mc_run_callbacks *cb,
                                struct mc_run_report *rep, struct mc_error *err)
{
    memset(rep, 0, sizeof *rep);
    rep->started_unix = (int64_t)time(NULL);
    rep->rerun_options = opt->rerun_options;
    double t0 = mc_clock_now_s();
    int pattern_hits[MC_RUN_MAX_PATTERNS] = {0};
    int *path_checks = calloc((size_t)n_paths + 1, sizeof *path_checks);
    if (path_checks == NULL)
        return mc_error_set(err, MC_ERR_NOMEM, "out of memory");
    int n_files_total = 0;
    for (int pi = 0; pi < n_paths && err->code == MC_ERR_NONE; pi++) {
        char **files = NULL;
        int n_files = 0, n_long = 0;
        if (mc_run_discover_long(&paths[pi], 1, opt->long_cases, &n_long, &files, &n_files, err) != MC_ERR_NONE)
            break;
        rep->n_long_skipped += n_long;
        n_files_total += n_files;
        int before = rep->n_checks + rep->n_problems;
        for (int i = 0; i < n_files && err->code == MC_ERR_NONE; i++) {
            struct mc_case c = {0};
            struct mc_golden g = {0};
            int ready = prepare_case(files[i], reg, opt, &c, &g, rep, cb, err);
            if (ready == 0 && add_golden(rep, &c, &g, err) == 0) {
                rep->n_cases++;
                run_case(&c, &g, reg, opt, cb, rep, pattern_hits, err);
            } else if (ready == 2) {
                run_model_case(&c, reg, opt, cb, rep, pattern_hits, err);
            }
            mc_golden_free(&g);
            mc_case_free(&c);
        }
        path_checks[pi] = rep->n_checks + rep->n_problems - before;
        mc_run_files_free(files, n_files);
    }
    if (err->code == MC_ERR_NONE && n_files_total == 0)
        mc_error_set(err, MC_ERR_USAGE, "no case files (*.yaml, *.yml) under the given paths");
    rep->duration_s = mc_clock_now_s() - t0;
    if (opt->filter.shard) {
        /* a shard runs part of the selection: what another shard runs is not missing here (an empty
         * shard included), so requests are accounted by the unsharded run only */
    } else if (err->code == MC_ERR_NONE && rep->n_checks == 0 && rep->n_problems == 0 && !opt->allow_unsupported &&
               account_backends(reg, opt, rep, cb, rep, err) > 0) {
        /* only combinations a backend under test does not do were selected: it was not tested */
    } else if (err->code == MC_ERR_NONE && rep->n_checks == 0 && rep->n_problems == 0) {
        char filters[512];
        describe_filters(&opt->filter, filters, sizeof filters);
        if (rep->n_not_applicable > 0)
            mc_error_set(err, MC_ERR_USAGE,
                         "no check ran: the %d selected combination(s) (filters:%s) are ones their backends do not "
                         "do (a dtype a backend does not declare, chunk_size_invariance without an internal chunk "
                         "length)",
                         rep->n_not_applicable, filters[0] ? filters : " none");
        else
            mc_error_set(err, MC_ERR_USAGE, "no check matches the filters (%s)", filters[0] ? filters + 1 : "none");
    } else if (err->code == MC_ERR_NONE) {
        account_requests(paths, n_paths, path_checks, pattern_hits, reg, opt, rep, cb, rep, err);
        account_backends(reg, opt, rep, cb, rep, err);
    }
    free(path_checks);
    return err->code;
}

void mc_run_report_free(struct mc_run_report *rep)
{
    free(rep->goldens);
    free(rep->diagnoses);
    mc_isolate_private_free(rep->checks, (size_t)rep->cap_checks * sizeof *rep->checks);
    free(rep->problems);
    free(rep->combos);
    memset(rep, 0, sizeof *rep);
}

int mc_run_exit_code(const struct mc_run_report *rep)
{
    int backend_missing = 0;
    for (int i = 0; i < rep->n_problems; i++) {
        if (rep->problems[i].code == MC_ERR_BACKEND)
            backend_missing = 1;
        else
            return 2;
    }
    if (rep->counts[MC_CHECK_FAIL] > 0 || rep->counts[MC_CHECK_ERROR] > 0 || rep->counts[MC_CHECK_NONDETERMINISTIC] > 0 ||
        rep->counts[MC_CHECK_DRIFT] > 0)
        return 1;
    if (rep->shard_count > 1 && rep->n_checks == 0 && !backend_missing)
        return 0; /* the plan left this shard nothing to run */
    if (backend_missing || rep->counts[MC_CHECK_PASS] == 0)
        return 125;
    return 0;
}
