/*
 * mut_stack.c — the whole-stack backends of the mutant library (mut_stack.h): the correct stack and
 * glue mutants, each the correct stack with exactly one upstream-style glue bug (docs/models.md §5).
 *
 * The stack is transformers' `...ForCausalLM` for each model type (docs/models.md §1): embedding → per
 * layer block norm → mixer (the library's correct mixer of the layer's family, mutants.h) → residual →
 * [feed-forward norm → SwiGLU → residual] → final norm → head (tied or not). Storage f32 or bf16 (T);
 * with bf16 every tensor upstream stores in T is rounded to T (docs/models.md "Dtype rules"): the norms
 * read their input in T, normalise in float32, round, multiply by the T weight in T (Qwen3.5's
 * zero-centred norm multiplies by 1 + w in float32 before its one rounding); the mixers read and write
 * T; the residual adds in float32 with residual_in_fp32 (mamba2), else in T; the final norm of a
 * float32 residual stays float32 and the head reads it in T; the SwiGLU products are stored in T; the
 * logits are T values returned as f32. At f32 every step is float32.
 *
 * | backend name                | glue bug                                                                                   | applies to |
 * |-----------------------------|--------------------------------------------------------------------------------------------|------------|
 * | stack.correct               | none: the control                                                                          | all four   |
 * | stack.final-norm-skipped    | the final norm is not applied: the head reads the raw residual stream                      | all four   |
 * | stack.head-untied           | a tied model gets a head of its own (a fresh deterministic init) instead of the embedding | tied: lfm2 (untied models: the control) |
 * | stack.block-norm-skipped    | layer MUT_STACK_FAULT_LAYER (2)'s block norm is skipped: its mixer reads the residual      | all four   |
 * | stack.residual-not-fp32     | the residual is rounded to T after every add although residual_in_fp32                     | mamba2 at bf16 (else the control) |
 * | stack.positions-with-pads   | attention positions are the token's index in the padded row (cache_position), not the     | attention layers: lfm2, bamba, qwen3_5 |
 * |                             | number of real tokens before it: position_ids not derived from the mask                   |            |
 * | stack.state-not-carried     | on a forward from a primed cache, layer MUT_STACK_FAULT_LAYER (2) is not handed its cache: | all four   |
 * |                             | it starts from a zero window and state and its cache keeps the prefill's                  |            |
 * | stack.embedding-scaled      | the embedding output multiplied by sqrt(D) (Gemma's normaliser carried into another port)  | all four   |
 * | stack.norm-not-zero-centred | Qwen3.5's norms (block, feed-forward, final) multiply by w instead of 1 + w                | qwen3_5 (else the control) |
 * | stack.ffn-gate-up-swapped   | the feed-forward's gate and up projections swapped: down(silu(up x) · gate x)              | lfm2, bamba, qwen3_5 (mamba2: the control) |
 * | stack.copy-skips-attention  | cache_copy copies the conv windows and recurrent states but not the attention layers' KV   | lfm2, bamba, qwen3_5 (mamba2: the control) |
 * |                             | caches (a hybrid cache whose copy knows only the SSM states): the copy keeps its own      |            |
 *
 * The packed serving call (MC_CAP_STACK_PACKED) is a per-sequence loop: each sequence alone as a batch of one
 * from its slot or from zero, the slot written back (stack_forward_packed).
 *
 * The per-layer mixers are mixer models of mutants.c (mut_model_new), driven through the same
 * functions as the mixer backends (mut_forward, mut_cache_*); one stack cache holds one mixer cache per
 * layer (struct mc_cache.layer). hidden_states, mixer_inputs and mixer_outputs (MC_CAP_STACK_HIDDEN) are
 * written as the stack holds them (f32 values; at bf16 the T values the mixer's input and output and a T
 * residual hold).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mut_stack.h"
#include "mutants.h"

#define MUT_STACK_FAULT_LAYER 2

enum mut_stack_fault {
    MUT_STACK_NONE,
    MUT_STACK_FINAL_NORM_SKIPPED,
    MUT_STACK_HEAD_UNTIED,
    MUT_STACK_BLOCK_NORM_SKIPPED,
    MUT_STACK_RESIDUAL_NOT_FP32,
    MUT_STACK_POSITIONS_WITH_PADS,
    MUT_STACK_STATE_NOT_CARRIED,
    MUT_STACK_EMBEDDING_SCALED,
    MUT_STACK_NORM_NOT_ZERO_CENTRED,
    MUT_STACK_FFN_GATE_UP_SWAPPED,
    MUT_STACK_COPY_SKIPS_ATTENTION,
};

struct mut_stack_layer {
    struct mc_model *mixer;
    float *norm;                   /* [D] */
    float *ffn_norm, *w1, *w3, *w2; /* [D], [F][D], [F][D], [D][F]; NULL without a feed-forward */
};

struct mut_stack {
    struct mut_stack_config cfg;
    enum mut_stack_fault fault;
    enum mc_dtype dtype; /* storage: F32 or BF16 */
    int64_t n, D, V, F;
    float *embed;      /* [V][D] */
    float *head;       /* [V][D]: lm_head, the embedding when tied, or the mutant's own */
    int head_owned;    /* head is not embed */
    float *final_norm; /* [D] */
    struct mut_stack_layer *layers;
};

/* The value v takes stored in the model dtype. */
static float store(const struct mut_stack *s, float v)
{
    return s->dtype == MC_DTYPE_BF16 ? mut_bf16_round(v) : v;
}

static void stack_free(struct mut_stack *s)
{
    if (s == NULL)
        return;
    for (int64_t l = 0; s->layers != NULL && l < s->n; l++) {
        struct mut_stack_layer *ly = &s->layers[l];
        mut_model_destroy(ly->mixer);
        free(ly->norm);
        free(ly->ffn_norm);
        free(ly->w1);
        free(ly->w3);
        free(ly->w2);
    }
    free(s->layers);
    free(s->embed);
    if (s->head_owned)
        free(s->head);
    free(s->final_norm);
    free(s);
}

static void stack_model_destroy(struct mc_model *m)
{
    if (m == NULL)
        return;
    stack_free(m->impl);
    free(m);
}

/* ---- creation ---------------------------------------------------------------------------------------- */

static const struct mc_weight *find_weight(const struct mc_stack_desc *d, const char *name)
{
    for (int32_t i = 0; i < d->n_weights; i++)
        if (d->weights[i].name != NULL && strcmp(d->weights[i].name, name) == 0)
            return &d->weights[i];
    return NULL;
}

/* *out: a malloc'd f32 copy of checkpoint tensor `name` of `elems` elements (NULL with a message on error). */
static enum mc_backend_status glue_weight(const struct mc_stack_desc *d, const char *name, int64_t elems, float **out,
                                          struct mc_msg *msg)
{
    *out = NULL;
    const struct mc_weight *w = find_weight(d, name);
    if (w == NULL)
        return mut_fail(msg, MC_BACKEND_INVALID, "stack: missing weight '%s'", name);
    int64_t n = 1;
    for (int k = 0; k < w->ndim && k < MC_MAX_DIMS; k++)
        n *= w->dims[k];
    if (n != elems || w->data == NULL)
        return mut_fail(msg, MC_BACKEND_INVALID, "stack: weight '%s' has %lld elements, expected %lld", name,
                        (long long)n, (long long)elems);
    float *v = malloc((size_t)n * sizeof *v);
    if (v == NULL)
        return mut_fail(msg, MC_BACKEND_NOMEM, "stack: out of memory for weight '%s'", name);
    if (d->dtype == MC_DTYPE_BF16)
        for (int64_t i = 0; i < n; i++)
            v[i] = mut_bf16_to_f32(((const uint16_t *)w->data)[i]);
    else
        memcpy(v, w->data, (size_t)n * sizeof *v);
    *out = v;
    return MC_BACKEND_OK;
}

static const struct mut_family *family_impl(enum mc_family f)
{
    return f == MC_FAMILY_MAMBA2      ? &mut_mamba2_family
           : f == MC_FAMILY_GDN       ? &mut_gdn_family
           : f == MC_FAMILY_SHORTCONV ? &mut_shortconv_family
                                      : &mut_attention_family;
}

/* Layer l's mixer: every checkpoint tensor under its prefix, under the family's name. */
static enum mc_backend_status create_mixer(struct mut_stack *s, const struct mc_stack_desc *d, int64_t l,
                                           struct mc_msg *msg)
{
    const struct mut_stack_layer_config *lc = &s->cfg.layers[l];
    char prefix[MUT_STACK_NAME_LEN];
    mut_stack_name_mixer_prefix(&s->cfg, l, prefix);
    const size_t plen = strlen(prefix);
    struct mc_weight *w = malloc(((size_t)d->n_weights + 1) * sizeof *w);
    if (w == NULL)
        return mut_fail(msg, MC_BACKEND_NOMEM, "stack: out of memory creating layer %lld", (long long)l);
    int32_t nw = 0;
    for (int32_t i = 0; i < d->n_weights; i++)
        if (d->weights[i].name != NULL && strncmp(d->weights[i].name, prefix, plen) == 0) {
            w[nw] = d->weights[i];
            w[nw].name = mut_stack_mixer_param_name(&s->cfg, l, d->weights[i].name + plen);
            nw++;
        }
    const enum mut_fault fault = s->fault == MUT_STACK_POSITIONS_WITH_PADS && lc->family == MC_FAMILY_ATTENTION
                                     ? MUT_ROPE_PAD_POSITIONS
                                     : MUT_NONE;
    const struct mc_model_desc md = {.family = lc->family, .dtype = d->dtype, .config = &lc->u, .weights = w,
                                     .n_weights = nw, .threads = d->threads};
    struct mc_msg m = {{0}};
    enum mc_backend_status st = mut_model_new(family_impl(lc->family), fault, &md, &s->layers[l].mixer, &m);
    if (st != MC_BACKEND_OK) {
        s->layers[l].mixer = NULL;
        mut_fail(msg, st, "stack: layer %lld (prefix '%s'): %.400s", (long long)l, prefix, m.text);
    }
    free(w);
    return st;
}

/* A head of its own for MUT_STACK_HEAD_UNTIED: U(-1/sqrt(D), 1/sqrt(D)) from a fixed xorshift seed. */
static float *fresh_head(const struct mut_stack *s)
{
    float *h = malloc((size_t)(s->V * s->D) * sizeof *h);
    uint64_t x = 0x9e3779b97f4a7c15u;
    for (int64_t i = 0; h != NULL && i < s->V * s->D; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        h[i] = store(s, (float)(((double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0) / sqrt((double)s->D)));
    }
    return h;
}

static enum mc_backend_status stack_create(enum mut_stack_fault fault, const struct mc_stack_desc *d,
                                           struct mc_model **out, struct mc_msg *msg)
{
    if (d == NULL || out == NULL)
        return mut_fail(msg, MC_BACKEND_INVALID, "stack: stack_create needs a descriptor and an output");
    *out = NULL;
    if (d->dtype != MC_DTYPE_F32 && d->dtype != MC_DTYPE_BF16)
        return mut_fail(msg, MC_BACKEND_UNSUPPORTED, "stack: dtype %d is not supported (f32, bf16)", (int)d->dtype);
    if (d->n_weights < 0 || (d->n_weights > 0 && d->weights == NULL))
        return mut_fail(msg, MC_BACKEND_INVALID, "stack: bad weight list");
    struct mut_stack *s = calloc(1, sizeof *s);
    struct mc_model *m = calloc(1, sizeof *m);
    enum mc_backend_status st = MC_BACKEND_NOMEM;
    if (s == NULL || m == NULL) {
        mut_fail(msg, st, "stack: out of memory");
        goto fail;
    }
    if ((st = mut_stack_config_parse(d->model_type, d->config_json, &s->cfg, msg)) != MC_BACKEND_OK)
        goto fail;
    s->fault = fault;
    s->dtype = d->dtype;
    s->n = s->cfg.n_layers;
    s->D = s->cfg.hidden;
    s->V = s->cfg.vocab;
    s->F = s->cfg.ffn_size;
    const int64_t D = s->D, F = s->F;
    char name[MUT_STACK_NAME_LEN];
    mut_stack_name_embedding(&s->cfg, name);
    if ((st = glue_weight(d, name, s->V * D, &s->embed, msg)) != MC_BACKEND_OK)
        goto fail;
    mut_stack_name_final_norm(&s->cfg, name);
    if ((st = glue_weight(d, name, D, &s->final_norm, msg)) != MC_BACKEND_OK)
        goto fail;
    if (s->cfg.tied && fault == MUT_STACK_HEAD_UNTIED) {
        s->head_owned = 1;
        if ((s->head = fresh_head(s)) == NULL) {
            st = mut_fail(msg, MC_BACKEND_NOMEM, "stack: out of memory for the head");
            goto fail;
        }
    } else if (s->cfg.tied) { /* a tied checkpoint may still carry lm_head.weight; upstream uses the embedding */
        s->head = s->embed;
    } else {
        s->head_owned = 1;
        if ((st = glue_weight(d, "lm_head.weight", s->V * D, &s->head, msg)) != MC_BACKEND_OK)
            goto fail;
    }
    if ((s->layers = calloc((size_t)s->n, sizeof *s->layers)) == NULL) {
        st = mut_fail(msg, MC_BACKEND_NOMEM, "stack: out of memory");
        goto fail;
    }
    for (int64_t l = 0; l < s->n; l++) {
        struct mut_stack_layer *ly = &s->layers[l];
        mut_stack_name_block_norm(&s->cfg, l, name);
        if ((st = glue_weight(d, name, D, &ly->norm, msg)) != MC_BACKEND_OK)
            goto fail;
        if (F > 0) {
            float **dst[4] = {&ly->ffn_norm, &ly->w1, &ly->w3, &ly->w2};
            const int64_t elems[4] = {D, F * D, F * D, D * F};
            for (int part = 0; part < 4; part++) {
                mut_stack_name_ffn(&s->cfg, l, part, name);
                if ((st = glue_weight(d, name, elems[part], dst[part], msg)) != MC_BACKEND_OK)
                    goto fail;
            }
        }
        if ((st = create_mixer(s, d, l, msg)) != MC_BACKEND_OK)
            goto fail;
    }
    m->impl = s;
    m->D = D;
    *out = m;
    return MC_BACKEND_OK;
fail:
    stack_free(s);
    free(m);
    return st;
}

/* ---- the cache: one mixer cache per layer --------------------------------------------------------- */

static void stack_cache_free(struct mc_model *m, struct mc_cache *c)
{
    if (c == NULL)
        return;
    const struct mut_stack *s = m->impl;
    for (int64_t l = 0; c->layer != NULL && l < c->n_layers; l++)
        mut_cache_free(s->layers[l].mixer, c->layer[l]);
    free(c->layer);
    free(c);
}

static enum mc_backend_status stack_cache_alloc(struct mc_model *m, int64_t batch, struct mc_cache **out,
                                                struct mc_msg *msg)
{
    if (m == NULL || out == NULL || batch < 1)
        return mut_fail(msg, MC_BACKEND_INVALID, "stack: cache_alloc needs a model, an output and batch >= 1");
    const struct mut_stack *s = m->impl;
    struct mc_cache *c = calloc(1, sizeof *c);
    if (c == NULL || (c->layer = calloc((size_t)s->n, sizeof *c->layer)) == NULL) {
        free(c);
        return mut_fail(msg, MC_BACKEND_NOMEM, "stack: out of memory for a cache of batch %lld", (long long)batch);
    }
    c->batch = batch;
    c->n_layers = s->n;
    for (int64_t l = 0; l < s->n; l++) {
        enum mc_backend_status st = mut_cache_alloc(s->layers[l].mixer, batch, &c->layer[l], msg);
        if (st != MC_BACKEND_OK) {
            c->layer[l] = NULL;
            stack_cache_free(m, c);
            return st;
        }
    }
    *out = c;
    return MC_BACKEND_OK;
}

static enum mc_backend_status stack_cache_copy(struct mc_model *m, struct mc_cache *dst, const struct mc_cache *src,
                                               struct mc_msg *msg)
{
    const struct mut_stack *s = m->impl;
    if (dst == NULL || src == NULL || dst->batch != src->batch || dst->n_layers != src->n_layers)
        return mut_fail(msg, MC_BACKEND_INVALID, "stack: cache_copy needs two caches of the same batch");
    for (int64_t l = 0; l < s->n; l++) {
        if (s->fault == MUT_STACK_COPY_SKIPS_ATTENTION && s->cfg.layers[l].family == MC_FAMILY_ATTENTION)
            continue;
        enum mc_backend_status st = mut_cache_copy(s->layers[l].mixer, dst->layer[l], src->layer[l], msg);
        if (st != MC_BACKEND_OK)
            return st;
    }
    dst->primed = src->primed;
    dst->pos = src->pos;
    return MC_BACKEND_OK;
}

static enum mc_backend_status stack_cache_export(struct mc_model *m, const struct mc_cache *c, int64_t layer,
                                                 void *conv, void *state, struct mc_msg *msg)
{
    const struct mut_stack *s = m->impl;
    if (c == NULL || layer < 0 || layer >= s->n)
        return mut_fail(msg, MC_BACKEND_INVALID, "stack: cache_export of layer %lld (the stack has %lld)",
                        (long long)layer, (long long)s->n);
    return mut_cache_export(s->layers[layer].mixer, c->layer[layer], conv, state, msg);
}

/* ---- the glue ------------------------------------------------------------------------------------------ */

/* Qwen3_5RMSNorm's (1 + w), unless MUT_STACK_NORM_NOT_ZERO_CENTRED reads it as a plain RMSNorm. */
static int zero_centred(const struct mut_stack *s)
{
    return s->cfg.zero_centred && s->fault != MUT_STACK_NORM_NOT_ZERO_CENTRED;
}

/* RMSNorm of rows h [rows][D] into x [rows][D] with weight w [D]: the input in T, normalised in float32,
 * then w · x in T, or Qwen3.5's (1 + w) · x in float32 rounded once. */
static void block_norm(const struct mut_stack *s, const float *w, const float *h, int64_t rows, float *x)
{
    const int64_t D = s->D;
    for (int64_t r = 0; r < rows; r++) {
        const float *hr = h + r * D;
        double ss = 0.0;
        for (int64_t d = 0; d < D; d++) {
            const float v = store(s, hr[d]);
            ss += (double)v * v;
        }
        const float inv = 1.0f / sqrtf((float)(ss / (double)D) + (float)s->cfg.norm_eps);
        for (int64_t d = 0; d < D; d++) {
            const float n = store(s, hr[d]) * inv;
            x[r * D + d] = zero_centred(s) ? store(s, n * (1.0f + w[d])) : store(s, w[d] * store(s, n));
        }
    }
}

/* Final norm (skipped by MUT_STACK_FINAL_NORM_SKIPPED) and head of residual rows h [rows][D] into logits
 * [rows][V]; x [rows][D] scratch. */
static void final_head(const struct mut_stack *s, const float *h, int64_t rows, float *x, float *logits)
{
    const int64_t D = s->D;
    const int skip = s->fault == MUT_STACK_FINAL_NORM_SKIPPED;
    const int fp32 = s->cfg.residual_in_fp32 && s->fault != MUT_STACK_RESIDUAL_NOT_FP32;
    for (int64_t r = 0; r < rows; r++) {
        const float *hr = h + r * D;
        double ss = 0.0;
        for (int64_t d = 0; d < D; d++)
            ss += (double)hr[d] * hr[d];
        const float inv = skip ? 1.0f : 1.0f / sqrtf((float)(ss / (double)D) + (float)s->cfg.norm_eps);
        for (int64_t d = 0; d < D; d++) {
            const float w = skip ? (zero_centred(s) ? 0.0f : 1.0f) : s->final_norm[d];
            float y;
            if (zero_centred(s))
                y = hr[d] * inv * (1.0f + w);
            else if (fp32) /* weight (T) * float32 promotes: the norm of a float32 residual stays float32 */
                y = w * (hr[d] * inv);
            else
                y = store(s, w * store(s, hr[d] * inv));
            x[r * D + d] = store(s, y); /* lm_head reads T */
        }
    }
    mut_linear(x, rows, D, s->head, NULL, s->V, logits);
    for (int64_t i = 0; i < rows * s->V; i++)
        logits[i] = store(s, logits[i]);
}

/* h += y (n values): float32 with residual_in_fp32, else rounded to T. */
static void residual_add(const struct mut_stack *s, float *h, const float *y, int64_t n)
{
    const int fp32 = s->cfg.residual_in_fp32 && s->fault != MUT_STACK_RESIDUAL_NOT_FP32;
    for (int64_t i = 0; i < n; i++)
        h[i] = fp32 ? h[i] + y[i] : store(s, h[i] + y[i]);
}

/* The SwiGLU block after layer l's mixer: h += w2(silu(w1 x) · w3 x), x the feed-forward norm of h, each
 * product stored in T. x [rows][D], g and u [rows][F], y [rows][D] scratch. */
static void feed_forward(const struct mut_stack *s, const struct mut_stack_layer *ly, int64_t rows, float *h, float *x,
                         float *g, float *u, float *y)
{
    const int64_t D = s->D, F = s->F;
    block_norm(s, ly->ffn_norm, h, rows, x);
    const int swapped = s->fault == MUT_STACK_FFN_GATE_UP_SWAPPED;
    mut_linear(x, rows, D, swapped ? ly->w3 : ly->w1, NULL, F, g);
    mut_linear(x, rows, D, swapped ? ly->w1 : ly->w3, NULL, F, u);
    for (int64_t i = 0; i < rows * F; i++)
        g[i] = store(s, store(s, mut_silu(store(s, g[i]))) * store(s, u[i]));
    mut_linear(g, rows, F, ly->w2, NULL, D, y);
    for (int64_t i = 0; i < rows * D; i++)
        y[i] = store(s, y[i]);
    residual_add(s, h, y, rows * D);
}

/* Layer l's mixer over x [B][L][D] (T values) into y [B][L][D] (T values). */
static enum mc_backend_status run_mixer(const struct mut_stack *s, int64_t l, struct mc_cache *cache,
                                        const struct mc_stack_args *a, const float *x, float *y, uint16_t *tmp,
                                        struct mc_msg *msg)
{
    const int64_t n = a->batch * a->len * s->D;
    const int bf16 = s->dtype == MC_DTYPE_BF16;
    if (bf16)
        for (int64_t i = 0; i < n; i++)
            tmp[i] = mut_f32_to_bf16(x[i]);
    struct mc_forward_args fa = {.batch = a->batch, .len = a->len, .x = bf16 ? (const void *)tmp : (const void *)x,
                                 .mask = a->mask, .y = bf16 ? (void *)(tmp + n) : (void *)y};
    struct mc_msg m = {{0}};
    enum mc_backend_status st = mut_forward(s->layers[l].mixer, cache, &fa, &m);
    if (st != MC_BACKEND_OK)
        return mut_fail(msg, st, "stack: layer %lld: %.400s", (long long)l, m.text);
    if (bf16)
        for (int64_t i = 0; i < n; i++)
            y[i] = mut_bf16_to_f32(tmp[n + i]);
    return MC_BACKEND_OK;
}

static enum mc_backend_status stack_forward(struct mc_model *m, struct mc_cache *c, const struct mc_stack_args *a,
                                            struct mc_msg *msg)
{
    if (m == NULL || a == NULL || a->batch < 1 || a->len < 1 || a->input_ids == NULL || a->logits == NULL)
        return mut_fail(msg, MC_BACKEND_INVALID, "stack: forward needs a model, input_ids, logits, batch >= 1, len >= 1");
    const struct mut_stack *s = m->impl;
    if (c != NULL && c->batch != a->batch)
        return mut_fail(msg, MC_BACKEND_INVALID, "stack: cache batch %lld, forward batch %lld", (long long)c->batch,
                        (long long)a->batch);
    const int64_t rows = a->batch * a->len, D = s->D, n = rows * D;
    for (int64_t r = 0; r < rows; r++)
        if (a->input_ids[r] < 0 || a->input_ids[r] >= s->V)
            return mut_fail(msg, MC_BACKEND_INVALID, "stack: token id %lld at %lld is outside the vocabulary [0, %lld)",
                            (long long)a->input_ids[r], (long long)r, (long long)s->V);
    const int64_t F = s->F > 0 ? s->F : 1;
    float *h = malloc((size_t)n * sizeof *h), *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    float *g = malloc((size_t)(rows * F) * sizeof *g), *u = malloc((size_t)(rows * F) * sizeof *u);
    uint16_t *tmp = s->dtype == MC_DTYPE_BF16 ? malloc((size_t)(2 * n) * sizeof *tmp) : NULL;
    enum mc_backend_status st = MC_BACKEND_OK;
    if (!h || !x || !y || !g || !u || (s->dtype == MC_DTYPE_BF16 && !tmp)) {
        st = mut_fail(msg, MC_BACKEND_NOMEM, "stack: out of memory for a forward of B=%lld L=%lld", (long long)a->batch,
                      (long long)a->len);
        goto out;
    }
    float *hidden = a->hidden_states, *mixer_in = a->mixer_inputs, *mixer_out = a->mixer_outputs;
    for (int64_t r = 0; r < rows; r++)
        memcpy(h + r * D, s->embed + a->input_ids[r] * D, (size_t)D * sizeof *h);
    if (s->fault == MUT_STACK_EMBEDDING_SCALED)
        for (int64_t i = 0; i < n; i++)
            h[i] = store(s, h[i] * sqrtf((float)D));
    if (hidden != NULL)
        memcpy(hidden, h, (size_t)n * sizeof *h);
    const int continued = c != NULL && c->primed;
    for (int64_t l = 0; l < s->n && st == MC_BACKEND_OK; l++) {
        const struct mut_stack_layer *ly = &s->layers[l];
        struct mc_cache *lc = c != NULL ? c->layer[l] : NULL;
        if (s->fault == MUT_STACK_STATE_NOT_CARRIED && l == MUT_STACK_FAULT_LAYER && continued)
            lc = NULL;
        if (s->fault == MUT_STACK_BLOCK_NORM_SKIPPED && l == MUT_STACK_FAULT_LAYER)
            for (int64_t i = 0; i < n; i++)
                x[i] = store(s, h[i]);
        else
            block_norm(s, ly->norm, h, rows, x);
        if (mixer_in != NULL)
            memcpy(mixer_in + (size_t)(l * n), x, (size_t)n * sizeof *x);
        if ((st = run_mixer(s, l, lc, a, x, y, tmp, msg)) != MC_BACKEND_OK)
            break;
        if (mixer_out != NULL)
            memcpy(mixer_out + (size_t)(l * n), y, (size_t)n * sizeof *y);
        residual_add(s, h, y, n);
        if (s->F > 0)
            feed_forward(s, ly, rows, h, x, g, u, y);
        if (hidden != NULL)
            memcpy(hidden + (size_t)((l + 1) * n), h, (size_t)n * sizeof *h);
    }
    if (st == MC_BACKEND_OK) {
        final_head(s, h, rows, x, a->logits);
        if (c != NULL) {
            c->primed = 1;
            c->pos += a->len;
        }
    }
out:
    free(h);
    free(x);
    free(y);
    free(g);
    free(u);
    free(tmp);
    return st;
}

/* ---- the packed serving call ------------------------------------------------------------------------- */

/* Row `row` of every layer cache of `from` into row `to` of `into` (windows and states). */
static void copy_row(const struct mut_stack *s, struct mc_cache *into, int64_t to, const struct mc_cache *from,
                     int64_t row)
{
    for (int64_t l = 0; l < s->n; l++) {
        const struct mc_model *mx = s->layers[l].mixer;
        memcpy(into->layer[l]->window + to * mx->win_elems, from->layer[l]->window + row * mx->win_elems,
               (size_t)mx->win_elems * sizeof(float));
        if (mx->state_elems)
            memcpy(into->layer[l]->state + to * mx->state_elems, from->layer[l]->state + row * mx->state_elems,
                   (size_t)mx->state_elems * sizeof(float));
    }
}

/* The packed call as a serving engine's per-sequence loop: each sequence alone as a batch of one on a
 * one-row cache, seeded from its slot (has_initial_state) or fresh, its slot written back afterwards. */
static enum mc_backend_status stack_forward_packed(struct mc_model *m, struct mc_cache *pool,
                                                   const struct mc_stack_packed_args *a, struct mc_msg *msg)
{
    if (m == NULL || pool == NULL || a == NULL || a->n_seqs < 0 || (a->n_seqs > 0 && (a->cu_seqlens == NULL ||
        a->slots == NULL || a->has_initial_state == NULL || a->input_ids == NULL || a->logits == NULL)))
        return mut_fail(msg, MC_BACKEND_INVALID, "stack: forward_packed needs a model, a pool and the packed arguments");
    const struct mut_stack *s = m->impl;
    const int64_t n = a->n_seqs, D = s->D, V = s->V;
    if (n > 0 && a->cu_seqlens[0] != 0)
        return mut_fail(msg, MC_BACKEND_INVALID, "stack: cu_seqlens[0] is %lld, not 0", (long long)a->cu_seqlens[0]);
    for (int64_t i = 0; i < n; i++) {
        if (a->cu_seqlens[i + 1] < a->cu_seqlens[i])
            return mut_fail(msg, MC_BACKEND_INVALID, "stack: cu_seqlens decreases at %lld", (long long)(i + 1));
        if (a->slots[i] < 0 || a->slots[i] >= pool->batch)
            return mut_fail(msg, MC_BACKEND_INVALID, "stack: slot %lld of sequence %lld outside the pool of %lld rows",
                            (long long)a->slots[i], (long long)i, (long long)pool->batch);
        for (int64_t j = 0; j < i; j++)
            if (a->slots[j] == a->slots[i])
                return mut_fail(msg, MC_BACKEND_INVALID, "stack: slot %lld given to sequences %lld and %lld",
                                (long long)a->slots[i], (long long)j, (long long)i);
    }
    const int64_t T = n > 0 ? a->cu_seqlens[n] : 0;
    struct mc_cache *one = NULL;
    float *hidden = NULL;
    enum mc_backend_status st = stack_cache_alloc(m, 1, &one, msg);
    if (st == MC_BACKEND_OK && a->hidden_states != NULL && T > 0 &&
        (hidden = malloc((size_t)((s->n + 1) * T * D) * sizeof *hidden)) == NULL)
        st = mut_fail(msg, MC_BACKEND_NOMEM, "stack: out of memory for a packed call of %lld tokens", (long long)T);
    for (int64_t i = 0; i < n && st == MC_BACKEND_OK; i++) {
        const int64_t t0 = a->cu_seqlens[i], len = a->cu_seqlens[i + 1] - t0;
        if (len == 0)
            continue;
        const int from_slot = a->has_initial_state[i] != 0;
        one->primed = from_slot;
        one->pos = from_slot ? pool->pos : 0;
        for (int64_t l = 0; l < s->n; l++) {
            one->layer[l]->primed = from_slot && pool->layer[l]->primed;
            one->layer[l]->pos = one->layer[l]->primed ? pool->layer[l]->pos : 0;
        }
        if (from_slot)
            copy_row(s, one, 0, pool, a->slots[i]);
        const struct mc_stack_args sa = {.batch = 1, .len = len, .input_ids = a->input_ids + t0,
                                         .logits = (float *)a->logits + t0 * V, .hidden_states = hidden};
        if ((st = stack_forward(m, one, &sa, msg)) != MC_BACKEND_OK)
            break;
        copy_row(s, pool, a->slots[i], one, 0);
        for (int64_t l = 0; l < s->n; l++) /* the slot now holds a state: the pool is primed */
            pool->layer[l]->primed = 1;
        pool->primed = 1;
        for (int64_t k = 0; hidden != NULL && k <= s->n; k++) /* [n+1][1][len][D] into [n+1][T][D] */
            memcpy((float *)a->hidden_states + (size_t)((k * T + t0) * D), hidden + (size_t)(k * len * D),
                   (size_t)(len * D) * sizeof *hidden);
    }
    free(hidden);
    if (one != NULL)
        stack_cache_free(m, one);
    return st;
}

/* ---- the backends ------------------------------------------------------------------------------------- */

#define STACK_LIST(X)                                                                                                  \
    X(correct, "stack.correct", MUT_STACK_NONE)                                                                        \
    X(final_norm, "stack.final-norm-skipped", MUT_STACK_FINAL_NORM_SKIPPED)                                            \
    X(head_untied, "stack.head-untied", MUT_STACK_HEAD_UNTIED)                                                         \
    X(block_norm, "stack.block-norm-skipped", MUT_STACK_BLOCK_NORM_SKIPPED)                                            \
    X(residual, "stack.residual-not-fp32", MUT_STACK_RESIDUAL_NOT_FP32)                                                \
    X(positions, "stack.positions-with-pads", MUT_STACK_POSITIONS_WITH_PADS)                                           \
    X(state, "stack.state-not-carried", MUT_STACK_STATE_NOT_CARRIED)                                                   \
    X(embedding, "stack.embedding-scaled", MUT_STACK_EMBEDDING_SCALED)                                                 \
    X(zero_centred, "stack.norm-not-zero-centred", MUT_STACK_NORM_NOT_ZERO_CENTRED)                                    \
    X(gate_up, "stack.ffn-gate-up-swapped", MUT_STACK_FFN_GATE_UP_SWAPPED)                                             \
    X(copy, "stack.copy-skips-attention", MUT_STACK_COPY_SKIPS_ATTENTION)

#define STACK_CREATE(id, nm, fault_)                                                                                   \
    static enum mc_backend_status create_##id(const struct mc_stack_desc *d, struct mc_model **m, struct mc_msg *msg)  \
    {                                                                                                                  \
        return stack_create(fault_, d, m, msg);                                                                        \
    }
STACK_LIST(STACK_CREATE)
#undef STACK_CREATE

#define STACK_OPS(id, nm, fault_)                                                                                      \
    {                                                                                                                  \
        .abi_version = MIXCHECK_ABI_VERSION,                                                                           \
        .struct_size = sizeof(struct mc_backend_ops),                                                                  \
        .name = nm,                                                                                                    \
        .device = "cpu",                                                                                               \
        .family = MC_FAMILY_STACK,                                                                                     \
        .dtypes = MC_DTYPE_BIT(MC_DTYPE_F32) | MC_DTYPE_BIT(MC_DTYPE_BF16),                                            \
        .caps = MC_CAP_STACK | MC_CAP_STACK_HIDDEN | MC_CAP_STACK_PACKED,                                              \
        .model_destroy = stack_model_destroy,                                                                          \
        .cache_alloc = stack_cache_alloc,                                                                              \
        .cache_copy = stack_cache_copy,                                                                                \
        .cache_free = stack_cache_free,                                                                                \
        .stack_create = create_##id,                                                                                   \
        .stack_forward = stack_forward,                                                                                \
        .stack_cache_export = stack_cache_export,                                                                      \
        .stack_forward_packed = stack_forward_packed,                                                                  \
    },
static const struct mc_backend_ops stack_ops[] = {STACK_LIST(STACK_OPS)};
#undef STACK_OPS

const struct mc_backend_ops *const *mut_stack_backends(size_t *n)
{
    static const struct mc_backend_ops *all[sizeof stack_ops / sizeof stack_ops[0]];
    for (size_t i = 0; i < sizeof stack_ops / sizeof stack_ops[0]; i++)
        all[i] = &stack_ops[i];
    *n = sizeof stack_ops / sizeof stack_ops[0];
    return all;
}
