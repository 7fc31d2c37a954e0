/* history.c — see history.h. */
#include "run/history.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum mc_err_code mc_history_new_path(const char *dir, const char *commit, int64_t started_unix, char *buf, size_t len,
                                     struct mc_error *err)
{
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return mc_error_set(err, MC_ERR_USAGE, "%s: cannot create the history folder: %s", dir, strerror(errno));
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return mc_error_set(err, MC_ERR_USAGE, "%s: not a folder", dir);
    time_t t = (time_t)started_unix;
    struct tm tm;
    char stamp[32] = "00000000T000000Z";
    if (gmtime_r(&t, &tm) != NULL)
        strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
    char short_commit[13];
    size_t n = 0;
    for (const char *c = commit ? commit : ""; *c && n < 12; c++)
        if ((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f'))
            short_commit[n++] = *c;
    short_commit[n] = '\0';
    if (n == 0)
        snprintf(short_commit, sizeof short_commit, "unknown");
    for (int k = 0; k < 1000; k++) {
        char suffix[16] = "";
        if (k)
            snprintf(suffix, sizeof suffix, "-%d", k);
        int w = snprintf(buf, len, "%s/%s-%s-%ld%s.json", dir, stamp, short_commit, (long)getpid(), suffix);
        if (w < 0 || (size_t)w >= len)
            return mc_error_set(err, MC_ERR_USAGE, "%s: history folder path too long", dir);
        if (access(buf, F_OK) != 0)
            return MC_ERR_NONE;
    }
    return mc_error_set(err, MC_ERR_USAGE, "%s: no free run file name", dir);
}

static int is_run_file(const char *name)
{
    size_t n = strlen(name);
    return name[0] != '.' && n > 5 && strcmp(name + n - 5, ".json") == 0;
}

static int cmp_run(const void *a, const void *b)
{
    const struct mc_report_doc *x = a, *y = b;
    if (x->started_unix != y->started_unix)
        return x->started_unix < y->started_unix ? -1 : 1;
    return strcmp(x->path, y->path);
}

enum mc_err_code mc_history_load(const char *dir, struct mc_history *h, struct mc_error *err)
{
    memset(h, 0, sizeof *h);
    DIR *d = opendir(dir);
    if (d == NULL)
        return mc_error_set(err, MC_ERR_USAGE, "%s: cannot read the history folder: %s", dir, strerror(errno));
    int cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && err->code == MC_ERR_NONE) {
        if (!is_run_file(e->d_name))
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (h->n_runs == cap) {
            cap = cap ? 2 * cap : 16;
            struct mc_report_doc *r = realloc(h->runs, (size_t)cap * sizeof *r);
            if (r == NULL) {
                mc_error_set(err, MC_ERR_NOMEM, "out of memory");
                break;
            }
            h->runs = r;
        }
        if (mc_report_read(path, &h->runs[h->n_runs], err) == MC_ERR_NONE)
            h->n_runs++;
    }
    closedir(d);
    if (err->code != MC_ERR_NONE) {
        mc_history_free(h);
        return err->code;
    }
    if (h->n_runs > 1)
        qsort(h->runs, (size_t)h->n_runs, sizeof *h->runs, cmp_run);
    return MC_ERR_NONE;
}

void mc_history_free(struct mc_history *h)
{
    for (int i = 0; i < h->n_runs; i++)
        mc_report_doc_free(&h->runs[i]);
    free(h->runs);
    memset(h, 0, sizeof *h);
}
