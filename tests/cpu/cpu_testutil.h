/*
 * cpu_testutil.h — fixtures shared by the cpu backend tests (tests/cpu): a fixed-seed LCG, weight sets
 * kept in f64 and handed to a backend in any dtype, a driver that runs a sequence as successive
 * cached forwards through an ops struct, and an allclose comparator that reports what it measured.
 * Values travel as double between the helpers; the dtype conversions are the harness's (dtype.h), an
 * implementation independent of the kernels' own.
 */
#ifndef MC_TESTS_CPU_TESTUTIL_H
#define MC_TESTS_CPU_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

#include "mixcheck/backend.h"

#define TU_MAX_WEIGHTS 16

struct tu_lcg {
    uint64_t s;
};

/* Uniform in [-1, 1). */
double tu_lcg_next(struct tu_lcg *g);

/* Weights in HF names and shapes; values in f64, packed into a model dtype on demand. */
struct tu_weights {
    int n;
    struct mc_weight w[TU_MAX_WEIGHTS];
    double *val[TU_MAX_WEIGHTS];
    void *data[TU_MAX_WEIGHTS];
};

/* Adds a weight filled with base + scale·U[-1, 1). */
void tu_weights_add(struct tu_weights *ws, const char *name, int ndim, int64_t d0, int64_t d1, int64_t d2, double base,
                    double scale, struct tu_lcg *g);
/* Points the mc_weight entries at copies of the values in `dtype`. */
void tu_weights_pack(struct tu_weights *ws, enum mc_dtype dtype);
/* Rounds every value through `dtype` (what a model stored in that dtype holds). */
void tu_weights_round(struct tu_weights *ws, enum mc_dtype dtype);
void tu_weights_free(struct tu_weights *ws);
double *tu_weights_find(struct tu_weights *ws, const char *name);

/* A model of one backend plus the sizes the driver needs. */
struct tu_model {
    const struct mc_backend_ops *ops;
    struct mc_model *model;
    enum mc_dtype dtype;
    int64_t D;           /* hidden size */
    int64_t conv_elems;  /* per batch row: C*K */
    int64_t state_elems; /* per batch row; 0 = no recurrent state */
};

/* model_create with the weights packed in `dtype`; asserts success. */
void tu_model_create(struct tu_model *tm, const struct mc_backend_ops *ops, enum mc_family family,
                     const void *config, struct tu_weights *ws, enum mc_dtype dtype, int64_t chunk_size,
                     int32_t threads, int64_t D, int64_t conv_elems, int64_t state_elems);
void tu_model_destroy(struct tu_model *tm);

/* Rounds n values through dtype in place. */
void tu_round(enum mc_dtype dtype, double *v, size_t n);

/*
 * Runs x [B][L][D] (f64 values, converted to the model dtype) through the model as successive forwards
 * over the pieces splits[0..n_splits) (summing to L; n_splits == 0: one forward of L), all on one
 * cache that starts as `start` (copied; NULL: a fresh cache), or with no cache at all when
 * use_cache is 0 (then n_splits must be 0). mask [B][L] or NULL. Writes y [B][L][D] and, when the
 * pointers are not NULL, the exported cache after the last piece: conv [B][C*K], state [B][S].
 * `out_cache`, when not NULL, receives the cache (caller frees it with ops->cache_free).
 */
void tu_run(struct tu_model *tm, int64_t B, int64_t L, const double *x, const uint8_t *mask, const int64_t *splits,
            int n_splits, int use_cache, const struct mc_cache *start, double *y, double *conv, double *state,
            struct mc_cache **out_cache);

/* Same as tu_run, but returns the raw bytes of y in the model dtype and of the export (for bitwise
 * comparisons); y_bytes sized B*L*D*dtype size, conv_bytes/state_bytes in the export dtype. */
void tu_run_raw(struct tu_model *tm, int64_t B, int64_t L, const double *x, const uint8_t *mask, const int64_t *splits,
                int n_splits, void *y_bytes, void *conv_bytes, void *state_bytes);

/* Runs x through each of tm[0..n_models) with tu_run_raw (same mask and splits; the models differ
 * only in their thread count) and asserts y and the exported cache are bitwise those of tm[0]. */
void tu_assert_same_bits(struct tu_model *tm, int n_models, int64_t B, int64_t L, const double *x,
                         const uint8_t *mask, const int64_t *splits, int n_splits);

/* What a comparison measured. */
struct tu_cmp {
    double max_abs, max_rel, headroom; /* headroom = max |a-b|/(atol + rtol|b|) */
    int64_t worst;
};

/* Compares a (got) with b (expected) over n elements, skipping rows where skip_mask[i / row] == 0
 * (skip_mask NULL: all compared). Fails the test (with both values and the index) when an element is
 * non-finite or outside |a-b| <= atol + rtol|b|. `what` names the tensor. */
struct tu_cmp tu_compare(const char *what, const double *a, const double *b, size_t n, int64_t row,
                         const uint8_t *skip_mask, double atol, double rtol);

/* Random values base + scale·U[-1, 1) into v[0..n). */
void tu_fill(double *v, size_t n, double scale, struct tu_lcg *g);

/* calloc that asserts success. */
void *tu_calloc(size_t n, size_t size);

/* Prints a measured error line (cmocka print_message), for the tolerance comments. */
void tu_report(const char *label, const struct tu_cmp *c);

#endif
