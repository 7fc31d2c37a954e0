/*
 * ref_common.c — the parts every reference mixer shares (ref_common.h): messages, descriptor and
 * weight table checks, owned weight copies, the cache and the family-independent half of forward.
 */
#include "ref_common.h"

#include <cblas.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A family's struct mc_model starts with struct mc_ref_model (ref_common.h). */
static struct mc_ref_model *ref_base(struct mc_model *model)
{
    return (struct mc_ref_model *)(void *)model;
}

/* Bytes of a [batch][elems] buffer in the model dtype. */
static size_t ref_bytes(const struct mc_ref_model *m, int64_t batch, int64_t elems)
{
    return (size_t)batch * (size_t)elems * m->elem_bytes;
}

enum mc_backend_status mc_ref_fail(struct mc_msg *msg, enum mc_backend_status st, const char *fmt, ...)
{
    if (msg) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg->text, sizeof msg->text, fmt, ap);
        va_end(ap);
    }
    return st;
}

enum mc_backend_status mc_ref_check_dim(const char *family, const char *name, int64_t v, struct mc_msg *msg)
{
    if (v < 1 || v > MC_REF_MAX_DIM)
        return mc_ref_fail(msg, MC_BACKEND_INVALID, "%s config: '%s' must be in [1, %d] (got %lld)", family, name,
                           MC_REF_MAX_DIM, (long long)v);
    return MC_BACKEND_OK;
}

int64_t mc_ref_spec_elems(const struct mc_ref_weight_spec *spec)
{
    int64_t n = 1;
    for (int i = 0; i < spec->ndim; i++)
        n *= spec->dims[i];
    return n;
}

/* "[d0, d1, ...]" into buf [len], truncated when it does not fit. */
static void ref_format_shape(char *buf, size_t len, int ndim, const int64_t *dims)
{
    size_t used = 0;
    int n = snprintf(buf, len, "[");
    used = n > 0 ? (size_t)n : 0;
    for (int i = 0; i < ndim && used < len; i++) {
        n = snprintf(buf + used, len - used, "%s%lld", i ? ", " : "", (long long)dims[i]);
        used += n > 0 ? (size_t)n : 0;
    }
    if (used < len)
        snprintf(buf + used, len - used, "]");
}

/* ---- model ------------------------------------------------------------------------------------- */

enum mc_backend_status mc_ref_desc_check(const struct mc_ref_family *fam, const struct mc_model_desc *desc,
                                         struct mc_model **model, struct mc_msg *msg)
{
    const char *fn = fam->name;
    if (!desc || !model)
        return mc_ref_fail(msg, MC_BACKEND_INVALID,
                           "%s reference: model_create needs a descriptor and an output handle", fn);
    *model = NULL;
    if (desc->family != fam->family)
        return mc_ref_fail(msg, MC_BACKEND_INVALID, "%s reference: descriptor family is %d, expected %s (%d)", fn,
                           (int)desc->family, fn, (int)fam->family);
    if (desc->dtype != MC_DTYPE_F32 && desc->dtype != MC_DTYPE_F64) {
        const int known = desc->dtype == MC_DTYPE_F16 || desc->dtype == MC_DTYPE_BF16;
        return mc_ref_fail(msg, known ? MC_BACKEND_UNSUPPORTED : MC_BACKEND_INVALID,
                           "%s reference: dtype %d %s (supported: f32, f64)", fn, (int)desc->dtype,
                           known ? "is not supported" : "is not a known dtype");
    }
    if (!desc->config)
        return mc_ref_fail(msg, MC_BACKEND_INVALID, "%s reference: descriptor has no configuration", fn);
    return MC_BACKEND_OK;
}

struct mc_model *mc_ref_model_alloc(const struct mc_ref_family *fam, size_t model_bytes, enum mc_dtype dtype,
                                    enum mc_backend_status *st, struct mc_msg *msg)
{
    struct mc_model *model = calloc(1, model_bytes);
    if (!model) {
        *st = mc_ref_fail(msg, MC_BACKEND_NOMEM, "%s reference: out of memory for the model", fam->name);
        return NULL;
    }
    struct mc_ref_model *m = ref_base(model);
    m->dtype = dtype;
    m->elem_bytes = dtype == MC_DTYPE_F64 ? sizeof(double) : sizeof(float);
    *st = MC_BACKEND_OK;
    return model;
}

enum mc_backend_status mc_ref_weights_match(const struct mc_ref_family *fam, const struct mc_model_desc *desc,
                                            const struct mc_ref_weight_spec *spec, const char *missing_note,
                                            const struct mc_weight **found, struct mc_msg *msg)
{
    const char *fn = fam->name;
    char want[96], got[96];
    if (desc->n_weights < 0 || (desc->n_weights > 0 && !desc->weights))
        return mc_ref_fail(msg, MC_BACKEND_INVALID, "%s reference: %d weights but no weight array", fn,
                           (int)desc->n_weights);
    for (int32_t i = 0; i < desc->n_weights; i++) {
        const struct mc_weight *w = &desc->weights[i];
        if (!w->name)
            return mc_ref_fail(msg, MC_BACKEND_INVALID, "%s reference: weight %d has no name", fn, (int)i);
        int slot = -1;
        for (int s = 0; s < fam->n_weights; s++)
            if (strcmp(w->name, fam->weight_names[s]) == 0)
                slot = s;
        if (slot < 0)
            return mc_ref_fail(msg, MC_BACKEND_INVALID, "%s reference: unknown weight '%s'%s", fn, w->name,
                               fam->unknown_note);
        if (!spec[slot].present)
            return mc_ref_fail(msg, MC_BACKEND_INVALID, "%s reference: weight '%s' %s", fn, w->name,
                               spec[slot].absent_why);
        if (found[slot])
            return mc_ref_fail(msg, MC_BACKEND_INVALID, "%s reference: weight '%s' given twice", fn, w->name);
        ref_format_shape(want, sizeof want, spec[slot].ndim, spec[slot].dims);
        int same = w->ndim == spec[slot].ndim;
        for (int d = 0; same && d < spec[slot].ndim; d++)
            same = w->dims[d] == spec[slot].dims[d];
        if (!same) {
            if (w->ndim < 0 || w->ndim > MC_MAX_DIMS)
                snprintf(got, sizeof got, "ndim %d", (int)w->ndim);
            else
                ref_format_shape(got, sizeof got, w->ndim, w->dims);
            return mc_ref_fail(msg, MC_BACKEND_INVALID, "%s reference: weight '%s': expected shape %s, got %s", fn,
                               w->name, want, got);
        }
        if (!w->data)
            return mc_ref_fail(msg, MC_BACKEND_INVALID, "%s reference: weight '%s' %s has no data", fn, w->name, want);
        found[slot] = w;
    }
    for (int s = 0; s < fam->n_weights; s++) {
        if (spec[s].present && !found[s]) {
            ref_format_shape(want, sizeof want, spec[s].ndim, spec[s].dims);
            return mc_ref_fail(msg, MC_BACKEND_INVALID, "%s reference: missing weight '%s' (expected shape %s%s)", fn,
                               fam->weight_names[s], want, missing_note);
        }
    }
    return MC_BACKEND_OK;
}

enum mc_backend_status mc_ref_weight_copy(const struct mc_ref_family *fam, const struct mc_model *model,
                                          const char *name, const struct mc_ref_weight_spec *spec, const void *data,
                                          void **dst, struct mc_msg *msg)
{
    const struct mc_ref_model *m = (const struct mc_ref_model *)(const void *)model;
    const size_t bytes = (size_t)mc_ref_spec_elems(spec) * m->elem_bytes;
    *dst = malloc(bytes);
    if (!*dst)
        return mc_ref_fail(msg, MC_BACKEND_NOMEM, "%s reference: out of memory copying weight '%s' (%zu bytes)",
                           fam->name, name, bytes);
    memcpy(*dst, data, bytes);
    return MC_BACKEND_OK;
}

enum mc_backend_status mc_ref_weights_copy(const struct mc_ref_family *fam, struct mc_model *model,
                                           const struct mc_ref_weight_spec *spec, const struct mc_weight **found,
                                           struct mc_msg *msg)
{
    struct mc_ref_model *m = ref_base(model);
    enum mc_backend_status st;
    for (int s = 0; s < fam->n_weights; s++) {
        if (!found[s])
            continue;
        st = mc_ref_weight_copy(fam, model, fam->weight_names[s], &spec[s], found[s]->data, &m->w[s], msg);
        if (st != MC_BACKEND_OK)
            return st;
    }
    return MC_BACKEND_OK;
}

void mc_ref_model_destroy(struct mc_model *model)
{
    if (!model)
        return;
    struct mc_ref_model *m = ref_base(model);
    for (int s = 0; s < MC_REF_MAX_WEIGHTS; s++)
        free(m->w[s]);
    mc_ref_probes_free(m->probes);
    free(model);
}

/* ---- cache ------------------------------------------------------------------------------------- */

void mc_ref_cache_free(struct mc_model *model, struct mc_cache *cache)
{
    (void)model;
    if (!cache)
        return;
    free(cache->state);
    free(cache->window);
    free(cache);
}

enum mc_backend_status mc_ref_cache_alloc(const struct mc_ref_family *fam, struct mc_model *model, int64_t batch,
                                          struct mc_cache **cache, struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    const struct mc_ref_model *m = ref_base(model);
    struct mc_cache *c = NULL;
    if (!model || !cache) {
        st = mc_ref_fail(msg, MC_BACKEND_INVALID, "%s reference: cache_alloc needs a model and an output handle",
                         fam->name);
        goto fail;
    }
    *cache = NULL;
    if (batch < 1 || batch > INT_MAX) {
        st = mc_ref_fail(msg, MC_BACKEND_INVALID, "%s reference: cache batch must be in [1, %d] (got %lld)", fam->name,
                         INT_MAX, (long long)batch);
        goto fail;
    }
    c = calloc(1, sizeof *c);
    if (!c) {
        st = mc_ref_fail(msg, MC_BACKEND_NOMEM, "%s reference: out of memory for a cache", fam->name);
        goto fail;
    }
    c->batch = batch;
    c->window = calloc((size_t)batch * (size_t)m->window_elems, m->elem_bytes);
    if (m->state_elems > 0)
        c->state = calloc((size_t)batch * (size_t)m->state_elems, m->elem_bytes);
    if (!c->window || (m->state_elems > 0 && !c->state)) {
        st = mc_ref_fail(msg, MC_BACKEND_NOMEM, "%s reference: out of memory for a cache of batch %lld", fam->name,
                         (long long)batch);
        goto fail;
    }
    *cache = c;
    return MC_BACKEND_OK;

fail:
    mc_ref_cache_free(model, c);
    return st;
}

enum mc_backend_status mc_ref_cache_copy(const struct mc_ref_family *fam, struct mc_model *model, struct mc_cache *dst,
                                         const struct mc_cache *src, struct mc_msg *msg)
{
    if (!model || !dst || !src)
        return mc_ref_fail(msg, MC_BACKEND_INVALID,
                           "%s reference: cache_copy needs a model, a destination and a source", fam->name);
    if (dst->batch != src->batch)
        return mc_ref_fail(msg, MC_BACKEND_INVALID,
                           "%s reference: cache_copy batch mismatch (destination %lld, source %lld)", fam->name,
                           (long long)dst->batch, (long long)src->batch);
    if (dst == src)
        return MC_BACKEND_OK;
    const struct mc_ref_model *m = ref_base(model);
    memcpy(dst->window, src->window, ref_bytes(m, src->batch, m->window_elems));
    if (m->state_elems > 0)
        memcpy(dst->state, src->state, ref_bytes(m, src->batch, m->state_elems));
    dst->primed = src->primed;
    return MC_BACKEND_OK;
}

enum mc_backend_status mc_ref_cache_export(const struct mc_ref_family *fam, struct mc_model *model,
                                           const struct mc_cache *cache, void *conv_state, void *recurrent_state,
                                           struct mc_msg *msg)
{
    if (!model || !cache)
        return mc_ref_fail(msg, MC_BACKEND_INVALID, "%s reference: cache_export needs a model and a cache", fam->name);
    const struct mc_ref_model *m = ref_base(model);
    if (conv_state)
        memcpy(conv_state, cache->window, ref_bytes(m, cache->batch, m->window_elems));
    if (recurrent_state && m->state_elems > 0)
        memcpy(recurrent_state, cache->state, ref_bytes(m, cache->batch, m->state_elems));
    return MC_BACKEND_OK;
}

enum mc_backend_status mc_ref_cache_import(const struct mc_ref_family *fam, struct mc_model *model,
                                           struct mc_cache *cache, const void *conv_state, const void *recurrent_state,
                                           struct mc_msg *msg)
{
    if (!model || !cache)
        return mc_ref_fail(msg, MC_BACKEND_INVALID, "%s reference: cache_import needs a model and a cache", fam->name);
    const struct mc_ref_model *m = ref_base(model);
    if (m->state_elems > 0 && (!conv_state || !recurrent_state))
        return mc_ref_fail(msg, MC_BACKEND_INVALID,
                           "%s reference: cache_import needs conv_state %s and recurrent_state %s", fam->name,
                           fam->window_shape, fam->state_shape);
    if (!conv_state)
        return mc_ref_fail(msg, MC_BACKEND_INVALID, "%s reference: cache_import needs conv_state %s", fam->name,
                           fam->window_shape);
    memcpy(cache->window, conv_state, ref_bytes(m, cache->batch, m->window_elems));
    if (m->state_elems > 0)
        memcpy(cache->state, recurrent_state, ref_bytes(m, cache->batch, m->state_elems));
    cache->primed = 1;
    return MC_BACKEND_OK;
}

/* ---- forward ----------------------------------------------------------------------------------- */

/* The argument checks of forward, in the order every family makes them. */
static enum mc_backend_status ref_forward_check(const struct mc_ref_family *fam, const struct mc_model *model,
                                                const struct mc_cache *cache, const struct mc_forward_args *args,
                                                struct mc_msg *msg)
{
    const char *fn = fam->name;
    if (!model || !args)
        return mc_ref_fail(msg, MC_BACKEND_INVALID, "%s reference: forward needs a model and arguments", fn);
    if (args->batch < 1 || args->len < 1)
        return mc_ref_fail(msg, MC_BACKEND_INVALID,
                           "%s reference: forward needs batch >= 1 and len >= 1 (got B=%lld L=%lld)", fn,
                           (long long)args->batch, (long long)args->len);
    if (args->batch > INT_MAX / args->len)
        return mc_ref_fail(msg, MC_BACKEND_INVALID, "%s reference: B*L = %lld*%lld exceeds the BLAS limit %d", fn,
                           (long long)args->batch, (long long)args->len, INT_MAX);
    if (!args->x || !args->y)
        return mc_ref_fail(msg, MC_BACKEND_INVALID, "%s reference: forward needs x [B][L][D] and y [B][L][D]", fn);
    if (cache && cache->batch != args->batch)
        return mc_ref_fail(msg, MC_BACKEND_INVALID, "%s reference: cache batch %lld does not match forward batch %lld",
                           fn, (long long)cache->batch, (long long)args->batch);
    return MC_BACKEND_OK;
}

enum mc_backend_status mc_ref_forward(const struct mc_ref_family *fam, struct mc_model *model, struct mc_cache *cache,
                                      const struct mc_forward_args *args, struct mc_msg *msg)
{
    enum mc_backend_status st;
    const struct mc_ref_model *m = ref_base(model);
    void *tmp_window = NULL; /* [B][C][K] when there is no cache */
    void *tmp_state = NULL;  /* [B][state_elems] when there is no cache */
    void *window, *state;

    if ((st = ref_forward_check(fam, model, cache, args, msg)) != MC_BACKEND_OK)
        goto cleanup;
    const int has_state = m->state_elems > 0;
    if (cache) {
        if (!cache->primed) { /* case (a) with a cache: start from zeros, fill it */
            memset(cache->window, 0, ref_bytes(m, cache->batch, m->window_elems));
            if (has_state)
                memset(cache->state, 0, ref_bytes(m, cache->batch, m->state_elems));
        }
        window = cache->window;
        state = cache->state;
    } else {
        tmp_window = calloc((size_t)args->batch * (size_t)m->window_elems, m->elem_bytes);
        if (has_state)
            tmp_state = calloc((size_t)args->batch * (size_t)m->state_elems, m->elem_bytes);
        if (!tmp_window || (has_state && !tmp_state)) {
            st = mc_ref_fail(msg, MC_BACKEND_NOMEM, "%s reference: out of memory for a zero window%s of batch %lld",
                             fam->name, has_state ? " and state" : "", (long long)args->batch);
            goto cleanup;
        }
        window = tmp_window;
        state = tmp_state;
    }

    mc_ref_probes_reset(model);
    if (m->dtype == MC_DTYPE_F64)
        st = fam->forward_f64(model, window, state, args, msg);
    else
        st = fam->forward_f32(model, window, state, args, msg);
    if (st == MC_BACKEND_OK && cache)
        cache->primed = 1;
    if (st != MC_BACKEND_OK)
        mc_ref_probes_reset(model);

cleanup:
    free(tmp_state);
    free(tmp_window);
    return st;
}

/* ---- the packed call --------------------------------------------------------------------------- */

void mc_ref_cache_row(const struct mc_model *model, const struct mc_cache *cache, int64_t row, void **window,
                      void **state)
{
    const struct mc_ref_model *m = (const struct mc_ref_model *)(const void *)model;
    *window = (unsigned char *)cache->window + (size_t)row * (size_t)m->window_elems * m->elem_bytes;
    *state = m->state_elems > 0 ? (unsigned char *)cache->state + (size_t)row * (size_t)m->state_elems * m->elem_bytes
                                : NULL;
}

/* The argument checks of forward_packed (backend.h struct mc_packed_args), before anything is written. */
static enum mc_backend_status ref_packed_check(const struct mc_ref_family *fam, const struct mc_model *model,
                                               const struct mc_cache *pool, const struct mc_packed_args *args,
                                               struct mc_msg *msg)
{
    const char *fn = fam->name;
    if (!model || !pool || !args)
        return mc_ref_fail(msg, MC_BACKEND_INVALID, "%s reference: forward_packed needs a model, a pool and arguments",
                           fn);
    const int64_t n = args->n_seqs;
    if (n < 0 || n > pool->batch)
        return mc_ref_fail(msg, MC_BACKEND_INVALID,
                           "%s reference: forward_packed: n_seqs %lld must be in [0, %lld] (the pool's rows)", fn,
                           (long long)n, (long long)pool->batch);
    if (!args->cu_seqlens || (n > 0 && (!args->slots || !args->has_initial_state)))
        return mc_ref_fail(msg, MC_BACKEND_INVALID,
                           "%s reference: forward_packed needs cu_seqlens [n+1], slots [n] and has_initial_state [n]",
                           fn);
    if (args->cu_seqlens[0] != 0)
        return mc_ref_fail(msg, MC_BACKEND_INVALID, "%s reference: forward_packed: cu_seqlens[0] must be 0 (got %lld)",
                           fn, (long long)args->cu_seqlens[0]);
    for (int64_t i = 0; i < n; i++) {
        const int64_t len = args->cu_seqlens[i + 1] - args->cu_seqlens[i];
        if (args->cu_seqlens[i + 1] < args->cu_seqlens[i])
            return mc_ref_fail(msg, MC_BACKEND_INVALID,
                               "%s reference: forward_packed: cu_seqlens must be non-decreasing (cu_seqlens[%lld] = "
                               "%lld after %lld)",
                               fn, (long long)(i + 1), (long long)args->cu_seqlens[i + 1],
                               (long long)args->cu_seqlens[i]);
        if (len > INT_MAX)
            return mc_ref_fail(msg, MC_BACKEND_INVALID,
                               "%s reference: forward_packed: sequence %lld has %lld tokens, above the BLAS limit %d",
                               fn, (long long)i, (long long)len, INT_MAX);
        if (args->slots[i] < 0 || args->slots[i] >= pool->batch)
            return mc_ref_fail(msg, MC_BACKEND_INVALID,
                               "%s reference: forward_packed: slots[%lld] = %lld is outside the pool [0, %lld)", fn,
                               (long long)i, (long long)args->slots[i], (long long)pool->batch);
        if (args->has_initial_state[i] > 1)
            return mc_ref_fail(msg, MC_BACKEND_INVALID,
                               "%s reference: forward_packed: has_initial_state[%lld] must be 0 or 1 (got %u)", fn,
                               (long long)i, (unsigned)args->has_initial_state[i]);
    }
    /* distinct slots: n <= S, so a quadratic scan only where the pool is small */
    for (int64_t i = 1; i < n; i++)
        for (int64_t j = 0; j < i; j++)
            if (args->slots[i] == args->slots[j])
                return mc_ref_fail(msg, MC_BACKEND_INVALID,
                                   "%s reference: forward_packed: slot %lld is given to sequences %lld and %lld (slots "
                                   "must be distinct)",
                                   fn, (long long)args->slots[i], (long long)j, (long long)i);
    if (args->cu_seqlens[n] > 0 && (!args->x || !args->y))
        return mc_ref_fail(msg, MC_BACKEND_INVALID,
                           "%s reference: forward_packed needs x [T][D] and y [T][D] for T = %lld tokens", fn,
                           (long long)args->cu_seqlens[n]);
    return MC_BACKEND_OK;
}

enum mc_backend_status mc_ref_forward_packed(const struct mc_ref_family *fam, struct mc_model *model,
                                             struct mc_cache *pool, const struct mc_packed_args *args,
                                             struct mc_msg *msg)
{
    enum mc_backend_status st = ref_packed_check(fam, model, pool, args, msg);
    if (st != MC_BACKEND_OK)
        return st;
    const struct mc_ref_model *m = ref_base(model);
    const int64_t n = args->n_seqs, T = args->cu_seqlens[n];
    if (T == 0)
        return MC_BACKEND_OK; /* zero-length sequences change nothing */
    const int has_state = m->state_elems > 0;
    const size_t wbytes = ref_bytes(m, 1, m->window_elems), sbytes = ref_bytes(m, 1, m->state_elems);
    void *window = malloc(wbytes);
    void *state = has_state ? malloc(sbytes) : NULL;
    if (!window || (has_state && !state)) {
        st = mc_ref_fail(msg, MC_BACKEND_NOMEM, "%s reference: out of memory for a pool row", fam->name);
        goto cleanup;
    }
    if (!pool->primed) { /* a pool no call has written is all zeros (forward contract (a)) */
        memset(pool->window, 0, ref_bytes(m, pool->batch, m->window_elems));
        if (has_state)
            memset(pool->state, 0, ref_bytes(m, pool->batch, m->state_elems));
        pool->primed = 1;
    }
    const size_t tok_bytes = (size_t)m->hidden * m->elem_bytes;
    mc_ref_probes_suspend(model, 1); /* the packed call reports no probes */
    for (int64_t i = 0; i < n; i++) {
        const int64_t t0 = args->cu_seqlens[i], len = args->cu_seqlens[i + 1] - t0;
        if (len == 0)
            continue;
        void *slot_window, *slot_state;
        mc_ref_cache_row(model, pool, args->slots[i], &slot_window, &slot_state);
        if (args->has_initial_state[i]) {
            memcpy(window, slot_window, wbytes);
            if (has_state)
                memcpy(state, slot_state, sbytes);
        } else {
            memset(window, 0, wbytes);
            if (has_state)
                memset(state, 0, sbytes);
        }
        const struct mc_forward_args one = {
            .batch = 1,
            .len = len,
            .x = (const unsigned char *)args->x + (size_t)t0 * tok_bytes,
            .mask = NULL,
            .y = (unsigned char *)args->y + (size_t)t0 * tok_bytes,
        };
        st = m->dtype == MC_DTYPE_F64 ? fam->forward_f64(model, window, state, &one, msg)
                                      : fam->forward_f32(model, window, state, &one, msg);
        if (st != MC_BACKEND_OK)
            goto cleanup;
        memcpy(slot_window, window, wbytes);
        if (has_state)
            memcpy(slot_state, state, sbytes);
    }

cleanup:
    free(state);
    free(window);
    mc_ref_probes_suspend(model, 0);
    return st;
}

/* Rows at most this many run as matrix-vector products (ref_common.h; measured with OpenBLAS 0.3.21 at
 * N 3072, K 1024, one thread: one row 1.38 ms against 3.95 for the general product, two 2.51 against
 * 3.28, four 5.73 against 3.76). */
#define REF_GEMV_ROWS 2

#define REF_GEMM_BODY(gemv, gemm)                                                                          \
    do {                                                                                                   \
        if (order == CblasRowMajor && ta == CblasNoTrans && tb == CblasTrans && M <= REF_GEMV_ROWS) {      \
            for (int64_t i = 0; i < M; i++)                                                                \
                gemv(CblasRowMajor, CblasNoTrans, (blasint)N, (blasint)K, alpha, B, (blasint)ldb,          \
                     A + (size_t)i * (size_t)lda, 1, beta, C + (size_t)i * (size_t)ldc, 1);                \
            return;                                                                                        \
        }                                                                                                  \
        gemm((CBLAS_ORDER)order, (CBLAS_TRANSPOSE)ta, (CBLAS_TRANSPOSE)tb, (blasint)M, (blasint)N, (blasint)K, \
             alpha, A, (blasint)lda, B, (blasint)ldb, beta, C, (blasint)ldc);                              \
    } while (0)

void mc_ref_gemm_f32(int order, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                     int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc)
{
    REF_GEMM_BODY(cblas_sgemv, cblas_sgemm);
}

void mc_ref_gemm_f64(int order, int ta, int tb, int64_t M, int64_t N, int64_t K, double alpha, const double *A,
                     int64_t lda, const double *B, int64_t ldb, double beta, double *C, int64_t ldc)
{
    REF_GEMM_BODY(cblas_dgemv, cblas_dgemm);
}
