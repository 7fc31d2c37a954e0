/*
 * gdn.c — the optimized CPU Gated DeltaNet mixer (backend "cpu", device "cpu") behind the backend
 * interface (mixcheck/backend.h), validated against reference/gdn.c by tests/cpu_gdn.
 *
 * Semantics: exactly the reference's (docs/semantics.md §4 with mixcheck's §A): HF Qwen3NextGatedDeltaNet /
 * Qwen3_5GatedDeltaNet, both projection layouts, conv1d without bias + SiLU over the cached K-column
 * window, β = σ(b), g = −exp(A_log)·softplus(a + dt_bias), value head h reads key head h/r,
 * q̂ = l2norm(q)·dk^{-1/2}, k̂ = l2norm(k), gated RMSNorm per head norm before gate, out_proj, no
 * biases. A padding token (mask 0) never reaches the cache and its output row is 0.
 *
 * Variants:
 *   - storage f32 / bf16 / f16 (weights, x, y), f32 compute, f32 cache; cache_export in f32.
 *   - core (gdn_chunk.c): the chunked gated delta rule of §4.4 with chunk length desc->chunk_size
 *     (0: the configuration's, 0 there too: 64); a row with one real token takes the recurrent step.
 *
 * Layout of one forward (M = real tokens over the batch). Every phase is a mc_cpu_parallel_for over
 * tasks that write disjoint outputs, each output computed by the same calls whatever the partition
 * (projection tiles are fixed by the shapes; the core's value-head groups follow the thread count but
 * leave each head's arithmetic unchanged), so the bits do not depend on the thread count:
 *   1. gather the real tokens of every row into x [M][D] (f32): any mask pattern becomes contiguous
 *      spans per row, which is exact because a padding token is invisible to the conv and the state;
 *   2. in_proj: [M][proj] = x · Wᵀ, Wᵀ rows q | k | v | z | b | a (Qwen3-Next de-interleaved once at
 *      model_create), tiled 512 × 512 over (rows, outputs);
 *   3. conv + SiLU per (row, block of 256 channels), the window kept channel-blocked in the cache;
 *   4. gates g, β per token and value head;
 *   5. core per (row, key head, group of its value heads);
 *   6. gated RMSNorm per token and head;
 *   7. out_proj tiled like 2; scatter to y in the storage dtype, padding rows 0.
 *
 * Dimension letters: B batch, L tokens, M real tokens, D hidden, Hk / Hv key / value heads,
 * r = Hv/Hk, dk / dv head dims, K conv width, C = 2·Hk·dk + Hv·dv conv channels,
 * proj = C + Hv·dv + 2·Hv combined projection rows.
 */
#include "cpu.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "common.h"
#include "gdn_internal.h"
#include "stream.h"

enum gdn_weight_slot {
    GDN_W_IN_PROJ_QKV, GDN_W_IN_PROJ_Z, GDN_W_IN_PROJ_B, GDN_W_IN_PROJ_A, /* qwen3_5 */
    GDN_W_IN_PROJ_QKVZ, GDN_W_IN_PROJ_BA,                                 /* qwen3_next */
    GDN_W_CONV, GDN_W_DT_BIAS, GDN_W_A_LOG, GDN_W_NORM, GDN_W_OUT_PROJ,
    GDN_W_COUNT,
};

static const char *const gdn_weight_names[GDN_W_COUNT] = {
    "in_proj_qkv.weight", "in_proj_z.weight", "in_proj_b.weight", "in_proj_a.weight",
    "in_proj_qkvz.weight", "in_proj_ba.weight", "conv1d.weight", "dt_bias", "A_log", "norm.weight",
    "out_proj.weight",
};

struct gdn_weight_spec {
    int present;
    int ndim;
    int64_t dims[3];
};

/* ---- configuration and weights ----------------------------------------------------------------- */

static enum mc_backend_status gdn_config_validate(const struct mc_gdn_config *c, struct mc_msg *msg)
{
    enum mc_backend_status st;
    if ((st = mc_cpu_check_dim(GDN_WHO, "hidden_size", c->hidden_size, GDN_MAX_DIM, msg)) ||
        (st = mc_cpu_check_dim(GDN_WHO, "num_key_heads", c->num_key_heads, GDN_MAX_DIM, msg)) ||
        (st = mc_cpu_check_dim(GDN_WHO, "num_value_heads", c->num_value_heads, GDN_MAX_DIM, msg)) ||
        (st = mc_cpu_check_dim(GDN_WHO, "key_head_dim", c->key_head_dim, GDN_MAX_DIM, msg)) ||
        (st = mc_cpu_check_dim(GDN_WHO, "value_head_dim", c->value_head_dim, GDN_MAX_DIM, msg)) ||
        (st = mc_cpu_check_dim(GDN_WHO, "conv_kernel", c->conv_kernel, GDN_MAX_DIM, msg)))
        return st;
    if (c->conv_kernel > MC_CPU_CONV_MAX_K)
        return mc_cpu_fail(msg, MC_BACKEND_UNSUPPORTED, "gdn cpu: conv_kernel %lld is wider than the supported %d",
                        (long long)c->conv_kernel, MC_CPU_CONV_MAX_K);
    if (c->chunk_size < 0 || c->chunk_size > GDN_MAX_DIM)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID, "gdn cpu config: 'chunk_size' must be in [0, %d] (got %lld)",
                        GDN_MAX_DIM, (long long)c->chunk_size);
    if (c->num_value_heads % c->num_key_heads != 0)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID,
                        "gdn cpu config: 'num_value_heads' (%lld) must be a multiple of 'num_key_heads' (%lld)",
                        (long long)c->num_value_heads, (long long)c->num_key_heads);
    if (c->allow_neg_eigval != 0 && c->allow_neg_eigval != 1)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID, "gdn cpu config: 'allow_neg_eigval' must be 0 or 1 (got %d)",
                        (int)c->allow_neg_eigval);
    if (c->layout != MC_GDN_LAYOUT_QWEN3_5 && c->layout != MC_GDN_LAYOUT_QWEN3_NEXT)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID,
                        "gdn cpu config: 'layout' must be qwen3_5 (%d) or qwen3_next (%d) (got %d)",
                        (int)MC_GDN_LAYOUT_QWEN3_5, (int)MC_GDN_LAYOUT_QWEN3_NEXT, (int)c->layout);
    const int64_t vd = c->num_value_heads * c->value_head_dim;
    const int64_t proj = 2 * c->num_key_heads * c->key_head_dim + 2 * vd + 2 * c->num_value_heads;
    if (proj > INT_MAX)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID, "gdn cpu config: in_proj rows %lld exceed the BLAS limit %d",
                        (long long)proj, INT_MAX);
    if (c->num_value_heads * c->key_head_dim * c->value_head_dim > INT_MAX)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID, "gdn cpu config: recurrent state per batch row exceeds %d elements",
                        INT_MAX);
    if (!(c->rms_norm_eps > 0.0) || !isfinite(c->rms_norm_eps))
        return mc_cpu_fail(msg, MC_BACKEND_INVALID, "gdn cpu config: 'rms_norm_eps' must be finite and > 0 (got %g)",
                        c->rms_norm_eps);
    return MC_BACKEND_OK;
}

static const char *gdn_layout_name(int32_t layout)
{
    return layout == MC_GDN_LAYOUT_QWEN3_5 ? "qwen3_5" : "qwen3_next";
}

static void gdn_weight_specs(const struct mc_model *m, struct gdn_weight_spec spec[GDN_W_COUNT])
{
    const int q35 = m->cfg.layout == MC_GDN_LAYOUT_QWEN3_5;
    const struct gdn_weight_spec s[GDN_W_COUNT] = {
        [GDN_W_IN_PROJ_QKV] = {q35, 2, {m->C, m->D, 0}},
        [GDN_W_IN_PROJ_Z] = {q35, 2, {m->vd, m->D, 0}},
        [GDN_W_IN_PROJ_B] = {q35, 2, {m->Hv, m->D, 0}},
        [GDN_W_IN_PROJ_A] = {q35, 2, {m->Hv, m->D, 0}},
        [GDN_W_IN_PROJ_QKVZ] = {!q35, 2, {m->C + m->vd, m->D, 0}},
        [GDN_W_IN_PROJ_BA] = {!q35, 2, {2 * m->Hv, m->D, 0}},
        [GDN_W_CONV] = {1, 3, {m->C, 1, m->K}},
        [GDN_W_DT_BIAS] = {1, 1, {m->Hv, 0, 0}},
        [GDN_W_A_LOG] = {1, 1, {m->Hv, 0, 0}},
        [GDN_W_NORM] = {1, 1, {m->dv, 0, 0}},
        [GDN_W_OUT_PROJ] = {1, 2, {m->D, m->vd, 0}},
    };
    memcpy(spec, s, sizeof s);
}

static void gdn_shape_format(char *buf, size_t len, int ndim, const int64_t *dims)
{
    int used = snprintf(buf, len, "[");
    for (int i = 0; i < ndim && used > 0 && (size_t)used < len; i++)
        used += snprintf(buf + used, len - (size_t)used, "%s%lld", i ? ", " : "", (long long)dims[i]);
    if (used > 0 && (size_t)used < len)
        snprintf(buf + used, len - (size_t)used, "]");
}

/* Matches desc->weights against the configuration: found[slot] gets each implied weight. */
static enum mc_backend_status gdn_weights_match(const struct mc_model_desc *desc, const struct mc_model *m,
                                                const struct gdn_weight_spec spec[GDN_W_COUNT],
                                                const struct mc_weight *found[GDN_W_COUNT], struct mc_msg *msg)
{
    char want[96], got[96];
    if (desc->n_weights < 0 || (desc->n_weights > 0 && !desc->weights))
        return mc_cpu_fail(msg, MC_BACKEND_INVALID, "gdn cpu: %d weights but no weight array", (int)desc->n_weights);
    for (int32_t i = 0; i < desc->n_weights; i++) {
        const struct mc_weight *w = &desc->weights[i];
        int slot = -1;
        for (int s = 0; w->name && s < GDN_W_COUNT; s++)
            if (strcmp(w->name, gdn_weight_names[s]) == 0)
                slot = s;
        if (!w->name)
            return mc_cpu_fail(msg, MC_BACKEND_INVALID, "gdn cpu: weight %d has no name", (int)i);
        if (slot < 0)
            return mc_cpu_fail(msg, MC_BACKEND_INVALID, "gdn cpu: unknown weight '%s' (GDN has no biases)", w->name);
        if (!spec[slot].present)
            return mc_cpu_fail(msg, MC_BACKEND_INVALID, "gdn cpu: weight '%s' does not belong to the %s layout",
                            w->name, gdn_layout_name(m->cfg.layout));
        if (found[slot])
            return mc_cpu_fail(msg, MC_BACKEND_INVALID, "gdn cpu: weight '%s' given twice", w->name);
        int same = w->ndim == spec[slot].ndim;
        for (int d = 0; same && d < spec[slot].ndim; d++)
            same = w->dims[d] == spec[slot].dims[d];
        gdn_shape_format(want, sizeof want, spec[slot].ndim, spec[slot].dims);
        if (!same) {
            if (w->ndim < 0 || w->ndim > MC_MAX_DIMS)
                snprintf(got, sizeof got, "ndim %d", (int)w->ndim);
            else
                gdn_shape_format(got, sizeof got, w->ndim, w->dims);
            return mc_cpu_fail(msg, MC_BACKEND_INVALID, "gdn cpu: weight '%s': expected shape %s, got %s", w->name,
                            want, got);
        }
        if (!w->data)
            return mc_cpu_fail(msg, MC_BACKEND_INVALID, "gdn cpu: weight '%s' %s has no data", w->name, want);
        found[slot] = w;
    }
    for (int s = 0; s < GDN_W_COUNT; s++) {
        if (spec[s].present && !found[s]) {
            gdn_shape_format(want, sizeof want, spec[s].ndim, spec[s].dims);
            return mc_cpu_fail(msg, MC_BACKEND_INVALID, "gdn cpu: missing weight '%s' (expected shape %s, %s layout)",
                            gdn_weight_names[s], want, gdn_layout_name(m->cfg.layout));
        }
    }
    return MC_BACKEND_OK;
}

/* dst rows d0.. <- `rows` rows of `cols` storage-dtype elements of src from row s0, in f32. */
static void gdn_rows_to_f32(const struct mc_model *m, float *dst, int64_t d0, const void *src, int64_t s0,
                            int64_t rows, int64_t cols)
{
    mc_cpu_to_f32(m->dtype, (const char *)src + (size_t)(s0 * cols) * m->elem_bytes, dst + d0 * cols,
                  (size_t)(rows * cols));
}

/* The combined projection [proj][D], rows q | k | v | z | b | a, from either layout (§4.3). */
static void gdn_proj_build(const struct mc_model *m, const struct mc_weight *found[GDN_W_COUNT], float *proj)
{
    const int64_t C = m->C, vd = m->vd, Hv = m->Hv, D = m->D;
    if (m->cfg.layout == MC_GDN_LAYOUT_QWEN3_5) {
        gdn_rows_to_f32(m, proj, 0, found[GDN_W_IN_PROJ_QKV]->data, 0, C, D);
        gdn_rows_to_f32(m, proj, C, found[GDN_W_IN_PROJ_Z]->data, 0, vd, D);
        gdn_rows_to_f32(m, proj, C + vd, found[GDN_W_IN_PROJ_B]->data, 0, Hv, D);
        gdn_rows_to_f32(m, proj, C + vd + Hv, found[GDN_W_IN_PROJ_A]->data, 0, Hv, D);
        return;
    }
    /* Qwen3-Next: per key head j, qkvz rows [q_j | k_j | v_j (r·dv) | z_j (r·dv)], ba rows [b_j (r) | a_j (r)]. */
    const void *qkvz = found[GDN_W_IN_PROJ_QKVZ]->data, *ba = found[GDN_W_IN_PROJ_BA]->data;
    const int64_t dk = m->dk, r = m->r, rdv = r * m->dv, kd = m->kd, blk = 2 * dk + 2 * rdv;
    for (int64_t j = 0; j < m->Hk; j++) {
        gdn_rows_to_f32(m, proj, j * dk, qkvz, j * blk, dk, D);
        gdn_rows_to_f32(m, proj, kd + j * dk, qkvz, j * blk + dk, dk, D);
        gdn_rows_to_f32(m, proj, 2 * kd + j * rdv, qkvz, j * blk + 2 * dk, rdv, D);
        gdn_rows_to_f32(m, proj, C + j * rdv, qkvz, j * blk + 2 * dk + rdv, rdv, D);
        gdn_rows_to_f32(m, proj, C + vd + j * r, ba, j * 2 * r, r, D);
        gdn_rows_to_f32(m, proj, C + vd + Hv + j * r, ba, j * 2 * r + r, r, D);
    }
}

/* Channel-blocked [C*K] (block at c0: [K][w] at offset c0*K) <- [C][K], and back. */
static void gdn_blocked_from_ck(int64_t C, int64_t K, const float *ck, float *blocked)
{
    for (int64_t c0 = 0; c0 < C; c0 += GDN_CONV_BLOCK) {
        const int64_t w = C - c0 < GDN_CONV_BLOCK ? C - c0 : GDN_CONV_BLOCK;
        for (int64_t c = 0; c < w; c++)
            for (int64_t k = 0; k < K; k++)
                blocked[c0 * K + k * w + c] = ck[(c0 + c) * K + k];
    }
}

static void gdn_blocked_to_ck(int64_t C, int64_t K, const float *blocked, float *ck)
{
    for (int64_t c0 = 0; c0 < C; c0 += GDN_CONV_BLOCK) {
        const int64_t w = C - c0 < GDN_CONV_BLOCK ? C - c0 : GDN_CONV_BLOCK;
        for (int64_t c = 0; c < w; c++)
            for (int64_t k = 0; k < K; k++)
                ck[(c0 + c) * K + k] = blocked[c0 * K + k * w + c];
    }
}

static void gdn_model_destroy(struct mc_model *model)
{
    if (!model)
        return;
    free(model->w_proj);
    free(model->w_conv);
    free(model->a_neg);
    free(model->dt_bias);
    free(model->w_norm);
    free(model->w_out);
    mc_cpu_probes_free(model->probes);
    free(model);
}

static enum mc_backend_status gdn_model_create(const struct mc_model_desc *desc, struct mc_model **model,
                                               struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    struct mc_model *m = NULL;
    float *conv_ck = NULL, *a_log = NULL;
    struct gdn_weight_spec spec[GDN_W_COUNT];
    const struct mc_weight *found[GDN_W_COUNT] = {0};

    if ((st = mc_cpu_model_desc_check(desc, model, MC_FAMILY_GDN, "gdn", GDN_WHO, msg)) != MC_BACKEND_OK)
        goto fail;
    if ((st = gdn_config_validate(desc->config, msg)) != MC_BACKEND_OK)
        goto fail;
    if (desc->chunk_size < 0 || desc->chunk_size > GDN_MAX_DIM) {
        st = mc_cpu_fail(msg, MC_BACKEND_INVALID, "gdn cpu: chunk_size must be in [0, %d] (got %lld)", GDN_MAX_DIM,
                      (long long)desc->chunk_size);
        goto fail;
    }
    if ((st = mc_cpu_threads_check(desc, GDN_WHO, msg)) != MC_BACKEND_OK)
        goto fail;

    m = calloc(1, sizeof *m);
    if (!m) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "gdn cpu: out of memory for the model");
        goto fail;
    }
    m->dtype = desc->dtype;
    m->elem_bytes = mc_cpu_dtype_bytes(desc->dtype);
    m->cfg = *(const struct mc_gdn_config *)desc->config;
    m->D = m->cfg.hidden_size;
    m->Hk = m->cfg.num_key_heads;
    m->Hv = m->cfg.num_value_heads;
    m->dk = m->cfg.key_head_dim;
    m->dv = m->cfg.value_head_dim;
    m->K = m->cfg.conv_kernel;
    m->r = m->Hv / m->Hk;
    m->kd = m->Hk * m->dk;
    m->vd = m->Hv * m->dv;
    m->C = 2 * m->kd + m->vd;
    m->proj = m->C + m->vd + 2 * m->Hv;
    m->chunk = desc->chunk_size ? desc->chunk_size : m->cfg.chunk_size ? m->cfg.chunk_size : GDN_DEFAULT_CHUNK;
    m->threads = mc_cpu_threads_resolve(desc->threads);
    m->cache_shape = (struct mc_cpu_cache_shape){
        .channels = m->C,
        .kernel = m->K,
        .state_elems = (size_t)(m->Hv * m->dk * m->dv),
        .to_ck = gdn_blocked_to_ck,
        .from_ck = gdn_blocked_from_ck,
        .import_needs = "conv_state [B][C][K] and recurrent_state [B][Hv][dk][dv] (f32)",
    };

    gdn_weight_specs(m, spec);
    if ((st = gdn_weights_match(desc, m, spec, found, msg)) != MC_BACKEND_OK)
        goto fail;

    m->w_proj = malloc((size_t)(m->proj * m->D) * sizeof(float));
    m->w_conv = malloc((size_t)(m->C * m->K) * sizeof(float));
    m->a_neg = malloc((size_t)m->Hv * sizeof(float));
    m->dt_bias = malloc((size_t)m->Hv * sizeof(float));
    m->w_norm = malloc((size_t)m->dv * sizeof(float));
    m->w_out = malloc((size_t)(m->D * m->vd) * sizeof(float));
    conv_ck = malloc((size_t)(m->C * m->K) * sizeof(float));
    a_log = malloc((size_t)m->Hv * sizeof(float));
    if (!m->w_proj || !m->w_conv || !m->a_neg || !m->dt_bias || !m->w_norm || !m->w_out || !conv_ck || !a_log) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "gdn cpu: out of memory for the f32 weights (D=%lld, proj=%lld)",
                      (long long)m->D, (long long)m->proj);
        goto fail;
    }
    gdn_proj_build(m, found, m->w_proj);
    gdn_rows_to_f32(m, conv_ck, 0, found[GDN_W_CONV]->data, 0, m->C, m->K);
    gdn_blocked_from_ck(m->C, m->K, conv_ck, m->w_conv);
    gdn_rows_to_f32(m, a_log, 0, found[GDN_W_A_LOG]->data, 0, 1, m->Hv);
    for (int64_t h = 0; h < m->Hv; h++)
        m->a_neg[h] = -expf(a_log[h]);
    gdn_rows_to_f32(m, m->dt_bias, 0, found[GDN_W_DT_BIAS]->data, 0, 1, m->Hv);
    gdn_rows_to_f32(m, m->w_norm, 0, found[GDN_W_NORM]->data, 0, 1, m->dv);
    gdn_rows_to_f32(m, m->w_out, 0, found[GDN_W_OUT_PROJ]->data, 0, m->D, m->vd);
    free(a_log);
    free(conv_ck);
    *model = m;
    return MC_BACKEND_OK;

fail:
    free(a_log);
    free(conv_ck);
    gdn_model_destroy(m);
    return st;
}

/* ---- cache ------------------------------------------------------------------------------------- */

MC_CPU_CACHE_OPS(gdn, GDN_WHO)

/* ---- forward ----------------------------------------------------------------------------------- */

/* The ops forward: mc_gdn_cpu_forward (gdn_forward.c) in blocks of whole chunks (stream.h). */
MC_CPU_STREAM_FORWARD(gdn, mc_gdn_cpu_forward, model->chunk, GDN_WHO)

/* The ops forward_packed (gdn_packed.c); it records no probes. */
static enum mc_backend_status gdn_forward_packed(struct mc_model *model, struct mc_cache *pool,
                                                 const struct mc_packed_args *args, struct mc_msg *msg)
{
    if (model)
        mc_cpu_probes_reset(model->probes);
    return mc_gdn_cpu_forward_packed(model, pool, args, msg);
}

MC_CPU_PROBE_OPS(gdn, GDN_WHO)

static const struct mc_backend_ops gdn_ops = {
    .abi_version = MIXCHECK_ABI_VERSION,
    .struct_size = sizeof(struct mc_backend_ops),
    .name = "cpu",
    .device = "cpu",
    .family = MC_FAMILY_GDN,
    .dtypes = MC_DTYPE_BIT(MC_DTYPE_F32) | MC_DTYPE_BIT(MC_DTYPE_BF16) | MC_DTYPE_BIT(MC_DTYPE_F16),
    .caps = MC_CAP_CHUNK_SIZE | MC_CAP_THREADS | MC_CAP_PACKED | MC_CAP_PROBES,
    .model_create = gdn_model_create,
    .model_destroy = gdn_model_destroy,
    .cache_alloc = gdn_cache_alloc,
    .cache_copy = gdn_cache_copy,
    .cache_free = gdn_cache_free,
    .cache_export = gdn_cache_export,
    .cache_import = gdn_cache_import,
    .forward = gdn_forward_streamed,
    .forward_packed = gdn_forward_packed,
    .probe_enable = gdn_probe_enable,
    .probe_read = gdn_probe_read,
};

const struct mc_backend_ops *mc_cpu_gdn_ops(void)
{
    return &gdn_ops;
}
