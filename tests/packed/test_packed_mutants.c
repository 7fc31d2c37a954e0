/*
 * test_packed_mutants.c — the packed-call mutants (packed_mutants.c) through the CLI on every family's tiny
 * case,
 *     mixcheck run cases/<family>/tiny.yaml --plugin libmc_packed_mutants.so --backend <mutant> --dtype f32 -k <scenario>
 * each must exit 1 with the scenario meant for it failing on the named tensor (read from the JSON
 * report); the correct packed call (control.packed) and the reference must pass all four serving
 * scenarios (exit 0); a backend without forward_packed gets every serving check `unsupported` with its
 * message. Also the golden checks of the serving scenarios: a golden without a state position inside
 * the sequence is refused (exit 2), and one that holds few positions (m130m: 0, 16, 32) is cut there.
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

static const char *const families[] = {"mamba2", "mamba1", "gdn", "shortconv"};
static const char *const serving[] = {"packed_prefill", "slot_pool", "mixed_step", "prefix_resume"};

/* Each mutant, the scenario meant to catch it and the tensor that must fail there, on the case
 * cases/<family>/<file> for the families it applies to (NULL: all four). S2.1 and S2.2 are bugs of a
 * chunked scan over the packed axis (Mamba2 SSD and GDN; S2.2's initial-state decay is Mamba2's);
 * S2.9 and S2.10 need the long runs of cases/long/ (named on the command line, so no --long). */
static const char *const chunked[] = {"mamba2", "gdn", NULL};
static const char *const mamba2_only[] = {"mamba2", NULL};
static const struct {
    const char *backend, *scenario, *tensor, *file;
    const char *const *only;
} kills[] = {
    {"mutant.S2.1-chunk-grid", "packed_prefill", "recurrent_state", "tiny.yaml", chunked},
    {"mutant.S2.2-decay-from-chunk-start", "packed_prefill", "output", "tiny.yaml", mamba2_only},
    {"mutant.S2.3-state-leak", "packed_prefill", "output", "tiny.yaml", NULL},
    {"mutant.S2.4-initial-state-ignored", "slot_pool", "output", "tiny.yaml", NULL},
    {"mutant.S2.5-wrong-slot", "slot_pool", "untouched", "tiny.yaml", NULL},
    {"mutant.S2.6-one-token-prefill-decode", "mixed_step", "output", "tiny.yaml", NULL},
    {"mutant.S2.7-stale-column", "speculative_verify", "consistency", "tiny.yaml", NULL},
    {"mutant.S2.7-accept-clamped", "speculative_verify", "consistency", "tiny.yaml", NULL},
    {"mutant.S2.8-prefix-off-grid", "prefix_resume", "conv_state", "tiny.yaml", NULL},
    {"mutant.S2.9-bf16-state", "long_decode", "output", "../long/%s.yaml", NULL},
    {"mutant.S2.10-tail-skipped", "length_sweep", "output", "../long/%s.yaml", NULL},
};

static int applies(size_t m, const char *family)
{
    if (kills[m].only == NULL)
        return 1;
    for (const char *const *f = kills[m].only; *f != NULL; f++)
        if (strcmp(*f, family) == 0)
            return 1;
    return 0;
}

static char dir[] = "/tmp/mixcheck-packed-XXXXXX";
static char out[1 << 20];

static int run(const char *cmd)
{
    return mc_capture(cmd, out, sizeof out);
}

/* The CLI on `path` for backend (a plugin one unless "reference") and scenario pattern `k`; returns its
 * exit status; the console output is kept in `console`. */
static char console[1 << 20];
static int run_cli(const char *path, const char *backend, const char *k, int json)
{
    char cmd[4096];
    int builtin = strcmp(backend, "reference") == 0;
    snprintf(cmd, sizeof cmd, MC_BINARY_DIR "/mixcheck run %s %s --backend %s --dtype f32 %s%s -q --no-experiments --color never %s%s%s",
             path, builtin ? "" : "--plugin " MC_PACKED_MUTANTS, backend, k ? "-k " : "", k ? k : "",
             json ? "--json " : "", json ? dir : "", json ? "/r.json" : "");
    int rc = run(cmd);
    memcpy(console, out, sizeof console);
    return rc;
}

/* Status of (scenario, tensor) in the JSON report, or NULL when absent. */
static const char *status_of(const char *scenario, const char *tensor)
{
    static char st[32];
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c 'import json, sys\n"
             "for x in json.load(open(sys.argv[1]))[\"results\"]:\n"
             "    if x[\"scenario\"] == sys.argv[2] and (x[\"tensor\"] or \"-\") == sys.argv[3]: print(x[\"status\"])' "
             "%s/r.json %s %s",
             dir, scenario, tensor);
    if (run(cmd) != 0 || out[0] == '\0')
        return NULL;
    snprintf(st, sizeof st, "%.*s", (int)strcspn(out, "\n"), out);
    return st;
}

static void test_mutants_caught(void **state)
{
    (void)state;
    char path[256];
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
        for (size_t m = 0; m < sizeof kills / sizeof kills[0]; m++) {
            char file[64];
            if (!applies(m, families[f]))
                continue;
            snprintf(file, sizeof file, kills[m].file, families[f]);
            snprintf(path, sizeof path, "cases/%s/%s", families[f], file);
            int rc = run_cli(path, kills[m].backend, kills[m].scenario, 1);
            if (rc != 1)
                fail_msg("%s on %s, %s: exit %d, expected 1:\n%s", kills[m].backend, path, kills[m].scenario, rc,
                         console);
            if (strstr(console, kills[m].tensor) == NULL)
                fail_msg("%s on %s: the diagnosis does not name '%s':\n%s", kills[m].backend, path, kills[m].tensor,
                         console);
            const char *st = status_of(kills[m].scenario, kills[m].tensor);
            if (st == NULL || strcmp(st, "fail") != 0)
                fail_msg("%s on %s: %s/%s is %s, expected fail:\n%s", kills[m].backend, path, kills[m].scenario,
                         kills[m].tensor, st ? st : "absent", console);
            printf("%-10s %-38s caught by %s -> %s\n", families[f], kills[m].backend, kills[m].scenario,
                   kills[m].tensor);
        }
    }
}

/* The model level (docs/models.md §3 packed_prefill): each packed-call mutant in every layer of its family
 * in the whole stacks of cases/models, through the three packed calls of the scenario. The mutant must
 * fail the model's packed_prefill (exit 1) with its logits failing, the layers named as where the
 * stack leaves the golden, on the serving path; the correct packed call passes on every model. S2.2 is a
 * Mamba2 bug: it has no effect on a stack without Mamba2 layers. */
static void test_model_level(void **state)
{
    (void)state;
    static const struct {
        const char *model, *family; /* the case, and the family of its layers the mutant replaces first */
    } models[] = {
#ifdef MC_PACKED_QUICK /* the sanitizer build (CMakeLists.txt) */
        {"mamba2", "mamba2"}, {"lfm2", "shortconv"}};
#else
        {"mamba2", "mamba2"}, {"mamba", "mamba1"}, {"lfm2", "shortconv"}, {"bamba", "mamba2"}, {"qwen3_5", "gdn"}};
#endif
    static const char *const mutants[] = {"mutant.S2.1-chunk-grid", "mutant.S2.2-decay-from-chunk-start",
                                          "mutant.S2.3-state-leak", "mutant.S2.4-initial-state-ignored",
                                          "mutant.S2.5-wrong-slot", "mutant.S2.6-one-token-prefill-decode"};
    char path[256];
    for (size_t c = 0; c < sizeof models / sizeof models[0]; c++) {
        snprintf(path, sizeof path, "cases/models/%s.yaml", models[c].model);
        int rc = run_cli(path, "control.packed", "packed_prefill", 0);
        if (rc != 0)
            fail_msg("control.packed on %s: exit %d:\n%s", path, rc, console);
        for (size_t m = 0; m < sizeof mutants / sizeof mutants[0]; m++) {
            int chunked_only = m <= 1, m2_only = m == 1;
            int applies = (!chunked_only || strcmp(models[c].family, "mamba2") == 0 || strcmp(models[c].family, "gdn") == 0) &&
                          (!m2_only || strcmp(models[c].family, "mamba2") == 0);
            rc = run_cli(path, mutants[m], "packed_prefill", 1);
            if (!applies) { /* the mixer-level kill matrix does not claim it for this family: report what happens */
                if (rc != 0 && rc != 1)
                    fail_msg("%s on %s: exit %d:\n%s", mutants[m], path, rc, console);
                printf("%-8s %-38s %s (%s layers: not claimed by the mixer-level matrix)\n", models[c].model, mutants[m],
                       rc ? "caught as well" : "passes", models[c].family);
                continue;
            }
            if (rc != 1)
                fail_msg("%s on %s: exit %d, expected 1:\n%s", mutants[m], path, rc, console);
            const char *st = status_of("packed_prefill", "logits");
            if (st == NULL || strcmp(st, "fail") != 0)
                fail_msg("%s on %s: packed_prefill/logits is %s, expected fail:\n%s", mutants[m], path,
                         st ? st : "absent", console);
            if (strstr(console, "first diverging layer") == NULL || strstr(console, "packed calls on the state pool") == NULL)
                fail_msg("%s on %s: the diagnosis does not name the layer on the serving path:\n%s", mutants[m], path,
                         console);
            printf("%-8s %-38s caught by packed_prefill -> logits, layer named\n", models[c].model, mutants[m]);
        }
    }
}

static void test_correct_packed_passes(void **state)
{
    (void)state;
    char path[256];
    const char *backends[] = {"control.packed", "reference"};
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
        snprintf(path, sizeof path, "cases/%s/tiny.yaml", families[f]);
        for (size_t b = 0; b < 2; b++) {
            for (size_t s = 0; s < sizeof serving / sizeof serving[0]; s++) {
                int rc = run_cli(path, backends[b], serving[s], 0);
                if (rc != 0)
                    fail_msg("%s on %s, %s: exit %d, expected 0:\n%s", backends[b], path, serving[s], rc, console);
            }
        }
    }
}

static void test_no_packed_call_unsupported(void **state)
{
    (void)state;
    char path[256];
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
        snprintf(path, sizeof path, "cases/%s/tiny.yaml", families[f]);
        for (size_t s = 0; s < sizeof serving / sizeof serving[0]; s++) {
            /* every check that ran was unsupported: 125, never a pass */
            int rc = run_cli(path, "control.no-packed", serving[s], 0);
            if (rc != 125 || strstr(console, "backend control.no-packed has no packed call (forward_packed)") == NULL ||
                strstr(console, "UNSUP") == NULL)
                fail_msg("control.no-packed on %s, %s: exit %d, expected 125 and the message:\n%s", path, serving[s],
                         rc, console);
        }
    }
}

/* Writes a one-scenario case on `golden` into dir/name and returns its path. */
static const char *write_case(const char *name, const char *family, const char *golden, const char *scenario)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fprintf(fp,
            "id: %s\nwhy: \"serving scenario against this golden\"\nfamily: %s\ngolden: %s/golden/%s\n"
            "tolerance: %s/cases/tolerances/%s.yaml\nbackends: [reference]\ndtypes: [f32]\nscenarios:\n  %s\n",
            family, family, MC_SOURCE_DIR, golden, MC_SOURCE_DIR, family, scenario);
    fclose(fp);
    return path;
}

static void test_golden_positions(void **state)
{
    (void)state;
    /* qwen3next holds states at 0 and 16 = L only: nothing to resume from inside the sequence */
    const char *p = write_case("q3n.yaml", "gdn", "gdn/qwen3next.h5", "packed_prefill: {sequences: 2}");
    int rc = run_cli(p, "reference", NULL, 0);
    if (rc != 2 || strstr(console, "needs a state position inside the sequence") == NULL)
        fail_msg("qwen3next packed_prefill: exit %d, expected 2 and the reason:\n%s", rc, console);
    p = write_case("q3n-mixed.yaml", "gdn", "gdn/qwen3next.h5", "mixed_step: {drafts: 2}");
    rc = run_cli(p, "reference", NULL, 0);
    if (rc != 2 || strstr(console, "to verify from") == NULL)
        fail_msg("qwen3next mixed_step: exit %d, expected 2 and the reason:\n%s", rc, console);
    /* a masked golden with padding: a packed call has no mask */
    p = write_case("lp.yaml", "mamba2", "mamba2/leftpad.h5", "slot_pool: {sequences: 2, pool: 8}");
    rc = run_cli(p, "reference", NULL, 0);
    if (rc != 2 || strstr(console, "a packed call has no mask") == NULL)
        fail_msg("leftpad slot_pool: exit %d, expected 2 and the reason:\n%s", rc, console);
    /* m130m holds 0, 16, 32: sequences are cut and resumed there (16 is inside the 256-token chunk) */
    p = write_case("m130m.yaml", "mamba2", "mamba2/m130m.h5", "packed_prefill: {sequences: 2, seed: 3}");
    rc = run_cli(p, "reference", NULL, 1);
    if (rc != 0)
        fail_msg("m130m packed_prefill: exit %d, expected 0:\n%s", rc, console);
    const char *st = status_of("packed_prefill", "recurrent_state");
    assert_non_null(st);
    assert_string_equal(st, "pass");
}

/* head_shard (S2.11): a configuration no shard can compute alone is unsupported with its reason (exit
 * 125, never a pass); one that can be split passes at f32, its caches compared slice by slice. */
static void test_head_shard(void **state)
{
    (void)state;
    static const struct {
        const char *name, *family, *golden, *reason;
        int rc;
    } runs[] = {
        {"hs-tiny.yaml", "mamba2", "mamba2/tiny.h5", "all-reduce of the variance", 125},
        {"hs-m1.yaml", "mamba1", "mamba1/tiny.h5", "x_proj computes dt, B and C from every channel", 125},
        {"hs-sc.yaml", "shortconv", "shortconv/tiny.h5", "channel count is its hidden size", 125},
        {"hs-next.yaml", "gdn", "gdn/next.h5", "qwen3_next", 125},
        {"hs-g2.yaml", "mamba2", "mamba2/groups2.h5", NULL, 0},
        {"hs-gdn.yaml", "gdn", "gdn/tiny.h5", NULL, 0},
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        const char *p = write_case(runs[i].name, runs[i].family, runs[i].golden, "head_shard: {shards: 2}");
        int rc = run_cli(p, "reference", NULL, 1);
        if (rc != runs[i].rc || (runs[i].reason && strstr(console, runs[i].reason) == NULL))
            fail_msg("head_shard on %s: exit %d, expected %d%s%s:\n%s", runs[i].golden, rc, runs[i].rc,
                     runs[i].reason ? " and " : "", runs[i].reason ? runs[i].reason : "", console);
        if (runs[i].rc == 0) {
            const char *st = status_of("head_shard", "recurrent_state");
            if (st == NULL || strcmp(st, "pass") != 0)
                fail_msg("head_shard on %s: recurrent_state %s, expected pass", runs[i].golden, st ? st : "absent");
        }
    }
}

/* S2.11: the Mamba2 reference with `repeat` for the head -> group mapping (groups_mutant.c) fails the
 * n_groups 2 golden's prefill on its output, and is the reference itself for n_groups 1. */
static void test_groups_mutant(void **state)
{
    (void)state;
    char cmd[4096];
    const char *fmt = MC_BINARY_DIR "/mixcheck run cases/mamba2/%s.yaml --plugin " MC_GROUPS_MUTANT
                                    " --backend mutant.S2.11-groups-repeat --dtype f32 -k /prefill/ -q --color never "
                                    "--json %s/r.json";
    snprintf(cmd, sizeof cmd, fmt, "groups2", dir);
    int rc = run(cmd);
    const char *st = status_of("prefill", "output");
    if (rc != 1 || st == NULL || strcmp(st, "fail") != 0)
        fail_msg("mutant.S2.11-groups-repeat on groups2: exit %d, prefill/output %s, expected 1 and fail:\n%s", rc,
                 st ? st : "absent", out);
    snprintf(cmd, sizeof cmd, fmt, "tiny", dir);
    rc = run(cmd);
    if (rc != 0)
        fail_msg("mutant.S2.11-groups-repeat on tiny (n_groups 1, no difference): exit %d, expected 0:\n%s", rc, out);
    printf("%-10s %-38s caught by %s -> %s\n", "mamba2", "mutant.S2.11-groups-repeat", "prefill (groups2)", "output");
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
    if (access("/usr/bin/python3", X_OK) != 0) {
        fprintf(stderr, "test_packed_mutants: /usr/bin/python3 is needed to read the JSON report\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mutants_caught),
        cmocka_unit_test(test_correct_packed_passes),
        cmocka_unit_test(test_model_level),
        cmocka_unit_test(test_no_packed_call_unsupported),
        cmocka_unit_test(test_golden_positions),
        cmocka_unit_test(test_head_shard),
        cmocka_unit_test(test_groups_mutant),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
