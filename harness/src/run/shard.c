/* shard.c — see shard.h. */
#include "run/shard.h"

#include <stdlib.h>
#include <string.h>

double mc_shard_scenario_weight(const char *scenario)
{
    static const struct {
        const char *name;
        double w;
    } table[] = {
        {"prefill", 1.0},           {"decode", 0.93},         {"chunked", 1.39},
        {"first_token_causality", 0.57}, {"left_padded_batch", 1.63}, {"batch_invariance", 0.89},
        {"speculative_verify", 0.59}, {"right_padded_batch", 2.34}, {"chunk_size_invariance", 2.56},
        {"cache_roundtrip", 0.63},  {"determinism", 0.7},     {"packed_prefill", 0.53},
        {"slot_pool", 0.64},        {"mixed_step", 0.62},     {"prefix_resume", 0.68},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(table[i].name, scenario) == 0)
            return table[i].w;
    return 1.0;
}

struct group {
    const char *name;
    double cost;
    int first, n; /* items[first .. first+n) after sorting by group */
};

static int by_group(const void *a, const void *b)
{
    const struct mc_shard_item *x = a, *y = b;
    int c = strcmp(x->group, y->group);
    return c ? c : strcmp(x->id, y->id);
}

static int by_cost(const void *a, const void *b)
{
    const struct group *x = a, *y = b;
    if (x->cost != y->cost)
        return x->cost > y->cost ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int by_id(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

enum mc_err_code mc_shard_assign(struct mc_shard_item *items, int n, int index, int count, struct mc_shard_plan *out,
                                 struct mc_error *err)
{
    memset(out, 0, sizeof *out);
    out->index = index;
    out->count = count;
    if (count < 1 || index < 1 || index > count)
        return mc_error_set(err, MC_ERR_USAGE, "--shard %d/%d: expected K/N with 1 <= K <= N", index, count);
    double *load = calloc((size_t)count, sizeof *load);
    out->ids = calloc((size_t)n + 1, sizeof *out->ids);
    if (load == NULL || out->ids == NULL) {
        free(load);
        free(out->ids);
        out->ids = NULL;
        return mc_error_set(err, MC_ERR_NOMEM, "out of memory");
    }
    struct group *g = calloc(2 * (size_t)n + 1, sizeof *g);
    if (g == NULL) {
        free(load);
        free(out->ids);
        out->ids = NULL;
        return mc_error_set(err, MC_ERR_NOMEM, "out of memory");
    }
    if (n > 1)
        qsort(items, (size_t)n, sizeof *items, by_group);
    int n_groups = 0;
    double total = 0;
    for (int i = 0; i < n; i++) {
        if (i == 0 || strcmp(items[i].group, items[i - 1].group) != 0)
            g[n_groups++] = (struct group){.name = items[i].group, .first = i};
        g[n_groups - 1].cost += items[i].cost;
        g[n_groups - 1].n++;
        total += items[i].cost;
    }
    /* a group that alone costs more than a shard's share is dealt out check by check */
    int n_split = n_groups;
    for (int i = 0; i < n_groups; i++)
        if (g[i].n > 1 && g[i].cost > total / count)
            for (int j = 0; j < g[i].n; j++) {
                const struct mc_shard_item *it = &items[g[i].first + j];
                g[n_split++] = (struct group){.name = it->id, .cost = it->cost, .first = g[i].first + j, .n = 1};
            }
    int kept = 0;
    for (int i = 0; i < n_split; i++)
        if (i >= n_groups || !(g[i].n > 1 && g[i].cost > total / count))
            g[kept++] = g[i];
    n_groups = kept;
    if (n_groups > 1)
        qsort(g, (size_t)n_groups, sizeof *g, by_cost);
    for (int i = 0; i < n_groups; i++) {
        int s = 0;
        for (int k = 1; k < count; k++)
            if (load[k] < load[s])
                s = k;
        load[s] += g[i].cost;
        if (s == index - 1)
            for (int j = 0; j < g[i].n; j++)
                out->ids[out->n++] = items[g[i].first + j].id;
    }
    free(g);
    out->cost = load[index - 1];
    for (int k = 0; k < count; k++)
        out->max_cost = load[k] > out->max_cost ? load[k] : out->max_cost;
    if (out->n > 1)
        qsort(out->ids, (size_t)out->n, sizeof *out->ids, by_id);
    free(load);
    return MC_ERR_NONE;
}

int mc_shard_has(const struct mc_shard_plan *p, const char *id)
{
    return p->n > 0 && bsearch(&id, p->ids, (size_t)p->n, sizeof *p->ids, by_id) != NULL;
}

void mc_shard_plan_free(struct mc_shard_plan *p)
{
    free(p->ids);
    memset(p, 0, sizeof *p);
}
