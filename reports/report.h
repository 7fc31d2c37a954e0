/*
 * report.h — report writers over one run report: the console (a line per check, a compact diagnosis
 * on failure and the command that reruns only that check), JSON, JUnit XML, a Markdown summary and
 * an HTML page. Files are written to
 * a temporary name and renamed, so a reader never sees half a report.
 */
#ifndef MC_REPORT_H
#define MC_REPORT_H

#include <stdio.h>

#include "base/error.h"
#include "run/runner.h"

#define MC_REPORT_FORMAT_VERSION 1

struct mc_console {
    FILE *out;
    int color;         /* ANSI colours (only on a terminal) */
    const char *argv0; /* program name for rerun commands */
    const char *rerun_options; /* run options a rerun needs (plugins, tolerance files, seeds), or NULL */
};

void mc_report_console_check(const struct mc_console *con, const struct mc_check_result *res);
/* After the checks of a run with --baseline: a DRIFT line per drifted tensor (the ratio and the
 * baseline's numbers) and the records found on one side only. Nothing without a baseline. */
void mc_report_console_baseline(const struct mc_console *con, const struct mc_run_report *rep);
/* After a case's checks: the likely bug classes of one backend's failures (diagnose.h), one line each. */
void mc_report_console_diagnosis(const struct mc_console *con, const struct mc_diagnosis *d);
void mc_report_console_problem(const struct mc_console *con, const struct mc_run_problem *p);
void mc_report_console_summary(const struct mc_console *con, const struct mc_run_report *rep, int exit_code);

/* The command line that reruns exactly this check: the check's own filters plus `options`, the
 * options of the run that its result depends on (plugins, tolerance files, seeds; may be NULL). */
void mc_report_rerun_command(const struct mc_check_result *res, const char *argv0, const char *options, char *buf,
                             size_t len);

enum mc_err_code mc_report_json_write(const char *path, const struct mc_run_report *rep, int exit_code,
                                      struct mc_error *err);
/* The same report without the per-position profiles (by_position): the records of a history store. */
#define MC_JSON_NO_PROFILE 1
enum mc_err_code mc_report_json_write_flags(const char *path, const struct mc_run_report *rep, int exit_code,
                                            int flags, struct mc_error *err);
/* The Markdown summary for a CI step summary (markdown.c). */
enum mc_err_code mc_report_markdown_write(const char *path, const struct mc_run_report *rep, int exit_code,
                                          struct mc_error *err);
/* One self-contained HTML page (html.c): the headroom matrix and error-against-position plots. */
enum mc_err_code mc_report_html_write(const char *path, const struct mc_run_report *rep, int exit_code,
                                      struct mc_error *err);
enum mc_err_code mc_report_junit_write(const char *path, const struct mc_run_report *rep, struct mc_error *err);

#endif
