/* stack.c — see stack.h. */
#include "stack/stack.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "exec/isolate.h"

struct mc_stack {
    const struct mc_stack_config *cfg;
    enum mc_dtype dtype;
    enum mc_dtype mixer_dtype;         /* the layers' models: dtype, or f64 for mc_stack_create_ref */
    int64_t n, D, V;
    const struct mc_backend_ops **ops; /* [n] */
    struct mc_model **models;          /* [n] */
    double *embed;                     /* [V][D], the values in dtype */
    double *head;                      /* [V][D]: lm_head, or the embedding when tied */
    double *final_norm;                /* [D] */
    double *norm;                      /* [n][D] */
    double *ffn_norm;                  /* [n][D] (zeros on a layer without feed-forward) */
    double **w1, **w3, **w2;           /* per layer with a dense MLP of F = layers[l].dense_size: [F][D] (NULL for
                                          relu²: no gate), [F][D], [D][F]; NULL on a layer without one */
    double **router, **gate_up, **down; /* per MoE layer [E][D], [E][2Fe][D] (relu²: [E][Fe][D]), [E][D][Fe]; NULL on a
                                           dense layer */
    double **bias;                     /* per MoE layer of MC_ROUTER_SIGMOID_GROUPED: e_score_correction_bias [E] */
    enum mc_stack_glue_fault fault;    /* MC_STACK_GLUE_NONE but in the mutant tests */
    int64_t fault_layer;
    double *fresh_head;                /* MC_STACK_GLUE_HEAD_UNTIED: [V][D] */
    /* Zamba2's applications of a shared block (stackconfig.h layers[].shared) */
    const struct mc_stack_golden *g;   /* the weights, for an application rebuilt under a planted fault */
    int32_t threads;
    double *norm2;                     /* [n][2D]: an application's input_layernorm over cat(h, e) (zeros elsewhere) */
    double **ad_a, **ad_b, **lin;      /* per application: its MLP adapter [r][D] and [2F][r], its layer's linear [D][D] */
    double **sgate;                    /* per MoE layer with moe.shared_gate: shared_expert_gate [1][D] */
    /* Inkling (stackconfig.h embed_norm, head_divisor, ffn_sconv, ffn_global_scale, MC_ROUTER_SIGMOID_SINK) */
    double *embed_norm;                /* [D] */
    double **sconv;                    /* per layer: mlp_sconv [D][K], float32 values (a float32 module upstream) */
    double *gscale, *rscale;           /* per layer: the dense MLP's global_scale (T), the router's (float32) */
    double **sh_g, **sh_u, **sh_d;     /* per MoE layer: the shared experts' [S][Fe][D], [S][Fe][D], [S][D][Fe] */
    struct {                           /* the sequence the feed-forward's conv runs over (layer_step sets it) */
        int64_t B, L;
        const uint8_t *mask;
        const struct mc_stack_packed *pk;
        double *win;                   /* the layer's windows [B or pool rows][D][K], or NULL: zeros */
    } seq;
};

static int fail(struct mc_msg *msg, const char *fmt, const char *a, long long b)
{
    snprintf(msg->text, sizeof msg->text, fmt, a, b);
    return 0;
}

/* The value x takes when stored in the model dtype. */
static double store(const struct mc_stack *s, double x)
{
    return mc_dtype_round(s->dtype, x);
}

/* The value x takes in the compute dtype: float64 for f64 models, float32 otherwise. */
static double compute(const struct mc_stack *s, double x)
{
    return s->dtype == MC_DTYPE_F64 ? x : (double)(float)x;
}

/* A golden weight rounded to the model dtype (with fp32, to the compute dtype: a parameter upstream keeps in
 * float32 whatever the model dtype), as float64 values (NULL when out of memory). */
static double *weight_copy_as(const struct mc_stack *s, const struct mc_stack_golden *g, const char *name, int64_t n,
                              int fp32)
{
    const struct mc_array *a = mc_stack_golden_weight(g, name);
    double *out = a != NULL && mc_array_elems(a) == n ? malloc((size_t)n * sizeof *out) : NULL;
    for (int64_t i = 0; out != NULL && i < n; i++)
        out[i] = fp32 ? compute(s, a->data[i]) : store(s, a->data[i]);
    return out;
}

static double *weight_copy(const struct mc_stack *s, const struct mc_stack_golden *g, const char *name, int64_t n)
{
    return weight_copy_as(s, g, name, n, 0);
}

/* Layer l has a feed-forward after its mixer (or is one, without a mixer). */
static int has_ffn(const struct mc_stack_config *cfg, int64_t l)
{
    return cfg->layers[l].dense || cfg->layers[l].moe;
}

static enum mc_backend_status create_shared(struct mc_stack *s, const struct mc_stack_golden *g, int64_t l,
                                            int32_t threads, struct mc_msg *msg);

/* FalconH1's multipliers on a projection's output rows, folded into those rows (and their bias) before the
 * weights are rounded to T: the Mamba2 branch's in_proj rows times the ssm_multipliers part they belong to (z [0, I),
 * x [I, 2I), B and C (G N each), dt (H): mup_vector), the attention branch's k_proj rows times key_multiplier.
 * Exact in float64 ((W x) m = (m W) x); in T it moves the rounding of the product into the weight (docs/models.md
 * §1). The rows' count of parameter `name` of slot l: 0 when nothing is folded into it. */
static int64_t fold_rows(const struct mc_stack_config *cfg, int64_t l, const char *name)
{
    const struct mc_family_config *fc = &cfg->layers[l].mixer;
    if (fc->family == MC_FAMILY_MAMBA2 && (strcmp(name, "in_proj.weight") == 0 || strcmp(name, "in_proj.bias") == 0)) {
        const struct mc_mamba2_config *m = &fc->u.mamba2;
        return 2 * m->num_heads * m->head_dim + 2 * m->n_groups * m->state_size + m->num_heads;
    }
    if (fc->family == MC_FAMILY_ATTENTION && cfg->key_multiplier != 1.0 &&
        (strcmp(name, "k_proj.weight") == 0 || strcmp(name, "k_proj.bias") == 0))
        return fc->u.attention.num_key_value_heads * fc->u.attention.head_dim;
    return 0;
}

/* The folded copy of golden weight w [n] of slot l (NULL when nothing is folded or out of memory). */
static double *fold_multipliers(const struct mc_stack_config *cfg, int64_t l, const char *name, const double *w,
                                int64_t n)
{
    int64_t rows = fold_rows(cfg, l, name);
    if (rows <= 0 || n % rows != 0)
        return NULL;
    double *out = malloc((size_t)n * sizeof *out);
    if (out == NULL)
        return NULL;
    int64_t cols = n / rows;
    const struct mc_family_config *fc = &cfg->layers[l].mixer;
    for (int64_t r = 0; r < rows; r++) {
        double mult = cfg->key_multiplier;
        if (fc->family == MC_FAMILY_MAMBA2) {
            const struct mc_mamba2_config *m = &fc->u.mamba2;
            int64_t I = m->num_heads * m->head_dim, GN = m->n_groups * m->state_size;
            int part = r < I ? 0 : r < 2 * I ? 1 : r < 2 * I + GN ? 2 : r < 2 * I + 2 * GN ? 3 : 4;
            mult = cfg->ssm_multipliers[part];
        }
        for (int64_t c = 0; c < cols; c++)
            out[r * cols + c] = w[r * cols + c] * mult;
    }
    return out;
}

/* ---- OLMo-Hybrid ---- */

/* OLMo-Hybrid's Gated DeltaNet layer l: its q_proj, k_proj and v_proj stacked into the family's in_proj_qkv [C][D]
 * (n = C D values; NULL when one is missing or out of memory). */
static double *olmo_qkv_stack(const struct mc_stack_config *cfg, const struct mc_stack_golden *g, int64_t l, int64_t n)
{
    double *out = malloc((size_t)n * sizeof *out);
    int64_t at = 0;
    for (int part = 0; out != NULL && part < 3; part++) {
        char name[MC_STACK_NAME_LEN + 32];
        int64_t rows = 0;
        mc_stack_olmo_qkv_part(cfg, l, part, name, &rows);
        const struct mc_array *a = mc_stack_golden_weight(g, name);
        int64_t k = rows * cfg->hidden;
        if (a == NULL || mc_array_elems(a) != k || at + k > n) {
            free(out);
            return NULL;
        }
        memcpy(out + at, a->data, (size_t)k * sizeof *out);
        at += k;
    }
    if (out != NULL && at != n) {
        free(out);
        return NULL;
    }
    return out;
}

static enum mc_backend_status create_layer(struct mc_stack *s, const struct mc_stack_golden *g, int64_t l,
                                           int32_t threads, struct mc_msg *msg)
{
    if (s->cfg->layers[l].shared)
        return create_shared(s, g, l, threads, msg);
    const struct mc_family_config *fc = &s->cfg->layers[l].mixer;
    struct mc_weight_spec specs[MC_FAMILY_MAX_WEIGHTS];
    int ns = mc_family_weight_specs(fc, specs);
    struct mc_weight w[MC_FAMILY_MAX_WEIGHTS];
    void *bufs[MC_FAMILY_MAX_WEIGHTS] = {0};
    char full[MC_STACK_NAME_LEN + 32];
    enum mc_backend_status st = MC_BACKEND_OK;
    size_t esz = mc_dtype_size(s->mixer_dtype);
    for (int i = 0; i < ns && st == MC_BACKEND_OK; i++) {
        mc_stack_name_mixer_param(s->cfg, l, specs[i].name, full);
        const struct mc_array *a = mc_stack_golden_weight(g, full);
        double *stacked = NULL;
        int64_t rows = 0;
        if (strcmp(specs[i].name, "in_proj_qkv.weight") == 0 && mc_stack_olmo_qkv_part(s->cfg, l, 0, full, &rows)) {
            /* OLMo-Hybrid: the family's in_proj_qkv is q_proj, k_proj and v_proj stacked */
            stacked = olmo_qkv_stack(s->cfg, g, l, specs[i].dims[0] * specs[i].dims[1]);
            if (stacked == NULL) {
                st = MC_BACKEND_NOMEM;
                break;
            }
            a = NULL;
        }
        int64_t n = a ? mc_array_elems(a) : stacked ? specs[i].dims[0] * specs[i].dims[1] : 0;
        bufs[i] = a || stacked ? malloc((size_t)n * esz + 1) : NULL;
        if (bufs[i] == NULL) {
            free(stacked);
            st = MC_BACKEND_NOMEM;
            break;
        }
        /* FalconH1: the multipliers on in_proj's / k_proj's output rows folded into those rows */
        int fold = s->cfg->type == MC_MODEL_FALCON_H1 && fold_rows(s->cfg, l, specs[i].name) > 0;
        double *folded = fold ? fold_multipliers(s->cfg, l, specs[i].name, a->data, n) : NULL;
        const double *src = stacked != NULL ? stacked : folded != NULL ? folded : a->data;
        if (fold && folded == NULL) {
            st = MC_BACKEND_NOMEM;
            break;
        }
        double *deint = NULL;
        if (s->cfg->type == MC_MODEL_ZAMBA &&
            (strcmp(specs[i].name, "in_proj.weight") == 0 || strcmp(specs[i].name, "in_proj.bias") == 0)) {
            /* ZambaMambaMixer's in_proj interleaves the halves (row 2c: x_c, 2c + 1: z_c); the family's has x then z */
            int64_t I2 = specs[i].dims[0], cols = n / I2;
            if ((deint = malloc((size_t)n * sizeof *deint)) == NULL) {
                st = MC_BACKEND_NOMEM;
                break;
            }
            for (int64_t row = 0; row < I2; row++)
                memcpy(deint + row * cols,
                       a->data + (row < I2 / 2 ? 2 * row : 2 * (row - I2 / 2) + 1) * cols, (size_t)cols * sizeof *deint);
            src = deint;
        }
        if (s->mixer_dtype == s->dtype) {
            mc_dtype_from_f64(s->dtype, src, bufs[i], (size_t)n);
        } else { /* the weights rounded to the model dtype, held in float64 */
            double *v = bufs[i];
            for (int64_t k = 0; k < n; k++)
                v[k] = store(s, src[k]);
        }
        free(folded);
        free(deint);
        free(stacked);
        w[i] = (struct mc_weight){.name = specs[i].name, .ndim = specs[i].ndim, .data = bufs[i]};
        memcpy(w[i].dims, specs[i].dims, sizeof w[i].dims);
    }
    if (st == MC_BACKEND_OK) {
        struct mc_model_desc desc = {.family = fc->family, .dtype = s->mixer_dtype, .config = &fc->u, .weights = w,
                                     .n_weights = ns, .threads = threads};
        struct mc_msg m = {{0}};
        char call[160];
        snprintf(call, sizeof call, "model_create of layer %lld (%s on '%s')", (long long)l,
                 mc_family_name(fc->family), s->ops[l]->name);
        mc_isolate_enter(call);
        st = s->ops[l]->model_create(&desc, &s->models[l], &m);
        mc_isolate_leave();
        if (st != MC_BACKEND_OK) {
            s->models[l] = NULL;
            snprintf(msg->text, sizeof msg->text, "layer %lld (%s on '%s'): %.400s", (long long)l,
                     mc_family_name(fc->family), s->ops[l]->name, m.text);
        }
    } else {
        fail(msg, "layer %s%lld: out of memory", "", (long long)l);
    }
    for (int i = 0; i < ns; i++)
        free(bufs[i]);
    return st;
}

/* The entry of Zamba2's application j. */
static int64_t entry_of_app(const struct mc_stack_config *cfg, int64_t j)
{
    for (int64_t l = 0; l < cfg->n_layers; l++)
        if (cfg->layers[l].shared && cfg->layers[l].app == j)
            return l;
    return -1;
}

/* Zamba2's application at entry l (stackconfig.h): its block's weights (under its layer's copy; with
 * MC_STACK_GLUE_SHARED_WRONG_BLOCK those of block b + 1 mod num_mem_blocks), its adapters (with
 * MC_STACK_GLUE_SHARED_WRONG_ADAPTER at this entry those of another application) and its layer's linear; its
 * attention a model of the attention family on the 2D input: q/k/v_proj with the adapter folded in, W + B A
 * (computed in float64 from the stored weights, then rounded to the dtype), and o_proj [D][Hq hd] padded with
 * zero rows to [2D][Hq hd] (the first D outputs are upstream's, the others zero). (Re)creates the model. */
static enum mc_backend_status create_shared(struct mc_stack *s, const struct mc_stack_golden *g, int64_t l,
                                            int32_t threads, struct mc_msg *msg)
{
    const struct mc_stack_config *cfg = s->cfg;
    const struct mc_stack_layer *Z = &cfg->layers[l];
    const struct mc_attention_config *at = &Z->mixer.u.attention;
    int64_t D = s->D, F = Z->dense_size, r = cfg->adapter_rank, hq = at->num_attention_heads * at->head_dim;
    int64_t hkv = at->num_key_value_heads * at->head_dim;
    int64_t src = l, j_ad = Z->app; /* the entry whose block copy is read, the application whose adapters are */
    if (s->fault == MC_STACK_GLUE_SHARED_WRONG_BLOCK && cfg->n_blocks > 1) {
        for (int64_t k = 0; k < s->n; k++)
            if (cfg->layers[k].shared && cfg->layers[k].block == (Z->block + 1) % cfg->n_blocks) {
                src = k;
                break;
            }
    }
    if (s->fault == MC_STACK_GLUE_SHARED_WRONG_ADAPTER && l == s->fault_layer && cfg->n_apps > 1)
        j_ad = Z->app + cfg->n_blocks < cfg->n_apps ? Z->app + cfg->n_blocks
               : Z->app >= cfg->n_blocks            ? Z->app - cfg->n_blocks
                                                    : (Z->app + 1) % cfg->n_apps;
    int64_t ad_entry = entry_of_app(cfg, j_ad);
    char name[MC_STACK_NAME_LEN], full[MC_STACK_NAME_LEN + 32];
    enum mc_backend_status st = MC_BACKEND_OK;
    /* the glue's weights: input_layernorm [2D], pre_ff_layernorm [D], gate_up [2F][D], down [D][F], the MLP adapter,
     * the linear */
    mc_stack_name_layer_norm(cfg, src, name);
    double *n2 = weight_copy(s, g, name, 2 * D), *fn = NULL;
    mc_stack_name_ffn(cfg, src, 0, name);
    fn = weight_copy(s, g, name, D);
    free(s->w1[l]);
    free(s->w3[l]);
    free(s->w2[l]);
    free(s->ad_a[l]);
    free(s->ad_b[l]);
    free(s->lin[l]);
    s->w3[l] = NULL;
    mc_stack_name_ffn(cfg, src, 1, name);
    if (!cfg->ffn_fused) { /* Zamba: gate_proj and up_proj */
        s->w1[l] = weight_copy(s, g, name, F * D);
        mc_stack_name_ffn(cfg, src, 2, name);
        s->w3[l] = weight_copy(s, g, name, F * D);
    } else {
        s->w1[l] = weight_copy(s, g, name, 2 * F * D);
        if (s->w1[l] != NULL && (s->w3[l] = malloc((size_t)(F * D) * sizeof(double))) != NULL)
            memcpy(s->w3[l], s->w1[l] + F * D, (size_t)(F * D) * sizeof(double));
    }
    mc_stack_name_ffn(cfg, src, 3, name);
    s->w2[l] = weight_copy(s, g, name, D * F);
    s->ad_a[l] = s->ad_b[l] = NULL;
    if (r > 0) { /* Zamba has no adapters */
        mc_stack_name_shared(cfg, ad_entry, j_ad, 1, name);
        s->ad_a[l] = weight_copy(s, g, name, r * D);
        mc_stack_name_shared(cfg, ad_entry, j_ad, 2, name);
        s->ad_b[l] = weight_copy(s, g, name, 2 * F * r);
    }
    mc_stack_name_shared(cfg, l, Z->app, 0, name);
    s->lin[l] = weight_copy(s, g, name, D * D);
    if (n2 == NULL || fn == NULL || s->w1[l] == NULL || s->w3[l] == NULL || s->w2[l] == NULL ||
        (r > 0 && (s->ad_a[l] == NULL || s->ad_b[l] == NULL)) || s->lin[l] == NULL)
        st = MC_BACKEND_NOMEM;
    if (st == MC_BACKEND_OK) {
        memcpy(s->norm2 + l * 2 * D, n2, (size_t)(2 * D) * sizeof *n2);
        memcpy(s->ffn_norm + l * D, fn, (size_t)D * sizeof *fn);
    }
    free(n2);
    free(fn);
    /* the attention's weights, family-named */
    struct mc_weight w[4];
    double *vals[4] = {0};
    void *bufs[4] = {0};
    static const char *const proj[] = {"q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight"};
    int64_t rows[4] = {hq, hkv, hkv, 2 * D}, cols[4] = {2 * D, 2 * D, 2 * D, hq};
    size_t esz = mc_dtype_size(s->mixer_dtype);
    for (int i = 0; i < 4 && st == MC_BACKEND_OK; i++) {
        int64_t n = rows[i] * cols[i];
        vals[i] = calloc((size_t)n, sizeof(double));
        bufs[i] = malloc((size_t)n * esz + 1);
        mc_stack_name_mixer_param(cfg, src, proj[i], full);
        const struct mc_array *a = mc_stack_golden_weight(g, full);
        if (vals[i] == NULL || bufs[i] == NULL || a == NULL ||
            mc_array_elems(a) != (i == 3 ? D * hq : n)) {
            st = MC_BACKEND_NOMEM;
            break;
        }
        memcpy(vals[i], a->data, (size_t)mc_array_elems(a) * sizeof(double)); /* o_proj: rows D.. stay zero */
        if (i < 3 && cfg->attn_adapter) { /* + B A, B [2D][r] (its first rows for k and v: hkv = 2D without GQA) */
            const struct mc_array *A, *B;
            mc_stack_name_shared(cfg, ad_entry, j_ad, 3 + 2 * i, name);
            A = mc_stack_golden_weight(g, name);
            mc_stack_name_shared(cfg, ad_entry, j_ad, 4 + 2 * i, name);
            B = mc_stack_golden_weight(g, name);
            if (A == NULL || B == NULL || mc_array_elems(A) != r * 2 * D || mc_array_elems(B) != 2 * D * r) {
                st = MC_BACKEND_NOMEM;
                break;
            }
            for (int64_t o = 0; o < rows[i]; o++)
                for (int64_t c = 0; c < 2 * D; c++) {
                    double acc = 0.0;
                    for (int64_t k = 0; k < r; k++)
                        acc += B->data[o * r + k] * A->data[k * 2 * D + c];
                    vals[i][o * 2 * D + c] += acc;
                }
        }
        for (int64_t k = 0; k < n; k++)
            vals[i][k] = store(s, vals[i][k]);
        if (s->mixer_dtype == s->dtype)
            mc_dtype_from_f64(s->dtype, vals[i], bufs[i], (size_t)n);
        else
            memcpy(bufs[i], vals[i], (size_t)n * sizeof(double));
        w[i] = (struct mc_weight){.name = proj[i], .ndim = 2, .dims = {rows[i], cols[i]}, .data = bufs[i]};
    }
    if (s->models[l] != NULL) {
        s->ops[l]->model_destroy(s->models[l]);
        s->models[l] = NULL;
    }
    if (st == MC_BACKEND_OK) {
        struct mc_model_desc desc = {.family = MC_FAMILY_ATTENTION, .dtype = s->mixer_dtype, .config = &Z->mixer.u,
                                     .weights = w, .n_weights = 4, .threads = threads};
        struct mc_msg m = {{0}};
        char call[160];
        snprintf(call, sizeof call, "model_create of layer %lld (attention on '%s')", (long long)l, s->ops[l]->name);
        mc_isolate_enter(call);
        st = s->ops[l]->model_create(&desc, &s->models[l], &m);
        mc_isolate_leave();
        if (st != MC_BACKEND_OK) {
            s->models[l] = NULL;
            snprintf(msg->text, sizeof msg->text, "layer %lld (attention of shared block %d on '%s'): %.400s",
                     (long long)l, Z->block, s->ops[l]->name, m.text);
        }
    } else {
        snprintf(msg->text, sizeof msg->text, "layer %lld: a shared block's weight is missing or out of memory",
                 (long long)l);
    }
    for (int i = 0; i < 4; i++) {
        free(vals[i]);
        free(bufs[i]);
    }
    return st;
}

/* Inkling's glue weights (stackconfig.h): the embedding's norm, every layer's mlp_sconv, the global scales, the
 * shared experts; nothing for the other models. */
static enum mc_backend_status create_inkling(struct mc_stack *s, const struct mc_stack_golden *g)
{
    const struct mc_stack_config *c = s->cfg;
    char name[MC_STACK_NAME_LEN];
    if (!c->embed_norm && c->ffn_sconv == 0)
        return MC_BACKEND_OK;
    const int64_t D = s->D, K = c->ffn_sconv, S = c->moe.n_shared, Fe = c->moe.expert_size;
    s->sconv = calloc((size_t)s->n, sizeof *s->sconv);
    s->sh_g = calloc((size_t)s->n, sizeof *s->sh_g);
    s->sh_u = calloc((size_t)s->n, sizeof *s->sh_u);
    s->sh_d = calloc((size_t)s->n, sizeof *s->sh_d);
    s->gscale = calloc((size_t)s->n, sizeof *s->gscale);
    s->rscale = calloc((size_t)s->n, sizeof *s->rscale);
    if (s->sconv == NULL || s->sh_g == NULL || s->sh_u == NULL || s->sh_d == NULL || s->gscale == NULL ||
        s->rscale == NULL)
        return MC_BACKEND_NOMEM;
    if (c->embed_norm) {
        mc_stack_name_inkling(c, 0, 0, name);
        if ((s->embed_norm = weight_copy(s, g, name, D)) == NULL)
            return MC_BACKEND_NOMEM;
    }
    for (int64_t l = 0; l < s->n; l++) {
        double *w;
        if (K > 0 && has_ffn(c, l)) {
            mc_stack_name_inkling(c, l, 1, name);
            if ((s->sconv[l] = weight_copy_as(s, g, name, D * K, 1)) == NULL)
                return MC_BACKEND_NOMEM;
        }
        if (c->ffn_global_scale && c->layers[l].dense) {
            mc_stack_name_inkling(c, l, 2, name);
            if ((w = weight_copy(s, g, name, 1)) == NULL)
                return MC_BACKEND_NOMEM;
            s->gscale[l] = w[0];
            free(w);
        }
        if (c->layers[l].moe && c->moe.router == MC_ROUTER_SIGMOID_SINK) {
            mc_stack_name_inkling(c, l, 3, name);
            if ((w = weight_copy_as(s, g, name, 1, 1)) == NULL)
                return MC_BACKEND_NOMEM;
            s->rscale[l] = w[0];
            free(w);
            double **dst[3] = {s->sh_g, s->sh_u, s->sh_d};
            for (int part = 0; part < 3 && S > 0; part++) {
                mc_stack_name_inkling(c, l, 4 + part, name);
                if ((dst[part][l] = weight_copy(s, g, name, S * Fe * D)) == NULL)
                    return MC_BACKEND_NOMEM;
            }
        }
    }
    return MC_BACKEND_OK;
}

static enum mc_backend_status create(const struct mc_stack_golden *g, enum mc_dtype dtype, enum mc_dtype mixer_dtype,
                                     const struct mc_backend_ops *const *layer_ops, int32_t threads,
                                     struct mc_stack **out, struct mc_msg *msg)
{
    *out = NULL;
    struct mc_stack *s = calloc(1, sizeof *s);
    if (s == NULL)
        return MC_BACKEND_NOMEM;
    s->cfg = &g->config;
    s->dtype = dtype;
    s->mixer_dtype = mixer_dtype;
    s->n = g->config.n_layers;
    s->D = g->config.hidden;
    s->V = g->config.vocab;
    s->ops = calloc((size_t)s->n, sizeof *s->ops);
    s->models = calloc((size_t)s->n, sizeof *s->models);
    s->norm = malloc((size_t)(s->n * s->D) * sizeof *s->norm);
    s->g = g;
    s->threads = threads;
    s->norm2 = calloc((size_t)(s->n * 2 * s->D), sizeof *s->norm2);
    s->ad_a = calloc((size_t)s->n, sizeof *s->ad_a);
    s->ad_b = calloc((size_t)s->n, sizeof *s->ad_b);
    s->lin = calloc((size_t)s->n, sizeof *s->lin);
    char name[MC_STACK_NAME_LEN];
    mc_stack_name_embedding(s->cfg, name);
    s->embed = weight_copy(s, g, name, s->V * s->D);
    mc_stack_name_head(s->cfg, name);
    s->head = s->cfg->tied ? NULL : weight_copy(s, g, name, s->V * s->D);
    mc_stack_name_final_norm(s->cfg, name);
    s->final_norm = weight_copy(s, g, name, s->D);
    enum mc_backend_status st = MC_BACKEND_OK;
    s->ffn_norm = calloc((size_t)(s->n * s->D), sizeof(double));
    s->w1 = calloc((size_t)s->n, sizeof *s->w1);
    s->w3 = calloc((size_t)s->n, sizeof *s->w3);
    s->w2 = calloc((size_t)s->n, sizeof *s->w2);
    if (s->ffn_norm == NULL || s->w1 == NULL || s->w3 == NULL || s->w2 == NULL)
        st = MC_BACKEND_NOMEM;
    for (int64_t l = 0; l < s->n && st == MC_BACKEND_OK; l++) {
        if (!has_ffn(s->cfg, l))
            continue;
        int64_t D = s->D, F = s->cfg->layers[l].dense_size;
        mc_stack_name_ffn(s->cfg, l, 0, name);
        double *w = weight_copy(s, g, name, D);
        if (w == NULL) {
            st = MC_BACKEND_NOMEM;
            break;
        }
        memcpy(s->ffn_norm + l * D, w, (size_t)D * sizeof *w);
        free(w);
        if (!s->cfg->layers[l].dense)
            continue; /* a MoE-only layer (Jamba) has no MLP */
        if (s->cfg->ffn_act == MC_FFN_RELU2) { /* up [F][D], down [D][F]: no gate */
            mc_stack_name_ffn(s->cfg, l, 2, name);
            s->w3[l] = weight_copy(s, g, name, F * D);
        } else if (s->cfg->ffn_fused) { /* [2F][D]: the gate's rows, then up's */
            mc_stack_name_ffn(s->cfg, l, 1, name);
            s->w1[l] = weight_copy(s, g, name, 2 * F * D);
            s->w3[l] = s->w1[l] != NULL ? malloc((size_t)(F * D) * sizeof(double)) : NULL;
            if (s->w3[l] != NULL)
                memcpy(s->w3[l], s->w1[l] + F * D, (size_t)(F * D) * sizeof(double));
        } else {
            mc_stack_name_ffn(s->cfg, l, 1, name);
            s->w1[l] = weight_copy(s, g, name, F * D);
            mc_stack_name_ffn(s->cfg, l, 2, name);
            s->w3[l] = weight_copy(s, g, name, F * D);
        }
        mc_stack_name_ffn(s->cfg, l, 3, name);
        s->w2[l] = weight_copy(s, g, name, F * D);
        if ((s->cfg->ffn_act != MC_FFN_RELU2 && s->w1[l] == NULL) || s->w3[l] == NULL || s->w2[l] == NULL)
            st = MC_BACKEND_NOMEM;
    }
    s->router = calloc((size_t)s->n, sizeof *s->router);
    s->gate_up = calloc((size_t)s->n, sizeof *s->gate_up);
    s->down = calloc((size_t)s->n, sizeof *s->down);
    s->bias = calloc((size_t)s->n, sizeof *s->bias);
    if (s->router == NULL || s->gate_up == NULL || s->down == NULL || s->bias == NULL)
        st = MC_BACKEND_NOMEM;
    for (int64_t l = 0; l < s->n && st == MC_BACKEND_OK; l++) {
        const struct mc_stack_moe *e = &g->config.moe;
        if (!g->config.layers[l].moe)
            continue;
        int sig = e->router == MC_ROUTER_SIGMOID_GROUPED || e->router == MC_ROUTER_SIGMOID_SINK; /* float32 router */
        int lb = e->router == MC_ROUTER_SIGMOID_BIAS && e->expert_bias; /* LFM2-MoE: its float32 expert_bias buffer */
        double **dst[4] = {s->router, s->gate_up, s->down, s->bias};
        int64_t rows = e->n_experts + (e->router == MC_ROUTER_SIGMOID_SINK ? e->n_shared : 0);
        int64_t size[4] = {rows * s->D, e->n_experts * (e->act == MC_FFN_RELU2 ? 1 : 2) * e->expert_size * s->D,
                           e->n_experts * s->D * e->expert_size, e->n_experts};
        for (int part = 0; part < (sig || lb ? 4 : 3) && st == MC_BACKEND_OK; part++) {
            mc_stack_name_moe(s->cfg, l, part, name);
            if ((dst[part][l] = weight_copy_as(s, g, name, size[part], (sig && part == 0) || ((sig || lb) && part == 3))) == NULL)
                st = MC_BACKEND_NOMEM;
        }
    }
    s->sgate = calloc((size_t)s->n, sizeof *s->sgate);
    if (s->sgate == NULL)
        st = MC_BACKEND_NOMEM;
    for (int64_t l = 0; l < s->n && st == MC_BACKEND_OK; l++) {
        if (!g->config.layers[l].moe || !g->config.moe.shared_gate)
            continue;
        mc_stack_name_moe(s->cfg, l, 4, name); /* the shared expert's gate [1][D], in T */
        if ((s->sgate[l] = weight_copy(s, g, name, s->D)) == NULL)
            st = MC_BACKEND_NOMEM;
    }
    if (st == MC_BACKEND_OK && (st = create_inkling(s, g)) != MC_BACKEND_OK)
        st = MC_BACKEND_NOMEM;
    if (s->ops == NULL || s->models == NULL || s->norm == NULL || s->embed == NULL || s->final_norm == NULL ||
        (!s->cfg->tied && s->head == NULL) || s->norm2 == NULL || s->ad_a == NULL || s->ad_b == NULL || s->lin == NULL)
        st = MC_BACKEND_NOMEM;
    for (int64_t l = 0; l < s->n && st == MC_BACKEND_OK; l++) {
        if (s->cfg->layers[l].shared) { /* its norm, adapters and linear are create_shared's */
            s->ops[l] = layer_ops[l];
            memset(s->norm + l * s->D, 0, (size_t)s->D * sizeof *s->norm);
            st = create_layer(s, g, l, threads, msg);
            continue;
        }
        mc_stack_name_layer_norm(s->cfg, l, name);
        double *w = weight_copy(s, g, name, s->D);
        if (w == NULL) {
            st = MC_BACKEND_NOMEM;
            break;
        }
        memcpy(s->norm + l * s->D, w, (size_t)s->D * sizeof *w);
        free(w);
        s->ops[l] = layer_ops[l];
        if (mc_stack_layer_has_mixer(s->cfg, l)) /* a layer without a mixer runs on no backend */
            st = create_layer(s, g, l, threads, msg);
    }
    if (st == MC_BACKEND_NOMEM && msg->text[0] == '\0')
        snprintf(msg->text, sizeof msg->text, "out of memory creating the stack");
    if (st != MC_BACKEND_OK) {
        mc_stack_destroy(s);
        return st;
    }
    *out = s;
    return MC_BACKEND_OK;
}

enum mc_backend_status mc_stack_create(const struct mc_stack_golden *g, enum mc_dtype dtype,
                                       const struct mc_backend_ops *const *layer_ops, int32_t threads,
                                       struct mc_stack **out, struct mc_msg *msg)
{
    return create(g, dtype, dtype, layer_ops, threads, out, msg);
}

enum mc_backend_status mc_stack_create_ref(const struct mc_stack_golden *g, enum mc_dtype dtype,
                                           const struct mc_backend_ops *const *layer_ops, int32_t threads,
                                           struct mc_stack **out, struct mc_msg *msg)
{
    return create(g, dtype, MC_DTYPE_F64, layer_ops, threads, out, msg);
}


/* Frees a per-layer array of arrays (NULL or n entries, each NULL or owned). */
static void free_per_layer(double **a, int64_t n)
{
    for (int64_t l = 0; a != NULL && l < n; l++)
        free(a[l]);
    free(a);
}

void mc_stack_destroy(struct mc_stack *s)
{
    if (s == NULL)
        return;
    for (int64_t l = 0; s->models != NULL && l < s->n; l++)
        if (s->models[l] != NULL && s->ops[l] != NULL)
            s->ops[l]->model_destroy(s->models[l]);
    free(s->models);
    free(s->ops);
    free(s->norm);
    free(s->embed);
    free(s->head);
    free(s->final_norm);
    free(s->fresh_head);
    free(s->ffn_norm);
    double **per_layer[] = {s->w1,    s->w3,   s->w2,  s->bias, s->router, s->gate_up, s->down, s->ad_a,
                            s->ad_b,  s->lin,  s->sgate, s->sconv, s->sh_g,  s->sh_u,    s->sh_d};
    for (size_t k = 0; k < sizeof per_layer / sizeof per_layer[0]; k++)
        free_per_layer(per_layer[k], s->n);
    free(s->norm2);
    free(s->gscale);
    free(s->rscale);
    free(s->embed_norm);
    free(s);
}

void mc_stack_set_glue_fault(struct mc_stack *s, enum mc_stack_glue_fault fault, int64_t layer)
{
    int rebuild = fault == MC_STACK_GLUE_SHARED_WRONG_ADAPTER || fault == MC_STACK_GLUE_SHARED_WRONG_BLOCK ||
                  s->fault == MC_STACK_GLUE_SHARED_WRONG_ADAPTER || s->fault == MC_STACK_GLUE_SHARED_WRONG_BLOCK;
    s->fault = fault;
    s->fault_layer = layer;
    for (int64_t l = 0; rebuild && l < s->n; l++) { /* the applications built again with (or without) the fault */
        struct mc_msg m = {{0}};
        if (s->cfg->layers[l].shared && create_shared(s, s->g, l, s->threads, &m) != MC_BACKEND_OK)
            fprintf(stderr, "mixcheck: rebuilding layer %lld under a planted fault: %s\n", (long long)l, m.text);
    }
    if (fault == MC_STACK_GLUE_HEAD_UNTIED && s->fresh_head == NULL) {
        s->fresh_head = malloc((size_t)(s->V * s->D) * sizeof *s->fresh_head);
        uint64_t x = 0x9e3779b97f4a7c15u;
        for (int64_t i = 0; s->fresh_head != NULL && i < s->V * s->D; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* an init of its own, U(-1/sqrt(D), 1/sqrt(D)) */
            s->fresh_head[i] = store(s, ((double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0) / sqrt((double)s->D));
        }
        if (s->fresh_head == NULL)
            s->fault = MC_STACK_GLUE_NONE;
    }
}

const struct mc_stack_config *mc_stack_config_of(const struct mc_stack *s)
{
    return s->cfg;
}

const struct mc_backend_ops *mc_stack_layer_ops(const struct mc_stack *s, int64_t layer)
{
    return s->ops[layer];
}

/* Names a layer's cache call for a crash's message (exec/isolate.h): "cache_copy of layer 2 (mamba2 on 'x')". */
static void enter_cache_call(const struct mc_stack *s, int64_t l, const char *entry)
{
    char call[160];
    snprintf(call, sizeof call, "%s of layer %lld (%s on '%s')", entry, (long long)l,
             mc_family_name(s->cfg->layers[l].mixer.family), s->ops[l]->name);
    mc_isolate_enter(call);
}

enum mc_backend_status mc_stack_cache_new(struct mc_stack *s, int64_t batch, struct mc_stack_cache *c,
                                          struct mc_msg *msg)
{
    c->batch = batch;
    c->layer = calloc((size_t)s->n, sizeof *c->layer);
    c->glue = s->cfg->ffn_sconv > 0 ? calloc((size_t)(s->n * batch * s->D * s->cfg->ffn_sconv), sizeof *c->glue) : NULL;
    if (c->layer == NULL || (s->cfg->ffn_sconv > 0 && c->glue == NULL)) {
        free(c->layer);
        free(c->glue);
        c->layer = NULL;
        c->glue = NULL;
        return MC_BACKEND_NOMEM;
    }
    for (int64_t l = 0; l < s->n; l++) {
        if (!mc_stack_layer_has_mixer(s->cfg, l))
            continue; /* no mixer, no cache: its entry stays NULL */
        enter_cache_call(s, l, "cache_alloc");
        enum mc_backend_status st = s->ops[l]->cache_alloc(s->models[l], batch, &c->layer[l], msg);
        mc_isolate_leave();
        if (st != MC_BACKEND_OK) {
            c->layer[l] = NULL;
            mc_stack_cache_free(s, c);
            return st;
        }
    }
    return MC_BACKEND_OK;
}

enum mc_backend_status mc_stack_cache_copy(struct mc_stack *s, struct mc_stack_cache *dst,
                                           const struct mc_stack_cache *src, struct mc_msg *msg)
{
    for (int64_t l = 0; l < s->n; l++) {
        if (!mc_stack_layer_has_mixer(s->cfg, l))
            continue;
        enter_cache_call(s, l, "cache_copy");
        enum mc_backend_status st = s->ops[l]->cache_copy(s->models[l], dst->layer[l], src->layer[l], msg);
        mc_isolate_leave();
        if (st != MC_BACKEND_OK)
            return st;
    }
    if (dst->glue != NULL && src->glue != NULL) { /* the engine's own windows */
        if (dst->batch != src->batch) {
            snprintf(msg->text, sizeof msg->text, "cache_copy: %lld rows into %lld", (long long)src->batch,
                     (long long)dst->batch);
            return MC_BACKEND_INVALID;
        }
        memcpy(dst->glue, src->glue, (size_t)(s->n * src->batch * s->D * s->cfg->ffn_sconv) * sizeof *dst->glue);
    }
    return MC_BACKEND_OK;
}

void mc_stack_cache_free(struct mc_stack *s, struct mc_stack_cache *c)
{
    for (int64_t l = 0; c->layer != NULL && l < s->n; l++)
        if (c->layer[l] != NULL) {
            enter_cache_call(s, l, "cache_free");
            s->ops[l]->cache_free(s->models[l], c->layer[l]);
            mc_isolate_leave();
        }
    free(c->layer);
    c->layer = NULL;
    free(c->glue);
    c->glue = NULL;
}

enum mc_backend_status mc_stack_cache_export(struct mc_stack *s, const struct mc_stack_cache *c, int64_t layer,
                                             double *conv, double *state, struct mc_msg *msg)
{
    if (!mc_stack_layer_has_mixer(s->cfg, layer)) {
        snprintf(msg->text, sizeof msg->text, "layer %lld has no mixer and no cache", (long long)layer);
        return MC_BACKEND_UNSUPPORTED;
    }
    struct mc_family_shape sh;
    mc_family_shape(&s->cfg->layers[layer].mixer, &sh);
    int64_t nc = c->batch * sh.conv_channels * sh.conv_kernel, ns = c->batch * mc_family_state_elems(&sh);
    const int64_t K = s->cfg->ffn_sconv, gw = K > 0 ? s->D * K : 0; /* Inkling: the feed-forward's window after */
    enum mc_dtype edt = s->mixer_dtype == MC_DTYPE_F64 ? MC_DTYPE_F64 : MC_DTYPE_F32;
    size_t esz = mc_dtype_size(edt);
    void *cb = malloc((size_t)nc * esz + 1), *sb = ns ? malloc((size_t)ns * esz) : NULL;
    enum mc_backend_status st = MC_BACKEND_NOMEM;
    if (cb != NULL && (ns == 0 || sb != NULL)) {
        mc_dtype_fill_nan(edt, cb, (size_t)nc);
        if (sb != NULL)
            mc_dtype_fill_nan(edt, sb, (size_t)ns);
        enter_cache_call(s, layer, "cache_export");
        st = s->ops[layer]->cache_export(s->models[layer], c->layer[layer], cb, sb, msg);
        mc_isolate_leave();
        if (st == MC_BACKEND_OK && gw == 0)
            mc_dtype_to_f64(edt, cb, conv, (size_t)nc);
        if (st == MC_BACKEND_OK && gw > 0) { /* row b: the mixer's C x K, then the glue's D x K */
            const int64_t per = sh.conv_channels * sh.conv_kernel;
            for (int64_t b = 0; b < c->batch; b++) {
                mc_dtype_to_f64(edt, (char *)cb + (size_t)(b * per) * esz, conv + b * (per + gw), (size_t)per);
                for (int64_t i = 0; i < gw; i++)
                    conv[b * (per + gw) + per + i] = c->glue != NULL ? c->glue[(layer * c->batch + b) * gw + i] : 0.0;
            }
        }
        if (st == MC_BACKEND_OK && sb != NULL && state != NULL)
            mc_dtype_to_f64(edt, sb, state, (size_t)ns);
    }
    free(cb);
    free(sb);
    return st;
}

/* ---- the glue -------------------------------------------------------------------------------------- */

/* Block norm of residual rows h [rows][D] into x [rows][D] (values in dtype): the input rounded to the
 * norm's dtype, normalised in the compute dtype, rounded, times the weight in dtype. */
static void block_norm_n(const struct mc_stack *s, const double *w, const double *h, int64_t rows, int64_t D,
                         double *x);

static void block_norm(const struct mc_stack *s, const double *w, const double *h, int64_t rows, double *x)
{
    block_norm_n(s, w, h, rows, s->D, x);
}

/* block_norm over rows of width D (Zamba2's input_layernorm: 2 hidden). */
static void block_norm_n(const struct mc_stack *s, const double *w, const double *h, int64_t rows, int64_t D,
                         double *x)
{
    for (int64_t r = 0; r < rows; r++) {
        const double *hr = h + r * D;
        double ss = 0.0;
        for (int64_t d = 0; d < D; d++) {
            double v = store(s, hr[d]);
            ss += v * v;
        }
        double inv = 1.0 / sqrt(compute(s, ss / (double)D) + s->cfg->norm_eps);
        /* Qwen3_5RMSNorm: (x·rsqrt · (1 + w)) in float32, then T; NemotronHRMSNorm: (x·rsqrt · w) in float32,
         * then T; the others: (x·rsqrt) rounded to T, times w in T */
        int fp32 = s->cfg->zero_centred || s->cfg->norm_weight_fp32;
        for (int64_t d = 0; d < D; d++)
            x[r * D + d] = fp32 ? store(s, compute(s, compute(s, store(s, hr[d]) * inv) *
                                                          (s->cfg->zero_centred ? 1.0 + w[d] : w[d])))
                                : store(s, w[d] * store(s, store(s, hr[d]) * inv));
    }
}

void mc_stack_block_norm(const struct mc_stack *s, int64_t layer, const double *h, int64_t rows, double *x)
{
    if (s->cfg->layers[layer].shared) { /* cat(h, e), e = h - layer rows D: x is [rows][2D] */
        int64_t D = s->D;
        double *c = malloc((size_t)(rows * 2 * D) * sizeof *c);
        if (c == NULL) {
            for (int64_t i = 0; i < rows * 2 * D; i++)
                x[i] = mc_dtype_nan_planted();
            return;
        }
        for (int64_t r = 0; r < rows; r++) {
            memcpy(c + r * 2 * D, h + r * D, (size_t)D * sizeof *c);
            memcpy(c + r * 2 * D + D, h - layer * rows * D + r * D, (size_t)D * sizeof *c);
        }
        block_norm_n(s, s->norm2 + layer * 2 * D, c, rows, 2 * D, x);
        free(c);
        return;
    }
    if (s->cfg->layers[layer].post_norm) { /* OLMo-Hybrid's attention layer: its mixer reads the residual in T */
        for (int64_t i = 0; i < rows * s->D; i++)
            x[i] = store(s, h[i]);
        return;
    }
    block_norm(s, s->norm + layer * s->D, h, rows, x);
}

/* Final norm and head of residual rows h [rows][D] into logits [rows][V]. */
/* out[i] = Σ_d w[i·len + d]·x[d] for i < n (rows of w, row stride len): each sum over d ascending from 0.0 in an
 * accumulator of its own, the plain loop's operations in its order (the same bits), four rows at a time so that
 * four chains run at once instead of one waiting on each addition. */
static void dots(const double *restrict w, int64_t n, int64_t len, const double *restrict x, double *restrict out)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const double *w0 = w + i * len, *w1 = w0 + len, *w2 = w1 + len, *w3 = w2 + len;
        double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0;
        for (int64_t d = 0; d < len; d++) {
            const double xd = x[d];
            a0 += w0[d] * xd;
            a1 += w1[d] * xd;
            a2 += w2[d] * xd;
            a3 += w3[d] * xd;
        }
        out[i] = a0;
        out[i + 1] = a1;
        out[i + 2] = a2;
        out[i + 3] = a3;
    }
    for (; i < n; i++) {
        const double *wi = w + i * len;
        double acc = 0.0;
        for (int64_t d = 0; d < len; d++)
            acc += wi[d] * x[d];
        out[i] = acc;
    }
}

/* Rows of dots() taken this many at a time by its callers (their per-row work follows each block). */
#define DOT_BLOCK 4

static void final_head(const struct mc_stack *s, const double *h, int64_t rows, double *logits, double *tmp)
{
    int64_t D = s->D, V = s->V;
    const double *head = s->fault == MC_STACK_GLUE_HEAD_UNTIED ? s->fresh_head : s->cfg->tied ? s->embed : s->head;
    int skip = s->fault == MC_STACK_GLUE_FINAL_NORM_SKIPPED;
    for (int64_t r = 0; r < rows; r++) {
        const double *hr = h + r * D;
        double ss = 0.0;
        for (int64_t d = 0; d < D; d++)
            ss += hr[d] * hr[d];
        double inv = skip ? 1.0 : 1.0 / sqrt(compute(s, ss / (double)D) + s->cfg->norm_eps);
        /* the residual's own dtype: float32 (promotion by the T weight keeps float32), or T */
        for (int64_t d = 0; d < D; d++) {
            double y;
            if (s->cfg->zero_centred || s->cfg->norm_weight_fp32) {
                double w = skip ? 1.0 : s->cfg->zero_centred ? 1.0 + s->final_norm[d] : s->final_norm[d];
                y = store(s, compute(s, compute(s, hr[d] * inv) * w));
            } else {
                double n = s->cfg->residual_in_fp32 ? compute(s, hr[d] * inv) : store(s, hr[d] * inv);
                double w = skip ? 1.0 : s->final_norm[d];
                y = s->cfg->residual_in_fp32 ? compute(s, w * n) : store(s, w * n);
            }
            tmp[d] = store(s, y); /* lm_head reads it in T */
            if (s->cfg->head_divisor != 1.0 && s->fault != MC_STACK_GLUE_INKLING_HEAD_DIVISOR_DROPPED)
                tmp[d] = store(s, tmp[d] / s->cfg->head_divisor); /* Inkling: norm(h) / logits_mup_width_multiplier */
        }
        double blk[DOT_BLOCK];
        for (int64_t v = 0; v < V; v++) {
            if (v % DOT_BLOCK == 0) /* the next rows of lm_head · tmp */
                dots(head + v * D, V - v < DOT_BLOCK ? V - v : DOT_BLOCK, D, tmp, blk);
            logits[r * V + v] = store(s, blk[v % DOT_BLOCK]);
            if (s->cfg->logits_scaling != 1.0 && s->fault != MC_STACK_GLUE_LOGITS_SCALING_DROPPED)
                logits[r * V + v] = store(s, logits[r * V + v] / s->cfg->logits_scaling); /* logits / logits_scaling */
            if (s->cfg->lm_head_multiplier != 1.0 && s->fault != MC_STACK_GLUE_LM_HEAD_MULTIPLIER_DROPPED)
                logits[r * V + v] = store(s, logits[r * V + v] * s->cfg->lm_head_multiplier); /* FalconH1 */
        }
    }
}

/* The mixer of layer l over x [B][L][D] (dtype values), y [B][L][D]; with pk, the packed call over
 * x [T][D] (B = 1, L = T) on the pool `cache`. */
static enum mc_backend_status run_mixer(struct mc_stack *s, int64_t l, struct mc_cache *cache, int64_t B, int64_t L,
                                        const double *x, const uint8_t *mask, const struct mc_stack_packed *pk,
                                        double *y, struct mc_msg *msg)
{
    enum mc_dtype mdt = s->mixer_dtype;
    size_t n = (size_t)(B * L * mc_stack_mixer_width(s->cfg, l)), esz = mc_dtype_size(mdt);
    void *xb = malloc(n * esz), *yb = malloc(n * esz);
    enum mc_backend_status st = MC_BACKEND_NOMEM;
    if (xb != NULL && yb != NULL) {
        mc_dtype_from_f64(mdt, x, xb, n);
        for (size_t i = 0; mdt != s->dtype && i < n; i++) /* the mixer reads dtype values */
            ((double *)xb)[i] = store(s, x[i]);
        mc_dtype_fill_nan(mdt, yb, n);
        struct mc_forward_args a = {.batch = B, .len = L, .x = xb, .mask = mask, .y = yb};
        struct mc_msg m = {{0}};
        char call[160];
        snprintf(call, sizeof call, "%s of layer %lld (%s on '%s')", pk != NULL ? "forward_packed" : "forward",
                 (long long)l, mc_family_name(s->cfg->layers[l].family), s->ops[l]->name);
        mc_isolate_enter(call);
        if (pk != NULL) {
            struct mc_packed_args pa = {.n_seqs = pk->n_seqs, .cu_seqlens = pk->cu_seqlens, .slots = pk->slots,
                                        .has_initial_state = pk->has_initial_state, .x = xb, .y = yb};
            st = s->ops[l]->forward_packed != NULL ? s->ops[l]->forward_packed(s->models[l], cache, &pa, &m)
                                                   : MC_BACKEND_UNSUPPORTED;
            if (s->ops[l]->forward_packed == NULL)
                snprintf(m.text, sizeof m.text, "no packed call (MC_CAP_PACKED)");
        } else {
            st = s->ops[l]->forward(s->models[l], cache, &a, &m);
        }
        mc_isolate_leave();
        if (st == MC_BACKEND_OK) {
            mc_dtype_to_f64(mdt, yb, y, n);
            for (size_t i = 0; mdt != s->dtype && i < n; i++) /* stored in the model dtype, as upstream */
                y[i] = store(s, y[i]);
        } else
            snprintf(msg->text, sizeof msg->text, "layer %lld (%s on '%s'): %.400s", (long long)l,
                     mc_family_name(s->cfg->layers[l].family), s->ops[l]->name, m.text);
    }
    free(xb);
    free(yb);
    return st;
}

/* The residual add of one block's output y: float32 (or float64) when residual_in_fp32, else in T; y is first
 * multiplied by residual_multiplier (rounded to T) where the model has one. */
static void residual_add(const struct mc_stack *s, double *h, const double *y, size_t n)
{
    int fp32 = s->cfg->residual_in_fp32 && s->fault != MC_STACK_GLUE_RESIDUAL_NOT_FP32;
    double m = s->fault == MC_STACK_GLUE_RESIDUAL_MULTIPLIER_DROPPED ? 1.0 : s->cfg->residual_multiplier;
    for (size_t i = 0; i < n; i++) {
        double v = m != 1.0 ? store(s, y[i] * m) : y[i];
        h[i] = fp32 ? compute(s, h[i] + v) : store(s, h[i] + v);
    }
}

/* MiniMax's scaled add (struct mc_stack_layer.scaled): h = alpha · r + beta · y, the residual r the block norm's
 * output x (the stream h itself with MC_STACK_GLUE_MINIMAX_RESIDUAL_PRE_NORM), each product and the sum in T
 * (`residual * alpha + hidden_states * beta`); alpha and beta trade places with
 * MC_STACK_GLUE_MINIMAX_ALPHA_BETA_SWAPPED. */
static void scaled_add(const struct mc_stack *s, double *h, const double *x, const double *y, size_t n, double alpha,
                       double beta)
{
    if (s->fault == MC_STACK_GLUE_MINIMAX_ALPHA_BETA_SWAPPED) {
        double t = alpha;
        alpha = beta;
        beta = t;
    }
    const double *res = s->fault == MC_STACK_GLUE_MINIMAX_RESIDUAL_PRE_NORM ? h : x;
    for (size_t i = 0; i < n; i++)
        h[i] = store(s, store(s, store(s, res[i]) * alpha) + store(s, y[i] * beta));
}

/* relu(u)² of a value u stored in T, stored in T (relu², or relu alone with the planted fault). */
static double relu2(const struct mc_stack *s, double u)
{
    double r = u > 0.0 ? u : 0.0;
    return s->fault == MC_STACK_GLUE_RELU2_AS_RELU ? r : store(s, r * r);
}

/* The index of the largest of v[0..n) not yet taken (a tie: the lower index), marked taken. */
static int64_t take_largest(const double *v, int64_t n, uint8_t *taken)
{
    int64_t best = -1;
    for (int64_t k = 0; k < n; k++)
        if (!taken[k] && (best < 0 || v[k] > v[best]))
            best = k;
    if (best >= 0) /* (the config guarantees one is left) */
        taken[best] = 1;
    return best < 0 ? 0 : best;
}

/* One SwiGLU expert, gate g0 [Fe][D] and up u0 [Fe][D] (a fused gate_up's two halves, or two tensors), on x [D]
 * into a [Fe]: silu(g) * u, each step stored in T (KimiLinearExperts, InklingSharedExperts, as the dense MLP). */
static void moe_swiglu_expert(const struct mc_stack *s, const double *g0, const double *u0, const double *xr,
                              int64_t Fe, double *a)
{
    const int64_t D = s->D;
    for (int64_t f0 = 0; f0 < Fe; f0 += DOT_BLOCK) {
        const int64_t nb = Fe - f0 < DOT_BLOCK ? Fe - f0 : DOT_BLOCK;
        double gb[DOT_BLOCK], ub[DOT_BLOCK];
        dots(g0 + f0 * D, nb, D, xr, gb);
        dots(u0 + f0 * D, nb, D, xr, ub);
        for (int64_t j = 0; j < nb; j++) {
            const double g = store(s, gb[j]), u = store(s, ub[j]);
            a[f0 + j] = store(s, store(s, g / (1.0 + exp(-g))) * u);
        }
    }
}

/* The MoE of MC_ROUTER_SIGMOID_GROUPED (NemotronHMoE's experts, stackconfig.h) on normed rows x [rows][D], added
 * into y [rows][D] (the shared expert's output): the router in float32 on float32 weights, the group-limited
 * choice on the corrected scores, the weights of the uncorrected ones; each chosen expert down_e(relu(up_e x)²) in
 * T, times its float32 weight, summed in float32 in increasing expert index, rounded to T once, then added to y in
 * T. a is [Fe + D] scratch. */
static void moe_sigmoid_grouped(const struct mc_stack *s, int64_t l, int64_t rows, const double *x, double *y,
                                double *a)
{
    const struct mc_stack_moe *e = &s->cfg->moe;
    const int64_t D = s->D, E = e->n_experts, K = e->top_k, Fe = e->expert_size, G = e->n_group, per = E / G;
    const double *router = s->router[l], *bias = s->bias[l], *up = s->gate_up[l], *dn = s->down[l];
    double score[MC_STACK_MAX_EXPERTS], choice[MC_STACK_MAX_EXPERTS], gscore[MC_STACK_MAX_EXPERTS], w[MC_STACK_MAX_TOP_K];
    double raw[MC_STACK_MAX_EXPERTS]; /* the router's sums */
    double *acc32 = a + Fe; /* the float32 sum of the experts' weighted outputs, [D] */
    int64_t pick[MC_STACK_MAX_TOP_K];
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * D;
        double *yr = y + r * D;
        dots(router, E, D, xr, raw);
        for (int64_t k = 0; k < E; k++) { /* F.linear(x.float(), weight.float()), then sigmoid, in float32 */
            score[k] = compute(s, 1.0 / (1.0 + exp(-compute(s, raw[k]))));
            choice[k] = compute(s, score[k] + bias[k]);
        }
        /* each group's score: the sum of its two largest corrected scores; the topk_group best groups kept */
        for (int64_t gi = 0; gi < G; gi++) {
            uint8_t t2[MC_STACK_MAX_EXPERTS] = {0};
            int64_t a0 = take_largest(choice + gi * per, per, t2), a1 = take_largest(choice + gi * per, per, t2);
            gscore[gi] = s->fault == MC_STACK_GLUE_KIMI_GROUP_MAX_ONLY ? choice[gi * per + a0]
                                                                       : compute(s, choice[gi * per + a0] + choice[gi * per + a1]);
        }
        uint8_t gtaken[MC_STACK_MAX_EXPERTS] = {0}, taken[MC_STACK_MAX_EXPERTS];
        for (int64_t j = 0; j < e->topk_group; j++)
            take_largest(gscore, G, gtaken);
        for (int64_t k = 0; k < E; k++) /* the experts of the groups not kept are never chosen */
            taken[k] = !gtaken[k / per];
        for (int64_t j = 0; j < K; j++)
            pick[j] = take_largest(choice, E, taken);
        double sum = 0.0;
        for (int64_t j = 0; j < K; j++) {
            w[j] = s->fault == MC_STACK_GLUE_CORRECTION_BIAS_IN_WEIGHTS ? choice[pick[j]] : score[pick[j]];
            sum = compute(s, sum + w[j]);
        }
        int renorm = e->renormalise != (s->fault == MC_STACK_GLUE_MOE_NOT_RENORMALISED);
        double den = compute(s, sum + 1e-20);
        for (int64_t j = 0; j < K; j++)
            w[j] = compute(s, compute(s, renorm ? w[j] / den : w[j]) *
                                         (s->fault == MC_STACK_GLUE_KIMI_SCALING_DROPPED ? 1.0 : e->routed_scaling));
        for (int64_t d = 0; d < D; d++)
            acc32[d] = 0.0;
        for (int64_t k = 0; k < E; k++) { /* index_add_ over expert_hit: increasing expert index */
            int64_t j = 0;
            while (j < K && pick[j] != k)
                j++;
            if (j == K)
                continue;
            if (e->act == MC_FFN_SWIGLU) /* KimiLinearExperts: gate_up [2 Fe][D] (gate rows first), silu(g) * u */
                moe_swiglu_expert(s, up + k * 2 * Fe * D, up + k * 2 * Fe * D + Fe * D, xr, Fe, a);
            else
                for (int64_t f = 0; f < Fe; f++) {
                    const double *u0 = up + k * Fe * D;
                    double u = 0.0;
                    for (int64_t d = 0; d < D; d++)
                        u += u0[f * D + d] * xr[d];
                    a[f] = relu2(s, store(s, u));
                }
            const double *d0 = dn + k * D * Fe;
            for (int64_t d = 0; d < D; d++) {
                double acc = 0.0;
                for (int64_t f = 0; f < Fe; f++)
                    acc += d0[d * Fe + f] * a[f];
                if (e->sum_in_dtype && s->fault != MC_STACK_GLUE_KIMI_EXPERTS_SUMMED_FP32) /* index_add_ into T */
                    acc32[d] = store(s, acc32[d] + store(s, compute(s, store(s, acc) * w[j])));
                else
                    acc32[d] = compute(s, acc32[d] + compute(s, store(s, acc) * w[j])); /* T x float32 -> float32 */
            }
        }
        for (int64_t d = 0; d < D; d++) /* .to(T), then + shared_experts(x) in T */
            yr[d] = store(s, (s->fault == MC_STACK_GLUE_KIMI_SHARED_DROPPED ? 0.0 : yr[d]) + store(s, acc32[d]));
    }
}

/* The chosen experts of one normed row xr [D] added into yr [D] in increasing expert index (index_add_ over
 * expert_hit): yr += w_j · down_j(silu(gate_j xr) · up_j xr), every product and sum rounded to T as upstream's
 * SwiGLU experts do; gu [E][2 Fe][D] (gate rows, then up rows), dn [E][D][Fe], the k picks and their weights w,
 * a [Fe] scratch. */
static void experts_add(const struct mc_stack *s, const double *gu, const double *dn, int64_t E, int64_t K,
                        int64_t Fe, const int64_t *pick, const double *w, const double *xr, double *a, double *yr)
{
    const int64_t D = s->D;
    for (int64_t k = 0; k < E; k++) {
        int64_t j = 0;
        while (j < K && pick[j] != k)
            j++;
        if (j == K)
            continue;
        const double *g0 = gu + k * 2 * Fe * D, *u0 = g0 + Fe * D, *d0 = dn + k * D * Fe;
        moe_swiglu_expert(s, g0, u0, xr, Fe, a);
        for (int64_t d0i = 0; d0i < D; d0i += DOT_BLOCK) {
            const int64_t nb = D - d0i < DOT_BLOCK ? D - d0i : DOT_BLOCK;
            double acc[DOT_BLOCK];
            dots(d0 + d0i * Fe, nb, Fe, a, acc);
            for (int64_t i = 0; i < nb; i++)
                yr[d0i + i] = store(s, yr[d0i + i] + store(s, store(s, acc[i]) * w[j]));
        }
    }
}

/* LFM2-MoE's MoE (MC_ROUTER_SIGMOID_BIAS, Lfm2MoeSparseMoeBlock) on normed rows x [rows][D] into y [rows][D] (the
 * layer's feed-forward output: the block alone, from zero): the router's logits F.linear in T and their sigmoid in T;
 * the choice the k largest of the float32 sums score + expert_bias (the float32 buffer; without use_expert_bias the
 * k largest scores), a tie the lower index; the weights the k scores, divided by (their sum + 1e-6) with
 * norm_topk_prob and times routed_scaling_factor, each step in T; y = Σ_j w_j · down_j(silu(gate_j x) · up_j x) in
 * T, added in increasing expert index (index_add_ over expert_hit). `src` is the layer whose router and experts
 * run (l itself, but under MC_STACK_GLUE_LFM2MOE_DENSE_SHIFTED). a is [Fe] scratch. */
static void moe_sigmoid_bias(const struct mc_stack *s, int64_t src, int64_t rows, const double *x, double *y, double *a)
{
    const struct mc_stack_moe *e = &s->cfg->moe;
    const int64_t D = s->D, E = e->n_experts, K = e->top_k, Fe = e->expert_size;
    const double *router = s->router[src], *bias = s->bias[src], *gu = s->gate_up[src], *dn = s->down[src];
    const int use_bias = e->expert_bias && bias != NULL && s->fault != MC_STACK_GLUE_LFM2MOE_EXPERT_BIAS_DROPPED;
    double score[MC_STACK_MAX_EXPERTS], choice[MC_STACK_MAX_EXPERTS], w[MC_STACK_MAX_TOP_K];
    double raw[MC_STACK_MAX_EXPERTS]; /* the router's sums */
    int64_t pick[MC_STACK_MAX_TOP_K];
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * D;
        double *yr = y + r * D;
        for (int64_t d = 0; d < D; d++)
            yr[d] = 0.0; /* torch.zeros_like(hidden_states) */
        dots(router, E, D, xr, raw);
        for (int64_t k = 0; k < E; k++) {
            score[k] = store(s, 1.0 / (1.0 + exp(-store(s, raw[k])))); /* router_logits.sigmoid(), in T */
            choice[k] = use_bias ? compute(s, score[k] + bias[k]) : score[k]; /* T + float32 -> float32 */
        }
        uint8_t taken[MC_STACK_MAX_EXPERTS] = {0};
        for (int64_t j = 0; j < K; j++)
            pick[j] = take_largest(choice, E, taken);
        double sum = 0.0;
        for (int64_t j = 0; j < K; j++) { /* torch.gather(routing_weights, ...): the uncorrected scores, in T */
            w[j] = s->fault == MC_STACK_GLUE_CORRECTION_BIAS_IN_WEIGHTS ? store(s, choice[pick[j]]) : score[pick[j]];
            sum = compute(s, sum + w[j]);
        }
        int renorm = e->renormalise != (s->fault == MC_STACK_GLUE_MOE_NOT_RENORMALISED);
        double den = store(s, store(s, sum) + 1e-6); /* routing_weights.sum(-1) + 1e-6, in T */
        for (int64_t j = 0; j < K; j++) {
            double v = renorm ? store(s, w[j] / den) : w[j];
            w[j] = store(s, v * e->routed_scaling); /* routing_weights * routed_scaling_factor, in T */
        }
        experts_add(s, gu, dn, E, K, Fe, pick, w, xr, a, yr); /* index_add_ over expert_hit */
    }
}

/* Inkling's MoE (MC_ROUTER_SIGMOID_SINK, InklingMoE) on normed rows x [rows][D] into y [rows][D] (from zero): the
 * float32 router over the E routed and S shared experts, the choice on the corrected sigmoid scores of the routed,
 * the weights the softmax of the log-sigmoids of the k chosen and the S shared logits, times route_scale and the
 * router's global_scale in float32, rounded to T (the sink dropped with MC_STACK_GLUE_INKLING_SINK_DROPPED: the k
 * weights over themselves, each shared expert's 1); the routed experts added in T in increasing index from zero, then
 * the shared experts' silu(gate x) · up x · γ through down, each step in T, summed in float32, rounded to T, added in
 * T. a is [Fe + D] scratch. */
static void moe_sigmoid_sink(const struct mc_stack *s, int64_t l, int64_t rows, const double *x, double *y, double *a)
{
    const struct mc_stack_moe *e = &s->cfg->moe;
    const int64_t D = s->D, E = e->n_experts, S = e->n_shared, K = e->top_k, Fe = e->expert_size;
    const double *router = s->router[l], *bias = s->bias[l], *gu = s->gate_up[l], *dn = s->down[l];
    const int no_gs = s->fault == MC_STACK_GLUE_INKLING_GLOBAL_SCALE_DROPPED;
    const int sink = s->fault != MC_STACK_GLUE_INKLING_SINK_DROPPED;
    const double scale = compute(s, e->routed_scaling * (no_gs ? 1.0 : s->rscale[l]));
    double z[MC_STACK_MAX_EXPERTS], choice[MC_STACK_MAX_EXPERTS], w[MC_STACK_MAX_TOP_K], ls[MC_STACK_MAX_TOP_K];
    double *sum32 = a + Fe; /* the shared experts' float32 sum, [D] */
    int64_t pick[MC_STACK_MAX_TOP_K];
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * D;
        double *yr = y + r * D;
        for (int64_t d = 0; d < D; d++)
            yr[d] = 0.0; /* torch.zeros_like(hidden_states) */
        dots(router, E + S, D, xr, z);
        for (int64_t k = 0; k < E + S; k++) { /* F.linear(flat.float(), weight.float()) */
            z[k] = compute(s, z[k]);
            if (k < E)
                choice[k] = compute(s, compute(s, 1.0 / (1.0 + exp(-z[k]))) + bias[k]);
        }
        uint8_t taken[MC_STACK_MAX_EXPERTS] = {0};
        for (int64_t j = 0; j < K; j++)
            pick[j] = take_largest(choice, E, taken);
        /* logsigmoid of the chosen and the shared logits, their softmax (exp(ls - logsumexp(ls))) */
        const int64_t n = K + (sink ? S : 0);
        double mx = -INFINITY, tot = 0.0;
        for (int64_t j = 0; j < n; j++) {
            double v = j < K ? z[pick[j]] : z[E + j - K];
            ls[j] = compute(s, v < 0.0 ? v - log1p(exp(v)) : -log1p(exp(-v)));
            mx = ls[j] > mx ? ls[j] : mx;
        }
        for (int64_t j = 0; j < n; j++)
            tot += exp(ls[j] - mx);
        const double lse = compute(s, mx + log(tot));
        for (int64_t j = 0; j < n; j++)
            w[j] = store(s, compute(s, compute(s, exp(compute(s, ls[j] - lse))) * scale));
        experts_add(s, gu, dn, E, K, Fe, pick, w, xr, a, yr); /* index_add_ in increasing expert index */
        for (int64_t d = 0; S > 0 && d < D; d++)
            sum32[d] = 0.0;
        for (int64_t k = 0; k < S; k++) { /* InklingSharedExperts: bmm in T, (act(gate) * up * gamma), down */
            const double *d0 = s->sh_d[l] + k * D * Fe;
            const double gam = sink ? w[K + k] : 1.0;
            moe_swiglu_expert(s, s->sh_g[l] + k * Fe * D, s->sh_u[l] + k * Fe * D, xr, Fe, a);
            for (int64_t f = 0; sink && f < Fe; f++)
                a[f] = store(s, a[f] * gam);
            for (int64_t d = 0; d < D; d++) {
                double acc = 0.0;
                for (int64_t f = 0; f < Fe; f++)
                    acc += d0[d * Fe + f] * a[f];
                sum32[d] = compute(s, sum32[d] + store(s, acc)); /* down.float().sum(dim=0) */
            }
        }
        for (int64_t d = 0; S > 0 && d < D; d++)
            yr[d] = store(s, yr[d] + store(s, sum32[d]));
    }
}

/* Inkling's mlp_sconv on the feed-forward's output y [rows][D] in place, over s->seq (its batch rows, or the packed
 * sequences on their slots), from the layer's windows (s->seq.win, [rows of the cache][D][K]) or zeros: per real
 * token u = y in float32, the window shifted in, y = T(u + Σ_j w[d][j] · window[d][j]); a padding token keeps y.
 * NOMEM when the zero windows cannot be had. */
static enum mc_backend_status ffn_sconv(struct mc_stack *s, int64_t l, double *y)
{
    const int64_t D = s->D, K = s->cfg->ffn_sconv;
    const struct mc_stack_packed *pk = s->seq.pk;
    const int64_t nrows = pk != NULL ? pk->n_seqs : s->seq.B;
    double *tmp = NULL, *win = s->seq.win;
    if (win == NULL) { /* no cache: every row from zeros */
        int64_t need = pk != NULL ? 0 : nrows;
        for (int64_t i = 0; pk != NULL && i < pk->n_seqs; i++)
            need = pk->slots[i] + 1 > need ? pk->slots[i] + 1 : need;
        if ((tmp = calloc((size_t)(need * D * K) + 1, sizeof *tmp)) == NULL)
            return MC_BACKEND_NOMEM;
        win = tmp;
    }
    const double *w = s->sconv[l];
    for (int64_t b = 0; b < nrows; b++) {
        const int64_t t0 = pk != NULL ? pk->cu_seqlens[b] : b * s->seq.L;
        const int64_t len = pk != NULL ? pk->cu_seqlens[b + 1] - t0 : s->seq.L;
        double *wb = win + (pk != NULL ? pk->slots[b] : b) * D * K;
        if (pk != NULL && len > 0 && !pk->has_initial_state[b])
            memset(wb, 0, (size_t)(D * K) * sizeof *wb);
        for (int64_t t = 0; t < len; t++) {
            if (pk == NULL && s->seq.mask != NULL && !s->seq.mask[t0 + t])
                continue;
            double *yt = y + (t0 + t) * D;
            for (int64_t d = 0; d < D; d++) {
                double *wd = wb + d * K, acc = 0.0, u = compute(s, yt[d]);
                memmove(wd, wd + 1, (size_t)(K - 1) * sizeof *wd);
                wd[K - 1] = u;
                for (int64_t j = 0; j < K; j++)
                    acc = compute(s, acc + compute(s, w[d * K + j] * wd[j]));
                yt[d] = store(s, compute(s, u + acc));
            }
        }
    }
    free(tmp);
    return MC_BACKEND_OK;
}

/* LFM2-MoE: layer l is the last dense layer before a MoE one (the dense-first boundary num_dense_layers - 1). */
static int lfm2moe_last_dense(const struct mc_stack_config *cfg, int64_t l)
{
    return cfg->type == MC_MODEL_LFM2_MOE && l + 1 < cfg->n_layers && cfg->layers[l].dense && cfg->layers[l + 1].moe;
}

/* The MoE of layer l on normed rows x [rows][D], added into y [rows][D] (the dense MLP's output, or zeros):
 * y = y + Σ_j w_j · expert_{e_j}(x), in the dtype (MC_ROUTER_TOPK_SOFTMAX, stackconfig.h). With moe.shared_gate
 * (Qwen3-Next) the experts are summed from zero in T and y, the shared expert's output, is first scaled by
 * sigmoid(shared_expert_gate x): y = Σ_j w_j · expert_{e_j}(x) + sigmoid(g · x) · y. a is [Fe + D] scratch. */
static void moe_forward(const struct mc_stack *s, int64_t l, int64_t rows, const double *x, double *y, double *a)
{
    if (s->cfg->moe.router == MC_ROUTER_SIGMOID_GROUPED) {
        moe_sigmoid_grouped(s, l, rows, x, y, a);
        return;
    }
    if (s->cfg->moe.router == MC_ROUTER_SIGMOID_BIAS) {
        moe_sigmoid_bias(s, l, rows, x, y, a);
        return;
    }
    if (s->cfg->moe.router == MC_ROUTER_SIGMOID_SINK) {
        moe_sigmoid_sink(s, l, rows, x, y, a);
        return;
    }
    const struct mc_stack_moe *e = &s->cfg->moe;
    const int64_t D = s->D, E = e->n_experts, K = e->top_k, Fe = e->expert_size;
    const double *router = s->router[l], *gu = s->gate_up[l], *dn = s->down[l];
    int64_t pick[MC_STACK_MAX_TOP_K];
    double logit[MC_STACK_MAX_EXPERTS], w[MC_STACK_MAX_TOP_K];
    const int gated = e->shared_gate;
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * D;
        double *yr = gated ? a + Fe : y + r * D; /* gated: the experts' sum, from zero (torch.zeros_like) */
        for (int64_t d = 0; gated && d < D; d++)
            yr[d] = 0.0;
        dots(router, E, D, xr, logit);
        for (int64_t k = 0; k < E; k++) { /* F.linear in T, then .float() */
            logit[k] = compute(s, store(s, logit[k]));
        }
        /* the k largest, larger first; a tie goes to the lower index (the higher one with the planted fault) */
        uint8_t taken[MC_STACK_MAX_EXPERTS] = {0};
        for (int64_t j = 0; j < K; j++) {
            int64_t best = -1;
            for (int64_t k = 0; k < E; k++)
                if (!taken[k] && (best < 0 || logit[k] > logit[best] ||
                                  (s->fault == MC_STACK_GLUE_ROUTER_TIE_HIGH && logit[k] == logit[best])))
                    best = k;
            taken[best] = 1;
            pick[j] = best;
        }
        /* the weights: a softmax over the k (MC_ROUTER_TOPK_SOFTMAX: they sum to 1), or the softmax over every
         * expert at the k (MC_ROUTER_SOFTMAX_TOPK), divided by their sum with renormalise; in float32, then
         * rounded to the dtype (.type_as / .to(hidden_states.dtype)). The top-k of a softmax is the top-k of the
         * logits it is taken of, so one pick serves both. */
        int over_all = e->router == MC_ROUTER_SOFTMAX_TOPK || s->fault == MC_STACK_GLUE_MOE_NOT_RENORMALISED;
        int renorm = e->router == MC_ROUTER_TOPK_SOFTMAX ? s->fault != MC_STACK_GLUE_MOE_NOT_RENORMALISED
                                                         : e->renormalise != (s->fault == MC_STACK_GLUE_MOE_NOT_RENORMALISED);
        double mx = logit[pick[0]], all = 0.0, sel = 0.0;
        for (int64_t k = 0; over_all && k < E; k++)
            all += exp(logit[k] - mx);
        for (int64_t j = 0; j < K; j++) {
            w[j] = over_all ? compute(s, exp(logit[pick[j]] - mx) / all) : exp(logit[pick[j]] - mx);
            sel += w[j];
        }
        for (int64_t j = 0; j < K; j++) /* MiniMax: the float32 weights as they are (weights_fp32) */
            w[j] = e->weights_fp32 ? compute(s, renorm ? w[j] / sel : w[j]) : store(s, compute(s, renorm ? w[j] / sel : w[j]));
        /* index_add_ in increasing expert index: the experts of this row in that order */
        experts_add(s, gu, dn, E, K, Fe, pick, w, xr, a, yr);
        if (gated) { /* expert_output + sigmoid(shared_expert_gate(x)) * shared_expert(x), each step in T */
            const double *gw = s->sgate[l];
            double gl = 0.0;
            for (int64_t d = 0; d < D; d++)
                gl += gw[d] * xr[d];
            gl = store(s, gl);
            double sg = s->fault == MC_STACK_GLUE_SHARED_GATE_SKIPPED ? 1.0 : store(s, 1.0 / (1.0 + exp(-gl)));
            for (int64_t d = 0; d < D; d++)
                y[r * D + d] = store(s, yr[d] + store(s, sg * y[r * D + d]));
        }
    }
}

/* The feed-forward after layer l's mixer: x the ffn_norm of h, y = w2(silu(w1 x) * w3 x) (the SwiGLU MLP,
 * Lfm2MLP / GraniteMoeHybrid's shared_mlp), plus the MoE on the same x where the layer has one, then
 * h += y (times residual_multiplier); every product stored in the model dtype. x and y are [rows][D] scratch. */
static enum mc_backend_status feed_forward(struct mc_stack *s, int64_t l, int64_t rows, double *h, double *x,
                                           double *y)
{
    int64_t D = s->D, F = s->cfg->layers[l].dense_size;
    const double *w1 = s->w1[l], *w3 = s->w3[l], *w2 = s->w2[l];
    int relu = s->cfg->ffn_act == MC_FFN_RELU2;
    double gm = s->fault == MC_STACK_GLUE_MLP_MULTIPLIERS_DROPPED ? 1.0 : s->cfg->mlp_gate_multiplier;
    double dm = s->fault == MC_STACK_GLUE_MLP_MULTIPLIERS_DROPPED ? 1.0 : s->cfg->mlp_down_multiplier;
    int64_t Fe = s->cfg->layers[l].moe ? s->cfg->moe.expert_size : 0;
    double *a = malloc((size_t)(F > Fe + D ? F : Fe + D) * sizeof *a); /* the MLP's [F], or the MoE's [Fe + D] */
    if (a == NULL)
        return MC_BACKEND_NOMEM;
    /* OLMo-Hybrid's attention layer: the norm on the MLP's output (on its input with the planted pre-norm order,
     * nowhere with the planted skip) */
    const int post = s->cfg->layers[l].post_norm && s->fault != MC_STACK_GLUE_POST_NORM_AS_PRE;
    if (post)
        for (int64_t i = 0; i < rows * D; i++)
            x[i] = store(s, h[i]);
    else
        block_norm(s, s->ffn_norm + l * D, h, rows, x);
    if (s->fault == MC_STACK_GLUE_LFM2MOE_DENSE_SHIFTED && lfm2moe_last_dense(s->cfg, l)) {
        moe_sigmoid_bias(s, l + 1, rows, x, y, a); /* the first MoE layer's router and experts, not this MLP */
        residual_add(s, h, y, (size_t)(rows * D));
        free(a);
        return MC_BACKEND_OK;
    }
    if (!s->cfg->layers[l].dense) /* the MoE alone (Jamba's JambaSparseMoeBlock) */
        memset(y, 0, (size_t)(rows * D) * sizeof *y);
    const int64_t R = s->cfg->layers[l].shared ? s->cfg->adapter_rank : 0;
    double *ad = R > 0 ? malloc((size_t)R * sizeof *ad) : NULL; /* the adapter's rank-r intermediate, in T */
    if (R > 0 && ad == NULL) {
        free(a);
        return MC_BACKEND_NOMEM;
    }
    for (int64_t r = 0; s->cfg->layers[l].dense && r < rows; r++) {
        const double *xr = x + r * D;
        for (int64_t k = 0; k < R; k++) { /* Zamba2MLP's adapter: B (A x), each product stored in T */
            double acc = 0.0;
            for (int64_t d = 0; d < D; d++)
                acc += s->ad_a[l][k * D + d] * xr[d];
            ad[k] = store(s, acc);
        }
        double gb[DOT_BLOCK], ub[DOT_BLOCK];
        for (int64_t f = 0; f < F; f++) {
            if (f % DOT_BLOCK == 0) { /* the next rows of gate_proj · x (none for relu², whose gate is 0) and up_proj · x */
                const int64_t nb = F - f < DOT_BLOCK ? F - f : DOT_BLOCK;
                if (relu)
                    memset(gb, 0, sizeof gb);
                else
                    dots(w1 + f * D, nb, D, xr, gb);
                dots(w3 + f * D, nb, D, xr, ub);
            }
            double g = store(s, gb[f % DOT_BLOCK]), u = store(s, ub[f % DOT_BLOCK]);
            if (R > 0) { /* gate_up_proj(x) + adapter(x), in T, then its halves */
                double ga = 0.0, ua = 0.0;
                for (int64_t k = 0; k < R; k++) {
                    ga += s->ad_b[l][f * R + k] * ad[k];
                    ua += s->ad_b[l][(F + f) * R + k] * ad[k];
                }
                g = store(s, g + store(s, ga));
                u = store(s, u + store(s, ua));
            }
            if (gm != 1.0) /* FalconH1MLP: gate_proj(x) * gate_multiplier before the SiLU */
                g = store(s, g * gm);
            if (s->cfg->ffn_act == MC_FFN_GELU) /* the exact erf GELU, stored in T, times up in T */
                a[f] = store(s, store(s, 0.5 * g * (1.0 + erf(g / sqrt(2.0)))) * u);
            else
                a[f] = relu ? relu2(s, u) : store(s, store(s, g / (1.0 + exp(-g))) * u); /* relu(up x)² or silu(g)·u */
        }
        double db[DOT_BLOCK];
        for (int64_t d = 0; d < D; d++) {
            if (d % DOT_BLOCK == 0) /* the next rows of down_proj · a */
                dots(w2 + d * F, D - d < DOT_BLOCK ? D - d : DOT_BLOCK, F, a, db);
            const double acc = db[d % DOT_BLOCK];
            y[r * D + d] = dm != 1.0 ? store(s, store(s, acc) * dm) : store(s, acc); /* down_proj(..) * down_multiplier */
            if (s->cfg->ffn_global_scale && s->fault != MC_STACK_GLUE_INKLING_GLOBAL_SCALE_DROPPED)
                y[r * D + d] = store(s, y[r * D + d] * s->gscale[l]); /* InklingMLP: down(..) * global_scale */
        }
    }
    if (Fe > 0) /* moe_hidden_states + shared_mlp(hidden_states) */
        moe_forward(s, l, rows, x, y, a);
    free(ad);
    if (s->cfg->layers[l].shared) { /* Zamba2: h (the attention's output) becomes T = linear(mlp); no residual add */
        for (int64_t r = 0; r < rows; r++) {
            for (int64_t d = 0; d < D; d++) { /* a: [max(F, D)] scratch, a row at a time */
                double acc = 0.0;
                for (int64_t k = 0; k < D; k++)
                    acc += s->lin[l][d * D + k] * y[r * D + k];
                a[d] = store(s, acc);
            }
            memcpy(h + r * D, a, (size_t)D * sizeof *a);
        }
        free(a);
        return MC_BACKEND_OK;
    }
    if (post && s->fault != MC_STACK_GLUE_FFN_POST_NORM_SKIPPED) { /* h + post_feedforward_layernorm(mlp(h)) */
        block_norm(s, s->ffn_norm + l * D, y, rows, x);
        memcpy(y, x, (size_t)(rows * D) * sizeof *y);
    }
    if (s->cfg->ffn_sconv > 0 && !(s->fault == MC_STACK_GLUE_INKLING_MLP_SCONV_SKIPPED && l == s->fault_layer) &&
        ffn_sconv(s, l, y) != MC_BACKEND_OK) { /* Inkling: mlp_sconv(mlp(x)) */
        free(a);
        return MC_BACKEND_NOMEM;
    }
    if (s->cfg->layers[l].scaled) /* MiniMax: mlp_alpha · post_attention_layernorm(h) + mlp_beta · moe */
        scaled_add(s, h, x, y, (size_t)(rows * D), s->cfg->mlp_alpha, s->cfg->mlp_beta);
    else
        residual_add(s, h, y, (size_t)(rows * D));
    free(a);
    return MC_BACKEND_OK;
}

/* Zamba2's application at entry l (stackconfig.h): c = cat(h, e) of the residual h and the original embeddings e
 * [B][L][D] each, its input_layernorm over 2D, the attention (the mixer, on 2D, its KV cache the entry's), the first
 * D of its output through pre_ff_layernorm, the MLP with the application's adapter and the layer's linear into
 * T [B][L][D]. */
static enum mc_backend_status shared_step(struct mc_stack *s, int64_t l, struct mc_cache *cache, int64_t B, int64_t L,
                                          const double *h, const double *e, const uint8_t *mask,
                                          const struct mc_stack_packed *pk, double *T, struct mc_msg *msg);

/* The slot whose in / out multipliers parallel slot l applies: its own, or its partner's with the planted swap. */
static const struct mc_stack_layer *multipliers_of(const struct mc_stack *s, int64_t l)
{
    if (s->fault != MC_STACK_GLUE_BRANCH_MULTIPLIERS_SWAPPED)
        return &s->cfg->layers[l];
    return &s->cfg->layers[s->cfg->layers[l].parallel == 1 ? l + 1 : l - 1];
}

/* A parallel slot's input: its block norm x [n] times its in multiplier m, in T (`times` times: 2 with the planted
 * fault). */
static void in_multiply(const struct mc_stack *s, double m, double *x, size_t n, int times)
{
    for (int t = 0; m != 1.0 && t < times; t++)
        for (size_t i = 0; i < n; i++)
            x[i] = store(s, x[i] * m);
}

/* A slot of FalconH1's parallel pair (struct mc_stack_layer.parallel): both read the block norm of the same h;
 * the first's output times its out multiplier (in T) goes to `held`, the second's is added to it (in T) and the
 * sum to the residual, in T; then the layer's feed-forward. */
static enum mc_backend_status parallel_step(struct mc_stack *s, int64_t l, struct mc_cache *cache, int64_t B,
                                            int64_t L, double *h, const uint8_t *mask, const struct mc_stack_packed *pk,
                                            double *x, double *y, double *held, struct mc_msg *msg)
{
    const struct mc_stack_layer *ly = &s->cfg->layers[l];
    size_t n = (size_t)(B * L * s->D);
    if (ly->parallel == 2 && s->fault == MC_STACK_GLUE_BRANCHES_SUMMED_BEFORE_NORM && l == s->fault_layer)
        for (size_t i = 0; i < n; i++) { /* the planted fault: the first branch in the residual before this one's norm */
            h[i] = store(s, h[i] + held[i]);
            held[i] = 0.0;
        }
    if (s->fault == MC_STACK_GLUE_BLOCK_NORM_SKIPPED && l == s->fault_layer)
        for (size_t i = 0; i < n; i++)
            x[i] = store(s, h[i]);
    else
        block_norm(s, s->norm + l * s->D, h, B * L, x);
    in_multiply(s, multipliers_of(s, l)->in_multiplier, x, n, s->fault == MC_STACK_GLUE_IN_MULTIPLIER_TWICE ? 2 : 1);
    enum mc_backend_status st = run_mixer(s, l, cache, B, L, x, mask, pk, y, msg);
    if (st != MC_BACKEND_OK)
        return st;
    int drop = s->fault == MC_STACK_GLUE_BRANCH_DROPPED && l == s->fault_layer;
    double om = s->fault == MC_STACK_GLUE_OUT_MULTIPLIER_DROPPED ? 1.0 : multipliers_of(s, l)->out_multiplier;
    for (size_t i = 0; i < n; i++) {
        double v = drop ? 0.0 : store(s, y[i] * om);
        if (ly->parallel == 1)
            held[i] = v;
        else
            held[i] = store(s, held[i] + v); /* mamba_hidden_states + attention_hidden_states */
    }
    if (ly->parallel == 1)
        return MC_BACKEND_OK;
    for (size_t i = 0; i < n; i++)
        h[i] = store(s, h[i] + held[i]); /* residual + hidden_states, in T */
    if (has_ffn(s->cfg, l) && (st = feed_forward(s, l, B * L, h, x, y)) == MC_BACKEND_NOMEM)
        snprintf(msg->text, sizeof msg->text, "out of memory in layer %lld's feed-forward", (long long)l);
    return st;
}

/* OLMo-Hybrid's attention layer l (struct mc_stack_layer.post_norm, Olmo3DecoderLayer): the mixer on the residual
 * in T, h + post_attention_layernorm(mixer(h)) (the norm dropped with MC_STACK_GLUE_BLOCK_NORM_SKIPPED at l), then
 * h + post_feedforward_layernorm(mlp(h)) (feed_forward). */
static enum mc_backend_status post_norm_step(struct mc_stack *s, int64_t l, struct mc_cache *cache, int64_t B,
                                             int64_t L, double *h, const double *hn, const uint8_t *mask,
                                             const struct mc_stack_packed *pk, double *x, double *y, struct mc_msg *msg)
{
    size_t n = (size_t)(B * L * s->D);
    const int pre = s->fault == MC_STACK_GLUE_POST_NORM_AS_PRE; /* the planted fault: Llama's order */
    if (pre)
        block_norm(s, s->norm + l * s->D, hn, B * L, x);
    else
        for (size_t i = 0; i < n; i++)
            x[i] = store(s, hn[i]);
    enum mc_backend_status st = run_mixer(s, l, cache, B, L, x, mask, pk, y, msg);
    if (st != MC_BACKEND_OK)
        return st;
    if (!pre && !(s->fault == MC_STACK_GLUE_BLOCK_NORM_SKIPPED && l == s->fault_layer)) {
        block_norm(s, s->norm + l * s->D, y, B * L, x);
        memcpy(y, x, n * sizeof *y);
    }
    residual_add(s, h, y, n);
    if (has_ffn(s->cfg, l) && (st = feed_forward(s, l, B * L, h, x, y)) == MC_BACKEND_NOMEM)
        snprintf(msg->text, sizeof msg->text, "out of memory in layer %lld's feed-forward", (long long)l);
    return st;
}

static enum mc_backend_status layer_step(struct mc_stack *s, int64_t l, struct mc_cache *cache, int64_t B, int64_t L,
                                         double *h, const uint8_t *mask, const struct mc_stack_packed *pk, double *x,
                                         double *y, const double *hn, double *held, struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    s->seq.B = B;
    s->seq.L = L;
    s->seq.mask = mask;
    s->seq.pk = pk;
    if (s->cfg->layers[l].parallel)
        return parallel_step(s, l, cache, B, L, h, mask, pk, x, y, held, msg);
    if (hn == NULL)
        hn = h; /* the block norm's input: the residual, or (Zamba2's hybrid Mamba2) h + T */
    if (s->cfg->layers[l].post_norm) /* OLMo-Hybrid's attention layer: h + norm(mixer(h)) */
        return post_norm_step(s, l, cache, B, L, h, hn, mask, pk, x, y, msg);
    if (mc_stack_layer_has_mixer(s->cfg, l)) { /* else the layer is its feed-forward alone (Nemotron-H's - and E) */
        if (s->fault == MC_STACK_GLUE_BLOCK_NORM_SKIPPED && l == s->fault_layer)
            for (int64_t i = 0; i < B * L * s->D; i++)
                x[i] = store(s, hn[i]);
        else
            block_norm(s, s->norm + l * s->D, hn, B * L, x);
        st = run_mixer(s, l, cache, B, L, x, mask, pk, y, msg);
        if (st == MC_BACKEND_OK && s->cfg->layers[l].scaled) /* MiniMax: alpha · input_layernorm(h) + beta · mixer */
            scaled_add(s, h, x, y, (size_t)(B * L * s->D), s->cfg->layers[l].alpha,
                       s->fault == MC_STACK_GLUE_MINIMAX_BETA_DROPPED && l == s->fault_layer ? 1.0
                                                                                           : s->cfg->layers[l].beta);
        else if (st == MC_BACKEND_OK)
            residual_add(s, h, y, (size_t)(B * L * s->D));
    }
    if (st == MC_BACKEND_OK && has_ffn(s->cfg, l) && (st = feed_forward(s, l, B * L, h, x, y)) == MC_BACKEND_NOMEM)
        snprintf(msg->text, sizeof msg->text, "out of memory in layer %lld's feed-forward", (long long)l);
    return st;
}

static enum mc_backend_status shared_step(struct mc_stack *s, int64_t l, struct mc_cache *cache, int64_t B, int64_t L,
                                          const double *h, const double *e, const uint8_t *mask,
                                          const struct mc_stack_packed *pk, double *T, struct mc_msg *msg)
{
    int64_t D = s->D, rows = B * L;
    size_t n2 = (size_t)(rows * 2 * D), n = (size_t)(rows * D);
    double *c = calloc(n2, sizeof *c), *x2 = malloc(n2 * sizeof *x2), *y2 = malloc(n2 * sizeof *y2);
    double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    enum mc_backend_status st = MC_BACKEND_NOMEM;
    if (c == NULL || x2 == NULL || y2 == NULL || x == NULL || y == NULL) {
        snprintf(msg->text, sizeof msg->text, "out of memory in layer %lld's shared block", (long long)l);
        goto out;
    }
    const double *first = s->fault == MC_STACK_GLUE_CONCAT_SWAPPED ? e : h;
    const double *second = s->fault == MC_STACK_GLUE_CONCAT_SWAPPED ? h : s->fault == MC_STACK_GLUE_CONCAT_DROPPED ? h : e;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t d = 0; d < D; d++) { /* torch.concatenate([hidden_states, original_hidden_states], -1), in T */
            c[r * 2 * D + d] = store(s, first[r * D + d]);
            c[r * 2 * D + D + d] = store(s, second[r * D + d]);
        }
    block_norm_n(s, s->norm2 + l * 2 * D, c, rows, 2 * D, x2);
    st = run_mixer(s, l, cache, B, L, x2, mask, pk, y2, msg);
    if (st != MC_BACKEND_OK)
        goto out;
    for (int64_t r = 0; r < rows; r++) /* o_proj's D outputs (the padded rows give zeros) */
        memcpy(T + r * D, y2 + r * 2 * D, (size_t)D * sizeof *T);
    if ((st = feed_forward(s, l, rows, T, x, y)) == MC_BACKEND_NOMEM)
        snprintf(msg->text, sizeof msg->text, "out of memory in layer %lld's shared block", (long long)l);
out:
    free(c);
    free(x2);
    free(y2);
    free(x);
    free(y);
    return st;
}

/* The block that runs at position l: l itself, or l + 1 with the planted pattern shift. */
static int64_t block_at(const struct mc_stack *s, int64_t l)
{
    return s->fault == MC_STACK_GLUE_PATTERN_SHIFTED ? (l + 1) % s->n : l;
}

/* mc_stack_forward and mc_stack_forward_packed (pk, batch = 1, len = T). */
static enum mc_backend_status stack_run(struct mc_stack *s, struct mc_stack_cache *c, int64_t batch, int64_t len,
                                        const int64_t *ids, const uint8_t *mask, const struct mc_stack_packed *pk,
                                        double *logits, double *hidden, struct mc_msg *msg)
{
    int64_t D = s->D, rows = batch * len;
    size_t n = (size_t)(rows * D);
    double *h = malloc(n * sizeof *h), *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    int par = 0; /* FalconH1's parallel slots hold the first branch's output for the second */
    for (int64_t k = 0; k < s->cfg->n_layers && !par; k++)
        par = s->cfg->layers[k].parallel != 0;
    double *tmp = malloc((size_t)D * sizeof *tmp), *held = par ? malloc(n * sizeof *held) : NULL;
    int zb = mc_stack_is_zamba(s->cfg), have_t = 0;
    double *e = zb ? malloc(n * sizeof *e) : NULL, *tz = zb ? malloc(n * sizeof *tz) : NULL;
    double *ht = zb ? malloc(n * sizeof *ht) : NULL; /* Zamba2: the embeddings, T, h + T */
    enum mc_backend_status st = MC_BACKEND_NOMEM;
    if (h == NULL || x == NULL || y == NULL || tmp == NULL || (par && held == NULL) || (zb && (e == NULL || tz == NULL || ht == NULL)))
        goto out;
    st = MC_BACKEND_OK;
    for (int64_t r = 0; r < rows; r++) {
        if (ids[r] < 0 || ids[r] >= s->V) {
            snprintf(msg->text, sizeof msg->text, "token id %lld outside the vocabulary", (long long)ids[r]);
            st = MC_BACKEND_INVALID;
            goto out;
        }
        memcpy(h + r * D, s->embed + ids[r] * D, (size_t)D * sizeof *h);
        /* inputs_embeds * embedding_multiplier, in T (applied once more with the planted fault) */
        int times = s->cfg->embedding_multiplier == 1.0                    ? 0
                    : s->fault == MC_STACK_GLUE_EMBEDDING_MULTIPLIER_TWICE ? 2
                                                                           : 1;
        for (int t = 0; t < times; t++)
            for (int64_t d = 0; d < D; d++)
                h[r * D + d] = store(s, h[r * D + d] * s->cfg->embedding_multiplier);
    }
    if (s->embed_norm != NULL && s->fault != MC_STACK_GLUE_INKLING_EMBED_NORM_SKIPPED) { /* InklingNormedEmbedding */
        block_norm(s, s->embed_norm, h, rows, x);
        memcpy(h, x, n * sizeof *h);
    }
    if (hidden != NULL)
        memcpy(hidden, h, n * sizeof *h);
    if (zb)
        memcpy(e, h, n * sizeof *h); /* original_hidden_states */
    for (int64_t l = 0; l < s->n && st == MC_BACKEND_OK; l++) {
        int64_t k = block_at(s, l);
        if (zb && s->cfg->layers[k].shared) { /* T, and h + T for the hybrid layer's Mamba2; h stays */
            st = shared_step(s, k, c ? c->layer[k] : NULL, batch, len, h, e, mask, pk, tz, msg);
            for (size_t i = 0; i < n; i++)
                ht[i] = store(s, h[i] + tz[i]);
            have_t = 1;
            if (st == MC_BACKEND_OK && hidden != NULL)
                memcpy(hidden + (size_t)(l + 1) * n, ht, n * sizeof *h);
            continue;
        }
        s->seq.win = c != NULL && c->glue != NULL ? c->glue + k * c->batch * s->D * s->cfg->ffn_sconv : NULL;
        st = layer_step(s, k, c ? c->layer[k] : NULL, batch, len, h, mask, pk, x, y,
                        zb && s->cfg->layers[k].hybrid && have_t ? ht : NULL, held, msg);
        s->seq.win = NULL;
        have_t = 0;
        if (st == MC_BACKEND_OK && hidden != NULL)
            memcpy(hidden + (size_t)(l + 1) * n, h, n * sizeof *h);
    }
    if (st == MC_BACKEND_OK)
        final_head(s, h, rows, logits, tmp);
out:
    if (st == MC_BACKEND_NOMEM)
        snprintf(msg->text, sizeof msg->text, "out of memory in the stack forward");
    free(h);
    free(x);
    free(y);
    free(tmp);
    free(e);
    free(tz);
    free(ht);
    free(held);
    return st;
}

enum mc_backend_status mc_stack_forward(struct mc_stack *s, struct mc_stack_cache *c, int64_t batch, int64_t len,
                                        const int64_t *ids, const uint8_t *mask, double *logits, double *hidden,
                                        struct mc_msg *msg)
{
    return stack_run(s, c, batch, len, ids, mask, NULL, logits, hidden, msg);
}

enum mc_backend_status mc_stack_forward_packed(struct mc_stack *s, struct mc_stack_cache *pool,
                                               const struct mc_stack_packed *pk, const int64_t *ids, double *logits,
                                               double *hidden, struct mc_msg *msg)
{
    return stack_run(s, pool, 1, pk->cu_seqlens[pk->n_seqs], ids, NULL, pk, logits, hidden, msg);
}

enum mc_backend_status mc_stack_layer_forward(struct mc_stack *s, int64_t layer, int64_t batch, int64_t len,
                                              const double *h_in, const uint8_t *mask, double *h_out,
                                              struct mc_msg *msg)
{
    size_t n = (size_t)(batch * len * s->D);
    double *x = calloc(n, sizeof *x), *y = malloc(n * sizeof *y), *held = malloc(n * sizeof *held);
    enum mc_backend_status st = MC_BACKEND_NOMEM;
    int64_t k = block_at(s, layer);
    const struct mc_stack_layer *Z = &s->cfg->layers[k];
    if (x != NULL && y != NULL && held != NULL && Z->shared) { /* h_in - layer n is the embeddings: h + T */
        for (size_t i = 0; i < n; i++) {
            h_out[i] = store(s, h_in[i]);
            x[i] = store(s, (h_in - (size_t)layer * n)[i]);
        }
        st = shared_step(s, k, NULL, batch, len, h_out, x, mask, NULL, y, msg);
        for (size_t i = 0; st == MC_BACKEND_OK && i < n; i++)
            h_out[i] = store(s, h_out[i] + y[i]);
    } else if (x != NULL && y != NULL && held != NULL && Z->hybrid && layer > 0) { /* h_in is h + T, h_in - n the residual h */
        double *hn = malloc(n * sizeof *hn);
        st = MC_BACKEND_NOMEM;
        if (hn != NULL) {
            for (size_t i = 0; i < n; i++) {
                h_out[i] = store(s, (h_in - n)[i]);
                hn[i] = store(s, h_in[i]);
            }
            st = layer_step(s, k, NULL, batch, len, h_out, mask, NULL, x, y, hn, held, msg);
        }
        free(hn);
    } else if (x != NULL && y != NULL && held != NULL) {
        for (size_t i = 0; i < n; i++)
            h_out[i] = s->cfg->residual_in_fp32 ? compute(s, h_in[i]) : store(s, h_in[i]);
        st = MC_BACKEND_OK;
        /* the second slot of a parallel pair is the whole decoder layer: its first slot runs first (and leaves the
         * residual as it was); the first slot alone leaves it as it was */
        if (Z->parallel == 2 && k > 0)
            st = layer_step(s, k - 1, NULL, batch, len, h_out, mask, NULL, x, y, NULL, held, msg);
        if (st == MC_BACKEND_OK)
            st = layer_step(s, k, NULL, batch, len, h_out, mask, NULL, x, y, NULL, held, msg);
    }
    free(x);
    free(y);
    free(held);
    return st;
}

enum mc_backend_status mc_stack_ffn_forward(struct mc_stack *s, int64_t layer, int64_t batch, int64_t len,
                                            const double *h_in, const uint8_t *mask, double *h_out,
                                            struct mc_msg *msg)
{
    const int64_t rows = batch * len;
    size_t n = (size_t)(rows * s->D);
    s->seq.B = batch;
    s->seq.L = len;
    s->seq.mask = mask;
    s->seq.pk = NULL;
    s->seq.win = NULL;
    for (size_t i = 0; i < n; i++)
        h_out[i] = s->cfg->residual_in_fp32 ? compute(s, h_in[i]) : store(s, h_in[i]);
    if (!has_ffn(s->cfg, layer))
        return MC_BACKEND_OK;
    double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    enum mc_backend_status st = x != NULL && y != NULL ? feed_forward(s, layer, rows, h_out, x, y) : MC_BACKEND_NOMEM;
    if (st == MC_BACKEND_NOMEM)
        snprintf(msg->text, sizeof msg->text, "out of memory in layer %lld's feed-forward", (long long)layer);
    free(x);
    free(y);
    return st;
}

enum mc_backend_status mc_stack_mixer_forward(struct mc_stack *s, int64_t layer, int64_t batch, int64_t len,
                                              const double *x, const uint8_t *mask, double *y, struct mc_msg *msg)
{
    if (!mc_stack_layer_has_mixer(s->cfg, layer)) { /* no mixer: its output is nothing (zeros) */
        memset(y, 0, (size_t)(batch * len * s->D) * sizeof *y);
        return MC_BACKEND_OK;
    }
    if (s->cfg->layers[layer].shared) { /* x [B][L][2D]; y the D outputs of o_proj */
        int64_t rows = batch * len, D = s->D;
        double *y2 = malloc((size_t)(rows * 2 * D) * sizeof *y2);
        if (y2 == NULL)
            return MC_BACKEND_NOMEM;
        enum mc_backend_status st = run_mixer(s, layer, NULL, batch, len, x, mask, NULL, y2, msg);
        for (int64_t r = 0; st == MC_BACKEND_OK && r < rows; r++)
            memcpy(y + r * D, y2 + r * 2 * D, (size_t)D * sizeof *y);
        free(y2);
        return st;
    }
    if (s->cfg->layers[layer].parallel) { /* a parallel branch reads its norm times its in multiplier */
        size_t n = (size_t)(batch * len * s->D);
        double *xm = malloc(n * sizeof *xm);
        if (xm == NULL)
            return MC_BACKEND_NOMEM;
        for (size_t i = 0; i < n; i++)
            xm[i] = store(s, x[i]);
        in_multiply(s, s->cfg->layers[layer].in_multiplier, xm, n, 1); /* the layer's own: the mixer's input */
        enum mc_backend_status st = run_mixer(s, layer, NULL, batch, len, xm, mask, NULL, y, msg);
        free(xm);
        return st;
    }
    return run_mixer(s, layer, NULL, batch, len, x, mask, NULL, y, msg);
}
