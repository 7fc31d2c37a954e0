/*
 * attention.c — the reference softmax attention layer with a KV cache behind the backend interface
 * (mixcheck/backend.h), the fifth family (docs/semantics.md §12).
 *
 * Upstream semantics: HF transformers `Qwen3NextAttention` / `Qwen3_5Attention` (gated, zero-centred
 * q/k norms, partial rotary), `Lfm2Attention` (plain RMSNorm q/k norms, full rotary) and
 * `BambaAttention` (no q/k norm, partial rotary), eager path, as written out in §12, with mixcheck's
 * choices of §A: one routine over (count, KV slots, segment) covers the three cases of §1.3; a
 * masked token never reaches the cache and has no position (a real token's position is the number of
 * real tokens before it in its row, cached ones included: what generate() derives from the mask); its
 * output row is o_proj.bias (zeros without attention_bias).
 *
 * The cache is the shared reference cache (ref_common.h): the window [B][1][1] holds the number n of
 * cached positions, the state [B][2*Hkv][Lmax][hd] the keys (after the k norm and RoPE) and values by
 * position; slots >= n are zero after any forward on the row. An imported window is only read when a
 * forward uses the row: a count that is not an integer in [0, Lmax] is then INVALID.
 *
 * Plain loops, no SIMD, no threads, except the four projections, which go through OpenBLAS gemm.
 * The math (attention_impl.inc) is instantiated for float and double; the model dtype picks one. The
 * RoPE angles pos·theta^(-2i/R) and their cos/sin are computed in double for both.
 *
 * Dimension letters: B batch, L tokens, D hidden, Hq query heads, Hkv key/value heads, hd head dim,
 * R rotary dims, Lmax cache length.
 */
#include "reference.h"

#include <cblas.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ref_common.h"
#include "ref_ops.h"

enum at_weight_slot {
    AT_W_Q,
    AT_W_Q_BIAS,
    AT_W_K,
    AT_W_K_BIAS,
    AT_W_V,
    AT_W_V_BIAS,
    AT_W_O,
    AT_W_O_BIAS,
    AT_W_Q_NORM,
    AT_W_K_NORM,
    AT_W_Q_A, /* MLA (§12.8) */
    AT_W_Q_A_BIAS,
    AT_W_Q_A_NORM,
    AT_W_Q_B,
    AT_W_KV_A,
    AT_W_KV_A_BIAS,
    AT_W_KV_A_NORM,
    AT_W_KV_B,
    AT_W_K_SCONV, /* Inkling (§12.9) */
    AT_W_V_SCONV,
    AT_W_OUT_SCONV,
    AT_W_R,
    AT_W_REL,
    AT_W_COUNT,
};

static const char *const at_weight_names[AT_W_COUNT] = {
    [AT_W_Q] = "q_proj.weight",      [AT_W_Q_BIAS] = "q_proj.bias", [AT_W_K] = "k_proj.weight",
    [AT_W_K_BIAS] = "k_proj.bias",   [AT_W_V] = "v_proj.weight",    [AT_W_V_BIAS] = "v_proj.bias",
    [AT_W_O] = "o_proj.weight",      [AT_W_O_BIAS] = "o_proj.bias", [AT_W_Q_NORM] = "q_norm.weight",
    [AT_W_K_NORM] = "k_norm.weight",
    [AT_W_Q_A] = "q_a_proj.weight",
    [AT_W_Q_A_BIAS] = "q_a_proj.bias",
    [AT_W_Q_A_NORM] = "q_a_layernorm.weight",
    [AT_W_Q_B] = "q_b_proj.weight",
    [AT_W_KV_A] = "kv_a_proj_with_mqa.weight",
    [AT_W_KV_A_BIAS] = "kv_a_proj_with_mqa.bias",
    [AT_W_KV_A_NORM] = "kv_a_layernorm.weight",
    [AT_W_KV_B] = "kv_b_proj.weight",
    [AT_W_K_SCONV] = "k_sconv.conv1d.weight",
    [AT_W_V_SCONV] = "v_sconv.conv1d.weight",
    [AT_W_OUT_SCONV] = "out_sconv.conv1d.weight",
    [AT_W_R] = "r_proj.weight",
    [AT_W_REL] = "rel_logits_proj.proj",
};

struct mc_model {
    struct mc_ref_model ref; /* first: dtype, window [1][1] (the count), state [2Hkv][Lmax][hd], w[AT_W_COUNT] */
    struct mc_attention_config cfg;
    int64_t D, Hq, Hkv, hd, Lmax, R, qrows;
    double *inv_freq; /* [R/2]: theta^(-2i/R) */
};

_Static_assert(offsetof(struct mc_model, ref) == 0, "struct mc_ref_model must come first");
_Static_assert(AT_W_COUNT <= MC_REF_MAX_WEIGHTS, "too many weight slots");

/* The cached-position count of a window element: -1 unless it is an integer in [0, lmax]. */
static int64_t at_count(double v, int64_t lmax)
{
    if (!(v >= 0.0 && v <= (double)lmax) || v != floor(v))
        return -1;
    return (int64_t)v;
}

/* The Inkling option mutants of tests/mutants (atinkling_mutant.c) build this file with MC_REF_AT_INKLING_FAULT:
 * 1 the relative logits skipped, 2 the relative logits added twice, 3 the short convs without their input added
 * (u <- conv(u)), 4 the sliding window ignored (every cached position in reach). 0 (every other build): none. */
#ifndef MC_REF_AT_INKLING_FAULT
#define MC_REF_AT_INKLING_FAULT 0
#endif

/* ---- the math, once per real type ------------------------------------------------------------ */

#define REF_IMPL "attention_impl.inc"
#include "ref_instantiate.inc"
#undef REF_IMPL

static const struct mc_ref_family at_family = {
    .name = "attention",
    .family = MC_FAMILY_ATTENTION,
    .n_weights = AT_W_COUNT,
    .weight_names = at_weight_names,
    .unknown_note = "",
    .window_shape = "[B][1][1] (the cached-position count; [B][1 + 2*Hkv*hd + D][K] with sconv_kernel K)",
    .state_shape = "[B][2*Hkv][Lmax][hd] ([B][1][Lmax][kv_lora_rank + qk_rope_head_dim] with MLA)",
    .forward_f32 = at_forward_f32,
    .forward_f64 = at_forward_f64,
};

/* ---- model ------------------------------------------------------------------------------------- */

static enum mc_backend_status at_config_validate(const struct mc_attention_config *c, struct mc_msg *msg)
{
    enum mc_backend_status st;
    if ((st = mc_ref_check_dim("attention", "hidden_size", c->hidden_size, msg)) ||
        (st = mc_ref_check_dim("attention", "num_attention_heads", c->num_attention_heads, msg)) ||
        (st = mc_ref_check_dim("attention", "num_key_value_heads", c->num_key_value_heads, msg)) ||
        (st = mc_ref_check_dim("attention", "head_dim", c->head_dim, msg)) ||
        (st = mc_ref_check_dim("attention", "cache_length", c->cache_length, msg)))
        return st;
    if (c->num_attention_heads % c->num_key_value_heads != 0)
        return mc_ref_fail(msg, MC_BACKEND_INVALID,
                           "attention config: 'num_attention_heads' (%lld) must be a multiple of "
                           "'num_key_value_heads' (%lld)",
                           (long long)c->num_attention_heads, (long long)c->num_key_value_heads);
    if ((c->no_rope != 0 && c->no_rope != 1) || !(c->softmax_scale >= 0.0) || !isfinite(c->softmax_scale))
        return mc_ref_fail(msg, MC_BACKEND_INVALID,
                           "attention config: 'no_rope' must be 0 or 1 and 'softmax_scale' finite and >= 0 (got %d, %g)",
                           (int)c->no_rope, c->softmax_scale);
    if (c->kv_lora_rank < 0 || c->q_lora_rank < 0 || c->qk_rope_head_dim < 0 || c->v_head_dim < 0 ||
        (c->kv_lora_rank == 0 && (c->q_lora_rank || c->qk_rope_head_dim || c->v_head_dim)))
        return mc_ref_fail(msg, MC_BACKEND_INVALID,
                           "attention config: 'kv_lora_rank', 'q_lora_rank', 'qk_rope_head_dim', 'v_head_dim' must be "
                           ">= 0, the last three 0 without kv_lora_rank (got %lld, %lld, %lld, %lld)",
                           (long long)c->kv_lora_rank, (long long)c->q_lora_rank, (long long)c->qk_rope_head_dim,
                           (long long)c->v_head_dim);
    if (c->kv_lora_rank > 0) { /* MLA (§12.8) */
        if ((st = mc_ref_check_dim("attention", "kv_lora_rank", c->kv_lora_rank, msg)) ||
            (st = mc_ref_check_dim("attention", "qk_rope_head_dim", c->qk_rope_head_dim, msg)) ||
            (st = mc_ref_check_dim("attention", "v_head_dim", c->v_head_dim, msg)))
            return st;
        if (c->qk_rope_head_dim >= c->head_dim || c->num_key_value_heads != c->num_attention_heads ||
            c->qk_norm != MC_QK_NORM_NONE || c->attn_output_gate || (!c->no_rope && c->qk_rope_head_dim % 2 != 0) ||
            (!c->no_rope && (!(c->rope_theta > 1.0) || !isfinite(c->rope_theta))))
            return mc_ref_fail(msg, MC_BACKEND_INVALID,
                               "attention config (MLA): needs head_dim > qk_rope_head_dim (%lld, %lld), "
                               "num_key_value_heads = num_attention_heads, no q/k norm or output gate, an even "
                               "qk_rope_head_dim and rope_theta > 1 unless no_rope",
                               (long long)c->head_dim, (long long)c->qk_rope_head_dim);
    }
    if (!c->kv_lora_rank && !c->no_rope && !(c->partial_rotary_factor > 0.0 && c->partial_rotary_factor <= 1.0))
        return mc_ref_fail(msg, MC_BACKEND_INVALID,
                           "attention config: 'partial_rotary_factor' must be in (0, 1] (got %g)",
                           c->partial_rotary_factor);
    const int64_t R = (int64_t)((double)c->head_dim * c->partial_rotary_factor);
    if (!c->kv_lora_rank && !c->no_rope && (R < 2 || R % 2 != 0))
        return mc_ref_fail(msg, MC_BACKEND_INVALID,
                           "attention config: rotary dims int(head_dim * partial_rotary_factor) = %lld must be even "
                           "and >= 2",
                           (long long)R);
    if (!c->kv_lora_rank && !c->no_rope && (!(c->rope_theta > 1.0) || !isfinite(c->rope_theta)))
        return mc_ref_fail(msg, MC_BACKEND_INVALID, "attention config: 'rope_theta' must be finite and > 1 (got %g)",
                           c->rope_theta);
    if (!(c->rms_norm_eps > 0.0) || !isfinite(c->rms_norm_eps))
        return mc_ref_fail(msg, MC_BACKEND_INVALID, "attention config: 'rms_norm_eps' must be finite and > 0 (got %g)",
                           c->rms_norm_eps);
    if (c->qk_norm < MC_QK_NORM_NONE || c->qk_norm > MC_QK_NORM_RMS_FULL)
        return mc_ref_fail(msg, MC_BACKEND_INVALID, "attention config: 'qk_norm' %d is not an enum mc_qk_norm value",
                           (int)c->qk_norm);
    if (c->qk_norm == MC_QK_NORM_RMS_FULL && c->attn_output_gate)
        return mc_ref_fail(msg, MC_BACKEND_INVALID,
                           "attention config: 'qk_norm' rms_full (over the whole q projection) has no form with "
                           "attn_output_gate");
    if ((c->attn_output_gate != 0 && c->attn_output_gate != 1) || (c->attention_bias != 0 && c->attention_bias != 1))
        return mc_ref_fail(msg, MC_BACKEND_INVALID,
                           "attention config: 'attn_output_gate' and 'attention_bias' must be 0 or 1 (got %d, %d)",
                           (int)c->attn_output_gate, (int)c->attention_bias);
    if (c->sconv_kernel < 0 || c->rel_dim < 0 || c->rel_extent < 0 || c->sliding_window < 0 ||
        (c->rel_dim > 0) != (c->rel_extent > 0) ||
        ((c->sconv_kernel || c->rel_dim || c->sliding_window) &&
         (c->kv_lora_rank > 0 || c->qk_norm == MC_QK_NORM_RMS_FULL)) ||
        c->sconv_kernel > 64 || c->rel_extent > (int64_t)1 << 24)
        return mc_ref_fail(msg, MC_BACKEND_INVALID,
                           "attention config: 'sconv_kernel' (<= 64), 'rel_dim', 'rel_extent' and 'sliding_window' "
                           "must be >= 0, rel_dim and rel_extent both 0 or both > 0, none of them with MLA or qk_norm "
                           "rms_full (got %lld, %lld, %lld, %lld)",
                           (long long)c->sconv_kernel, (long long)c->rel_dim, (long long)c->rel_extent,
                           (long long)c->sliding_window);
    return MC_BACKEND_OK;
}

static void at_weight_specs(const struct mc_model *m, struct mc_ref_weight_spec spec[AT_W_COUNT])
{
    static const char no_bias[] = "given but the configuration has attention_bias = 0";
    static const char no_norm[] = "given but the configuration has qk_norm = none";
    const int bias = m->cfg.attention_bias, norm = m->cfg.qk_norm != MC_QK_NORM_NONE;
    const int64_t qd = m->Hq * m->hd, kvd = m->Hkv * m->hd;
    memset(spec, 0, sizeof(struct mc_ref_weight_spec) * AT_W_COUNT);
#define AT_SPEC(slot, on, why, nd, d0, d1)                                                                             \
    (spec[slot] =                                                                                                      \
         (struct mc_ref_weight_spec){.present = (on), .ndim = (nd), .dims = {(d0), (d1), 0}, .absent_why = (why)})
    if (m->cfg.kv_lora_rank > 0) { /* MLA (§12.8) */
        static const char plain[] = "given but the configuration is MLA (kv_lora_rank > 0)";
        static const char no_qlora[] = "given but the configuration has q_lora_rank = 0 (q_proj)";
        const int64_t H = m->Hq, c = m->cfg.kv_lora_rank, dr = m->cfg.qk_rope_head_dim, dv = m->cfg.v_head_dim;
        const int64_t qr = m->cfg.q_lora_rank;
        AT_SPEC(AT_W_Q, qr == 0, "given but the configuration has q_lora_rank > 0 (q_a_proj, q_b_proj)", 2, qd, m->D);
        AT_SPEC(AT_W_Q_BIAS, 0, plain, 1, qd, 0);
        AT_SPEC(AT_W_K, 0, plain, 2, 0, 0);
        AT_SPEC(AT_W_K_BIAS, 0, plain, 1, 0, 0);
        AT_SPEC(AT_W_V, 0, plain, 2, 0, 0);
        AT_SPEC(AT_W_V_BIAS, 0, plain, 1, 0, 0);
        AT_SPEC(AT_W_O, 1, NULL, 2, m->D, H * dv);
        AT_SPEC(AT_W_O_BIAS, bias, no_bias, 1, m->D, 0);
        AT_SPEC(AT_W_Q_NORM, 0, plain, 1, 0, 0);
        AT_SPEC(AT_W_K_NORM, 0, plain, 1, 0, 0);
        AT_SPEC(AT_W_Q_A, qr > 0, no_qlora, 2, qr, m->D);
        AT_SPEC(AT_W_Q_A_BIAS, qr > 0 && bias, qr > 0 ? no_bias : no_qlora, 1, qr, 0);
        AT_SPEC(AT_W_Q_A_NORM, qr > 0, no_qlora, 1, qr, 0);
        AT_SPEC(AT_W_Q_B, qr > 0, no_qlora, 2, qd, qr);
        AT_SPEC(AT_W_KV_A, 1, NULL, 2, c + dr, m->D);
        AT_SPEC(AT_W_KV_A_BIAS, bias, no_bias, 1, c + dr, 0);
        AT_SPEC(AT_W_KV_A_NORM, 1, NULL, 1, c, 0);
        AT_SPEC(AT_W_KV_B, 1, NULL, 2, H * (m->hd - dr + dv), c);
        for (int slot = AT_W_K_SCONV; slot <= AT_W_REL; slot++)
            AT_SPEC(slot, 0, plain, 1, 0, 0);
        return;
    }
    {
        static const char no_mla[] = "given but the configuration has kv_lora_rank = 0 (no MLA)";
        for (int slot = AT_W_Q_A; slot <= AT_W_KV_B; slot++)
            AT_SPEC(slot, 0, no_mla, 1, 0, 0);
    }
    AT_SPEC(AT_W_Q, 1, NULL, 2, m->qrows, m->D);
    AT_SPEC(AT_W_Q_BIAS, bias, no_bias, 1, m->qrows, 0);
    AT_SPEC(AT_W_K, 1, NULL, 2, kvd, m->D);
    AT_SPEC(AT_W_K_BIAS, bias, no_bias, 1, kvd, 0);
    AT_SPEC(AT_W_V, 1, NULL, 2, kvd, m->D);
    AT_SPEC(AT_W_V_BIAS, bias, no_bias, 1, kvd, 0);
    AT_SPEC(AT_W_O, 1, NULL, 2, m->D, qd);
    AT_SPEC(AT_W_O_BIAS, bias, no_bias, 1, m->D, 0);
    const int full = m->cfg.qk_norm == MC_QK_NORM_RMS_FULL; /* over the whole projection */
    AT_SPEC(AT_W_Q_NORM, norm, no_norm, 1, full ? qd : m->hd, 0);
    AT_SPEC(AT_W_K_NORM, norm, no_norm, 1, full ? kvd : m->hd, 0);
    static const char no_sconv[] = "given but the configuration has sconv_kernel = 0";
    static const char no_rel[] = "given but the configuration has rel_dim = 0";
    const int64_t K = m->cfg.sconv_kernel, dr = m->cfg.rel_dim;
    AT_SPEC(AT_W_K_SCONV, K > 0, no_sconv, 3, kvd, 1);
    AT_SPEC(AT_W_V_SCONV, K > 0, no_sconv, 3, kvd, 1);
    AT_SPEC(AT_W_OUT_SCONV, K > 0, no_sconv, 3, m->D, 1);
    spec[AT_W_K_SCONV].dims[2] = spec[AT_W_V_SCONV].dims[2] = spec[AT_W_OUT_SCONV].dims[2] = K;
    AT_SPEC(AT_W_R, dr > 0, no_rel, 2, m->Hq * dr, m->D);
    AT_SPEC(AT_W_REL, dr > 0, no_rel, 2, dr, m->cfg.rel_extent);
#undef AT_SPEC
}

static void at_model_destroy(struct mc_model *model)
{
    if (model)
        free(model->inv_freq);
    mc_ref_model_destroy(model);
}

static enum mc_backend_status at_model_create(const struct mc_model_desc *desc, struct mc_model **model,
                                              struct mc_msg *msg)
{
    enum mc_backend_status st;
    struct mc_model *m = NULL;
    struct mc_ref_weight_spec spec[AT_W_COUNT];
    const struct mc_weight *found[AT_W_COUNT] = {0};

    if ((st = mc_ref_desc_check(&at_family, desc, model, msg)) != MC_BACKEND_OK ||
        (st = at_config_validate(desc->config, msg)) != MC_BACKEND_OK)
        goto fail;
    m = mc_ref_model_alloc(&at_family, sizeof *m, desc->dtype, &st, msg);
    if (!m)
        goto fail;
    m->cfg = *(const struct mc_attention_config *)desc->config;
    m->D = m->cfg.hidden_size;
    m->Hq = m->cfg.num_attention_heads;
    m->Hkv = m->cfg.num_key_value_heads;
    m->hd = m->cfg.head_dim;
    m->Lmax = m->cfg.cache_length;
    m->R = m->cfg.no_rope ? 0 : (int64_t)((double)m->hd * m->cfg.partial_rotary_factor); /* no_rope: nothing rotated */
    m->qrows = (m->cfg.attn_output_gate ? 2 : 1) * m->Hq * m->hd;
    m->ref.window_elems = 1;
    if (m->cfg.sconv_kernel > 0) /* the count, the k, v and out windows (§12.9) */
        m->ref.window_elems = (1 + 2 * m->Hkv * m->hd + m->D) * m->cfg.sconv_kernel;
    m->ref.state_elems = 2 * m->Hkv * m->Lmax * m->hd;
    if (m->cfg.kv_lora_rank > 0) { /* MLA: the rope part rotated whole; the cache holds latent | rope key */
        m->R = m->cfg.no_rope ? 0 : m->cfg.qk_rope_head_dim;
        m->ref.state_elems = m->Lmax * (m->cfg.kv_lora_rank + m->cfg.qk_rope_head_dim);
    }
    m->ref.hidden = m->D;
    m->inv_freq = malloc((size_t)(m->R / 2 + 1) * sizeof *m->inv_freq);
    if (!m->inv_freq) {
        st = mc_ref_fail(msg, MC_BACKEND_NOMEM, "attention reference: out of memory for the rotary frequencies");
        goto fail;
    }
    for (int64_t i = 0; i < m->R / 2; i++)
        m->inv_freq[i] = pow(m->cfg.rope_theta, -(double)(2 * i) / (double)m->R);

    at_weight_specs(m, spec);
    if ((st = mc_ref_weights_match(&at_family, desc, spec, "", found, msg)) != MC_BACKEND_OK ||
        (st = mc_ref_weights_copy(&at_family, m, spec, found, msg)) != MC_BACKEND_OK)
        goto fail;
    *model = m;
    return MC_BACKEND_OK;

fail:
    at_model_destroy(m);
    return st;
}

/* ---- the backend interface: the shared cache and forward, with this family's messages ----------- */

MC_REF_OPS_ENTRIES(at, at_family)

static const struct mc_backend_ops at_ops = {
    MC_REF_OPS_FIELDS(at, MC_FAMILY_ATTENTION),
    .caps = MC_CAP_PACKED,
    .model_create = at_model_create,
    .model_destroy = at_model_destroy,
};

const struct mc_backend_ops *mc_reference_attention_ops(void)
{
    return &at_ops;
}
