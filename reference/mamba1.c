/*
 * mamba1.c — the reference Mamba1 mixer behind the backend interface (mixcheck/backend.h).
 *
 * Upstream semantics: HF transformers `MambaMixer` (modeling_mamba.py, torch slow path) and
 * mamba_ssm's `selective_scan_ref` / `selective_state_update` as written out in docs/semantics.md §3, with
 * mixcheck's choices of §A: one routine over (window, state, segment) covers the three cases of §1.3
 * (docs/semantics.md §11), so a multi-token forward on a primed cache convolves with the cached K-column
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
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "conv.h"
#include "ref_common.h"
#include "ref_ops.h"

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
    M1_W_DT_NORM, /* inner_norms WEIGHTED (Jamba) only */
    M1_W_B_NORM,
    M1_W_C_NORM,
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
    [M1_W_DT_NORM] = "dt_layernorm.weight",
    [M1_W_B_NORM] = "b_layernorm.weight",
    [M1_W_C_NORM] = "c_layernorm.weight",
};

/* The inner-norm mutant of tests/mutants (m1norm_mutant.c) builds this file with MC_REF_M1_NORMS_FAULT: 1 the
 * inner norms not applied (a Mamba mixer run on a FalconMamba / Jamba checkpoint), 2 applied without their
 * weights (Jamba's JambaRMSNorm run as FalconMamba's weightless one). */
#ifndef MC_REF_M1_NORMS_FAULT
#define MC_REF_M1_NORMS_FAULT 0
#endif

struct mc_model {
    struct mc_ref_model ref; /* first: dtype, window [I][K] and state [I][N] per row, w[M1_W_COUNT] */
    struct mc_mamba1_config cfg;
    /* inner = I (not named I: <cblas.h> pulls in <complex.h>, whose I is a macro); xdim = R + 2N */
    int64_t D, inner, N, K, R, xdim;
};

_Static_assert(offsetof(struct mc_model, ref) == 0, "struct mc_ref_model must come first");
_Static_assert(M1_W_COUNT <= MC_REF_MAX_WEIGHTS, "too many weight slots");

/* ---- the math, once per real type ------------------------------------------------------------ */

#define REF_IMPL "mamba1_impl.inc"
#include "ref_instantiate.inc"
#undef REF_IMPL

static const struct mc_ref_family m1_family = {
    .name = "mamba1",
    .family = MC_FAMILY_MAMBA1,
    .n_weights = M1_W_COUNT,
    .weight_names = m1_weight_names,
    .unknown_note = "",
    .window_shape = "[B][I][K]",
    .state_shape = "[B][I][N]",
    .forward_f32 = m1_forward_f32,
    .forward_f64 = m1_forward_f64,
};

/* ---- model ------------------------------------------------------------------------------------- */

static enum mc_backend_status m1_config_validate(const struct mc_mamba1_config *c, struct mc_msg *msg)
{
    enum mc_backend_status st;
    if ((st = mc_ref_check_dim("mamba1", "hidden_size", c->hidden_size, msg)) ||
        (st = mc_ref_check_dim("mamba1", "intermediate_size", c->intermediate_size, msg)) ||
        (st = mc_ref_check_dim("mamba1", "state_size", c->state_size, msg)) ||
        (st = mc_ref_check_dim("mamba1", "conv_kernel", c->conv_kernel, msg)) ||
        (st = mc_ref_check_dim("mamba1", "time_step_rank", c->time_step_rank, msg)))
        return st;
    if ((c->use_bias != 0 && c->use_bias != 1) || (c->use_conv_bias != 0 && c->use_conv_bias != 1))
        return mc_ref_fail(msg, MC_BACKEND_INVALID,
                           "mamba1 config: 'use_bias' and 'use_conv_bias' must be 0 or 1 (got %d, %d)",
                           (int)c->use_bias, (int)c->use_conv_bias);
    if (c->inner_norms < MC_M1_INNER_NORMS_NONE || c->inner_norms > MC_M1_INNER_NORMS_WEIGHTED ||
        (c->inner_norms != MC_M1_INNER_NORMS_NONE && (!(c->mixer_rms_eps > 0.0) || !isfinite(c->mixer_rms_eps))))
        return mc_ref_fail(msg, MC_BACKEND_INVALID,
                           "mamba1 config: 'inner_norms' must be 0, 1 or 2 and 'mixer_rms_eps' finite and > 0 with "
                           "them (got %lld, %g)",
                           (long long)c->inner_norms, c->mixer_rms_eps);
    return MC_BACKEND_OK;
}

static void m1_weight_specs(const struct mc_model *m, struct mc_ref_weight_spec spec[M1_W_COUNT])
{
    static const char no_bias[] = "given but the configuration has use_bias = 0";
    static const char no_conv_bias[] = "given but the configuration has use_conv_bias = 0";
    memset(spec, 0, sizeof(struct mc_ref_weight_spec) * M1_W_COUNT);
#define M1_SPEC(slot, on, why, nd, d0, d1, d2)                                                                         \
    (spec[slot] =                                                                                                      \
         (struct mc_ref_weight_spec){.present = (on), .ndim = (nd), .dims = {(d0), (d1), (d2)}, .absent_why = (why)})
    M1_SPEC(M1_W_IN_PROJ, 1, NULL, 2, 2 * m->inner, m->D, 0);
    M1_SPEC(M1_W_IN_PROJ_BIAS, m->cfg.use_bias, no_bias, 1, 2 * m->inner, 0, 0);
    M1_SPEC(M1_W_CONV, 1, NULL, 3, m->inner, 1, m->K);
    M1_SPEC(M1_W_CONV_BIAS, m->cfg.use_conv_bias, no_conv_bias, 1, m->inner, 0, 0);
    M1_SPEC(M1_W_X_PROJ, 1, NULL, 2, m->xdim, m->inner, 0);
    M1_SPEC(M1_W_DT_PROJ, 1, NULL, 2, m->inner, m->R, 0);
    M1_SPEC(M1_W_DT_PROJ_BIAS, 1, NULL, 1, m->inner, 0, 0);
    M1_SPEC(M1_W_A_LOG, 1, NULL, 2, m->inner, m->N, 0);
    M1_SPEC(M1_W_D, 1, NULL, 1, m->inner, 0, 0);
    M1_SPEC(M1_W_OUT_PROJ, 1, NULL, 2, m->D, m->inner, 0);
    M1_SPEC(M1_W_OUT_PROJ_BIAS, m->cfg.use_bias, no_bias, 1, m->D, 0, 0);
    static const char no_norm_w[] = "given but the configuration's inner_norms is not 2 (weighted)";
    const int weighted = m->cfg.inner_norms == MC_M1_INNER_NORMS_WEIGHTED;
    M1_SPEC(M1_W_DT_NORM, weighted, no_norm_w, 1, m->R, 0, 0);
    M1_SPEC(M1_W_B_NORM, weighted, no_norm_w, 1, m->N, 0, 0);
    M1_SPEC(M1_W_C_NORM, weighted, no_norm_w, 1, m->N, 0, 0);
#undef M1_SPEC
}

static enum mc_backend_status m1_model_create(const struct mc_model_desc *desc, struct mc_model **model,
                                              struct mc_msg *msg)
{
    enum mc_backend_status st;
    struct mc_model *m = NULL;
    struct mc_ref_weight_spec spec[M1_W_COUNT];
    const struct mc_weight *found[M1_W_COUNT] = {0};

    if ((st = mc_ref_desc_check(&m1_family, desc, model, msg)) != MC_BACKEND_OK ||
        (st = m1_config_validate(desc->config, msg)) != MC_BACKEND_OK)
        goto fail;
    m = mc_ref_model_alloc(&m1_family, sizeof *m, desc->dtype, &st, msg);
    if (!m)
        goto fail;
    m->cfg = *(const struct mc_mamba1_config *)desc->config;
    m->D = m->cfg.hidden_size;
    m->inner = m->cfg.intermediate_size;
    m->N = m->cfg.state_size;
    m->K = m->cfg.conv_kernel;
    m->R = m->cfg.time_step_rank;
    m->xdim = m->R + 2 * m->N;
    m->ref.window_elems = m->inner * m->K;
    m->ref.state_elems = m->inner * m->N;
    m->ref.hidden = m->D;

    m1_weight_specs(m, spec);
    if ((st = mc_ref_weights_match(&m1_family, desc, spec, "", found, msg)) != MC_BACKEND_OK ||
        (st = mc_ref_weights_copy(&m1_family, m, spec, found, msg)) != MC_BACKEND_OK)
        goto fail;
    *model = m;
    return MC_BACKEND_OK;

fail:
    mc_ref_model_destroy(m);
    return st;
}

/* ---- the backend interface: the shared cache and forward, with this family's messages ----------- */

MC_REF_OPS_ENTRIES(m1, m1_family)
MC_REF_PROBE_ENTRIES(m1, m1_family)

static const struct mc_backend_ops m1_ops = {
    MC_REF_OPS_FIELDS(m1, MC_FAMILY_MAMBA1),
    .caps = MC_CAP_PACKED | MC_CAP_PROBES,
    .model_create = m1_model_create,
    .model_destroy = mc_ref_model_destroy,
    .probe_enable = m1_probe_enable,
    .probe_read = m1_probe_read,
};

const struct mc_backend_ops *mc_reference_mamba1_ops(void)
{
    return &m1_ops;
}
