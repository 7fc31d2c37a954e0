/* probe.c — see probe.h. */
#include "probe.h"

#include <stdlib.h>
#include <string.h>

#include "common.h"

int mc_cpu_probes_on(const struct mc_cpu_probes *p)
{
    return p != NULL && p->on;
}

void mc_cpu_probes_reset(struct mc_cpu_probes *p)
{
    if (p) {
        p->count = 0;
        p->failed = MC_BACKEND_OK;
    }
}

void mc_cpu_probes_free(struct mc_cpu_probes *p)
{
    if (!p)
        return;
    for (int i = 0; i < MC_CPU_MAX_PROBES; i++)
        free(p->buf[i]);
    free(p);
}

float *mc_cpu_probe_add(struct mc_cpu_probes *p, const char *name, int ndim, const int64_t *dims)
{
    if (!mc_cpu_probes_on(p) || p->failed != MC_BACKEND_OK)
        return NULL;
    if (p->count >= MC_CPU_MAX_PROBES || ndim < 1 || ndim > MC_MAX_DIMS) {
        p->failed = MC_BACKEND_INTERNAL;
        return NULL;
    }
    size_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= (size_t)dims[i];
    const int k = p->count;
    if (p->cap[k] < (n ? n : 1)) {
        float *nb = realloc(p->buf[k], (n ? n : 1) * sizeof *nb);
        if (!nb) {
            p->failed = MC_BACKEND_NOMEM;
            return NULL;
        }
        p->buf[k] = nb;
        p->cap[k] = n ? n : 1;
    }
    memset(p->buf[k], 0, (n ? n : 1) * sizeof *p->buf[k]); /* padding tokens stay zero */
    struct mc_probe *pr = &p->probes[k];
    memset(pr, 0, sizeof *pr);
    pr->name = name;
    pr->ndim = ndim;
    memcpy(pr->dims, dims, (size_t)ndim * sizeof *dims);
    pr->data = p->buf[k];
    p->count++;
    return p->buf[k];
}

void mc_cpu_probe_rows(float *dst, int64_t n, const float *src, int64_t stride, int64_t rows, const uint8_t *mask)
{
    if (!dst)
        return;
    for (int64_t r = 0; r < rows; r++)
        if (!mask || mask[r])
            memcpy(dst + r * n, src + r * stride, (size_t)n * sizeof *dst);
}

enum mc_backend_status mc_cpu_probe_enable(struct mc_cpu_probes **p, int32_t on, const char *who, struct mc_msg *msg)
{
    if (!p)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID, "%s: probe_enable needs a model", who);
    if (!*p) {
        if (!on)
            return MC_BACKEND_OK;
        *p = calloc(1, sizeof **p);
        if (!*p)
            return mc_cpu_fail(msg, MC_BACKEND_NOMEM, "%s: out of memory for the probe store", who);
    }
    (*p)->on = on != 0;
    mc_cpu_probes_reset(*p);
    return MC_BACKEND_OK;
}

enum mc_backend_status mc_cpu_probe_read(const struct mc_cpu_probes *p, const char *who, const struct mc_probe **probes,
                                         int32_t *count, struct mc_msg *msg)
{
    if (!probes || !count)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID, "%s: probe_read needs two outputs", who);
    *probes = NULL;
    *count = 0;
    if (!p)
        return MC_BACKEND_OK;
    if (p->failed != MC_BACKEND_OK)
        return mc_cpu_fail(msg, p->failed, "%s: the last forward could not record its probes (%s)", who,
                           p->failed == MC_BACKEND_NOMEM ? "out of memory" : "too many");
    *probes = p->probes;
    *count = p->count;
    return MC_BACKEND_OK;
}
