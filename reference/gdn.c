/*
 * gdn.c — the reference Gated DeltaNet mixer behind the backend interface (mixcheck/backend.h).
 *
 * Upstream semantics: HF transformers `Qwen3NextGatedDeltaNet` / `Qwen3_5GatedDeltaNet` (post-#47630,
 * torch path, `torch_recurrent_gated_delta_rule` with use_qk_l2norm_in_kernel) as written out in
 * docs/semantics.md §4, with mixcheck's choices of §A: one routine over (window, state, segment) covers the
 * three cases of §1.3 (docs/semantics.md §11); the core is always the exact sequential recurrence of §4.4
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
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "conv.h"
#include "ref_common.h"
#include "ref_ops.h"

/* eps of the q/k l2norm, inside the rsqrt (docs/semantics.md §4.4); fixed upstream, not a config value. */
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
    struct mc_ref_model ref; /* first: dtype, window [C][K] and state [Hv][dk][dv] per row, w[GDN_P_COUNT] */
    struct mc_gdn_config cfg;
    /* r = Hv/Hk; key_dim = Hk*dk; value_dim = Hv*dv; C = conv channels; proj = combined rows */
    int64_t D, Hk, Hv, dk, dv, K, r, key_dim, value_dim, C, proj;
};

_Static_assert(offsetof(struct mc_model, ref) == 0, "struct mc_ref_model must come first");
_Static_assert(GDN_P_COUNT <= MC_REF_MAX_WEIGHTS, "too many parameters");

/* ---- the math, once per real type ------------------------------------------------------------ */

#define REF_IMPL "gdn_impl.inc"
#include "ref_instantiate.inc"
#undef REF_IMPL

static const struct mc_ref_family gdn_family = {
    .name = "gdn",
    .family = MC_FAMILY_GDN,
    .n_weights = GDN_W_COUNT,
    .weight_names = gdn_weight_names,
    .unknown_note = " (GDN has no biases)",
    .window_shape = "[B][C][K]",
    .state_shape = "[B][Hv][dk][dv]",
    .forward_f32 = gdn_forward_f32,
    .forward_f64 = gdn_forward_f64,
};

/* ---- model ------------------------------------------------------------------------------------- */

static enum mc_backend_status gdn_config_validate(const struct mc_gdn_config *c, struct mc_msg *msg)
{
    enum mc_backend_status st;
    if ((st = mc_ref_check_dim("gdn", "hidden_size", c->hidden_size, msg)) ||
        (st = mc_ref_check_dim("gdn", "num_key_heads", c->num_key_heads, msg)) ||
        (st = mc_ref_check_dim("gdn", "num_value_heads", c->num_value_heads, msg)) ||
        (st = mc_ref_check_dim("gdn", "key_head_dim", c->key_head_dim, msg)) ||
        (st = mc_ref_check_dim("gdn", "value_head_dim", c->value_head_dim, msg)) ||
        (st = mc_ref_check_dim("gdn", "conv_kernel", c->conv_kernel, msg)))
        return st;
    if (c->chunk_size < 0)
        return mc_ref_fail(msg, MC_BACKEND_INVALID, "gdn config: 'chunk_size' must be >= 0 (got %lld)",
                           (long long)c->chunk_size);
    if (c->num_value_heads % c->num_key_heads != 0)
        return mc_ref_fail(msg, MC_BACKEND_INVALID,
                           "gdn config: 'num_value_heads' (%lld) must be a multiple of 'num_key_heads' (%lld)",
                           (long long)c->num_value_heads, (long long)c->num_key_heads);
    if (c->layout != MC_GDN_LAYOUT_QWEN3_5 && c->layout != MC_GDN_LAYOUT_QWEN3_NEXT)
        return mc_ref_fail(msg, MC_BACKEND_INVALID,
                           "gdn config: 'layout' must be qwen3_5 (%d) or qwen3_next (%d) (got %d)",
                           (int)MC_GDN_LAYOUT_QWEN3_5, (int)MC_GDN_LAYOUT_QWEN3_NEXT, (int)c->layout);
    const int64_t value_dim = c->num_value_heads * c->value_head_dim;
    const int64_t proj = 2 * c->num_key_heads * c->key_head_dim + 2 * value_dim + 2 * c->num_value_heads;
    if (proj > INT_MAX)
        return mc_ref_fail(msg, MC_BACKEND_INVALID, "gdn config: in_proj rows %lld exceed the BLAS limit %d",
                           (long long)proj, INT_MAX);
    const int64_t state_elems = c->num_value_heads * c->key_head_dim * c->value_head_dim;
    if (state_elems > INT_MAX)
        return mc_ref_fail(msg, MC_BACKEND_INVALID,
                           "gdn config: recurrent state of %lld elements per batch row exceeds the limit %d",
                           (long long)state_elems, INT_MAX);
    if (!(c->rms_norm_eps > 0.0) || !isfinite(c->rms_norm_eps))
        return mc_ref_fail(msg, MC_BACKEND_INVALID, "gdn config: 'rms_norm_eps' must be finite and > 0 (got %g)",
                           c->rms_norm_eps);
    return MC_BACKEND_OK;
}

/* The slots of the configuration's layout; *missing_note names that layout for the messages. */
static void gdn_weight_specs(const struct mc_model *m, struct mc_ref_weight_spec spec[GDN_W_COUNT],
                             const char **missing_note)
{
    const int q35 = m->cfg.layout == MC_GDN_LAYOUT_QWEN3_5;
    const char *other = q35 ? "belongs to the qwen3_next layout, the configuration's layout is qwen3_5"
                            : "belongs to the qwen3_5 layout, the configuration's layout is qwen3_next";
    *missing_note = q35 ? ", qwen3_5 layout" : ", qwen3_next layout";
    memset(spec, 0, sizeof(struct mc_ref_weight_spec) * GDN_W_COUNT);
#define GDN_SPEC(slot, on, nd, d0, d1, d2)                                                                             \
    (spec[slot] =                                                                                                      \
         (struct mc_ref_weight_spec){.present = (on), .ndim = (nd), .dims = {(d0), (d1), (d2)}, .absent_why = other})
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

/* Copies `rows` rows of D elements from src row s0 to dst row d0. */
static void gdn_rows_copy(const struct mc_model *m, void *dst, int64_t d0, const void *src, int64_t s0, int64_t rows)
{
    const size_t row_bytes = (size_t)m->D * m->ref.elem_bytes;
    memcpy((char *)dst + (size_t)d0 * row_bytes, (const char *)src + (size_t)s0 * row_bytes, (size_t)rows * row_bytes);
}

/* Fills the combined projection [proj][D] in the order q | k | v | z | b | a from either layout. */
static void gdn_proj_build(const struct mc_model *m, const struct mc_weight **found, void *proj)
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

static enum mc_backend_status gdn_model_create(const struct mc_model_desc *desc, struct mc_model **model,
                                               struct mc_msg *msg)
{
    enum mc_backend_status st;
    struct mc_model *m = NULL;
    struct mc_ref_weight_spec spec[GDN_W_COUNT];
    const struct mc_weight *found[GDN_W_COUNT] = {0};
    const char *missing_note;

    if ((st = mc_ref_desc_check(&gdn_family, desc, model, msg)) != MC_BACKEND_OK ||
        (st = gdn_config_validate(desc->config, msg)) != MC_BACKEND_OK)
        goto fail;
    m = mc_ref_model_alloc(&gdn_family, sizeof *m, desc->dtype, &st, msg);
    if (!m)
        goto fail;
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
    m->ref.window_elems = m->C * m->K;
    m->ref.state_elems = m->Hv * m->dk * m->dv;
    m->ref.hidden = m->D;

    gdn_weight_specs(m, spec, &missing_note);
    if ((st = mc_ref_weights_match(&gdn_family, desc, spec, missing_note, found, msg)) != MC_BACKEND_OK)
        goto fail;

    /* Owned copies: the combined projection, then the weights the forward reads as given. */
    static const struct {
        enum gdn_param param;
        enum gdn_weight_slot slot;
    } direct[] = {
        {GDN_P_CONV, GDN_W_CONV}, {GDN_P_DT_BIAS, GDN_W_DT_BIAS},   {GDN_P_A_LOG, GDN_W_A_LOG},
        {GDN_P_NORM, GDN_W_NORM}, {GDN_P_OUT_PROJ, GDN_W_OUT_PROJ},
    };
    const size_t proj_bytes = (size_t)m->proj * (size_t)m->D * m->ref.elem_bytes;
    m->ref.w[GDN_P_PROJ] = malloc(proj_bytes);
    if (!m->ref.w[GDN_P_PROJ]) {
        st = mc_ref_fail(msg, MC_BACKEND_NOMEM, "gdn reference: out of memory for the input projection (%zu bytes)",
                         proj_bytes);
        goto fail;
    }
    gdn_proj_build(m, found, m->ref.w[GDN_P_PROJ]);
    for (size_t i = 0; i < sizeof direct / sizeof direct[0]; i++) {
        const enum gdn_weight_slot s = direct[i].slot;
        st = mc_ref_weight_copy(&gdn_family, m, gdn_weight_names[s], &spec[s], found[s]->data,
                                &m->ref.w[direct[i].param], msg);
        if (st != MC_BACKEND_OK)
            goto fail;
    }
    *model = m;
    return MC_BACKEND_OK;

fail:
    mc_ref_model_destroy(m);
    return st;
}

/* ---- the backend interface: the shared cache and forward, with this family's messages ----------- */

MC_REF_OPS_ENTRIES(gdn, gdn_family)
MC_REF_PROBE_ENTRIES(gdn, gdn_family)

static const struct mc_backend_ops gdn_ops = {
    MC_REF_OPS_FIELDS(gdn, MC_FAMILY_GDN),
    .caps = MC_CAP_PACKED | MC_CAP_PROBES,
    .model_create = gdn_model_create,
    .model_destroy = mc_ref_model_destroy,
    .probe_enable = gdn_probe_enable,
    .probe_read = gdn_probe_read,
};

const struct mc_backend_ops *mc_reference_gdn_ops(void)
{
    return &gdn_ops;
}
