/*
 * test_wholestack.c — whole-stack backends (backend.h MC_FAMILY_STACK, docs/models.md §7) through the
 * model checks and the runner.
 *
 * The backend under test here is a test double: the stack engine itself (stack.h, every layer on cpu, or
 * on the reference at f64) behind the whole-stack entries, built from nothing but what stack_create is
 * handed (model_type, config_json, checkpoint-named weights in the storage dtype). So every check run
 * through the whole-stack path must give exactly the verdicts and the numbers of the same stack driven
 * as an engine: the path adds no error and drops no comparison. Variants of the double: without hidden
 * states (MC_CAP_STACK_HIDDEN), with the final norm skipped, with part of the logits left unwritten.
 * The registry's checks of whole-stack ops are tested too. The real whole stacks (the mutant library's,
 * the Python adapter's) have their own tests.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "modelcase.h"

#include "case/case.h"
#include "cpu.h"
#include "base/dtype.h"
#include "family/family.h"
#include "reference.h"
#include "exec/registry.h"
#include "run/runner.h"
#include "stack/stack.h"
#include "stack/stackcheck.h"
#include "family/stackconfig.h"
#include "golden/stackgolden.h"

/* ---- the test double ---------------------------------------------------------------------------- */

enum variant { V_EXACT, V_NO_HIDDEN, V_FINAL_NORM, V_HOLES, V_MIXER_OFF, V_BLOCK_NORM, V_SHARED_COPY, V_PACKED_STALE };

/* V_MIXER_OFF and V_BLOCK_NORM plant their bug in this layer */
#define BUG_LAYER 2

/* A Mamba2 mixer 1% off: cpu's, its output scaled by 1.01 (f32 models). */
static int64_t off_hidden; /* D of the model the off mixer is planted in */
static enum mc_backend_status off_forward(struct mc_model *model, struct mc_cache *cache, const struct mc_forward_args *a,
                                          struct mc_msg *msg)
{
    enum mc_backend_status st = mc_cpu_mamba2_ops()->forward(model, cache, a, msg);
    float *y = a->y;
    int64_t n = a->batch * a->len * off_hidden;
    for (int64_t i = 0; st == MC_BACKEND_OK && i < n; i++)
        y[i] *= 1.01f;
    return st;
}
static enum mc_backend_status off_forward_packed(struct mc_model *model, struct mc_cache *pool,
                                                 const struct mc_packed_args *a, struct mc_msg *msg)
{
    enum mc_backend_status st = mc_cpu_mamba2_ops()->forward_packed(model, pool, a, msg);
    float *y = a->y;
    int64_t n = a->cu_seqlens[a->n_seqs] * off_hidden;
    for (int64_t i = 0; st == MC_BACKEND_OK && i < n; i++)
        y[i] *= 1.01f;
    return st;
}
static const struct mc_backend_ops *off_mamba2_ops(void)
{
    static struct mc_backend_ops o;
    if (o.name == NULL) {
        o = *mc_cpu_mamba2_ops();
        o.name = "cpu.off";
        o.forward = off_forward;
        o.dtypes = MC_DTYPE_BIT(MC_DTYPE_F32);
        o.caps &= ~MC_CAP_PROBES;
        o.forward_packed = off_forward_packed;
        o.probe_enable = NULL;
        o.probe_read = NULL;
    }
    return &o;
}

struct mc_model {
    struct mc_stack_golden g; /* config and weights only */
    struct mc_stack *st;
    enum mc_dtype dtype;
    enum variant v;
};

struct mc_cache {
    struct mc_stack_cache c;
    int64_t batch;
    int primed;
    struct mc_cache *shared; /* V_SHARED_COPY: the cache this "copy" really runs on */
};

static const struct mc_backend_ops *layer_ops_for(enum mc_family f, int cpu)
{
    switch (f) {
    case MC_FAMILY_GDN:
        return cpu ? mc_cpu_gdn_ops() : mc_reference_gdn_ops();
    case MC_FAMILY_SHORTCONV:
        return cpu ? mc_cpu_shortconv_ops() : mc_reference_shortconv_ops();
    case MC_FAMILY_ATTENTION:
        return cpu ? mc_cpu_attention_ops() : mc_reference_attention_ops();
    case MC_FAMILY_MAMBA1:
        return cpu ? mc_cpu_mamba1_ops() : mc_reference_mamba1_ops();
    case MC_FAMILY_KDA: /* Kimi-Linear's linear attention layers */
        return cpu ? mc_cpu_kda_ops() : mc_reference_kda_ops();
    case MC_FAMILY_LIGHTNING:
        return cpu ? mc_cpu_lightning_ops() : mc_reference_lightning_ops();
    case MC_STACK_NO_MIXER: /* a feed-forward block runs on no backend */
        return NULL;
    default:
        return cpu ? mc_cpu_mamba2_ops() : mc_reference_mamba2_ops();
    }
}

static void free_golden_part(struct mc_stack_golden *g)
{
    for (int i = 0; g->weights != NULL && i < g->n_weights; i++) {
        free(g->weights[i].name);
        free(g->weights[i].value.data);
    }
    free(g->weights);
}

static void port_destroy(struct mc_model *m)
{
    if (m == NULL)
        return;
    mc_stack_destroy(m->st);
    free_golden_part(&m->g);
    free(m);
}

static enum mc_backend_status port_create(const struct mc_stack_desc *d, struct mc_model **out, struct mc_msg *msg,
                                          enum variant v)
{
    *out = NULL;
    struct mc_model *m = calloc(1, sizeof *m);
    if (m == NULL)
        return MC_BACKEND_NOMEM;
    m->dtype = d->dtype;
    m->v = v;
    struct mc_error err = {0};
    if (mc_stack_config_parse(d->model_type, d->config_json, "port", &m->g.config, &err) != MC_ERR_NONE) {
        snprintf(msg->text, sizeof msg->text, "%.500s", err.msg);
        free(m);
        return MC_BACKEND_INVALID;
    }
    m->g.weights = calloc((size_t)d->n_weights, sizeof *m->g.weights);
    m->g.n_weights = d->n_weights;
    for (int i = 0; m->g.weights != NULL && i < d->n_weights; i++) {
        struct mc_stack_weight *w = &m->g.weights[i];
        int64_t n = 1;
        for (int k = 0; k < d->weights[i].ndim; k++)
            n *= d->weights[i].dims[k];
        w->name = strdup(d->weights[i].name);
        w->value.ndim = d->weights[i].ndim;
        memcpy(w->value.dims, d->weights[i].dims, sizeof w->value.dims);
        w->value.data = malloc((size_t)n * sizeof(double));
        if (w->name == NULL || w->value.data == NULL)
            break;
        mc_dtype_to_f64(d->dtype, d->weights[i].data, w->value.data, (size_t)n);
    }
    const struct mc_backend_ops *ops[MC_STACK_MAX_LAYERS];
    for (int64_t l = 0; l < m->g.config.n_layers; l++)
        ops[l] = layer_ops_for(m->g.config.layers[l].family, d->dtype != MC_DTYPE_F64);
    if (v == V_MIXER_OFF) {
        if (m->g.config.n_layers <= BUG_LAYER || m->g.config.layers[BUG_LAYER].family != MC_FAMILY_MAMBA2 ||
            d->dtype != MC_DTYPE_F32) {
            snprintf(msg->text, sizeof msg->text, "the off mixer is planted in an f32 Mamba2 layer %d only",
                     BUG_LAYER);
            port_destroy(m);
            return MC_BACKEND_UNSUPPORTED;
        }
        ops[BUG_LAYER] = off_mamba2_ops();
        off_hidden = m->g.config.hidden;
    }
    enum mc_backend_status st = mc_stack_create(&m->g, d->dtype, ops, d->threads, &m->st, msg);
    if (st != MC_BACKEND_OK) {
        m->st = NULL;
        port_destroy(m);
        return st;
    }
    if (v == V_FINAL_NORM)
        mc_stack_set_glue_fault(m->st, MC_STACK_GLUE_FINAL_NORM_SKIPPED, 0);
    if (v == V_BLOCK_NORM)
        mc_stack_set_glue_fault(m->st, MC_STACK_GLUE_BLOCK_NORM_SKIPPED, BUG_LAYER);
    *out = m;
    return MC_BACKEND_OK;
}

static enum mc_backend_status create_exact(const struct mc_stack_desc *d, struct mc_model **m, struct mc_msg *msg)
{
    return port_create(d, m, msg, V_EXACT);
}
static enum mc_backend_status create_no_hidden(const struct mc_stack_desc *d, struct mc_model **m, struct mc_msg *msg)
{
    return port_create(d, m, msg, V_NO_HIDDEN);
}
static enum mc_backend_status create_final_norm(const struct mc_stack_desc *d, struct mc_model **m, struct mc_msg *msg)
{
    return port_create(d, m, msg, V_FINAL_NORM);
}
static enum mc_backend_status create_mixer_off(const struct mc_stack_desc *d, struct mc_model **m, struct mc_msg *msg)
{
    return port_create(d, m, msg, V_MIXER_OFF);
}
static enum mc_backend_status create_block_norm(const struct mc_stack_desc *d, struct mc_model **m, struct mc_msg *msg)
{
    return port_create(d, m, msg, V_BLOCK_NORM);
}
static enum mc_backend_status create_shared_copy(const struct mc_stack_desc *d, struct mc_model **m, struct mc_msg *msg)
{
    return port_create(d, m, msg, V_SHARED_COPY);
}
static enum mc_backend_status create_packed_stale(const struct mc_stack_desc *d, struct mc_model **m, struct mc_msg *msg)
{
    return port_create(d, m, msg, V_PACKED_STALE);
}
static enum mc_backend_status create_holes(const struct mc_stack_desc *d, struct mc_model **m, struct mc_msg *msg)
{
    return port_create(d, m, msg, V_HOLES);
}

static enum mc_backend_status port_cache_alloc(struct mc_model *m, int64_t batch, struct mc_cache **out,
                                               struct mc_msg *msg)
{
    struct mc_cache *c = calloc(1, sizeof *c);
    if (c == NULL)
        return MC_BACKEND_NOMEM;
    enum mc_backend_status st = mc_stack_cache_new(m->st, batch, &c->c, msg);
    if (st != MC_BACKEND_OK) {
        free(c);
        return st;
    }
    c->batch = batch;
    *out = c;
    return MC_BACKEND_OK;
}

static enum mc_backend_status port_cache_copy(struct mc_model *m, struct mc_cache *dst, const struct mc_cache *src,
                                              struct mc_msg *msg)
{
    dst->primed = src->primed;
    if (m->v == V_SHARED_COPY) { /* the bug: the copy shares the source's memory */
        dst->shared = (struct mc_cache *)src;
        return MC_BACKEND_OK;
    }
    return mc_stack_cache_copy(m->st, &dst->c, &src->c, msg);
}

static void port_cache_free(struct mc_model *m, struct mc_cache *c)
{
    mc_stack_cache_free(m->st, &c->c);
    free(c);
}

static enum mc_dtype out_dtype(const struct mc_model *m)
{
    return m->dtype == MC_DTYPE_F64 ? MC_DTYPE_F64 : MC_DTYPE_F32;
}

static enum mc_backend_status port_forward(struct mc_model *m, struct mc_cache *c, const struct mc_stack_args *a,
                                           struct mc_msg *msg)
{
    const struct mc_stack_config *cfg = &m->g.config;
    int64_t rows = a->batch * a->len, D = cfg->hidden, V = cfg->vocab, n = cfg->n_layers, N = rows * D;
    int want_mixer = a->mixer_inputs != NULL || a->mixer_outputs != NULL;
    int want_hidden = a->hidden_states != NULL || want_mixer;
    double *logits = malloc((size_t)(rows * V) * sizeof *logits);
    double *hidden = want_hidden ? malloc((size_t)((n + 1) * N) * sizeof *hidden) : NULL;
    /* x: a Zamba2 application's mixer input is 2D wide */
    double *x = want_mixer ? malloc((size_t)(2 * N) * sizeof *x) : NULL, *y = want_mixer ? malloc((size_t)N * sizeof *y) : NULL;
    enum mc_backend_status st = MC_BACKEND_NOMEM;
    while (c != NULL && c->shared != NULL)
        c = c->shared;
    if (logits == NULL || (want_hidden && hidden == NULL) || (want_mixer && (x == NULL || y == NULL)))
        goto out;
    st = MC_BACKEND_UNSUPPORTED;
    if (want_mixer && c != NULL && c->primed) {
        snprintf(msg->text, sizeof msg->text, "mixer outputs of a continued forward");
        goto out;
    }
    st = mc_stack_forward(m->st, c ? &c->c : NULL, a->batch, a->len, a->input_ids, a->mask, logits, hidden, msg);
    if (st != MC_BACKEND_OK)
        goto out;
    if (c != NULL)
        c->primed = 1;
    /* V_HOLES leaves the last token's logits of row 0 unwritten */
    size_t esz = mc_dtype_size(out_dtype(m)), hole0 = (size_t)((a->len - 1) * V), hole1 = (size_t)(a->len * V);
    if (m->v == V_HOLES) {
        mc_dtype_from_f64(out_dtype(m), logits, a->logits, hole0);
        mc_dtype_from_f64(out_dtype(m), logits + hole1, (char *)a->logits + hole1 * esz, (size_t)(rows * V) - hole1);
    } else {
        mc_dtype_from_f64(out_dtype(m), logits, a->logits, (size_t)(rows * V));
    }
    if (a->hidden_states != NULL)
        mc_dtype_from_f64(out_dtype(m), hidden, a->hidden_states, (size_t)((n + 1) * N));
    for (int64_t l = 0; want_mixer && l < n && st == MC_BACKEND_OK; l++) {
        /* the mixer alone on what it read in a forward from an empty cache: this layer's normalised input
         * (the residual itself where the block norm is skipped) */
        if (m->v == V_BLOCK_NORM && l == BUG_LAYER)
            for (int64_t i = 0; i < N; i++)
                x[i] = mc_dtype_round(m->dtype, hidden[l * N + i]);
        else
            mc_stack_block_norm(m->st, l, hidden + l * N, rows, x);
        st = mc_stack_mixer_forward(m->st, l, a->batch, a->len, x, a->mask, y, msg);
        if (a->mixer_inputs != NULL && mc_stack_mixer_width(cfg, l) == D) /* (not an application's 2D input) */
            mc_dtype_from_f64(out_dtype(m), x, (char *)a->mixer_inputs + (size_t)(l * N) * esz, (size_t)N);
        if (a->mixer_outputs != NULL)
            mc_dtype_from_f64(out_dtype(m), y, (char *)a->mixer_outputs + (size_t)(l * N) * esz, (size_t)N);
    }
out:
    free(logits);
    free(hidden);
    free(x);
    free(y);
    return st;
}

static enum mc_backend_status port_forward_packed(struct mc_model *m, struct mc_cache *pool,
                                                  const struct mc_stack_packed_args *a, struct mc_msg *msg)
{
    int64_t T = a->cu_seqlens[a->n_seqs], V = m->g.config.vocab, D = m->g.config.hidden, n = m->g.config.n_layers;
    double *logits = malloc((size_t)(T * V + 1) * sizeof *logits);
    double *hidden = a->hidden_states ? malloc((size_t)((n + 1) * T * D + 1) * sizeof *hidden) : NULL;
    uint8_t *init = malloc((size_t)a->n_seqs + 1);
    enum mc_backend_status st = MC_BACKEND_NOMEM;
    if (logits != NULL && init != NULL && (a->hidden_states == NULL || hidden != NULL)) {
        for (int64_t i = 0; i < a->n_seqs; i++) /* V_PACKED_STALE: has_initial_state ignored, every slot continued */
            init[i] = m->v == V_PACKED_STALE ? 1 : a->has_initial_state[i];
        struct mc_stack_packed pk = {.n_seqs = a->n_seqs, .cu_seqlens = a->cu_seqlens, .slots = a->slots,
                                     .has_initial_state = init};
        st = mc_stack_forward_packed(m->st, &pool->c, &pk, a->input_ids, logits, hidden, msg);
    }
    if (st == MC_BACKEND_OK) {
        mc_dtype_from_f64(out_dtype(m), logits, a->logits, (size_t)(T * V));
        if (hidden != NULL)
            mc_dtype_from_f64(out_dtype(m), hidden, a->hidden_states, (size_t)((n + 1) * T * D));
    }
    free(logits);
    free(hidden);
    free(init);
    return st;
}

static enum mc_backend_status port_cache_export(struct mc_model *m, const struct mc_cache *c, int64_t layer,
                                                void *conv, void *state, struct mc_msg *msg)
{
    while (c->shared != NULL)
        c = c->shared;
    struct mc_family_shape sh;
    mc_stack_layer_shape(&m->g.config, layer, &sh);
    size_t nc = (size_t)(c->batch * sh.conv_channels * sh.conv_kernel), ns = (size_t)(c->batch * mc_family_state_elems(&sh));
    double *cb = malloc((nc + 1) * sizeof *cb), *sb = malloc((ns + 1) * sizeof *sb);
    enum mc_backend_status st = MC_BACKEND_NOMEM;
    if (cb != NULL && sb != NULL)
        st = mc_stack_cache_export(m->st, &c->c, layer, cb, ns ? sb : NULL, msg);
    if (st == MC_BACKEND_OK) {
        mc_dtype_from_f64(out_dtype(m), cb, conv, nc);
        if (ns)
            mc_dtype_from_f64(out_dtype(m), sb, state, ns);
    }
    free(cb);
    free(sb);
    return st;
}

#define PORT_OPS(var, nm, create, caps_)                                                                            \
    static const struct mc_backend_ops var = {                                                                      \
        .abi_version = MIXCHECK_ABI_VERSION,                                                                       \
        .struct_size = sizeof(struct mc_backend_ops),                                                              \
        .name = nm,                                                                                                \
        .device = "cpu",                                                                                           \
        .family = MC_FAMILY_STACK,                                                                                 \
        .dtypes = MC_DTYPE_BIT(MC_DTYPE_F64) | MC_DTYPE_BIT(MC_DTYPE_F32) | MC_DTYPE_BIT(MC_DTYPE_BF16) |          \
                  MC_DTYPE_BIT(MC_DTYPE_F16),                                                                      \
        .caps = caps_,                                                                                             \
        .model_destroy = port_destroy,                                                                             \
        .cache_alloc = port_cache_alloc,                                                                           \
        .cache_copy = port_cache_copy,                                                                             \
        .cache_free = port_cache_free,                                                                             \
        .stack_create = create,                                                                                    \
        .stack_forward = port_forward,                                                                             \
        .stack_cache_export = port_cache_export,                                                                   \
        .stack_forward_packed = port_forward_packed,                                                               \
    }

PORT_OPS(PORT_EXACT, "port.engine", create_exact, MC_CAP_STACK | MC_CAP_STACK_HIDDEN | MC_CAP_STACK_PACKED);
PORT_OPS(PORT_NO_HIDDEN, "port.no-hidden", create_no_hidden, MC_CAP_STACK);
PORT_OPS(PORT_PACKED_STALE, "port.packed-initial-state-ignored", create_packed_stale,
         MC_CAP_STACK | MC_CAP_STACK_HIDDEN | MC_CAP_STACK_PACKED);
PORT_OPS(PORT_FINAL_NORM, "port.final-norm-skipped", create_final_norm, MC_CAP_STACK | MC_CAP_STACK_HIDDEN | MC_CAP_STACK_PACKED);
PORT_OPS(PORT_MIXER_OFF, "port.mixer-off@2", create_mixer_off, MC_CAP_STACK | MC_CAP_STACK_HIDDEN | MC_CAP_STACK_PACKED);
PORT_OPS(PORT_BLOCK_NORM, "port.block-norm-skipped@2", create_block_norm, MC_CAP_STACK | MC_CAP_STACK_HIDDEN | MC_CAP_STACK_PACKED);
PORT_OPS(PORT_SHARED_COPY, "port.copy-shares-memory", create_shared_copy, MC_CAP_STACK | MC_CAP_STACK_HIDDEN | MC_CAP_STACK_PACKED);
PORT_OPS(PORT_HOLES, "port.holes", create_holes, MC_CAP_STACK | MC_CAP_STACK_HIDDEN | MC_CAP_STACK_PACKED);

/* ---- helpers ------------------------------------------------------------------------------------- */

static const char *const MODEL_CASES[] = {"cases/models/mamba2.yaml", "cases/models/mamba.yaml",
                                          "cases/models/lfm2.yaml", "cases/models/bamba.yaml",
                                          "cases/models/qwen3_5.yaml", "cases/models/granitemoehybrid.yaml",
                                          "cases/models/falcon_mamba.yaml", "cases/models/jamba.yaml",
                                          "cases/models/nemotron_h.yaml", "cases/models/zamba2.yaml",
                                          "cases/models/qwen3_next.yaml", "cases/models/qwen3_5_moe.yaml",
                                          "cases/models/falcon_h1.yaml",
                                          "cases/models/zamba.yaml", "cases/models/lfm2_moe.yaml",
                                          "cases/models/kimi_linear.yaml", "cases/models/minimax.yaml",
                                          "cases/models/inkling.yaml"};


/* One check: the engine with every layer on cpu (or on the reference at f64) when port is NULL, else
 * the whole-stack backend `port`. */
static void check(struct mc_test_model *m, const struct mc_scenario_spec *sp, enum mc_dtype dtype,
                  const struct mc_backend_ops *port, struct mc_check_result *res)
{
    const struct mc_backend_ops *ops[MC_STACK_MAX_LAYERS], *ref[MC_STACK_MAX_LAYERS];
    uint8_t under[MC_STACK_MAX_LAYERS];
    for (int64_t l = 0; l < m->g.config.n_layers; l++) {
        ref[l] = layer_ops_for(m->g.config.layers[l].family, 0);
        ops[l] = port != NULL ? ref[l] : layer_ops_for(m->g.config.layers[l].family, dtype != MC_DTYPE_F64);
        under[l] = port == NULL;
    }
    struct mc_stack_ctx ctx = {.c = &m->c, .spec = sp, .g = &m->g, .layer_ops = ops, .under_test = under,
                               .ops = port != NULL ? port : ops[0], .dtype = dtype, .ref_layer_ops = ref,
                               .tolerance_device = "cpu"};
    struct mc_error err = {0};
    if (mc_stack_check_run(&ctx, res, &err) != MC_ERR_NONE)
        fail_msg("%s %s: %s", m->c.id, mc_scenario_name(sp->kind), err.msg);
}

static const struct mc_tensor_result *find_tensor(const struct mc_check_result *r, const char *name)
{
    for (int i = 0; i < r->n_tensors; i++)
        if (strcmp(r->tensors[i].name, name) == 0)
            return &r->tensors[i];
    return NULL;
}

/* ---- tests ----------------------------------------------------------------------------------------- */

/* Every scenario of every model case, at f64 (reference layers), f32, bf16 and f16 (cpu layers): the
 * whole-stack path gives the engine's status, the same tensors, and the same errors bit for bit. */
static void test_port_equals_engine(void **state)
{
    (void)state;
    static const enum mc_dtype dtypes[] = {MC_DTYPE_F64, MC_DTYPE_F32, MC_DTYPE_BF16, MC_DTYPE_F16};
    struct mc_check_result *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    assert_non_null(a);
    assert_non_null(b);
    int checks = 0;
    for (size_t p = 0; p < sizeof MODEL_CASES / sizeof MODEL_CASES[0]; p++) {
        struct mc_test_model m;
        mc_test_model_load(MODEL_CASES[p], &m);
        for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++)
            for (int s = 0; s < m.c.n_scenarios; s++) {
                check(&m, &m.c.scenarios[s], dtypes[d], NULL, a);
                check(&m, &m.c.scenarios[s], dtypes[d], &PORT_EXACT, b);
                const char *what = mc_scenario_name(m.c.scenarios[s].kind), *dt = mc_dtype_name(dtypes[d]);
                if (a->status != MC_CHECK_PASS || b->status != MC_CHECK_PASS)
                    fail_msg("%s %s %s: engine %s (%s), whole stack %s (%s %s)", m.c.id, what, dt,
                             mc_check_status_name(a->status), a->message, mc_check_status_name(b->status), b->message,
                             b->diagnosis);
                assert_int_equal(a->n_tensors, b->n_tensors);
                for (int t = 0; t < a->n_tensors; t++) {
                    const struct mc_tensor_result *tb = find_tensor(b, a->tensors[t].name);
                    if (tb == NULL)
                        fail_msg("%s %s %s: the whole stack has no '%s'", m.c.id, what, dt, a->tensors[t].name);
                    if (tb->stats.n_elems != a->tensors[t].stats.n_elems ||
                        tb->stats.max_abs_err != a->tensors[t].stats.max_abs_err ||
                        tb->stats.max_rel_err != a->tensors[t].stats.max_rel_err)
                        fail_msg("%s %s %s %s: engine %lld elems max abs %.17g, whole stack %lld elems max abs %.17g",
                                 m.c.id, what, dt, a->tensors[t].name, (long long)a->tensors[t].stats.n_elems,
                                 a->tensors[t].stats.max_abs_err, (long long)tb->stats.n_elems, tb->stats.max_abs_err);
                }
                assert_string_equal(b->backend, "port.engine");
                checks++;
            }
        mc_test_model_unload(&m);
    }
    printf("  %d model checks equal through the whole-stack path\n", checks);
    free(a);
    free(b);
}

/* Without MC_CAP_STACK_HIDDEN only logits and caches are compared, and a failure says no layer is named. */
static void test_no_hidden(void **state)
{
    (void)state;
    struct mc_check_result *r = malloc(sizeof *r);
    assert_non_null(r);
    struct mc_test_model m;
    mc_test_model_load("cases/models/mamba2.yaml", &m);
    check(&m, &m.c.scenarios[0], MC_DTYPE_F32, &PORT_NO_HIDDEN, r);
    assert_int_equal(r->status, MC_CHECK_PASS);
    assert_non_null(find_tensor(r, "logits"));
    assert_null(find_tensor(r, "hidden_states"));
    assert_non_null(find_tensor(r, "conv_state"));
    mc_test_model_unload(&m);
    free(r);
}

/* The final norm skipped: every hidden state within tolerance, the logits not: glue after the last layer. */
static void test_final_norm_mutant(void **state)
{
    (void)state;
    struct mc_check_result *r = malloc(sizeof *r);
    assert_non_null(r);
    for (size_t p = 0; p < sizeof MODEL_CASES / sizeof MODEL_CASES[0]; p++) {
        struct mc_test_model m;
        mc_test_model_load(MODEL_CASES[p], &m);
        check(&m, &m.c.scenarios[0], MC_DTYPE_F32, &PORT_FINAL_NORM, r);
        assert_int_equal(r->status, MC_CHECK_FAIL);
        if (strstr(r->diagnosis, "glue after the last layer") == NULL)
            fail_msg("%s: diagnosis \"%s\"", m.c.id, r->diagnosis);
        printf("  %-8s port.final-norm-skipped: %s\n", m.g.config.model_type, r->diagnosis);
        mc_test_model_unload(&m);
    }
    free(r);
}

/* A layer bug of a whole stack is named at its layer, as its mixer or as the glue around it, from the
 * whole stack's own hidden states and mixer outputs against the reference's layer on the same input. */
static void test_layer_localisation(void **state)
{
    (void)state;
    struct mc_check_result *r = malloc(sizeof *r);
    assert_non_null(r);
    struct mc_test_model m;
    mc_test_model_load("cases/models/mamba2.yaml", &m);
    static const struct {
        const struct mc_backend_ops *ops;
        const char *expect[2];
    } runs[] = {
        {&PORT_MIXER_OFF, {"first diverging layer 2 of 4 (mamba2 mixer in whole stack 'port.mixer-off@2')", ": mixer —"}},
        {&PORT_BLOCK_NORM, {"first diverging layer 2 of 4", "glue around the mixer (the block norm)"}},
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++)
        for (int s = 0; s < m.c.n_scenarios; s++) {
            check(&m, &m.c.scenarios[s], MC_DTYPE_F32, runs[i].ops, r);
            if (m.c.scenarios[s].kind == MC_SCENARIO_GREEDY)
                continue; /* its diagnosis is the first diverging step */
            if (r->status != MC_CHECK_FAIL)
                fail_msg("%s %s: %s %s", runs[i].ops->name, mc_scenario_name(m.c.scenarios[s].kind),
                         mc_check_status_name(r->status), r->message);
            for (int k = 0; k < 2; k++)
                if (strstr(r->diagnosis, runs[i].expect[k]) == NULL)
                    fail_msg("%s %s: diagnosis \"%s\" lacks \"%s\"", runs[i].ops->name,
                             mc_scenario_name(m.c.scenarios[s].kind), r->diagnosis, runs[i].expect[k]);
            if (m.c.scenarios[s].kind == MC_SCENARIO_PREFILL)
                printf("  %s: %s\n", runs[i].ops->name, r->diagnosis);
        }
    mc_test_model_unload(&m);
    free(r);
}

/* speculative_verify at the model level: a cache_copy that shares the source's memory fails it, and the
 * snapshot says so; the other scenarios, which copy no cache, still pass. */
static void test_shared_copy(void **state)
{
    (void)state;
    struct mc_check_result *r = malloc(sizeof *r);
    assert_non_null(r);
    struct mc_test_model m;
    mc_test_model_load("cases/models/mamba2.yaml", &m); /* (with attention layers the shared KV cache overflows: an error) */
    for (int s = 0; s < m.c.n_scenarios; s++) {
        check(&m, &m.c.scenarios[s], MC_DTYPE_F32, &PORT_SHARED_COPY, r);
        if (m.c.scenarios[s].kind != MC_SCENARIO_SPECULATIVE_VERIFY) {
            if (r->status != MC_CHECK_PASS)
                fail_msg("%s: %s %s (%s)", mc_scenario_name(r->scenario), mc_check_status_name(r->status),
                         r->first_fail_tensor, r->diagnosis);
            continue;
        }
        if (r->status != MC_CHECK_FAIL)
            fail_msg("speculative_verify: %s: %s", mc_check_status_name(r->status), r->message);
        const struct mc_tensor_result *t = find_tensor(r, "snapshot");
        assert_non_null(t);
        assert_true(t->stats.n_fail > 0);
        printf("  port.copy-shares-memory: speculative_verify fails first on %s (%s)\n", r->first_fail_tensor,
               r->detail);
    }
    mc_test_model_unload(&m);
    free(r);
}

/* The packed call of a whole stack: has_initial_state ignored (every sequence continues from its slot,
 * serving.md S2.4 at the model level) fails packed_prefill; a whole stack without the packed entry gets it
 * `unsupported`, saying why. */
static void test_packed(void **state)
{
    (void)state;
    struct mc_check_result *r = malloc(sizeof *r);
    assert_non_null(r);
    struct mc_test_model m;
    mc_test_model_load("cases/models/lfm2.yaml", &m);
    const struct mc_scenario_spec *sp = NULL;
    for (int s = 0; s < m.c.n_scenarios; s++)
        if (m.c.scenarios[s].kind == MC_SCENARIO_PACKED_PREFILL)
            sp = &m.c.scenarios[s];
    assert_non_null(sp);
    check(&m, sp, MC_DTYPE_F32, &PORT_PACKED_STALE, r);
    assert_int_equal(r->status, MC_CHECK_FAIL);
    assert_non_null(strstr(r->detail, "packed call 1"));
    printf("  port.packed-initial-state-ignored: fails on %s in \"%s\"\n", r->first_fail_tensor, r->detail);
    check(&m, sp, MC_DTYPE_F32, &PORT_NO_HIDDEN, r);
    assert_int_equal(r->status, MC_CHECK_UNSUPPORTED);
    assert_non_null(strstr(r->message, "MC_CAP_STACK_PACKED"));
    mc_test_model_unload(&m);
    free(r);
}

/* Logits a backend leaves unwritten are NaN to the comparison: the check fails and says so. */
static void test_unwritten_logits(void **state)
{
    (void)state;
    struct mc_check_result *r = malloc(sizeof *r);
    assert_non_null(r);
    struct mc_test_model m;
    mc_test_model_load("cases/models/lfm2.yaml", &m);
    check(&m, &m.c.scenarios[0], MC_DTYPE_F32, &PORT_HOLES, r);
    assert_int_equal(r->status, MC_CHECK_FAIL);
    const struct mc_tensor_result *t = find_tensor(r, "logits");
    assert_non_null(t);
    assert_true(t->stats.n_nan >= m.g.config.vocab);
    mc_test_model_unload(&m);
    free(r);
}

/* Through the runner: `--backend port.engine` runs every model case on the whole stack and passes;
 * the mutant fails with its diagnosis. */
static void run_models(const char *backend, struct mc_run_report *rep)
{
    struct mc_registry *reg = malloc(sizeof *reg);
    assert_non_null(reg);
    mc_registry_init(reg);
    struct mc_error err = {0};
    const struct mc_backend_ops *const builtins[] = {
        mc_reference_mamba2_ops(), mc_reference_mamba1_ops(), mc_reference_gdn_ops(), mc_reference_shortconv_ops(),
        mc_reference_attention_ops(), mc_reference_kda_ops(), mc_reference_lightning_ops(), &PORT_EXACT,
        &PORT_FINAL_NORM};
    for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++)
        if (mc_registry_add(reg, builtins[i], "test", &err) != MC_ERR_NONE)
            fail_msg("%s", err.msg);
    struct mc_run_options opt = {.filter = {.backend = backend}};
    const char *paths[] = {"cases/models"};
    memset(rep, 0, sizeof *rep);
    if (mc_run(paths, 1, reg, &opt, NULL, rep, &err) != MC_ERR_NONE)
        fail_msg("%s", err.msg);
    free(reg);
}

static void test_runner(void **state)
{
    (void)state;
    struct mc_run_report rep;
    run_models("port.engine", &rep);
    assert_int_equal(rep.n_problems, 0);
    assert_true(rep.n_checks >= 5);
    for (int i = 0; i < rep.n_checks; i++) {
        assert_string_equal(rep.checks[i].backend, "port.engine");
        if (rep.checks[i].status != MC_CHECK_PASS)
            fail_msg("%s %s %s: %s", rep.checks[i].case_id, mc_scenario_name(rep.checks[i].scenario),
                     mc_dtype_name(rep.checks[i].dtype), rep.checks[i].message);
    }
    assert_int_equal(mc_run_exit_code(&rep), 0);
    printf("  runner: %d checks on port.engine pass\n", rep.n_checks);
    mc_run_report_free(&rep);
    run_models("port.final-norm-skipped", &rep);
    assert_int_equal(mc_run_exit_code(&rep), 1);
    int failed = 0;
    for (int i = 0; i < rep.n_checks; i++)
        failed += rep.checks[i].status == MC_CHECK_FAIL;
    assert_true(failed > 0);
    mc_run_report_free(&rep);
}

static enum mc_backend_status no_create(const struct mc_stack_desc *d, struct mc_model **m, struct mc_msg *msg)
{
    (void)d;
    (void)m;
    (void)msg;
    return MC_BACKEND_UNSUPPORTED;
}

/* The registry refuses a whole stack without MC_CAP_STACK or without an entry, and strips the stack
 * entries of a mixer backend. */
static void test_registry(void **state)
{
    (void)state;
    struct mc_registry *reg = malloc(sizeof *reg);
    assert_non_null(reg);
    mc_registry_init(reg);
    struct mc_error err = {0};
    struct mc_backend_ops o = PORT_EXACT;
    o.caps = 0;
    assert_int_equal(mc_registry_add(reg, &o, "t", &err), MC_ERR_BACKEND);
    assert_non_null(strstr(err.msg, "MC_CAP_STACK"));
    o = PORT_EXACT;
    o.stack_forward = NULL;
    mc_error_clear(&err);
    assert_int_equal(mc_registry_add(reg, &o, "t", &err), MC_ERR_BACKEND);
    assert_non_null(strstr(err.msg, "stack_forward"));
    /* a whole stack needs no mixer entries */
    mc_error_clear(&err);
    assert_int_equal(mc_registry_add(reg, &PORT_EXACT, "t", &err), MC_ERR_NONE);
    assert_ptr_not_equal(mc_registry_find(reg, "port.engine", MC_FAMILY_STACK), NULL);
    /* a mixer backend's stack entries are not taken */
    struct mc_backend_ops mx = *mc_reference_shortconv_ops();
    mx.name = "mixer-with-stack-bits";
    mx.caps |= MC_CAP_STACK;
    mx.stack_create = no_create;
    assert_int_equal(mc_registry_add(reg, &mx, "t", &err), MC_ERR_NONE);
    const struct mc_backend_ops *f = mc_registry_find(reg, "mixer-with-stack-bits", MC_FAMILY_SHORTCONV);
    assert_non_null(f);
    assert_null(f->stack_create);
    assert_int_equal(f->caps & MC_CAP_STACK, 0);
    free(reg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registry),
        cmocka_unit_test(test_no_hidden),
        cmocka_unit_test(test_unwritten_logits),
        cmocka_unit_test(test_final_norm_mutant),
        cmocka_unit_test(test_layer_localisation),
        cmocka_unit_test(test_shared_copy),
        cmocka_unit_test(test_packed),
        cmocka_unit_test(test_runner),
        cmocka_unit_test(test_port_equals_engine),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
