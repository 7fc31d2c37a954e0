/*
 * mutants.c — the mutant library (mc_mutants): one deliberately broken backend per bug class of
 * docs/semantics.md §8, each the correct code of mut_mamba2.c / mut_gdn.c / mut_shortconv.c with exactly one
 * upstream-style bug switched on, plus one variant that is NOT a bug and must pass. tests/mutants/
 * test_mutants.c runs each through the CLI on every bundled case of its family and asserts that the
 * intended scenario catches it, naming the right tensor (the kill matrix).
 *
 * All: device "cpu", dtype f32 (the non-bug: bf16), f32 math, the cache exported in f32.
 *
 * | id (backend name)                   | family    | upstream origin                          | what it computes                                                                          | caught by (case: scenario -> tensor)                                   |
 * |-------------------------------------|-----------|------------------------------------------|-------------------------------------------------------------------------------------------|------------------------------------------------------------------------|
 * | mutant.8.1a-dt-first-token          | mamba2    | #46084 / #46741 (single-step misroute)   | continued forward (primed, L > 1) uses dt of its first token for every row                | tiny: chunked -> output, recurrent_state (consistency passes)         |
 * | mutant.8.1b-cache-advance-one       | mamba2    | #46084 / #46741                          | outputs right; the cache advanced by the first token only (window shift + one SSM step)   | tiny: chunked, first_token_causality -> conv_state, recurrent_state (outputs pass) |
 * | mutant.8.1c-no-chaining             | mamba2    | #46084 / #46741                          | every row a single step from the same cached window/state (row 0 right, no chaining)      | tiny: chunked -> output (first_token_causality: consistency and distractor PASS) |
 * | mutant.8.2a-zero-conv-context       | mamba2    | #46741 (Bamba/FalconH1/GraniteMoeHybrid) | continued forward convolves with a zero window; state carried                              | tiny: first_token_causality -> consistency; chunked -> output         |
 * | mutant.8.2a-zero-conv-context       | gdn       | #45513 (Qwen3.5 pre-fix)                 | the same in Gated DeltaNet                                                                 | tiny: first_token_causality -> consistency; chunked -> output         |
 * | mutant.8.2b-state-reset             | mamba2    | #46084 (previous_states zero-initialised)| continued forward starts the scan from a zero state; window carried                        | tiny: chunked -> recurrent_state; first_token_causality -> consistency|
 * | mutant.8.2b-state-reset             | gdn       | #45513 (initial_state=None)              | the same in Gated DeltaNet                                                                 | tiny: chunked -> recurrent_state; first_token_causality -> consistency|
 * | mutant.8.3a-conv-first-l            | mamba2    | harness-derived (8.3)                    | continued forward keeps the first L, not the last L, outputs of conv(cat(W, x))            | tiny: first_token_causality -> consistency; chunked -> output         |
 * | mutant.8.3b-conv-off-by-one         | mamba2    | harness-derived (8.3)                    | continued forward drops K-1 warm-up outputs, not K: output t convolves the window ending at x[t-1] | tiny: first_token_causality -> consistency; chunked -> output  |
 * | mutant.8.3c-cache-post-act          | mamba2    | harness-derived (8.3)                    | the window caches post-conv+SiLU xBC instead of the pre-conv input                         | tiny: prefill -> conv_state (output passes); decode -> output         |
 * | mutant.8.4-pad-unmasked-continued   | mamba2    | #47086 (fixed by #47087)                 | on a continued multi-token forward the mask is dropped: pads run as real tokens            | leftpad: left_padded_batch -> output, recurrent_state                 |
 * | mutant.8.5-rightpad-leak            | mamba2    | #48256 (open)                            | pads run as zero-input tokens: zeros shift into the window, the state decays by exp(dt·A)  | rightpad: right_padded_batch -> conv_state, recurrent_state           |
 * | mutant.8.6-mask-skipped-batch1      | mamba2    | #46773 (open)                            | the mask is ignored when the batch has one row                                             | leftpad: left_padded_batch -> conv_state, recurrent_state; batch_invariance -> consistency |
 * | mutant.8.9-short-prefill-roll       | shortconv | old HF Mamba1/LFM2 cache; TML comment    | decode rolls the window and writes at min(cache_position, K-1)                             | k4: decode -> conv_state, output                                      |
 * | mutant.8.10-no-dt-clamp-decode      | mamba2    | selective_state_update has no dt_limit   | time_step_limit not applied in the single-token (L == 1, primed) path                      | dtlimit: decode -> output, recurrent_state (prefill passes)           |
 * | mutant.8.11-norm-group-swap         | mamba2    | HF full-row vs mamba_ssm groupwise norm  | gated RMSNorm over I when the config says I/G (and over I/G when it says I)                | groups2: prefill -> output (recurrent_state passes)                   |
 * | mutant.8.12-chunk-pad-decay         | mamba2    | harness-derived (8.12)                   | last chunk padded with the last dt repeated: S_final decays over the pad rows              | ragged: prefill -> recurrent_state (output passes); chunk_size_invariance -> recurrent_state |
 * | mutant.8.12-chunk-pad-write         | gdn       | harness-derived (8.12)                   | last chunk padded at the pre-conv input: pad rows get k from the conv window, β = σ(0), g ≠ 0, and write into S | tiny: prefill -> recurrent_state (output passes)  |
 * | mutant.8.13-group-mod               | mamba2    | harness-derived (8.13)                   | head h reads group h mod G instead of h / (H/G)                                            | groups2: prefill -> output, recurrent_state                           |
 * | mutant.8.13-key-head-mod            | gdn       | harness-derived (8.13)                   | value head h reads key head h mod Hk instead of h / r                                      | tiny: prefill -> output, recurrent_state                              |
 * | mutant.future-leak                  | mamba2    | harness-derived                          | causal conv padded on the right: output t sees x[t..t+K-1]                                  | tiny: first_token_causality -> distractor                             |
 * | nonbug.unfused-conv-act             | mamba2    | #47630 torch fallback vs fused CUDA conv | bf16 storage, conv output rounded to bf16 before the SiLU (§0.4, §A.8): NOT a bug          | must pass every case of cases/mamba2/ at bf16                         |
 * | mutant.rope-pad-positions           | attention | position_ids = arange (cache_position) under left padding | RoPE at the token's padded index, not the number of real tokens before it: keys cached at shifted angles (outputs only see position differences) | leftpad: left_padded_batch -> recurrent_state (output passes); tiny: prefill passes |
 * | mutant.rotary-all-dims              | attention | partial_rotary_factor dropped            | every head dim rotated, frequencies over hd instead of R = hd·factor                       | qwen3next: prefill -> output, recurrent_state; tiny (full rotary): prefill passes |
 * | mutant.nope-rotated                 | attention | a NoPE model run through a Llama attention | position_embedding_type "nope" (no_rope) ignored: q and k rotated at the config's factor and theta | nope: prefill -> output, recurrent_state; tiny (rotary anyway): prefill passes |
 * | mutant.scale-default                | attention | attention_multiplier dropped (Granite)   | softmax_scale ignored: scores scaled by 1/sqrt(hd)                                         | nope: prefill -> output (recurrent_state passes); tiny (default scale): prefill passes |
 * | mutant.8.13-kv-head-mod             | attention | harness-derived (8.13)                   | query head h reads kv head h mod Hkv instead of h / (Hq/Hkv)                               | qwen3next: prefill -> output (recurrent_state passes); tiny (Hq = Hkv) passes |
 * | mutant.8.4-pad-unmasked-continued   | attention | #47086 (the Mamba2 bug, in attention)    | on a continued multi-token forward the mask is dropped: pads cached, counted and attended  | leftpad: left_padded_batch -> conv_state (the count), recurrent_state |
 * | mutant.mla-rope-on-nope             | attention | a port rotating "the first R dims" of an MLA query | the query's rotation applied to its nope dims: the rope part unrotated, the nope part rotated | mla: prefill -> output (recurrent_state passes); mla_kimi (no rope) passes |
 * | mutant.mla-latent-norm-skipped      | attention | kv_a_layernorm dropped                   | the raw latent cached and expanded                                                         | mla, mla_kimi: prefill -> output, recurrent_state                     |
 * | mutant.mla-kv-split-swapped         | attention | kv_b_proj's per-head split order         | each head's rows read as value | key instead of key | value                                | mla_kimi: prefill -> output (recurrent_state passes)                  |
 * | mutant.mla-scale-nope-dim           | attention | softmax_scale from qk_nope_head_dim      | scores scaled by 1/sqrt(qk_nope_head_dim) instead of 1/sqrt(nope + rope)                   | mla_kimi: prefill -> output (recurrent_state passes)                  |
 * | mutant.8.15-decode-no-d             | mamba2    | decode-only parameter mistakes (ports)   | the single-token step on a primed cache drops D·x; prefill and continued forwards keep it  | tiny: decode -> output (prefill, first_token_causality pass)          |
 * | mutant.8.19-export-rows-reversed    | mamba2    | export loops of ports                    | cache_export writes the batch rows in reverse order; the cache itself is right             | tiny: prefill -> conv_state, recurrent_state (output passes)          |
 * | mutant.8.20-import-no-window        | shortconv | import paths of ports                    | cache_import takes nothing of the window (left zero)                                       | tiny: cache_roundtrip -> output                                       |
 * | mutant.8.21-copy-no-state           | gdn       | copy paths of ports                      | cache_copy copies the windows, not the states                                              | tiny: determinism -> output                                           |
 * | mutant.8.22-alloc-dirty-state       | gdn       | malloc for calloc (S2.4's [B, L] form)   | cache_alloc leaves the state holding leftover values and no fresh flag resets it          | tiny: prefill -> output, recurrent_state                              |
 * | mutant.lightning-block-boundary-decay | lightning | harness-derived (MiniMax's block form)  | the state leaving a partial block of b < Q tokens decays by λ^Q (the full block's decay), not λ^b | tiny: prefill -> recurrent_state; chunked -> output (odd, slopes ~1e-6, passes) |
 * | mutant.lightning-slope-order        | lightning | harness-derived (slopes per TP rank / reversed table) | head h decays with the slope of head H-1-h                                   | tiny: prefill -> output, recurrent_state                               |
 * | mutant.8.2b-state-reset             | lightning | the MiniMaxCache prefill branch taken on a primed cache | a continued forward starts from a zero state                          | tiny: chunked -> recurrent_state; first_token_causality -> consistency |
 * | mutant.kda-gate-per-head            | kda       | a gated-delta-rule kernel fed g [B][L][H] | every key channel of a head decays with the head's first channel's g (per-channel gate broadcast as per-head) | tiny: prefill -> output, recurrent_state (conv_state passes) |
 * | mutant.8.2a-zero-conv-context       | kda       | #45513's GDN bug, in KDA                  | continued forward convolves with a zero window; state carried                             | tiny: first_token_causality -> consistency; chunked -> output         |
 * | mutant.8.2b-state-reset             | kda       | #45513's GDN bug, in KDA                  | continued forward starts from a zero state; window carried                                | tiny: chunked -> recurrent_state; first_token_causality -> consistency|
 * | control.correct                     | all six   | -                                        | the same code with no fault (f32; Mamba2 also bf16): the baseline every mutant differs from | must pass every bundled case of its family                             |
 *
 * Every mutant also fails other checks (a broken cache breaks the decode that follows, and so on);
 * the table names the scenario that is meant to catch it and the tensor its diagnosis must name. Note
 * 8.1c: its row 0 is right, so the upstream-style first-token check (consistency, distractor) passes
 * it; mixcheck's first_token_causality scenario still fails it, on the golden comparison of the
 * multi-token rows >= 1 and of the cache at P+S, and chunked fails it on every case.
 *
 * The library also registers whole-stack backends (family MC_FAMILY_STACK: stack.correct and the glue
 * mutants stack.*), whole models composed of these mixers with glue of their own: mut_stack.c, its
 * table there; kill matrix tests/mutants/test_stack_mutants.c.
 */
#include <stdlib.h>
#include <string.h>

#include "mutants.h"

#define EXPORT __attribute__((visibility("default")))

/* ---- cache ----------------------------------------------------------------------------------------- */

void mut_cache_free(struct mc_model *m, struct mc_cache *c)
{
    (void)m;
    if (c == NULL)
        return;
    free(c->window);
    free(c->state);
    free(c);
}

enum mc_backend_status mut_cache_alloc(struct mc_model *m, int64_t batch, struct mc_cache **out,
                                              struct mc_msg *msg)
{
    if (m == NULL || out == NULL || batch < 1)
        return mut_fail(msg, MC_BACKEND_INVALID, "mutant: cache_alloc needs a model, an output and batch >= 1");
    struct mc_cache *c = calloc(1, sizeof *c);
    if (c != NULL) {
        c->batch = batch;
        c->window = calloc((size_t)(batch * m->win_elems), sizeof *c->window);
        c->state = m->state_elems ? calloc((size_t)(batch * m->state_elems), sizeof *c->state) : NULL;
    }
    if (c != NULL && c->state != NULL && m->fault == MUT_ALLOC_DIRTY_STATE) {
        /* 8.22: what malloc may hand back, here a fixed pattern standing for the leftover memory */
        for (int64_t i = 0; i < batch * m->state_elems; i++)
            c->state[i] = 0.25f * (float)((i % 7) - 3);
        c->primed = 1; /* and no fresh flag: the first forward continues from it */
    }
    if (c == NULL || c->window == NULL || (m->state_elems && c->state == NULL)) {
        mut_cache_free(m, c);
        return mut_fail(msg, MC_BACKEND_NOMEM, "mutant: out of memory for a cache of batch %lld", (long long)batch);
    }
    *out = c;
    return MC_BACKEND_OK;
}

enum mc_backend_status mut_cache_copy(struct mc_model *m, struct mc_cache *dst, const struct mc_cache *src,
                                             struct mc_msg *msg)
{
    if (dst->batch != src->batch)
        return mut_fail(msg, MC_BACKEND_INVALID, "mutant: cache_copy batch mismatch");
    memcpy(dst->window, src->window, (size_t)(src->batch * m->win_elems) * sizeof *dst->window);
    if (m->state_elems && m->fault != MUT_COPY_NO_STATE) /* 8.21: the states are left behind */
        memcpy(dst->state, src->state, (size_t)(src->batch * m->state_elems) * sizeof *dst->state);
    dst->primed = src->primed;
    dst->pos = src->pos;
    return MC_BACKEND_OK;
}

enum mc_backend_status mut_cache_export(struct mc_model *m, const struct mc_cache *c, void *conv, void *state,
                                               struct mc_msg *msg)
{
    (void)msg;
    /* 8.19: the rows written in reverse batch order (a wrong row stride in the export's loop) */
    for (int64_t b = 0; b < c->batch; b++) {
        int64_t to = m->fault == MUT_EXPORT_ROWS_REVERSED ? c->batch - 1 - b : b;
        if (conv != NULL)
            memcpy((float *)conv + to * m->win_elems, c->window + b * m->win_elems,
                   (size_t)m->win_elems * sizeof *c->window);
        if (state != NULL && m->state_elems)
            memcpy((float *)state + to * m->state_elems, c->state + b * m->state_elems,
                   (size_t)m->state_elems * sizeof *c->state);
    }
    return MC_BACKEND_OK;
}

static enum mc_backend_status mut_cache_import(struct mc_model *m, struct mc_cache *c, const void *conv,
                                               const void *state, struct mc_msg *msg)
{
    if (conv == NULL || (m->state_elems && state == NULL))
        return mut_fail(msg, MC_BACKEND_INVALID, "mutant: cache_import needs the window and the state");
    if (m->fault == MUT_IMPORT_NO_WINDOW) /* 8.20: the window is not taken */
        memset(c->window, 0, (size_t)(c->batch * m->win_elems) * sizeof *c->window);
    else
        memcpy(c->window, conv, (size_t)(c->batch * m->win_elems) * sizeof *c->window);
    if (m->state_elems)
        memcpy(c->state, state, (size_t)(c->batch * m->state_elems) * sizeof *c->state);
    c->primed = 1;
    c->pos = INT64_MAX / 4; /* an imported cache has a full history */
    /* attention: cache_position after a load is the KV length, as an HF port takes it from
     * get_seq_length() (the window's one element per row is the cached-position count) */
    if (m->fam->family == MC_FAMILY_ATTENTION) {
        c->pos = 0;
        for (int64_t b = 0; b < c->batch; b++)
            if ((int64_t)c->window[b * m->win_elems] > c->pos)
                c->pos = (int64_t)c->window[b * m->win_elems];
    }
    return MC_BACKEND_OK;
}

/* ---- model ----------------------------------------------------------------------------------------- */

void mut_model_destroy(struct mc_model *m)
{
    if (m == NULL)
        return;
    if (m->impl != NULL)
        m->fam->destroy(m->impl);
    if (m->probes != NULL)
        for (int k = 0; k < MUT_MAX_PROBES; k++)
            free(m->probes->buf[k]);
    free(m->probes);
    free(m);
}

struct mut_spec {
    const char *name;
    const struct mut_family *fam;
    enum mut_fault fault;
    uint32_t dtypes; /* OR of MC_DTYPE_BIT */
};

enum mc_backend_status mut_model_new(const struct mut_family *fam, enum mut_fault fault, const struct mc_model_desc *d,
                                     struct mc_model **out, struct mc_msg *msg)
{
    struct mc_model *m = calloc(1, sizeof *m);
    if (m == NULL)
        return mut_fail(msg, MC_BACKEND_NOMEM, "mutant: out of memory");
    m->fam = fam;
    m->fault = fault;
    m->dtype = d->dtype;
    enum mc_backend_status st = fam->create(d, m, msg);
    if (st != MC_BACKEND_OK) {
        mut_model_destroy(m);
        return st;
    }
    if (d->chunk_size > 0)
        m->chunk = d->chunk_size;
    *out = m;
    return MC_BACKEND_OK;
}

static enum mc_backend_status mut_model_create(const struct mut_spec *sp, const struct mc_model_desc *d,
                                               struct mc_model **out, struct mc_msg *msg)
{
    if (d == NULL || out == NULL || d->config == NULL)
        return mut_fail(msg, MC_BACKEND_INVALID, "%s: model_create needs a descriptor with a configuration", sp->name);
    if (d->family != sp->fam->family)
        return mut_fail(msg, MC_BACKEND_INVALID, "%s: descriptor family %d, expected %d", sp->name, (int)d->family,
                        (int)sp->fam->family);
    if (!(MC_DTYPE_BIT(d->dtype) & sp->dtypes) || (d->dtype != MC_DTYPE_F32 && d->dtype != MC_DTYPE_BF16))
        return mut_fail(msg, MC_BACKEND_UNSUPPORTED, "%s: dtype %d is not supported", sp->name, (int)d->dtype);
    return mut_model_new(sp->fam, sp->fault, d, out, msg);
}

/* ---- forward ----------------------------------------------------------------------------------------- */

/* One batch row with the cache-level faults applied around the family's segment function. */
static enum mc_backend_status mut_row(const struct mc_model *m, float *w, float *s, const float *x,
                                      const uint8_t *mask, int64_t L, float *y, const struct mut_seg *seg,
                                      float *scratch, struct mc_msg *msg)
{
    const struct mut_family *f = m->fam;
    const int multi = seg->primed && L > 1;
    float *sw = scratch, *ss = scratch + m->win_elems;       /* [C][K], [state] */
    float *sink = scratch + m->win_elems + m->state_elems; /* [1][D] */
    enum mc_backend_status st = MC_BACKEND_OK;
    if (!multi || m->fault == MUT_NONE)
        return f->segment(m, w, s, x, mask, L, y, seg, msg);
    switch (m->fault) {
    case MUT_ADVANCE_ONE: /* 8.1b: outputs from the whole segment, cache from its first token */
        memcpy(sw, w, (size_t)m->win_elems * sizeof *sw);
        if (m->state_elems)
            memcpy(ss, s, (size_t)m->state_elems * sizeof *ss);
        st = f->segment(m, sw, m->state_elems ? ss : NULL, x, mask, L, y, seg, msg);
        if (st == MC_BACKEND_OK)
            st = f->segment(m, w, s, x, mask, 1, sink, seg, msg);
        return st;
    case MUT_NO_CHAIN: /* 8.1c: each row one step from the same cached window and state */
        memcpy(sw, w, (size_t)m->win_elems * sizeof *sw);
        if (m->state_elems)
            memcpy(ss, s, (size_t)m->state_elems * sizeof *ss);
        for (int64_t t = 0; t < L && st == MC_BACKEND_OK; t++) {
            memcpy(w, sw, (size_t)m->win_elems * sizeof *w);
            if (m->state_elems)
                memcpy(s, ss, (size_t)m->state_elems * sizeof *s);
            if (m->probes != NULL)
                m->probes->t0 = t; /* each single step writes its own token's probes */
            st = f->segment(m, w, s, x + t * m->D, mask ? mask + t : NULL, 1, y + t * m->D, seg, msg);
        }
        if (m->probes != NULL)
            m->probes->t0 = 0;
        return st;
    case MUT_ZERO_CONV_CONTEXT: /* 8.2a */
        memset(w, 0, (size_t)m->win_elems * sizeof *w);
        return f->segment(m, w, s, x, mask, L, y, seg, msg);
    case MUT_STATE_RESET: /* 8.2b */
        if (m->state_elems)
            memset(s, 0, (size_t)m->state_elems * sizeof *s);
        return f->segment(m, w, s, x, mask, L, y, seg, msg);
    default:
        return f->segment(m, w, s, x, mask, L, y, seg, msg);
    }
}

enum mc_backend_status mut_forward(struct mc_model *m, struct mc_cache *c, const struct mc_forward_args *a,
                                          struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    if (m == NULL || a == NULL || a->batch < 1 || a->len < 1 || a->x == NULL || a->y == NULL)
        return mut_fail(msg, MC_BACKEND_INVALID, "mutant: forward needs a model, x, y, batch >= 1 and len >= 1");
    if (c != NULL && c->batch != a->batch)
        return mut_fail(msg, MC_BACKEND_INVALID, "mutant: cache batch %lld, forward batch %lld", (long long)c->batch,
                        (long long)a->batch);
    const int64_t B = a->batch, L = a->len, D = m->D, n = B * L * D;
    float *xf = malloc((size_t)n * sizeof *xf);
    float *yf = malloc((size_t)n * sizeof *yf);
    float *scratch = malloc((size_t)(m->win_elems + m->state_elems + D) * sizeof *scratch);
    float *tw = c ? NULL : calloc((size_t)(B * m->win_elems), sizeof *tw);
    float *ts = c || !m->state_elems ? NULL : calloc((size_t)(B * m->state_elems), sizeof *ts);
    if (!xf || !yf || !scratch || (!c && !tw) || (!c && m->state_elems && !ts)) {
        st = mut_fail(msg, MC_BACKEND_NOMEM, "mutant: out of memory for a forward of B=%lld L=%lld", (long long)B,
                      (long long)L);
        goto out;
    }
    if (m->dtype == MC_DTYPE_BF16) {
        const uint16_t *xs = a->x;
        for (int64_t i = 0; i < n; i++)
            xf[i] = mut_bf16_to_f32(xs[i]);
    } else {
        memcpy(xf, a->x, (size_t)n * sizeof *xf);
    }
    if (c != NULL && !c->primed) {
        memset(c->window, 0, (size_t)(B * m->win_elems) * sizeof *c->window);
        if (m->state_elems)
            memset(c->state, 0, (size_t)(B * m->state_elems) * sizeof *c->state);
        c->pos = 0;
    }
    float *window = c ? c->window : tw, *state = c ? c->state : ts;
    struct mut_seg seg = {.primed = c != NULL && c->primed, .batch = B, .pos = c ? c->pos : 0};
    struct mut_probes *pr = m->probes;
    if (pr != NULL) { /* a new forward: its probes replace the last one's */
        pr->n = 0;
        pr->failed = 0;
        pr->B = B;
        pr->L = L;
        pr->t0 = 0;
    }
    for (int64_t b = 0; b < B && st == MC_BACKEND_OK; b++) {
        if (pr != NULL)
            pr->row = b;
        st = mut_row(m, window + b * m->win_elems, state ? state + b * m->state_elems : NULL, xf + b * L * D,
                     a->mask ? a->mask + b * L : NULL, L, yf + b * L * D, &seg, scratch, msg);
    }
    if (pr != NULL && st != MC_BACKEND_OK)
        pr->n = 0;
    if (st != MC_BACKEND_OK)
        goto out;
    if (c != NULL) {
        c->primed = 1;
        c->pos += L;
    }
    if (m->dtype == MC_DTYPE_BF16) {
        uint16_t *ys = a->y;
        for (int64_t i = 0; i < n; i++)
            ys[i] = mut_f32_to_bf16(yf[i]);
    } else {
        memcpy(a->y, yf, (size_t)n * sizeof *yf);
    }
out:
    free(xf);
    free(yf);
    free(scratch);
    free(tw);
    free(ts);
    return st;
}

/* ---- stage probes (mutants.h struct mut_probes) ------------------------------------------------------ */

static enum mc_backend_status mut_probe_enable(struct mc_model *m, int32_t on, struct mc_msg *msg)
{
    if (m->probes == NULL) {
        if (!on)
            return MC_BACKEND_OK;
        m->probes = calloc(1, sizeof *m->probes);
        if (m->probes == NULL)
            return mut_fail(msg, MC_BACKEND_NOMEM, "mutant: out of memory for the probes");
    }
    m->probes->on = on != 0;
    m->probes->n = 0;
    return MC_BACKEND_OK;
}

static enum mc_backend_status mut_probe_read(struct mc_model *m, const struct mc_probe **probes, int32_t *count,
                                             struct mc_msg *msg)
{
    *probes = NULL;
    *count = 0;
    if (m->probes == NULL)
        return MC_BACKEND_OK;
    if (m->probes->failed)
        return mut_fail(msg, MC_BACKEND_NOMEM, "mutant: the last forward could not record its probes");
    *probes = m->probes->p;
    *count = m->probes->n;
    return MC_BACKEND_OK;
}

/* ---- the backends ------------------------------------------------------------------------------------- */

/* X(id, backend name, family implementation, family, fault, storage dtypes) */
#define DT_F32 MC_DTYPE_BIT(MC_DTYPE_F32)
#define DT_BF16 MC_DTYPE_BIT(MC_DTYPE_BF16)
#define MUTANT_LIST(X)                                                                                                 \
    X(m81a, "mutant.8.1a-dt-first-token", mut_mamba2_family, MC_FAMILY_MAMBA2, MUT_DT_FIRST_TOKEN, DT_F32)             \
    X(m81b, "mutant.8.1b-cache-advance-one", mut_mamba2_family, MC_FAMILY_MAMBA2, MUT_ADVANCE_ONE, DT_F32)             \
    X(m81c, "mutant.8.1c-no-chaining", mut_mamba2_family, MC_FAMILY_MAMBA2, MUT_NO_CHAIN, DT_F32)                      \
    X(m82a, "mutant.8.2a-zero-conv-context", mut_mamba2_family, MC_FAMILY_MAMBA2, MUT_ZERO_CONV_CONTEXT, DT_F32)       \
    X(g82a, "mutant.8.2a-zero-conv-context", mut_gdn_family, MC_FAMILY_GDN, MUT_ZERO_CONV_CONTEXT, DT_F32)             \
    X(m82b, "mutant.8.2b-state-reset", mut_mamba2_family, MC_FAMILY_MAMBA2, MUT_STATE_RESET, DT_F32)                   \
    X(g82b, "mutant.8.2b-state-reset", mut_gdn_family, MC_FAMILY_GDN, MUT_STATE_RESET, DT_F32)                         \
    X(m83a, "mutant.8.3a-conv-first-l", mut_mamba2_family, MC_FAMILY_MAMBA2, MUT_CONV_FIRST_L, DT_F32)                 \
    X(m83b, "mutant.8.3b-conv-off-by-one", mut_mamba2_family, MC_FAMILY_MAMBA2, MUT_CONV_OFF_BY_ONE, DT_F32)           \
    X(m83c, "mutant.8.3c-cache-post-act", mut_mamba2_family, MC_FAMILY_MAMBA2, MUT_CACHE_POST_ACT, DT_F32)             \
    X(m84, "mutant.8.4-pad-unmasked-continued", mut_mamba2_family, MC_FAMILY_MAMBA2, MUT_MASK_CONTINUED, DT_F32)       \
    X(m85, "mutant.8.5-rightpad-leak", mut_mamba2_family, MC_FAMILY_MAMBA2, MUT_PAD_LEAK, DT_F32)                      \
    X(m86, "mutant.8.6-mask-skipped-batch1", mut_mamba2_family, MC_FAMILY_MAMBA2, MUT_MASK_BATCH1, DT_F32)             \
    X(s89, "mutant.8.9-short-prefill-roll", mut_shortconv_family, MC_FAMILY_SHORTCONV, MUT_SHORT_PREFILL_ROLL, DT_F32) \
    X(m810, "mutant.8.10-no-dt-clamp-decode", mut_mamba2_family, MC_FAMILY_MAMBA2, MUT_DT_NOCLAMP_DECODE, DT_F32)      \
    X(m811, "mutant.8.11-norm-group-swap", mut_mamba2_family, MC_FAMILY_MAMBA2, MUT_NORM_GROUP_SWAP, DT_F32)           \
    X(m812, "mutant.8.12-chunk-pad-decay", mut_mamba2_family, MC_FAMILY_MAMBA2, MUT_CHUNK_PAD, DT_F32)                 \
    X(g812, "mutant.8.12-chunk-pad-write", mut_gdn_family, MC_FAMILY_GDN, MUT_CHUNK_PAD, DT_F32)                       \
    X(m813, "mutant.8.13-group-mod", mut_mamba2_family, MC_FAMILY_MAMBA2, MUT_HEAD_MOD, DT_F32)                        \
    X(g813, "mutant.8.13-key-head-mod", mut_gdn_family, MC_FAMILY_GDN, MUT_HEAD_MOD, DT_F32)                           \
    X(mfut, "mutant.future-leak", mut_mamba2_family, MC_FAMILY_MAMBA2, MUT_FUTURE_LEAK, DT_F32)                        \
    X(arp, "mutant.rope-pad-positions", mut_attention_family, MC_FAMILY_ATTENTION, MUT_ROPE_PAD_POSITIONS, DT_F32)     \
    X(ara, "mutant.rotary-all-dims", mut_attention_family, MC_FAMILY_ATTENTION, MUT_ROTARY_ALL_DIMS, DT_F32)           \
    X(anr, "mutant.nope-rotated", mut_attention_family, MC_FAMILY_ATTENTION, MUT_NOPE_ROTATED, DT_F32)                 \
    X(asd, "mutant.scale-default", mut_attention_family, MC_FAMILY_ATTENTION, MUT_SCALE_DEFAULT, DT_F32)               \
    X(a813, "mutant.8.13-kv-head-mod", mut_attention_family, MC_FAMILY_ATTENTION, MUT_HEAD_MOD, DT_F32)                \
    X(mrn, "mutant.mla-rope-on-nope", mut_attention_family, MC_FAMILY_ATTENTION, MUT_MLA_ROPE_ON_NOPE, DT_F32)          \
    X(mns, "mutant.mla-latent-norm-skipped", mut_attention_family, MC_FAMILY_ATTENTION, MUT_MLA_NORM_SKIPPED, DT_F32)   \
    X(mkv, "mutant.mla-kv-split-swapped", mut_attention_family, MC_FAMILY_ATTENTION, MUT_MLA_KV_SWAPPED, DT_F32)        \
    X(msn, "mutant.mla-scale-nope-dim", mut_attention_family, MC_FAMILY_ATTENTION, MUT_MLA_SCALE_NOPE, DT_F32)          \
    X(a84, "mutant.8.4-pad-unmasked-continued", mut_attention_family, MC_FAMILY_ATTENTION, MUT_MASK_CONTINUED, DT_F32) \
    X(m815, "mutant.8.15-decode-no-d", mut_mamba2_family, MC_FAMILY_MAMBA2, MUT_DECODE_NO_D, DT_F32)                 \
    X(m819, "mutant.8.19-export-rows-reversed", mut_mamba2_family, MC_FAMILY_MAMBA2, MUT_EXPORT_ROWS_REVERSED, DT_F32) \
    X(s820, "mutant.8.20-import-no-window", mut_shortconv_family, MC_FAMILY_SHORTCONV, MUT_IMPORT_NO_WINDOW, DT_F32) \
    X(g821, "mutant.8.21-copy-no-state", mut_gdn_family, MC_FAMILY_GDN, MUT_COPY_NO_STATE, DT_F32)                   \
    X(g822, "mutant.8.22-alloc-dirty-state", mut_gdn_family, MC_FAMILY_GDN, MUT_ALLOC_DIRTY_STATE, DT_F32)           \
    X(lbd, "mutant.lightning-block-boundary-decay", mut_lightning_family, MC_FAMILY_LIGHTNING, MUT_BLOCK_DECAY,     \
      DT_F32)                                                                                                          \
    X(lso, "mutant.lightning-slope-order", mut_lightning_family, MC_FAMILY_LIGHTNING, MUT_SLOPE_ORDER, DT_F32)         \
    X(l82b, "mutant.8.2b-state-reset", mut_lightning_family, MC_FAMILY_LIGHTNING, MUT_STATE_RESET, DT_F32)             \
    X(kgh, "mutant.kda-gate-per-head", mut_kda_family, MC_FAMILY_KDA, MUT_GATE_PER_HEAD, DT_F32)                       \
    X(k82a, "mutant.8.2a-zero-conv-context", mut_kda_family, MC_FAMILY_KDA, MUT_ZERO_CONV_CONTEXT, DT_F32)             \
    X(k82b, "mutant.8.2b-state-reset", mut_kda_family, MC_FAMILY_KDA, MUT_STATE_RESET, DT_F32)                         \
    X(nbug, "nonbug.unfused-conv-act", mut_mamba2_family, MC_FAMILY_MAMBA2, MUT_UNFUSED_ACT, DT_BF16)                  \
    X(cm2, "control.correct", mut_mamba2_family, MC_FAMILY_MAMBA2, MUT_NONE, DT_F32 | DT_BF16)                         \
    X(cgdn, "control.correct", mut_gdn_family, MC_FAMILY_GDN, MUT_NONE, DT_F32)                                        \
    X(csc, "control.correct", mut_shortconv_family, MC_FAMILY_SHORTCONV, MUT_NONE, DT_F32)                            \
    X(cat, "control.correct", mut_attention_family, MC_FAMILY_ATTENTION, MUT_NONE, DT_F32)                            \
    X(cla, "control.correct", mut_lightning_family, MC_FAMILY_LIGHTNING, MUT_NONE, DT_F32)                            \
    X(ckda, "control.correct", mut_kda_family, MC_FAMILY_KDA, MUT_NONE, DT_F32)

#define MUT_SPEC(id, nm, impl, family_, fault_, dtype_)                                                                \
    static const struct mut_spec spec_##id = {.name = nm, .fam = &impl, .fault = fault_, .dtypes = dtype_};            \
    static enum mc_backend_status create_##id(const struct mc_model_desc *d, struct mc_model **m,                      \
                                              struct mc_msg *msg)                                                      \
    {                                                                                                                  \
        return mut_model_create(&spec_##id, d, m, msg);                                                                \
    }
MUTANT_LIST(MUT_SPEC)
#undef MUT_SPEC

/* MUT_CHUNK_PAD and MUT_BLOCK_DECAY mutants honour mc_model_desc.chunk_size, so chunk_size_invariance runs them. */
#define MUT_OPS(id, nm, impl, family_, fault_, dtype_)                                                                 \
    {                                                                                                                  \
        .abi_version = MIXCHECK_ABI_VERSION,                                                                           \
        .struct_size = sizeof(struct mc_backend_ops),                                                                  \
        .name = nm,                                                                                                    \
        .device = "cpu",                                                                                               \
        .family = family_,                                                                                             \
        .dtypes = dtype_,                                                                                              \
        .caps = (fault_) == MUT_CHUNK_PAD || (fault_) == MUT_BLOCK_DECAY ? MC_CAP_CHUNK_SIZE : 0u,                     \
        .model_create = create_##id,                                                                                   \
        .model_destroy = mut_model_destroy,                                                                            \
        .cache_alloc = mut_cache_alloc,                                                                                \
        .cache_copy = mut_cache_copy,                                                                                  \
        .cache_free = mut_cache_free,                                                                                  \
        .cache_export = mut_cache_export,                                                                              \
        .cache_import = mut_cache_import,                                                                              \
        .forward = mut_forward,                                                                                        \
        .probe_enable = mut_probe_enable,                                                                              \
        .probe_read = mut_probe_read,                                                                                  \
    },
static struct mc_backend_ops mut_ops[] = {MUTANT_LIST(MUT_OPS)};
#undef MUT_OPS

#define N_MUTANTS (sizeof mut_ops / sizeof mut_ops[0])

EXPORT const struct mc_backend_ops *const *mixcheck_plugin_backends(uint32_t *count, uint32_t *abi_version)
{
    static const struct mc_backend_ops *all[N_MUTANTS + MUT_STACK_MAX_BACKENDS];
    size_t n_stacks = 0;
    const struct mc_backend_ops *const *stacks = mut_stack_backends(&n_stacks);
    /* the Mamba2 mutants record stage probes; they declare them only on request (mutants.h) */
    const char *probes = getenv("MIXCHECK_MUTANT_PROBES");
    const int declare = probes != NULL && probes[0] != '\0' && strcmp(probes, "0") != 0;
    for (size_t i = 0; i < N_MUTANTS; i++) {
        if (declare && mut_ops[i].family == MC_FAMILY_MAMBA2)
            mut_ops[i].caps |= MC_CAP_PROBES;
        all[i] = &mut_ops[i];
    }
    for (size_t i = 0; i < n_stacks && i < MUT_STACK_MAX_BACKENDS; i++) /* the whole stacks (mut_stack.c) */
        all[N_MUTANTS + i] = stacks[i];
    *count = (uint32_t)(N_MUTANTS + (n_stacks < MUT_STACK_MAX_BACKENDS ? n_stacks : MUT_STACK_MAX_BACKENDS));
    *abi_version = MIXCHECK_ABI_VERSION;
    return (const struct mc_backend_ops *const *)all;
}
