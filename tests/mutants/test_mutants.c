/*
 * test_mutants.c — the kill matrix: every mutant of the mutant library (mutants.c) runs through the CLI
 * on every bundled case of its family,
 *     mixcheck run cases/<family>/ --plugin libmc_mutants.so --backend mutant.<id> --dtype f32 --json r.json
 * and must be caught (exit 1) by the scenario meant to catch it, with the diagnosis on the right tensor
 * (and, where the bug leaves them right, the other tensors passing). The non-bug must pass every bf16
 * case of cases/mamba2/ (exit 0); the library's correct control and the real reference must pass
 * every bundled case of their family (sanity). Results are read from the JSON report's `results`
 * (flattened by /usr/bin/python3), one line per (case, scenario, tensor). Each mutant's row of the
 * matrix (scenario: cases caught / cases run) is printed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "capture.h"
#include "tmpdir.h"

#define MAX_TENSORS 4
#define MAX_CHECKS 4

/* In case `case_id`, scenario `scenario`: the tensors that must fail and those that must pass. */
struct check {
    const char *case_id;
    const char *scenario;
    const char *fail[MAX_TENSORS];
    const char *pass[MAX_TENSORS];
};

struct mutant {
    const char *family;
    const char *backend;
    struct check checks[MAX_CHECKS];
};

static const struct mutant mutants[] = {
    {"mamba2", "mutant.8.1a-dt-first-token",
     {{"mamba2-tiny", "chunked", {"output", "recurrent_state"}, {"conv_state"}},
      {"mamba2-tiny", "first_token_causality", {"recurrent_state"}, {"consistency", "distractor"}},
      {"mamba2-tiny", "prefill", {0}, {"output", "recurrent_state"}}}},
    {"mamba2", "mutant.8.1b-cache-advance-one",
     {{"mamba2-tiny", "chunked", {"conv_state", "recurrent_state"}, {0}},
      /* outputs right, cache as if one token was consumed */
      {"mamba2-tiny", "first_token_causality", {"conv_state", "recurrent_state"}, {"output", "consistency"}},
      {"mamba2-tiny", "prefill", {0}, {"output", "recurrent_state"}}}},
    {"mamba2", "mutant.8.1c-no-chaining",
     {/* row 0 is right: the upstream first-token test passes it; only the chunked equivalence catches it */
      {"mamba2-tiny", "first_token_causality", {0}, {"consistency", "distractor"}},
      {"mamba2-tiny", "chunked", {"output", "recurrent_state"}, {0}}}},
    {"mamba2", "mutant.8.2a-zero-conv-context",
     {{"mamba2-tiny", "first_token_causality", {"consistency"}, {"distractor"}},
      {"mamba2-tiny", "chunked", {"output"}, {0}},
      {"mamba2-tiny", "decode", {0}, {"output", "conv_state", "recurrent_state"}}}},
    {"gdn", "mutant.8.2a-zero-conv-context",
     {{"gdn-tiny", "first_token_causality", {"consistency"}, {"distractor"}},
      {"gdn-tiny", "chunked", {"output"}, {0}},
      {"gdn-tiny", "decode", {0}, {"output", "conv_state", "recurrent_state"}}}},
    {"mamba2", "mutant.8.2b-state-reset",
     {{"mamba2-tiny", "chunked", {"recurrent_state", "output"}, {"conv_state"}},
      {"mamba2-tiny", "first_token_causality", {"consistency"}, {"distractor"}},
      {"mamba2-tiny", "decode", {0}, {"output", "recurrent_state"}}}},
    {"gdn", "mutant.8.2b-state-reset",
     {{"gdn-tiny", "chunked", {"recurrent_state", "output"}, {"conv_state"}},
      {"gdn-tiny", "first_token_causality", {"consistency"}, {"distractor"}},
      {"gdn-tiny", "decode", {0}, {"output", "recurrent_state"}}}},
    {"mamba2", "mutant.8.3a-conv-first-l",
     {{"mamba2-tiny", "first_token_causality", {"consistency"}, {0}},
      {"mamba2-tiny", "chunked", {"output"}, {"conv_state"}},
      {"mamba2-tiny", "prefill", {0}, {"output", "conv_state", "recurrent_state"}}}},
    {"mamba2", "mutant.8.3b-conv-off-by-one",
     {{"mamba2-tiny", "first_token_causality", {"consistency"}, {0}},
      {"mamba2-tiny", "chunked", {"output"}, {"conv_state"}},
      {"mamba2-tiny", "prefill", {0}, {"output", "conv_state", "recurrent_state"}}}},
    {"mamba2", "mutant.8.3c-cache-post-act",
     {{"mamba2-tiny", "prefill", {"conv_state"}, {"output", "recurrent_state"}},
      {"mamba2-tiny", "decode", {"output", "conv_state"}, {0}}}},
    {"mamba2", "mutant.8.4-pad-unmasked-continued",
     {{"mamba2-leftpad", "left_padded_batch", {"recurrent_state", "output"}, {0}},
      {"mamba2-leftpad", "prefill", {0}, {"output", "conv_state", "recurrent_state"}},
      {"mamba2-tiny", "chunked", {0}, {"output", "conv_state", "recurrent_state"}}}},
    {"mamba2", "mutant.8.5-rightpad-leak",
     {{"mamba2-rightpad", "right_padded_batch", {"conv_state", "recurrent_state"}, {0}},
      {"mamba2-tiny", "chunked", {0}, {"output", "conv_state", "recurrent_state"}}}},
    {"mamba2", "mutant.8.6-mask-skipped-batch1",
     {{"mamba2-leftpad", "left_padded_batch", {"recurrent_state", "conv_state"}, {0}},
      {"mamba2-leftpad", "prefill", {0}, {"output", "conv_state", "recurrent_state"}}}},
    {"shortconv", "mutant.8.9-short-prefill-roll",
     {{"shortconv-k4", "decode", {"conv_state", "output"}, {0}},
      {"shortconv-k4", "prefill", {0}, {"output", "conv_state"}}}},
    {"mamba2", "mutant.8.10-no-dt-clamp-decode",
     {{"mamba2-dtlimit", "decode", {"output", "recurrent_state"}, {"conv_state"}},
      {"mamba2-dtlimit", "prefill", {0}, {"output", "recurrent_state"}},
      {"mamba2-tiny", "decode", {0}, {"output", "recurrent_state"}}}},
    {"mamba2", "mutant.8.11-norm-group-swap",
     {{"mamba2-groups2", "prefill", {"output"}, {"conv_state", "recurrent_state"}},
      {"mamba2-tiny", "prefill", {0}, {"output"}}}},
    {"mamba2", "mutant.8.12-chunk-pad-decay",
     {{"mamba2-ragged", "prefill", {"recurrent_state"}, {"output", "conv_state"}},
      {"mamba2-ragged", "chunk_size_invariance", {"recurrent_state"}, {"output"}},
      {"mamba2-tiny", "prefill", {0}, {"output", "recurrent_state"}}}},
    {"gdn", "mutant.8.12-chunk-pad-write",
     {{"gdn-tiny", "prefill", {"recurrent_state"}, {"output", "conv_state"}},
      {"gdn-tiny", "chunk_size_invariance", {"recurrent_state"}, {"output"}}}},
    {"mamba2", "mutant.8.13-group-mod",
     {{"mamba2-groups2", "prefill", {"output", "recurrent_state"}, {"conv_state"}},
      {"mamba2-tiny", "prefill", {0}, {"output", "recurrent_state"}}}},
    {"gdn", "mutant.8.13-key-head-mod",
     {{"gdn-tiny", "prefill", {"output", "recurrent_state"}, {"conv_state"}},
      {"gdn-odd", "prefill", {0}, {"output", "recurrent_state"}}}},
    {"mamba2", "mutant.future-leak", {{"mamba2-tiny", "first_token_causality", {"distractor"}, {0}}}},
    {"mamba2", "mutant.8.15-decode-no-d",
     {{"mamba2-tiny", "decode", {"output"}, {"conv_state"}}, {"mamba2-tiny", "prefill", {0}, {"output", "recurrent_state"}}}},
    {"mamba2", "mutant.8.19-export-rows-reversed",
     {{"mamba2-tiny", "prefill", {"conv_state", "recurrent_state"}, {"output"}},
      {"mamba2-tiny", "decode", {0}, {"output"}}}},
    {"shortconv", "mutant.8.20-import-no-window",
     {{"shortconv-tiny", "cache_roundtrip", {"output"}, {0}}, {"shortconv-tiny", "decode", {0}, {"output", "conv_state"}}}},
    {"gdn", "mutant.8.21-copy-no-state", {{"gdn-tiny", "determinism", {"output"}, {0}}}},
    {"gdn", "mutant.8.22-alloc-dirty-state",
     {{"gdn-tiny", "prefill", {"output", "recurrent_state"}, {0}}}},
    /* attention: RoPE is relative, so a uniform position shift leaves outputs right and the cached keys wrong */
    {"attention", "mutant.rope-pad-positions",
     {{"attention-leftpad", "left_padded_batch", {"recurrent_state"}, {"conv_state"}},
      {"attention-tiny", "prefill", {0}, {"output", "recurrent_state"}}}},
    {"attention", "mutant.rotary-all-dims",
     {{"attention-qwen3next", "prefill", {"output", "recurrent_state"}, {"conv_state"}},
      {"attention-tiny", "prefill", {0}, {"output", "recurrent_state"}}}},
    /* the appended attention options (GraniteMoeHybrid): a NoPE model rotated anyway, the score scale dropped */
    {"attention", "mutant.nope-rotated",
     {{"attention-nope", "prefill", {"output", "recurrent_state"}, {"conv_state"}},
      {"attention-tiny", "prefill", {0}, {"output", "recurrent_state"}}}},
    {"attention", "mutant.scale-default",
     {{"attention-nope", "prefill", {"output"}, {"recurrent_state", "conv_state"}},
      {"attention-tiny", "prefill", {0}, {"output", "recurrent_state"}}}},
    {"attention", "mutant.8.4-pad-unmasked-continued",
     {{"attention-leftpad", "left_padded_batch", {"conv_state", "recurrent_state", "output"}, {0}},
      {"attention-leftpad", "prefill", {0}, {"output", "conv_state", "recurrent_state"}},
      {"attention-tiny", "chunked", {0}, {"output", "conv_state", "recurrent_state"}}}},
    /* the MLA option (§12.8): a rotation on the wrong part, the latent norm, kv_b_proj's split, the scale */
    {"attention", "mutant.mla-rope-on-nope",
     {{"attention-mla", "prefill", {"output"}, {"recurrent_state", "conv_state"}},
      {"attention-mla_kimi", "prefill", {0}, {"output", "recurrent_state"}}}},
    {"attention", "mutant.mla-latent-norm-skipped",
     {{"attention-mla", "prefill", {"output", "recurrent_state"}, {"conv_state"}},
      {"attention-mla_kimi", "prefill", {"output", "recurrent_state"}, {"conv_state"}}}},
    {"attention", "mutant.mla-kv-split-swapped",
     {{"attention-mla_kimi", "prefill", {"output"}, {"recurrent_state", "conv_state"}},
      {"attention-tiny", "prefill", {0}, {"output", "recurrent_state"}}}},
    {"attention", "mutant.mla-scale-nope-dim",
     {{"attention-mla_kimi", "prefill", {"output"}, {"recurrent_state", "conv_state"}},
      {"attention-tiny", "prefill", {0}, {"output", "recurrent_state"}}}},
    {"attention", "mutant.8.13-kv-head-mod",
     {{"attention-qwen3next", "prefill", {"output"}, {"recurrent_state", "conv_state"}},
      {"attention-tiny", "prefill", {0}, {"output", "recurrent_state"}}}},
    /* lightning: a partial block (tiny: L 20 in blocks of 8; decode: blocks of 1) carries a state decayed too far;
     * odd's slopes (~1e-6, the last layer) make λ^Q and λ^b equal to rounding there: it passes */
    {"lightning", "mutant.lightning-block-boundary-decay",
     {{"lightning-tiny", "prefill", {"recurrent_state"}, {"conv_state"}},
      {"lightning-odd", "prefill", {0}, {"output", "recurrent_state"}},
      {"lightning-tiny", "chunked", {"output", "recurrent_state"}, {"conv_state"}},
      {"lightning-decay", "chunk_size_invariance", {"recurrent_state"}, {0}}}},
    {"lightning", "mutant.lightning-slope-order",
     {{"lightning-tiny", "prefill", {"output", "recurrent_state"}, {"conv_state"}}}},
    {"lightning", "mutant.8.2b-state-reset",
     {{"lightning-tiny", "chunked", {"recurrent_state", "output"}, {"conv_state"}},
      {"lightning-tiny", "first_token_causality", {"consistency"}, {"distractor"}},
      {"lightning-tiny", "decode", {0}, {"output", "recurrent_state"}}}},
    /* kda: the decay of every key channel taken from the head's first one */
    {"kda", "mutant.kda-gate-per-head",
     {{"kda-tiny", "prefill", {"output", "recurrent_state"}, {"conv_state"}},
      {"kda-decay", "prefill", {"output", "recurrent_state"}, {"conv_state"}}}},
    {"kda", "mutant.8.2a-zero-conv-context",
     {{"kda-tiny", "first_token_causality", {"consistency"}, {"distractor"}},
      {"kda-tiny", "chunked", {"output"}, {0}},
      {"kda-tiny", "decode", {0}, {"output", "conv_state", "recurrent_state"}}}},
    {"kda", "mutant.8.2b-state-reset",
     {{"kda-tiny", "chunked", {"recurrent_state", "output"}, {"conv_state"}},
      {"kda-tiny", "first_token_causality", {"consistency"}, {"distractor"}},
      {"kda-tiny", "decode", {0}, {"output", "recurrent_state"}}}},
};

static char dir[] = "/tmp/mixcheck-mutants-XXXXXX";
static char out[1 << 20];

/* Runs cmd (stderr folded in), output in `out`; returns the exit status or -1. */
static int run(const char *cmd)
{
    return mc_capture(cmd, out, sizeof out);
}

/* The report diagnose_hit_rate kept of the same run (hit_rate.py --keep: MC_MUTANT_REPORTS names the
 * folder), when there is one newer than both the mixcheck binary and the plugin: its path into `json`
 * and its exit status into *rc. The two tests make the same runs (the diagnosis's experiments run after
 * the checks and change no check's result), so the plain build makes them once; run alone, or when the
 * kept one is older than the build, the run is made here. */
static int kept_report(const char *path, const char *backend, const char *dtype, char *json, size_t len, int *rc)
{
    const char *keep = getenv("MC_MUTANT_REPORTS");
    if (keep == NULL || keep[0] == '\0')
        return 0;
    char name[1024], rcfile[1100];
    int n = snprintf(name, sizeof name, "%s@%s@%s", backend, path, dtype);
    if (n < 0 || (size_t)n >= sizeof name)
        return 0;
    for (char *c = name; *c; c++)
        if (*c == '/')
            *c = '_';
    snprintf(json, len, "%s/%s.json", keep, name);
    snprintf(rcfile, sizeof rcfile, "%s/%s.rc", keep, name);
    struct stat rep, bin, lib;
    if (stat(json, &rep) != 0 || stat(MC_BINARY_DIR "/mixcheck", &bin) != 0 || stat(MC_MUTANTS_PLUGIN, &lib) != 0 ||
        rep.st_mtime <= bin.st_mtime || rep.st_mtime <= lib.st_mtime)
        return 0;
    FILE *f = fopen(rcfile, "r");
    if (f == NULL)
        return 0;
    int ok = fscanf(f, "%d", rc) == 1;
    fclose(f);
    return ok;
}

/* Runs the CLI on `path` with backend/dtype (or takes diagnose_hit_rate's report of that run); the JSON
 * results, one "case\tscenario\ttensor\tstatus" line each, are left in `out`. Returns the CLI's exit status. */
static int run_cli(const char *path, const char *backend, const char *dtype)
{
    char cmd[4096], json[1200];
    int rc;
    if (!kept_report(path, backend, dtype, json, sizeof json, &rc)) {
        /* the library is loaded only for its own backends: a loaded plugin that runs nothing is an error */
        int builtin = strcmp(backend, "reference") == 0 || strcmp(backend, "cpu") == 0;
        snprintf(json, sizeof json, "%s/r.json", dir);
        snprintf(cmd, sizeof cmd,
                 MC_BINARY_DIR "/mixcheck run %s %s --backend %s --dtype %s -j 2 -q --no-experiments --color never --json %s",
                 path, builtin ? "" : "--plugin " MC_MUTANTS_PLUGIN, backend, dtype, json);
        rc = run(cmd);
        if (rc != 0 && rc != 1)
            fail_msg("%s: exit %d:\n%s", cmd, rc, out);
    }
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c 'import json, sys\n"
             "for x in json.load(open(sys.argv[1]))[\"results\"]:\n"
             "    print(x[\"case\"], x[\"scenario\"], x[\"tensor\"] or \"-\", x[\"status\"], sep=\"\\t\")' %s",
             json);
    if (run(cmd) != 0)
        fail_msg("cannot read the JSON report %s of %s on %s:\n%s", json, backend, path, out);
    return rc;
}

/* Status of one tensor of (case, scenario) in the flattened results, or NULL when absent. */
static const char *status_of(const char *case_id, const char *scenario, const char *tensor)
{
    static char st[32];
    char key[256];
    snprintf(key, sizeof key, "%s\t%s\t%s\t", case_id, scenario, tensor);
    for (const char *p = out; p != NULL && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, key, strlen(key)) != 0)
            continue;
        const char *s = p + strlen(key);
        size_t n = strcspn(s, "\n");
        snprintf(st, sizeof st, "%.*s", (int)(n < sizeof st ? n : sizeof st - 1), s);
        return st;
    }
    return NULL;
}

/* Prints the mutant's row of the kill matrix: per scenario, cases where some tensor failed / cases run. */
static void print_row(const char *backend)
{
    const char *scen[] = {"prefill", "decode", "chunked", "first_token_causality", "speculative_verify",
                          "left_padded_batch", "right_padded_batch", "chunk_size_invariance", "batch_invariance"};
    char line[1024];
    int used = snprintf(line, sizeof line, "%-36s", backend);
    for (size_t i = 0; i < sizeof scen / sizeof scen[0]; i++) {
        int ran = 0, caught = 0;
        char last[256] = "";
        int last_failed = 0;
        for (const char *p = out; p != NULL && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
            char c[128], s[64], t[64], st[32];
            if (sscanf(p, "%127[^\t]\t%63[^\t]\t%63[^\t]\t%31[^\n]", c, s, t, st) != 4 || strcmp(s, scen[i]) != 0)
                continue;
            if (strcmp(c, last) != 0) {
                caught += last_failed;
                last_failed = 0;
                ran++;
                snprintf(last, sizeof last, "%s", c);
            }
            last_failed |= strcmp(st, "pass") != 0;
        }
        caught += last_failed;
        if (ran > 0 && used < (int)sizeof line)
            used += snprintf(line + used, sizeof line - (size_t)used, " %s %d/%d", scen[i], caught, ran);
    }
    printf("%s\n", line);
}

/* The case files a mutant runs on: every bundled case of its family, or under MC_MUTANTS_QUICK (the
 * sanitizer build, where the full matrix costs minutes) only the cases its checks name — every
 * assertion below still runs; only the matrix row is shorter. Case ids are "<family>-<file>". */
static void mutant_paths(const struct mutant *m, char *path, size_t len)
{
#ifdef MC_MUTANTS_QUICK
    size_t used = 0;
    path[0] = '\0';
    for (int i = 0; i < MAX_CHECKS && m->checks[i].case_id != NULL; i++) {
        char one[256];
        snprintf(one, sizeof one, "cases/%s/%s.yaml", m->family, m->checks[i].case_id + strlen(m->family) + 1);
        if (strstr(path, one) == NULL && used < len)
            used += (size_t)snprintf(path + used, len - used, "%s%s", used ? " " : "", one);
    }
#else
    snprintf(path, len, "cases/%s/", m->family);
#endif
}

/* Where the non-bug and the controls run: the family's cases, or its tiny case under MC_MUTANTS_QUICK. */
#ifdef MC_MUTANTS_QUICK
#define CONTROL_PATH(family) "cases/" family "/tiny.yaml"
#else
#define CONTROL_PATH(family) "cases/" family "/"
#endif

static void test_mutant(void **state)
{
    const struct mutant *m = *state;
    char path[1024];
    mutant_paths(m, path, sizeof path);
    int rc = run_cli(path, m->backend, "f32");
    print_row(m->backend);
    if (rc != 1)
        fail_msg("%s (%s) was not caught: exit %d", m->backend, m->family, rc);
    for (int i = 0; i < MAX_CHECKS && m->checks[i].case_id != NULL; i++) {
        const struct check *c = &m->checks[i];
        for (int k = 0; k < MAX_TENSORS; k++) {
            const char *want[2] = {c->fail[k], c->pass[k]};
            for (int w = 0; w < 2; w++) {
                if (want[w] == NULL)
                    continue;
                const char *st = status_of(c->case_id, c->scenario, want[w]);
                const char *expect = w == 0 ? "fail" : "pass";
                if (st == NULL || strcmp(st, expect) != 0)
                    fail_msg("%s (%s): %s %s: tensor '%s' should %s, got %s", m->backend, m->family, c->case_id,
                             c->scenario, want[w], expect, st ? st : "no record");
            }
        }
    }
}

/* The non-bug passes every bundled Mamba2 case at bf16 (docs/semantics.md §A.8), and so do the fused ones. */
static void test_nonbug_passes(void **state)
{
    (void)state;
    const char *backends[] = {"nonbug.unfused-conv-act", "control.correct", "cpu"};
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++) {
        int rc = run_cli(CONTROL_PATH("mamba2"), backends[i], "bf16");
        print_row(backends[i]);
        if (rc != 0)
            fail_msg("%s at bf16 on cases/mamba2/: exit %d", backends[i], rc);
    }
}

/* The real reference and the library's own correct code pass every bundled case of each family. */
static void test_controls_pass(void **state)
{
    (void)state;
    const char *families[] = {"mamba2", "gdn", "shortconv", "attention", "lightning", "kda"};
    const char *backends[] = {"reference", "control.correct"};
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
        for (size_t b = 0; b < 2; b++) {
            char path[64];
            snprintf(path, sizeof path, CONTROL_PATH("%s"), families[f]);
            int rc = run_cli(path, backends[b], "f32");
            if (rc != 0)
                fail_msg("%s on %s at f32: exit %d", backends[b], path, rc);
        }
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
    enum { N = sizeof mutants / sizeof mutants[0] };
    struct CMUnitTest tests[N + 2];
    static char names[N][128];
    for (size_t i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "%s (%s)", mutants[i].backend, mutants[i].family);
        tests[i] = (struct CMUnitTest){names[i], test_mutant, NULL, NULL, (void *)&mutants[i]};
    }
    tests[N] = (struct CMUnitTest)cmocka_unit_test(test_nonbug_passes);
    tests[N + 1] = (struct CMUnitTest)cmocka_unit_test(test_controls_pass);
    return _cmocka_run_group_tests("mutants", tests, N + 2, setup, teardown);
}
