/* determinism.c — see determinism.h. */
#include "scenario/determinism.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "family/family.h"
#include "scenario/serving.h"

/* The calls of one pass, in the order they run. */
enum { CALL_NO_CACHE, CALL_PREFILL, CALL_MULTI, CALL_DECODE, CALL_PACKED, CALL_MIXED, CALL_POOL, N_CALLS };

/* What the first thread count's first run of a call gave, for the second thread count to match. */
struct det_record {
    int have;
    double *y;
    int64_t ny;
    double *conv, *state;           /* a forward on a cache: the cache after it (float64), else NULL */
    unsigned char *pconv, *pstate;  /* a packed call: the pool after it (raw export bytes), else NULL */
};

struct det {
    struct mc_session *s;
    int takes_threads;  /* the backend has MC_CAP_THREADS */
    int32_t threads[2]; /* mc_model_desc.threads of each pass */
    int n_passes, pass;
    int golden_outputs; /* the golden has no padding: the packed calls' outputs are compared with it */
    struct det_record rec[N_CALLS];
};

static void threads_text(int32_t t, char *buf, size_t len)
{
    if (t <= 0)
        snprintf(buf, len, "the backend's default thread count");
    else
        snprintf(buf, len, "%d thread%s", (int)t, t == 1 ? "" : "s");
}

/* "<what> at 2 threads" (the first run, against the golden). */
static void label_at(const struct det *d, const char *what, char *buf, size_t len)
{
    char t[64];
    threads_text(d->threads[d->pass], t, sizeof t);
    if (d->takes_threads)
        snprintf(buf, len, "%s at %s", what, t);
    else
        snprintf(buf, len, "%s", what);
}

/* "<what>, twice at 2 threads" (the two runs of one pass). */
static void label_twice(const struct det *d, const char *what, char *buf, size_t len)
{
    char t[64];
    threads_text(d->threads[d->pass], t, sizeof t);
    if (d->takes_threads)
        snprintf(buf, len, "%s, twice at %s", what, t);
    else
        snprintf(buf, len, "%s, twice (the backend takes no thread count)", what);
}

/* "<what> at 2 threads against the same at 1 thread" (the second pass's first run with the first's). */
static void label_across(const struct det *d, const char *what, char *buf, size_t len)
{
    char t[64], t0[64];
    threads_text(d->threads[d->pass], t, sizeof t);
    threads_text(d->threads[0], t0, sizeof t0);
    snprintf(buf, len, "%s at %s against the same at %s", what, t, t0);
}

/* Failing and compared elements of the "determinism" tensor so far. */
static void tally(const struct mc_session *s, int64_t *fail, int64_t *elems)
{
    *fail = *elems = 0;
    for (int i = 0; i < s->res->n_tensors; i++)
        if (strcmp(s->res->tensors[i].name, "determinism") == 0) {
            *fail = s->res->tensors[i].stats.n_fail;
            *elems = s->res->tensors[i].stats.n_elems;
        }
}

/* After the comparisons of run `label` (begun at tally fail0, elems0): the first that differed names
 * the check's nondeterminism. */
static void note(struct mc_session *s, const char *label, int64_t fail0, int64_t elems0)
{
    int64_t fail, elems;
    tally(s, &fail, &elems);
    if (fail > fail0 && s->nondeterminism[0] == '\0')
        snprintf(s->nondeterminism, sizeof s->nondeterminism, "%s: %lld of %lld elements differ", label,
                 (long long)(fail - fail0), (long long)(elems - elems0));
}

static struct mc_slice rows_all(const struct mc_golden *g, int64_t t0, int64_t len)
{
    struct mc_slice sl = {.r0 = 0, .nrows = g->batch, .t0 = t0, .len = len, .masked = 1, .x = NULL};
    return sl;
}

static void record_free(struct det_record *r)
{
    free(r->y);
    free(r->conv);
    free(r->state);
    free(r->pconv);
    free(r->pstate);
    memset(r, 0, sizeof *r);
}

/* One forward of `sl` run twice, on two copies of `from` (or without a cache when from is NULL): the
 * first run against the golden, the source unchanged by it, the two runs' outputs and caches bit for
 * bit, and in the second pass the first run's against the first pass's. With `keep`, the first run's
 * cache is moved there. */
static void forward_twice(struct det *d, int call, const char *what, const struct mc_session_cache *from,
                          const struct mc_slice *sl, struct mc_session_cache *keep)
{
    struct mc_session *s = d->s;
    struct mc_session_cache a = {0}, b = {0};
    int64_t ny = sl->nrows * sl->len * s->shape.hidden;
    int64_t nconv = from ? from->batch * s->shape.conv_channels * s->shape.conv_kernel : 0;
    int64_t nstate = from ? from->batch * mc_family_state_elems(&s->shape) : 0;
    double *y1 = mc_session_calloc((size_t)ny, sizeof *y1, s), *y2 = mc_session_calloc((size_t)ny, sizeof *y2, s);
    double *conv = from ? mc_session_calloc((size_t)nconv, sizeof *conv, s) : NULL;
    double *state = nstate ? mc_session_calloc((size_t)nstate, sizeof *state, s) : NULL;
    double *src_conv = from ? mc_session_calloc((size_t)nconv, sizeof *src_conv, s) : NULL;
    double *src_state = nstate ? mc_session_calloc((size_t)nstate, sizeof *src_state, s) : NULL;
    char label[200];
    int64_t fail0, elems0;
    if (y1 == NULL || y2 == NULL || (from && (conv == NULL || src_conv == NULL)) ||
        (nstate && (state == NULL || src_state == NULL)))
        goto out;
    if (from && (mc_session_cache_read(s, from, src_conv, src_state) != 0 || mc_session_cache_dup(s, from, &a) != 0 ||
                 mc_session_cache_dup(s, from, &b) != 0))
        goto out;
    label_at(d, what, label, sizeof label);
    int tok = mc_session_run_begin(s, label, NULL, 0);
    int ok = mc_session_forward(s, from ? &a : NULL, sl, y1) == 0 && mc_session_check_output(s, sl, y1) == 0;
    mc_session_run_end(s, tok);
    if (!ok)
        goto out;
    /* before the second run: a first run that changed the source makes the second differ, and that is
     * an aliasing copy, not nondeterminism */
    if (from)
        mc_session_check_source(s, from, src_conv, src_state, sl->r0, sl->t0,
                                "the cache the copies were made from, after the first ran (token)");
    if (mc_session_forward(s, from ? &b : NULL, sl, y2) != 0 ||
        (from && mc_session_cache_read(s, &a, conv, state) != 0))
        goto out;
    struct mc_compare_view v;
    mc_session_output_view(s, sl, NULL, &v);
    label_twice(d, what, label, sizeof label);
    tally(s, &fail0, &elems0);
    tok = mc_session_run_begin(s, label, NULL, 0);
    mc_session_compare(s, "determinism", MC_TENSOR_CONSISTENCY, 1, y2, y1, &v);
    if (from)
        mc_session_check_cache_same(s, &b, "determinism", conv, state, sl->r0, sl->t0 + sl->len);
    mc_session_run_end(s, tok);
    note(s, label, fail0, elems0);
    struct det_record *r = &d->rec[call];
    if (d->pass == 0) {
        record_free(r);
        *r = (struct det_record){.have = 1, .y = y1, .ny = ny, .conv = conv, .state = state};
        y1 = NULL;
        conv = state = NULL;
    } else if (r->have && r->ny == ny && !s->broken) {
        label_across(d, what, label, sizeof label);
        tally(s, &fail0, &elems0);
        tok = mc_session_run_begin(s, label, NULL, 0);
        mc_session_compare(s, "determinism", MC_TENSOR_CONSISTENCY, 1, y1, r->y, &v);
        if (from && r->conv != NULL)
            mc_session_check_cache_same(s, &a, "determinism", r->conv, r->state, sl->r0, sl->t0 + sl->len);
        mc_session_run_end(s, tok);
        note(s, label, fail0, elems0);
    }
    if (keep != NULL) {
        *keep = a;
        a.h = NULL;
    }
out:
    mc_session_cache_drop(s, &a);
    mc_session_cache_drop(s, &b);
    free(y1);
    free(y2);
    free(conv);
    free(state);
    free(src_conv);
    free(src_state);
}

/* Row by row, raw pool images `now` against `before` (pools of S rows) under tensor `name`. */
static void pool_rows_same(struct mc_session *s, const char *name, const unsigned char *conv_now,
                           const unsigned char *state_now, const unsigned char *conv_before,
                           const unsigned char *state_before, int64_t S)
{
    for (int64_t r = 0; r < S && !s->broken; r++)
        mc_session_check_row_bytes(s, name, conv_now, state_now, conv_before, state_before, r);
}

/* One packed call of seq [n] on two copies of the pool `src`, as forward_twice does a forward: the
 * first run's outputs against the golden (where it has no padding), the source pool unchanged by it
 * (raw bytes, NaN rows included), the two runs' outputs and whole pools bit for bit, and in the second
 * pass the first run's against the first pass's. With `keep`, the first run's pool is moved there. */
static void packed_twice(struct det *d, int call, const char *what, const struct mc_session_cache *src,
                         const struct mc_packed_seq *seq, int64_t n, struct mc_session_cache *keep)
{
    struct mc_session *s = d->s;
    struct mc_session_cache a = {0}, b = {0};
    int64_t S = src->batch, D = s->shape.hidden, T = 0;
    for (int64_t i = 0; i < n; i++)
        T += seq[i].len;
    size_t esz = mc_session_export_size(s);
    size_t nc = (size_t)(S * s->shape.conv_channels * s->shape.conv_kernel);
    size_t ns = (size_t)(S * mc_family_state_elems(&s->shape));
    double *y1 = mc_session_calloc((size_t)(T * D), sizeof *y1, s);
    double *y2 = mc_session_calloc((size_t)(T * D), sizeof *y2, s);
    unsigned char *img[8] = {0}; /* conv, state of: the source before, the source after, run a, run b */
    for (int k = 0; k < 8; k += 2) {
        img[k] = mc_session_calloc(nc, esz, s);
        img[k + 1] = ns ? mc_session_calloc(ns, esz, s) : NULL;
    }
    char label[200];
    int64_t fail0, elems0;
    int ok = y1 != NULL && y2 != NULL;
    for (int k = 0; k < 8; k++)
        ok = ok && (img[k] != NULL || (k % 2 == 1 && ns == 0));
    if (!ok || mc_session_cache_read_raw(s, src, img[0], img[1]) != 0 || mc_session_cache_dup(s, src, &a) != 0 ||
        mc_session_cache_dup(s, src, &b) != 0)
        goto out;
    label_at(d, what, label, sizeof label);
    int tok = mc_session_run_begin(s, label, NULL, 0);
    ok = mc_session_forward_packed(s, &a, seq, n, y1) == 0;
    for (int64_t i = 0, off = 0; ok && d->golden_outputs && i < n && !s->broken; off += seq[i].len, i++) {
        if (seq[i].len == 0)
            continue;
        struct mc_slice sl = {.r0 = seq[i].row, .nrows = 1, .t0 = seq[i].t0, .len = seq[i].len, .masked = 0};
        mc_session_check_output(s, &sl, y1 + off * D);
    }
    mc_session_run_end(s, tok);
    if (!ok || mc_session_cache_read_raw(s, src, img[2], img[3]) != 0)
        goto out;
    tok = mc_session_run_begin(s, "the pool the copies were made from, after the first ran", NULL, 0);
    pool_rows_same(s, "snapshot", img[2], img[3], img[0], img[1], S);
    mc_session_run_end(s, tok);
    if (mc_session_forward_packed(s, &b, seq, n, y2) != 0 || mc_session_cache_read_raw(s, &a, img[4], img[5]) != 0 ||
        mc_session_cache_read_raw(s, &b, img[6], img[7]) != 0)
        goto out;
    struct mc_slice whole = {.r0 = 0, .nrows = 1, .t0 = 0, .len = T, .masked = 0};
    struct mc_compare_view v;
    mc_session_output_view(s, &whole, NULL, &v);
    label_twice(d, what, label, sizeof label);
    tally(s, &fail0, &elems0);
    tok = mc_session_run_begin(s, label, NULL, 0);
    mc_session_compare(s, "determinism", MC_TENSOR_CONSISTENCY, 1, y2, y1, &v);
    pool_rows_same(s, "determinism", img[6], img[7], img[4], img[5], S);
    mc_session_run_end(s, tok);
    note(s, label, fail0, elems0);
    struct det_record *r = &d->rec[call];
    if (d->pass == 0) {
        record_free(r);
        *r = (struct det_record){.have = 1, .y = y1, .ny = T * D, .pconv = img[4], .pstate = img[5]};
        y1 = NULL;
        img[4] = img[5] = NULL;
    } else if (r->have && r->ny == T * D && !s->broken) {
        label_across(d, what, label, sizeof label);
        tally(s, &fail0, &elems0);
        tok = mc_session_run_begin(s, label, NULL, 0);
        mc_session_compare(s, "determinism", MC_TENSOR_CONSISTENCY, 1, y1, r->y, &v);
        pool_rows_same(s, "determinism", img[4], img[5], r->pconv, r->pstate, S);
        mc_session_run_end(s, tok);
        note(s, label, fail0, elems0);
    }
    if (keep != NULL) {
        *keep = a;
        a.h = NULL;
    }
out:
    mc_session_cache_drop(s, &a);
    mc_session_cache_drop(s, &b);
    free(y1);
    free(y2);
    for (int k = 0; k < 8; k++)
        free(img[k]);
}

static void packed_what(const char *call, const struct mc_packed_seq *seq, int64_t n, int64_t S, char *buf,
                        size_t len)
{
    int64_t T = 0;
    for (int64_t i = 0; i < n; i++)
        T += seq[i].len;
    snprintf(buf, len, "forward_packed, the %s (%lld sequences, %lld tokens, pool of %lld)", call, (long long)n,
             (long long)T, (long long)S);
}

/* The packed calls on a pool of S = 2B + 4 rows: golden row b lives in slot 2b + 1 (sparse, the
 * sequences of one call on slots apart), the even slots are fresh ones' and, in the slot-pool call,
 * NaN. */
static void packed_calls(struct det *d)
{
    struct mc_session *s = d->s;
    const struct mc_golden *g = s->g;
    int64_t B = g->batch, L = g->len, P = s->ctx->spec->prefill, S = 2 * B + 4;
    struct mc_session_cache pool = {0}, pp = {0}, sp = {0};
    struct mc_packed_seq *seq = mc_session_calloc((size_t)(B + 2), sizeof *seq, s);
    size_t esz = mc_session_export_size(s);
    int64_t nc = s->shape.conv_channels * s->shape.conv_kernel, ns = mc_family_state_elems(&s->shape);
    unsigned char *conv = mc_session_calloc((size_t)(S * nc), esz, s);
    unsigned char *state = ns ? mc_session_calloc((size_t)(S * ns), esz, s) : NULL;
    char what[160];
    int64_t n = 0;
    if (seq == NULL || conv == NULL || (ns && state == NULL))
        goto out;
    /* the packed call: every row's first P tokens fresh, and row 0 whole, on a zero pool */
    for (int64_t b = 0; b < B; b++)
        seq[n++] = (struct mc_packed_seq){.row = b, .t0 = 0, .len = P, .slot = 2 * b + 1, .resume = 0};
    seq[n++] = (struct mc_packed_seq){.row = 0, .t0 = 0, .len = L, .slot = S - 1, .resume = 0};
    packed_what("packed call", seq, n, S, what, sizeof what);
    if (mc_session_cache_new(s, S, &pool) != 0)
        goto out;
    packed_twice(d, CALL_PACKED, what, &pool, seq, n, &pp);
    if (pp.h == NULL || s->broken)
        goto out;
    /* the mixed step: a one-token prefill, then each row from its slot, a decode (even rows) or the
     * rest of the row (odd ones), with a 3-token prefill after the first */
    n = 0;
    seq[n++] = (struct mc_packed_seq){.row = 0, .t0 = 0, .len = 1, .slot = 0, .resume = 0};
    for (int64_t b = 0; b < B; b++) {
        seq[n++] = (struct mc_packed_seq){.row = b, .t0 = P, .len = b % 2 ? L - P : 1, .slot = 2 * b + 1, .resume = 1};
        if (b == 0)
            seq[n++] = (struct mc_packed_seq){.row = B - 1, .t0 = 0, .len = 3, .slot = 2, .resume = 0};
    }
    packed_what("mixed step", seq, n, S, what, sizeof what);
    packed_twice(d, CALL_MIXED, what, &pp, seq, n, NULL);
    if (s->broken)
        goto out;
    /* the slot-pool call: the packed call's pool with every even row NaN (the payload naming the row);
     * a fresh row on NaN, even rows resuming, odd rows fresh over their own state, a zero-length one */
    if (mc_session_cache_read_raw(s, &pp, conv, state) != 0)
        goto out;
    for (int64_t r = 0; r < S; r += 2) {
        mc_serving_poison_row(conv + (size_t)(r * nc) * esz, esz, nc, r);
        if (ns)
            mc_serving_poison_row(state + (size_t)(r * ns) * esz, esz, ns, r);
    }
    if (mc_session_cache_new(s, S, &sp) != 0 || mc_session_cache_write_raw(s, &sp, conv, state) != 0)
        goto out;
    n = 0;
    seq[n++] = (struct mc_packed_seq){.row = 0, .t0 = 0, .len = L, .slot = S - 2, .resume = 0};
    for (int64_t b = 0; b < B; b++)
        seq[n++] = b % 2 == 0 ? (struct mc_packed_seq){.row = b, .t0 = P, .len = L - P, .slot = 2 * b + 1, .resume = 1}
                              : (struct mc_packed_seq){.row = b, .t0 = 0, .len = P + 1, .slot = 2 * b + 1, .resume = 0};
    seq[n++] = (struct mc_packed_seq){.row = 0, .t0 = 0, .len = 0, .slot = 0, .resume = 1};
    packed_what("slot-pool call", seq, n, S, what, sizeof what);
    packed_twice(d, CALL_POOL, what, &sp, seq, n, NULL);
out:
    mc_session_cache_drop(s, &pool);
    mc_session_cache_drop(s, &pp);
    mc_session_cache_drop(s, &sp);
    free(seq);
    free(conv);
    free(state);
}

/* Every call once at the pass's thread count (each run twice). */
static void run_pass(struct det *d)
{
    struct mc_session *s = d->s;
    const struct mc_golden *g = s->g;
    int64_t P = s->ctx->spec->prefill, L = g->len;
    struct mc_session_cache fresh = {0}, c = {0};
    char what[160];
    struct mc_slice whole = rows_all(g, 0, L), pre = rows_all(g, 0, P);
    struct mc_slice multi = rows_all(g, P, L - P), one = rows_all(g, P, 1);
    snprintf(what, sizeof what, "forward without a cache (tokens 0..%lld)", (long long)(L - 1));
    forward_twice(d, CALL_NO_CACHE, what, NULL, &whole, NULL);
    if (mc_session_cache_new(s, g->batch, &fresh) != 0)
        goto out;
    snprintf(what, sizeof what, "forward into a fresh cache (tokens 0..%lld)", (long long)(P - 1));
    forward_twice(d, CALL_PREFILL, what, &fresh, &pre, &c);
    if (c.h == NULL || s->broken)
        goto out;
    snprintf(what, sizeof what, "multi-token forward from the primed cache (tokens %lld..%lld)", (long long)P,
             (long long)(L - 1));
    forward_twice(d, CALL_MULTI, what, &c, &multi, NULL);
    snprintf(what, sizeof what, "decode step from the primed cache (token %lld)", (long long)P);
    forward_twice(d, CALL_DECODE, what, &c, &one, NULL);
    if (!s->broken && s->ops->forward_packed != NULL)
        packed_calls(d);
out:
    mc_session_cache_drop(s, &fresh);
    mc_session_cache_drop(s, &c);
}

static int has_padding(const struct mc_golden *g)
{
    for (int64_t i = 0; g->mask != NULL && i < g->batch * g->len; i++)
        if (!g->mask[i])
            return 1;
    return 0;
}

void mc_determinism_run(struct mc_session *s)
{
    struct det d = {.s = s};
    d.takes_threads = (s->ops->caps & MC_CAP_THREADS) != 0;
    d.golden_outputs = !has_padding(s->g);
    if (d.takes_threads) {
        d.threads[0] = 1;
        d.threads[1] = s->ctx->threads > 0 ? s->ctx->threads : 2;
        d.n_passes = 2;
    } else {
        d.threads[0] = s->ctx->threads;
        d.n_passes = 1;
    }
    for (d.pass = 0; d.pass < d.n_passes && !s->broken; d.pass++) {
        if (s->threads != d.threads[d.pass] || s->model == NULL) {
            s->threads = d.threads[d.pass];
            if (mc_session_model(s, 0) != MC_ERR_NONE || s->broken)
                break;
        }
        run_pass(&d);
    }
    for (int k = 0; k < N_CALLS; k++)
        record_free(&d.rec[k]);
}
