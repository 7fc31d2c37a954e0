/*
 * shortconv.c — the reference LFM2 ShortConv mixer behind the backend interface (mixcheck/backend.h).
 *
 * Upstream semantics: HF transformers `Lfm2ShortConv` (modeling_lfm2.py, torch path) as written out
 * in docs/semantics.md §5, with mixcheck's choices of §A: one routine over (window, segment) covers the three
 * cases of §1.3 (docs/semantics.md §11); the conv window holds the gated pre-conv input Bx = B ⊙ x
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
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "conv.h"
#include "ref_common.h"
#include "ref_ops.h"

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
    [SC_W_IN_PROJ] = "in_proj.weight", [SC_W_IN_PROJ_BIAS] = "in_proj.bias", [SC_W_CONV] = "conv.weight",
    [SC_W_CONV_BIAS] = "conv.bias",    [SC_W_OUT_PROJ] = "out_proj.weight",  [SC_W_OUT_PROJ_BIAS] = "out_proj.bias",
};

struct mc_model {
    struct mc_ref_model ref; /* first: dtype, window [D][K] per row (Bx), no state, w[SC_W_COUNT] */
    struct mc_shortconv_config cfg;
    int64_t D, K;
};

_Static_assert(offsetof(struct mc_model, ref) == 0, "struct mc_ref_model must come first");
_Static_assert(SC_W_COUNT <= MC_REF_MAX_WEIGHTS, "too many weight slots");

/* ---- the math, once per real type ------------------------------------------------------------ */

#define REF_IMPL "shortconv_impl.inc"
#include "ref_instantiate.inc"
#undef REF_IMPL

static const struct mc_ref_family sc_family = {
    .name = "shortconv",
    .family = MC_FAMILY_SHORTCONV,
    .n_weights = SC_W_COUNT,
    .weight_names = sc_weight_names,
    .unknown_note = "",
    .window_shape = "[B][D][K]",
    .state_shape = NULL,
    .forward_f32 = sc_forward_f32,
    .forward_f64 = sc_forward_f64,
};

/* ---- model ------------------------------------------------------------------------------------- */

static enum mc_backend_status sc_config_validate(const struct mc_shortconv_config *c, struct mc_msg *msg)
{
    enum mc_backend_status st;
    if ((st = mc_ref_check_dim("shortconv", "hidden_size", c->hidden_size, msg)) ||
        (st = mc_ref_check_dim("shortconv", "conv_L_cache", c->conv_kernel, msg)))
        return st;
    if (c->conv_bias != 0 && c->conv_bias != 1)
        return mc_ref_fail(msg, MC_BACKEND_INVALID, "shortconv config: 'conv_bias' must be 0 or 1 (got %d)",
                           (int)c->conv_bias);
    return MC_BACKEND_OK;
}

static void sc_weight_specs(const struct mc_model *m, struct mc_ref_weight_spec spec[SC_W_COUNT])
{
    static const char no_bias[] = "given but the configuration has conv_bias = 0";
    memset(spec, 0, sizeof(struct mc_ref_weight_spec) * SC_W_COUNT);
#define SC_SPEC(slot, on, why, nd, d0, d1, d2)                                                                         \
    (spec[slot] =                                                                                                      \
         (struct mc_ref_weight_spec){.present = (on), .ndim = (nd), .dims = {(d0), (d1), (d2)}, .absent_why = (why)})
    SC_SPEC(SC_W_IN_PROJ, 1, NULL, 2, 3 * m->D, m->D, 0);
    SC_SPEC(SC_W_IN_PROJ_BIAS, m->cfg.conv_bias, no_bias, 1, 3 * m->D, 0, 0);
    SC_SPEC(SC_W_CONV, 1, NULL, 3, m->D, 1, m->K);
    SC_SPEC(SC_W_CONV_BIAS, m->cfg.conv_bias, no_bias, 1, m->D, 0, 0);
    SC_SPEC(SC_W_OUT_PROJ, 1, NULL, 2, m->D, m->D, 0);
    SC_SPEC(SC_W_OUT_PROJ_BIAS, m->cfg.conv_bias, no_bias, 1, m->D, 0, 0);
#undef SC_SPEC
}

static enum mc_backend_status sc_model_create(const struct mc_model_desc *desc, struct mc_model **model,
                                              struct mc_msg *msg)
{
    enum mc_backend_status st;
    struct mc_model *m = NULL;
    struct mc_ref_weight_spec spec[SC_W_COUNT];
    const struct mc_weight *found[SC_W_COUNT] = {0};

    if ((st = mc_ref_desc_check(&sc_family, desc, model, msg)) != MC_BACKEND_OK ||
        (st = sc_config_validate(desc->config, msg)) != MC_BACKEND_OK)
        goto fail;
    m = mc_ref_model_alloc(&sc_family, sizeof *m, desc->dtype, &st, msg);
    if (!m)
        goto fail;
    m->cfg = *(const struct mc_shortconv_config *)desc->config;
    m->D = m->cfg.hidden_size;
    m->K = m->cfg.conv_kernel;
    m->ref.window_elems = m->D * m->K;
    m->ref.state_elems = 0;
    m->ref.hidden = m->D;

    sc_weight_specs(m, spec);
    if ((st = mc_ref_weights_match(&sc_family, desc, spec, "", found, msg)) != MC_BACKEND_OK ||
        (st = mc_ref_weights_copy(&sc_family, m, spec, found, msg)) != MC_BACKEND_OK)
        goto fail;
    *model = m;
    return MC_BACKEND_OK;

fail:
    mc_ref_model_destroy(m);
    return st;
}

/* ---- the backend interface: the shared cache and forward, with this family's messages ----------- */

MC_REF_OPS_ENTRIES(sc, sc_family)
MC_REF_PROBE_ENTRIES(sc, sc_family)

static const struct mc_backend_ops sc_ops = {
    MC_REF_OPS_FIELDS(sc, MC_FAMILY_SHORTCONV),
    .caps = MC_CAP_PACKED | MC_CAP_PROBES,
    .model_create = sc_model_create,
    .model_destroy = mc_ref_model_destroy,
    .probe_enable = sc_probe_enable,
    .probe_read = sc_probe_read,
};

const struct mc_backend_ops *mc_reference_shortconv_ops(void)
{
    return &sc_ops;
}
