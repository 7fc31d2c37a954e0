/*
 * reportread.h — reads a mixcheck JSON report (reports/json.c, format "mixcheck-report" version 1)
 * back: the per-tensor records of "results", as far as baselines (baseline.h) and `mixcheck diff`
 * need them. A report that does not parse, is of another format or version, or has a record
 * without its keys is MC_ERR_INPUT with file:line:column.
 */
#ifndef MC_REPORTREAD_H
#define MC_REPORTREAD_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

struct mc_report_record {
    char *case_id, *scenario, *backend, *dtype, *tensor; /* tensor "" for a check without tensors */
    char *status;
    char *key;             /* "case/scenario/backend/dtype/tensor": what records are matched by */
    int has_numbers;       /* a tensor record: headroom and errors below */
    double headroom;       /* +inf where the report has null (a non-finite value was seen) */
    double max_abs_err;    /* +inf for null */
    double atol, rtol;
    double duration_s;     /* of the check; 0 when absent */
    int64_t first_fail_token; /* -1 for null */
    char *worst_index;     /* "batch=0 token=3 ..." or "" */
    int line, column;      /* of the record in its file */
};

struct mc_report_doc {
    char *path;
    /* the run: its provenance's commit ("unknown" when the report has none) and start */
    char *git_commit, *git_describe, *started_utc;
    int64_t started_unix;  /* 0 when absent */
    /* what else the numbers came from: the SHA-256 of every plugin and Python spec file of the run's
     * provenance, in order ("" without any; "?" for a file that could not be read), and the same
     * for a human: "plugin PATH sha256 0123456789ab, python SPEC sha256 ..." */
    char *tested_key, *tested;
    struct mc_report_record *records; /* sorted by key */
    int n_records;
};

enum mc_err_code mc_report_read(const char *path, struct mc_report_doc *doc, struct mc_error *err);
void mc_report_doc_free(struct mc_report_doc *doc);

/* The record with this key, or NULL (binary search). */
const struct mc_report_record *mc_report_find(const struct mc_report_doc *doc, const char *key);

/* Writes "case/scenario/backend/dtype/tensor" into buf. */
void mc_report_key(char *buf, size_t len, const char *case_id, const char *scenario, const char *backend,
                   const char *dtype, const char *tensor);

#endif
