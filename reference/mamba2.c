/*
 * mamba2.c — the reference Mamba2 mixer behind the backend interface (mixcheck/backend.h).
 *
 * Upstream semantics: HF transformers `Mamba2Mixer` (modeling_mamba2.py, the #46084 fix, torch path)
 * as written out in docs/semantics.md §2, with mixcheck's choices of §A: one routine over (window, state,
 * segment) covers the three cases of §1.3 (docs/semantics.md §11); dt is clamped to time_step_limit in
 * every path; the scan is the exact sequential recurrence (no chunks); the gated RMSNorm is
 * gate-before-norm over groups of norm_group_size (the appended options: no norm, y·silu(z), or the norm
 * before the gate, norm(y)·w·silu(z), §2.7); a masked token is skipped (it never reaches the
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
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "conv.h"
#include "ref_common.h"
#include "ref_ops.h"

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

/* The gated-norm option mutants of tests/mutants (m2norm_mutant.c) build this file with MC_REF_M2_NORM_FAULT:
 * 1 no_gated_norm ignored (the gated norm, gate first, applied with a unit weight, as on a checkpoint without
 * norm.weight), 2 norm_before_gate ignored (the gate applied before the norm). */
#ifndef MC_REF_M2_NORM_FAULT
#define MC_REF_M2_NORM_FAULT 0
#endif

struct mc_model {
    struct mc_ref_model ref; /* first: dtype, window [C][K] and state [H][P][N] per row, w[M2_W_COUNT] */
    struct mc_mamba2_config cfg;
    /* inner = I = H*P (not named I: <cblas.h> pulls in <complex.h>, whose I is a macro); R = H/G */
    int64_t D, H, P, N, G, K, inner, GN, C, proj, R;
};

_Static_assert(offsetof(struct mc_model, ref) == 0, "struct mc_ref_model must come first");
_Static_assert(M2_W_COUNT <= MC_REF_MAX_WEIGHTS, "too many weight slots");

/* ---- the math, once per real type ------------------------------------------------------------ */

/* The group head h reads: h / (H/G) (repeat_interleave of the groups over the heads). Only the S2.11
 * mutant of tests/packed (groups_mutant.c) builds this file with MC_REF_M2_GROUPS_REPEAT, the upstream
 * bug of llama.cpp#15625 (`repeat`: h % G). */
#ifdef MC_REF_M2_GROUPS_REPEAT
#define M2_GROUP_OF(h, R, G) ((h) % (G))
#else
#define M2_GROUP_OF(h, R, G) ((h) / (R))
#endif
#define REF_IMPL "mamba2_impl.inc"
#include "ref_instantiate.inc"
#undef REF_IMPL

static const struct mc_ref_family m2_family = {
    .name = "mamba2",
    .family = MC_FAMILY_MAMBA2,
    .n_weights = M2_W_COUNT,
    .weight_names = m2_weight_names,
    .unknown_note = "",
    .window_shape = "[B][C][K]",
    .state_shape = "[B][H][P][N]",
    .forward_f32 = m2_forward_f32,
    .forward_f64 = m2_forward_f64,
};

/* ---- model ------------------------------------------------------------------------------------- */

static enum mc_backend_status m2_config_validate(const struct mc_mamba2_config *c, struct mc_msg *msg)
{
    enum mc_backend_status st;
    if ((st = mc_ref_check_dim("mamba2", "hidden_size", c->hidden_size, msg)) ||
        (st = mc_ref_check_dim("mamba2", "num_heads", c->num_heads, msg)) ||
        (st = mc_ref_check_dim("mamba2", "head_dim", c->head_dim, msg)) ||
        (st = mc_ref_check_dim("mamba2", "state_size", c->state_size, msg)) ||
        (st = mc_ref_check_dim("mamba2", "n_groups", c->n_groups, msg)) ||
        (st = mc_ref_check_dim("mamba2", "conv_kernel", c->conv_kernel, msg)) ||
        (st = mc_ref_check_dim("mamba2", "norm_group_size", c->norm_group_size, msg)))
        return st;
    if (c->chunk_size < 0)
        return mc_ref_fail(msg, MC_BACKEND_INVALID, "mamba2 config: 'chunk_size' must be >= 0 (got %lld)",
                           (long long)c->chunk_size);
    if (c->num_heads % c->n_groups != 0)
        return mc_ref_fail(msg, MC_BACKEND_INVALID,
                           "mamba2 config: 'num_heads' (%lld) must be a multiple of 'n_groups' (%lld)",
                           (long long)c->num_heads, (long long)c->n_groups);
    const int64_t inner = c->num_heads * c->head_dim;
    if (inner % c->norm_group_size != 0)
        return mc_ref_fail(msg, MC_BACKEND_INVALID,
                           "mamba2 config: 'num_heads*head_dim' (%lld) must be a multiple of 'norm_group_size' (%lld)",
                           (long long)inner, (long long)c->norm_group_size);
    const int64_t proj = 2 * inner + 2 * c->n_groups * c->state_size + c->num_heads;
    if (proj > INT_MAX)
        return mc_ref_fail(msg, MC_BACKEND_INVALID, "mamba2 config: in_proj rows %lld exceed the BLAS limit %d",
                           (long long)proj, INT_MAX);
    if (!(c->layer_norm_epsilon > 0.0) || !isfinite(c->layer_norm_epsilon))
        return mc_ref_fail(msg, MC_BACKEND_INVALID,
                           "mamba2 config: 'layer_norm_epsilon' must be finite and > 0 (got %g)",
                           c->layer_norm_epsilon);
    const double lo = c->time_step_limit[0], hi = c->time_step_limit[1];
    if (isnan(lo) || isnan(hi) || isinf(lo) || lo < 0.0 || hi < lo)
        return mc_ref_fail(msg, MC_BACKEND_INVALID,
                           "mamba2 config: 'time_step_limit' must satisfy 0 <= lo <= hi, lo finite (got [%g, %g])", lo,
                           hi);
    if ((c->use_bias != 0 && c->use_bias != 1) || (c->use_conv_bias != 0 && c->use_conv_bias != 1))
        return mc_ref_fail(msg, MC_BACKEND_INVALID,
                           "mamba2 config: 'use_bias' and 'use_conv_bias' must be 0 or 1 (got %d, %d)",
                           (int)c->use_bias, (int)c->use_conv_bias);
    if ((c->no_gated_norm != 0 && c->no_gated_norm != 1) || (c->norm_before_gate != 0 && c->norm_before_gate != 1) ||
        (c->no_gated_norm && c->norm_before_gate))
        return mc_ref_fail(msg, MC_BACKEND_INVALID,
                           "mamba2 config: 'no_gated_norm' and 'norm_before_gate' must be 0 or 1, not both 1 (got %d, "
                           "%d)",
                           (int)c->no_gated_norm, (int)c->norm_before_gate);
    return MC_BACKEND_OK;
}

static void m2_weight_specs(const struct mc_model *m, struct mc_ref_weight_spec spec[M2_W_COUNT])
{
    static const char no_bias[] = "given but the configuration has use_bias = 0";
    static const char no_conv_bias[] = "given but the configuration has use_conv_bias = 0";
    memset(spec, 0, sizeof(struct mc_ref_weight_spec) * M2_W_COUNT);
#define M2_SPEC(slot, on, why, nd, d0, d1, d2)                                                                         \
    (spec[slot] =                                                                                                      \
         (struct mc_ref_weight_spec){.present = (on), .ndim = (nd), .dims = {(d0), (d1), (d2)}, .absent_why = (why)})
    M2_SPEC(M2_W_IN_PROJ, 1, NULL, 2, m->proj, m->D, 0);
    M2_SPEC(M2_W_IN_PROJ_BIAS, m->cfg.use_bias, no_bias, 1, m->proj, 0, 0);
    M2_SPEC(M2_W_CONV, 1, NULL, 3, m->C, 1, m->K);
    M2_SPEC(M2_W_CONV_BIAS, m->cfg.use_conv_bias, no_conv_bias, 1, m->C, 0, 0);
    M2_SPEC(M2_W_DT_BIAS, 1, NULL, 1, m->H, 0, 0);
    M2_SPEC(M2_W_A_LOG, 1, NULL, 1, m->H, 0, 0);
    M2_SPEC(M2_W_D, 1, NULL, 1, m->H, 0, 0);
    static const char no_norm[] = "given but the configuration has no_gated_norm = 1";
    M2_SPEC(M2_W_NORM, !m->cfg.no_gated_norm, no_norm, 1, m->inner, 0, 0);
    M2_SPEC(M2_W_OUT_PROJ, 1, NULL, 2, m->D, m->inner, 0);
    M2_SPEC(M2_W_OUT_PROJ_BIAS, m->cfg.use_bias, no_bias, 1, m->D, 0, 0);
#undef M2_SPEC
}

static enum mc_backend_status m2_model_create(const struct mc_model_desc *desc, struct mc_model **model,
                                              struct mc_msg *msg)
{
    enum mc_backend_status st;
    struct mc_model *m = NULL;
    struct mc_ref_weight_spec spec[M2_W_COUNT];
    const struct mc_weight *found[M2_W_COUNT] = {0};

    if ((st = mc_ref_desc_check(&m2_family, desc, model, msg)) != MC_BACKEND_OK ||
        (st = m2_config_validate(desc->config, msg)) != MC_BACKEND_OK)
        goto fail;
    m = mc_ref_model_alloc(&m2_family, sizeof *m, desc->dtype, &st, msg);
    if (!m)
        goto fail;
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
    m->ref.window_elems = m->C * m->K;
    m->ref.state_elems = m->H * m->P * m->N;
    m->ref.hidden = m->D;

    m2_weight_specs(m, spec);
    if ((st = mc_ref_weights_match(&m2_family, desc, spec, "", found, msg)) != MC_BACKEND_OK ||
        (st = mc_ref_weights_copy(&m2_family, m, spec, found, msg)) != MC_BACKEND_OK)
        goto fail;
    *model = m;
    return MC_BACKEND_OK;

fail:
    mc_ref_model_destroy(m);
    return st;
}

/* ---- the backend interface: the shared cache and forward, with this family's messages ----------- */

MC_REF_OPS_ENTRIES(m2, m2_family)
MC_REF_PROBE_ENTRIES(m2, m2_family)

static const struct mc_backend_ops m2_ops = {
    MC_REF_OPS_FIELDS(m2, MC_FAMILY_MAMBA2),
    .caps = MC_CAP_PACKED | MC_CAP_PROBES,
    .model_create = m2_model_create,
    .model_destroy = mc_ref_model_destroy,
    .probe_enable = m2_probe_enable,
    .probe_read = m2_probe_read,
};

const struct mc_backend_ops *mc_reference_mamba2_ops(void)
{
    return &m2_ops;
}
