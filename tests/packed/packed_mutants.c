/*
 * packed_mutants.c — the packed-call mutant library (mc_packed_mutants): the reference mixers of every
 * family with a forward_packed broken like a shipped serving-path bug (docs/semantics.md §9),
 * plus the correct packed call as a control. Everything but forward_packed is the reference's own
 * ops; the packed call runs each sequence as a batch-of-one cache through the reference forward, like
 * mc_ref_forward_packed, with exactly one fault switched on. tests/packed/test_packed.c runs each
 * through the CLI and asserts the scenario meant for it fails, naming the tensor.
 *
 * | backend                                | upstream thread (semantics §9)           | what it computes                                                             | caught by (tiny case: scenario -> tensor) |
 * |----------------------------------------|-------------------------------------------|------------------------------------------------------------------------------|-------------------------------------------|
 * | mutant.S2.3-state-leak                 | S2.3: FLA#1184; causal-conv1d#118         | a fresh sequence (has_initial_state 0) after another starts from the previous sequence's final window and state, not zeros | packed_prefill -> output |
 * | mutant.S2.4-initial-state-ignored      | S2.4: vllm-ascend#10558; vllm#56524       | has_initial_state ignored: every sequence starts from whatever its slot holds | slot_pool -> output                      |
 * | mutant.S2.5-wrong-slot                 | S2.5: vllm#55507; vllm#20838              | reads its own slot but writes the result into the next pool row (slot + 1 mod S), one it does not own | slot_pool -> untouched, recurrent_state |
 * | mutant.S2.6-one-token-prefill-decode   | S2.6: vllm#32118                          | a one-token sequence is always run as a decode of its slot, has_initial_state 0 included | mixed_step -> output       |
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
    F_COUNT
};

static const char *const fault_names[F_COUNT] = {
    "control.packed",
    "mutant.S2.3-state-leak",
    "mutant.S2.4-initial-state-ignored",
    "mutant.S2.5-wrong-slot",
    "mutant.S2.6-one-token-prefill-decode",
};

static enum mc_backend_status fail(struct mc_msg *msg, enum mc_backend_status st, const char *what)
{
    if (msg != NULL) {
        strncpy(msg->text, what, sizeof msg->text - 1);
        msg->text[sizeof msg->text - 1] = '\0';
    }
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
        struct mc_forward_args fa = {.batch = 1,
                                     .len = len,
                                     .x = (const unsigned char *)a->x + (size_t)t0 * tok,
                                     .mask = NULL,
                                     .y = (unsigned char *)a->y + (size_t)t0 * tok};
        if ((st = base->forward(model, one, &fa, msg)) != MC_BACKEND_OK)
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
#define FAMILY_ENTRIES(f) ENTRY(f, 0) ENTRY(f, 1) ENTRY(f, 2) ENTRY(f, 3) ENTRY(f, 4)
FAMILY_ENTRIES(0)
FAMILY_ENTRIES(1)
FAMILY_ENTRIES(2)
FAMILY_ENTRIES(3)

typedef enum mc_backend_status (*packed_fn)(struct mc_model *, struct mc_cache *, const struct mc_packed_args *,
                                            struct mc_msg *);
#define ROW(f) {packed_##f##_0, packed_##f##_1, packed_##f##_2, packed_##f##_3, packed_##f##_4}
static const packed_fn entries[N_FAMILIES][F_COUNT] = {ROW(0), ROW(1), ROW(2), ROW(3)};

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
            if (k == F_COUNT)
                o->caps &= ~MC_CAP_PACKED;
            table[f * PER_FAMILY + k] = o;
        }
    }
    *count = N_FAMILIES * PER_FAMILY;
    *abi_version = MIXCHECK_ABI_VERSION;
    return table;
}
