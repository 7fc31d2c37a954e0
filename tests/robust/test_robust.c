/*
 * test_robust.c — a backend that segfaults, aborts, hangs, exits, writes past its output, returns NaN
 * or modifies its input fails its own check with the cause, while every other check of the same run
 * passes and the reports hold every record. A backend that reads past an input fails too: by the
 * poison guards, by the page fence with the buffer named, or both (docs/ports.md §6: the table
 * test_read_overruns checks, one MIXCHECK_GUARD_MODE at a time). The same holds for a model check whose
 * mixer layer is such a backend (test_model_layer_crash_is_contained).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "capture.h"
#include "tmpdir.h"

static char dir[] = "/tmp/mixcheck-robust-XXXXXX";
static char out[1 << 17];

static int run(const char *cmd)
{
    return mc_capture(cmd, out, sizeof out);
}

/* Writes a case file `name`.yaml with `text` into the scratch folder; its path into path. */
static void write_case(char *path, size_t len, const char *name, const char *text)
{
    snprintf(path, len, "%s/%s.yaml", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* The console line of a backend's check, or NULL. */
static const char *line_of(const char *backend)
{
    static char line[2048];
    char key[96];
    snprintf(key, sizeof key, " %s ", backend);
    const char *p = strstr(out, key);
    if (p == NULL)
        return NULL;
    while (p > out && p[-1] != '\n')
        p--;
    const char *e = strchr(p, '\n');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    /* include the diagnosis lines that follow */
    while (e && e[1] == ' ') {
        const char *f = strchr(e + 1, '\n');
        n = f ? (size_t)(f - p) : strlen(p);
        e = f;
    }
    if (n >= sizeof line)
        n = sizeof line - 1;
    memcpy(line, p, n);
    line[n] = '\0';
    return line;
}

static void expect(const char *backend, const char *status, const char *cause)
{
    const char *l = line_of(backend);
    if (l == NULL)
        fail_msg("no line for %s in:\n%s", backend, out);
    if (strncmp(l, status, strlen(status)) != 0 || strstr(l, cause) == NULL)
        fail_msg("%s: expected %s with '%s', got:\n%s", backend, status, cause, l);
}

static void test_misbehaving_backends_are_contained(void **state)
{
    (void)state;
    char text[1024], cmd[2048];
    snprintf(text, sizeof text,
             "id: robust\nwhy: \"containment\"\nfamily: mamba2\ngolden: %s/golden/mamba2/tiny.h5\n"
             "tolerance: %s/cases/tolerances/mamba2.yaml\n"
             "backends: [reference, robust_segv, robust_abort, robust_hang, robust_overrun, robust_nan, "
             "robust_scribble, robust_exit]\ndtypes: [f32]\nscenarios:\n  prefill: {}\n",
             MC_SOURCE_DIR, MC_SOURCE_DIR);
    char path[600];
    write_case(path, sizeof path, "robust", text);
    /* under ASan a SIGSEGV would be caught and turned into exit 1: let it kill the process */
    snprintf(cmd, sizeof cmd,
             "ASAN_OPTIONS=handle_segv=0:detect_leaks=0 " MC_BINARY_DIR
             "/mixcheck run %s --plugin %s --timeout 2 -j 4 --json %s/r.json --junit %s/r.xml"
             /* the case's own backends: the plugin's read-overrun backends, which would join every
             * case of their family, are test_read_overruns' */
             " -k /reference/ -k /robust_segv/ -k /robust_abort/ -k /robust_hang/ -k /robust_overrun/"
             " -k /robust_nan/ -k /robust_scribble/ -k /robust_exit/",
             path, MC_ROBUST_PLUGIN, dir, dir);
    assert_int_equal(run(cmd), 1);
    expect("reference", "PASS", "");
    /* each names the entry point it died, hung or exited in */
#define IN_FORWARD " in forward(rows 0..1, tokens 0..23)"
    expect("robust_segv", "ERROR", "crashed: signal 11 (Segmentation fault)" IN_FORWARD);
    expect("robust_abort", "ERROR", "crashed: signal 6 (Aborted)" IN_FORWARD);
    expect("robust_hang", "ERROR", "timed out after 2 s (killed)" IN_FORWARD);
    expect("robust_overrun", "ERROR", "out-of-bounds write past the end of 'y'");
    expect("robust_nan", "FAIL", "non-finite");
    expect("robust_scribble", "ERROR", "modified its input 'x'");
    expect("robust_exit", "ERROR", "before reporting," IN_FORWARD);
#undef IN_FORWARD
    assert_non_null(strstr(out, "8 check(s): 1 passed, 1 failed, 6 errored"));
    /* both reports hold every check */
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import json; r=json.load(open('%s/r.json')); "
             "b={x['backend'] for x in r['results']}; assert len(b) == 8, b; "
             "assert r['summary']['checks'] == 8\"",
             dir);
    assert_int_equal(run(cmd), 0);
    snprintf(cmd, sizeof cmd, "grep -c '<testcase ' %s/r.xml", dir);
    assert_int_equal(run(cmd), 0);
    assert_int_equal(atoi(out), 8);
}

/* A misbehaving backend as layer 2 of the 4-layer mamba2 model stack: each model check runs in its own
 * child (docs/models.md §3), so the crash, the hang and the exit end that check only, with the cause,
 * and the reference's model checks of the same run pass. */
static void test_model_layer_crash_is_contained(void **state)
{
    (void)state;
    char text[1024], cmd[2048], path[600];
    snprintf(text, sizeof text,
             "id: robust-model\nwhy: \"containment of a model check\"\nmodel: mamba2\n"
             "golden: %s/golden/models/mamba2.h5\ntolerance: %s/cases/tolerances/models.yaml\nlayers: [2]\n"
             "backends: [reference, robust_segv, robust_hang, robust_exit]\ndtypes: [f32]\n"
             "scenarios:\n  prefill: {}\n  decode: {prefill: 5}\n",
             MC_SOURCE_DIR, MC_SOURCE_DIR);
    write_case(path, sizeof path, "robust-model", text);
    snprintf(cmd, sizeof cmd,
             "ASAN_OPTIONS=handle_segv=0:detect_leaks=0 " MC_BINARY_DIR
             "/mixcheck run %s --plugin %s --timeout 2 -j 4 --json %s/m.json"
             " -k /reference/ -k /robust_segv/ -k /robust_hang/ -k /robust_exit/",
             path, MC_ROBUST_PLUGIN, dir);
    assert_int_equal(run(cmd), 1);
    expect("reference", "PASS", "");
    /* the entry point named with its layer */
    expect("robust_segv", "ERROR",
           "crashed: signal 11 (Segmentation fault) in forward of layer 2 (mamba2 on 'robust_segv')");
    expect("robust_hang", "ERROR", "timed out after 2 s (killed) in forward of layer 2 (mamba2 on 'robust_hang')");
    expect("robust_exit", "ERROR", "before reporting, in forward of layer 2 (mamba2 on 'robust_exit')");
    assert_non_null(strstr(out, "8 check(s): 2 passed, 0 failed, 6 errored"));
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import json; r=json.load(open('%s/m.json')); "
             "e=[x for x in r['results'] if x['status'] == 'error']; assert len(e) == 6, e; "
             "assert all(x['model_type'] == 'mamba2' for x in e), e\"",
             dir);
    assert_int_equal(run(cmd), 0);
    /* a layer's cache entry points are named too: speculative_verify copies the stack's cache */
    snprintf(text, sizeof text,
             "id: robust-model-copy\nwhy: \"containment of a model check\"\nmodel: mamba2\n"
             "golden: %s/golden/models/mamba2.h5\ntolerance: %s/cases/tolerances/models.yaml\nlayers: [2]\n"
             "backends: [robust_segv_copy]\ndtypes: [f32]\n"
             "scenarios:\n  speculative_verify: {prefill: 4, len: 5, accept: 2, seed: 11}\n",
             MC_SOURCE_DIR, MC_SOURCE_DIR);
    write_case(path, sizeof path, "robust-model-copy", text);
    snprintf(cmd, sizeof cmd,
             "ASAN_OPTIONS=handle_segv=0:detect_leaks=0 " MC_BINARY_DIR
             "/mixcheck run %s --plugin %s --timeout 20 -k /robust_segv_copy/",
             path, MC_ROBUST_PLUGIN);
    assert_int_equal(run(cmd), 1);
    expect("robust_segv_copy", "ERROR",
           "crashed: signal 11 (Segmentation fault) in cache_copy of layer 2 (mamba2 on 'robust_segv_copy')");
}

/* The read overruns of robust_plugin.c, and how each guard mode sees each: P the poison guards
 * (the check fails on a NaN output), F the fence (the check errors with the buffer named), '-' it
 * passes unseen, '?' not asserted (a read beyond the 1 KiB guard sees whatever the heap holds). */
static const struct {
    const char *backend;
    const char *fault; /* the fence's diagnosis */
    const char *seen;  /* in modes none, poison, fence, both */
} reads[] = {
#define FWD " during forward(rows 0..2, tokens 0..19)"
    {"robust_read_x_end", "read past the end of 'x' (buffer of 7680 bytes, at +0 after its end)" FWD, "-PFF"},
    {"robust_read_x_before", "", "-P-P"},
    {"robust_read_x_discard", "read past the end of 'x' (buffer of 7680 bytes, at +0 after its end)" FWD, "--FF"},
    {"robust_read_mask_end", "read past the end of 'mask' (buffer of 60 bytes, at +0 after its end)" FWD, "--FF"},
    {"robust_read_weight_end", "read past the end of 'D' (buffer of 16 bytes, at +0 after its end) during model_create",
     "-PFF"},
    {"robust_read_x_64", "read past the end of 'x' (buffer of 7680 bytes, at +64 after its end)" FWD, "-PFF"},
    {"robust_read_x_4k", "read past the end of 'x' (buffer of 7680 bytes, at +4096 after its end)" FWD, "??FF"},
#undef FWD
};
#define N_READS (sizeof reads / sizeof reads[0])

static void expect_read(int k, char seen, int asan_default)
{
    const char *b = reads[k].backend;
    if (seen == '?')
        return;
    if (seen == '-') {
        expect(b, "PASS", "");
    } else if (seen == 'P') {
        expect(b, "FAIL", "non-finite");
    } else if (asan_default && line_of(b) != NULL && strstr(line_of(b), "exited with status") != NULL) {
        /* ASan's own SEGV handler ended the child before ours could report: still an error */
        expect(b, "ERROR", "before reporting");
    } else {
        expect(b, "ERROR", "crashed: signal 11 (Segmentation fault): ");
        expect(b, "ERROR", reads[k].fault);
    }
}

static void test_read_overruns(void **state)
{
    (void)state;
    char text[2048], cmd[2048], path[600];
    int used = snprintf(text, sizeof text,
                        "id: reads\nwhy: \"read overruns\"\nfamily: mamba2\ngolden: %s/golden/mamba2/leftpad.h5\n"
                        "tolerance: %s/cases/tolerances/mamba2.yaml\nbackends: [reference",
                        MC_SOURCE_DIR, MC_SOURCE_DIR);
    for (size_t k = 0; k < N_READS; k++)
        used += snprintf(text + used, sizeof text - (size_t)used, ", %s", reads[k].backend);
    snprintf(text + used, sizeof text - (size_t)used, "]\ndtypes: [f32]\nscenarios:\n  prefill: {}\n");
    write_case(path, sizeof path, "reads", text);
    static const char *modes[] = {"none", "poison", "fence", "both", NULL /* unset: the default, both */};
    for (int m = 0; m < 5; m++) {
        int asan_default = 0;
        char env[96] = "";
        if (modes[m] != NULL)
            snprintf(env, sizeof env, "MIXCHECK_GUARD_MODE=%s ", modes[m]);
#ifdef __SANITIZE_ADDRESS__
        /* the default run keeps ASan's SEGV handler: ours must coexist with it */
        if (modes[m] == NULL)
            asan_default = 1;
        else
            strcat(env, "ASAN_OPTIONS=handle_segv=0:detect_leaks=0 ");
#endif
        /* the case's own backends only: the plugin's others (robust_hang's time limit among them) would
         * join it */
        snprintf(cmd, sizeof cmd,
                 "%s" MC_BINARY_DIR "/mixcheck run %s --plugin %s --timeout 10 -j 4 --color never -k /reference/ "
                 "-k /robust_read_",
                 env, path, MC_ROBUST_PLUGIN);
        int rc = run(cmd);
        int mi = m < 4 ? m : 3;
        expect("reference", "PASS", "");
        for (size_t k = 0; k < N_READS; k++)
            expect_read((int)k, reads[k].seen[mi], asan_default);
        if (mi != 0) /* with none, the exit status is robust_read_x_4k's heap read */
            assert_int_equal(rc, 1);
    }
}

/* A crash names the entry point that was running — forward_packed, cache_copy, model_create as well
 * as forward — in the check's message when isolated, and without isolation in the line the crash
 * handler prints (with the case, scenario, backend and dtype) before the signal ends the process. */
static const struct {
    const char *backend;
    int sig;
    const char *entry;
} entries[] = {
    {"robust_segv", 11, "forward(rows 0..1, tokens 0..23)"},
    {"robust_abort", 6, "forward(rows 0..1, tokens 0..23)"},
    {"robust_segv_packed", 11, "forward_packed(3 sequences, 46 tokens, pool of 8)"},
    {"robust_segv_copy", 11, "cache_copy"},
    {"robust_segv_create", 11, "model_create"},
};
#define N_ENTRIES (sizeof entries / sizeof entries[0])

static void test_crash_names_the_entry(void **state)
{
    (void)state;
    char text[1024], cmd[2048], path[600], want[512];
    snprintf(text, sizeof text,
             "id: robust-entry\nwhy: \"the entry point a crash happened in\"\nfamily: mamba2\n"
             "golden: %s/golden/mamba2/tiny.h5\ntolerance: %s/cases/tolerances/mamba2.yaml\n"
             "backends: [robust_segv, robust_abort, robust_segv_packed, robust_segv_copy, robust_segv_create]\n"
             "dtypes: [f32]\nscenarios:\n  determinism: {prefill: 11}\n",
             MC_SOURCE_DIR, MC_SOURCE_DIR);
    write_case(path, sizeof path, "robust-entry", text);
    const char *env = "ASAN_OPTIONS=handle_segv=0:detect_leaks=0 ";
    int used = snprintf(cmd, sizeof cmd, "%s" MC_BINARY_DIR "/mixcheck run %s --plugin %s -j 4 --color never", env,
                        path, MC_ROBUST_PLUGIN);
    for (size_t k = 0; k < N_ENTRIES; k++)
        used += snprintf(cmd + used, sizeof cmd - (size_t)used, " -k /%s/", entries[k].backend);
    assert_int_equal(run(cmd), 1);
    for (size_t k = 0; k < N_ENTRIES; k++) {
        snprintf(want, sizeof want, "crashed: signal %d (%s) in %s", entries[k].sig,
                 entries[k].sig == 11 ? "Segmentation fault" : "Aborted", entries[k].entry);
        expect(entries[k].backend, "ERROR", want);
    }
    for (size_t k = 0; k < N_ENTRIES; k++) {
        snprintf(cmd, sizeof cmd, "%s" MC_BINARY_DIR "/mixcheck run %s --plugin %s --no-isolate --color never -k /%s/",
                 env, path, MC_ROBUST_PLUGIN, entries[k].backend);
        int st = mc_capture_status(cmd, out, sizeof out);
        /* the process dies of the signal (the shell reports it as 128 + the signal) */
        int died = (WIFSIGNALED(st) && WTERMSIG(st) == entries[k].sig) ||
                   (WIFEXITED(st) && WEXITSTATUS(st) == 128 + entries[k].sig);
        if (!died)
            fail_msg("%s --no-isolate: status %#x, expected death by signal %d:\n%s", entries[k].backend, st,
                     entries[k].sig, out);
        snprintf(want, sizeof want,
                 "mixcheck: crashed: signal %d (%s) in %s; running case robust-entry, scenario determinism, "
                 "backend %s, dtype f32\n",
                 entries[k].sig, entries[k].sig == 11 ? "SIGSEGV" : "SIGABRT", entries[k].entry, entries[k].backend);
        if (strstr(out, want) == NULL)
            fail_msg("%s --no-isolate: no line '%s' in:\n%s", entries[k].backend, want, out);
    }
}

/* Checks share a worker process while they pass (isolate.h). A backend that keeps state across calls
 * (robust_leftover: a model made after another was destroyed in its process is off by one) passes
 * prefill in a fresh worker, fails decode after it; decode then runs again in a fresh process, passes
 * there, and the first failure stands with the reason. The next check gets a fresh worker again. */
static void test_state_left_in_a_worker_is_named(void **state)
{
    (void)state;
    char text[1024], cmd[2048], path[600];
    snprintf(text, sizeof text,
             "id: leftover\nwhy: \"state kept across checks\"\nfamily: mamba2\ngolden: %s/golden/mamba2/tiny.h5\n"
             "tolerance: %s/cases/tolerances/mamba2.yaml\nbackends: [robust_leftover]\ndtypes: [f32]\n"
             "scenarios:\n  prefill: {}\n  decode: {prefill: 5}\n  chunked: {splits: [[3, 11, 17]]}\n",
             MC_SOURCE_DIR, MC_SOURCE_DIR);
    write_case(path, sizeof path, "leftover", text);
    snprintf(cmd, sizeof cmd, MC_BINARY_DIR "/mixcheck run %s --plugin %s -j 1 --color never -k /robust_leftover/",
             path, MC_ROBUST_PLUGIN);
    assert_int_equal(run(cmd), 1);
    assert_non_null(strstr(out, "3 check(s): 2 passed, 1 failed"));
    const char *p = strstr(out, "PASS  leftover                 prefill"), *d = strstr(out, "FAIL  leftover                 decode");
    const char *c = strstr(out, "PASS  leftover                 chunked");
    if (p == NULL || d == NULL || c == NULL || !(p < d && d < c))
        fail_msg("expected prefill PASS, decode FAIL, chunked PASS in order:\n%s", out);
    assert_non_null(strstr(d, "fails after 1 other checks ran in the same process and passes in a fresh one"));
    /* one check per worker: every check alone, all pass */
    snprintf(cmd, sizeof cmd, MC_BINARY_DIR "/mixcheck run %s --plugin %s -j 3 --color never -k /robust_leftover/",
             path, MC_ROBUST_PLUGIN);
    assert_int_equal(run(cmd), 0);
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
        cmocka_unit_test(test_misbehaving_backends_are_contained),
        cmocka_unit_test(test_read_overruns),
        cmocka_unit_test(test_model_layer_crash_is_contained),
        cmocka_unit_test(test_crash_names_the_entry),
        cmocka_unit_test(test_state_left_in_a_worker_is_named),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
