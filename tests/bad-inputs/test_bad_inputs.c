/*
 * test_bad_inputs.c — the bad-inputs corpus (tests/bad-inputs/expected.txt) driven through the CLI.
 *
 * For each entry `PATH | EXIT | MESSAGE`, runs `mixcheck run PATH` (yaml/...: in tests/bad-inputs;
 * h5/...: in a temporary directory where make_bad_goldens.py put the case and its malformed golden)
 * and checks: the exit status is EXIT; the output holds MESSAGE (its " ... "-separated parts in
 * order); it holds no sanitizer report (ASan, LSan, UBSan); and every input file — the corpus, the
 * generated goldens, the committed golden and profiles they point at — is byte-identical (SHA-256)
 * afterwards, with no file added or removed next to them. Every file under yaml/ and h5/ must have
 * exactly one entry, and there must be at least 40.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "capture.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "base/sha256.h"

#define CORPUS MC_SOURCE_DIR "/tests/bad-inputs"
#define MAX_ENTRIES 256
#define MAX_FILES 512
#define OUTPUT_CAP (256 * 1024)

struct entry {
    char path[256];
    int exit_code;
    char message[1024];
    int line;
};

struct file_sum {
    char path[512];
    char hex[MC_SHA256_HEX_LEN + 1];
};

static struct entry entries[MAX_ENTRIES];
static int n_entries;
static char tmpdir[64];
static struct file_sum sums[MAX_FILES];
static int n_sums;

/* ---- helpers ----------------------------------------------------------------------------------- */

static int file_sha256(const char *path, char hex[MC_SHA256_HEX_LEN + 1])
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return -1;
    struct mc_sha256 s;
    uint8_t d[MC_SHA256_DIGEST_BYTES];
    static unsigned char buf[1 << 16];
    size_t n;
    mc_sha256_init(&s);
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        mc_sha256_update(&s, buf, n);
    fclose(f);
    mc_sha256_final(&s, d);
    mc_sha256_hex(d, hex);
    return 0;
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r'))
        s[--n] = '\0';
    return s;
}

static void manifest_read(void)
{
    FILE *f = fopen(CORPUS "/expected.txt", "r");
    assert_non_null(f);
    char line[2048];
    int lineno = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        lineno++;
        char *s = trim(line);
        if (s[0] == '\0' || s[0] == '#')
            continue;
        char *bar1 = strchr(s, '|'), *bar2 = bar1 ? strchr(bar1 + 1, '|') : NULL;
        if (bar2 == NULL)
            fail_msg("expected.txt:%d: not 'PATH | EXIT | MESSAGE'", lineno);
        *bar1 = *bar2 = '\0';
        assert_true(n_entries < MAX_ENTRIES);
        struct entry *e = &entries[n_entries++];
        snprintf(e->path, sizeof e->path, "%s", trim(s));
        e->exit_code = atoi(trim(bar1 + 1));
        snprintf(e->message, sizeof e->message, "%s", trim(bar2 + 1));
        e->line = lineno;
        if (strncmp(e->path, "yaml/", 5) != 0 && strncmp(e->path, "h5/", 3) != 0)
            fail_msg("expected.txt:%d: PATH must start with yaml/ or h5/ (got %s)", lineno, e->path);
    }
    fclose(f);
}

/* Every *.yaml directly under dir (relative names prefixed with `prefix`) has exactly one entry. */
static void assert_covered(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        size_t n = strlen(de->d_name);
        if (n < 5 || strcmp(de->d_name + n - 5, ".yaml") != 0)
            continue;
        char rel[300];
        snprintf(rel, sizeof rel, "%s%s", prefix, de->d_name);
        int count = 0;
        for (int i = 0; i < n_entries; i++)
            count += strcmp(entries[i].path, rel) == 0;
        if (count != 1) {
            closedir(d);
            fail_msg("%s has %d entries in expected.txt (want exactly 1)", rel, count);
        }
    }
    closedir(d);
}

static void sum_add(const char *path)
{
    assert_true(n_sums < MAX_FILES);
    struct file_sum *s = &sums[n_sums++];
    snprintf(s->path, sizeof s->path, "%s", path);
    if (file_sha256(path, s->hex) != 0)
        fail_msg("cannot read input %s", path);
}

/* Every regular file directly under dir. */
static int sum_add_dir(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *de;
    int n = 0;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char p[512];
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        sum_add(p);
        n++;
    }
    closedir(d);
    return n;
}

static int dir_count(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *de;
    int n = 0;
    while ((de = readdir(d)) != NULL)
        n += de->d_name[0] != '.';
    closedir(d);
    return n;
}

static int n_yaml_files, n_h5_files;

/* 1 when input `path` belongs to the entry `entry_path` (same stem: yaml/x.yaml, h5/x.yaml, h5/x.h5)
 * or to no entry (the committed golden and profiles every entry may read). */
static int sum_concerns(const char *path, const char *entry_path)
{
    if (entry_path == NULL || (strstr(path, "/yaml/") == NULL && strstr(path, "/h5/") == NULL))
        return 1;
    const char *base = strrchr(path, '/') + 1, *ebase = strrchr(entry_path, '/') + 1;
    size_t stem = strlen(ebase) - 5; /* without ".yaml" */
    return strncmp(base, ebase, stem) == 0 && (strcmp(base + stem, ".yaml") == 0 || strcmp(base + stem, ".h5") == 0);
}

/* Fails when an input file of the entry (all of them when entry is NULL) changed, or the input
 * directories gained or lost a file. */
static void assert_inputs_unchanged(const char *entry)
{
    const char *after = entry ? entry : "every entry";
    for (int i = 0; i < n_sums; i++) {
        if (!sum_concerns(sums[i].path, entry))
            continue;
        char hex[MC_SHA256_HEX_LEN + 1];
        if (file_sha256(sums[i].path, hex) != 0)
            fail_msg("after %s: input %s is gone", after, sums[i].path);
        if (strcmp(hex, sums[i].hex) != 0)
            fail_msg("after %s: input %s was modified (sha256 %s, was %s)", after, sums[i].path, hex, sums[i].hex);
    }
    char h5dir[128];
    snprintf(h5dir, sizeof h5dir, "%s/h5", tmpdir);
    if (dir_count(CORPUS "/yaml") != n_yaml_files || dir_count(h5dir) != n_h5_files)
        fail_msg("after %s: a file was added to or removed from the input directories", after);
}

/* ---- setup ------------------------------------------------------------------------------------- */

static int group_setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/mc_bad_inputs_XXXXXX");
    if (mkdtemp(tmpdir) == NULL)
        return -1;
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/make_bad_goldens.py' '%s' '%s'", CORPUS, MC_SOURCE_DIR, tmpdir);
    if (system(cmd) != 0) {
        fprintf(stderr, "make_bad_goldens.py failed (needs /usr/bin/python3 with python3-h5py)\n");
        return -1;
    }
    char h5dir[128];
    snprintf(h5dir, sizeof h5dir, "%s/h5", tmpdir);
    n_yaml_files = sum_add_dir(CORPUS "/yaml");
    n_h5_files = sum_add_dir(h5dir);
    sum_add(CORPUS "/expected.txt");
    sum_add(MC_SOURCE_DIR "/golden/mamba2/tiny.h5");
    sum_add(MC_SOURCE_DIR "/cases/tolerances/mamba2.yaml");
    sum_add(MC_SOURCE_DIR "/cases/tolerances/gdn.yaml");
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

/* ---- tests ------------------------------------------------------------------------------------- */

/* The parts of `want` separated by " ... " occur in `out` in order. */
static int message_found(const char *out, const char *want)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", want);
    const char *at = out;
    char *part = buf;
    for (;;) {
        char *sep = strstr(part, " ... ");
        if (sep != NULL)
            *sep = '\0';
        const char *hit = strstr(at, part);
        if (hit == NULL)
            return 0;
        at = hit + strlen(part);
        if (sep == NULL)
            return 1;
        part = sep + 5;
    }
}

static void test_entry(void **state)
{
    const struct entry *e = *state;
    char root[256], cmd[1024];
    if (strncmp(e->path, "h5/", 3) == 0)
        snprintf(root, sizeof root, "%s", tmpdir);
    else
        snprintf(root, sizeof root, "%s", CORPUS);
    snprintf(cmd, sizeof cmd, "cd '%s' && timeout 120 '%s/mixcheck' run '%s' --color never", root, MC_BINARY_DIR,
             e->path);
    char *out = calloc(OUTPUT_CAP + 1, 1);
    assert_non_null(out);
    int status = mc_capture_status(cmd, out, OUTPUT_CAP + 1);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    char err[OUTPUT_CAP / 64];
    err[0] = '\0';
    if (code != e->exit_code)
        snprintf(err, sizeof err, "exit %d, expected %d", code, e->exit_code);
    else if (!message_found(out, e->message))
        snprintf(err, sizeof err, "the output lacks the expected message\n  want: %s", e->message);
    else if (strstr(out, "Sanitizer") != NULL || strstr(out, "runtime error:") != NULL)
        snprintf(err, sizeof err, "a sanitizer report");
    if (err[0] != '\0') {
        fprintf(stderr, "expected.txt:%d: %s: %s\n---- output ----\n%.8000s\n----\n", e->line, e->path, err, out);
        free(out);
        fail_msg("%s: %s", e->path, err);
    }
    free(out);
    assert_inputs_unchanged(e->path);
}

/* After all entries: every input file, not only each entry's own, is unchanged. */
static void test_all_inputs_unchanged(void **state)
{
    (void)state;
    assert_inputs_unchanged(NULL);
}

/* The manifest covers every input, at least 40 of them. */
static void test_manifest(void **state)
{
    (void)state;
    char h5src[] = CORPUS "/h5";
    assert_covered(CORPUS "/yaml", "yaml/");
    assert_covered(h5src, "h5/");
    if (n_entries < 40)
        fail_msg("only %d entries (the corpus must hold at least 40)", n_entries);
    for (int i = 0; i < n_entries; i++) {
        char p[sizeof CORPUS + 300];
        snprintf(p, sizeof p, "%s/%.255s", CORPUS, entries[i].path);
        FILE *f = fopen(p, "rb");
        if (f == NULL)
            fail_msg("expected.txt:%d: %s does not exist", entries[i].line, entries[i].path);
        fclose(f);
    }
}

int main(void)
{
    manifest_read();
    int n = n_entries;
    struct CMUnitTest *tests = calloc((size_t)n + 2, sizeof *tests);
    if (tests == NULL)
        return 1;
    tests[0] = (struct CMUnitTest)cmocka_unit_test(test_manifest);
    for (int i = 0; i < n; i++) {
        tests[i + 1] = (struct CMUnitTest)cmocka_unit_test_prestate(test_entry, &entries[i]);
        tests[i + 1].name = entries[i].path;
    }
    tests[n + 1] = (struct CMUnitTest)cmocka_unit_test(test_all_inputs_unchanged);
    int rc = _cmocka_run_group_tests("bad-inputs", tests, (size_t)n + 2, group_setup, group_teardown);
    free(tests);
    return rc;
}
