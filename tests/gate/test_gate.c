/*
 * test_gate.c — issue #10: mixcheck as a CI gate that cannot pass silently, through the command line.
 *   broken ports (gate_plugin.c) are caught by the right scenario, with the right tensor, verdict and
 *   diagnosis; the first failing run is shown with its own first failing token;
 *   a plugin's backends run on every case of their family, and anything asked for that ran no check
 *   (a plugin, a -k pattern, a case file), an unwritable report, an unknown backend or scenario
 *   exits 2 naming it; --bisect keeps 125 for a plugin that cannot load;
 *   a device without tolerances is refused, --device-profile and --tolerance cover it, and the JSON
 *   names the profile and device used;
 *   rerun commands reproduce, run and list have their own --help, a crashed check has no headroom,
 *   -k reads only the goldens of the cases it selects.
 * MIXCHECK_BIN (environment) runs the assertions against another mixcheck binary.
 */
#include <glob.h>
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

#define GATE MC_GATE_PLUGIN
#define TINY MC_SOURCE_DIR "/golden/mamba2/tiny.h5"
#define TOL MC_SOURCE_DIR "/cases/tolerances/mamba2.yaml"

static char dir[] = "/tmp/mixcheck-gate-XXXXXX";
static char out[1 << 18];
static const char *mixcheck = MC_BINARY_DIR "/mixcheck";

/* Runs `fmt` (a shell command; "MC" at its start is the mixcheck binary) with stdout+stderr into
 * out; returns the exit status. */
static int run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int run(const char *fmt, ...)
{
    char cmd[6144], full[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    if (strncmp(cmd, "MC ", 3) == 0)
        snprintf(full, sizeof full, "%s %s", mixcheck, cmd + 3);
    else
        snprintf(full, sizeof full, "%s", cmd);
    return mc_capture(full, out, sizeof out);
}

#define expect_exit(code, ...)                                                                                     \
    do {                                                                                                           \
        int rc_ = run(__VA_ARGS__);                                                                                \
        if (rc_ != (code))                                                                                         \
            fail_msg("exit %d, expected %d; output:\n%s", rc_, (code), out);                                      \
    } while (0)

static void expect_text(const char *text)
{
    if (strstr(out, text) == NULL)
        fail_msg("no '%s' in:\n%s", text, out);
}

static void expect_no_text(const char *text)
{
    if (strstr(out, text) != NULL)
        fail_msg("unexpected '%s' in:\n%s", text, out);
}

/* Writes a Mamba2 case on the tiny golden (or `golden`) into dir/name and returns its path. */
static const char *write_case(const char *name, const char *id, const char *golden, const char *scenarios)
{
    static char path[4][600];
    static int next;
    char *p = path[next++ % 4];
    snprintf(p, sizeof path[0], "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fprintf(f,
            "id: %s\nwhy: \"issue #10 gate\"\nfamily: mamba2\ngolden: %s\ntolerance: %s\nbackends: [reference]\n"
            "dtypes: [f32]\nscenarios:\n%s",
            id, golden ? golden : TINY, TOL, scenarios);
    fclose(f);
    return p;
}

/* A tolerance profile with the mamba2 profile's cpu f32 numbers for `device`; returns its path. */
static const char *write_profile(const char *name, const char *device)
{
    static char p[600];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fprintf(f,
            "profile: %s\nwhy: \"issue #10 gate\"\ndevices:\n  %s:\n    f32:\n"
            "      default: {atol: 5.0e-6, rtol: 5.0e-5, why: \"the cpu f32 output numbers\"}\n"
            "      recurrent_state: {atol: 1.0e-7, rtol: 1.0e-5, why: \"the cpu f32 state numbers\"}\n",
            name, device);
    fclose(f);
    return p;
}

/* The console block of the check (scenario, backend): its status line and the indented lines after
 * it, or NULL. `status` receives the status word. */
static const char *check_block(const char *scenario, const char *backend, char *status)
{
    static char block[1 << 14];
    for (const char *l = out; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l)) {
        char word[16], cid[128], scen[64], be[128], dt[8];
        if (sscanf(l, "%15s %127s %63s %127s %7s", word, cid, scen, be, dt) != 5 || strcmp(scen, scenario) != 0 ||
            strcmp(be, backend) != 0)
            continue;
        const char *e = strchr(l, '\n');
        while (e && e[1] == ' ')
            e = strchr(e + 1, '\n');
        size_t n = e ? (size_t)(e - l) : strlen(l);
        if (n >= sizeof block)
            n = sizeof block - 1;
        memcpy(block, l, n);
        block[n] = '\0';
        if (status)
            strcpy(status, word);
        return block;
    }
    return NULL;
}

/* Asserts the check has status `word` and its block contains each of the NULL-terminated texts. */
static void expect_status(const char *scenario, const char *backend, const char *word, ...)
{
    char status[16];
    const char *b = check_block(scenario, backend, status);
    if (b == NULL)
        fail_msg("no %s/%s check in:\n%s", scenario, backend, out);
    if (strcmp(status, word) != 0)
        fail_msg("%s/%s: %s, expected %s:\n%s", scenario, backend, status, word, b);
    va_list ap;
    va_start(ap, word);
    for (const char *t = va_arg(ap, const char *); t; t = va_arg(ap, const char *))
        if (strstr(b, t) == NULL)
            fail_msg("%s/%s: no '%s' in:\n%s", scenario, backend, t, b);
    va_end(ap);
}

/* The line after "first failing run: <run>" in the block: that run's own tensor line. */
static const char *first_failing_run_line(const char *block, const char *run_label)
{
    static char line[1024];
    char key[300];
    snprintf(key, sizeof key, "first failing run: %s\n", run_label);
    const char *p = strstr(block, key);
    if (p == NULL)
        fail_msg("no '%s' in:\n%s", key, block);
    p += strlen(key);
    const char *e = strchr(p, '\n');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (n >= sizeof line)
        n = sizeof line - 1;
    memcpy(line, p, n);
    line[n] = '\0';
    return line;
}

/* Runs a python3 assertion over the JSON report at path (r = the parsed report). */
static void expect_json(const char *path, const char *assertion)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 -c \"import json; r=json.load(open('%s')); R=r['results']; %s\"", path,
             assertion);
    if (run("%s", cmd) != 0)
        fail_msg("JSON assertion failed: %s\n%s", assertion, out);
}

/* ---- a: broken ports are caught by the right scenario, tensor, verdict and diagnosis ------------ */

static void test_import_transposed_fails_cache_roundtrip_only(void **state)
{
    (void)state;
    const char *c = write_case("rt.yaml", "gate-rt", NULL,
                               "  prefill: {}\n  decode: {prefill: 5}\n  chunked: {splits: [[3, 11, 17]]}\n"
                               "  speculative_verify: {prefill: 6, len: 5, accept: 2}\n"
                               "  first_token_causality: {prefill: 8, len: 8, seed: 3}\n"
                               "  cache_roundtrip: {splits: [5, 13]}\n");
    expect_exit(1, "MC run %s --plugin %s --backend gate_import_transposed -j 2", c, GATE);
    const char *passing[] = {"prefill", "decode", "chunked", "speculative_verify", "first_token_causality"};
    for (size_t i = 0; i < sizeof passing / sizeof passing[0]; i++)
        expect_status(passing[i], "gate_import_transposed", "PASS", NULL);
    expect_status("cache_roundtrip", "gate_import_transposed", "FAIL", "conv_state (all runs):",
                  "first failing run: export and import at the splits [5, 13]\n        conv_state: ", NULL);
    expect_text("6 check(s): 5 passed, 1 failed");
}

static void test_nondet_is_nondeterministic_not_a_distractor_failure(void **state)
{
    (void)state;
    /* the bundled case's first_token_causality: the verdict says what is wrong, not "distractor" */
    expect_exit(1, "MC run cases/mamba2/tiny.yaml --plugin %s --backend gate_nondet --scenario first_token_causality "
                   "-j 2 --json %s/nd1.json",
                GATE, dir);
    expect_status("first_token_causality", "gate_nondet", "NONDET", "the backend is nondeterministic", "determinism:",
                  NULL);
    expect_no_text("distractor:");
    expect_text("1 nondeterministic");
    /* and the determinism scenario */
    const char *c = write_case("nd.yaml", "gate-nd", NULL, "  prefill: {}\n  determinism: {prefill: 7}\n");
    char json[600];
    snprintf(json, sizeof json, "%s/nd2.json", dir);
    expect_exit(1, "MC run %s --plugin %s --backend gate_nondet -j 2 --json %s", c, GATE, json);
    expect_status("prefill", "gate_nondet", "PASS", NULL);
    expect_status("determinism", "gate_nondet", "NONDET", "determinism", NULL);
    expect_json(json, "d=[x for x in R if x['scenario']=='determinism' and x['tensor']=='determinism']; "
                      "assert d and d[0]['status']=='nondeterministic', d; "
                      "assert r['summary']['nondeterministic']==1 and r['summary']['exit_code']==1, r['summary']");
}

static void test_alias_copy_fails_the_snapshot(void **state)
{
    (void)state;
    char json[600];
    snprintf(json, sizeof json, "%s/alias.json", dir);
    expect_exit(1, "MC run cases/mamba2/tiny.yaml --plugin %s --backend gate_alias_copy --scenario speculative_verify "
                   "-j 2 --json %s",
                GATE, json);
    expect_status("speculative_verify", "gate_alias_copy", "FAIL", "snapshot (all runs):", "cache_copy shares storage",
                  "first failing run: the snapshot after the verify forward on its copy (token) [6]\n"
                  "        snapshot: ",
                  NULL);
    expect_json(json, "s=[x for x in R if x['tensor']=='snapshot']; assert s and s[0]['status']=='fail', s; "
                      "assert s[0]['first_failing_run']['run'].startswith('the snapshot'), s");
    /* two runs on aliased copies differ: that is the copy, not nondeterminism */
    const char *c = write_case("alias.yaml", "gate-alias", NULL,
                               "  first_token_causality: {prefill: 8, len: 8, seed: 3}\n  determinism: {prefill: 7}\n");
    expect_exit(1, "MC run %s --plugin %s --backend gate_alias_copy -j 2", c, GATE);
    expect_status("first_token_causality", "gate_alias_copy", "FAIL", "snapshot", NULL);
    expect_status("determinism", "gate_alias_copy", "FAIL", "snapshot", NULL);
    expect_no_text("NONDET");
}

static void test_chunk_wrong_names_the_chunk_size(void **state)
{
    (void)state;
    char json[600];
    snprintf(json, sizeof json, "%s/chunk.json", dir);
    const char *c = write_case("chunk.yaml", "gate-chunk", NULL,
                               "  prefill: {}\n  chunked: {splits: [[3, 11, 17], [8]]}\n"
                               "  chunk_size_invariance: {chunk_sizes: [1, 8, 5, 16]}\n");
    expect_exit(1, "MC run %s --plugin %s --backend gate_chunk_wrong -j 2 --json %s", c, GATE, json);
    expect_status("prefill", "gate_chunk_wrong", "PASS", NULL);
    expect_status("chunked", "gate_chunk_wrong", "PASS", NULL);
    expect_status("chunk_size_invariance", "gate_chunk_wrong", "FAIL", "first failing run: chunk_size [5]\n", NULL);
    /* the run's own tensor line follows, with its own first failing token */
    const char *own = first_failing_run_line(check_block("chunk_size_invariance", "gate_chunk_wrong", NULL),
                                             "chunk_size [5]");
    if (strncmp(own, "        output: ", 16) != 0 || strstr(own, "first failing token 0 (batch 0)") == NULL)
        fail_msg("first failing run line: '%s'\n%s", own, out);
    expect_json(json, "f=[x for x in R if 'first_failing_run' in x]; assert len(f)==1, f; "
                      "f=f[0]['first_failing_run']; assert f['run']=='chunk_size [5]' and f['first_fail_token']==0, f");
}

static void test_first_failing_run_has_its_own_first_token(void **state)
{
    (void)state;
    /* history-less continuation: each split set fails from its first split point on; the first set
     * fails at 8, the second at 3, so the pooled first failing token (3) is not the first run's */
    char json[600];
    snprintf(json, sizeof json, "%s/hl.json", dir);
    const char *c = write_case("hl.yaml", "gate-hl", NULL, "  chunked: {splits: [[8], [3]]}\n");
    expect_exit(1, "MC run %s --plugin %s --backend gate_history_less -j 2 --json %s", c, GATE, json);
    expect_status("chunked", "gate_history_less", "FAIL", "output (all runs): ", NULL);
    const char *b = check_block("chunked", "gate_history_less", NULL);
    const char *pooled = strstr(b, "output (all runs): ");
    const char *eol = strchr(pooled, '\n');
    const char *tok3 = strstr(pooled, "first failing token 3 (batch 0)");
    if (tok3 == NULL || tok3 > eol)
        fail_msg("pooled output line without first failing token 3:\n%s", b);
    const char *own = first_failing_run_line(b, "splits [8]");
    if (strncmp(own, "        output: ", 16) != 0 || strstr(own, "first failing token 8 (batch 0)") == NULL)
        fail_msg("first failing run line: '%s'\n%s", own, b);
    expect_json(json, "o=[x for x in R if x['tensor']=='output'][0]; assert o['first_fail_token']==3, o; "
                      "f=o['first_failing_run']; assert f['run']=='splits [8]' and f['first_fail_token']==8, f");
}

/* ---- b: no silent pass ------------------------------------------------------------------------------ */

static void test_plugin_backend_runs_on_every_case_of_its_family(void **state)
{
    (void)state;
    glob_t gl;
    if (glob(MC_SOURCE_DIR "/cases/shortconv/*.yaml", 0, NULL, &gl) != 0)
        skip();
    size_t n_cases = gl.gl_pathc;
    globfree(&gl);
    /* no --backend: the plugin's backend joins every case; the reference at f32 runs the same checks
     * (neither has an internal chunk length), so each of its checks has an example twin */
    expect_exit(0, "MC run cases/shortconv --plugin %s -k /example/ -k /reference/f32 -j 2", MC_EXAMPLE_PLUGIN);
    char seen[64][128];
    size_t n_seen = 0;
    int n_ref = 0, n_example = 0;
    for (const char *l = out; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l)) {
        char word[16], cid[128], scen[64], be[128], dt[8];
        if (sscanf(l, "%15s %127s %63s %127s %7s", word, cid, scen, be, dt) != 5 || strcmp(word, "PASS") != 0)
            continue;
        if (strcmp(be, "reference") == 0) {
            n_ref++;
            char twin[512];
            snprintf(twin, sizeof twin, "%s/%s", cid, scen);
            /* the example has no packed call: its serving checks are UNSUP (with the reason), never PASS */
            int packed = strcmp(scen, "packed_prefill") == 0 || strcmp(scen, "slot_pool") == 0 ||
                         strcmp(scen, "mixed_step") == 0 || strcmp(scen, "prefix_resume") == 0;
            n_ref -= packed;
            int found = 0;
            for (const char *m = out; *m && !found; m = strchr(m, '\n') ? strchr(m, '\n') + 1 : m + strlen(m)) {
                char w2[16], c2[128], s2[64], b2[128], d2[8];
                found = sscanf(m, "%15s %127s %63s %127s %7s", w2, c2, s2, b2, d2) == 5 &&
                        strcmp(w2, packed ? "UNSUP" : "PASS") == 0 && strcmp(c2, cid) == 0 && strcmp(s2, scen) == 0 &&
                        strcmp(b2, "example") == 0;
            }
            if (!found)
                fail_msg("no example check for %s in:\n%s", twin, out);
        } else if (strcmp(be, "example") == 0) {
            n_example++;
            int known = 0;
            for (size_t i = 0; i < n_seen && !known; i++)
                known = strcmp(seen[i], cid) == 0;
            if (!known && n_seen < 64)
                snprintf(seen[n_seen++], sizeof seen[0], "%s", cid);
        }
    }
    assert_true(n_example > 0);
    assert_int_equal(n_example, n_ref);
    if (n_seen != n_cases)
        fail_msg("example ran on %zu of %zu shortconv cases:\n%s", n_seen, n_cases, out);
}

static void test_plugin_that_runs_nothing_is_named(void **state)
{
    (void)state;
    expect_exit(2, "MC run cases/mamba2/tiny.yaml --plugin %s --family mamba2 --scenario prefill --dtype f32 -j 2",
                MC_EXAMPLE_PLUGIN);
    expect_text("plugin " MC_EXAMPLE_PLUGIN ": none of its backends ran a check");
}

static void test_k_pattern_that_matches_nothing_is_named(void **state)
{
    (void)state;
    expect_exit(2, "MC run cases/mamba2/tiny.yaml -k nosuchpattern");
    expect_text("nosuchpattern");
    /* one pattern matching, one not: the checks of the first run, the second is named */
    expect_exit(2, "MC run cases/mamba2/tiny.yaml -k nosuchpattern -k tiny/prefill/reference/f32 -j 2");
    expect_status("prefill", "reference", "PASS", NULL);
    expect_text("-k 'nosuchpattern' matched no check");
}

static void test_case_file_that_runs_nothing_is_named(void **state)
{
    (void)state;
    expect_exit(2, "MC run cases/mamba2/tiny.yaml cases/shortconv/tiny.yaml --family mamba2 --scenario prefill "
                   "--dtype f32 -j 2");
    expect_text("cases/shortconv/tiny.yaml: no check of it ran");
}

static void test_unwritable_report_exits_2_even_when_all_passed(void **state)
{
    (void)state;
    expect_exit(2, "MC run cases/mamba2/tiny.yaml --scenario prefill --dtype f32 -j 2 --json /nonexistent-dir/r.json");
    expect_text("2 passed, 0 failed");
    expect_text("--json");
    expect_exit(2, "MC run cases/mamba2/tiny.yaml --scenario prefill --dtype f32 -j 2 --junit /nonexistent-dir/r.xml");
    expect_text("--junit");
}

static void test_unknown_backend_or_scenario_lists_the_known_ones(void **state)
{
    (void)state;
    expect_exit(2, "MC run cases/mamba2/tiny.yaml --backend cpuu");
    expect_text("unknown backend 'cpuu'");
    expect_text("known: reference, cpu");
    expect_exit(2, "MC run cases/mamba2/tiny.yaml --scenario prefil");
    expect_text("unknown scenario 'prefil'");
    expect_text("known: prefill, decode, chunked");
    expect_text("determinism");
}

static void test_bisect_skips_only_a_plugin_that_cannot_load(void **state)
{
    (void)state;
    expect_exit(2, "MC run cases/mamba2/tiny.yaml --backend cpuu --bisect");
    expect_exit(125, "MC run cases/mamba2/tiny.yaml --plugin /no/such.so --bisect");
}

/* ---- c: devices and tolerances ---------------------------------------------------------------------- */

static void test_own_device_needs_tolerances(void **state)
{
    (void)state;
    const char *c = write_case("own.yaml", "gate-own", NULL, "  prefill: {}\n  decode: {prefill: 5}\n");
    expect_exit(2, "MC run %s --plugin %s --backend gate_ownport -j 2", c, GATE);
    expect_text("no tolerances for device 'myport'");
    expect_text("--tolerance");
    expect_text("--device-profile myport=cpu");
    /* against cpu's numbers */
    char json[600];
    snprintf(json, sizeof json, "%s/own1.json", dir);
    expect_exit(0, "MC run %s --plugin %s --backend gate_ownport -j 2 --device-profile myport=cpu --json %s", c, GATE,
                json);
    expect_status("prefill", "gate_ownport", "PASS", NULL);
    expect_json(json, "assert R and all(x['device']=='myport' and x['tolerance_device']=='cpu' and "
                      "x['tolerance_profile']=='" TOL "' for x in R), R[0]");
    /* against a profile of its own */
    const char *prof = write_profile("myport.yaml", "myport");
    snprintf(json, sizeof json, "%s/own2.json", dir);
    expect_exit(0, "MC run %s --plugin %s --backend gate_ownport -j 2 --tolerance %s --json %s", c, GATE, prof, json);
    expect_status("decode", "gate_ownport", "PASS", NULL);
    char assertion[1024];
    snprintf(assertion, sizeof assertion,
             "assert R and all(x['tolerance_device']=='myport' and x['tolerance_profile']=='%s' for x in R), R[0]",
             prof);
    expect_json(json, assertion);
}

/* ---- d: small things -------------------------------------------------------------------------------- */

static void test_rerun_command_reproduces_the_failure(void **state)
{
    (void)state;
    const char *c = write_case("rerun.yaml", "gate-rerun", NULL,
                               "  prefill: {}\n  chunk_size_invariance: {chunk_sizes: [8, 5]}\n");
    const char *prof = write_profile("cpu.yaml", "cpu");
    expect_exit(1, "MC run %s --plugin %s --backend gate_chunk_wrong -j 2 --seeds 2 --tolerance %s", c, GATE, prof);
    const char *b = check_block("chunk_size_invariance", "gate_chunk_wrong", NULL);
    assert_non_null(b);
    const char *r = strstr(b, "rerun: ");
    assert_non_null(r);
    char rerun[2048];
    r += strlen("rerun: ");
    size_t n = strcspn(r, "\n");
    assert_true(n < sizeof rerun);
    memcpy(rerun, r, n);
    rerun[n] = '\0';
    char want[700];
    snprintf(want, sizeof want, "--plugin %s", GATE);
    if (strstr(rerun, want) == NULL || strstr(rerun, "--seeds 2") == NULL)
        fail_msg("rerun without the plugin or the seeds: %s", rerun);
    snprintf(want, sizeof want, "--tolerance %s", prof);
    if (strstr(rerun, want) == NULL)
        fail_msg("rerun without the tolerance: %s", rerun);
    if (strncmp(rerun, "mixcheck run ", 13) != 0)
        fail_msg("rerun does not start with 'mixcheck run': %s", rerun);
    /* pasted into a shell with mixcheck on the PATH: the same failure, on its own */
    char bindir[600];
    snprintf(bindir, sizeof bindir, "%s", mixcheck);
    *strrchr(bindir, '/') = '\0';
    char script[600];
    snprintf(script, sizeof script, "%s/rerun.sh", dir);
    FILE *f = fopen(script, "w");
    assert_non_null(f);
    fprintf(f, "%s\n", rerun);
    fclose(f);
    expect_exit(1, "cd /tmp && PATH='%s':\"$PATH\" sh %s", bindir, script);
    expect_status("chunk_size_invariance", "gate_chunk_wrong", "FAIL", "chunk_size [5]", NULL);
    expect_text("1 check(s): 0 passed, 1 failed");
}

static void test_run_and_list_have_their_own_help(void **state)
{
    (void)state;
    static char run_help[sizeof out];
    expect_exit(0, "MC run --help");
    memcpy(run_help, out, sizeof out);
    expect_text("usage: mixcheck run");
    expect_text("--tolerance");
    expect_text("--device-profile");
    expect_text("--bisect");
    expect_exit(0, "MC list --help");
    expect_text("usage: mixcheck list");
    expect_text("--coverage");
    expect_no_text("--tolerance");
    assert_string_not_equal(run_help, out);
}

static void test_crashed_check_has_no_headroom(void **state)
{
    (void)state;
    const char *c = write_case("crash.yaml", "gate-crash", NULL, "  prefill: {}\n");
    /* under ASan a SIGSEGV would be caught and turned into exit 1: let it kill the process */
    expect_exit(1, "ASAN_OPTIONS=handle_segv=0:detect_leaks=0 %s run %s --plugin %s --backend robust_segv -j 2",
                mixcheck, c, MC_ROBUST_PLUGIN);
    expect_status("prefill", "robust_segv", "ERROR", "crashed: signal 11", NULL);
    const char *b = check_block("prefill", "robust_segv", NULL);
    const char *eol = strchr(b, '\n');
    const char *h = strstr(b, "headroom");
    if (h != NULL && (eol == NULL || h < eol))
        fail_msg("headroom on an ERROR line:\n%s", b);
}

static void test_k_reads_only_the_selected_goldens(void **state)
{
    (void)state;
    char sub[600], cmd[700];
    snprintf(sub, sizeof sub, "%s/kdir", dir);
    snprintf(cmd, sizeof cmd, "mkdir -p %s", sub);
    assert_int_equal(system(cmd), 0);
    write_case("kdir/good.yaml", "gate-kgood", NULL, "  prefill: {}\n");
    write_case("kdir/missing.yaml", "gate-kmissing", "/nonexistent-dir/none.h5", "  prefill: {}\n");
    expect_exit(0, "MC run %s -k gate-kgood/prefill -j 2", sub);
    expect_status("prefill", "reference", "PASS", NULL);
    expect_no_text("none.h5");
    /* the golden is read once the case is selected: the error is real */
    expect_exit(2, "MC run %s -k gate-kmissing -j 2", sub);
    expect_text("none.h5");
}

static void test_reduced_precision_first_token_keeps_every_tensor(void **state)
{
    (void)state;
    /* f16/bf16 first_token_causality compares the golden's tensors, their ref_* twins and the
     * scenario's own: none may be dropped for want of room (the distractor is the point of it) */
    char json[600];
    snprintf(json, sizeof json, "%s/bf16.json", dir);
    expect_exit(0, "MC run cases/mamba2/tiny.yaml --scenario first_token_causality --backend cpu --dtype bf16 -j 2 "
                   "--json %s",
                json);
    expect_json(json, "t={x['tensor'] for x in R}; assert {'distractor','consistency','ref_output','output'} <= t, t");
}

static int setup(void **state)
{
    (void)state;
    const char *bin = getenv("MIXCHECK_BIN");
    if (bin && *bin)
        mixcheck = bin;
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
        cmocka_unit_test(test_import_transposed_fails_cache_roundtrip_only),
        cmocka_unit_test(test_nondet_is_nondeterministic_not_a_distractor_failure),
        cmocka_unit_test(test_alias_copy_fails_the_snapshot),
        cmocka_unit_test(test_chunk_wrong_names_the_chunk_size),
        cmocka_unit_test(test_first_failing_run_has_its_own_first_token),
        cmocka_unit_test(test_plugin_backend_runs_on_every_case_of_its_family),
        cmocka_unit_test(test_plugin_that_runs_nothing_is_named),
        cmocka_unit_test(test_k_pattern_that_matches_nothing_is_named),
        cmocka_unit_test(test_case_file_that_runs_nothing_is_named),
        cmocka_unit_test(test_unwritable_report_exits_2_even_when_all_passed),
        cmocka_unit_test(test_unknown_backend_or_scenario_lists_the_known_ones),
        cmocka_unit_test(test_bisect_skips_only_a_plugin_that_cannot_load),
        cmocka_unit_test(test_own_device_needs_tolerances),
        cmocka_unit_test(test_rerun_command_reproduces_the_failure),
        cmocka_unit_test(test_run_and_list_have_their_own_help),
        cmocka_unit_test(test_crashed_check_has_no_headroom),
        cmocka_unit_test(test_k_reads_only_the_selected_goldens),
        cmocka_unit_test(test_reduced_precision_first_token_keeps_every_tensor),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
