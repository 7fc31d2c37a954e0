/*
 * test_stack_backends.c — the mutant library's whole-stack backends (mut_stack.c) driven in process
 * through their ops (loaded with the harness's plugin loader and registry), on the bundled model goldens
 * (golden/models/{mamba2,lfm2,bamba,qwen3_5}.h5) at f32:
 *   - stack.correct: the prefill's logits, hidden states, mixer outputs and mixer inputs (against the float64
 *     block norm of the golden's hidden state) at every real position and every layer's cache, then
 *     the golden's greedy continuation fed token by token through the cache (greedy_logits), each within
 *     the f32 model tolerances of cases/tolerances/models*.yaml; the max errors are printed;
 *   - each glue mutant leaves those bounds where it applies (and equals the control where it does not);
 *   - model type mamba is unsupported (no Mamba1 mixer in the library), a bad config.json is invalid
 *     with the key named, a missing tensor is named.
 * The CLI kill matrix of the same backends is test_stack_mutants.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include <cmocka.h>

#include "base/dtype.h"
#include "exec/plugin.h"
#include "exec/registry.h"
#include "golden/stackgolden.h"

static struct mc_registry reg;
static struct mc_plugins plugins;

static int setup(void **state)
{
    (void)state;
    struct mc_error err = {0};
    mc_registry_init(&reg);
    mc_plugins_init(&plugins);
    if (mc_plugins_load(&plugins, MC_MUTANTS_PLUGIN, &reg, &err) != MC_ERR_NONE) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    mc_plugins_unload(&plugins);
    return 0;
}

static const struct mc_backend_ops *stack_ops(const char *name)
{
    const struct mc_backend_ops *ops = mc_registry_find(&reg, name, MC_FAMILY_STACK);
    if (ops == NULL)
        fail_msg("no whole-stack backend '%s' in %s", name, MC_MUTANTS_PLUGIN);
    return ops;
}

/* A golden's tensors as checkpoint weights in the model dtype. */
struct weights {
    struct mc_weight *w;
    void **data;
    int n;
};

static void weights_make(const struct mc_stack_golden *g, enum mc_dtype dtype, struct weights *ws)
{
    ws->n = g->n_weights;
    ws->w = calloc((size_t)ws->n, sizeof *ws->w);
    ws->data = calloc((size_t)ws->n, sizeof *ws->data);
    assert_non_null(ws->w);
    assert_non_null(ws->data);
    for (int i = 0; i < ws->n; i++) {
        const struct mc_array *a = &g->weights[i].value;
        int64_t n = mc_array_elems(a);
        ws->data[i] = malloc((size_t)n * mc_dtype_size(dtype));
        assert_non_null(ws->data[i]);
        mc_dtype_from_f64(dtype, a->data, ws->data[i], (size_t)n);
        ws->w[i].name = g->weights[i].name;
        ws->w[i].ndim = a->ndim;
        memcpy(ws->w[i].dims, a->dims, sizeof ws->w[i].dims);
        ws->w[i].data = ws->data[i];
    }
}

static void weights_free(struct weights *ws)
{
    for (int i = 0; i < ws->n; i++)
        free(ws->data[i]);
    free(ws->data);
    free(ws->w);
}

/* The worst |got - want| - (atol + rtol |want|) over the real positions, and the max abs error. */
struct err {
    double max_abs, worst_excess;
};

static void err_add(struct err *e, double got, double want, double atol, double rtol)
{
    double d = isfinite(got) ? fabs(got - want) : INFINITY;
    if (d > e->max_abs)
        e->max_abs = d;
    double x = d - (atol + rtol * fabs(want));
    if (x > e->worst_excess)
        e->worst_excess = x;
}

/* The tolerances of cases/tolerances/models.yaml (mamba2) and models-*.yaml (the hybrids). */
struct tol {
    double logits_atol, logits_rtol, hidden_atol, hidden_rtol, state_atol, conv_atol, state_rtol;
};

static struct tol tol_for(const char *model_type, enum mc_dtype dtype)
{
    const int m2 = strcmp(model_type, "mamba2") == 0, qw = strcmp(model_type, "qwen3_5_text") == 0;
    if (dtype == MC_DTYPE_BF16) /* logits 0.3 (qwen3_5 0.6); hidden 0.05 (hybrids 0.08); states 1e-3 (hybrids 0.06) */
        return (struct tol){qw ? 0.6 : 0.3, 1.17e-2, m2 ? 0.05 : 0.08, 1.17e-2, m2 ? 1.0e-3 : 0.06, 0.02, 1.17e-2};
    /* models.yaml, models-lfm2.yaml, models-bamba.yaml: logits 3e-5 / 1e-5; models-qwen3_5.yaml: logits 5e-5 */
    const double logits_atol = strcmp(model_type, "qwen3_5_text") == 0 ? 5.0e-5 : 3.0e-5;
    /* recurrent_state: 2e-7 (models.yaml, Mamba2 states ~1e-3), 3e-6 for the hybrids (KV caches ~1); conv_state 3e-6,
     * rtol 1e-5 everywhere */
    const double state_atol = m2 ? 2.0e-7 : 3.0e-6;
    return (struct tol){logits_atol, 1.0e-5, 5.0e-6, 1.0e-5, state_atol, 3.0e-6, 1.0e-5};
}

struct run {
    struct err logits, hidden, mixer_in, mixer, cache, greedy;
};

/* The golden's block norm of layer l at one position of hidden state l (float64): what mixer_inputs[l] holds. */
static void golden_norm(const struct mc_stack_golden *g, int64_t l, const double *h, double *x)
{
    char name[MC_STACK_NAME_LEN];
    mc_stack_name_layer_norm(&g->config, l, name);
    const struct mc_array *w = mc_stack_golden_weight(g, name);
    assert_non_null(w);
    const int64_t D = g->config.hidden;
    double ss = 0.0;
    for (int64_t d = 0; d < D; d++)
        ss += h[d] * h[d];
    const double inv = 1.0 / sqrt(ss / (double)D + g->config.norm_eps);
    for (int64_t d = 0; d < D; d++)
        x[d] = h[d] * inv * (g->config.zero_centred ? 1.0 + w->data[d] : w->data[d]);
}

/* Every layer's exported cache after the prefill against the golden's at state position L. */
static void compare_cache(const struct mc_backend_ops *ops, struct mc_model *m, struct mc_cache *c,
                          const struct mc_stack_golden *g, const struct tol *t, struct err *e)
{
    int64_t at = -1;
    for (int64_t i = 0; i < g->n_positions; i++)
        if (g->state_positions[i] == g->len)
            at = i;
    assert_true(at >= 0);
    for (int64_t l = 0; l < g->config.n_layers; l++) {
        const struct mc_array *cs = &g->layers[l].conv_state, *rs = &g->layers[l].recurrent_state;
        const int64_t nc = mc_array_elems(cs) / cs->dims[0], ns = rs->ndim ? mc_array_elems(rs) / rs->dims[0] : 0;
        float *conv = malloc((size_t)nc * sizeof *conv), *st = ns ? malloc((size_t)ns * sizeof *st) : NULL;
        struct mc_msg msg = {{0}};
        assert_non_null(conv);
        if (ops->stack_cache_export(m, c, l, conv, st, &msg) != MC_BACKEND_OK)
            fail_msg("layer %lld: %s", (long long)l, msg.text);
        for (int64_t i = 0; i < nc; i++)
            err_add(e, conv[i], cs->data[at * nc + i], t->conv_atol, t->state_rtol);
        for (int64_t i = 0; i < ns; i++)
            err_add(e, st[i], rs->data[at * ns + i], t->state_atol, t->state_rtol);
        free(conv);
        free(st);
    }
}

/* Prefill on a fresh cache and the greedy continuation through it; errors against the golden. */
static void run_golden(const char *backend, const char *golden, enum mc_dtype dtype, struct run *out)
{
    struct mc_stack_golden g;
    struct mc_error err = {0};
    if (mc_stack_golden_load(golden, &g, &err) != MC_ERR_NONE)
        fail_msg("%s", err.msg);
    const struct mc_backend_ops *ops = stack_ops(backend);
    struct weights ws;
    weights_make(&g, dtype, &ws);
    struct mc_stack_desc d = {.model_type = g.config.model_type, .config_json = g.config_json, .dtype = dtype,
                              .weights = ws.w, .n_weights = ws.n};
    struct mc_model *m = NULL;
    struct mc_msg msg = {{0}};
    if (ops->stack_create(&d, &m, &msg) != MC_BACKEND_OK)
        fail_msg("%s on %s: %s", backend, golden, msg.text);
    const struct tol t = tol_for(g.config.model_type, dtype);
    const int64_t B = g.batch, L = g.len, V = g.config.vocab, D = g.config.hidden, n = g.config.n_layers;
    float *logits = malloc((size_t)(B * L * V) * sizeof *logits);
    float *hidden = malloc((size_t)((n + 1) * B * L * D) * sizeof *hidden);
    float *mixer = malloc((size_t)(n * B * L * D) * sizeof *mixer);
    float *mixer_in = malloc((size_t)(n * B * L * D) * sizeof *mixer_in);
    assert_true(logits && hidden && mixer && mixer_in);
    struct mc_cache *c = NULL;
    assert_int_equal(ops->cache_alloc(m, B, &c, &msg), MC_BACKEND_OK);
    struct mc_stack_args a = {.batch = B, .len = L, .input_ids = g.input_ids, .mask = g.mask, .logits = logits,
                              .hidden_states = hidden, .mixer_inputs = mixer_in, .mixer_outputs = mixer};
    if (ops->stack_forward(m, c, &a, &msg) != MC_BACKEND_OK)
        fail_msg("%s: %s", backend, msg.text);
    memset(out, 0, sizeof *out);
    double *xn = malloc((size_t)D * sizeof *xn);
    assert_non_null(xn);
    for (int64_t b = 0; b < B; b++)
        for (int64_t p = 0; p < L; p++) {
            if (!g.mask[b * L + p])
                continue;
            for (int64_t v = 0; v < V; v++)
                err_add(&out->logits, logits[(b * L + p) * V + v], g.logits.data[(b * L + p) * V + v], t.logits_atol,
                        t.logits_rtol);
            for (int64_t l = 0; l <= n; l++)
                for (int64_t k = 0; k < D; k++) {
                    size_t i = (size_t)(((l * B + b) * L + p) * D + k);
                    err_add(&out->hidden, hidden[i], g.hidden.data[i], t.hidden_atol, t.hidden_rtol);
                    if (l < n)
                        err_add(&out->mixer, mixer[i], g.mixer_outputs.data[i], t.hidden_atol, t.hidden_rtol);
                }
            for (int64_t l = 0; l < n; l++) {
                const size_t i = (size_t)(((l * B + b) * L + p) * D);
                golden_norm(&g, l, g.hidden.data + i, xn);
                for (int64_t k = 0; k < D; k++)
                    err_add(&out->mixer_in, mixer_in[i + (size_t)k], xn[k], t.hidden_atol, t.hidden_rtol);
            }
        }
    compare_cache(ops, m, c, &g, &t, &out->cache);
    /* greedy_logits[:, 0] is the prompt's last position; step s > 0 feeds greedy_tokens[:, s-1] */
    const int64_t G = g.greedy_steps;
    int64_t *ids = malloc((size_t)B * sizeof *ids);
    assert_non_null(ids);
    for (int64_t b = 0; b < B; b++)
        for (int64_t v = 0; v < V; v++)
            err_add(&out->greedy, logits[(b * L + L - 1) * V + v], g.greedy_logits.data[(b * G) * V + v], t.logits_atol,
                    t.logits_rtol);
    for (int64_t s = 1; s < G; s++) {
        for (int64_t b = 0; b < B; b++)
            ids[b] = g.greedy_tokens[b * G + s - 1];
        struct mc_stack_args st = {.batch = B, .len = 1, .input_ids = ids, .logits = logits};
        if (ops->stack_forward(m, c, &st, &msg) != MC_BACKEND_OK)
            fail_msg("%s: step %lld: %s", backend, (long long)s, msg.text);
        for (int64_t b = 0; b < B; b++)
            for (int64_t v = 0; v < V; v++)
                err_add(&out->greedy, logits[b * V + v], g.greedy_logits.data[(b * G + s) * V + v], t.logits_atol,
                        t.logits_rtol);
    }
    free(ids);
    ops->cache_free(m, c);
    ops->model_destroy(m);
    free(logits);
    free(hidden);
    free(mixer);
    free(mixer_in);
    free(xn);
    weights_free(&ws);
    mc_stack_golden_free(&g);
}

static const char *const goldens[] = {"golden/models/mamba2.h5", "golden/models/lfm2.h5", "golden/models/bamba.h5",
                                      "golden/models/qwen3_5.h5"};
#define N_GOLDENS (sizeof goldens / sizeof goldens[0])

static void test_correct_matches_goldens(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_GOLDENS; i++) {
        struct run r;
        run_golden("stack.correct", goldens[i], MC_DTYPE_F32, &r);
        printf("stack.correct %-26s max abs: logits %.2e  hidden %.2e  mixer in %.2e out %.2e  cache %.2e  greedy %.2e\n",
               goldens[i], r.logits.max_abs, r.hidden.max_abs, r.mixer_in.max_abs, r.mixer.max_abs, r.cache.max_abs,
               r.greedy.max_abs);
        assert_true(r.logits.worst_excess <= 0.0);
        assert_true(r.hidden.worst_excess <= 0.0);
        assert_true(r.mixer.worst_excess <= 0.0);
        assert_true(r.mixer_in.worst_excess <= 0.0);
        assert_true(r.cache.worst_excess <= 0.0);
        assert_true(r.greedy.worst_excess <= 0.0);
    }
}

/* At bf16 (upstream's dtype rules, mut_stack.c) the control is within the bf16 model tolerances. */
static void test_correct_bf16(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_GOLDENS; i++) {
        struct run r;
        run_golden("stack.correct", goldens[i], MC_DTYPE_BF16, &r);
        printf("stack.correct bf16 %-21s max abs: logits %.2e  hidden %.2e  mixer %.2e  cache %.2e  greedy %.2e\n",
               goldens[i], r.logits.max_abs, r.hidden.max_abs, r.mixer.max_abs, r.cache.max_abs, r.greedy.max_abs);
        assert_true(r.logits.worst_excess <= 0.0);
        assert_true(r.hidden.worst_excess <= 0.0);
        assert_true(r.cache.worst_excess <= 0.0);
        assert_true(r.greedy.worst_excess <= 0.0);
    }
}

/* Which of the four goldens each mutant must leave (1) or match like the control (0), and where. */
static void test_glue_mutants_deviate(void **state)
{
    (void)state;
    static const struct {
        const char *backend;
        int applies[N_GOLDENS]; /* mamba2, lfm2, bamba, qwen3_5 */
        int hidden_right;       /* the prefill's hidden states stay right (the bug is after the last layer / cached) */
    } cases[] = {
        {"stack.final-norm-skipped", {1, 1, 1, 1}, 1},
        {"stack.head-untied", {0, 1, 0, 0}, 1}, /* only lfm2 is tied */
        {"stack.block-norm-skipped", {1, 1, 1, 1}, 0},
        {"stack.residual-not-fp32", {0, 0, 0, 0}, 1}, /* f32: every add is float32 anyway */
        /* RoPE is relative: a row's positions shifted by its pad count leave the logits; the cached keys move */
        {"stack.positions-with-pads", {0, 1, 1, 1}, 1},
        {"stack.state-not-carried", {1, 1, 1, 1}, 1}, /* the prefill is right, the greedy steps are not */
        {"stack.embedding-scaled", {1, 1, 1, 1}, 0},
        {"stack.norm-not-zero-centred", {0, 0, 0, 1}, 0}, /* only Qwen3.5's norms are zero-centred */
        {"stack.ffn-gate-up-swapped", {0, 1, 1, 1}, 0}, /* mamba2 has no feed-forward */
        {"stack.copy-skips-attention", {0, 0, 0, 0}, 1}, /* this test copies no cache; test_stack_mutants catches it */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        for (size_t i = 0; i < N_GOLDENS; i++) {
            struct run r;
            run_golden(cases[k].backend, goldens[i], MC_DTYPE_F32, &r);
            const double worst = fmax(fmax(r.logits.worst_excess, r.hidden.worst_excess),
                                      fmax(r.cache.worst_excess, r.greedy.worst_excess));
            printf("%-26s %-26s max abs: logits %.2e  hidden %.2e  cache %.2e  greedy %.2e -> %s\n", cases[k].backend,
                   goldens[i], r.logits.max_abs, r.hidden.max_abs, r.cache.max_abs, r.greedy.max_abs,
                   worst > 0.0 ? "caught" : "passes");
            if (cases[k].applies[i]) {
                assert_true(worst > 0.0);
                if (cases[k].hidden_right)
                    assert_true(r.hidden.worst_excess <= 0.0);
            } else {
                assert_true(worst <= 0.0);
            }
        }
}

/* The packed call on a pool: every golden row's real tokens as one sequence, in two calls (a first part from
 * zero into a slot holding another row's state, the rest from the slot), logits at its real positions against
 * the golden's; a pool row no call owns is left as it was. */
static void test_packed(void **state)
{
    (void)state;
    for (size_t gi = 0; gi < N_GOLDENS; gi++) {
        struct mc_stack_golden g;
        struct mc_error err = {0};
        if (mc_stack_golden_load(goldens[gi], &g, &err) != MC_ERR_NONE)
            fail_msg("%s", err.msg);
        const struct mc_backend_ops *ops = stack_ops("stack.correct");
        assert_true(ops->caps & MC_CAP_STACK_PACKED);
        struct weights ws;
        weights_make(&g, MC_DTYPE_F32, &ws);
        struct mc_stack_desc d = {.model_type = g.config.model_type, .config_json = g.config_json,
                                  .dtype = MC_DTYPE_F32, .weights = ws.w, .n_weights = ws.n};
        struct mc_model *m = NULL;
        struct mc_msg msg = {{0}};
        assert_int_equal(ops->stack_create(&d, &m, &msg), MC_BACKEND_OK);
        const int64_t B = g.batch, L = g.len, V = g.config.vocab, S = B + 1;
        const struct tol t = tol_for(g.config.model_type, MC_DTYPE_F32);
        struct mc_cache *pool = NULL;
        assert_int_equal(ops->cache_alloc(m, S, &pool, &msg), MC_BACKEND_OK);
        int64_t *ids = malloc((size_t)(B * L) * sizeof *ids), *cu = malloc((size_t)(B + 1) * sizeof *cu);
        int64_t *slots = malloc((size_t)B * sizeof *slots), *first = malloc((size_t)B * sizeof *first);
        int64_t *start = malloc((size_t)B * sizeof *start);
        uint8_t *init = malloc((size_t)B);
        float *logits = malloc((size_t)(B * L * V) * sizeof *logits);
        assert_true(ids && cu && slots && first && start && init && logits);
        struct err e = {0};
        for (int call = 0; call < 3; call++) {
            /* call 0: every row whole into slots 1..B (a state the next call must ignore); call 1: each row's
             * first part from zero into slot B - b; call 2: the rest from the slot */
            int64_t T = 0;
            cu[0] = 0;
            for (int64_t b = 0; b < B; b++) {
                int64_t p0 = 0;
                while (!g.mask[b * L + p0])
                    p0++;
                start[b] = p0;
                const int64_t real = L - p0, cut = real / 2 > 0 ? real / 2 : 1;
                first[b] = cut;
                const int64_t from = call == 2 ? p0 + cut : p0, to = call == 1 ? p0 + cut : L;
                for (int64_t p = from; p < to; p++)
                    ids[T++] = g.input_ids[b * L + p];
                cu[b + 1] = T;
                slots[b] = call == 0 ? b + 1 : B - b;
                init[b] = call == 2;
            }
            struct mc_stack_packed_args pa = {.n_seqs = B, .cu_seqlens = cu, .slots = slots, .has_initial_state = init,
                                              .input_ids = ids, .logits = logits};
            if (ops->stack_forward_packed(m, pool, &pa, &msg) != MC_BACKEND_OK)
                fail_msg("%s call %d: %s", goldens[gi], call, msg.text);
            for (int64_t b = 0; b < B; b++) {
                const int64_t from = call == 2 ? start[b] + first[b] : start[b];
                for (int64_t k = cu[b]; k < cu[b + 1]; k++)
                    for (int64_t v = 0; v < V; v++)
                        err_add(&e, logits[k * V + v], g.logits.data[(b * L + from + (k - cu[b])) * V + v],
                                t.logits_atol, t.logits_rtol);
            }
        }
        /* slot 0 was never owned: still the fresh cache's zeros */
        for (int64_t l = 0; l < g.config.n_layers; l++) {
            const struct mc_array *cs = &g.layers[l].conv_state, *rs = &g.layers[l].recurrent_state;
            const int64_t nc = mc_array_elems(cs) / cs->dims[0] / B, ns = rs->ndim ? mc_array_elems(rs) / rs->dims[0] / B : 0;
            float *conv = malloc((size_t)(S * nc) * sizeof *conv), *st = ns ? malloc((size_t)(S * ns) * sizeof *st) : NULL;
            assert_non_null(conv);
            assert_int_equal(ops->stack_cache_export(m, pool, l, conv, st, &msg), MC_BACKEND_OK);
            for (int64_t i = 0; i < nc; i++)
                assert_true(conv[i] == 0.0f);
            for (int64_t i = 0; i < ns; i++)
                assert_true(st[i] == 0.0f);
            free(conv);
            free(st);
        }
        printf("stack.correct packed %-24s max abs logits %.2e\n", goldens[gi], e.max_abs);
        assert_true(e.worst_excess <= 0.0);
        /* a slot outside the pool and a slot given twice are refused */
        slots[0] = S;
        struct mc_stack_packed_args bad = {.n_seqs = B, .cu_seqlens = cu, .slots = slots, .has_initial_state = init,
                                           .input_ids = ids, .logits = logits};
        assert_int_equal(ops->stack_forward_packed(m, pool, &bad, &msg), MC_BACKEND_INVALID);
        slots[0] = slots[1];
        assert_int_equal(ops->stack_forward_packed(m, pool, &bad, &msg), MC_BACKEND_INVALID);
        free(ids);
        free(cu);
        free(slots);
        free(first);
        free(start);
        free(init);
        free(logits);
        ops->cache_free(m, pool);
        ops->model_destroy(m);
        weights_free(&ws);
        mc_stack_golden_free(&g);
    }
}

static void test_errors(void **state)
{
    (void)state;
    const struct mc_backend_ops *ops = stack_ops("stack.correct");
    struct mc_model *m = NULL;
    struct mc_msg msg = {{0}};
    struct mc_stack_desc d = {.model_type = "mamba", .config_json = "{\"model_type\": \"mamba\"}", .dtype = MC_DTYPE_F32};
    assert_int_equal(ops->stack_create(&d, &m, &msg), MC_BACKEND_UNSUPPORTED);
    assert_non_null(strstr(msg.text, "Mamba1"));
    assert_null(m);
    d.model_type = "mamba2";
    d.config_json = "{\"num_hidden_layers\": 2, \"hidden_size\": 32, \"vocab_size\": 8, \"num_heads\": 4}";
    assert_int_equal(ops->stack_create(&d, &m, &msg), MC_BACKEND_INVALID);
    assert_non_null(strstr(msg.text, "'head_dim' is missing"));
    d.config_json = "{\"num_hidden_layers\": 2, \"hidden_size\": 32,";
    assert_int_equal(ops->stack_create(&d, &m, &msg), MC_BACKEND_INVALID);
    assert_non_null(strstr(msg.text, "config_json: offset"));
    d.config_json = "{\"num_hidden_layers\": 2, \"hidden_size\": 32, \"vocab_size\": 8, \"num_heads\": 4, "
                    "\"head_dim\": 16, \"state_size\": 8}";
    assert_int_equal(ops->stack_create(&d, &m, &msg), MC_BACKEND_INVALID);
    assert_non_null(strstr(msg.text, "missing weight 'backbone.embeddings.weight'"));
    d.dtype = MC_DTYPE_F16;
    assert_int_equal(ops->stack_create(&d, &m, &msg), MC_BACKEND_UNSUPPORTED);
    d.model_type = "lfm2";
    d.dtype = MC_DTYPE_F32;
    d.config_json = "{\"num_hidden_layers\": 2, \"hidden_size\": 32, \"vocab_size\": 8, \"num_attention_heads\": 4, "
                    "\"intermediate_size\": 48, \"layer_types\": [\"conv\", \"mamba\"]}";
    assert_int_equal(ops->stack_create(&d, &m, &msg), MC_BACKEND_INVALID);
    assert_non_null(strstr(msg.text, "layer_types[1]"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_correct_matches_goldens),
        cmocka_unit_test(test_correct_bf16),
        cmocka_unit_test(test_glue_mutants_deviate),
        cmocka_unit_test(test_packed),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
