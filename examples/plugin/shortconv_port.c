/*
 * shortconv_port.c — an example mixcheck plugin: a port of the LFM2 ShortConv mixer (docs/semantics.md §5)
 * written against nothing but <mixcheck/backend.h>. It is the template a port author copies:
 *
 *   1. fill in a `struct mc_backend_ops` (name, device, family, dtypes, the eight functions);
 *   2. export `mixcheck_plugin_backends`, returning the ops structs and MIXCHECK_ABI_VERSION;
 *   3. build a shared library and run `mixcheck run cases/ --plugin ./libmixcheck_example.so
 *      --backend example`: every ShortConv case runs through this code;
 *   4. optionally, stage probes (MC_CAP_PROBES, probe_enable / probe_read): the intermediates of the
 *      last forward, here ShortConv's conv_in (B*x) and conv_out, so that a failing check names the
 *      first stage that diverged (docs/ports.md §7). They cost one test per token when off.
 *
 * The math: BCx = in_proj(u) split into B, C, x (D channels each); the conv window caches the last
 * K values of B*x per channel; y = C * (conv(B*x) + conv.bias); out = out_proj(y). No activation.
 * Padding tokens (mask 0) leave the window untouched and output out_proj.bias.
 * Plain f32 loops: clarity over speed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mixcheck/backend.h"

#define EXPORT __attribute__((visibility("default")))

struct mc_model {
    int64_t D, K;
    float *in_w;  /* [3D][D] */
    float *in_b;  /* [3D] or NULL */
    float *conv_w; /* [D][K] */
    float *conv_b; /* [D] or NULL */
    float *out_w; /* [D][D] */
    float *out_b; /* [D] or NULL */
    /* stage probes of the last forward (probe_enable / probe_read) */
    int probing;
    float *probe_data[2]; /* conv_in, conv_out: [B][L][D] each */
    size_t probe_cap;     /* floats allocated in each */
    struct mc_probe probes[2];
    int32_t n_probes;
};

struct mc_cache {
    int64_t batch;
    float *window; /* [batch][D][K], oldest first */
};

static enum mc_backend_status fail(struct mc_msg *msg, enum mc_backend_status st, const char *text)
{
    snprintf(msg->text, sizeof msg->text, "%s", text);
    return st;
}

/* Finds weight `name` and checks its element count; copies it into a fresh float array. */
static float *take(const struct mc_model_desc *d, const char *name, int64_t elems, struct mc_msg *msg)
{
    for (int i = 0; i < d->n_weights; i++) {
        const struct mc_weight *w = &d->weights[i];
        if (strcmp(w->name, name) != 0)
            continue;
        int64_t n = 1;
        for (int k = 0; k < w->ndim; k++)
            n *= w->dims[k];
        if (n != elems) {
            snprintf(msg->text, sizeof msg->text, "weight '%s' has %lld elements, expected %lld", name, (long long)n,
                     (long long)elems);
            return NULL;
        }
        float *copy = malloc((size_t)n * sizeof *copy);
        if (copy == NULL)
            snprintf(msg->text, sizeof msg->text, "out of memory");
        else
            memcpy(copy, w->data, (size_t)n * sizeof *copy);
        return copy;
    }
    snprintf(msg->text, sizeof msg->text, "missing weight '%s'", name);
    return NULL;
}

static void model_destroy(struct mc_model *m)
{
    if (m == NULL)
        return;
    free(m->in_w);
    free(m->in_b);
    free(m->conv_w);
    free(m->conv_b);
    free(m->out_w);
    free(m->out_b);
    free(m->probe_data[0]);
    free(m->probe_data[1]);
    free(m);
}

static enum mc_backend_status model_create(const struct mc_model_desc *d, struct mc_model **out, struct mc_msg *msg)
{
    if (d->family != MC_FAMILY_SHORTCONV)
        return fail(msg, MC_BACKEND_INVALID, "this plugin implements ShortConv only");
    if (d->dtype != MC_DTYPE_F32)
        return fail(msg, MC_BACKEND_UNSUPPORTED, "this plugin computes in f32 only");
    const struct mc_shortconv_config *c = d->config;
    struct mc_model *m = calloc(1, sizeof *m);
    if (m == NULL)
        return fail(msg, MC_BACKEND_NOMEM, "out of memory");
    m->D = c->hidden_size;
    m->K = c->conv_kernel;
    int64_t D = m->D, K = m->K;
    m->in_w = take(d, "in_proj.weight", 3 * D * D, msg);
    m->conv_w = take(d, "conv.weight", D * K, msg);
    m->out_w = take(d, "out_proj.weight", D * D, msg);
    int ok = m->in_w && m->conv_w && m->out_w;
    if (ok && c->conv_bias) {
        m->in_b = take(d, "in_proj.bias", 3 * D, msg);
        m->conv_b = take(d, "conv.bias", D, msg);
        m->out_b = take(d, "out_proj.bias", D, msg);
        ok = m->in_b && m->conv_b && m->out_b;
    }
    if (!ok) {
        model_destroy(m);
        return MC_BACKEND_INVALID;
    }
    *out = m;
    return MC_BACKEND_OK;
}

static enum mc_backend_status cache_alloc(struct mc_model *m, int64_t batch, struct mc_cache **out,
                                          struct mc_msg *msg)
{
    struct mc_cache *c = calloc(1, sizeof *c);
    if (c != NULL)
        c->window = calloc((size_t)(batch * m->D * m->K), sizeof *c->window);
    if (c == NULL || c->window == NULL) {
        free(c);
        return fail(msg, MC_BACKEND_NOMEM, "out of memory");
    }
    c->batch = batch;
    *out = c;
    return MC_BACKEND_OK;
}

static void cache_free(struct mc_model *m, struct mc_cache *c)
{
    (void)m;
    if (c != NULL)
        free(c->window);
    free(c);
}

static enum mc_backend_status cache_copy(struct mc_model *m, struct mc_cache *dst, const struct mc_cache *src,
                                         struct mc_msg *msg)
{
    if (dst->batch != src->batch)
        return fail(msg, MC_BACKEND_INVALID, "cache_copy: batch sizes differ");
    memcpy(dst->window, src->window, (size_t)(src->batch * m->D * m->K) * sizeof *dst->window);
    return MC_BACKEND_OK;
}

/* ShortConv has no recurrent state: only the window travels. */
static enum mc_backend_status cache_export(struct mc_model *m, const struct mc_cache *c, void *conv, void *state,
                                           struct mc_msg *msg)
{
    (void)state;
    (void)msg;
    memcpy(conv, c->window, (size_t)(c->batch * m->D * m->K) * sizeof *c->window);
    return MC_BACKEND_OK;
}

static enum mc_backend_status cache_import(struct mc_model *m, struct mc_cache *c, const void *conv,
                                           const void *state, struct mc_msg *msg)
{
    (void)state;
    (void)msg;
    memcpy(c->window, conv, (size_t)(c->batch * m->D * m->K) * sizeof *c->window);
    return MC_BACKEND_OK;
}

/* y[o] = b[o] + sum_i W[o][i] x[i] */
static void linear(const float *W, const float *b, const float *x, int64_t in, int64_t out, float *y)
{
    for (int64_t o = 0; o < out; o++) {
        float acc = b ? b[o] : 0.0f;
        for (int64_t i = 0; i < in; i++)
            acc += W[o * in + i] * x[i];
        y[o] = acc;
    }
}

static enum mc_backend_status forward(struct mc_model *m, struct mc_cache *cache, const struct mc_forward_args *a,
                                      struct mc_msg *msg)
{
    int64_t D = m->D, K = m->K;
    if (cache != NULL && cache->batch != a->batch)
        return fail(msg, MC_BACKEND_INVALID, "forward: batch differs from the cache's");
    float *bcx = malloc((size_t)(3 * D) * sizeof *bcx);
    float *y = malloc((size_t)D * sizeof *y);
    /* without a cache, a zero window of our own */
    float *scratch = cache ? NULL : calloc((size_t)(a->batch * D * K), sizeof *scratch);
    if (bcx == NULL || y == NULL || (cache == NULL && scratch == NULL)) {
        free(bcx);
        free(y);
        free(scratch);
        return fail(msg, MC_BACKEND_NOMEM, "out of memory");
    }
    float *windows = cache ? cache->window : scratch;
    const float *x = a->x;
    float *out = a->y;
    /* probes: [B][L][D] buffers for conv_in and conv_out, zeros at padding tokens */
    float *p_in = NULL, *p_out = NULL;
    m->n_probes = 0;
    if (m->probing) {
        size_t n = (size_t)(a->batch * a->len * D);
        if (n > m->probe_cap) {
            for (int i = 0; i < 2; i++) {
                float *nb = realloc(m->probe_data[i], n * sizeof *nb);
                if (nb == NULL) {
                    free(bcx);
                    free(y);
                    free(scratch);
                    return fail(msg, MC_BACKEND_NOMEM, "out of memory for the probes");
                }
                m->probe_data[i] = nb;
            }
            m->probe_cap = n;
        }
        p_in = m->probe_data[0];
        p_out = m->probe_data[1];
        memset(p_in, 0, n * sizeof *p_in);
        memset(p_out, 0, n * sizeof *p_out);
        const char *names[2] = {"conv_in", "conv_out"};
        for (int i = 0; i < 2; i++)
            m->probes[i] = (struct mc_probe){
                .name = names[i], .ndim = 3, .dims = {a->batch, a->len, D}, .data = m->probe_data[i]};
        m->n_probes = 2;
    }
    for (int64_t b = 0; b < a->batch; b++) {
        for (int64_t t = 0; t < a->len; t++) {
            float *o = out + (b * a->len + t) * D;
            if (a->mask != NULL && a->mask[b * a->len + t] == 0) { /* padding: cache untouched */
                for (int64_t d = 0; d < D; d++)
                    o[d] = m->out_b ? m->out_b[d] : 0.0f;
                continue;
            }
            linear(m->in_w, m->in_b, x + (b * a->len + t) * D, D, 3 * D, bcx);
            for (int64_t d = 0; d < D; d++) {
                float *w = windows + (b * D + d) * K;
                memmove(w, w + 1, (size_t)(K - 1) * sizeof *w); /* shift out the oldest */
                w[K - 1] = bcx[d] * bcx[2 * D + d];              /* B * x */
                float acc = m->conv_b ? m->conv_b[d] : 0.0f;
                for (int64_t k = 0; k < K; k++)
                    acc += m->conv_w[d * K + k] * w[k];
                y[d] = bcx[D + d] * acc; /* C * conv */
                if (p_in != NULL) {
                    p_in[(b * a->len + t) * D + d] = w[K - 1];
                    p_out[(b * a->len + t) * D + d] = acc;
                }
            }
            linear(m->out_w, m->out_b, y, D, D, o);
        }
    }
    free(bcx);
    free(y);
    free(scratch);
    return MC_BACKEND_OK;
}

static enum mc_backend_status probe_enable(struct mc_model *m, int32_t on, struct mc_msg *msg)
{
    (void)msg;
    m->probing = on != 0;
    m->n_probes = 0;
    return MC_BACKEND_OK;
}

/* The probes of the last forward: owned by the model, valid until its next call. */
static enum mc_backend_status probe_read(struct mc_model *m, const struct mc_probe **probes, int32_t *count,
                                         struct mc_msg *msg)
{
    (void)msg;
    *probes = m->probes;
    *count = m->n_probes;
    return MC_BACKEND_OK;
}

static const struct mc_backend_ops example_ops = {
    .abi_version = MIXCHECK_ABI_VERSION,
    .struct_size = sizeof(struct mc_backend_ops),
    .name = "example",
    .device = "cpu",
    .family = MC_FAMILY_SHORTCONV,
    .dtypes = MC_DTYPE_BIT(MC_DTYPE_F32),
    .caps = MC_CAP_PROBES,
    .model_create = model_create,
    .model_destroy = model_destroy,
    .cache_alloc = cache_alloc,
    .cache_copy = cache_copy,
    .cache_free = cache_free,
    .cache_export = cache_export,
    .cache_import = cache_import,
    .forward = forward,
    .probe_enable = probe_enable,
    .probe_read = probe_read,
};

EXPORT const struct mc_backend_ops *const *mixcheck_plugin_backends(uint32_t *count, uint32_t *abi_version)
{
    static const struct mc_backend_ops *const all[] = {&example_ops};
    *count = 1;
    *abi_version = MIXCHECK_ABI_VERSION;
    return all;
}
