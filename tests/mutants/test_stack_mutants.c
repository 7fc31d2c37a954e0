/*
 * test_stack_mutants.c — the kill matrix of the whole-stack backends of the mutant library (mut_stack.c):
 * each runs through the CLI on every bundled model case of a model type it implements,
 *     mixcheck run cases/models/<model>.yaml --plugin libmc_mutants.so --backend stack.<id> --dtype <d> --json r.json
 * The control (stack.correct) must pass every check (exit 0); each glue mutant must be caught (exit 1) on
 * the models where its bug exists, by the scenario meant to catch it, with a diagnosis that names the
 * place (glue after the last layer, the layer, the cached path); where its bug cannot exist (a head-untied
 * mutant on an untied model, positions on a model without attention, the residual at f32) it is the control
 * and must pass. Each row of the matrix (failing scenarios, the diagnosis) is printed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "capture.h"
#include "base/jsonread.h"
#include "tmpdir.h"

static char dir[] = "/tmp/mixcheck-stackmut-XXXXXX";

#define MAX_EXPECT 3

struct row {
    const char *backend;
    const char *model; /* cases/models/<model>.yaml */
    const char *dtype;
    int exit_code;     /* 0: passes (the control, or the bug does not exist here); 1: caught */
    const char *scenario;          /* the scenario meant to catch it (exit 1) */
    const char *tensor;            /* a tensor of that scenario that must fail */
    const char *expect[MAX_EXPECT]; /* substrings of that scenario's diagnosis */
};

#define LAST "glue after the last layer (final norm / LM head"
#define NORM2 "first diverging layer 2 of 4", "glue around the mixer (the block norm)"
#define FFN0 "first diverging layer 0 of 4", "glue around the mixer (residual / feed-forward)"
#define CACHED2 "first diverging layer 2 of 4", "it diverges on this scenario's cached path"

static const struct row matrix[] = {
    /* the control, every scenario of every model case it implements, f32 and bf16 */
    {"stack.correct", "mamba2", "f32", 0, NULL, NULL, {0}},
    {"stack.correct", "lfm2", "f32", 0, NULL, NULL, {0}},
    {"stack.correct", "bamba", "f32", 0, NULL, NULL, {0}},
    {"stack.correct", "qwen3_5", "f32", 0, NULL, NULL, {0}},
    {"stack.correct", "mamba2", "bf16", 0, NULL, NULL, {0}},
    {"stack.correct", "lfm2", "bf16", 0, NULL, NULL, {0}},
    {"stack.correct", "bamba", "bf16", 0, NULL, NULL, {0}},
    {"stack.correct", "qwen3_5", "bf16", 0, NULL, NULL, {0}},
    /* the final norm skipped: logits wrong, every hidden state right */
    {"stack.final-norm-skipped", "mamba2", "f32", 1, "prefill", "logits", {LAST "):"}},
    {"stack.final-norm-skipped", "lfm2", "f32", 1, "prefill", "logits", {LAST ", tied to the embedding)"}},
    {"stack.final-norm-skipped", "bamba", "f32", 1, "prefill", "logits", {LAST "):"}},
    {"stack.final-norm-skipped", "qwen3_5", "f32", 1, "prefill", "logits", {LAST "):"}},
    {"stack.final-norm-skipped", "lfm2", "bf16", 1, "prefill", "logits", {LAST ", tied to the embedding)"}},
    /* a head of its own on the tied model (lfm2); on the untied models the bug cannot exist */
    {"stack.head-untied", "lfm2", "f32", 1, "prefill", "logits", {LAST ", tied to the embedding)"}},
    {"stack.head-untied", "mamba2", "f32", 0, NULL, NULL, {0}},
    {"stack.head-untied", "bamba", "f32", 0, NULL, NULL, {0}},
    {"stack.head-untied", "qwen3_5", "f32", 0, NULL, NULL, {0}},
    /* layer 2's block norm skipped */
    {"stack.block-norm-skipped", "mamba2", "f32", 1, "prefill", "hidden_states", {NORM2}},
    {"stack.block-norm-skipped", "lfm2", "f32", 1, "prefill", "hidden_states", {NORM2}},
    {"stack.block-norm-skipped", "bamba", "f32", 1, "prefill", "hidden_states", {NORM2}},
    {"stack.block-norm-skipped", "qwen3_5", "f32", 1, "prefill", "hidden_states", {NORM2}},
    {"stack.block-norm-skipped", "bamba", "bf16", 1, "prefill", "hidden_states", {NORM2}},
    /* positions counted with the padding: RoPE is relative, so the prompt's logits stay right and the
     * attention layer's cached keys sit at the wrong positions */
    {"stack.positions-with-pads", "lfm2", "f32", 1, "prefill", "recurrent_state", {"layer 1's cache (attention mixer"}},
    {"stack.positions-with-pads", "bamba", "f32", 1, "prefill", "recurrent_state", {"layer 1's cache (attention mixer"}},
    {"stack.positions-with-pads", "qwen3_5", "f32", 1, "prefill", "recurrent_state", {"layer 3's cache (attention mixer"}},
    {"stack.positions-with-pads", "mamba2", "f32", 0, NULL, NULL, {0}},
    /* layer 2 not handed its cache on continued forwards: the prefill is right, every cached path is not */
    {"stack.state-not-carried", "mamba2", "f32", 1, "decode", "logits", {CACHED2}},
    {"stack.state-not-carried", "lfm2", "f32", 1, "decode", "logits", {CACHED2}},
    {"stack.state-not-carried", "bamba", "f32", 1, "decode", "logits", {CACHED2}},
    {"stack.state-not-carried", "qwen3_5", "f32", 1, "decode", "logits", {CACHED2}},
    {"stack.state-not-carried", "bamba", "f32", 1, "packed_prefill", "logits",
     {"first diverging layer 2 of 4", "packed calls on the state pool"}},
    /* the embedding scaled by sqrt(D): hidden state 0 already wrong */
    {"stack.embedding-scaled", "mamba2", "f32", 1, "prefill", "hidden_states", {"glue: the embedding (hidden state 0)"}},
    {"stack.embedding-scaled", "lfm2", "f32", 1, "prefill", "hidden_states", {"glue: the embedding (hidden state 0)"}},
    {"stack.embedding-scaled", "bamba", "f32", 1, "prefill", "hidden_states", {"glue: the embedding (hidden state 0)"}},
    {"stack.embedding-scaled", "qwen3_5", "f32", 1, "prefill", "hidden_states", {"glue: the embedding (hidden state 0)"}},
    /* Qwen3.5's zero-centred norms read as plain RMSNorms: the first block norm is already wrong */
    {"stack.norm-not-zero-centred", "qwen3_5", "f32", 1, "prefill", "hidden_states",
     {"first diverging layer 0 of 4", "glue around the mixer (the block norm)"}},
    {"stack.norm-not-zero-centred", "qwen3_5", "bf16", 1, "prefill", "hidden_states",
     {"first diverging layer 0 of 4", "glue around the mixer (the block norm)"}},
    {"stack.norm-not-zero-centred", "mamba2", "f32", 0, NULL, NULL, {0}},
    {"stack.norm-not-zero-centred", "lfm2", "f32", 0, NULL, NULL, {0}},
    {"stack.norm-not-zero-centred", "bamba", "f32", 0, NULL, NULL, {0}},
    /* the feed-forward's gate and up projections swapped: norm and mixer right, the layer's output not */
    {"stack.ffn-gate-up-swapped", "lfm2", "f32", 1, "prefill", "hidden_states", {FFN0}},
    {"stack.ffn-gate-up-swapped", "bamba", "f32", 1, "prefill", "hidden_states", {FFN0}},
    {"stack.ffn-gate-up-swapped", "qwen3_5", "f32", 1, "prefill", "hidden_states", {FFN0}},
    {"stack.ffn-gate-up-swapped", "qwen3_5", "bf16", 1, "prefill", "hidden_states", {FFN0}},
    {"stack.ffn-gate-up-swapped", "mamba2", "f32", 0, NULL, NULL, {0}},
    /* cache_copy without the attention layers' KV caches: only speculative_verify copies a primed cache */
    {"stack.copy-skips-attention", "lfm2", "f32", 1, "speculative_verify", "recurrent_state", {"first diverging layer 1 of 4 (attention mixer", "cached path"}},
    {"stack.copy-skips-attention", "bamba", "f32", 1, "speculative_verify", "recurrent_state", {"first diverging layer 1 of 4 (attention mixer", "cached path"}},
    {"stack.copy-skips-attention", "qwen3_5", "f32", 1, "speculative_verify", "recurrent_state", {"first diverging layer 3 of 4 (attention mixer", "cached path"}},
    {"stack.copy-skips-attention", "mamba2", "f32", 0, NULL, NULL, {0}},
    /* the residual rounded to bf16 after every add: an error of ~1.3 u of the residual's magnitude, inside
     * the spread of legitimate rounding differences on other weights (docs/models.md §4), so no tolerance
     * tells it; every hidden state being bf16-exact does (residual_dtype). LFM2, Bamba and Qwen3.5 add in
     * bf16 anyway, and at f32 there is nothing to round */
    {"stack.residual-not-fp32", "mamba2", "bf16", 1, "prefill", "residual_dtype",
     {"the residual stream is rounded to bf16", "residual_in_fp32 keeps the residual in float32"}},
    {"stack.residual-not-fp32", "lfm2", "bf16", 0, NULL, NULL, {0}},
    {"stack.residual-not-fp32", "bamba", "bf16", 0, NULL, NULL, {0}},
    {"stack.residual-not-fp32", "qwen3_5", "bf16", 0, NULL, NULL, {0}},
    {"stack.residual-not-fp32", "mamba2", "f32", 0, NULL, NULL, {0}},
};

/* The outcome of one CLI run: exit status, and per failing record its scenario, tensor and diagnosis. */
#define MAX_FAILS 256
struct outcome {
    int exit_code;
    int n;
    char scenario[MAX_FAILS][40], tensor[MAX_FAILS][40];
    char diagnosis[MAX_FAILS][1024];
    char errors[1024]; /* messages of errored checks */
};

static void run(const struct row *r, struct outcome *o)
{
    char cmd[4096], json[600], out[8192];
    snprintf(json, sizeof json, "%s/r.json", dir);
    snprintf(cmd, sizeof cmd,
             MC_BINARY_DIR "/mixcheck run cases/models/%s.yaml --plugin " MC_MUTANTS_PLUGIN " --backend %s --dtype %s "
                           "-q --color never --json %s",
             r->model, r->backend, r->dtype, json);
    memset(o, 0, sizeof *o);
    o->exit_code = mc_capture(cmd, out, sizeof out);
    if (o->exit_code != 0 && o->exit_code != 1)
        fail_msg("%s on %s %s: exit %d\n%s", r->backend, r->model, r->dtype, o->exit_code, out);
    struct mc_json_value *root = NULL;
    struct mc_json_error je;
    if (mc_json_parse_file(json, NULL, &root, &je) != 0)
        fail_msg("%s: %s", json, je.msg);
    const struct mc_json_value *res = mc_json_get(root, "results");
    assert_non_null(res);
    for (size_t i = 0; i < res->len; i++) {
        const struct mc_json_value *st = mc_json_get(&res->items[i], "status");
        const struct mc_json_value *sc = mc_json_get(&res->items[i], "scenario");
        const struct mc_json_value *tn = mc_json_get(&res->items[i], "tensor");
        const struct mc_json_value *dg = mc_json_get(&res->items[i], "diagnosis");
        const struct mc_json_value *ms = mc_json_get(&res->items[i], "message");
        assert_true(st != NULL && st->type == MC_JSON_STRING && sc != NULL && sc->type == MC_JSON_STRING);
        if (strcmp(st->string, "error") == 0 || strcmp(st->string, "unsupported") == 0) {
            size_t used = strlen(o->errors);
            snprintf(o->errors + used, sizeof o->errors - used, "[%s %s: %s] ", sc->string, st->string,
                     ms != NULL && ms->type == MC_JSON_STRING ? ms->string : "");
            continue;
        }
        if (strcmp(st->string, "fail") != 0 || o->n == MAX_FAILS)
            continue;
        snprintf(o->scenario[o->n], sizeof o->scenario[0], "%s", sc->string);
        snprintf(o->tensor[o->n], sizeof o->tensor[0], "%s", tn != NULL && tn->type == MC_JSON_STRING ? tn->string : "");
        snprintf(o->diagnosis[o->n], sizeof o->diagnosis[0], "%s",
                 dg != NULL && dg->type == MC_JSON_STRING ? dg->string : "");
        o->n++;
    }
    mc_json_free(root);
}

static void test_kill_matrix(void **state)
{
    (void)state;
    struct outcome *o = malloc(sizeof *o);
    assert_non_null(o);
    printf("  %-26s %-8s %-4s %-4s %s\n      %s\n", "backend", "model", "dt", "exit", "failing scenarios",
           "diagnosis of the scenario meant to catch it");
    for (size_t i = 0; i < sizeof matrix / sizeof matrix[0]; i++) {
        const struct row *r = &matrix[i];
        run(r, o);
        char failing[512] = "", diag[1024] = "";
        int tensor_failed = 0;
        for (int k = 0; k < o->n; k++) {
            char item[64];
            snprintf(item, sizeof item, "%s ", o->scenario[k]);
            if (strstr(failing, item) == NULL && strlen(failing) + strlen(item) < sizeof failing)
                strcat(failing, item);
            if (r->scenario != NULL && strcmp(o->scenario[k], r->scenario) == 0) {
                if (diag[0] == '\0' && o->diagnosis[k][0] != '\0')
                    snprintf(diag, sizeof diag, "%s", o->diagnosis[k]);
                tensor_failed |= strcmp(o->tensor[k], r->tensor) == 0;
            }
        }
        printf("  %-26s %-8s %-4s %-4d %s\n", r->backend, r->model, r->dtype, o->exit_code, failing[0] ? failing : "-");
        if (diag[0] != '\0')
            printf("      %s: %s\n", r->scenario, diag);
        if (o->errors[0] != '\0')
            fail_msg("%s on %s %s: checks errored or unsupported: %s", r->backend, r->model, r->dtype, o->errors);
        if (o->exit_code != r->exit_code)
            fail_msg("%s on %s %s: exit %d, expected %d", r->backend, r->model, r->dtype, o->exit_code, r->exit_code);
        if (r->exit_code == 0)
            continue;
        if (!tensor_failed)
            fail_msg("%s on %s %s: %s did not fail %s (failing: %s)", r->backend, r->model, r->dtype, r->scenario,
                     r->tensor, failing);
        for (int k = 0; k < MAX_EXPECT && r->expect[k] != NULL; k++)
            if (strstr(diag, r->expect[k]) == NULL)
                fail_msg("%s on %s %s: the %s diagnosis \"%s\" lacks \"%s\"", r->backend, r->model, r->dtype,
                         r->scenario, diag, r->expect[k]);
    }
    free(o);
}

static int setup(void **state)
{
    (void)state;
    return mkdtemp(dir) == NULL ? -1 : 0;
}

static int teardown(void **state)
{
    (void)state;
    return mc_test_tmpdir_remove(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kill_matrix),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
