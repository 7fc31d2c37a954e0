/*
 * history.h — the run history store of `mixcheck run --record DIR` and `mixcheck history DIR`: a
 * folder holding one file per run, never rewritten. Each file is a JSON report (reports/json.c, format
 * "mixcheck-report", without the per-position profiles), so `mixcheck diff` reads any two of them and
 * reportread.c reads them all back. A file is named <start UTC yyyymmddThhmmssZ>-<commit, 12 hex>-
 * <pid>.json, written to a temporary name and renamed (report.h), so two runs recording at once each
 * add their own file and a reader never sees half of one; temporary files are not read.
 */
#ifndef MC_HISTORY_H
#define MC_HISTORY_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "run/reportread.h"

/* The path of a new run file in `dir` (created when missing, one level) for a run of `commit` started
 * at `started_unix`; a name already taken gets a suffix -1, -2, ... MC_ERR_USAGE when dir cannot be made. */
enum mc_err_code mc_history_new_path(const char *dir, const char *commit, int64_t started_unix, char *buf, size_t len,
                                     struct mc_error *err);

struct mc_history {
    struct mc_report_doc *runs; /* oldest first: by start time, then file name */
    int n_runs;
};

/* Reads every run file of `dir`. MC_ERR_USAGE when dir cannot be read, MC_ERR_INPUT naming
 * file:line:column for a file that is not a report. */
enum mc_err_code mc_history_load(const char *dir, struct mc_history *h, struct mc_error *err);
void mc_history_free(struct mc_history *h);

#endif
