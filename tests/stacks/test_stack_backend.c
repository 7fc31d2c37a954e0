/*
 * test_stack_backend.c — the backend of the layers a model case does not put under test (stackcheck.h,
 * `mixcheck run --stack-backend`): by default the reference at f32 and cpu at bf16, which the reference
 * does not declare, so a backend of one family is checked inside a whole stack at bf16 instead of being
 * `unsupported`; --stack-backend names another (reference: bf16 unsupported again; a mutant: the failure
 * is localised in a layer that runs on it); an unknown name is a usage error and a backend without the
 * stack's families cannot test the case. Case tests/stacks/cases/mamba2_layer2_reduced.yaml (layer 2
 * under test) with the mutant library's correct Mamba2 control; a few seconds.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "capture.h"

#define RUN MC_BINARY_DIR "/mixcheck run tests/stacks/cases/mamba2_layer2_reduced.yaml --plugin " MC_MUTANTS_PLUGIN \
                          " --backend control.correct"
#define ROW "model-mamba2-layer2-reduced "

static char out[1 << 18];

static int run(const char *options)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s%s", RUN, options);
    return mc_capture(cmd, out, sizeof out);
}

static void expect(const char *text)
{
    if (strstr(out, text) == NULL)
        fail_msg("expected '%s' in:\n%.6000s", text, out);
}

static void test_default_runs_bf16_on_cpu(void **state)
{
    (void)state;
    int rc = run("");
    if (rc != 0)
        fail_msg("exit %d:\n%.6000s", rc, out);
    expect("PASS  " ROW "prefill                control.correct f32");
    expect("PASS  " ROW "prefill                control.correct bf16");
    expect("PASS  " ROW "decode                 control.correct bf16");
    expect("4 check(s): 4 passed, 0 failed, 0 errored, 0 unsupported");
}

static void test_named_reference_keeps_bf16_unsupported(void **state)
{
    (void)state;
    assert_int_equal(run(" --stack-backend reference"), 0);
    expect("PASS  " ROW "prefill                control.correct f32");
    expect("UNSUP " ROW "prefill                control.correct bf16");
    expect("layer 0 runs on 'reference', which does not support dtype bf16");
    expect("2 passed, 0 failed, 0 errored, 2 unsupported");
}

static void test_named_backend_runs_the_other_layers(void **state)
{
    (void)state;
    /* a mutant as the stack backend: the layer under test is correct, layer 0 (on the mutant) is not */
    assert_int_equal(run(" --stack-backend mutant.future-leak -k /prefill/ --dtype f32"), 1);
    expect("FAIL  " ROW "prefill                control.correct f32");
    expect("first diverging layer 0 of 4 (mamba2 mixer on 'mutant.future-leak')");
    expect("--stack-backend mutant.future-leak"); /* in the rerun command */
    /* cpu at f32 as well */
    assert_int_equal(run(" --stack-backend cpu --dtype f32"), 0);
    expect("2 check(s): 2 passed");
}

static void test_bad_stack_backends(void **state)
{
    (void)state;
    assert_int_equal(run(" --stack-backend nosuch"), 2);
    expect("--stack-backend: unknown backend 'nosuch' (known: reference, cpu, ");
    /* a whole-stack backend has no Mamba2 mixer: the case cannot be tested on it */
    assert_int_equal(run(" --stack-backend stack.correct"), 2);
    expect("backend 'stack.correct' is not available for mamba2");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_runs_bf16_on_cpu),
        cmocka_unit_test(test_named_reference_keeps_bf16_unsupported),
        cmocka_unit_test(test_named_backend_runs_the_other_layers),
        cmocka_unit_test(test_bad_stack_backends),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
