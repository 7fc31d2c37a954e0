/*
 * packed_mutants.c — the packed-call mutant library (mc_packed_mutants): the reference mixers of every
 * family with a forward_packed broken like a shipped serving-path bug (docs/semantics.md §9),
 * plus the correct packed call as a control. Everything but forward_packed (and, for S2.7, S2.9 and
 * S2.10, forward) is the reference's own ops; the packed call runs each sequence as a batch-of-one cache
 * through the reference forward, like mc_ref_forward_packed, with exactly one fault switched on. Each
 * mutant computes what the upstream code of its thread computed, in the reference's terms (the thread
 * is in its row below). tests/packed/test_packed.c runs each
 * through the CLI and asserts the scenario meant for it fails, naming the tensor.
 *
 * | backend                                | upstream thread (semantics §9)           | what it computes                                                             | caught by (tiny case: scenario -> tensor) |
 * |----------------------------------------|-------------------------------------------|------------------------------------------------------------------------------|-------------------------------------------|
 * | mutant.S2.3-state-leak                 | S2.3: FLA#1184; causal-conv1d#118         | a fresh sequence (has_initial_state 0) after another starts from the previous sequence's final window and state, not zeros | packed_prefill -> output |
 * | mutant.S2.4-initial-state-ignored      | S2.4: vllm-ascend#10558; vllm#56524       | has_initial_state ignored: every sequence starts from whatever its slot holds | slot_pool -> output                      |
 * | mutant.S2.5-wrong-slot                 | S2.5: vllm#55507; vllm#20838              | reads its own slot but writes the result into the next pool row (slot + 1 mod S), one it does not own | slot_pool -> untouched, recurrent_state |
 * | mutant.S2.6-one-token-prefill-decode   | S2.6: vllm#32118                          | a one-token sequence is always run as a decode of its slot, has_initial_state 0 included | mixed_step -> output       |
 * | mutant.S2.1-chunk-grid                 | S2.1: sglang#37836, #33450                | one chunk grid of Q = 8 over the packed axis, but each sequence's final state read at the last grid point inside it, as if every sequence started a chunk: right only when cu_seqlens[i+1] is a multiple of Q (the window is right: the conv runs apart) | packed_prefill -> recurrent_state (mamba2, gdn) |
 * | mutant.S2.2-decay-from-chunk-start     | S2.2: vllm#23279; vllm#21783              | Mamba2: a resuming sequence that begins mid-chunk has its initial state decayed from the chunk start, through the previous sequence's tokens of that chunk | packed_prefill -> output (mamba2) |
 * | mutant.S2.7-stale-column               | S2.7: vllm#52942, #39273                  | after a multi-token forward on a primed cache (an accept of two or more), the next single-token step (a zero-draft step) starts from the checkpoint one token before the end | speculative_verify -> consistency |
 * | mutant.S2.7-accept-clamped             | S2.7: xLLM#2247                           | the accepted count clamped to 3: a forward of more than 3 tokens on a primed cache commits the checkpoint after its third token | speculative_verify -> consistency |
 * | mutant.S2.8-prefix-off-grid            | S2.8: vllm#34587, #53945                  | a sequence ending off the block grid (8 tokens, absolute positions of the slot) leaves in its slot the cache of its last grid point: the prefix state cached before it is complete | prefix_resume -> output |
 * | mutant.S2.9-bf16-state                 | S2.9: vllm#39032; sglang#10258            | the cache (window and state) stored in bf16 whatever the model dtype: rounded after every forward | long_decode -> output (cases/long) |
 * | mutant.S2.10-tail-skipped              | S2.10: FLA#906                            | a forward of more than 65536 tokens skips its partial tail chunk (64 tokens): zeros out, the cache of the last full chunk | length_sweep -> output (cases/long) |
 * | mutant.S2.11-groups-repeat             | S2.11: llama.cpp#15625                    | (groups_mutant.c, its own library: the Mamba2 reference built with head h reading group h % G) | prefill on mamba2/groups2 -> output |
 * | control.packed                         | -                                         | the packed call by its definition (no fault)                                  | must pass every packed scenario           |
 * | control.no-packed                      | -                                         | the reference with forward_packed NULL                                       | every packed scenario `unsupported`       |
 */
#include <stdlib.h>
#include <string.h>

#include "ref_common.h"
#include "reference.h"

#define EXPORT __attribute__((visibility("default")))

enum fault {
    F_NONE,
    F_STATE_LEAK,
    F_IGNORE_INITIAL,
    F_WRONG_SLOT,
    F_ONE_TOKEN_DECODE,
    F_CHUNK_GRID,
    F_DECAY_CHUNK_START,
    F_STALE_COLUMN,
    F_ACCEPT_CLAMPED,
    F_PREFIX_OFF_GRID,
    F_BF16_STATE,
    F_TAIL_SKIPPED,
    F_COUNT
};

/* The faults in forward rather than in forward_packed. */
static int forward_fault(enum fault f)
{
    return f == F_STALE_COLUMN || f == F_ACCEPT_CLAMPED || f == F_BF16_STATE || f == F_TAIL_SKIPPED;
}

#define GRID 8         /* S2.1, S2.2: the packed axis's chunk length; S2.8: the block length */
#define CLAMP 3        /* S2.7: xLLM#2247 clamps the accepted count to 3 */
#define BIG_T 65536    /* S2.10: FLA#906, the tail is lost above this many tokens */
#define TAIL_CHUNK 64  /* S2.10: FLA's chunk length */

static const char *const fault_names[F_COUNT] = {
    "control.packed",
    "mutant.S2.3-state-leak",
    "mutant.S2.4-initial-state-ignored",
    "mutant.S2.5-wrong-slot",
    "mutant.S2.6-one-token-prefill-decode",
    "mutant.S2.1-chunk-grid",
    "mutant.S2.2-decay-from-chunk-start",
    "mutant.S2.7-stale-column",
    "mutant.S2.7-accept-clamped",
    "mutant.S2.8-prefix-off-grid",
    "mutant.S2.9-bf16-state",
    "mutant.S2.10-tail-skipped",
};

static enum mc_backend_status fail(struct mc_msg *msg, enum mc_backend_status st, const char *what)
{
    if (msg != NULL) {
        strncpy(msg->text, what, sizeof msg->text - 1);
        msg->text[sizeof msg->text - 1] = '\0';
    }
    return st;
}


/* ---- side tables: what a mutant keeps per cache (a stale checkpoint, a slot's position) ---------- */

#define MAX_TRACKED 64
static struct tracked {
    const struct mc_cache *cache;
    void *stale;       /* S2.7 stale column: [batch] checkpoints (state, or window without state) */
    int stale_valid;
    int64_t *pos;      /* S2.8: [batch] tokens each slot holds since its last fresh start */
} tracked[MAX_TRACKED];

static struct tracked *track(const struct mc_cache *c, int create)
{
    struct tracked *free_slot = NULL;
    for (int i = 0; i < MAX_TRACKED; i++) {
        if (tracked[i].cache == c)
            return &tracked[i];
        if (tracked[i].cache == NULL && free_slot == NULL)
            free_slot = &tracked[i];
    }
    if (!create || free_slot == NULL)
        return NULL;
    memset(free_slot, 0, sizeof *free_slot);
    free_slot->cache = c;
    return free_slot;
}

static void untrack(const struct mc_cache *c)
{
    struct tracked *t = track(c, 0);
    if (t != NULL) {
        free(t->stale);
        free(t->pos);
        memset(t, 0, sizeof *t);
    }
}

/* The checkpoint a stale column holds: the state, or the window for a family without one. */
static void checkpoint(const struct mc_ref_model *m, const struct mc_cache *c, void **p, size_t *row_bytes)
{
    *p = m->state_elems ? c->state : c->window;
    *row_bytes = (size_t)(m->state_elems ? m->state_elems : m->window_elems) * m->elem_bytes;
}

/* The first n tokens of every row of a [B][L] forward, as a forward of its own on cache c: x (and the
 * mask) repacked per row, its y copied back into the first n tokens of each row of a->y. */
static enum mc_backend_status forward_prefix(const struct mc_backend_ops *base, struct mc_model *model,
                                             struct mc_cache *c, const struct mc_forward_args *a, int64_t n,
                                             struct mc_msg *msg)
{
    const struct mc_ref_model *m = (const struct mc_ref_model *)(const void *)model;
    const size_t tok = (size_t)m->hidden * m->elem_bytes;
    unsigned char *x = malloc((size_t)(a->batch * n) * tok + 1), *y = malloc((size_t)(a->batch * n) * tok + 1);
    uint8_t *mask = a->mask ? malloc((size_t)(a->batch * n) + 1) : NULL;
    enum mc_backend_status st = MC_BACKEND_NOMEM;
    if (x == NULL || y == NULL || (a->mask && mask == NULL))
        goto out;
    for (int64_t b = 0; b < a->batch; b++) {
        memcpy(x + (size_t)(b * n) * tok, (const unsigned char *)a->x + (size_t)(b * a->len) * tok, (size_t)n * tok);
        if (mask)
            memcpy(mask + b * n, a->mask + b * a->len, (size_t)n);
    }
    struct mc_forward_args fa = {.batch = a->batch, .len = n, .x = x, .mask = mask, .y = y};
    if ((st = base->forward(model, c, &fa, msg)) == MC_BACKEND_OK)
        for (int64_t b = 0; b < a->batch; b++)
            memcpy((unsigned char *)a->y + (size_t)(b * a->len) * tok, y + (size_t)(b * n) * tok, (size_t)n * tok);
out:
    free(x);
    free(y);
    free(mask);
    return st;
}

/* Rounds n values of the model dtype to bf16 (round to nearest even), in place. */
static void round_bf16(const struct mc_ref_model *m, void *p, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        double v = m->elem_bytes == sizeof(double) ? ((double *)p)[i] : (double)((float *)p)[i];
        float f = (float)v;
        uint32_t bits;
        memcpy(&bits, &f, sizeof bits);
        if ((bits & 0x7f800000u) != 0x7f800000u)
            bits = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
        memcpy(&f, &bits, sizeof f);
        if (m->elem_bytes == sizeof(double))
            ((double *)p)[i] = (double)f;
        else
            ((float *)p)[i] = f;
    }
}

/* The plain forward with one of the forward faults (S2.7, S2.9, S2.10). */
static enum mc_backend_status forward_mut(const struct mc_backend_ops *base, enum fault fault, struct mc_model *model,
                                          struct mc_cache *cache, const struct mc_forward_args *a, struct mc_msg *msg)
{
    const struct mc_ref_model *m = (const struct mc_ref_model *)(const void *)model;
    enum mc_backend_status st;
    if (cache == NULL || m == NULL || a == NULL) {
        if (fault != F_TAIL_SKIPPED || a == NULL || a->len <= BIG_T || a->len % TAIL_CHUNK == 0)
            return base->forward(model, cache, a, msg);
    }
    if (fault == F_BF16_STATE) {
        if ((st = base->forward(model, cache, a, msg)) == MC_BACKEND_OK) {
            round_bf16(m, cache->window, cache->batch * m->window_elems);
            if (m->state_elems)
                round_bf16(m, cache->state, cache->batch * m->state_elems);
        }
        return st;
    }
    if (fault == F_TAIL_SKIPPED) {
        if (a->len <= BIG_T || a->len % TAIL_CHUNK == 0)
            return base->forward(model, cache, a, msg);
        const size_t tok = (size_t)m->hidden * m->elem_bytes;
        const int64_t full = a->len / TAIL_CHUNK * TAIL_CHUNK;
        struct mc_cache *own = NULL;
        if (cache == NULL && (st = base->cache_alloc(model, a->batch, &own, msg)) != MC_BACKEND_OK)
            return st;
        st = forward_prefix(base, model, cache ? cache : own, a, full, msg);
        for (int64_t b = 0; st == MC_BACKEND_OK && b < a->batch; b++) /* the tail chunk never ran */
            memset((unsigned char *)a->y + (size_t)(b * a->len + full) * tok, 0, (size_t)(a->len - full) * tok);
        if (own != NULL)
            base->cache_free(model, own);
        return st;
    }
    void *ck;
    size_t ck_row;
    checkpoint(m, cache, &ck, &ck_row);
    struct tracked *t = track(cache, 1);
    if (fault == F_STALE_COLUMN && a->len == 1 && t != NULL && t->stale_valid) {
        /* the zero-draft step reads the column the last accept left one token back */
        memcpy(ck, t->stale, ck_row * (size_t)cache->batch);
        t->stale_valid = 0;
        return base->forward(model, cache, a, msg);
    }
    if (t != NULL)
        t->stale_valid = 0;
    int keep = fault == F_STALE_COLUMN ? a->len >= 2 : a->len > CLAMP;
    if (!cache->primed || !keep)
        return base->forward(model, cache, a, msg);
    /* a multi-token forward on a primed cache: the accept step of speculative decoding */
    struct mc_cache *side = NULL;
    if ((st = base->cache_alloc(model, cache->batch, &side, msg)) != MC_BACKEND_OK)
        return st;
    if ((st = base->cache_copy(model, side, cache, msg)) == MC_BACKEND_OK &&
        (st = base->forward(model, cache, a, msg)) == MC_BACKEND_OK) {
        unsigned char *ysave = malloc((size_t)(a->batch * a->len * m->hidden) * m->elem_bytes + 1);
        if (ysave == NULL) {
            st = MC_BACKEND_NOMEM;
        } else {
            /* the side run's outputs are thrown away: keep the real ones */
            memcpy(ysave, a->y, (size_t)(a->batch * a->len * m->hidden) * m->elem_bytes);
            int64_t n = fault == F_STALE_COLUMN ? a->len - 1 : CLAMP;
            st = forward_prefix(base, model, side, a, n, msg);
            memcpy(a->y, ysave, (size_t)(a->batch * a->len * m->hidden) * m->elem_bytes);
            free(ysave);
        }
        if (st == MC_BACKEND_OK && fault == F_ACCEPT_CLAMPED) {
            /* the checkpoint after token CLAMP is committed */
            base->cache_copy(model, cache, side, msg);
        } else if (st == MC_BACKEND_OK && t != NULL) {
            void *sck;
            checkpoint(m, side, &sck, &ck_row);
            if (t->stale == NULL)
                t->stale = malloc(ck_row * (size_t)cache->batch);
            if (t->stale != NULL) {
                memcpy(t->stale, sck, ck_row * (size_t)cache->batch);
                t->stale_valid = 1;
            }
        }
    }
    base->cache_free(model, side);
    return st;
}

/* n tokens x [n][D] (model dtype) as a batch-of-one forward on c; the outputs are thrown away. */
static enum mc_backend_status run_tokens(const struct mc_backend_ops *base, struct mc_model *model, struct mc_cache *c,
                                         const void *x, int64_t n, struct mc_msg *msg)
{
    const struct mc_ref_model *m = (const struct mc_ref_model *)(const void *)model;
    void *y = malloc((size_t)(n * m->hidden) * m->elem_bytes + 1);
    if (y == NULL)
        return fail(msg, MC_BACKEND_NOMEM, "packed mutant: out of memory");
    struct mc_forward_args fa = {.batch = 1, .len = n, .x = x, .mask = NULL, .y = y};
    enum mc_backend_status st = base->forward(model, c, &fa, msg);
    free(y);
    return st;
}

/* S2.2: one's state h0 replaced by h0 carried through tokens x [n] without their inputs: the run from
 * (window, h0) minus the run from (window, 0). */
static enum mc_backend_status decay_through(const struct mc_backend_ops *base, struct mc_model *model,
                                            struct mc_cache *one, const void *x, int64_t n, struct mc_msg *msg)
{
    const struct mc_ref_model *m = (const struct mc_ref_model *)(const void *)model;
    struct mc_cache *ca = NULL, *cz = NULL;
    enum mc_backend_status st;
    if ((st = base->cache_alloc(model, 1, &ca, msg)) != MC_BACKEND_OK)
        return st;
    if ((st = base->cache_alloc(model, 1, &cz, msg)) != MC_BACKEND_OK)
        goto out;
    if ((st = base->cache_copy(model, ca, one, msg)) != MC_BACKEND_OK ||
        (st = base->cache_copy(model, cz, one, msg)) != MC_BACKEND_OK)
        goto out;
    memset(cz->state, 0, (size_t)m->state_elems * m->elem_bytes);
    if ((st = run_tokens(base, model, ca, x, n, msg)) != MC_BACKEND_OK ||
        (st = run_tokens(base, model, cz, x, n, msg)) != MC_BACKEND_OK)
        goto out;
    for (int64_t e = 0; e < m->state_elems; e++) {
        if (m->elem_bytes == sizeof(double))
            ((double *)one->state)[e] = ((double *)ca->state)[e] - ((double *)cz->state)[e];
        else
            ((float *)one->state)[e] = ((float *)ca->state)[e] - ((float *)cz->state)[e];
    }
out:
    if (ca != NULL)
        base->cache_free(model, ca);
    if (cz != NULL)
        base->cache_free(model, cz);
    return st;
}

/* The packed call through the reference ops `base`, with `fault` switched on. Arguments are taken as
 * valid (the scenarios only make valid calls). */
static enum mc_backend_status packed(const struct mc_backend_ops *base, enum fault fault, struct mc_model *model,
                                     struct mc_cache *pool, const struct mc_packed_args *a, struct mc_msg *msg)
{
    const struct mc_ref_model *m = (const struct mc_ref_model *)(const void *)model;
    const size_t wb = (size_t)m->window_elems * m->elem_bytes, sb = (size_t)m->state_elems * m->elem_bytes;
    const size_t tok = (size_t)m->hidden * m->elem_bytes;
    struct mc_cache *one = NULL;
    enum mc_backend_status st = base->cache_alloc(model, 1, &one, msg);
    if (st != MC_BACKEND_OK)
        return st;
    void *prev_w = calloc(1, wb), *prev_s = sb ? calloc(1, sb) : NULL;
    if (prev_w == NULL || (sb && prev_s == NULL)) {
        st = fail(msg, MC_BACKEND_NOMEM, "packed mutant: out of memory");
        goto out;
    }
    if (!pool->primed) {
        memset(pool->window, 0, wb * (size_t)pool->batch);
        if (sb)
            memset(pool->state, 0, sb * (size_t)pool->batch);
        pool->primed = 1;
    }
    int have_prev = 0;
    int64_t *pos = NULL; /* S2.8: the pool's per-slot positions */
    for (int64_t i = 0; i < a->n_seqs; i++) {
        int64_t t0 = a->cu_seqlens[i], len = a->cu_seqlens[i + 1] - t0;
        if (len == 0)
            continue;
        void *rw, *rs;
        mc_ref_cache_row(model, pool, a->slots[i], &rw, &rs);
        int from_slot = a->has_initial_state[i] || fault == F_IGNORE_INITIAL || (fault == F_ONE_TOKEN_DECODE && len == 1);
        if (from_slot) {
            memcpy(one->window, rw, wb);
            if (sb)
                memcpy(one->state, rs, sb);
        } else if (fault == F_STATE_LEAK && have_prev) {
            memcpy(one->window, prev_w, wb);
            if (sb)
                memcpy(one->state, prev_s, sb);
        } else {
            memset(one->window, 0, wb);
            if (sb)
                memset(one->state, 0, sb);
        }
        one->primed = 1;
        if (fault == F_DECAY_CHUNK_START && a->has_initial_state[i] && sb && t0 % GRID != 0 &&
            base == mc_reference_mamba2_ops()) {
            /* the initial state's decay summed from the chunk start c0, not the sequence start: h0
             * carried through tokens [c0, t0) of the chunk (the previous sequence's), without their
             * inputs (the difference of two runs from h0 and from zero: the scan is affine in h0) */
            const int64_t c0 = t0 / GRID * GRID;
            if ((st = decay_through(base, model, one, (const unsigned char *)a->x + (size_t)c0 * tok, t0 - c0, msg)) !=
                MC_BACKEND_OK)
                goto out;
        }
        struct mc_cache *grid = NULL; /* S2.1, S2.8: the cache at the grid point that gets committed */
        int64_t base_pos = 0, commit = 0;
        if (fault == F_CHUNK_GRID && sb) {
            const int64_t t1 = t0 + len, g = t1 / GRID * GRID;
            commit = t1 % GRID == 0 ? 0 : g > t0 ? g - t0 : -1; /* -1: no grid point inside: its initial state */
        } else if (fault == F_PREFIX_OFF_GRID) {
            if (pos == NULL) {
                struct tracked *tr = track(pool, 1);
                if (tr != NULL && tr->pos == NULL)
                    tr->pos = calloc((size_t)pool->batch, sizeof *tr->pos);
                pos = tr ? tr->pos : NULL;
            }
            base_pos = pos && a->has_initial_state[i] ? pos[a->slots[i]] : 0;
            const int64_t end = base_pos + len, g = end / GRID * GRID;
            commit = end % GRID == 0 || g <= base_pos ? 0 : g - base_pos;
            if (pos)
                pos[a->slots[i]] = end;
        }
        if (commit != 0) {
            if ((st = base->cache_alloc(model, 1, &grid, msg)) != MC_BACKEND_OK)
                goto out;
            if ((st = base->cache_copy(model, grid, one, msg)) != MC_BACKEND_OK ||
                (commit > 0 && (st = run_tokens(base, model, grid, (const unsigned char *)a->x + (size_t)t0 * tok,
                                                commit, msg)) != MC_BACKEND_OK)) {
                base->cache_free(model, grid);
                goto out;
            }
        }
        struct mc_forward_args fa = {.batch = 1,
                                     .len = len,
                                     .x = (const unsigned char *)a->x + (size_t)t0 * tok,
                                     .mask = NULL,
                                     .y = (unsigned char *)a->y + (size_t)t0 * tok};
        st = base->forward(model, one, &fa, msg);
        if (grid != NULL) {
            if (st == MC_BACKEND_OK) {
                /* S2.1 keeps the window the conv wrote (it runs apart); S2.8 caches both */
                if (fault == F_PREFIX_OFF_GRID)
                    memcpy(one->window, grid->window, wb);
                if (sb)
                    memcpy(one->state, grid->state, sb);
            }
            base->cache_free(model, grid);
        }
        if (st != MC_BACKEND_OK)
            goto out;
        if (fault == F_WRONG_SLOT)
            mc_ref_cache_row(model, pool, (a->slots[i] + 1) % pool->batch, &rw, &rs);
        memcpy(rw, one->window, wb);
        memcpy(prev_w, one->window, wb);
        if (sb) {
            memcpy(rs, one->state, sb);
            memcpy(prev_s, one->state, sb);
        }
        have_prev = 1;
    }
out:
    free(prev_w);
    free(prev_s);
    base->cache_free(model, one);
    return st;
}

#define N_FAMILIES 4

static const struct mc_backend_ops *family_base(int f)
{
    switch (f) {
    case 0:
        return mc_reference_mamba2_ops();
    case 1:
        return mc_reference_mamba1_ops();
    case 2:
        return mc_reference_gdn_ops();
    default:
        return mc_reference_shortconv_ops();
    }
}

/* One entry point per (family, fault): the packed call has no room for a selector. */
#define ENTRY(f, k)                                                                                                    \
    static enum mc_backend_status packed_##f##_##k(struct mc_model *model, struct mc_cache *pool,                      \
                                                   const struct mc_packed_args *a, struct mc_msg *msg)                 \
    {                                                                                                                  \
        return packed(family_base(f), (enum fault)(k), model, pool, a, msg);                                           \
    }
#define FAMILY_ENTRIES(f)                                                                                              \
    ENTRY(f, 0)                                                                                                        \
    ENTRY(f, 1)                                                                                                        \
    ENTRY(f, 2)                                                                                                        \
    ENTRY(f, 3)                                                                                                        \
    ENTRY(f, 4)                                                                                                        \
    ENTRY(f, 5)                                                                                                        \
    ENTRY(f, 6)                                                                                                        \
    ENTRY(f, 7)                                                                                                        \
    ENTRY(f, 8)                                                                                                        \
    ENTRY(f, 9)                                                                                                        \
    ENTRY(f, 10)                                                                                                       \
    ENTRY(f, 11)
FAMILY_ENTRIES(0)
FAMILY_ENTRIES(1)
FAMILY_ENTRIES(2)
FAMILY_ENTRIES(3)

/* The forward of the forward faults, and a cache_free that drops what the side tables keep. */
#define FWD_ENTRY(f, k)                                                                                                \
    static enum mc_backend_status forward_##f##_##k(struct mc_model *model, struct mc_cache *cache,                    \
                                                    const struct mc_forward_args *a, struct mc_msg *msg)               \
    {                                                                                                                  \
        return forward_mut(family_base(f), (enum fault)(k), model, cache, a, msg);                                     \
    }
#define FAMILY_FWD(f) FWD_ENTRY(f, 7) FWD_ENTRY(f, 8) FWD_ENTRY(f, 10) FWD_ENTRY(f, 11)
FAMILY_FWD(0)
FAMILY_FWD(1)
FAMILY_FWD(2)
FAMILY_FWD(3)
#define FREE_ENTRY(f)                                                                                                  \
    static void cache_free_##f(struct mc_model *model, struct mc_cache *cache)                                        \
    {                                                                                                                  \
        untrack(cache);                                                                                                \
        family_base(f)->cache_free(model, cache);                                                                      \
    }
FREE_ENTRY(0)
FREE_ENTRY(1)
FREE_ENTRY(2)
FREE_ENTRY(3)

typedef enum mc_backend_status (*packed_fn)(struct mc_model *, struct mc_cache *, const struct mc_packed_args *,
                                            struct mc_msg *);
typedef enum mc_backend_status (*forward_fn)(struct mc_model *, struct mc_cache *, const struct mc_forward_args *,
                                             struct mc_msg *);
typedef void (*free_fn)(struct mc_model *, struct mc_cache *);
#define ROW(f)                                                                                                         \
    {packed_##f##_0, packed_##f##_1, packed_##f##_2, packed_##f##_3, packed_##f##_4,  packed_##f##_5,                  \
     packed_##f##_6, packed_##f##_7, packed_##f##_8, packed_##f##_9, packed_##f##_10, packed_##f##_11}
static const packed_fn entries[N_FAMILIES][F_COUNT] = {ROW(0), ROW(1), ROW(2), ROW(3)};
#define FWD_ROW(f) {[7] = forward_##f##_7, [8] = forward_##f##_8, [10] = forward_##f##_10, [11] = forward_##f##_11}
static const forward_fn forwards[N_FAMILIES][F_COUNT] = {FWD_ROW(0), FWD_ROW(1), FWD_ROW(2), FWD_ROW(3)};
static const free_fn frees[N_FAMILIES] = {cache_free_0, cache_free_1, cache_free_2, cache_free_3};

#define PER_FAMILY (F_COUNT + 1) /* the faults, and the reference without a packed call */
static struct mc_backend_ops ops[N_FAMILIES * PER_FAMILY];
static const struct mc_backend_ops *table[N_FAMILIES * PER_FAMILY];

EXPORT const struct mc_backend_ops *const *mixcheck_plugin_backends(uint32_t *count, uint32_t *abi_version)
{
    for (int f = 0; f < N_FAMILIES; f++) {
        for (int k = 0; k < PER_FAMILY; k++) {
            struct mc_backend_ops *o = &ops[f * PER_FAMILY + k];
            *o = *family_base(f);
            o->name = k < F_COUNT ? fault_names[k] : "control.no-packed";
            o->forward_packed = k < F_COUNT ? entries[f][k] : NULL;
            if (k < F_COUNT && forward_fault((enum fault)k)) {
                o->forward = forwards[f][k];
                /* its forward is several reference forwards: the reference's probes would describe the
                 * last of them, not the call (a mis-shaped probe, the check's error) */
                o->probe_enable = NULL;
                o->probe_read = NULL;
                o->caps &= ~MC_CAP_PROBES;
            }
            if (k == F_STALE_COLUMN || k == F_PREFIX_OFF_GRID)
                o->cache_free = frees[f];
            if (k == F_COUNT)
                o->caps &= ~MC_CAP_PACKED;
            table[f * PER_FAMILY + k] = o;
        }
    }
    *count = N_FAMILIES * PER_FAMILY;
    *abi_version = MIXCHECK_ABI_VERSION;
    return table;
}
