/* stackport.c — see stackport.h. */
#include "stack/stackport.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "family/family.h"

struct mc_stack_port {
    const struct mc_backend_ops *ops;
    const struct mc_stack_config *cfg;
    struct mc_model *model;
    enum mc_dtype dtype, out_dtype; /* storage; outputs (f64 for f64 models, else f32) */
    int64_t n, D, V;
    /* staging of one forward's outputs in out_dtype, grown as needed */
    void *buf;
    size_t buf_size;
};

static enum mc_backend_status nomem(struct mc_msg *msg)
{
    snprintf(msg->text, sizeof msg->text, "out of memory");
    return MC_BACKEND_NOMEM;
}

enum mc_backend_status mc_stack_port_create(const struct mc_stack_golden *g, enum mc_dtype dtype,
                                            const struct mc_backend_ops *ops, int32_t threads,
                                            struct mc_stack_port **out, struct mc_msg *msg)
{
    *out = NULL;
    struct mc_stack_port *p = calloc(1, sizeof *p);
    struct mc_weight *w = calloc((size_t)(g->n_weights ? g->n_weights : 1), sizeof *w);
    void **bufs = calloc((size_t)(g->n_weights ? g->n_weights : 1), sizeof *bufs);
    enum mc_backend_status st = MC_BACKEND_OK;
    if (p == NULL || w == NULL || bufs == NULL)
        st = nomem(msg);
    size_t esz = mc_dtype_size(dtype);
    for (int i = 0; i < g->n_weights && st == MC_BACKEND_OK; i++) {
        const struct mc_array *a = &g->weights[i].value;
        size_t n = (size_t)mc_array_elems(a);
        if ((bufs[i] = malloc(n * esz + 1)) == NULL) {
            st = nomem(msg);
            break;
        }
        mc_dtype_from_f64(dtype, a->data, bufs[i], n);
        w[i] = (struct mc_weight){.name = g->weights[i].name, .ndim = a->ndim, .data = bufs[i]};
        memcpy(w[i].dims, a->dims, sizeof w[i].dims);
    }
    if (st == MC_BACKEND_OK) {
        p->ops = ops;
        p->cfg = &g->config;
        p->dtype = dtype;
        p->out_dtype = dtype == MC_DTYPE_F64 ? MC_DTYPE_F64 : MC_DTYPE_F32;
        p->n = g->config.n_layers;
        p->D = g->config.hidden;
        p->V = g->config.vocab;
        struct mc_stack_desc desc = {.model_type = g->config.model_type, .config_json = g->config_json,
                                     .dtype = dtype, .weights = w, .n_weights = g->n_weights, .threads = threads};
        struct mc_msg m = {{0}};
        st = ops->stack_create(&desc, &p->model, &m);
        if (st != MC_BACKEND_OK) {
            p->model = NULL;
            snprintf(msg->text, sizeof msg->text, "%s on '%s': %.400s", g->config.model_type, ops->name,
                     m.text[0] ? m.text : "failed");
        } else if (p->model == NULL) {
            st = MC_BACKEND_INTERNAL;
            snprintf(msg->text, sizeof msg->text, "stack_create on '%s' returned OK without a model", ops->name);
        }
    }
    for (int i = 0; bufs != NULL && i < g->n_weights; i++)
        free(bufs[i]);
    free(bufs);
    free(w);
    if (st != MC_BACKEND_OK) {
        free(p);
        return st;
    }
    *out = p;
    return MC_BACKEND_OK;
}

void mc_stack_port_destroy(struct mc_stack_port *p)
{
    if (p == NULL)
        return;
    if (p->model != NULL)
        p->ops->model_destroy(p->model);
    free(p->buf);
    free(p);
}

int mc_stack_port_has_hidden(const struct mc_stack_port *p)
{
    return (p->ops->caps & MC_CAP_STACK_HIDDEN) != 0;
}

enum mc_backend_status mc_stack_port_cache_new(struct mc_stack_port *p, int64_t batch, struct mc_cache **c,
                                               struct mc_msg *msg)
{
    *c = NULL;
    enum mc_backend_status st = p->ops->cache_alloc(p->model, batch, c, msg);
    if (st == MC_BACKEND_OK && *c == NULL) {
        snprintf(msg->text, sizeof msg->text, "cache_alloc on '%s' returned OK without a cache", p->ops->name);
        return MC_BACKEND_INTERNAL;
    }
    if (st != MC_BACKEND_OK)
        *c = NULL;
    return st;
}

enum mc_backend_status mc_stack_port_cache_copy(struct mc_stack_port *p, struct mc_cache *dst, const struct mc_cache *src,
                                                struct mc_msg *msg)
{
    return p->ops->cache_copy(p->model, dst, src, msg);
}

void mc_stack_port_cache_free(struct mc_stack_port *p, struct mc_cache *c)
{
    if (c != NULL)
        p->ops->cache_free(p->model, c);
}

/* The staging buffer for n output values, NaN-filled; NULL when out of memory. */
static void *stage(struct mc_stack_port *p, size_t n)
{
    size_t need = (n ? n : 1) * mc_dtype_size(p->out_dtype);
    if (need > p->buf_size) {
        void *b = realloc(p->buf, need);
        if (b == NULL)
            return NULL;
        p->buf = b;
        p->buf_size = need;
    }
    mc_dtype_fill_nan(p->out_dtype, p->buf, n);
    return p->buf;
}

enum mc_backend_status mc_stack_port_forward(struct mc_stack_port *p, struct mc_cache *c, int64_t batch, int64_t len,
                                             const int64_t *ids, const uint8_t *mask, double *logits,
                                             const struct mc_stack_port_out *out, struct mc_msg *msg)
{
    int with = mc_stack_port_has_hidden(p) && out != NULL;
    size_t rows = (size_t)(batch * len), nl = rows * (size_t)p->V, layer = rows * (size_t)p->D;
    size_t nh = with && out->hidden ? (size_t)(p->n + 1) * layer : 0, ni = with && out->mixer_in ? (size_t)p->n * layer : 0,
           no = with && out->mixer_out ? (size_t)p->n * layer : 0;
    char *b = stage(p, nl + nh + ni + no);
    if (b == NULL)
        return nomem(msg);
    size_t esz = mc_dtype_size(p->out_dtype);
    char *bh = b + nl * esz, *bi = bh + nh * esz, *bo = bi + ni * esz;
    struct mc_stack_args a = {.batch = batch, .len = len, .input_ids = ids, .mask = mask, .logits = b,
                              .hidden_states = nh ? bh : NULL, .mixer_inputs = ni ? bi : NULL,
                              .mixer_outputs = no ? bo : NULL};
    enum mc_backend_status st = p->ops->stack_forward(p->model, c, &a, msg);
    if (st != MC_BACKEND_OK)
        return st;
    mc_dtype_to_f64(p->out_dtype, b, logits, nl);
    if (nh)
        mc_dtype_to_f64(p->out_dtype, bh, out->hidden, nh);
    if (ni)
        mc_dtype_to_f64(p->out_dtype, bi, out->mixer_in, ni);
    if (no)
        mc_dtype_to_f64(p->out_dtype, bo, out->mixer_out, no);
    return MC_BACKEND_OK;
}

int mc_stack_port_has_packed(const struct mc_stack_port *p)
{
    return (p->ops->caps & MC_CAP_STACK_PACKED) && p->ops->stack_forward_packed != NULL;
}

enum mc_backend_status mc_stack_port_forward_packed(struct mc_stack_port *p, struct mc_cache *pool, int64_t n_seqs,
                                                    const int64_t *cu_seqlens, const int64_t *slots,
                                                    const uint8_t *has_initial_state, const int64_t *ids,
                                                    double *logits, double *hidden, struct mc_msg *msg)
{
    if (!mc_stack_port_has_packed(p)) {
        snprintf(msg->text, sizeof msg->text, "whole stack '%s' has no packed call (MC_CAP_STACK_PACKED)", p->ops->name);
        return MC_BACKEND_UNSUPPORTED;
    }
    size_t T = (size_t)cu_seqlens[n_seqs], nl = T * (size_t)p->V;
    size_t nh = mc_stack_port_has_hidden(p) && hidden != NULL ? (size_t)(p->n + 1) * T * (size_t)p->D : 0;
    char *b = stage(p, nl + nh);
    if (b == NULL)
        return nomem(msg);
    size_t esz = mc_dtype_size(p->out_dtype);
    struct mc_stack_packed_args a = {.n_seqs = n_seqs, .cu_seqlens = cu_seqlens, .slots = slots,
                                     .has_initial_state = has_initial_state, .input_ids = ids, .logits = b,
                                     .hidden_states = nh ? b + nl * esz : NULL};
    enum mc_backend_status st = p->ops->stack_forward_packed(p->model, pool, &a, msg);
    if (st != MC_BACKEND_OK)
        return st;
    mc_dtype_to_f64(p->out_dtype, b, logits, nl);
    if (nh)
        mc_dtype_to_f64(p->out_dtype, b + nl * esz, hidden, nh);
    return MC_BACKEND_OK;
}

enum mc_backend_status mc_stack_port_cache_export(struct mc_stack_port *p, const struct mc_cache *c, int64_t batch,
                                                  int64_t layer, double *conv, double *state, struct mc_msg *msg)
{
    struct mc_family_shape sh;
    mc_stack_layer_shape(p->cfg, layer, &sh);
    size_t nc = (size_t)(batch * sh.conv_channels * sh.conv_kernel), ns = (size_t)(batch * mc_family_state_elems(&sh));
    char *b = stage(p, nc + ns);
    if (b == NULL)
        return nomem(msg);
    size_t esz = mc_dtype_size(p->out_dtype);
    enum mc_backend_status st = p->ops->stack_cache_export(p->model, c, layer, b, ns ? b + nc * esz : NULL, msg);
    if (st != MC_BACKEND_OK)
        return st;
    mc_dtype_to_f64(p->out_dtype, b, conv, nc);
    if (ns && state != NULL)
        mc_dtype_to_f64(p->out_dtype, b + nc * esz, state, ns);
    return MC_BACKEND_OK;
}
