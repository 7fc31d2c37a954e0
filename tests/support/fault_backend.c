/* fault_backend.c — see fault_backend.h. */
#include "fault_backend.h"

#include <stdlib.h>
#include <string.h>

#include "family/family.h"

static const struct mc_backend_ops *g_inner;
static enum fault_kind g_kind;

struct fault_model {
    struct mc_model *inner;
    size_t esz;                       /* export element size: 8 for f64 models, else 4 */
    int64_t conv_elems, state_elems;  /* per batch row */
};

struct fault_cache {
    struct mc_cache *inner;
    int64_t batch;
    int primed;
};

static enum mc_backend_status f_create(const struct mc_model_desc *d, struct mc_model **out, struct mc_msg *msg)
{
    struct fault_model *m = calloc(1, sizeof *m);
    if (m == NULL)
        return MC_BACKEND_NOMEM;
    enum mc_backend_status st = g_inner->model_create(d, &m->inner, msg);
    if (st != MC_BACKEND_OK) {
        free(m);
        return st;
    }
    struct mc_family_config cfg = {.family = d->family};
    size_t cfg_size = d->family == MC_FAMILY_MAMBA2   ? sizeof cfg.u.mamba2
                      : d->family == MC_FAMILY_MAMBA1 ? sizeof cfg.u.mamba1
                      : d->family == MC_FAMILY_GDN    ? sizeof cfg.u.gdn
                      : d->family == MC_FAMILY_ATTENTION ? sizeof cfg.u.attention
                                                      : sizeof cfg.u.shortconv;
    memcpy(&cfg.u, d->config, cfg_size);
    struct mc_family_shape sh;
    mc_family_shape(&cfg, &sh);
    m->esz = d->dtype == MC_DTYPE_F64 ? 8 : 4;
    m->conv_elems = sh.conv_channels * sh.conv_kernel;
    m->state_elems = mc_family_state_elems(&sh);
    *out = (struct mc_model *)m;
    return MC_BACKEND_OK;
}

static void f_destroy(struct mc_model *model)
{
    struct fault_model *m = (struct fault_model *)model;
    g_inner->model_destroy(m->inner);
    free(m);
}

static enum mc_backend_status f_alloc(struct mc_model *model, int64_t batch, struct mc_cache **out,
                                      struct mc_msg *msg)
{
    struct fault_model *m = (struct fault_model *)model;
    struct fault_cache *c = calloc(1, sizeof *c);
    if (c == NULL)
        return MC_BACKEND_NOMEM;
    enum mc_backend_status st = g_inner->cache_alloc(m->inner, batch, &c->inner, msg);
    if (st != MC_BACKEND_OK) {
        free(c);
        return st;
    }
    c->batch = batch;
    *out = (struct mc_cache *)c;
    return MC_BACKEND_OK;
}

static enum mc_backend_status f_copy(struct mc_model *model, struct mc_cache *dst, const struct mc_cache *src,
                                     struct mc_msg *msg)
{
    struct fault_cache *d = (struct fault_cache *)dst;
    const struct fault_cache *s = (const struct fault_cache *)src;
    d->primed = s->primed;
    return g_inner->cache_copy(((struct fault_model *)model)->inner, d->inner, s->inner, msg);
}

static void f_free(struct mc_model *model, struct mc_cache *cache)
{
    struct fault_cache *c = (struct fault_cache *)cache;
    g_inner->cache_free(((struct fault_model *)model)->inner, c->inner);
    free(c);
}

static enum mc_backend_status f_export(struct mc_model *model, const struct mc_cache *cache, void *conv, void *state,
                                       struct mc_msg *msg)
{
    return g_inner->cache_export(((struct fault_model *)model)->inner, ((const struct fault_cache *)cache)->inner,
                                 conv, state, msg);
}

static enum mc_backend_status f_import(struct mc_model *model, struct mc_cache *cache, const void *conv,
                                       const void *state, struct mc_msg *msg)
{
    ((struct fault_cache *)cache)->primed = 1;
    return g_inner->cache_import(((struct fault_model *)model)->inner, ((struct fault_cache *)cache)->inner, conv,
                                 state, msg);
}

/* Zeroes the part of the cache the fault drops: export, clear, import. */
static enum mc_backend_status inject(struct fault_model *m, struct fault_cache *c, struct mc_msg *msg)
{
    void *conv = calloc((size_t)(c->batch * m->conv_elems), m->esz);
    void *state = m->state_elems ? calloc((size_t)(c->batch * m->state_elems), m->esz) : NULL;
    enum mc_backend_status st = MC_BACKEND_NOMEM;
    if (conv != NULL && (m->state_elems == 0 || state != NULL)) {
        st = g_inner->cache_export(m->inner, c->inner, conv, state, msg);
        if (st == MC_BACKEND_OK) {
            if (g_kind == FAULT_DROP_CONV)
                memset(conv, 0, (size_t)(c->batch * m->conv_elems) * m->esz);
            else if (state != NULL)
                memset(state, 0, (size_t)(c->batch * m->state_elems) * m->esz);
            st = g_inner->cache_import(m->inner, c->inner, conv, state, msg);
        }
    }
    free(conv);
    free(state);
    return st;
}

static enum mc_backend_status f_forward(struct mc_model *model, struct mc_cache *cache,
                                        const struct mc_forward_args *a, struct mc_msg *msg)
{
    struct fault_model *m = (struct fault_model *)model;
    struct fault_cache *c = (struct fault_cache *)cache;
    if (c != NULL && c->primed && a->len > 1) {
        enum mc_backend_status st = inject(m, c, msg);
        if (st != MC_BACKEND_OK)
            return st;
    }
    enum mc_backend_status st = g_inner->forward(m->inner, c ? c->inner : NULL, a, msg);
    if (st == MC_BACKEND_OK && c != NULL)
        c->primed = 1;
    return st;
}

/* Stage probes are the inner backend's (the fault sits outside the mixer's math). */
static enum mc_backend_status f_probe_enable(struct mc_model *model, int32_t on, struct mc_msg *msg)
{
    return g_inner->probe_enable(((struct fault_model *)model)->inner, on, msg);
}

static enum mc_backend_status f_probe_read(struct mc_model *model, const struct mc_probe **probes, int32_t *count,
                                           struct mc_msg *msg)
{
    return g_inner->probe_read(((struct fault_model *)model)->inner, probes, count, msg);
}

struct mc_backend_ops fault_backend(const struct mc_backend_ops *inner, enum fault_kind kind)
{
    g_inner = inner;
    g_kind = kind;
    struct mc_backend_ops o = *inner;
    o.model_create = f_create;
    o.model_destroy = f_destroy;
    o.cache_alloc = f_alloc;
    o.cache_copy = f_copy;
    o.cache_free = f_free;
    o.cache_export = f_export;
    o.cache_import = f_import;
    o.forward = f_forward;
    /* the wrapper has models and caches of its own: the inner packed call cannot take them */
    o.forward_packed = NULL;
    o.caps &= ~MC_CAP_PACKED;
    o.probe_enable = inner->probe_enable ? f_probe_enable : NULL;
    o.probe_read = inner->probe_read ? f_probe_read : NULL;
    return o;
}
