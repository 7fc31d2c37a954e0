/*
 * isolate.h — runs checks so that a backend that crashes, aborts, exits or hangs fails its own check
 * and nothing else: each check runs in a child process (fork) with a time limit, up to `jobs` at a
 * time; the child sends its result back through a pipe. A check that dies is reported with its
 * signal or exit status, one that runs out of time with the limit. Results land in job order, so a
 * run with any `jobs` gives the same report.
 */
#ifndef MC_ISOLATE_H
#define MC_ISOLATE_H

#include "base/error.h"
#include "verdict/check.h"

struct mc_job {
    struct mc_scenario_ctx ctx;
    struct mc_check_result res; /* filled by the run */
    struct mc_error err;        /* an input problem the check found (not a backend failure) */
};

/* Runs one job in the current process, filling job->res and job->err. */
typedef void (*mc_job_fn)(struct mc_job *job, void *user);

#define MC_ISOLATE_MAX_JOBS 64

struct mc_isolate_options {
    int isolate;      /* 0: run in-process (debugging); 1: a child per check */
    int jobs;         /* children at a time, 1 .. MC_ISOLATE_MAX_JOBS */
    double timeout_s; /* per check; <= 0 means none */
};

/* Runs every job. Errors only for the harness itself (fork/pipe failures, memory). */
enum mc_err_code mc_isolate_run(struct mc_job *jobs, int n, const struct mc_isolate_options *opt, mc_job_fn fn,
                                void *user, struct mc_error *err);

#endif
