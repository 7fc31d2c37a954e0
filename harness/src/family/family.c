/* family.c — see family.h. Configuration names and parameter shapes follow docs/semantics.md §2–§5 and §12. */
#include "family/family.h"

#include <math.h>
#include <string.h>

#define FIELD(type, member, kind) {#member, kind, offsetof(struct type, member), 0}

static const struct mc_config_field mamba2_fields[] = {
    FIELD(mc_mamba2_config, hidden_size, MC_FIELD_INT),
    FIELD(mc_mamba2_config, num_heads, MC_FIELD_INT),
    FIELD(mc_mamba2_config, head_dim, MC_FIELD_INT),
    FIELD(mc_mamba2_config, state_size, MC_FIELD_INT),
    FIELD(mc_mamba2_config, n_groups, MC_FIELD_INT),
    FIELD(mc_mamba2_config, conv_kernel, MC_FIELD_INT),
    FIELD(mc_mamba2_config, chunk_size, MC_FIELD_INT),
    FIELD(mc_mamba2_config, norm_group_size, MC_FIELD_INT),
    FIELD(mc_mamba2_config, layer_norm_epsilon, MC_FIELD_DOUBLE),
    FIELD(mc_mamba2_config, time_step_limit, MC_FIELD_DOUBLE_PAIR),
    FIELD(mc_mamba2_config, use_bias, MC_FIELD_BOOL),
    FIELD(mc_mamba2_config, use_conv_bias, MC_FIELD_BOOL),
    {"no_gated_norm", MC_FIELD_BOOL, offsetof(struct mc_mamba2_config, no_gated_norm), 1},
    {"norm_before_gate", MC_FIELD_BOOL, offsetof(struct mc_mamba2_config, norm_before_gate), 1},
};

static const struct mc_config_field mamba1_fields[] = {
    FIELD(mc_mamba1_config, hidden_size, MC_FIELD_INT),
    FIELD(mc_mamba1_config, intermediate_size, MC_FIELD_INT),
    FIELD(mc_mamba1_config, state_size, MC_FIELD_INT),
    FIELD(mc_mamba1_config, conv_kernel, MC_FIELD_INT),
    FIELD(mc_mamba1_config, time_step_rank, MC_FIELD_INT),
    FIELD(mc_mamba1_config, use_bias, MC_FIELD_BOOL),
    FIELD(mc_mamba1_config, use_conv_bias, MC_FIELD_BOOL),
    {"inner_norms", MC_FIELD_INT, offsetof(struct mc_mamba1_config, inner_norms), 1},
    {"mixer_rms_eps", MC_FIELD_DOUBLE, offsetof(struct mc_mamba1_config, mixer_rms_eps), 1},
};

static const struct mc_config_field gdn_fields[] = {
    FIELD(mc_gdn_config, hidden_size, MC_FIELD_INT),
    {"linear_num_key_heads", MC_FIELD_INT, offsetof(struct mc_gdn_config, num_key_heads), 0},
    {"linear_num_value_heads", MC_FIELD_INT, offsetof(struct mc_gdn_config, num_value_heads), 0},
    {"linear_key_head_dim", MC_FIELD_INT, offsetof(struct mc_gdn_config, key_head_dim), 0},
    {"linear_value_head_dim", MC_FIELD_INT, offsetof(struct mc_gdn_config, value_head_dim), 0},
    {"linear_conv_kernel_dim", MC_FIELD_INT, offsetof(struct mc_gdn_config, conv_kernel), 0},
    FIELD(mc_gdn_config, chunk_size, MC_FIELD_INT),
    FIELD(mc_gdn_config, rms_norm_eps, MC_FIELD_DOUBLE),
    {"projection_layout", MC_FIELD_GDN_LAYOUT, offsetof(struct mc_gdn_config, layout), 0},
    {"allow_neg_eigval", MC_FIELD_BOOL, offsetof(struct mc_gdn_config, allow_neg_eigval), 1},
};

static const struct mc_config_field shortconv_fields[] = {
    FIELD(mc_shortconv_config, hidden_size, MC_FIELD_INT),
    {"conv_L_cache", MC_FIELD_INT, offsetof(struct mc_shortconv_config, conv_kernel), 0},
    FIELD(mc_shortconv_config, conv_bias, MC_FIELD_BOOL),
};

static const struct mc_config_field attention_fields[] = {
    FIELD(mc_attention_config, hidden_size, MC_FIELD_INT),
    FIELD(mc_attention_config, num_attention_heads, MC_FIELD_INT),
    FIELD(mc_attention_config, num_key_value_heads, MC_FIELD_INT),
    FIELD(mc_attention_config, head_dim, MC_FIELD_INT),
    FIELD(mc_attention_config, cache_length, MC_FIELD_INT),
    FIELD(mc_attention_config, partial_rotary_factor, MC_FIELD_DOUBLE),
    FIELD(mc_attention_config, rope_theta, MC_FIELD_DOUBLE),
    FIELD(mc_attention_config, rms_norm_eps, MC_FIELD_DOUBLE),
    FIELD(mc_attention_config, qk_norm, MC_FIELD_QK_NORM),
    FIELD(mc_attention_config, attn_output_gate, MC_FIELD_BOOL),
    FIELD(mc_attention_config, attention_bias, MC_FIELD_BOOL),
    {"no_rope", MC_FIELD_BOOL, offsetof(struct mc_attention_config, no_rope), 1},
    {"softmax_scale", MC_FIELD_DOUBLE, offsetof(struct mc_attention_config, softmax_scale), 1},
    {"kv_lora_rank", MC_FIELD_INT, offsetof(struct mc_attention_config, kv_lora_rank), 1},
    {"q_lora_rank", MC_FIELD_INT, offsetof(struct mc_attention_config, q_lora_rank), 1},
    {"qk_rope_head_dim", MC_FIELD_INT, offsetof(struct mc_attention_config, qk_rope_head_dim), 1},
    {"v_head_dim", MC_FIELD_INT, offsetof(struct mc_attention_config, v_head_dim), 1},
    {"sconv_kernel", MC_FIELD_INT, offsetof(struct mc_attention_config, sconv_kernel), 1},
    {"rel_dim", MC_FIELD_INT, offsetof(struct mc_attention_config, rel_dim), 1},
    {"rel_extent", MC_FIELD_INT, offsetof(struct mc_attention_config, rel_extent), 1},
    {"sliding_window", MC_FIELD_INT, offsetof(struct mc_attention_config, sliding_window), 1},
};

static const struct mc_config_field lightning_fields[] = {
    FIELD(mc_lightning_config, hidden_size, MC_FIELD_INT),
    FIELD(mc_lightning_config, num_attention_heads, MC_FIELD_INT),
    FIELD(mc_lightning_config, head_dim, MC_FIELD_INT),
    FIELD(mc_lightning_config, block_size, MC_FIELD_INT),
    FIELD(mc_lightning_config, layer_idx, MC_FIELD_INT),
    FIELD(mc_lightning_config, num_hidden_layers, MC_FIELD_INT),
    FIELD(mc_lightning_config, norm_eps, MC_FIELD_DOUBLE),
};

static const struct mc_config_field kda_fields[] = {
    FIELD(mc_kda_config, hidden_size, MC_FIELD_INT),
    {"linear_num_heads", MC_FIELD_INT, offsetof(struct mc_kda_config, num_heads), 0},
    {"linear_head_dim", MC_FIELD_INT, offsetof(struct mc_kda_config, head_dim), 0},
    {"linear_conv_kernel_dim", MC_FIELD_INT, offsetof(struct mc_kda_config, conv_kernel), 0},
    FIELD(mc_kda_config, chunk_size, MC_FIELD_INT),
    FIELD(mc_kda_config, rms_norm_eps, MC_FIELD_DOUBLE),
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

const char *mc_family_name(enum mc_family family)
{
    switch (family) {
    case MC_FAMILY_STACK:
        return "stack";
    case MC_FAMILY_MAMBA2:
        return "mamba2";
    case MC_FAMILY_MAMBA1:
        return "mamba1";
    case MC_FAMILY_GDN:
        return "gdn";
    case MC_FAMILY_SHORTCONV:
        return "shortconv";
    case MC_FAMILY_ATTENTION:
        return "attention";
    case MC_FAMILY_LIGHTNING:
        return "lightning";
    case MC_FAMILY_KDA:
        return "kda";
    }
    return "unknown";
}

const char *mc_family_names_text(void)
{
    return "mamba2, mamba1, gdn, shortconv, attention, lightning or kda";
}

static const char *const QK_NORM_NAMES[] = {[MC_QK_NORM_NONE] = "none", [MC_QK_NORM_RMS] = "rms",
                                            [MC_QK_NORM_ZERO_CENTRED] = "zero_centred",
                                            [MC_QK_NORM_RMS_FULL] = "rms_full"};

int mc_qk_norm_from_name(const char *name)
{
    for (int i = MC_QK_NORM_NONE; i <= MC_QK_NORM_RMS_FULL; i++)
        if (strcmp(name, QK_NORM_NAMES[i]) == 0)
            return i;
    return -1;
}

const char *mc_qk_norm_name(int32_t qk_norm)
{
    return qk_norm >= MC_QK_NORM_NONE && qk_norm <= MC_QK_NORM_RMS_FULL ? QK_NORM_NAMES[qk_norm] : "unknown";
}

int mc_family_from_name(const char *name, enum mc_family *family)
{
    static const enum mc_family all[] = {MC_FAMILY_MAMBA2, MC_FAMILY_MAMBA1, MC_FAMILY_GDN, MC_FAMILY_SHORTCONV,
                                         MC_FAMILY_ATTENTION, MC_FAMILY_LIGHTNING, MC_FAMILY_KDA};
    for (size_t i = 0; i < COUNT(all); i++) {
        if (strcmp(name, mc_family_name(all[i])) == 0) {
            *family = all[i];
            return 0;
        }
    }
    return -1;
}

const struct mc_config_field *mc_family_config_fields(enum mc_family family, size_t *count)
{
    switch (family) {
    case MC_FAMILY_STACK: /* a whole model: no mixer configuration */
        break;
    case MC_FAMILY_MAMBA2:
        *count = COUNT(mamba2_fields);
        return mamba2_fields;
    case MC_FAMILY_MAMBA1:
        *count = COUNT(mamba1_fields);
        return mamba1_fields;
    case MC_FAMILY_GDN:
        *count = COUNT(gdn_fields);
        return gdn_fields;
    case MC_FAMILY_SHORTCONV:
        *count = COUNT(shortconv_fields);
        return shortconv_fields;
    case MC_FAMILY_ATTENTION:
        *count = COUNT(attention_fields);
        return attention_fields;
    case MC_FAMILY_LIGHTNING:
        *count = COUNT(lightning_fields);
        return lightning_fields;
    case MC_FAMILY_KDA:
        *count = COUNT(kda_fields);
        return kda_fields;
    }
    *count = 0;
    return NULL;
}

/* Sizes above this are refused: no realistic layer comes near, and products stay far from overflow. */
#define MC_MAX_DIM 65536

static enum mc_err_code check_dim(const char *name, int64_t v, struct mc_error *err)
{
    if (v < 1 || v > MC_MAX_DIM)
        return mc_error_set(err, MC_ERR_INPUT, "config attribute '%s' must be in [1, %d] (got %lld)", name,
                            MC_MAX_DIM, (long long)v);
    return MC_ERR_NONE;
}

static enum mc_err_code check_divides(const char *what, int64_t a, const char *by, int64_t b, struct mc_error *err)
{
    if (a % b != 0)
        return mc_error_set(err, MC_ERR_INPUT, "config: '%s' (%lld) must be a multiple of '%s' (%lld)", what,
                            (long long)a, by, (long long)b);
    return MC_ERR_NONE;
}

static enum mc_err_code validate_mamba2(const struct mc_mamba2_config *c, struct mc_error *err)
{
    if (check_dim("hidden_size", c->hidden_size, err) || check_dim("num_heads", c->num_heads, err) ||
        check_dim("head_dim", c->head_dim, err) || check_dim("state_size", c->state_size, err) ||
        check_dim("n_groups", c->n_groups, err) || check_dim("conv_kernel", c->conv_kernel, err) ||
        check_dim("chunk_size", c->chunk_size, err) || check_dim("norm_group_size", c->norm_group_size, err))
        return err->code;
    int64_t inner = c->num_heads * c->head_dim;
    if (check_divides("num_heads", c->num_heads, "n_groups", c->n_groups, err) ||
        check_divides("num_heads*head_dim", inner, "norm_group_size", c->norm_group_size, err))
        return err->code;
    if (!(c->layer_norm_epsilon > 0.0) || !isfinite(c->layer_norm_epsilon))
        return mc_error_set(err, MC_ERR_INPUT, "config attribute 'layer_norm_epsilon' must be finite and > 0 (got %g)",
                            c->layer_norm_epsilon);
    double lo = c->time_step_limit[0], hi = c->time_step_limit[1];
    if (isnan(lo) || isnan(hi) || lo < 0.0 || !(hi > lo) || isinf(lo))
        return mc_error_set(err, MC_ERR_INPUT,
                            "config attribute 'time_step_limit' must satisfy 0 <= lo < hi (got [%g, %g])", lo, hi);
    if (c->no_gated_norm && c->norm_before_gate)
        return mc_error_set(err, MC_ERR_INPUT,
                            "config attributes 'no_gated_norm' and 'norm_before_gate' exclude each other (the gate "
                            "after the norm needs the norm)");
    return MC_ERR_NONE;
}

static enum mc_err_code validate_mamba1(const struct mc_mamba1_config *c, struct mc_error *err)
{
    if (check_dim("hidden_size", c->hidden_size, err) || check_dim("intermediate_size", c->intermediate_size, err) ||
        check_dim("state_size", c->state_size, err) || check_dim("conv_kernel", c->conv_kernel, err) ||
        check_dim("time_step_rank", c->time_step_rank, err))
        return err->code;
    if (c->inner_norms < MC_M1_INNER_NORMS_NONE || c->inner_norms > MC_M1_INNER_NORMS_WEIGHTED)
        return mc_error_set(err, MC_ERR_INPUT, "config attribute 'inner_norms' must be 0, 1 or 2 (got %lld)",
                            (long long)c->inner_norms);
    if (c->inner_norms != MC_M1_INNER_NORMS_NONE && (!(c->mixer_rms_eps > 0.0) || !isfinite(c->mixer_rms_eps)))
        return mc_error_set(err, MC_ERR_INPUT, "config attribute 'mixer_rms_eps' must be finite and > 0 (got %g)",
                            c->mixer_rms_eps);
    return MC_ERR_NONE;
}

static enum mc_err_code validate_gdn(const struct mc_gdn_config *c, struct mc_error *err)
{
    if (check_dim("hidden_size", c->hidden_size, err) || check_dim("linear_num_key_heads", c->num_key_heads, err) ||
        check_dim("linear_num_value_heads", c->num_value_heads, err) ||
        check_dim("linear_key_head_dim", c->key_head_dim, err) ||
        check_dim("linear_value_head_dim", c->value_head_dim, err) ||
        check_dim("linear_conv_kernel_dim", c->conv_kernel, err) || check_dim("chunk_size", c->chunk_size, err))
        return err->code;
    if (check_divides("linear_num_value_heads", c->num_value_heads, "linear_num_key_heads", c->num_key_heads, err))
        return err->code;
    if (!(c->rms_norm_eps > 0.0) || !isfinite(c->rms_norm_eps))
        return mc_error_set(err, MC_ERR_INPUT, "config attribute 'rms_norm_eps' must be finite and > 0 (got %g)",
                            c->rms_norm_eps);
    if (c->layout != MC_GDN_LAYOUT_QWEN3_5 && c->layout != MC_GDN_LAYOUT_QWEN3_NEXT)
        return mc_error_set(err, MC_ERR_INPUT, "config attribute 'projection_layout' is unknown");
    return MC_ERR_NONE;
}

/* The rotary dims R = int(hd * partial_rotary_factor), as upstream truncates (0 when the factor is not usable). */
static int64_t attention_rotary_dims(const struct mc_attention_config *c)
{
    double r = (double)c->head_dim * c->partial_rotary_factor;
    return isfinite(r) && r >= 0.0 && r <= (double)c->head_dim ? (int64_t)r : 0;
}

static enum mc_err_code validate_attention(const struct mc_attention_config *c, struct mc_error *err)
{
    if (check_dim("hidden_size", c->hidden_size, err) ||
        check_dim("num_attention_heads", c->num_attention_heads, err) ||
        check_dim("num_key_value_heads", c->num_key_value_heads, err) || check_dim("head_dim", c->head_dim, err) ||
        check_dim("cache_length", c->cache_length, err))
        return err->code;
    if (check_divides("num_attention_heads", c->num_attention_heads, "num_key_value_heads", c->num_key_value_heads,
                      err))
        return err->code;
    if (c->no_rope != 0 && c->no_rope != 1)
        return mc_error_set(err, MC_ERR_INPUT, "config attribute 'no_rope' must be 0 or 1");
    if (!(c->softmax_scale >= 0.0) || !isfinite(c->softmax_scale))
        return mc_error_set(err, MC_ERR_INPUT,
                            "config attribute 'softmax_scale' must be finite and >= 0 (0: 1/sqrt(head_dim); got %g)",
                            c->softmax_scale);
    if (c->kv_lora_rank < 0 || c->q_lora_rank < 0 || c->qk_rope_head_dim < 0 || c->v_head_dim < 0)
        return mc_error_set(err, MC_ERR_INPUT,
                            "config attributes 'kv_lora_rank', 'q_lora_rank', 'qk_rope_head_dim' and 'v_head_dim' "
                            "must be >= 0 (got %lld, %lld, %lld, %lld)",
                            (long long)c->kv_lora_rank, (long long)c->q_lora_rank, (long long)c->qk_rope_head_dim,
                            (long long)c->v_head_dim);
    if (c->sconv_kernel < 0 || c->rel_dim < 0 || c->rel_extent < 0 || c->sliding_window < 0 ||
        (c->rel_dim > 0) != (c->rel_extent > 0))
        return mc_error_set(err, MC_ERR_INPUT,
                            "config attributes 'sconv_kernel', 'rel_dim', 'rel_extent' and 'sliding_window' must be "
                            ">= 0, rel_dim and rel_extent both 0 or both > 0 (got %lld, %lld, %lld, %lld)",
                            (long long)c->sconv_kernel, (long long)c->rel_dim, (long long)c->rel_extent,
                            (long long)c->sliding_window);
    if (c->kv_lora_rank > 0 && (c->sconv_kernel || c->rel_dim || c->sliding_window))
        return mc_error_set(err, MC_ERR_INPUT,
                            "config: 'sconv_kernel', 'rel_dim' and 'sliding_window' (Inkling's options) have no MLA "
                            "form (kv_lora_rank > 0)");
    if ((c->sconv_kernel || c->rel_dim) && c->qk_norm == MC_QK_NORM_RMS_FULL)
        return mc_error_set(err, MC_ERR_INPUT,
                            "config: 'sconv_kernel' / 'rel_dim' take the per-head q/k norms (qk_norm rms_full has no "
                            "form with them)");
    if (c->kv_lora_rank > 0) { /* MLA (§12.8) */
        if (check_dim("qk_rope_head_dim", c->qk_rope_head_dim, err) || check_dim("v_head_dim", c->v_head_dim, err))
            return err->code;
        if (c->qk_rope_head_dim >= c->head_dim)
            return mc_error_set(err, MC_ERR_INPUT,
                                "config: with kv_lora_rank (MLA) 'head_dim' (%lld) is qk_nope_head_dim + "
                                "qk_rope_head_dim and must exceed 'qk_rope_head_dim' (%lld)",
                                (long long)c->head_dim, (long long)c->qk_rope_head_dim);
        if (c->num_key_value_heads != c->num_attention_heads)
            return mc_error_set(err, MC_ERR_INPUT,
                                "config: with kv_lora_rank (MLA) 'num_key_value_heads' (%lld) must equal "
                                "'num_attention_heads' (%lld): kv_b_proj expands the latent into every head",
                                (long long)c->num_key_value_heads, (long long)c->num_attention_heads);
        if (c->qk_norm != MC_QK_NORM_NONE || c->attn_output_gate)
            return mc_error_set(err, MC_ERR_INPUT,
                                "config: with kv_lora_rank (MLA) 'qk_norm' must be none and 'attn_output_gate' 0");
        if (!c->no_rope && c->qk_rope_head_dim % 2 != 0)
            return mc_error_set(err, MC_ERR_INPUT, "config: the rotary dims 'qk_rope_head_dim' = %lld must be even",
                                (long long)c->qk_rope_head_dim);
        if (!c->no_rope && (!(c->rope_theta > 1.0) || !isfinite(c->rope_theta)))
            return mc_error_set(err, MC_ERR_INPUT, "config attribute 'rope_theta' must be finite and > 1 (got %g)",
                                c->rope_theta);
        goto rope_checked; /* MLA rotates the rope part whole: partial_rotary_factor unused */
    }
    if (c->q_lora_rank || c->qk_rope_head_dim || c->v_head_dim)
        return mc_error_set(err, MC_ERR_INPUT,
                            "config: 'q_lora_rank', 'qk_rope_head_dim' and 'v_head_dim' are MLA attributes and need "
                            "kv_lora_rank > 0");
    if (c->no_rope) /* partial_rotary_factor and rope_theta unused */
        goto rope_checked;
    if (!(c->partial_rotary_factor > 0.0 && c->partial_rotary_factor <= 1.0))
        return mc_error_set(err, MC_ERR_INPUT, "config attribute 'partial_rotary_factor' must be in (0, 1] (got %g)",
                            c->partial_rotary_factor);
    int64_t R = attention_rotary_dims(c);
    if (R < 2 || R % 2 != 0)
        return mc_error_set(err, MC_ERR_INPUT,
                            "config: rotary dims int(head_dim * partial_rotary_factor) = %lld must be even and >= 2",
                            (long long)R);
    if (!(c->rope_theta > 1.0) || !isfinite(c->rope_theta))
        return mc_error_set(err, MC_ERR_INPUT, "config attribute 'rope_theta' must be finite and > 1 (got %g)",
                            c->rope_theta);
rope_checked:
    if (!(c->rms_norm_eps > 0.0) || !isfinite(c->rms_norm_eps))
        return mc_error_set(err, MC_ERR_INPUT, "config attribute 'rms_norm_eps' must be finite and > 0 (got %g)",
                            c->rms_norm_eps);
    if (c->qk_norm < MC_QK_NORM_NONE || c->qk_norm > MC_QK_NORM_RMS_FULL)
        return mc_error_set(err, MC_ERR_INPUT, "config attribute 'qk_norm' is unknown");
    if (c->qk_norm == MC_QK_NORM_RMS_FULL && c->attn_output_gate)
        return mc_error_set(err, MC_ERR_INPUT,
                            "config attribute 'qk_norm' rms_full (over the whole q projection) has no form with "
                            "attn_output_gate (q and gate interleaved per head)");
    return MC_ERR_NONE;
}

static enum mc_err_code check_eps(const char *name, double v, struct mc_error *err)
{
    if (!(v > 0.0) || !isfinite(v))
        return mc_error_set(err, MC_ERR_INPUT, "config attribute '%s' must be finite and > 0 (got %g)", name, v);
    return MC_ERR_NONE;
}

static enum mc_err_code validate_lightning(const struct mc_lightning_config *c, struct mc_error *err)
{
    if (check_dim("hidden_size", c->hidden_size, err) ||
        check_dim("num_attention_heads", c->num_attention_heads, err) || check_dim("head_dim", c->head_dim, err) ||
        check_dim("block_size", c->block_size, err) || check_dim("num_hidden_layers", c->num_hidden_layers, err))
        return err->code;
    if (c->layer_idx < 0 || c->layer_idx >= c->num_hidden_layers)
        return mc_error_set(err, MC_ERR_INPUT,
                            "config attribute 'layer_idx' must be in [0, num_hidden_layers) = [0, %lld) (got %lld)",
                            (long long)c->num_hidden_layers, (long long)c->layer_idx);
    return check_eps("norm_eps", c->norm_eps, err);
}

static enum mc_err_code validate_kda(const struct mc_kda_config *c, struct mc_error *err)
{
    if (check_dim("hidden_size", c->hidden_size, err) || check_dim("linear_num_heads", c->num_heads, err) ||
        check_dim("linear_head_dim", c->head_dim, err) || check_dim("linear_conv_kernel_dim", c->conv_kernel, err) ||
        check_dim("chunk_size", c->chunk_size, err))
        return err->code;
    return check_eps("rms_norm_eps", c->rms_norm_eps, err);
}

enum mc_err_code mc_family_config_validate(const struct mc_family_config *cfg, struct mc_error *err)
{
    switch (cfg->family) {
    case MC_FAMILY_STACK: /* a whole model: no mixer configuration */
        break;
    case MC_FAMILY_MAMBA2:
        return validate_mamba2(&cfg->u.mamba2, err);
    case MC_FAMILY_MAMBA1:
        return validate_mamba1(&cfg->u.mamba1, err);
    case MC_FAMILY_GDN:
        return validate_gdn(&cfg->u.gdn, err);
    case MC_FAMILY_SHORTCONV:
        if (check_dim("hidden_size", cfg->u.shortconv.hidden_size, err) ||
            check_dim("conv_L_cache", cfg->u.shortconv.conv_kernel, err))
            return err->code;
        return MC_ERR_NONE;
    case MC_FAMILY_ATTENTION:
        return validate_attention(&cfg->u.attention, err);
    case MC_FAMILY_LIGHTNING:
        return validate_lightning(&cfg->u.lightning, err);
    case MC_FAMILY_KDA:
        return validate_kda(&cfg->u.kda, err);
    }
    return mc_error_set(err, MC_ERR_INPUT, "unknown family %d", (int)cfg->family);
}

static void spec(struct mc_weight_spec *out, int *n, const char *name, int ndim, int64_t d0, int64_t d1, int64_t d2)
{
    struct mc_weight_spec *s = &out[(*n)++];
    s->name = name;
    s->ndim = ndim;
    memset(s->dims, 0, sizeof s->dims);
    s->dims[0] = d0;
    s->dims[1] = d1;
    s->dims[2] = d2;
}

/* A spec of four dims (KDA's forget_gate.A_log [1][1][H][1]). */
static void spec4(struct mc_weight_spec *out, int *n, const char *name, int64_t d0, int64_t d1, int64_t d2, int64_t d3)
{
    spec(out, n, name, 4, d0, d1, d2);
    out[*n - 1].dims[3] = d3;
}

int mc_family_weight_specs(const struct mc_family_config *cfg, struct mc_weight_spec out[MC_FAMILY_MAX_WEIGHTS])
{
    int n = 0;
    struct mc_family_shape sh;
    mc_family_shape(cfg, &sh);
    int64_t D = sh.hidden, C = sh.conv_channels, K = sh.conv_kernel;
    switch (cfg->family) {
    case MC_FAMILY_STACK: /* a whole model: no mixer configuration */
        break;
    case MC_FAMILY_MAMBA2: {
        const struct mc_mamba2_config *c = &cfg->u.mamba2;
        int64_t I = c->num_heads * c->head_dim, H = c->num_heads;
        int64_t proj = I + C + H;
        spec(out, &n, "in_proj.weight", 2, proj, D, 0);
        if (c->use_bias)
            spec(out, &n, "in_proj.bias", 1, proj, 0, 0);
        spec(out, &n, "conv1d.weight", 3, C, 1, K);
        if (c->use_conv_bias)
            spec(out, &n, "conv1d.bias", 1, C, 0, 0);
        spec(out, &n, "dt_bias", 1, H, 0, 0);
        spec(out, &n, "A_log", 1, H, 0, 0);
        spec(out, &n, "D", 1, H, 0, 0);
        if (!c->no_gated_norm)
            spec(out, &n, "norm.weight", 1, I, 0, 0);
        spec(out, &n, "out_proj.weight", 2, D, I, 0);
        if (c->use_bias)
            spec(out, &n, "out_proj.bias", 1, D, 0, 0);
        break;
    }
    case MC_FAMILY_MAMBA1: {
        const struct mc_mamba1_config *c = &cfg->u.mamba1;
        int64_t I = c->intermediate_size, N = c->state_size, R = c->time_step_rank;
        spec(out, &n, "in_proj.weight", 2, 2 * I, D, 0);
        if (c->use_bias)
            spec(out, &n, "in_proj.bias", 1, 2 * I, 0, 0);
        spec(out, &n, "conv1d.weight", 3, I, 1, K);
        if (c->use_conv_bias)
            spec(out, &n, "conv1d.bias", 1, I, 0, 0);
        spec(out, &n, "x_proj.weight", 2, R + 2 * N, I, 0);
        if (c->inner_norms == MC_M1_INNER_NORMS_WEIGHTED) { /* Jamba's JambaRMSNorm weights */
            spec(out, &n, "dt_layernorm.weight", 1, R, 0, 0);
            spec(out, &n, "b_layernorm.weight", 1, N, 0, 0);
            spec(out, &n, "c_layernorm.weight", 1, N, 0, 0);
        }
        spec(out, &n, "dt_proj.weight", 2, I, R, 0);
        spec(out, &n, "dt_proj.bias", 1, I, 0, 0);
        spec(out, &n, "A_log", 2, I, N, 0);
        spec(out, &n, "D", 1, I, 0, 0);
        spec(out, &n, "out_proj.weight", 2, D, I, 0);
        if (c->use_bias)
            spec(out, &n, "out_proj.bias", 1, D, 0, 0);
        break;
    }
    case MC_FAMILY_GDN: {
        const struct mc_gdn_config *c = &cfg->u.gdn;
        int64_t Hv = c->num_value_heads, vdim = Hv * c->value_head_dim, kdim = c->num_key_heads * c->key_head_dim;
        if (c->layout == MC_GDN_LAYOUT_QWEN3_NEXT) {
            spec(out, &n, "in_proj_qkvz.weight", 2, 2 * kdim + 2 * vdim, D, 0);
            spec(out, &n, "in_proj_ba.weight", 2, 2 * Hv, D, 0);
        } else {
            spec(out, &n, "in_proj_qkv.weight", 2, C, D, 0);
            spec(out, &n, "in_proj_z.weight", 2, vdim, D, 0);
            spec(out, &n, "in_proj_b.weight", 2, Hv, D, 0);
            spec(out, &n, "in_proj_a.weight", 2, Hv, D, 0);
        }
        spec(out, &n, "conv1d.weight", 3, C, 1, K);
        spec(out, &n, "dt_bias", 1, Hv, 0, 0);
        spec(out, &n, "A_log", 1, Hv, 0, 0);
        spec(out, &n, "norm.weight", 1, c->value_head_dim, 0, 0);
        spec(out, &n, "out_proj.weight", 2, D, vdim, 0);
        break;
    }
    case MC_FAMILY_SHORTCONV: {
        const struct mc_shortconv_config *c = &cfg->u.shortconv;
        spec(out, &n, "in_proj.weight", 2, 3 * D, D, 0);
        if (c->conv_bias)
            spec(out, &n, "in_proj.bias", 1, 3 * D, 0, 0);
        spec(out, &n, "conv.weight", 3, D, 1, K);
        if (c->conv_bias)
            spec(out, &n, "conv.bias", 1, D, 0, 0);
        spec(out, &n, "out_proj.weight", 2, D, D, 0);
        if (c->conv_bias)
            spec(out, &n, "out_proj.bias", 1, D, 0, 0);
        break;
    }
    case MC_FAMILY_ATTENTION: {
        const struct mc_attention_config *c = &cfg->u.attention;
        int64_t hd = c->head_dim, qd = c->num_attention_heads * hd, kvd = c->num_key_value_heads * hd;
        int64_t qrows = c->attn_output_gate ? 2 * qd : qd;
        if (c->kv_lora_rank > 0) { /* MLA: KimiLinearAttention's / DeepseekV2Attention's names */
            int64_t H = c->num_attention_heads, dr = c->qk_rope_head_dim, dv = c->v_head_dim, r = c->kv_lora_rank;
            if (c->q_lora_rank > 0) {
                spec(out, &n, "q_a_proj.weight", 2, c->q_lora_rank, D, 0);
                if (c->attention_bias)
                    spec(out, &n, "q_a_proj.bias", 1, c->q_lora_rank, 0, 0);
                spec(out, &n, "q_a_layernorm.weight", 1, c->q_lora_rank, 0, 0);
                spec(out, &n, "q_b_proj.weight", 2, qd, c->q_lora_rank, 0);
            } else {
                spec(out, &n, "q_proj.weight", 2, qd, D, 0);
            }
            spec(out, &n, "kv_a_proj_with_mqa.weight", 2, r + dr, D, 0);
            if (c->attention_bias)
                spec(out, &n, "kv_a_proj_with_mqa.bias", 1, r + dr, 0, 0);
            spec(out, &n, "kv_a_layernorm.weight", 1, r, 0, 0);
            spec(out, &n, "kv_b_proj.weight", 2, H * (hd - dr + dv), r, 0);
            spec(out, &n, "o_proj.weight", 2, D, H * dv, 0);
            if (c->attention_bias)
                spec(out, &n, "o_proj.bias", 1, D, 0, 0);
            break;
        }
        spec(out, &n, "q_proj.weight", 2, qrows, D, 0);
        if (c->attention_bias)
            spec(out, &n, "q_proj.bias", 1, qrows, 0, 0);
        spec(out, &n, "k_proj.weight", 2, kvd, D, 0);
        if (c->attention_bias)
            spec(out, &n, "k_proj.bias", 1, kvd, 0, 0);
        spec(out, &n, "v_proj.weight", 2, kvd, D, 0);
        if (c->attention_bias)
            spec(out, &n, "v_proj.bias", 1, kvd, 0, 0);
        spec(out, &n, "o_proj.weight", 2, D, qd, 0);
        if (c->attention_bias)
            spec(out, &n, "o_proj.bias", 1, D, 0, 0);
        if (c->qk_norm != MC_QK_NORM_NONE) {
            int full = c->qk_norm == MC_QK_NORM_RMS_FULL; /* over the whole projection */
            spec(out, &n, "q_norm.weight", 1, full ? qd : hd, 0, 0);
            spec(out, &n, "k_norm.weight", 1, full ? kvd : hd, 0, 0);
        }
        if (c->sconv_kernel > 0) { /* Inkling's short convolutions (§12.9) */
            spec(out, &n, "k_sconv.conv1d.weight", 3, kvd, 1, c->sconv_kernel);
            spec(out, &n, "v_sconv.conv1d.weight", 3, kvd, 1, c->sconv_kernel);
            spec(out, &n, "out_sconv.conv1d.weight", 3, D, 1, c->sconv_kernel);
        }
        if (c->rel_dim > 0) { /* its relative logits */
            spec(out, &n, "r_proj.weight", 2, c->num_attention_heads * c->rel_dim, D, 0);
            spec(out, &n, "rel_logits_proj.proj", 2, c->rel_dim, c->rel_extent, 0);
        }
        break;
    }
    case MC_FAMILY_LIGHTNING: {
        const struct mc_lightning_config *c = &cfg->u.lightning;
        int64_t inner = c->num_attention_heads * c->head_dim;
        spec(out, &n, "qkv_proj.weight", 2, 3 * inner, D, 0);
        spec(out, &n, "output_gate.weight", 2, inner, D, 0);
        spec(out, &n, "norm.weight", 1, inner, 0, 0);
        spec(out, &n, "out_proj.weight", 2, D, inner, 0);
        break;
    }
    case MC_FAMILY_KDA: {
        const struct mc_kda_config *c = &cfg->u.kda;
        int64_t d = c->head_dim, inner = c->num_heads * d;
        spec(out, &n, "q_proj.weight", 2, inner, D, 0);
        spec(out, &n, "k_proj.weight", 2, inner, D, 0);
        spec(out, &n, "v_proj.weight", 2, inner, D, 0);
        spec(out, &n, "conv1d.weight", 3, C, 1, K);
        spec(out, &n, "forget_gate.f_a_proj.weight", 2, d, D, 0);
        spec(out, &n, "forget_gate.f_b_proj.weight", 2, inner, d, 0);
        spec(out, &n, "forget_gate.dt_bias", 1, inner, 0, 0);
        spec4(out, &n, "forget_gate.A_log", 1, 1, c->num_heads, 1);
        spec(out, &n, "b_proj.weight", 2, c->num_heads, D, 0);
        spec(out, &n, "g_a_proj.weight", 2, d, D, 0);
        spec(out, &n, "g_b_proj.weight", 2, inner, d, 0);
        spec(out, &n, "o_norm.weight", 1, d, 0, 0);
        spec(out, &n, "o_proj.weight", 2, D, inner, 0);
        break;
    }
    }
    return n;
}

void mc_family_shape(const struct mc_family_config *cfg, struct mc_family_shape *s)
{
    memset(s, 0, sizeof *s);
    switch (cfg->family) {
    case MC_FAMILY_STACK: /* a whole model: no mixer configuration */
        break;
    case MC_FAMILY_MAMBA2: {
        const struct mc_mamba2_config *c = &cfg->u.mamba2;
        s->hidden = c->hidden_size;
        s->conv_channels = c->num_heads * c->head_dim + 2 * c->n_groups * c->state_size;
        s->conv_kernel = c->conv_kernel;
        s->state_ndim = 3;
        s->state_dims[0] = c->num_heads;
        s->state_dims[1] = c->head_dim;
        s->state_dims[2] = c->state_size;
        s->state_dim_names[0] = "head";
        s->state_dim_names[1] = "channel";
        s->state_dim_names[2] = "state";
        s->chunk_size = c->chunk_size;
        break;
    }
    case MC_FAMILY_MAMBA1: {
        const struct mc_mamba1_config *c = &cfg->u.mamba1;
        s->hidden = c->hidden_size;
        s->conv_channels = c->intermediate_size;
        s->conv_kernel = c->conv_kernel;
        s->state_ndim = 2;
        s->state_dims[0] = c->intermediate_size;
        s->state_dims[1] = c->state_size;
        s->state_dim_names[0] = "channel";
        s->state_dim_names[1] = "state";
        break;
    }
    case MC_FAMILY_GDN: {
        const struct mc_gdn_config *c = &cfg->u.gdn;
        s->hidden = c->hidden_size;
        s->conv_channels = 2 * c->num_key_heads * c->key_head_dim + c->num_value_heads * c->value_head_dim;
        s->conv_kernel = c->conv_kernel;
        s->state_ndim = 3;
        s->state_dims[0] = c->num_value_heads;
        s->state_dims[1] = c->key_head_dim;
        s->state_dims[2] = c->value_head_dim;
        s->state_dim_names[0] = "head";
        s->state_dim_names[1] = "key";
        s->state_dim_names[2] = "value";
        s->chunk_size = c->chunk_size;
        break;
    }
    case MC_FAMILY_SHORTCONV:
        s->hidden = cfg->u.shortconv.hidden_size;
        s->conv_channels = cfg->u.shortconv.hidden_size;
        s->conv_kernel = cfg->u.shortconv.conv_kernel;
        break;
    case MC_FAMILY_ATTENTION: {
        const struct mc_attention_config *c = &cfg->u.attention;
        s->hidden = c->hidden_size;
        s->conv_channels = 1; /* conv_state [B][1][1]: the number of cached positions */
        s->conv_kernel = 1;
        if (c->sconv_kernel > 0) { /* the count, then the k, v and out windows (§12.9) */
            s->conv_channels = 1 + 2 * c->num_key_value_heads * c->head_dim + c->hidden_size;
            s->conv_kernel = c->sconv_kernel;
        }
        s->state_ndim = 3;
        s->state_dims[0] = c->kv_lora_rank > 0 ? 1 : 2 * c->num_key_value_heads; /* MLA: the latent, one "head" */
        s->state_dims[1] = c->cache_length;
        s->state_dims[2] = c->kv_lora_rank > 0 ? c->kv_lora_rank + c->qk_rope_head_dim : c->head_dim;
        s->state_dim_names[0] = "kv_head";
        s->state_dim_names[1] = "position";
        s->state_dim_names[2] = "dim";
        break;
    }
    case MC_FAMILY_LIGHTNING: {
        const struct mc_lightning_config *c = &cfg->u.lightning;
        s->hidden = c->hidden_size;
        s->conv_channels = 1; /* conv_state [B][1][1]: the number of real tokens consumed */
        s->conv_kernel = 1;
        s->state_ndim = 3;
        s->state_dims[0] = c->num_attention_heads;
        s->state_dims[1] = c->head_dim;
        s->state_dims[2] = c->head_dim;
        s->state_dim_names[0] = "head";
        s->state_dim_names[1] = "key";
        s->state_dim_names[2] = "value";
        s->chunk_size = c->block_size;
        break;
    }
    case MC_FAMILY_KDA: {
        const struct mc_kda_config *c = &cfg->u.kda;
        s->hidden = c->hidden_size;
        s->conv_channels = 3 * c->num_heads * c->head_dim;
        s->conv_kernel = c->conv_kernel;
        s->state_ndim = 3;
        s->state_dims[0] = c->num_heads;
        s->state_dims[1] = c->head_dim;
        s->state_dims[2] = c->head_dim;
        s->state_dim_names[0] = "head";
        s->state_dim_names[1] = "key";
        s->state_dim_names[2] = "value";
        s->chunk_size = c->chunk_size;
        break;
    }
    }
}

int64_t mc_family_state_elems(const struct mc_family_shape *shape)
{
    if (shape->state_ndim == 0)
        return 0;
    int64_t n = 1;
    for (int i = 0; i < shape->state_ndim; i++)
        n *= shape->state_dims[i];
    return n;
}
