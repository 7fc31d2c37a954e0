/*
 * det_plugin.c — Mamba2 backends for test_determinism_calls: the reference, declaring MC_CAP_THREADS,
 * behind a wrapper model that remembers the thread count it was created with and counts its packed
 * calls; each is correct to within one ulp, so only the determinism scenario can tell them apart:
 *   det_ok           the reference, unchanged (every call bit for bit the same)
 *   det_packed_flip  every second forward_packed of a model flips the last bit of its last output element
 *   det_thread_flip  a forward of a model created with threads == 2 flips the last bit of its last output
 *                    element (one thread and any other count give the reference's bits)
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mixcheck/backend.h"
#include "reference.h"

enum kind { OK, PACKED_FLIP, THREAD_FLIP, N_KINDS };

/* The model handed to the harness: the reference's, and what the misbehaviours need. */
struct wrapped {
    struct mc_model *inner;
    int32_t threads;      /* mc_model_desc.threads it was created with */
    int64_t packed_calls; /* forward_packed calls so far */
    enum mc_dtype dtype;
    int64_t hidden;
};

static const struct mc_backend_ops *ref(void)
{
    return mc_reference_mamba2_ops();
}

static struct mc_model *inner(struct mc_model *m)
{
    return ((struct wrapped *)(void *)m)->inner;
}

/* Flips the last bit of the last of n elements of dtype `dt` at y. */
static void flip_last(void *y, int64_t n, enum mc_dtype dt)
{
    if (n <= 0)
        return;
    if (dt == MC_DTYPE_F64) {
        uint64_t b;
        memcpy(&b, (char *)y + (n - 1) * 8, 8);
        b ^= 1u;
        memcpy((char *)y + (n - 1) * 8, &b, 8);
    } else {
        uint32_t b;
        memcpy(&b, (char *)y + (n - 1) * 4, 4);
        b ^= 1u;
        memcpy((char *)y + (n - 1) * 4, &b, 4);
    }
}

static enum mc_backend_status create(const struct mc_model_desc *d, struct mc_model **m, struct mc_msg *msg)
{
    struct wrapped *w = calloc(1, sizeof *w);
    if (w == NULL)
        return MC_BACKEND_NOMEM;
    struct mc_model_desc own = *d;
    own.threads = 0; /* the reference takes none */
    enum mc_backend_status st = ref()->model_create(&own, &w->inner, msg);
    if (st != MC_BACKEND_OK) {
        free(w);
        return st;
    }
    w->threads = d->threads;
    w->dtype = d->dtype;
    w->hidden = ((const struct mc_mamba2_config *)d->config)->hidden_size;
    *m = (struct mc_model *)(void *)w;
    return MC_BACKEND_OK;
}

static void destroy(struct mc_model *m)
{
    if (m == NULL)
        return;
    ref()->model_destroy(inner(m));
    free(m);
}

static enum mc_backend_status cache_alloc(struct mc_model *m, int64_t batch, struct mc_cache **c, struct mc_msg *msg)
{
    return ref()->cache_alloc(inner(m), batch, c, msg);
}

static enum mc_backend_status cache_copy(struct mc_model *m, struct mc_cache *dst, const struct mc_cache *src,
                                         struct mc_msg *msg)
{
    return ref()->cache_copy(inner(m), dst, src, msg);
}

static void cache_free(struct mc_model *m, struct mc_cache *c)
{
    ref()->cache_free(inner(m), c);
}

static enum mc_backend_status cache_export(struct mc_model *m, const struct mc_cache *c, void *conv, void *state,
                                           struct mc_msg *msg)
{
    return ref()->cache_export(inner(m), c, conv, state, msg);
}

static enum mc_backend_status cache_import(struct mc_model *m, struct mc_cache *c, const void *conv,
                                           const void *state, struct mc_msg *msg)
{
    return ref()->cache_import(inner(m), c, conv, state, msg);
}

static enum mc_backend_status forward(enum kind k, struct mc_model *m, struct mc_cache *c,
                                      const struct mc_forward_args *a, struct mc_msg *msg)
{
    struct wrapped *w = (struct wrapped *)(void *)m;
    enum mc_backend_status st = ref()->forward(w->inner, c, a, msg);
    if (st == MC_BACKEND_OK && k == THREAD_FLIP && w->threads == 2)
        flip_last(a->y, a->batch * a->len * w->hidden, w->dtype);
    return st;
}

static enum mc_backend_status forward_packed(enum kind k, struct mc_model *m, struct mc_cache *pool,
                                             const struct mc_packed_args *a, struct mc_msg *msg)
{
    struct wrapped *w = (struct wrapped *)(void *)m;
    enum mc_backend_status st = ref()->forward_packed(w->inner, pool, a, msg);
    int64_t T = a->n_seqs > 0 ? a->cu_seqlens[a->n_seqs] : 0;
    if (st == MC_BACKEND_OK && ((k == PACKED_FLIP && ++w->packed_calls % 2 == 0) ||
                                (k == THREAD_FLIP && w->threads == 2)))
        flip_last(a->y, T * w->hidden, w->dtype);
    return st;
}

#define ENTRIES(K, name)                                                                                              \
    static enum mc_backend_status name##_fwd(struct mc_model *m, struct mc_cache *c, const struct mc_forward_args *a, \
                                             struct mc_msg *msg)                                                      \
    {                                                                                                                 \
        return forward(K, m, c, a, msg);                                                                              \
    }                                                                                                                 \
    static enum mc_backend_status name##_packed(struct mc_model *m, struct mc_cache *p,                               \
                                                const struct mc_packed_args *a, struct mc_msg *msg)                   \
    {                                                                                                                 \
        return forward_packed(K, m, p, a, msg);                                                                       \
    }
ENTRIES(OK, ok)
ENTRIES(PACKED_FLIP, pflip)
ENTRIES(THREAD_FLIP, tflip)

__attribute__((visibility("default"))) const struct mc_backend_ops *const *
mixcheck_plugin_backends(uint32_t *count, uint32_t *abi_version)
{
    static struct mc_backend_ops ops[N_KINDS];
    static const struct mc_backend_ops *all[N_KINDS];
    static const char *names[N_KINDS] = {"det_ok", "det_packed_flip", "det_thread_flip"};
    enum mc_backend_status (*fwd[N_KINDS])(struct mc_model *, struct mc_cache *, const struct mc_forward_args *,
                                           struct mc_msg *) = {ok_fwd, pflip_fwd, tflip_fwd};
    enum mc_backend_status (*packed[N_KINDS])(struct mc_model *, struct mc_cache *, const struct mc_packed_args *,
                                              struct mc_msg *) = {ok_packed, pflip_packed, tflip_packed};
    for (int k = 0; k < N_KINDS; k++) {
        ops[k] = *ref();
        ops[k].name = names[k];
        ops[k].dtypes = MC_DTYPE_BIT(MC_DTYPE_F32);
        ops[k].caps = MC_CAP_THREADS | MC_CAP_PACKED;
        ops[k].model_create = create;
        ops[k].model_destroy = destroy;
        ops[k].cache_alloc = cache_alloc;
        ops[k].cache_copy = cache_copy;
        ops[k].cache_free = cache_free;
        ops[k].cache_export = cache_export;
        ops[k].cache_import = cache_import;
        ops[k].forward = fwd[k];
        ops[k].forward_packed = packed[k];
        ops[k].probe_enable = NULL; /* the wrapper model is not the reference's */
        ops[k].probe_read = NULL;
        all[k] = &ops[k];
    }
    *count = N_KINDS;
    *abi_version = MIXCHECK_ABI_VERSION;
    return all;
}
