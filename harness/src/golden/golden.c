/*
 * golden.c — see golden.h: the golden schema (golden/README.md) on the typed HDF5 reads of
 * h5read.h. Every rank and shape is derived from the family tables (family.h) and the file's own
 * configuration before anything is read; every allocation goes through alloc.h.
 */
#include "golden/golden.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "golden/h5read.h"
#include "base/sha256.h"

#define GOLDEN_MAX_BATCH 4096
#define GOLDEN_MAX_LEN 1000000

/* The links each group may hold: anything else is refused, so that the content checksum (over every
 * dataset of the file) covers exactly what is read. */
static const char *const ROOT_LINKS[] = {"config", "weights", "inputs", "expected", "probes"};
static const char *const INPUT_LINKS[] = {"hidden_states", "attention_mask"};
static const char *const EXPECTED_LINKS[] = {"output", "state_positions", "conv_state", "recurrent_state"};
#define LAYOUT_MSG "not part of the golden layout (golden/README.md)"

/* ---- the file's parts -------------------------------------------------------------------------- */

static enum mc_err_code read_header(struct mc_h5_reader *r, struct mc_golden *g)
{
    char *format = NULL, *family = NULL;
    int64_t version = 0;
    if (mc_h5_attr_read_string(r, "/", "format", &format))
        goto done;
    if (strcmp(format, MC_GOLDEN_FORMAT) != 0) {
        mc_h5_fail(r, MC_ERR_INPUT, "/format", "is '%.200s', not '%s': not a mixcheck golden", format,
                   MC_GOLDEN_FORMAT);
        goto done;
    }
    if (mc_h5_attr_read_numbers(r, "/", "format_version", MC_H5_WANT_INT, 1, &version))
        goto done;
    if (version != MC_GOLDEN_FORMAT_VERSION) {
        mc_h5_fail(r, MC_ERR_INPUT, "/format_version",
                   "format version %lld is not supported (this reader reads version %d)", (long long)version,
                   MC_GOLDEN_FORMAT_VERSION);
        goto done;
    }
    if (mc_h5_attr_exists(r, "/", "kind") == 1 && mc_h5_attr_exists(r, "/", "family") == 0) {
        mc_h5_fail(r, MC_ERR_INPUT, "/kind", "a model golden (whole stack): a case for it names `model:`, not `family:`");
        goto done;
    }
    if (mc_h5_attr_read_string(r, "/", "family", &family))
        goto done;
    if (mc_family_from_name(family, &g->config.family) != 0) {
        mc_h5_fail(r, MC_ERR_INPUT, "/family", "unknown family '%.200s' (expected %s)", family,
                   mc_family_names_text());
        goto done;
    }
    if (mc_h5_attr_read_string(r, "/", "generator", &g->generator) ||
        mc_h5_attr_read_string(r, "/", "generator_version", &g->generator_version) ||
        mc_h5_attr_read_numbers(r, "/", "seed", MC_H5_WANT_INT, 1, &g->seed))
        goto done;
done:
    free(format);
    free(family);
    return r->err.code;
}

static enum mc_err_code read_config_field(struct mc_h5_reader *r, const struct mc_config_field *f, void *dst)
{
    char label[512];
    mc_h5_attr_label(label, sizeof label, "/config", f->name);
    switch (f->kind) {
    case MC_FIELD_INT:
        return mc_h5_attr_read_numbers(r, "/config", f->name, MC_H5_WANT_INT, 1, dst);
    case MC_FIELD_BOOL: {
        int64_t v = 0;
        if (mc_h5_attr_read_numbers(r, "/config", f->name, MC_H5_WANT_INT, 1, &v))
            return r->err.code;
        if (v != 0 && v != 1)
            return mc_h5_fail(r, MC_ERR_INPUT, label, "must be 0 or 1 (got %lld)", (long long)v);
        *(int32_t *)dst = (int32_t)v;
        return MC_ERR_NONE;
    }
    case MC_FIELD_DOUBLE:
    case MC_FIELD_DOUBLE_PAIR: {
        size_t n = f->kind == MC_FIELD_DOUBLE ? 1 : 2;
        double v[2] = {0.0, 0.0};
        if (mc_h5_attr_read_numbers(r, "/config", f->name, MC_H5_WANT_NUMBER, n, v))
            return r->err.code;
        for (size_t i = 0; i < n; i++)
            if (isnan(v[i]))
                return mc_h5_fail(r, MC_ERR_INPUT, label, "is NaN");
        memcpy(dst, v, n * sizeof(double));
        return MC_ERR_NONE;
    }
    case MC_FIELD_GDN_LAYOUT: {
        char *s = NULL;
        if (mc_h5_attr_read_string(r, "/config", f->name, &s))
            return r->err.code;
        if (strcmp(s, "qwen3_5") == 0)
            *(int32_t *)dst = MC_GDN_LAYOUT_QWEN3_5;
        else if (strcmp(s, "qwen3_next") == 0)
            *(int32_t *)dst = MC_GDN_LAYOUT_QWEN3_NEXT;
        else
            mc_h5_fail(r, MC_ERR_INPUT, label, "unknown layout '%.200s' (expected qwen3_5 or qwen3_next)", s);
        free(s);
        return r->err.code;
    }
    case MC_FIELD_QK_NORM: {
        char *s = NULL;
        if (mc_h5_attr_read_string(r, "/config", f->name, &s))
            return r->err.code;
        int v = mc_qk_norm_from_name(s);
        if (v < 0)
            mc_h5_fail(r, MC_ERR_INPUT, label, "unknown q/k norm '%.200s' (expected none, rms or zero_centred)", s);
        else
            *(int32_t *)dst = (int32_t)v;
        free(s);
        return r->err.code;
    }
    }
    return mc_h5_fail(r, MC_ERR_INTERNAL, label, "unknown field kind");
}

static enum mc_err_code read_config(struct mc_h5_reader *r, struct mc_golden *g)
{
    size_t count = 0;
    const struct mc_config_field *fields = mc_family_config_fields(g->config.family, &count);
    int e = mc_h5_link_exists(r, "/config");
    if (e < 0)
        return r->err.code;
    if (e == 0)
        return mc_h5_fail(r, MC_ERR_INPUT, "/config", "missing group");
    for (size_t i = 0; i < count; i++) {
        if (fields[i].optional) { /* absent: 0, the behaviour before the option */
            int has = mc_h5_attr_exists(r, "/config", fields[i].name);
            if (has < 0)
                return r->err.code;
            if (has == 0)
                continue;
        }
        if (read_config_field(r, &fields[i], (char *)&g->config.u + fields[i].offset))
            return r->err.code;
    }
    if (mc_family_config_validate(&g->config, &r->err))
        mc_error_prefix(&r->err, "%s: /config", r->path);
    return r->err.code;
}

static enum mc_err_code read_weights(struct mc_h5_reader *r, struct mc_golden *g)
{
    struct mc_weight_spec specs[MC_FAMILY_MAX_WEIGHTS];
    int n = mc_family_weight_specs(&g->config, specs);
    int e = mc_h5_link_exists(r, "/weights");
    if (e < 0)
        return r->err.code;
    if (e == 0)
        return mc_h5_fail(r, MC_ERR_INPUT, "/weights", "missing group");
    const char *names[MC_FAMILY_MAX_WEIGHTS];
    for (int i = 0; i < n; i++)
        names[i] = specs[i].name;
    if (mc_h5_group_check_links(r, "/weights", names, n, "not a parameter of this configuration"))
        return r->err.code;
    g->weights = mc_calloc((size_t)n, sizeof *g->weights);
    if (g->weights == NULL)
        return mc_h5_fail_nomem(r, "/weights");
    g->n_weights = n;
    for (int i = 0; i < n; i++) {
        char label[512];
        snprintf(label, sizeof label, "/weights/%s", specs[i].name);
        struct mc_h5_shape_rule rule = {.ndim = specs[i].ndim, .source = "the configuration"};
        memcpy(rule.dims, specs[i].dims, sizeof rule.dims);
        if ((g->weights[i].name = mc_strdup(specs[i].name)) == NULL)
            return mc_h5_fail_nomem(r, label);
        if (mc_h5_array_read(r, label, MC_H5_WANT_FLOAT, &rule, &g->weights[i].value))
            return r->err.code;
    }
    return MC_ERR_NONE;
}

static enum mc_err_code read_inputs(struct mc_h5_reader *r, struct mc_golden *g, const struct mc_family_shape *sh)
{
    struct mc_h5_shape_rule hs = {.ndim = 3,
                                  .dims = {0, 0, sh->hidden},
                                  .max = {GOLDEN_MAX_BATCH, GOLDEN_MAX_LEN},
                                  .names = {"B", "L"},
                                  .source = "the configuration"};
    int e = mc_h5_link_exists(r, "/inputs");
    if (e <= 0)
        return e < 0 ? r->err.code : mc_h5_fail(r, MC_ERR_INPUT, "/inputs", "missing group");
    if (mc_h5_group_check_links(r, "/inputs", INPUT_LINKS, 2, LAYOUT_MSG))
        return r->err.code;
    if (mc_h5_array_read(r, "/inputs/hidden_states", MC_H5_WANT_FLOAT, &hs, &g->hidden_states))
        return r->err.code;
    g->batch = g->hidden_states.dims[0];
    g->len = g->hidden_states.dims[1];

    const char *name = "/inputs/attention_mask";
    e = mc_h5_link_exists(r, name);
    if (e <= 0)
        return r->err.code;
    struct mc_h5_shape_rule mr = {.ndim = 2, .dims = {g->batch, g->len}, .source = "/inputs/hidden_states"};
    int64_t dims[MC_MAX_DIMS], *values = NULL;
    if (mc_h5_dataset_read(r, name, MC_H5_WANT_INT, &mr, dims, (void **)&values))
        return r->err.code;
    size_t n = (size_t)g->batch * (size_t)g->len;
    for (size_t i = 0; i < n; i++) {
        if (values[i] != 0 && values[i] != 1) {
            char idx[160];
            mc_h5_index_format(idx, sizeof idx, 2, dims, (int64_t)i);
            mc_h5_fail(r, MC_ERR_INPUT, name, "value %lld at %s (must be 0 or 1)", (long long)values[i], idx);
            goto done;
        }
    }
    if ((g->mask = mc_malloc(n)) == NULL) {
        mc_h5_fail_nomem(r, name);
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        g->mask[i] = (uint8_t)values[i];
done:
    free(values);
    return r->err.code;
}

static enum mc_err_code read_positions(struct mc_h5_reader *r, struct mc_golden *g)
{
    const char *name = "/expected/state_positions";
    struct mc_h5_shape_rule pr = {.ndim = 1, .max = {g->len + 1}, .names = {"T"}, .source = "the inputs"};
    int64_t dims[MC_MAX_DIMS];
    if (mc_h5_dataset_read(r, name, MC_H5_WANT_INT, &pr, dims, (void **)&g->state_positions))
        return r->err.code;
    g->n_positions = dims[0];
    for (int64_t i = 0; i < g->n_positions; i++) {
        int64_t p = g->state_positions[i];
        if (p < 0 || p > g->len)
            return mc_h5_fail(r, MC_ERR_INPUT, name, "position %lld at [%lld] is outside [0, L = %lld]", (long long)p,
                              (long long)i, (long long)g->len);
        if (i > 0 && p <= g->state_positions[i - 1])
            return mc_h5_fail(r, MC_ERR_INPUT, name,
                              "positions must be strictly increasing (%lld at [%lld] after %lld)", (long long)p,
                              (long long)i, (long long)g->state_positions[i - 1]);
    }
    return MC_ERR_NONE;
}

static enum mc_err_code read_expected(struct mc_h5_reader *r, struct mc_golden *g, const struct mc_family_shape *sh)
{
    struct mc_h5_shape_rule out = {.ndim = 3, .dims = {g->batch, g->len, sh->hidden}, .source = "the inputs"};
    int e = mc_h5_link_exists(r, "/expected");
    if (e <= 0)
        return e < 0 ? r->err.code : mc_h5_fail(r, MC_ERR_INPUT, "/expected", "missing group");
    if (mc_h5_group_check_links(r, "/expected", EXPECTED_LINKS, 4, LAYOUT_MSG))
        return r->err.code;
    if (mc_h5_array_read(r, "/expected/output", MC_H5_WANT_F64, &out, &g->output) || read_positions(r, g))
        return r->err.code;
    struct mc_h5_shape_rule conv = {.ndim = 4,
                                    .dims = {g->n_positions, g->batch, sh->conv_channels, sh->conv_kernel},
                                    .source = "the configuration and state_positions"};
    if (mc_h5_array_read(r, "/expected/conv_state", MC_H5_WANT_F64, &conv, &g->conv_state))
        return r->err.code;
    const char *name = "/expected/recurrent_state";
    if (sh->state_ndim == 0) {
        e = mc_h5_link_exists(r, name);
        if (e > 0)
            mc_h5_fail(r, MC_ERR_INPUT, name, "present, but family %s has no recurrent state",
                       mc_family_name(g->config.family));
        return r->err.code;
    }
    struct mc_h5_shape_rule st = {.ndim = 2 + sh->state_ndim,
                                  .dims = {g->n_positions, g->batch},
                                  .source = "the configuration and state_positions"};
    for (int i = 0; i < sh->state_ndim; i++)
        st.dims[2 + i] = sh->state_dims[i];
    return mc_h5_array_read(r, name, MC_H5_WANT_F64, &st, &g->recurrent_state);
}


/* The optional /probes group (golden/README.md "Stage probes"): any of the family's stages, each
 * [B][L][stage dims] float64; a name the family does not define is refused like any link outside the
 * layout. */
static enum mc_err_code read_probes(struct mc_h5_reader *r, struct mc_golden *g)
{
    struct mc_probe_spec spec[MC_PROBE_MAX];
    const char *names[MC_PROBE_MAX];
    int n = mc_probe_specs(&g->config, spec);
    int e = mc_h5_link_exists(r, "/probes");
    if (e <= 0)
        return r->err.code; /* a golden without probes is fine */
    for (int i = 0; i < n; i++)
        names[i] = spec[i].name;
    if (mc_h5_group_check_links(r, "/probes", names, n, "not a stage probe of this family (golden/README.md)"))
        return r->err.code;
    for (int i = 0; i < n; i++) {
        char path[64];
        snprintf(path, sizeof path, "/probes/%s", spec[i].name);
        e = mc_h5_link_exists(r, path);
        if (e < 0)
            return r->err.code;
        if (e == 0)
            continue;
        struct mc_h5_shape_rule rule = {.ndim = 2 + spec[i].ndim,
                                        .dims = {g->batch, g->len},
                                        .source = "the configuration and the inputs"};
        for (int d = 0; d < spec[i].ndim; d++)
            rule.dims[2 + d] = spec[i].dims[d];
        if (mc_h5_array_read(r, path, MC_H5_WANT_F64, &rule, &g->probes[i]))
            return r->err.code;
        g->has_probes = 1;
    }
    return r->err.code;
}

/* ---- the content checksum (golden/README.md "Content checksum") ------------------------------- */


static void put_u64le(struct mc_sha256 *s, uint64_t v)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    mc_sha256_update(s, b, 8);
}

static int digest_item_cmp(const void *a, const void *b)
{
    return strcmp(((const struct mc_golden_digest_item *)a)->path, ((const struct mc_golden_digest_item *)b)->path);
}

static void digest_item_add(struct mc_sha256 *s, const struct mc_golden_digest_item *it)
{
    size_t len = strlen(it->path);
    int64_t n = 1;
    put_u64le(s, (uint64_t)len);
    mc_sha256_update(s, it->path, len);
    mc_sha256_update(s, it->is_int ? "i" : "f", 1);
    put_u64le(s, (uint64_t)it->ndim);
    for (int i = 0; i < it->ndim; i++) {
        put_u64le(s, (uint64_t)it->dims[i]);
        n *= it->dims[i];
    }
    uint8_t buf[8 * 512];
    size_t used = 0;
    for (int64_t i = 0; i < n; i++) {
        uint64_t v;
        if (it->f64 != NULL)
            memcpy(&v, &it->f64[i], 8);
        else if (it->i64 != NULL)
            v = (uint64_t)it->i64[i];
        else
            v = (uint64_t)(int64_t)it->u8[i];
        for (int k = 0; k < 8; k++)
            buf[used++] = (uint8_t)(v >> (8 * k));
        if (used == sizeof buf) {
            mc_sha256_update(s, buf, used);
            used = 0;
        }
    }
    mc_sha256_update(s, buf, used);
}

static struct mc_golden_digest_item item_f64(const char *path, const struct mc_array *a)
{
    return (struct mc_golden_digest_item){.path = path, .ndim = a->ndim, .dims = a->dims, .f64 = a->data};
}

void mc_golden_content_sha256(const struct mc_golden *g, char out[MC_SHA256_HEX_LEN + 1])
{
    struct mc_golden_digest_item items[MC_FAMILY_MAX_WEIGHTS + 8 + MC_PROBE_MAX];
    char names[MC_FAMILY_MAX_WEIGHTS][256], probe_names[MC_PROBE_MAX][64];
    struct mc_probe_spec spec[MC_PROBE_MAX];
    int n_spec = mc_probe_specs(&g->config, spec);
    int n = 0;
    int64_t mask_dims[2] = {g->batch, g->len}, pos_dims[1] = {g->n_positions};
    for (int i = 0; i < g->n_weights && i < MC_FAMILY_MAX_WEIGHTS; i++) {
        snprintf(names[i], sizeof names[i], "weights/%s", g->weights[i].name);
        items[n++] = item_f64(names[i], &g->weights[i].value);
    }
    items[n++] = item_f64("inputs/hidden_states", &g->hidden_states);
    if (g->mask != NULL)
        items[n++] = (struct mc_golden_digest_item){
            .path = "inputs/attention_mask", .is_int = 1, .ndim = 2, .dims = mask_dims, .u8 = g->mask};
    items[n++] = item_f64("expected/output", &g->output);
    items[n++] = (struct mc_golden_digest_item){
        .path = "expected/state_positions", .is_int = 1, .ndim = 1, .dims = pos_dims, .i64 = g->state_positions};
    items[n++] = item_f64("expected/conv_state", &g->conv_state);
    if (g->recurrent_state.ndim > 0)
        items[n++] = item_f64("expected/recurrent_state", &g->recurrent_state);
    for (int i = 0; i < n_spec; i++)
        if (g->probes[i].ndim > 0) {
            snprintf(probe_names[i], sizeof probe_names[i], "probes/%s", spec[i].name);
            items[n++] = item_f64(probe_names[i], &g->probes[i]);
        }
    mc_golden_digest(items, n, out);
}

void mc_golden_digest(struct mc_golden_digest_item *items, int n, char out[MC_SHA256_HEX_LEN + 1])
{
    qsort(items, (size_t)n, sizeof items[0], digest_item_cmp);
    struct mc_sha256 s;
    uint8_t d[MC_SHA256_DIGEST_BYTES];
    mc_sha256_init(&s);
    for (int i = 0; i < n; i++)
        digest_item_add(&s, &items[i]);
    mc_sha256_final(&s, d);
    mc_sha256_hex(d, out);
}

/* "family/name" for the regenerate hint: the family and the root attribute `name` the generator
 * records, else the file name without ".h5"; anything but [A-Za-z0-9._-] becomes '?'. */
static void golden_name(struct mc_h5_reader *r, const struct mc_golden *g, char *out, size_t cap)
{
    char *attr = NULL;
    const char *base = strrchr(g->path, '/');
    base = base ? base + 1 : g->path;
    size_t len = strlen(base);
    if (len > 3 && strcmp(base + len - 3, ".h5") == 0)
        len -= 3;
    if (mc_h5_attr_exists(r, "/", "name") == 1) {
        struct mc_h5_reader probe = *r; /* a bad `name` is no error: fall back to the file name */
        mc_error_clear(&probe.err);
        if (mc_h5_attr_read_string(&probe, "/", "name", &attr) == MC_ERR_NONE && attr[0] != '\0') {
            base = attr;
            len = strlen(attr);
        } else if (probe.err.code == MC_ERR_NOMEM) {
            mc_error_set(&r->err, MC_ERR_NOMEM, "%s", probe.err.msg);
        }
    }
    int n = snprintf(out, cap, "%s/%.*s", mc_family_name(g->config.family), (int)(len < 100 ? len : 100), base);
    for (char *q = out + strlen(mc_family_name(g->config.family)) + 1; n > 0 && *q; q++)
        if (!((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') || *q == '.' ||
              *q == '_' || *q == '-'))
            *q = '?';
    free(attr);
}

/* The recorded /content_sha256 must equal the digest of what was read. */
static enum mc_err_code verify_checksum(struct mc_h5_reader *r, struct mc_golden *g)
{
    char *recorded = NULL, computed[MC_SHA256_HEX_LEN + 1], name[256];
    golden_name(r, g, name, sizeof name);
    if (r->err.code != MC_ERR_NONE)
        return r->err.code;
    int e = mc_h5_attr_exists(r, "/", "content_sha256");
    if (e < 0)
        return r->err.code;
    if (e == 0)
        return mc_h5_fail(r, MC_ERR_INPUT, "/content_sha256",
                          "missing attribute: goldens of format version %d record the checksum of their content; "
                          "regenerate it with golden/generate.py regenerate %s",
                          MC_GOLDEN_FORMAT_VERSION, name);
    if (mc_h5_attr_read_string(r, "/", "content_sha256", &recorded))
        goto done;
    size_t len = strlen(recorded);
    int ok = len == MC_SHA256_HEX_LEN;
    for (size_t i = 0; ok && i < len; i++)
        ok = (recorded[i] >= '0' && recorded[i] <= '9') || (recorded[i] >= 'a' && recorded[i] <= 'f');
    if (!ok) {
        char ex[80];
        snprintf(ex, sizeof ex, "%.70s%s", recorded, len > 70 ? "..." : "");
        for (char *q = ex; *q; q++)
            if ((unsigned char)*q < 0x20 || *q == 0x7f)
                *q = '?';
        mc_h5_fail(r, MC_ERR_INPUT, "/content_sha256", "must be %d lower-case hex digits (got '%s')",
                   MC_SHA256_HEX_LEN, ex);
        goto done;
    }
    mc_golden_content_sha256(g, computed);
    if (strcmp(recorded, computed) != 0)
        mc_h5_fail(r, MC_ERR_INPUT, NULL,
                   "content checksum mismatch (recorded %s, computed %s): the golden was modified after "
                   "generation; regenerate it with golden/generate.py regenerate %s",
                   recorded, computed, name);
    else
        memcpy(g->content_sha256, computed, sizeof computed);
done:
    free(recorded);
    return r->err.code;
}

static enum mc_err_code golden_load(const char *path, struct mc_golden *g, int verify, struct mc_error *err)
{
    struct mc_h5_reader r;
    memset(g, 0, sizeof *g);

    if (mc_h5_open(&r, path))
        goto done;
    if ((g->path = mc_strdup(path)) == NULL) {
        mc_h5_fail_nomem(&r, NULL);
        goto done;
    }
    if (read_header(&r, g) || read_config(&r, g) ||
        mc_h5_group_check_links(&r, "/", ROOT_LINKS, 5, LAYOUT_MSG) ||
        read_weights(&r, g))
        goto done;
    struct mc_family_shape shape;
    mc_family_shape(&g->config, &shape);
    if (read_inputs(&r, g, &shape) || read_expected(&r, g, &shape) || read_probes(&r, g) ||
        (verify && verify_checksum(&r, g)))
        goto done;
    g->output_max = mc_array_max_abs(&g->output);
    g->conv_max = mc_array_max_abs(&g->conv_state);
    g->state_max = mc_array_max_abs(&g->recurrent_state);
done:
    mc_h5_close(&r);
    if (r.err.code != MC_ERR_NONE) {
        mc_golden_free(g);
        return mc_error_set(err, r.err.code, "%s", r.err.msg);
    }
    return MC_ERR_NONE;
}

enum mc_err_code mc_golden_load(const char *path, struct mc_golden *g, struct mc_error *err)
{
    return golden_load(path, g, 1, err);
}

enum mc_err_code mc_golden_file_content_sha256(const char *path, char out[MC_SHA256_HEX_LEN + 1],
                                               struct mc_error *err)
{
    struct mc_golden g;
    out[0] = '\0';
    enum mc_err_code rc = golden_load(path, &g, 0, err);
    if (rc == MC_ERR_NONE)
        mc_golden_content_sha256(&g, out);
    mc_golden_free(&g);
    return rc;
}

void mc_golden_free(struct mc_golden *g)
{
    if (g == NULL)
        return;
    free(g->path);
    for (int i = 0; i < g->n_weights; i++) {
        free(g->weights[i].name);
        free(g->weights[i].value.data);
    }
    free(g->weights);
    free(g->hidden_states.data);
    free(g->mask);
    free(g->output.data);
    free(g->state_positions);
    free(g->conv_state.data);
    free(g->recurrent_state.data);
    for (int i = 0; i < MC_PROBE_MAX; i++)
        free(g->probes[i].data);
    free(g->generator);
    free(g->generator_version);
    memset(g, 0, sizeof *g);
}

int64_t mc_golden_position_index(const struct mc_golden *g, int64_t position)
{
    int64_t lo = 0, hi = g->n_positions - 1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (g->state_positions[mid] == position)
            return mid;
        if (g->state_positions[mid] < position)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

const struct mc_array *mc_golden_weight(const struct mc_golden *g, const char *name)
{
    for (int i = 0; i < g->n_weights; i++)
        if (g->weights[i].name != NULL && strcmp(g->weights[i].name, name) == 0)
            return &g->weights[i].value;
    return NULL;
}
