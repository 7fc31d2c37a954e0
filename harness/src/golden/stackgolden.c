/* stackgolden.c — see stackgolden.h. Reads through h5read.h; the checksum is golden.h's digest. */
#include "golden/stackgolden.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "golden/h5read.h"

static const char *const ROOT_LINKS[] = {"config", "weights", "inputs", "expected"};
static const char *const INPUT_LINKS[] = {"input_ids", "attention_mask"};
static const char *const EXPECTED_LINKS[] = {"logits", "hidden_states", "mixer_outputs", "state_positions",
                                             "layers", "greedy_tokens", "greedy_logits"};
static const char *const LAYER_LINKS[] = {"conv_state", "recurrent_state"};
static const char *const LAYOUT_MSG = "not part of the model golden layout (golden/README.md \"Model goldens\")";

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

int mc_stack_golden_is_model(const char *path)
{
    struct mc_h5_reader r;
    char *kind = NULL;
    int is = 0;
    if (mc_h5_open(&r, path) == MC_ERR_NONE && mc_h5_attr_exists(&r, "/", "kind") == 1 &&
        mc_h5_attr_read_string(&r, "/", "kind", &kind) == MC_ERR_NONE)
        is = strcmp(kind, "model") == 0;
    free(kind);
    mc_h5_close(&r);
    return is;
}

static enum mc_err_code read_header(struct mc_h5_reader *r, struct mc_stack_golden *g)
{
    char *format = NULL, *kind = NULL, *mt = NULL;
    int64_t version = 0;
    if (mc_h5_attr_read_string(r, "/", "format", &format))
        goto done;
    if (strcmp(format, MC_GOLDEN_FORMAT) != 0) {
        mc_h5_fail(r, MC_ERR_INPUT, "/format", "is '%.200s', not '%s': not a mixcheck golden", format,
                   MC_GOLDEN_FORMAT);
        goto done;
    }
    if (mc_h5_attr_read_numbers(r, "/", "format_version", MC_H5_WANT_INT, 1, &version))
        goto done;
    if (version != MC_GOLDEN_FORMAT_VERSION) {
        mc_h5_fail(r, MC_ERR_INPUT, "/format_version", "is %lld; this mixcheck reads version %d", (long long)version,
                   MC_GOLDEN_FORMAT_VERSION);
        goto done;
    }
    if (mc_h5_attr_read_string(r, "/", "kind", &kind))
        goto done;
    if (strcmp(kind, "model") != 0) {
        mc_h5_fail(r, MC_ERR_INPUT, "/kind", "is '%.100s', not 'model'", kind);
        goto done;
    }
    if (mc_h5_attr_read_string(r, "/", "name", &g->name) || mc_h5_attr_read_string(r, "/config", "model_type", &mt) ||
        mc_h5_attr_read_string(r, "/config", "config_json", &g->config_json))
        goto done;
    char where[600];
    snprintf(where, sizeof where, "%s: /config", g->path);
    mc_stack_config_parse(mt, g->config_json, where, &g->config, &r->err);
done:
    free(format);
    free(kind);
    free(mt);
    return r->err.code;
}

static int has_mixer_ffn(const struct mc_stack_config *cfg, int64_t l)
{
    return cfg->layers[l].dense || cfg->layers[l].moe;
}

/* The parameters the configuration implies, in order: embedding, per layer its norm and its mixer's
 * parameters (family.h names under the layer's prefix), the final norm, the head. */
static int weight_names(const struct mc_stack_config *cfg, char (*names)[MC_STACK_NAME_LEN + 32],
                        struct mc_h5_shape_rule *rules, int cap)
{
    int n = 0;
    char buf[MC_STACK_NAME_LEN];
#define ADD(nm, nd, d0, d1, d2)                                                                                      \
    do {                                                                                                         \
        if (n < cap) {                                                                                           \
            snprintf(names[n], sizeof names[n], "%s", nm);                                                      \
            rules[n] = (struct mc_h5_shape_rule){.ndim = nd, .dims = {d0, d1, d2}, .source = "the configuration"}; \
        }                                                                                                        \
        n++;                                                                                                     \
    } while (0)
    mc_stack_name_embedding(cfg, buf);
    ADD(buf, 2, cfg->vocab, cfg->hidden, 0);
    if (cfg->embed_norm) { /* Inkling's InklingNormedEmbedding */
        mc_stack_name_inkling(cfg, 0, 0, buf);
        ADD(buf, 1, cfg->hidden, 0, 0);
    }
    for (int64_t l = 0; mc_stack_is_zamba(cfg) && l < cfg->n_layers; l++) {
        /* Zamba2: a Mamba2 entry as any layer; an application's block copy under its layer (state_dict() lists each
         * tied copy), with the adapters of every application of its block, and the layer's linear */
        const struct mc_stack_layer *Z = &cfg->layers[l];
        int64_t D = cfg->hidden, F = Z->dense_size, r = cfg->adapter_rank;
        char full[MC_STACK_NAME_LEN + 32];
        mc_stack_name_layer_norm(cfg, l, buf);
        ADD(buf, 1, Z->shared ? 2 * D : D, 0, 0);
        if (!Z->shared) {
            struct mc_weight_spec specs[MC_FAMILY_MAX_WEIGHTS];
            int ns = mc_family_weight_specs(&Z->mixer, specs);
            for (int i = 0; i < ns; i++) {
                mc_stack_name_mixer_param(cfg, l, specs[i].name, full);
                const char *nm = specs[i].name;
                if (cfg->type == MC_MODEL_ZAMBA && (strcmp(nm, "x_proj.weight") == 0 || strcmp(nm, "dt_proj.weight") == 0 ||
                                                    strcmp(nm, "dt_proj.bias") == 0 || strcmp(nm, "A_log") == 0 ||
                                                    strcmp(nm, "D") == 0))
                    /* ZambaMambaMixer's per-head tensors, [n_mamba_heads = 1][...] */
                    ADD(full, specs[i].ndim + 1, 1, specs[i].dims[0], specs[i].dims[1]);
                else
                    ADD(full, specs[i].ndim, specs[i].dims[0], specs[i].dims[1], specs[i].dims[2]);
            }
            continue;
        }
        const struct mc_attention_config *at = &Z->mixer.u.attention;
        int64_t hq = at->num_attention_heads * at->head_dim, hkv = at->num_key_value_heads * at->head_dim;
        static const char *const proj[] = {"q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight"};
        for (int i = 0; i < 4; i++) {
            mc_stack_name_mixer_param(cfg, l, proj[i], full);
            ADD(full, 2, i == 0 ? hq : i < 3 ? hkv : D, i < 3 ? 2 * D : hq, 0);
        }
        for (int part = 0; part < 4; part++) {
            mc_stack_name_ffn(cfg, l, part, buf);
            if (buf[0] != '\0') /* Zamba: gate_proj and up_proj [F][D] each */
                ADD(buf, part == 0 ? 1 : 2, part == 0 ? D : part == 1 ? (cfg->ffn_fused ? 2 * F : F) : part == 2 ? F : D,
                    part == 0 ? 0 : part == 3 ? F : D, 0);
        }
        for (int64_t j = Z->block; r > 0 && j < cfg->n_apps; j += cfg->n_blocks) /* Zamba: no adapters */
            for (int part = 1; part < (cfg->attn_adapter ? 9 : 3); part++) {
                mc_stack_name_shared(cfg, l, j, part, buf);
                ADD(buf, 2, part == 1 ? r : part == 2 ? 2 * F : part % 2 ? r : 2 * D,
                    part == 1 ? D : part == 2 ? r : part % 2 ? 2 * D : r, 0);
            }
        mc_stack_name_shared(cfg, l, Z->app, 0, buf);
        ADD(buf, 2, D, D, 0);
    }
    for (int64_t l = 0; !mc_stack_is_zamba(cfg) && l < cfg->n_layers; l++) {
        mc_stack_name_layer_norm(cfg, l, buf);
        if (cfg->layers[l].parallel != 2) /* a parallel pair's two slots read one norm, listed once */
            ADD(buf, 1, cfg->hidden, 0, 0);
        struct mc_weight_spec specs[MC_FAMILY_MAX_WEIGHTS];
        int ns = mc_family_weight_specs(&cfg->layers[l].mixer, specs);
        for (int i = 0; i < ns; i++) {
            char full[MC_STACK_NAME_LEN + 32];
            int64_t rows = 0;
            if (strcmp(specs[i].name, "in_proj_qkv.weight") == 0 && mc_stack_olmo_qkv_part(cfg, l, 0, full, &rows)) {
                for (int part = 0; part < 3; part++) { /* OLMo-Hybrid: q_proj, k_proj, v_proj */
                    mc_stack_olmo_qkv_part(cfg, l, part, full, &rows);
                    ADD(full, 2, rows, cfg->hidden, 0);
                }
                continue;
            }
            mc_stack_name_mixer_param(cfg, l, specs[i].name, full);
            ADD(full, specs[i].ndim, specs[i].dims[0], specs[i].dims[1], specs[i].dims[2]);
            if (specs[i].ndim == 4 && n <= cap) /* KDA's forget_gate.A_log [1][1][H][1] */
                rules[n - 1].dims[3] = specs[i].dims[3];
        }
        int64_t F = cfg->layers[l].dense_size;
        char norm[MC_STACK_NAME_LEN];
        mc_stack_name_layer_norm(cfg, l, norm);
        mc_stack_name_ffn(cfg, l, 0, buf);
        if (cfg->ffn_size > 0 && (cfg->layers[l].dense || cfg->layers[l].moe) && strcmp(buf, norm) != 0)
            ADD(buf, 1, cfg->hidden, 0, 0); /* (Nemotron-H's feed-forward blocks read the block norm) */
        if (cfg->ffn_size > 0 && cfg->layers[l].dense) {
            if (cfg->ffn_act != MC_FFN_RELU2) { /* relu²: no gate */
                mc_stack_name_ffn(cfg, l, 1, buf);
                ADD(buf, 2, (cfg->ffn_fused ? 2 : 1) * F, cfg->hidden, 0);
            }
            if (!cfg->ffn_fused) {
                mc_stack_name_ffn(cfg, l, 2, buf);
                ADD(buf, 2, F, cfg->hidden, 0);
            }
            mc_stack_name_ffn(cfg, l, 3, buf);
            ADD(buf, 2, cfg->hidden, F, 0);
            if (cfg->ffn_global_scale) { /* InklingMLP.global_scale [1] */
                mc_stack_name_inkling(cfg, l, 2, buf);
                ADD(buf, 1, 1, 0, 0);
            }
        }
        if (cfg->ffn_sconv > 0 && has_mixer_ffn(cfg, l)) { /* Inkling's mlp_sconv [D][1][K] */
            mc_stack_name_inkling(cfg, l, 1, buf);
            ADD(buf, 3, cfg->hidden, 1, cfg->ffn_sconv);
        }
        if (cfg->layers[l].moe) {
            const struct mc_stack_moe *e = &cfg->moe;
            mc_stack_name_moe(cfg, l, 0, buf);
            ADD(buf, 2, e->n_experts + (e->router == MC_ROUTER_SIGMOID_SINK ? e->n_shared : 0), cfg->hidden, 0);
            mc_stack_name_moe(cfg, l, 1, buf);
            ADD(buf, 3, e->n_experts, (e->act == MC_FFN_RELU2 ? 1 : 2) * e->expert_size, cfg->hidden);
            mc_stack_name_moe(cfg, l, 2, buf);
            ADD(buf, 3, e->n_experts, cfg->hidden, e->expert_size);
            if (e->router == MC_ROUTER_SIGMOID_GROUPED || e->router == MC_ROUTER_SIGMOID_SINK ||
                (e->router == MC_ROUTER_SIGMOID_BIAS && e->expert_bias)) {
                mc_stack_name_moe(cfg, l, 3, buf);
                ADD(buf, 1, e->n_experts, 0, 0);
            }
            if (e->shared_gate) { /* Qwen3-Next: shared_expert_gate [1][D] */
                mc_stack_name_moe(cfg, l, 4, buf);
                ADD(buf, 2, 1, cfg->hidden, 0);
            }
            if (e->router == MC_ROUTER_SIGMOID_SINK) { /* InklingTopkRouter.global_scale, InklingSharedExperts */
                mc_stack_name_inkling(cfg, l, 3, buf);
                ADD(buf, 1, 1, 0, 0);
                for (int part = 4; part <= 6 && e->n_shared > 0; part++) {
                    mc_stack_name_inkling(cfg, l, part, buf);
                    ADD(buf, 3, e->n_shared, part < 6 ? e->expert_size : cfg->hidden,
                        part < 6 ? cfg->hidden : e->expert_size);
                }
            }
        }
    }
    mc_stack_name_final_norm(cfg, buf);
    ADD(buf, 1, cfg->hidden, 0, 0);
    mc_stack_name_head(cfg, buf);
    ADD(buf, 2, cfg->vocab, cfg->hidden, 0);
#undef ADD
    return n;
}

static enum mc_err_code read_weights(struct mc_h5_reader *r, struct mc_stack_golden *g)
{
    int cap = (int)(4 + g->config.n_layers * (MC_FAMILY_MAX_WEIGHTS + 11)); /* norm, mixer, feed-forward, MoE */
    if (mc_stack_is_zamba(&g->config)) /* and the adapters of every application of a block under each copy */
        cap += (int)(g->config.n_layers * (g->config.n_apps + 1) * 8);
    char(*names)[MC_STACK_NAME_LEN + 32] = mc_calloc((size_t)cap, sizeof *names);
    struct mc_h5_shape_rule *rules = mc_calloc((size_t)cap, sizeof *rules);
    const char **known = mc_calloc((size_t)cap, sizeof *known);
    g->weights = mc_calloc((size_t)cap, sizeof *g->weights);
    if (names == NULL || rules == NULL || known == NULL || g->weights == NULL) {
        mc_h5_fail_nomem(r, "/weights");
        goto done;
    }
    int n = weight_names(&g->config, names, rules, cap);
    for (int i = 0; i < n; i++)
        known[i] = names[i];
    if (mc_h5_group_check_links(r, "/weights", known, n, "not a parameter of this configuration"))
        goto done;
    for (int i = 0; i < n; i++) {
        char path[MC_STACK_NAME_LEN + 48];
        snprintf(path, sizeof path, "/weights/%s", names[i]);
        if ((g->weights[i].name = mc_strdup(names[i])) == NULL) {
            mc_h5_fail_nomem(r, path);
            goto done;
        }
        g->n_weights = i + 1;
        if (mc_h5_array_read(r, path, MC_H5_WANT_FLOAT, &rules[i], &g->weights[i].value))
            goto done;
    }
done:
    free(names);
    free(rules);
    free(known);
    return r->err.code;
}

static enum mc_err_code read_ints(struct mc_h5_reader *r, const char *name, const struct mc_h5_shape_rule *rule,
                                  int64_t dims[MC_MAX_DIMS], int64_t **out)
{
    void *data = NULL;
    if (mc_h5_dataset_read(r, name, MC_H5_WANT_INT, rule, dims, &data))
        return r->err.code;
    *out = data;
    return MC_ERR_NONE;
}

static enum mc_err_code read_inputs(struct mc_h5_reader *r, struct mc_stack_golden *g)
{
    int64_t dims[MC_MAX_DIMS] = {0}, *mask = NULL;
    struct mc_h5_shape_rule ids = {.ndim = 2, .max = {4096, 1 << 20}, .names = {"B", "L"}, .source = "the inputs"};
    if (mc_h5_group_check_links(r, "/inputs", INPUT_LINKS, COUNT(INPUT_LINKS), LAYOUT_MSG) ||
        read_ints(r, "/inputs/input_ids", &ids, dims, &g->input_ids))
        return r->err.code;
    g->batch = dims[0];
    g->len = dims[1];
    for (int64_t i = 0; i < g->batch * g->len; i++)
        if (g->input_ids[i] < 0 || g->input_ids[i] >= g->config.vocab) {
            char idx[96];
            mc_h5_index_format(idx, sizeof idx, 2, dims, i);
            return mc_h5_fail(r, MC_ERR_INPUT, "/inputs/input_ids", "token id %lld at %s is outside [0, vocab_size %lld)",
                              (long long)g->input_ids[i], idx, (long long)g->config.vocab);
        }
    struct mc_h5_shape_rule mr = {.ndim = 2, .dims = {g->batch, g->len}, .source = "/inputs/input_ids"};
    if (read_ints(r, "/inputs/attention_mask", &mr, dims, &mask))
        return r->err.code;
    g->mask = mc_malloc((size_t)(g->batch * g->len));
    if (g->mask == NULL) {
        free(mask);
        return mc_h5_fail_nomem(r, "/inputs/attention_mask");
    }
    for (int64_t i = 0; i < g->batch * g->len; i++) {
        if (mask[i] != 0 && mask[i] != 1) {
            free(mask);
            return mc_h5_fail(r, MC_ERR_INPUT, "/inputs/attention_mask", "values must be 0 or 1 (got %lld)",
                              (long long)mask[i]);
        }
        g->mask[i] = (uint8_t)mask[i];
    }
    free(mask);
    return MC_ERR_NONE;
}

static enum mc_err_code read_expected(struct mc_h5_reader *r, struct mc_stack_golden *g)
{
    const struct mc_stack_config *c = &g->config;
    int64_t B = g->batch, L = g->len, V = c->vocab, D = c->hidden, dims[MC_MAX_DIMS] = {0};
    if (mc_h5_group_check_links(r, "/expected", EXPECTED_LINKS, COUNT(EXPECTED_LINKS), LAYOUT_MSG))
        return r->err.code;
    struct mc_h5_shape_rule lr = {.ndim = 3, .dims = {B, L, V}, .source = "the inputs and vocab_size"};
    struct mc_h5_shape_rule hr = {.ndim = 4, .dims = {c->n_layers + 1, B, L, D},
                                  .source = "num_hidden_layers + 1, the inputs and hidden_size"};
    struct mc_h5_shape_rule mr = {.ndim = 4, .dims = {c->n_layers, B, L, D},
                                  .source = "num_hidden_layers, the inputs and hidden_size"};
    struct mc_h5_shape_rule pr = {.ndim = 1, .max = {L + 1}, .names = {"T"}, .source = "the inputs"};
    if (mc_h5_array_read(r, "/expected/logits", MC_H5_WANT_F64, &lr, &g->logits) ||
        mc_h5_array_read(r, "/expected/hidden_states", MC_H5_WANT_F64, &hr, &g->hidden) ||
        mc_h5_array_read(r, "/expected/mixer_outputs", MC_H5_WANT_F64, &mr, &g->mixer_outputs) ||
        read_ints(r, "/expected/state_positions", &pr, dims, &g->state_positions))
        return r->err.code;
    g->n_positions = dims[0];
    for (int64_t i = 0; i < g->n_positions; i++)
        if (g->state_positions[i] < 0 || g->state_positions[i] > L ||
            (i > 0 && g->state_positions[i] <= g->state_positions[i - 1]))
            return mc_h5_fail(r, MC_ERR_INPUT, "/expected/state_positions",
                              "must be strictly increasing positions in [0, %lld]", (long long)L);
    struct mc_h5_shape_rule gt = {.ndim = 2, .dims = {B, 0}, .max = {0, 1 << 16}, .names = {NULL, "G"},
                                  .source = "the inputs"};
    if (read_ints(r, "/expected/greedy_tokens", &gt, dims, &g->greedy_tokens))
        return r->err.code;
    g->greedy_steps = dims[1];
    for (int64_t i = 0; i < B * g->greedy_steps; i++)
        if (g->greedy_tokens[i] < 0 || g->greedy_tokens[i] >= V)
            return mc_h5_fail(r, MC_ERR_INPUT, "/expected/greedy_tokens", "token id %lld outside [0, %lld)",
                              (long long)g->greedy_tokens[i], (long long)V);
    struct mc_h5_shape_rule gl = {.ndim = 3, .dims = {B, g->greedy_steps, V}, .source = "/expected/greedy_tokens"};
    if (mc_h5_array_read(r, "/expected/greedy_logits", MC_H5_WANT_F64, &gl, &g->greedy_logits))
        return r->err.code;
    /* per-layer caches */
    char (*lnames)[24] = mc_calloc((size_t)c->n_layers, sizeof *lnames);
    const char **known = mc_calloc((size_t)c->n_layers, sizeof *known);
    g->layers = mc_calloc((size_t)c->n_layers, sizeof *g->layers);
    if (lnames == NULL || known == NULL || g->layers == NULL) {
        free(lnames);
        free(known);
        return mc_h5_fail_nomem(r, "/expected/layers");
    }
    for (int64_t l = 0; l < c->n_layers; l++) {
        snprintf(lnames[l], sizeof lnames[l], "%lld", (long long)l);
        known[l] = lnames[l];
    }
    if (mc_h5_group_check_links(r, "/expected/layers", known, (int)c->n_layers, "not a layer of this configuration"))
        goto out;
    for (int64_t l = 0; l < c->n_layers && r->err.code == MC_ERR_NONE; l++) {
        char grp[64], path[96];
        if (!mc_stack_layer_has_mixer(c, l))
            continue; /* no mixer, no cache: the golden holds no group for it */
        snprintf(grp, sizeof grp, "/expected/layers/%lld", (long long)l);
        struct mc_family_shape sh;
        mc_stack_layer_shape(c, l, &sh); /* Inkling: the mixer's conv_state and its feed-forward's conv window */
        if (mc_h5_group_check_links(r, grp, LAYER_LINKS, sh.state_ndim ? 2 : 1, LAYOUT_MSG))
            break;
        struct mc_h5_shape_rule cr = {.ndim = 4, .dims = {g->n_positions, B, sh.conv_channels, sh.conv_kernel},
                                      .source = "the positions, the inputs and the layer's configuration"};
        snprintf(path, sizeof path, "%s/conv_state", grp);
        if (mc_h5_array_read(r, path, MC_H5_WANT_F64, &cr, &g->layers[l].conv_state))
            break;
        if (sh.state_ndim > 0) {
            struct mc_h5_shape_rule sr = {.ndim = 2 + sh.state_ndim, .dims = {g->n_positions, B},
                                          .source = "the positions, the inputs and the layer's configuration"};
            for (int k = 0; k < sh.state_ndim; k++)
                sr.dims[2 + k] = sh.state_dims[k];
            snprintf(path, sizeof path, "%s/recurrent_state", grp);
            mc_h5_array_read(r, path, MC_H5_WANT_F64, &sr, &g->layers[l].recurrent_state);
        }
    }
out:
    free(lnames);
    free(known);
    return r->err.code;
}

static enum mc_err_code verify_checksum(struct mc_h5_reader *r, struct mc_stack_golden *g)
{
    const struct mc_stack_config *c = &g->config;
    int cap = g->n_weights + 8 + 2 * (int)c->n_layers, n = 0;
    struct mc_golden_digest_item *items = mc_calloc((size_t)cap, sizeof *items);
    char(*paths)[MC_STACK_NAME_LEN + 48] = mc_calloc((size_t)cap, sizeof *paths);
    char *recorded = NULL, computed[MC_SHA256_HEX_LEN + 1];
    if (items == NULL || paths == NULL) {
        mc_h5_fail_nomem(r, NULL);
        goto done;
    }
    int64_t ids_dims[2] = {g->batch, g->len}, pos_dims[1] = {g->n_positions}, gt_dims[2] = {g->batch, g->greedy_steps};
#define F64(p, a)                                                                                                 \
    do {                                                                                                          \
        const char *p_ = (p);                                                                                     \
        items[n] = (struct mc_golden_digest_item){.path = p_, .ndim = (a)->ndim, .dims = (a)->dims, .f64 = (a)->data}; \
        n++;                                                                                                      \
    } while (0)
    for (int i = 0; i < g->n_weights; i++) {
        snprintf(paths[n], sizeof paths[n], "weights/%s", g->weights[i].name);
        F64(paths[n], &g->weights[i].value);
    }
    items[n++] = (struct mc_golden_digest_item){.path = "inputs/input_ids", .is_int = 1, .ndim = 2, .dims = ids_dims,
                                                .i64 = g->input_ids};
    items[n++] = (struct mc_golden_digest_item){.path = "inputs/attention_mask", .is_int = 1, .ndim = 2,
                                                .dims = ids_dims, .u8 = g->mask};
    F64("expected/logits", &g->logits);
    F64("expected/hidden_states", &g->hidden);
    F64("expected/mixer_outputs", &g->mixer_outputs);
    items[n++] = (struct mc_golden_digest_item){.path = "expected/state_positions", .is_int = 1, .ndim = 1,
                                                .dims = pos_dims, .i64 = g->state_positions};
    items[n++] = (struct mc_golden_digest_item){.path = "expected/greedy_tokens", .is_int = 1, .ndim = 2,
                                                .dims = gt_dims, .i64 = g->greedy_tokens};
    F64("expected/greedy_logits", &g->greedy_logits);
    for (int64_t l = 0; l < c->n_layers; l++) {
        if (!mc_stack_layer_has_mixer(c, l))
            continue;
        snprintf(paths[n], sizeof paths[n], "expected/layers/%lld/conv_state", (long long)l);
        F64(paths[n], &g->layers[l].conv_state);
        if (g->layers[l].recurrent_state.ndim > 0) {
            snprintf(paths[n], sizeof paths[n], "expected/layers/%lld/recurrent_state", (long long)l);
            F64(paths[n], &g->layers[l].recurrent_state);
        }
    }
#undef F64
    mc_golden_digest(items, n, computed);
    int e = mc_h5_attr_exists(r, "/", "content_sha256");
    if (e == 0)
        mc_h5_fail(r, MC_ERR_INPUT, "/content_sha256", "missing attribute: regenerate the golden with "
                                                       "golden/generate.py regenerate models/%.100s", g->name);
    if (e != 1 || mc_h5_attr_read_string(r, "/", "content_sha256", &recorded))
        goto done;
    if (strcmp(recorded, computed) != 0)
        mc_h5_fail(r, MC_ERR_INPUT, NULL,
                   "content checksum mismatch (recorded %.70s, computed %s): the golden was modified after "
                   "generation; regenerate it with golden/generate.py regenerate models/%.100s",
                   recorded, computed, g->name);
    else
        memcpy(g->content_sha256, computed, sizeof computed);
done:
    free(items);
    free(paths);
    free(recorded);
    return r->err.code;
}

enum mc_err_code mc_stack_golden_load(const char *path, struct mc_stack_golden *g, struct mc_error *err)
{
    struct mc_h5_reader r;
    memset(g, 0, sizeof *g);
    if (mc_h5_open(&r, path) == MC_ERR_NONE) {
        if ((g->path = mc_strdup(path)) == NULL)
            mc_h5_fail_nomem(&r, NULL);
        else if (read_header(&r, g) == MC_ERR_NONE &&
                 mc_h5_group_check_links(&r, "/", ROOT_LINKS, COUNT(ROOT_LINKS), LAYOUT_MSG) == MC_ERR_NONE &&
                 read_weights(&r, g) == MC_ERR_NONE && read_inputs(&r, g) == MC_ERR_NONE &&
                 read_expected(&r, g) == MC_ERR_NONE && verify_checksum(&r, g) == MC_ERR_NONE) {
            g->logits_max = fmax(mc_array_max_abs(&g->logits), mc_array_max_abs(&g->greedy_logits));
            g->hidden_max = mc_array_max_abs(&g->hidden);
            for (int64_t l = 0; l < g->config.n_layers; l++) {
                g->conv_max = fmax(g->conv_max, mc_array_max_abs(&g->layers[l].conv_state));
                g->state_max = fmax(g->state_max, mc_array_max_abs(&g->layers[l].recurrent_state));
            }
        }
    }
    mc_h5_close(&r);
    if (r.err.code != MC_ERR_NONE) {
        mc_stack_golden_free(g);
        return mc_error_set(err, r.err.code, "%s", r.err.msg);
    }
    return MC_ERR_NONE;
}

void mc_stack_golden_free(struct mc_stack_golden *g)
{
    for (int i = 0; i < g->n_weights; i++) {
        free(g->weights[i].name);
        free(g->weights[i].value.data);
    }
    free(g->weights);
    if (g->layers != NULL)
        for (int64_t l = 0; l < g->config.n_layers; l++) {
            free(g->layers[l].conv_state.data);
            free(g->layers[l].recurrent_state.data);
        }
    free(g->layers);
    free(g->path);
    free(g->name);
    free(g->config_json);
    free(g->input_ids);
    free(g->mask);
    free(g->logits.data);
    free(g->hidden.data);
    free(g->mixer_outputs.data);
    free(g->state_positions);
    free(g->greedy_tokens);
    free(g->greedy_logits.data);
    memset(g, 0, sizeof *g);
}

const struct mc_array *mc_stack_golden_weight(const struct mc_stack_golden *g, const char *name)
{
    for (int i = 0; i < g->n_weights; i++)
        if (strcmp(g->weights[i].name, name) == 0)
            return &g->weights[i].value;
    return NULL;
}
