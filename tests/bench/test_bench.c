/*
 * test_bench.c — `mixcheck bench` as a command, at tiny sizes (no timing assertions):
 *   - a gated run writes the table and a JSON record with every documented key (layer and --core);
 *   - a wrong backend (bench_wrong_plugin.c) is refused with exit 1, the failing check named, and
 *     nothing is timed;
 *   - an unknown backend or option is exit 2; a backend without the family or the dtype is 125.
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

static char dir[] = "/tmp/mixcheck-bench-XXXXXX";
static char out[1 << 16];

/* Runs mixcheck with `args` (stdout and stderr into out); the exit status, or -1. */
static int bench(const char *args)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s bench %s", MC_MIXCHECK, args);
    return mc_capture(cmd, out, sizeof out);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void assert_json_record(const char *json, const char *family, const char *mode)
{
    static const char *const keys[] = {"family", "backend", "dtype", "batch", "len", "threads", "tokens_per_s",
                                       "gflop_per_s", "peak_fraction", "speedup_vs_reference", "peak_rss_bytes",
                                       "baseline_rss_bytes", "run_peak_rss_bytes", "run_rss_over_footprint"};
    assert_non_null(json);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        char k[64];
        snprintf(k, sizeof k, "\"%s\": ", keys[i]);
        if (!strstr(json, k))
            fail_msg("key %s missing from %s", keys[i], json);
    }
    char want[128];
    snprintf(want, sizeof want, "\"family\": \"%s\"", family);
    assert_non_null(strstr(json, want));
    snprintf(want, sizeof want, "\"mode\": \"%s\"", mode);
    assert_non_null(strstr(json, want));
    assert_non_null(strstr(json, "\"backend\": \"cpu\""));
    assert_non_null(strstr(json, "\"len\": 48"));
    assert_non_null(strstr(json, "\"threads\": 2"));
    assert_null(strstr(json, "\"tokens_per_s\": null"));
    assert_null(strstr(json, "\"peak_rss_bytes\": 0,"));
}

static void test_layer_run_writes_json(void **state)
{
    (void)state;
    char args[1024], path[512];
    snprintf(path, sizeof path, "%s/layer.json", dir);
    snprintf(args, sizeof args, "--family gdn --len 48 --reps 1 --reference-len 16 --json %s", path);
    const int rc = bench(args);
    if (rc != 0)
        fail_msg("exit %d: %s", rc, out);
    assert_non_null(strstr(out, "gate: gdn"));
    assert_non_null(strstr(out, "tokens/s"));
    assert_null(strchr(out, '\r')); /* no progress line when stdout is not a terminal */
    assert_json_record(slurp(path), "gdn", "layer");
}

static void test_core_run_validates_and_writes_json(void **state)
{
    (void)state;
    char args[1024], path[512];
    snprintf(path, sizeof path, "%s/core.json", dir);
    snprintf(args, sizeof args, "--core --family gdn --len 48 --reps 1 --reference-len 8 --json %s", path);
    const int rc = bench(args);
    if (rc != 0)
        fail_msg("exit %d: %s", rc, out);
    assert_non_null(strstr(out, "matches the plain f64 recurrence"));
    assert_json_record(slurp(path), "gdn", "core");
}

static void test_wrong_backend_is_refused(void **state)
{
    (void)state;
    char args[1024], path[512];
    snprintf(path, sizeof path, "%s/wrong.json", dir);
    snprintf(args, sizeof args, "--plugin %s --backend bench_wrong --family mamba2 --len 16 --reps 1 --json %s",
             MC_BENCH_WRONG_PLUGIN, path);
    const int rc = bench(args);
    if (rc != 1)
        fail_msg("exit %d, expected 1: %s", rc, out);
    assert_non_null(strstr(out, "refusing to time mamba2 bench_wrong f32"));
    assert_non_null(strstr(out, "/bench_wrong/f32 FAIL"));
    assert_null(strstr(out, "tokens/s")); /* nothing timed */
    assert_null(slurp(path));            /* no report */
}

static void test_usage_and_could_not_test(void **state)
{
    (void)state;
    assert_int_equal(bench("--backend nosuch --family gdn"), 2);
    assert_non_null(strstr(out, "no backend named 'nosuch'"));
    assert_int_equal(bench("--no-check"), 2);
    assert_int_equal(bench("--family nosuch"), 2);
    assert_int_equal(bench("--len 0"), 2);
    assert_int_equal(bench("--core --backend reference"), 2);
    assert_int_equal(bench("--shape nosuch"), 2);
    assert_int_equal(bench("--core --family lightning"), 2); /* no core entry */
    assert_int_equal(bench("--family gdn --family gdn --family gdn --family gdn --family gdn --family gdn --family gdn"), 2);
    assert_non_null(strstr(out, "more than 6 times"));
    char args[1024];
    snprintf(args, sizeof args, "--plugin %s --backend bench_wrong --family gdn --len 16", MC_BENCH_WRONG_PLUGIN);
    assert_int_equal(bench(args), 125); /* bench_wrong is a mamba2 backend only */
    assert_int_equal(bench("--family gdn --dtype f64 --len 16"), 125); /* cpu does not declare f64 */
    assert_int_equal(bench("--help"), 0);
    assert_non_null(strstr(out, "--reference-len"));
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
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_usage_and_could_not_test),
        cmocka_unit_test(test_wrong_backend_is_refused),
        cmocka_unit_test(test_layer_run_writes_json),
        cmocka_unit_test(test_core_run_validates_and_writes_json),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
