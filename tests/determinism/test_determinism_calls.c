/*
 * test_determinism_calls.c — the determinism scenario repeats every serving call at every thread count:
 * a backend whose packed call differs by one ulp between two identical calls, and one whose 2-thread
 * forward differs by one ulp from its 1-thread forward (det_plugin.c), are both `nondeterministic`,
 * with a message naming the call and the thread counts, while the same wrapper without a flip passes.
 * The second thread count is the one --threads gives (2 without it).
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
#include "tmpdir.h"

static char dir[] = "/tmp/mixcheck-determ-XXXXXX";
static char out[1 << 16];
static char path[600];

/* The console record of a backend's check: its line and the indented lines under it, or NULL. */
static const char *record_of(const char *backend)
{
    static char rec[4096];
    char key[96];
    snprintf(key, sizeof key, " %s ", backend);
    const char *p = strstr(out, key);
    if (p == NULL)
        return NULL;
    while (p > out && p[-1] != '\n')
        p--;
    const char *e = strchr(p, '\n');
    while (e != NULL && e[1] == ' ')
        e = strchr(e + 1, '\n');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (n >= sizeof rec)
        n = sizeof rec - 1;
    memcpy(rec, p, n);
    rec[n] = '\0';
    return rec;
}

static void expect(const char *backend, const char *status, const char *text)
{
    const char *r = record_of(backend);
    if (r == NULL)
        fail_msg("no record for %s in:\n%s", backend, out);
    if (strncmp(r, status, strlen(status)) != 0 || strstr(r, text) == NULL)
        fail_msg("%s: expected %s with '%s', got:\n%s", backend, status, text, r);
}

static int run(const char *threads, const char *json)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, MC_BINARY_DIR "/mixcheck run %s --plugin %s --color never%s%s --json %s/%s", path,
             MC_DET_PLUGIN, threads[0] ? " --threads " : "", threads, dir, json);
    return mc_capture(cmd, out, sizeof out);
}

static void test_default_threads(void **state)
{
    (void)state;
    assert_int_equal(run("", "a.json"), 1);
    expect("det_ok", "PASS", "");
    expect("det_packed_flip", "NONDET",
           "forward_packed, the packed call (3 sequences, 46 tokens, pool of 8), twice at 1 thread: 1 of ");
    expect("det_packed_flip", "NONDET", "the backend is nondeterministic");
    expect("det_thread_flip", "NONDET",
           "forward without a cache (tokens 0..23) at 2 threads against the same at 1 thread: 1 of 1536 elements "
           "differ: the backend is nondeterministic");
    assert_non_null(strstr(out, "3 check(s): 1 passed, 0 failed, 2 nondeterministic, 0 errored"));
    /* the JSON report: the determinism tensor of both is `nondeterministic`, the wrapper's passes */
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import json; r=json.load(open('%s/a.json'))['results']; "
             "d={x['backend']: x['status'] for x in r if x['tensor'] == 'determinism'}; "
             "assert d == {'det_ok': 'pass', 'det_packed_flip': 'nondeterministic', "
             "'det_thread_flip': 'nondeterministic'}, d\"",
             dir);
    assert_int_equal(mc_capture(cmd, out, sizeof out), 0);
}

/* --threads 4: the second pass runs at 4 threads, where det_thread_flip gives the reference's bits; the
 * packed flip is caught whatever the thread count. */
static void test_threads_option(void **state)
{
    (void)state;
    assert_int_equal(run("4", "b.json"), 1);
    expect("det_ok", "PASS", "");
    expect("det_thread_flip", "PASS", "");
    expect("det_packed_flip", "NONDET", "the packed call (3 sequences, 46 tokens, pool of 8), twice at 1 thread");
    /* at 2 threads again: caught */
    assert_int_equal(run("2", "c.json"), 1);
    expect("det_thread_flip", "NONDET", "at 2 threads against the same at 1 thread");
}

static int setup(void **state)
{
    (void)state;
    if (mkdtemp(dir) == NULL)
        return -1;
    snprintf(path, sizeof path, "%s/det.yaml", dir);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    fprintf(f,
            "id: det\nwhy: \"determinism of every call at every thread count\"\nfamily: mamba2\n"
            "golden: %s/golden/mamba2/tiny.h5\ntolerance: %s/cases/tolerances/mamba2.yaml\n"
            "backends: [det_ok, det_packed_flip, det_thread_flip]\ndtypes: [f32]\n"
            "scenarios:\n  determinism: {prefill: 11}\n",
            MC_SOURCE_DIR, MC_SOURCE_DIR);
    fclose(f);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return mc_test_tmpdir_remove(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_threads),
        cmocka_unit_test(test_threads_option),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
