/*
 * cache.c — the shared cpu cache (see cache.h): allocation, copy, free, export and import of the
 * f32 window + state of every family.
 */
#include "cache.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

struct mc_cpu_cache_shape mc_cpu_cache_shape_kc(int64_t channels, int64_t kernel, size_t state_elems,
                                                const char *import_needs)
{
    struct mc_cpu_cache_shape s = {
        .channels = channels,
        .kernel = kernel,
        .state_elems = state_elems,
        .to_ck = mc_cpu_window_to_ck,
        .from_ck = mc_cpu_window_from_ck,
        .import_needs = import_needs,
    };
    return s;
}

void mc_cpu_cache_free(struct mc_cache *cache)
{
    if (!cache)
        return;
    free(cache->state);
    free(cache->window);
    free(cache);
}

enum mc_backend_status mc_cpu_cache_alloc(const struct mc_cpu_cache_shape *shape, const char *who, int64_t batch,
                                          struct mc_cache **cache, struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    struct mc_cache *c = NULL;
    if (!shape || !cache) {
        st = mc_cpu_fail(msg, MC_BACKEND_INVALID, "%s: cache_alloc needs a model and an output handle", who);
        goto fail;
    }
    *cache = NULL;
    if (batch < 1 || batch > INT_MAX) {
        st = mc_cpu_fail(msg, MC_BACKEND_INVALID, "%s: cache batch must be in [1, %d] (got %lld)", who, INT_MAX,
                         (long long)batch);
        goto fail;
    }
    c = calloc(1, sizeof *c);
    if (!c) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "%s: out of memory for a cache", who);
        goto fail;
    }
    c->batch = batch;
    c->window = calloc((size_t)batch * mc_cpu_cache_window_elems(shape), sizeof(float));
    if (shape->state_elems)
        c->state = calloc((size_t)batch * shape->state_elems, sizeof(float));
    if (!c->window || (shape->state_elems && !c->state)) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "%s: out of memory for a cache of batch %lld", who, (long long)batch);
        goto fail;
    }
    *cache = c;
    return MC_BACKEND_OK;

fail:
    mc_cpu_cache_free(c);
    return st;
}

enum mc_backend_status mc_cpu_cache_copy(const struct mc_cpu_cache_shape *shape, const char *who,
                                         struct mc_cache *dst, const struct mc_cache *src, struct mc_msg *msg)
{
    if (!shape || !dst || !src)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID, "%s: cache_copy needs a model, a destination and a source", who);
    if (dst->batch != src->batch)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID, "%s: cache_copy batch mismatch (destination %lld, source %lld)",
                           who, (long long)dst->batch, (long long)src->batch);
    if (dst == src)
        return MC_BACKEND_OK;
    memcpy(dst->window, src->window, (size_t)src->batch * mc_cpu_cache_window_elems(shape) * sizeof(float));
    if (shape->state_elems)
        memcpy(dst->state, src->state, (size_t)src->batch * shape->state_elems * sizeof(float));
    dst->primed = src->primed;
    return MC_BACKEND_OK;
}

enum mc_backend_status mc_cpu_cache_export(const struct mc_cpu_cache_shape *shape, const char *who,
                                           const struct mc_cache *cache, void *conv_state, void *recurrent_state,
                                           struct mc_msg *msg)
{
    if (!shape || !cache)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID, "%s: cache_export needs a model and a cache", who);
    const size_t win = mc_cpu_cache_window_elems(shape);
    for (int64_t b = 0; conv_state && b < cache->batch; b++)
        shape->to_ck(shape->channels, shape->kernel, cache->window + (size_t)b * win,
                     (float *)conv_state + (size_t)b * win);
    if (recurrent_state && shape->state_elems)
        memcpy(recurrent_state, cache->state, (size_t)cache->batch * shape->state_elems * sizeof(float));
    return MC_BACKEND_OK;
}

enum mc_backend_status mc_cpu_cache_import(const struct mc_cpu_cache_shape *shape, const char *who,
                                           struct mc_cache *cache, const void *conv_state,
                                           const void *recurrent_state, struct mc_msg *msg)
{
    if (!shape || !cache)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID, "%s: cache_import needs a model and a cache", who);
    if (!conv_state || (shape->state_elems && !recurrent_state))
        return mc_cpu_fail(msg, MC_BACKEND_INVALID, "%s: cache_import needs %s", who, shape->import_needs);
    const size_t win = mc_cpu_cache_window_elems(shape);
    for (int64_t b = 0; b < cache->batch; b++)
        shape->from_ck(shape->channels, shape->kernel, (const float *)conv_state + (size_t)b * win,
                       cache->window + (size_t)b * win);
    if (shape->state_elems)
        memcpy(cache->state, recurrent_state, (size_t)cache->batch * shape->state_elems * sizeof(float));
    cache->primed = 1;
    return MC_BACKEND_OK;
}

/* ---- the packed call --------------------------------------------------------------------------- */

static int cache_cmp_i64(const void *a, const void *b)
{
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

enum mc_backend_status mc_cpu_packed_check(const struct mc_model *model, const struct mc_cache *pool,
                                           const struct mc_packed_args *args, const char *who, int64_t *total,
                                           struct mc_msg *msg)
{
    if (!model || !pool || !args || !total)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID, "%s: forward_packed needs a model, a pool and arguments", who);
    const int64_t n = args->n_seqs;
    if (n < 0)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID, "%s: forward_packed needs n_seqs >= 0 (got %lld)", who,
                           (long long)n);
    if (!args->cu_seqlens || (n > 0 && (!args->slots || !args->has_initial_state)))
        return mc_cpu_fail(msg, MC_BACKEND_INVALID,
                           "%s: forward_packed needs cu_seqlens [n+1], slots [n] and has_initial_state [n]", who);
    if (args->cu_seqlens[0] != 0)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID, "%s: forward_packed needs cu_seqlens[0] == 0 (got %lld)", who,
                           (long long)args->cu_seqlens[0]);
    for (int64_t i = 0; i < n; i++) {
        if (args->cu_seqlens[i + 1] < args->cu_seqlens[i])
            return mc_cpu_fail(msg, MC_BACKEND_INVALID,
                               "%s: forward_packed needs non-decreasing cu_seqlens (cu_seqlens[%lld] = %lld < "
                               "cu_seqlens[%lld] = %lld)",
                               who, (long long)(i + 1), (long long)args->cu_seqlens[i + 1], (long long)i,
                               (long long)args->cu_seqlens[i]);
        if (args->cu_seqlens[i + 1] > INT_MAX)
            return mc_cpu_fail(msg, MC_BACKEND_INVALID, "%s: forward_packed: T = %lld exceeds the BLAS limit %d",
                               who, (long long)args->cu_seqlens[i + 1], INT_MAX);
        if (args->slots[i] < 0 || args->slots[i] >= pool->batch)
            return mc_cpu_fail(msg, MC_BACKEND_INVALID,
                               "%s: forward_packed: slots[%lld] = %lld is outside the pool [0, %lld)", who,
                               (long long)i, (long long)args->slots[i], (long long)pool->batch);
        if (args->has_initial_state[i] > 1)
            return mc_cpu_fail(msg, MC_BACKEND_INVALID,
                               "%s: forward_packed: has_initial_state[%lld] must be 0 or 1 (got %u)", who,
                               (long long)i, (unsigned)args->has_initial_state[i]);
    }
    const int64_t T = args->cu_seqlens[n];
    if (T > 0 && (!args->x || !args->y))
        return mc_cpu_fail(msg, MC_BACKEND_INVALID, "%s: forward_packed needs x [T][D] and y [T][D]", who);
    if (n > 1) {
        int64_t *sorted = malloc((size_t)n * sizeof *sorted);
        if (!sorted)
            return mc_cpu_fail(msg, MC_BACKEND_NOMEM, "%s: forward_packed: out of memory checking %lld slots", who,
                               (long long)n);
        memcpy(sorted, args->slots, (size_t)n * sizeof *sorted);
        qsort(sorted, (size_t)n, sizeof *sorted, cache_cmp_i64);
        int64_t dup = -1;
        for (int64_t i = 1; i < n && dup < 0; i++)
            if (sorted[i] == sorted[i - 1])
                dup = sorted[i];
        free(sorted);
        if (dup >= 0)
            return mc_cpu_fail(msg, MC_BACKEND_INVALID, "%s: forward_packed: slot %lld is given twice", who,
                               (long long)dup);
    }
    *total = T;
    return MC_BACKEND_OK;
}

void mc_cpu_packed_reset(const struct mc_cpu_cache_shape *shape, struct mc_cache *pool,
                         const struct mc_packed_args *args)
{
    const size_t win = mc_cpu_cache_window_elems(shape);
    for (int64_t i = 0; i < args->n_seqs; i++) {
        if (args->cu_seqlens[i + 1] == args->cu_seqlens[i] || args->has_initial_state[i])
            continue;
        const size_t s = (size_t)args->slots[i];
        memset(pool->window + s * win, 0, win * sizeof(float));
        if (shape->state_elems)
            memset(pool->state + s * shape->state_elems, 0, shape->state_elems * sizeof(float));
    }
}

void mc_cpu_packed_token_seq(const struct mc_packed_args *args, int64_t *tok_seq)
{
    for (int64_t i = 0; i < args->n_seqs; i++)
        for (int64_t t = args->cu_seqlens[i]; t < args->cu_seqlens[i + 1]; t++)
            tok_seq[t] = i;
}

/* ---- the window and state one forward runs on -------------------------------------------------- */

int mc_cpu_rows_alloc(struct mc_cpu_rows *rows, const struct mc_cpu_cache_shape *shape, const struct mc_cache *cache,
                      int64_t batch)
{
    if (cache)
        return 0;
    rows->tmp_window = calloc((size_t)batch * mc_cpu_cache_window_elems(shape), sizeof(float));
    if (shape->state_elems)
        rows->tmp_state = calloc((size_t)batch * shape->state_elems, sizeof(float));
    return rows->tmp_window && (!shape->state_elems || rows->tmp_state) ? 0 : -1;
}

void mc_cpu_rows_start(struct mc_cpu_rows *rows, const struct mc_cpu_cache_shape *shape, struct mc_cache *cache,
                       int64_t batch)
{
    if (!cache) {
        rows->window = rows->tmp_window;
        rows->state = rows->tmp_state;
        return;
    }
    if (!cache->primed) {
        memset(cache->window, 0, (size_t)batch * mc_cpu_cache_window_elems(shape) * sizeof(float));
        if (shape->state_elems)
            memset(cache->state, 0, (size_t)batch * shape->state_elems * sizeof(float));
    }
    rows->window = cache->window;
    rows->state = cache->state;
}

void mc_cpu_rows_free(struct mc_cpu_rows *rows)
{
    free(rows->tmp_state);
    free(rows->tmp_window);
    rows->tmp_window = rows->tmp_state = NULL;
}
