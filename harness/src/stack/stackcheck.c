/* stackcheck.c — see stackcheck.h. */
#include "stack/stackcheck.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/dtype.h"
#include "verdict/compare.h"
#include "base/rng.h"
#include "stack/stack.h"
#include "stack/stackport.h"

struct sess {
    const struct mc_stack_ctx *ctx;
    const struct mc_stack_golden *g;
    struct mc_check_result *res;
    struct mc_error *err;
    /* the stack under test: the engine with its layer backends (st), or a whole-stack backend (port). In
     * port mode st is, once localisation needs it, the stack the port's layers are compared with: every
     * layer on the reference in the check's dtype (f16/bf16: the reference stack of that dtype). */
    struct mc_stack *st;
    struct mc_stack_port *port;
    int hidden_ok;           /* the stack under test gives hidden states (a port may not) */
    struct mc_stack *ref_st; /* f16/bf16: the reference stack in the same dtype (NULL: none) */
    double *ref_ho, *ref_mi, *ref_mo; /* port mode: the port's hidden states, mixer inputs and outputs of ref_prefill */
    int ref_level;           /* the smallest hidden level leaving ref_hidden_states' tolerance (-1: none) */
    int64_t ref_token, ref_row;
    int ref_logits_failed;
    struct mc_tolerance tol[MC_TENSOR_COUNT];
    int broken;
    int64_t B, L, V, D, n;
    /* localisation: the smallest failing hidden level (0 = embedding, j = after layer j - 1) */
    int loc_level;
    int64_t loc_token, loc_row;
    double level_headroom[MC_STACK_MAX_LAYERS + 1]; /* worst headroom of each hidden level */
    int logits_failed;
    int64_t logits_token, logits_row;
    int64_t state_layer, state_pos; /* the first layer whose cache failed (-1: none), at position state_pos */
    const char *state_tensor;
    char run[160];
};

/* One cache of the stack under test. */
struct scache {
    int64_t batch;
    struct mc_stack_cache eng; /* the engine's: one per layer */
    struct mc_cache *port;     /* a whole-stack backend's: one for every layer */
};

/* ---- results ------------------------------------------------------------------------------------ */

static struct mc_tensor_result *tensor(struct sess *s, const char *name, enum mc_tensor_kind kind)
{
    struct mc_check_result *r = s->res;
    for (int i = 0; i < r->n_tensors; i++)
        if (strcmp(r->tensors[i].name, name) == 0)
            return &r->tensors[i];
    if (r->n_tensors == MC_CHECK_MAX_TENSORS) {
        mc_error_set(s->err, MC_ERR_INTERNAL, "check compares more than %d tensors", MC_CHECK_MAX_TENSORS);
        s->broken = 1;
        return NULL;
    }
    struct mc_tensor_result *t = &r->tensors[r->n_tensors++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->tol = s->tol[kind];
    mc_compare_stats_init(&t->stats);
    return t;
}

/* Merges one comparison; returns 1 when it passed. */
static int compare(struct sess *s, const char *name, enum mc_tensor_kind kind, const double *actual,
                   const double *expected, const struct mc_compare_view *view, struct mc_compare_stats *out)
{
    struct mc_tensor_result *t = tensor(s, name, kind);
    if (t == NULL)
        return 1;
    struct mc_compare_stats one;
    mc_compare_stats_init(&one);
    mc_compare_accumulate(actual, expected, view, t->tol, &one);
    mc_compare_stats_merge(&t->stats, &one);
    t->comparisons++;
    int ok = mc_compare_passed(&one);
    if (!ok && s->res->first_fail_tensor[0] == '\0') {
        snprintf(s->res->first_fail_tensor, sizeof s->res->first_fail_tensor, "%s", t->name);
        s->res->first_fail = one;
        snprintf(s->res->detail, sizeof s->res->detail, "%s", s->run[0] ? s->run : "the scenario's only run");
    }
    if (out != NULL)
        *out = one;
    return ok;
}

static void backend_failed(struct sess *s, enum mc_backend_status st, const struct mc_msg *msg, const char *what)
{
    if (s->broken)
        return;
    s->broken = 1;
    if (st == MC_BACKEND_NOMEM && msg->text[0] == '\0') {
        mc_error_set(s->err, MC_ERR_NOMEM, "out of memory");
        return;
    }
    s->res->status = st == MC_BACKEND_UNSUPPORTED ? MC_CHECK_UNSUPPORTED : MC_CHECK_ERROR;
    snprintf(s->res->message, sizeof s->res->message, "%s: %s", what, msg->text[0] ? msg->text : "failed");
}

static void *xcalloc(struct sess *s, size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (p == NULL) {
        mc_error_set(s->err, MC_ERR_NOMEM, "out of memory");
        s->broken = 1;
    }
    return p;
}

static void run_label(struct sess *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void run_label(struct sess *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->run, sizeof s->run, fmt, ap);
    va_end(ap);
}

/* ---- the stack under test ------------------------------------------------------------------------ */

static enum mc_backend_status sut_forward(struct sess *s, struct scache *c, int64_t batch, int64_t len,
                                          const int64_t *ids, const uint8_t *mask, double *logits, double *hidden,
                                          double *mixer_in, double *mixer_out, struct mc_msg *msg)
{
    struct mc_stack_port_out out = {.hidden = hidden, .mixer_in = mixer_in, .mixer_out = mixer_out};
    if (s->port != NULL)
        return mc_stack_port_forward(s->port, c ? c->port : NULL, batch, len, ids, mask, logits, &out, msg);
    return mc_stack_forward(s->st, c ? &c->eng : NULL, batch, len, ids, mask, logits, hidden, msg);
}

static enum mc_backend_status sut_cache_export(struct sess *s, const struct scache *c, int64_t layer, double *conv,
                                               double *state, struct mc_msg *msg)
{
    if (s->port != NULL)
        return mc_stack_port_cache_export(s->port, c->port, c->batch, layer, conv, state, msg);
    return mc_stack_cache_export(s->st, &c->eng, layer, conv, state, msg);
}

/* The packed call (stack.h struct mc_stack_packed) of the stack under test on the pool. */
static enum mc_backend_status sut_forward_packed(struct sess *s, struct scache *pool, const struct mc_stack_packed *pk,
                                                 const int64_t *ids, double *logits, double *hidden, struct mc_msg *msg)
{
    if (s->port != NULL)
        return mc_stack_port_forward_packed(s->port, pool->port, pk->n_seqs, pk->cu_seqlens, pk->slots,
                                            pk->has_initial_state, ids, logits, hidden, msg);
    return mc_stack_forward_packed(s->st, &pool->eng, pk, ids, logits, hidden, msg);
}

/* The name of what layer l runs on, for diagnoses. */
static const char *layer_backend(const struct sess *s, int64_t l)
{
    if (!mc_stack_layer_has_mixer(&s->g->config, l))
        return "the stack engine"; /* a feed-forward block: no mixer, no backend */
    return s->port != NULL ? s->ctx->ops->name : mc_stack_layer_ops(s->st, l)->name;
}

/* "mamba2 mixer on" / "MoE block without a mixer, on": what layer l is, for diagnoses. */
/* A localisation's sentence into r->diagnosis, cut at its size (a long layer name and a long message may not
 * both fit; the start, which names the layer and the part, always does). */
__attribute__((format(printf, 2, 3))) static void say(struct mc_check_result *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->diagnosis, sizeof r->diagnosis, fmt, ap);
    va_end(ap);
}

static const char *layer_kind(const struct sess *s, int64_t l, char buf[64])
{
    const struct mc_stack_config *cfg = &s->g->config;
    if (!mc_stack_layer_has_mixer(cfg, l))
        snprintf(buf, 64, "%s block without a mixer,", cfg->layers[l].moe ? "MoE" : "MLP");
    else if (cfg->layers[l].shared)
        snprintf(buf, 64, "shared block %d, application %d at layer %lld: attention", cfg->layers[l].block,
                 cfg->layers[l].app, (long long)cfg->layers[l].hf_layer);
    else if (mc_stack_is_zamba(cfg)) /* zamba2's mamba2, zamba's mamba1 */
        snprintf(buf, 64, "%slayer %lld's %s mixer", cfg->layers[l].hybrid ? "hybrid " : "",
                 (long long)cfg->layers[l].hf_layer, mc_family_name(cfg->layers[l].family));
    else if (cfg->layers[l].parallel) /* FalconH1: one of a decoder layer's two parallel mixers */
        snprintf(buf, 64, "%s branch of decoder layer %lld", mc_family_name(cfg->layers[l].family),
                 (long long)mc_stack_decoder_layer(cfg, l));
    else
        snprintf(buf, 64, "%s mixer", mc_family_name(cfg->layers[l].family));
    return buf;
}

/* ---- one forward against the golden -------------------------------------------------------------- */

/* A forward over golden rows [r0, r0 + nr), tokens [t0, t0 + len) of the golden (ids, when given,
 * replace the golden's tokens [nr][len]); `masked`: pass the golden's mask slice. Compares logits and
 * hidden states with the golden at those positions where valid (default: the mask, or every token). */
struct fwd {
    int64_t r0, nr, t0, len;
    int masked;
    const int64_t *ids;
    const uint8_t *valid; /* [nr][len] or NULL */
    const char *logits_name; /* NULL = "logits" */
};

static void gather(const struct sess *s, const double *src, int64_t width, const struct fwd *f, double *dst)
{
    for (int64_t b = 0; b < f->nr; b++)
        for (int64_t t = 0; t < f->len; t++)
            memcpy(dst + (b * f->len + t) * width, src + ((f->r0 + b) * s->L + f->t0 + t) * width,
                   (size_t)width * sizeof *dst);
}

static void view_of(const struct fwd *f, int64_t width, const char *last, const uint8_t *valid, struct mc_compare_view *v)
{
    *v = (struct mc_compare_view){.ndim = 3, .dims = {f->nr, f->len, width}, .dim_names = {"batch", "token", last},
                                  .token_axis = 1, .token_offset = f->t0, .batch_offset = f->r0, .valid = valid};
}

static void note_hidden_failure(struct sess *s, int level, const struct mc_compare_stats *st)
{
    if (s->loc_level < 0 || level < s->loc_level ||
        (level == s->loc_level && st->first_fail_token < s->loc_token)) {
        s->loc_level = level;
        s->loc_token = st->first_fail_token;
        s->loc_row = st->first_fail_batch;
    }
}

/* Runs and compares; logits_out (optional) receives [nr][len][V]. 0, or -1 when the backend failed. */
static int forward(struct sess *s, struct scache *c, const struct fwd *f, double *logits_out)
{
    if (s->broken)
        return -1;
    int64_t rows = f->nr * f->len;
    int64_t *ids = xcalloc(s, (size_t)rows, sizeof *ids);
    uint8_t *mask = f->masked ? xcalloc(s, (size_t)rows, 1) : NULL, *valid = xcalloc(s, (size_t)rows, 1);
    double *logits = xcalloc(s, (size_t)(rows * s->V), sizeof *logits);
    double *hidden = s->hidden_ok ? xcalloc(s, (size_t)((s->n + 1) * rows * s->D), sizeof *hidden) : NULL;
    double *gl = xcalloc(s, (size_t)(rows * s->V), sizeof *gl), *gh = xcalloc(s, (size_t)(rows * s->D), sizeof *gh);
    int rc = -1;
    if (s->broken)
        goto out;
    for (int64_t b = 0; b < f->nr; b++)
        for (int64_t t = 0; t < f->len; t++) {
            int64_t gi = (f->r0 + b) * s->L + f->t0 + t, i = b * f->len + t;
            ids[i] = f->ids ? f->ids[i] : s->g->input_ids[gi];
            if (mask)
                mask[i] = s->g->mask[gi];
            valid[i] = f->valid ? f->valid[i] : f->masked ? s->g->mask[gi] : 1;
        }
    struct mc_msg msg = {{0}};
    enum mc_backend_status st = sut_forward(s, c, f->nr, f->len, ids, mask, logits, hidden, NULL, NULL, &msg);
    if (st != MC_BACKEND_OK) {
        backend_failed(s, st, &msg, s->run);
        goto out;
    }
    struct mc_compare_view v;
    struct mc_compare_stats one;
    gather(s, s->g->logits.data, s->V, f, gl);
    view_of(f, s->V, "vocab", valid, &v);
    const char *lname = f->logits_name ? f->logits_name : "logits";
    if (!compare(s, lname, MC_TENSOR_LOGITS, logits, gl, &v, &one)) {
        if (!s->logits_failed || one.first_fail_token < s->logits_token) {
            s->logits_token = one.first_fail_token;
            s->logits_row = one.first_fail_batch;
        }
        s->logits_failed = 1;
    }
    struct mc_tensor_result *t = tensor(s, lname, MC_TENSOR_LOGITS);
    if (t != NULL) {
        struct mc_logits_metrics m;
        mc_logits_metrics_init(&m);
        int64_t *tok = xcalloc(s, (size_t)rows, sizeof *tok);
        for (int64_t i = 0; tok != NULL && i < rows; i++)
            tok[i] = f->t0 + i % f->len;
        mc_logits_accumulate(logits, gl, rows, s->V, valid, tok, &m);
        mc_logits_merge(&t->logits, &m);
        free(tok);
    }
    view_of(f, s->D, "channel", valid, &v);
    for (int64_t j = 0; hidden != NULL && j <= s->n; j++) {
        struct fwd gf = *f;
        gather(s, s->g->hidden.data + j * s->B * s->L * s->D, s->D, &gf, gh);
        if (!compare(s, "hidden_states", MC_TENSOR_HIDDEN_STATES, hidden + j * rows * s->D, gh, &v, &one))
            note_hidden_failure(s, (int)j, &one);
        if (!(one.headroom <= s->level_headroom[j]))
            s->level_headroom[j] = one.headroom;
    }
    if (logits_out != NULL)
        memcpy(logits_out, logits, (size_t)(rows * s->V) * sizeof *logits);
    rc = 0;
out:
    free(ids);
    free(mask);
    free(valid);
    free(logits);
    free(hidden);
    free(gl);
    free(gh);
    return s->broken ? -1 : rc;
}

/* Every layer's cache rows rows[i] of c against golden row grow[i] at position pos, i < n, when the golden
 * holds that position. */
static void check_rows(struct sess *s, struct scache *c, const int64_t *rows, const int64_t *grow, int64_t n, int64_t pos)
{
    int64_t pi = -1;
    for (int64_t i = 0; i < s->g->n_positions; i++)
        if (s->g->state_positions[i] == pos)
            pi = i;
    if (pi < 0 || s->broken)
        return;
    for (int64_t l = 0; l < s->n && !s->broken; l++) {
        if (!mc_stack_layer_has_mixer(&s->g->config, l))
            continue; /* no cache */
        struct mc_family_shape sh;
        mc_stack_layer_shape(&s->g->config, l, &sh);
        int64_t ce = sh.conv_channels * sh.conv_kernel, se = mc_family_state_elems(&sh), nb = c->batch;
        double *conv = xcalloc(s, (size_t)(nb * ce), sizeof *conv);
        double *state = se ? xcalloc(s, (size_t)(nb * se), sizeof *state) : NULL;
        if (s->broken) {
            free(conv);
            free(state);
            return;
        }
        struct mc_msg msg = {{0}};
        enum mc_backend_status st = sut_cache_export(s, c, l, conv, state, &msg);
        if (st != MC_BACKEND_OK)
            backend_failed(s, st, &msg, "cache_export");
        for (int64_t i = 0; st == MC_BACKEND_OK && i < n; i++) {
            const struct mc_stack_layer_states *ls = &s->g->layers[l];
            struct mc_compare_view v = {.ndim = 3, .dims = {1, sh.conv_channels, sh.conv_kernel},
                                        .dim_names = {"batch", "channel", "k"}, .token_axis = -1,
                                        .token_offset = pos, .batch_offset = grow[i]};
            int ok = compare(s, "conv_state", MC_TENSOR_CONV_STATE, conv + rows[i] * ce,
                             ls->conv_state.data + (pi * s->B + grow[i]) * ce, &v, NULL);
            const char *which = ok ? NULL : "conv_state";
            if (se) {
                struct mc_compare_view w = {.ndim = 2, .dims = {1, se}, .dim_names = {"batch", "state"},
                                            .token_axis = -1, .token_offset = pos, .batch_offset = grow[i]};
                if (!compare(s, "recurrent_state", MC_TENSOR_RECURRENT_STATE, state + rows[i] * se,
                             ls->recurrent_state.data + (pi * s->B + grow[i]) * se, &w, NULL) &&
                    which == NULL)
                    which = "recurrent_state";
            }
            if (which != NULL && (s->state_layer < 0 || l < s->state_layer)) {
                s->state_layer = l;
                s->state_pos = pos;
                s->state_tensor = which;
            }
        }
        free(conv);
        free(state);
    }
}

/* Every layer's cache of golden rows [r0, r0 + c->batch) against the golden at position pos, when
 * the golden holds it. */
static void check_states(struct sess *s, struct scache *c, int64_t r0, int64_t pos)
{
    int64_t *rows = xcalloc(s, (size_t)(2 * c->batch), sizeof *rows);
    if (rows == NULL)
        return;
    for (int64_t i = 0; i < c->batch; i++) {
        rows[i] = i;
        rows[c->batch + i] = r0 + i;
    }
    check_rows(s, c, rows, rows + c->batch, c->batch, pos);
    free(rows);
}

static int cache_new(struct sess *s, int64_t batch, struct scache *c)
{
    memset(c, 0, sizeof *c);
    c->batch = batch;
    if (s->broken)
        return -1;
    struct mc_msg msg = {{0}};
    enum mc_backend_status st = s->port != NULL ? mc_stack_port_cache_new(s->port, batch, &c->port, &msg)
                                                : mc_stack_cache_new(s->st, batch, &c->eng, &msg);
    if (st != MC_BACKEND_OK) {
        backend_failed(s, st, &msg, "cache_alloc");
        return -1;
    }
    return 0;
}

static void cache_drop(struct sess *s, struct scache *c)
{
    if (c->port != NULL)
        mc_stack_port_cache_free(s->port, c->port);
    if (c->eng.layer != NULL)
        mc_stack_cache_free(s->st, &c->eng);
    c->port = NULL;
    c->eng.layer = NULL;
}

/* dst: a fresh cache holding a copy of src (same batch). */
static int cache_dup(struct sess *s, const struct scache *src, struct scache *dst)
{
    if (cache_new(s, src->batch, dst) != 0)
        return -1;
    struct mc_msg msg = {{0}};
    enum mc_backend_status st = s->port != NULL ? mc_stack_port_cache_copy(s->port, dst->port, src->port, &msg)
                                                : mc_stack_cache_copy(s->st, &dst->eng, &src->eng, &msg);
    if (st != MC_BACKEND_OK) {
        backend_failed(s, st, &msg, "cache_copy");
        return -1;
    }
    return 0;
}

/* Every layer's cache of c, back to back as float64 (conv then state per layer), into a new array of
 * *n values; NULL when the backend failed or memory ran out. */
static double *cache_all(struct sess *s, const struct scache *c, int64_t *n)
{
    int64_t total = 0, at = 0;
    for (int64_t l = 0; l < s->n; l++) {
        struct mc_family_shape sh;
        mc_stack_layer_shape(&s->g->config, l, &sh);
        total += c->batch * (sh.conv_channels * sh.conv_kernel + mc_family_state_elems(&sh));
    }
    double *all = xcalloc(s, (size_t)total, sizeof *all);
    for (int64_t l = 0; all != NULL && l < s->n; l++) {
        if (!mc_stack_layer_has_mixer(&s->g->config, l))
            continue; /* no cache (its shape is empty) */
        struct mc_family_shape sh;
        mc_stack_layer_shape(&s->g->config, l, &sh);
        int64_t ce = c->batch * sh.conv_channels * sh.conv_kernel, se = c->batch * mc_family_state_elems(&sh);
        struct mc_msg msg = {{0}};
        enum mc_backend_status st = sut_cache_export(s, c, l, all + at, se ? all + at + ce : NULL, &msg);
        if (st != MC_BACKEND_OK) {
            backend_failed(s, st, &msg, "cache_export");
            free(all);
            return NULL;
        }
        at += ce + se;
    }
    *n = total;
    return all;
}

static int64_t pad_of(const struct sess *s, int64_t b)
{
    int64_t p = 0;
    while (p < s->L && !s->g->mask[b * s->L + p])
        p++;
    return p;
}

/* ---- scenarios ------------------------------------------------------------------------------------- */

/* Segments [0, p1), [p1, p2), ... [pk, L) of every row through one cache, each compared. */
static void run_segments(struct sess *s, const int64_t *points, int64_t n)
{
    struct scache c;
    if (cache_new(s, s->B, &c) != 0)
        return;
    int64_t t0 = 0;
    for (int64_t i = 0; i <= n && !s->broken; i++) {
        int64_t t1 = i < n ? points[i] : s->L;
        struct fwd f = {.r0 = 0, .nr = s->B, .t0 = t0, .len = t1 - t0, .masked = 1};
        if (forward(s, &c, &f, NULL) == 0)
            check_states(s, &c, 0, t1);
        t0 = t1;
    }
    cache_drop(s, &c);
}

/* A model that keeps its residual stream in float32 (residual_in_fp32: Mamba2, Mamba) has hidden states
 * after every layer that are float32 sums, almost none of them representable in the model dtype; a port
 * that rounds the residual to the model dtype gives only such values. That difference is a rounding-level
 * error a tolerance cannot tell from a legitimate port's (docs/models.md §4), so it is told by the
 * values themselves: when every hidden state after the embedding, at every real position, is exact in
 * the model dtype, the check fails with a `residual_dtype` record and says why. */
static void residual_precision(struct sess *s, const double *ho)
{
    if (!s->g->config.residual_in_fp32 || (s->ctx->dtype != MC_DTYPE_BF16 && s->ctx->dtype != MC_DTYPE_F16))
        return;
    int64_t rows = s->B * s->L, n = 0, exact = 0;
    for (int64_t j = 1; j <= s->n; j++)
        for (int64_t r = 0; r < rows; r++) {
            if (s->g->mask != NULL && !s->g->mask[r])
                continue;
            const double *h = ho + (j * rows + r) * s->D;
            for (int64_t d = 0; d < s->D; d++, n++)
                exact += mc_dtype_round(s->ctx->dtype, h[d]) == h[d];
        }
    if (n < 64 || exact < n)
        return;
    struct mc_tensor_result *t = tensor(s, "residual_dtype", MC_TENSOR_HIDDEN_STATES);
    if (t == NULL)
        return;
    t->tol = (struct mc_tolerance){.atol = 0.0, .rtol = 0.0};
    t->expected = MC_EXPECTED_SELF;
    t->stats.n_elems = n;
    t->stats.n_fail = n;
    t->stats.headroom = INFINITY;
    t->stats.first_fail_token = 0;
    t->stats.first_fail_batch = 0;
    t->comparisons = 1;
    snprintf(s->res->diagnosis, sizeof s->res->diagnosis,
             "the residual stream is rounded to %s: all %lld hidden-state values after the embedding are exact in %s, "
             "though residual_in_fp32 keeps the residual in float32 (a correct port's are float32 sums)",
             mc_dtype_name(s->ctx->dtype), (long long)n, mc_dtype_name(s->ctx->dtype));
    if (s->res->first_fail_tensor[0] == '\0')
        snprintf(s->res->first_fail_tensor, sizeof s->res->first_fail_tensor, "%s", t->name);
}

/* f16/bf16: the prefill of every row by the stack under test against the reference stack run in the
 * same dtype on the same weights and prompt: logits and every hidden level at the ref_* tolerances,
 * which admit the backends' difference on equal rounded inputs, not the dtype's storage noise. */
static void ref_prefill(struct sess *s)
{
    if (s->ref_st == NULL || s->broken)
        return;
    int64_t rows = s->B * s->L;
    double *lo = xcalloc(s, (size_t)(rows * s->V), sizeof *lo), *lr = xcalloc(s, (size_t)(rows * s->V), sizeof *lr);
    double *ho = s->hidden_ok ? xcalloc(s, (size_t)((s->n + 1) * rows * s->D), sizeof *ho) : NULL;
    double *mi = s->port != NULL && s->hidden_ok ? xcalloc(s, (size_t)(s->n * rows * s->D), sizeof *mi) : NULL;
    double *mo = s->port != NULL && s->hidden_ok ? xcalloc(s, (size_t)(s->n * rows * s->D), sizeof *mo) : NULL;
    double *hr = xcalloc(s, (size_t)((s->n + 1) * rows * s->D), sizeof *hr);
    struct scache co;
    struct mc_stack_cache cr;
    memset(&cr, 0, sizeof cr);
    if (s->broken || cache_new(s, s->B, &co) != 0)
        goto out;
    struct mc_msg msg = {{0}};
    enum mc_backend_status st = mc_stack_cache_new(s->ref_st, s->B, &cr, &msg);
    if (st == MC_BACKEND_OK)
        st = mc_stack_forward(s->ref_st, &cr, s->B, s->L, s->g->input_ids, s->g->mask, lr, hr, &msg);
    if (st != MC_BACKEND_OK) {
        backend_failed(s, st, &msg, "the reference stack");
        goto drop;
    }
    run_label(s, "prefill [%lld] against the reference stack in %s", (long long)s->L, mc_dtype_name(s->ctx->dtype));
    st = sut_forward(s, &co, s->B, s->L, s->g->input_ids, s->g->mask, lo, ho, mi, mo, &msg);
    if (st != MC_BACKEND_OK) {
        backend_failed(s, st, &msg, s->run);
        goto drop;
    }
    struct fwd f = {.r0 = 0, .nr = s->B, .t0 = 0, .len = s->L, .masked = 1};
    struct mc_compare_view v;
    struct mc_compare_stats one;
    view_of(&f, s->V, "vocab", s->g->mask, &v);
    if (!compare(s, "ref_logits", MC_TENSOR_REF_LOGITS, lo, lr, &v, &one))
        s->ref_logits_failed = 1;
    view_of(&f, s->D, "channel", s->g->mask, &v);
    for (int64_t j = 0; ho != NULL && j <= s->n; j++)
        if (!compare(s, "ref_hidden_states", MC_TENSOR_REF_HIDDEN_STATES, ho + j * rows * s->D, hr + j * rows * s->D,
                     &v, &one) &&
            s->ref_level < 0) {
            s->ref_level = (int)j;
            s->ref_token = one.first_fail_token;
            s->ref_row = one.first_fail_batch;
        }
    if (ho != NULL)
        residual_precision(s, ho);
drop:
    if (cr.layer != NULL)
        mc_stack_cache_free(s->ref_st, &cr);
    cache_drop(s, &co);
out:
    free(lo);
    free(lr);
    free(hr);
    if (s->port != NULL && !s->broken) { /* kept for localise_ref: the port's own layers are compared there */
        s->ref_ho = ho;
        s->ref_mi = mi;
        s->ref_mo = mo;
    } else {
        free(ho);
        free(mi);
        free(mo);
    }
}

static void run_prefill(struct sess *s)
{
    run_label(s, "prefill [%lld]", (long long)s->L);
    run_segments(s, NULL, 0);
    ref_prefill(s);
}

static void run_decode(struct sess *s)
{
    int64_t p = s->ctx->spec->prefill, n = s->L - p;
    int64_t *points = xcalloc(s, (size_t)n, sizeof *points);
    if (points == NULL)
        return;
    points[0] = p;
    for (int64_t i = 1; i < n; i++)
        points[i] = p + i;
    run_label(s, "decode after prefill [%lld]", (long long)p);
    run_segments(s, points, n);
    free(points);
}

static void run_chunked(struct sess *s)
{
    const struct mc_scenario_spec *sp = s->ctx->spec;
    for (int i = 0; i < sp->n_split_sets && !s->broken; i++) {
        char txt[120] = "";
        size_t u = 0;
        for (int64_t k = 0; k < sp->split_sets[i].n && u < sizeof txt; k++)
            u += (size_t)snprintf(txt + u, sizeof txt - u, "%s%lld", k ? ", " : "",
                                  (long long)sp->split_sets[i].points[k]);
        run_label(s, "splits [%s]", txt);
        run_segments(s, sp->split_sets[i].points, sp->split_sets[i].n);
    }
}

/* The first token of a segment must not see the tokens after it: prefill [0, p), then a segment of
 * S tokens whose tokens after the first are random distractors; only the first is compared. */
static void run_first_token(struct sess *s)
{
    const struct mc_scenario_spec *sp = s->ctx->spec;
    int64_t p = sp->prefill, S = sp->len;
    struct mc_rng rng;
    mc_rng_seed(&rng, sp->seed + s->ctx->seed_offset);
    int64_t *ids = xcalloc(s, (size_t)(s->B * S), sizeof *ids);
    uint8_t *valid = xcalloc(s, (size_t)(s->B * S), 1);
    struct scache c;
    if (s->broken || cache_new(s, s->B, &c) != 0) {
        free(ids);
        free(valid);
        return;
    }
    run_label(s, "prefill [%lld], then %lld tokens with distractors", (long long)p, (long long)S);
    struct fwd f = {.r0 = 0, .nr = s->B, .t0 = 0, .len = p, .masked = 1};
    if (forward(s, &c, &f, NULL) == 0) {
        for (int64_t b = 0; b < s->B; b++)
            for (int64_t t = 0; t < S; t++) {
                ids[b * S + t] = t == 0 ? s->g->input_ids[b * s->L + p] : (int64_t)mc_rng_below(&rng, (uint64_t)s->V);
                valid[b * S + t] = t == 0 && s->g->mask[b * s->L + p];
            }
        struct fwd d = {.r0 = 0, .nr = s->B, .t0 = p, .len = S, .masked = 1, .ids = ids, .valid = valid};
        forward(s, &c, &d, NULL);
    }
    cache_drop(s, &c);
    free(ids);
    free(valid);
}

/* speculative_verify at the model level: after a prefill [0, P) (the snapshot), the k drafts (the golden's
 * tokens P .. P+k-1) in one forward on a copy of the snapshot; then, for each accept count a (the case's
 * `accept`, or every count 0..k in a seeded order), another copy takes the a accepted tokens in one
 * forward and the next tokens as single steps (one with `accept`, two in the sweep) — every forward and
 * every cache the golden holds compared with it; at the end the snapshot's caches must be bit for bit
 * what they were before its copies ran (a cache_copy that shares memory shows up as "snapshot"). */
static void run_speculative(struct sess *s)
{
    const struct mc_scenario_spec *sp = s->ctx->spec;
    int64_t P = sp->prefill, k = sp->len, steps = sp->accept >= 0 ? 1 : 2, n_counts = sp->accept >= 0 ? 1 : k + 1;
    struct scache snap, cv, ca;
    memset(&cv, 0, sizeof cv);
    memset(&ca, 0, sizeof ca);
    double *before = NULL, *after = NULL;
    int64_t n_before = 0, n_after = 0;
    int64_t *counts = xcalloc(s, (size_t)n_counts, sizeof *counts);
    if (counts == NULL || cache_new(s, s->B, &snap) != 0) {
        free(counts);
        return;
    }
    run_label(s, "prefill [%lld] (the snapshot)", (long long)P);
    struct fwd f = {.r0 = 0, .nr = s->B, .t0 = 0, .len = P, .masked = 1};
    if (forward(s, &snap, &f, NULL) != 0)
        goto out;
    check_states(s, &snap, 0, P);
    if ((before = cache_all(s, &snap, &n_before)) == NULL)
        goto out;
    run_label(s, "verify: %lld drafts from token %lld in one forward on a copy of the snapshot", (long long)k,
              (long long)P);
    if (cache_dup(s, &snap, &cv) != 0)
        goto out;
    struct fwd v = {.r0 = 0, .nr = s->B, .t0 = P, .len = k, .masked = 1};
    if (forward(s, &cv, &v, NULL) != 0)
        goto out;
    check_states(s, &cv, 0, P + k);
    cache_drop(s, &cv);
    if (sp->accept >= 0) {
        counts[0] = sp->accept;
    } else {
        struct mc_rng rng;
        mc_rng_seed(&rng, sp->seed + s->ctx->seed_offset);
        for (int64_t a = 0; a <= k; a++)
            counts[a] = a;
        for (int64_t i = k; i > 0; i--) {
            int64_t r = (int64_t)mc_rng_below(&rng, (uint64_t)(i + 1)), t = counts[i];
            counts[i] = counts[r];
            counts[r] = t;
        }
    }
    for (int64_t i = 0; i < n_counts && !s->broken; i++) {
        int64_t a = counts[i];
        run_label(s, "accept %lld of %lld drafts on a copy of the snapshot, then %lld single step%s", (long long)a,
                  (long long)k, (long long)steps, steps > 1 ? "s" : "");
        if (cache_dup(s, &snap, &ca) != 0)
            goto out;
        if (a > 0) {
            struct fwd fa = {.r0 = 0, .nr = s->B, .t0 = P, .len = a, .masked = 1};
            if (forward(s, &ca, &fa, NULL) != 0)
                goto out;
            check_states(s, &ca, 0, P + a);
        }
        for (int64_t t = 0; t < steps && !s->broken; t++) {
            struct fwd fs = {.r0 = 0, .nr = s->B, .t0 = P + a + t, .len = 1, .masked = 1};
            if (forward(s, &ca, &fs, NULL) != 0)
                goto out;
            check_states(s, &ca, 0, P + a + t + 1);
        }
        cache_drop(s, &ca);
    }
    run_label(s, "the snapshot after its copies ran");
    if ((after = cache_all(s, &snap, &n_after)) != NULL && n_after == n_before) {
        struct mc_tensor_result *t = tensor(s, "snapshot", MC_TENSOR_CONSISTENCY);
        if (t != NULL) {
            t->tol = (struct mc_tolerance){.atol = 0.0, .rtol = 0.0}; /* bit for bit */
            struct mc_compare_view w = {.ndim = 1, .dims = {n_after}, .dim_names = {"cache"}, .token_axis = -1,
                                        .token_offset = P};
            compare(s, "snapshot", MC_TENSOR_CONSISTENCY, after, before, &w, NULL);
        }
    }
out:
    cache_drop(s, &snap);
    cache_drop(s, &cv);
    cache_drop(s, &ca);
    free(counts);
    free(before);
    free(after);
}

/* ---- the packed serving call at the model level ---------------------------------------------------- */

/* One packed call: sequence i is golden row row[i]'s tokens [t0[i], t1[i]) on pool slot slot[i], from
 * its slot when init[i]; every sequence's logits and hidden states compared with the golden's row at
 * those positions. */
struct pcall {
    int64_t n;
    const int64_t *row, *t0, *t1, *slot;
    const uint8_t *init;
};

static int packed_call(struct sess *s, struct scache *pool, const struct pcall *pc)
{
    int64_t *cu = xcalloc(s, (size_t)(pc->n + 1), sizeof *cu);
    if (cu == NULL)
        return -1;
    for (int64_t i = 0; i < pc->n; i++)
        cu[i + 1] = cu[i] + pc->t1[i] - pc->t0[i];
    int64_t T = cu[pc->n], V = s->V, D = s->D;
    /* packed index k is token tok[k] of golden row prow[k] */
    int64_t *ids = xcalloc(s, (size_t)T, sizeof *ids), *tok = xcalloc(s, (size_t)T, sizeof *tok);
    int64_t *prow = xcalloc(s, (size_t)T, sizeof *prow);
    double *lg = xcalloc(s, (size_t)(T * V), sizeof *lg), *gl = xcalloc(s, (size_t)(T * V), sizeof *gl);
    double *hd = s->hidden_ok ? xcalloc(s, (size_t)((s->n + 1) * T * D), sizeof *hd) : NULL;
    double *gh = xcalloc(s, (size_t)(T * D), sizeof *gh);
    int rc = -1;
    if (s->broken)
        goto out;
    for (int64_t i = 0; i < pc->n; i++)
        for (int64_t t = pc->t0[i]; t < pc->t1[i]; t++) {
            int64_t k = cu[i] + t - pc->t0[i];
            ids[k] = s->g->input_ids[pc->row[i] * s->L + t];
            tok[k] = t;
            prow[k] = pc->row[i];
            memcpy(gl + k * V, s->g->logits.data + (pc->row[i] * s->L + t) * V, (size_t)V * sizeof *gl);
        }
    struct mc_stack_packed pk = {.n_seqs = pc->n, .cu_seqlens = cu, .slots = pc->slot, .has_initial_state = pc->init};
    struct mc_msg msg = {{0}};
    enum mc_backend_status st = sut_forward_packed(s, pool, &pk, ids, lg, hd, &msg);
    if (st != MC_BACKEND_OK) {
        backend_failed(s, st, &msg, s->run);
        goto out;
    }
    struct mc_compare_view v = {.ndim = 2, .dims = {T, V}, .dim_names = {"packed_token", "vocab"}, .token_axis = 0};
    struct mc_compare_stats one;
    if (!compare(s, "logits", MC_TENSOR_LOGITS, lg, gl, &v, &one) && !s->logits_failed) {
        s->logits_failed = 1;
        s->logits_token = one.first_fail_token >= 0 ? tok[one.first_fail_token] : -1;
        if (one.first_fail_token >= 0)
            s->logits_row = prow[one.first_fail_token];
    }
    struct mc_tensor_result *t = tensor(s, "logits", MC_TENSOR_LOGITS);
    if (t != NULL) {
        struct mc_logits_metrics m;
        mc_logits_metrics_init(&m);
        mc_logits_accumulate(lg, gl, T, V, NULL, tok, &m);
        mc_logits_merge(&t->logits, &m);
    }
    v = (struct mc_compare_view){.ndim = 2, .dims = {T, D}, .dim_names = {"packed_token", "channel"}, .token_axis = 0};
    for (int64_t j = 0; hd != NULL && j <= s->n; j++) {
        for (int64_t k = 0; k < T; k++)
            memcpy(gh + k * D, s->g->hidden.data + ((j * s->B + prow[k]) * s->L + tok[k]) * D, (size_t)D * sizeof *gh);
        if (!compare(s, "hidden_states", MC_TENSOR_HIDDEN_STATES, hd + j * T * D, gh, &v, &one)) {
            struct mc_compare_stats at = one; /* the packed index back to the golden's row and token */
            if (one.first_fail_token >= 0) {
                at.first_fail_batch = prow[one.first_fail_token];
                at.first_fail_token = tok[one.first_fail_token];
            }
            note_hidden_failure(s, (int)j, &at);
        }
        if (!(one.headroom <= s->level_headroom[j]))
            s->level_headroom[j] = one.headroom;
    }
    rc = 0;
out:
    free(cu);
    free(ids);
    free(tok);
    free(prow);
    free(lg);
    free(gl);
    free(hd);
    free(gh);
    return s->broken ? -1 : rc;
}

/* Every layer's pool rows whose keep[row] is set, back to back as float64; NULL when the backend failed
 * or memory ran out. */
static double *pool_rows(struct sess *s, struct scache *pool, const uint8_t *keep, int64_t *n)
{
    int64_t all_n = 0;
    double *all = cache_all(s, pool, &all_n), *out = all != NULL ? xcalloc(s, (size_t)(all_n ? all_n : 1), sizeof *out) : NULL;
    int64_t at = 0, o = 0;
    for (int64_t l = 0; out != NULL && l < s->n; l++) {
        struct mc_family_shape sh;
        mc_stack_layer_shape(&s->g->config, l, &sh);
        int64_t ce = sh.conv_channels * sh.conv_kernel, se = mc_family_state_elems(&sh);
        for (int part = 0; part < 2; part++) {
            int64_t w = part ? se : ce;
            for (int64_t r = 0; r < pool->batch; r++, at += w)
                if (keep[r]) {
                    memcpy(out + o, all + at, (size_t)w * sizeof *out);
                    o += w;
                }
        }
    }
    free(all);
    *n = o;
    return out;
}

/* Shuffles a[0..n) with rng (Fisher-Yates). */
static void shuffle(struct mc_rng *rng, int64_t *a, int64_t n)
{
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t r = (int64_t)mc_rng_below(rng, (uint64_t)(i + 1)), t = a[i];
        a[i] = a[r];
        a[r] = t;
    }
}

/* packed_prefill at the model level (docs/models.md §3): `sequences` rows of the golden (a seeded pick),
 * each its real tokens without its padding, through the packed serving call on a pool of twice as many
 * rows. Call 0 fills a seeded set of slots with the rows whole; call 1 packs each row's first part (to a
 * seeded cut; one row's first part a single token) from zero (has_initial_state 0) into a seeded set of
 * slots that overlaps call 0's, so a slot's old state must be ignored; call 2 packs the rest of every row,
 * continuing from its slot (has_initial_state 1), in another seeded order: a mixed step, one row a single
 * decode token, the others continued chunks. Every sequence's logits and hidden states against the golden's row at its real
 * positions, every slot's caches where the golden holds them, and the pool rows call 2 does not own bit
 * for bit what they were ("untouched"). */
static void run_packed(struct sess *s)
{
    const struct mc_scenario_spec *sp = s->ctx->spec;
    int64_t n = sp->sequences, S = 2 * n;
    struct mc_rng rng;
    mc_rng_seed(&rng, sp->seed + s->ctx->seed_offset);
    int64_t *order = xcalloc(s, (size_t)(s->B > S ? s->B : S), sizeof *order);
    int64_t *row = xcalloc(s, (size_t)n, sizeof *row), *pad = xcalloc(s, (size_t)n, sizeof *pad);
    int64_t *cut = xcalloc(s, (size_t)n, sizeof *cut), *end = xcalloc(s, (size_t)n, sizeof *end);
    int64_t *slot0 = xcalloc(s, (size_t)n, sizeof *slot0), *slot1 = xcalloc(s, (size_t)n, sizeof *slot1);
    int64_t *r2 = xcalloc(s, (size_t)n, sizeof *r2), *c2 = xcalloc(s, (size_t)n, sizeof *c2);
    int64_t *e2 = xcalloc(s, (size_t)n, sizeof *e2), *s2 = xcalloc(s, (size_t)n, sizeof *s2);
    uint8_t *zero = xcalloc(s, (size_t)n, 1), *one = xcalloc(s, (size_t)n, 1), *keep = xcalloc(s, (size_t)S, 1);
    double *before = NULL, *after = NULL;
    struct scache pool;
    memset(&pool, 0, sizeof pool);
    if (s->broken || cache_new(s, S, &pool) != 0)
        goto out;
    for (int64_t b = 0; b < s->B; b++)
        order[b] = b;
    shuffle(&rng, order, s->B);
    int decode_set = 0, single_set = 0;
    for (int64_t i = 0; i < n; i++) {
        row[i] = order[i];
        pad[i] = pad_of(s, row[i]);
        end[i] = s->L;
        int64_t R = s->L - pad[i];
        /* the first row long enough continues with a single decode token in call 2, the next starts with a
         * one-token sequence from zero in call 1 (a one-token prefill, not a decode); the others at a seeded cut */
        if (R < 2)
            cut[i] = s->L;
        else if (!decode_set)
            cut[i] = s->L - 1, decode_set = 1;
        else if (!single_set)
            cut[i] = pad[i] + 1, single_set = 1;
        else
            cut[i] = pad[i] + 1 + (int64_t)mc_rng_below(&rng, (uint64_t)(R - 1));
        one[i] = 1;
    }
    for (int64_t r = 0; r < S; r++)
        order[r] = r;
    shuffle(&rng, order, S);
    memcpy(slot0, order, (size_t)n * sizeof *slot0);
    shuffle(&rng, order, S);
    memcpy(slot1, order, (size_t)n * sizeof *slot1);
    int overlap = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++)
            overlap |= slot1[i] == slot0[j];
    if (!overlap)
        slot1[0] = slot0[0];
    run_label(s, "packed call 0: %lld rows whole, from zero, to fill the pool", (long long)n);
    struct pcall p0 = {.n = n, .row = row, .t0 = pad, .t1 = end, .slot = slot0, .init = zero};
    if (packed_call(s, &pool, &p0) != 0)
        goto out;
    check_rows(s, &pool, slot0, row, n, s->L);
    run_label(s, "packed call 1: every row's first part from zero into slots that held other rows");
    struct pcall p1 = {.n = n, .row = row, .t0 = pad, .t1 = cut, .slot = slot1, .init = zero};
    if (packed_call(s, &pool, &p1) != 0)
        goto out;
    for (int64_t i = 0; i < n; i++)
        check_rows(s, &pool, &slot1[i], &row[i], 1, cut[i]);
    /* call 2: the rest of every row in another order, from its slot */
    for (int64_t i = 0; i < n; i++)
        order[i] = i;
    shuffle(&rng, order, n);
    for (int64_t j = 0; j < n; j++) {
        int64_t i = order[j];
        r2[j] = row[i];
        c2[j] = cut[i];
        e2[j] = end[i];
        s2[j] = slot1[i];
    }
    for (int64_t r = 0; r < S; r++)
        keep[r] = 1;
    for (int64_t i = 0; i < n; i++)
        keep[slot1[i]] = 0;
    int64_t nb = 0, na = 0;
    if ((before = pool_rows(s, &pool, keep, &nb)) == NULL)
        goto out;
    run_label(s, "packed call 2 (mixed step): every row's rest from its slot, a decode token and continued chunks");
    struct pcall p2 = {.n = n, .row = r2, .t0 = c2, .t1 = e2, .slot = s2, .init = one};
    if (packed_call(s, &pool, &p2) != 0)
        goto out;
    check_rows(s, &pool, s2, r2, n, s->L);
    run_label(s, "the pool rows packed call 2 does not own");
    if ((after = pool_rows(s, &pool, keep, &na)) != NULL && na == nb && na > 0) {
        struct mc_tensor_result *t = tensor(s, "untouched", MC_TENSOR_CONSISTENCY);
        if (t != NULL) {
            t->tol = (struct mc_tolerance){.atol = 0.0, .rtol = 0.0}; /* bit for bit */
            struct mc_compare_view w = {.ndim = 1, .dims = {na}, .dim_names = {"cache"}, .token_axis = -1};
            compare(s, "untouched", MC_TENSOR_CONSISTENCY, after, before, &w, NULL);
        }
    }
out:
    cache_drop(s, &pool);
    free(order);
    free(row);
    free(pad);
    free(cut);
    free(end);
    free(slot0);
    free(slot1);
    free(r2);
    free(c2);
    free(e2);
    free(s2);
    free(zero);
    free(one);
    free(keep);
    free(before);
    free(after);
}

/* The padded batch through prefill, single steps and a chunk; then every row alone without its padding. */
static void run_left_padded(struct sess *s)
{
    const struct mc_scenario_spec *sp = s->ctx->spec;
    int64_t n = 1 + sp->decode_steps, points[1 + 4096];
    if (n > 4096)
        n = 4096;
    points[0] = sp->prefill;
    for (int64_t i = 1; i < n; i++)
        points[i] = sp->prefill + i;
    if (points[n - 1] >= s->L)
        n--;
    run_label(s, "padded batch: prefill [%lld], %lld decode steps, then the rest", (long long)sp->prefill,
              (long long)sp->decode_steps);
    run_segments(s, points, n);
    for (int64_t b = 0; b < s->B && !s->broken; b++) {
        int64_t p = pad_of(s, b);
        struct scache c;
        if (cache_new(s, 1, &c) != 0)
            return;
        run_label(s, "row %lld alone without its %lld padding tokens", (long long)b, (long long)p);
        struct fwd f = {.r0 = b, .nr = 1, .t0 = p, .len = s->L - p, .masked = 0};
        if (forward(s, &c, &f, NULL) == 0)
            check_states(s, &c, b, s->L);
        cache_drop(s, &c);
    }
}

/* Each row alone (with its padding) against the same row in the batch, on this backend. */
static void run_batch_invariance(struct sess *s)
{
    int64_t rows = s->B * s->L;
    double *all = xcalloc(s, (size_t)(rows * s->V), sizeof *all), *one = xcalloc(s, (size_t)(s->L * s->V), sizeof *one);
    struct fwd f = {.r0 = 0, .nr = s->B, .t0 = 0, .len = s->L, .masked = 1};
    run_label(s, "the batch of %lld", (long long)s->B);
    if (!s->broken && forward(s, NULL, &f, all) == 0)
        for (int64_t b = 0; b < s->B && !s->broken; b++) {
            struct fwd r = {.r0 = b, .nr = 1, .t0 = 0, .len = s->L, .masked = 1};
            run_label(s, "row %lld alone", (long long)b);
            if (forward(s, NULL, &r, one) != 0)
                break;
            struct mc_compare_view v;
            view_of(&r, s->V, "vocab", s->g->mask + b * s->L, &v);
            compare(s, "consistency", MC_TENSOR_CONSISTENCY, one, all + b * s->L * s->V, &v, NULL);
        }
    free(all);
    free(one);
}

/* Greedy generation through the cache (vLLM's rule): tokens equal to the golden's, or, at a row's first
 * mismatch, each side's token in the other's top-k; a row is not compared after its first mismatch. */
static void run_greedy(struct sess *s)
{
    const struct mc_scenario_spec *sp = s->ctx->spec;
    const struct mc_stack_golden *g = s->g;
    int64_t G = sp->steps, k = sp->top_k, B = s->B, V = s->V, GS = g->greedy_steps;
    double *logits = xcalloc(s, (size_t)(B * s->L * V), sizeof *logits), *step = xcalloc(s, (size_t)(B * V), sizeof *step);
    int64_t *tok = xcalloc(s, (size_t)B, sizeof *tok), *diverged = xcalloc(s, (size_t)B, sizeof *diverged);
    uint8_t *live = xcalloc(s, (size_t)B, 1);
    struct scache c;
    if (s->broken || cache_new(s, B, &c) != 0)
        goto out;
    run_label(s, "greedy: prefill [%lld]", (long long)s->L);
    struct fwd f = {.r0 = 0, .nr = B, .t0 = 0, .len = s->L, .masked = 1};
    if (forward(s, &c, &f, logits) != 0)
        goto drop;
    for (int64_t b = 0; b < B; b++) {
        memcpy(step + b * V, logits + (b * s->L + s->L - 1) * V, (size_t)V * sizeof *step);
        live[b] = 1;
        diverged[b] = -1;
    }
    struct mc_tensor_result *tt = tensor(s, "greedy_tokens", MC_TENSOR_LOGITS);
    if (tt == NULL)
        goto drop;
    tt->tol = (struct mc_tolerance){.atol = 0.0, .rtol = 0.0};
    int64_t bad_row = -1, bad_step = -1;
    char why[200] = "";
    for (int64_t gi = 0; gi < G && !s->broken; gi++) {
        /* compare this step's logits for the rows still on the golden's path */
        if (gi > 0) {
            struct mc_compare_view v = {.ndim = 3, .dims = {B, 1, V}, .dim_names = {"batch", "step", "vocab"},
                                        .token_axis = 1, .token_offset = gi, .valid = live};
            double *gl = xcalloc(s, (size_t)(B * V), sizeof *gl);
            if (gl == NULL)
                break;
            for (int64_t b = 0; b < B; b++)
                memcpy(gl + b * V, g->greedy_logits.data + (b * GS + gi) * V, (size_t)V * sizeof *gl);
            run_label(s, "greedy step %lld", (long long)gi);
            struct mc_compare_stats one;
            if (!compare(s, "greedy_logits", MC_TENSOR_LOGITS, step, gl, &v, &one) && !s->logits_failed) {
                s->logits_failed = 1;
                s->logits_token = s->L + gi;
                s->logits_row = one.first_fail_batch;
            }
            struct mc_tensor_result *t = tensor(s, "greedy_logits", MC_TENSOR_LOGITS);
            if (t != NULL) {
                struct mc_logits_metrics m;
                mc_logits_metrics_init(&m);
                mc_logits_accumulate(step, gl, B, V, live, NULL, &m);
                mc_logits_merge(&t->logits, &m);
            }
            free(gl);
        }
        for (int64_t b = 0; b < B; b++) {
            tok[b] = mc_logits_argmax(step + b * V, V);
            if (!live[b])
                continue;
            int64_t want = g->greedy_tokens[b * GS + gi];
            const double *gold = g->greedy_logits.data + (b * GS + gi) * V;
            tt->stats.n_elems++;
            if (tok[b] == want)
                continue;
            live[b] = 0;
            diverged[b] = gi;
            int ok = mc_logits_in_topk(step + b * V, V, want, k) && mc_logits_in_topk(gold, V, tok[b], k);
            if (!ok) {
                tt->stats.n_fail++;
                tt->stats.headroom = INFINITY;
                if (tt->stats.first_fail_token < 0 || s->L + gi < tt->stats.first_fail_token) {
                    tt->stats.first_fail_token = s->L + gi;
                    tt->stats.first_fail_batch = b;
                }
                if (bad_row < 0) {
                    bad_row = b;
                    bad_step = gi;
                    snprintf(why, sizeof why, "token %lld instead of %lld, %s", (long long)tok[b], (long long)want,
                             mc_logits_in_topk(step + b * V, V, want, k)
                                 ? "not in the golden's top-k"
                                 : "the golden's token not in the candidate's top-k");
                }
            }
        }
        tt->comparisons++;
        if (gi + 1 < G) {
            struct mc_msg msg = {{0}};
            double *hid = NULL;
            enum mc_backend_status st = sut_forward(s, &c, B, 1, tok, NULL, step, hid, NULL, NULL, &msg);
            if (st != MC_BACKEND_OK)
                backend_failed(s, st, &msg, "greedy decode step");
        }
    }
    /* the diagnosis of greedy generation: where each row left the golden's path */
    size_t u = 0;
    char *d = s->res->diagnosis;
    if (bad_row >= 0)
        u += (size_t)snprintf(d + u, sizeof s->res->diagnosis - u,
                              "greedy: row %lld diverges at step %lld (token position %lld): %s (top_k %lld); ",
                              (long long)bad_row, (long long)bad_step, (long long)(s->L + bad_step), why, (long long)k);
    for (int64_t b = 0; b < B && u < sizeof s->res->diagnosis; b++)
        if (diverged[b] >= 0 && b != bad_row)
            u += (size_t)snprintf(d + u, sizeof s->res->diagnosis - u,
                                  "row %lld leaves the golden's tokens at step %lld within the top-%lld rule; ",
                                  (long long)b, (long long)diverged[b], (long long)k);
    if (u == 0 && !s->broken && !s->logits_failed && s->loc_level < 0)
        snprintf(d, sizeof s->res->diagnosis, "greedy: %lld tokens of every row equal the golden's", (long long)G);
    else if (u >= 2 && u < sizeof s->res->diagnosis)
        d[u - 2] = '\0';
drop:
    cache_drop(s, &c);
out:
    free(logits);
    free(step);
    free(tok);
    free(diverged);
    free(live);
}

/* ---- localisation ----------------------------------------------------------------------------------- */

/* The block norm of residual rows in float64 (the golden's own normalised input of a layer). */
static void norm_f64(const double *w, const double *h, int64_t rows, int64_t D, double eps, int zero_centred,
                     double *x)
{
    for (int64_t r = 0; r < rows; r++) {
        double ss = 0.0;
        for (int64_t d = 0; d < D; d++)
            ss += h[r * D + d] * h[r * D + d];
        double inv = 1.0 / sqrt(ss / (double)D + eps);
        for (int64_t d = 0; d < D; d++)
            x[r * D + d] = (zero_centred ? 1.0 + w[d] : w[d]) * h[r * D + d] * inv;
    }
}

/* The float64 input of layer l's mixer from its residual h, a pointer into a whole [n + 1][rows][D] stream at level
 * l: its block norm of h, or (a Zamba2 application) its input_layernorm of cat(h, level 0) into x [rows][2D]. */
static void mixer_input_f64(const struct sess *s, int64_t l, const double *h, int64_t rows, double *x)
{
    const struct mc_stack_config *cfg = &s->g->config;
    char nm[MC_STACK_NAME_LEN];
    mc_stack_name_layer_norm(cfg, l, nm);
    const double *w = mc_stack_golden_weight(s->g, nm)->data;
    if (cfg->layers[l].post_norm) { /* OLMo-Hybrid's attention layer: the mixer reads the residual itself */
        memcpy(x, h, (size_t)(rows * s->D) * sizeof *x);
        return;
    }
    if (!cfg->layers[l].shared) {
        norm_f64(w, h, rows, s->D, cfg->norm_eps, cfg->zero_centred, x);
        return;
    }
    int64_t D = s->D;
    for (int64_t r = 0; r < rows; r++) { /* the concat in place, then the norm over 2D row by row */
        memcpy(x + r * 2 * D, h + r * D, (size_t)D * sizeof *x);
        memcpy(x + r * 2 * D + D, h - l * rows * D + r * D, (size_t)D * sizeof *x);
        norm_f64(w, x + r * 2 * D, 1, 2 * D, cfg->norm_eps, 0, x + r * 2 * D);
    }
}

/* Pass test of a on b [B][L][D] at the tolerance of `kind`, padding excluded; the first failing token into *tok. */
static int within_kind(struct sess *s, const double *a, const double *b, enum mc_tensor_kind kind, int64_t *tok)
{
    struct mc_compare_view v = {.ndim = 3, .dims = {s->B, s->L, s->D}, .dim_names = {"batch", "token", "channel"},
                                .token_axis = 1, .valid = s->g->mask};
    struct mc_compare_stats st;
    mc_compare_stats_init(&st);
    mc_compare_accumulate(a, b, &v, s->tol[kind], &st);
    *tok = st.first_fail_token;
    return mc_compare_passed(&st);
}

/* At the hidden-state tolerance (against the golden). */
static int within(struct sess *s, const double *a, const double *b, int64_t *tok)
{
    return within_kind(s, a, b, MC_TENSOR_HIDDEN_STATES, tok);
}

/* What a scenario adds to a layer that is within tolerance when run alone on the golden's input. */
static const char *scenario_path(const struct sess *s)
{
    switch (s->ctx->spec->kind) {
    case MC_SCENARIO_PREFILL:
    case MC_SCENARIO_BATCH_INVARIANCE:
        return "path through the earlier layers (accumulated error)";
    case MC_SCENARIO_PACKED_PREFILL:
        return "packed calls on the state pool (the serving path: has_initial_state, slots, sequence boundaries)";
    default:
        return "cached path (decode / continued chunks)";
    }
}

/* Port mode: the stack the port's layers are compared with (struct sess); NULL, with why in msg, when it
 * cannot be built. */
static struct mc_stack *loc_stack(struct sess *s, struct mc_msg *msg)
{
    const struct mc_stack_ctx *ctx = s->ctx;
    if (s->st != NULL)
        return s->st;
    int reduced = ctx->dtype == MC_DTYPE_F16 || ctx->dtype == MC_DTYPE_BF16;
    if (reduced && ctx->ref_layer_ops == NULL) {
        snprintf(msg->text, sizeof msg->text, "no reference backend for every layer");
        return NULL;
    }
    enum mc_backend_status st = reduced
                                    ? mc_stack_create_ref(ctx->g, ctx->dtype, ctx->ref_layer_ops, ctx->threads, &s->st, msg)
                                    : mc_stack_create(ctx->g, ctx->dtype, ctx->layer_ops, ctx->threads, &s->st, msg);
    if (st != MC_BACKEND_OK) {
        s->st = NULL;
        if (msg->text[0] == '\0')
            snprintf(msg->text, sizeof msg->text, "the reference stack could not be built");
    }
    return s->st;
}

static int within_ref(struct sess *s, const double *a, const double *b, int64_t *tok);

typedef int (*fits_fn)(struct sess *s, const double *a, const double *b, int64_t *tok);

/* Port mode: where in layer l a whole stack leaves the reference, from the port's own hidden states h
 * [n + 1][B][L][D], mixer inputs mi and outputs mo [n][B][L][D] of one forward: the reference's layer l
 * alone on the port's input h[l] against h[l + 1]; the reference's block norm of h[l] against mi[l]; the
 * reference's mixer on mi[l] against mo[l]. */
struct port_stage {
    int layer_ok, norm_ok, mixer_ok;
    int64_t t_layer, t_norm, t_mixer;
};

static int port_layer_vs(struct sess *s, struct mc_stack *ref, int64_t l, const double *h, const double *mi,
                         const double *mo, fits_fn fits, struct port_stage *ps, struct mc_msg *msg)
{
    int64_t rows = s->B * s->L, N = rows * s->D;
    double *out = xcalloc(s, (size_t)N, sizeof *out), *x = xcalloc(s, (size_t)(2 * N), sizeof *x);
    double *y = xcalloc(s, (size_t)N, sizeof *y);
    int rc = -1;
    if (s->broken) {
        snprintf(msg->text, sizeof msg->text, "out of memory");
        goto out;
    }
    if (mc_stack_layer_forward(ref, l, s->B, s->L, h + l * N, s->g->mask, out, msg) != MC_BACKEND_OK)
        goto out;
    ps->layer_ok = fits(s, h + (l + 1) * N, out, &ps->t_layer);
    if (s->g->config.layers[l].shared) { /* a Zamba2 application's 2D mixer input is not in the [n][B][L][D] layout
                                            of a whole stack's mixer inputs: the layer alone is compared */
        ps->norm_ok = ps->mixer_ok = 1;
        rc = 0;
        goto out;
    }
    mc_stack_block_norm(ref, l, h + l * N, rows, x);
    ps->norm_ok = fits(s, mi + l * N, x, &ps->t_norm);
    if (mc_stack_mixer_forward(ref, l, s->B, s->L, mi + l * N, s->g->mask, y, msg) != MC_BACKEND_OK)
        goto out;
    ps->mixer_ok = fits(s, mo + l * N, y, &ps->t_mixer);
    rc = 0;
out:
    free(out);
    free(x);
    free(y);
    return rc;
}

/* The diagnosis of a whole stack's layer from port_layer_vs; `against` names what it was compared with
 * ("the reference", "the reference stack's"), `path` what the scenario adds when the layer agrees. */
static void port_verdict(struct sess *s, const char *where, const char *against, const struct port_stage *ps,
                         const char *path)
{
    struct mc_check_result *r = s->res;
    const char *after = s->g->config.ffn_size > 0 ? "residual / feed-forward" : "residual";
    if (ps->layer_ok)
        say(r, "%s: on its own input the layer agrees with %s layer; %s", where,
                 against, path);
    else if (!ps->mixer_ok)
        say(r, "%s: mixer — on its own input (the whole stack's mixer input) its output leaves %s mixer's at token "
                 "%lld",
                 where, against, (long long)ps->t_mixer);
    else if (!ps->norm_ok)
        say(r, "%s: glue around the mixer (the block norm) — the mixer's input leaves %s block norm of the same "
                 "residual at token %lld, the mixer agrees with %s on it",
                 where, against, (long long)ps->t_norm, against);
    else
        say(r, "%s: glue around the mixer (%s) — block norm and mixer agree with %s, the layer's output leaves %s "
                 "layer's at token %lld",
                 where, after, against, against, (long long)ps->t_layer);
}

/* Port mode, localisation at layer l (docs/models.md §7): the port's own prefill of the golden's prompt,
 * the stages of its layer l against the reference's on the port's input. */
static void localise_port(struct sess *s, int64_t l, const char *where)
{
    struct mc_check_result *r = s->res;
    int64_t rows = s->B * s->L, N = rows * s->D;
    double *lg = xcalloc(s, (size_t)(rows * s->V), sizeof *lg), *h = xcalloc(s, (size_t)((s->n + 1) * N), sizeof *h);
    double *mi = xcalloc(s, (size_t)(s->n * N), sizeof *mi), *mo = xcalloc(s, (size_t)(s->n * N), sizeof *mo);
    if (s->broken)
        goto out;
    struct mc_msg msg = {{0}};
    struct mc_stack *ref = loc_stack(s, &msg);
    struct port_stage ps;
    struct mc_stack_port_out po = {.hidden = h, .mixer_in = mi, .mixer_out = mo};
    enum mc_backend_status st =
        ref != NULL ? mc_stack_port_forward(s->port, NULL, s->B, s->L, s->g->input_ids, s->g->mask, lg, &po, &msg)
                    : MC_BACKEND_INTERNAL;
    if (st == MC_BACKEND_OK && port_layer_vs(s, ref, l, h, mi, mo, within, &ps, &msg) != 0)
        st = MC_BACKEND_INTERNAL;
    if (st != MC_BACKEND_OK) {
        say(r, "%s; comparing it with the reference's layer failed: %.200s", where,
                 msg.text);
        goto out;
    }
    char path[200];
    snprintf(path, sizeof path, "it diverges on this scenario's %s", scenario_path(s));
    port_verdict(s, where, "the reference", &ps, path);
out:
    free(lg);
    free(h);
    free(mi);
    free(mo);
}

static void localise(struct sess *s)
{
    struct mc_check_result *r = s->res;
    const struct mc_stack_config *cfg = &s->g->config;
    if (s->broken || r->diagnosis[0])
        return;
    if (!s->logits_failed && s->loc_level < 0) {
        if (s->state_layer >= 0) {
            say(r, "layer %lld's cache (%s mixer on '%s'): %s leaves tolerance at position %lld while every logit "
                     "and hidden state is within it (%s)",
                     (long long)s->state_layer, mc_family_name(cfg->layers[s->state_layer].family),
                     layer_backend(s, s->state_layer),
                     s->state_tensor, (long long)s->state_pos,
                     cfg->layers[s->state_layer].family == MC_FAMILY_ATTENTION
                         ? "the keys are cached at other positions: outputs of this prompt agree, a continuation or "
                           "a cache moved to another engine does not"
                         : "outputs agree so far; the next forward from this cache will not");
        }
        return;
    }
    if (!s->hidden_ok) {
        size_t u = (size_t)snprintf(r->diagnosis, sizeof r->diagnosis,
                                    "the logits leave tolerance at token %lld (row %lld); whole stack '%s' gives no "
                                    "hidden states (no MC_CAP_STACK_HIDDEN), so no layer is named",
                                    (long long)s->logits_token, (long long)s->logits_row, s->ctx->ops->name);
        if (s->state_layer >= 0 && u < sizeof r->diagnosis)
            snprintf(r->diagnosis + u, sizeof r->diagnosis - u,
                     "; the first layer whose cache leaves tolerance is layer %lld (%s mixer: %s at position %lld)",
                     (long long)s->state_layer, mc_family_name(cfg->layers[s->state_layer].family), s->state_tensor,
                     (long long)s->state_pos);
        return;
    }
    if (s->loc_level < 0 && s->logits_token >= s->L) {
        /* greedy: the first failing logits belong to a generated token, for which the golden holds no hidden
         * states: nothing names a layer (the decode and chunked checks localise a cached-path bug) */
        say(r, "the logits of generated token %lld (row %lld) leave tolerance while every hidden state of the "
                 "prompt is within it; the golden holds no hidden states of generated tokens, so no layer is named "
                 "(the decode and chunked checks localise a bug of the cached path)",
                 (long long)s->logits_token, (long long)s->logits_row);
        return;
    }
    if (s->loc_level < 0) {
        /* the hidden state nearest its tolerance relative to the one before it: where a small divergence that
         * the head amplifies most likely entered */
        int64_t jump = -1;
        double best = -1.0;
        for (int64_t j = 0; j <= s->n; j++) {
            double prev = j > 0 ? s->level_headroom[j - 1] : 0.0, ratio = s->level_headroom[j] / (prev > 1e-300 ? prev : 1e-300);
            if (s->level_headroom[j] > 0.5 && ratio > best) { /* near its tolerance, above bf16 noise */
                best = ratio;
                jump = j;
            }
        }
        char hint[120] = "";
        if (jump >= 0)
            snprintf(hint, sizeof hint, "; nearest its tolerance: the hidden state %s%lld (headroom %.3g)",
                     jump == 0 ? "of the embedding" : "after layer ", (long long)(jump == 0 ? 0 : jump - 1),
                     s->level_headroom[jump]);
        if (jump == 0)
            snprintf(hint, sizeof hint, "; nearest its tolerance: the embedding's hidden state (headroom %.3g)",
                     s->level_headroom[0]);
        say(r, "glue after the last layer (final norm / LM head%s): every hidden state is within tolerance, the "
                 "logits leave it at token %lld (row %lld)%s",
                 cfg->tied ? ", tied to the embedding" : "", (long long)s->logits_token, (long long)s->logits_row,
                 hint);
        return;
    }
    if (s->loc_level == 0) {
        say(r, "glue: the embedding (hidden state 0) leaves tolerance at token %lld (row %lld)",
                 (long long)s->loc_token, (long long)s->loc_row);
        return;
    }
    int64_t l = s->loc_level - 1, N = s->B * s->L * s->D;
    char kind[64];
    char where[280];
    snprintf(where, sizeof where, "first diverging layer %lld of %lld (%s %s '%s'), token %lld (row %lld)",
             (long long)l, (long long)s->n, layer_kind(s, l, kind), s->port != NULL ? "in whole stack" : "on",
             s->port != NULL ? s->ctx->ops->name : layer_backend(s, l),
             (long long)s->loc_token, (long long)s->loc_row);
    if (cfg->layers[l].parallel == 2) { /* the decoder layer's output holds both of its parallel mixers */
        char pk[64];
        size_t u = strlen(where);
        snprintf(where + u, sizeof where - u, ", in parallel with layer %lld (%s)",
                 (long long)(l - 1), layer_kind(s, l - 1, pk));
    }
    if (s->port != NULL) {
        localise_port(s, l, where);
        return;
    }
    double *h_in = s->g->hidden.data + l * N, *h_next = s->g->hidden.data + (l + 1) * N;
    double *out = xcalloc(s, (size_t)N, sizeof *out), *x = xcalloc(s, (size_t)(2 * N), sizeof *x);
    double *ym = xcalloc(s, (size_t)N, sizeof *ym), *dm = xcalloc(s, (size_t)N, sizeof *dm);
    if (s->broken)
        goto out;
    struct mc_msg msg = {{0}};
    int64_t t_layer = -1, t_mixer = -1;
    enum mc_backend_status st = mc_stack_layer_forward(s->st, l, s->B, s->L, h_in, s->g->mask, out, &msg);
    if (st != MC_BACKEND_OK) {
        say(r, "%s; the layer alone failed: %.200s", where, msg.text);
        goto out;
    }
    int layer_ok = within(s, out, h_next, &t_layer);
    mixer_input_f64(s, l, h_in, s->B * s->L, x);
    st = mc_stack_mixer_forward(s->st, l, s->B, s->L, x, s->g->mask, ym, &msg);
    if (st != MC_BACKEND_OK) {
        say(r, "%s; the mixer alone failed: %.200s", where, msg.text);
        goto out;
    }
    memcpy(dm, s->g->mixer_outputs.data + l * N, (size_t)N * sizeof *dm);
    int mixer_ok = within(s, ym, dm, &t_mixer);
    /* the second slot of a parallel pair is the whole decoder layer: its first slot's mixer, on the same norm, is
     * the other mixer the layer's output holds */
    int64_t other = cfg->layers[l].parallel == 2 ? l - 1 : -1, t_other = -1;
    int other_ok = 1;
    double *dm2 = NULL;
    if (other >= 0 && mixer_ok && (dm2 = xcalloc(s, (size_t)N, sizeof *dm2)) != NULL) {
        st = mc_stack_mixer_forward(s->st, other, s->B, s->L, x, s->g->mask, ym, &msg);
        if (st != MC_BACKEND_OK) {
            say(r, "%s; the other mixer alone failed: %.200s", where, msg.text);
            free(dm2);
            goto out;
        }
        memcpy(dm2, s->g->mixer_outputs.data + other * N, (size_t)N * sizeof *dm2);
        other_ok = within(s, ym, dm2, &t_other);
    }
    /* the feed-forward alone on the golden's residual after the mixer, hidden + residual_multiplier x mixer output
     * (both the golden's float64): what the layer adds after its mixer, so a feed-forward fault (the MoE's router,
     * its experts, the MLP) is told from one of the block norm or the residual */
    int ffn_ok = 1;
    int64_t t_ffn = -1;
    const struct mc_stack_layer *Z = &cfg->layers[l];
    if (mixer_ok && other_ok && !layer_ok && cfg->ffn_size > 0 && !mc_stack_is_zamba(cfg)) {
        if (Z->post_norm) { /* OLMo-Hybrid's attention layer: hidden + post_attention_layernorm(mixer output) */
            char nm[MC_STACK_NAME_LEN];
            mc_stack_name_layer_norm(cfg, l, nm);
            norm_f64(mc_stack_golden_weight(s->g, nm)->data, dm, s->B * s->L, s->D, cfg->norm_eps, 0, x);
            for (int64_t i = 0; i < N; i++)
                x[i] += h_in[i];
        } else if (Z->scaled) { /* MiniMax: alpha · input_layernorm(hidden) + beta · mixer output */
            mixer_input_f64(s, l, h_in, s->B * s->L, x);
            for (int64_t i = 0; i < N; i++)
                x[i] = Z->alpha * x[i] + Z->beta * dm[i];
        } else
            for (int64_t i = 0; i < N; i++)
                x[i] = other >= 0 ? h_in[i] + cfg->layers[l].out_multiplier * dm[i] +
                                        cfg->layers[other].out_multiplier * dm2[i]
                                  : h_in[i] + cfg->residual_multiplier * dm[i];
        if (mc_stack_ffn_forward(s->st, l, s->B, s->L, x, s->g->mask, ym, &msg) == MC_BACKEND_OK)
            ffn_ok = within(s, ym, h_next, &t_ffn);
    }
    char okind[64];
    if (mixer_ok && !layer_ok && Z->shared) { /* Zamba2: the block's MLP and the linear on the golden's attention
                                                output give T; h + T against the golden's */
        if (mc_stack_ffn_forward(s->st, l, s->B, s->L, dm, s->g->mask, ym, &msg) == MC_BACKEND_OK) {
            for (int64_t i = 0; i < N; i++)
                ym[i] += h_in[i];
            ffn_ok = within(s, ym, h_next, &t_ffn);
        }
    }
    /* a shared attention off: the other applications of its block, each alone on the golden's input, tell the
     * block's weights (they fail too) from this application's adapters (one of them passes) */
    int others = 0, others_ok = 0;
    for (int64_t k = 0; !mixer_ok && Z->shared && k < s->n; k++) {
        int64_t t_k = -1;
        if (k == l || !cfg->layers[k].shared || cfg->layers[k].block != Z->block)
            continue;
        mixer_input_f64(s, k, s->g->hidden.data + k * N, s->B * s->L, x);
        if (mc_stack_mixer_forward(s->st, k, s->B, s->L, x, s->g->mask, ym, &msg) != MC_BACKEND_OK)
            continue;
        others++;
        others_ok += within(s, ym, s->g->mixer_outputs.data + k * N, &t_k);
    }
    if (!mixer_ok && Z->shared && others_ok > 0)
        say(r, "%s: the shared block's attention with application %d's q/k/v adapters — its output on the golden's "
                 "own input leaves tolerance at token %lld, while %d of block %d's other applications pass: the "
                 "adapters (or this application's own weights), not the block's", where, Z->app, (long long)t_mixer,
                 others_ok, Z->block);
    else if (!mixer_ok && Z->shared)
        say(r, "%s: the shared block's attention (block %d's, with application %d's q/k/v adapters) — its output on "
                 "the golden's own input leaves tolerance at token %lld%s", where, Z->block, Z->app, (long long)t_mixer,
                 others > 0 ? ", and on every other application of the block: the block's weights" : "");
    else if (!layer_ok && !ffn_ok && Z->shared)
        say(r, "%s: glue: the shared block's MLP with application %d's adapter, or layer %lld's linear — the attention "
                 "alone is within tolerance on the golden's input, the MLP and linear on its output leave it at token "
                 "%lld", where, Z->app, (long long)Z->hf_layer, (long long)t_ffn);
    else if (!layer_ok && Z->shared)
        say(r, "%s: glue around the shared block (the concat with the original embeddings, its input_layernorm, or "
                 "h + T) — its attention, MLP and linear are within tolerance on the golden's input, the application "
                 "leaves it at token %lld", where, (long long)t_layer);
    else if (!mixer_ok && Z->hybrid)
        say(r, "%s: the Mamba2 mixer of hybrid layer %lld — its output on the golden's own input leaves tolerance at "
                 "token %lld", where, (long long)Z->hf_layer, (long long)t_mixer);
    else if (!layer_ok && Z->hybrid)
        say(r, "%s: glue around hybrid layer %lld's Mamba2 (its norm of h + T, or the residual h) — the mixer alone is "
                 "within tolerance on the golden's input, the layer leaves it at token %lld",
                 where, (long long)Z->hf_layer, (long long)t_layer);
    else if (!mixer_ok)
        say(r, "%s: mixer — its output on the golden's own input leaves tolerance at token %lld", where,
                 (long long)t_mixer);
    else if (!other_ok)
        say(r, "%s: mixer — the layer's other parallel mixer, layer %lld (%s on '%s'): its output on the golden's "
                 "own input leaves tolerance at token %lld (this slot's mixer is within it)",
                 where, (long long)other, layer_kind(s, other, okind), layer_backend(s, other), (long long)t_other);
    else if (!layer_ok && !ffn_ok && !mc_stack_layer_has_mixer(cfg, l))
        say(r, "%s: glue: the feed-forward (%s) or its residual add — the block has no mixer, and alone on the "
                 "golden's input it leaves tolerance at token %lld",
                 where, cfg->layers[l].moe ? "MoE + shared MLP" : "MLP", (long long)t_ffn);
    else if (!layer_ok && !ffn_ok)
        say(r, "%s: glue: the feed-forward (%s) or its residual add — the mixer alone is within tolerance on the "
                 "golden's input, the feed-forward alone on the golden's residual after the mixer leaves it at token "
                 "%lld",
                 where,
                 cfg->layers[l].moe && cfg->layers[l].dense ? "MoE + shared MLP"
                 : cfg->layers[l].moe                        ? "MoE"
                                                             : "MLP",
                 (long long)t_ffn);
    else if (!layer_ok && other >= 0)
        say(r, "%s: glue around the parallel mixers (norm / in and out multipliers / their sum / residual) — both "
                 "mixers alone are within tolerance on the golden's input, and the feed-forward alone on the golden's "
                 "residual after them, the layer leaves it at token %lld",
                 where, (long long)t_layer);
    else if (!layer_ok)
        say(r, "%s: glue around the mixer (norm / residual%s) — the mixer alone is within tolerance on the golden's "
                 "input, the layer leaves it at token %lld",
                 where, cfg->ffn_size > 0 ? " / feed-forward" : "", (long long)t_layer);
    else
        say(r, "%s: on the golden's input the layer is within tolerance from an empty cache; it diverges on "
                 "this scenario's %s",
                 where, scenario_path(s));
    free(dm2);
out:
    free(out);
    free(x);
    free(ym);
    free(dm);
}

/* Within the ref_hidden_states tolerance of a on b, padding excluded; the first failing token into *tok. */
static int within_ref(struct sess *s, const double *a, const double *b, int64_t *tok)
{
    return within_kind(s, a, b, MC_TENSOR_REF_HIDDEN_STATES, tok);
}

/* Everything within tolerance of the float64 golden, not of the reference stack in the same dtype: the
 * first hidden level off the reference stack names the layer; that layer and its mixer, each run alone
 * by both stacks on the reference stack's own input, say whether the mixer or the glue around it. */
static void localise_ref(struct sess *s)
{
    struct mc_check_result *r = s->res;
    const struct mc_stack_config *cfg = &s->g->config;
    if (s->broken || r->diagnosis[0] || s->ref_st == NULL || (s->ref_level < 0 && !s->ref_logits_failed))
        return;
    const char *dt = mc_dtype_name(s->ctx->dtype);
    if (!s->hidden_ok) {
        say(r, "the logits leave the reference stack's in %s; whole stack '%s' gives no hidden states (no "
                 "MC_CAP_STACK_HIDDEN), so no layer is named",
                 dt, s->ctx->ops->name);
        return;
    }
    if (s->ref_level < 0) {
        say(r, "glue after the last layer (final norm / LM head%s), against the reference stack in %s: every hidden "
                 "state agrees with it, the logits do not",
                 cfg->tied ? ", tied to the embedding" : "", dt);
        return;
    }
    if (s->ref_level == 0) {
        say(r, "glue: the embedding (hidden state 0) leaves the reference stack in %s at token %lld (row %lld)", dt,
                 (long long)s->ref_token, (long long)s->ref_row);
        return;
    }
    int64_t l = s->ref_level - 1, rows = s->B * s->L, N = rows * s->D;
    if (s->port != NULL) {
        char where[240];
        snprintf(where, sizeof where,
                 "first layer off the reference stack in %s: layer %lld of %lld (%s mixer in whole stack '%s'), token "
                 "%lld (row %lld)",
                 dt, (long long)l, (long long)s->n, mc_family_name(cfg->layers[l].family), s->ctx->ops->name,
                 (long long)s->ref_token, (long long)s->ref_row);
        struct mc_msg msg = {{0}};
        struct port_stage ps;
        if (port_layer_vs(s, s->ref_st, l, s->ref_ho, s->ref_mi, s->ref_mo, within_ref, &ps, &msg) != 0)
            say(r, "%s; run alone it failed: %.200s", where, msg.text);
        else
            port_verdict(s, where, "the reference stack's", &ps, "the error accumulated through earlier layers");
        return;
    }
    double *lg = xcalloc(s, (size_t)(rows * s->V), sizeof *lg), *hr = xcalloc(s, (size_t)((s->n + 1) * N), sizeof *hr);
    double *oa = xcalloc(s, (size_t)N, sizeof *oa), *ob = xcalloc(s, (size_t)N, sizeof *ob);
    double *x = xcalloc(s, (size_t)(2 * N), sizeof *x), *ya = xcalloc(s, (size_t)N, sizeof *ya);
    double *yb = xcalloc(s, (size_t)N, sizeof *yb);
    if (s->broken)
        goto out;
    struct mc_msg msg = {{0}};
    /* the reference stack's own hidden states (no cache: a prefill) */
    enum mc_backend_status st = mc_stack_forward(s->ref_st, NULL, s->B, s->L, s->g->input_ids, s->g->mask, lg, hr, &msg);
    if (st == MC_BACKEND_OK)
        st = mc_stack_layer_forward(s->st, l, s->B, s->L, hr + l * N, s->g->mask, oa, &msg);
    if (st == MC_BACKEND_OK)
        st = mc_stack_layer_forward(s->ref_st, l, s->B, s->L, hr + l * N, s->g->mask, ob, &msg);
    mixer_input_f64(s, l, hr + l * N, rows, x);
    if (st == MC_BACKEND_OK)
        st = mc_stack_mixer_forward(s->st, l, s->B, s->L, x, s->g->mask, ya, &msg);
    if (st == MC_BACKEND_OK)
        st = mc_stack_mixer_forward(s->ref_st, l, s->B, s->L, x, s->g->mask, yb, &msg);
    char where[240], kind[64];
    snprintf(where, sizeof where,
             "first layer off the reference stack in %s: layer %lld of %lld (%s on '%s'), token %lld (row %lld)",
             dt, (long long)l, (long long)s->n, layer_kind(s, l, kind), layer_backend(s, l),
             (long long)s->ref_token, (long long)s->ref_row);
    if (st != MC_BACKEND_OK) {
        say(r, "%s; run alone it failed: %.200s", where, msg.text);
        goto out;
    }
    int64_t t_layer = -1, t_mixer = -1;
    int layer_ok = within_ref(s, oa, ob, &t_layer), mixer_ok = within_ref(s, ya, yb, &t_mixer);
    if (!mixer_ok)
        say(r, "%s: mixer — on the reference stack's input its output leaves "
                 "the reference's at token %lld", where, (long long)t_mixer);
    else if (!layer_ok && !mc_stack_layer_has_mixer(cfg, l))
        say(r, "%s: glue: the feed-forward (%s) or its residual add — the block has no mixer, and alone on the "
                 "reference stack's input it leaves the reference's at token %lld",
                 where, cfg->layers[l].moe ? "MoE + shared MLP" : "MLP", (long long)t_layer);
    else if (!layer_ok)
        say(r, "%s: glue around the mixer (norm / residual%s) — the mixer alone agrees with the reference's, the "
                 "layer leaves the reference stack's at token %lld",
                 where, cfg->ffn_size > 0 ? " / feed-forward" : "", (long long)t_layer);
    else
        say(r, "%s: run alone on the reference stack's input the layer agrees with it (error accumulated through "
                 "earlier layers)", where);
out:
    free(lg);
    free(hr);
    free(oa);
    free(ob);
    free(x);
    free(ya);
    free(yb);
}

/* ---- entry points --------------------------------------------------------------------------------- */

enum mc_err_code mc_stack_check_validate(const struct mc_case *c, const struct mc_scenario_spec *sp,
                                         const struct mc_stack_golden *g, struct mc_error *err)
{
    int64_t L = g->len;
    for (int i = 0; i < c->n_layers; i++)
        if (c->layers[i] >= g->config.n_layers)
            return mc_error_set(err, MC_ERR_INPUT, "%s:%d:%d: in 'layers': layer %lld does not exist (golden %s has %lld)",
                                c->path, c->layers_line, c->layers_column, (long long)c->layers[i], c->golden_path,
                                (long long)g->config.n_layers);
    if (strcmp(c->model_type, g->config.model_type) != 0)
        return mc_error_set(err, MC_ERR_INPUT, "%s:%d:%d: in 'model': '%s' but golden %s holds '%s'", c->path,
                            c->family_line, c->family_column, c->model_type, c->golden_path, g->config.model_type);
    switch (sp->kind) {
    case MC_SCENARIO_DECODE:
        if (sp->prefill < 1 || sp->prefill >= L)
            return mc_scenario_bad_param(c, sp, err, "prefill %lld must be in [1, %lld)", (long long)sp->prefill,
                                         (long long)L);
        break;
    case MC_SCENARIO_CHUNKED:
        if (sp->random_sets > 0)
            return mc_scenario_bad_param(c, sp, err, "random split sets are not drawn for model cases: give `splits`");
        for (int i = 0; i < sp->n_split_sets; i++) {
            const struct mc_split_set *set = &sp->split_sets[i];
            if (set->n > 0 && set->points[set->n - 1] >= L)
                return mc_scenario_bad_param(c, sp, err, "split point %lld must be < the sequence length %lld",
                                             (long long)set->points[set->n - 1], (long long)L);
        }
        break;
    case MC_SCENARIO_FIRST_TOKEN_CAUSALITY:
        if (sp->prefill + sp->len > L)
            return mc_scenario_bad_param(c, sp, err, "prefill + len (%lld) must be <= the sequence length %lld",
                                         (long long)(sp->prefill + sp->len), (long long)L);
        break;
    case MC_SCENARIO_LEFT_PADDED_BATCH:
        for (int64_t b = 0; b < g->batch; b++) {
            int64_t p = 0;
            while (p < L && !g->mask[b * L + p])
                p++;
            if (p == L)
                return mc_scenario_bad_param(c, sp, err, "row %lld of the golden's mask is all padding", (long long)b);
            for (int64_t t = p; t < L; t++)
                if (!g->mask[b * L + t])
                    return mc_scenario_bad_param(c, sp, err, "row %lld of the golden's mask is not left padding",
                                                 (long long)b);
        }
        if (sp->prefill + sp->decode_steps > L || sp->decode_steps > 4095)
            return mc_scenario_bad_param(c, sp, err, "prefill + decode (%lld) must be <= the sequence length %lld",
                                         (long long)(sp->prefill + sp->decode_steps), (long long)L);
        break;
    case MC_SCENARIO_SPECULATIVE_VERIFY:
        if (sp->prefill < 1 || sp->len < 1 || sp->prefill + sp->len > L)
            return mc_scenario_bad_param(c, sp, err, "prefill >= 1, len >= 1 and prefill + len (%lld) <= the sequence "
                                         "length %lld", (long long)(sp->prefill + sp->len), (long long)L);
        if (sp->accept >= sp->len)
            return mc_scenario_bad_param(c, sp, err, "accept %lld must be < len %lld", (long long)sp->accept,
                                         (long long)sp->len);
        if (sp->prefill + (sp->accept >= 0 ? sp->accept + 1 : sp->len + 2) > L)
            return mc_scenario_bad_param(c, sp, err,
                                         "prefill + %s (%lld) must be <= the sequence length %lld",
                                         sp->accept >= 0 ? "accept + 1" : "len + 2 (every accept count up to len, then "
                                                                          "two single steps)",
                                         (long long)(sp->prefill + (sp->accept >= 0 ? sp->accept + 1 : sp->len + 2)),
                                         (long long)L);
        break;
    case MC_SCENARIO_PACKED_PREFILL:
        if (sp->sequences > g->batch)
            return mc_scenario_bad_param(c, sp, err, "sequences %lld: the golden has %lld rows", (long long)sp->sequences,
                                         (long long)g->batch);
        break;
    case MC_SCENARIO_BATCH_INVARIANCE:
        if (g->batch < 2)
            return mc_scenario_bad_param(c, sp, err, "needs a golden with at least 2 rows (has %lld)",
                                         (long long)g->batch);
        break;
    case MC_SCENARIO_GREEDY:
        if (sp->steps > g->greedy_steps)
            return mc_scenario_bad_param(c, sp, err, "steps %lld: the golden holds %lld greedy tokens",
                                         (long long)sp->steps, (long long)g->greedy_steps);
        if (sp->top_k > g->config.vocab)
            return mc_scenario_bad_param(c, sp, err, "top_k %lld exceeds vocab_size %lld", (long long)sp->top_k,
                                         (long long)g->config.vocab);
        break;
    default:
        break;
    }
    return MC_ERR_NONE;
}

/* The magnitude of each compared tensor over the whole golden (case/tolerance.h `magnitude`): what an
 * atol_scale is in units of. Logits, consistency and ref_logits: the prompt's and the greedy steps' logits;
 * hidden states and ref_hidden_states: the residual stream at every level; the caches: every layer's. */
static void tensor_magnitudes(const struct mc_stack_golden *g, struct mc_tolerance tol[MC_TENSOR_COUNT])
{
    tol[MC_TENSOR_LOGITS].magnitude = tol[MC_TENSOR_REF_LOGITS].magnitude = g->logits_max;
    tol[MC_TENSOR_CONSISTENCY].magnitude = g->logits_max;
    tol[MC_TENSOR_HIDDEN_STATES].magnitude = tol[MC_TENSOR_REF_HIDDEN_STATES].magnitude = g->hidden_max;
    tol[MC_TENSOR_CONV_STATE].magnitude = g->conv_max;
    tol[MC_TENSOR_RECURRENT_STATE].magnitude = g->state_max;
}

enum mc_err_code mc_stack_check_run(const struct mc_stack_ctx *ctx, struct mc_check_result *res, struct mc_error *err)
{
    double t0 = mc_clock_now_s();
    memset(res, 0, sizeof *res);
    const struct mc_case *c = ctx->c;
    snprintf(res->case_id, sizeof res->case_id, "%s", c->id);
    snprintf(res->case_path, sizeof res->case_path, "%s", c->path);
    snprintf(res->model_type, sizeof res->model_type, "%s", c->model_type);
    res->family = c->family;
    res->scenario = ctx->spec->kind;
    res->backend = ctx->ops->name;
    res->device = ctx->ops->device;
    res->dtype = ctx->dtype;
    res->status = MC_CHECK_PASS;
    struct sess s = {.ctx = ctx, .g = ctx->g, .res = res, .err = err, .loc_level = -1, .loc_token = -1,
                     .state_layer = -1, .ref_level = -1};
    s.B = ctx->g->batch;
    s.L = ctx->g->len;
    s.V = ctx->g->config.vocab;
    s.D = ctx->g->config.hidden;
    s.n = ctx->g->config.n_layers;
    const struct mc_tolerance_profile *prof = ctx->tolerance ? ctx->tolerance : &c->tolerance;
    const char *dev = ctx->tolerance_device ? ctx->tolerance_device : ctx->ops->device;
    snprintf(res->tolerance_path, sizeof res->tolerance_path, "%s", prof->path ? prof->path : "");
    snprintf(res->tolerance_device, sizeof res->tolerance_device, "%s", dev);
    for (int k = 0; k < MC_TENSOR_COUNT; k++)
        if (mc_tolerance_lookup(prof, dev, ctx->dtype, (enum mc_tensor_kind)k, &s.tol[k], err) != MC_ERR_NONE)
            return err->code;
    tensor_magnitudes(ctx->g, s.tol);
    int whole = ctx->ops->family == MC_FAMILY_STACK;
    /* the layers not under test at this dtype: on their fallback where their backend lacks it */
    const struct mc_backend_ops *lops[MC_STACK_MAX_LAYERS];
    struct mc_stack_ctx here;
    if (!whole && ctx->fallback_layer_ops != NULL && s.n <= MC_STACK_MAX_LAYERS) {
        here = *ctx;
        for (int64_t l = 0; l < s.n; l++) {
            const struct mc_backend_ops *fb = ctx->fallback_layer_ops[l];
            lops[l] = ctx->layer_ops[l];
            if (lops[l] != NULL && !ctx->under_test[l] && !(lops[l]->dtypes & MC_DTYPE_BIT(ctx->dtype)) && fb != NULL &&
                (fb->dtypes & MC_DTYPE_BIT(ctx->dtype)))
                lops[l] = fb;
        }
        here.layer_ops = lops;
        ctx = &here;
        s.ctx = ctx;
    }
    for (int64_t l = 0; l < s.n && !whole; l++)
        if (ctx->layer_ops[l] != NULL && !(ctx->layer_ops[l]->dtypes & MC_DTYPE_BIT(ctx->dtype))) {
            res->status = MC_CHECK_UNSUPPORTED;
            snprintf(res->message, sizeof res->message, "layer %lld runs on '%s', which does not support dtype %s",
                     (long long)l, ctx->layer_ops[l]->name, mc_dtype_name(ctx->dtype));
            res->duration_s = mc_clock_now_s() - t0;
            return MC_ERR_NONE;
        }
    if (ctx->spec->kind == MC_SCENARIO_PACKED_PREFILL) {
        const char *none = NULL;
        if (whole && !((ctx->ops->caps & MC_CAP_STACK_PACKED) && ctx->ops->stack_forward_packed != NULL))
            none = "has no packed call (MC_CAP_STACK_PACKED)";
        for (int64_t l = 0; !whole && none == NULL && l < s.n; l++)
            if (ctx->layer_ops[l] != NULL && ctx->layer_ops[l]->forward_packed == NULL)
                none = "runs a layer without a packed call (forward_packed)";
        if (none != NULL) {
            res->status = MC_CHECK_UNSUPPORTED;
            snprintf(res->message, sizeof res->message, "%s '%s' %s", whole ? "whole stack" : "the stack on",
                     ctx->ops->name, none);
            res->duration_s = mc_clock_now_s() - t0;
            return MC_ERR_NONE;
        }
    }
    struct mc_msg msg = {{0}};
    enum mc_backend_status st;
    if (whole) {
        st = mc_stack_port_create(ctx->g, ctx->dtype, ctx->ops, ctx->threads, &s.port, &msg);
        s.hidden_ok = st == MC_BACKEND_OK && mc_stack_port_has_hidden(s.port);
    } else {
        st = mc_stack_create(ctx->g, ctx->dtype, ctx->layer_ops, ctx->threads, &s.st, &msg);
        s.hidden_ok = 1;
    }
    if (st != MC_BACKEND_OK) {
        backend_failed(&s, st, &msg, whole ? "stack_create" : "model_create");
    } else {
        if (!whole)
            mc_stack_set_glue_fault(s.st, (enum mc_stack_glue_fault)ctx->glue_fault, ctx->glue_fault_layer);
        int reduced = ctx->dtype == MC_DTYPE_F16 || ctx->dtype == MC_DTYPE_BF16;
        if (reduced && ctx->ref_layer_ops != NULL && ctx->spec->kind == MC_SCENARIO_PREFILL) {
            st = mc_stack_create_ref(ctx->g, ctx->dtype, ctx->ref_layer_ops, ctx->threads, &s.ref_st, &msg);
            if (st != MC_BACKEND_OK)
                backend_failed(&s, st, &msg, "model_create of the reference stack");
        }
        switch (ctx->spec->kind) {
        case MC_SCENARIO_PREFILL:
            run_prefill(&s);
            break;
        case MC_SCENARIO_DECODE:
            run_decode(&s);
            break;
        case MC_SCENARIO_CHUNKED:
            run_chunked(&s);
            break;
        case MC_SCENARIO_FIRST_TOKEN_CAUSALITY:
            run_first_token(&s);
            break;
        case MC_SCENARIO_LEFT_PADDED_BATCH:
            run_left_padded(&s);
            break;
        case MC_SCENARIO_BATCH_INVARIANCE:
            run_batch_invariance(&s);
            break;
        case MC_SCENARIO_GREEDY:
            run_greedy(&s);
            break;
        case MC_SCENARIO_SPECULATIVE_VERIFY:
            run_speculative(&s);
            break;
        case MC_SCENARIO_PACKED_PREFILL:
            run_packed(&s);
            break;
        default:
            mc_error_set(err, MC_ERR_INTERNAL, "scenario '%s' has no model-level runner",
                         mc_scenario_name(ctx->spec->kind));
            break;
        }
        localise(&s);
        localise_ref(&s);
        if (s.ref_st != NULL)
            mc_stack_destroy(s.ref_st);
        if (s.st != NULL)
            mc_stack_destroy(s.st);
        mc_stack_port_destroy(s.port);
        free(s.ref_ho);
        free(s.ref_mi);
        free(s.ref_mo);
    }
    mc_check_verdict(res);
    res->duration_s = mc_clock_now_s() - t0;
    return err->code;
}
