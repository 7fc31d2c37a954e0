/*
 * refutil.h — test support shared by the tests of the reference mixers (tests/reference): a
 * fixed-seed LCG, weight sets in HF names and shapes (f64 values, packed in the model dtype), a
 * mixer driven only through its ops struct, segment forwards, exported caches, comparisons and
 * the error-path helpers. cmocka asserts: call from inside a cmocka test.
 */
#ifndef MC_TESTS_REFUTIL_H
#define MC_TESTS_REFUTIL_H

#include <stddef.h>
#include <stdint.h>

#include "mixcheck/backend.h"

#define WS_MAX 12 /* most weights a weight set holds (Mamba1: 11) */

struct lcg {
    uint64_t s;
};

/* Uniform in [-1, 1). */
double lcg_next(struct lcg *g);

/* A set of weights in HF names and shapes, values kept in double and handed over in the model dtype. */
struct weight_set {
    int n;
    struct mc_weight w[WS_MAX];
    double *val[WS_MAX]; /* f64 values */
    void *data[WS_MAX];  /* in the model dtype */
};

int64_t shape_elems(int ndim, const int64_t *dims);
void weight_set_free(struct weight_set *ws);
/* Adds one weight, zero-filled; returns its values. */
double *weight_new(struct weight_set *ws, const char *name, int ndim, int64_t d0, int64_t d1, int64_t d2);
/* Adds one weight filled with base + scale*U[-1,1). */
void weight_add(struct weight_set *ws, const char *name, int ndim, int64_t d0, int64_t d1, int64_t d2, double base,
                double scale, struct lcg *g);
/* Index of the weight called name, -1 when absent. */
int weight_index(const struct weight_set *ws, const char *name);
/* Its f64 values, NULL when absent. */
double *weight_find(struct weight_set *ws, const char *name);
/* Converts the f64 values to the model dtype and points the mc_weight entries at them. */
void weight_set_pack(struct weight_set *ws, enum mc_dtype dtype);

/* n values U[-1,1) from seed. */
double *random_x(int64_t n, uint64_t seed);
/* max |a - b| over n (INFINITY when a difference is NaN). */
double max_abs_diff(const double *a, const double *b, int64_t n);
double max_abs(const double *a, int64_t n);

/* A model behind its ops struct, with the exported cache layout: window [B][C][K] then state
 * [B][state_row] (state_row 0: no recurrent state, exported as NULL). */
struct mixer {
    const struct mc_backend_ops *ops;
    struct mc_model *model;
    enum mc_dtype dtype;
    int64_t D, C, K, state_row;
};

/* Creates the model behind mx->ops from ws (packed here in dtype), then poisons ws's packed data
 * (the model must have copied it); ws->val stays intact for oracles. ws then goes to *keep when
 * keep is given (it may be ws itself), else is freed. mx->ops, D, C, K, state_row must be set. */
void mixer_build(struct mixer *mx, enum mc_family family, const void *cfg, enum mc_dtype dtype, struct weight_set *ws,
                 struct weight_set *keep);
void mixer_free(struct mixer *mx);
struct mc_cache *cache_new(struct mixer *mx, int64_t batch);
/* Exported cache of an f64 model, window [B][C][K] then state [B][state_row], in one buffer. */
double *cache_get(struct mixer *mx, struct mc_cache *c, int64_t batch);
/* x [B][L][D] of an f64 model, rows of L tokens read from a [B][T][D] array at token offset t0;
 * y likewise written. */
void forward_f64(struct mixer *mx, struct mc_cache *c, int64_t B, int64_t T, int64_t t0, int64_t L, const double *x,
                 const uint8_t *mask, double *y);

/* Worst differences seen by check_split_invariance, and the size of what it compared. */
struct split_result {
    double dy, dcache; /* over the splits: outputs, exported caches */
    double dstep;      /* L == 1 continuation: outputs */
    double y_max;      /* max |y| of the full forward */
    double state_max;  /* max |state| of its exported recurrent state (0 without one) */
};

/* On an f64 mixer and x [B][T][D] from x_seed: a cached forward over all T tokens equals the
 * cache-less one exactly, and every split of it into successive cached forwards (pieces of 1 and
 * shorter than K included) within 1e-12, outputs and exported caches; then prefilling t0 tokens
 * and one L == 1 step gives the full forward's row t0 within 1e-12, for every t0. T must be 13. */
struct split_result check_split_invariance(struct mixer *mx, int64_t B, int64_t T, uint64_t x_seed);

/* Mask semantics (docs/semantics.md §A.4) on an f64 mixer (B = 3, 9 real tokens, 5 padding tokens carrying
 * NaN and 1e30): left, middle and right padding in one batch, each row alone (B = 1) and token by
 * token (L == 1) give the unpadded outputs at the real tokens and exactly pad_row [D] (NULL: zeros)
 * at the padding ones, and every row's final cache equals the unpadded one; a padding token on a
 * primed cache leaves it bit-identical and outputs pad_row. Returns the worst difference. */
double check_mask_semantics(struct mixer *mx, const double *pad_row);

/* One f32 and one f64 mixer built from the same weights: a cached forward over B = 2, L = 11 tokens
 * (x from seed 3) agrees within 1e-4, outputs and exported caches. label, when given, is printed after
 * "f32 vs f64". */
void check_f32_matches_f64(struct mixer *m64, struct mixer *m32, const char *label);

/* The forward and cache argument checks every reference mixer makes (f64 mixer, D <= 8): a cache of
 * the wrong batch, len 0, batch 0, no x, no y are refused and a good forward passes; cache_alloc of
 * batch 0, a copy between batches 1 and 2 and an import of neither window nor state are refused. Then
 * extra, when given, runs the family's own checks on the same caches (c1: batch 1, c2: batch 2);
 * msg still holds the message of that last refused import. */
typedef void (*forward_errors_extra)(struct mixer *mx, struct mc_cache *c1, struct mc_cache *c2, struct mc_msg *msg);
void check_forward_errors(struct mixer *mx, forward_errors_extra extra);

/* What check_cache_round_trip hands a family's own checks. */
struct round_trip {
    int64_t B, T, t0;        /* 2 rows of 10 tokens, the first 6 prefilled */
    const double *x;         /* [B][T][D] from seed 9 */
    double *y_a, *y_b;       /* [B][T][D]: cache a's outputs over all T; scratch */
    const double *snap;      /* a's export after t0 tokens (window, then state) */
    struct mc_cache *a, *b;  /* a: run through all T; b: imported from snap, then run on */
    struct mc_cache *d;      /* never used before an import of snap with d_state, then run on */
    double *d_state;         /* the state pointer d's import got */
};
typedef void (*round_trip_extra)(struct mixer *mx, const struct round_trip *rt);

/* Export -> import into a fresh cache -> continue equals continuing the original, bit for bit; a
 * cache_copy likewise; an import into a never-used cache is primed (its continuation differs from a
 * fresh prefill by more than 1e-6). d_state: the state pointer the import into the never-used cache
 * gets (NULL: the snapshot's own state, or NULL without one). extra, when given, then runs the
 * family's own checks. f64 mixer. */
void check_cache_round_trip(struct mixer *mx, double *d_state, round_trip_extra extra);

/* On an f64 mixer of D = 8 without an output bias: a padding token (carrying NaN) between two real
 * ones outputs a row of exact zeros, in one cache-less forward of B = 1, L = 3. */
void check_pad_row_zero(struct mixer *mx);

/* Scalar f64 SiLU and softplus (the torch definition: threshold 20) of the hand cases and oracles. */
double silu_d(double v);
double softplus_d(double v);

/* A hand case's model: creates it at f64 from cfg and w [n] through ops (must succeed), runs one
 * cache-less forward of one row of T tokens x [T][D] into y [T][D] (must succeed), destroys it. */
void hand_forward(const struct mc_backend_ops *ops, enum mc_family family, const void *cfg,
                  const struct mc_weight *w, int n, int64_t T, const void *x, void *y);

/* model_create's descriptor checks every reference family makes: cfg with w [n] is accepted at f64;
 * f16 and bf16 are UNSUPPORTED (the message names the dtype), an unknown dtype INVALID; the
 * descriptor family `other` is INVALID (the message names the family); no configuration is INVALID. */
void check_create_desc(const struct mc_backend_ops *ops, const void *cfg, enum mc_family family,
                       enum mc_family other, struct mc_weight *w, int n);

/* model_create through ops; on success the model is destroyed, on failure the handle must be NULL. */
enum mc_backend_status try_create_ops(const struct mc_backend_ops *ops, const void *cfg, enum mc_family family,
                                      enum mc_dtype dtype, struct mc_weight *w, int n, struct mc_msg *msg);
/* Fails unless msg contains a (and b, when not NULL). */
void expect_msg(const struct mc_msg *msg, const char *a, const char *b);
/* The fields every reference ops struct has: ABI, name "reference", device "cpu", f32 | f64, no caps. */
void check_ops_identity(const struct mc_backend_ops *ops, enum mc_family family);

#endif
