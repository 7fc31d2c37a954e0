/*
 * ref_probe.c — the stage probes of the reference mixers (ref_common.h, backend.h struct mc_probe): a
 * store per model, allocated by the first probe_enable, into which a family's forward copies its
 * intermediates while recording is on. Disabled (the default), a forward pays one NULL test per stage.
 */
#include <stdlib.h>
#include <string.h>

#include "ref_common.h"

/* A family's struct mc_model starts with struct mc_ref_model (ref_common.h). */
static struct mc_ref_model *probe_base(struct mc_model *model)
{
    return (struct mc_ref_model *)(void *)model;
}

void mc_ref_probes_free(struct mc_ref_probes *p)
{
    if (!p)
        return;
    for (int i = 0; i < MC_REF_MAX_PROBES; i++)
        free(p->buf[i]);
    free(p);
}

void mc_ref_probes_reset(const struct mc_model *model)
{
    struct mc_ref_probes *p = ((const struct mc_ref_model *)(const void *)model)->probes;
    if (p) {
        p->count = 0;
        p->failed = 0;
    }
}

void *mc_ref_probe_add(const struct mc_model *model, const char *name, int ndim, const int64_t *dims)
{
    const struct mc_ref_model *m = (const struct mc_ref_model *)(const void *)model;
    struct mc_ref_probes *p = m->probes;
    if (!p || !p->on || p->suspended || p->failed)
        return NULL;
    if (p->count >= MC_REF_MAX_PROBES || ndim < 1 || ndim > MC_MAX_DIMS) {
        p->failed = MC_BACKEND_INTERNAL;
        return NULL;
    }
    size_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= (size_t)dims[i];
    const int k = p->count;
    const size_t bytes = (n ? n : 1) * m->elem_bytes;
    if (p->cap[k] < bytes) {
        void *nb = realloc(p->buf[k], bytes);
        if (!nb) {
            p->failed = MC_BACKEND_NOMEM;
            return NULL;
        }
        p->buf[k] = nb;
        p->cap[k] = bytes;
    }
    memset(p->buf[k], 0, bytes); /* padding tokens stay zero */
    struct mc_probe *pr = &p->probes[k];
    memset(pr, 0, sizeof *pr);
    pr->name = name;
    pr->ndim = ndim;
    memcpy(pr->dims, dims, (size_t)ndim * sizeof *dims);
    pr->data = p->buf[k];
    p->count++;
    return p->buf[k];
}

void mc_ref_probes_suspend(const struct mc_model *model, int suspended)
{
    struct mc_ref_probes *p = ((const struct mc_ref_model *)(const void *)model)->probes;
    if (p) {
        p->suspended = suspended;
        p->count = 0;
    }
}

enum mc_backend_status mc_ref_probe_enable(const struct mc_ref_family *fam, struct mc_model *model, int32_t on,
                                           struct mc_msg *msg)
{
    if (!model)
        return mc_ref_fail(msg, MC_BACKEND_INVALID, "%s reference: probe_enable needs a model", fam->name);
    struct mc_ref_model *m = probe_base(model);
    if (!m->probes) {
        if (!on)
            return MC_BACKEND_OK;
        m->probes = calloc(1, sizeof *m->probes);
        if (!m->probes)
            return mc_ref_fail(msg, MC_BACKEND_NOMEM, "%s reference: out of memory for the probe store", fam->name);
    }
    m->probes->on = on != 0;
    m->probes->count = 0;
    return MC_BACKEND_OK;
}

enum mc_backend_status mc_ref_probe_read(const struct mc_ref_family *fam, struct mc_model *model,
                                         const struct mc_probe **probes, int32_t *count, struct mc_msg *msg)
{
    if (!model || !probes || !count)
        return mc_ref_fail(msg, MC_BACKEND_INVALID, "%s reference: probe_read needs a model and two outputs",
                           fam->name);
    const struct mc_ref_probes *p = probe_base(model)->probes;
    *probes = NULL;
    *count = 0;
    if (!p)
        return MC_BACKEND_OK;
    if (p->failed)
        return mc_ref_fail(msg, (enum mc_backend_status)p->failed, "%s reference: the last forward could not record "
                           "its probes (%s)", fam->name, p->failed == MC_BACKEND_NOMEM ? "out of memory" : "too many");
    *probes = p->probes;
    *count = p->count;
    return MC_BACKEND_OK;
}
