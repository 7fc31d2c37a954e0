/* stackconfig.c — see stackconfig.h. Keys and defaults are those of transformers' Mamba2Config and
 * MambaConfig; the glue they drive is described in docs/models.md §1. */
#include "stackconfig.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "jsonread.h"

const char *mc_model_type_name(enum mc_model_type t)
{
    switch (t) {
    case MC_MODEL_MAMBA2:
        return "mamba2";
    case MC_MODEL_MAMBA:
        return "mamba";
    }
    return "unknown";
}

int mc_model_type_from_name(const char *name, enum mc_model_type *t)
{
    if (strcmp(name, "mamba2") == 0)
        *t = MC_MODEL_MAMBA2;
    else if (strcmp(name, "mamba") == 0)
        *t = MC_MODEL_MAMBA;
    else
        return -1;
    return 0;
}

enum mc_family mc_model_type_family(enum mc_model_type t)
{
    return t == MC_MODEL_MAMBA ? MC_FAMILY_MAMBA1 : MC_FAMILY_MAMBA2;
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

static int parse_mamba2(struct reader *r, struct mc_stack_config *cfg)
{
    struct mc_mamba2_config m = {0};
    int64_t expand = 2;
    double lo = 0.0, hi = INFINITY;
    m.hidden_size = cfg->hidden;
    if (get_int(r, "num_heads", 1, 0, &m.num_heads) || get_int(r, "head_dim", 1, 0, &m.head_dim) ||
        get_int(r, "state_size", 1, 0, &m.state_size) || get_int(r, "n_groups", 0, 1, &m.n_groups) ||
        get_int(r, "conv_kernel", 0, 4, &m.conv_kernel) || get_int(r, "chunk_size", 0, 256, &m.chunk_size) ||
        get_int(r, "expand", 0, 2, &expand) || get_bool(r, "use_bias", 0, &m.use_bias) ||
        get_bool(r, "use_conv_bias", 1, &m.use_conv_bias))
        return -1;
    const struct mc_json_value *tsl = mc_json_get(r->root, "time_step_limit");
    if (tsl != NULL && tsl->type != MC_JSON_NULL) {
        if (tsl->type != MC_JSON_ARRAY || tsl->len != 2 || tsl->items[0].type != MC_JSON_NUMBER ||
            tsl->items[1].type != MC_JSON_NUMBER) {
            mc_error_set(r->err, MC_ERR_INPUT, "%s: config_json: 'time_step_limit' must be [lo, hi]", r->where);
            return -1;
        }
        lo = tsl->items[0].number;
        hi = tsl->items[1].number;
    }
    m.layer_norm_epsilon = cfg->norm_eps;
    m.time_step_limit[0] = lo;
    m.time_step_limit[1] = hi;
    /* Mamba2Mixer's gated norm (MambaRMSNormGated over intermediate_size) normalises the full row */
    m.norm_group_size = m.num_heads * m.head_dim;
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
    for (int64_t i = 0; i < cfg->n_layers; i++) {
        cfg->layers[i].family = MC_FAMILY_MAMBA1;
        cfg->layers[i].mixer.family = MC_FAMILY_MAMBA1;
        cfg->layers[i].mixer.u.mamba1 = m;
    }
    return 0;
}

enum mc_err_code mc_stack_config_parse(const char *model_type, const char *config_json, const char *where,
                                       struct mc_stack_config *cfg, struct mc_error *err)
{
    memset(cfg, 0, sizeof *cfg);
    if (mc_model_type_from_name(model_type, &cfg->type) != 0)
        return mc_error_set(err, MC_ERR_INPUT, "%s: model_type: unknown model type '%.100s' (known: mamba2, mamba)",
                            where, model_type);
    cfg->model_type = mc_model_type_name(cfg->type);
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
    if (get_int(&r, "num_hidden_layers", 1, 0, &cfg->n_layers) || get_int(&r, "hidden_size", 1, 0, &cfg->hidden) ||
        get_int(&r, "vocab_size", 1, 0, &cfg->vocab) ||
        get_num(&r, "layer_norm_epsilon", 0, 0, 1e-5, &cfg->norm_eps) ||
        get_bool(&r, "tie_word_embeddings", cfg->type == MC_MODEL_MAMBA, &cfg->tied) ||
        get_bool(&r, "residual_in_fp32", 1, &cfg->residual_in_fp32) ||
        positive(&r, "num_hidden_layers", cfg->n_layers, MC_STACK_MAX_LAYERS) ||
        positive(&r, "hidden_size", cfg->hidden, 1 << 16) || positive(&r, "vocab_size", cfg->vocab, 1 << 20))
        goto out;
    if (!(cfg->norm_eps > 0.0)) {
        mc_error_set(err, MC_ERR_INPUT, "%s: config_json: 'layer_norm_epsilon' must be > 0", where);
        goto out;
    }
    if ((cfg->type == MC_MODEL_MAMBA2 ? parse_mamba2(&r, cfg) : parse_mamba(&r, cfg)) != 0)
        goto out;
    for (int64_t i = 0; i < cfg->n_layers; i++) {
        struct mc_error e = {0};
        if (mc_family_config_validate(&cfg->layers[i].mixer, &e) != MC_ERR_NONE) {
            mc_error_set(err, MC_ERR_INPUT, "%s: config_json: layer %lld: %s", where, (long long)i, e.msg);
            goto out;
        }
    }
    rc = 0;
out:
    mc_json_free(root);
    return rc == 0 ? MC_ERR_NONE : err->code;
}

void mc_stack_name_embedding(const struct mc_stack_config *cfg, char out[MC_STACK_NAME_LEN])
{
    (void)cfg;
    snprintf(out, MC_STACK_NAME_LEN, "backbone.embeddings.weight");
}

void mc_stack_name_layer_norm(const struct mc_stack_config *cfg, int64_t layer, char out[MC_STACK_NAME_LEN])
{
    (void)cfg;
    snprintf(out, MC_STACK_NAME_LEN, "backbone.layers.%lld.norm.weight", (long long)layer);
}

void mc_stack_name_mixer_prefix(const struct mc_stack_config *cfg, int64_t layer, char out[MC_STACK_NAME_LEN])
{
    (void)cfg;
    snprintf(out, MC_STACK_NAME_LEN, "backbone.layers.%lld.mixer.", (long long)layer);
}

void mc_stack_name_final_norm(const struct mc_stack_config *cfg, char out[MC_STACK_NAME_LEN])
{
    (void)cfg;
    snprintf(out, MC_STACK_NAME_LEN, "backbone.norm_f.weight");
}

void mc_stack_name_head(const struct mc_stack_config *cfg, char out[MC_STACK_NAME_LEN])
{
    (void)cfg;
    snprintf(out, MC_STACK_NAME_LEN, "lm_head.weight");
}
