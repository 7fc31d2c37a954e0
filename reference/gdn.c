/*
 * gdn.c — the reference Gated DeltaNet mixer behind the backend interface (mixcheck/backend.h).
 *
 * Upstream semantics: HF transformers `Qwen3NextGatedDeltaNet` / `Qwen3_5GatedDeltaNet` (post-#47630,
 * torch path, `torch_recurrent_gated_delta_rule` with use_qk_l2norm_in_kernel) as written out in
 * mixers.md §4, with mixcheck's choices of §A: one routine over (window, state, segment) covers the
 * three cases of §1.3 (mixers.md §11); the core is always the exact sequential recurrence of §4.4
 * (chunk_size is only a hint); the gated RMSNorm is per head, norm before gate; a masked token is
 * skipped (it never reaches the conv window or the state) and its output row is zero (GDN has no
 * bias anywhere).
 *
 * Both weight layouts are accepted. Qwen3.5 gives in_proj_qkv | in_proj_z | in_proj_b | in_proj_a;
 * Qwen3-Next gives in_proj_qkvz and in_proj_ba interleaved per key head (§4.3,
 * fix_query_key_value_ordering). The projections have no bias, so de-interleaving the outputs is the
 * same map as permuting the weight rows: model_create stores one projection matrix in the Qwen3.5
 * order [q | k | v | z | b | a] and the forward is the same for both layouts.
 *
 * Plain loops, no SIMD, no threads, except the two projections, which go through OpenBLAS gemm.
 * The math (gdn_impl.inc) is instantiated for float and double; the model dtype picks one.
 *
 * Dimension letters: B batch, L tokens, D hidden, Hk key heads, Hv value heads, r = Hv/Hk, dk key
 * head dim, dv value head dim, K conv width, C = 2*Hk*dk + Hv*dv conv channels,
 * proj = C + Hv*dv + 2*Hv rows of the combined projection.
 */
#include "reference.h"

#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv.h"

/* Sizes above this are refused (the harness applies the same bound to every dimension). */
#define GDN_MAX_DIM 65536

/* eps of the q/k l2norm, inside the rsqrt (mixers.md §4.4); fixed upstream, not a config value. */
#define GDN_L2NORM_EPS 1e-6

enum gdn_weight_slot {
    GDN_W_IN_PROJ_QKV,  /* qwen3_5 */
    GDN_W_IN_PROJ_Z,    /* qwen3_5 */
    GDN_W_IN_PROJ_B,    /* qwen3_5 */
    GDN_W_IN_PROJ_A,    /* qwen3_5 */
    GDN_W_IN_PROJ_QKVZ, /* qwen3_next */
    GDN_W_IN_PROJ_BA,   /* qwen3_next */
    GDN_W_CONV,
    GDN_W_DT_BIAS,
    GDN_W_A_LOG,
    GDN_W_NORM,
    GDN_W_OUT_PROJ,
    GDN_W_COUNT,
};

static const char *const gdn_weight_names[GDN_W_COUNT] = {
    [GDN_W_IN_PROJ_QKV] = "in_proj_qkv.weight",
    [GDN_W_IN_PROJ_Z] = "in_proj_z.weight",
    [GDN_W_IN_PROJ_B] = "in_proj_b.weight",
    [GDN_W_IN_PROJ_A] = "in_proj_a.weight",
    [GDN_W_IN_PROJ_QKVZ] = "in_proj_qkvz.weight",
    [GDN_W_IN_PROJ_BA] = "in_proj_ba.weight",
    [GDN_W_CONV] = "conv1d.weight",
    [GDN_W_DT_BIAS] = "dt_bias",
    [GDN_W_A_LOG] = "A_log",
    [GDN_W_NORM] = "norm.weight",
    [GDN_W_OUT_PROJ] = "out_proj.weight",
};

/* What one weight slot should hold for a configuration. */
struct gdn_weight_spec {
    int present; /* implied by the configuration's layout */
    int ndim;
    int64_t dims[3];
};

/* The parameters the forward reads, owned copies in the model dtype. */
enum gdn_param {
    GDN_P_PROJ, /* [proj][D]: rows q | k | v | z | b | a (Qwen3.5 order, §4.3) */
    GDN_P_CONV, /* [C][K] (conv1d.weight [C][1][K]) */
    GDN_P_DT_BIAS,
    GDN_P_A_LOG,
    GDN_P_NORM,
    GDN_P_OUT_PROJ,
    GDN_P_COUNT,
};

struct mc_model {
    enum mc_dtype dtype; /* F32 or F64: storage and math */
    size_t elem_bytes;
    struct mc_gdn_config cfg;
    /* r = Hv/Hk; key_dim = Hk*dk; value_dim = Hv*dv; C = conv channels; proj = combined rows */
    int64_t D, Hk, Hv, dk, dv, K, r, key_dim, value_dim, C, proj;
    void *p[GDN_P_COUNT];
};

struct mc_cache {
    int64_t batch;
    int primed;   /* a forward or an import has written it */
    void *window; /* [B][C][K] model dtype, the last K pre-conv inputs (mixed_qkv), oldest first */
    void *state;  /* [B][Hv][dk][dv] model dtype */
};

static enum mc_backend_status gdn_fail(struct mc_msg *msg, enum mc_backend_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static enum mc_backend_status gdn_fail(struct mc_msg *msg, enum mc_backend_status st, const char *fmt, ...)
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

#define GDN_CAT_(a, b) a##b
#define GDN_CAT(a, b) GDN_CAT_(a, b)

#define REAL float
#define GDN_FN(name) GDN_CAT(name, _f32)
#define R_EXP expf
#define R_LOG1P log1pf
#define R_SQRT sqrtf
#define R_GEMM cblas_sgemm
#define R_CONV mc_conv_segment_f32
#include "gdn_impl.inc"
#undef REAL
#undef GDN_FN
#undef R_EXP
#undef R_LOG1P
#undef R_SQRT
#undef R_GEMM
#undef R_CONV

#define REAL double
#define GDN_FN(name) GDN_CAT(name, _f64)
#define R_EXP exp
#define R_LOG1P log1p
#define R_SQRT sqrt
#define R_GEMM cblas_dgemm
#define R_CONV mc_conv_segment_f64
#include "gdn_impl.inc"
#undef REAL
#undef GDN_FN
#undef R_EXP
#undef R_LOG1P
#undef R_SQRT
#undef R_GEMM
#undef R_CONV

/* ---- model ------------------------------------------------------------------------------------- */

static const char *gdn_layout_name(int32_t layout)
{
    return layout == MC_GDN_LAYOUT_QWEN3_5 ? "qwen3_5" : layout == MC_GDN_LAYOUT_QWEN3_NEXT ? "qwen3_next" : "?";
}

static void gdn_format_shape(char *buf, size_t len, int ndim, const int64_t *dims)
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

static enum mc_backend_status gdn_check_dim(const char *name, int64_t v, struct mc_msg *msg)
{
    if (v < 1 || v > GDN_MAX_DIM)
        return gdn_fail(msg, MC_BACKEND_INVALID, "gdn config: '%s' must be in [1, %d] (got %lld)", name, GDN_MAX_DIM,
                        (long long)v);
    return MC_BACKEND_OK;
}

static enum mc_backend_status gdn_config_validate(const struct mc_gdn_config *c, struct mc_msg *msg)
{
    enum mc_backend_status st;
    if ((st = gdn_check_dim("hidden_size", c->hidden_size, msg)) ||
        (st = gdn_check_dim("num_key_heads", c->num_key_heads, msg)) ||
        (st = gdn_check_dim("num_value_heads", c->num_value_heads, msg)) ||
        (st = gdn_check_dim("key_head_dim", c->key_head_dim, msg)) ||
        (st = gdn_check_dim("value_head_dim", c->value_head_dim, msg)) ||
        (st = gdn_check_dim("conv_kernel", c->conv_kernel, msg)))
        return st;
    if (c->chunk_size < 0)
        return gdn_fail(msg, MC_BACKEND_INVALID, "gdn config: 'chunk_size' must be >= 0 (got %lld)",
                        (long long)c->chunk_size);
    if (c->num_value_heads % c->num_key_heads != 0)
        return gdn_fail(msg, MC_BACKEND_INVALID,
                        "gdn config: 'num_value_heads' (%lld) must be a multiple of 'num_key_heads' (%lld)",
                        (long long)c->num_value_heads, (long long)c->num_key_heads);
    if (c->layout != MC_GDN_LAYOUT_QWEN3_5 && c->layout != MC_GDN_LAYOUT_QWEN3_NEXT)
        return gdn_fail(msg, MC_BACKEND_INVALID,
                        "gdn config: 'layout' must be qwen3_5 (%d) or qwen3_next (%d) (got %d)",
                        (int)MC_GDN_LAYOUT_QWEN3_5, (int)MC_GDN_LAYOUT_QWEN3_NEXT, (int)c->layout);
    const int64_t value_dim = c->num_value_heads * c->value_head_dim;
    const int64_t proj = 2 * c->num_key_heads * c->key_head_dim + 2 * value_dim + 2 * c->num_value_heads;
    if (proj > INT_MAX)
        return gdn_fail(msg, MC_BACKEND_INVALID, "gdn config: in_proj rows %lld exceed the BLAS limit %d",
                        (long long)proj, INT_MAX);
    const int64_t state_elems = c->num_value_heads * c->key_head_dim * c->value_head_dim;
    if (state_elems > INT_MAX)
        return gdn_fail(msg, MC_BACKEND_INVALID,
                        "gdn config: recurrent state of %lld elements per batch row exceeds the limit %d",
                        (long long)state_elems, INT_MAX);
    if (!(c->rms_norm_eps > 0.0) || !isfinite(c->rms_norm_eps))
        return gdn_fail(msg, MC_BACKEND_INVALID, "gdn config: 'rms_norm_eps' must be finite and > 0 (got %g)",
                        c->rms_norm_eps);
    return MC_BACKEND_OK;
}

static void gdn_weight_specs(const struct mc_model *m, struct gdn_weight_spec spec[GDN_W_COUNT])
{
    const int q35 = m->cfg.layout == MC_GDN_LAYOUT_QWEN3_5;
    memset(spec, 0, sizeof(struct gdn_weight_spec) * GDN_W_COUNT);
#define GDN_SPEC(slot, on, nd, d0, d1, d2)                                                                             \
    (spec[slot] = (struct gdn_weight_spec){.present = (on), .ndim = (nd), .dims = {(d0), (d1), (d2)}})
    GDN_SPEC(GDN_W_IN_PROJ_QKV, q35, 2, m->C, m->D, 0);
    GDN_SPEC(GDN_W_IN_PROJ_Z, q35, 2, m->value_dim, m->D, 0);
    GDN_SPEC(GDN_W_IN_PROJ_B, q35, 2, m->Hv, m->D, 0);
    GDN_SPEC(GDN_W_IN_PROJ_A, q35, 2, m->Hv, m->D, 0);
    GDN_SPEC(GDN_W_IN_PROJ_QKVZ, !q35, 2, m->C + m->value_dim, m->D, 0);
    GDN_SPEC(GDN_W_IN_PROJ_BA, !q35, 2, 2 * m->Hv, m->D, 0);
    GDN_SPEC(GDN_W_CONV, 1, 3, m->C, 1, m->K);
    GDN_SPEC(GDN_W_DT_BIAS, 1, 1, m->Hv, 0, 0);
    GDN_SPEC(GDN_W_A_LOG, 1, 1, m->Hv, 0, 0);
    GDN_SPEC(GDN_W_NORM, 1, 1, m->dv, 0, 0);
    GDN_SPEC(GDN_W_OUT_PROJ, 1, 2, m->D, m->value_dim, 0);
#undef GDN_SPEC
}

static int64_t gdn_spec_elems(const struct gdn_weight_spec *s)
{
    int64_t n = 1;
    for (int i = 0; i < s->ndim; i++)
        n *= s->dims[i];
    return n;
}

/* Checks desc->weights against the configuration; on success found[slot] is the weight in each slot
 * the configuration implies. */
static enum mc_backend_status gdn_weights_match(const struct mc_model_desc *desc, int32_t layout,
                                                const struct gdn_weight_spec spec[GDN_W_COUNT],
                                                const struct mc_weight *found[GDN_W_COUNT], struct mc_msg *msg)
{
    char want[96], got[96];
    if (desc->n_weights < 0 || (desc->n_weights > 0 && !desc->weights))
        return gdn_fail(msg, MC_BACKEND_INVALID, "gdn reference: %d weights but no weight array", (int)desc->n_weights);
    for (int32_t i = 0; i < desc->n_weights; i++) {
        const struct mc_weight *w = &desc->weights[i];
        if (!w->name)
            return gdn_fail(msg, MC_BACKEND_INVALID, "gdn reference: weight %d has no name", (int)i);
        int slot = -1;
        for (int s = 0; s < GDN_W_COUNT; s++)
            if (strcmp(w->name, gdn_weight_names[s]) == 0)
                slot = s;
        if (slot < 0)
            return gdn_fail(msg, MC_BACKEND_INVALID, "gdn reference: unknown weight '%s' (GDN has no biases)",
                            w->name);
        if (!spec[slot].present)
            return gdn_fail(msg, MC_BACKEND_INVALID,
                            "gdn reference: weight '%s' belongs to the %s layout, the configuration's layout is %s",
                            w->name, gdn_layout_name(layout == MC_GDN_LAYOUT_QWEN3_5 ? MC_GDN_LAYOUT_QWEN3_NEXT
                                                                                     : MC_GDN_LAYOUT_QWEN3_5),
                            gdn_layout_name(layout));
        if (found[slot])
            return gdn_fail(msg, MC_BACKEND_INVALID, "gdn reference: weight '%s' given twice", w->name);
        gdn_format_shape(want, sizeof want, spec[slot].ndim, spec[slot].dims);
        int same = w->ndim == spec[slot].ndim;
        for (int d = 0; same && d < spec[slot].ndim; d++)
            same = w->dims[d] == spec[slot].dims[d];
        if (!same) {
            if (w->ndim < 0 || w->ndim > MC_MAX_DIMS)
                snprintf(got, sizeof got, "ndim %d", (int)w->ndim);
            else
                gdn_format_shape(got, sizeof got, w->ndim, w->dims);
            return gdn_fail(msg, MC_BACKEND_INVALID, "gdn reference: weight '%s': expected shape %s, got %s", w->name,
                            want, got);
        }
        if (!w->data)
            return gdn_fail(msg, MC_BACKEND_INVALID, "gdn reference: weight '%s' %s has no data", w->name, want);
        found[slot] = w;
    }
    for (int s = 0; s < GDN_W_COUNT; s++) {
        if (spec[s].present && !found[s]) {
            gdn_format_shape(want, sizeof want, spec[s].ndim, spec[s].dims);
            return gdn_fail(msg, MC_BACKEND_INVALID,
                            "gdn reference: missing weight '%s' (expected shape %s, %s layout)", gdn_weight_names[s],
                            want, gdn_layout_name(layout));
        }
    }
    return MC_BACKEND_OK;
}

/* Copies `rows` rows of D elements from src row s0 to dst row d0. */
static void gdn_rows_copy(const struct mc_model *m, void *dst, int64_t d0, const void *src, int64_t s0, int64_t rows)
{
    const size_t row_bytes = (size_t)m->D * m->elem_bytes;
    memcpy((char *)dst + (size_t)d0 * row_bytes, (const char *)src + (size_t)s0 * row_bytes, (size_t)rows * row_bytes);
}

/* Fills the combined projection [proj][D] in the order q | k | v | z | b | a from either layout. */
static void gdn_proj_build(const struct mc_model *m, const struct mc_weight *found[GDN_W_COUNT], void *proj)
{
    const int64_t C = m->C, vd = m->value_dim, Hv = m->Hv;
    if (m->cfg.layout == MC_GDN_LAYOUT_QWEN3_5) {
        gdn_rows_copy(m, proj, 0, found[GDN_W_IN_PROJ_QKV]->data, 0, C);
        gdn_rows_copy(m, proj, C, found[GDN_W_IN_PROJ_Z]->data, 0, vd);
        gdn_rows_copy(m, proj, C + vd, found[GDN_W_IN_PROJ_B]->data, 0, Hv);
        gdn_rows_copy(m, proj, C + vd + Hv, found[GDN_W_IN_PROJ_A]->data, 0, Hv);
        return;
    }
    /* Qwen3-Next (§4.3): per key head j, qkvz rows [q_j (dk) | k_j (dk) | v_j (r*dv) | z_j (r*dv)] and
     * ba rows [b_j (r) | a_j (r)]; value head j*r + s, so v_j and z_j are value heads j*r..j*r+r-1. */
    const void *qkvz = found[GDN_W_IN_PROJ_QKVZ]->data; /* [Hk][2dk + 2r*dv][D] */
    const void *ba = found[GDN_W_IN_PROJ_BA]->data;     /* [Hk][2r][D] */
    const int64_t dk = m->dk, r = m->r, rdv = m->r * m->dv, kd = m->key_dim;
    const int64_t blk = 2 * dk + 2 * rdv;
    for (int64_t j = 0; j < m->Hk; j++) {
        gdn_rows_copy(m, proj, j * dk, qkvz, j * blk, dk);
        gdn_rows_copy(m, proj, kd + j * dk, qkvz, j * blk + dk, dk);
        gdn_rows_copy(m, proj, 2 * kd + j * rdv, qkvz, j * blk + 2 * dk, rdv);
        gdn_rows_copy(m, proj, C + j * rdv, qkvz, j * blk + 2 * dk + rdv, rdv);
        gdn_rows_copy(m, proj, C + vd + j * r, ba, j * 2 * r, r);
        gdn_rows_copy(m, proj, C + vd + Hv + j * r, ba, j * 2 * r + r, r);
    }
}

static void gdn_model_destroy(struct mc_model *model)
{
    if (!model)
        return;
    for (int p = 0; p < GDN_P_COUNT; p++)
        free(model->p[p]);
    free(model);
}

static enum mc_backend_status gdn_model_create(const struct mc_model_desc *desc, struct mc_model **model,
                                               struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    struct mc_model *m = NULL;
    struct gdn_weight_spec spec[GDN_W_COUNT];
    const struct mc_weight *found[GDN_W_COUNT] = {0};

    if (!desc || !model) {
        st = gdn_fail(msg, MC_BACKEND_INVALID, "gdn reference: model_create needs a descriptor and an output handle");
        goto fail;
    }
    *model = NULL;
    if (desc->family != MC_FAMILY_GDN) {
        st = gdn_fail(msg, MC_BACKEND_INVALID, "gdn reference: descriptor family is %d, expected gdn (%d)",
                      (int)desc->family, (int)MC_FAMILY_GDN);
        goto fail;
    }
    if (desc->dtype != MC_DTYPE_F32 && desc->dtype != MC_DTYPE_F64) {
        const int known = desc->dtype == MC_DTYPE_F16 || desc->dtype == MC_DTYPE_BF16;
        st = gdn_fail(msg, known ? MC_BACKEND_UNSUPPORTED : MC_BACKEND_INVALID,
                      "gdn reference: dtype %d %s (supported: f32, f64)", (int)desc->dtype,
                      known ? "is not supported" : "is not a known dtype");
        goto fail;
    }
    if (!desc->config) {
        st = gdn_fail(msg, MC_BACKEND_INVALID, "gdn reference: descriptor has no configuration");
        goto fail;
    }
    if ((st = gdn_config_validate(desc->config, msg)) != MC_BACKEND_OK)
        goto fail;

    m = calloc(1, sizeof *m);
    if (!m) {
        st = gdn_fail(msg, MC_BACKEND_NOMEM, "gdn reference: out of memory for the model");
        goto fail;
    }
    m->dtype = desc->dtype;
    m->elem_bytes = desc->dtype == MC_DTYPE_F64 ? sizeof(double) : sizeof(float);
    m->cfg = *(const struct mc_gdn_config *)desc->config;
    m->D = m->cfg.hidden_size;
    m->Hk = m->cfg.num_key_heads;
    m->Hv = m->cfg.num_value_heads;
    m->dk = m->cfg.key_head_dim;
    m->dv = m->cfg.value_head_dim;
    m->K = m->cfg.conv_kernel;
    m->r = m->Hv / m->Hk;
    m->key_dim = m->Hk * m->dk;
    m->value_dim = m->Hv * m->dv;
    m->C = 2 * m->key_dim + m->value_dim;
    m->proj = m->C + m->value_dim + 2 * m->Hv;

    gdn_weight_specs(m, spec);
    if ((st = gdn_weights_match(desc, m->cfg.layout, spec, found, msg)) != MC_BACKEND_OK)
        goto fail;

    /* Owned copies: the combined projection, then the weights the forward reads as given. */
    static const struct {
        enum gdn_param param;
        enum gdn_weight_slot slot;
    } direct[] = {
        {GDN_P_CONV, GDN_W_CONV},   {GDN_P_DT_BIAS, GDN_W_DT_BIAS}, {GDN_P_A_LOG, GDN_W_A_LOG},
        {GDN_P_NORM, GDN_W_NORM},   {GDN_P_OUT_PROJ, GDN_W_OUT_PROJ},
    };
    const size_t proj_bytes = (size_t)m->proj * (size_t)m->D * m->elem_bytes;
    m->p[GDN_P_PROJ] = malloc(proj_bytes);
    if (!m->p[GDN_P_PROJ]) {
        st = gdn_fail(msg, MC_BACKEND_NOMEM, "gdn reference: out of memory for the input projection (%zu bytes)",
                      proj_bytes);
        goto fail;
    }
    gdn_proj_build(m, found, m->p[GDN_P_PROJ]);
    for (size_t i = 0; i < sizeof direct / sizeof direct[0]; i++) {
        const enum gdn_weight_slot s = direct[i].slot;
        const size_t bytes = (size_t)gdn_spec_elems(&spec[s]) * m->elem_bytes;
        m->p[direct[i].param] = malloc(bytes);
        if (!m->p[direct[i].param]) {
            st = gdn_fail(msg, MC_BACKEND_NOMEM, "gdn reference: out of memory copying weight '%s' (%zu bytes)",
                          gdn_weight_names[s], bytes);
            goto fail;
        }
        memcpy(m->p[direct[i].param], found[s]->data, bytes);
    }
    *model = m;
    return MC_BACKEND_OK;

fail:
    gdn_model_destroy(m);
    return st;
}

/* ---- cache ------------------------------------------------------------------------------------- */

static int64_t gdn_window_elems(const struct mc_model *m)
{
    return m->C * m->K;
}
static int64_t gdn_state_elems(const struct mc_model *m)
{
    return m->Hv * m->dk * m->dv;
}

static void gdn_cache_free(struct mc_model *model, struct mc_cache *cache)
{
    (void)model;
    if (!cache)
        return;
    free(cache->state);
    free(cache->window);
    free(cache);
}

static enum mc_backend_status gdn_cache_alloc(struct mc_model *model, int64_t batch, struct mc_cache **cache,
                                              struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    struct mc_cache *c = NULL;
    if (!model || !cache) {
        st = gdn_fail(msg, MC_BACKEND_INVALID, "gdn reference: cache_alloc needs a model and an output handle");
        goto fail;
    }
    *cache = NULL;
    if (batch < 1 || batch > INT_MAX) {
        st = gdn_fail(msg, MC_BACKEND_INVALID, "gdn reference: cache batch must be in [1, %d] (got %lld)", INT_MAX,
                      (long long)batch);
        goto fail;
    }
    c = calloc(1, sizeof *c);
    if (!c) {
        st = gdn_fail(msg, MC_BACKEND_NOMEM, "gdn reference: out of memory for a cache");
        goto fail;
    }
    c->batch = batch;
    c->window = calloc((size_t)batch * (size_t)gdn_window_elems(model), model->elem_bytes);
    c->state = calloc((size_t)batch * (size_t)gdn_state_elems(model), model->elem_bytes);
    if (!c->window || !c->state) {
        st = gdn_fail(msg, MC_BACKEND_NOMEM, "gdn reference: out of memory for a cache of batch %lld",
                      (long long)batch);
        goto fail;
    }
    *cache = c;
    return MC_BACKEND_OK;

fail:
    gdn_cache_free(model, c);
    return st;
}

static enum mc_backend_status gdn_cache_copy(struct mc_model *model, struct mc_cache *dst, const struct mc_cache *src,
                                             struct mc_msg *msg)
{
    if (!model || !dst || !src)
        return gdn_fail(msg, MC_BACKEND_INVALID, "gdn reference: cache_copy needs a model, a destination and a source");
    if (dst->batch != src->batch)
        return gdn_fail(msg, MC_BACKEND_INVALID,
                        "gdn reference: cache_copy batch mismatch (destination %lld, source %lld)",
                        (long long)dst->batch, (long long)src->batch);
    if (dst == src)
        return MC_BACKEND_OK;
    memcpy(dst->window, src->window, (size_t)src->batch * (size_t)gdn_window_elems(model) * model->elem_bytes);
    memcpy(dst->state, src->state, (size_t)src->batch * (size_t)gdn_state_elems(model) * model->elem_bytes);
    dst->primed = src->primed;
    return MC_BACKEND_OK;
}

static enum mc_backend_status gdn_cache_export(struct mc_model *model, const struct mc_cache *cache, void *conv_state,
                                               void *recurrent_state, struct mc_msg *msg)
{
    if (!model || !cache)
        return gdn_fail(msg, MC_BACKEND_INVALID, "gdn reference: cache_export needs a model and a cache");
    /* The export dtype (f64 for an f64 model, else f32) is the model dtype here. A NULL output is
     * skipped, so a caller may fetch only the window or only the state. */
    if (conv_state)
        memcpy(conv_state, cache->window, (size_t)cache->batch * (size_t)gdn_window_elems(model) * model->elem_bytes);
    if (recurrent_state)
        memcpy(recurrent_state, cache->state,
               (size_t)cache->batch * (size_t)gdn_state_elems(model) * model->elem_bytes);
    return MC_BACKEND_OK;
}

static enum mc_backend_status gdn_cache_import(struct mc_model *model, struct mc_cache *cache, const void *conv_state,
                                               const void *recurrent_state, struct mc_msg *msg)
{
    if (!model || !cache)
        return gdn_fail(msg, MC_BACKEND_INVALID, "gdn reference: cache_import needs a model and a cache");
    if (!conv_state || !recurrent_state)
        return gdn_fail(msg, MC_BACKEND_INVALID,
                        "gdn reference: cache_import needs conv_state [B][C][K] and recurrent_state [B][Hv][dk][dv]");
    memcpy(cache->window, conv_state, (size_t)cache->batch * (size_t)gdn_window_elems(model) * model->elem_bytes);
    memcpy(cache->state, recurrent_state, (size_t)cache->batch * (size_t)gdn_state_elems(model) * model->elem_bytes);
    cache->primed = 1;
    return MC_BACKEND_OK;
}

/* ---- forward ----------------------------------------------------------------------------------- */

static enum mc_backend_status gdn_forward(struct mc_model *model, struct mc_cache *cache,
                                          const struct mc_forward_args *args, struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    void *tmp_window = NULL; /* [B][C][K] when there is no cache */
    void *tmp_state = NULL;  /* [B][Hv][dk][dv] when there is no cache */
    void *window, *state;

    if (!model || !args) {
        st = gdn_fail(msg, MC_BACKEND_INVALID, "gdn reference: forward needs a model and arguments");
        goto cleanup;
    }
    if (args->batch < 1 || args->len < 1) {
        st = gdn_fail(msg, MC_BACKEND_INVALID, "gdn reference: forward needs batch >= 1 and len >= 1 (got B=%lld L=%lld)",
                      (long long)args->batch, (long long)args->len);
        goto cleanup;
    }
    if (args->batch > INT_MAX / args->len) {
        st = gdn_fail(msg, MC_BACKEND_INVALID, "gdn reference: B*L = %lld*%lld exceeds the BLAS limit %d",
                      (long long)args->batch, (long long)args->len, INT_MAX);
        goto cleanup;
    }
    if (!args->x || !args->y) {
        st = gdn_fail(msg, MC_BACKEND_INVALID, "gdn reference: forward needs x [B][L][D] and y [B][L][D]");
        goto cleanup;
    }
    if (cache && cache->batch != args->batch) {
        st = gdn_fail(msg, MC_BACKEND_INVALID, "gdn reference: cache batch %lld does not match forward batch %lld",
                      (long long)cache->batch, (long long)args->batch);
        goto cleanup;
    }

    if (cache) {
        if (!cache->primed) { /* case (a) with a cache: start from zeros, fill it */
            memset(cache->window, 0, (size_t)cache->batch * (size_t)gdn_window_elems(model) * model->elem_bytes);
            memset(cache->state, 0, (size_t)cache->batch * (size_t)gdn_state_elems(model) * model->elem_bytes);
        }
        window = cache->window;
        state = cache->state;
    } else {
        tmp_window = calloc((size_t)args->batch * (size_t)gdn_window_elems(model), model->elem_bytes);
        tmp_state = calloc((size_t)args->batch * (size_t)gdn_state_elems(model), model->elem_bytes);
        if (!tmp_window || !tmp_state) {
            st = gdn_fail(msg, MC_BACKEND_NOMEM, "gdn reference: out of memory for a zero window and state of batch %lld",
                          (long long)args->batch);
            goto cleanup;
        }
        window = tmp_window;
        state = tmp_state;
    }

    if (model->dtype == MC_DTYPE_F64)
        st = gdn_forward_f64(model, window, state, args, msg);
    else
        st = gdn_forward_f32(model, window, state, args, msg);
    if (st == MC_BACKEND_OK && cache)
        cache->primed = 1;

cleanup:
    free(tmp_state);
    free(tmp_window);
    return st;
}

static const struct mc_backend_ops gdn_ops = {
    .abi_version = MIXCHECK_ABI_VERSION,
    .struct_size = sizeof(struct mc_backend_ops),
    .name = "reference",
    .device = "cpu",
    .family = MC_FAMILY_GDN,
    .dtypes = MC_DTYPE_BIT(MC_DTYPE_F32) | MC_DTYPE_BIT(MC_DTYPE_F64),
    .caps = 0,
    .model_create = gdn_model_create,
    .model_destroy = gdn_model_destroy,
    .cache_alloc = gdn_cache_alloc,
    .cache_copy = gdn_cache_copy,
    .cache_free = gdn_cache_free,
    .cache_export = gdn_cache_export,
    .cache_import = gdn_cache_import,
    .forward = gdn_forward,
};

const struct mc_backend_ops *mc_reference_gdn_ops(void)
{
    return &gdn_ops;
}
