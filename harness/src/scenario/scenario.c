/*
 * scenario.c — the scenario engine (see scenario.h): one function per scenario of docs/scenarios.md §2,
 * written in the session machinery of session.h; validation against the golden; dispatch.
 */
#include "scenario/scenario.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "family/family.h"
#include "base/rng.h"
#include "scenario/determinism.h"
#include "scenario/headshard.h"
#include "scenario/longrun.h"
#include "scenario/probes.h"
#include "scenario/serving.h"
#include "scenario/session.h"

/* ---- scenarios ---------------------------------------------------------------------------------- */

static struct mc_slice rows_all(const struct mc_golden *g, int64_t t0, int64_t len)
{
    struct mc_slice sl = {.r0 = 0, .nrows = g->batch, .t0 = t0, .len = len, .masked = 1, .x = NULL};
    return sl;
}

/* prefill: M(x) without a cache, then with one; final cache against the golden at L. */
static void run_prefill(struct mc_session *s)
{
    const struct mc_golden *g = s->g;
    struct mc_slice sl = rows_all(g, 0, g->len);
    struct mc_session_cache c;
    int64_t L = g->len;
    int tok = mc_session_run_begin(s, "prefill without a cache, tokens", &L, 1);
    mc_session_step(s, NULL, &sl);
    mc_session_run_end(s, tok);
    tok = mc_session_run_begin(s, "prefill into a fresh cache, tokens", &L, 1);
    if (mc_session_cache_new(s, g->batch, &c) == 0) {
        if (mc_session_step(s, &c, &sl) == 0)
            mc_session_check_states(s, &c, 0, g->len);
    }
    mc_session_run_end(s, tok);
    mc_session_cache_drop(s, &c);
}

/* Runs tokens [0, P) as one prefill, then single tokens to L; states at every golden position. */
static void run_decode(struct mc_session *s)
{
    const struct mc_golden *g = s->g;
    int64_t P = s->ctx->spec->prefill;
    struct mc_session_cache c;
    if (mc_session_cache_new(s, g->batch, &c) != 0)
        return;
    struct mc_slice sl = rows_all(g, 0, P);
    int tok = mc_session_run_begin(s, "prefill, tokens", &P, 1);
    int ok = mc_session_step(s, &c, &sl) == 0 && mc_session_check_states(s, &c, 0, P) == 0;
    mc_session_run_end(s, tok);
    for (int64_t t = P; ok && t < g->len && !s->broken; t++) {
        sl = rows_all(g, t, 1);
        tok = mc_session_run_begin(s, "decode step at token", &t, 1);
        ok = mc_session_step(s, &c, &sl) == 0 && mc_session_check_states(s, &c, 0, t + 1) == 0;
        mc_session_run_end(s, tok);
    }
    mc_session_cache_drop(s, &c);
}

/* Forwards over consecutive chunks ending at points[0..n-1] and then at L. */
static void run_splits(struct mc_session *s, const int64_t *points, int64_t n)
{
    const struct mc_golden *g = s->g;
    struct mc_session_cache c;
    if (mc_session_cache_new(s, g->batch, &c) != 0)
        return;
    int tok = mc_session_run_begin(s, "splits", points, (int)n);
    int64_t prev = 0;
    for (int64_t i = 0; i <= n && !s->broken; i++) {
        int64_t end = i < n ? points[i] : g->len;
        struct mc_slice sl = rows_all(g, prev, end - prev);
        if (mc_session_step(s, &c, &sl) != 0 || mc_session_check_states(s, &c, 0, end) != 0)
            break;
        prev = end;
    }
    mc_session_run_end(s, tok);
    mc_session_cache_drop(s, &c);
}

/* Draws a split set whose chunk lengths mix 1, shorter than the conv kernel, around the chunk size,
 * and anything up to L — the lengths the cached paths get wrong. Returns the number of points. */
static int64_t random_splits(struct mc_rng *rng, int64_t L, int64_t K, int64_t Q, int64_t *points)
{
    int64_t n = 0, pos = 0;
    while (pos < L) {
        int64_t len;
        switch (mc_rng_below(rng, 4)) {
        case 0:
            len = 1;
            break;
        case 1:
            len = K > 2 ? 1 + (int64_t)mc_rng_below(rng, (uint64_t)(K - 1)) : 1;
            break;
        case 2:
            len = Q > 1 ? Q - 1 + (int64_t)mc_rng_below(rng, 3) : 1;
            break;
        default:
            len = 1 + (int64_t)mc_rng_below(rng, (uint64_t)L);
            break;
        }
        pos += len;
        if (pos < L)
            points[n++] = pos;
    }
    return n;
}

static void run_chunked(struct mc_session *s)
{
    const struct mc_scenario_spec *sp = s->ctx->spec;
    const struct mc_golden *g = s->g;
    for (int i = 0; i < sp->n_split_sets && !s->broken; i++)
        run_splits(s, sp->split_sets[i].points, sp->split_sets[i].n);
    if (sp->random_sets <= 0)
        return;
    int64_t *points = mc_session_calloc((size_t)g->len, sizeof *points, s);
    if (points == NULL)
        return;
    struct mc_rng rng;
    mc_rng_seed(&rng, sp->seed + s->ctx->seed_offset);
    int64_t Q = s->shape.chunk_size > 0 ? s->shape.chunk_size : s->shape.conv_kernel;
    for (int64_t i = 0; i < sp->random_sets && !s->broken; i++) {
        int64_t n = random_splits(&rng, g->len, s->shape.conv_kernel, Q, points);
        run_splits(s, points, n);
    }
    free(points);
}

/* Row 0 of each batch row of y [B][len][D] into out [B][1][D]. */
static void first_rows(const double *y, int64_t B, int64_t len, int64_t D, double *out)
{
    for (int64_t b = 0; b < B; b++)
        memcpy(out + b * D, y + b * len * D, (size_t)D * sizeof *out);
}

/* first_token_causality: from a primed cache, (a) one token alone, (b) S tokens in one forward,
 * (c) the same S tokens with tokens 1..S-1 replaced by distractors. b[0] == a[0] under the tight
 * tolerance, c[0] == b[0] bitwise; the same (b) again on another copy agrees bit for bit (determinism),
 * and the primed cache is unchanged by the runs on its copies (snapshot). */
static void run_first_token(struct mc_session *s)
{
    const struct mc_golden *g = s->g;
    const struct mc_scenario_spec *sp = s->ctx->spec;
    int64_t P = sp->prefill, S = sp->len, B = g->batch, D = s->shape.hidden;
    struct mc_session_cache c = {0}, ca = {0}, cb = {0}, cd = {0}, ce = {0};
    double *ya = mc_session_calloc((size_t)(B * D), sizeof *ya, s);
    double *yb = mc_session_calloc((size_t)(B * S * D), sizeof *yb, s);
    double *ye = mc_session_calloc((size_t)(B * S * D), sizeof *ye, s);
    double *yd = mc_session_calloc((size_t)(B * S * D), sizeof *yd, s);
    double *xd = mc_session_calloc((size_t)(B * S * D), sizeof *xd, s);
    double *b0 = mc_session_calloc((size_t)(B * D), sizeof *b0, s);
    double *d0 = mc_session_calloc((size_t)(B * D), sizeof *d0, s);
    int64_t nconv = B * s->shape.conv_channels * s->shape.conv_kernel, nstate = B * mc_family_state_elems(&s->shape);
    double *c_conv = mc_session_calloc((size_t)nconv, sizeof *c_conv, s);
    double *c_state = nstate ? mc_session_calloc((size_t)nstate, sizeof *c_state, s) : NULL;
    if (!ya || !yb || !ye || !yd || !xd || !b0 || !d0 || !c_conv || (nstate && !c_state))
        goto out;
    struct mc_slice sl = rows_all(g, 0, P);
    if (mc_session_cache_new(s, B, &c) != 0 || mc_session_step(s, &c, &sl) != 0 ||
        mc_session_check_states(s, &c, 0, P) != 0 || mc_session_cache_read(s, &c, c_conv, c_state) != 0)
        goto out;
    if (mc_session_cache_dup(s, &c, &ca) != 0 || mc_session_cache_dup(s, &c, &cb) != 0 ||
        mc_session_cache_dup(s, &c, &cd) != 0 || mc_session_cache_dup(s, &c, &ce) != 0)
        goto out;
    struct mc_slice sa = rows_all(g, P, 1), sb = rows_all(g, P, S);
    if (mc_session_forward(s, &ca, &sa, ya) != 0 || mc_session_check_output(s, &sa, ya) != 0 || mc_session_check_states(s, &ca, 0, P + 1) != 0)
        goto out;
    mc_session_check_source(s, &c, c_conv, c_state, 0, P, "the primed cache after a copy of it ran (token)");
    if (mc_session_forward(s, &cb, &sb, yb) != 0 || mc_session_check_output(s, &sb, yb) != 0 || mc_session_check_states(s, &cb, 0, P + S) != 0)
        goto out;
    /* the same call again on another copy: a backend whose results change from run to run is told so,
     * instead of failing the distractor below as if it read future tokens */
    if (mc_session_forward(s, &ce, &sb, ye) != 0)
        goto out;
    struct mc_compare_view vs;
    mc_session_output_view(s, &sb, NULL, &vs);
    mc_session_compare(s, "determinism", MC_TENSOR_CONSISTENCY, 1, ye, yb, &vs);
    /* the tokens after the first become distractors: same scale, drawn from the seed */
    struct mc_rng rng;
    mc_rng_seed(&rng, sp->seed + s->ctx->seed_offset);
    for (int64_t b = 0; b < B; b++) {
        for (int64_t t = 0; t < S; t++) {
            double *dst = xd + (b * S + t) * D;
            const double *src = g->hidden_states.data + (b * g->len + P + t) * D;
            for (int64_t d = 0; d < D; d++)
                dst[d] = t == 0 ? src[d] : 2.0 * mc_rng_normal(&rng);
        }
    }
    struct mc_slice sd = sb;
    sd.x = xd;
    if (mc_session_forward(s, &cd, &sd, yd) != 0)
        goto out;
    first_rows(yb, B, S, D, b0);
    first_rows(yd, B, S, D, d0);
    struct mc_slice s1 = rows_all(g, P, 1);
    struct mc_compare_view v;
    mc_session_output_view(s, &s1, NULL, &v);
    mc_session_compare(s, "consistency", MC_TENSOR_CONSISTENCY, 0, b0, ya, &v);
    mc_session_compare(s, "distractor", MC_TENSOR_CONSISTENCY, 1, d0, b0, &v);
    mc_session_check_source(s, &c, c_conv, c_state, 0, P, "the primed cache after every copy of it ran (token)");
out:
    mc_session_cache_drop(s, &c);
    mc_session_cache_drop(s, &ca);
    mc_session_cache_drop(s, &cb);
    mc_session_cache_drop(s, &cd);
    mc_session_cache_drop(s, &ce);
    free(ya);
    free(yb);
    free(ye);
    free(yd);
    free(xd);
    free(b0);
    free(d0);
    free(c_conv);
    free(c_state);
}

/* Prefill [0,P) with the mask, `decode_steps` single tokens, then the rest in one chunk, on golden
 * rows [r0, r0+nrows) as a batch of their own. */
static void run_padded_sequence(struct mc_session *s, int64_t r0, int64_t nrows)
{
    const struct mc_golden *g = s->g;
    const struct mc_scenario_spec *sp = s->ctx->spec;
    struct mc_session_cache c;
    if (mc_session_cache_new(s, nrows, &c) != 0)
        return;
    int64_t what[2] = {r0, nrows};
    int tok = mc_session_run_begin(s, "padded rows (first, count)", what, 2);
    int64_t t = 0;
    int64_t ends[3] = {sp->prefill, sp->prefill + sp->decode_steps, g->len};
    for (int phase = 0; phase < 3 && !s->broken; phase++) {
        while (t < ends[phase] && !s->broken) {
            int64_t len = phase == 1 ? 1 : ends[phase] - t;
            struct mc_slice sl = {.r0 = r0, .nrows = nrows, .t0 = t, .len = len, .masked = 1, .x = NULL};
            if (mc_session_step(s, &c, &sl) != 0 || mc_session_check_states(s, &c, r0, t + len) != 0)
                break;
            t += len;
        }
    }
    mc_session_run_end(s, tok);
    mc_session_cache_drop(s, &c);
}

static int64_t pad_length(const struct mc_golden *g, int64_t row)
{
    int64_t p = 0;
    while (p < g->len && g->mask[row * g->len + p] == 0)
        p++;
    return p;
}

/* left_padded_batch: the padded batch, each row as a padded batch of one (the mask must hold for
 * B == 1 too), and each row's real tokens alone without padding: all against the golden. */
static void run_left_padded(struct mc_session *s)
{
    const struct mc_golden *g = s->g;
    run_padded_sequence(s, 0, g->batch);
    for (int64_t b = 0; b < g->batch && !s->broken; b++)
        run_padded_sequence(s, b, 1);
    for (int64_t b = 0; b < g->batch && !s->broken; b++) {
        int64_t pad = pad_length(g, b);
        if (pad == 0)
            continue;
        struct mc_session_cache c;
        if (mc_session_cache_new(s, 1, &c) != 0)
            break;
        int64_t what[2] = {b, pad};
        int tok = mc_session_run_begin(s, "unpadded row (row, pad)", what, 2);
        struct mc_slice sl = {.r0 = b, .nrows = 1, .t0 = pad, .len = g->len - pad, .masked = 0, .x = NULL};
        if (mc_session_step(s, &c, &sl) == 0)
            mc_session_check_states(s, &c, b, g->len);
        mc_session_run_end(s, tok);
        mc_session_cache_drop(s, &c);
    }
}

/* batch_invariance: each row alone equals the same row inside the batch (outputs and caches). */
static void run_batch_invariance(struct mc_session *s)
{
    const struct mc_golden *g = s->g;
    int64_t B = g->batch, L = g->len, D = s->shape.hidden;
    int64_t nconv = s->shape.conv_channels * s->shape.conv_kernel, nstate = mc_family_state_elems(&s->shape);
    struct mc_session_cache c = {0}, cr = {0};
    double *yb = mc_session_calloc((size_t)(B * L * D), sizeof *yb, s);
    double *yr = mc_session_calloc((size_t)(L * D), sizeof *yr, s);
    double *convb = mc_session_calloc((size_t)(B * nconv), sizeof *convb, s);
    double *convr = mc_session_calloc((size_t)nconv, sizeof *convr, s);
    double *stb = nstate ? mc_session_calloc((size_t)(B * nstate), sizeof *stb, s) : NULL;
    double *str = nstate ? mc_session_calloc((size_t)nstate, sizeof *str, s) : NULL;
    if (!yb || !yr || !convb || !convr || (nstate && (!stb || !str)))
        goto out;
    struct mc_slice sl = rows_all(g, 0, L);
    if (mc_session_cache_new(s, B, &c) != 0 || mc_session_forward(s, &c, &sl, yb) != 0 || mc_session_check_output(s, &sl, yb) != 0 ||
        mc_session_cache_read(s, &c, convb, stb) != 0)
        goto out;
    for (int64_t b = 0; b < B && !s->broken; b++) {
        struct mc_slice sr = {.r0 = b, .nrows = 1, .t0 = 0, .len = L, .masked = 1, .x = NULL};
        if (mc_session_cache_new(s, 1, &cr) != 0 || mc_session_forward(s, &cr, &sr, yr) != 0 || mc_session_cache_read(s, &cr, convr, str) != 0)
            break;
        const uint8_t *valid = g->mask ? g->mask + b * L : NULL;
        struct mc_compare_view v;
        mc_session_output_view(s, &sr, valid, &v);
        mc_session_compare(s, "consistency", MC_TENSOR_CONSISTENCY, 0, yr, yb + b * L * D, &v);
        mc_session_conv_view(s, b, 1, L, &v);
        mc_session_compare(s, "consistency", MC_TENSOR_CONSISTENCY, 0, convr, convb + b * nconv, &v);
        if (nstate) {
            mc_session_state_view(s, b, 1, L, &v);
            mc_session_compare(s, "consistency", MC_TENSOR_CONSISTENCY, 0, str, stb + b * nstate, &v);
        }
        mc_session_cache_drop(s, &cr);
    }
out:
    mc_session_cache_drop(s, &c);
    mc_session_cache_drop(s, &cr);
    free(yb);
    free(yr);
    free(convb);
    free(convr);
    free(stb);
    free(str);
}

/* Compares the cache c with an earlier reading (conv, state: one row each of c->batch rows) of the
 * same positions along another path, under "consistency" (pos names it in the diagnosis). */
static void check_cache_consistent(struct mc_session *s, const struct mc_session_cache *c, const double *conv,
                                   const double *state, int64_t pos)
{
    static const struct mc_cache_compare how = {"consistency", "consistency", MC_TENSOR_CONSISTENCY,
                                                MC_TENSOR_CONSISTENCY, 0};
    mc_session_compare_cache(s, c, &how, conv, state, 0, pos);
}

/* The accept sweep of speculative_verify (serving.md S2.7): every accept count j = 0..k, in seeded
 * order, from a copy of the snapshot at P: the j accepted drafts in one forward (none for j = 0),
 * then two zero-draft steps (single-token decodes of P+j and P+j+1). Outputs and caches against the
 * golden where it holds the position, and against the same tokens decoded one at a time from the
 * snapshot (the sequential path, "consistency") everywhere: a backend that commits the wrong
 * checkpoint for some accept count, or whose zero-draft step after a multi-token accept reads a stale
 * state, fails there. */
static void accept_sweep(struct mc_session *s, const struct mc_session_cache *snap, int64_t P, int64_t k)
{
    const struct mc_golden *g = s->g;
    int64_t B = g->batch, D = s->shape.hidden, n = k + 2; /* sequential tokens P .. P+k+1 */
    int64_t nconv = B * s->shape.conv_channels * s->shape.conv_kernel, nstate = B * mc_family_state_elems(&s->shape);
    struct mc_session_cache cs = {0}, ca = {0};
    double *yseq = mc_session_calloc((size_t)(n * B * D), sizeof *yseq, s);
    double *cseq = mc_session_calloc((size_t)(n * nconv), sizeof *cseq, s);
    double *sseq = nstate ? mc_session_calloc((size_t)(n * nstate), sizeof *sseq, s) : NULL;
    double *ya = mc_session_calloc((size_t)(B * k * D), sizeof *ya, s);
    double *yrow = mc_session_calloc((size_t)(B * D), sizeof *yrow, s);
    int64_t *order = mc_session_calloc((size_t)(k + 1), sizeof *order, s);
    if (!yseq || !cseq || (nstate && !sseq) || !ya || !yrow || !order || mc_session_cache_dup(s, snap, &cs) != 0)
        goto out;
    int64_t what[2] = {P, n};
    int tok = mc_session_run_begin(s, "sequential decode from the snapshot (from token, tokens)", what, 2);
    for (int64_t t = 0; t < n && !s->broken; t++) {
        struct mc_slice st = rows_all(g, P + t, 1);
        double *y = yseq + t * B * D;
        if (mc_session_forward(s, &cs, &st, y) != 0 || mc_session_check_output(s, &st, y) != 0 ||
            mc_session_check_states(s, &cs, 0, P + t + 1) != 0 ||
            mc_session_cache_read(s, &cs, cseq + t * nconv, sseq ? sseq + t * nstate : NULL) != 0)
            break;
    }
    mc_session_run_end(s, tok);
    struct mc_rng rng;
    mc_rng_seed(&rng, s->ctx->spec->seed + s->ctx->seed_offset);
    for (int64_t j = 0; j <= k; j++)
        order[j] = j;
    for (int64_t i = k; i > 0; i--) {
        int64_t r = (int64_t)mc_rng_below(&rng, (uint64_t)(i + 1)), t = order[i];
        order[i] = order[r];
        order[r] = t;
    }
    for (int64_t oi = 0; oi <= k && !s->broken; oi++) {
        int64_t j = order[oi];
        int64_t vals[2] = {j, k};
        tok = mc_session_run_begin(s, "accept from the snapshot, then two zero-draft steps (accepted, drafts)", vals, 2);
        if (mc_session_cache_dup(s, snap, &ca) != 0)
            break;
        if (j > 0) {
            struct mc_slice sa = rows_all(g, P, j);
            if (mc_session_forward(s, &ca, &sa, ya) != 0 || mc_session_check_output(s, &sa, ya) != 0)
                break;
            for (int64_t t = 0; t < j; t++) { /* row t of the accept forward vs the sequential step t */
                for (int64_t b = 0; b < B; b++)
                    memcpy(yrow + b * D, ya + (b * j + t) * D, (size_t)D * sizeof *yrow);
                struct mc_slice st = rows_all(g, P + t, 1);
                struct mc_compare_view v;
                mc_session_output_view(s, &st, NULL, &v);
                mc_session_compare(s, "consistency", MC_TENSOR_CONSISTENCY, 0, yrow, yseq + t * B * D, &v);
            }
            if (mc_session_check_states(s, &ca, 0, P + j) != 0)
                break;
            check_cache_consistent(s, &ca, cseq + (j - 1) * nconv, sseq ? sseq + (j - 1) * nstate : NULL, P + j);
        }
        for (int64_t z = 0; z < 2 && !s->broken; z++) { /* the zero-draft steps */
            int64_t t = j + z;
            struct mc_slice st = rows_all(g, P + t, 1);
            if (mc_session_forward(s, &ca, &st, yrow) != 0 || mc_session_check_output(s, &st, yrow) != 0 ||
                mc_session_check_states(s, &ca, 0, P + t + 1) != 0)
                break;
            struct mc_compare_view v;
            mc_session_output_view(s, &st, NULL, &v);
            mc_session_compare(s, "consistency", MC_TENSOR_CONSISTENCY, 0, yrow, yseq + t * B * D, &v);
            check_cache_consistent(s, &ca, cseq + t * nconv, sseq ? sseq + t * nstate : NULL, P + t + 1);
        }
        mc_session_run_end(s, tok);
        mc_session_cache_drop(s, &ca);
    }
    mc_session_run_end(s, tok);
out:
    mc_session_cache_drop(s, &cs);
    mc_session_cache_drop(s, &ca);
    free(yseq);
    free(cseq);
    free(sseq);
    free(ya);
    free(yrow);
    free(order);
}

/* speculative_verify: from a primed cache snapshot, verify k draft tokens in one forward; the same
 * tokens decoded one by one must agree (consistency); with `accept: j`, restoring the snapshot and
 * accepting j < k tokens, then decoding the next, must land on the golden; without it, the accept
 * sweep over every count 0..k (accept_sweep); the snapshot itself must be untouched. */
static void run_speculative(struct mc_session *s)
{
    const struct mc_golden *g = s->g;
    const struct mc_scenario_spec *sp = s->ctx->spec;
    int64_t P = sp->prefill, k = sp->len, j = sp->accept, B = g->batch, D = s->shape.hidden;
    int64_t nconv = B * s->shape.conv_channels * s->shape.conv_kernel, nstate = B * mc_family_state_elems(&s->shape);
    struct mc_session_cache snap = {0}, cv = {0}, cs = {0}, ca = {0};
    double *yv = mc_session_calloc((size_t)(B * k * D), sizeof *yv, s);
    double *ys = mc_session_calloc((size_t)(B * D), sizeof *ys, s);
    double *vt = mc_session_calloc((size_t)(B * D), sizeof *vt, s);
    double *snap_conv = mc_session_calloc((size_t)nconv, sizeof *snap_conv, s);
    double *snap_state = nstate ? mc_session_calloc((size_t)nstate, sizeof *snap_state, s) : NULL;
    if (!yv || !ys || !vt || !snap_conv || (nstate && !snap_state))
        goto out;
    struct mc_slice sl = rows_all(g, 0, P);
    if (mc_session_cache_new(s, B, &snap) != 0 || mc_session_step(s, &snap, &sl) != 0 ||
        mc_session_check_states(s, &snap, 0, P) != 0 || mc_session_cache_read(s, &snap, snap_conv, snap_state) != 0)
        goto out;
    /* verify: all k drafts in one cached forward */
    struct mc_slice sv = rows_all(g, P, k);
    int64_t what[2] = {P, k};
    int tok = mc_session_run_begin(s, "verify (from token, drafts)", what, 2);
    int ok = mc_session_cache_dup(s, &snap, &cv) == 0 && mc_session_forward(s, &cv, &sv, yv) == 0 &&
             mc_session_check_output(s, &sv, yv) == 0 && mc_session_check_states(s, &cv, 0, P + k) == 0;
    mc_session_run_end(s, tok);
    if (ok)
        mc_session_check_source(s, &snap, snap_conv, snap_state, 0, P,
                                "the snapshot after the verify forward on its copy (token)");
    /* the same drafts decoded one at a time */
    if (!ok || mc_session_cache_dup(s, &snap, &cs) != 0)
        goto out;
    tok = mc_session_run_begin(s, "the drafts decoded one at a time (from token, drafts)", what, 2);
    for (int64_t t = 0; t < k && !s->broken; t++) {
        struct mc_slice st = rows_all(g, P + t, 1);
        if (mc_session_forward(s, &cs, &st, ys) != 0)
            goto out;
        for (int64_t b = 0; b < B; b++)
            memcpy(vt + b * D, yv + (b * k + t) * D, (size_t)D * sizeof *vt);
        struct mc_compare_view v;
        mc_session_output_view(s, &st, NULL, &v);
        mc_session_compare(s, "consistency", MC_TENSOR_CONSISTENCY, 0, vt, ys, &v);
    }
    mc_session_run_end(s, tok);
    /* reject: restore the snapshot, accept j drafts, decode the next token */
    if (j >= 0) {
        if (mc_session_cache_dup(s, &snap, &ca) != 0)
            goto out;
        tok = mc_session_run_begin(s, "accept from the snapshot (drafts accepted)", &j, 1);
        if (j > 0) {
            struct mc_slice sa = rows_all(g, P, j);
            if (mc_session_step(s, &ca, &sa) != 0)
                goto out;
        }
        struct mc_slice sn = rows_all(g, P + j, 1);
        ok = mc_session_check_states(s, &ca, 0, P + j) == 0 && mc_session_step(s, &ca, &sn) == 0 &&
             mc_session_check_states(s, &ca, 0, P + j + 1) == 0;
        mc_session_run_end(s, tok);
    }
    if (ok && j < 0)
        accept_sweep(s, &snap, P, k);
    /* every copy ran on its own: the snapshot is bit for bit what it was (a cache_copy that shares
     * memory between the copies shows up here, as "snapshot") */
    if (ok)
        mc_session_check_source(s, &snap, snap_conv, snap_state, 0, P, "the snapshot after the copies ran (token)");
out:
    mc_session_cache_drop(s, &snap);
    mc_session_cache_drop(s, &cv);
    mc_session_cache_drop(s, &cs);
    mc_session_cache_drop(s, &ca);
    free(yv);
    free(ys);
    free(vt);
    free(snap_conv);
    free(snap_state);
}

/* Number of real tokens of a right-padded row (its mask is 1...1 0...0). */
static int64_t real_length(const struct mc_golden *g, int64_t row)
{
    int64_t n = 0;
    while (n < g->len && g->mask[row * g->len + n])
        n++;
    return n;
}

/* right_padded_batch (docs/semantics.md §A.4, §8.5): the padded batch as one prefill and split at every row's
 * real length; each row as a padded batch of one; each row's real tokens alone. The cache after the
 * padding must be the cache at the row's last real token, which is what the golden holds. */
static void run_right_padded(struct mc_session *s)
{
    const struct mc_golden *g = s->g;
    int64_t B = g->batch;
    int64_t *points = mc_session_calloc((size_t)B, sizeof *points, s);
    if (points == NULL)
        return;
    int64_t n = 0;
    for (int64_t b = 0; b < B; b++) {
        int64_t l = real_length(g, b);
        int dup = 0;
        for (int64_t i = 0; i < n; i++)
            dup |= points[i] == l;
        if (l > 0 && l < g->len && !dup)
            points[n++] = l;
    }
    for (int64_t i = 1; i < n; i++) /* insertion sort: a handful of rows */
        for (int64_t m = i; m > 0 && points[m - 1] > points[m]; m--) {
            int64_t t = points[m];
            points[m] = points[m - 1];
            points[m - 1] = t;
        }
    run_splits(s, NULL, 0);
    run_splits(s, points, n);
    free(points);
    for (int64_t b = 0; b < B && !s->broken; b++) {
        struct mc_session_cache c;
        if (mc_session_cache_new(s, 1, &c) != 0)
            break;
        int64_t what[2] = {b, real_length(g, b)};
        int tok = mc_session_run_begin(s, "row alone (row, real length)", what, 2);
        struct mc_slice sl = {.r0 = b, .nrows = 1, .t0 = 0, .len = g->len, .masked = 1, .x = NULL};
        if (mc_session_step(s, &c, &sl) == 0)
            mc_session_check_states(s, &c, b, g->len);
        mc_session_cache_drop(s, &c);
        int64_t l = real_length(g, b);
        if (l < g->len && mc_session_cache_new(s, 1, &c) == 0) {
            /* the real tokens alone: the final cache is the golden's frozen one */
            sl.masked = 0;
            sl.len = l;
            if (mc_session_step(s, &c, &sl) == 0)
                mc_session_check_states(s, &c, b, g->len);
            mc_session_cache_drop(s, &c);
        }
        mc_session_run_end(s, tok);
    }
}

/* chunk_size_invariance: the same prefill at several internal chunk lengths, each against the golden
 * (for backends with an internal chunk length; others skip it). */
static void run_chunk_sizes(struct mc_session *s)
{
    const struct mc_scenario_spec *sp = s->ctx->spec;
    if (!(s->ops->caps & MC_CAP_CHUNK_SIZE)) {
        s->res->status = MC_CHECK_SKIPPED;
        snprintf(s->res->message, sizeof s->res->message, "backend '%s' has no internal chunk length",
                 s->ops->name);
        return;
    }
    for (int i = 0; i < sp->n_chunk_sizes && !s->broken; i++) {
        if (mc_session_model(s, sp->chunk_sizes[i]) != MC_ERR_NONE)
            return;
        int tok = mc_session_run_begin(s, "chunk_size", &sp->chunk_sizes[i], 1);
        run_splits(s, NULL, 0);
        mc_session_run_end(s, tok);
    }
}

/* cache_roundtrip: forwards over the split points, the cache exported and imported into a fresh cache
 * at every split and the run continued from the imported one; then, at every split the golden holds
 * a state for, a fresh cache imported from the golden state itself, continued to the next split.
 * Outputs and caches against the golden: a cache_import that misreads the layout fails here even
 * when export and import are wrong the same way. */
static void run_cache_roundtrip(struct mc_session *s)
{
    const struct mc_golden *g = s->g;
    const struct mc_split_set *set = &s->ctx->spec->split_sets[0];
    int64_t B = g->batch, L = g->len, n = set->n;
    int64_t nconv_row = s->shape.conv_channels * s->shape.conv_kernel, nstate_row = mc_family_state_elems(&s->shape);
    struct mc_session_cache c = {0}, fresh = {0};
    double *conv = mc_session_calloc((size_t)(B * nconv_row), sizeof *conv, s);
    double *state = nstate_row ? mc_session_calloc((size_t)(B * nstate_row), sizeof *state, s) : NULL;
    if (conv == NULL || (nstate_row && state == NULL) || mc_session_cache_new(s, B, &c) != 0)
        goto out;
    int tok = mc_session_run_begin(s, "export and import at the splits", set->points, (int)n);
    for (int64_t i = 0, prev = 0; i <= n && !s->broken; i++) {
        int64_t end = i < n ? set->points[i] : L;
        struct mc_slice sl = rows_all(g, prev, end - prev);
        if (mc_session_step(s, &c, &sl) != 0)
            break;
        if (i < n) {
            if (mc_session_cache_read(s, &c, conv, state) != 0 || mc_session_cache_new(s, B, &fresh) != 0 ||
                mc_session_cache_write(s, &fresh, conv, state) != 0)
                break;
            mc_session_cache_drop(s, &c);
            c = fresh;
            fresh.h = NULL;
        }
        if (mc_session_check_states(s, &c, 0, end) != 0)
            break;
        prev = end;
    }
    mc_session_run_end(s, tok);
    mc_session_cache_drop(s, &c);
    for (int64_t i = 0; i < n && !s->broken; i++) {
        int64_t p = set->points[i], ti = mc_golden_position_index(g, p);
        if (ti < 0)
            continue;
        int64_t end = i + 1 < n ? set->points[i + 1] : L;
        tok = mc_session_run_begin(s, "golden state imported at token", &p, 1);
        struct mc_slice sl = rows_all(g, p, end - p);
        if (mc_session_cache_new(s, B, &c) == 0 &&
            mc_session_cache_write(s, &c, g->conv_state.data + ti * B * nconv_row,
                                   nstate_row ? g->recurrent_state.data + ti * B * nstate_row : NULL) == 0 &&
            mc_session_step(s, &c, &sl) == 0)
            mc_session_check_states(s, &c, 0, end);
        mc_session_run_end(s, tok);
        mc_session_cache_drop(s, &c);
    }
out:
    mc_session_cache_drop(s, &c);
    mc_session_cache_drop(s, &fresh);
    free(conv);
    free(state);
}

/* ---- validation and dispatch --------------------------------------------------------------------- */

enum mc_err_code mc_scenario_bad_param(const struct mc_case *c, const struct mc_scenario_spec *sp, struct mc_error *err,
                                       const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return mc_error_set(err, MC_ERR_INPUT, "%s:%d:%d: in 'scenarios.%s': %s (golden %s)", c->path, sp->line,
                        sp->column, mc_scenario_name(sp->kind), what, c->golden_path);
}

enum mc_err_code mc_scenario_validate(const struct mc_case *c, const struct mc_scenario_spec *sp,
                                      const struct mc_golden *g, struct mc_error *err)
{
    int64_t L = g->len;
    if (mc_golden_position_index(g, L) < 0)
        return mc_error_set(err, MC_ERR_INPUT, "%s: golden %s holds no state at the final position %lld", c->path,
                            c->golden_path, (long long)L);
    switch (sp->kind) {
    case MC_SCENARIO_PREFILL:
        return MC_ERR_NONE;
    case MC_SCENARIO_DECODE:
        if (sp->prefill < 1 || sp->prefill >= L)
            return mc_scenario_bad_param(c, sp, err, "prefill %lld must be in [1, %lld)", (long long)sp->prefill,
                                         (long long)L);
        return MC_ERR_NONE;
    case MC_SCENARIO_CHUNKED:
        for (int i = 0; i < sp->n_split_sets; i++) {
            const struct mc_split_set *set = &sp->split_sets[i];
            if (set->n > 0 && set->points[set->n - 1] >= L)
                return mc_scenario_bad_param(c, sp, err, "split point %lld must be < the sequence length %lld",
                                             (long long)set->points[set->n - 1], (long long)L);
        }
        return MC_ERR_NONE;
    case MC_SCENARIO_FIRST_TOKEN_CAUSALITY:
        if (sp->prefill < 1 || sp->prefill + sp->len > L)
            return mc_scenario_bad_param(c, sp, err, "prefill + len (%lld) must be <= the sequence length %lld",
                                         (long long)(sp->prefill + sp->len), (long long)L);
        return MC_ERR_NONE;
    case MC_SCENARIO_LEFT_PADDED_BATCH:
        if (g->mask == NULL)
            return mc_scenario_bad_param(c, sp, err, "needs a golden with /inputs/attention_mask");
        for (int64_t b = 0; b < g->batch; b++) {
            int64_t pad = pad_length(g, b);
            for (int64_t t = pad; t < L; t++)
                if (!g->mask[b * L + t])
                    return mc_scenario_bad_param(c, sp, err,
                                                 "row %lld of the golden's mask is not left padding (0 at %lld)",
                                                 (long long)b, (long long)t);
            if (pad == L)
                return mc_scenario_bad_param(c, sp, err, "row %lld of the golden's mask is all padding", (long long)b);
        }
        if (sp->prefill < 1 || sp->prefill + sp->decode_steps > L)
            return mc_scenario_bad_param(c, sp, err, "prefill + decode (%lld) must be <= the sequence length %lld",
                                         (long long)(sp->prefill + sp->decode_steps), (long long)L);
        return MC_ERR_NONE;
    case MC_SCENARIO_BATCH_INVARIANCE:
        if (g->batch < 2)
            return mc_scenario_bad_param(c, sp, err, "needs a golden with at least 2 rows (has %lld)",
                                         (long long)g->batch);
        return MC_ERR_NONE;
    case MC_SCENARIO_SPECULATIVE_VERIFY:
        if (sp->prefill < 1 || sp->prefill + sp->len > L)
            return mc_scenario_bad_param(c, sp, err, "prefill + len (%lld) must be <= the sequence length %lld",
                                         (long long)(sp->prefill + sp->len), (long long)L);
        /* the accept sweep (no `accept`) takes every count up to k and two zero-draft steps after it */
        if (sp->accept < 0 && sp->prefill + sp->len + 2 > L)
            return mc_scenario_bad_param(
                c, sp, err,
                "prefill + len + 2 (%lld: every accept count up to len, then two zero-draft steps) must "
                "be <= the sequence length %lld (or give `accept` for one count)",
                (long long)(sp->prefill + sp->len + 2), (long long)L);
        return MC_ERR_NONE;
    case MC_SCENARIO_RIGHT_PADDED_BATCH:
        if (g->mask == NULL)
            return mc_scenario_bad_param(c, sp, err, "needs a golden with /inputs/attention_mask");
        for (int64_t b = 0; b < g->batch; b++) {
            int64_t l = real_length(g, b);
            for (int64_t t = l; t < L; t++)
                if (g->mask[b * L + t])
                    return mc_scenario_bad_param(c, sp, err,
                                                 "row %lld of the golden's mask is not right padding (1 at %lld)",
                                                 (long long)b, (long long)t);
            if (l == 0)
                return mc_scenario_bad_param(c, sp, err, "row %lld of the golden's mask is all padding", (long long)b);
        }
        return MC_ERR_NONE;
    case MC_SCENARIO_CHUNK_SIZE_INVARIANCE:
        return MC_ERR_NONE;
    case MC_SCENARIO_CACHE_ROUNDTRIP: {
        const struct mc_split_set *set = &sp->split_sets[0];
        int held = 0;
        if (set->points[set->n - 1] >= L)
            return mc_scenario_bad_param(c, sp, err, "split point %lld must be < the sequence length %lld",
                                         (long long)set->points[set->n - 1], (long long)L);
        for (int64_t i = 0; i < set->n; i++)
            held |= mc_golden_position_index(g, set->points[i]) >= 0;
        if (!held)
            return mc_scenario_bad_param(
                c, sp, err, "needs a split point where the golden holds a state (/expected/state_positions)");
        return MC_ERR_NONE;
    }
    case MC_SCENARIO_DETERMINISM:
        if (sp->prefill < 1 || sp->prefill + 2 > L)
            return mc_scenario_bad_param(c, sp, err,
                                         "prefill %lld must be in [1, %lld] (a multi-token forward follows it)",
                                         (long long)sp->prefill, (long long)(L - 2));
        return MC_ERR_NONE;
    case MC_SCENARIO_PACKED_PREFILL:
    case MC_SCENARIO_SLOT_POOL:
    case MC_SCENARIO_MIXED_STEP:
    case MC_SCENARIO_PREFIX_RESUME: {
        char why[256];
        const char *misfit = mc_serving_misfit(sp, g, why, sizeof why);
        return misfit ? mc_scenario_bad_param(c, sp, err, "%s", misfit) : MC_ERR_NONE;
    }
    case MC_SCENARIO_LONG_DECODE:
    case MC_SCENARIO_LENGTH_SWEEP: {
        char why[256];
        const char *misfit = mc_longrun_misfit(sp, g, why, sizeof why);
        return misfit ? mc_scenario_bad_param(c, sp, err, "%s", misfit) : MC_ERR_NONE;
    }
    case MC_SCENARIO_HEAD_SHARD: {
        char why[256];
        const char *misfit = mc_headshard_misfit(sp, g, why, sizeof why);
        return misfit ? mc_scenario_bad_param(c, sp, err, "%s", misfit) : MC_ERR_NONE;
    }
    case MC_SCENARIO_GREEDY: /* a model case's only (case.c refuses it in a mixer case) */
    case MC_SCENARIO_COUNT:
        break;
    }
    return mc_error_set(err, MC_ERR_INPUT, "%s:%d:%d: scenario '%s' is not implemented yet", c->path, sp->line,
                        sp->column, mc_scenario_name(sp->kind));
}

/* The first-stage diagnosis of a failed check (probes.h): the same check once more with stage probes
 * on; its first failing stage goes into res, a backend error of the rerun (a mis-shaped probe) becomes
 * the check's error. The verdict and tensors stay those of the run without probes. */
static enum mc_err_code rerun_with_probes(const struct mc_scenario_ctx *ctx, struct mc_check_result *res,
                                          struct mc_error *err)
{
    struct mc_check_result *again = malloc(sizeof *again);
    if (again == NULL)
        return mc_error_set(err, MC_ERR_NOMEM, "out of memory");
    struct mc_scenario_ctx pctx = *ctx;
    pctx.probes = &mc_probe_hooks;
    enum mc_err_code rc = mc_scenario_run(&pctx, again, err);
    if (rc == MC_ERR_NONE) {
        res->first_stage = again->first_stage;
        if (again->status == MC_CHECK_ERROR) {
            res->status = MC_CHECK_ERROR;
            snprintf(res->message, sizeof res->message, "with stage probes on: %.990s", again->message);
        }
    }
    free(again);
    return rc;
}

enum mc_err_code mc_scenario_run(const struct mc_scenario_ctx *ctx, struct mc_check_result *res, struct mc_error *err)
{
    double t0 = mc_clock_now_s();
    memset(res, 0, sizeof *res);
    snprintf(res->case_id, sizeof res->case_id, "%s", ctx->c->id);
    snprintf(res->case_path, sizeof res->case_path, "%s", ctx->c->path);
    res->family = ctx->c->family;
    res->scenario = ctx->spec->kind;
    res->backend = ctx->ops->name;
    res->device = ctx->ops->device;
    res->dtype = ctx->dtype;
    res->status = MC_CHECK_PASS;

    enum mc_scenario_kind kind = ctx->spec->kind;
    if ((kind == MC_SCENARIO_PACKED_PREFILL || kind == MC_SCENARIO_SLOT_POOL || kind == MC_SCENARIO_MIXED_STEP ||
         kind == MC_SCENARIO_PREFIX_RESUME) &&
        ctx->ops->forward_packed == NULL) {
        /* said before the model is built: nothing of the check can run */
        res->status = MC_CHECK_UNSUPPORTED;
        snprintf(res->message, sizeof res->message, "backend %s has no packed call (forward_packed)", ctx->ops->name);
        res->duration_s = mc_clock_now_s() - t0;
        return MC_ERR_NONE;
    }
    struct mc_session s;
    enum mc_err_code rc = mc_session_open(&s, ctx, res, err);
    if (rc == MC_ERR_NONE && !s.broken) {
        switch (ctx->spec->kind) {
        case MC_SCENARIO_PREFILL:
            run_prefill(&s);
            break;
        case MC_SCENARIO_DECODE:
            run_decode(&s);
            break;
        case MC_SCENARIO_CHUNKED:
            run_chunked(&s);
            break;
        case MC_SCENARIO_FIRST_TOKEN_CAUSALITY:
            run_first_token(&s);
            break;
        case MC_SCENARIO_LEFT_PADDED_BATCH:
            run_left_padded(&s);
            break;
        case MC_SCENARIO_BATCH_INVARIANCE:
            run_batch_invariance(&s);
            break;
        case MC_SCENARIO_SPECULATIVE_VERIFY:
            run_speculative(&s);
            break;
        case MC_SCENARIO_RIGHT_PADDED_BATCH:
            run_right_padded(&s);
            break;
        case MC_SCENARIO_CHUNK_SIZE_INVARIANCE:
            run_chunk_sizes(&s);
            break;
        case MC_SCENARIO_CACHE_ROUNDTRIP:
            run_cache_roundtrip(&s);
            break;
        case MC_SCENARIO_DETERMINISM:
            mc_determinism_run(&s);
            break;
        case MC_SCENARIO_PACKED_PREFILL:
        case MC_SCENARIO_SLOT_POOL:
        case MC_SCENARIO_MIXED_STEP:
        case MC_SCENARIO_PREFIX_RESUME:
            mc_serving_run(&s);
            break;
        case MC_SCENARIO_LONG_DECODE:
        case MC_SCENARIO_LENGTH_SWEEP:
            mc_longrun_run(&s);
            break;
        case MC_SCENARIO_HEAD_SHARD:
            mc_headshard_run(&s);
            break;
        default:
            mc_error_set(err, MC_ERR_INTERNAL, "scenario '%s' has no runner", mc_scenario_name(ctx->spec->kind));
            break;
        }
        rc = err->code;
    }
    mc_session_close(&s);
    mc_check_verdict(res);
    if (res->status == MC_CHECK_NONDETERMINISTIC && s.nondeterminism[0] != '\0')
        snprintf(res->message, sizeof res->message,
                 "%s: the backend is nondeterministic; other differences of this check may come from it",
                 s.nondeterminism);
    if (rc == MC_ERR_NONE && res->status == MC_CHECK_FAIL && !ctx->probes && mc_probes_capable(ctx->ops))
        rc = rerun_with_probes(ctx, res, err);
    res->duration_s = mc_clock_now_s() - t0;
    return rc;
}
