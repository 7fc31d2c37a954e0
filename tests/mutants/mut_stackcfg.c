/*
 * mut_stackcfg.c — see mut_stack.h: the upstream config.json of a whole stack read into the mutant
 * library's own configuration, with transformers' defaults (Mamba2Config, Lfm2Config, BambaConfig,
 * Qwen3_5TextConfig) for absent keys, and the checkpoint names of every tensor.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "mut_json.h"
#include "mut_stack.h"
#include "mutants.h"

/* Reads keys of one JSON object; the first error is kept in msg and makes every later read a no-op. */
struct reader {
    const struct mut_json *root;
    struct mc_msg *msg;
    int bad;
};

static double num(struct reader *r, const char *key, int integer, int required, double dflt)
{
    const struct mut_json *v = mut_json_get(r->root, key);
    if (r->bad)
        return dflt;
    if (v == NULL || v->type == MUT_JSON_NULL) {
        if (required) {
            mut_fail(r->msg, MC_BACKEND_INVALID, "stack: config_json: '%s' is missing", key);
            r->bad = 1;
        }
        return dflt;
    }
    if (v->type == MUT_JSON_BOOL)
        return v->number;
    if (v->type != MUT_JSON_NUMBER || (integer && (v->number != floor(v->number) || fabs(v->number) > 1e15))) {
        mut_fail(r->msg, MC_BACKEND_INVALID, "stack: config_json: '%s' must be %s", key,
                 integer ? "an integer" : "a number");
        r->bad = 1;
        return dflt;
    }
    return v->number;
}

static int64_t integer(struct reader *r, const char *key, int required, int64_t dflt)
{
    return (int64_t)num(r, key, 1, required, (double)dflt);
}

static void in_range(struct reader *r, const char *key, int64_t v, int64_t max)
{
    if (r->bad || (v >= 1 && v <= max))
        return;
    mut_fail(r->msg, MC_BACKEND_INVALID, "stack: config_json: '%s' must be in [1, %lld] (got %lld)", key,
             (long long)max, (long long)v);
    r->bad = 1;
}

static void set_all(struct mut_stack_config *cfg, const struct mut_stack_layer_config *lc)
{
    for (int64_t i = 0; i < cfg->n_layers; i++)
        cfg->layers[i] = *lc;
}

/* "layer_types": each entry "full_attention" (the layer `at`) or `other_name` (the layer `other`). */
static void layer_types(struct reader *r, struct mut_stack_config *cfg, const char *other_name,
                        const struct mut_stack_layer_config *other, const struct mut_stack_layer_config *at)
{
    const struct mut_json *lt = mut_json_get(r->root, "layer_types");
    if (r->bad)
        return;
    if (lt == NULL || lt->type != MUT_JSON_ARRAY || (int64_t)lt->n != cfg->n_layers) {
        mut_fail(r->msg, MC_BACKEND_INVALID, "stack: config_json: 'layer_types' must list num_hidden_layers (%lld) layers",
                 (long long)cfg->n_layers);
        r->bad = 1;
        return;
    }
    for (int64_t i = 0; i < cfg->n_layers; i++) {
        const struct mut_json *v = &lt->items[i];
        const int is_at = v->type == MUT_JSON_STRING && strcmp(v->string, "full_attention") == 0;
        if (!is_at && !(v->type == MUT_JSON_STRING && strcmp(v->string, other_name) == 0)) {
            mut_fail(r->msg, MC_BACKEND_INVALID,
                     "stack: config_json: 'layer_types[%lld]' must be \"%s\" or \"full_attention\"", (long long)i,
                     other_name);
            r->bad = 1;
            return;
        }
        cfg->layers[i] = is_at ? *at : *other;
    }
}

static void parse_mamba2(struct reader *r, struct mut_stack_config *cfg)
{
    struct mut_stack_layer_config lc = {.family = MC_FAMILY_MAMBA2};
    struct mc_mamba2_config *m = &lc.u.mamba2;
    m->hidden_size = cfg->hidden;
    m->num_heads = integer(r, "num_heads", 1, 0);
    m->head_dim = integer(r, "head_dim", 1, 0);
    m->state_size = integer(r, "state_size", 1, 0);
    m->n_groups = integer(r, "n_groups", 0, 1);
    m->conv_kernel = integer(r, "conv_kernel", 0, 4);
    m->chunk_size = integer(r, "chunk_size", 0, 256);
    const int64_t expand = integer(r, "expand", 0, 2);
    m->use_bias = num(r, "use_bias", 1, 0, 0) != 0;
    m->use_conv_bias = num(r, "use_conv_bias", 1, 0, 1) != 0;
    m->layer_norm_epsilon = cfg->norm_eps;
    m->time_step_limit[0] = 0.0; /* Mamba2Config: (0.0, inf) */
    m->time_step_limit[1] = INFINITY;
    const struct mut_json *tsl = mut_json_get(r->root, "time_step_limit");
    if (!r->bad && tsl != NULL && tsl->type != MUT_JSON_NULL) {
        if (tsl->type != MUT_JSON_ARRAY || tsl->n != 2 || tsl->items[0].type != MUT_JSON_NUMBER ||
            tsl->items[1].type != MUT_JSON_NUMBER) {
            mut_fail(r->msg, MC_BACKEND_INVALID, "stack: config_json: 'time_step_limit' must be [lo, hi]");
            r->bad = 1;
            return;
        }
        m->time_step_limit[0] = tsl->items[0].number;
        m->time_step_limit[1] = tsl->items[1].number;
    }
    m->norm_group_size = m->num_heads * m->head_dim; /* Mamba2Mixer's gated norm normalises the full row */
    in_range(r, "num_heads", m->num_heads, 1 << 16);
    in_range(r, "head_dim", m->head_dim, 1 << 16);
    if (!r->bad && m->num_heads * m->head_dim != expand * cfg->hidden) {
        mut_fail(r->msg, MC_BACKEND_INVALID, "stack: config_json: num_heads * head_dim (%lld) must equal expand * "
                 "hidden_size (%lld)", (long long)(m->num_heads * m->head_dim), (long long)(expand * cfg->hidden));
        r->bad = 1;
    }
    set_all(cfg, &lc);
}

static void parse_lfm2(struct reader *r, struct mut_stack_config *cfg)
{
    struct mut_stack_layer_config conv = {.family = MC_FAMILY_SHORTCONV}, at = {.family = MC_FAMILY_ATTENTION};
    struct mc_shortconv_config *sc = &conv.u.shortconv;
    struct mc_attention_config *a = &at.u.attention;
    sc->hidden_size = cfg->hidden;
    sc->conv_kernel = integer(r, "conv_L_cache", 0, 3);
    sc->conv_bias = num(r, "conv_bias", 1, 0, 0) != 0;
    a->hidden_size = cfg->hidden;
    a->num_attention_heads = integer(r, "num_attention_heads", 1, 0);
    a->num_key_value_heads = integer(r, "num_key_value_heads", 0, a->num_attention_heads);
    a->cache_length = integer(r, "max_position_embeddings", 0, 128000);
    a->rope_theta = num(r, "rope_theta", 0, 0, 1000000.0);
    in_range(r, "num_attention_heads", a->num_attention_heads, 1024);
    in_range(r, "max_position_embeddings", a->cache_length, 1 << 20);
    a->head_dim = r->bad ? 0 : cfg->hidden / a->num_attention_heads;
    a->partial_rotary_factor = 1.0;
    a->rms_norm_eps = cfg->norm_eps;
    a->qk_norm = MC_QK_NORM_RMS;
    /* Lfm2MLP: intermediate_size adjusted (2/3, the multiplier, rounded up to block_multiple_of) */
    int64_t inter = integer(r, "intermediate_size", 1, 0);
    const int adjust = num(r, "block_auto_adjust_ff_dim", 1, 0, 1) != 0;
    const int64_t multiple = integer(r, "block_multiple_of", 0, 256);
    in_range(r, "block_multiple_of", multiple, 1 << 20);
    const struct mut_json *fm = mut_json_get(r->root, "block_ffn_dim_multiplier");
    const int has_mult = fm == NULL || fm->type != MUT_JSON_NULL;
    const double mult = has_mult ? num(r, "block_ffn_dim_multiplier", 0, 0, 1.0) : 1.0;
    if (!r->bad && adjust) {
        inter = (int64_t)(2.0 * (double)inter / 3.0);
        if (has_mult) {
            inter = (int64_t)(mult * (double)inter);
            inter = multiple * ((inter + multiple - 1) / multiple);
        }
    }
    in_range(r, "intermediate_size", inter, 1 << 20);
    cfg->ffn_size = inter;
    layer_types(r, cfg, "conv", &conv, &at);
}

static void parse_bamba(struct reader *r, struct mut_stack_config *cfg)
{
    struct mut_stack_layer_config mb = {.family = MC_FAMILY_MAMBA2}, at = {.family = MC_FAMILY_ATTENTION};
    struct mc_mamba2_config *m = &mb.u.mamba2;
    struct mc_attention_config *a = &at.u.attention;
    m->hidden_size = cfg->hidden;
    m->num_heads = integer(r, "mamba_n_heads", 1, 0);
    m->state_size = integer(r, "mamba_d_state", 1, 0);
    m->n_groups = integer(r, "mamba_n_groups", 0, 1);
    m->conv_kernel = integer(r, "mamba_d_conv", 0, 4);
    const int64_t expand = integer(r, "mamba_expand", 0, 2);
    m->chunk_size = integer(r, "mamba_chunk_size", 0, 256);
    m->use_conv_bias = num(r, "mamba_conv_bias", 1, 0, 1) != 0;
    m->use_bias = num(r, "mamba_proj_bias", 1, 0, 0) != 0;
    in_range(r, "mamba_n_heads", m->num_heads, 1 << 16);
    const struct mut_json *dh = mut_json_get(r->root, "mamba_d_head");
    if (dh == NULL || (dh->type == MUT_JSON_STRING && strcmp(dh->string, "auto") == 0))
        m->head_dim = r->bad ? 0 : expand * cfg->hidden / m->num_heads;
    else
        m->head_dim = integer(r, "mamba_d_head", 1, 0);
    m->layer_norm_epsilon = cfg->norm_eps;
    m->time_step_limit[0] = 0.0;
    m->time_step_limit[1] = INFINITY;
    m->norm_group_size = m->num_heads * m->head_dim; /* BambaRMSNormGated over the full intermediate row */
    a->hidden_size = cfg->hidden;
    a->num_attention_heads = integer(r, "num_attention_heads", 1, 0);
    a->num_key_value_heads = integer(r, "num_key_value_heads", 0, a->num_attention_heads);
    a->cache_length = integer(r, "max_position_embeddings", 0, 262144);
    a->rope_theta = num(r, "rope_theta", 0, 0, 10000.0);
    a->partial_rotary_factor = num(r, "partial_rotary_factor", 0, 0, 0.5);
    a->attention_bias = num(r, "attention_bias", 1, 0, 0) != 0;
    in_range(r, "num_attention_heads", a->num_attention_heads, 1024);
    in_range(r, "max_position_embeddings", a->cache_length, 1 << 20);
    a->head_dim = r->bad ? 0 : cfg->hidden / a->num_attention_heads;
    a->rms_norm_eps = cfg->norm_eps;
    a->qk_norm = MC_QK_NORM_NONE;
    cfg->ffn_size = integer(r, "intermediate_size", 1, 0);
    in_range(r, "intermediate_size", cfg->ffn_size, 1 << 20);
    set_all(cfg, &mb);
    const struct mut_json *ai = mut_json_get(r->root, "attn_layer_indices");
    if (r->bad || ai == NULL || ai->type == MUT_JSON_NULL)
        return;
    if (ai->type != MUT_JSON_ARRAY) {
        mut_fail(r->msg, MC_BACKEND_INVALID, "stack: config_json: 'attn_layer_indices' must be a list");
        r->bad = 1;
        return;
    }
    for (size_t k = 0; k < ai->n; k++) {
        const struct mut_json *v = &ai->items[k];
        if (v->type != MUT_JSON_NUMBER || v->number < 0 || v->number >= (double)cfg->n_layers ||
            v->number != floor(v->number)) {
            mut_fail(r->msg, MC_BACKEND_INVALID, "stack: config_json: 'attn_layer_indices[%zu]' must be a layer index", k);
            r->bad = 1;
            return;
        }
        cfg->layers[(int64_t)v->number] = at;
    }
}

static void parse_qwen3_5(struct reader *r, struct mut_stack_config *cfg)
{
    struct mut_stack_layer_config lin = {.family = MC_FAMILY_GDN}, at = {.family = MC_FAMILY_ATTENTION};
    struct mc_gdn_config *g = &lin.u.gdn;
    struct mc_attention_config *a = &at.u.attention;
    g->hidden_size = cfg->hidden;
    g->num_key_heads = integer(r, "linear_num_key_heads", 1, 0);
    g->num_value_heads = integer(r, "linear_num_value_heads", 1, 0);
    g->key_head_dim = integer(r, "linear_key_head_dim", 1, 0);
    g->value_head_dim = integer(r, "linear_value_head_dim", 1, 0);
    g->conv_kernel = integer(r, "linear_conv_kernel_dim", 0, 4);
    g->chunk_size = 64;
    g->rms_norm_eps = cfg->norm_eps;
    g->layout = MC_GDN_LAYOUT_QWEN3_5;
    a->hidden_size = cfg->hidden;
    a->num_attention_heads = integer(r, "num_attention_heads", 1, 0);
    a->num_key_value_heads = integer(r, "num_key_value_heads", 0, a->num_attention_heads);
    a->head_dim = integer(r, "head_dim", 1, 0);
    a->cache_length = integer(r, "max_position_embeddings", 0, 32768);
    a->partial_rotary_factor = num(r, "partial_rotary_factor", 0, 0, 0.25);
    a->rope_theta = 10000.0;
    a->attention_bias = num(r, "attention_bias", 1, 0, 0) != 0;
    const struct mut_json *rp = mut_json_get(r->root, "rope_parameters");
    if (!r->bad && rp != NULL && rp->type == MUT_JSON_OBJECT) {
        struct reader sub = {rp, r->msg, 0};
        a->rope_theta = num(&sub, "rope_theta", 0, 0, a->rope_theta);
        a->partial_rotary_factor = num(&sub, "partial_rotary_factor", 0, 0, a->partial_rotary_factor);
        r->bad = sub.bad;
    }
    a->rms_norm_eps = cfg->norm_eps;
    a->qk_norm = MC_QK_NORM_ZERO_CENTRED;
    a->attn_output_gate = 1;
    in_range(r, "max_position_embeddings", a->cache_length, 1 << 20);
    cfg->ffn_size = integer(r, "intermediate_size", 1, 0);
    in_range(r, "intermediate_size", cfg->ffn_size, 1 << 20);
    layer_types(r, cfg, "linear_attention", &lin, &at);
}

enum mc_backend_status mut_stack_config_parse(const char *model_type, const char *config_json,
                                              struct mut_stack_config *cfg, struct mc_msg *msg)
{
    memset(cfg, 0, sizeof *cfg);
    if (model_type == NULL || config_json == NULL)
        return mut_fail(msg, MC_BACKEND_INVALID, "stack: the descriptor has no model_type or config_json");
    if (strcmp(model_type, "mamba") == 0)
        return mut_fail(msg, MC_BACKEND_UNSUPPORTED,
                        "stack: model type 'mamba' needs a Mamba1 mixer, which the mutant library does not have "
                        "(it implements mamba2, lfm2, bamba, qwen3_5_text)");
    static const struct {
        const char *name;
        enum mut_model_type type;
        const char *eps_key;
        double eps;
        int tied, fp32;
    } types[] = {
        {"mamba2", MUT_MODEL_MAMBA2, "layer_norm_epsilon", 1e-5, 0, 1},
        {"lfm2", MUT_MODEL_LFM2, "norm_eps", 1e-5, 1, 0},
        {"bamba", MUT_MODEL_BAMBA, "rms_norm_eps", 1e-5, 0, 0},
        {"qwen3_5_text", MUT_MODEL_QWEN3_5, "rms_norm_eps", 1e-6, 0, 0},
    };
    size_t t = 0;
    while (t < sizeof types / sizeof types[0] && strcmp(types[t].name, model_type) != 0)
        t++;
    if (t == sizeof types / sizeof types[0])
        return mut_fail(msg, MC_BACKEND_UNSUPPORTED,
                        "stack: model type '%.100s' is not implemented (mamba2, lfm2, bamba, qwen3_5_text)", model_type);
    struct mut_json root;
    char err[160];
    if (mut_json_parse(config_json, &root, err, sizeof err) != 0)
        return mut_fail(msg, MC_BACKEND_INVALID, "stack: config_json: %s", err);
    struct reader r = {&root, msg, 0};
    if (root.type != MUT_JSON_OBJECT) {
        mut_fail(msg, MC_BACKEND_INVALID, "stack: config_json must be an object");
        r.bad = 1;
    }
    const struct mut_json *mt = mut_json_get(&root, "model_type");
    if (!r.bad && mt != NULL && (mt->type != MUT_JSON_STRING || strcmp(mt->string, model_type) != 0)) {
        mut_fail(msg, MC_BACKEND_INVALID, "stack: config_json: 'model_type' is not '%s'", model_type);
        r.bad = 1;
    }
    cfg->type = types[t].type;
    cfg->n_layers = integer(&r, "num_hidden_layers", 1, 0);
    cfg->hidden = integer(&r, "hidden_size", 1, 0);
    cfg->vocab = integer(&r, "vocab_size", 1, 0);
    cfg->norm_eps = num(&r, types[t].eps_key, 0, 0, types[t].eps);
    cfg->tied = num(&r, "tie_word_embeddings", 1, 0, types[t].tied) != 0;
    /* Lfm2, Bamba and Qwen3.5 decoder layers add in the model dtype whatever the config says */
    cfg->residual_in_fp32 = types[t].fp32 && num(&r, "residual_in_fp32", 1, 0, 1) != 0;
    cfg->zero_centred = cfg->type == MUT_MODEL_QWEN3_5;
    in_range(&r, "num_hidden_layers", cfg->n_layers, MUT_STACK_MAX_LAYERS);
    in_range(&r, "hidden_size", cfg->hidden, 1 << 16);
    in_range(&r, "vocab_size", cfg->vocab, 1 << 20);
    if (!r.bad && !(cfg->norm_eps > 0.0)) {
        mut_fail(msg, MC_BACKEND_INVALID, "stack: config_json: '%s' must be > 0", types[t].eps_key);
        r.bad = 1;
    }
    if (!r.bad) {
        if (cfg->type == MUT_MODEL_MAMBA2)
            parse_mamba2(&r, cfg);
        else if (cfg->type == MUT_MODEL_LFM2)
            parse_lfm2(&r, cfg);
        else if (cfg->type == MUT_MODEL_BAMBA)
            parse_bamba(&r, cfg);
        else
            parse_qwen3_5(&r, cfg);
    }
    mut_json_free(&root);
    return r.bad ? MC_BACKEND_INVALID : MC_BACKEND_OK;
}

/* ---- checkpoint names ---------------------------------------------------------------------------- */

void mut_stack_name_embedding(const struct mut_stack_config *cfg, char out[MUT_STACK_NAME_LEN])
{
    snprintf(out, MUT_STACK_NAME_LEN, "%s",
             cfg->type == MUT_MODEL_MAMBA2 ? "backbone.embeddings.weight" : "model.embed_tokens.weight");
}

void mut_stack_name_final_norm(const struct mut_stack_config *cfg, char out[MUT_STACK_NAME_LEN])
{
    snprintf(out, MUT_STACK_NAME_LEN, "%s",
             cfg->type == MUT_MODEL_MAMBA2  ? "backbone.norm_f.weight"
             : cfg->type == MUT_MODEL_LFM2  ? "model.embedding_norm.weight"
             : cfg->type == MUT_MODEL_BAMBA ? "model.final_layernorm.weight"
                                            : "model.norm.weight");
}

void mut_stack_name_block_norm(const struct mut_stack_config *cfg, int64_t layer, char out[MUT_STACK_NAME_LEN])
{
    if (cfg->type == MUT_MODEL_MAMBA2)
        snprintf(out, MUT_STACK_NAME_LEN, "backbone.layers.%lld.norm.weight", (long long)layer);
    else
        snprintf(out, MUT_STACK_NAME_LEN, "model.layers.%lld.%s", (long long)layer,
                 cfg->type == MUT_MODEL_LFM2 ? "operator_norm.weight" : "input_layernorm.weight");
}

void mut_stack_name_mixer_prefix(const struct mut_stack_config *cfg, int64_t layer, char out[MUT_STACK_NAME_LEN])
{
    const int attn = cfg->layers[layer].family == MC_FAMILY_ATTENTION;
    if (cfg->type == MUT_MODEL_MAMBA2)
        snprintf(out, MUT_STACK_NAME_LEN, "backbone.layers.%lld.mixer.", (long long)layer);
    else
        snprintf(out, MUT_STACK_NAME_LEN, "model.layers.%lld.%s", (long long)layer,
                 attn                            ? "self_attn."
                 : cfg->type == MUT_MODEL_LFM2   ? "conv."
                 : cfg->type == MUT_MODEL_BAMBA  ? "mamba."
                                                 : "linear_attn.");
}

const char *mut_stack_mixer_param_name(const struct mut_stack_config *cfg, int64_t layer, const char *suffix)
{
    static const char *const lfm2_attention[][2] = {
        {"out_proj.weight", "o_proj.weight"}, {"q_layernorm.weight", "q_norm.weight"}, {"k_layernorm.weight", "k_norm.weight"}};
    if (cfg->type == MUT_MODEL_LFM2 && cfg->layers[layer].family == MC_FAMILY_ATTENTION)
        for (size_t i = 0; i < sizeof lfm2_attention / sizeof lfm2_attention[0]; i++)
            if (strcmp(suffix, lfm2_attention[i][0]) == 0)
                return lfm2_attention[i][1];
    return suffix;
}

void mut_stack_name_ffn(const struct mut_stack_config *cfg, int64_t layer, int part, char out[MUT_STACK_NAME_LEN])
{
    static const char *const lfm2_parts[] = {"ffn_norm.weight", "feed_forward.w1.weight", "feed_forward.w3.weight",
                                             "feed_forward.w2.weight"};
    static const char *const bamba_parts[] = {"pre_ff_layernorm.weight", "feed_forward.gate_proj.weight",
                                              "feed_forward.up_proj.weight", "feed_forward.down_proj.weight"};
    static const char *const qwen_parts[] = {"post_attention_layernorm.weight", "mlp.gate_proj.weight",
                                             "mlp.up_proj.weight", "mlp.down_proj.weight"};
    const char *const *parts = cfg->type == MUT_MODEL_LFM2 ? lfm2_parts
                               : cfg->type == MUT_MODEL_BAMBA ? bamba_parts
                                                              : qwen_parts;
    snprintf(out, MUT_STACK_NAME_LEN, "model.layers.%lld.%s", (long long)layer, parts[part & 3]);
}
