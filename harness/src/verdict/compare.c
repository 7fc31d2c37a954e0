/* compare.c — see compare.h. */
#include "verdict/compare.h"

#include "base/dtype.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* 1 for a NaN with no payload: only the quiet bit of the fraction set (compare.h n_nan_bare). */
static int bare_nan(double a)
{
    uint64_t bits;
    memcpy(&bits, &a, sizeof bits);
    return isnan(a) && (bits & 0x000fffffffffffffull) == 0x0008000000000000ull;
}

static void profile_clear(struct mc_position_profile *p)
{
    p->width = 1;
    p->n = 0;
    for (int b = 0; b < MC_PROFILE_BUCKETS; b++) {
        p->max_abs_err[b] = -1.0f;
        p->headroom[b] = 0.0f;
    }
}

void mc_compare_stats_init(struct mc_compare_stats *s)
{
    memset(s, 0, sizeof *s);
    s->first_fail_token = -1;
    s->first_fail_batch = -1;
    profile_clear(&s->profile);
}

/* A non-negative double as a float, +inf past the float range (the conversion itself is undefined there). */
static float to_float(double v)
{
    return v > FLT_MAX ? INFINITY : (float)v;
}

/* Doubles the bucket width: buckets 2b and 2b+1 fold into b, keeping the max. */
static void profile_fold(struct mc_position_profile *p)
{
    for (int b = 0; b < MC_PROFILE_BUCKETS / 2; b++) {
        float e0 = p->max_abs_err[2 * b], e1 = p->max_abs_err[2 * b + 1];
        float h0 = p->headroom[2 * b], h1 = p->headroom[2 * b + 1];
        p->max_abs_err[b] = e0 > e1 ? e0 : e1;
        p->headroom[b] = h0 > h1 ? h0 : h1;
    }
    for (int b = MC_PROFILE_BUCKETS / 2; b < MC_PROFILE_BUCKETS; b++) {
        p->max_abs_err[b] = -1.0f;
        p->headroom[b] = 0.0f;
    }
    p->width *= 2;
    p->n = (p->n + 1) / 2;
}

/* Widens the buckets until position `last` fits. */
static void profile_fit(struct mc_position_profile *p, int64_t last)
{
    if (p->width <= 0)
        profile_clear(p);
    while (last / p->width >= MC_PROFILE_BUCKETS)
        profile_fold(p);
}

/* Records one element at a position that fits (profile_fit). */
static void profile_note(struct mc_position_profile *p, int64_t pos, double abs_err, double h)
{
    if (pos < 0)
        return;
    int b = (int)(pos / p->width);
    float e = to_float(abs_err), hf = to_float(h);
    if (e > p->max_abs_err[b])
        p->max_abs_err[b] = e;
    if (hf > p->headroom[b])
        p->headroom[b] = hf;
    if (b + 1 > p->n)
        p->n = b + 1;
}

int64_t mc_compare_profile_position(const struct mc_position_profile *p, int b)
{
    return (int64_t)b * (p->width > 0 ? p->width : 1);
}

static void profile_merge(struct mc_position_profile *into, const struct mc_position_profile *from)
{
    if (from->n == 0 || from->width <= 0)
        return;
    struct mc_position_profile f = *from;
    if (into->width <= 0)
        profile_clear(into);
    while (into->width < f.width)
        profile_fold(into);
    while (f.width < into->width)
        profile_fold(&f);
    for (int b = 0; b < f.n; b++) {
        if (f.max_abs_err[b] > into->max_abs_err[b])
            into->max_abs_err[b] = f.max_abs_err[b];
        if (f.headroom[b] > into->headroom[b])
            into->headroom[b] = f.headroom[b];
    }
    if (f.n > into->n)
        into->n = f.n;
}

/* Headroom of one element: |a-b| / (atol + rtol|b|), with 0/0 = 0 and x/0 = +inf. */
static double element_headroom(double diff, double bound)
{
    if (bound > 0.0)
        return diff / bound;
    return diff == 0.0 ? 0.0 : INFINITY;
}

static void record_worst(struct mc_compare_stats *s, const struct mc_compare_view *v, int64_t flat, double a, double b)
{
    int64_t rem = flat;
    s->has_worst = 1;
    s->worst_ndim = v->ndim;
    for (int d = v->ndim - 1; d >= 0; d--) {
        int64_t idx = rem % v->dims[d];
        rem /= v->dims[d];
        if (d == v->token_axis)
            idx += v->token_offset;
        if (d == 0)
            idx += v->batch_offset;
        s->worst_index[d] = idx;
        snprintf(s->worst_names[d], MC_DIM_NAME_LEN, "%s", v->dim_names[d] ? v->dim_names[d] : "dim");
    }
    s->worst_actual = a;
    s->worst_expected = b;
}

/* Walks a view's flat indices in order and keeps each one's token (along token_axis) and batch row
 * (dimension 0) on the way: a division per dimension per element cost more than the comparison. */
struct walk {
    int64_t tok_stride, tok_dim, bat_stride; /* elements per token step, tokens, elements per row */
    int64_t in_tok, in_bat, tok, bat;        /* where the walk is */
};

static void walk_init(struct walk *w, const struct mc_compare_view *v)
{
    memset(w, 0, sizeof *w);
    w->tok_stride = INT64_MAX; /* no token axis: the token stays 0 */
    w->tok_dim = 1;
    w->bat_stride = 1;
    for (int d = 1; d < v->ndim; d++)
        w->bat_stride *= v->dims[d];
    if (v->token_axis >= 0 && v->token_axis < v->ndim) {
        w->tok_stride = 1;
        for (int d = v->token_axis + 1; d < v->ndim; d++)
            w->tok_stride *= v->dims[d];
        w->tok_dim = v->dims[v->token_axis];
    }
}

static void walk_next(struct walk *w)
{
    if (++w->in_tok == w->tok_stride) {
        w->in_tok = 0;
        if (++w->tok == w->tok_dim)
            w->tok = 0;
    }
    if (++w->in_bat == w->bat_stride) {
        w->in_bat = 0;
        w->bat++;
    }
}

/* Moves the walk on by `run` elements, none of which crosses a token step or a batch row. */
static void walk_advance(struct walk *w, int64_t run)
{
    w->in_tok += run;
    if (w->in_tok == w->tok_stride) {
        w->in_tok = 0;
        if (++w->tok == w->tok_dim)
            w->tok = 0;
    }
    w->in_bat += run;
    if (w->in_bat == w->bat_stride) {
        w->in_bat = 0;
        w->bat++;
    }
}

static void note_failure(struct mc_compare_stats *s, int64_t token, int64_t batch)
{
    s->n_fail++;
    if (s->first_fail_token < 0 || token < s->first_fail_token) {
        s->first_fail_token = token;
        s->first_fail_batch = batch;
    }
}

/* A non-finite element fails with headroom +inf; the first one seen stays the worst element. Returns 1
 * when this one became the worst (its index recorded). */
static int note_worst_nonfinite(struct mc_compare_stats *s, const struct mc_compare_view *v, int64_t flat, double a,
                                double b, int64_t token, int64_t batch)
{
    note_failure(s, token, batch);
    profile_note(&s->profile, token, INFINITY, INFINITY);
    int worst_is_nonfinite = s->has_worst && (!isfinite(s->worst_actual) || !isfinite(s->worst_expected));
    if (!worst_is_nonfinite) {
        s->headroom = INFINITY;
        record_worst(s, v, flat, a, b);
        return 1;
    }
    return 0;
}

double mc_tolerance_atol_at(struct mc_tolerance tol, double M)
{
    return tol.atol + (tol.atol_scale > 0.0 ? tol.atol_scale * M : 0.0);
}

void mc_compare_accumulate(const double *actual, const double *expected, const struct mc_compare_view *v,
                           struct mc_tolerance tol, struct mc_compare_stats *s)
{
    int64_t n = 1;
    for (int d = 0; d < v->ndim; d++)
        n *= v->dims[d];
    int64_t len_tokens = v->token_axis >= 0 ? v->dims[v->token_axis] : 1;
    if (n > 0)
        profile_fit(&s->profile, v->token_offset + len_tokens - 1);
    /* M (case/tolerance.h): the array's own largest compared |b| is needed before the comparison only when
     * the tolerance scales with it; otherwise it is gathered on the way, for the stats */
    double M = tol.magnitude, seen = 0.0;
    struct walk w;
    walk_init(&w, v);
    for (int64_t i = 0; tol.atol_scale > 0.0 && i < n; i++, walk_next(&w)) {
        if (v->valid != NULL && v->token_axis >= 0 && !v->valid[w.bat * len_tokens + w.tok])
            continue;
        if (isfinite(expected[i]) && fabs(expected[i]) > M)
            M = fabs(expected[i]);
    }
    tol.atol = mc_tolerance_atol_at(tol, M);
    if (tol.atol > s->atol_applied)
        s->atol_applied = tol.atol;
    /*
     * The elements go in runs that share one token and one batch row (a token step's channels): the
     * position profile, the first failing token and the padding mask are settled once a run, and the
     * worst element's index is spelled out once at the end. The values are those of an element-by-element
     * walk: profile buckets and failure notes keep maxima and the smallest token, the same in any grouping.
     */
    walk_init(&w, v);
    int64_t pending_worst = -1; /* flat index of a finite worst element whose index is not yet recorded */
    for (int64_t i = 0; i < n;) {
        int64_t run = n - i;
        if (w.tok_stride - w.in_tok < run)
            run = w.tok_stride - w.in_tok;
        if (w.bat_stride - w.in_bat < run)
            run = w.bat_stride - w.in_bat;
        const int64_t token = (v->token_axis >= 0 ? w.tok : 0) + v->token_offset, batch = w.bat + v->batch_offset;
        const int64_t end = i + run;
        if (v->valid != NULL && v->token_axis >= 0 && !v->valid[w.bat * len_tokens + w.tok]) {
            /* padding: not compared, but it must be finite */
            for (; i < end; i++) {
                const double a = actual[i];
                if (!isfinite(a)) {
                    s->n_nonfinite++;
                    s->n_nan += isnan(a) ? 1 : 0;
                    s->n_nan_bare += bare_nan(a);
                    if (note_worst_nonfinite(s, v, i, a, expected[i], token, batch))
                        pending_worst = -1;
                }
            }
            walk_advance(&w, run);
            continue;
        }
        double run_err = -1.0, run_h = -1.0;
        int64_t run_fail = 0;
        for (; i < end; i++) {
            const double a = actual[i], b = expected[i];
            s->n_elems++;
            if (isfinite(b) && fabs(b) > seen)
                seen = fabs(b);
            if (isnan(a)) {
                s->n_nan++;
                s->n_nan_bare += bare_nan(a);
            }
            if (!isfinite(a) || !isfinite(b)) {
                /* no non-finite pair passes, equal infinities included: a mixer's outputs and caches are
                 * finite by contract, and a backend compared with itself (determinism, consistency) must
                 * not pass an overflow because both runs overflowed */
                s->n_nonfinite++;
                if (note_worst_nonfinite(s, v, i, a, b, token, batch))
                    pending_worst = -1;
                continue;
            }
            const double diff = fabs(a - b);
            const double bound = tol.atol + tol.rtol * fabs(b);
            const double h = element_headroom(diff, bound);
            if (diff > s->max_abs_err)
                s->max_abs_err = diff;
            if (b != 0.0 && diff / fabs(b) > s->max_rel_err)
                s->max_rel_err = diff / fabs(b);
            if (!(diff <= bound)) {
                run_fail++;
                /* the grid of the failing values only: a check whose passing part (an exact prefill) sits
                 * beside a failing one (a decode that rounds its output) shows the rounding of the part that
                 * fails; one off-grid value settles it (most f32 values: at the first). A zero is on every
                 * grid (an unwritten or zeroed output says nothing of a rounding): not read. */
                if (a != 0.0) {
                    s->n_grid_read++;
                    if (s->n_offgrid_bf16 == 0)
                        s->n_offgrid_bf16 = !mc_dtype_exact_bf16(a);
                    if (s->n_offgrid_f16 == 0)
                        s->n_offgrid_f16 = !mc_dtype_exact_f16(a);
                }
            }
            if (diff > run_err)
                run_err = diff;
            if (h > run_h)
                run_h = h;
            if (!s->has_worst || h > s->headroom) {
                s->has_worst = 1;
                s->headroom = h;
                s->worst_actual = a;
                s->worst_expected = b;
                pending_worst = i;
            }
            s->sum_ab += a * b;
            s->sum_aa += a * a;
            s->sum_bb += b * b;
            s->sum_err2 += (a - b) * (a - b);
        }
        if (run_fail > 0) {
            note_failure(s, token, batch);
            s->n_fail += run_fail - 1;
        }
        if (run_err >= 0.0)
            profile_note(&s->profile, token, run_err, run_h);
        walk_advance(&w, run);
    }
    if (pending_worst >= 0)
        record_worst(s, v, pending_worst, s->worst_actual, s->worst_expected);
    if (seen > M)
        M = seen;
    if (M > s->max_abs_expected)
        s->max_abs_expected = M;
}

void mc_compare_stats_merge(struct mc_compare_stats *into, const struct mc_compare_stats *from)
{
    if (from->has_worst && (!into->has_worst || from->headroom > into->headroom)) {
        into->has_worst = 1;
        into->headroom = from->headroom;
        into->worst_ndim = from->worst_ndim;
        memcpy(into->worst_index, from->worst_index, sizeof into->worst_index);
        memcpy(into->worst_names, from->worst_names, sizeof into->worst_names);
        into->worst_actual = from->worst_actual;
        into->worst_expected = from->worst_expected;
    }
    if (from->first_fail_token >= 0 &&
        (into->first_fail_token < 0 || from->first_fail_token < into->first_fail_token)) {
        into->first_fail_token = from->first_fail_token;
        into->first_fail_batch = from->first_fail_batch;
    }
    into->n_elems += from->n_elems;
    into->n_fail += from->n_fail;
    into->n_nonfinite += from->n_nonfinite;
    into->n_nan += from->n_nan;
    into->n_nan_bare += from->n_nan_bare;
    into->n_grid_read += from->n_grid_read;
    into->n_offgrid_bf16 += from->n_offgrid_bf16;
    into->n_offgrid_f16 += from->n_offgrid_f16;
    if (from->max_abs_err > into->max_abs_err)
        into->max_abs_err = from->max_abs_err;
    if (from->max_rel_err > into->max_rel_err)
        into->max_rel_err = from->max_rel_err;
    if (from->max_abs_expected > into->max_abs_expected)
        into->max_abs_expected = from->max_abs_expected;
    if (from->atol_applied > into->atol_applied)
        into->atol_applied = from->atol_applied;
    into->sum_ab += from->sum_ab;
    into->sum_aa += from->sum_aa;
    into->sum_bb += from->sum_bb;
    into->sum_err2 += from->sum_err2;
    profile_merge(&into->profile, &from->profile);
}

int mc_compare_passed(const struct mc_compare_stats *s)
{
    return s->n_fail == 0 && s->n_nonfinite == 0;
}

double mc_compare_cosine(const struct mc_compare_stats *s)
{
    if (s->sum_aa == 0.0 && s->sum_bb == 0.0)
        return 1.0;
    if (s->sum_aa == 0.0 || s->sum_bb == 0.0)
        return 0.0;
    return s->sum_ab / (sqrt(s->sum_aa) * sqrt(s->sum_bb));
}

double mc_compare_nmse(const struct mc_compare_stats *s)
{
    if (s->sum_bb == 0.0)
        return s->sum_err2 == 0.0 ? 0.0 : INFINITY;
    return s->sum_err2 / s->sum_bb;
}

void mc_compare_format_index(const struct mc_compare_stats *s, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    if (!s->has_worst)
        return;
    for (int d = 0; d < s->worst_ndim && used < len; d++) {
        int w = snprintf(buf + used, len - used, "%s%s=%lld", d ? " " : "", s->worst_names[d],
                         (long long)s->worst_index[d]);
        if (w < 0)
            break;
        used += (size_t)w;
    }
}
