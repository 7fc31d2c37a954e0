/* stackconfig.c — see stackconfig.h. Keys and defaults are those of transformers' Mamba2Config and
 * MambaConfig; the glue they drive is described in docs/models.md §1. */
#include "family/stackconfig.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/jsonread.h"

const char *mc_model_type_name(enum mc_model_type t)
{
    switch (t) {
    case MC_MODEL_MAMBA2:
        return "mamba2";
    case MC_MODEL_MAMBA:
        return "mamba";
    case MC_MODEL_LFM2:
        return "lfm2";
    case MC_MODEL_BAMBA:
        return "bamba";
    case MC_MODEL_QWEN3_5:
        return "qwen3_5_text";
    case MC_MODEL_GRANITEMOEHYBRID:
        return "granitemoehybrid";
    case MC_MODEL_FALCON_MAMBA:
        return "falcon_mamba";
    case MC_MODEL_JAMBA:
        return "jamba";
    case MC_MODEL_NEMOTRON_H:
        return "nemotron_h";
    case MC_MODEL_ZAMBA2:
        return "zamba2";
    case MC_MODEL_QWEN3_NEXT:
        return "qwen3_next";
    case MC_MODEL_QWEN3_5_MOE:
        return "qwen3_5_moe_text";
    case MC_MODEL_FALCON_H1:
        return "falcon_h1";
    case MC_MODEL_ZAMBA:
        return "zamba";
    case MC_MODEL_LFM2_MOE:
        return "lfm2_moe";
    case MC_MODEL_OLMO_HYBRID:
        return "olmo_hybrid";
    case MC_MODEL_KIMI_LINEAR:
        return "kimi_linear";
    case MC_MODEL_MINIMAX:
        return "minimax";
    case MC_MODEL_INKLING:
        return "inkling_text";
    }
    return "unknown";
}

int mc_model_type_from_name(const char *name, enum mc_model_type *t)
{
    if (strcmp(name, "mamba2") == 0)
        *t = MC_MODEL_MAMBA2;
    else if (strcmp(name, "mamba") == 0)
        *t = MC_MODEL_MAMBA;
    else if (strcmp(name, "lfm2") == 0)
        *t = MC_MODEL_LFM2;
    else if (strcmp(name, "bamba") == 0)
        *t = MC_MODEL_BAMBA;
    else if (strcmp(name, "qwen3_5_text") == 0)
        *t = MC_MODEL_QWEN3_5;
    else if (strcmp(name, "granitemoehybrid") == 0)
        *t = MC_MODEL_GRANITEMOEHYBRID;
    else if (strcmp(name, "falcon_mamba") == 0)
        *t = MC_MODEL_FALCON_MAMBA;
    else if (strcmp(name, "jamba") == 0)
        *t = MC_MODEL_JAMBA;
    else if (strcmp(name, "nemotron_h") == 0)
        *t = MC_MODEL_NEMOTRON_H;
    else if (strcmp(name, "zamba2") == 0)
        *t = MC_MODEL_ZAMBA2;
    else if (strcmp(name, "qwen3_next") == 0)
        *t = MC_MODEL_QWEN3_NEXT;
    else if (strcmp(name, "qwen3_5_moe_text") == 0)
        *t = MC_MODEL_QWEN3_5_MOE;
    else if (strcmp(name, "falcon_h1") == 0)
        *t = MC_MODEL_FALCON_H1;
    else if (strcmp(name, "zamba") == 0)
        *t = MC_MODEL_ZAMBA;
    else if (strcmp(name, "lfm2_moe") == 0)
        *t = MC_MODEL_LFM2_MOE;
    else if (strcmp(name, "olmo_hybrid") == 0)
        *t = MC_MODEL_OLMO_HYBRID;
    else if (strcmp(name, "kimi_linear") == 0)
        *t = MC_MODEL_KIMI_LINEAR;
    else if (strcmp(name, "minimax") == 0)
        *t = MC_MODEL_MINIMAX;
    else if (strcmp(name, "inkling_text") == 0)
        *t = MC_MODEL_INKLING;
    else
        return -1;
    return 0;
}

enum mc_family mc_model_type_family(enum mc_model_type t)
{
    return t == MC_MODEL_MAMBA || t == MC_MODEL_FALCON_MAMBA || t == MC_MODEL_JAMBA || t == MC_MODEL_ZAMBA
               ? MC_FAMILY_MAMBA1
           : t == MC_MODEL_LFM2    ? MC_FAMILY_SHORTCONV
           : t == MC_MODEL_LFM2_MOE ? MC_FAMILY_SHORTCONV
           : t == MC_MODEL_QWEN3_5 ? MC_FAMILY_GDN
           : t == MC_MODEL_QWEN3_NEXT ? MC_FAMILY_GDN
           : t == MC_MODEL_QWEN3_5_MOE ? MC_FAMILY_GDN
           : t == MC_MODEL_OLMO_HYBRID ? MC_FAMILY_GDN
           : t == MC_MODEL_KIMI_LINEAR ? MC_FAMILY_KDA
           : t == MC_MODEL_MINIMAX ? MC_FAMILY_LIGHTNING
           : t == MC_MODEL_INKLING ? MC_FAMILY_ATTENTION /* attention layers only */
                                   : MC_FAMILY_MAMBA2;
}

int mc_model_type_families(enum mc_model_type t, enum mc_family out[4])
{
    out[0] = mc_model_type_family(t);
    if (t != MC_MODEL_LFM2 && t != MC_MODEL_BAMBA && t != MC_MODEL_QWEN3_5 && t != MC_MODEL_GRANITEMOEHYBRID &&
        t != MC_MODEL_JAMBA && t != MC_MODEL_NEMOTRON_H && t != MC_MODEL_ZAMBA2 && t != MC_MODEL_QWEN3_NEXT &&
        t != MC_MODEL_QWEN3_5_MOE && t != MC_MODEL_FALCON_H1 &&
        t != MC_MODEL_ZAMBA && t != MC_MODEL_LFM2_MOE && t != MC_MODEL_OLMO_HYBRID && t != MC_MODEL_KIMI_LINEAR &&
        t != MC_MODEL_MINIMAX)
        return 1;
    out[1] = MC_FAMILY_ATTENTION;
    return 2;
}

int64_t mc_stack_decoder_layer(const struct mc_stack_config *cfg, int64_t slot)
{
    return cfg->type == MC_MODEL_FALCON_H1 ? slot / 2 : slot;
}

int mc_stack_layer_has_mixer(const struct mc_stack_config *cfg, int64_t layer)
{
    return cfg->layers[layer].family != MC_STACK_NO_MIXER;
}

/* One key of the config: a number (an integer when `integer`), or a boolean read as 0/1. */
struct reader {
    const struct mc_json_value *root;
    const char *where;
    struct mc_error *err;
};

static int get_num(struct reader *r, const char *key, int integer, int required, double dflt, double *out)
{
    const struct mc_json_value *v = mc_json_get(r->root, key);
    if (v == NULL || v->type == MC_JSON_NULL) {
        if (required) {
            mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: '%s' is missing", r->where, key);
            return -1;
        }
        *out = dflt;
        return 0;
    }
    if (v->type == MC_JSON_TRUE || v->type == MC_JSON_FALSE) {
        *out = v->type == MC_JSON_TRUE;
        return 0;
    }
    if (v->type != MC_JSON_NUMBER || (integer && (v->number != floor(v->number) || fabs(v->number) > 1e15))) {
        mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: '%s' must be %s (got %s)", r->where, key,
                     integer ? "an integer" : "a number", mc_json_type_name(v->type));
        return -1;
    }
    *out = v->number;
    return 0;
}

static int get_int(struct reader *r, const char *key, int required, int64_t dflt, int64_t *out)
{
    double d;
    if (get_num(r, key, 1, required, (double)dflt, &d) != 0)
        return -1;
    *out = (int64_t)d;
    return 0;
}

static int get_bool(struct reader *r, const char *key, int dflt, int32_t *out)
{
    double d;
    if (get_num(r, key, 1, 0, dflt, &d) != 0)
        return -1;
    *out = d != 0.0;
    return 0;
}

static int positive(struct reader *r, const char *key, int64_t v, int64_t max)
{
    if (v >= 1 && v <= max)
        return 0;
    mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: '%s' must be in [1, %lld] (got %lld)", r->where, key,
                 (long long)max, (long long)v);
    return -1;
}

/* Item i of the list `key` (an array) read as one of two strings: 0 for a, 1 for b; anything else is an input
 * error naming the item, -1. */
static int one_of_two(struct reader *r, const struct mc_json_value *list, const char *key, int64_t i, const char *a,
                      const char *b)
{
    const struct mc_json_value *v = &list->items[i];
    if (v->type == MC_JSON_STRING && strcmp(v->string, a) == 0)
        return 0;
    if (v->type == MC_JSON_STRING && strcmp(v->string, b) == 0)
        return 1;
    mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: '%s[%lld]' must be \"%s\" or \"%s\"", r->where, key,
                 (long long)i, a, b);
    return -1;
}

/* A float as transformers writes it: a JSON number, or {"__float__": "Infinity" | "-Infinity" | "NaN"}
 * (its encoder's form of a non-finite float). 0, or -1 when v is neither. */
static int float_value(const struct mc_json_value *v, double *out)
{
    if (v->type == MC_JSON_NUMBER) {
        *out = v->number;
        return 0;
    }
    const struct mc_json_value *f = v->type == MC_JSON_OBJECT && v->len == 1 ? mc_json_get(v, "__float__") : NULL;
    if (f == NULL || f->type != MC_JSON_STRING)
        return -1;
    if (strcmp(f->string, "Infinity") == 0)
        *out = INFINITY;
    else if (strcmp(f->string, "-Infinity") == 0)
        *out = -INFINITY;
    else if (strcmp(f->string, "NaN") == 0)
        *out = NAN;
    else
        return -1;
    return 0;
}

/* time_step_limit [lo, hi] (hi may be {"__float__": "Infinity"}); absent or null: (0, inf), no clamp. */
static int time_step_limit(struct reader *r, double out[2])
{
    out[0] = 0.0;
    out[1] = INFINITY;
    const struct mc_json_value *tsl = mc_json_get(r->root, "time_step_limit");
    if (tsl == NULL || tsl->type == MC_JSON_NULL)
        return 0;
    if (tsl->type != MC_JSON_ARRAY || tsl->len != 2 || float_value(&tsl->items[0], &out[0]) != 0 ||
        float_value(&tsl->items[1], &out[1]) != 0 || !(out[0] >= 0.0 && out[1] >= out[0])) {
        mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: 'time_step_limit' must be [lo, hi] with 0 <= lo <= hi",
                     r->where);
        return -1;
    }
    return 0;
}

/* The group size of Mamba2's and Bamba's gated RMSNorm over `intermediate` channels in n_groups groups.
 * transformers normalises each group of intermediate / n_groups from 5.23.0 on and the whole row before:
 * the golden says which it follows in mixcheck_semantics.mamba2_gated_norm ("per_group" / "full_row",
 * golden/configkeys.py); without it, the config's transformers_version decides, and the newest behaviour
 * holds when that is absent. */
static int gated_norm_group_size(struct reader *r, int64_t intermediate, int64_t n_groups, int64_t *out)
{
    int per_group = 1;
    const struct mc_json_value *sem = mc_json_get(r->root, "mixcheck_semantics");
    const struct mc_json_value *g = sem != NULL && sem->type == MC_JSON_OBJECT ? mc_json_get(sem, "mamba2_gated_norm")
                                                                              : NULL;
    if (g != NULL) {
        if (g->type != MC_JSON_STRING || (strcmp(g->string, "per_group") != 0 && strcmp(g->string, "full_row") != 0)) {
            mc_error_set(r->err, MC_ERR_INPUT,
                         "%s: config_json: 'mixcheck_semantics.mamba2_gated_norm' must be \"per_group\" or \"full_row\"",
                         r->where);
            return -1;
        }
        per_group = strcmp(g->string, "per_group") == 0;
    } else {
        const struct mc_json_value *tv = mc_json_get(r->root, "transformers_version");
        int major = 0, minor = 0;
        if (tv != NULL && tv->type == MC_JSON_STRING && sscanf(tv->string, "%d.%d", &major, &minor) == 2)
            per_group = major > 5 || (major == 5 && minor >= 23);
    }
    if (n_groups < 1 || intermediate % n_groups != 0) {
        mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: n_groups (%lld) must divide the intermediate size (%lld)",
                     r->where, (long long)n_groups, (long long)intermediate);
        return -1;
    }
    *out = per_group ? intermediate / n_groups : intermediate;
    return 0;
}

/* rope_theta and partial_rotary_factor as transformers resolves them: the `rope_parameters` object (or its
 * older name `rope_scaling`) first, then the top-level keys, then the model's defaults (theta, prf); Bamba
 * (`top_prf` 0) reads no top-level partial_rotary_factor. Only the default rotary embedding is computed. */
static int rope_params(struct reader *r, double theta, double prf, int top_prf, struct mc_attention_config *at)
{
    if (get_num(r, "rope_theta", 0, 0, theta, &at->rope_theta) ||
        (top_prf && get_num(r, "partial_rotary_factor", 0, 0, prf, &at->partial_rotary_factor)))
        return -1;
    if (!top_prf)
        at->partial_rotary_factor = prf;
    const struct mc_json_value *rp = mc_json_get(r->root, "rope_scaling");
    if (rp == NULL || rp->type == MC_JSON_NULL)
        rp = mc_json_get(r->root, "rope_parameters");
    if (rp == NULL || rp->type == MC_JSON_NULL)
        return 0;
    if (rp->type != MC_JSON_OBJECT) {
        mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: 'rope_parameters' must be an object", r->where);
        return -1;
    }
    const struct mc_json_value *type = mc_json_get(rp, "rope_type");
    if (type == NULL)
        type = mc_json_get(rp, "type");
    if (type != NULL && (type->type != MC_JSON_STRING || strcmp(type->string, "default") != 0)) {
        mc_error_set(r->err, MC_ERR_INPUT,
                     "%s: config_json: 'rope_parameters.rope_type' %s: only the default rotary embedding is computed",
                     r->where, type->type == MC_JSON_STRING ? type->string : "(not a string)");
        return -1;
    }
    struct reader sub = {rp, r->where, r->err};
    if (get_num(&sub, "rope_theta", 0, 0, at->rope_theta, &at->rope_theta) ||
        get_num(&sub, "partial_rotary_factor", 0, 0, at->partial_rotary_factor, &at->partial_rotary_factor))
        return -1;
    if (!(at->rope_theta > 0.0) || !(at->partial_rotary_factor > 0.0 && at->partial_rotary_factor <= 1.0)) {
        mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: rope_theta must be > 0 and partial_rotary_factor in (0, 1]",
                     r->where);
        return -1;
    }
    return 0;
}

static int parse_mamba2(struct reader *r, struct mc_stack_config *cfg)
{
    struct mc_mamba2_config m = {0};
    int64_t expand = 2;
    m.hidden_size = cfg->hidden;
    if (get_int(r, "num_heads", 1, 0, &m.num_heads) || get_int(r, "head_dim", 1, 0, &m.head_dim) ||
        get_int(r, "state_size", 1, 0, &m.state_size) || get_int(r, "n_groups", 0, 1, &m.n_groups) ||
        get_int(r, "conv_kernel", 0, 4, &m.conv_kernel) || get_int(r, "chunk_size", 0, 256, &m.chunk_size) ||
        get_int(r, "expand", 0, 2, &expand) || get_bool(r, "use_bias", 0, &m.use_bias) ||
        get_bool(r, "use_conv_bias", 1, &m.use_conv_bias))
        return -1;
    if (time_step_limit(r, m.time_step_limit) ||
        gated_norm_group_size(r, m.num_heads * m.head_dim, m.n_groups, &m.norm_group_size))
        return -1;
    m.layer_norm_epsilon = cfg->norm_eps;
    if (m.num_heads * m.head_dim != expand * cfg->hidden) {
        mc_error_set(r->err, MC_ERR_INPUT,
                     "%s: config_json: num_heads * head_dim (%lld) must equal expand * hidden_size (%lld)", r->where,
                     (long long)(m.num_heads * m.head_dim), (long long)(expand * cfg->hidden));
        return -1;
    }
    for (int64_t i = 0; i < cfg->n_layers; i++) {
        cfg->layers[i].family = MC_FAMILY_MAMBA2;
        cfg->layers[i].mixer.family = MC_FAMILY_MAMBA2;
        cfg->layers[i].mixer.u.mamba2 = m;
    }
    return 0;
}

static int parse_mamba(struct reader *r, struct mc_stack_config *cfg)
{
    struct mc_mamba1_config m = {0};
    int64_t expand = 2;
    m.hidden_size = cfg->hidden;
    if (get_int(r, "expand", 0, 2, &expand) || get_int(r, "intermediate_size", 0, expand * cfg->hidden,
                                                        &m.intermediate_size) ||
        get_int(r, "state_size", 0, 16, &m.state_size) || get_int(r, "conv_kernel", 0, 4, &m.conv_kernel) ||
        get_bool(r, "use_bias", 0, &m.use_bias) || get_bool(r, "use_conv_bias", 1, &m.use_conv_bias))
        return -1;
    /* time_step_rank "auto" (the upstream default) is ceil(hidden_size / 16) */
    const struct mc_json_value *rank = mc_json_get(r->root, "time_step_rank");
    if (rank == NULL || (rank->type == MC_JSON_STRING && strcmp(rank->string, "auto") == 0))
        m.time_step_rank = (cfg->hidden + 15) / 16;
    else if (get_int(r, "time_step_rank", 1, 0, &m.time_step_rank))
        return -1;
    if (cfg->type == MC_MODEL_FALCON_MAMBA) { /* FalconMambaMixer: the weightless norms on dt, B and C */
        m.inner_norms = MC_M1_INNER_NORMS_WEIGHTLESS;
        if (get_num(r, "mixer_rms_eps", 0, 0, 1e-6, &m.mixer_rms_eps))
            return -1;
    }
    for (int64_t i = 0; i < cfg->n_layers; i++) {
        cfg->layers[i].family = MC_FAMILY_MAMBA1;
        cfg->layers[i].mixer.family = MC_FAMILY_MAMBA1;
        cfg->layers[i].mixer.u.mamba1 = m;
    }
    return 0;
}


/* Layer i's mixer: attention configured as *at when attn, else the other family's configuration *other. */
static void place_layer(struct mc_stack_config *cfg, int64_t i, int attn, const struct mc_family_config *other,
                        const struct mc_attention_config *at)
{
    if (attn) {
        cfg->layers[i].family = cfg->layers[i].mixer.family = MC_FAMILY_ATTENTION;
        cfg->layers[i].mixer.u.attention = *at;
    } else {
        cfg->layers[i].family = other->family;
        cfg->layers[i].mixer = *other;
    }
}

/* The kinds of the layers of a hybrid with "layer_types" (LFM2: "conv", Qwen3.5: "linear_attention",
 * besides "full_attention"): one entry per layer, each "full_attention" (the mixer `at`) or `other_name`
 * (the mixer `other`). */
static int layer_types(struct reader *r, struct mc_stack_config *cfg, const char *other_name,
                       const struct mc_family_config *other, const struct mc_attention_config *at)
{
    const struct mc_json_value *lt = mc_json_get(r->root, "layer_types");
    if (lt == NULL || lt->type != MC_JSON_ARRAY || (int64_t)lt->len != cfg->n_layers) {
        mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: 'layer_types' must list num_hidden_layers (%lld) layers",
                     r->where, (long long)cfg->n_layers);
        return -1;
    }
    for (int64_t i = 0; i < cfg->n_layers; i++) {
        int attn = one_of_two(r, lt, "layer_types", i, other_name, "full_attention");
        if (attn < 0)
            return -1;
        place_layer(cfg, i, attn, other, at);
    }
    return 0;
}

/* Lfm2Config: layer_types ("conv" / "full_attention"), conv_L_cache, conv_bias, attention heads, norm_eps
 * (every norm, q/k layernorms included), rope_theta, max_position_embeddings (the KV cache length), and
 * the feed-forward size rule of Lfm2MLP. */
static int parse_lfm2(struct reader *r, struct mc_stack_config *cfg)
{
    struct mc_shortconv_config sc = {.hidden_size = cfg->hidden};
    struct mc_attention_config at = {.hidden_size = cfg->hidden};
    int64_t inter = 0, multiple = 256;
    int32_t adjust = 1;
    double mult = 1.0;
    if (get_int(r, "conv_L_cache", 0, 3, &sc.conv_kernel) || get_bool(r, "conv_bias", 0, &sc.conv_bias) ||
        get_int(r, "num_attention_heads", 1, 0, &at.num_attention_heads) ||
        get_int(r, "num_key_value_heads", 0, at.num_attention_heads, &at.num_key_value_heads) ||
        get_int(r, "max_position_embeddings", 0, 128000, &at.cache_length) ||
        rope_params(r, 1000000.0, 1.0, 1, &at) || get_int(r, "intermediate_size", 1, 0, &inter) ||
        get_bool(r, "block_auto_adjust_ff_dim", 1, &adjust) || get_int(r, "block_multiple_of", 0, 256, &multiple) ||
        positive(r, "num_attention_heads", at.num_attention_heads, 1024) ||
        positive(r, "block_multiple_of", multiple, 1 << 20) || positive(r, "max_position_embeddings", at.cache_length, 1 << 20))
        return -1;
    const struct mc_json_value *fm = mc_json_get(r->root, "block_ffn_dim_multiplier");
    int has_mult = fm == NULL || fm->type != MC_JSON_NULL;
    if (has_mult && get_num(r, "block_ffn_dim_multiplier", 0, 0, 1.0, &mult))
        return -1;
    if (adjust) {
        inter = (int64_t)(2.0 * (double)inter / 3.0);
        if (has_mult) {
            inter = (int64_t)(mult * (double)inter);
            inter = multiple * ((inter + multiple - 1) / multiple);
        }
    }
    if (positive(r, "intermediate_size", inter, 1 << 20))
        return -1;
    cfg->ffn_size = inter;
    if (at.partial_rotary_factor != 1.0) {
        mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: partial_rotary_factor %g: Lfm2Attention rotates the whole head",
                     r->where, at.partial_rotary_factor);
        return -1;
    }
    at.head_dim = cfg->hidden / at.num_attention_heads;
    at.rms_norm_eps = cfg->norm_eps;
    at.qk_norm = MC_QK_NORM_RMS;
    const struct mc_family_config conv = {.family = MC_FAMILY_SHORTCONV, .u.shortconv = sc};
    return layer_types(r, cfg, "conv", &conv, &at);
}

/* BambaConfig: mamba_* keys of the Mamba2 layers, attn_layer_indices, attention heads with
 * partial_rotary_factor (no q/k norm), rms_norm_eps everywhere, intermediate_size of the feed-forward,
 * max_position_embeddings (the KV cache length). */
static int parse_bamba(struct reader *r, struct mc_stack_config *cfg)
{
    struct mc_mamba2_config m = {.hidden_size = cfg->hidden};
    struct mc_attention_config at = {.hidden_size = cfg->hidden};
    int64_t expand = 2;
    if (get_int(r, "mamba_n_heads", 1, 0, &m.num_heads) || get_int(r, "mamba_d_state", 1, 0, &m.state_size) ||
        get_int(r, "mamba_n_groups", 0, 1, &m.n_groups) || get_int(r, "mamba_d_conv", 0, 4, &m.conv_kernel) ||
        get_int(r, "mamba_expand", 0, 2, &expand) || get_int(r, "mamba_chunk_size", 0, 256, &m.chunk_size) ||
        get_bool(r, "mamba_conv_bias", 1, &m.use_conv_bias) || get_bool(r, "mamba_proj_bias", 0, &m.use_bias) ||
        positive(r, "mamba_n_heads", m.num_heads, 1 << 16) ||
        get_int(r, "num_attention_heads", 1, 0, &at.num_attention_heads) ||
        get_int(r, "num_key_value_heads", 0, at.num_attention_heads, &at.num_key_value_heads) ||
        get_int(r, "max_position_embeddings", 0, 262144, &at.cache_length) ||
        rope_params(r, 10000.0, 0.5, 0, &at) ||
        get_bool(r, "attention_bias", 0, &at.attention_bias) || get_int(r, "intermediate_size", 1, 0, &cfg->ffn_size) ||
        positive(r, "num_attention_heads", at.num_attention_heads, 1024) ||
        positive(r, "intermediate_size", cfg->ffn_size, 1 << 20))
        return -1;
    const struct mc_json_value *dh = mc_json_get(r->root, "mamba_d_head");
    if (dh == NULL || (dh->type == MC_JSON_STRING && strcmp(dh->string, "auto") == 0))
        m.head_dim = expand * cfg->hidden / m.num_heads;
    else if (get_int(r, "mamba_d_head", 1, 0, &m.head_dim))
        return -1;
    m.layer_norm_epsilon = cfg->norm_eps;
    if (time_step_limit(r, m.time_step_limit) ||
        gated_norm_group_size(r, m.num_heads * m.head_dim, m.n_groups, &m.norm_group_size))
        return -1;
    at.head_dim = cfg->hidden / at.num_attention_heads;
    at.rms_norm_eps = cfg->norm_eps;
    at.qk_norm = MC_QK_NORM_NONE;
    for (int64_t i = 0; i < cfg->n_layers; i++) {
        cfg->layers[i].family = MC_FAMILY_MAMBA2;
        cfg->layers[i].mixer.family = MC_FAMILY_MAMBA2;
        cfg->layers[i].mixer.u.mamba2 = m;
    }
    const struct mc_json_value *ai = mc_json_get(r->root, "attn_layer_indices");
    if (ai != NULL && ai->type != MC_JSON_NULL) {
        if (ai->type != MC_JSON_ARRAY) {
            mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: 'attn_layer_indices' must be a list", r->where);
            return -1;
        }
        for (size_t k = 0; k < ai->len; k++) {
            const struct mc_json_value *v = &ai->items[k];
            if (v->type != MC_JSON_NUMBER || v->number < 0 || v->number >= (double)cfg->n_layers ||
                v->number != floor(v->number)) {
                mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: 'attn_layer_indices[%zu]' must be a layer index",
                             r->where, k);
                return -1;
            }
            int64_t i = (int64_t)v->number;
            cfg->layers[i].family = MC_FAMILY_ATTENTION;
            cfg->layers[i].mixer.family = MC_FAMILY_ATTENTION;
            cfg->layers[i].mixer.u.attention = at;
        }
    }
    return 0;
}

/* Qwen3_5TextConfig: layer_types ("linear_attention" / "full_attention"), linear_* keys of the Gated DeltaNet
 * layers (Qwen3.5 projections), attention with head_dim, the output gate, zero-centred q/k norms and
 * partial rotary (rope_parameters' rope_theta and partial_rotary_factor, or the top-level key), rms_norm_eps
 * everywhere, intermediate_size of the MLP, max_position_embeddings (the KV cache length). */
static int parse_qwen3_5(struct reader *r, struct mc_stack_config *cfg)
{
    struct mc_gdn_config gd = {.hidden_size = cfg->hidden, .chunk_size = 64, .layout = MC_GDN_LAYOUT_QWEN3_5};
    struct mc_attention_config at = {.hidden_size = cfg->hidden};
    if (get_int(r, "linear_num_key_heads", 1, 0, &gd.num_key_heads) ||
        get_int(r, "linear_num_value_heads", 1, 0, &gd.num_value_heads) ||
        get_int(r, "linear_key_head_dim", 1, 0, &gd.key_head_dim) ||
        get_int(r, "linear_value_head_dim", 1, 0, &gd.value_head_dim) ||
        get_int(r, "linear_conv_kernel_dim", 0, 4, &gd.conv_kernel) ||
        get_int(r, "num_attention_heads", 1, 0, &at.num_attention_heads) ||
        get_int(r, "num_key_value_heads", 0, at.num_attention_heads, &at.num_key_value_heads) ||
        get_int(r, "head_dim", 1, 0, &at.head_dim) || get_int(r, "max_position_embeddings", 0, 32768, &at.cache_length) ||
        rope_params(r, 10000.0, 0.25, 1, &at) ||
        get_bool(r, "attention_bias", 0, &at.attention_bias) || get_int(r, "intermediate_size", 1, 0, &cfg->ffn_size) ||
        positive(r, "intermediate_size", cfg->ffn_size, 1 << 20) ||
        positive(r, "max_position_embeddings", at.cache_length, 1 << 20))
        return -1;
    gd.rms_norm_eps = cfg->norm_eps;
    at.rms_norm_eps = cfg->norm_eps;
    at.qk_norm = MC_QK_NORM_ZERO_CENTRED;
    at.attn_output_gate = 1;
    const struct mc_family_config linear = {.family = MC_FAMILY_GDN, .u.gdn = gd};
    return layer_types(r, cfg, "linear_attention", &linear, &at);
}

/* GraniteMoeHybridConfig (transformers 5.24): layer_types ("linear_attention" / "full_attention", or the older
 * "mamba" / "attention", which the config converts; absent: every layer Mamba2), the mamba_* keys of the Mamba2
 * layers as Bamba's (with GraniteMoeHybrid's defaults), attention with head_dim (default hidden / heads), no q/k
 * norm, attention_multiplier as the score scale and position_embedding_type (null or "nope": no rotary
 * embedding; "rope": rope_parameters / rope_theta, the whole head), the MoE (num_local_experts, 0 = none,
 * num_experts_per_tok, intermediate_size) plus the shared MLP (shared_intermediate_size), rms_norm_eps
 * everywhere, embedding_multiplier, residual_multiplier, logits_scaling. */
static int parse_granitemoehybrid(struct reader *r, struct mc_stack_config *cfg)
{
    struct mc_mamba2_config m = {.hidden_size = cfg->hidden};
    struct mc_attention_config at = {.hidden_size = cfg->hidden};
    int64_t expand = 2;
    if (get_int(r, "mamba_n_heads", 0, 128, &m.num_heads) || get_int(r, "mamba_d_state", 0, 256, &m.state_size) ||
        get_int(r, "mamba_n_groups", 0, 1, &m.n_groups) || get_int(r, "mamba_d_conv", 0, 4, &m.conv_kernel) ||
        get_int(r, "mamba_expand", 0, 2, &expand) || get_int(r, "mamba_chunk_size", 0, 256, &m.chunk_size) ||
        get_bool(r, "mamba_conv_bias", 1, &m.use_conv_bias) || get_bool(r, "mamba_proj_bias", 0, &m.use_bias) ||
        positive(r, "mamba_n_heads", m.num_heads, 1 << 16) ||
        get_int(r, "num_attention_heads", 0, 32, &at.num_attention_heads) ||
        positive(r, "num_attention_heads", at.num_attention_heads, 1024) ||
        get_int(r, "num_key_value_heads", 0, at.num_attention_heads, &at.num_key_value_heads) ||
        get_int(r, "head_dim", 0, cfg->hidden / at.num_attention_heads, &at.head_dim) ||
        get_int(r, "max_position_embeddings", 0, 2048, &at.cache_length) ||
        get_bool(r, "attention_bias", 0, &at.attention_bias) ||
        get_num(r, "attention_multiplier", 0, 0, 1.0, &at.softmax_scale) ||
        get_int(r, "shared_intermediate_size", 0, 1024, &cfg->ffn_size) ||
        get_int(r, "num_local_experts", 0, 8, &cfg->moe.n_experts) ||
        get_int(r, "num_experts_per_tok", 0, 2, &cfg->moe.top_k) ||
        get_int(r, "intermediate_size", 0, 11008, &cfg->moe.expert_size) ||
        get_num(r, "embedding_multiplier", 0, 0, 1.0, &cfg->embedding_multiplier) ||
        get_num(r, "residual_multiplier", 0, 0, 1.0, &cfg->residual_multiplier) ||
        get_num(r, "logits_scaling", 0, 0, 1.0, &cfg->logits_scaling) ||
        positive(r, "shared_intermediate_size", cfg->ffn_size, 1 << 20) ||
        positive(r, "max_position_embeddings", at.cache_length, 1 << 20))
        return -1;
    if (!(at.softmax_scale > 0.0) || !isfinite(at.softmax_scale) || !isfinite(cfg->embedding_multiplier) ||
        !isfinite(cfg->residual_multiplier) || !(cfg->logits_scaling != 0.0) || !isfinite(cfg->logits_scaling)) {
        mc_error_set(r->err, MC_ERR_INPUT,
                     "%s: config_json: attention_multiplier must be > 0, embedding_multiplier and residual_multiplier "
                     "finite, logits_scaling finite and not 0", r->where);
        return -1;
    }
    if (cfg->moe.n_experts < 0 || cfg->moe.n_experts > MC_STACK_MAX_EXPERTS ||
        (cfg->moe.n_experts > 0 && (cfg->moe.top_k < 1 || cfg->moe.top_k > cfg->moe.n_experts ||
                                    cfg->moe.top_k > MC_STACK_MAX_TOP_K ||
                                    positive(r, "intermediate_size", cfg->moe.expert_size, 1 << 20)))) {
        if (r->err->code == MC_ERR_NONE)
            mc_error_set(r->err, MC_ERR_INPUT,
                         "%s: config_json: num_local_experts (%lld) must be in [0, 512] and num_experts_per_tok (%lld) "
                         "in [1, min(num_local_experts, 64)]",
                         r->where, (long long)cfg->moe.n_experts, (long long)cfg->moe.top_k);
        return -1;
    }
    cfg->moe.router = MC_ROUTER_TOPK_SOFTMAX;
    cfg->ffn_fused = 1;
    const struct mc_json_value *pe = mc_json_get(r->root, "position_embedding_type");
    if (pe == NULL || pe->type == MC_JSON_NULL || (pe->type == MC_JSON_STRING && strcmp(pe->string, "nope") == 0)) {
        at.no_rope = 1; /* GraniteMoeHybridModel builds no rotary embedding: every attention layer is NoPE */
        at.partial_rotary_factor = 1.0;
        at.rope_theta = 10000.0;
    } else if (pe->type == MC_JSON_STRING && strcmp(pe->string, "rope") == 0) {
        if (rope_params(r, 10000.0, 1.0, 1, &at))
            return -1;
    } else {
        mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: 'position_embedding_type' must be null, \"nope\" or \"rope\"",
                     r->where);
        return -1;
    }
    const struct mc_json_value *dh = mc_json_get(r->root, "mamba_d_head");
    if (dh == NULL || dh->type == MC_JSON_NULL || (dh->type == MC_JSON_STRING && strcmp(dh->string, "auto") == 0))
        m.head_dim = expand * cfg->hidden / m.num_heads;
    else if (get_int(r, "mamba_d_head", 1, 0, &m.head_dim))
        return -1;
    if (m.head_dim * m.num_heads != expand * cfg->hidden) {
        mc_error_set(r->err, MC_ERR_INPUT,
                     "%s: config_json: mamba_n_heads * mamba_d_head (%lld) must equal mamba_expand * hidden_size (%lld)",
                     r->where, (long long)(m.head_dim * m.num_heads), (long long)(expand * cfg->hidden));
        return -1;
    }
    m.layer_norm_epsilon = cfg->norm_eps;
    if (time_step_limit(r, m.time_step_limit) ||
        gated_norm_group_size(r, m.num_heads * m.head_dim, m.n_groups, &m.norm_group_size))
        return -1;
    at.rms_norm_eps = cfg->norm_eps;
    at.qk_norm = MC_QK_NORM_NONE;
    const struct mc_json_value *lt = mc_json_get(r->root, "layer_types");
    if (lt != NULL && lt->type != MC_JSON_NULL && (lt->type != MC_JSON_ARRAY || (int64_t)lt->len != cfg->n_layers)) {
        mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: 'layer_types' must list num_hidden_layers (%lld) layers",
                     r->where, (long long)cfg->n_layers);
        return -1;
    }
    for (int64_t i = 0; i < cfg->n_layers; i++) {
        const struct mc_json_value *v = lt != NULL && lt->type == MC_JSON_ARRAY ? &lt->items[i] : NULL;
        const char *s = v == NULL ? "linear_attention" : v->type == MC_JSON_STRING ? v->string : "";
        int attn = strcmp(s, "full_attention") == 0 || strcmp(s, "attention") == 0;
        if (!attn && strcmp(s, "linear_attention") != 0 && strcmp(s, "mamba") != 0) {
            mc_error_set(r->err, MC_ERR_INPUT,
                         "%s: config_json: 'layer_types[%lld]' must be \"linear_attention\" (\"mamba\") or "
                         "\"full_attention\" (\"attention\")",
                         r->where, (long long)i);
            return -1;
        }
        cfg->layers[i].family = attn ? MC_FAMILY_ATTENTION : MC_FAMILY_MAMBA2;
        cfg->layers[i].mixer.family = cfg->layers[i].family;
        if (attn)
            cfg->layers[i].mixer.u.attention = at;
        else
            cfg->layers[i].mixer.u.mamba2 = m;
        cfg->layers[i].moe = cfg->moe.n_experts > 0;
    }
    return 0;
}

/* JambaConfig (transformers 5.24): attention at i % attn_layer_period == attn_layer_offset, Mamba1 elsewhere
 * (mamba_d_state, mamba_d_conv, mamba_expand, mamba_dt_rank "auto" = ceil(hidden / 16), mamba_conv_bias,
 * mamba_proj_bias; the weighted inner norms with rms_norm_eps), the attention without rotary embedding and
 * without q/k norm (num_attention_heads, num_key_value_heads, head_dim, max_position_embeddings), the MoE
 * (num_experts > 1, num_experts_per_tok, the experts of intermediate_size) at i % expert_layer_period ==
 * expert_layer_offset and the SwiGLU MLP of intermediate_size on every other layer. */
static int parse_jamba(struct reader *r, struct mc_stack_config *cfg)
{
    struct mc_mamba1_config m = {.hidden_size = cfg->hidden, .inner_norms = MC_M1_INNER_NORMS_WEIGHTED,
                                 .mixer_rms_eps = cfg->norm_eps};
    struct mc_attention_config at = {.hidden_size = cfg->hidden, .no_rope = 1, .partial_rotary_factor = 1.0,
                                     .rope_theta = 10000.0, .qk_norm = MC_QK_NORM_NONE, .rms_norm_eps = cfg->norm_eps};
    int64_t expand = 2, ap = 8, ao = 4, ep = 2, eo = 1;
    if (get_int(r, "mamba_d_state", 0, 16, &m.state_size) || get_int(r, "mamba_d_conv", 0, 4, &m.conv_kernel) ||
        get_int(r, "mamba_expand", 0, 2, &expand) || get_bool(r, "mamba_conv_bias", 1, &m.use_conv_bias) ||
        get_bool(r, "mamba_proj_bias", 0, &m.use_bias) ||
        get_int(r, "num_attention_heads", 0, 32, &at.num_attention_heads) ||
        positive(r, "num_attention_heads", at.num_attention_heads, 1024) ||
        get_int(r, "num_key_value_heads", 0, 8, &at.num_key_value_heads) ||
        get_int(r, "head_dim", 0, cfg->hidden / at.num_attention_heads, &at.head_dim) ||
        get_int(r, "max_position_embeddings", 0, 262144, &at.cache_length) ||
        get_int(r, "attn_layer_period", 0, 8, &ap) || get_int(r, "attn_layer_offset", 0, 4, &ao) ||
        get_int(r, "expert_layer_period", 0, 2, &ep) || get_int(r, "expert_layer_offset", 0, 1, &eo) ||
        get_int(r, "num_experts", 0, 16, &cfg->moe.n_experts) ||
        get_int(r, "num_experts_per_tok", 0, 2, &cfg->moe.top_k) ||
        get_int(r, "intermediate_size", 0, 14336, &cfg->ffn_size) ||
        positive(r, "intermediate_size", cfg->ffn_size, 1 << 20) ||
        positive(r, "max_position_embeddings", at.cache_length, 1 << 20) ||
        positive(r, "attn_layer_period", ap, 1 << 20) || positive(r, "expert_layer_period", ep, 1 << 20))
        return -1;
    if (ao < 0 || ao >= ap || eo < 0 || eo >= ep) {
        mc_error_set(r->err, MC_ERR_INPUT,
                     "%s: config_json: attn_layer_offset (%lld) and expert_layer_offset (%lld) must be in [0, their "
                     "period)", r->where, (long long)ao, (long long)eo);
        return -1;
    }
    if (cfg->moe.n_experts < 1 || cfg->moe.n_experts > MC_STACK_MAX_EXPERTS ||
        (cfg->moe.n_experts > 1 && (cfg->moe.top_k < 1 || cfg->moe.top_k > cfg->moe.n_experts ||
                                    cfg->moe.top_k > MC_STACK_MAX_TOP_K))) {
        mc_error_set(r->err, MC_ERR_INPUT,
                     "%s: config_json: num_experts (%lld) must be in [1, 512] and num_experts_per_tok (%lld) in [1, "
                     "min(num_experts, 64)]", r->where, (long long)cfg->moe.n_experts, (long long)cfg->moe.top_k);
        return -1;
    }
    const struct mc_json_value *rank = mc_json_get(r->root, "mamba_dt_rank");
    if (rank == NULL || rank->type == MC_JSON_NULL || (rank->type == MC_JSON_STRING && strcmp(rank->string, "auto") == 0))
        m.time_step_rank = (cfg->hidden + 15) / 16;
    else if (get_int(r, "mamba_dt_rank", 1, 0, &m.time_step_rank))
        return -1;
    m.intermediate_size = expand * cfg->hidden;
    cfg->moe.expert_size = cfg->ffn_size;
    cfg->moe.router = MC_ROUTER_SOFTMAX_TOPK;
    cfg->moe.renormalise = 0;
    for (int64_t i = 0; i < cfg->n_layers; i++) {
        int attn = i % ap == ao;
        cfg->layers[i].family = attn ? MC_FAMILY_ATTENTION : MC_FAMILY_MAMBA1;
        cfg->layers[i].mixer.family = cfg->layers[i].family;
        if (attn)
            cfg->layers[i].mixer.u.attention = at;
        else
            cfg->layers[i].mixer.u.mamba1 = m;
        cfg->layers[i].moe = cfg->moe.n_experts > 1 && i % ep == eo;
        cfg->layers[i].dense = !cfg->layers[i].moe;
    }
    if (cfg->moe.n_experts == 1)
        cfg->moe.n_experts = 0; /* layers_num_experts all 1: every layer the SwiGLU MLP */
    return 0;
}

/* A string key that must be absent, null or `want` (an activation the engine computes). */
static int want_string(struct reader *r, const char *key, const char *want)
{
    const struct mc_json_value *v = mc_json_get(r->root, key);
    if (v == NULL || v->type == MC_JSON_NULL || (v->type == MC_JSON_STRING && strcmp(v->string, want) == 0))
        return 0;
    mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: '%s' %s: only \"%s\" is computed", r->where, key,
                 v->type == MC_JSON_STRING ? v->string : "(not a string)", want);
    return -1;
}

/* The first of `names` present and not null in the config (a key's alias that wins, then the key), or the last. */
static const char *alias(struct reader *r, const char *const *names, int n)
{
    for (int i = 0; i < n; i++) {
        const struct mc_json_value *v = mc_json_get(r->root, names[i]);
        if (v != NULL && v->type != MC_JSON_NULL)
            return names[i];
    }
    return names[n - 1];
}

/* NemotronHConfig (transformers 5.24): the blocks of layers_block_type ("linear_attention" / "full_attention" /
 * "mlp" / "moe", or the older "mamba" / "attention"; its alias layer_types) or of hybrid_override_pattern (M * - E),
 * num_hidden_layers their count; the Mamba2 mixer (mamba_num_heads, mamba_head_dim, ssm_state_size, n_groups /
 * mamba_n_groups, conv_kernel / mamba_d_conv, chunk_size / mamba_chunk_size, use_conv_bias / mamba_conv_bias,
 * use_bias, its gated norm per group, dt clamped below at time_step_min / mamba_dt_min as NemotronHMamba2Mixer
 * does (time_step_limit is not read upstream)); attention without rotary embedding and without q/k norm
 * (num_attention_heads, num_key_value_heads, head_dim, 1/sqrt(head_dim), max_position_embeddings); the relu² MLP
 * (intermediate_size); the MoE (n_routed_experts, num_experts_per_tok, moe_intermediate_size, n_group, topk_group,
 * norm_topk_prob, routed_scaling_factor, the shared expert of moe_shared_expert_intermediate_size);
 * layer_norm_epsilon everywhere. Refused: moe_latent_size, multi-token prediction layers, mlp_bias, a tied head
 * (NemotronHForCausalLM ties nothing), activations other than relu² and SiLU. */
static int parse_nemotron_h(struct reader *r, struct mc_stack_config *cfg)
{
    /* NemotronHConfig: an older mamba_* name given wins over the plain one; num_local_experts is n_routed_experts */
    static const char *const k_groups[] = {"mamba_n_groups", "n_groups"}, *const k_conv[] = {"mamba_d_conv", "conv_kernel"},
                             *const k_chunk[] = {"mamba_chunk_size", "chunk_size"},
                             *const k_cbias[] = {"mamba_conv_bias", "use_conv_bias"},
                             *const k_dtmin[] = {"mamba_dt_min", "time_step_min"},
                             *const k_experts[] = {"num_local_experts", "n_routed_experts"};
    struct mc_mamba2_config m = {.hidden_size = cfg->hidden};
    struct mc_attention_config at = {.hidden_size = cfg->hidden, .no_rope = 1, .partial_rotary_factor = 1.0,
                                     .rope_theta = 10000.0, .qk_norm = MC_QK_NORM_NONE, .rms_norm_eps = cfg->norm_eps};
    int64_t shared = 0, mtp = 0;
    int32_t mlp_bias = 0;
    struct mc_stack_moe *e = &cfg->moe;
    if (get_int(r, "mamba_num_heads", 0, 128, &m.num_heads) || get_int(r, "mamba_head_dim", 0, 64, &m.head_dim) ||
        get_int(r, "ssm_state_size", 0, 128, &m.state_size) || get_int(r, alias(r, k_groups, 2), 0, 8, &m.n_groups) ||
        get_int(r, alias(r, k_conv, 2), 0, 4, &m.conv_kernel) || get_int(r, alias(r, k_chunk, 2), 0, 128, &m.chunk_size) ||
        get_bool(r, alias(r, k_cbias, 2), 1, &m.use_conv_bias) || get_bool(r, "use_bias", 0, &m.use_bias) ||
        get_num(r, alias(r, k_dtmin, 2), 0, 0, 0.001, &m.time_step_limit[0]) ||
        positive(r, "mamba_num_heads", m.num_heads, 1 << 16) || positive(r, "mamba_head_dim", m.head_dim, 1 << 16) ||
        get_int(r, "num_attention_heads", 0, 32, &at.num_attention_heads) ||
        positive(r, "num_attention_heads", at.num_attention_heads, 1024) ||
        get_int(r, "num_key_value_heads", 0, 8, &at.num_key_value_heads) ||
        get_int(r, "head_dim", 0, 128, &at.head_dim) ||
        get_int(r, "max_position_embeddings", 0, 4096, &at.cache_length) ||
        positive(r, "max_position_embeddings", at.cache_length, 1 << 20) ||
        get_int(r, "intermediate_size", 0, 21504, &cfg->ffn_size) ||
        positive(r, "intermediate_size", cfg->ffn_size, 1 << 20) || get_bool(r, "mlp_bias", 0, &mlp_bias) ||
        get_int(r, alias(r, k_experts, 2), 0, 8, &e->n_experts) || get_int(r, "num_experts_per_tok", 0, 2, &e->top_k) ||
        get_int(r, "moe_intermediate_size", 0, 7688, &e->expert_size) ||
        positive(r, "moe_intermediate_size", e->expert_size, 1 << 20) ||
        get_int(r, "moe_shared_expert_intermediate_size", 0, 7688, &shared) ||
        positive(r, "moe_shared_expert_intermediate_size", shared, 1 << 20) ||
        get_int(r, "n_group", 0, 1, &e->n_group) || get_int(r, "topk_group", 0, 1, &e->topk_group) ||
        get_bool(r, "norm_topk_prob", 1, &e->renormalise) ||
        get_num(r, "routed_scaling_factor", 0, 0, 1.0, &e->routed_scaling) ||
        get_int(r, "num_nextn_predict_layers", 0, 0, &mtp) || want_string(r, "mlp_hidden_act", "relu2") ||
        want_string(r, "mamba_hidden_act", "silu"))
        return -1;
    const struct mc_json_value *lat = mc_json_get(r->root, "moe_latent_size");
    if (lat != NULL && lat->type != MC_JSON_NULL) {
        mc_error_set(r->err, MC_ERR_INPUT,
                     "%s: config_json: 'moe_latent_size' is set: the MoE's latent projections (fc1_latent_proj / "
                     "fc2_latent_proj) are not computed", r->where);
        return -1;
    }
    if (mtp != 0) {
        mc_error_set(r->err, MC_ERR_INPUT,
                     "%s: config_json: 'num_nextn_predict_layers' %lld: multi-token prediction layers are not computed",
                     r->where, (long long)mtp);
        return -1;
    }
    if (mlp_bias || cfg->tied) {
        mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: '%s' true: %s", r->where,
                     mlp_bias ? "mlp_bias" : "tie_word_embeddings",
                     mlp_bias ? "the MLP and expert biases are not computed"
                              : "NemotronHForCausalLM ties no weights (its lm_head is its own)");
        return -1;
    }
    if (!(m.time_step_limit[0] >= 0.0) || !isfinite(m.time_step_limit[0]) || !isfinite(e->routed_scaling)) {
        mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: time_step_min must be finite and >= 0, "
                     "routed_scaling_factor finite", r->where);
        return -1;
    }
    const struct mc_json_value *kv = mc_json_get(r->root, "num_key_value_heads");
    if (kv != NULL && kv->type == MC_JSON_NULL) /* NemotronHConfig: null is num_attention_heads (absent: 8) */
        at.num_key_value_heads = at.num_attention_heads;
    m.time_step_limit[1] = INFINITY; /* NemotronHMamba2Mixer: (time_step_min, inf) */
    m.layer_norm_epsilon = cfg->norm_eps;
    m.norm_group_size = 0;
    if (m.n_groups < 1 || (m.num_heads * m.head_dim) % m.n_groups != 0 || m.num_heads % m.n_groups != 0) {
        mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: n_groups (%lld) must divide mamba_num_heads (%lld)",
                     r->where, (long long)m.n_groups, (long long)m.num_heads);
        return -1;
    }
    m.norm_group_size = m.num_heads * m.head_dim / m.n_groups; /* NemotronHRMSNormGated: per group, every release */
    /* the blocks: layers_block_type (or layer_types), else hybrid_override_pattern */
    const char *kinds[MC_STACK_MAX_LAYERS];
    int64_t n = 0;
    const struct mc_json_value *lt = mc_json_get(r->root, "layers_block_type");
    if (lt == NULL || lt->type == MC_JSON_NULL)
        lt = mc_json_get(r->root, "layer_types");
    const struct mc_json_value *pat = mc_json_get(r->root, "hybrid_override_pattern");
    if (lt != NULL && lt->type != MC_JSON_NULL) {
        if (lt->type != MC_JSON_ARRAY || lt->len < 1 || lt->len > MC_STACK_MAX_LAYERS) {
            mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: 'layers_block_type' must list 1 to %d blocks", r->where,
                         MC_STACK_MAX_LAYERS);
            return -1;
        }
        for (size_t i = 0; i < lt->len; i++) {
            const struct mc_json_value *v = &lt->items[i];
            const char *k = v->type == MC_JSON_STRING ? v->string : "";
            kinds[n++] = strcmp(k, "linear_attention") == 0 || strcmp(k, "mamba") == 0   ? "M"
                         : strcmp(k, "full_attention") == 0 || strcmp(k, "attention") == 0 ? "*"
                         : strcmp(k, "mlp") == 0                                           ? "-"
                         : strcmp(k, "moe") == 0                                           ? "E"
                                                                                           : NULL;
            if (kinds[n - 1] == NULL) {
                mc_error_set(r->err, MC_ERR_INPUT,
                             "%s: config_json: 'layers_block_type[%zu]' must be \"linear_attention\", \"full_attention\", "
                             "\"mlp\" or \"moe\"", r->where, i);
                return -1;
            }
        }
    } else if (pat != NULL && pat->type == MC_JSON_STRING) {
        static const char *const letters[] = {"M", "*", "-", "E"};
        for (const char *c = pat->string; *c != '\0'; c++) {
            const char *k = strchr("M*-E", *c);
            if (k == NULL || n == MC_STACK_MAX_LAYERS) {
                mc_error_set(r->err, MC_ERR_INPUT,
                             "%s: config_json: 'hybrid_override_pattern' must be 1 to %d of M, *, - and E", r->where,
                             MC_STACK_MAX_LAYERS);
                return -1;
            }
            kinds[n++] = letters[k - "M*-E"];
        }
    }
    if (n == 0 && (lt == NULL || lt->type == MC_JSON_NULL) && (pat == NULL || pat->type == MC_JSON_NULL)) {
        static const char *const dflt[] = {"M", "E", "*", "-"}; /* NemotronHConfig's default layers_block_type */
        for (; n < 4; n++)
            kinds[n] = dflt[n];
    }
    if (n == 0) {
        mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: 'hybrid_override_pattern' must be a string of M, *, - and E",
                     r->where);
        return -1;
    }
    cfg->n_layers = n; /* NemotronHConfig.num_hidden_layers is the length of layers_block_type */
    int any_moe = 0;
    for (int64_t i = 0; i < n; i++)
        any_moe |= kinds[i][0] == 'E';
    if (any_moe && (e->n_experts < 1 || e->n_experts > MC_STACK_MAX_EXPERTS || e->n_group < 1 ||
                    e->n_experts % e->n_group != 0 || e->n_experts / e->n_group < 2 || e->topk_group < 1 ||
                    e->topk_group > e->n_group || e->top_k < 1 || e->top_k > MC_STACK_MAX_TOP_K ||
                    e->top_k > e->topk_group * (e->n_experts / e->n_group))) {
        mc_error_set(r->err, MC_ERR_INPUT,
                     "%s: config_json: n_routed_experts (%lld) must be in [1, 512] and a multiple of n_group (%lld) with at "
                     "least 2 experts per group, topk_group (%lld) in [1, n_group], num_experts_per_tok (%lld) in [1, "
                     "min(64, the experts of topk_group groups)]",
                     r->where, (long long)e->n_experts, (long long)e->n_group, (long long)e->topk_group,
                     (long long)e->top_k);
        return -1;
    }
    e->router = MC_ROUTER_SIGMOID_GROUPED;
    e->act = MC_FFN_RELU2;
    if (!any_moe)
        e->n_experts = 0;
    cfg->ffn_act = MC_FFN_RELU2;
    cfg->norm_weight_fp32 = 1;
    for (int64_t i = 0; i < n; i++) {
        struct mc_stack_layer *L = &cfg->layers[i];
        char k = kinds[i][0];
        L->family = k == 'M' ? MC_FAMILY_MAMBA2 : k == '*' ? MC_FAMILY_ATTENTION : MC_STACK_NO_MIXER;
        L->mixer.family = L->family;
        if (k == 'M')
            L->mixer.u.mamba2 = m;
        else if (k == '*')
            L->mixer.u.attention = at;
        L->moe = k == 'E';
        L->dense = k == '-' || k == 'E'; /* a MoE block's shared expert is its dense MLP */
        L->dense_size = k == '-' ? cfg->ffn_size : k == 'E' ? shared : 0;
    }
    cfg->ffn_size = cfg->ffn_size > shared ? cfg->ffn_size : shared; /* the largest dense MLP */
    return 0;
}

/* Zamba's and Zamba2's layer kinds, layers_block_type (or its alias layer_types): hyb[i] 1 for a "hybrid" layer,
 * 0 for a "mamba" / "linear_attention" one, *n their count; *n 0 when the config has neither key (the caller's
 * default applies). -1, the key named, on a malformed list; `words` the message's other kinds. */
static int read_hybrid_pattern(struct reader *r, const char *words, int hyb[], int64_t *n)
{
    *n = 0;
    const struct mc_json_value *lt = mc_json_get(r->root, "layers_block_type");
    if (lt == NULL || lt->type == MC_JSON_NULL)
        lt = mc_json_get(r->root, "layer_types");
    if (lt == NULL || lt->type == MC_JSON_NULL)
        return 0;
    if (lt->type != MC_JSON_ARRAY || lt->len < 1 || lt->len > MC_STACK_MAX_LAYERS) {
        mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: 'layers_block_type' must list 1 to %d layers", r->where,
                     MC_STACK_MAX_LAYERS);
        return -1;
    }
    for (size_t i = 0; i < lt->len; i++) {
        const char *k = lt->items[i].type == MC_JSON_STRING ? lt->items[i].string : "";
        if (strcmp(k, "hybrid") != 0 && strcmp(k, "linear_attention") != 0 && strcmp(k, "mamba") != 0) {
            mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: 'layers_block_type[%zu]' must be %s or \"hybrid\"",
                         r->where, i, words);
            return -1;
        }
        hyb[(*n)++] = strcmp(k, "hybrid") == 0;
    }
    return 0;
}

/* The engine's entries of a shared-block stack of n layers, a hybrid one two: its block's application (`at` on
 * cat(h, e), block j mod n_blocks of application j, its MLP of F), then its Mamba layer (`mamba`); any other layer
 * its Mamba layer alone. Sets n_layers, layers[] and n_apps; -1, naming the key, when num_hidden_layers (n_hf) is
 * not the pattern's length or the entries are more than the engine holds. */
static int place_hybrid_layers(struct reader *r, struct mc_stack_config *cfg, const int hyb[], int64_t n, int64_t n_hf,
                               const struct mc_attention_config *at, const struct mc_family_config *mamba, int64_t F)
{
    if (n != n_hf) {
        mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: 'num_hidden_layers' %lld must be the length of "
                     "layers_block_type (%lld)", r->where, (long long)n_hf, (long long)n);
        return -1;
    }
    int64_t entries = n;
    for (int64_t i = 0; i < n; i++)
        entries += hyb[i];
    if (entries > MC_STACK_MAX_LAYERS) {
        mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: 'layers_block_type': %lld layers and hybrid layers are "
                     "more than %d entries", r->where, (long long)n, MC_STACK_MAX_LAYERS);
        return -1;
    }
    cfg->n_layers = entries;
    int64_t e = 0, j = 0;
    for (int64_t i = 0; i < n; i++) {
        if (hyb[i]) {
            struct mc_stack_layer *A = &cfg->layers[e++];
            A->family = A->mixer.family = MC_FAMILY_ATTENTION;
            A->mixer.u.attention = *at;
            A->shared = 1;
            A->app = (int32_t)j;
            A->block = (int32_t)(j % cfg->n_blocks);
            A->hf_layer = i;
            A->dense = 1;
            A->dense_size = F;
            j++;
        }
        struct mc_stack_layer *M = &cfg->layers[e++];
        M->family = mamba->family;
        M->mixer = *mamba;
        M->hybrid = hyb[i];
        M->hf_layer = i;
    }
    cfg->n_apps = j;
    return 0;
}

/* Zamba2Config (transformers 5.24): layers_block_type (its alias layer_types; "linear_attention" or the older
 * "mamba", and "hybrid"; absent: Zamba2Config's 54-layer default), num_hidden_layers its length; the Mamba2 mixer
 * (n_mamba_heads, mamba_d_state, mamba_d_conv, mamba_expand, mamba_ngroups, chunk_size, its head dim
 * mamba_expand·D / n_mamba_heads, the gated norm per group with eps 1e-5, dt clamped below at time_step_min, the
 * conv bias always); the shared blocks (num_mem_blocks; attention on 2D: num_attention_heads, num_key_value_heads
 * (null: the heads), head dim 2D / heads, the score scale (head dim / 2)^-1/2, RoPE on the whole head from
 * rope_parameters / rope_theta with use_mem_rope, max_position_embeddings; the MLP of intermediate_size (null: 4D)
 * with hidden_act gelu; the adapters of adapter_rank, q/k/v ones with use_shared_attention_adapter); rms_norm_eps
 * everywhere else; tie_word_embeddings (default true). Refused: add_bias_linear (the biases are not computed),
 * use_conv_bias false (upstream's prefill adds the conv bias whatever it says, its decode step only with it),
 * use_long_context (a rescaled RoPE), hidden_act other than gelu, q/k/v adapters with fewer key-value heads than
 * heads (upstream's sum does not broadcast: docs/findings.md 35), more than 64 entries. */
static int parse_zamba2(struct reader *r, struct mc_stack_config *cfg)
{
    int64_t D = cfg->hidden, expand = 2, n_hf = 54, heads = 8, F = 0;
    struct mc_mamba2_config m = {.hidden_size = D, .use_conv_bias = 1, .layer_norm_epsilon = 1e-5};
    struct mc_attention_config at = {.hidden_size = 2 * D, .partial_rotary_factor = 1.0, .qk_norm = MC_QK_NORM_NONE,
                                     .rms_norm_eps = cfg->norm_eps};
    int32_t bias = 0, conv_bias = 1, rope = 0, long_ctx = 0;
    if (get_int(r, "num_hidden_layers", 0, 54, &n_hf) || get_int(r, "n_mamba_heads", 0, 8, &heads) ||
        positive(r, "n_mamba_heads", heads, 1 << 16) || get_int(r, "mamba_d_state", 0, 64, &m.state_size) ||
        get_int(r, "mamba_d_conv", 0, 4, &m.conv_kernel) || get_int(r, "mamba_expand", 0, 2, &expand) ||
        positive(r, "mamba_expand", expand, 64) || get_int(r, "mamba_ngroups", 0, 1, &m.n_groups) ||
        get_int(r, "chunk_size", 0, 256, &m.chunk_size) ||
        get_num(r, "time_step_min", 0, 0, 0.001, &m.time_step_limit[0]) ||
        get_bool(r, "add_bias_linear", 0, &bias) || get_bool(r, "use_conv_bias", 1, &conv_bias) ||
        get_int(r, "num_attention_heads", 0, 32, &at.num_attention_heads) ||
        positive(r, "num_attention_heads", at.num_attention_heads, 1024) ||
        get_int(r, "num_key_value_heads", 0, at.num_attention_heads, &at.num_key_value_heads) ||
        get_int(r, "max_position_embeddings", 0, 4096, &at.cache_length) ||
        positive(r, "max_position_embeddings", at.cache_length, 1 << 20) || get_bool(r, "use_mem_rope", 0, &rope) ||
        get_bool(r, "use_long_context", 0, &long_ctx) || rope_params(r, 10000.0, 1.0, 0, &at) ||
        get_int(r, "intermediate_size", 0, 4 * D, &F) || positive(r, "intermediate_size", F, 1 << 20) ||
        get_int(r, "num_mem_blocks", 0, 1, &cfg->n_blocks) || positive(r, "num_mem_blocks", cfg->n_blocks, 64) ||
        get_bool(r, "use_shared_attention_adapter", 0, &cfg->attn_adapter) ||
        get_int(r, "adapter_rank", 0, 128, &cfg->adapter_rank) || positive(r, "adapter_rank", cfg->adapter_rank, 1 << 16) ||
        want_string(r, "hidden_act", "gelu"))
        return -1;
    if (bias || !conv_bias || long_ctx) {
        mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: '%s' %s: %s", r->where,
                     bias ? "add_bias_linear" : !conv_bias ? "use_conv_bias" : "use_long_context",
                     bias || long_ctx ? "true" : "false",
                     bias ? "the projection and MLP biases are not computed"
                     : !conv_bias ? "upstream adds the conv bias in a prefill and not in a decode step"
                                  : "the rescaled rotary embedding of the long context is not computed");
        return -1;
    }
    if ((expand * D) % heads != 0 || (2 * D) % at.num_attention_heads != 0 || m.n_groups < 1 || heads % m.n_groups != 0 ||
        !(m.time_step_limit[0] >= 0.0) || !isfinite(m.time_step_limit[0])) {
        mc_error_set(r->err, MC_ERR_INPUT,
                     "%s: config_json: n_mamba_heads (%lld) must divide mamba_expand * hidden_size, num_attention_heads "
                     "(%lld) 2 * hidden_size, mamba_ngroups (%lld) n_mamba_heads; time_step_min finite and >= 0",
                     r->where, (long long)heads, (long long)at.num_attention_heads, (long long)m.n_groups);
        return -1;
    }
    if (cfg->attn_adapter && at.num_key_value_heads != at.num_attention_heads) {
        mc_error_set(r->err, MC_ERR_INPUT,
                     "%s: config_json: 'num_key_value_heads' %lld with use_shared_attention_adapter: the k and v adapters "
                     "give 2 * hidden_size values, k_proj and v_proj num_key_value_heads * head_dim (upstream's sum does "
                     "not broadcast)", r->where, (long long)at.num_key_value_heads);
        return -1;
    }
    m.num_heads = heads;
    m.head_dim = expand * D / heads;
    m.time_step_limit[1] = INFINITY; /* Zamba2MambaMixer: (time_step_min, inf) */
    m.norm_group_size = m.num_heads * m.head_dim / m.n_groups; /* Zamba2RMSNormGated: per group */
    at.head_dim = 2 * D / at.num_attention_heads;
    at.no_rope = !rope;
    at.softmax_scale = 1.0 / sqrt((double)at.head_dim / 2.0); /* Zamba2Attention: (head_dim / 2) ** -0.5 */
    /* the layer kinds */
    int hyb[MC_STACK_MAX_LAYERS * 2];
    int64_t n = 0;
    if (read_hybrid_pattern(r, "\"linear_attention\", \"mamba\"", hyb, &n) != 0)
        return -1;
    if (n == 0) { /* Zamba2Config's default: 1 + 7 x (5 + hybrid) + 4 + hybrid + 3 + hybrid + 2 */
        for (int i = 0; i < 54; i++)
            hyb[n++] = (i >= 6 && i <= 42 && i % 6 == 0) || i == 47 || i == 51;
    }
    cfg->ffn_size = F;
    cfg->ffn_fused = 1; /* Zamba2MLP.gate_up_proj: [2F][D], the gate's rows first (torch.chunk) */
    cfg->ffn_act = MC_FFN_GELU;
    const struct mc_family_config mamba = {.family = MC_FAMILY_MAMBA2, .u.mamba2 = m};
    return place_hybrid_layers(r, cfg, hyb, n, n_hf, &at, &mamba, F);
}

/* Qwen3NextConfig (transformers 5.24): layer_types ("linear_attention" / "full_attention"; absent: every
 * full_attention_interval-th layer (default 4) full attention), the linear_* keys of the Gated DeltaNet layers in
 * Qwen3-Next's interleaved projections (in_proj_qkvz, in_proj_ba), the gated attention of Qwen3.5 (head_dim, the
 * output gate, zero-centred q/k norms, partial rotary from rope_parameters, default 0.25), rms_norm_eps everywhere;
 * the MoE (num_experts, num_experts_per_tok, moe_intermediate_size, norm_topk_prob; a softmax over every expert,
 * its top-k, renormalised with norm_topk_prob) with its shared SwiGLU expert (shared_expert_intermediate_size)
 * behind the sigmoid shared_expert_gate at the layers i with (i + 1) % decoder_sparse_step == 0 not in
 * mlp_only_layers (num_experts 0: none), the dense SwiGLU MLP of intermediate_size on the others. Refused:
 * hidden_act other than silu.
 * Qwen3_5MoeTextConfig (q35): the same with Qwen3.5's Gated DeltaNet projections and the sparse block on every layer
 * (Qwen3_5MoeDecoderLayer): no intermediate_size, decoder_sparse_step, mlp_only_layers or norm_topk_prob (its router
 * always renormalises), num_experts 256 and num_experts_per_tok 8 by default, at least one expert. */
static int parse_qwen3_next(struct reader *r, struct mc_stack_config *cfg)
{
    const int q35 = cfg->type == MC_MODEL_QWEN3_5_MOE;
    struct mc_gdn_config gd = {.hidden_size = cfg->hidden, .chunk_size = 64,
                               .layout = q35 ? MC_GDN_LAYOUT_QWEN3_5 : MC_GDN_LAYOUT_QWEN3_NEXT};
    struct mc_attention_config at = {.hidden_size = cfg->hidden};
    int64_t inter = q35 ? 1 : 5632, shared = 512, step = 1, interval = 4;
    if (get_int(r, "linear_num_key_heads", 0, 16, &gd.num_key_heads) ||
        get_int(r, "linear_num_value_heads", 0, 32, &gd.num_value_heads) ||
        get_int(r, "linear_key_head_dim", 0, 128, &gd.key_head_dim) ||
        get_int(r, "linear_value_head_dim", 0, 128, &gd.value_head_dim) ||
        get_int(r, "linear_conv_kernel_dim", 0, 4, &gd.conv_kernel) ||
        get_int(r, "num_attention_heads", 0, 16, &at.num_attention_heads) ||
        get_int(r, "num_key_value_heads", 0, 2, &at.num_key_value_heads) ||
        get_int(r, "head_dim", 0, 256, &at.head_dim) || get_int(r, "max_position_embeddings", 0, 32768, &at.cache_length) ||
        rope_params(r, 10000.0, 0.25, 1, &at) || get_bool(r, "attention_bias", 0, &at.attention_bias) ||
        (!q35 && get_int(r, "intermediate_size", 0, 5632, &inter)) ||
        get_int(r, "shared_expert_intermediate_size", 0, 512, &shared) ||
        get_int(r, "num_experts", 0, q35 ? 256 : 512, &cfg->moe.n_experts) ||
        get_int(r, "num_experts_per_tok", 0, q35 ? 8 : 10, &cfg->moe.top_k) ||
        get_int(r, "moe_intermediate_size", 0, 512, &cfg->moe.expert_size) ||
        (!q35 && get_bool(r, "norm_topk_prob", 1, &cfg->moe.renormalise)) ||
        (!q35 && get_int(r, "decoder_sparse_step", 0, 1, &step)) ||
        get_int(r, "full_attention_interval", 0, 4, &interval) ||
        want_string(r, "hidden_act", "silu") ||
        positive(r, "num_attention_heads", at.num_attention_heads, 1024) ||
        positive(r, "intermediate_size", inter, 1 << 20) ||
        positive(r, "max_position_embeddings", at.cache_length, 1 << 20) ||
        positive(r, "decoder_sparse_step", step, 1 << 20))
        return -1;
    if (q35) /* Qwen3_5MoeTopKRouter: always divided by the sum; every layer the sparse block */
        cfg->moe.renormalise = 1;
    if (q35 && cfg->moe.n_experts < 1) {
        mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: 'num_experts' must be >= 1 (every Qwen3.5-MoE layer is a "
                     "sparse block; got %lld)", r->where, (long long)cfg->moe.n_experts);
        return -1;
    }
    if (cfg->moe.n_experts < 0 || cfg->moe.n_experts > MC_STACK_MAX_EXPERTS ||
        (cfg->moe.n_experts > 0 &&
         (cfg->moe.top_k < 1 || cfg->moe.top_k > cfg->moe.n_experts || cfg->moe.top_k > MC_STACK_MAX_TOP_K ||
          positive(r, "moe_intermediate_size", cfg->moe.expert_size, 1 << 20) ||
          positive(r, "shared_expert_intermediate_size", shared, 1 << 20)))) {
        if (r->err->code == MC_ERR_NONE)
            mc_error_set(r->err, MC_ERR_INPUT,
                         "%s: config_json: num_experts (%lld) must be in [0, 512] and num_experts_per_tok (%lld) in "
                         "[1, min(num_experts, 64)]",
                         r->where, (long long)cfg->moe.n_experts, (long long)cfg->moe.top_k);
        return -1;
    }
    gd.rms_norm_eps = cfg->norm_eps;
    at.rms_norm_eps = cfg->norm_eps;
    at.qk_norm = MC_QK_NORM_ZERO_CENTRED;
    at.attn_output_gate = 1;
    const struct mc_json_value *lt = mc_json_get(r->root, "layer_types");
    const struct mc_family_config linear = {.family = MC_FAMILY_GDN, .u.gdn = gd};
    if (lt == NULL || lt->type == MC_JSON_NULL) { /* Qwen3NextConfig: full attention every interval-th layer */
        if (positive(r, "full_attention_interval", interval, 1 << 20))
            return -1;
        for (int64_t i = 0; i < cfg->n_layers; i++) {
            int attn = (i + 1) % interval == 0;
            place_layer(cfg, i, attn, &linear, &at);
        }
    } else {
        if (layer_types(r, cfg, "linear_attention", &linear, &at))
            return -1;
    }
    const struct mc_json_value *mo = q35 ? NULL : mc_json_get(r->root, "mlp_only_layers");
    if (mo != NULL && mo->type != MC_JSON_NULL && mo->type != MC_JSON_ARRAY) {
        mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: 'mlp_only_layers' must be a list of layer indices", r->where);
        return -1;
    }
    for (size_t k = 0; mo != NULL && mo->type == MC_JSON_ARRAY && k < mo->len; k++)
        if (mo->items[k].type != MC_JSON_NUMBER || mo->items[k].number != floor(mo->items[k].number)) {
            mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: 'mlp_only_layers[%zu]' must be an integer", r->where, k);
            return -1;
        }
    cfg->moe.router = MC_ROUTER_SOFTMAX_TOPK;
    cfg->moe.shared_gate = 1;
    cfg->ffn_size = q35 ? shared : inter;
    for (int64_t i = 0; i < cfg->n_layers; i++) {
        int mlp_only = 0; /* Qwen3NextDecoderLayer: `layer_idx not in config.mlp_only_layers` */
        for (size_t k = 0; mo != NULL && mo->type == MC_JSON_ARRAY && k < mo->len; k++)
            mlp_only |= mo->items[k].number == (double)i;
        cfg->layers[i].moe = !mlp_only && cfg->moe.n_experts > 0 && (i + 1) % step == 0;
        cfg->layers[i].dense = 1; /* the dense MLP, or the MoE's shared expert */
        cfg->layers[i].dense_size = cfg->layers[i].moe ? shared : inter;
        if (cfg->layers[i].moe && shared > cfg->ffn_size)
            cfg->ffn_size = shared; /* the largest dense MLP */
    }
    return 0;
}

/* A list of n numbers (absent or null: every one `dflt`), as FalconH1Config's mlp_multipliers and ssm_multipliers. */
static int num_list(struct reader *r, const char *key, int n, double dflt, double *out)
{
    const struct mc_json_value *v = mc_json_get(r->root, key);
    for (int i = 0; i < n; i++)
        out[i] = dflt;
    if (v == NULL || v->type == MC_JSON_NULL)
        return 0;
    int ok = v->type == MC_JSON_ARRAY && (int)v->len == n;
    for (int i = 0; ok && i < n; i++) {
        ok = v->items[i].type == MC_JSON_NUMBER && isfinite(v->items[i].number);
        out[i] = ok ? v->items[i].number : dflt;
    }
    if (!ok)
        mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: '%s' must be a list of %d finite numbers", r->where, key, n);
    return ok ? 0 : -1;
}

/* FalconH1Config (transformers 5.24): num_hidden_layers decoder layers, each the Mamba2 mixer FalconH1Mixer
 * (mamba_d_ssm, or mamba_expand x hidden_size when null, mamba_n_heads, mamba_d_head "auto" = intermediate /
 * heads, mamba_n_groups, mamba_d_state, mamba_d_conv, mamba_chunk_size, mamba_conv_bias, mamba_proj_bias for
 * in_proj and projectors_bias for out_proj (one bias flag in the family: they must agree), mamba_rms_norm (false,
 * the default: no norm, the family's no_gated_norm) and mamba_norm_before_gate (true, the default: the norm per
 * group with the gate after it, norm_before_gate; false: the gate before it), time_step_limit) and
 * FalconH1Attention (LlamaAttention: num_attention_heads, num_key_value_heads, head_dim (default hidden / heads), RoPE of rope_parameters / rope_theta on the whole head,
 * head_dim^-0.5, no q/k norm, attention_bias, max_position_embeddings the KV cache length) in parallel, and the
 * SwiGLU MLP of intermediate_size; rms_norm_eps everywhere; the multipliers embedding_multiplier,
 * lm_head_multiplier, mlp_multipliers [gate, down], key_multiplier, attention_in_multiplier,
 * attention_out_multiplier, ssm_multipliers [z, x, B, C, dt], ssm_in_multiplier, ssm_out_multiplier. Refused:
 * projectors_bias unlike mamba_proj_bias; mlp_bias; activations other than SiLU; more than MC_STACK_MAX_LAYERS / 2
 * layers. */
static int parse_falcon_h1(struct reader *r, struct mc_stack_config *cfg)
{
    struct mc_mamba2_config m = {.hidden_size = cfg->hidden};
    struct mc_attention_config at = {.hidden_size = cfg->hidden, .qk_norm = MC_QK_NORM_NONE, .rms_norm_eps = cfg->norm_eps};
    int64_t expand = 2, inner = 0;
    int32_t rms_norm = 0, before_gate = 1, proj_bias = 0, mlp_bias = 0;
    double mlp[2];
    if (get_int(r, "mamba_n_heads", 0, 128, &m.num_heads) || get_int(r, "mamba_d_state", 0, 256, &m.state_size) ||
        get_int(r, "mamba_n_groups", 0, 1, &m.n_groups) || get_int(r, "mamba_d_conv", 0, 4, &m.conv_kernel) ||
        get_int(r, "mamba_expand", 0, 2, &expand) || get_int(r, "mamba_chunk_size", 0, 256, &m.chunk_size) ||
        get_bool(r, "mamba_conv_bias", 1, &m.use_conv_bias) || get_bool(r, "mamba_proj_bias", 0, &m.use_bias) ||
        get_bool(r, "projectors_bias", 0, &proj_bias) || get_bool(r, "mamba_rms_norm", 0, &rms_norm) ||
        get_bool(r, "mamba_norm_before_gate", 1, &before_gate) || get_bool(r, "mlp_bias", 0, &mlp_bias) ||
        positive(r, "mamba_n_heads", m.num_heads, 1 << 16) ||
        get_int(r, "num_attention_heads", 0, 32, &at.num_attention_heads) ||
        positive(r, "num_attention_heads", at.num_attention_heads, 1024) ||
        get_int(r, "num_key_value_heads", 0, at.num_attention_heads, &at.num_key_value_heads) ||
        get_int(r, "head_dim", 0, cfg->hidden / at.num_attention_heads, &at.head_dim) ||
        get_int(r, "max_position_embeddings", 0, 8192, &at.cache_length) ||
        get_bool(r, "attention_bias", 0, &at.attention_bias) || rope_params(r, 10000.0, 1.0, 1, &at) ||
        get_int(r, "intermediate_size", 0, 14336, &cfg->ffn_size) ||
        positive(r, "intermediate_size", cfg->ffn_size, 1 << 20) ||
        positive(r, "max_position_embeddings", at.cache_length, 1 << 20) ||
        want_string(r, "hidden_act", "silu") ||
        get_num(r, "embedding_multiplier", 0, 0, 1.0, &cfg->embedding_multiplier) ||
        get_num(r, "lm_head_multiplier", 0, 0, 1.0, &cfg->lm_head_multiplier) ||
        get_num(r, "key_multiplier", 0, 0, 1.0, &cfg->key_multiplier) || num_list(r, "mlp_multipliers", 2, 1.0, mlp) ||
        num_list(r, "ssm_multipliers", 5, 1.0, cfg->ssm_multipliers))
        return -1;
    double ain = 1.0, aout = 1.0, sin_ = 1.0, sout = 1.0;
    if (get_num(r, "attention_in_multiplier", 0, 0, 1.0, &ain) ||
        get_num(r, "attention_out_multiplier", 0, 0, 1.0, &aout) || get_num(r, "ssm_in_multiplier", 0, 0, 1.0, &sin_) ||
        get_num(r, "ssm_out_multiplier", 0, 0, 1.0, &sout))
        return -1;
    if (!isfinite(cfg->embedding_multiplier) || !isfinite(cfg->lm_head_multiplier) || !isfinite(cfg->key_multiplier) ||
        !isfinite(ain) || !isfinite(aout) || !isfinite(sin_) || !isfinite(sout)) {
        mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: every multiplier must be finite", r->where);
        return -1;
    }
    cfg->mlp_gate_multiplier = mlp[0];
    cfg->mlp_down_multiplier = mlp[1];
    /* FalconH1Mixer: mamba_rms_norm false (the default) has no norm (nn.Identity, no norm.weight), y · silu(z);
     * with it, FalconH1RMSNormGated with the gate after the norm when mamba_norm_before_gate (the default). */
    m.no_gated_norm = !rms_norm;
    m.norm_before_gate = rms_norm && before_gate;
    if (proj_bias != m.use_bias) {
        mc_error_set(r->err, MC_ERR_INPUT,
                     "%s: config_json: 'projectors_bias' (%s) differs from 'mamba_proj_bias' (%s): the Mamba2 family "
                     "has one bias flag for in_proj and out_proj",
                     r->where, proj_bias ? "true" : "false", m.use_bias ? "true" : "false");
        return -1;
    }
    if (mlp_bias) {
        mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: 'mlp_bias' = true: the MLP is computed without biases",
                     r->where);
        return -1;
    }
    if (get_int(r, "mamba_d_ssm", 0, expand * cfg->hidden, &inner) || positive(r, "mamba_d_ssm", inner, 1 << 24))
        return -1;
    const struct mc_json_value *dh = mc_json_get(r->root, "mamba_d_head");
    if (dh == NULL || dh->type == MC_JSON_NULL || (dh->type == MC_JSON_STRING && strcmp(dh->string, "auto") == 0))
        m.head_dim = inner / m.num_heads;
    else if (get_int(r, "mamba_d_head", 1, 0, &m.head_dim))
        return -1;
    if (m.head_dim * m.num_heads != inner) {
        mc_error_set(r->err, MC_ERR_INPUT,
                     "%s: config_json: mamba_n_heads * mamba_d_head (%lld) must equal the Mamba intermediate size "
                     "mamba_d_ssm (%lld)",
                     r->where, (long long)(m.head_dim * m.num_heads), (long long)inner);
        return -1;
    }
    if (m.n_groups < 1 || inner % m.n_groups != 0) {
        mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: 'mamba_n_groups' (%lld) must divide mamba_d_ssm (%lld)",
                     r->where, (long long)m.n_groups, (long long)inner);
        return -1;
    }
    m.norm_group_size = inner / m.n_groups; /* FalconH1RMSNormGated: per group in every release */
    m.layer_norm_epsilon = cfg->norm_eps;
    if (time_step_limit(r, m.time_step_limit))
        return -1;
    if (cfg->n_layers > MC_STACK_MAX_LAYERS / 2) {
        mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: 'num_hidden_layers' must be in [1, %d] (two mixer slots a "
                     "layer)", r->where, MC_STACK_MAX_LAYERS / 2);
        return -1;
    }
    cfg->decoder_layers = cfg->n_layers;
    cfg->n_layers = 2 * cfg->decoder_layers;
    for (int64_t j = 0; j < cfg->decoder_layers; j++) {
        struct mc_stack_layer *a = &cfg->layers[2 * j], *b = &cfg->layers[2 * j + 1];
        a->family = a->mixer.family = MC_FAMILY_MAMBA2; /* FalconH1DecoderLayer.mamba */
        a->mixer.u.mamba2 = m;
        a->parallel = 1;
        a->in_multiplier = sin_;
        a->out_multiplier = sout;
        b->family = b->mixer.family = MC_FAMILY_ATTENTION; /* .self_attn */
        b->mixer.u.attention = at;
        b->parallel = 2;
        b->in_multiplier = ain;
        b->out_multiplier = aout;
        b->dense = 1; /* the layer's feed-forward, after the sum */
    }
    return 0;
}

/* ZambaConfig (transformers 5.24): layers_block_type (its alias layer_types; "mamba" / "linear_attention" and
 * "hybrid"; absent: ZambaConfig's default, two Mamba layers, a hybrid one, then hybrid at i % attn_layer_period ==
 * attn_layer_offset over the other num_hidden_layers - 3), num_hidden_layers its length; the Mamba1 mixer of one
 * head (mamba_d_state, mamba_d_conv, mamba_expand, mamba_dt_rank ("auto": ceil(D / 16)), mamba_conv_bias,
 * mamba_proj_bias on in_proj and out_proj, hidden_mamba_act silu); the one shared block (attention on 2D:
 * num_attention_heads, num_key_value_heads, attention_head_dim (null: 2D / heads), the score scale
 * (head_dim / 2)^-1/2, no positional embedding, max_position_embeddings; the MLP of intermediate_size with
 * hidden_act gelu); rms_norm_eps everywhere; tie_word_embeddings (default true). Refused: n_mamba_heads other
 * than 1 (ZambaMambaMixer gives each head its own x_proj and dt_proj, so B, C and dt per head, which the Mamba1
 * family does not compute), attention_hidden_size other than 2 hidden_size (q/k/v_proj read cat(h, e)), other
 * activations, more than 64 entries. */
static int parse_zamba(struct reader *r, struct mc_stack_config *cfg)
{
    int64_t D = cfg->hidden, expand = 2, n_hf = 76, heads = 2, F = 14848, ahs = 2 * D, per = 6, off = 4, hd = 0;
    struct mc_mamba1_config m = {.hidden_size = D, .use_conv_bias = 1};
    struct mc_attention_config at = {.hidden_size = 2 * D, .partial_rotary_factor = 1.0, .rope_theta = 10000.0,
                                     .qk_norm = MC_QK_NORM_NONE, .rms_norm_eps = cfg->norm_eps, .no_rope = 1};
    if (get_int(r, "num_hidden_layers", 0, 76, &n_hf) || get_int(r, "n_mamba_heads", 0, 2, &heads) ||
        get_int(r, "mamba_d_state", 0, 16, &m.state_size) || get_int(r, "mamba_d_conv", 0, 4, &m.conv_kernel) ||
        get_int(r, "mamba_expand", 0, 2, &expand) || positive(r, "mamba_expand", expand, 64) ||
        get_bool(r, "mamba_conv_bias", 1, &m.use_conv_bias) || get_bool(r, "mamba_proj_bias", 0, &m.use_bias) ||
        get_int(r, "num_attention_heads", 0, 16, &at.num_attention_heads) ||
        positive(r, "num_attention_heads", at.num_attention_heads, 1024) ||
        get_int(r, "num_key_value_heads", 0, 16, &at.num_key_value_heads) ||
        get_int(r, "attention_hidden_size", 0, 2 * D, &ahs) || get_int(r, "attention_head_dim", 0, 0, &hd) ||
        get_int(r, "max_position_embeddings", 0, 4096, &at.cache_length) ||
        positive(r, "max_position_embeddings", at.cache_length, 1 << 20) ||
        get_int(r, "intermediate_size", 0, 14848, &F) || positive(r, "intermediate_size", F, 1 << 20) ||
        get_int(r, "attn_layer_period", 0, 6, &per) || positive(r, "attn_layer_period", per, 1 << 20) ||
        get_int(r, "attn_layer_offset", 0, 4, &off) || want_string(r, "hidden_act", "gelu") ||
        want_string(r, "hidden_mamba_act", "silu"))
        return -1;
    if (heads != 1) {
        mc_error_set(r->err, MC_ERR_INPUT,
                     "%s: config_json: 'n_mamba_heads' %lld: only one Mamba head is computed (ZambaMambaMixer gives "
                     "each head its own x_proj and dt_proj, so its own B, C and dt)", r->where, (long long)heads);
        return -1;
    }
    if (ahs != 2 * D) {
        mc_error_set(r->err, MC_ERR_INPUT,
                     "%s: config_json: 'attention_hidden_size' %lld: must be 2 * hidden_size (%lld), the width of "
                     "cat(hidden, embeddings) that q/k/v_proj read", r->where, (long long)ahs, (long long)(2 * D));
        return -1;
    }
    if (hd == 0)
        hd = 2 * D / at.num_attention_heads;
    if (hd < 1 || hd > 4096) {
        mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: 'attention_head_dim' must be in [1, 4096]", r->where);
        return -1;
    }
    const struct mc_json_value *rank = mc_json_get(r->root, "mamba_dt_rank");
    if (rank == NULL || rank->type == MC_JSON_NULL || (rank->type == MC_JSON_STRING && strcmp(rank->string, "auto") == 0))
        m.time_step_rank = (D + 15) / 16;
    else if (get_int(r, "mamba_dt_rank", 1, 0, &m.time_step_rank) || positive(r, "mamba_dt_rank", m.time_step_rank, 1 << 16))
        return -1;
    m.intermediate_size = expand * D;
    at.head_dim = hd;
    at.softmax_scale = 1.0 / sqrt((double)hd / 2.0); /* ZambaAttention: (head_dim / 2) ** -0.5 */
    int hyb[MC_STACK_MAX_LAYERS * 2];
    int64_t n = 0;
    if (read_hybrid_pattern(r, "\"mamba\", \"linear_attention\"", hyb, &n) != 0)
        return -1;
    if (n == 0) { /* ZambaConfig.__post_init__'s default */
        if (n_hf < 3 || n_hf > MC_STACK_MAX_LAYERS) {
            mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: 'num_hidden_layers' %lld without layers_block_type: "
                         "must be in [3, %d]", r->where, (long long)n_hf, MC_STACK_MAX_LAYERS);
            return -1;
        }
        hyb[n++] = 0;
        hyb[n++] = 0;
        hyb[n++] = 1;
        for (int64_t i = 0; i < n_hf - 3; i++)
            hyb[n++] = i % per == off;
    }
    cfg->ffn_size = F;
    cfg->ffn_fused = 0; /* ZambaMLP: gate_proj, up_proj, down_proj */
    cfg->ffn_act = MC_FFN_GELU;
    cfg->n_blocks = 1;
    const struct mc_family_config mamba = {.family = MC_FAMILY_MAMBA1, .u.mamba1 = m};
    return place_hybrid_layers(r, cfg, hyb, n, n_hf, &at, &mamba, F);
}

/* Lfm2MoeConfig (transformers 5.24): LFM2's layer_types ("conv" / "full_attention"; no default: Lfm2MoeModel
 * indexes it), conv_L_cache, conv_bias, attention heads (head_dim hidden_size / num_attention_heads), norm_eps
 * everywhere, rope_parameters (theta default 1e6), max_position_embeddings (the KV cache length); the dense SwiGLU
 * MLP of intermediate_size as given (Lfm2MoeMLP: no block_* size rule) on the layers below num_dense_layers, on the
 * others Lfm2MoeSparseMoeBlock alone: num_experts SwiGLU experts of moe_intermediate_size, num_experts_per_tok of
 * them by the sigmoid router (MC_ROUTER_SIGMOID_BIAS) with use_expert_bias, norm_topk_prob and
 * routed_scaling_factor. Refused: a head_dim key other than hidden_size / num_attention_heads, a partial rotary
 * factor other than 1. */
static int parse_lfm2_moe(struct reader *r, struct mc_stack_config *cfg)
{
    struct mc_shortconv_config sc = {.hidden_size = cfg->hidden};
    struct mc_attention_config at = {.hidden_size = cfg->hidden};
    int64_t inter = 7168, n_dense = 2, hd = 0;
    struct mc_stack_moe *e = &cfg->moe;
    if (get_int(r, "conv_L_cache", 0, 3, &sc.conv_kernel) || get_bool(r, "conv_bias", 0, &sc.conv_bias) ||
        get_int(r, "num_attention_heads", 0, 32, &at.num_attention_heads) ||
        get_int(r, "num_key_value_heads", 0, 8, &at.num_key_value_heads) ||
        get_int(r, "max_position_embeddings", 0, 128000, &at.cache_length) ||
        rope_params(r, 1000000.0, 1.0, 1, &at) || get_int(r, "intermediate_size", 0, 7168, &inter) ||
        get_int(r, "num_dense_layers", 0, 2, &n_dense) || get_int(r, "num_experts", 0, 32, &e->n_experts) ||
        get_int(r, "num_experts_per_tok", 0, 4, &e->top_k) || get_int(r, "moe_intermediate_size", 0, 1792, &e->expert_size) ||
        get_bool(r, "use_expert_bias", 1, &e->expert_bias) || get_bool(r, "norm_topk_prob", 1, &e->renormalise) ||
        get_num(r, "routed_scaling_factor", 0, 0, 1.0, &e->routed_scaling) ||
        positive(r, "num_attention_heads", at.num_attention_heads, 1024) ||
        positive(r, "num_key_value_heads", at.num_key_value_heads, 1024) ||
        positive(r, "max_position_embeddings", at.cache_length, 1 << 20))
        return -1;
    if (n_dense < 0 || n_dense > cfg->n_layers) {
        mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: 'num_dense_layers' must be in [0, num_hidden_layers (%lld)] "
                     "(got %lld)", r->where, (long long)cfg->n_layers, (long long)n_dense);
        return -1;
    }
    if (n_dense > 0 && positive(r, "intermediate_size", inter, 1 << 20))
        return -1;
    if (n_dense < cfg->n_layers &&
        (e->n_experts < 1 || e->n_experts > MC_STACK_MAX_EXPERTS || e->top_k < 1 || e->top_k > e->n_experts ||
         e->top_k > MC_STACK_MAX_TOP_K || positive(r, "moe_intermediate_size", e->expert_size, 1 << 20))) {
        if (r->err->code == MC_ERR_NONE)
            mc_error_set(r->err, MC_ERR_INPUT,
                         "%s: config_json: num_experts (%lld) must be in [1, 512] and num_experts_per_tok (%lld) in "
                         "[1, min(num_experts, 64)]",
                         r->where, (long long)e->n_experts, (long long)e->top_k);
        return -1;
    }
    if (!isfinite(e->routed_scaling)) {
        mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: 'routed_scaling_factor' must be finite", r->where);
        return -1;
    }
    if (cfg->hidden % at.num_attention_heads != 0 || at.num_attention_heads % at.num_key_value_heads != 0) {
        mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: num_attention_heads (%lld) must divide hidden_size and be a "
                     "multiple of num_key_value_heads (%lld)", r->where, (long long)at.num_attention_heads,
                     (long long)at.num_key_value_heads);
        return -1;
    }
    at.head_dim = cfg->hidden / at.num_attention_heads; /* Lfm2MoeAttention: getattr(config, "head_dim", D / H) */
    if (get_int(r, "head_dim", 0, at.head_dim, &hd))
        return -1;
    if (hd != at.head_dim) {
        mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: head_dim %lld: only hidden_size / num_attention_heads (%lld) "
                     "is computed", r->where, (long long)hd, (long long)at.head_dim);
        return -1;
    }
    if (at.partial_rotary_factor != 1.0) {
        mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: partial_rotary_factor %g: Lfm2MoeAttention rotates the whole "
                     "head", r->where, at.partial_rotary_factor);
        return -1;
    }
    at.rms_norm_eps = cfg->norm_eps;
    at.qk_norm = MC_QK_NORM_RMS;
    const struct mc_family_config conv = {.family = MC_FAMILY_SHORTCONV, .u.shortconv = sc};
    if (layer_types(r, cfg, "conv", &conv, &at))
        return -1;
    e->router = MC_ROUTER_SIGMOID_BIAS;
    e->act = MC_FFN_SWIGLU;
    cfg->ffn_size = n_dense > 0 ? inter : e->expert_size; /* (a feed-forward on every layer) */
    for (int64_t i = 0; i < cfg->n_layers; i++) {
        cfg->layers[i].dense = i < n_dense; /* Lfm2MoeDecoderLayer: layer_idx < num_dense_layers */
        cfg->layers[i].moe = i >= n_dense;
        cfg->layers[i].dense_size = i < n_dense ? inter : 0;
    }
    return 0;
}

/* ---- OLMo-Hybrid ----------------------------------------------------------------------------------- */

/* OlmoHybridConfig (transformers 5.24): layer_types ("linear_attention" / "full_attention"; absent: full attention
 * at i % 4 == 3, the last layer when that gives none; at least one of each kind); the Gated DeltaNet layers'
 * linear_* keys with the Config's defaults (key and value heads num_attention_heads, key head dim
 * int(0.75 hidden_size / heads), value head dim twice it), linear_allow_neg_eigval (beta = 2 sigmoid(b)), its gated
 * norm's eps 1e-5 (OlmoHybridGatedDeltaNet's o_norm, whatever rms_norm_eps says); attention of head_dim
 * hidden_size / num_attention_heads, q_norm / k_norm over the whole projection with rms_norm_eps, RoPE of the whole
 * head (rope_parameters' rope_theta or the default 10000: the 5.24 config fills a null rope_parameters in, so NoPE is
 * never reached; OlmoHybridRotaryEmbedding reads no partial_rotary_factor), attention_bias; the SwiGLU MLP
 * (intermediate_size, hidden_act silu, also the conv's activation); max_position_embeddings the KV cache length. */
static int parse_olmo_hybrid(struct reader *r, struct mc_stack_config *cfg)
{
    struct mc_gdn_config gd = {.hidden_size = cfg->hidden, .chunk_size = 64, .layout = MC_GDN_LAYOUT_QWEN3_5,
                               .rms_norm_eps = 1e-5};
    struct mc_attention_config at = {.hidden_size = cfg->hidden};
    if (get_int(r, "num_attention_heads", 0, 30, &at.num_attention_heads) ||
        positive(r, "num_attention_heads", at.num_attention_heads, 1024) ||
        get_int(r, "num_key_value_heads", 0, at.num_attention_heads, &at.num_key_value_heads) ||
        get_int(r, "linear_num_key_heads", 0, at.num_attention_heads, &gd.num_key_heads) ||
        get_int(r, "linear_num_value_heads", 0, at.num_attention_heads, &gd.num_value_heads) ||
        positive(r, "linear_num_key_heads", gd.num_key_heads, 1 << 16) ||
        get_int(r, "linear_key_head_dim", 0, (int64_t)(0.75 * (double)cfg->hidden / (double)gd.num_key_heads),
                &gd.key_head_dim) ||
        get_int(r, "linear_value_head_dim", 0, 2 * gd.key_head_dim, &gd.value_head_dim) ||
        get_int(r, "linear_conv_kernel_dim", 0, 4, &gd.conv_kernel) ||
        get_bool(r, "linear_allow_neg_eigval", 1, &gd.allow_neg_eigval) ||
        get_int(r, "max_position_embeddings", 0, 65536, &at.cache_length) ||
        rope_params(r, 10000.0, 1.0, 0, &at) || get_bool(r, "attention_bias", 0, &at.attention_bias) ||
        get_int(r, "intermediate_size", 0, 11008, &cfg->ffn_size) || want_string(r, "hidden_act", "silu") ||
        positive(r, "intermediate_size", cfg->ffn_size, 1 << 20) ||
        positive(r, "max_position_embeddings", at.cache_length, 1 << 20))
        return -1;
    at.partial_rotary_factor = 1.0; /* OlmoHybridRotaryEmbedding rotates the whole head */
    at.head_dim = cfg->hidden / at.num_attention_heads;
    at.rms_norm_eps = cfg->norm_eps;
    at.qk_norm = MC_QK_NORM_RMS_FULL;
    const struct mc_json_value *lt = mc_json_get(r->root, "layer_types");
    const struct mc_family_config linear = {.family = MC_FAMILY_GDN, .u.gdn = gd};
    if (lt == NULL || lt->type == MC_JSON_NULL) { /* OlmoHybridConfig.__post_init__ */
        int any = 0;
        for (int64_t i = 0; i < cfg->n_layers; i++) {
            int attn = i % 4 == 3 || (i == cfg->n_layers - 1 && !any);
            any |= attn;
            place_layer(cfg, i, attn, &linear, &at);
        }
    } else {
        if (layer_types(r, cfg, "linear_attention", &linear, &at))
            return -1;
    }
    int n_attn = 0;
    for (int64_t i = 0; i < cfg->n_layers; i++) {
        cfg->layers[i].post_norm = cfg->layers[i].family == MC_FAMILY_ATTENTION; /* Olmo3DecoderLayer */
        n_attn += cfg->layers[i].post_norm;
    }
    if (n_attn == 0 || n_attn == cfg->n_layers) { /* OlmoHybridConfig.validate_architecture */
        mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: 'layer_types': OLMo-Hybrid needs at least one "
                     "\"linear_attention\" and one \"full_attention\" layer", r->where);
        return -1;
    }
    return 0;
}

/* Kimi-Linear's layer kinds: layer_types ("linear_attention" KDA / "full_attention" MLA), or linear_attn_config's
 * 1-indexed full_attn_layers and kda_layers (a released checkpoint's spelling), or KimiLinearConfig's default (full
 * attention where i > 0 and i % 4 == 0); kda and mla become each layer's mixer. */
static int kimi_layer_types(struct reader *r, struct mc_stack_config *cfg, const struct mc_kda_config *kda,
                            const struct mc_attention_config *mla)
{
    const struct mc_json_value *lt = mc_json_get(r->root, "layer_types");
    const struct mc_json_value *lac = mc_json_get(r->root, "linear_attn_config");
    int full[MC_STACK_MAX_LAYERS] = {0};
    if (lt != NULL && lt->type != MC_JSON_NULL) {
        const struct mc_family_config linear = {.family = MC_FAMILY_KDA, .u.kda = *kda};
        return layer_types(r, cfg, "linear_attention", &linear, mla);
    }
    const struct mc_json_value *fl = lac != NULL && lac->type == MC_JSON_OBJECT ? mc_json_get(lac, "full_attn_layers")
                                                                                : NULL;
    const struct mc_json_value *kl = lac != NULL && lac->type == MC_JSON_OBJECT ? mc_json_get(lac, "kda_layers") : NULL;
    if (fl != NULL && kl != NULL) { /* KimiLinearConfig: both lists, 1-indexed; a layer in neither is refused */
        int seen[MC_STACK_MAX_LAYERS] = {0};
        const struct mc_json_value *lists[2] = {fl, kl};
        for (int li = 0; li < 2; li++) {
            if (lists[li]->type != MC_JSON_ARRAY) {
                mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: 'linear_attn_config.%s' must be a list", r->where,
                             li ? "kda_layers" : "full_attn_layers");
                return -1;
            }
            for (size_t k = 0; k < lists[li]->len; k++) {
                const struct mc_json_value *v = &lists[li]->items[k];
                if (v->type != MC_JSON_NUMBER || v->number != floor(v->number) || v->number < 1 ||
                    v->number > (double)cfg->n_layers) {
                    mc_error_set(r->err, MC_ERR_INPUT,
                                 "%s: config_json: 'linear_attn_config.%s[%zu]' must be a layer number in [1, %lld]",
                                 r->where, li ? "kda_layers" : "full_attn_layers", k, (long long)cfg->n_layers);
                    return -1;
                }
                int64_t i = (int64_t)v->number - 1;
                seen[i] = 1;
                full[i] = li == 0;
            }
        }
        for (int64_t i = 0; i < cfg->n_layers; i++)
            if (!seen[i]) {
                mc_error_set(r->err, MC_ERR_INPUT,
                             "%s: config_json: layer %lld is in neither linear_attn_config.full_attn_layers nor "
                             "kda_layers (upstream leaves its type None)", r->where, (long long)i + 1);
                return -1;
            }
    } else {
        for (int64_t i = 0; i < cfg->n_layers; i++)
            full[i] = i > 0 && i % 4 == 0;
    }
    for (int64_t i = 0; i < cfg->n_layers; i++) {
        cfg->layers[i].family = cfg->layers[i].mixer.family = full[i] ? MC_FAMILY_ATTENTION : MC_FAMILY_KDA;
        if (full[i])
            cfg->layers[i].mixer.u.attention = *mla;
        else
            cfg->layers[i].mixer.u.kda = *kda;
    }
    return 0;
}

/* KimiLinearConfig (transformers 5.24; the keys it writes are its attribute_map's: model_max_length, moe_renormalize,
 * num_expert_group, num_experts, num_experts_per_token, num_shared_experts, read beside the field names
 * max_position_embeddings, norm_topk_prob, n_group, num_local_experts, num_experts_per_tok, n_shared_experts):
 * KDA (linear_num_heads, linear_head_dim, linear_conv_kernel_dim, or linear_attn_config's num_heads, head_dim,
 * short_conv_kernel_size; rms_norm_eps its gated norm's), MLA without positional embedding (num_attention_heads,
 * num_key_value_heads (null: the heads; other than the heads refused), kv_lora_rank, q_lora_rank (null: q_proj),
 * qk_nope_head_dim + qk_rope_head_dim the head dim, v_head_dim, attention_bias, its latent norms at eps 1e-6 whatever
 * rms_norm_eps says, the cache of max_position_embeddings positions), the dense SwiGLU MLP (intermediate_size) by
 * mlp_layer_types or first_k_dense_replace (default 1), the MoE elsewhere (num_local_experts, num_experts_per_tok,
 * moe_intermediate_size, n_group, topk_group, norm_topk_prob, routed_scaling_factor, n_shared_experts shared experts
 * of moe_intermediate_size each as one SwiGLU MLP). Refused: hidden_act other than silu. */
static int parse_kimi_linear(struct reader *r, struct mc_stack_config *cfg)
{
    static const char *const k_ctx[] = {"model_max_length", "max_position_embeddings"},
                             *const k_renorm[] = {"moe_renormalize", "norm_topk_prob"},
                             *const k_group[] = {"num_expert_group", "n_group"},
                             *const k_experts[] = {"num_experts", "num_local_experts"},
                             *const k_topk[] = {"num_experts_per_token", "num_experts_per_tok"},
                             *const k_shared[] = {"num_shared_experts", "n_shared_experts"};
    struct mc_kda_config kd = {.hidden_size = cfg->hidden, .chunk_size = 64, .rms_norm_eps = cfg->norm_eps};
    struct mc_attention_config at = {.hidden_size = cfg->hidden, .partial_rotary_factor = 1.0, .rope_theta = 10000.0,
                                     .rms_norm_eps = 1e-6, .qk_norm = MC_QK_NORM_NONE, .no_rope = 1};
    struct mc_stack_moe *e = &cfg->moe;
    int64_t inter = 9216, nope = 128, n_shared = 1, first_dense = 1;
    if (get_int(r, "linear_num_heads", 0, 32, &kd.num_heads) || get_int(r, "linear_head_dim", 0, 128, &kd.head_dim) ||
        get_int(r, "linear_conv_kernel_dim", 0, 4, &kd.conv_kernel) ||
        get_int(r, "num_attention_heads", 0, 32, &at.num_attention_heads) ||
        get_int(r, "num_key_value_heads", 0, at.num_attention_heads, &at.num_key_value_heads) ||
        get_int(r, "kv_lora_rank", 0, 512, &at.kv_lora_rank) || get_int(r, "q_lora_rank", 0, 0, &at.q_lora_rank) ||
        get_int(r, "qk_rope_head_dim", 0, 64, &at.qk_rope_head_dim) ||
        get_int(r, "qk_nope_head_dim", 0, 128, &nope) || get_int(r, "v_head_dim", 0, 128, &at.v_head_dim) ||
        get_bool(r, "attention_bias", 0, &at.attention_bias) ||
        get_int(r, alias(r, k_ctx, 2), 0, 1048576, &at.cache_length) ||
        get_int(r, "intermediate_size", 0, 9216, &inter) ||
        get_int(r, "moe_intermediate_size", 0, 1024, &e->expert_size) ||
        get_int(r, alias(r, k_experts, 2), 0, 256, &e->n_experts) || get_int(r, alias(r, k_topk, 2), 0, 8, &e->top_k) ||
        get_int(r, alias(r, k_group, 2), 0, 1, &e->n_group) || get_int(r, "topk_group", 0, 1, &e->topk_group) ||
        get_bool(r, alias(r, k_renorm, 2), 1, &e->renormalise) ||
        get_num(r, "routed_scaling_factor", 0, 0, 2.446, &e->routed_scaling) ||
        get_int(r, alias(r, k_shared, 2), 0, 1, &n_shared) || get_int(r, "first_k_dense_replace", 0, 1, &first_dense) ||
        want_string(r, "hidden_act", "silu") || positive(r, "intermediate_size", inter, 1 << 20) ||
        positive(r, "qk_nope_head_dim", nope, 1 << 16) || positive(r, "max_position_embeddings", at.cache_length, 1 << 20))
        return -1;
    const struct mc_json_value *lac = mc_json_get(r->root, "linear_attn_config");
    if (lac != NULL && lac->type == MC_JSON_OBJECT) { /* a released checkpoint's linear attention keys win */
        static const char *const sub[3] = {"num_heads", "head_dim", "short_conv_kernel_size"};
        int64_t *dst[3] = {&kd.num_heads, &kd.head_dim, &kd.conv_kernel};
        for (int k = 0; k < 3; k++) {
            const struct mc_json_value *v = mc_json_get(lac, sub[k]);
            if (v == NULL || v->type == MC_JSON_NULL)
                continue;
            if (v->type != MC_JSON_NUMBER || v->number != floor(v->number)) {
                mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: 'linear_attn_config.%s' must be an integer",
                             r->where, sub[k]);
                return -1;
            }
            *dst[k] = (int64_t)v->number;
        }
    } else if (lac != NULL && lac->type != MC_JSON_NULL) {
        mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: 'linear_attn_config' must be an object", r->where);
        return -1;
    }
    if (at.num_key_value_heads != at.num_attention_heads) {
        mc_error_set(r->err, MC_ERR_INPUT,
                     "%s: config_json: 'num_key_value_heads' (%lld) must equal num_attention_heads (%lld): "
                     "KimiLinearAttention expands the latent into every head and would repeat_kv them again",
                     r->where, (long long)at.num_key_value_heads, (long long)at.num_attention_heads);
        return -1;
    }
    at.head_dim = nope + at.qk_rope_head_dim; /* qk_head_dim; the scale qk_head_dim^-1/2 is the family's default */
    if (kimi_layer_types(r, cfg, &kd, &at))
        return -1;
    const struct mc_json_value *mt = mc_json_get(r->root, "mlp_layer_types");
    if (mt != NULL && mt->type != MC_JSON_NULL && (mt->type != MC_JSON_ARRAY || (int64_t)mt->len != cfg->n_layers)) {
        mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: 'mlp_layer_types' must list num_hidden_layers (%lld) "
                     "layers", r->where, (long long)cfg->n_layers);
        return -1;
    }
    int any_moe = 0;
    for (int64_t i = 0; i < cfg->n_layers; i++) {
        int sparse = i >= first_dense; /* KimiLinearConfig: first_k_dense_replace dense layers, then sparse */
        if (mt != NULL && mt->type == MC_JSON_ARRAY) {
            if ((sparse = one_of_two(r, mt, "mlp_layer_types", i, "dense", "sparse")) < 0)
                return -1;
        }
        cfg->layers[i].moe = sparse;
        cfg->layers[i].dense = 1; /* the dense MLP, or the MoE's shared experts */
        any_moe |= sparse;
    }
    if (any_moe && (e->n_experts < 1 || e->n_experts > MC_STACK_MAX_EXPERTS || e->n_group < 1 ||
                    e->n_experts % e->n_group != 0 || e->n_experts / e->n_group < 2 || e->topk_group < 1 ||
                    e->topk_group > e->n_group || e->top_k < 1 || e->top_k > MC_STACK_MAX_TOP_K ||
                    e->top_k > e->topk_group * (e->n_experts / e->n_group) ||
                    positive(r, "moe_intermediate_size", e->expert_size, 1 << 20) ||
                    positive(r, "n_shared_experts", n_shared, 1 << 10) || !isfinite(e->routed_scaling))) {
        if (r->err->code == MC_ERR_NONE)
            mc_error_set(r->err, MC_ERR_INPUT,
                         "%s: config_json: num_local_experts (%lld) must be in [1, 512] and a multiple of n_group (%lld) "
                         "with at least 2 experts per group, topk_group (%lld) in [1, n_group], num_experts_per_tok "
                         "(%lld) in [1, min(64, the experts of topk_group groups)], routed_scaling_factor finite",
                         r->where, (long long)e->n_experts, (long long)e->n_group, (long long)e->topk_group,
                         (long long)e->top_k);
        return -1;
    }
    e->router = MC_ROUTER_SIGMOID_GROUPED;
    e->act = MC_FFN_SWIGLU;
    e->sum_in_dtype = 1;
    cfg->ffn_size = inter;
    for (int64_t i = 0; i < cfg->n_layers; i++) {
        cfg->layers[i].dense_size = cfg->layers[i].moe ? e->expert_size * n_shared : inter;
        if (cfg->layers[i].dense_size > cfg->ffn_size)
            cfg->ffn_size = cfg->layers[i].dense_size;
    }
    return 0;
}

/* ---- MiniMax --------------------------------------------------------------------------------------- */

/* MiniMaxConfig (transformers 5.24): layer_types ("linear_attention" / "full_attention"; absent or null: full
 * attention at even i, MiniMaxConfig.__post_init__); the lightning layers (MiniMaxLightningAttention: heads
 * num_attention_heads of head_dim, or hidden_size / num_attention_heads, block_size, the slopes of layer_idx i among
 * num_hidden_layers, its output norm's eps 1e-6: MiniMaxRMSNorm's default, not rms_norm_eps); the softmax attention
 * (num_key_value_heads, head_dim, RoPE of the whole head with rope_parameters' theta, default 1e6; no q/k norm, no
 * biases; max_position_embeddings the KV cache length); the MoE (num_local_experts / its alias num_experts,
 * num_experts_per_tok, intermediate_size the experts' size: MiniMaxTopKRouter's softmax, top-k, renormalised); the
 * residual scalings linear_attn_alpha_factor, linear_attn_beta_factor, full_attn_alpha_factor, full_attn_beta_factor,
 * mlp_alpha_factor, mlp_beta_factor (default 1); rms_norm_eps on every block norm and the final norm. Refused:
 * hidden_act other than silu (the experts' and the lightning qkv activation), a sliding_window (a windowed mask the
 * engine does not compute), an attn_type_list without layer_types (MiniMax-Text-01's original key, which
 * MiniMaxConfig 5.24 does not read: its layers would fall back to the alternating default). Inert: initializer_range,
 * use_cache, the token ids, attention_dropout and router_jitter_noise (training only), output_router_logits,
 * router_aux_loss_coef (the auxiliary loss). */
static int parse_minimax(struct reader *r, struct mc_stack_config *cfg)
{
    struct mc_attention_config at = {.hidden_size = cfg->hidden};
    struct mc_lightning_config li = {.hidden_size = cfg->hidden, .num_hidden_layers = cfg->n_layers, .norm_eps = 1e-6};
    struct mc_stack_moe *e = &cfg->moe;
    double fa[6];
    static const char *const factor_keys[6] = {"linear_attn_alpha_factor", "linear_attn_beta_factor",
                                               "full_attn_alpha_factor",   "full_attn_beta_factor",
                                               "mlp_alpha_factor",         "mlp_beta_factor"};
    static const char *const experts_keys[] = {"num_experts", "num_local_experts"}; /* attribute_map */
    if (get_int(r, "num_attention_heads", 0, 32, &at.num_attention_heads) ||
        positive(r, "num_attention_heads", at.num_attention_heads, 1024) ||
        get_int(r, "num_key_value_heads", 0, 8, &at.num_key_value_heads) ||
        positive(r, "num_key_value_heads", at.num_key_value_heads, 1024) ||
        get_int(r, "head_dim", 0, cfg->hidden / at.num_attention_heads, &at.head_dim) ||
        positive(r, "head_dim", at.head_dim, 1 << 12) ||
        get_int(r, "max_position_embeddings", 0, 4096 * 32, &at.cache_length) ||
        positive(r, "max_position_embeddings", at.cache_length, 1 << 20) || rope_params(r, 1000000.0, 1.0, 0, &at) ||
        get_int(r, "block_size", 0, 256, &li.block_size) || positive(r, "block_size", li.block_size, 1 << 20) ||
        get_int(r, "intermediate_size", 0, 14336, &e->expert_size) ||
        positive(r, "intermediate_size", e->expert_size, 1 << 20) ||
        get_int(r, alias(r, experts_keys, 2), 0, 8, &e->n_experts) ||
        get_int(r, "num_experts_per_tok", 0, 2, &e->top_k) || want_string(r, "hidden_act", "silu"))
        return -1;
    for (int k = 0; k < 6; k++) {
        if (get_num(r, factor_keys[k], 0, 0, 1.0, &fa[k]))
            return -1;
        if (!isfinite(fa[k])) {
            mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: '%s' must be finite", r->where, factor_keys[k]);
            return -1;
        }
    }
    if (e->n_experts < 1 || e->n_experts > MC_STACK_MAX_EXPERTS || e->top_k < 1 || e->top_k > e->n_experts ||
        e->top_k > MC_STACK_MAX_TOP_K) {
        mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: num_local_experts (%lld) must be in [1, 512] and "
                     "num_experts_per_tok (%lld) in [1, min(num_local_experts, 64)]", r->where,
                     (long long)e->n_experts, (long long)e->top_k);
        return -1;
    }
    if (at.num_attention_heads % at.num_key_value_heads != 0) {
        mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: num_attention_heads (%lld) must be a multiple of "
                     "num_key_value_heads (%lld)", r->where, (long long)at.num_attention_heads,
                     (long long)at.num_key_value_heads);
        return -1;
    }
    if (at.partial_rotary_factor != 1.0) {
        mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: partial_rotary_factor %g: MiniMaxRotaryEmbedding rotates the "
                     "whole head", r->where, at.partial_rotary_factor);
        return -1;
    }
    const struct mc_json_value *sw = mc_json_get(r->root, "sliding_window");
    if (sw != NULL && sw->type != MC_JSON_NULL) {
        mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: 'sliding_window': only full causal attention is computed "
                     "(sliding_window null)", r->where);
        return -1;
    }
    at.rms_norm_eps = cfg->norm_eps;
    at.qk_norm = MC_QK_NORM_NONE;
    li.num_attention_heads = at.num_attention_heads;
    li.head_dim = at.head_dim;
    const struct mc_json_value *lt = mc_json_get(r->root, "layer_types");
    const struct mc_family_config linear = {.family = MC_FAMILY_LIGHTNING, .u.lightning = li};
    if (lt == NULL || lt->type == MC_JSON_NULL) {
        const struct mc_json_value *atl = mc_json_get(r->root, "attn_type_list");
        if (atl != NULL && atl->type != MC_JSON_NULL) {
            mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: 'attn_type_list' without 'layer_types': MiniMaxConfig "
                         "5.24 does not read it (its layers fall back to full attention at even i); give layer_types",
                         r->where);
            return -1;
        }
        for (int64_t i = 0; i < cfg->n_layers; i++) { /* MiniMaxConfig.__post_init__ */
            int attn = (i + 1) % 2 != 0;
            place_layer(cfg, i, attn, &linear, &at);
        }
    } else {
        if (layer_types(r, cfg, "linear_attention", &linear, &at))
            return -1;
    }
    e->router = MC_ROUTER_SOFTMAX_TOPK;
    e->renormalise = 1; /* router_top_value /= router_top_value.sum() */
    e->weights_fp32 = 1;
    e->act = MC_FFN_SWIGLU;
    cfg->ffn_size = e->expert_size; /* (a feed-forward on every layer: the MoE alone) */
    cfg->mlp_alpha = fa[4];
    cfg->mlp_beta = fa[5];
    for (int64_t i = 0; i < cfg->n_layers; i++) {
        struct mc_stack_layer *Z = &cfg->layers[i];
        int lin = Z->family == MC_FAMILY_LIGHTNING;
        if (lin)
            Z->mixer.u.lightning.layer_idx = i;
        Z->scaled = 1;
        Z->alpha = fa[lin ? 0 : 2];
        Z->beta = fa[lin ? 1 : 3];
        Z->moe = 1;
        Z->dense = 0;
        Z->dense_size = 0;
    }
    return 0;
}

/* ---- Inkling --------------------------------------------------------------------------------------- */

/* One InklingTextConfig key under its field name or its attribute_map alias (which wins when given, as the
 * checkpoints' keys do); both given and different: refused. */
static int inkling_int(struct reader *r, const char *field, const char *alias_name, int64_t dflt, int64_t *out)
{
    const struct mc_json_value *a = mc_json_get(r->root, alias_name), *f = mc_json_get(r->root, field);
    if (a != NULL && a->type != MC_JSON_NULL && f != NULL && f->type != MC_JSON_NULL &&
        (a->type != f->type || (a->type == MC_JSON_NUMBER && a->number != f->number))) {
        mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: '%s' and '%s' disagree ('%s' is InklingTextConfig's alias "
                     "of '%s')", r->where, alias_name, field, alias_name, field);
        return -1;
    }
    return get_int(r, a != NULL && a->type != MC_JSON_NULL ? alias_name : field, 0, dflt, out);
}

/* A key that must be absent, null or the value 5.24 computes (a boolean want, or null when want < 0). */
static int inkling_refuse(struct reader *r, const char *key, int want, const char *why)
{
    const struct mc_json_value *v = mc_json_get(r->root, key);
    if (v == NULL || v->type == MC_JSON_NULL || (want == 1 && v->type == MC_JSON_TRUE) ||
        (want == 0 && v->type == MC_JSON_FALSE))
        return 0;
    mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: '%s': %s", r->where, key, why);
    return -1;
}

/* InklingTextConfig (transformers 5.24, InklingForCausalLM): every layer InklingAttention of layer_types[i]
 * ("hybrid": num_attention_heads, num_key_value_heads, head_dim, the relative logits over rel_extent;
 * "hybrid_sliding": swa_num_attention_heads, swa_num_key_value_heads, swa_head_dim, a window of sliding_window_size
 * (alias sliding_window) that is also its relative extent; absent: local_layer_ids sliding, or every i with
 * (i + 1) % 6 != 0), no rotary embedding, per-head q/k RMSNorms at rms_norm_eps, the scale 1 / head_dim, d_rel
 * relative states per head, short convs of conv_kernel_size (alias sconv_kernel_size) on k / v and after the
 * attention (attn_sconv) and the feed-forward (mlp_sconv); the KV cache of max_position_embeddings (alias
 * model_max_length) positions; mlp_layer_types ("dense" / "sparse"; absent: dense below dense_mlp_idx, default 0):
 * the dense SwiGLU MLP of intermediate_size (dense_intermediate_size when given, intermediate_size then the experts'
 * size) times its global_scale, or the MoE of n_routed_experts (alias num_local_experts) experts of
 * moe_intermediate_size, num_experts_per_tok of them, n_shared_experts shared experts as the sink, route_scale; the
 * normed embedding; the head on norm(h) / logits_mup_width_multiplier (alias embedding_multiplier), never tied.
 * Refused: log_scaling_n_floor set (upstream's scaling counts the left padding's slots as positions),
 * shared_expert_sink false (5.24 never reads it: the sink is always on), unpadded_vocab_size below vocab_size (the
 * head's columns beyond it dropped: not computed), hidden_act other than silu. Inert: log_scaling_alpha (without the
 * floor), rms_norm_eps_moe_gate (5.24 never reads it), tie_word_embeddings (_tied_weights_keys is empty), the
 * multi-token-prediction keys (num_mtp_layers, chain_hidden_post_norm, mtp_hidden_states_first,
 * mtp_local_layer_ids: their layers are not in InklingForCausalLM), initializer_range, attention_dropout, use_cache,
 * the token ids. */
static int parse_inkling(struct reader *r, struct mc_stack_config *cfg)
{
    struct mc_attention_config full = {.hidden_size = cfg->hidden, .no_rope = 1, .qk_norm = MC_QK_NORM_RMS,
                                       .partial_rotary_factor = 1.0, .rope_theta = 10000.0};
    struct mc_attention_config swa = full;
    struct mc_stack_moe *e = &cfg->moe;
    int64_t W = 512, d_rel = 16, extent = 1024, K = 4, ctx = 131072, inter = 24576, dense_idx = 0, dense_inter = -1,
            unpadded = -1;
    double mup = 24.0;
    if (get_int(r, "num_attention_heads", 0, 64, &full.num_attention_heads) ||
        positive(r, "num_attention_heads", full.num_attention_heads, 1024) ||
        get_int(r, "num_key_value_heads", 0, 8, &full.num_key_value_heads) ||
        positive(r, "num_key_value_heads", full.num_key_value_heads, 1024) ||
        get_int(r, "head_dim", 0, 128, &full.head_dim) || positive(r, "head_dim", full.head_dim, 1 << 12) ||
        get_int(r, "swa_num_attention_heads", 0, 64, &swa.num_attention_heads) ||
        positive(r, "swa_num_attention_heads", swa.num_attention_heads, 1024) ||
        get_int(r, "swa_num_key_value_heads", 0, 16, &swa.num_key_value_heads) ||
        positive(r, "swa_num_key_value_heads", swa.num_key_value_heads, 1024) ||
        get_int(r, "swa_head_dim", 0, 128, &swa.head_dim) || positive(r, "swa_head_dim", swa.head_dim, 1 << 12) ||
        inkling_int(r, "sliding_window_size", "sliding_window", 512, &W) || positive(r, "sliding_window_size", W, 1 << 24) ||
        get_int(r, "d_rel", 0, 16, &d_rel) || positive(r, "d_rel", d_rel, 1 << 12) ||
        get_int(r, "rel_extent", 0, 1024, &extent) || positive(r, "rel_extent", extent, 1 << 24) ||
        inkling_int(r, "conv_kernel_size", "sconv_kernel_size", 4, &K) || positive(r, "conv_kernel_size", K, 64) ||
        inkling_int(r, "max_position_embeddings", "model_max_length", 131072, &ctx) ||
        positive(r, "max_position_embeddings", ctx, 1 << 20) ||
        get_int(r, "intermediate_size", 0, 24576, &inter) || positive(r, "intermediate_size", inter, 1 << 20) ||
        get_int(r, "dense_intermediate_size", 0, -1, &dense_inter) || get_int(r, "dense_mlp_idx", 0, 0, &dense_idx) ||
        get_int(r, "moe_intermediate_size", 0, 3072, &e->expert_size) ||
        inkling_int(r, "n_routed_experts", "num_local_experts", 256, &e->n_experts) ||
        get_int(r, "num_experts_per_tok", 0, 6, &e->top_k) || get_int(r, "n_shared_experts", 0, 2, &e->n_shared) ||
        get_num(r, "route_scale", 0, 0, 8.0, &e->routed_scaling) ||
        get_int(r, "unpadded_vocab_size", 0, -1, &unpadded) || want_string(r, "hidden_act", "silu") ||
        inkling_refuse(r, "log_scaling_n_floor", -1,
                       "the logarithmic query scaling is not computed (upstream scales by the position counted over "
                       "the left padding's slots; mixcheck's position counts real tokens)") ||
        inkling_refuse(r, "shared_expert_sink", 1,
                       "false: InklingForCausalLM 5.24 never reads it (its shared experts are always scored in the "
                       "router's softmax)"))
        return -1;
    const struct mc_json_value *mv = mc_json_get(r->root, "embedding_multiplier"),
                               *fv = mc_json_get(r->root, "logits_mup_width_multiplier");
    if (get_num(r, mv != NULL && mv->type != MC_JSON_NULL ? "embedding_multiplier" : "logits_mup_width_multiplier", 0,
                0, 24.0, &mup))
        return -1;
    if (mv != NULL && mv->type == MC_JSON_NUMBER && fv != NULL && fv->type == MC_JSON_NUMBER && mv->number != fv->number) {
        mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: 'embedding_multiplier' and 'logits_mup_width_multiplier' "
                     "disagree ('embedding_multiplier' is InklingTextConfig's alias of the other)", r->where);
        return -1;
    }
    if (!(mup > 0.0) || !isfinite(mup) || !isfinite(e->routed_scaling)) {
        mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: 'logits_mup_width_multiplier' must be finite and > 0 and "
                     "'route_scale' finite", r->where);
        return -1;
    }
    if (unpadded >= 0 && unpadded < cfg->vocab) {
        mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: 'unpadded_vocab_size' %lld below vocab_size %lld: the head's "
                     "columns beyond it dropped is not computed", r->where, (long long)unpadded, (long long)cfg->vocab);
        return -1;
    }
    if (full.num_attention_heads % full.num_key_value_heads || swa.num_attention_heads % swa.num_key_value_heads) {
        mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: num_attention_heads / swa_num_attention_heads must be "
                     "multiples of num_key_value_heads / swa_num_key_value_heads", r->where);
        return -1;
    }
    if (dense_inter >= 0) { /* InklingTextConfig.__post_init__ (#49416): intermediate_size was the experts' width */
        e->expert_size = inter;
        inter = dense_inter;
        if (positive(r, "dense_intermediate_size", inter, 1 << 20))
            return -1;
    }
    full.rms_norm_eps = swa.rms_norm_eps = cfg->norm_eps;
    full.cache_length = swa.cache_length = ctx;
    full.sconv_kernel = swa.sconv_kernel = K;
    full.rel_dim = swa.rel_dim = d_rel;
    full.rel_extent = extent;
    swa.rel_extent = swa.sliding_window = W; /* InklingAttention: rel_extent = sliding_window_size when sliding */
    full.softmax_scale = 1.0 / (double)full.head_dim; /* q/k are RMS-normalised per head: 1/d, not 1/sqrt(d) */
    swa.softmax_scale = 1.0 / (double)swa.head_dim;
    const struct mc_json_value *lt = mc_json_get(r->root, "layer_types"), *loc = mc_json_get(r->root, "local_layer_ids");
    const struct mc_json_value *mt = mc_json_get(r->root, "mlp_layer_types");
    if ((lt != NULL && lt->type != MC_JSON_NULL && (lt->type != MC_JSON_ARRAY || (int64_t)lt->len != cfg->n_layers)) ||
        (mt != NULL && mt->type != MC_JSON_NULL && (mt->type != MC_JSON_ARRAY || (int64_t)mt->len != cfg->n_layers)) ||
        (loc != NULL && loc->type != MC_JSON_NULL && loc->type != MC_JSON_ARRAY)) {
        mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: 'layer_types' and 'mlp_layer_types' must list "
                     "num_hidden_layers (%lld) layers, 'local_layer_ids' be a list", r->where, (long long)cfg->n_layers);
        return -1;
    }
    int any_moe = 0;
    for (int64_t i = 0; i < cfg->n_layers; i++) {
        int sliding = (i + 1) % 6 != 0;
        if (lt != NULL && lt->type == MC_JSON_ARRAY) {
            if ((sliding = one_of_two(r, lt, "layer_types", i, "hybrid", "hybrid_sliding")) < 0)
                return -1;
        } else if (loc != NULL && loc->type == MC_JSON_ARRAY) {
            sliding = 0;
            for (size_t k = 0; k < loc->len; k++)
                sliding |= loc->items[k].type == MC_JSON_NUMBER && loc->items[k].number == (double)i;
        }
        int sparse = i >= dense_idx;
        if (mt != NULL && mt->type == MC_JSON_ARRAY) {
            if ((sparse = one_of_two(r, mt, "mlp_layer_types", i, "dense", "sparse")) < 0)
                return -1;
        }
        struct mc_stack_layer *Z = &cfg->layers[i];
        Z->family = Z->mixer.family = MC_FAMILY_ATTENTION;
        Z->mixer.u.attention = sliding ? swa : full;
        Z->moe = sparse;
        Z->dense = !sparse;
        Z->dense_size = sparse ? 0 : inter;
        any_moe |= sparse;
    }
    if (any_moe && (e->n_experts < 1 || e->n_experts > MC_STACK_MAX_EXPERTS || e->top_k < 1 || e->top_k > e->n_experts ||
                    e->top_k > MC_STACK_MAX_TOP_K || e->n_shared < 0 || e->n_shared + e->top_k > MC_STACK_MAX_TOP_K ||
                    e->n_shared + e->n_experts > MC_STACK_MAX_EXPERTS ||
                    positive(r, "moe_intermediate_size", e->expert_size, 1 << 20))) {
        if (r->err->code == MC_ERR_NONE)
            mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: n_routed_experts (%lld) must be in [1, 512], "
                         "num_experts_per_tok (%lld) in [1, n_routed_experts], n_shared_experts (%lld) >= 0 with the "
                         "chosen and shared at most 64 and all experts at most 512", r->where, (long long)e->n_experts,
                         (long long)e->top_k, (long long)e->n_shared);
        return -1;
    }
    e->router = MC_ROUTER_SIGMOID_SINK;
    e->act = MC_FFN_SWIGLU;
    cfg->ffn_size = inter;
    cfg->tied = 0; /* InklingForCausalLM._tied_weights_keys is empty: tie_word_embeddings ties nothing */
    cfg->embed_norm = 1;
    cfg->head_divisor = mup;
    cfg->ffn_sconv = K;
    cfg->ffn_global_scale = 1;
    return 0;
}

enum mc_err_code mc_stack_config_parse(const char *model_type, const char *config_json, const char *where,
                                       struct mc_stack_config *cfg, struct mc_error *err)
{
    memset(cfg, 0, sizeof *cfg);
    if (mc_model_type_from_name(model_type, &cfg->type) != 0)
        return mc_error_set(err, MC_ERR_INPUT,
                            "%s: model_type: unknown model type '%.100s' (known: mamba2, mamba, lfm2, bamba, qwen3_5_text, "
                            "granitemoehybrid, falcon_mamba, jamba, nemotron_h, zamba2, qwen3_next, qwen3_5_moe_text, falcon_h1, zamba, "
                            "lfm2_moe, olmo_hybrid, kimi_linear, minimax, inkling_text)",
                            where, model_type);
    cfg->model_type = mc_model_type_name(cfg->type);
    cfg->embedding_multiplier = cfg->residual_multiplier = cfg->logits_scaling = 1.0;
    cfg->head_divisor = 1.0;
    cfg->lm_head_multiplier = cfg->mlp_gate_multiplier = cfg->mlp_down_multiplier = cfg->key_multiplier = 1.0;
    for (int i = 0; i < 5; i++)
        cfg->ssm_multipliers[i] = 1.0;
    struct mc_json_value *root = NULL;
    struct mc_json_error je = {0};
    if (mc_json_parse(config_json, strlen(config_json), NULL, &root, &je) != 0)
        return mc_error_set(err, MC_ERR_INPUT, "%s: config_json:%d:%d: %s", where, je.line, je.column, je.msg);
    struct reader r = {root, where, err};
    int rc = -1;
    if (root->type != MC_JSON_OBJECT) {
        mc_error_set(err, MC_ERR_INPUT, "%s: config_json: must be an object (got %s)", where,
                     mc_json_type_name(root->type));
        goto out;
    }
    const struct mc_json_value *mt = mc_json_get(root, "model_type");
    if (mt != NULL && (mt->type != MC_JSON_STRING || strcmp(mt->string, model_type) != 0)) {
        mc_error_set(err, MC_ERR_INPUT, "%s: config_json: 'model_type' is not '%s'", where, model_type);
        goto out;
    }
    /* Nemotron-H: num_hidden_layers is the length of layers_block_type (NemotronHConfig ignores the key) */
    int nh = cfg->type == MC_MODEL_NEMOTRON_H;
    int zb = cfg->type == MC_MODEL_ZAMBA2 || cfg->type == MC_MODEL_ZAMBA; /* entries counted by parse_zamba2 / _zamba */
    if (get_int(&r, "num_hidden_layers", !nh && !zb, 1, &cfg->n_layers) ||
        get_int(&r, "hidden_size", 1, 0, &cfg->hidden) ||
        get_int(&r, "vocab_size", 1, 0, &cfg->vocab) ||
        get_num(&r,
                cfg->type == MC_MODEL_LFM2 || cfg->type == MC_MODEL_LFM2_MOE      ? "norm_eps"
                : cfg->type == MC_MODEL_BAMBA || cfg->type == MC_MODEL_QWEN3_5 ||
                        cfg->type == MC_MODEL_GRANITEMOEHYBRID || cfg->type == MC_MODEL_JAMBA || zb ||
                        cfg->type == MC_MODEL_QWEN3_NEXT || cfg->type == MC_MODEL_QWEN3_5_MOE ||
                        cfg->type == MC_MODEL_FALCON_H1 || cfg->type == MC_MODEL_OLMO_HYBRID ||
                        cfg->type == MC_MODEL_KIMI_LINEAR || cfg->type == MC_MODEL_MINIMAX ||
                        cfg->type == MC_MODEL_INKLING
                    ? "rms_norm_eps"
                    : "layer_norm_epsilon",
                0, 0,
                cfg->type == MC_MODEL_QWEN3_5 || cfg->type == MC_MODEL_GRANITEMOEHYBRID || cfg->type == MC_MODEL_JAMBA ||
                        cfg->type == MC_MODEL_QWEN3_NEXT || cfg->type == MC_MODEL_QWEN3_5_MOE ||
                        cfg->type == MC_MODEL_OLMO_HYBRID || cfg->type == MC_MODEL_INKLING
                    ? 1e-6
                    : 1e-5,
                &cfg->norm_eps) ||
        get_bool(&r, "tie_word_embeddings",
                 cfg->type == MC_MODEL_MAMBA || cfg->type == MC_MODEL_LFM2 || cfg->type == MC_MODEL_FALCON_MAMBA || zb ||
                     cfg->type == MC_MODEL_LFM2_MOE,
                 &cfg->tied) ||
        get_bool(&r, "residual_in_fp32",
                 cfg->type == MC_MODEL_MAMBA2 || cfg->type == MC_MODEL_MAMBA || cfg->type == MC_MODEL_FALCON_MAMBA,
                 &cfg->residual_in_fp32) ||
        positive(&r, "num_hidden_layers", nh || zb ? 1 : cfg->n_layers, MC_STACK_MAX_LAYERS) ||
        positive(&r, "hidden_size", cfg->hidden, 1 << 16) || positive(&r, "vocab_size", cfg->vocab, 1 << 20))
        goto out;
    if (!(cfg->norm_eps > 0.0)) {
        mc_error_set(err, MC_ERR_INPUT, "%s: config_json: 'layer_norm_epsilon' must be > 0", where);
        goto out;
    }
    if (cfg->type == MC_MODEL_LFM2 || cfg->type == MC_MODEL_BAMBA || cfg->type == MC_MODEL_QWEN3_5 ||
        cfg->type == MC_MODEL_GRANITEMOEHYBRID || cfg->type == MC_MODEL_JAMBA || cfg->type == MC_MODEL_NEMOTRON_H ||
        cfg->type == MC_MODEL_QWEN3_NEXT || cfg->type == MC_MODEL_QWEN3_5_MOE || cfg->type == MC_MODEL_FALCON_H1 ||
        cfg->type == MC_MODEL_LFM2_MOE || cfg->type == MC_MODEL_OLMO_HYBRID || cfg->type == MC_MODEL_KIMI_LINEAR ||
        cfg->type == MC_MODEL_MINIMAX || cfg->type == MC_MODEL_INKLING)
        cfg->residual_in_fp32 = 0; /* Lfm2DecoderLayer, BambaDecoderLayer, Qwen3_5DecoderLayer,
                                      GraniteMoeHybridDecoderLayer add in the model dtype; NemotronHBlock too,
                                      whatever its residual_in_fp32 says (it reads no such key) */
    cfg->zero_centred = cfg->type == MC_MODEL_QWEN3_5 || cfg->type == MC_MODEL_QWEN3_NEXT ||
                        cfg->type == MC_MODEL_QWEN3_5_MOE;
    cfg->norm_weight_fp32 |= cfg->type == MC_MODEL_OLMO_HYBRID; /* OlmoHybridRMSNorm: (w * x_normed).to(T) */
    int qn = cfg->type == MC_MODEL_QWEN3_NEXT || cfg->type == MC_MODEL_QWEN3_5_MOE || cfg->type == MC_MODEL_LFM2_MOE ||
             cfg->type == MC_MODEL_KIMI_LINEAR || cfg->type == MC_MODEL_MINIMAX ||
             cfg->type == MC_MODEL_INKLING; /* its layers' feed-forwards are set by its
                                                                                    parser */
    if ((cfg->type == MC_MODEL_MAMBA2  ? parse_mamba2(&r, cfg)
         : cfg->type == MC_MODEL_MAMBA || cfg->type == MC_MODEL_FALCON_MAMBA ? parse_mamba(&r, cfg)
         : cfg->type == MC_MODEL_LFM2  ? parse_lfm2(&r, cfg)
         : cfg->type == MC_MODEL_BAMBA ? parse_bamba(&r, cfg)
         : cfg->type == MC_MODEL_QWEN3_5 ? parse_qwen3_5(&r, cfg)
         : cfg->type == MC_MODEL_JAMBA   ? parse_jamba(&r, cfg)
         : nh                            ? parse_nemotron_h(&r, cfg)
         : zb && cfg->type == MC_MODEL_ZAMBA ? parse_zamba(&r, cfg)
         : zb                            ? parse_zamba2(&r, cfg)
         : cfg->type == MC_MODEL_LFM2_MOE  ? parse_lfm2_moe(&r, cfg)
         : cfg->type == MC_MODEL_KIMI_LINEAR ? parse_kimi_linear(&r, cfg)
         : cfg->type == MC_MODEL_MINIMAX   ? parse_minimax(&r, cfg)
         : cfg->type == MC_MODEL_INKLING   ? parse_inkling(&r, cfg)
         : qn                            ? parse_qwen3_next(&r, cfg)
         : cfg->type == MC_MODEL_FALCON_H1 ? parse_falcon_h1(&r, cfg)
         : cfg->type == MC_MODEL_OLMO_HYBRID ? parse_olmo_hybrid(&r, cfg)
                                         : parse_granitemoehybrid(&r, cfg)) != 0)
        goto out;
    for (int64_t i = 0; cfg->type != MC_MODEL_JAMBA && cfg->type != MC_MODEL_FALCON_H1 && !nh && !zb && !qn &&
                        i < cfg->n_layers; i++)
        cfg->layers[i].dense = cfg->ffn_size > 0; /* every layer has its MLP (GraniteMoeHybrid: the shared one) */
    for (int64_t i = 0; !nh && !zb && !qn && i < cfg->n_layers; i++)
        cfg->layers[i].dense_size = cfg->layers[i].dense ? cfg->ffn_size : 0;
    for (int64_t i = 0; i < cfg->n_layers; i++) {
        struct mc_error e = {0};
        if (mc_stack_layer_has_mixer(cfg, i) && mc_family_config_validate(&cfg->layers[i].mixer, &e) != MC_ERR_NONE) {
            mc_error_set(err, MC_ERR_INPUT, "%s: config_json: layer %lld: %s", where, (long long)i, e.msg);
            goto out;
        }
    }
    rc = 0;
out:
    mc_json_free(root);
    return rc == 0 ? MC_ERR_NONE : err->code;
}

static int lfm2(const struct mc_stack_config *cfg)
{
    return cfg->type == MC_MODEL_LFM2 || cfg->type == MC_MODEL_LFM2_MOE; /* LFM2-MoE: LFM2's names */
}

/* The `model.` layouts of the hybrids (lfm2, bamba) as against the `backbone.` of the Mamba models. */
static int hybrid(const struct mc_stack_config *cfg)
{
    return cfg->type == MC_MODEL_NEMOTRON_H || cfg->type == MC_MODEL_LFM2 || cfg->type == MC_MODEL_BAMBA || cfg->type == MC_MODEL_QWEN3_5 ||
           cfg->type == MC_MODEL_GRANITEMOEHYBRID || cfg->type == MC_MODEL_JAMBA || cfg->type == MC_MODEL_ZAMBA2 ||
           cfg->type == MC_MODEL_QWEN3_NEXT || cfg->type == MC_MODEL_QWEN3_5_MOE || cfg->type == MC_MODEL_FALCON_H1 ||
           cfg->type == MC_MODEL_ZAMBA || cfg->type == MC_MODEL_LFM2_MOE || cfg->type == MC_MODEL_OLMO_HYBRID ||
           cfg->type == MC_MODEL_KIMI_LINEAR || cfg->type == MC_MODEL_MINIMAX || cfg->type == MC_MODEL_INKLING;
}

void mc_stack_name_embedding(const struct mc_stack_config *cfg, char out[MC_STACK_NAME_LEN])
{
    snprintf(out, MC_STACK_NAME_LEN, "%s",
             cfg->type == MC_MODEL_NEMOTRON_H ? "model.embeddings.weight"
             : hybrid(cfg)                    ? "model.embed_tokens.weight"
                                              : "backbone.embeddings.weight");
}

void mc_stack_name_layer_norm(const struct mc_stack_config *cfg, int64_t layer, char out[MC_STACK_NAME_LEN])
{
    const struct mc_stack_layer *Z = &cfg->layers[layer];
    if (cfg->type == MC_MODEL_ZAMBA2) /* the application's over 2D, the hybrid layer's Mamba2's, a Mamba2 layer's */
        snprintf(out, MC_STACK_NAME_LEN, "model.layers.%lld.%sinput_layernorm.weight", (long long)Z->hf_layer,
                 Z->shared ? "shared_transformer." : Z->hybrid ? "mamba_decoder." : "");
    else if (cfg->type == MC_MODEL_ZAMBA) /* Zamba: the shared block is `shared_transf` */
        snprintf(out, MC_STACK_NAME_LEN, "model.layers.%lld.%sinput_layernorm.weight", (long long)Z->hf_layer,
                 Z->shared ? "shared_transf." : Z->hybrid ? "mamba_decoder." : "");
    else if (cfg->type == MC_MODEL_BAMBA || cfg->type == MC_MODEL_QWEN3_5 || cfg->type == MC_MODEL_GRANITEMOEHYBRID ||
             cfg->type == MC_MODEL_JAMBA || cfg->type == MC_MODEL_QWEN3_NEXT || cfg->type == MC_MODEL_QWEN3_5_MOE ||
             cfg->type == MC_MODEL_FALCON_H1 || cfg->type == MC_MODEL_KIMI_LINEAR ||
             cfg->type == MC_MODEL_MINIMAX || cfg->type == MC_MODEL_INKLING) /* FalconH1: both slots read one norm */
        snprintf(out, MC_STACK_NAME_LEN, "model.layers.%lld.input_layernorm.weight",
                 (long long)mc_stack_decoder_layer(cfg, layer));
    else if (cfg->type == MC_MODEL_OLMO_HYBRID) /* an attention layer's norm is on its output */
        snprintf(out, MC_STACK_NAME_LEN, "model.layers.%lld.%s", (long long)layer,
                 Z->post_norm ? "post_attention_layernorm.weight" : "input_layernorm.weight");
    else if (lfm2(cfg))
        snprintf(out, MC_STACK_NAME_LEN, "model.layers.%lld.operator_norm.weight", (long long)layer);
    else if (cfg->type == MC_MODEL_NEMOTRON_H)
        snprintf(out, MC_STACK_NAME_LEN, "model.layers.%lld.norm.weight", (long long)layer);
    else
        snprintf(out, MC_STACK_NAME_LEN, "backbone.layers.%lld.norm.weight", (long long)layer);
}

void mc_stack_name_mixer_prefix(const struct mc_stack_config *cfg, int64_t layer, char out[MC_STACK_NAME_LEN])
{
    const struct mc_stack_layer *Z = &cfg->layers[layer];
    if (cfg->type == MC_MODEL_ZAMBA2)
        snprintf(out, MC_STACK_NAME_LEN, "model.layers.%lld.%s", (long long)Z->hf_layer,
                 Z->shared ? "shared_transformer.self_attn." : Z->hybrid ? "mamba_decoder.mamba." : "mamba.");
    else if (cfg->type == MC_MODEL_ZAMBA)
        snprintf(out, MC_STACK_NAME_LEN, "model.layers.%lld.%s", (long long)Z->hf_layer,
                 Z->shared ? "shared_transf.self_attn." : Z->hybrid ? "mamba_decoder.mamba." : "mamba.");
    else if (cfg->type == MC_MODEL_NEMOTRON_H) /* every block's module is its `mixer` */
        snprintf(out, MC_STACK_NAME_LEN, "model.layers.%lld.mixer.", (long long)layer);
    else if (hybrid(cfg))
        snprintf(out, MC_STACK_NAME_LEN, "model.layers.%lld.%s", (long long)mc_stack_decoder_layer(cfg, layer),
                 cfg->layers[layer].family == MC_FAMILY_ATTENTION ? "self_attn."
                 : cfg->type == MC_MODEL_KIMI_LINEAR              ? "self_attn." /* KDA too */
                 : cfg->type == MC_MODEL_MINIMAX                  ? "self_attn." /* MiniMaxLightningAttention too */
                 : lfm2(cfg)                                      ? "conv."
                 : cfg->type == MC_MODEL_QWEN3_5                  ? "linear_attn."
                 : cfg->type == MC_MODEL_QWEN3_NEXT               ? "linear_attn."
                 : cfg->type == MC_MODEL_QWEN3_5_MOE              ? "linear_attn."
                 : cfg->type == MC_MODEL_OLMO_HYBRID              ? "linear_attn."
                                                                  : "mamba.");
    else
        snprintf(out, MC_STACK_NAME_LEN, "backbone.layers.%lld.mixer.", (long long)layer);
}

void mc_stack_name_mixer_param(const struct mc_stack_config *cfg, int64_t layer, const char *family_name,
                               char out[MC_STACK_NAME_LEN + 32])
{
    static const char *const lfm2_attention[][2] = {
        {"o_proj.weight", "out_proj.weight"}, {"q_norm.weight", "q_layernorm.weight"}, {"k_norm.weight", "k_layernorm.weight"}};
    char prefix[MC_STACK_NAME_LEN];
    const char *name = family_name;
    mc_stack_name_mixer_prefix(cfg, layer, prefix);
    if (lfm2(cfg) && cfg->layers[layer].family == MC_FAMILY_ATTENTION)
        for (size_t i = 0; i < sizeof lfm2_attention / sizeof lfm2_attention[0]; i++)
            if (strcmp(family_name, lfm2_attention[i][0]) == 0)
                name = lfm2_attention[i][1];
    static const char *const zamba_mamba[][2] = { /* ZambaMambaMixer's per-head parameters (one head) */
        {"x_proj.weight", "x_proj_weight"}, {"dt_proj.weight", "dt_proj_weight"}, {"dt_proj.bias", "dt_proj_bias"}};
    if (cfg->type == MC_MODEL_ZAMBA && cfg->layers[layer].family == MC_FAMILY_MAMBA1)
        for (size_t i = 0; i < sizeof zamba_mamba / sizeof zamba_mamba[0]; i++)
            if (strcmp(family_name, zamba_mamba[i][0]) == 0)
                name = zamba_mamba[i][1];
    /* OlmoHybridGatedDeltaNet's names for the family's Qwen3.5 layout; in_proj_qkv is its q_proj, k_proj and v_proj
     * stacked (mc_stack_olmo_qkv_part) */
    static const char *const olmo_gdn[][2] = {{"in_proj_z.weight", "g_proj.weight"}, {"in_proj_b.weight", "b_proj.weight"},
                                              {"in_proj_a.weight", "a_proj.weight"}, {"norm.weight", "o_norm.weight"},
                                              {"out_proj.weight", "o_proj.weight"}, {"in_proj_qkv.weight", "q_proj.weight"}};
    if (cfg->type == MC_MODEL_OLMO_HYBRID && cfg->layers[layer].family == MC_FAMILY_GDN)
        for (size_t i = 0; i < sizeof olmo_gdn / sizeof olmo_gdn[0]; i++)
            if (strcmp(family_name, olmo_gdn[i][0]) == 0)
                name = olmo_gdn[i][1];
    if (cfg->type == MC_MODEL_INKLING && strcmp(family_name, "out_sconv.conv1d.weight") == 0) { /* the layer's */
        snprintf(out, MC_STACK_NAME_LEN + 32, "model.layers.%lld.attn_sconv.conv1d.weight", (long long)layer);
        return;
    }
    snprintf(out, MC_STACK_NAME_LEN + 32, "%s%s", prefix, name);
}

int mc_stack_olmo_qkv_part(const struct mc_stack_config *cfg, int64_t layer, int part, char out[MC_STACK_NAME_LEN + 32],
                           int64_t *rows)
{
    if (cfg->type != MC_MODEL_OLMO_HYBRID || cfg->layers[layer].family != MC_FAMILY_GDN || part < 0 || part > 2)
        return 0;
    const struct mc_gdn_config *g = &cfg->layers[layer].mixer.u.gdn;
    char prefix[MC_STACK_NAME_LEN];
    mc_stack_name_mixer_prefix(cfg, layer, prefix);
    snprintf(out, MC_STACK_NAME_LEN + 32, "%s%c_proj.weight", prefix, "qkv"[part]);
    *rows = part < 2 ? g->num_key_heads * g->key_head_dim : g->num_value_heads * g->value_head_dim;
    return 1;
}

void mc_stack_name_ffn(const struct mc_stack_config *cfg, int64_t layer, int part, char out[MC_STACK_NAME_LEN])
{
    static const char *const lfm2_parts[] = {"ffn_norm.weight", "feed_forward.w1.weight", "feed_forward.w3.weight",
                                             "feed_forward.w2.weight"};
    static const char *const bamba_parts[] = {"pre_ff_layernorm.weight", "feed_forward.gate_proj.weight",
                                              "feed_forward.up_proj.weight", "feed_forward.down_proj.weight"};
    static const char *const qwen_parts[] = {"post_attention_layernorm.weight", "mlp.gate_proj.weight",
                                             "mlp.up_proj.weight", "mlp.down_proj.weight"};
    static const char *const granite_parts[] = {"post_attention_layernorm.weight", "shared_mlp.input_linear.weight",
                                                NULL, "shared_mlp.output_linear.weight"};
    static const char *const nemotron_parts[] = {"norm.weight", NULL, "mixer.up_proj.weight", "mixer.down_proj.weight"};
    static const char *const nemotron_moe_parts[] = {"norm.weight", NULL, "mixer.shared_experts.up_proj.weight",
                                                     "mixer.shared_experts.down_proj.weight"};
    static const char *const zamba2_parts[] = {"shared_transformer.pre_ff_layernorm.weight",
                                               "shared_transformer.feed_forward.gate_up_proj.weight", NULL,
                                               "shared_transformer.feed_forward.down_proj.weight"};
    static const char *const zamba_parts[] = {"shared_transf.pre_ff_layernorm.weight",
                                              "shared_transf.feed_forward.gate_proj.weight",
                                              "shared_transf.feed_forward.up_proj.weight",
                                              "shared_transf.feed_forward.down_proj.weight"};
    if (cfg->type == MC_MODEL_ZAMBA) {
        snprintf(out, MC_STACK_NAME_LEN, "model.layers.%lld.%s", (long long)cfg->layers[layer].hf_layer,
                 zamba_parts[part & 3]);
        return;
    }
    if (cfg->type == MC_MODEL_ZAMBA2) {
        if (zamba2_parts[part & 3] == NULL)
            out[0] = '\0';
        else
            snprintf(out, MC_STACK_NAME_LEN, "model.layers.%lld.%s", (long long)cfg->layers[layer].hf_layer,
                     zamba2_parts[part & 3]);
        return;
    }
    static const char *const olmo_parts[] = {"post_attention_layernorm.weight", "mlp.gate_proj.weight",
                                             "mlp.up_proj.weight", "mlp.down_proj.weight"};
    static const char *const olmo_post_parts[] = {"post_feedforward_layernorm.weight", "mlp.gate_proj.weight",
                                                  "mlp.up_proj.weight", "mlp.down_proj.weight"};
    if (cfg->type == MC_MODEL_OLMO_HYBRID) { /* an attention layer's feed-forward norm is on the MLP's output */
        snprintf(out, MC_STACK_NAME_LEN, "model.layers.%lld.%s", (long long)layer,
                 (cfg->layers[layer].post_norm ? olmo_post_parts : olmo_parts)[part & 3]);
        return;
    }
    static const char *const qwen3_next_moe_parts[] = {"post_attention_layernorm.weight", "mlp.shared_expert.gate_proj.weight",
                                                       "mlp.shared_expert.up_proj.weight",
                                                       "mlp.shared_expert.down_proj.weight"};
    static const char *const kimi_moe_parts[] = {"post_attention_layernorm.weight", "mlp.shared_experts.gate_proj.weight",
                                                 "mlp.shared_experts.up_proj.weight",
                                                 "mlp.shared_experts.down_proj.weight"};
    if (cfg->type == MC_MODEL_KIMI_LINEAR) { /* KimiLinearMLP, or KimiLinearMoE's shared_experts */
        snprintf(out, MC_STACK_NAME_LEN, "model.layers.%lld.%s", (long long)layer,
                 (cfg->layers[layer].moe ? kimi_moe_parts : qwen_parts)[part & 3]);
        return;
    }
    if (cfg->type == MC_MODEL_INKLING) { /* InklingMLP; a MoE layer's shared experts are mc_stack_name_inkling's */
        snprintf(out, MC_STACK_NAME_LEN, "model.layers.%lld.%s", (long long)layer, qwen_parts[part & 3]);
        return;
    }
    static const char *const minimax_parts[] = {"post_attention_layernorm.weight", NULL, NULL, NULL};
    if (cfg->type == MC_MODEL_MINIMAX) { /* the MoE alone (mc_stack_name_moe) after post_attention_layernorm */
        if (minimax_parts[part & 3] == NULL)
            out[0] = '\0';
        else
            snprintf(out, MC_STACK_NAME_LEN, "model.layers.%lld.%s", (long long)layer, minimax_parts[part & 3]);
        return;
    }
    const char *const *parts = cfg->type == MC_MODEL_QWEN3_NEXT || cfg->type == MC_MODEL_QWEN3_5_MOE ? (cfg->layers[layer].moe ? qwen3_next_moe_parts
                                                                                                  : qwen_parts)
                               : cfg->type == MC_MODEL_NEMOTRON_H         ? (cfg->layers[layer].moe ? nemotron_moe_parts
                                                                                                  : nemotron_parts)
                               : lfm2(cfg)                              ? lfm2_parts
                               : cfg->type == MC_MODEL_QWEN3_5          ? qwen_parts
                               : cfg->type == MC_MODEL_GRANITEMOEHYBRID ? granite_parts
                                                                        : bamba_parts;
    if (parts[part & 3] == NULL)
        out[0] = '\0';
    else
        snprintf(out, MC_STACK_NAME_LEN, "model.layers.%lld.%s", (long long)mc_stack_decoder_layer(cfg, layer),
                 parts[part & 3]);
}

void mc_stack_name_moe(const struct mc_stack_config *cfg, int64_t layer, int part, char out[MC_STACK_NAME_LEN])
{
    static const char *const granite_parts[] = {"block_sparse_moe.router.weight", "block_sparse_moe.experts.gate_up_proj",
                                                "block_sparse_moe.experts.down_proj"};
    static const char *const jamba_parts[] = {"feed_forward.router.weight", "feed_forward.experts.gate_up_proj",
                                              "feed_forward.experts.down_proj"};
    static const char *const nemotron_parts[] = {"mixer.gate.weight", "mixer.experts.up_proj", "mixer.experts.down_proj",
                                                 "mixer.gate.e_score_correction_bias"};
    static const char *const qwen3_next_parts[] = {"mlp.gate.weight", "mlp.experts.gate_up_proj", "mlp.experts.down_proj",
                                                   "mlp.gate.weight", "mlp.shared_expert_gate.weight"};
    static const char *const lfm2_moe_parts[] = {"feed_forward.gate.weight", "feed_forward.experts.gate_up_proj",
                                                 "feed_forward.experts.down_proj", "feed_forward.expert_bias"};
    static const char *const kimi_parts[] = {"mlp.gate.weight", "mlp.experts.gate_up_proj", "mlp.experts.down_proj",
                                             "mlp.gate.e_score_correction_bias"};
    if (cfg->type == MC_MODEL_LFM2_MOE)
        snprintf(out, MC_STACK_NAME_LEN, "model.layers.%lld.%s", (long long)layer, lfm2_moe_parts[part & 3]);
    else if (cfg->type == MC_MODEL_NEMOTRON_H)
        snprintf(out, MC_STACK_NAME_LEN, "model.layers.%lld.%s", (long long)layer, nemotron_parts[part & 3]);
    else if (cfg->type == MC_MODEL_KIMI_LINEAR || cfg->type == MC_MODEL_INKLING) /* InklingTopkRouter's names too */
        snprintf(out, MC_STACK_NAME_LEN, "model.layers.%lld.%s", (long long)layer, kimi_parts[part & 3]);
    else if (cfg->type == MC_MODEL_QWEN3_NEXT || cfg->type == MC_MODEL_QWEN3_5_MOE || cfg->type == MC_MODEL_MINIMAX)
        snprintf(out, MC_STACK_NAME_LEN, "model.layers.%lld.%s", (long long)layer,
                 qwen3_next_parts[part < 0 || part > 4 ? 0 : part]); /* MiniMaxSparseMoeBlock: mlp.gate, mlp.experts */
    else
        snprintf(out, MC_STACK_NAME_LEN, "model.layers.%lld.%s", (long long)layer,
                 (cfg->type == MC_MODEL_JAMBA ? jamba_parts : granite_parts)[part < 0 || part > 2 ? 0 : part]);
}

void mc_stack_name_final_norm(const struct mc_stack_config *cfg, char out[MC_STACK_NAME_LEN])
{
    snprintf(out, MC_STACK_NAME_LEN, "%s",
             lfm2(cfg)                      ? "model.embedding_norm.weight"
             : cfg->type == MC_MODEL_BAMBA || cfg->type == MC_MODEL_JAMBA || cfg->type == MC_MODEL_ZAMBA2 ||
                       cfg->type == MC_MODEL_FALCON_H1 || cfg->type == MC_MODEL_ZAMBA
                 ? "model.final_layernorm.weight"
             : cfg->type == MC_MODEL_NEMOTRON_H ? "model.norm_f.weight"
             : cfg->type == MC_MODEL_QWEN3_5 || cfg->type == MC_MODEL_GRANITEMOEHYBRID ||
                       cfg->type == MC_MODEL_QWEN3_NEXT || cfg->type == MC_MODEL_QWEN3_5_MOE ||
                       cfg->type == MC_MODEL_OLMO_HYBRID || cfg->type == MC_MODEL_KIMI_LINEAR ||
                       cfg->type == MC_MODEL_MINIMAX || cfg->type == MC_MODEL_INKLING
                   ? "model.norm.weight"
                                                                                   : "backbone.norm_f.weight");
}

void mc_stack_name_head(const struct mc_stack_config *cfg, char out[MC_STACK_NAME_LEN])
{
    (void)cfg;
    snprintf(out, MC_STACK_NAME_LEN, "lm_head.weight");
}

void mc_stack_name_shared(const struct mc_stack_config *cfg, int64_t layer, int64_t app, int part,
                          char out[MC_STACK_NAME_LEN])
{
    long long i = (long long)cfg->layers[layer].hf_layer, j = (long long)app;
    if (part <= 0)
        snprintf(out, MC_STACK_NAME_LEN, "model.layers.%lld.linear.weight", i);
    else if (part <= 2)
        snprintf(out, MC_STACK_NAME_LEN, "model.layers.%lld.shared_transformer.feed_forward.gate_up_proj_adapter_list."
                 "%lld.%d.weight", i, j, part - 1);
    else
        snprintf(out, MC_STACK_NAME_LEN, "model.layers.%lld.shared_transformer.self_attn.linear_%c_adapter_list.%lld.%d."
                 "weight", i, "qkv"[((part - 3) / 2) % 3], j, (part - 3) % 2);
}

void mc_stack_name_inkling(const struct mc_stack_config *cfg, int64_t layer, int part, char out[MC_STACK_NAME_LEN])
{
    static const char *const parts[] = {NULL, "mlp_sconv.conv1d.weight", "mlp.global_scale", "mlp.gate.global_scale",
                                        "mlp.shared_experts.gate_proj", "mlp.shared_experts.up_proj",
                                        "mlp.shared_experts.down_proj"};
    (void)cfg;
    if (part <= 0 || part > 6)
        snprintf(out, MC_STACK_NAME_LEN, "model.embed_tokens.embed_norm.weight");
    else
        snprintf(out, MC_STACK_NAME_LEN, "model.layers.%lld.%s", (long long)layer, parts[part]);
}

void mc_stack_layer_shape(const struct mc_stack_config *cfg, int64_t layer, struct mc_family_shape *sh)
{
    mc_family_shape(&cfg->layers[layer].mixer, sh);
    if (cfg->ffn_sconv > 0 && mc_stack_layer_has_mixer(cfg, layer))
        sh->conv_channels += cfg->hidden; /* the mlp_sconv window [D][K] after the mixer's (the same K) */
}

int64_t mc_stack_mixer_width(const struct mc_stack_config *cfg, int64_t layer)
{
    return cfg->layers[layer].shared ? 2 * cfg->hidden : cfg->hidden;
}

int mc_stack_is_zamba(const struct mc_stack_config *cfg)
{
    return cfg->type == MC_MODEL_ZAMBA2 || cfg->type == MC_MODEL_ZAMBA;
}
