/*
 * mamba2.c — the reference Mamba2 mixer behind the backend interface (mixcheck/backend.h).
 *
 * Upstream semantics: HF transformers `Mamba2Mixer` (modeling_mamba2.py, the #46084 fix, torch path)
 * as written out in mixers.md §2, with mixcheck's choices of §A: one routine over (window, state,
 * segment) covers the three cases of §1.3 (mixers.md §11); dt is clamped to time_step_limit in
 * every path; the scan is the exact sequential recurrence (no chunks); the gated RMSNorm is
 * gate-before-norm over groups of norm_group_size; a masked token is skipped (it never reaches the
 * conv window or the state) and its output row is out_proj.bias (zeros without use_bias).
 *
 * Plain loops, no SIMD, no threads, except the two projections, which go through OpenBLAS gemm.
 * The math (mamba2_impl.inc) is instantiated for float and double; the model dtype picks one.
 *
 * Dimension letters: B batch, L tokens, D hidden, H heads, P head dim, N state, G groups, K conv
 * width, I = H*P, C = I + 2*G*N conv channels, proj = 2*I + 2*G*N + H in_proj rows.
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
#define M2_MAX_DIM 65536

enum m2_weight_slot {
    M2_W_IN_PROJ,
    M2_W_IN_PROJ_BIAS,
    M2_W_CONV,
    M2_W_CONV_BIAS,
    M2_W_DT_BIAS,
    M2_W_A_LOG,
    M2_W_D,
    M2_W_NORM,
    M2_W_OUT_PROJ,
    M2_W_OUT_PROJ_BIAS,
    M2_W_COUNT,
};

static const char *const m2_weight_names[M2_W_COUNT] = {
    [M2_W_IN_PROJ] = "in_proj.weight",
    [M2_W_IN_PROJ_BIAS] = "in_proj.bias",
    [M2_W_CONV] = "conv1d.weight",
    [M2_W_CONV_BIAS] = "conv1d.bias",
    [M2_W_DT_BIAS] = "dt_bias",
    [M2_W_A_LOG] = "A_log",
    [M2_W_D] = "D",
    [M2_W_NORM] = "norm.weight",
    [M2_W_OUT_PROJ] = "out_proj.weight",
    [M2_W_OUT_PROJ_BIAS] = "out_proj.bias",
};

/* What one weight slot should hold for a configuration. */
struct m2_weight_spec {
    int present; /* implied by the configuration */
    int ndim;
    int64_t dims[3];
};

struct mc_model {
    enum mc_dtype dtype; /* F32 or F64: storage and math */
    size_t elem_bytes;
    struct mc_mamba2_config cfg;
    /* inner = I = H*P (not named I: <cblas.h> pulls in <complex.h>, whose I is a macro); R = H/G */
    int64_t D, H, P, N, G, K, inner, GN, C, proj, R;
    void *w[M2_W_COUNT]; /* owned copies in the model dtype; NULL when absent */
};

struct mc_cache {
    int64_t batch;
    int primed;   /* a forward or an import has written it */
    void *window; /* [B][C][K] model dtype, the last K pre-conv inputs, oldest first */
    void *state;  /* [B][H][P][N] model dtype */
};

static enum mc_backend_status m2_fail(struct mc_msg *msg, enum mc_backend_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static enum mc_backend_status m2_fail(struct mc_msg *msg, enum mc_backend_status st, const char *fmt, ...)
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

#define M2_CAT_(a, b) a##b
#define M2_CAT(a, b) M2_CAT_(a, b)

#define REAL float
#define M2_FN(name) M2_CAT(name, _f32)
#define R_EXP expf
#define R_LOG1P log1pf
#define R_SQRT sqrtf
#define R_GEMM cblas_sgemm
#define R_CONV mc_conv_segment_f32
#include "mamba2_impl.inc"
#undef REAL
#undef M2_FN
#undef R_EXP
#undef R_LOG1P
#undef R_SQRT
#undef R_GEMM
#undef R_CONV

#define REAL double
#define M2_FN(name) M2_CAT(name, _f64)
#define R_EXP exp
#define R_LOG1P log1p
#define R_SQRT sqrt
#define R_GEMM cblas_dgemm
#define R_CONV mc_conv_segment_f64
#include "mamba2_impl.inc"
#undef REAL
#undef M2_FN
#undef R_EXP
#undef R_LOG1P
#undef R_SQRT
#undef R_GEMM
#undef R_CONV

/* ---- model ------------------------------------------------------------------------------------- */

static void m2_format_shape(char *buf, size_t len, int ndim, const int64_t *dims)
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

static enum mc_backend_status m2_check_dim(const char *name, int64_t v, struct mc_msg *msg)
{
    if (v < 1 || v > M2_MAX_DIM)
        return m2_fail(msg, MC_BACKEND_INVALID, "mamba2 config: '%s' must be in [1, %d] (got %lld)", name, M2_MAX_DIM,
                       (long long)v);
    return MC_BACKEND_OK;
}

static enum mc_backend_status m2_config_validate(const struct mc_mamba2_config *c, struct mc_msg *msg)
{
    enum mc_backend_status st;
    if ((st = m2_check_dim("hidden_size", c->hidden_size, msg)) ||
        (st = m2_check_dim("num_heads", c->num_heads, msg)) || (st = m2_check_dim("head_dim", c->head_dim, msg)) ||
        (st = m2_check_dim("state_size", c->state_size, msg)) || (st = m2_check_dim("n_groups", c->n_groups, msg)) ||
        (st = m2_check_dim("conv_kernel", c->conv_kernel, msg)) ||
        (st = m2_check_dim("norm_group_size", c->norm_group_size, msg)))
        return st;
    if (c->chunk_size < 0)
        return m2_fail(msg, MC_BACKEND_INVALID, "mamba2 config: 'chunk_size' must be >= 0 (got %lld)",
                       (long long)c->chunk_size);
    if (c->num_heads % c->n_groups != 0)
        return m2_fail(msg, MC_BACKEND_INVALID,
                       "mamba2 config: 'num_heads' (%lld) must be a multiple of 'n_groups' (%lld)",
                       (long long)c->num_heads, (long long)c->n_groups);
    const int64_t inner = c->num_heads * c->head_dim;
    if (inner % c->norm_group_size != 0)
        return m2_fail(msg, MC_BACKEND_INVALID,
                       "mamba2 config: 'num_heads*head_dim' (%lld) must be a multiple of 'norm_group_size' (%lld)",
                       (long long)inner, (long long)c->norm_group_size);
    const int64_t proj = 2 * inner + 2 * c->n_groups * c->state_size + c->num_heads;
    if (proj > INT_MAX)
        return m2_fail(msg, MC_BACKEND_INVALID, "mamba2 config: in_proj rows %lld exceed the BLAS limit %d",
                       (long long)proj, INT_MAX);
    if (!(c->layer_norm_epsilon > 0.0) || !isfinite(c->layer_norm_epsilon))
        return m2_fail(msg, MC_BACKEND_INVALID, "mamba2 config: 'layer_norm_epsilon' must be finite and > 0 (got %g)",
                       c->layer_norm_epsilon);
    const double lo = c->time_step_limit[0], hi = c->time_step_limit[1];
    if (isnan(lo) || isnan(hi) || isinf(lo) || lo < 0.0 || hi < lo)
        return m2_fail(msg, MC_BACKEND_INVALID,
                       "mamba2 config: 'time_step_limit' must satisfy 0 <= lo <= hi, lo finite (got [%g, %g])", lo, hi);
    if ((c->use_bias != 0 && c->use_bias != 1) || (c->use_conv_bias != 0 && c->use_conv_bias != 1))
        return m2_fail(msg, MC_BACKEND_INVALID,
                       "mamba2 config: 'use_bias' and 'use_conv_bias' must be 0 or 1 (got %d, %d)", (int)c->use_bias,
                       (int)c->use_conv_bias);
    return MC_BACKEND_OK;
}

static void m2_weight_specs(const struct mc_model *m, struct m2_weight_spec spec[M2_W_COUNT])
{
    memset(spec, 0, sizeof(struct m2_weight_spec) * M2_W_COUNT);
#define M2_SPEC(slot, on, nd, d0, d1, d2)                                                                              \
    (spec[slot] = (struct m2_weight_spec){.present = (on), .ndim = (nd), .dims = {(d0), (d1), (d2)}})
    M2_SPEC(M2_W_IN_PROJ, 1, 2, m->proj, m->D, 0);
    M2_SPEC(M2_W_IN_PROJ_BIAS, m->cfg.use_bias, 1, m->proj, 0, 0);
    M2_SPEC(M2_W_CONV, 1, 3, m->C, 1, m->K);
    M2_SPEC(M2_W_CONV_BIAS, m->cfg.use_conv_bias, 1, m->C, 0, 0);
    M2_SPEC(M2_W_DT_BIAS, 1, 1, m->H, 0, 0);
    M2_SPEC(M2_W_A_LOG, 1, 1, m->H, 0, 0);
    M2_SPEC(M2_W_D, 1, 1, m->H, 0, 0);
    M2_SPEC(M2_W_NORM, 1, 1, m->inner, 0, 0);
    M2_SPEC(M2_W_OUT_PROJ, 1, 2, m->D, m->inner, 0);
    M2_SPEC(M2_W_OUT_PROJ_BIAS, m->cfg.use_bias, 1, m->D, 0, 0);
#undef M2_SPEC
}

static int64_t m2_spec_elems(const struct m2_weight_spec *s)
{
    int64_t n = 1;
    for (int i = 0; i < s->ndim; i++)
        n *= s->dims[i];
    return n;
}

/* Checks desc->weights against the configuration; on success found[slot] is the weight in each slot
 * the configuration implies. */
static enum mc_backend_status m2_weights_match(const struct mc_model_desc *desc,
                                               const struct m2_weight_spec spec[M2_W_COUNT],
                                               const struct mc_weight *found[M2_W_COUNT], struct mc_msg *msg)
{
    char want[96], got[96];
    if (desc->n_weights < 0 || (desc->n_weights > 0 && !desc->weights))
        return m2_fail(msg, MC_BACKEND_INVALID, "mamba2 reference: %d weights but no weight array",
                       (int)desc->n_weights);
    for (int32_t i = 0; i < desc->n_weights; i++) {
        const struct mc_weight *w = &desc->weights[i];
        if (!w->name)
            return m2_fail(msg, MC_BACKEND_INVALID, "mamba2 reference: weight %d has no name", (int)i);
        int slot = -1;
        for (int s = 0; s < M2_W_COUNT; s++)
            if (strcmp(w->name, m2_weight_names[s]) == 0)
                slot = s;
        if (slot < 0)
            return m2_fail(msg, MC_BACKEND_INVALID, "mamba2 reference: unknown weight '%s'", w->name);
        if (!spec[slot].present)
            return m2_fail(msg, MC_BACKEND_INVALID,
                           "mamba2 reference: weight '%s' given but the configuration has %s = 0", w->name,
                           slot == M2_W_CONV_BIAS ? "use_conv_bias" : "use_bias");
        if (found[slot])
            return m2_fail(msg, MC_BACKEND_INVALID, "mamba2 reference: weight '%s' given twice", w->name);
        m2_format_shape(want, sizeof want, spec[slot].ndim, spec[slot].dims);
        int same = w->ndim == spec[slot].ndim;
        for (int d = 0; same && d < spec[slot].ndim; d++)
            same = w->dims[d] == spec[slot].dims[d];
        if (!same) {
            if (w->ndim < 0 || w->ndim > MC_MAX_DIMS)
                snprintf(got, sizeof got, "ndim %d", (int)w->ndim);
            else
                m2_format_shape(got, sizeof got, w->ndim, w->dims);
            return m2_fail(msg, MC_BACKEND_INVALID, "mamba2 reference: weight '%s': expected shape %s, got %s", w->name,
                           want, got);
        }
        if (!w->data)
            return m2_fail(msg, MC_BACKEND_INVALID, "mamba2 reference: weight '%s' %s has no data", w->name, want);
        found[slot] = w;
    }
    for (int s = 0; s < M2_W_COUNT; s++) {
        if (spec[s].present && !found[s]) {
            m2_format_shape(want, sizeof want, spec[s].ndim, spec[s].dims);
            return m2_fail(msg, MC_BACKEND_INVALID, "mamba2 reference: missing weight '%s' (expected shape %s)",
                           m2_weight_names[s], want);
        }
    }
    return MC_BACKEND_OK;
}

static void m2_model_destroy(struct mc_model *model)
{
    if (!model)
        return;
    for (int s = 0; s < M2_W_COUNT; s++)
        free(model->w[s]);
    free(model);
}

static enum mc_backend_status m2_model_create(const struct mc_model_desc *desc, struct mc_model **model,
                                              struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    struct mc_model *m = NULL;
    struct m2_weight_spec spec[M2_W_COUNT];
    const struct mc_weight *found[M2_W_COUNT] = {0};

    if (!desc || !model) {
        st = m2_fail(msg, MC_BACKEND_INVALID, "mamba2 reference: model_create needs a descriptor and an output handle");
        goto fail;
    }
    *model = NULL;
    if (desc->family != MC_FAMILY_MAMBA2) {
        st = m2_fail(msg, MC_BACKEND_INVALID, "mamba2 reference: descriptor family is %d, expected mamba2 (%d)",
                     (int)desc->family, (int)MC_FAMILY_MAMBA2);
        goto fail;
    }
    if (desc->dtype != MC_DTYPE_F32 && desc->dtype != MC_DTYPE_F64) {
        const int known = desc->dtype == MC_DTYPE_F16 || desc->dtype == MC_DTYPE_BF16;
        st = m2_fail(msg, known ? MC_BACKEND_UNSUPPORTED : MC_BACKEND_INVALID,
                     "mamba2 reference: dtype %d %s (supported: f32, f64)", (int)desc->dtype,
                     known ? "is not supported" : "is not a known dtype");
        goto fail;
    }
    if (!desc->config) {
        st = m2_fail(msg, MC_BACKEND_INVALID, "mamba2 reference: descriptor has no configuration");
        goto fail;
    }
    if ((st = m2_config_validate(desc->config, msg)) != MC_BACKEND_OK)
        goto fail;

    m = calloc(1, sizeof *m);
    if (!m) {
        st = m2_fail(msg, MC_BACKEND_NOMEM, "mamba2 reference: out of memory for the model");
        goto fail;
    }
    m->dtype = desc->dtype;
    m->elem_bytes = desc->dtype == MC_DTYPE_F64 ? sizeof(double) : sizeof(float);
    m->cfg = *(const struct mc_mamba2_config *)desc->config;
    m->D = m->cfg.hidden_size;
    m->H = m->cfg.num_heads;
    m->P = m->cfg.head_dim;
    m->N = m->cfg.state_size;
    m->G = m->cfg.n_groups;
    m->K = m->cfg.conv_kernel;
    m->inner = m->H * m->P;
    m->GN = m->G * m->N;
    m->C = m->inner + 2 * m->GN;
    m->proj = m->inner + m->C + m->H;
    m->R = m->H / m->G;

    m2_weight_specs(m, spec);
    if ((st = m2_weights_match(desc, spec, found, msg)) != MC_BACKEND_OK)
        goto fail;
    for (int s = 0; s < M2_W_COUNT; s++) {
        if (!found[s])
            continue;
        const size_t bytes = (size_t)m2_spec_elems(&spec[s]) * m->elem_bytes;
        m->w[s] = malloc(bytes);
        if (!m->w[s]) {
            st = m2_fail(msg, MC_BACKEND_NOMEM, "mamba2 reference: out of memory copying weight '%s' (%zu bytes)",
                         m2_weight_names[s], bytes);
            goto fail;
        }
        memcpy(m->w[s], found[s]->data, bytes);
    }
    *model = m;
    return MC_BACKEND_OK;

fail:
    m2_model_destroy(m);
    return st;
}

/* ---- cache ------------------------------------------------------------------------------------- */

static int64_t m2_window_elems(const struct mc_model *m)
{
    return m->C * m->K;
}
static int64_t m2_state_elems(const struct mc_model *m)
{
    return m->H * m->P * m->N;
}

static void m2_cache_free(struct mc_model *model, struct mc_cache *cache)
{
    (void)model;
    if (!cache)
        return;
    free(cache->state);
    free(cache->window);
    free(cache);
}

static enum mc_backend_status m2_cache_alloc(struct mc_model *model, int64_t batch, struct mc_cache **cache,
                                             struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    struct mc_cache *c = NULL;
    if (!model || !cache) {
        st = m2_fail(msg, MC_BACKEND_INVALID, "mamba2 reference: cache_alloc needs a model and an output handle");
        goto fail;
    }
    *cache = NULL;
    if (batch < 1 || batch > INT_MAX) {
        st = m2_fail(msg, MC_BACKEND_INVALID, "mamba2 reference: cache batch must be in [1, %d] (got %lld)", INT_MAX,
                     (long long)batch);
        goto fail;
    }
    c = calloc(1, sizeof *c);
    if (!c) {
        st = m2_fail(msg, MC_BACKEND_NOMEM, "mamba2 reference: out of memory for a cache");
        goto fail;
    }
    c->batch = batch;
    c->window = calloc((size_t)batch * (size_t)m2_window_elems(model), model->elem_bytes);
    c->state = calloc((size_t)batch * (size_t)m2_state_elems(model), model->elem_bytes);
    if (!c->window || !c->state) {
        st = m2_fail(msg, MC_BACKEND_NOMEM, "mamba2 reference: out of memory for a cache of batch %lld",
                     (long long)batch);
        goto fail;
    }
    *cache = c;
    return MC_BACKEND_OK;

fail:
    m2_cache_free(model, c);
    return st;
}

static enum mc_backend_status m2_cache_copy(struct mc_model *model, struct mc_cache *dst, const struct mc_cache *src,
                                            struct mc_msg *msg)
{
    if (!model || !dst || !src)
        return m2_fail(msg, MC_BACKEND_INVALID,
                       "mamba2 reference: cache_copy needs a model, a destination and a source");
    if (dst->batch != src->batch)
        return m2_fail(msg, MC_BACKEND_INVALID,
                       "mamba2 reference: cache_copy batch mismatch (destination %lld, source %lld)",
                       (long long)dst->batch, (long long)src->batch);
    if (dst == src)
        return MC_BACKEND_OK;
    memcpy(dst->window, src->window, (size_t)src->batch * (size_t)m2_window_elems(model) * model->elem_bytes);
    memcpy(dst->state, src->state, (size_t)src->batch * (size_t)m2_state_elems(model) * model->elem_bytes);
    dst->primed = src->primed;
    return MC_BACKEND_OK;
}

static enum mc_backend_status m2_cache_export(struct mc_model *model, const struct mc_cache *cache, void *conv_state,
                                              void *recurrent_state, struct mc_msg *msg)
{
    if (!model || !cache)
        return m2_fail(msg, MC_BACKEND_INVALID, "mamba2 reference: cache_export needs a model and a cache");
    /* The export dtype (f64 for an f64 model, else f32) is the model dtype here. A NULL output is
     * skipped, so a caller may fetch only the window or only the state. */
    if (conv_state)
        memcpy(conv_state, cache->window, (size_t)cache->batch * (size_t)m2_window_elems(model) * model->elem_bytes);
    if (recurrent_state)
        memcpy(recurrent_state, cache->state, (size_t)cache->batch * (size_t)m2_state_elems(model) * model->elem_bytes);
    return MC_BACKEND_OK;
}

static enum mc_backend_status m2_cache_import(struct mc_model *model, struct mc_cache *cache, const void *conv_state,
                                              const void *recurrent_state, struct mc_msg *msg)
{
    if (!model || !cache)
        return m2_fail(msg, MC_BACKEND_INVALID, "mamba2 reference: cache_import needs a model and a cache");
    if (!conv_state || !recurrent_state)
        return m2_fail(msg, MC_BACKEND_INVALID,
                       "mamba2 reference: cache_import needs conv_state [B][C][K] and recurrent_state [B][H][P][N]");
    memcpy(cache->window, conv_state, (size_t)cache->batch * (size_t)m2_window_elems(model) * model->elem_bytes);
    memcpy(cache->state, recurrent_state, (size_t)cache->batch * (size_t)m2_state_elems(model) * model->elem_bytes);
    cache->primed = 1;
    return MC_BACKEND_OK;
}

/* ---- forward ----------------------------------------------------------------------------------- */

static enum mc_backend_status m2_forward(struct mc_model *model, struct mc_cache *cache,
                                         const struct mc_forward_args *args, struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    void *tmp_window = NULL; /* [B][C][K] when there is no cache */
    void *tmp_state = NULL;  /* [B][H][P][N] when there is no cache */
    void *window, *state;

    if (!model || !args) {
        st = m2_fail(msg, MC_BACKEND_INVALID, "mamba2 reference: forward needs a model and arguments");
        goto cleanup;
    }
    if (args->batch < 1 || args->len < 1) {
        st = m2_fail(msg, MC_BACKEND_INVALID,
                     "mamba2 reference: forward needs batch >= 1 and len >= 1 (got B=%lld L=%lld)",
                     (long long)args->batch, (long long)args->len);
        goto cleanup;
    }
    if (args->batch > INT_MAX / args->len) {
        st = m2_fail(msg, MC_BACKEND_INVALID, "mamba2 reference: B*L = %lld*%lld exceeds the BLAS limit %d",
                     (long long)args->batch, (long long)args->len, INT_MAX);
        goto cleanup;
    }
    if (!args->x || !args->y) {
        st = m2_fail(msg, MC_BACKEND_INVALID, "mamba2 reference: forward needs x [B][L][D] and y [B][L][D]");
        goto cleanup;
    }
    if (cache && cache->batch != args->batch) {
        st = m2_fail(msg, MC_BACKEND_INVALID, "mamba2 reference: cache batch %lld does not match forward batch %lld",
                     (long long)cache->batch, (long long)args->batch);
        goto cleanup;
    }

    if (cache) {
        if (!cache->primed) { /* case (a) with a cache: start from zeros, fill it */
            memset(cache->window, 0, (size_t)cache->batch * (size_t)m2_window_elems(model) * model->elem_bytes);
            memset(cache->state, 0, (size_t)cache->batch * (size_t)m2_state_elems(model) * model->elem_bytes);
        }
        window = cache->window;
        state = cache->state;
    } else {
        tmp_window = calloc((size_t)args->batch * (size_t)m2_window_elems(model), model->elem_bytes);
        tmp_state = calloc((size_t)args->batch * (size_t)m2_state_elems(model), model->elem_bytes);
        if (!tmp_window || !tmp_state) {
            st = m2_fail(msg, MC_BACKEND_NOMEM,
                         "mamba2 reference: out of memory for a zero window and state of batch %lld",
                         (long long)args->batch);
            goto cleanup;
        }
        window = tmp_window;
        state = tmp_state;
    }

    if (model->dtype == MC_DTYPE_F64)
        st = m2_forward_f64(model, window, state, args, msg);
    else
        st = m2_forward_f32(model, window, state, args, msg);
    if (st == MC_BACKEND_OK && cache)
        cache->primed = 1;

cleanup:
    free(tmp_state);
    free(tmp_window);
    return st;
}

static const struct mc_backend_ops m2_ops = {
    .abi_version = MIXCHECK_ABI_VERSION,
    .struct_size = sizeof(struct mc_backend_ops),
    .name = "reference",
    .device = "cpu",
    .family = MC_FAMILY_MAMBA2,
    .dtypes = MC_DTYPE_BIT(MC_DTYPE_F32) | MC_DTYPE_BIT(MC_DTYPE_F64),
    .caps = 0,
    .model_create = m2_model_create,
    .model_destroy = m2_model_destroy,
    .cache_alloc = m2_cache_alloc,
    .cache_copy = m2_cache_copy,
    .cache_free = m2_cache_free,
    .cache_export = m2_cache_export,
    .cache_import = m2_cache_import,
    .forward = m2_forward,
};

const struct mc_backend_ops *mc_reference_mamba2_ops(void)
{
    return &m2_ops;
}
