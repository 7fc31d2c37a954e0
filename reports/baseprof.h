/*
 * baseprof.h — the per-position error profiles of a baseline report (the `by_position` of its tensor
 * records, reports/json.c), read back for the HTML report's plots: the run's curve is drawn next to
 * the baseline's. run/reportread.h reads the records' numbers, not their profiles; a report written
 * without profiles (a history store's records, MC_JSON_NO_PROFILE) has none, and gives no curve.
 */
#ifndef MC_REPORT_BASEPROF_H
#define MC_REPORT_BASEPROF_H

struct mc_json_value;

struct mc_baseprof_entry {
    char *key;                              /* "case/scenario/backend/dtype/tensor" (reportread.h) */
    const struct mc_json_value *by_position; /* the record's by_position object */
};

struct mc_baseprof {
    struct mc_json_value *root;
    struct mc_baseprof_entry *entries;      /* the records with a profile, sorted by key */
    int n;
};

/* Reads the report at path; 0 on success, -1 when it cannot be read or parsed (no curves then). */
int mc_baseprof_open(struct mc_baseprof *bp, const char *path);
void mc_baseprof_close(struct mc_baseprof *bp);

/* The profile of one tensor record: up to cap (position, headroom) points into x, y (a null headroom,
 * a non-finite value, as +inf); returns how many, 0 when the baseline has no profile for that key. */
int mc_baseprof_headroom(const struct mc_baseprof *bp, const char *key, double *x, double *y, int cap);

#endif
