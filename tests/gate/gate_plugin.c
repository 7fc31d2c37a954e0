/*
 * gate_plugin.c — Mamba2 ports broken the way a port under development is, for test_gate. Each wraps
 * the reference (mc_reference_mamba2_ops()) behind its own model and cache handles and gets one thing
 * wrong; the gate must catch each with the right scenario, tensor, verdict and diagnosis.
 *   gate_import_transposed  cache_import reads the conv window [B][C][K] as if it were [B][K][C]
 *   gate_nondet             every other forward call nudges one output element by one ulp
 *   gate_alias_copy         cache_copy makes dst share src's storage instead of copying it
 *   gate_chunk_wrong        honours mc_model_desc.chunk_size and is wrong only at chunk length 5
 *   gate_history_less       a multi-token forward on a primed cache starts from a zero conv window
 *   gate_ownport            correct, on its own device "myport" (no bundled profile covers it)
 * All are f32 only.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mixcheck/backend.h"
#include "reference.h"

enum gate_kind { IMPORT_T, NONDET, ALIAS, CHUNK, HISTORY_LESS, OWNPORT, N_KINDS };

struct mc_model {
    enum gate_kind kind;
    struct mc_model *inner; /* the reference's */
    int64_t D, C, K, state_row; /* hidden size, conv channels, conv width, H*P*N */
    int64_t chunk_size;      /* mc_model_desc.chunk_size */
};

struct mc_cache {
    struct mc_cache *inner; /* the reference's; shared with src after an aliasing copy */
    int owned;              /* inner is this handle's to free */
    int64_t batch;
    int primed;             /* a forward or an import wrote it */
};

static const struct mc_backend_ops *ref(void)
{
    return mc_reference_mamba2_ops();
}

static enum mc_backend_status fail(struct mc_msg *msg, enum mc_backend_status st, const char *text)
{
    strncpy(msg->text, text, sizeof msg->text - 1);
    msg->text[sizeof msg->text - 1] = '\0';
    return st;
}

static enum mc_backend_status create(enum gate_kind kind, const struct mc_model_desc *d, struct mc_model **out,
                                     struct mc_msg *msg)
{
    if (d->family != MC_FAMILY_MAMBA2 || d->config == NULL)
        return fail(msg, MC_BACKEND_INVALID, "gate: not a Mamba2 model");
    struct mc_model *m = calloc(1, sizeof *m);
    if (m == NULL)
        return fail(msg, MC_BACKEND_NOMEM, "gate: out of memory");
    const struct mc_mamba2_config *cfg = d->config;
    m->kind = kind;
    m->D = cfg->hidden_size;
    m->C = cfg->num_heads * cfg->head_dim + 2 * cfg->n_groups * cfg->state_size;
    m->K = cfg->conv_kernel;
    m->state_row = cfg->num_heads * cfg->head_dim * cfg->state_size;
    m->chunk_size = d->chunk_size;
    enum mc_backend_status st = ref()->model_create(d, &m->inner, msg);
    if (st != MC_BACKEND_OK) {
        free(m);
        return st;
    }
    *out = m;
    return MC_BACKEND_OK;
}

#define CREATE(K, fn)                                                                                                \
    static enum mc_backend_status fn(const struct mc_model_desc *d, struct mc_model **m, struct mc_msg *msg)       \
    {                                                                                                                \
        return create(K, d, m, msg);                                                                               \
    }
CREATE(IMPORT_T, create_import_t)
CREATE(NONDET, create_nondet)
CREATE(ALIAS, create_alias)
CREATE(CHUNK, create_chunk)
CREATE(HISTORY_LESS, create_history_less)
CREATE(OWNPORT, create_ownport)

static void model_destroy(struct mc_model *m)
{
    if (m == NULL)
        return;
    ref()->model_destroy(m->inner);
    free(m);
}

static enum mc_backend_status cache_alloc(struct mc_model *m, int64_t batch, struct mc_cache **out, struct mc_msg *msg)
{
    struct mc_cache *c = calloc(1, sizeof *c);
    if (c == NULL)
        return fail(msg, MC_BACKEND_NOMEM, "gate: out of memory");
    enum mc_backend_status st = ref()->cache_alloc(m->inner, batch, &c->inner, msg);
    if (st != MC_BACKEND_OK) {
        free(c);
        return st;
    }
    c->owned = 1;
    c->batch = batch;
    *out = c;
    return MC_BACKEND_OK;
}

static void cache_free(struct mc_model *m, struct mc_cache *c)
{
    if (c == NULL)
        return;
    if (c->owned)
        ref()->cache_free(m->inner, c->inner);
    free(c);
}

static enum mc_backend_status cache_copy(struct mc_model *m, struct mc_cache *dst, const struct mc_cache *src,
                                         struct mc_msg *msg)
{
    dst->primed = src->primed;
    if (m->kind != ALIAS)
        return ref()->cache_copy(m->inner, dst->inner, src->inner, msg);
    /* the bug: the copy is a second handle on the same storage */
    if (dst->owned)
        ref()->cache_free(m->inner, dst->inner);
    dst->inner = src->inner;
    dst->owned = 0;
    return MC_BACKEND_OK;
}

static enum mc_backend_status cache_export(struct mc_model *m, const struct mc_cache *c, void *conv, void *state,
                                           struct mc_msg *msg)
{
    return ref()->cache_export(m->inner, c->inner, conv, state, msg);
}

static enum mc_backend_status cache_import(struct mc_model *m, struct mc_cache *c, const void *conv,
                                           const void *state, struct mc_msg *msg)
{
    if (m->kind != IMPORT_T) {
        enum mc_backend_status st = ref()->cache_import(m->inner, c->inner, conv, state, msg);
        c->primed |= st == MC_BACKEND_OK;
        return st;
    }
    /* the bug: element (b, k, c) is read at [b][k][c], as if the window were stored tap-major */
    size_t n = (size_t)(c->batch * m->C * m->K);
    float *fixed = malloc(n * sizeof *fixed);
    if (fixed == NULL)
        return fail(msg, MC_BACKEND_NOMEM, "gate: out of memory");
    const float *in = conv;
    for (int64_t b = 0; b < c->batch; b++)
        for (int64_t ch = 0; ch < m->C; ch++)
            for (int64_t k = 0; k < m->K; k++)
                fixed[(b * m->C + ch) * m->K + k] = in[(b * m->K + k) * m->C + ch];
    enum mc_backend_status st = ref()->cache_import(m->inner, c->inner, fixed, state, msg);
    free(fixed);
    c->primed |= st == MC_BACKEND_OK;
    return st;
}

/* The history-less continuation: forgets the cached conv window (the state is kept). */
static enum mc_backend_status forget_window(struct mc_model *m, struct mc_cache *c, struct mc_msg *msg)
{
    float *conv = calloc((size_t)(c->batch * m->C * m->K), sizeof *conv);
    float *state = calloc((size_t)(c->batch * m->state_row), sizeof *state);
    enum mc_backend_status st = MC_BACKEND_NOMEM;
    if (conv != NULL && state != NULL) {
        st = ref()->cache_export(m->inner, c->inner, conv, state, msg);
        if (st == MC_BACKEND_OK) {
            memset(conv, 0, (size_t)(c->batch * m->C * m->K) * sizeof *conv);
            st = ref()->cache_import(m->inner, c->inner, conv, state, msg);
        }
    } else {
        fail(msg, st, "gate: out of memory");
    }
    free(conv);
    free(state);
    return st;
}

static enum mc_backend_status forward(struct mc_model *m, struct mc_cache *c, const struct mc_forward_args *a,
                                      struct mc_msg *msg)
{
    static unsigned long calls; /* NONDET: which call this is */
    enum mc_backend_status st;
    if (m->kind == HISTORY_LESS && c != NULL && c->primed && a->len > 1 &&
        (st = forget_window(m, c, msg)) != MC_BACKEND_OK)
        return st;
    st = ref()->forward(m->inner, c ? c->inner : NULL, a, msg);
    if (st != MC_BACKEND_OK)
        return st;
    if (c != NULL)
        c->primed = 1;
    float *y = a->y;
    if (m->kind == NONDET && ++calls % 2 == 0)
        y[0] = nextafterf(y[0], INFINITY); /* token 0 of row 0 */
    if (m->kind == CHUNK && m->chunk_size == 5) /* the bug: only at this internal chunk length */
        for (int64_t i = 0; i < a->batch * a->len * m->D; i++)
            y[i] *= 1.0f + 1e-3f;
    return MC_BACKEND_OK;
}

__attribute__((visibility("default"))) const struct mc_backend_ops *const *
mixcheck_plugin_backends(uint32_t *count, uint32_t *abi_version)
{
    static struct mc_backend_ops ops[N_KINDS];
    static const struct mc_backend_ops *all[N_KINDS];
    static const char *const names[N_KINDS] = {"gate_import_transposed", "gate_nondet",       "gate_alias_copy",
                                               "gate_chunk_wrong",       "gate_history_less", "gate_ownport"};
    enum mc_backend_status (*creates[N_KINDS])(const struct mc_model_desc *, struct mc_model **, struct mc_msg *) = {
        create_import_t, create_nondet, create_alias, create_chunk, create_history_less, create_ownport};
    for (int k = 0; k < N_KINDS; k++) {
        ops[k] = (struct mc_backend_ops){.abi_version = MIXCHECK_ABI_VERSION,
                                         .struct_size = sizeof(struct mc_backend_ops),
                                         .name = names[k],
                                         .device = k == OWNPORT ? "myport" : "cpu",
                                         .family = MC_FAMILY_MAMBA2,
                                         .dtypes = MC_DTYPE_BIT(MC_DTYPE_F32),
                                         .caps = k == CHUNK ? MC_CAP_CHUNK_SIZE : 0,
                                         .model_create = creates[k],
                                         .model_destroy = model_destroy,
                                         .cache_alloc = cache_alloc,
                                         .cache_copy = cache_copy,
                                         .cache_free = cache_free,
                                         .cache_export = cache_export,
                                         .cache_import = cache_import,
                                         .forward = forward};
        all[k] = &ops[k];
    }
    *count = N_KINDS;
    *abi_version = MIXCHECK_ABI_VERSION;
    return all;
}
