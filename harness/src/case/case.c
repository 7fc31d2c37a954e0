/*
 * case.c — the case schema (format in cases/FORMAT.md): id, why, family, golden, tolerance,
 * backends, dtypes and the scenarios with their parameters, read through the typed YAML readers
 * (yamlread.h) from a document loaded with its positions (yamldoc.h). The tolerance profile a case
 * names is loaded by tolerance.c; the name tables are in casenames.c. Every allocation goes
 * through alloc.h.
 */
#include "case/case.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "case/casenames.h"
#include "family/family.h"
#include "family/stackconfig.h"
#include "case/tolerance.h"
#include "case/yamlread.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

#define MAX_BACKENDS 64
#define MAX_SPLIT_SETS 1000
#define MAX_RANDOM_SETS 1000
#define MAX_CHUNK_SIZES 64
#define MAX_PACKED_SEQS 256   /* sequences of one packed call */
#define MAX_POOL_ROWS 65536   /* rows of a slot_pool state pool */

_Static_assert(MC_CASE_MAX_FILE_BYTES == MC_YAML_MAX_FILE_BYTES, "case.h and yamldoc.h disagree on the file cap");

static const char *const TOKEN_CAP_MSG = "token counts are capped at 1000000";

static const char *const FAMILY_NAMES[] = {"mamba2", "mamba1", "gdn", "shortconv", "attention"};

/* ---- typed readers of the case schema ---------------------------------------------------------- */

/* A required token count in [lo, MC_CASE_MAX_TOKENS]. */
static enum mc_err_code ld_tokens(struct mc_yaml_doc *ld, const yaml_node_t *n, const char *kp, int64_t lo,
                                  int64_t *out)
{
    return mc_yaml_int(ld, n, kp, lo, MC_CASE_MAX_TOKENS, TOKEN_CAP_MSG, out);
}

/* An optional seed, 0..INT64_MAX, default 0. */
static enum mc_err_code ld_seed(struct mc_yaml_doc *ld, const yaml_node_t *n, const char *kp, uint64_t *out)
{
    int64_t v = 0;
    enum mc_err_code rc = mc_yaml_int_opt(ld, n, kp, 0, INT64_MAX, NULL, 0, &v);
    *out = (uint64_t)v;
    return rc;
}

/* A non-empty sequence of at most max_items integers in [lo, hi]; increasing: strictly increasing. */
static enum mc_err_code ld_int_list(struct mc_yaml_doc *ld, const yaml_node_t *n, const char *kp, int64_t lo,
                                    int64_t hi, size_t max_items, bool increasing, int64_t **out, int *n_out)
{
    enum mc_err_code rc;
    char ikp[MC_YAML_KP_LEN];
    if ((rc = mc_yaml_expect(ld, n, kp, YAML_SEQUENCE_NODE)) != MC_ERR_NONE)
        return rc;
    size_t count = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    if (count == 0)
        return mc_yaml_fail(ld, n->start_mark, kp, "must not be empty (got [])");
    if (count > max_items)
        return mc_yaml_fail(ld, n->start_mark, kp, "at most %zu entries are allowed (got %zu)", max_items, count);
    int64_t *v = mc_calloc(count, sizeof *v);
    if (v == NULL)
        return mc_yaml_nomem(ld);
    for (size_t i = 0; i < count; i++) {
        const yaml_node_t *item = mc_yaml_node(ld, n->data.sequence.items.start[i]);
        mc_yaml_kp_index(ikp, kp, i);
        if ((rc = mc_yaml_int(ld, item, ikp, lo, hi, TOKEN_CAP_MSG, &v[i])) != MC_ERR_NONE)
            goto fail;
        if (increasing && i > 0 && v[i] <= v[i - 1]) {
            rc =
                mc_yaml_fail(ld, item->start_mark, kp, "split points must be strictly increasing (got %lld after %lld)",
                             (long long)v[i], (long long)v[i - 1]);
            goto fail;
        }
    }
    *out = v;
    *n_out = (int)count;
    return MC_ERR_NONE;
fail:
    free(v);
    return rc;
}

/* ---- scenarios --------------------------------------------------------------------------------- */

static const char *const KEYS_NONE[] = {NULL};
static const char *const KEYS_DECODE[] = {"prefill"};
static const char *const KEYS_CHUNKED[] = {"splits", "random"};
static const char *const KEYS_CAUSALITY[] = {"prefill", "len", "seed"};
static const char *const KEYS_SPECULATIVE[] = {"prefill", "len", "accept", "seed"};
static const char *const KEYS_LEFT_PADDED[] = {"prefill", "decode"};
static const char *const KEYS_CHUNK_SIZES[] = {"chunk_sizes"};
static const char *const KEYS_RANDOM[] = {"sets", "seed"};
static const char *const KEYS_ROUNDTRIP[] = {"splits"};
static const char *const KEYS_PACKED[] = {"sequences", "seed"};
static const char *const KEYS_SLOT_POOL[] = {"sequences", "pool", "seed"};
static const char *const KEYS_MIXED[] = {"drafts", "seed"};
static const char *const KEYS_RESUME[] = {"at", "splits", "seed"};
static const char *const KEYS_LONG_DECODE[] = {"steps", "prefill", "seed"};
static const char *const KEYS_LENGTH_SWEEP[] = {"lengths", "seed"};
static const char *const KEYS_HEAD_SHARD[] = {"shards"};
static const char *const KEYS_GREEDY[] = {"steps", "top_k"};

struct scenario_keys {
    const char *const *names;
    size_t n;
};

static const struct scenario_keys SCENARIO_KEYS[MC_SCENARIO_COUNT] = {
    [MC_SCENARIO_PREFILL] = {KEYS_NONE, 0},
    [MC_SCENARIO_DECODE] = {KEYS_DECODE, COUNT(KEYS_DECODE)},
    [MC_SCENARIO_CHUNKED] = {KEYS_CHUNKED, COUNT(KEYS_CHUNKED)},
    [MC_SCENARIO_FIRST_TOKEN_CAUSALITY] = {KEYS_CAUSALITY, COUNT(KEYS_CAUSALITY)},
    [MC_SCENARIO_SPECULATIVE_VERIFY] = {KEYS_SPECULATIVE, COUNT(KEYS_SPECULATIVE)},
    [MC_SCENARIO_LEFT_PADDED_BATCH] = {KEYS_LEFT_PADDED, COUNT(KEYS_LEFT_PADDED)},
    [MC_SCENARIO_RIGHT_PADDED_BATCH] = {KEYS_NONE, 0},
    [MC_SCENARIO_CHUNK_SIZE_INVARIANCE] = {KEYS_CHUNK_SIZES, COUNT(KEYS_CHUNK_SIZES)},
    [MC_SCENARIO_BATCH_INVARIANCE] = {KEYS_NONE, 0},
    [MC_SCENARIO_CACHE_ROUNDTRIP] = {KEYS_ROUNDTRIP, COUNT(KEYS_ROUNDTRIP)},
    [MC_SCENARIO_DETERMINISM] = {KEYS_DECODE, COUNT(KEYS_DECODE)},
    [MC_SCENARIO_PACKED_PREFILL] = {KEYS_PACKED, COUNT(KEYS_PACKED)},
    [MC_SCENARIO_SLOT_POOL] = {KEYS_SLOT_POOL, COUNT(KEYS_SLOT_POOL)},
    [MC_SCENARIO_MIXED_STEP] = {KEYS_MIXED, COUNT(KEYS_MIXED)},
    [MC_SCENARIO_PREFIX_RESUME] = {KEYS_RESUME, COUNT(KEYS_RESUME)},
    [MC_SCENARIO_LONG_DECODE] = {KEYS_LONG_DECODE, COUNT(KEYS_LONG_DECODE)},
    [MC_SCENARIO_LENGTH_SWEEP] = {KEYS_LENGTH_SWEEP, COUNT(KEYS_LENGTH_SWEEP)},
    [MC_SCENARIO_HEAD_SHARD] = {KEYS_HEAD_SHARD, COUNT(KEYS_HEAD_SHARD)},
    [MC_SCENARIO_GREEDY] = {KEYS_GREEDY, COUNT(KEYS_GREEDY)},
};

static void scenario_free(struct mc_scenario_spec *s)
{
    for (int i = 0; i < s->n_split_sets; i++)
        free(s->split_sets[i].points);
    free(s->split_sets);
    free(s->chunk_sizes);
    free(s->lengths);
    memset(s, 0, sizeof *s);
}

static enum mc_err_code ld_chunked(struct mc_yaml_doc *ld, yaml_node_t *map, const char *kp, yaml_node_t **v,
                                   struct mc_scenario_spec *s)
{
    enum mc_err_code rc;
    char skp[MC_YAML_KP_LEN], ikp[MC_YAML_KP_LEN];
    if (v[0] == NULL && v[1] == NULL)
        return mc_yaml_fail(ld, map->start_mark, kp, "needs at least one of 'splits' or 'random' (got neither)");
    if (v[0] != NULL) {
        mc_yaml_kp_key(skp, kp, "splits");
        if ((rc = mc_yaml_expect(ld, v[0], skp, YAML_SEQUENCE_NODE)) != MC_ERR_NONE)
            return rc;
        size_t count = (size_t)(v[0]->data.sequence.items.top - v[0]->data.sequence.items.start);
        if (count == 0)
            return mc_yaml_fail(ld, v[0]->start_mark, skp, "must not be empty; omit 'splits' instead (got [])");
        if (count > MAX_SPLIT_SETS)
            return mc_yaml_fail(ld, v[0]->start_mark, skp, "at most %d split sets are allowed (got %zu)",
                                MAX_SPLIT_SETS, count);
        s->split_sets = mc_calloc(count, sizeof *s->split_sets);
        if (s->split_sets == NULL)
            return mc_yaml_nomem(ld);
        for (size_t i = 0; i < count; i++) {
            const yaml_node_t *set = mc_yaml_node(ld, v[0]->data.sequence.items.start[i]);
            int n = 0;
            mc_yaml_kp_index(ikp, skp, i);
            rc = ld_int_list(ld, set, ikp, 1, MC_CASE_MAX_TOKENS, MC_CASE_MAX_TOKENS, true, &s->split_sets[i].points,
                             &n);
            if (rc != MC_ERR_NONE)
                return rc;
            s->split_sets[i].n = n;
            s->n_split_sets = (int)i + 1;
        }
    }
    if (v[1] != NULL) {
        yaml_node_t *rv[COUNT(KEYS_RANDOM)];
        mc_yaml_kp_key(skp, kp, "random");
        if ((rc = mc_yaml_expect(ld, v[1], skp, YAML_MAPPING_NODE)) != MC_ERR_NONE ||
            (rc = mc_yaml_fields(ld, v[1], skp, KEYS_RANDOM, COUNT(KEYS_RANDOM), rv, NULL)) != MC_ERR_NONE ||
            (rc = mc_yaml_require(ld, v[1], skp, "sets", rv[0])) != MC_ERR_NONE)
            return rc;
        mc_yaml_kp_key(ikp, skp, "sets");
        if ((rc = mc_yaml_int(ld, rv[0], ikp, 1, MAX_RANDOM_SETS, "random split sets are capped at 1000",
                              &s->random_sets)) != MC_ERR_NONE)
            return rc;
        mc_yaml_kp_key(ikp, skp, "seed");
        if ((rc = ld_seed(ld, rv[1], ikp, &s->seed)) != MC_ERR_NONE)
            return rc;
    }
    return MC_ERR_NONE;
}

/* One `name: {params}` entry of `scenarios`. */
static enum mc_err_code ld_scenario(struct mc_yaml_doc *ld, enum mc_scenario_kind kind, yaml_node_t *key,
                                    yaml_node_t *map, struct mc_scenario_spec *s)
{
    enum mc_err_code rc;
    char kp[MC_YAML_KP_LEN], pk[4][MC_YAML_KP_LEN];
    yaml_node_t *v[4] = {0};
    const struct scenario_keys *keys = &SCENARIO_KEYS[kind];

    s->kind = kind;
    s->line = (int)key->start_mark.line + 1;
    s->column = (int)key->start_mark.column + 1;
    mc_yaml_kp_key(kp, "scenarios", mc_case_scenario_names[kind]);
    if (map->type != YAML_MAPPING_NODE) {
        char got[MC_YAML_DESCRIBE_LEN];
        mc_yaml_node_describe(map, got, sizeof got);
        return mc_yaml_fail(ld, map->start_mark, kp, "expected a mapping of parameters, {} for none (got %s)", got);
    }
    if ((rc = mc_yaml_fields(ld, map, kp, keys->names, keys->n, v, NULL)) != MC_ERR_NONE)
        return rc;
    for (size_t i = 0; i < keys->n; i++) {
        bool optional = strcmp(keys->names[i], "seed") == 0 || strcmp(keys->names[i], "decode") == 0 ||
                        kind == MC_SCENARIO_CHUNKED || (kind == MC_SCENARIO_PREFIX_RESUME && i == 1) ||
                        (kind == MC_SCENARIO_SPECULATIVE_VERIFY && i == 2) ||
                        (kind == MC_SCENARIO_LONG_DECODE && i == 1);
        if (!optional && (rc = mc_yaml_require(ld, map, kp, keys->names[i], v[i])) != MC_ERR_NONE)
            return rc;
        mc_yaml_kp_key(pk[i], kp, keys->names[i]);
    }
    switch (kind) {
    case MC_SCENARIO_DECODE:
    case MC_SCENARIO_DETERMINISM:
        rc = ld_tokens(ld, v[0], pk[0], 1, &s->prefill);
        break;
    case MC_SCENARIO_CACHE_ROUNDTRIP: {
        int n = 0;
        s->split_sets = mc_calloc(1, sizeof *s->split_sets);
        if (s->split_sets == NULL)
            return mc_yaml_nomem(ld);
        s->n_split_sets = 1;
        rc = ld_int_list(ld, v[0], pk[0], 1, MC_CASE_MAX_TOKENS, MC_CASE_MAX_TOKENS, true, &s->split_sets[0].points,
                         &n);
        s->split_sets[0].n = n;
        break;
    }
    case MC_SCENARIO_CHUNKED:
        rc = ld_chunked(ld, map, kp, v, s);
        break;
    case MC_SCENARIO_PACKED_PREFILL:
        if ((rc = mc_yaml_int(ld, v[0], pk[0], 1, MAX_PACKED_SEQS, "a packed call holds at most 256 sequences",
                              &s->sequences)) == MC_ERR_NONE)
            rc = ld_seed(ld, v[1], pk[1], &s->seed);
        break;
    case MC_SCENARIO_SLOT_POOL:
        if ((rc = mc_yaml_int(ld, v[0], pk[0], 1, MAX_PACKED_SEQS, "a packed call holds at most 256 sequences",
                              &s->sequences)) == MC_ERR_NONE &&
            (rc = mc_yaml_int(ld, v[1], pk[1], 4, MAX_POOL_ROWS, "a pool holds at most 65536 rows", &s->pool)) ==
                MC_ERR_NONE &&
            (rc = ld_seed(ld, v[2], pk[2], &s->seed)) == MC_ERR_NONE && s->pool < 4 * s->sequences)
            rc = mc_yaml_fail(ld, v[1]->start_mark, pk[1], "must be at least 4 x sequences (%lld) (got %lld)",
                              (long long)(4 * s->sequences), (long long)s->pool);
        break;
    case MC_SCENARIO_MIXED_STEP:
        if ((rc = ld_tokens(ld, v[0], pk[0], 2, &s->len)) == MC_ERR_NONE)
            rc = ld_seed(ld, v[1], pk[1], &s->seed);
        break;
    case MC_SCENARIO_PREFIX_RESUME:
        if ((rc = ld_tokens(ld, v[0], pk[0], 1, &s->prefill)) != MC_ERR_NONE ||
            (rc = ld_seed(ld, v[2], pk[2], &s->seed)) != MC_ERR_NONE || v[1] == NULL)
            break;
        s->split_sets = mc_calloc(1, sizeof *s->split_sets);
        if (s->split_sets == NULL)
            return mc_yaml_nomem(ld);
        s->n_split_sets = 1;
        {
            int n = 0;
            rc = ld_int_list(ld, v[1], pk[1], 1, MC_CASE_MAX_TOKENS, MC_CASE_MAX_TOKENS, true,
                             &s->split_sets[0].points, &n);
            s->split_sets[0].n = n;
        }
        if (rc == MC_ERR_NONE && s->split_sets[0].points[0] <= s->prefill)
            rc = mc_yaml_fail(ld, v[1]->start_mark, pk[1], "split points must be > at (%lld) (got %lld)",
                              (long long)s->prefill, (long long)s->split_sets[0].points[0]);
        break;
    case MC_SCENARIO_FIRST_TOKEN_CAUSALITY:
        if ((rc = ld_tokens(ld, v[0], pk[0], 1, &s->prefill)) == MC_ERR_NONE &&
            (rc = ld_tokens(ld, v[1], pk[1], 2, &s->len)) == MC_ERR_NONE)
            rc = ld_seed(ld, v[2], pk[2], &s->seed);
        break;
    case MC_SCENARIO_SPECULATIVE_VERIFY:
        if ((rc = ld_tokens(ld, v[0], pk[0], 1, &s->prefill)) == MC_ERR_NONE &&
            (rc = ld_tokens(ld, v[1], pk[1], 2, &s->len)) == MC_ERR_NONE &&
            (rc = mc_yaml_int_opt(ld, v[2], pk[2], 0, MC_CASE_MAX_TOKENS, TOKEN_CAP_MSG, -1, &s->accept)) ==
                MC_ERR_NONE &&
            (rc = ld_seed(ld, v[3], pk[3], &s->seed)) == MC_ERR_NONE && s->accept >= s->len)
            rc = mc_yaml_fail(ld, v[2]->start_mark, pk[2], "must be < len (%lld) (got %lld)", (long long)s->len,
                              (long long)s->accept);
        break;
    case MC_SCENARIO_LONG_DECODE:
        if ((rc = ld_tokens(ld, v[0], pk[0], 1, &s->steps)) == MC_ERR_NONE &&
            (rc = mc_yaml_int_opt(ld, v[1], pk[1], 1, MC_CASE_MAX_TOKENS, TOKEN_CAP_MSG, 1, &s->prefill)) ==
                MC_ERR_NONE)
            rc = ld_seed(ld, v[2], pk[2], &s->seed);
        break;
    case MC_SCENARIO_HEAD_SHARD:
        rc = mc_yaml_int(ld, v[0], pk[0], 1, 1024, "shards are capped at 1024", &s->shards);
        break;
    case MC_SCENARIO_LENGTH_SWEEP:
        if ((rc = ld_int_list(ld, v[0], pk[0], 1, MC_CASE_MAX_TOKENS, MAX_CHUNK_SIZES, true, &s->lengths,
                              &s->n_lengths)) == MC_ERR_NONE)
            rc = ld_seed(ld, v[1], pk[1], &s->seed);
        break;
    case MC_SCENARIO_LEFT_PADDED_BATCH:
        if ((rc = ld_tokens(ld, v[0], pk[0], 1, &s->prefill)) == MC_ERR_NONE)
            rc = mc_yaml_int_opt(ld, v[1], pk[1], 0, MC_CASE_MAX_TOKENS, TOKEN_CAP_MSG, 1, &s->decode_steps);
        break;
    case MC_SCENARIO_GREEDY:
        if ((rc = ld_tokens(ld, v[0], pk[0], 1, &s->steps)) == MC_ERR_NONE)
            rc = mc_yaml_int(ld, v[1], pk[1], 1, 1000, "top_k is at most 1000", &s->top_k);
        break;
    case MC_SCENARIO_CHUNK_SIZE_INVARIANCE:
        rc = ld_int_list(ld, v[0], pk[0], 1, MC_CASE_MAX_TOKENS, MAX_CHUNK_SIZES, false, &s->chunk_sizes,
                         &s->n_chunk_sizes);
        break;
    default: /* prefill, right_padded_batch, batch_invariance: no parameters */
        break;
    }
    return rc;
}

static enum mc_err_code ld_scenarios(struct mc_yaml_doc *ld, yaml_node_t *map, struct mc_case *c)
{
    enum mc_err_code rc;
    if ((rc = mc_yaml_expect(ld, map, "scenarios", YAML_MAPPING_NODE)) != MC_ERR_NONE ||
        (rc = mc_yaml_fields(ld, map, "scenarios", mc_case_scenario_names, MC_SCENARIO_COUNT, NULL, NULL)) !=
            MC_ERR_NONE)
        return rc;
    size_t count = (size_t)(map->data.mapping.pairs.top - map->data.mapping.pairs.start);
    if (count == 0)
        return mc_yaml_fail(ld, map->start_mark, "scenarios", "must name at least one scenario (got {})");
    c->scenarios = mc_calloc(count, sizeof *c->scenarios);
    if (c->scenarios == NULL)
        return mc_yaml_nomem(ld);
    for (size_t i = 0; i < count; i++) {
        yaml_node_pair_t *p = &map->data.mapping.pairs.start[i];
        yaml_node_t *key = mc_yaml_node(ld, p->key);
        enum mc_scenario_kind kind =
            (enum mc_scenario_kind)mc_yaml_name_index(mc_case_scenario_names, MC_SCENARIO_COUNT, key);
        c->n_scenarios = (int)i + 1;
        if ((rc = ld_scenario(ld, kind, key, mc_yaml_node(ld, p->value), &c->scenarios[i])) != MC_ERR_NONE)
            return rc;
    }
    return MC_ERR_NONE;
}

/* ---- the case ---------------------------------------------------------------------------------- */

enum { CK_ID, CK_WHY, CK_FAMILY, CK_GOLDEN, CK_TOLERANCE, CK_BACKENDS, CK_DTYPES, CK_SCENARIOS, CK_MODEL, CK_LAYERS,
       CK_COUNT };
static const char *const CASE_KEYS[CK_COUNT] = {"id",        "why",      "family", "golden",    "tolerance",
                                                "backends",  "dtypes",   "scenarios", "model", "layers"};
/* Scenarios a model case runs (docs/models.md §3); greedy is a model case's only. */
static int model_scenario(enum mc_scenario_kind k)
{
    return k == MC_SCENARIO_PREFILL || k == MC_SCENARIO_DECODE || k == MC_SCENARIO_CHUNKED ||
           k == MC_SCENARIO_FIRST_TOKEN_CAUSALITY || k == MC_SCENARIO_LEFT_PADDED_BATCH ||
           k == MC_SCENARIO_BATCH_INVARIANCE || k == MC_SCENARIO_GREEDY || k == MC_SCENARIO_SPECULATIVE_VERIFY ||
           k == MC_SCENARIO_PACKED_PREFILL;
}

/* `model:` (a model case) or `family:` (a mixer case), exactly one of them; and `layers:` with `model:` only. */
static enum mc_err_code ld_kind(struct mc_yaml_doc *ld, yaml_node_t *root, yaml_node_t **v, struct mc_case *c)
{
    enum mc_err_code rc;
    const char *s = NULL;
    char got[MC_YAML_DESCRIBE_LEN];
    if (v[CK_MODEL] == NULL) {
        if (v[CK_LAYERS] != NULL)
            return mc_yaml_fail(ld, v[CK_LAYERS]->start_mark, "layers", "only a model case (`model:`) has layers");
        return mc_yaml_require(ld, root, "", "family", v[CK_FAMILY]);
    }
    if (v[CK_FAMILY] != NULL)
        return mc_yaml_fail(ld, v[CK_FAMILY]->start_mark, "family",
                            "a model case names its `model:`, its layers' families come from the golden");
    if ((rc = mc_yaml_string(ld, v[CK_MODEL], "model", &s)) != MC_ERR_NONE)
        return rc;
    enum mc_family fam;
    enum mc_model_type mt;
    if (mc_model_type_from_name(s, &mt) == 0) {
        fam = mc_model_type_family(mt); /* the family `--family` filters the case by (family/stackconfig.h) */
    } else {
        mc_yaml_node_describe(v[CK_MODEL], got, sizeof got);
        return mc_yaml_fail(ld, v[CK_MODEL]->start_mark, "model",
                            "unknown model type; valid: mamba2, mamba, lfm2, bamba, qwen3_5_text, granitemoehybrid (got %s)",
                            got);
    }
    if ((c->model_type = mc_strdup(s)) == NULL)
        return mc_yaml_nomem(ld);
    c->family = fam;
    c->family_line = (int)v[CK_MODEL]->start_mark.line + 1;
    c->family_column = (int)v[CK_MODEL]->start_mark.column + 1;
    if (v[CK_LAYERS] == NULL)
        return MC_ERR_NONE;
    c->layers_line = (int)v[CK_LAYERS]->start_mark.line + 1;
    c->layers_column = (int)v[CK_LAYERS]->start_mark.column + 1;
    return ld_int_list(ld, v[CK_LAYERS], "layers", 0, 1023, 64, true, &c->layers, &c->n_layers);
}

/* rel resolved against the directory of `base` (unchanged when absolute or base has no directory). */
static char *path_resolve(const char *base, const char *rel)
{
    const char *slash = strrchr(base, '/');
    if (rel[0] == '/' || slash == NULL)
        return mc_strdup(rel);
    size_t dir = (size_t)(slash - base) + 1, len = strlen(rel);
    char *out = mc_calloc(dir + len + 1, 1);
    if (out != NULL) {
        memcpy(out, base, dir);
        memcpy(out + dir, rel, len + 1);
    }
    return out;
}

static enum mc_err_code ld_backends(struct mc_yaml_doc *ld, const yaml_node_t *n, struct mc_case *c)
{
    enum mc_err_code rc;
    char kp[MC_YAML_KP_LEN];
    if ((rc = mc_yaml_expect(ld, n, "backends", YAML_SEQUENCE_NODE)) != MC_ERR_NONE)
        return rc;
    size_t count = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    if (count == 0)
        return mc_yaml_fail(ld, n->start_mark, "backends", "must name at least one backend (got [])");
    if (count > MAX_BACKENDS)
        return mc_yaml_fail(ld, n->start_mark, "backends", "at most %d backends are allowed (got %zu)", MAX_BACKENDS,
                            count);
    c->backends = mc_calloc(count, sizeof *c->backends);
    if (c->backends == NULL)
        return mc_yaml_nomem(ld);
    for (size_t i = 0; i < count; i++) {
        const yaml_node_t *item = mc_yaml_node(ld, n->data.sequence.items.start[i]);
        const char *name = NULL;
        mc_yaml_kp_index(kp, "backends", i);
        if ((rc = mc_yaml_name(ld, item, kp, "backend names", &name)) != MC_ERR_NONE)
            return rc;
        for (size_t j = 0; j < i; j++) {
            if (strcmp(c->backends[j], name) == 0)
                return mc_yaml_fail(ld, item->start_mark, kp, "duplicate backend (got %s again)", name);
        }
        if ((c->backends[i] = mc_strdup(name)) == NULL)
            return mc_yaml_nomem(ld);
        c->n_backends = (int)i + 1;
    }
    return MC_ERR_NONE;
}

static enum mc_err_code ld_dtypes(struct mc_yaml_doc *ld, const yaml_node_t *n, struct mc_case *c)
{
    enum mc_err_code rc;
    char kp[MC_YAML_KP_LEN], got[MC_YAML_DESCRIBE_LEN], valid[64];
    if ((rc = mc_yaml_expect(ld, n, "dtypes", YAML_SEQUENCE_NODE)) != MC_ERR_NONE)
        return rc;
    size_t count = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    if (count == 0)
        return mc_yaml_fail(ld, n->start_mark, "dtypes", "must name at least one dtype (got [])");
    for (size_t i = 0; i < count; i++) {
        const yaml_node_t *item = mc_yaml_node(ld, n->data.sequence.items.start[i]);
        const char *name = NULL;
        enum mc_dtype d;
        mc_yaml_kp_index(kp, "dtypes", i);
        if ((rc = mc_yaml_string(ld, item, kp, &name)) != MC_ERR_NONE)
            return rc;
        if (mc_dtype_from_name(name, &d) != 0) {
            mc_yaml_node_describe(item, got, sizeof got);
            mc_yaml_names_join(valid, sizeof valid, mc_case_dtype_names, MC_CASE_DTYPE_COUNT);
            return mc_yaml_fail(ld, item->start_mark, kp, "unknown dtype; valid: %s (got %s)", valid, got);
        }
        for (int j = 0; j < c->n_dtypes; j++) {
            if (c->dtypes[j] == d)
                return mc_yaml_fail(ld, item->start_mark, kp, "duplicate dtype (got %s again)", name);
        }
        c->dtypes[c->n_dtypes++] = d; /* at most 4: duplicates are refused */
    }
    return MC_ERR_NONE;
}

static enum mc_err_code ld_case(struct mc_yaml_doc *ld, yaml_node_t *root, struct mc_case *c)
{
    enum mc_err_code rc;
    yaml_node_t *v[CK_COUNT], *k[CK_COUNT];
    const char *s = NULL;
    char got[MC_YAML_DESCRIBE_LEN], valid[128];

    if ((rc = mc_yaml_fields(ld, root, "", CASE_KEYS, CK_COUNT, v, k)) != MC_ERR_NONE)
        return rc;
    for (int i = 0; i < CK_COUNT; i++) {
        if (i == CK_FAMILY || i == CK_MODEL || i == CK_LAYERS)
            continue;
        if ((rc = mc_yaml_require(ld, root, "", CASE_KEYS[i], v[i])) != MC_ERR_NONE)
            return rc;
    }
    if ((rc = ld_kind(ld, root, v, c)) != MC_ERR_NONE)
        return rc;
    if ((rc = mc_yaml_name(ld, v[CK_ID], "id", "id", &s)) != MC_ERR_NONE)
        return rc;
    if ((c->id = mc_strdup(s)) == NULL)
        return mc_yaml_nomem(ld);
    if ((rc = mc_yaml_string(ld, v[CK_WHY], "why", &s)) != MC_ERR_NONE)
        return rc;
    if ((c->why = mc_strdup(s)) == NULL)
        return mc_yaml_nomem(ld);
    if (c->model_type == NULL) {
        if ((rc = mc_yaml_string(ld, v[CK_FAMILY], "family", &s)) != MC_ERR_NONE)
            return rc;
        if (mc_family_from_name(s, &c->family) != 0) {
            mc_yaml_node_describe(v[CK_FAMILY], got, sizeof got);
            mc_yaml_names_join(valid, sizeof valid, FAMILY_NAMES, COUNT(FAMILY_NAMES));
            return mc_yaml_fail(ld, v[CK_FAMILY]->start_mark, "family", "unknown family; valid: %s (got %s)", valid,
                                got);
        }
        c->family_line = (int)v[CK_FAMILY]->start_mark.line + 1;
        c->family_column = (int)v[CK_FAMILY]->start_mark.column + 1;
    }
    if ((rc = mc_yaml_string(ld, v[CK_GOLDEN], "golden", &s)) != MC_ERR_NONE)
        return rc;
    if ((c->golden_path = path_resolve(ld->path, s)) == NULL)
        return mc_yaml_nomem(ld);
    c->golden_line = (int)v[CK_GOLDEN]->start_mark.line + 1;
    c->golden_column = (int)v[CK_GOLDEN]->start_mark.column + 1;
    if ((rc = ld_backends(ld, v[CK_BACKENDS], c)) != MC_ERR_NONE ||
        (rc = ld_dtypes(ld, v[CK_DTYPES], c)) != MC_ERR_NONE ||
        (rc = ld_scenarios(ld, v[CK_SCENARIOS], c)) != MC_ERR_NONE)
        return rc;
    for (int i = 0; i < c->n_scenarios; i++) {
        const struct mc_scenario_spec *sp = &c->scenarios[i];
        int is_model = c->model_type != NULL, ok = is_model ? model_scenario(sp->kind) : sp->kind != MC_SCENARIO_GREEDY;
        if (!ok)
            return mc_error_set(ld->err, MC_ERR_INPUT, "%s:%d:%d: in 'scenarios.%s': %s", ld->path, sp->line,
                                sp->column, mc_scenario_name(sp->kind),
                                is_model ? "not a model-level scenario (model cases run prefill, decode, chunked, "
                                           "first_token_causality, left_padded_batch, batch_invariance, greedy, "
                                           "speculative_verify, packed_prefill)"
                                         : "greedy is a model-level scenario (a case with `model:`)");
    }
    if ((rc = mc_yaml_string(ld, v[CK_TOLERANCE], "tolerance", &s)) != MC_ERR_NONE)
        return rc;
    char *tol_path = path_resolve(ld->path, s);
    if (tol_path == NULL)
        return mc_yaml_nomem(ld);
    struct mc_yaml_ref ref = {ld->path, k[CK_TOLERANCE]->start_mark, "tolerance"};
    rc = mc_tolerance_load_ref(tol_path, &ref, &c->tolerance, ld->err);
    free(tol_path);
    return rc;
}

static enum mc_err_code case_load(const char *path, const void *data, size_t len, struct mc_case *c,
                                  struct mc_error *err)
{
    enum mc_err_code rc;
    struct mc_case tmp = {0};
    struct mc_yaml_doc ld = {.path = path, .err = err, .mem = data, .mem_len = len};
    yaml_node_t *root = NULL;

    memset(c, 0, sizeof *c);
    if ((tmp.path = mc_strdup(path)) == NULL) {
        rc = mc_yaml_nomem(&ld);
        goto done;
    }
    if ((rc = mc_yaml_open(&ld, NULL, &root)) != MC_ERR_NONE)
        goto done;
    rc = ld_case(&ld, root, &tmp);
done:
    mc_yaml_close(&ld);
    if (rc == MC_ERR_NONE)
        *c = tmp;
    else
        mc_case_free(&tmp);
    return rc;
}

enum mc_err_code mc_case_load(const char *path, struct mc_case *c, struct mc_error *err)
{
    return case_load(path, NULL, 0, c, err);
}

enum mc_err_code mc_case_load_buffer(const char *path, const void *data, size_t len, struct mc_case *c,
                                     struct mc_error *err)
{
    static const char empty[1] = "";
    return case_load(path, len > 0 ? data : empty, len, c, err);
}

void mc_case_free(struct mc_case *c)
{
    if (c == NULL)
        return;
    free(c->path);
    free(c->id);
    free(c->why);
    free(c->golden_path);
    free(c->model_type);
    free(c->layers);
    for (int i = 0; i < c->n_backends; i++)
        free(c->backends[i]);
    free(c->backends);
    for (int i = 0; i < c->n_scenarios; i++)
        scenario_free(&c->scenarios[i]);
    free(c->scenarios);
    mc_tolerance_free(&c->tolerance);
    memset(c, 0, sizeof *c);
}
