/*
 * test_robust.c — a backend that segfaults, aborts, hangs, exits, writes past its output, returns NaN
 * or modifies its input fails its own check with the cause, while every other check of the same run
 * passes and the reports hold every record.
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

static char dir[] = "/tmp/mixcheck-robust-XXXXXX";
static char out[1 << 17];

static int run(const char *cmd)
{
    char full[4096];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    while (fgetc(p) != EOF) {
    }
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
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
    snprintf(path, sizeof path, "%s/robust.yaml", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    /* under ASan a SIGSEGV would be caught and turned into exit 1: let it kill the process */
    snprintf(cmd, sizeof cmd,
             "ASAN_OPTIONS=handle_segv=0:detect_leaks=0 " MC_BINARY_DIR
             "/mixcheck run %s --plugin %s --timeout 2 -j 4 --json %s/r.json --junit %s/r.xml",
             path, MC_ROBUST_PLUGIN, dir, dir);
    assert_int_equal(run(cmd), 1);
    expect("reference", "PASS", "");
    expect("robust_segv", "ERROR", "crashed: signal 11");
    expect("robust_abort", "ERROR", "crashed: signal 6");
    expect("robust_hang", "ERROR", "timed out after 2 s");
    expect("robust_overrun", "ERROR", "out-of-bounds write past the end of 'y'");
    expect("robust_nan", "FAIL", "non-finite");
    expect("robust_scribble", "ERROR", "modified its input 'x'");
    expect("robust_exit", "ERROR", "before reporting");
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

static int setup(void **state)
{
    (void)state;
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_misbehaving_backends_are_contained),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
