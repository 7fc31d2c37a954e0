/*
 * runner.h — runs cases: finds case files under the given paths, loads each case and its golden,
 * validates the scenarios against the golden, and runs every selected (scenario, backend, dtype)
 * check through the scenario engine. A case that cannot be loaded, or a backend that is not
 * available, is recorded as a problem and the run goes on with the others.
 */
#ifndef MC_RUNNER_H
#define MC_RUNNER_H

#include <stdint.h>

#include "case/case.h"
#include "base/error.h"
#include "exec/registry.h"
#include "scenario/scenario.h"

#define MC_RUN_MAX_PATTERNS 16
#define MC_RUN_MAX_TOLERANCES 8
#define MC_RUN_MAX_DEVICE_MAP 8

struct mc_run_filter {
    const char *family;   /* NULL = any */
    const char *scenario;
    const char *backend;
    const char *dtype;
    /* -k: a check is selected when its id "case/scenario/backend/dtype" contains any of them (a
     * pattern with * ? [ is an fnmatch glob over the whole id); none = every check */
    const char *patterns[MC_RUN_MAX_PATTERNS];
    int n_patterns;
    const struct mc_shard_plan *shard; /* set by mc_run for a sharded run: only this shard's checks */
};

struct mc_shard_plan;

/* --device-profile DEVICE=AS: backends of `device` are checked against the tolerances of `as`. */
struct mc_device_map {
    const char *device;
    const char *as;
};

struct mc_run_options {
    struct mc_run_filter filter;
    uint64_t seed_offset; /* added to every scenario seed */
    int seeds;            /* randomised scenarios run with this many seeds (0 or 1 = once) */
    int threads;          /* passed to backends (0 = their default) */
    int isolate;          /* run each check in a child process (crash and hang containment) */
    int no_experiments;   /* the diagnosis runs no experiments on failing backends (--no-experiments) */
    int jobs;             /* checks at a time when isolated */
    double timeout_s;     /* per check when isolated; <= 0 = none */
    /* --tolerance: profiles consulted before the case's own; the first that covers the (device,
     * dtype) of a check gives all its tolerances */
    const struct mc_tolerance_profile *tolerances[MC_RUN_MAX_TOLERANCES];
    int n_tolerances;
    struct mc_device_map device_map[MC_RUN_MAX_DEVICE_MAP];
    int n_device_map;
    const char *rerun_options; /* what a rerun command needs besides the check's own filters */
    int long_cases;       /* --long: also the cases under `long/` directories (mc_run_discover_long) */
    /* --shard K/N (shard.h): run only shard K (1-based) of N; 0/0 = unsharded */
    int shard_index, shard_count;
    /* --stack-backend: the backend the layers of a model case not under test run on (NULL: the
     * reference, or cpu at a dtype the reference does not declare; stackcheck.h) */
    const char *stack_backend;
    /* --allow-unsupported: a backend under test (a plugin's, a Python spec's, the one --backend names)
     * for which no check ran is not a problem (mc_run_exit_code would give 125) */
    int allow_unsupported;
};

/* A case file that could not be run, a backend it names that is missing (MC_ERR_BACKEND), or
 * something the user asked for that ran no check (MC_ERR_USAGE: a path, a plugin, a -k pattern). */
struct mc_run_problem {
    char path[512];
    char case_id[128];  /* the case it belongs to, "" when unknown (a file that does not load) */
    char scenario[64];  /* the scenario, "" when the problem is not one scenario's */
    enum mc_err_code code;
    char msg[MC_ERROR_MSG_LEN];
};

/* A golden a case of the run was checked against, with its verified content checksum. */
struct mc_run_golden {
    char case_id[128];
    char case_path[512];
    char golden_path[512];
    char content_sha256[65];
};

/* What became of one (backend, scenario, dtype) over the cases of a run: whether a check of it gave a
 * verdict, and else why not. A backend under test none of whose combinations ran is "not tested". */
struct mc_run_combo {
    const char *backend;         /* borrowed from the backend's ops */
    enum mc_scenario_kind scenario;
    enum mc_dtype dtype;
    int ran;                     /* checks with a verdict (pass, fail, error, ...) */
    int unsupported;             /* checks the backend answered unsupported (or skipped) */
    int not_scheduled;           /* selected but never run: mc_run_applies said no */
    char reason[256];            /* the first unsupported message, or why it was not scheduled */
};

struct mc_provenance;
struct mc_baseline_result;
struct mc_diagnosis;

struct mc_run_report {
    struct mc_check_result *checks;
    int n_checks, cap_checks;
    struct mc_run_problem *problems;
    int n_problems, cap_problems;
    int n_cases;
    int n_not_applicable; /* selected combinations a backend does not do (dtype, internal chunks) */
    int n_long_skipped;   /* case files under `long/` directories left out (no --long) */
    int counts[MC_CHECK_STATUS_COUNT]; /* per enum mc_check_status */
    double duration_s;
    int64_t started_unix;
    const char *rerun_options; /* from the options (borrowed) */
    struct mc_run_golden *goldens; /* one per case that ran */
    int n_goldens, cap_goldens;
    /* the bug-class diagnosis (diagnose.h): one per (case, backend) with a failing check */
    struct mc_diagnosis *diagnoses;
    int n_diagnoses, cap_diagnoses;
    int shard_index, shard_count; /* of a sharded run (0 = unsharded) */
    int shard_checks;             /* checks of the whole selection, every shard together */
    /* of a sharded run: the SHA-256 of the whole plan (every shard's check ids and the shard count), the
     * same in every shard of one run (mixcheck merge compares them), and the backends under test whose
     * checks this shard cannot judge alone (merge finds whether any shard gave one of them a verdict) */
    char shard_plan_sha256[65];
    const char *must_test[MC_REGISTRY_MAX]; /* borrowed from the backends' ops */
    int n_must_test;
    struct mc_run_combo *combos;  /* one per (backend, scenario, dtype) selected */
    int n_combos, cap_combos;
    /* set by the caller for the writers (borrowed, may be NULL): provenance.h, baseline.h */
    const struct mc_provenance *provenance;
    const struct mc_baseline_result *baseline;
};

struct mc_run_callbacks {
    void (*on_check)(const struct mc_check_result *res, void *user);
    void (*on_problem)(const struct mc_run_problem *p, void *user);
    void (*on_diagnosis)(const struct mc_diagnosis *d, void *user); /* after a case's checks, may be NULL */
    void *user;
};

/* Expands paths (files, or directories searched recursively for *.yaml and *.yml, skipping
 * `tolerances/`) into a sorted list of case files. MC_ERR_USAGE for a path that does not exist. */
enum mc_err_code mc_run_discover(const char *const *paths, int n_paths, char ***files, int *n_files,
                                 struct mc_error *err);
/* As mc_run_discover, leaving out the cases under `long/` directories found while searching a
 * directory unless include_long (mixcheck run --long); *n_long counts the files left out. A path
 * given itself is always taken, a long/ directory or a file in one included. */
enum mc_err_code mc_run_discover_long(const char *const *paths, int n_paths, int include_long, int *n_long,
                                      char ***files, int *n_files, struct mc_error *err);
void mc_run_files_free(char **files, int n_files);

/* 1 when an id contains `pattern`, or matches it as an fnmatch glob when it holds * ? or [ (-k). */
int mc_run_pattern_match(const char *pattern, const char *id);

/* 1 when a check id "case/scenario/backend/dtype" passes the filter. */
int mc_run_filter_match(const struct mc_run_filter *f, const char *case_id, enum mc_family family,
                        enum mc_scenario_kind scenario, const char *backend, enum mc_dtype dtype);

/* 1 when a backend can run a scenario at a dtype: it declares the dtype, for chunk_size_invariance
 * it has an internal chunk length, and head_shard runs at f32 and f64 only. Other combinations are not
 * scheduled. */
int mc_run_applies(const struct mc_backend_ops *ops, enum mc_scenario_kind kind, enum mc_dtype dtype);

/* Runs everything; returns an error only for usage problems or memory (input problems of single
 * cases are in report->problems). */
enum mc_err_code mc_run(const char *const *paths, int n_paths, const struct mc_registry *reg,
                        const struct mc_run_options *opt, const struct mc_run_callbacks *cb,
                        struct mc_run_report *report, struct mc_error *err);
void mc_run_report_free(struct mc_run_report *report);

/* 2 when a case had an input problem or something asked for ran no check, 1 when a check failed,
 * errored, was nondeterministic or drifted from a baseline, 125 when something could not be tested (a
 * backend missing, every check unsupported, a backend under test none of whose checks ran) and nothing
 * failed, else 0 (also for a shard the plan leaves without a check). */
int mc_run_exit_code(const struct mc_run_report *report);

#endif
