/*
 * shortconv.c — the reference LFM2 ShortConv mixer behind the backend interface (mixcheck/backend.h).
 *
 * Upstream semantics: HF transformers `Lfm2ShortConv` (modeling_lfm2.py, torch path) as written out
 * in mixers.md §5, with mixcheck's choices of §A: one routine over (window, segment) covers the three
 * cases of §1.3 (mixers.md §11); the conv window holds the gated pre-conv input Bx = B ⊙ x
 * (CONV-INV); the conv has no activation; there is no recurrent state. A masked token is skipped (it
 * never reaches the conv window) and its output row is out_proj.bias (zeros without conv_bias) —
 * stricter than HF, which zeroes the layer input of a pad so that in_proj.bias and conv.bias still
 * reach the window (§1.4).
 *
 * Plain loops, no SIMD, no threads, except the two projections, which go through OpenBLAS gemm.
 * The math (shortconv_impl.inc) is instantiated for float and double; the model dtype picks one.
 *
 * Dimension letters: B batch, L tokens, D hidden (= conv channels C), K conv width (conv_L_cache),
 * 3D in_proj rows (B | C | x).
 */
#include "reference.h"

#include <cblas.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv.h"

/* Sizes above this are refused: no realistic layer comes near, and size products stay far from
 * overflow (the harness applies the same bound). */
#define SC_MAX_DIM 65536

enum sc_weight_slot {
    SC_W_IN_PROJ,
    SC_W_IN_PROJ_BIAS,
    SC_W_CONV,
    SC_W_CONV_BIAS,
    SC_W_OUT_PROJ,
    SC_W_OUT_PROJ_BIAS,
    SC_W_COUNT,
};

static const char *const sc_weight_names[SC_W_COUNT] = {
    [SC_W_IN_PROJ] = "in_proj.weight",
    [SC_W_IN_PROJ_BIAS] = "in_proj.bias",
    [SC_W_CONV] = "conv.weight",
    [SC_W_CONV_BIAS] = "conv.bias",
    [SC_W_OUT_PROJ] = "out_proj.weight",
    [SC_W_OUT_PROJ_BIAS] = "out_proj.bias",
};

/* What one weight slot should hold for a configuration. */
struct sc_weight_spec {
    int present; /* implied by the configuration */
    int ndim;
    int64_t dims[3];
};

struct mc_model {
    enum mc_dtype dtype; /* F32 or F64: storage and math */
    size_t elem_bytes;
    struct mc_shortconv_config cfg;
    int64_t D, K;
    void *w[SC_W_COUNT]; /* owned copies in the model dtype; NULL when absent */
};

struct mc_cache {
    int64_t batch;
    int primed;   /* a forward or an import has written it */
    void *window; /* [B][D][K] model dtype, the last K pre-conv inputs Bx, oldest first */
};

static enum mc_backend_status sc_fail(struct mc_msg *msg, enum mc_backend_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static enum mc_backend_status sc_fail(struct mc_msg *msg, enum mc_backend_status st, const char *fmt, ...)
{
    if (msg) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg->text, sizeof msg->text, fmt, ap);
        va_end(ap);
    }
    return st;
}

/* ---- the math, once per real type ------------------------------------------------------------ */

#define SC_CAT_(a, b) a##b
#define SC_CAT(a, b) SC_CAT_(a, b)

#define REAL float
#define SC_FN(name) SC_CAT(name, _f32)
#define R_GEMM cblas_sgemm
#define R_CONV mc_conv_segment_f32
#include "shortconv_impl.inc"
#undef REAL
#undef SC_FN
#undef R_GEMM
#undef R_CONV

#define REAL double
#define SC_FN(name) SC_CAT(name, _f64)
#define R_GEMM cblas_dgemm
#define R_CONV mc_conv_segment_f64
#include "shortconv_impl.inc"
#undef REAL
#undef SC_FN
#undef R_GEMM
#undef R_CONV

/* ---- model ------------------------------------------------------------------------------------- */

static void sc_format_shape(char *buf, size_t len, int ndim, const int64_t *dims)
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

static enum mc_backend_status sc_check_dim(const char *name, int64_t v, struct mc_msg *msg)
{
    if (v < 1 || v > SC_MAX_DIM)
        return sc_fail(msg, MC_BACKEND_INVALID, "shortconv config: '%s' must be in [1, %d] (got %lld)", name,
                       SC_MAX_DIM, (long long)v);
    return MC_BACKEND_OK;
}

static enum mc_backend_status sc_config_validate(const struct mc_shortconv_config *c, struct mc_msg *msg)
{
    enum mc_backend_status st;
    if ((st = sc_check_dim("hidden_size", c->hidden_size, msg)) ||
        (st = sc_check_dim("conv_L_cache", c->conv_kernel, msg)))
        return st;
    if (c->conv_bias != 0 && c->conv_bias != 1)
        return sc_fail(msg, MC_BACKEND_INVALID, "shortconv config: 'conv_bias' must be 0 or 1 (got %d)",
                       (int)c->conv_bias);
    return MC_BACKEND_OK;
}

static void sc_weight_specs(const struct mc_model *m, struct sc_weight_spec spec[SC_W_COUNT])
{
    memset(spec, 0, sizeof(struct sc_weight_spec) * SC_W_COUNT);
#define SC_SPEC(slot, on, nd, d0, d1, d2)                                                                              \
    (spec[slot] = (struct sc_weight_spec){.present = (on), .ndim = (nd), .dims = {(d0), (d1), (d2)}})
    SC_SPEC(SC_W_IN_PROJ, 1, 2, 3 * m->D, m->D, 0);
    SC_SPEC(SC_W_IN_PROJ_BIAS, m->cfg.conv_bias, 1, 3 * m->D, 0, 0);
    SC_SPEC(SC_W_CONV, 1, 3, m->D, 1, m->K);
    SC_SPEC(SC_W_CONV_BIAS, m->cfg.conv_bias, 1, m->D, 0, 0);
    SC_SPEC(SC_W_OUT_PROJ, 1, 2, m->D, m->D, 0);
    SC_SPEC(SC_W_OUT_PROJ_BIAS, m->cfg.conv_bias, 1, m->D, 0, 0);
#undef SC_SPEC
}

static int64_t sc_spec_elems(const struct sc_weight_spec *s)
{
    int64_t n = 1;
    for (int i = 0; i < s->ndim; i++)
        n *= s->dims[i];
    return n;
}

/* Checks desc->weights against the configuration; on success found[slot] is the weight in each slot
 * the configuration implies. */
static enum mc_backend_status sc_weights_match(const struct mc_model_desc *desc,
                                               const struct sc_weight_spec spec[SC_W_COUNT],
                                               const struct mc_weight *found[SC_W_COUNT], struct mc_msg *msg)
{
    char want[96], got[96];
    if (desc->n_weights < 0 || (desc->n_weights > 0 && !desc->weights))
        return sc_fail(msg, MC_BACKEND_INVALID, "shortconv reference: %d weights but no weight array",
                       (int)desc->n_weights);
    for (int32_t i = 0; i < desc->n_weights; i++) {
        const struct mc_weight *w = &desc->weights[i];
        if (!w->name)
            return sc_fail(msg, MC_BACKEND_INVALID, "shortconv reference: weight %d has no name", (int)i);
        int slot = -1;
        for (int s = 0; s < SC_W_COUNT; s++)
            if (strcmp(w->name, sc_weight_names[s]) == 0)
                slot = s;
        if (slot < 0)
            return sc_fail(msg, MC_BACKEND_INVALID, "shortconv reference: unknown weight '%s'", w->name);
        if (!spec[slot].present)
            return sc_fail(msg, MC_BACKEND_INVALID,
                           "shortconv reference: weight '%s' given but the configuration has conv_bias = 0",
                           w->name);
        if (found[slot])
            return sc_fail(msg, MC_BACKEND_INVALID, "shortconv reference: weight '%s' given twice", w->name);
        sc_format_shape(want, sizeof want, spec[slot].ndim, spec[slot].dims);
        int same = w->ndim == spec[slot].ndim;
        for (int d = 0; same && d < spec[slot].ndim; d++)
            same = w->dims[d] == spec[slot].dims[d];
        if (!same) {
            if (w->ndim < 0 || w->ndim > MC_MAX_DIMS)
                snprintf(got, sizeof got, "ndim %d", (int)w->ndim);
            else
                sc_format_shape(got, sizeof got, w->ndim, w->dims);
            return sc_fail(msg, MC_BACKEND_INVALID, "shortconv reference: weight '%s': expected shape %s, got %s",
                           w->name, want, got);
        }
        if (!w->data)
            return sc_fail(msg, MC_BACKEND_INVALID, "shortconv reference: weight '%s' %s has no data", w->name, want);
        found[slot] = w;
    }
    for (int s = 0; s < SC_W_COUNT; s++) {
        if (spec[s].present && !found[s]) {
            sc_format_shape(want, sizeof want, spec[s].ndim, spec[s].dims);
            return sc_fail(msg, MC_BACKEND_INVALID, "shortconv reference: missing weight '%s' (expected shape %s)",
                           sc_weight_names[s], want);
        }
    }
    return MC_BACKEND_OK;
}

static void sc_model_destroy(struct mc_model *model)
{
    if (!model)
        return;
    for (int s = 0; s < SC_W_COUNT; s++)
        free(model->w[s]);
    free(model);
}

static enum mc_backend_status sc_model_create(const struct mc_model_desc *desc, struct mc_model **model,
                                              struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    struct mc_model *m = NULL;
    struct sc_weight_spec spec[SC_W_COUNT];
    const struct mc_weight *found[SC_W_COUNT] = {0};

    if (!desc || !model) {
        st = sc_fail(msg, MC_BACKEND_INVALID,
                     "shortconv reference: model_create needs a descriptor and an output handle");
        goto fail;
    }
    *model = NULL;
    if (desc->family != MC_FAMILY_SHORTCONV) {
        st = sc_fail(msg, MC_BACKEND_INVALID, "shortconv reference: descriptor family is %d, expected shortconv (%d)",
                     (int)desc->family, (int)MC_FAMILY_SHORTCONV);
        goto fail;
    }
    if (desc->dtype != MC_DTYPE_F32 && desc->dtype != MC_DTYPE_F64) {
        const int known = desc->dtype == MC_DTYPE_F16 || desc->dtype == MC_DTYPE_BF16;
        st = sc_fail(msg, known ? MC_BACKEND_UNSUPPORTED : MC_BACKEND_INVALID,
                     "shortconv reference: dtype %d %s (supported: f32, f64)", (int)desc->dtype,
                     known ? "is not supported" : "is not a known dtype");
        goto fail;
    }
    if (!desc->config) {
        st = sc_fail(msg, MC_BACKEND_INVALID, "shortconv reference: descriptor has no configuration");
        goto fail;
    }
    if ((st = sc_config_validate(desc->config, msg)) != MC_BACKEND_OK)
        goto fail;

    m = calloc(1, sizeof *m);
    if (!m) {
        st = sc_fail(msg, MC_BACKEND_NOMEM, "shortconv reference: out of memory for the model");
        goto fail;
    }
    m->dtype = desc->dtype;
    m->elem_bytes = desc->dtype == MC_DTYPE_F64 ? sizeof(double) : sizeof(float);
    m->cfg = *(const struct mc_shortconv_config *)desc->config;
    m->D = m->cfg.hidden_size;
    m->K = m->cfg.conv_kernel;

    sc_weight_specs(m, spec);
    if ((st = sc_weights_match(desc, spec, found, msg)) != MC_BACKEND_OK)
        goto fail;
    for (int s = 0; s < SC_W_COUNT; s++) {
        if (!found[s])
            continue;
        const size_t bytes = (size_t)sc_spec_elems(&spec[s]) * m->elem_bytes;
        m->w[s] = malloc(bytes);
        if (!m->w[s]) {
            st = sc_fail(msg, MC_BACKEND_NOMEM, "shortconv reference: out of memory copying weight '%s' (%zu bytes)",
                         sc_weight_names[s], bytes);
            goto fail;
        }
        memcpy(m->w[s], found[s]->data, bytes);
    }
    *model = m;
    return MC_BACKEND_OK;

fail:
    sc_model_destroy(m);
    return st;
}

/* ---- cache ------------------------------------------------------------------------------------- */

static int64_t sc_window_elems(const struct mc_model *m)
{
    return m->D * m->K;
}

static void sc_cache_free(struct mc_model *model, struct mc_cache *cache)
{
    (void)model;
    if (!cache)
        return;
    free(cache->window);
    free(cache);
}

static enum mc_backend_status sc_cache_alloc(struct mc_model *model, int64_t batch, struct mc_cache **cache,
                                             struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    struct mc_cache *c = NULL;
    if (!model || !cache) {
        st = sc_fail(msg, MC_BACKEND_INVALID, "shortconv reference: cache_alloc needs a model and an output handle");
        goto fail;
    }
    *cache = NULL;
    if (batch < 1 || batch > INT_MAX) {
        st = sc_fail(msg, MC_BACKEND_INVALID, "shortconv reference: cache batch must be in [1, %d] (got %lld)", INT_MAX,
                     (long long)batch);
        goto fail;
    }
    c = calloc(1, sizeof *c);
    if (!c) {
        st = sc_fail(msg, MC_BACKEND_NOMEM, "shortconv reference: out of memory for a cache");
        goto fail;
    }
    c->batch = batch;
    c->window = calloc((size_t)batch * (size_t)sc_window_elems(model), model->elem_bytes);
    if (!c->window) {
        st = sc_fail(msg, MC_BACKEND_NOMEM, "shortconv reference: out of memory for a cache of batch %lld",
                     (long long)batch);
        goto fail;
    }
    *cache = c;
    return MC_BACKEND_OK;

fail:
    sc_cache_free(model, c);
    return st;
}

static enum mc_backend_status sc_cache_copy(struct mc_model *model, struct mc_cache *dst, const struct mc_cache *src,
                                            struct mc_msg *msg)
{
    if (!model || !dst || !src)
        return sc_fail(msg, MC_BACKEND_INVALID,
                       "shortconv reference: cache_copy needs a model, a destination and a source");
    if (dst->batch != src->batch)
        return sc_fail(msg, MC_BACKEND_INVALID,
                       "shortconv reference: cache_copy batch mismatch (destination %lld, source %lld)",
                       (long long)dst->batch, (long long)src->batch);
    if (dst == src)
        return MC_BACKEND_OK;
    memcpy(dst->window, src->window, (size_t)src->batch * (size_t)sc_window_elems(model) * model->elem_bytes);
    dst->primed = src->primed;
    return MC_BACKEND_OK;
}

static enum mc_backend_status sc_cache_export(struct mc_model *model, const struct mc_cache *cache, void *conv_state,
                                              void *recurrent_state, struct mc_msg *msg)
{
    if (!model || !cache)
        return sc_fail(msg, MC_BACKEND_INVALID, "shortconv reference: cache_export needs a model and a cache");
    /* The export dtype (f64 for an f64 model, else f32) is the model dtype here. A NULL conv_state
     * is skipped; recurrent_state is never written (ShortConv has none), so it may be NULL. */
    (void)recurrent_state;
    if (conv_state)
        memcpy(conv_state, cache->window, (size_t)cache->batch * (size_t)sc_window_elems(model) * model->elem_bytes);
    return MC_BACKEND_OK;
}

static enum mc_backend_status sc_cache_import(struct mc_model *model, struct mc_cache *cache, const void *conv_state,
                                              const void *recurrent_state, struct mc_msg *msg)
{
    if (!model || !cache)
        return sc_fail(msg, MC_BACKEND_INVALID, "shortconv reference: cache_import needs a model and a cache");
    (void)recurrent_state; /* ShortConv has no recurrent state: ignored, NULL accepted */
    if (!conv_state)
        return sc_fail(msg, MC_BACKEND_INVALID, "shortconv reference: cache_import needs conv_state [B][D][K]");
    memcpy(cache->window, conv_state, (size_t)cache->batch * (size_t)sc_window_elems(model) * model->elem_bytes);
    cache->primed = 1;
    return MC_BACKEND_OK;
}

/* ---- forward ----------------------------------------------------------------------------------- */

static enum mc_backend_status sc_forward(struct mc_model *model, struct mc_cache *cache,
                                         const struct mc_forward_args *args, struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    void *tmp_window = NULL; /* [B][D][K] when there is no cache */
    void *window;

    if (!model || !args) {
        st = sc_fail(msg, MC_BACKEND_INVALID, "shortconv reference: forward needs a model and arguments");
        goto cleanup;
    }
    if (args->batch < 1 || args->len < 1) {
        st = sc_fail(msg, MC_BACKEND_INVALID,
                     "shortconv reference: forward needs batch >= 1 and len >= 1 (got B=%lld L=%lld)",
                     (long long)args->batch, (long long)args->len);
        goto cleanup;
    }
    if (args->batch > INT_MAX / args->len) {
        st = sc_fail(msg, MC_BACKEND_INVALID, "shortconv reference: B*L = %lld*%lld exceeds the BLAS limit %d",
                     (long long)args->batch, (long long)args->len, INT_MAX);
        goto cleanup;
    }
    if (!args->x || !args->y) {
        st = sc_fail(msg, MC_BACKEND_INVALID, "shortconv reference: forward needs x [B][L][D] and y [B][L][D]");
        goto cleanup;
    }
    if (cache && cache->batch != args->batch) {
        st = sc_fail(msg, MC_BACKEND_INVALID, "shortconv reference: cache batch %lld does not match forward batch %lld",
                     (long long)cache->batch, (long long)args->batch);
        goto cleanup;
    }

    if (cache) {
        if (!cache->primed) /* case (a) with a cache: start from zeros, fill it */
            memset(cache->window, 0, (size_t)cache->batch * (size_t)sc_window_elems(model) * model->elem_bytes);
        window = cache->window;
    } else {
        tmp_window = calloc((size_t)args->batch * (size_t)sc_window_elems(model), model->elem_bytes);
        if (!tmp_window) {
            st = sc_fail(msg, MC_BACKEND_NOMEM, "shortconv reference: out of memory for a zero window of batch %lld",
                         (long long)args->batch);
            goto cleanup;
        }
        window = tmp_window;
    }

    if (model->dtype == MC_DTYPE_F64)
        st = sc_forward_f64(model, window, args, msg);
    else
        st = sc_forward_f32(model, window, args, msg);
    if (st == MC_BACKEND_OK && cache)
        cache->primed = 1;

cleanup:
    free(tmp_window);
    return st;
}

static const struct mc_backend_ops sc_ops = {
    .abi_version = MIXCHECK_ABI_VERSION,
    .struct_size = sizeof(struct mc_backend_ops),
    .name = "reference",
    .device = "cpu",
    .family = MC_FAMILY_SHORTCONV,
    .dtypes = MC_DTYPE_BIT(MC_DTYPE_F32) | MC_DTYPE_BIT(MC_DTYPE_F64),
    .caps = 0,
    .model_create = sc_model_create,
    .model_destroy = sc_model_destroy,
    .cache_alloc = sc_cache_alloc,
    .cache_copy = sc_cache_copy,
    .cache_free = sc_cache_free,
    .cache_export = sc_cache_export,
    .cache_import = sc_cache_import,
    .forward = sc_forward,
};

const struct mc_backend_ops *mc_reference_shortconv_ops(void)
{
    return &sc_ops;
}
