/*
 * test_cli.c — the mixcheck command as a user runs it: exit codes 0 / 1 / 2 / 125, file:line:column
 * in YAML errors, the failure diagnosis with its rerun command, and well-formed JSON and JUnit reports.
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

static char tmpdir[] = "/tmp/mixcheck-cli-XXXXXX";

static void write_file(const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

#define MIXCHECK MC_BINARY_DIR "/mixcheck"

static char out[1 << 16];

static void test_run_passes_and_writes_reports(void **state)
{
    (void)state;
    char cmd[1024];
    snprintf(cmd, sizeof cmd, MIXCHECK " run cases/mamba2/tiny.yaml --json %s/r.json --junit %s/r.xml", tmpdir,
             tmpdir);
    assert_int_equal(mc_capture(cmd, out, sizeof out), 0);
    assert_non_null(strstr(out, "PASS"));
    assert_non_null(strstr(out, "exit 0"));
    assert_null(strstr(out, "\x1b[")); /* no colour when not on a terminal */
    /* the JSON parses and has a record per tensor with the documented keys */
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import json,sys; r=json.load(open('%s/r.json')); "
             "ks={'case','family','scenario','backend','device','dtype','tensor','status','headroom',"
             "'max_abs_err','max_rel_err','first_fail_token','worst_index'}; "
             "assert r['results'] and all(ks <= set(x) for x in r['results'] if x['tensor']); "
             "assert all(x['message'] for x in r['results'] if x['status'] == 'unsupported'); "
             "assert {x['tensor'] for x in r['results']} >= {'output','conv_state','recurrent_state','consistency'}; "
             "assert r['summary']['exit_code'] == 0\"",
             tmpdir);
    assert_int_equal(mc_capture(cmd, out, sizeof out), 0);
    snprintf(cmd, sizeof cmd, "grep -c '<testcase ' %s/r.xml", tmpdir);
    assert_int_equal(mc_capture(cmd, out, sizeof out), 0);
    /* 13 scenarios x (reference f64, f32 + cpu f32, bf16, f16), less chunk_size_invariance on the
     * reference, which has no internal chunk length (the four serving scenarios are `unsupported` on
     * a cpu backend without forward_packed, still one test case each) */
    assert_true(atoi(out) == 63);
}

static void test_malformed_yaml_exits_2_with_position(void **state)
{
    (void)state;
    write_file("bad.yaml", "id: bad\nwhy: \"x\"\nfamily: [mamba2\n");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, MIXCHECK " run %s/bad.yaml", tmpdir);
    assert_int_equal(mc_capture(cmd, out, sizeof out), 2);
    char where[600];
    snprintf(where, sizeof where, "%s/bad.yaml:", tmpdir);
    char *at = strstr(out, where);
    assert_non_null(at);
    int line = 0, col = 0;
    assert_int_equal(sscanf(at + strlen(where), "%d:%d:", &line, &col), 2);
    assert_true(line >= 3 && col >= 1);
}

static void test_unknown_backend_is_untestable(void **state)
{
    (void)state;
    char text[1024];
    snprintf(text, sizeof text,
             "id: nobackend\nwhy: \"x\"\nfamily: mamba2\ngolden: %s/golden/mamba2/tiny.h5\n"
             "tolerance: %s/cases/tolerances/mamba2.yaml\nbackends: [nosuch]\ndtypes: [f32]\n"
             "scenarios:\n  prefill: {}\n",
             MC_SOURCE_DIR, MC_SOURCE_DIR);
    write_file("nobackend.yaml", text);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, MIXCHECK " run %s/nobackend.yaml", tmpdir);
    assert_int_equal(mc_capture(cmd, out, sizeof out), 125);
    assert_non_null(strstr(out, "backend 'nosuch' is not available"));
}

static void test_usage_errors_exit_2(void **state)
{
    (void)state;
    assert_int_equal(mc_capture(MIXCHECK " run cases/mamba2 -k no-such-check", out, sizeof out), 2);
    assert_non_null(strstr(out, "no check matches"));
    assert_int_equal(mc_capture(MIXCHECK " run cases/mamba2 --dtype f8", out, sizeof out), 2);
    assert_int_equal(mc_capture(MIXCHECK " run --bogus", out, sizeof out), 2);
    assert_int_equal(mc_capture(MIXCHECK " frobnicate", out, sizeof out), 2);
    assert_int_equal(mc_capture(MIXCHECK " run /no/such/path", out, sizeof out), 2);
    assert_int_equal(mc_capture(MIXCHECK, out, sizeof out), 2);
}

static void test_filters_select_checks(void **state)
{
    (void)state;
    assert_int_equal(mc_capture(MIXCHECK " run cases/mamba2 --scenario decode --dtype f32 -k tiny", out, sizeof out), 0);
    assert_non_null(strstr(out, "2 check(s): 2 passed")); /* reference and cpu */
    assert_int_equal(mc_capture(MIXCHECK " run cases/mamba2 -k '*ragged/chunked/*'", out, sizeof out), 0);
    assert_non_null(strstr(out, "5 check(s): 5 passed"));
}

static void test_list_coverage(void **state)
{
    (void)state;
    assert_int_equal(mc_capture(MIXCHECK " list --coverage", out, sizeof out), 0);
    assert_non_null(strstr(out, "mamba2-tiny"));
    assert_non_null(strstr(out, "reference"));
    assert_non_null(strstr(out, "coverage"));
    assert_non_null(strstr(out, "left_padded_batch"));
}

static void test_failure_diagnosis_names_tensor_and_rerun(void **state)
{
    (void)state;
    /* a tolerance profile of zeros makes f32 fail against the f64 oracle: the diagnosis must say where */
    write_file("zero.yaml", "profile: zero\nwhy: \"x\"\ndevices:\n  cpu:\n    f32:\n"
                            "      default: {atol: 0, rtol: 0, why: \"nothing passes\"}\n");
    char text[1024];
    snprintf(text, sizeof text,
             "id: strict\nwhy: \"x\"\nfamily: mamba2\ngolden: %s/golden/mamba2/tiny.h5\n"
             "tolerance: zero.yaml\nbackends: [reference]\ndtypes: [f32]\nscenarios:\n  prefill: {}\n",
             MC_SOURCE_DIR);
    write_file("strict.yaml", text);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, MIXCHECK " run %s/strict.yaml", tmpdir);
    assert_int_equal(mc_capture(cmd, out, sizeof out), 1);
    assert_non_null(strstr(out, "FAIL"));
    assert_non_null(strstr(out, "output:"));
    assert_non_null(strstr(out, "first failing token"));
    assert_non_null(strstr(out, "worst at batch="));
    char rerun[700];
    snprintf(rerun, sizeof rerun, "rerun: mixcheck run %s/strict.yaml --scenario prefill --backend reference --dtype f32",
             tmpdir);
    assert_non_null(strstr(out, rerun));
}

static int setup(void **state)
{
    (void)state;
    return mkdtemp(tmpdir) == NULL ? -1 : 0;
}

static int teardown(void **state)
{
    (void)state;
    return mc_test_tmpdir_remove(tmpdir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_passes_and_writes_reports),
        cmocka_unit_test(test_malformed_yaml_exits_2_with_position),
        cmocka_unit_test(test_unknown_backend_is_untestable),
        cmocka_unit_test(test_usage_errors_exit_2),
        cmocka_unit_test(test_filters_select_checks),
        cmocka_unit_test(test_list_coverage),
        cmocka_unit_test(test_failure_diagnosis_names_tensor_and_rerun),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
