/*
 * mamba1.c — the reference Mamba1 mixer behind the backend interface (mixcheck/backend.h).
 *
 * Upstream semantics: HF transformers `MambaMixer` (modeling_mamba.py, torch slow path) and
 * mamba_ssm's `selective_scan_ref` / `selective_state_update` as written out in mixers.md §3, with
 * mixcheck's choices of §A: one routine over (window, state, segment) covers the three cases of §1.3
 * (mixers.md §11), so a multi-token forward on a primed cache convolves with the cached K-column
 * window and starts the scan from the cached state (§A.1; HF Mamba1 does not, §3.5); the scan is the
 * exact sequential recurrence with one [N] state per channel; a masked token is skipped (it never
 * reaches the conv window or the state) and its output row is out_proj.bias (zeros without use_bias).
 *
 * Plain loops, no SIMD, no threads, except the four projections (in_proj, x_proj, dt_proj,
 * out_proj), which go through OpenBLAS gemm. The math (mamba1_impl.inc) is instantiated for float
 * and double; the model dtype picks one.
 *
 * Dimension letters: B batch, L tokens, D hidden, I intermediate (= conv channels C), N state,
 * K conv width, R time_step_rank, R+2N x_proj rows (dt_low | B | C).
 */
#include "reference.h"

#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv.h"

/* Sizes above this are refused: no realistic layer comes near, and size products stay far from
 * overflow (the harness applies the same bound). */
#define M1_MAX_DIM 65536

enum m1_weight_slot {
    M1_W_IN_PROJ,
    M1_W_IN_PROJ_BIAS,
    M1_W_CONV,
    M1_W_CONV_BIAS,
    M1_W_X_PROJ,
    M1_W_DT_PROJ,
    M1_W_DT_PROJ_BIAS,
    M1_W_A_LOG,
    M1_W_D,
    M1_W_OUT_PROJ,
    M1_W_OUT_PROJ_BIAS,
    M1_W_COUNT,
};

static const char *const m1_weight_names[M1_W_COUNT] = {
    [M1_W_IN_PROJ] = "in_proj.weight",
    [M1_W_IN_PROJ_BIAS] = "in_proj.bias",
    [M1_W_CONV] = "conv1d.weight",
    [M1_W_CONV_BIAS] = "conv1d.bias",
    [M1_W_X_PROJ] = "x_proj.weight",
    [M1_W_DT_PROJ] = "dt_proj.weight",
    [M1_W_DT_PROJ_BIAS] = "dt_proj.bias",
    [M1_W_A_LOG] = "A_log",
    [M1_W_D] = "D",
    [M1_W_OUT_PROJ] = "out_proj.weight",
    [M1_W_OUT_PROJ_BIAS] = "out_proj.bias",
};

/* What one weight slot should hold for a configuration. */
struct m1_weight_spec {
    int present; /* implied by the configuration */
    int ndim;
    int64_t dims[3];
};

struct mc_model {
    enum mc_dtype dtype; /* F32 or F64: storage and math */
    size_t elem_bytes;
    struct mc_mamba1_config cfg;
    /* inner = I (not named I: <cblas.h> pulls in <complex.h>, whose I is a macro); xdim = R + 2N */
    int64_t D, inner, N, K, R, xdim;
    void *w[M1_W_COUNT]; /* owned copies in the model dtype; NULL when absent */
};

struct mc_cache {
    int64_t batch;
    int primed;   /* a forward or an import has written it */
    void *window; /* [B][I][K] model dtype, the last K pre-conv inputs, oldest first */
    void *state;  /* [B][I][N] model dtype */
};

static enum mc_backend_status m1_fail(struct mc_msg *msg, enum mc_backend_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static enum mc_backend_status m1_fail(struct mc_msg *msg, enum mc_backend_status st, const char *fmt, ...)
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

#define M1_CAT_(a, b) a##b
#define M1_CAT(a, b) M1_CAT_(a, b)

#define REAL float
#define M1_FN(name) M1_CAT(name, _f32)
#define R_EXP expf
#define R_LOG1P log1pf
#define R_GEMM cblas_sgemm
#define R_CONV mc_conv_segment_f32
#include "mamba1_impl.inc"
#undef REAL
#undef M1_FN
#undef R_EXP
#undef R_LOG1P
#undef R_GEMM
#undef R_CONV

#define REAL double
#define M1_FN(name) M1_CAT(name, _f64)
#define R_EXP exp
#define R_LOG1P log1p
#define R_GEMM cblas_dgemm
#define R_CONV mc_conv_segment_f64
#include "mamba1_impl.inc"
#undef REAL
#undef M1_FN
#undef R_EXP
#undef R_LOG1P
#undef R_GEMM
#undef R_CONV

/* ---- model ------------------------------------------------------------------------------------- */

static void m1_format_shape(char *buf, size_t len, int ndim, const int64_t *dims)
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

static enum mc_backend_status m1_check_dim(const char *name, int64_t v, struct mc_msg *msg)
{
    if (v < 1 || v > M1_MAX_DIM)
        return m1_fail(msg, MC_BACKEND_INVALID, "mamba1 config: '%s' must be in [1, %d] (got %lld)", name, M1_MAX_DIM,
                       (long long)v);
    return MC_BACKEND_OK;
}

static enum mc_backend_status m1_config_validate(const struct mc_mamba1_config *c, struct mc_msg *msg)
{
    enum mc_backend_status st;
    if ((st = m1_check_dim("hidden_size", c->hidden_size, msg)) ||
        (st = m1_check_dim("intermediate_size", c->intermediate_size, msg)) ||
        (st = m1_check_dim("state_size", c->state_size, msg)) ||
        (st = m1_check_dim("conv_kernel", c->conv_kernel, msg)) ||
        (st = m1_check_dim("time_step_rank", c->time_step_rank, msg)))
        return st;
    if ((c->use_bias != 0 && c->use_bias != 1) || (c->use_conv_bias != 0 && c->use_conv_bias != 1))
        return m1_fail(msg, MC_BACKEND_INVALID,
                       "mamba1 config: 'use_bias' and 'use_conv_bias' must be 0 or 1 (got %d, %d)", (int)c->use_bias,
                       (int)c->use_conv_bias);
    return MC_BACKEND_OK;
}

static void m1_weight_specs(const struct mc_model *m, struct m1_weight_spec spec[M1_W_COUNT])
{
    memset(spec, 0, sizeof(struct m1_weight_spec) * M1_W_COUNT);
#define M1_SPEC(slot, on, nd, d0, d1, d2)                                                                              \
    (spec[slot] = (struct m1_weight_spec){.present = (on), .ndim = (nd), .dims = {(d0), (d1), (d2)}})
    M1_SPEC(M1_W_IN_PROJ, 1, 2, 2 * m->inner, m->D, 0);
    M1_SPEC(M1_W_IN_PROJ_BIAS, m->cfg.use_bias, 1, 2 * m->inner, 0, 0);
    M1_SPEC(M1_W_CONV, 1, 3, m->inner, 1, m->K);
    M1_SPEC(M1_W_CONV_BIAS, m->cfg.use_conv_bias, 1, m->inner, 0, 0);
    M1_SPEC(M1_W_X_PROJ, 1, 2, m->xdim, m->inner, 0);
    M1_SPEC(M1_W_DT_PROJ, 1, 2, m->inner, m->R, 0);
    M1_SPEC(M1_W_DT_PROJ_BIAS, 1, 1, m->inner, 0, 0);
    M1_SPEC(M1_W_A_LOG, 1, 2, m->inner, m->N, 0);
    M1_SPEC(M1_W_D, 1, 1, m->inner, 0, 0);
    M1_SPEC(M1_W_OUT_PROJ, 1, 2, m->D, m->inner, 0);
    M1_SPEC(M1_W_OUT_PROJ_BIAS, m->cfg.use_bias, 1, m->D, 0, 0);
#undef M1_SPEC
}

static int64_t m1_spec_elems(const struct m1_weight_spec *s)
{
    int64_t n = 1;
    for (int i = 0; i < s->ndim; i++)
        n *= s->dims[i];
    return n;
}

/* Checks desc->weights against the configuration; on success found[slot] is the weight in each slot
 * the configuration implies. */
static enum mc_backend_status m1_weights_match(const struct mc_model_desc *desc,
                                               const struct m1_weight_spec spec[M1_W_COUNT],
                                               const struct mc_weight *found[M1_W_COUNT], struct mc_msg *msg)
{
    char want[96], got[96];
    if (desc->n_weights < 0 || (desc->n_weights > 0 && !desc->weights))
        return m1_fail(msg, MC_BACKEND_INVALID, "mamba1 reference: %d weights but no weight array",
                       (int)desc->n_weights);
    for (int32_t i = 0; i < desc->n_weights; i++) {
        const struct mc_weight *w = &desc->weights[i];
        if (!w->name)
            return m1_fail(msg, MC_BACKEND_INVALID, "mamba1 reference: weight %d has no name", (int)i);
        int slot = -1;
        for (int s = 0; s < M1_W_COUNT; s++)
            if (strcmp(w->name, m1_weight_names[s]) == 0)
                slot = s;
        if (slot < 0)
            return m1_fail(msg, MC_BACKEND_INVALID, "mamba1 reference: unknown weight '%s'", w->name);
        if (!spec[slot].present)
            return m1_fail(msg, MC_BACKEND_INVALID,
                           "mamba1 reference: weight '%s' given but the configuration has %s = 0", w->name,
                           slot == M1_W_CONV_BIAS ? "use_conv_bias" : "use_bias");
        if (found[slot])
            return m1_fail(msg, MC_BACKEND_INVALID, "mamba1 reference: weight '%s' given twice", w->name);
        m1_format_shape(want, sizeof want, spec[slot].ndim, spec[slot].dims);
        int same = w->ndim == spec[slot].ndim;
        for (int d = 0; same && d < spec[slot].ndim; d++)
            same = w->dims[d] == spec[slot].dims[d];
        if (!same) {
            if (w->ndim < 0 || w->ndim > MC_MAX_DIMS)
                snprintf(got, sizeof got, "ndim %d", (int)w->ndim);
            else
                m1_format_shape(got, sizeof got, w->ndim, w->dims);
            return m1_fail(msg, MC_BACKEND_INVALID, "mamba1 reference: weight '%s': expected shape %s, got %s", w->name,
                           want, got);
        }
        if (!w->data)
            return m1_fail(msg, MC_BACKEND_INVALID, "mamba1 reference: weight '%s' %s has no data", w->name, want);
        found[slot] = w;
    }
    for (int s = 0; s < M1_W_COUNT; s++) {
        if (spec[s].present && !found[s]) {
            m1_format_shape(want, sizeof want, spec[s].ndim, spec[s].dims);
            return m1_fail(msg, MC_BACKEND_INVALID, "mamba1 reference: missing weight '%s' (expected shape %s)",
                           m1_weight_names[s], want);
        }
    }
    return MC_BACKEND_OK;
}

static void m1_model_destroy(struct mc_model *model)
{
    if (!model)
        return;
    for (int s = 0; s < M1_W_COUNT; s++)
        free(model->w[s]);
    free(model);
}

static enum mc_backend_status m1_model_create(const struct mc_model_desc *desc, struct mc_model **model,
                                              struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    struct mc_model *m = NULL;
    struct m1_weight_spec spec[M1_W_COUNT];
    const struct mc_weight *found[M1_W_COUNT] = {0};

    if (!desc || !model) {
        st = m1_fail(msg, MC_BACKEND_INVALID, "mamba1 reference: model_create needs a descriptor and an output handle");
        goto fail;
    }
    *model = NULL;
    if (desc->family != MC_FAMILY_MAMBA1) {
        st = m1_fail(msg, MC_BACKEND_INVALID, "mamba1 reference: descriptor family is %d, expected mamba1 (%d)",
                     (int)desc->family, (int)MC_FAMILY_MAMBA1);
        goto fail;
    }
    if (desc->dtype != MC_DTYPE_F32 && desc->dtype != MC_DTYPE_F64) {
        const int known = desc->dtype == MC_DTYPE_F16 || desc->dtype == MC_DTYPE_BF16;
        st = m1_fail(msg, known ? MC_BACKEND_UNSUPPORTED : MC_BACKEND_INVALID,
                     "mamba1 reference: dtype %d %s (supported: f32, f64)", (int)desc->dtype,
                     known ? "is not supported" : "is not a known dtype");
        goto fail;
    }
    if (!desc->config) {
        st = m1_fail(msg, MC_BACKEND_INVALID, "mamba1 reference: descriptor has no configuration");
        goto fail;
    }
    if ((st = m1_config_validate(desc->config, msg)) != MC_BACKEND_OK)
        goto fail;

    m = calloc(1, sizeof *m);
    if (!m) {
        st = m1_fail(msg, MC_BACKEND_NOMEM, "mamba1 reference: out of memory for the model");
        goto fail;
    }
    m->dtype = desc->dtype;
    m->elem_bytes = desc->dtype == MC_DTYPE_F64 ? sizeof(double) : sizeof(float);
    m->cfg = *(const struct mc_mamba1_config *)desc->config;
    m->D = m->cfg.hidden_size;
    m->inner = m->cfg.intermediate_size;
    m->N = m->cfg.state_size;
    m->K = m->cfg.conv_kernel;
    m->R = m->cfg.time_step_rank;
    m->xdim = m->R + 2 * m->N;

    m1_weight_specs(m, spec);
    if ((st = m1_weights_match(desc, spec, found, msg)) != MC_BACKEND_OK)
        goto fail;
    for (int s = 0; s < M1_W_COUNT; s++) {
        if (!found[s])
            continue;
        const size_t bytes = (size_t)m1_spec_elems(&spec[s]) * m->elem_bytes;
        m->w[s] = malloc(bytes);
        if (!m->w[s]) {
            st = m1_fail(msg, MC_BACKEND_NOMEM, "mamba1 reference: out of memory copying weight '%s' (%zu bytes)",
                         m1_weight_names[s], bytes);
            goto fail;
        }
        memcpy(m->w[s], found[s]->data, bytes);
    }
    *model = m;
    return MC_BACKEND_OK;

fail:
    m1_model_destroy(m);
    return st;
}

/* ---- cache ------------------------------------------------------------------------------------- */

static int64_t m1_window_elems(const struct mc_model *m)
{
    return m->inner * m->K;
}
static int64_t m1_state_elems(const struct mc_model *m)
{
    return m->inner * m->N;
}

static void m1_cache_free(struct mc_model *model, struct mc_cache *cache)
{
    (void)model;
    if (!cache)
        return;
    free(cache->state);
    free(cache->window);
    free(cache);
}

static enum mc_backend_status m1_cache_alloc(struct mc_model *model, int64_t batch, struct mc_cache **cache,
                                             struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    struct mc_cache *c = NULL;
    if (!model || !cache) {
        st = m1_fail(msg, MC_BACKEND_INVALID, "mamba1 reference: cache_alloc needs a model and an output handle");
        goto fail;
    }
    *cache = NULL;
    if (batch < 1 || batch > INT_MAX) {
        st = m1_fail(msg, MC_BACKEND_INVALID, "mamba1 reference: cache batch must be in [1, %d] (got %lld)", INT_MAX,
                     (long long)batch);
        goto fail;
    }
    c = calloc(1, sizeof *c);
    if (!c) {
        st = m1_fail(msg, MC_BACKEND_NOMEM, "mamba1 reference: out of memory for a cache");
        goto fail;
    }
    c->batch = batch;
    c->window = calloc((size_t)batch * (size_t)m1_window_elems(model), model->elem_bytes);
    c->state = calloc((size_t)batch * (size_t)m1_state_elems(model), model->elem_bytes);
    if (!c->window || !c->state) {
        st = m1_fail(msg, MC_BACKEND_NOMEM, "mamba1 reference: out of memory for a cache of batch %lld",
                     (long long)batch);
        goto fail;
    }
    *cache = c;
    return MC_BACKEND_OK;

fail:
    m1_cache_free(model, c);
    return st;
}

static enum mc_backend_status m1_cache_copy(struct mc_model *model, struct mc_cache *dst, const struct mc_cache *src,
                                            struct mc_msg *msg)
{
    if (!model || !dst || !src)
        return m1_fail(msg, MC_BACKEND_INVALID,
                       "mamba1 reference: cache_copy needs a model, a destination and a source");
    if (dst->batch != src->batch)
        return m1_fail(msg, MC_BACKEND_INVALID,
                       "mamba1 reference: cache_copy batch mismatch (destination %lld, source %lld)",
                       (long long)dst->batch, (long long)src->batch);
    if (dst == src)
        return MC_BACKEND_OK;
    memcpy(dst->window, src->window, (size_t)src->batch * (size_t)m1_window_elems(model) * model->elem_bytes);
    memcpy(dst->state, src->state, (size_t)src->batch * (size_t)m1_state_elems(model) * model->elem_bytes);
    dst->primed = src->primed;
    return MC_BACKEND_OK;
}

static enum mc_backend_status m1_cache_export(struct mc_model *model, const struct mc_cache *cache, void *conv_state,
                                              void *recurrent_state, struct mc_msg *msg)
{
    if (!model || !cache)
        return m1_fail(msg, MC_BACKEND_INVALID, "mamba1 reference: cache_export needs a model and a cache");
    /* The export dtype (f64 for an f64 model, else f32) is the model dtype here. A NULL output is
     * skipped, so a caller may fetch only the window or only the state. */
    if (conv_state)
        memcpy(conv_state, cache->window, (size_t)cache->batch * (size_t)m1_window_elems(model) * model->elem_bytes);
    if (recurrent_state)
        memcpy(recurrent_state, cache->state, (size_t)cache->batch * (size_t)m1_state_elems(model) * model->elem_bytes);
    return MC_BACKEND_OK;
}

static enum mc_backend_status m1_cache_import(struct mc_model *model, struct mc_cache *cache, const void *conv_state,
                                              const void *recurrent_state, struct mc_msg *msg)
{
    if (!model || !cache)
        return m1_fail(msg, MC_BACKEND_INVALID, "mamba1 reference: cache_import needs a model and a cache");
    if (!conv_state || !recurrent_state)
        return m1_fail(msg, MC_BACKEND_INVALID,
                       "mamba1 reference: cache_import needs conv_state [B][I][K] and recurrent_state [B][I][N]");
    memcpy(cache->window, conv_state, (size_t)cache->batch * (size_t)m1_window_elems(model) * model->elem_bytes);
    memcpy(cache->state, recurrent_state, (size_t)cache->batch * (size_t)m1_state_elems(model) * model->elem_bytes);
    cache->primed = 1;
    return MC_BACKEND_OK;
}

/* ---- forward ----------------------------------------------------------------------------------- */

static enum mc_backend_status m1_forward(struct mc_model *model, struct mc_cache *cache,
                                         const struct mc_forward_args *args, struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    void *tmp_window = NULL; /* [B][I][K] when there is no cache */
    void *tmp_state = NULL;  /* [B][I][N] when there is no cache */
    void *window, *state;

    if (!model || !args) {
        st = m1_fail(msg, MC_BACKEND_INVALID, "mamba1 reference: forward needs a model and arguments");
        goto cleanup;
    }
    if (args->batch < 1 || args->len < 1) {
        st = m1_fail(msg, MC_BACKEND_INVALID,
                     "mamba1 reference: forward needs batch >= 1 and len >= 1 (got B=%lld L=%lld)",
                     (long long)args->batch, (long long)args->len);
        goto cleanup;
    }
    if (args->batch > INT_MAX / args->len) {
        st = m1_fail(msg, MC_BACKEND_INVALID, "mamba1 reference: B*L = %lld*%lld exceeds the BLAS limit %d",
                     (long long)args->batch, (long long)args->len, INT_MAX);
        goto cleanup;
    }
    if (!args->x || !args->y) {
        st = m1_fail(msg, MC_BACKEND_INVALID, "mamba1 reference: forward needs x [B][L][D] and y [B][L][D]");
        goto cleanup;
    }
    if (cache && cache->batch != args->batch) {
        st = m1_fail(msg, MC_BACKEND_INVALID, "mamba1 reference: cache batch %lld does not match forward batch %lld",
                     (long long)cache->batch, (long long)args->batch);
        goto cleanup;
    }

    if (cache) {
        if (!cache->primed) { /* case (a) with a cache: start from zeros, fill it */
            memset(cache->window, 0, (size_t)cache->batch * (size_t)m1_window_elems(model) * model->elem_bytes);
            memset(cache->state, 0, (size_t)cache->batch * (size_t)m1_state_elems(model) * model->elem_bytes);
        }
        window = cache->window;
        state = cache->state;
    } else {
        tmp_window = calloc((size_t)args->batch * (size_t)m1_window_elems(model), model->elem_bytes);
        tmp_state = calloc((size_t)args->batch * (size_t)m1_state_elems(model), model->elem_bytes);
        if (!tmp_window || !tmp_state) {
            st = m1_fail(msg, MC_BACKEND_NOMEM,
                         "mamba1 reference: out of memory for a zero window and state of batch %lld",
                         (long long)args->batch);
            goto cleanup;
        }
        window = tmp_window;
        state = tmp_state;
    }

    if (model->dtype == MC_DTYPE_F64)
        st = m1_forward_f64(model, window, state, args, msg);
    else
        st = m1_forward_f32(model, window, state, args, msg);
    if (st == MC_BACKEND_OK && cache)
        cache->primed = 1;

cleanup:
    free(tmp_state);
    free(tmp_window);
    return st;
}

static const struct mc_backend_ops m1_ops = {
    .abi_version = MIXCHECK_ABI_VERSION,
    .struct_size = sizeof(struct mc_backend_ops),
    .name = "reference",
    .device = "cpu",
    .family = MC_FAMILY_MAMBA1,
    .dtypes = MC_DTYPE_BIT(MC_DTYPE_F32) | MC_DTYPE_BIT(MC_DTYPE_F64),
    .caps = 0,
    .model_create = m1_model_create,
    .model_destroy = m1_model_destroy,
    .cache_alloc = m1_cache_alloc,
    .cache_copy = m1_cache_copy,
    .cache_free = m1_cache_free,
    .cache_export = m1_cache_export,
    .cache_import = m1_cache_import,
    .forward = m1_forward,
};

const struct mc_backend_ops *mc_reference_mamba1_ops(void)
{
    return &m1_ops;
}
