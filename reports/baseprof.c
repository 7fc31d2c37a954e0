/* baseprof.c — see baseprof.h. */
#include "baseprof.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonread.h"
#include "run/reportread.h"

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const struct mc_baseprof_entry *)a)->key, ((const struct mc_baseprof_entry *)b)->key);
}

static const char *str_of(const struct mc_json_value *rec, const char *k)
{
    const struct mc_json_value *v = mc_json_get(rec, k);
    return v && v->type == MC_JSON_STRING ? v->string : NULL;
}

int mc_baseprof_open(struct mc_baseprof *bp, const char *path)
{
    memset(bp, 0, sizeof *bp);
    struct mc_json_error jerr;
    if (mc_json_parse_file(path, NULL, &bp->root, &jerr) != 0) {
        bp->root = NULL;
        return -1;
    }
    const struct mc_json_value *res = mc_json_get(bp->root, "results");
    if (res == NULL || res->type != MC_JSON_ARRAY)
        return 0;
    bp->entries = calloc(res->len + 1, sizeof *bp->entries);
    if (bp->entries == NULL) {
        mc_baseprof_close(bp);
        return -1;
    }
    for (size_t i = 0; i < res->len; i++) {
        const struct mc_json_value *rec = &res->items[i];
        const struct mc_json_value *p = mc_json_get(rec, "by_position");
        const char *c = str_of(rec, "case"), *s = str_of(rec, "scenario"), *b = str_of(rec, "backend"),
                   *d = str_of(rec, "dtype"), *t = str_of(rec, "tensor");
        if (p == NULL || p->type != MC_JSON_OBJECT || !c || !s || !b || !d || !t)
            continue;
        size_t len = strlen(c) + strlen(s) + strlen(b) + strlen(d) + strlen(t) + 5;
        char *key = malloc(len);
        if (key == NULL)
            continue;
        mc_report_key(key, len, c, s, b, d, t);
        bp->entries[bp->n++] = (struct mc_baseprof_entry){key, p};
    }
    qsort(bp->entries, (size_t)bp->n, sizeof *bp->entries, cmp_entry);
    return 0;
}

void mc_baseprof_close(struct mc_baseprof *bp)
{
    for (int i = 0; i < bp->n; i++)
        free(bp->entries[i].key);
    free(bp->entries);
    mc_json_free(bp->root);
    memset(bp, 0, sizeof *bp);
}

int mc_baseprof_headroom(const struct mc_baseprof *bp, const char *key, double *x, double *y, int cap)
{
    if (bp->n == 0)
        return 0;
    struct mc_baseprof_entry probe = {(char *)key, NULL};
    const struct mc_baseprof_entry *e = bsearch(&probe, bp->entries, (size_t)bp->n, sizeof *bp->entries, cmp_entry);
    if (e == NULL)
        return 0;
    const struct mc_json_value *pos = mc_json_get(e->by_position, "positions");
    const struct mc_json_value *h = mc_json_get(e->by_position, "headroom");
    if (pos == NULL || h == NULL || pos->type != MC_JSON_ARRAY || h->type != MC_JSON_ARRAY || pos->len != h->len)
        return 0;
    int n = 0;
    for (size_t i = 0; i < pos->len && n < cap; i++) {
        if (pos->items[i].type != MC_JSON_NUMBER)
            continue;
        x[n] = pos->items[i].number;
        y[n] = h->items[i].type == MC_JSON_NUMBER ? h->items[i].number : INFINITY;
        n++;
    }
    return n;
}
