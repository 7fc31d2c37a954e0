/* refrun.c — see refrun.h. */
#include "golden/refrun.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "family/family.h"
#include "case/case.h"

void mc_refrun_free(struct mc_refrun *r)
{
    free(r->output);
    free(r->conv_state);
    free(r->recurrent_state);
    memset(r, 0, sizeof *r);
}

static double *rounded_copy(const double *src, size_t n, enum mc_dtype dtype)
{
    double *d = malloc((n ? n : 1) * sizeof *d);
    if (d != NULL)
        for (size_t i = 0; i < n; i++)
            d[i] = mc_dtype_round(dtype, src[i]);
    return d;
}

/* The reference model in f64 on g's weights rounded to `dtype`; wdata [n_weights] holds the rounded
 * copies (freed by the caller with free_weights). 0, or -1 with the reason in why. */
static int ref_model(const struct mc_golden *g, const struct mc_backend_ops *ref, enum mc_dtype dtype,
                     struct mc_model **model, double ***wdata_out, char *why, size_t why_len)
{
    struct mc_weight *w = calloc((size_t)g->n_weights, sizeof *w);
    double **wdata = calloc((size_t)g->n_weights, sizeof *wdata);
    struct mc_msg msg = {{0}};
    int rc = -1;
    *model = NULL;
    *wdata_out = wdata;
    if (!w || !wdata) {
        snprintf(why, why_len, "out of memory");
        goto out;
    }
    for (int i = 0; i < g->n_weights; i++) {
        const struct mc_array *a = &g->weights[i].value;
        wdata[i] = rounded_copy(a->data, (size_t)mc_array_elems(a), dtype);
        if (wdata[i] == NULL) {
            snprintf(why, why_len, "out of memory");
            goto out;
        }
        w[i].name = g->weights[i].name;
        w[i].ndim = a->ndim;
        memcpy(w[i].dims, a->dims, sizeof w[i].dims);
        w[i].data = wdata[i];
    }
    struct mc_model_desc desc = {.family = g->config.family,
                                 .dtype = MC_DTYPE_F64,
                                 .config = &g->config.u,
                                 .weights = w,
                                 .n_weights = g->n_weights};
    if (ref->model_create(&desc, model, &msg) != MC_BACKEND_OK) {
        *model = NULL;
        snprintf(why, why_len, "the reference model (f64, %s-rounded weights) could not be created: %s",
                 mc_dtype_name(dtype), msg.text);
        goto out;
    }
    rc = 0;
out:
    free(w);
    return rc;
}

static void free_weights(const struct mc_golden *g, double **wdata)
{
    if (wdata != NULL)
        for (int i = 0; i < g->n_weights; i++)
            free(wdata[i]);
    free(wdata);
}

int mc_refrun_inputs(const struct mc_golden *g, const struct mc_backend_ops *ref, enum mc_dtype dtype,
                     const double *x, int64_t batch, int64_t len, double *y, double *conv, double *state, char *why,
                     size_t why_len)
{
    struct mc_family_shape sh;
    mc_family_shape(&g->config, &sh);
    size_t n = (size_t)(batch * len * sh.hidden);
    double *xr = rounded_copy(x, n, dtype), **wdata = NULL;
    struct mc_model *model = NULL;
    struct mc_cache *cache = NULL;
    struct mc_msg msg = {{0}};
    int rc = -1;
    if (xr == NULL) {
        snprintf(why, why_len, "out of memory");
        goto out;
    }
    if (ref_model(g, ref, dtype, &model, &wdata, why, why_len) != 0)
        goto out;
    struct mc_forward_args a = {.batch = batch, .len = len, .x = xr, .mask = NULL, .y = y};
    if (ref->cache_alloc(model, batch, &cache, &msg) != MC_BACKEND_OK) {
        cache = NULL;
        goto backend;
    }
    if (ref->forward(model, cache, &a, &msg) != MC_BACKEND_OK ||
        ref->cache_export(model, cache, conv, sh.state_ndim > 0 ? state : NULL, &msg) != MC_BACKEND_OK)
        goto backend;
    rc = 0;
    goto out;
backend:
    snprintf(why, why_len, "the f64 reference run on %s-rounded inputs (%lld x %lld tokens) failed: %s",
             mc_dtype_name(dtype), (long long)batch, (long long)len, msg.text);
out:
    if (cache != NULL)
        ref->cache_free(model, cache);
    if (model != NULL)
        ref->model_destroy(model);
    free_weights(g, wdata);
    free(xr);
    return rc;
}

int mc_refrun_build(const struct mc_golden *g, const struct mc_backend_ops *ref, enum mc_dtype dtype,
                    struct mc_refrun *out, char *why, size_t why_len)
{
    struct mc_family_shape sh;
    mc_family_shape(&g->config, &sh);
    int64_t B = g->batch, L = g->len, D = sh.hidden, T = g->n_positions;
    int64_t nconv = B * sh.conv_channels * sh.conv_kernel, nstate = B * mc_family_state_elems(&sh);
    double **wdata = NULL;
    double *x = rounded_copy(g->hidden_states.data, (size_t)(B * L * D), dtype);
    double *xs = malloc((size_t)(B * L * D) * sizeof *xs);
    double *ys = malloc((size_t)(B * L * D) * sizeof *ys);
    uint8_t *ms = g->mask ? malloc((size_t)(B * L)) : NULL;
    struct mc_model *model = NULL;
    struct mc_cache *cache = NULL;
    struct mc_msg msg = {{0}};
    int rc = -1;
    memset(out, 0, sizeof *out);
    out->output = calloc((size_t)(B * L * D), sizeof *out->output);
    out->conv_state = calloc((size_t)(T * nconv), sizeof *out->conv_state);
    out->recurrent_state = nstate ? calloc((size_t)(T * nstate), sizeof *out->recurrent_state) : NULL;
    if (!x || !xs || !ys || (g->mask && !ms) || !out->output || !out->conv_state || (nstate && !out->recurrent_state)) {
        snprintf(why, why_len, "out of memory");
        goto out;
    }
    if (ref_model(g, ref, dtype, &model, &wdata, why, why_len) != 0)
        goto out;
    if (ref->cache_alloc(model, B, &cache, &msg) != MC_BACKEND_OK) {
        cache = NULL;
        goto backend;
    }
    int64_t t = 0;
    for (int64_t i = 0; i < T; i++) {
        int64_t end = g->state_positions[i];
        if (end > t) {
            int64_t len = end - t;
            for (int64_t b = 0; b < B; b++) {
                memcpy(xs + b * len * D, x + (b * L + t) * D, (size_t)(len * D) * sizeof *xs);
                if (ms)
                    memcpy(ms + b * len, g->mask + b * L + t, (size_t)len);
            }
            struct mc_forward_args a = {.batch = B, .len = len, .x = xs, .mask = ms, .y = ys};
            if (ref->forward(model, cache, &a, &msg) != MC_BACKEND_OK)
                goto backend;
            for (int64_t b = 0; b < B; b++)
                memcpy(out->output + (b * L + t) * D, ys + b * len * D, (size_t)(len * D) * sizeof *ys);
            t = end;
        }
        if (ref->cache_export(model, cache, out->conv_state + i * nconv,
                              out->recurrent_state ? out->recurrent_state + i * nstate : NULL,
                              &msg) != MC_BACKEND_OK)
            goto backend;
    }
    rc = 0;
    goto out;
backend:
    snprintf(why, why_len, "the reference run on %s-rounded inputs failed: %s", dtype == MC_DTYPE_BF16 ? "bf16" : "f16",
             msg.text);
out:
    if (cache != NULL)
        ref->cache_free(model, cache);
    if (model != NULL)
        ref->model_destroy(model);
    free_weights(g, wdata);
    free(x);
    free(xs);
    free(ys);
    free(ms);
    if (rc != 0)
        mc_refrun_free(out);
    return rc;
}
