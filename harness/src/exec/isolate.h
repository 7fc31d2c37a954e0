/*
 * isolate.h — runs checks so that a backend that crashes, aborts, exits or hangs fails its own check
 * and nothing else: checks run in worker processes (fork), up to `jobs` at a time, each with a time
 * limit; a worker sends each result back through a socket. A check that dies is reported with its
 * signal or exit status, one that runs out of time with the limit. Results land in job order, so a
 * run with any `jobs` gives the same report.
 *
 * A worker runs one check after another (of one mc_isolate_run call) while they pass: a fresh process
 * per check cost more in first-touch page faults than many checks themselves. A check that fails,
 * errors, crashes or finds an input problem retires its worker; when that worker had run other checks
 * first, the check runs again in a fresh process, and that result is the one reported — unless it
 * passes there: then the first failure stands, its message saying that it happens only after other
 * checks ran in the same process (a backend that keeps state across calls has a bug of its own). A
 * time limit is not rerun. A worker is also replaced after 256 checks.
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

/* The backend entry point running now, for the report of a check that dies in it: mc_isolate_enter
 * names it (e.g. "forward_packed(3 sequences, 46 tokens, pool of 8)", cut at 191 bytes) right before
 * the harness calls into a backend, mc_isolate_leave says the call returned. An isolated check's
 * child writes it where the parent reads it after the child died or was killed, so a crash, a time
 * limit or an exit reads "crashed: signal 11 (Segmentation fault) in forward_packed(...)", "... between
 * backend calls (the last: cache_copy)" when it came after the call returned; without isolation the
 * crash handler prints it, with the case, scenario, backend and dtype running, before the signal ends
 * the process. Cheap (a copy of the name): every backend call of the scenario engine is named. */
void mc_isolate_enter(const char *call);
void mc_isolate_leave(void);

/* Runs every job. Errors only for the harness itself (fork/pipe failures, memory). Without isolation,
 * a SIGSEGV, SIGBUS, SIGFPE, SIGILL or SIGABRT prints "mixcheck: crashed: signal N (SIGx) in <entry>;
 * running case <id>, scenario <name>, backend <name>, dtype <dtype>" to stderr and then takes its
 * default action (the process still dies of it). */
enum mc_err_code mc_isolate_run(struct mc_job *jobs, int n, const struct mc_isolate_options *opt, mc_job_fn fn,
                                void *user, struct mc_error *err);

/* Memory only this process needs, that the workers it forks do not inherit (MADV_DONTFORK): the run's
 * growing store of results, which every worker's fork would otherwise copy the page tables of.
 * mc_isolate_private_resize(NULL, 0, n) maps n bytes, zeroed; (p, old, n) grows or shrinks a mapping of
 * `old` bytes keeping its contents (it may move); NULL when there is no memory (p is then unchanged).
 * A worker touching such memory would fault: only the parent's own code may use it. */
void *mc_isolate_private_resize(void *p, size_t old_bytes, size_t new_bytes);
void mc_isolate_private_free(void *p, size_t bytes);

#endif
