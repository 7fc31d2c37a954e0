/*
 * test_option_mutants.c — the mutants of Mamba1's inner-norm option (m1norm_mutant.c) and of Mamba2's gated-norm
 * options (m2norm_mutant.c) through the CLI: each must fail the goldens whose configuration has what it breaks
 * on prefill -> output (and recurrent_state, where the state moves), and pass the goldens where the bug cannot
 * exist (exit 0): the plain golden of the family for each, the weightless FalconMamba golden for the dropped
 * weights, the other Mamba2 option's golden for each Mamba2 option. The attention family's Inkling options
 * (atinkling_mutant.c) have no mixer golden of their own: each mutant runs as the attention layers of the model case
 * cases/models/inkling.yaml and must fail its prefill, localised to layer 0's mixer at the token the bug first
 * shows, and pass cases/attention/tiny (no option set).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "capture.h"
#include "tmpdir.h"

static char dir[] = "/tmp/mixcheck-options-XXXXXX";
static char out[1 << 20];

/* Status of (scenario, tensor) in the JSON report, or NULL when absent. */
static const char *status_of(const char *scenario, const char *tensor)
{
    static char st[32];
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c 'import json, sys\n"
             "for x in json.load(open(sys.argv[1]))[\"results\"]:\n"
             "    if x[\"scenario\"] == sys.argv[2] and (x[\"tensor\"] or \"-\") == sys.argv[3]: print(x[\"status\"])' "
             "%s/r.json %s %s",
             dir, scenario, tensor);
    if (mc_capture(cmd, out, sizeof out) != 0 || out[0] == '\0')
        return NULL;
    snprintf(st, sizeof st, "%.*s", (int)strcspn(out, "\n"), out);
    return st;
}

static const struct {
    const char *plugin, *backend, *family, *golden;
    int caught;                 /* 1: exit 1 with prefill/output failing; 0: every check passes */
    const char *also;           /* another tensor prefill must fail, or NULL */
} runs[] = {
    {MC_M1NORM_SKIPPED, "mutant.m1-inner-norms-skipped", "mamba1", "falconnorm", 1, "recurrent_state"},
    {MC_M1NORM_SKIPPED, "mutant.m1-inner-norms-skipped", "mamba1", "jambanorm", 1, "recurrent_state"},
    {MC_M1NORM_SKIPPED, "mutant.m1-inner-norms-skipped", "mamba1", "tiny", 0, NULL},
    {MC_M1NORM_WEIGHTS, "mutant.m1-inner-norm-weights-dropped", "mamba1", "jambanorm", 1, NULL},
    {MC_M1NORM_WEIGHTS, "mutant.m1-inner-norm-weights-dropped", "mamba1", "falconnorm", 0, NULL},
    {MC_M1NORM_WEIGHTS, "mutant.m1-inner-norm-weights-dropped", "mamba1", "tiny", 0, NULL},
    {MC_M2NORM_NONORM, "mutant.m2-no-gated-norm-ignored", "mamba2", "nonorm", 1, NULL},
    {MC_M2NORM_NONORM, "mutant.m2-no-gated-norm-ignored", "mamba2", "normfirst", 0, NULL},
    {MC_M2NORM_NONORM, "mutant.m2-no-gated-norm-ignored", "mamba2", "tiny", 0, NULL},
    {MC_M2NORM_FIRST, "mutant.m2-norm-before-gate-ignored", "mamba2", "normfirst", 1, NULL},
    {MC_M2NORM_FIRST, "mutant.m2-norm-before-gate-ignored", "mamba2", "nonorm", 0, NULL},
    {MC_M2NORM_FIRST, "mutant.m2-norm-before-gate-ignored", "mamba2", "tiny", 0, NULL},
};

/* The diagnosis of the prefill check in the JSON report ("" when absent). */
static const char *prefill_diagnosis(void)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c 'import json, sys\n"
             "for x in json.load(open(sys.argv[1]))[\"results\"]:\n"
             "    if x[\"scenario\"] == \"prefill\" and x.get(\"diagnosis\"): print(x[\"diagnosis\"]); break' "
             "%s/r.json",
             dir);
    if (mc_capture(cmd, out, sizeof out) != 0)
        out[0] = '\0';
    return out;
}

static const struct {
    const char *plugin, *backend, *expect; /* the prefill diagnosis holds expect */
} model_runs[] = {
    {MC_AT_REL_SKIPPED, "mutant.inkling-rel-logits-skipped",
     "first diverging layer 0 of 4 (attention mixer on 'mutant.inkling-rel-logits-skipped'), token 1"},
    {MC_AT_REL_TWICE, "mutant.inkling-rel-logits-twice",
     "first diverging layer 0 of 4 (attention mixer on 'mutant.inkling-rel-logits-twice'), token 1"},
    {MC_AT_SCONV_NO_INPUT, "mutant.inkling-sconv-residual-dropped",
     "first diverging layer 0 of 4 (attention mixer on 'mutant.inkling-sconv-residual-dropped'), token 0"},
    {MC_AT_WINDOW_IGNORED, "mutant.inkling-window-ignored",
     "first diverging layer 0 of 4 (attention mixer on 'mutant.inkling-window-ignored'), token 4"},
};

static void test_inkling_option_mutants(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof model_runs / sizeof model_runs[0]; i++) {
        char cmd[4096];
        snprintf(cmd, sizeof cmd,
                 MC_BINARY_DIR "/mixcheck run cases/attention/tiny.yaml --plugin %s --backend %s --dtype f32 -q "
                               "--color never",
                 model_runs[i].plugin, model_runs[i].backend);
        int rc = mc_capture(cmd, out, sizeof out);
        if (rc != 0)
            fail_msg("%s on attention/tiny (no option set): exit %d, expected 0:\n%s", model_runs[i].backend, rc, out);
        snprintf(cmd, sizeof cmd,
                 MC_BINARY_DIR "/mixcheck run cases/models/inkling.yaml --plugin %s --backend %s --dtype f32 "
                               "--scenario prefill -q --color never --json %s/r.json",
                 model_runs[i].plugin, model_runs[i].backend, dir);
        rc = mc_capture(cmd, out, sizeof out);
        if (rc != 1)
            fail_msg("%s on models/inkling: exit %d, expected 1:\n%s", model_runs[i].backend, rc, out);
        const char *d = prefill_diagnosis();
        if (strstr(d, model_runs[i].expect) == NULL)
            fail_msg("%s: prefill diagnosis \"%s\" lacks \"%s\"", model_runs[i].backend, d, model_runs[i].expect);
        printf("%-40s models/inkling caught: %s", model_runs[i].backend, d);
    }
}

static void test_option_mutants(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        char cmd[4096];
        snprintf(cmd, sizeof cmd,
                 MC_BINARY_DIR "/mixcheck run cases/%s/%s.yaml --plugin %s --backend %s --dtype f32 -q "
                               "--color never --json %s/r.json",
                 runs[i].family, runs[i].golden, runs[i].plugin, runs[i].backend, dir);
        int rc = mc_capture(cmd, out, sizeof out);
        if (!runs[i].caught) {
            if (rc != 0)
                fail_msg("%s on %s/%s (nothing to break): exit %d, expected 0:\n%s", runs[i].backend,
                         runs[i].family, runs[i].golden, rc, out);
            printf("%-40s %-11s passes (control)\n", runs[i].backend, runs[i].golden);
            continue;
        }
        if (rc != 1)
            fail_msg("%s on %s/%s: exit %d, expected 1:\n%s", runs[i].backend, runs[i].family, runs[i].golden, rc, out);
        const char *tensors[2] = {"output", runs[i].also};
        for (int t = 0; t < 2 && tensors[t]; t++) {
            const char *st = status_of("prefill", tensors[t]);
            if (st == NULL || strcmp(st, "fail") != 0)
                fail_msg("%s on %s/%s: prefill/%s %s, expected fail", runs[i].backend, runs[i].family, runs[i].golden,
                         tensors[t], st ? st : "absent");
        }
        printf("%-40s %-11s caught by prefill -> output%s%s\n", runs[i].backend, runs[i].golden,
               runs[i].also ? ", " : "", runs[i].also ? runs[i].also : "");
    }
}

static int setup(void **state)
{
    (void)state;
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return mc_test_tmpdir_remove(dir);
}

int main(void)
{
    if (access("/usr/bin/python3", X_OK) != 0) {
        fprintf(stderr, "test_option_mutants: /usr/bin/python3 is needed to read the JSON report\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_option_mutants),
                                       cmocka_unit_test(test_inkling_option_mutants)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
