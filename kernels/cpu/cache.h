/*
 * cache.h — the cache of every cpu family (kernels/cpu/<family>.c): per batch row a conv window of
 * the last K pre-conv inputs and a recurrent state, both f32, plus the primed flag; and the five
 * cache entries of the ops struct (mixcheck/backend.h) over it. A family describes its geometry once
 * in a struct mc_cpu_cache_shape kept in its model and forwards its ops to the functions here (the
 * entries MC_CPU_CACHE_OPS defines), so the messages, the order of checks and the export/import
 * layouts are the same for every family.
 *
 * Exported layout (CONV-INV): conv_state [B][C][K], recurrent_state [B][state_elems], both f32 for
 * every storage dtype. The window in memory is the family's own layout ([K][C] for the mamba families
 * and shortconv, channel-blocked for gdn), converted by the shape's to_ck / from_ck per batch row.
 */
#ifndef MC_KERNELS_CPU_CACHE_H
#define MC_KERNELS_CPU_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "mixcheck/backend.h"

struct mc_cache {
    int64_t batch;
    int primed;
    float *window; /* [B][window_elems] the last K pre-conv inputs, oldest first, family layout */
    float *state;  /* [B][state_elems]; NULL when the family has no recurrent state */
};

/* One batch row's window between the family layout (win) and [C][K] (ck). */
typedef void (*mc_cpu_window_conv_fn)(int64_t channels, int64_t kernel, const float *src, float *dst);

/* A family's cache geometry, filled at model_create. */
struct mc_cpu_cache_shape {
    int64_t channels, kernel;         /* window_elems = channels * kernel per batch row */
    size_t state_elems;               /* per batch row; 0: no recurrent state (import needs none) */
    mc_cpu_window_conv_fn to_ck;      /* family layout -> [C][K] (export) */
    mc_cpu_window_conv_fn from_ck;    /* [C][K] -> family layout (import) */
    const char *import_needs;         /* the import message's tail, e.g. "conv_state [B][C][K] (f32)" */
};

/* The [K][C] window of common.h (mc_cpu_window_to_ck / _from_ck) as a shape; state_elems and
 * import_needs as given. */
struct mc_cpu_cache_shape mc_cpu_cache_shape_kc(int64_t channels, int64_t kernel, size_t state_elems,
                                                const char *import_needs);

/* Floats of one batch row's window. */
static inline size_t mc_cpu_cache_window_elems(const struct mc_cpu_cache_shape *s)
{
    return (size_t)(s->channels * s->kernel);
}

/* The ops entries. `shape` is NULL when the caller's model is NULL (an INVALID error naming the
 * entry); `who` prefixes every message (e.g. "mamba2 cpu"). A new cache is zeroed and not primed;
 * copy requires equal batches; export skips a NULL output; import primes the cache. */
void mc_cpu_cache_free(struct mc_cache *cache);
enum mc_backend_status mc_cpu_cache_alloc(const struct mc_cpu_cache_shape *shape, const char *who, int64_t batch,
                                          struct mc_cache **cache, struct mc_msg *msg);
enum mc_backend_status mc_cpu_cache_copy(const struct mc_cpu_cache_shape *shape, const char *who,
                                         struct mc_cache *dst, const struct mc_cache *src, struct mc_msg *msg);
enum mc_backend_status mc_cpu_cache_export(const struct mc_cpu_cache_shape *shape, const char *who,
                                           const struct mc_cache *cache, void *conv_state, void *recurrent_state,
                                           struct mc_msg *msg);
enum mc_backend_status mc_cpu_cache_import(const struct mc_cpu_cache_shape *shape, const char *who,
                                           struct mc_cache *cache, const void *conv_state,
                                           const void *recurrent_state, struct mc_msg *msg);

/* Defines the five cache entries of a family's ops struct, static, as PREFIX_cache_free, _alloc, _copy,
 * _export and _import: each forwards to the function above with the shape the family keeps in its
 * model's `cache_shape` member (NULL for a NULL model) and `who` for the messages. */
#define MC_CPU_CACHE_OPS(prefix, who)                                                                              \
    static void prefix##_cache_free(struct mc_model *model, struct mc_cache *cache)                               \
    {                                                                                                              \
        (void)model;                                                                                               \
        mc_cpu_cache_free(cache);                                                                                  \
    }                                                                                                              \
    static enum mc_backend_status prefix##_cache_alloc(struct mc_model *model, int64_t batch,                     \
                                                       struct mc_cache **cache, struct mc_msg *msg)               \
    {                                                                                                              \
        return mc_cpu_cache_alloc(model ? &model->cache_shape : NULL, who, batch, cache, msg);                    \
    }                                                                                                              \
    static enum mc_backend_status prefix##_cache_copy(struct mc_model *model, struct mc_cache *dst,               \
                                                      const struct mc_cache *src, struct mc_msg *msg)             \
    {                                                                                                              \
        return mc_cpu_cache_copy(model ? &model->cache_shape : NULL, who, dst, src, msg);                         \
    }                                                                                                              \
    static enum mc_backend_status prefix##_cache_export(struct mc_model *model, const struct mc_cache *cache,     \
                                                        void *conv_state, void *recurrent_state,                  \
                                                        struct mc_msg *msg)                                       \
    {                                                                                                              \
        return mc_cpu_cache_export(model ? &model->cache_shape : NULL, who, cache, conv_state, recurrent_state,  \
                                   msg);                                                                           \
    }                                                                                                              \
    static enum mc_backend_status prefix##_cache_import(struct mc_model *model, struct mc_cache *cache,           \
                                                        const void *conv_state, const void *recurrent_state,      \
                                                        struct mc_msg *msg)                                       \
    {                                                                                                              \
        return mc_cpu_cache_import(model ? &model->cache_shape : NULL, who, cache, conv_state, recurrent_state,  \
                                   msg);                                                                           \
    }

/* ---- the window and state one forward runs on -------------------------------------------------- */

/* What a forward's math reads and advances: the cache's own window and state, or, without a cache,
 * zeroed temporaries of the batch that the call drops at its end (a cache-less forward keeps nothing). */
struct mc_cpu_rows {
    float *window;                 /* [B][window_elems] */
    float *state;                  /* [B][state_elems]; NULL without recurrent state */
    float *tmp_window, *tmp_state; /* owned; NULL with a cache */
};

/* With the forward's other allocations, before anything is touched: without a cache, the zeroed
 * temporaries of `shape` for `batch` rows (the state only when the shape has one). Returns 0, or -1
 * when out of memory (mc_cpu_rows_free still frees what was had). rows starts zeroed. */
int mc_cpu_rows_alloc(struct mc_cpu_rows *rows, const struct mc_cpu_cache_shape *shape, const struct mc_cache *cache,
                      int64_t batch);

/* After every check and allocation: a cache no forward or import has written is zeroed first (case (a)
 * with a cache: start from zeros, fill it); rows->window and rows->state are then what the math runs on. */
void mc_cpu_rows_start(struct mc_cpu_rows *rows, const struct mc_cpu_cache_shape *shape, struct mc_cache *cache,
                       int64_t batch);

void mc_cpu_rows_free(struct mc_cpu_rows *rows);

/* ---- the packed call on a state pool (backend.h: forward_packed, struct mc_packed_args) ----------
 *
 * Every family's forward_packed treats its cache as a pool of rows (slots) and runs the n sequences of
 * a call back to back along one packed token axis; these are the steps all of them share. */

/* The argument checks every family's forward_packed opens with, in this order: model, pool and args
 * non-NULL; n_seqs >= 0, cu_seqlens, slots and has_initial_state present when n_seqs > 0; cu_seqlens[0]
 * == 0 and non-decreasing, T = cu_seqlens[n] within int (BLAS rows); every slot in [0, pool->batch)
 * and distinct; has_initial_state 0 or 1; x and y present when T > 0. Writes T to *total. Messages
 * start with `who`; a failed check touches nothing. */
enum mc_backend_status mc_cpu_packed_check(const struct mc_model *model, const struct mc_cache *pool,
                                           const struct mc_packed_args *args, const char *who, int64_t *total,
                                           struct mc_msg *msg);

/* The start of a packed call, once its allocations have succeeded: the slot of every non-empty
 * sequence with has_initial_state == 0 gets a zero window and a zero state (whatever it held, NaN
 * included); every other slot is left as it is. An unprimed pool is all zeros already (cache_alloc),
 * so a sequence continuing from a slot of it starts from zeros, as a forward on a fresh cache does. */
void mc_cpu_packed_reset(const struct mc_cpu_cache_shape *shape, struct mc_cache *pool,
                         const struct mc_packed_args *args);

/* tok_seq[t] = the sequence owning packed token t, for t in [0, T). */
void mc_cpu_packed_token_seq(const struct mc_packed_args *args, int64_t *tok_seq);

#endif
