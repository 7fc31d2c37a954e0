/*
 * compare.h — the comparator (docs/scenarios.md §3).
 *
 * An element passes iff |a - b| <= atol + atol_scale*M + rtol*|b|, M the largest finite |b| of the array
 * compared in one call or the tolerance's `magnitude` when larger (case/tolerance.h). NaN or Inf on either side fails and is counted
 * as non-finite (equal infinities too: outputs and caches are finite by contract); NaN never passes
 * by a comparison that is false for NaN. Every comparison reports max abs / rel error, headroom (worst |a-b| / (atol + rtol|b|),
 * < 1 passes, +inf when a non-finite value was seen or a nonzero error met a zero tolerance), the
 * count of failing elements, the worst element's index, the first failing token, cosine similarity
 * and NMSE. Stats of several comparisons of the same tensor (checkpoints, rows) merge.
 */
#ifndef MC_COMPARE_H
#define MC_COMPARE_H

#include <stdint.h>

#include "case/case.h"
#include "mixcheck/backend.h"

#define MC_DIM_NAME_LEN 16

/* The per-position error profile of a comparison: for each token position (the absolute position along
 * the token axis, or the view's `token_offset` for an array without one, e.g. a cache state at its
 * checkpoint) the worst abs error and the worst headroom of the elements there. Positions go into
 * MC_PROFILE_BUCKETS buckets of `width` positions each, width a power of two: 1 while every position
 * seen is below 256; a position past the last bucket doubles the width and folds neighbouring buckets
 * into one, keeping the max. The profile is therefore the same whatever order comparisons come in.
 * Values are floats (a plot's precision), +inf for a non-finite element (or a nonzero error over a
 * zero tolerance); a bucket without a compared element has max_abs_err -1. */
#define MC_PROFILE_BUCKETS 256

struct mc_position_profile {
    int64_t width;                          /* positions per bucket (0 = nothing recorded yet) */
    int n;                                  /* buckets in use: 1 + the last with an element */
    float max_abs_err[MC_PROFILE_BUCKETS];  /* -1 = no element compared in the bucket */
    float headroom[MC_PROFILE_BUCKETS];
};

/* How to read a flat array: dims with names, which axis is the token axis, and where it starts. */
struct mc_compare_view {
    int ndim;
    int64_t dims[MC_MAX_DIMS];
    const char *dim_names[MC_MAX_DIMS];
    int token_axis;        /* axis holding token positions, or -1 (then `token_offset` is the position) */
    int64_t token_offset;  /* absolute position of token index 0 (or of the whole array) */
    int64_t batch_offset;  /* absolute batch row of index 0 along axis 0 */
    const uint8_t *valid;  /* optional [dims[0]][dims[token_axis]]: 0 = padding, only finiteness checked */
};

struct mc_compare_stats {
    int64_t n_elems;       /* compared elements (padding excluded) */
    int64_t n_fail;        /* failing elements, non-finite included */
    int64_t n_nonfinite;   /* actual NaN/Inf where expected is finite, or either side NaN */
    int64_t n_nan;         /* NaN in actual */
    int64_t n_nan_bare;    /* of those, NaN with no payload (only the quiet bit set, either sign): what arithmetic
                            * makes (0/0, inf - inf) or NAN writes, not the harness's poison (all payload bits
                            * set) or its planted pool NaN (a payload naming the row), which operations pass on */
    double max_abs_err;    /* over finite pairs */
    double max_rel_err;    /* |a-b|/|b| over finite pairs with b != 0 */
    double max_abs_expected; /* the largest M (case/tolerance.h) a comparison used: the tensor's magnitude */
    double atol_applied;   /* the largest atol + atol_scale*M any comparison applied */
    double headroom;
    int has_worst;
    int worst_ndim;
    int64_t worst_index[MC_MAX_DIMS]; /* absolute (offsets applied) */
    char worst_names[MC_MAX_DIMS][MC_DIM_NAME_LEN];
    double worst_actual, worst_expected;
    int64_t first_fail_token; /* -1 when nothing failed */
    int64_t first_fail_batch;
    /* running sums for cosine and NMSE */
    double sum_ab, sum_aa, sum_bb, sum_err2;
    /* 0 while every finite non-zero actual value that fails its bound is exactly a bfloat16 / binary16 value, non-zero
     * from the first that is not (the comparator stops looking there): 0 over a failing tensor compared at
     * f32/f64 says the backend rounded what fails to that dtype somewhere (the diagnosis's storage-precision
     * fact); n_grid_read counts the values it was read over (the failing, finite, non-zero ones) */
    int64_t n_grid_read, n_offgrid_bf16, n_offgrid_f16;
    struct mc_position_profile profile; /* error against token position (above) */
};

void mc_compare_stats_init(struct mc_compare_stats *s);

/* Compares actual against expected (both laid out as `view` describes) and merges into *s. */
void mc_compare_accumulate(const double *actual, const double *expected, const struct mc_compare_view *view,
                           struct mc_tolerance tol, struct mc_compare_stats *s);

/* The absolute tolerance a comparison of expected values of largest magnitude M applies. */
double mc_tolerance_atol_at(struct mc_tolerance tol, double M);

/* The first position of bucket b. */
int64_t mc_compare_profile_position(const struct mc_position_profile *p, int b);

/* Merges `from` into `into` (same tensor, other checkpoints; profiles too). */
void mc_compare_stats_merge(struct mc_compare_stats *into, const struct mc_compare_stats *from);

/* 1 when every compared element passed (and at least one was compared or none was expected). */
int mc_compare_passed(const struct mc_compare_stats *s);

double mc_compare_cosine(const struct mc_compare_stats *s);
double mc_compare_nmse(const struct mc_compare_stats *s);

/* Formats the worst index as "batch=0 token=3 channel=17" into buf. */
void mc_compare_format_index(const struct mc_compare_stats *s, char *buf, size_t len);

#endif
