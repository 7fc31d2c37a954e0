/*
 * serving.c — the serving-path scenarios (see serving.h). Every sequence of a packed call is a token range
 * of one golden row: a fresh sequence (has_initial_state 0) starts at token 0, a resuming one
 * (has_initial_state 1) at a position the golden holds a state for, imported into its slot. Its
 * outputs are compared with the golden's outputs at its positions and its slot after the call with the
 * golden state at its end position (ends are drawn from the held positions, so every slot is checked).
 * Pool rows no sequence owns hold NaN, or another sequence's state, and must come back bit for bit.
 */
#include "scenario/serving.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "family/family.h"
#include "base/rng.h"

/* ---- helpers ------------------------------------------------------------------------------------- */

/* The held state positions in [lo, hi] into out (sorted); returns how many. */
static int64_t held_in(const struct mc_golden *g, int64_t lo, int64_t hi, int64_t *out)
{
    int64_t n = 0;
    for (int64_t i = 0; i < g->n_positions; i++)
        if (g->state_positions[i] >= lo && g->state_positions[i] <= hi)
            out[n++] = g->state_positions[i];
    return n;
}

static int64_t count_held(const struct mc_golden *g, int64_t lo, int64_t hi)
{
    int64_t n = 0;
    for (int64_t i = 0; i < g->n_positions; i++)
        n += g->state_positions[i] >= lo && g->state_positions[i] <= hi;
    return n;
}

/* A held position drawn from (lo, hi]; the caller made sure one exists. */
static int64_t draw_held(struct mc_rng *rng, const struct mc_golden *g, int64_t lo, int64_t hi, int64_t *scratch)
{
    int64_t n = held_in(g, lo + 1, hi, scratch);
    return scratch[mc_rng_below(rng, (uint64_t)n)];
}

static void shuffle(struct mc_rng *rng, int64_t *a, int64_t n)
{
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)mc_rng_below(rng, (uint64_t)(i + 1)), t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

/* 0..n-1 shuffled, into a new array (NULL: out of memory, recorded). */
static int64_t *permutation(struct mc_session *s, struct mc_rng *rng, int64_t n)
{
    int64_t *p = mc_session_calloc((size_t)n, sizeof *p, s);
    if (p == NULL)
        return NULL;
    for (int64_t i = 0; i < n; i++)
        p[i] = i;
    shuffle(rng, p, n);
    return p;
}

static int64_t conv_row_elems(const struct mc_session *s)
{
    return s->shape.conv_channels * s->shape.conv_kernel;
}

/* The golden cache of `row` at held position `pos` into row `slot` of float64 pool images. */
static void put_golden(const struct mc_session *s, double *conv, double *state, int64_t slot, int64_t row, int64_t pos)
{
    const struct mc_golden *g = s->g;
    int64_t ti = mc_golden_position_index(g, pos), nc = conv_row_elems(s), ns = mc_family_state_elems(&s->shape);
    memcpy(conv + slot * nc, g->conv_state.data + (ti * g->batch + row) * nc, (size_t)nc * sizeof *conv);
    if (ns)
        memcpy(state + slot * ns, g->recurrent_state.data + (ti * g->batch + row) * ns, (size_t)ns * sizeof *state);
}

/* Float64 images of a pool of S rows (state NULL for ShortConv), filled with NaN. */
static int pool_images(struct mc_session *s, int64_t S, double **conv, double **state)
{
    int64_t nc = S * conv_row_elems(s), ns = S * mc_family_state_elems(&s->shape);
    *conv = mc_session_calloc((size_t)nc, sizeof **conv, s);
    *state = ns ? mc_session_calloc((size_t)ns, sizeof **state, s) : NULL;
    if (*conv == NULL || (ns && *state == NULL))
        return -1;
    const double nan = mc_dtype_nan_planted();
    for (int64_t i = 0; i < nc; i++)
        (*conv)[i] = nan;
    for (int64_t i = 0; i < ns; i++)
        (*state)[i] = nan;
    return 0;
}

/* Compares every sequence's outputs y [T][D] with the golden, and (reading the pool) its slot with the
 * golden cache at its end, each under its own run label "<what> (index, row, from token, tokens, slot,
 * has_initial_state)". */
static int check_packed(struct mc_session *s, const struct mc_session_cache *pool, const struct mc_packed_seq *seq,
                        int64_t n, const double *y, const char *what)
{
    int64_t D = s->shape.hidden, off = 0, S = pool->batch;
    int64_t nc = S * conv_row_elems(s), ns = S * mc_family_state_elems(&s->shape);
    double *conv = mc_session_calloc((size_t)nc, sizeof *conv, s);
    double *state = ns ? mc_session_calloc((size_t)ns, sizeof *state, s) : NULL;
    int rc = -1;
    if (conv == NULL || (ns && state == NULL))
        goto out;
    for (int64_t i = 0; i < n && !s->broken; i++) {
        int64_t vals[6] = {i, seq[i].row, seq[i].t0, seq[i].len, seq[i].slot, seq[i].resume};
        int tok = mc_session_run_begin(s, what, vals, 6);
        if (seq[i].len > 0) {
            struct mc_slice sl = {.r0 = seq[i].row, .nrows = 1, .t0 = seq[i].t0, .len = seq[i].len, .masked = 0};
            mc_session_check_output(s, &sl, y + off * D);
        }
        mc_session_run_end(s, tok);
        off += seq[i].len;
    }
    if (mc_session_cache_read(s, pool, conv, state) != 0)
        goto out;
    for (int64_t i = 0; i < n && !s->broken; i++) {
        if (seq[i].len == 0)
            continue;
        int64_t vals[6] = {i, seq[i].row, seq[i].t0, seq[i].len, seq[i].slot, seq[i].resume};
        int tok = mc_session_run_begin(s, what, vals, 6);
        mc_session_check_row_state(s, conv, state, seq[i].slot, seq[i].row, seq[i].t0 + seq[i].len);
        mc_session_run_end(s, tok);
    }
    rc = 0;
out:
    free(conv);
    free(state);
    return rc;
}

/* One packed call and its checks (check_packed). */
static int packed_step(struct mc_session *s, struct mc_session_cache *pool, const struct mc_packed_seq *seq, int64_t n,
                       const char *what)
{
    int64_t T = 0;
    for (int64_t i = 0; i < n; i++)
        T += seq[i].len;
    double *y = mc_session_calloc((size_t)(T * s->shape.hidden), sizeof *y, s);
    int rc = -1;
    if (y != NULL && mc_session_forward_packed(s, pool, seq, n, y) == 0)
        rc = check_packed(s, pool, seq, n, y, what);
    free(y);
    return rc;
}

static void seed_rng(const struct mc_session *s, struct mc_rng *rng)
{
    mc_rng_seed(rng, s->ctx->spec->seed + s->ctx->seed_offset);
}

/* ---- packed_prefill ------------------------------------------------------------------------------ */

/* One packed call of `sequences` golden rows cut at seeded held positions, back to back (so the
 * boundaries fall inside a chunked backend's chunks); every second one (in seeded order, the first
 * fresh) resumes from the golden state at a held position inside the sequence; a pool of 2n+1 rows,
 * NaN everywhere else, slots shuffled. */
static void run_packed_prefill(struct mc_session *s)
{
    const struct mc_golden *g = s->g;
    int64_t n = s->ctx->spec->sequences, L = g->len, S = 2 * n + 1;
    struct mc_rng rng;
    struct mc_session_cache pool = {0};
    double *conv = NULL, *state = NULL;
    int64_t *perm = NULL, *scratch = mc_session_calloc((size_t)g->n_positions, sizeof *scratch, s);
    struct mc_packed_seq *seq = mc_session_calloc((size_t)n, sizeof *seq, s);
    seed_rng(s, &rng);
    if (scratch == NULL || seq == NULL || (perm = permutation(s, &rng, S)) == NULL || pool_images(s, S, &conv, &state))
        goto out;
    /* half fresh, half resuming, in seeded order after a fresh first one: with three or more, a fresh
     * sequence follows another, where a state leaking across the boundary shows */
    for (int64_t i = 0; i < n; i++)
        seq[i].resume = i % 2;
    for (int64_t i = n - 1; i > 1; i--) {
        int64_t j = 1 + (int64_t)mc_rng_below(&rng, (uint64_t)i), t = seq[i].resume;
        seq[i].resume = seq[j].resume;
        seq[j].resume = (int)t;
    }
    for (int64_t i = 0; i < n; i++) {
        seq[i].slot = perm[i];
        seq[i].row = (int64_t)mc_rng_below(&rng, (uint64_t)g->batch);
        seq[i].t0 = seq[i].resume ? draw_held(&rng, g, 0, L - 1, scratch) : 0;
        seq[i].len = draw_held(&rng, g, seq[i].t0, L, scratch) - seq[i].t0;
        if (seq[i].resume)
            put_golden(s, conv, state, seq[i].slot, seq[i].row, seq[i].t0);
    }
    if (mc_session_cache_new(s, S, &pool) == 0 && mc_session_cache_write(s, &pool, conv, state) == 0)
        packed_step(s, &pool, seq, n, "packed sequence (index, row, from token, tokens, slot, has_initial_state)");
out:
    mc_session_cache_drop(s, &pool);
    free(conv);
    free(state);
    free(perm);
    free(scratch);
    free(seq);
}

/* ---- slot_pool ----------------------------------------------------------------------------------- */

void mc_serving_poison_row(void *raw, size_t esz, int64_t elems, int64_t row)
{
    for (int64_t i = 0; i < elems; i++) {
        if (esz == sizeof(double)) {
            uint64_t bits = 0x7ff8000000000000ull | (uint64_t)(row + 1);
            memcpy((unsigned char *)raw + (size_t)i * esz, &bits, esz);
        } else {
            uint32_t bits = 0x7fc00000u | ((uint32_t)(row + 1) & 0x3fffffu);
            memcpy((unsigned char *)raw + (size_t)i * esz, &bits, esz);
        }
    }
}

enum pool_kind {
    FRESH_OVER_NAN,   /* has_initial_state 0 on a NaN slot */
    FRESH_OVER_OTHER, /* has_initial_state 0 on a slot holding another sequence's state */
    RESUME,           /* has_initial_state 1 from the golden state */
    EMPTY,            /* a zero-length sequence: its slot must not change */
};

/* A pool of `pool` rows, every row NaN-poisoned through cache_import (window and state, the NaN payload
 * naming the row), some holding other sequences' golden states; `sequences` sequences on permuted
 * sparse slots (the last row among them), fresh ones on NaN and on other states, resuming ones, and
 * one of zero length when there are four or more. Outputs and owned slots against the golden; every
 * other row byte for byte as imported ("untouched"). */
static void run_slot_pool(struct mc_session *s)
{
    const struct mc_golden *g = s->g;
    const struct mc_scenario_spec *sp = s->ctx->spec;
    int64_t n = sp->sequences, S = sp->pool, L = g->len;
    int64_t nc = conv_row_elems(s), ns = mc_family_state_elems(&s->shape);
    size_t esz = mc_session_export_size(s);
    enum mc_dtype edt = esz == sizeof(double) ? MC_DTYPE_F64 : MC_DTYPE_F32;
    struct mc_rng rng;
    struct mc_session_cache pool = {0};
    unsigned char *conv0 = mc_session_calloc((size_t)(S * nc), esz, s), *state0 = NULL;
    unsigned char *conv1 = mc_session_calloc((size_t)(S * nc), esz, s), *state1 = NULL;
    double *convf = NULL, *statef = NULL;
    int64_t *perm = NULL, *kinds = mc_session_calloc((size_t)n, sizeof *kinds, s);
    int64_t *scratch = mc_session_calloc((size_t)g->n_positions, sizeof *scratch, s);
    uint8_t *owned = mc_session_calloc((size_t)S, 1, s);
    struct mc_packed_seq *seq = mc_session_calloc((size_t)n, sizeof *seq, s);
    if (ns) {
        state0 = mc_session_calloc((size_t)(S * ns), esz, s);
        state1 = mc_session_calloc((size_t)(S * ns), esz, s);
    }
    convf = mc_session_calloc((size_t)(S * nc), sizeof *convf, s);
    statef = ns ? mc_session_calloc((size_t)(S * ns), sizeof *statef, s) : NULL;
    seed_rng(s, &rng);
    if (!conv0 || !conv1 || !kinds || !scratch || !owned || !seq || !convf || (ns && (!state0 || !state1 || !statef)) || (perm = permutation(s, &rng, S)) == NULL)
        goto out;
    for (int64_t r = 0; r < S; r++) {
        mc_serving_poison_row(conv0 + (size_t)(r * nc) * esz, esz, nc, r);
        if (ns)
            mc_serving_poison_row(state0 + (size_t)(r * ns) * esz, esz, ns, r);
    }
    /* every fourth row no sequence owns holds some golden state, finite bytes that must not change either */
    for (int64_t r = n; r < S; r += 4) {
        int64_t row = (int64_t)mc_rng_below(&rng, (uint64_t)g->batch), p = draw_held(&rng, g, 0, L, scratch);
        put_golden(s, convf, statef, 0, row, p);
        mc_dtype_from_f64(edt, convf, conv0 + (size_t)(perm[r] * nc) * esz, (size_t)nc);
        if (ns)
            mc_dtype_from_f64(edt, statef, state0 + (size_t)(perm[r] * ns) * esz, (size_t)ns);
    }
    /* the kinds in turn, shuffled; the last pool row is owned (an index computed too small misses it) */
    for (int64_t i = 0; i < n; i++)
        kinds[i] = n >= 4 ? i % 4 : i % 3;
    shuffle(&rng, kinds, n);
    int last = 0;
    for (int64_t i = 0; i < n; i++)
        last |= perm[i] == S - 1;
    if (!last)
        perm[0] = S - 1;
    for (int64_t i = 0; i < n; i++) {
        struct mc_packed_seq *q = &seq[i];
        q->slot = perm[i];
        q->row = (int64_t)mc_rng_below(&rng, (uint64_t)g->batch);
        q->resume = kinds[i] == RESUME || (kinds[i] == EMPTY && mc_rng_below(&rng, 2));
        q->t0 = kinds[i] == RESUME ? draw_held(&rng, g, 0, L - 1, scratch) : 0;
        q->len = kinds[i] == EMPTY ? 0 : draw_held(&rng, g, q->t0, L, scratch) - q->t0;
        owned[q->slot] = kinds[i] != EMPTY;
        if (kinds[i] == RESUME || kinds[i] == FRESH_OVER_OTHER) {
            /* RESUME: its own golden state; FRESH_OVER_OTHER: another row's, at another position */
            int64_t row = kinds[i] == RESUME ? q->row : (q->row + 1) % g->batch;
            int64_t p = kinds[i] == RESUME ? q->t0 : draw_held(&rng, g, 0, L, scratch);
            put_golden(s, convf, statef, 0, row, p);
            mc_dtype_from_f64(edt, convf, conv0 + (size_t)(q->slot * nc) * esz, (size_t)nc);
            if (ns)
                mc_dtype_from_f64(edt, statef, state0 + (size_t)(q->slot * ns) * esz, (size_t)ns);
        }
    }
    if (mc_session_cache_new(s, S, &pool) != 0 || mc_session_cache_write_raw(s, &pool, conv0, state0) != 0)
        goto out;
    int64_t T = 0;
    for (int64_t i = 0; i < n; i++)
        T += seq[i].len;
    double *y = mc_session_calloc((size_t)(T * s->shape.hidden), sizeof *y, s);
    if (y == NULL)
        goto out;
    if (mc_session_forward_packed(s, &pool, seq, n, y) == 0)
        check_packed(s, &pool, seq, n, y, "pool sequence (index, row, from token, tokens, slot, has_initial_state)");
    free(y);
    if (mc_session_cache_read_raw(s, &pool, conv1, state1) != 0)
        goto out;
    for (int64_t r = 0; r < S && !s->broken; r++) {
        if (owned[r])
            continue;
        int tok = mc_session_run_begin(s, "pool row no sequence owns (slot)", &r, 1);
        mc_session_check_row_bytes(s, "untouched", conv1, state1, conv0, state0, r);
        mc_session_run_end(s, tok);
    }
out:
    mc_session_cache_drop(s, &pool);
    free(conv0);
    free(conv1);
    free(state0);
    free(state1);
    free(convf);
    free(statef);
    free(perm);
    free(kinds);
    free(scratch);
    free(owned);
    free(seq);
}

/* ---- mixed_step ---------------------------------------------------------------------------------- */

/* Two each of one-token prefills, (k+1)-token prefills, decodes and k-token verify rows (the last two
 * resuming from golden states) in one call in seeded order, then a second call, in another order,
 * continuing every sequence by 1..k+1 tokens from its slot. */
static void run_mixed_step(struct mc_session *s)
{
    const struct mc_golden *g = s->g;
    int64_t k = s->ctx->spec->len, L = g->len, n = 8, S = 2 * n;
    struct mc_rng rng;
    struct mc_session_cache pool = {0};
    double *conv = NULL, *state = NULL;
    int64_t *perm = NULL, *order = NULL, *scratch = mc_session_calloc((size_t)g->n_positions, sizeof *scratch, s);
    struct mc_packed_seq *seq = mc_session_calloc((size_t)n, sizeof *seq, s);
    struct mc_packed_seq *next = mc_session_calloc((size_t)n, sizeof *next, s);
    seed_rng(s, &rng);
    if (!scratch || !seq || !next || (perm = permutation(s, &rng, S)) == NULL ||
        (order = permutation(s, &rng, n)) == NULL || pool_images(s, S, &conv, &state))
        goto out;
    for (int64_t i = 0; i < n; i++) {
        struct mc_packed_seq *q = &seq[i];
        int kind = (int)(order[i] % 4); /* 0 one-token prefill, 1 (k+1)-token prefill, 2 decode, 3 verify */
        q->slot = perm[i];
        q->row = (int64_t)mc_rng_below(&rng, (uint64_t)g->batch);
        q->resume = kind >= 2;
        q->t0 = kind == 2 ? draw_held(&rng, g, 0, L - 1, scratch) : kind == 3 ? draw_held(&rng, g, 0, L - k, scratch) : 0;
        q->len = kind == 0 || kind == 2 ? 1 : kind == 1 ? k + 1 : k;
        if (q->resume)
            put_golden(s, conv, state, q->slot, q->row, q->t0);
    }
    if (mc_session_cache_new(s, S, &pool) != 0 || mc_session_cache_write(s, &pool, conv, state) != 0 ||
        packed_step(s, &pool, seq, n,
                    "mixed call 1, sequence (index, row, from token, tokens, slot, has_initial_state)") != 0)
        goto out;
    shuffle(&rng, order, n);
    for (int64_t i = 0; i < n; i++) {
        const struct mc_packed_seq *q = &seq[order[i]];
        int64_t from = q->t0 + q->len, left = L - from, most = left < k + 1 ? left : k + 1;
        next[i] = *q;
        next[i].t0 = from;
        next[i].len = most > 0 ? 1 + (int64_t)mc_rng_below(&rng, (uint64_t)most) : 0;
        next[i].resume = 1;
    }
    packed_step(s, &pool, next, n, "mixed call 2, sequence (index, row, from token, tokens, slot, has_initial_state)");
out:
    mc_session_cache_drop(s, &pool);
    free(conv);
    free(state);
    free(perm);
    free(order);
    free(scratch);
    free(seq);
    free(next);
}

/* ---- prefix_resume ------------------------------------------------------------------------------- */

/* Split points of (lo, hi) with segment lengths 1..q+1 drawn from rng into out; returns how many. */
static int64_t draw_schedule(struct mc_rng *rng, int64_t lo, int64_t hi, int64_t q, int64_t *out)
{
    int64_t n = 0, pos = lo;
    while (pos < hi) {
        pos += 1 + (int64_t)mc_rng_below(rng, (uint64_t)(q + 1));
        if (pos < hi)
            out[n++] = pos;
    }
    return n;
}

/* Packed calls of every golden row (one sequence each, row b in slots[b]) over [lo, hi) split at
 * points [np]; the first resumes from the slots when `resume`. */
static int packed_schedule(struct mc_session *s, struct mc_session_cache *pool, const int64_t *slots, int64_t lo,
                           int64_t hi, const int64_t *points, int64_t np, int resume, const char *what)
{
    int64_t B = s->g->batch;
    struct mc_packed_seq *seq = mc_session_calloc((size_t)B, sizeof *seq, s);
    int rc = seq == NULL ? -1 : 0;
    for (int64_t j = 0, prev = lo; rc == 0 && j <= np && !s->broken; j++) {
        int64_t end = j < np ? points[j] : hi;
        for (int64_t b = 0; b < B; b++)
            seq[b] = (struct mc_packed_seq){.row = b, .t0 = prev, .len = end - prev, .slot = slots[b],
                                            .resume = j > 0 || resume};
        rc = packed_step(s, pool, seq, B, what);
        prev = end;
    }
    free(seq);
    return rc;
}

/* Every golden row packed into pool A up to `at` (seeded splits), exported there, imported into other
 * slots of pool B (NaN elsewhere) and into a fresh cache, and continued on both to L with the given
 * split points (or seeded ones): packed calls on pool B, plain forwards on the fresh cache. */
static void run_prefix_resume(struct mc_session *s)
{
    const struct mc_golden *g = s->g;
    const struct mc_scenario_spec *sp = s->ctx->spec;
    int64_t P = sp->prefill, B = g->batch, L = g->len, SA = B + 2, SB = 2 * B + 3;
    int64_t nc = conv_row_elems(s), ns = mc_family_state_elems(&s->shape);
    int64_t q = s->shape.chunk_size > 0 ? s->shape.chunk_size : s->shape.conv_kernel;
    struct mc_rng rng;
    struct mc_session_cache pa = {0}, pb = {0}, fresh = {0};
    double *ca = NULL, *sa = NULL, *cb = NULL, *sb = NULL, *cf = NULL, *sf = NULL;
    int64_t *pts1 = mc_session_calloc((size_t)L, sizeof *pts1, s), *pts2 = mc_session_calloc((size_t)L, sizeof *pts2, s);
    int64_t *slota = NULL, *slotb = NULL, n1, n2;
    seed_rng(s, &rng);
    if (!pts1 || !pts2 || (slota = permutation(s, &rng, SA)) == NULL || (slotb = permutation(s, &rng, SB)) == NULL ||
        pool_images(s, SA, &ca, &sa) || pool_images(s, SB, &cb, &sb) || pool_images(s, B, &cf, &sf))
        goto out;
    n1 = draw_schedule(&rng, 0, P, q, pts1);
    if (sp->n_split_sets > 0) {
        n2 = sp->split_sets[0].n;
        memcpy(pts2, sp->split_sets[0].points, (size_t)n2 * sizeof *pts2);
    } else {
        n2 = draw_schedule(&rng, P, L, q, pts2);
    }
    if (mc_session_cache_new(s, SA, &pa) != 0 ||
        packed_schedule(s, &pa, slota, 0, P, pts1, n1, 0,
                        "before the export, sequence (index, row, from token, tokens, slot, has_initial_state)") != 0 ||
        mc_session_cache_read(s, &pa, ca, sa) != 0)
        goto out;
    for (int64_t b = 0; b < B; b++) {
        memcpy(cb + slotb[b] * nc, ca + slota[b] * nc, (size_t)nc * sizeof *cb);
        memcpy(cf + b * nc, ca + slota[b] * nc, (size_t)nc * sizeof *cf);
        if (ns) {
            memcpy(sb + slotb[b] * ns, sa + slota[b] * ns, (size_t)ns * sizeof *sb);
            memcpy(sf + b * ns, sa + slota[b] * ns, (size_t)ns * sizeof *sf);
        }
    }
    if (mc_session_cache_new(s, SB, &pb) != 0 || mc_session_cache_write(s, &pb, cb, sb) != 0 ||
        packed_schedule(s, &pb, slotb, P, L, pts2, n2, 1,
                        "after the import into another pool, sequence (index, row, from token, tokens, slot, "
                        "has_initial_state)") != 0)
        goto out;
    if (mc_session_cache_new(s, B, &fresh) != 0 || mc_session_cache_write(s, &fresh, cf, sf) != 0)
        goto out;
    int tok = mc_session_run_begin(s, "after the import into a fresh cache, forwards split at", pts2, (int)n2);
    for (int64_t j = 0, prev = P; j <= n2 && !s->broken; j++) {
        int64_t end = j < n2 ? pts2[j] : L;
        struct mc_slice sl = {.r0 = 0, .nrows = B, .t0 = prev, .len = end - prev, .masked = 0};
        if (mc_session_step(s, &fresh, &sl) != 0 || mc_session_check_states(s, &fresh, 0, end) != 0)
            break;
        prev = end;
    }
    mc_session_run_end(s, tok);
out:
    mc_session_cache_drop(s, &pa);
    mc_session_cache_drop(s, &pb);
    mc_session_cache_drop(s, &fresh);
    free(ca);
    free(sa);
    free(cb);
    free(sb);
    free(cf);
    free(sf);
    free(pts1);
    free(pts2);
    free(slota);
    free(slotb);
}

/* ---- dispatch and validation --------------------------------------------------------------------- */

void mc_serving_run(struct mc_session *s)
{
    if (mc_session_need_packed(s) != 0)
        return;
    switch (s->ctx->spec->kind) {
    case MC_SCENARIO_PACKED_PREFILL:
        run_packed_prefill(s);
        break;
    case MC_SCENARIO_SLOT_POOL:
        run_slot_pool(s);
        break;
    case MC_SCENARIO_MIXED_STEP:
        run_mixed_step(s);
        break;
    case MC_SCENARIO_PREFIX_RESUME:
        run_prefix_resume(s);
        break;
    default:
        break;
    }
}

const char *mc_serving_misfit(const struct mc_scenario_spec *sp, const struct mc_golden *g, char *buf, size_t len)
{
    int64_t L = g->len;
    if (g->mask != NULL)
        for (int64_t i = 0; i < g->batch * L; i++)
            if (!g->mask[i]) {
                snprintf(buf, len,
                         "a packed call has no mask, but the golden's /inputs/attention_mask has padding (row %lld, "
                         "token %lld)",
                         (long long)(i / L), (long long)(i % L));
                return buf;
            }
    switch (sp->kind) {
    case MC_SCENARIO_PACKED_PREFILL:
    case MC_SCENARIO_SLOT_POOL:
        if (count_held(g, 1, L - 1) == 0) {
            snprintf(buf, len, "needs a state position inside the sequence, in [1, %lld] (/expected/state_positions)",
                     (long long)(L - 1));
            return buf;
        }
        return NULL;
    case MC_SCENARIO_MIXED_STEP:
        if (sp->len + 2 > L || count_held(g, 1, L - sp->len) == 0) {
            snprintf(buf, len,
                     "drafts %lld: needs a sequence of at least drafts + 2 tokens (has %lld) and a state position in "
                     "[1, %lld] to verify from (/expected/state_positions)",
                     (long long)sp->len, (long long)L, (long long)(L - sp->len));
            return buf;
        }
        return NULL;
    case MC_SCENARIO_PREFIX_RESUME:
        if (sp->prefill >= L) {
            snprintf(buf, len, "at %lld must be < the sequence length %lld", (long long)sp->prefill, (long long)L);
            return buf;
        }
        if (sp->n_split_sets > 0 && sp->split_sets[0].points[sp->split_sets[0].n - 1] >= L) {
            snprintf(buf, len, "split point %lld must be < the sequence length %lld",
                     (long long)sp->split_sets[0].points[sp->split_sets[0].n - 1], (long long)L);
            return buf;
        }
        return NULL;
    default:
        return NULL;
    }
}
