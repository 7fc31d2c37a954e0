/*
 * lightning.c — the reference lightning attention mixer behind the backend interface (mixcheck/backend.h).
 *
 * Upstream semantics: HF transformers `MiniMaxLightningAttention` (modeling_minimax.py, 5.24) as written out
 * in docs/semantics.md §13, with mixcheck's choices of §A and §13.5: one routine over (count, state,
 * segment) covers the three cases of §1.3 (§11); the recurrence is always the exact token-by-token form
 * (block_size is only a hint; HF's prefill runs the block form, its cached path this recurrence); the
 * slopes are HF's 2^(-8(h+1)/H) scaled by the layer's depth (la_slope); a masked token is
 * skipped — it does not decay, write or count — and its output row is zero (no bias anywhere).
 *
 * The cache is the shared reference cache (ref_common.h): the window [B][1][1] holds the number n of real
 * tokens a row has consumed (the family has no conv; the count is what its conv_state exports), the state
 * [B][H][hd][hd] the decayed sum of k vᵀ (rows key, columns value).
 *
 * Plain loops, no SIMD, no threads, except the projections, which go through OpenBLAS gemm. The math
 * (lightning_impl.inc) is instantiated for float and double; the model dtype picks one.
 *
 * Dimension letters: B batch, L tokens, D hidden, H heads, hd head dim, inner = H*hd.
 */
#include "reference.h"

#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ref_common.h"
#include "ref_ops.h"

enum la_weight_slot {
    LA_W_QKV,
    LA_W_GATE,
    LA_W_NORM,
    LA_W_OUT_PROJ,
    LA_W_COUNT,
};

static const char *const la_weight_names[LA_W_COUNT] = {
    [LA_W_QKV] = "qkv_proj.weight",
    [LA_W_GATE] = "output_gate.weight",
    [LA_W_NORM] = "norm.weight",
    [LA_W_OUT_PROJ] = "out_proj.weight",
};

/* The parameters the forward reads: the slots as given. */
enum la_param {
    LA_P_QKV = LA_W_QKV,
    LA_P_GATE = LA_W_GATE,
    LA_P_NORM = LA_W_NORM,
    LA_P_OUT_PROJ = LA_W_OUT_PROJ,
};

struct mc_model {
    struct mc_ref_model ref; /* first: dtype, window [1][1] (the count), state [H][hd][hd], w[LA_W_COUNT] */
    struct mc_lightning_config cfg;
    int64_t D, H, hd, inner;
    double *slope; /* [H]: s_h (docs/semantics.md §13.1) */
};

_Static_assert(offsetof(struct mc_model, ref) == 0, "struct mc_ref_model must come first");
_Static_assert(LA_W_COUNT <= MC_REF_MAX_WEIGHTS, "too many weight slots");

/* s_h of head h (docs/semantics.md §13.1), in double, as HF's get_slope_rate:
 * 2^(-8(h+1)/H) * (1 - layer_idx / (num_hidden_layers - 1 + 1e-5) + 1e-5). */
static double la_slope(const struct mc_lightning_config *c, int64_t h)
{
    const double factor = 1.0 - (double)c->layer_idx / ((double)c->num_hidden_layers - 1.0 + 1e-5) + 1e-5;
    return pow(2.0, -8.0 * (double)(h + 1) / (double)c->num_attention_heads) * factor;
}

/* ---- the math, once per real type ------------------------------------------------------------ */

#define REF_IMPL "lightning_impl.inc"
#include "ref_instantiate.inc"
#undef REF_IMPL

static const struct mc_ref_family la_family = {
    .name = "lightning",
    .family = MC_FAMILY_LIGHTNING,
    .n_weights = LA_W_COUNT,
    .weight_names = la_weight_names,
    .unknown_note = " (lightning attention has no biases)",
    .window_shape = "[B][1][1] (the count of real tokens consumed)",
    .state_shape = "[B][H][hd][hd]",
    .forward_f32 = la_forward_f32,
    .forward_f64 = la_forward_f64,
};

/* ---- model ------------------------------------------------------------------------------------- */

static enum mc_backend_status la_config_validate(const struct mc_lightning_config *c, struct mc_msg *msg)
{
    enum mc_backend_status st;
    if ((st = mc_ref_check_dim("lightning", "hidden_size", c->hidden_size, msg)) ||
        (st = mc_ref_check_dim("lightning", "num_attention_heads", c->num_attention_heads, msg)) ||
        (st = mc_ref_check_dim("lightning", "head_dim", c->head_dim, msg)) ||
        (st = mc_ref_check_dim("lightning", "num_hidden_layers", c->num_hidden_layers, msg)))
        return st;
    if (c->block_size < 0)
        return mc_ref_fail(msg, MC_BACKEND_INVALID, "lightning config: 'block_size' must be >= 0 (got %lld)",
                           (long long)c->block_size);
    if (c->layer_idx < 0 || c->layer_idx >= c->num_hidden_layers)
        return mc_ref_fail(msg, MC_BACKEND_INVALID,
                           "lightning config: 'layer_idx' must be in [0, num_hidden_layers = %lld) (got %lld)",
                           (long long)c->num_hidden_layers, (long long)c->layer_idx);
    const int64_t inner = c->num_attention_heads * c->head_dim;
    if (3 * inner > INT_MAX || c->num_attention_heads * c->head_dim * c->head_dim > INT_MAX)
        return mc_ref_fail(msg, MC_BACKEND_INVALID,
                           "lightning config: %lld heads of %lld exceed the BLAS and state limits",
                           (long long)c->num_attention_heads, (long long)c->head_dim);
    if (!(c->norm_eps > 0.0) || !isfinite(c->norm_eps))
        return mc_ref_fail(msg, MC_BACKEND_INVALID, "lightning config: 'norm_eps' must be finite and > 0 (got %g)",
                           c->norm_eps);
    return MC_BACKEND_OK;
}

static void la_model_destroy(struct mc_model *m)
{
    if (m)
        free(m->slope);
    mc_ref_model_destroy(m);
}

static enum mc_backend_status la_model_create(const struct mc_model_desc *desc, struct mc_model **model,
                                              struct mc_msg *msg)
{
    enum mc_backend_status st;
    struct mc_model *m = NULL;
    struct mc_ref_weight_spec spec[LA_W_COUNT];
    const struct mc_weight *found[LA_W_COUNT] = {0};

    if ((st = mc_ref_desc_check(&la_family, desc, model, msg)) != MC_BACKEND_OK ||
        (st = la_config_validate(desc->config, msg)) != MC_BACKEND_OK)
        goto fail;
    m = mc_ref_model_alloc(&la_family, sizeof *m, desc->dtype, &st, msg);
    if (!m)
        goto fail;
    m->cfg = *(const struct mc_lightning_config *)desc->config;
    m->D = m->cfg.hidden_size;
    m->H = m->cfg.num_attention_heads;
    m->hd = m->cfg.head_dim;
    m->inner = m->H * m->hd;
    m->ref.window_elems = 1;
    m->ref.state_elems = m->H * m->hd * m->hd;
    m->ref.hidden = m->D;
    m->slope = malloc((size_t)m->H * sizeof *m->slope);
    if (!m->slope) {
        st = mc_ref_fail(msg, MC_BACKEND_NOMEM, "lightning reference: out of memory for the slopes");
        goto fail;
    }
    for (int64_t h = 0; h < m->H; h++)
        m->slope[h] = la_slope(&m->cfg, h);

    memset(spec, 0, sizeof spec);
    spec[LA_W_QKV] = (struct mc_ref_weight_spec){.present = 1, .ndim = 2, .dims = {3 * m->inner, m->D}};
    spec[LA_W_GATE] = (struct mc_ref_weight_spec){.present = 1, .ndim = 2, .dims = {m->inner, m->D}};
    spec[LA_W_NORM] = (struct mc_ref_weight_spec){.present = 1, .ndim = 1, .dims = {m->inner}};
    spec[LA_W_OUT_PROJ] = (struct mc_ref_weight_spec){.present = 1, .ndim = 2, .dims = {m->D, m->inner}};
    if ((st = mc_ref_weights_match(&la_family, desc, spec, "", found, msg)) != MC_BACKEND_OK ||
        (st = mc_ref_weights_copy(&la_family, m, spec, found, msg)) != MC_BACKEND_OK)
        goto fail;
    *model = m;
    return MC_BACKEND_OK;

fail:
    la_model_destroy(m);
    return st;
}

/* ---- the backend interface: the shared cache and forward, with this family's messages ----------- */

MC_REF_OPS_ENTRIES(la, la_family)

static const struct mc_backend_ops la_ops = {
    MC_REF_OPS_FIELDS(la, MC_FAMILY_LIGHTNING),
    .caps = MC_CAP_PACKED,
    .model_create = la_model_create,
    .model_destroy = la_model_destroy,
};

const struct mc_backend_ops *mc_reference_lightning_ops(void)
{
    return &la_ops;
}
