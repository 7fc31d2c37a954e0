/*
 * test_python.c — Python backends (harness/src/exec/pybackend.c, python/mixcheck_backend): the numpy
 * ShortConv example (examples/python) passes every bundled ShortConv case, and each broken variant of
 * tests/python/broken_shortconv.py is reported as its own failure or error: a math mutant fails, an
 * exception errors with its traceback, a segfault errors with its signal and Python stack, a hang
 * runs into the time limit and leaves no worker behind, a wrong shape is refused; the JSON and JUnit
 * reports' provenance name the interpreter, its version, the spec's file with its SHA-256 and the
 * package versions the worker reports. A Python backend that declares an internal chunk length
 * (tests/python/np_chunked_mamba2.py, `chunked = True`) runs chunk_size_invariance at every chunk
 * length of the case, each reaching its model_create, and a bug at one of them fails it; `mixcheck
 * list` loads and lists Python backends with the options of `mixcheck run`. Needs
 * /usr/bin/python3 with numpy (scripts/bootstrap.sh installs it); skipped (77) without.
 */
#define _DEFAULT_SOURCE /* usleep */
#include <dirent.h>
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

#define MIXCHECK MC_BINARY_DIR "/mixcheck"
#define PY " --python /usr/bin/python3 "
#define BROKEN " --python-backend tests/python/broken_shortconv.py:"
#define CHUNKED " --python-backend tests/python/np_chunked_mamba2.py"

static char out[1 << 18];

static int run(const char *cmd)
{
    return mc_capture(cmd, out, sizeof out);
}

static void expect(const char *text)
{
    if (strstr(out, text) == NULL)
        fail_msg("expected '%s' in:\n%.6000s", text, out);
}

/* The number before " passed" in the summary line. */
static int passed(void)
{
    const char *p = strstr(out, "check(s): ");
    return p ? atoi(p + 10) : -1;
}

static void test_numpy_example_passes_every_shortconv_case(void **state)
{
    (void)state;
    int rc = run(MIXCHECK " run cases/shortconv" PY "--python-backend examples/python/np_shortconv.py"
                          " --backend np-shortconv -q");
    if (rc != 0)
        fail_msg("exit %d:\n%.6000s", rc, out);
    expect(" 0 failed, 0 errored, 0 unsupported");
    assert_true(passed() >= 100); /* every scenario of every case, f64 and f32 */
}

static void test_math_mutant_fails(void **state)
{
    (void)state;
    assert_int_equal(run(MIXCHECK " run cases/shortconv/k4.yaml" PY BROKEN "MathMutant --backend np-mutant -q"), 1);
    expect("FAIL  shortconv-k4             prefill                np-mutant");
    expect("outside tolerance");
}

static void test_padding_leak_fails_only_masked_scenarios(void **state)
{
    (void)state;
    assert_int_equal(run(MIXCHECK " run cases/shortconv/leftpad.yaml" PY BROKEN
                                  "LeaksCache --backend np-padleak -k left_padded_batch"),
                     1);
    expect("FAIL  shortconv-leftpad        left_padded_batch      np-padleak");
    /* a case without padding passes: the variant differs only where the mask matters */
    assert_int_equal(run(MIXCHECK " run cases/shortconv/k4.yaml" PY BROKEN "LeaksCache --backend np-padleak -q"), 0);
}

static void test_exception_is_the_checks_error_with_its_traceback(void **state)
{
    (void)state;
    assert_int_equal(run(MIXCHECK " run cases/shortconv/k4.yaml" PY BROKEN "Raises --backend np-raise -k /prefill/"),
                     1);
    expect("ERROR shortconv-k4             prefill                np-raise");
    expect("python forward: ValueError: deliberate failure on a (2, 15, 24) input");
    expect("broken_shortconv.py:30 in helper <- broken_shortconv.py:27 in forward");
}

static void test_segfault_is_the_checks_error_with_signal_and_stack(void **state)
{
    (void)state;
    assert_int_equal(run(MIXCHECK " run cases/shortconv/k4.yaml" PY BROKEN "Segfaults --backend np-segv -k /decode/"),
                     1);
    expect("ERROR shortconv-k4             decode                 np-segv");
    expect("python worker died of signal 11 (Segmentation fault) during forward");
    expect("broken_shortconv.py:47 in forward");
}

static void test_wrong_shape_is_refused(void **state)
{
    (void)state;
    assert_int_equal(run(MIXCHECK " run cases/shortconv/k4.yaml" PY BROKEN "WrongShape --backend np-shape -k /prefill/"),
                     1);
    expect("forward returned shape (2, 14, 24), expected (2, 15, 24)");
}

/* x, the mask and y are the harness's own buffers in memory the worker shares (host_map), so the
 * harness's checks see what the worker does to them: an input written in place, a write into the guard
 * before x (both unseen when x was a copy in the arena). */
static void test_writes_into_shared_inputs_are_seen(void **state)
{
    (void)state;
    assert_int_equal(run(MIXCHECK " run cases/shortconv/k4.yaml" PY BROKEN "WritesInput --backend np-writex -k /prefill/"),
                     1);
    expect("ERROR shortconv-k4             prefill                np-writex");
    expect("forward(rows 0..1, tokens 0..14): modified its input 'x' (first at element 0)");
    assert_int_equal(run(MIXCHECK " run cases/shortconv/k4.yaml" PY BROKEN
                                  "WritesBeforeInput --backend np-underrun -k /prefill/"),
                     1);
    expect("ERROR shortconv-k4             prefill                np-underrun");
    expect("forward(rows 0..1, tokens 0..14): out-of-bounds write before the start of 'x' (offsets -1 .. -1)");
    /* the same in the packed call, whose x, y and index arrays are shared as well */
    assert_int_equal(run(MIXCHECK " run cases/shortconv/k4.yaml" PY BROKEN
                                  "WritesInput --backend np-writex -k '*/packed_prefill/*/f32'"),
                     1);
    expect("ERROR shortconv-k4             packed_prefill         np-writex");
    expect("forward_packed(5 sequences, 36 tokens, pool of 11): modified its input 'x' (first at element 0)");
}

/* Workers (their command line names mixcheck_backend.worker) that outlived the process driving them. */
static int orphan_workers(void)
{
    DIR *d = opendir("/proc");
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char path[300], buf[4096];
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue;
        size_t len = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        for (size_t i = 0; i < len; i++)
            buf[i] = buf[i] ? buf[i] : ' ';
        buf[len] = '\0';
        if (strstr(buf, "mixcheck_backend.worker") == NULL || strstr(buf, " serve") == NULL)
            continue;
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        f = fopen(path, "r");
        int ppid = 0;
        if (f != NULL && fscanf(f, "%*d %*s %*c %d", &ppid) != 1)
            ppid = 0;
        if (f != NULL)
            fclose(f);
        n += ppid == 1;
    }
    closedir(d);
    return n;
}

static void test_hang_runs_into_the_time_limit_and_the_worker_dies(void **state)
{
    (void)state;
    assert_int_equal(run(MIXCHECK " run cases/shortconv/k4.yaml" PY BROKEN
                                  "Hangs --backend np-hang -k /prefill/ --timeout 2"),
                     1);
    expect("ERROR shortconv-k4             prefill                np-hang");
    expect("timed out after 2 s (killed)");
    usleep(500000);
    assert_int_equal(orphan_workers(), 0);
}

static void test_bad_interpreter_and_module_are_input_errors(void **state)
{
    (void)state;
    assert_int_equal(run(MIXCHECK " run cases/shortconv/k4.yaml --python /no/such/python" BROKEN "Raises"), 2);
    expect("cannot run /no/such/python");
    assert_int_equal(run(MIXCHECK " run cases/shortconv/k4.yaml --bisect --python /no/such/python" BROKEN "Raises"),
                     125);
    assert_int_equal(run(MIXCHECK " run cases/shortconv/k4.yaml" PY "--python-backend no_such_module_here"), 2);
    expect("--python-backend no_such_module_here: ModuleNotFoundError: No module named 'no_such_module_here'");
    assert_int_equal(run(MIXCHECK " run cases/shortconv/k4.yaml" PY BROKEN "NoSuchClass"), 2);
    expect("has no attribute 'NoSuchClass'");
}

/* How many lines of the file read exactly `line`. */
static int count_lines(const char *path, const char *line)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char buf[256];
    int n = 0;
    while (fgets(buf, sizeof buf, f) != NULL) {
        buf[strcspn(buf, "\n")] = '\0';
        n += strcmp(buf, line) == 0;
    }
    fclose(f);
    return n;
}

static void test_chunked_backend_runs_chunk_size_invariance(void **state)
{
    (void)state;
    char log[] = "/tmp/mc-pychunk-XXXXXX", cmd[2048];
    int fd = mkstemp(log);
    assert_true(fd >= 0);
    close(fd);
    snprintf(cmd, sizeof cmd,
             "MC_TEST_CHUNK_LOG=%s " MIXCHECK " run cases/mamba2/tiny.yaml" PY CHUNKED
             " --backend np-chunked-mamba2 -k /prefill/ -k /chunk_size_invariance/",
             log);
    int rc = run(cmd);
    if (rc != 0)
        fail_msg("exit %d:\n%.6000s", rc, out);
    expect("PASS  mamba2-tiny              chunk_size_invariance  np-chunked-mamba2 f64");
    expect("PASS  mamba2-tiny              chunk_size_invariance  np-chunked-mamba2 f32");
    expect("4 check(s): 4 passed");
    /* each chunk length of the case (tiny.yaml: 1, 5, 8, 16, 256) reached a model, at both dtypes; the
     * prefills asked for none (0) */
    static const char *const lengths[] = {"1", "5", "8", "16", "256"};
    for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++)
        if (count_lines(log, lengths[i]) != 2)
            fail_msg("chunk length %s reached %d model(s), expected 2", lengths[i], count_lines(log, lengths[i]));
    assert_true(count_lines(log, "0") >= 2);
    unlink(log);
    /* a kernel wrong at one chunk length only: prefill passes, chunk_size_invariance fails at that length */
    assert_int_equal(run(MIXCHECK " run cases/mamba2/tiny.yaml" PY CHUNKED
                                  " --backend np-chunk1-mutant --dtype f64 -k /prefill/ -k /chunk_size_invariance/"),
                     1);
    expect("PASS  mamba2-tiny              prefill                np-chunk1-mutant f64");
    expect("FAIL  mamba2-tiny              chunk_size_invariance  np-chunk1-mutant f64");
    expect("first failing run: chunk_size [1]");
    /* a malformed declaration is refused when the spec loads */
    assert_int_equal(run(MIXCHECK " run cases/shortconv/k4.yaml" PY BROKEN "BadChunked"), 2);
    expect("BadChunked.chunked is 'yes' (expected True or False)");
}

/* The motivating bug, as a numpy port written from its description (HF Mamba2's single-step branch for a
 * multi-token forward on a primed cache, before #46084): caught, and named 8.1 by the diagnosis. */
static void test_single_step_branch_is_named_8_1(void **state)
{
    (void)state;
    assert_int_equal(run(MIXCHECK " run cases/mamba2/tiny.yaml cases/mamba2/ragged.yaml" PY CHUNKED
                                  " --backend np-single-step-branch -q --color never"),
                     1);
    expect("FAIL  mamba2-tiny              first_token_causality  np-single-step-branch f64");
    expect("diagnosis of np-single-step-branch over 2 diagnosed case(s) (first in 2): likely: a multi-token forward "
           "on a primed cache takes the single-token path");
    expect("(8.1) \xe2\x80\x94 evidence: first_token_causality consistency and distractor fail from the first token after "
           "the split");
}

static void test_list_loads_python_backends(void **state)
{
    (void)state;
    int rc = run(MIXCHECK " list cases/mamba2/tiny.yaml" PY CHUNKED " --python-device cpu");
    if (rc != 0)
        fail_msg("exit %d:\n%.6000s", rc, out);
    expect("  np-chunked-mamba2 mamba2    device cpu   dtypes f64 f32  chunk_size  (tests/python/np_chunked_mamba2.py)");
    expect("  np-chunk1-mutant mamba2    device cpu   dtypes f64 f32  chunk_size  (tests/python/np_chunked_mamba2.py)");
    expect("  np-single-step-branch mamba2    device cpu   dtypes f64 f32  (tests/python/np_chunked_mamba2.py)");
    expect("  reference    mamba2    device cpu   dtypes f64 f32  (built-in)");
    rc = run(MIXCHECK " list cases/shortconv/k4.yaml --python-backend examples/python/np_shortconv.py"
                      " --python /usr/bin/python3 --python-device mydev");
    if (rc != 0)
        fail_msg("exit %d:\n%.6000s", rc, out);
    expect("  np-shortconv shortconv device mydev dtypes f64 f32  (examples/python/np_shortconv.py)");
    /* the errors of mixcheck run */
    assert_int_equal(run(MIXCHECK " list cases/shortconv/k4.yaml --python /usr/bin/python3"), 2);
    expect("--python: needs --python-backend SPEC");
    assert_int_equal(run(MIXCHECK " list cases/shortconv/k4.yaml" PY "--python-backend no_such_module_here"), 2);
    expect("--python-backend no_such_module_here: ModuleNotFoundError: No module named 'no_such_module_here'");
    assert_int_equal(run(MIXCHECK " list cases/shortconv/k4.yaml --python /no/such/python" BROKEN "Raises"), 2);
    expect("cannot run /no/such/python");
    assert_int_equal(run(MIXCHECK " list --python-device ''" BROKEN "Raises"), 2);
    expect("--python-device: expected a device name");
}

/* The contents of a file (static storage; at most one at a time). */
static const char *slurp(const char *path)
{
    static char buf[1 << 20];
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void expect_in(const char *text, const char *what, const char *where)
{
    if (strstr(text, what) == NULL)
        fail_msg("expected '%s' in the %s:\n%.6000s", what, where, text);
}

static void test_reports_record_the_python_backends_provenance(void **state)
{
    (void)state;
    char dir[] = "/tmp/mc-pyprov-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char cmd[2048], json[512], junit[512], want[2048];
    snprintf(json, sizeof json, "%s/r.json", dir);
    snprintf(junit, sizeof junit, "%s/r.xml", dir);
    /* what the interpreter itself says, and the file's hash by another tool */
    assert_int_equal(run("/usr/bin/python3 -c 'import sys, platform, numpy, os; "
                         "print(sys.executable, platform.python_version(), numpy.__version__, "
                         "os.path.abspath(\"examples/python/np_shortconv.py\"))'"),
                     0);
    char exe[512], ver[64], npv[64], path[1024];
    assert_int_equal(sscanf(out, "%511s %63s %63s %1023s", exe, ver, npv, path), 4);
    assert_int_equal(run("sha256sum examples/python/np_shortconv.py"), 0);
    char sha[65];
    assert_int_equal(sscanf(out, "%64s", sha), 1);
    snprintf(cmd, sizeof cmd,
             MIXCHECK " run cases/shortconv/k4.yaml" PY "--python-backend examples/python/np_shortconv.py"
                      " --backend np-shortconv -k '/prefill/' -q --json %s --junit %s",
             json, junit);
    int rc = run(cmd);
    if (rc != 0)
        fail_msg("exit %d:\n%.6000s", rc, out);
    const char *j = slurp(json);
    snprintf(want, sizeof want, "\"python\": {\"interpreter\": \"/usr/bin/python3\", \"executable\": \"%s\", "
             "\"version\": \"%s\", \"packages\": {\"numpy\": \"%s\", ", exe, ver, npv);
    expect_in(j, want, "JSON report");
    snprintf(want, sizeof want, "\"specs\": [{\"spec\": \"examples/python/np_shortconv.py\", \"path\": \"%s\", "
             "\"sha256\": \"%s\"}]", path, sha);
    expect_in(j, want, "JSON report");
    expect_in(j, "\"torch\": ", "JSON report"); /* a version or null: asked either way */
    const char *x = slurp(junit);
    snprintf(want, sizeof want, "name=\"python:numpy\" value=\"%s\"", npv);
    expect_in(x, want, "JUnit report");
    snprintf(want, sizeof want, "value=\"examples/python/np_shortconv.py %s sha256:%s\"", path, sha);
    expect_in(x, want, "JUnit report");
    /* a run without Python backends says so */
    snprintf(cmd, sizeof cmd, MIXCHECK " run cases/shortconv/k4.yaml --backend reference -k '/prefill/' -q --json %s",
             json);
    assert_int_equal(run(cmd), 0);
    expect_in(slurp(json), "\"python\": null", "JSON report");
    unlink(json);
    unlink(junit);
    rmdir(dir);
}

static void test_bench_python_overhead_runs(void **state)
{
    (void)state;
    /* figures only, no time limit (machine-dependent): the mode runs, checks y == x at every size and
     * reports the fixed cost and the rate */
    int rc = run(MIXCHECK " bench --python-overhead --python /usr/bin/python3 --hidden 64");
    if (rc != 0)
        fail_msg("exit %d:\n%s", rc, out);
    expect("adapter per call beyond the bytes (L = 1):");
    expect("interpreter starts: 1 for the run");
    expect("python x and y: in its shared memory (host_map), 1 pass over x");
    /* the path of a tensor outside the shared memory: copied through the arena, y == x still checked */
    rc = run(MIXCHECK " bench --python-overhead --python /usr/bin/python3 --hidden 64 --copy-through-arena");
    if (rc != 0)
        fail_msg("exit %d:\n%s", rc, out);
    expect("python x and y: the bench's own, 3 passes over x through the arena");
}

int main(void)
{
    if (system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0) {
        fprintf(stderr, "test_python: /usr/bin/python3 with numpy not found: skipped\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_numpy_example_passes_every_shortconv_case),
        cmocka_unit_test(test_math_mutant_fails),
        cmocka_unit_test(test_padding_leak_fails_only_masked_scenarios),
        cmocka_unit_test(test_exception_is_the_checks_error_with_its_traceback),
        cmocka_unit_test(test_segfault_is_the_checks_error_with_signal_and_stack),
        cmocka_unit_test(test_wrong_shape_is_refused),
        cmocka_unit_test(test_writes_into_shared_inputs_are_seen),
        cmocka_unit_test(test_hang_runs_into_the_time_limit_and_the_worker_dies),
        cmocka_unit_test(test_bad_interpreter_and_module_are_input_errors),
        cmocka_unit_test(test_bench_python_overhead_runs),
        cmocka_unit_test(test_reports_record_the_python_backends_provenance),
        cmocka_unit_test(test_chunked_backend_runs_chunk_size_invariance),
        cmocka_unit_test(test_list_loads_python_backends), cmocka_unit_test(test_single_step_branch_is_named_8_1),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
