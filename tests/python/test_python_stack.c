/*
 * test_python_stack.c — the whole-stack entries of the Python adapter (harness/src/exec/pybackend.c
 * stack_create / stack_forward / stack_cache_export, python/mixcheck_backend/hf.py HFModel "hf-model")
 * called directly through the registered ops on every bundled model golden (the .h5 files of golden/models): the
 * upstream `...ForCausalLM` built from the golden's config.json, its weights loaded by name, must give the
 * golden's logits, residual stream and mixer outputs at every real position (mixer inputs: finite) of the left-padded prefill,
 * every layer's exported cache (conv windows, recurrent states, attention KV in mixcheck's layout) after
 * it, the greedy logits of one decode step on a copy of the cache, and clear errors for a checkpoint that
 * does not load by name and for an unknown model type. The bounds are the f32 model tolerances of
 * cases/tolerances/models.yaml (measured there on the reference and cpu stacks); the max errors measured
 * here are printed. The scenarios themselves (decode, chunked, padding, greedy) run through
 * `mixcheck run cases/models` in test_python_models. Skipped (77) without a Python that imports torch and
 * transformers ($MIXCHECK_HF_PYTHON, else /work/venv/bin/python).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hfpython.h"

#include "exec/pybackend.h"
#include "exec/registry.h"
#include "golden/stackgolden.h"

static const char *python;
static struct mc_registry reg;
static struct mc_python_options popt;
static const struct mc_backend_ops *ops;

/* f32 bounds of cases/tolerances/models.yaml (cpu): logits, hidden_states, conv_state, recurrent_state */
#define LOGITS_ATOL 3.0e-5
#define HIDDEN_ATOL 5.0e-6
#define CONV_ATOL 3.0e-6
#define STATE_ATOL 2.0e-7 /* mamba, mamba2 (models.yaml) */
#define KV_STATE_ATOL 3.0e-6 /* the hybrids, whose attention layers' KV cache is ~1 (models-lfm2.yaml, -bamba, -qwen3_5) */
#define RTOL 1.0e-5

/* max |a - g| over the entries of rows/positions where the golden's mask is 1 (inner = entries per token),
 * failing when one leaves atol + rtol |g|. */
static double worst(const char *what, const float *a, const double *g, int64_t levels, int64_t tokens,
                    const uint8_t *mask, int64_t inner, double atol)
{
    double w = 0;
    for (int64_t l = 0; l < levels; l++)
        for (int64_t t = 0; t < tokens; t++) {
            if (mask != NULL && !mask[t])
                continue;
            for (int64_t i = 0; i < inner; i++) {
                size_t o = ((size_t)l * (size_t)tokens + (size_t)t) * (size_t)inner + (size_t)i;
                double d = fabs((double)a[o] - g[o]);
                if (!(d <= atol + RTOL * fabs(g[o])))
                    fail_msg("%s: level %lld token %lld entry %lld: %.9g, golden %.9g", what, (long long)l,
                             (long long)t, (long long)i, (double)a[o], g[o]);
                w = d > w ? d : w;
            }
        }
    return w;
}

struct weights {
    struct mc_weight *w;
    float *data;
    int n;
};

static void weights_f32(const struct mc_stack_golden *g, struct weights *out)
{
    size_t total = 0;
    for (int i = 0; i < g->n_weights; i++)
        total += (size_t)mc_array_elems(&g->weights[i].value);
    out->w = calloc((size_t)g->n_weights, sizeof *out->w);
    out->data = malloc(total * sizeof *out->data);
    assert_non_null(out->w);
    assert_non_null(out->data);
    size_t at = 0;
    for (int i = 0; i < g->n_weights; i++) {
        const struct mc_array *v = &g->weights[i].value;
        out->w[i].name = g->weights[i].name;
        out->w[i].ndim = v->ndim;
        memcpy(out->w[i].dims, v->dims, sizeof v->dims);
        out->w[i].data = out->data + at;
        for (int64_t k = 0; k < mc_array_elems(v); k++)
            out->data[at++] = (float)v->data[k];
    }
    out->n = g->n_weights;
}

static void check_model(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "golden/models/%s.h5", name);
    struct mc_stack_golden g;
    struct mc_error err;
    memset(&err, 0, sizeof err);
    if (mc_stack_golden_load(path, &g, &err) != MC_ERR_NONE)
        fail_msg("%s", err.msg);
    struct weights w;
    weights_f32(&g, &w);
    struct mc_stack_desc desc = {.model_type = g.config.model_type, .config_json = g.config_json,
                                 .dtype = MC_DTYPE_F32, .weights = w.w, .n_weights = w.n};
    struct mc_msg msg;
    struct mc_model *m = NULL;
    if (ops->stack_create(&desc, &m, &msg) != MC_BACKEND_OK)
        fail_msg("%s: stack_create: %s", name, msg.text);
    const int64_t B = g.batch, L = g.len, n = g.config.n_layers, D = g.config.hidden, V = g.config.vocab;
    struct mc_cache *c = NULL, *c2 = NULL;
    assert_int_equal(ops->cache_alloc(m, B, &c, &msg), MC_BACKEND_OK);
    float *logits = malloc(sizeof(float) * (size_t)(B * L * V));
    float *hidden = malloc(sizeof(float) * (size_t)((n + 1) * B * L * D));
    float *mixers = malloc(sizeof(float) * (size_t)(n * B * L * D));
    float *inputs = malloc(sizeof(float) * (size_t)(n * B * L * D));
    struct mc_stack_args a = {.batch = B, .len = L, .input_ids = g.input_ids, .mask = g.mask, .logits = logits,
                              .hidden_states = hidden, .mixer_inputs = inputs, .mixer_outputs = mixers};
    if (ops->stack_forward(m, c, &a, &msg) != MC_BACKEND_OK)
        fail_msg("%s: stack_forward: %s", name, msg.text);
    double wl = worst("logits", logits, g.logits.data, 1, B * L, g.mask, V, LOGITS_ATOL);
    double wh = worst("hidden_states", hidden, g.hidden.data, n + 1, B * L, g.mask, D, HIDDEN_ATOL);
    double wm = worst("mixer_outputs", mixers, g.mixer_outputs.data, n, B * L, g.mask, D, HIDDEN_ATOL);
    /* the mixer inputs (block norm outputs; the golden has none): finite, and each real token's row not zero */
    for (int64_t l = 0; l < n; l++)
        for (int64_t t = 0; t < B * L; t++) {
            double ss = 0;
            for (int64_t i = 0; i < D; i++) {
                float v = inputs[((size_t)l * (size_t)(B * L) + (size_t)t) * (size_t)D + (size_t)i];
                if (!isfinite(v))
                    fail_msg("%s: mixer_inputs layer %lld token %lld not finite", name, (long long)l, (long long)t);
                ss += (double)v * v;
            }
            if (g.mask[t] && !(ss > 0))
                fail_msg("%s: mixer_inputs layer %lld token %lld is zero", name, (long long)l, (long long)t);
        }
    /* every layer's cache after the whole prompt: the golden's states at position L */
    int64_t at = -1;
    for (int64_t t = 0; t < g.n_positions; t++)
        if (g.state_positions[t] == L)
            at = t;
    assert_true(at >= 0);
    double wc = 0, ws = 0;
    for (int64_t l = 0; l < n; l++) {
        const struct mc_array *gc = &g.layers[l].conv_state, *gs = &g.layers[l].recurrent_state;
        int64_t ce = mc_array_elems(gc) / g.n_positions, se = gs->ndim ? mc_array_elems(gs) / g.n_positions : 0;
        float *conv = malloc(sizeof(float) * (size_t)ce), *state = se ? malloc(sizeof(float) * (size_t)se) : NULL;
        if (ops->stack_cache_export(m, c, l, conv, state, &msg) != MC_BACKEND_OK)
            fail_msg("%s: stack_cache_export %lld: %s", name, (long long)l, msg.text);
        char what[64];
        snprintf(what, sizeof what, "layer %lld conv_state", (long long)l);
        double e = worst(what, conv, gc->data + at * ce, 1, 1, NULL, ce, CONV_ATOL);
        wc = e > wc ? e : wc;
        if (se) {
            snprintf(what, sizeof what, "layer %lld recurrent_state", (long long)l);
            e = worst(what, state, gs->data + at * se, 1, 1, NULL, se,
                      strcmp(name, "mamba") == 0 || strcmp(name, "mamba2") == 0 ? STATE_ATOL : KV_STATE_ATOL);
            ws = e > ws ? e : ws;
        }
        free(conv);
        free(state);
    }
    /* one decode step on a copy: the golden's first greedy token through the cache gives greedy_logits[:, 1] */
    assert_int_equal(ops->cache_alloc(m, B, &c2, &msg), MC_BACKEND_OK);
    assert_int_equal(ops->cache_copy(m, c2, c, &msg), MC_BACKEND_OK);
    int64_t *next = malloc(sizeof(int64_t) * (size_t)B);
    for (int64_t b = 0; b < B; b++)
        next[b] = g.greedy_tokens[b * g.greedy_steps];
    struct mc_stack_args d = {.batch = B, .len = 1, .input_ids = next, .logits = logits};
    if (ops->stack_forward(m, c2, &d, &msg) != MC_BACKEND_OK)
        fail_msg("%s: decode: %s", name, msg.text);
    double wd = 0;
    for (int64_t b = 0; b < B; b++) {
        double e = worst("decode logits", logits + b * V, g.greedy_logits.data + (b * g.greedy_steps + 1) * V, 1, 1,
                         NULL, V, LOGITS_ATOL);
        wd = e > wd ? e : wd;
    }
    printf("%-8s f32: max |err| logits %.2e, hidden %.2e, mixer %.2e, conv %.2e, state %.2e, decode logits %.2e\n",
           name, wl, wh, wm, wc, ws, wd);
    /* a checkpoint without one of its tensors (layer 0's first, moved to the end and left out) does not load
     * by name */
    int drop = 0;
    while (drop < w.n && strstr(w.w[drop].name, "layers.0.") == NULL)
        drop++;
    assert_true(drop < w.n);
    struct mc_weight t = w.w[drop];
    w.w[drop] = w.w[w.n - 1];
    w.w[w.n - 1] = t;
    struct mc_model *bad = NULL;
    desc.n_weights = w.n - 1;
    assert_int_equal(ops->stack_create(&desc, &bad, &msg), MC_BACKEND_INVALID);
    assert_null(bad);
    if (strstr(msg.text, "missing") == NULL || strstr(msg.text, t.name) == NULL)
        fail_msg("%s: leaving out %s: %s", name, t.name, msg.text);
    free(next);
    free(logits);
    free(hidden);
    free(mixers);
    free(inputs);
    ops->cache_free(m, c2);
    ops->cache_free(m, c);
    ops->model_destroy(m);
    free(w.w);
    free(w.data);
    mc_stack_golden_free(&g);
}

static void test_mamba2(void **state) { (void)state; check_model("mamba2"); }
static void test_mamba(void **state) { (void)state; check_model("mamba"); }
static void test_lfm2(void **state) { (void)state; check_model("lfm2"); }
static void test_bamba(void **state) { (void)state; check_model("bamba"); }
static void test_qwen3_5(void **state) { (void)state; check_model("qwen3_5"); }

static void test_unknown_model_type_is_unsupported(void **state)
{
    (void)state;
    struct mc_stack_desc desc = {.model_type = "llama", .config_json = "{}", .dtype = MC_DTYPE_F32};
    struct mc_model *m = NULL;
    struct mc_msg msg;
    assert_int_equal(ops->stack_create(&desc, &m, &msg), MC_BACKEND_UNSUPPORTED);
    assert_null(m);
    assert_non_null(strstr(msg.text, "llama"));
}

int main(void)
{
    if ((python = mc_test_hf_python("test_python_stack")) == NULL)
        return 77;
    popt.python = python;
    const char *spec = "mixcheck_backend.hf";
    struct mc_error err;
    memset(&err, 0, sizeof err);
    mc_registry_init(&reg);
    if (mc_python_load(&popt, &spec, 1, &reg, 1, &err) != MC_ERR_NONE) {
        fprintf(stderr, "test_python_stack: %s\n", err.msg);
        return 1;
    }
    ops = mc_registry_find(&reg, "hf-model", MC_FAMILY_STACK);
    if (ops == NULL || !(ops->caps & MC_CAP_STACK) || !(ops->caps & MC_CAP_STACK_HIDDEN)) {
        fprintf(stderr, "test_python_stack: hf-model is not registered as a whole stack with hidden states\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mamba2), cmocka_unit_test(test_mamba),   cmocka_unit_test(test_lfm2),
        cmocka_unit_test(test_bamba),  cmocka_unit_test(test_qwen3_5), cmocka_unit_test(test_unknown_model_type_is_unsupported),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    mc_python_unload();
    return rc;
}
