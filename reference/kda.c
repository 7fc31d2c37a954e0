/*
 * kda.c — the reference Kimi Delta Attention mixer behind the backend interface (mixcheck/backend.h).
 *
 * Upstream semantics: HF transformers `KimiDeltaAttention` (modeling_kimi_linear.py, 5.24; FLA's
 * `fused_recurrent_kda` with use_qk_l2norm_in_kernel) as written out in docs/semantics.md §14, with
 * mixcheck's choices of §A and §14.5: one routine over (window, state, segment) covers the three cases of
 * §1.3 (§11); the core is always the exact sequential recurrence (chunk_size is only a hint); the log
 * decay is per key channel; a masked token is skipped (it never reaches the conv window or the state)
 * and its output row is zero (no bias anywhere).
 *
 * The projections have no bias, so the six that read the layer input (q, k, v, f_a, b, g_a) are one
 * matrix [q | k | v | f_a | b | g_a] built in model_create; the low-rank second halves (f_b, g_b) read its
 * rank-d outputs.
 *
 * Plain loops, no SIMD, no threads, except the projections, which go through OpenBLAS gemm. The math
 * (kda_impl.inc) is instantiated for float and double; the model dtype picks one.
 *
 * Dimension letters: B batch, L tokens, D hidden, H heads, d head dim (q, k and v), inner = H*d,
 * K conv width, C = 3*inner conv channels, proj = C + 2*d + H rows of the combined projection.
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

/* eps of the q/k l2norm, x / sqrt(Σx² + eps) (docs/semantics.md §14.3); fixed upstream, not a config value. */
#define KDA_L2NORM_EPS 1e-6

enum kda_weight_slot {
    KDA_W_Q,
    KDA_W_K,
    KDA_W_V,
    KDA_W_CONV,
    KDA_W_F_A,
    KDA_W_F_B,
    KDA_W_DT_BIAS,
    KDA_W_A_LOG,
    KDA_W_B,
    KDA_W_G_A,
    KDA_W_G_B,
    KDA_W_O_NORM,
    KDA_W_O_PROJ,
    KDA_W_COUNT,
};

static const char *const kda_weight_names[KDA_W_COUNT] = {
    [KDA_W_Q] = "q_proj.weight",
    [KDA_W_K] = "k_proj.weight",
    [KDA_W_V] = "v_proj.weight",
    [KDA_W_CONV] = "conv1d.weight",
    [KDA_W_F_A] = "forget_gate.f_a_proj.weight",
    [KDA_W_F_B] = "forget_gate.f_b_proj.weight",
    [KDA_W_DT_BIAS] = "forget_gate.dt_bias",
    [KDA_W_A_LOG] = "forget_gate.A_log",
    [KDA_W_B] = "b_proj.weight",
    [KDA_W_G_A] = "g_a_proj.weight",
    [KDA_W_G_B] = "g_b_proj.weight",
    [KDA_W_O_NORM] = "o_norm.weight",
    [KDA_W_O_PROJ] = "o_proj.weight",
};

/* The parameters the forward reads, owned copies in the model dtype. */
enum kda_param {
    KDA_P_PROJ, /* [proj][D]: rows q | k | v | f_a | b | g_a */
    KDA_P_F_B,
    KDA_P_G_B,
    KDA_P_CONV, /* [C][K] (conv1d.weight [C][1][K]) */
    KDA_P_DT_BIAS,
    KDA_P_A_LOG, /* [H] (forget_gate.A_log [1][1][H][1]) */
    KDA_P_O_NORM,
    KDA_P_O_PROJ,
    KDA_P_COUNT,
};

struct mc_model {
    struct mc_ref_model ref; /* first: dtype, window [C][K] and state [H][d][d] per row, w[KDA_P_COUNT] */
    struct mc_kda_config cfg;
    int64_t D, H, d, K, inner, C, proj;
};

_Static_assert(offsetof(struct mc_model, ref) == 0, "struct mc_ref_model must come first");
_Static_assert(KDA_P_COUNT <= MC_REF_MAX_WEIGHTS, "too many parameters");

/* ---- the math, once per real type ------------------------------------------------------------ */

#define REF_IMPL "kda_impl.inc"
#include "ref_instantiate.inc"
#undef REF_IMPL

static const struct mc_ref_family kda_family = {
    .name = "kda",
    .family = MC_FAMILY_KDA,
    .n_weights = KDA_W_COUNT,
    .weight_names = kda_weight_names,
    .unknown_note = " (KDA has no biases)",
    .window_shape = "[B][C][K]",
    .state_shape = "[B][H][d][d]",
    .forward_f32 = kda_forward_f32,
    .forward_f64 = kda_forward_f64,
};

/* ---- model ------------------------------------------------------------------------------------- */

static enum mc_backend_status kda_config_validate(const struct mc_kda_config *c, struct mc_msg *msg)
{
    enum mc_backend_status st;
    if ((st = mc_ref_check_dim("kda", "hidden_size", c->hidden_size, msg)) ||
        (st = mc_ref_check_dim("kda", "num_heads", c->num_heads, msg)) ||
        (st = mc_ref_check_dim("kda", "head_dim", c->head_dim, msg)) ||
        (st = mc_ref_check_dim("kda", "conv_kernel", c->conv_kernel, msg)))
        return st;
    if (c->chunk_size < 0)
        return mc_ref_fail(msg, MC_BACKEND_INVALID, "kda config: 'chunk_size' must be >= 0 (got %lld)",
                           (long long)c->chunk_size);
    const int64_t inner = c->num_heads * c->head_dim;
    if (3 * inner + 2 * c->head_dim + c->num_heads > INT_MAX || inner * c->head_dim > INT_MAX)
        return mc_ref_fail(msg, MC_BACKEND_INVALID, "kda config: %lld heads of %lld exceed the BLAS and state limits",
                           (long long)c->num_heads, (long long)c->head_dim);
    if (!(c->rms_norm_eps > 0.0) || !isfinite(c->rms_norm_eps))
        return mc_ref_fail(msg, MC_BACKEND_INVALID, "kda config: 'rms_norm_eps' must be finite and > 0 (got %g)",
                           c->rms_norm_eps);
    return MC_BACKEND_OK;
}

/* Copies `rows` rows of `cols` elements from src to dst row d0. */
static void kda_rows_copy(const struct mc_model *m, void *dst, int64_t d0, const void *src, int64_t rows,
                          int64_t cols)
{
    const size_t row_bytes = (size_t)cols * m->ref.elem_bytes;
    memcpy((char *)dst + (size_t)d0 * row_bytes, src, (size_t)rows * row_bytes);
}

static enum mc_backend_status kda_model_create(const struct mc_model_desc *desc, struct mc_model **model,
                                               struct mc_msg *msg)
{
    enum mc_backend_status st;
    struct mc_model *m = NULL;
    struct mc_ref_weight_spec spec[KDA_W_COUNT];
    const struct mc_weight *found[KDA_W_COUNT] = {0};

    if ((st = mc_ref_desc_check(&kda_family, desc, model, msg)) != MC_BACKEND_OK ||
        (st = kda_config_validate(desc->config, msg)) != MC_BACKEND_OK)
        goto fail;
    m = mc_ref_model_alloc(&kda_family, sizeof *m, desc->dtype, &st, msg);
    if (!m)
        goto fail;
    m->cfg = *(const struct mc_kda_config *)desc->config;
    m->D = m->cfg.hidden_size;
    m->H = m->cfg.num_heads;
    m->d = m->cfg.head_dim;
    m->K = m->cfg.conv_kernel;
    m->inner = m->H * m->d;
    m->C = 3 * m->inner;
    m->proj = m->C + 2 * m->d + m->H;
    m->ref.window_elems = m->C * m->K;
    m->ref.state_elems = m->H * m->d * m->d;
    m->ref.hidden = m->D;

    memset(spec, 0, sizeof spec);
#define KDA_SPEC(slot, nd, ...) (spec[slot] = (struct mc_ref_weight_spec){.present = 1, .ndim = (nd), .dims = {__VA_ARGS__}})
    KDA_SPEC(KDA_W_Q, 2, m->inner, m->D);
    KDA_SPEC(KDA_W_K, 2, m->inner, m->D);
    KDA_SPEC(KDA_W_V, 2, m->inner, m->D);
    KDA_SPEC(KDA_W_CONV, 3, m->C, 1, m->K);
    KDA_SPEC(KDA_W_F_A, 2, m->d, m->D);
    KDA_SPEC(KDA_W_F_B, 2, m->inner, m->d);
    KDA_SPEC(KDA_W_DT_BIAS, 1, m->inner);
    KDA_SPEC(KDA_W_A_LOG, 4, 1, 1, m->H, 1);
    KDA_SPEC(KDA_W_B, 2, m->H, m->D);
    KDA_SPEC(KDA_W_G_A, 2, m->d, m->D);
    KDA_SPEC(KDA_W_G_B, 2, m->inner, m->d);
    KDA_SPEC(KDA_W_O_NORM, 1, m->d);
    KDA_SPEC(KDA_W_O_PROJ, 2, m->D, m->inner);
#undef KDA_SPEC
    if ((st = mc_ref_weights_match(&kda_family, desc, spec, "", found, msg)) != MC_BACKEND_OK)
        goto fail;

    const size_t proj_bytes = (size_t)m->proj * (size_t)m->D * m->ref.elem_bytes;
    m->ref.w[KDA_P_PROJ] = malloc(proj_bytes);
    if (!m->ref.w[KDA_P_PROJ]) {
        st = mc_ref_fail(msg, MC_BACKEND_NOMEM, "kda reference: out of memory for the input projection (%zu bytes)",
                         proj_bytes);
        goto fail;
    }
    kda_rows_copy(m, m->ref.w[KDA_P_PROJ], 0, found[KDA_W_Q]->data, m->inner, m->D);
    kda_rows_copy(m, m->ref.w[KDA_P_PROJ], m->inner, found[KDA_W_K]->data, m->inner, m->D);
    kda_rows_copy(m, m->ref.w[KDA_P_PROJ], 2 * m->inner, found[KDA_W_V]->data, m->inner, m->D);
    kda_rows_copy(m, m->ref.w[KDA_P_PROJ], m->C, found[KDA_W_F_A]->data, m->d, m->D);
    kda_rows_copy(m, m->ref.w[KDA_P_PROJ], m->C + m->d, found[KDA_W_B]->data, m->H, m->D);
    kda_rows_copy(m, m->ref.w[KDA_P_PROJ], m->C + m->d + m->H, found[KDA_W_G_A]->data, m->d, m->D);
    static const struct {
        enum kda_param param;
        enum kda_weight_slot slot;
    } direct[] = {
        {KDA_P_F_B, KDA_W_F_B},         {KDA_P_G_B, KDA_W_G_B},   {KDA_P_CONV, KDA_W_CONV},
        {KDA_P_DT_BIAS, KDA_W_DT_BIAS}, {KDA_P_A_LOG, KDA_W_A_LOG}, {KDA_P_O_NORM, KDA_W_O_NORM},
        {KDA_P_O_PROJ, KDA_W_O_PROJ},
    };
    for (size_t i = 0; i < sizeof direct / sizeof direct[0]; i++) {
        const enum kda_weight_slot s = direct[i].slot;
        st = mc_ref_weight_copy(&kda_family, m, kda_weight_names[s], &spec[s], found[s]->data,
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

MC_REF_OPS_ENTRIES(kda, kda_family)

static const struct mc_backend_ops kda_ops = {
    MC_REF_OPS_FIELDS(kda, MC_FAMILY_KDA),
    .caps = MC_CAP_PACKED,
    .model_create = kda_model_create,
    .model_destroy = mc_ref_model_destroy,
};

const struct mc_backend_ops *mc_reference_kda_ops(void)
{
    return &kda_ops;
}
