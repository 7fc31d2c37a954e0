/*
 * test_plugin.c — `mixcheck run --plugin`: broken libraries are refused naming the file and what is
 * wrong (exit 2, or 125 with --bisect), and the example plugin runs through the ShortConv cases.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "capture.h"

#define MIXCHECK MC_BINARY_DIR "/mixcheck"

static char out[1 << 16];

static int run(const char *cmd)
{
    return mc_capture(cmd, out, sizeof out);
}

static void expect_refused(int kind, const char *message)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, MIXCHECK " run cases/mamba2/tiny.yaml --plugin %s/libmc_bad_plugin_%d.so",
             MC_BAD_PLUGIN_DIR, kind);
    assert_int_equal(run(cmd), 2);
    char lib[600];
    snprintf(lib, sizeof lib, "libmc_bad_plugin_%d.so", kind);
    assert_non_null(strstr(out, lib));
    if (strstr(out, message) == NULL)
        fail_msg("expected '%s' in:\n%s", message, out);
    strncat(cmd, " --bisect", sizeof cmd - strlen(cmd) - 1);
    assert_int_equal(run(cmd), 125);
}

static void test_wrong_abi_version(void **state)
{
    (void)state;
    expect_refused(1, "built for backend ABI version 42, mixcheck has 1");
}

static void test_missing_function(void **state)
{
    (void)state;
    expect_refused(2, "has no 'model_create' function");
}

static void test_wrong_struct_size(void **state)
{
    (void)state;
    expect_refused(3, "ops struct has size 8, smaller than the first form");
}

static void test_missing_entry_point(void **state)
{
    (void)state;
    expect_refused(4, "no 'mixcheck_plugin_backends' symbol");
}

static void test_not_a_library(void **state)
{
    (void)state;
    assert_int_equal(run(MIXCHECK " run cases/mamba2/tiny.yaml --plugin README.md"), 2);
    assert_non_null(strstr(out, "plugin README.md: cannot load"));
}

static void test_example_plugin_runs_every_shortconv_case(void **state)
{
    (void)state;
    if (run("ls cases/shortconv/*.yaml") != 0)
        skip(); /* no ShortConv cases in this tree */
    assert_int_equal(run(MIXCHECK " run cases/ --plugin " MC_EXAMPLE_PLUGIN " --backend example --dtype f32"), 0);
    assert_non_null(strstr(out, "example"));
    assert_null(strstr(out, "FAIL"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wrong_abi_version),
        cmocka_unit_test(test_missing_function),
        cmocka_unit_test(test_wrong_struct_size),
        cmocka_unit_test(test_missing_entry_point),
        cmocka_unit_test(test_not_a_library),
        cmocka_unit_test(test_example_plugin_runs_every_shortconv_case),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
