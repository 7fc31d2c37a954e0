/*
 * drifty_plugin.c — a plugin backend "drifty": the reference Mamba2 mixer at f32 whose D skip term
 * (y += D * x, reference/mamba2_impl.inc) is scaled by MC_DRIFTY_SCALE. Built twice: scale 1 (the
 * baseline) and 1 + 1e-5 (a change that still passes every check but moves its numbers), so that a
 * run of each under the same backend name exercises --baseline/--max-drift and `mixcheck diff`.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mixcheck/backend.h"
#include "reference.h"

#ifndef MC_DRIFTY_SCALE
#error "MC_DRIFTY_SCALE must be defined"
#endif

static struct mc_backend_ops ops;

/* The reference model over a copy of the weights whose "D" is scaled. */
static enum mc_backend_status create(const struct mc_model_desc *desc, struct mc_model **model, struct mc_msg *msg)
{
    const struct mc_backend_ops *ref = mc_reference_mamba2_ops();
    struct mc_weight *w = calloc((size_t)desc->n_weights + 1, sizeof *w);
    void *scaled = NULL;
    if (w == NULL)
        return ref->model_create(desc, model, msg); /* out of memory: let the reference report it */
    for (int32_t i = 0; i < desc->n_weights; i++) {
        w[i] = desc->weights[i];
        if (strcmp(w[i].name, "D") != 0 || desc->dtype != MC_DTYPE_F32 || scaled)
            continue;
        int64_t n = 1;
        for (int32_t d = 0; d < w[i].ndim; d++)
            n *= w[i].dims[d];
        float *s = malloc((size_t)n * sizeof *s);
        if (s == NULL)
            continue;
        const float *src = w[i].data;
        for (int64_t k = 0; k < n; k++)
            s[k] = (float)((double)src[k] * (MC_DRIFTY_SCALE));
        w[i].data = s;
        scaled = s;
    }
    struct mc_model_desc d = *desc;
    d.weights = w;
    enum mc_backend_status st = ref->model_create(&d, model, msg); /* the reference copies its weights */
    free(scaled);
    free(w);
    return st;
}

__attribute__((visibility("default"))) const struct mc_backend_ops *const *
mixcheck_plugin_backends(uint32_t *count, uint32_t *abi_version)
{
    static const struct mc_backend_ops *all[1];
    ops = *mc_reference_mamba2_ops();
    ops.name = "drifty";
    ops.dtypes = MC_DTYPE_BIT(MC_DTYPE_F32);
    ops.model_create = create;
    all[0] = &ops;
    *count = 1;
    *abi_version = MIXCHECK_ABI_VERSION;
    return all;
}
