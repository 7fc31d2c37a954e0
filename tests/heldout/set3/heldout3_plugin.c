/*
 * heldout3_plugin.c — a third held-out set of broken mixer ports, the ground truth of each in
 * manifest.json next to this file (family, style, what is wrong, the closest bug class). Each backend
 * `heldout3.<name>` is the reference mixer of one family (mc_reference_<family>_ops(), compiled into
 * this library) behind its own model handle, with ONE planted bug, written the way a port author could
 * get it wrong. The bugs are emulated exactly with the reference's own calls:
 *
 *   - a constant or a layout read wrongly: the model is created from an edited configuration or from
 *     edited / permuted weights (the exact equivalent of the port reading them that way);
 *   - one path that computes another function: a second reference model, made from edited weights or
 *     configuration, serves either the primed L == 1 forwards (the port's decode kernel) or the other
 *     forwards (its prefill kernel) on the same cache;
 *   - a forward split where the port's kernel splits it (one-token steps, each from one saved cache or
 *     chained with a pad's decay; chunks of the model's chunk length with the conv window reset or rounded
 *     to f16, or the lightning state decayed by one more token, between them), a second reference forward
 *     on a copy of the cache for what the port stores (the state of the last whole chunk, the window one
 *     token early or after the first token), an edited mask, or the cache edited or rounded before or
 *     after the reference's call (a state read in bf16 / f16, keys rotated one position on);
 *   - a cache exported, imported or copied wrongly, a packed call that mishandles an offset, a slot or a
 *     sequence's initial window (hooks around the reference calls on the reference cache, whose layout
 *     ref_common.h gives);
 *   - an error in one kind of call.
 *
 * heldout3.control-<family> is the same wrapper with no bug: it must pass every bundled case.
 *
 * The wrapper scaffolding (descriptor copies, rounding helpers, key rotation, the chunked forward and
 * the packed call written on the port's own forward) follows tests/heldout/set2/heldout2_plugin.c; the
 * bugs are this set's own. The backends declare f32 and f64 and no optional capability except the
 * packed call (no stage probes). Written without the diagnosis: test_heldout_caught.py checks only that
 * every bug is caught and every control passes.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mixcheck/backend.h"
#include "ref_common.h"
#include "reference.h"

#define EXPORT __attribute__((visibility("default")))

/* ---- the bugs ----------------------------------------------------------------------------------- */

enum hb_kind {
    HB_CONTROL,
    /* mamba2 */
    M2_CONT_UNCHAINED,      /* a continued multi-token forward steps every token from the cached state */
    M2_CHUNK_CONV_RESET,    /* inside one forward the conv window restarts from zeros at every chunk */
    M2_DTLIMIT_INIT_RANGE,  /* dt clamped to the dt init range [time_step_min, time_step_max] */
    M2_STEP_STATE_BF16,     /* the single-step kernel reads the cached state through a bf16 buffer */
    M2_IMPORT_STATE_ONLY,   /* cache_import writes the state, not the conv window */
    M2_DECODE_BATCH_ERROR,  /* a decode step of more than one row returns an error */
    M2_PACKED_WINDOW_ZERO,  /* the packed call loads a continued sequence's state but not its window */
    M2_EXPORT_WINDOW_KC,    /* cache_export writes each row's window [C][K] as [K][C] */
    /* mamba1 */
    M1_CONT_STATE_ZERO,     /* a continued multi-token forward starts its scan from a zero state */
    M1_JAMBA_NORM_NOWEIGHT, /* Jamba's dt/B/C norms applied without their weights */
    M1_B1_MASK_IGNORED,     /* the mask ignored for a batch of one */
    M1_COPY_NO_PRIMED,      /* cache_copy copies the buffers but not the primed flag */
    M1_EXPORT_ROWS_REV,     /* cache_export writes batch row b into row B-1-b */
    M1_MASKED_STEP_ERROR,   /* a masked single-token step returns an error */
    M1_CONT_STATE_F16,      /* a continued multi-token forward loads the cached state in f16 */
    M1_XPROJ_SPLIT_EARLY,   /* B and C sliced from x_proj's output one row early */
    /* gdn */
    GDN_ALOG_KEY_HEAD,      /* A_log indexed by the key head of each value head */
    GDN_TAIL_CHUNK_STATE,   /* the stored state misses the last partial chunk of a long forward */
    GDN_MASK_ONE_EARLY,     /* the mask read one position early: the last pad before a real run is real */
    GDN_IMPORT_WINDOW_ONLY, /* cache_import writes the conv window, not the state */
    GDN_PACKED_SLOT_NEXT,   /* the packed call stores a sequence's cache in slot slots[i] + 1 */
    GDN_SHORT_PREFILL_ERROR,/* a fresh prefill shorter than the conv width returns an error */
    GDN_CHUNK_WINDOW_F16,   /* inside one forward the conv context passed between chunks is f16 */
    /* shortconv */
    SC_WINDOW_ONE_EARLY,    /* a multi-token forward caches the window ending one real token early */
    SC_CONT_CACHE_FIRST,    /* a continued multi-token forward caches the window after its first token */
    SC_PACKED_X_EARLY,      /* the packed call reads sequence i > 0 from one token before its offset */
    SC_IMPORT_WIN_KC,       /* cache_import reads conv_state [C][K] as [K][C] */
    SC_DECODE_ROW_NEXT,     /* a decode step reads row b's window from row (b + 1) mod B */
    SC_DECODE_NO_INBIAS,    /* the single-step path forgets in_proj.bias */
    SC_TAPS_SHIFTED,        /* each conv tap applied one window column late, the last wrapping round */
    /* attention */
    AT_QKNORM_EPS,          /* q/k norm epsilon hard-coded to 1e-6 */
    AT_DECODE_DEFAULT_SCALE,/* the single-step kernel scales by 1/sqrt(hd), ignoring softmax_scale */
    AT_IMPORT_COUNT_MINUS1, /* cache_import takes n - 1 cached positions */
    AT_COPY_KEYS_ONLY,      /* cache_copy copies the count and the keys, not the values */
    AT_DECODE_SLOTS_ERROR,  /* a decode step on a row holding 8 or more positions returns an error */
    AT_KV_SWAPPED,          /* k_proj and v_proj read for each other */
    AT_PREFILL_POS_PLUS1,   /* a fresh prefill numbers its positions from 1 */
    AT_OUT_BF16,            /* the layer output written through a bf16 buffer */
    /* lightning */
    LA_SLOPES_LAYER0,       /* the decay slopes computed for layer 0 whatever layer_idx */
    LA_BLOCK_DECAY_EXTRA,   /* the state entering each later block decayed one token too many */
    LA_COPY_HEAD0,          /* cache_copy copies the count and head 0's state only */
    LA_PADS_DECAY,          /* a padding token decays the state (it adds nothing and does not count) */
    /* kda */
    KDA_DTBIAS_HEAD0,       /* the forget gate's dt_bias [H*d] read as head 0's [d] for every head */
    KDA_PACKED_FRESH_WINDOW,/* the packed call starts a fresh sequence's conv from its slot's window */
    KDA_DECODE_GATE_BIAS,   /* the single-step path takes the decay from dt_bias alone (no f_b output) */
    KDA_EXPORT_HEADS_REV,   /* cache_export writes each row's heads in reverse order */
};

struct hb_bug {
    const char *name;
    enum mc_family family;
    enum hb_kind kind;
};

static const struct hb_bug hb_bugs[] = {
    {"heldout3.control-mamba2", MC_FAMILY_MAMBA2, HB_CONTROL},
    {"heldout3.control-mamba1", MC_FAMILY_MAMBA1, HB_CONTROL},
    {"heldout3.control-gdn", MC_FAMILY_GDN, HB_CONTROL},
    {"heldout3.control-shortconv", MC_FAMILY_SHORTCONV, HB_CONTROL},
    {"heldout3.control-attention", MC_FAMILY_ATTENTION, HB_CONTROL},
    {"heldout3.control-lightning", MC_FAMILY_LIGHTNING, HB_CONTROL},
    {"heldout3.control-kda", MC_FAMILY_KDA, HB_CONTROL},

    {"heldout3.m2-continued-unchained", MC_FAMILY_MAMBA2, M2_CONT_UNCHAINED},
    {"heldout3.m2-chunk-conv-reset", MC_FAMILY_MAMBA2, M2_CHUNK_CONV_RESET},
    {"heldout3.m2-dtlimit-init-range", MC_FAMILY_MAMBA2, M2_DTLIMIT_INIT_RANGE},
    {"heldout3.m2-step-state-bf16", MC_FAMILY_MAMBA2, M2_STEP_STATE_BF16},
    {"heldout3.m2-import-state-only", MC_FAMILY_MAMBA2, M2_IMPORT_STATE_ONLY},
    {"heldout3.m2-decode-batch-error", MC_FAMILY_MAMBA2, M2_DECODE_BATCH_ERROR},
    {"heldout3.m2-packed-window-zero", MC_FAMILY_MAMBA2, M2_PACKED_WINDOW_ZERO},
    {"heldout3.m2-export-window-kc", MC_FAMILY_MAMBA2, M2_EXPORT_WINDOW_KC},

    {"heldout3.m1-continued-state-zero", MC_FAMILY_MAMBA1, M1_CONT_STATE_ZERO},
    {"heldout3.m1-jamba-norm-noweight", MC_FAMILY_MAMBA1, M1_JAMBA_NORM_NOWEIGHT},
    {"heldout3.m1-batch1-mask-ignored", MC_FAMILY_MAMBA1, M1_B1_MASK_IGNORED},
    {"heldout3.m1-copy-no-primed", MC_FAMILY_MAMBA1, M1_COPY_NO_PRIMED},
    {"heldout3.m1-export-rows-reversed", MC_FAMILY_MAMBA1, M1_EXPORT_ROWS_REV},
    {"heldout3.m1-masked-step-error", MC_FAMILY_MAMBA1, M1_MASKED_STEP_ERROR},
    {"heldout3.m1-continued-state-f16", MC_FAMILY_MAMBA1, M1_CONT_STATE_F16},
    {"heldout3.m1-xproj-split-early", MC_FAMILY_MAMBA1, M1_XPROJ_SPLIT_EARLY},

    {"heldout3.gdn-alog-key-head", MC_FAMILY_GDN, GDN_ALOG_KEY_HEAD},
    {"heldout3.gdn-tail-chunk-state", MC_FAMILY_GDN, GDN_TAIL_CHUNK_STATE},
    {"heldout3.gdn-mask-one-early", MC_FAMILY_GDN, GDN_MASK_ONE_EARLY},
    {"heldout3.gdn-import-window-only", MC_FAMILY_GDN, GDN_IMPORT_WINDOW_ONLY},
    {"heldout3.gdn-packed-slot-next", MC_FAMILY_GDN, GDN_PACKED_SLOT_NEXT},
    {"heldout3.gdn-short-prefill-error", MC_FAMILY_GDN, GDN_SHORT_PREFILL_ERROR},
    {"heldout3.gdn-chunk-window-f16", MC_FAMILY_GDN, GDN_CHUNK_WINDOW_F16},

    {"heldout3.sc-window-one-early", MC_FAMILY_SHORTCONV, SC_WINDOW_ONE_EARLY},
    {"heldout3.sc-continued-cache-first", MC_FAMILY_SHORTCONV, SC_CONT_CACHE_FIRST},
    {"heldout3.sc-packed-x-early", MC_FAMILY_SHORTCONV, SC_PACKED_X_EARLY},
    {"heldout3.sc-import-window-kc", MC_FAMILY_SHORTCONV, SC_IMPORT_WIN_KC},
    {"heldout3.sc-decode-row-next", MC_FAMILY_SHORTCONV, SC_DECODE_ROW_NEXT},
    {"heldout3.sc-decode-no-inbias", MC_FAMILY_SHORTCONV, SC_DECODE_NO_INBIAS},
    {"heldout3.sc-taps-shifted", MC_FAMILY_SHORTCONV, SC_TAPS_SHIFTED},

    {"heldout3.attn-qknorm-eps", MC_FAMILY_ATTENTION, AT_QKNORM_EPS},
    {"heldout3.attn-decode-default-scale", MC_FAMILY_ATTENTION, AT_DECODE_DEFAULT_SCALE},
    {"heldout3.attn-import-count-minus1", MC_FAMILY_ATTENTION, AT_IMPORT_COUNT_MINUS1},
    {"heldout3.attn-copy-keys-only", MC_FAMILY_ATTENTION, AT_COPY_KEYS_ONLY},
    {"heldout3.attn-decode-slots-error", MC_FAMILY_ATTENTION, AT_DECODE_SLOTS_ERROR},
    {"heldout3.attn-kv-swapped", MC_FAMILY_ATTENTION, AT_KV_SWAPPED},
    {"heldout3.attn-prefill-pos-plus1", MC_FAMILY_ATTENTION, AT_PREFILL_POS_PLUS1},
    {"heldout3.attn-out-bf16", MC_FAMILY_ATTENTION, AT_OUT_BF16},

    {"heldout3.la-slopes-layer0", MC_FAMILY_LIGHTNING, LA_SLOPES_LAYER0},
    {"heldout3.la-block-decay-extra", MC_FAMILY_LIGHTNING, LA_BLOCK_DECAY_EXTRA},
    {"heldout3.la-copy-head0", MC_FAMILY_LIGHTNING, LA_COPY_HEAD0},
    {"heldout3.la-pads-decay", MC_FAMILY_LIGHTNING, LA_PADS_DECAY},

    {"heldout3.kda-dtbias-head0", MC_FAMILY_KDA, KDA_DTBIAS_HEAD0},
    {"heldout3.kda-packed-fresh-window", MC_FAMILY_KDA, KDA_PACKED_FRESH_WINDOW},
    {"heldout3.kda-decode-gate-bias-only", MC_FAMILY_KDA, KDA_DECODE_GATE_BIAS},
    {"heldout3.kda-export-heads-reversed", MC_FAMILY_KDA, KDA_EXPORT_HEADS_REV},
};

#define HB_N (sizeof hb_bugs / sizeof hb_bugs[0])

/* ---- the wrapper model ---------------------------------------------------------------------------- */

struct mc_model {
    const struct hb_bug *bug;
    const struct mc_backend_ops *ref;
    struct mc_model *inner; /* the reference model the port's multi-token path amounts to */
    struct mc_model *alt;   /* the one its single-step path amounts to (NULL: the same) */
    enum mc_dtype dtype;
    size_t eb;              /* bytes per element of weights, x, y and the cache */
    int64_t D;              /* hidden size */
    int64_t wel, sel;       /* window and state elements per cache row */
    int64_t K, C;           /* conv width and channels */
    int64_t Q;              /* the chunk length of the port's prefill kernel */
    int64_t Hkv, Lmax, hd;  /* attention */
    int64_t R;              /* rotary dims (0 without RoPE) */
    double *inv_freq;       /* [R/2] */
    int64_t H;              /* lightning, kda: heads (state [H][hd][hd] per row) */
    double *slope;          /* lightning: [H] the per-token decay exponent of each head */
};

static const struct mc_backend_ops *hb_ref_ops(enum mc_family f)
{
    switch (f) {
    case MC_FAMILY_MAMBA2:
        return mc_reference_mamba2_ops();
    case MC_FAMILY_MAMBA1:
        return mc_reference_mamba1_ops();
    case MC_FAMILY_GDN:
        return mc_reference_gdn_ops();
    case MC_FAMILY_SHORTCONV:
        return mc_reference_shortconv_ops();
    case MC_FAMILY_ATTENTION:
        return mc_reference_attention_ops();
    case MC_FAMILY_LIGHTNING:
        return mc_reference_lightning_ops();
    case MC_FAMILY_KDA:
        return mc_reference_kda_ops();
    default:
        return NULL;
    }
}

#include "../heldout_scaffold.h" /* hb_fail, element access and rounding, the editable descriptor */

/* The edits shared by both paths of the port: its reading of the configuration and the weights. */
static void hb_edit_common(const struct hb_bug *bug, struct hb_desc *h)
{
    const enum mc_dtype dt = h->d.dtype;
    const size_t eb = dt == MC_DTYPE_F64 ? 8 : 4;
    switch (bug->kind) {
    case M2_DTLIMIT_INIT_RANGE: /* the initialisation range of dt_bias taken for the clamp */
        h->cfg.m2.time_step_limit[0] = 0.001;
        h->cfg.m2.time_step_limit[1] = 0.1;
        break;
    case M1_JAMBA_NORM_NOWEIGHT:
        hb_affine(h, "dt_layernorm.weight", dt, 0.0, 1.0);
        hb_affine(h, "b_layernorm.weight", dt, 0.0, 1.0);
        hb_affine(h, "c_layernorm.weight", dt, 0.0, 1.0);
        break;
    case M1_XPROJ_SPLIT_EARLY: { /* x_proj [R + 2N][I]: B = rows R-1 .. R+N-2, C = rows R+N-1 .. R+2N-2 */
        const int64_t R = h->cfg.m1.time_step_rank, N = h->cfg.m1.state_size;
        struct mc_weight *w = hb_edit(h, "x_proj.weight", eb);
        if (w == NULL || R < 1)
            break;
        const size_t row = (size_t)w->dims[1] * eb;
        unsigned char *p = (void *)w->data;
        memmove(p + (size_t)R * row, p + (size_t)(R - 1) * row, (size_t)(2 * N) * row);
        break;
    }
    case GDN_ALOG_KEY_HEAD: { /* A_log [Hv]: value head h reads A_log[h / (Hv/Hk)] */
        const int64_t r = h->cfg.gdn.num_value_heads / h->cfg.gdn.num_key_heads;
        struct mc_weight *w = hb_edit(h, "A_log", eb);
        if (w == NULL || r < 2)
            break;
        for (int64_t i = hb_elems(w) - 1; i >= 0; i--) /* i / r <= i: read before it is written */
            hb_set((void *)w->data, dt, i, hb_get(w->data, dt, i / r));
        break;
    }
    case SC_TAPS_SHIFTED: { /* conv.weight [C]..[K]: out = sum_j w[(j - 1) mod K] window[j] */
        struct mc_weight *w = hb_edit(h, "conv.weight", eb);
        const int64_t K = h->cfg.sc.conv_kernel;
        if (w == NULL || K < 2)
            break;
        double *tap = malloc((size_t)K * sizeof *tap);
        if (tap == NULL)
            break;
        for (int64_t ch = 0; ch < hb_elems(w) / K; ch++) {
            for (int64_t k = 0; k < K; k++)
                tap[k] = hb_get(w->data, dt, ch * K + k);
            for (int64_t j = 0; j < K; j++)
                hb_set((void *)w->data, dt, ch * K + j, tap[(j - 1 + K) % K]);
        }
        free(tap);
        break;
    }
    case AT_QKNORM_EPS:
        h->cfg.at.rms_norm_eps = 1e-6;
        break;
    case KDA_DTBIAS_HEAD0: { /* forget_gate.dt_bias [H*d]: channel h*d + j reads entry j */
        struct mc_weight *w = hb_edit(h, "forget_gate.dt_bias", eb);
        const int64_t d = h->cfg.kda.head_dim;
        if (w != NULL)
            for (int64_t i = d; i < hb_elems(w); i++)
                hb_set((void *)w->data, dt, i, hb_get(w->data, dt, i % d));
        break;
    }
    case LA_SLOPES_LAYER0: /* the slopes' depth factor 1 - l/(layers - 1) taken at l = 0 */
        h->cfg.la.layer_idx = 0;
        break;
    case AT_KV_SWAPPED:
        hb_swap_data(h, "k_proj.weight", "v_proj.weight");
        hb_swap_data(h, "k_proj.bias", "v_proj.bias");
        break;
    default:
        break;
    }
}

/* The edits of the multi-token (prefill) path only; returns 1 when it has any. */
static int hb_edit_prefill(const struct hb_bug *bug, struct hb_desc *h)
{
    (void)bug;
    (void)h;
    return 0; /* no bug of this set edits the multi-token path alone */
}

/* The edits of the single-step path only; returns 1 when it has any. */
static int hb_edit_step(const struct hb_bug *bug, struct hb_desc *h)
{
    switch (bug->kind) {
    case SC_DECODE_NO_INBIAS:
        if (hb_find(&h->d, "in_proj.bias") == NULL)
            return 0;
        hb_affine(h, "in_proj.bias", h->d.dtype, 0.0, 0.0);
        return 1;
    case KDA_DECODE_GATE_BIAS:
        hb_affine(h, "forget_gate.f_b_proj.weight", h->d.dtype, 0.0, 0.0);
        return 1;
    case AT_DECODE_DEFAULT_SCALE:
        if (h->cfg.at.softmax_scale == 0.0)
            return 0;
        h->cfg.at.softmax_scale = 0.0;
        return 1;
    default:
        return 0;
    }
}

static void hb_model_destroy(struct mc_model *m)
{
    if (m == NULL)
        return;
    if (m->inner != NULL)
        m->ref->model_destroy(m->inner);
    if (m->alt != NULL)
        m->ref->model_destroy(m->alt);
    free(m->inv_freq);
    free(m->slope);
    free(m);
}

/* A reference model from the descriptor with the common edits and, when `path` is 1 or 2, the
 * prefill or step edits; *edited says whether the path edits changed anything. */
static enum mc_backend_status hb_make(const struct hb_bug *bug, struct mc_model *m, const struct mc_model_desc *desc,
                                      int path, struct mc_model **out, int *edited, struct mc_msg *msg)
{
    struct hb_desc h;
    *edited = 0;
    if (hb_desc_init(&h, desc) != 0) {
        hb_desc_free(&h);
        return hb_fail(msg, MC_BACKEND_NOMEM, "heldout3: out of memory");
    }
    hb_edit_common(bug, &h);
    if (path == 1)
        *edited = hb_edit_prefill(bug, &h);
    else if (path == 2)
        *edited = hb_edit_step(bug, &h);
    const enum mc_backend_status st = m->ref->model_create(&h.d, out, msg);
    hb_desc_free(&h);
    return st;
}

static enum mc_backend_status hb_create(const struct hb_bug *bug, const struct mc_model_desc *desc,
                                        struct mc_model **out, struct mc_msg *msg)
{
    if (desc == NULL || out == NULL)
        return hb_fail(msg, MC_BACKEND_INVALID, "heldout3: model_create needs a descriptor and an output handle");
    *out = NULL;
    if (desc->family != bug->family || desc->config == NULL)
        return hb_fail(msg, MC_BACKEND_INVALID, "heldout3: descriptor of another family or without configuration");
    if (desc->dtype != MC_DTYPE_F32 && desc->dtype != MC_DTYPE_F64)
        return hb_fail(msg, MC_BACKEND_UNSUPPORTED, "heldout3: f32 and f64 only");
    if (bug->kind == AT_PREFILL_POS_PLUS1 && ((const struct mc_attention_config *)desc->config)->kv_lora_rank > 0)
        /* its emulation edits the cache's plain key / value layout: a port of plain attention, written before
         * the attention family had MLA, says it has none (run on an MLA case it corrupted the heap) */
        return hb_fail(msg, MC_BACKEND_UNSUPPORTED,
                       "heldout3 attention: multi-head latent attention (kv_lora_rank > 0) is not implemented");
    struct mc_model *m = calloc(1, sizeof *m);
    if (m == NULL)
        return hb_fail(msg, MC_BACKEND_NOMEM, "heldout3: out of memory");
    m->bug = bug;
    m->ref = hb_ref_ops(bug->family);
    m->dtype = desc->dtype;
    m->eb = desc->dtype == MC_DTYPE_F64 ? 8 : 4;

    /* inner: common + prefill edits; alt: common + step edits, kept only when the step edits or the
     * prefill edits make the two paths differ */
    int pre = 0, stp = 0;
    enum mc_backend_status st = hb_make(bug, m, desc, 1, &m->inner, &pre, msg);
    if (st == MC_BACKEND_OK) {
        struct mc_model *alt = NULL;
        st = hb_make(bug, m, desc, 2, &alt, &stp, msg);
        if (st == MC_BACKEND_OK && (pre || stp))
            m->alt = alt;
        else if (alt != NULL)
            m->ref->model_destroy(alt);
    }
    if (st != MC_BACKEND_OK) {
        hb_model_destroy(m);
        return st;
    }

    const struct mc_ref_model *rm = (const struct mc_ref_model *)(const void *)m->inner;
    m->D = rm->hidden;
    m->wel = rm->window_elems;
    m->sel = rm->state_elems;
    switch (bug->family) {
    case MC_FAMILY_MAMBA2: {
        const struct mc_mamba2_config *c = desc->config;
        m->K = c->conv_kernel;
        m->Q = desc->chunk_size > 0 ? desc->chunk_size : c->chunk_size;
        break;
    }
    case MC_FAMILY_MAMBA1: {
        const struct mc_mamba1_config *c = desc->config;
        m->K = c->conv_kernel;
        break;
    }
    case MC_FAMILY_GDN: {
        const struct mc_gdn_config *c = desc->config;
        m->K = c->conv_kernel;
        m->Q = desc->chunk_size > 0 ? desc->chunk_size : c->chunk_size;
        break;
    }
    case MC_FAMILY_SHORTCONV: {
        const struct mc_shortconv_config *c = desc->config;
        m->K = c->conv_kernel;
        break;
    }
    case MC_FAMILY_LIGHTNING: {
        const struct mc_lightning_config *c = desc->config;
        m->K = 1;
        m->H = c->num_attention_heads;
        m->hd = c->head_dim;
        m->Q = desc->chunk_size > 0 ? desc->chunk_size : c->block_size;
        m->slope = malloc((size_t)(m->H + 1) * sizeof *m->slope);
        if (m->slope == NULL) {
            hb_model_destroy(m);
            return hb_fail(msg, MC_BACKEND_NOMEM, "heldout3: out of memory");
        }
        /* MiniMax's slopes 2^(-8(h+1)/H), scaled by the layer's depth (docs/semantics.md §13) */
        const double depth = 1.0 - (double)c->layer_idx / ((double)c->num_hidden_layers - 1.0 + 1e-5) + 1e-5;
        for (int64_t i = 0; i < m->H; i++)
            m->slope[i] = pow(2.0, -8.0 * (double)(i + 1) / (double)m->H) * depth;
        break;
    }
    case MC_FAMILY_KDA: {
        const struct mc_kda_config *c = desc->config;
        m->K = c->conv_kernel;
        m->H = c->num_heads;
        m->hd = c->head_dim;
        break;
    }
    default: {
        const struct mc_attention_config *c = desc->config;
        m->K = 1;
        m->Hkv = c->num_key_value_heads;
        m->Lmax = c->cache_length;
        m->hd = c->head_dim;
        m->R = c->no_rope ? 0 : (int64_t)((double)c->head_dim * c->partial_rotary_factor);
        m->inv_freq = malloc((size_t)(m->R / 2 + 1) * sizeof *m->inv_freq);
        if (m->inv_freq == NULL) {
            hb_model_destroy(m);
            return hb_fail(msg, MC_BACKEND_NOMEM, "heldout3: out of memory");
        }
        for (int64_t i = 0; i < m->R / 2; i++)
            m->inv_freq[i] = pow(c->rope_theta, -(double)(2 * i) / (double)m->R);
        break;
    }
    }
    if (m->Q < 1)
        m->Q = 64;
    m->C = m->wel / m->K;
    *out = m;
    return MC_BACKEND_OK;
}

/* ---- caches: the reference's own ------------------------------------------------------------------ */

static enum mc_backend_status hb_cache_alloc(struct mc_model *m, int64_t batch, struct mc_cache **out,
                                             struct mc_msg *msg)
{
    return m->ref->cache_alloc(m->inner, batch, out, msg);
}

static void hb_cache_free(struct mc_model *m, struct mc_cache *c)
{
    m->ref->cache_free(m->inner, c);
}

static enum mc_backend_status hb_cache_copy(struct mc_model *m, struct mc_cache *dst, const struct mc_cache *src,
                                            struct mc_msg *msg)
{
    const enum hb_kind kind = m->bug->kind;
    if ((kind != M1_COPY_NO_PRIMED && kind != AT_COPY_KEYS_ONLY && kind != LA_COPY_HEAD0) || dst == NULL || src == NULL ||
        dst->batch != src->batch || dst == src)
        return m->ref->cache_copy(m->inner, dst, src, msg);
    if (kind == M1_COPY_NO_PRIMED) { /* the bug: the port's "has state" flag is not part of the copy */
        const int primed = dst->primed;
        const enum mc_backend_status st = m->ref->cache_copy(m->inner, dst, src, msg);
        if (st == MC_BACKEND_OK)
            dst->primed = primed;
        return st;
    }
    if (kind == LA_COPY_HEAD0) { /* the bug: the state's byte count of one head, row by row */
        const size_t head = (size_t)(m->hd * m->hd) * m->eb, rowb = (size_t)m->sel * m->eb;
        memcpy(dst->window, src->window, (size_t)(src->batch * m->wel) * m->eb);
        for (int64_t b = 0; b < src->batch; b++)
            memcpy((unsigned char *)dst->state + (size_t)b * rowb, (const unsigned char *)src->state + (size_t)b * rowb,
                   head);
        dst->primed = src->primed;
        return MC_BACKEND_OK;
    }
    /* AT_COPY_KEYS_ONLY, the bug: the values half of each row ([Hkv][Lmax][hd] after the keys) is skipped */
    const size_t half = (size_t)(m->sel / 2) * m->eb, rowb = (size_t)m->sel * m->eb;
    unsigned char *keep = malloc((size_t)dst->batch * half + 1);
    if (keep == NULL)
        return hb_fail(msg, MC_BACKEND_NOMEM, "heldout3: out of memory");
    for (int64_t b = 0; b < dst->batch; b++)
        memcpy(keep + (size_t)b * half, (unsigned char *)dst->state + (size_t)b * rowb + half, half);
    const enum mc_backend_status st = m->ref->cache_copy(m->inner, dst, src, msg);
    if (st == MC_BACKEND_OK)
        for (int64_t b = 0; b < dst->batch; b++)
            memcpy((unsigned char *)dst->state + (size_t)b * rowb + half, keep + (size_t)b * half, half);
    free(keep);
    return st;
}

static enum mc_backend_status hb_cache_export(struct mc_model *m, const struct mc_cache *c, void *conv, void *state,
                                              struct mc_msg *msg)
{
    const enum hb_kind kind = m->bug->kind;
    enum mc_backend_status st = m->ref->cache_export(m->inner, c, conv, state, msg);
    if (st != MC_BACKEND_OK || c == NULL)
        return st;
    const int64_t B = c->batch;
    if (kind == M2_EXPORT_WINDOW_KC && conv != NULL) { /* the bug: each row written [K][C] */
        const size_t rowb = (size_t)m->wel * m->eb;
        unsigned char *tmp = malloc(rowb + 1);
        if (tmp == NULL)
            return hb_fail(msg, MC_BACKEND_NOMEM, "heldout3: out of memory");
        for (int64_t b = 0; b < B; b++) {
            unsigned char *p = (unsigned char *)conv + (size_t)b * rowb;
            memcpy(tmp, p, rowb);
            for (int64_t ch = 0; ch < m->C; ch++)
                for (int64_t k = 0; k < m->K; k++)
                    hb_set(p, m->dtype, k * m->C + ch, hb_get(tmp, m->dtype, ch * m->K + k));
        }
        free(tmp);
    }
    if (kind == KDA_EXPORT_HEADS_REV && state != NULL) { /* the bug: head h of each row written at H-1-h */
        const size_t head = (size_t)(m->hd * m->hd) * m->eb, rowb = (size_t)m->sel * m->eb;
        unsigned char *tmp = malloc(rowb + 1);
        if (tmp == NULL)
            return hb_fail(msg, MC_BACKEND_NOMEM, "heldout3: out of memory");
        for (int64_t b = 0; b < B; b++) {
            unsigned char *p = (unsigned char *)state + (size_t)b * rowb;
            memcpy(tmp, p, rowb);
            for (int64_t h = 0; h < m->H; h++)
                memcpy(p + (size_t)h * head, tmp + (size_t)(m->H - 1 - h) * head, head);
        }
        free(tmp);
    }
    if (kind == M1_EXPORT_ROWS_REV) { /* the bug: batch row b written at row B-1-b, both buffers */
        for (int which = 0; which < 2; which++) {
            unsigned char *buf = which == 0 ? conv : state;
            const size_t rowb = (size_t)(which == 0 ? m->wel : m->sel) * m->eb;
            if (buf == NULL || rowb == 0)
                continue;
            unsigned char *tmp = malloc(rowb);
            if (tmp == NULL)
                return hb_fail(msg, MC_BACKEND_NOMEM, "heldout3: out of memory");
            for (int64_t b = 0; b < B / 2; b++) {
                memcpy(tmp, buf + (size_t)b * rowb, rowb);
                memcpy(buf + (size_t)b * rowb, buf + (size_t)(B - 1 - b) * rowb, rowb);
                memcpy(buf + (size_t)(B - 1 - b) * rowb, tmp, rowb);
            }
            free(tmp);
        }
    }
    return st;
}

static enum mc_backend_status hb_cache_import(struct mc_model *m, struct mc_cache *c, const void *conv,
                                              const void *state, struct mc_msg *msg)
{
    const enum hb_kind kind = m->bug->kind;
    if (c == NULL || conv == NULL ||
        (kind != M2_IMPORT_STATE_ONLY && kind != GDN_IMPORT_WINDOW_ONLY && kind != SC_IMPORT_WIN_KC &&
         kind != AT_IMPORT_COUNT_MINUS1))
        return m->ref->cache_import(m->inner, c, conv, state, msg);
    const int64_t B = c->batch;
    const size_t wb = (size_t)(B * m->wel) * m->eb, sb = (size_t)(B * m->sel) * m->eb;
    enum mc_backend_status st;
    if (kind == M2_IMPORT_STATE_ONLY || kind == GDN_IMPORT_WINDOW_ONLY) {
        /* the bug: one of the two buffers is not written; it keeps what it held (zeros when fresh) */
        const int keep_window = kind == M2_IMPORT_STATE_ONLY;
        const size_t n = keep_window ? wb : sb;
        void *buf = keep_window ? c->window : c->state;
        unsigned char *keep = calloc(n + 1, 1);
        if (keep == NULL)
            return hb_fail(msg, MC_BACKEND_NOMEM, "heldout3: out of memory");
        if (c->primed && buf != NULL)
            memcpy(keep, buf, n);
        st = m->ref->cache_import(m->inner, c, conv, state, msg);
        if (st == MC_BACKEND_OK && buf != NULL)
            memcpy(buf, keep, n);
        free(keep);
        return st;
    }
    void *tmp = malloc(wb + 1);
    if (tmp == NULL)
        return hb_fail(msg, MC_BACKEND_NOMEM, "heldout3: out of memory");
    memcpy(tmp, conv, wb);
    if (kind == SC_IMPORT_WIN_KC) { /* the bug: conv_state read as [B][K][C] */
        for (int64_t b = 0; b < B; b++)
            for (int64_t ch = 0; ch < m->C; ch++)
                for (int64_t k = 0; k < m->K; k++)
                    hb_set(tmp, m->dtype, b * m->wel + ch * m->K + k,
                           hb_get(conv, m->dtype, b * m->wel + k * m->C + ch));
    } else { /* AT_IMPORT_COUNT_MINUS1, the bug: the count taken as the last index, n - 1 */
        for (int64_t b = 0; b < B; b++) {
            const double n = hb_get(conv, m->dtype, b);
            if (n >= 1.0)
                hb_set(tmp, m->dtype, b, n - 1.0);
        }
    }
    st = m->ref->cache_import(m->inner, c, tmp, state, msg);
    free(tmp);
    return st;
}

/* ---- attention: rotating cached keys (RoPE composes: R(a) R(b) = R(a + b)) ---------------------- */

static void hb_rotate_key(struct mc_model *m, struct mc_cache *c, int64_t b, int64_t slot, double delta)
{
    void *win, *st;
    mc_ref_cache_row(m->inner, c, b, &win, &st);
    const int64_t half = m->R / 2;
    for (int64_t j = 0; j < m->Hkv; j++) {
        const int64_t base = (j * m->Lmax + slot) * m->hd;
        for (int64_t i = 0; i < half; i++) {
            const double ang = delta * m->inv_freq[i], cs = cos(ang), sn = sin(ang);
            const double x1 = hb_get(st, m->dtype, base + i), x2 = hb_get(st, m->dtype, base + i + half);
            hb_set(st, m->dtype, base + i, x1 * cs - x2 * sn);
            hb_set(st, m->dtype, base + i + half, x2 * cs + x1 * sn);
        }
    }
}

/* Row b's cached-position count, clamped to [0, Lmax]. */
static int64_t hb_count(struct mc_model *m, const struct mc_cache *c, int64_t b)
{
    const double v = hb_get(c->window, m->dtype, b);
    return !(v > 0.0) ? 0 : v > (double)m->Lmax ? m->Lmax : (int64_t)v;
}



/* ---- forward ------------------------------------------------------------------------------------- */

/* Tokens t0 .. t0+n-1 of every row of a (x [B][L][D], mask [B][L]) into xs [B][n][D] and ms [B][n]. */
static void hb_take(const struct mc_model *m, const struct mc_forward_args *a, int64_t t0, int64_t n, void *xs,
                    uint8_t *ms)
{
    const size_t tok = (size_t)m->D * m->eb;
    for (int64_t b = 0; b < a->batch; b++) {
        memcpy((unsigned char *)xs + (size_t)(b * n) * tok, (const unsigned char *)a->x + (size_t)(b * a->len + t0) * tok,
               (size_t)n * tok);
        if (ms != NULL)
            memcpy(ms + b * n, a->mask + b * a->len + t0, (size_t)n);
    }
}

/* ys [B][n][D] back into tokens t0 .. t0+n-1 of every row of a->y. */
static void hb_put(const struct mc_model *m, const struct mc_forward_args *a, int64_t t0, int64_t n, const void *ys)
{
    const size_t tok = (size_t)m->D * m->eb;
    for (int64_t b = 0; b < a->batch; b++)
        memcpy((unsigned char *)a->y + (size_t)(b * a->len + t0) * tok, (const unsigned char *)ys + (size_t)(b * n) * tok,
               (size_t)n * tok);
}

/* A new cache of c's batch holding a copy of c. */
static enum mc_backend_status hb_clone(struct mc_model *m, const struct mc_cache *c, struct mc_cache **out,
                                       struct mc_msg *msg)
{
    enum mc_backend_status st = m->ref->cache_alloc(m->inner, c->batch, out, msg);
    if (st != MC_BACKEND_OK)
        return st;
    st = m->ref->cache_copy(m->inner, *out, c, msg);
    if (st != MC_BACKEND_OK) {
        m->ref->cache_free(m->inner, *out);
        *out = NULL;
    }
    return st;
}

/* Every head's state of every row of c multiplied by exp(-n slope_h) (lightning: n more tokens of decay);
 * rows whose dec[b] is 0 are left as they are (dec NULL: every row). */
static void hb_decay(struct mc_model *m, struct mc_cache *c, const uint8_t *dec, double n)
{
    const int64_t hh = m->hd * m->hd;
    for (int64_t b = 0; b < c->batch; b++) {
        if (dec != NULL && !dec[b])
            continue;
        for (int64_t h = 0; h < m->H; h++) {
            const double f = exp(-n * m->slope[h]);
            const int64_t base = b * m->sel + h * hh;
            for (int64_t i = 0; i < hh; i++)
                hb_set(c->state, m->dtype, base + i, f * hb_get(c->state, m->dtype, base + i));
        }
    }
}

/* M2_CHUNK_CONV_RESET / GDN_CHUNK_WINDOW_F16 / LA_BLOCK_DECAY_EXTRA: the forward run in chunks of Q
 * tokens along L, the conv window entering every chunk after the first zeroed or rounded to f16 (the
 * recurrent state carried as it is), or (lightning) the state entering it decayed by one more token. */
static enum mc_backend_status hb_forward_chunks(struct mc_model *m, struct mc_cache *c, const struct mc_forward_args *a,
                                                struct mc_msg *msg)
{
    const int64_t B = a->batch, L = a->len, D = m->D, Q = m->Q;
    const size_t eb = m->eb;
    struct mc_cache *cc = c;
    enum mc_backend_status st = MC_BACKEND_OK;
    if (cc == NULL && (st = m->ref->cache_alloc(m->inner, B, &cc, msg)) != MC_BACKEND_OK)
        return st;
    void *xs = malloc((size_t)(B * Q * D) * eb), *ys = malloc((size_t)(B * Q * D) * eb);
    uint8_t *ms = a->mask ? malloc((size_t)(B * Q)) : NULL;
    if (xs == NULL || ys == NULL || (a->mask != NULL && ms == NULL)) {
        st = hb_fail(msg, MC_BACKEND_NOMEM, "heldout3: out of memory");
        goto done;
    }
    for (int64_t t0 = 0; t0 < L && st == MC_BACKEND_OK; t0 += Q) {
        const int64_t n = L - t0 < Q ? L - t0 : Q;
        hb_take(m, a, t0, n, xs, ms);
        if (t0 > 0 && cc->primed) {
            if (m->bug->kind == M2_CHUNK_CONV_RESET) /* the bug: each chunk's conv starts from zeros */
                memset(cc->window, 0, (size_t)(B * m->wel) * eb);
            else if (m->bug->kind == LA_BLOCK_DECAY_EXTRA) /* the bug: the inter-block decay exp(-s (t + 1)) */
                hb_decay(m, cc, NULL, 1.0);
            else /* the bug: the chunk's conv context is staged in a half-precision buffer */
                hb_round_all(cc->window, m->dtype, B * m->wel, hb_round_f16);
        }
        const struct mc_forward_args sub = {.batch = B, .len = n, .x = xs, .mask = ms, .y = ys};
        st = m->ref->forward(m->inner, cc, &sub, msg);
        if (st == MC_BACKEND_OK)
            hb_put(m, a, t0, n, ys);
    }
done:
    free(xs);
    free(ys);
    free(ms);
    if (cc != c)
        m->ref->cache_free(m->inner, cc);
    return st;
}

/* M2_CONT_UNCHAINED: every token of a continued forward stepped from the cache as it was before the
 * call; the cache keeps the last token's step. */
static enum mc_backend_status hb_forward_unchained(struct mc_model *m, struct mc_cache *c,
                                                   const struct mc_forward_args *a, struct mc_msg *msg)
{
    const int64_t B = a->batch, L = a->len;
    struct mc_cache *orig = NULL, *tmp = NULL;
    enum mc_backend_status st = hb_clone(m, c, &orig, msg);
    if (st != MC_BACKEND_OK)
        return st;
    if ((st = m->ref->cache_alloc(m->inner, B, &tmp, msg)) != MC_BACKEND_OK) {
        m->ref->cache_free(m->inner, orig);
        return st;
    }
    void *xs = malloc((size_t)(B * m->D) * m->eb), *ys = malloc((size_t)(B * m->D) * m->eb);
    uint8_t *ms = a->mask ? malloc((size_t)B) : NULL;
    if (xs == NULL || ys == NULL || (a->mask != NULL && ms == NULL))
        st = hb_fail(msg, MC_BACKEND_NOMEM, "heldout3: out of memory");
    for (int64_t t = 0; t < L && st == MC_BACKEND_OK; t++) {
        hb_take(m, a, t, 1, xs, ms);
        st = m->ref->cache_copy(m->inner, tmp, orig, msg);
        const struct mc_forward_args one = {.batch = B, .len = 1, .x = xs, .mask = ms, .y = ys};
        if (st == MC_BACKEND_OK)
            st = m->ref->forward(m->inner, tmp, &one, msg);
        if (st == MC_BACKEND_OK)
            hb_put(m, a, t, 1, ys);
    }
    if (st == MC_BACKEND_OK)
        st = m->ref->cache_copy(m->inner, c, tmp, msg);
    free(xs);
    free(ys);
    free(ms);
    m->ref->cache_free(m->inner, orig);
    m->ref->cache_free(m->inner, tmp);
    return st;
}

/* GDN_TAIL_CHUNK_STATE: the outputs and the window of the whole forward; the state stored is the one
 * after its last whole chunk of Q tokens (the partial chunk's state update is not written back). */
static enum mc_backend_status hb_forward_tail(struct mc_model *m, struct mc_cache *c, const struct mc_forward_args *a,
                                              struct mc_msg *msg)
{
    const int64_t B = a->batch, Lc = a->len / m->Q * m->Q;
    struct mc_cache *save = NULL;
    enum mc_backend_status st = hb_clone(m, c, &save, msg);
    if (st != MC_BACKEND_OK)
        return st;
    void *xs = malloc((size_t)(B * Lc * m->D) * m->eb), *ys = malloc((size_t)(B * Lc * m->D) * m->eb);
    uint8_t *ms = a->mask ? malloc((size_t)(B * Lc)) : NULL;
    if (xs == NULL || ys == NULL || (a->mask != NULL && ms == NULL))
        st = hb_fail(msg, MC_BACKEND_NOMEM, "heldout3: out of memory");
    if (st == MC_BACKEND_OK)
        st = m->ref->forward(m->inner, c, a, msg);
    if (st == MC_BACKEND_OK) {
        hb_take(m, a, 0, Lc, xs, ms);
        const struct mc_forward_args head = {.batch = B, .len = Lc, .x = xs, .mask = ms, .y = ys};
        st = m->ref->forward(m->inner, save, &head, msg);
        if (st == MC_BACKEND_OK)
            memcpy(c->state, save->state, (size_t)(B * m->sel) * m->eb);
    }
    free(xs);
    free(ys);
    free(ms);
    m->ref->cache_free(m->inner, save);
    return st;
}

/* SC_WINDOW_ONE_EARLY: the outputs of the whole forward; the window stored is the one after each
 * row's second-to-last real token (the last real token of every row masked out on a copy). */
static enum mc_backend_status hb_forward_early_window(struct mc_model *m, struct mc_cache *c,
                                                      const struct mc_forward_args *a, struct mc_msg *msg)
{
    const int64_t B = a->batch, L = a->len;
    struct mc_cache *tmp = NULL;
    enum mc_backend_status st = hb_clone(m, c, &tmp, msg);
    if (st != MC_BACKEND_OK)
        return st;
    void *ys = malloc((size_t)(B * L * m->D) * m->eb);
    uint8_t *ms = malloc((size_t)(B * L));
    if (ys == NULL || ms == NULL)
        st = hb_fail(msg, MC_BACKEND_NOMEM, "heldout3: out of memory");
    if (st == MC_BACKEND_OK) {
        for (int64_t i = 0; i < B * L; i++)
            ms[i] = a->mask == NULL || a->mask[i] != 0;
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = L - 1; t >= 0; t--)
                if (ms[b * L + t]) {
                    ms[b * L + t] = 0;
                    break;
                }
        const struct mc_forward_args early = {.batch = B, .len = L, .x = a->x, .mask = ms, .y = ys};
        st = m->ref->forward(m->inner, tmp, &early, msg);
    }
    if (st == MC_BACKEND_OK)
        st = m->ref->forward(m->inner, c, a, msg);
    if (st == MC_BACKEND_OK)
        memcpy(c->window, tmp->window, (size_t)(B * m->wel) * m->eb);
    free(ys);
    free(ms);
    m->ref->cache_free(m->inner, tmp);
    return st;
}

/* LA_PADS_DECAY: the forward run token by token (the lightning recurrence is the token-by-token form), the
 * state of every row whose token is a pad decayed by one token after it. */
static enum mc_backend_status hb_forward_pads_decay(struct mc_model *m, struct mc_cache *c,
                                                    const struct mc_forward_args *a, struct mc_msg *msg)
{
    const int64_t B = a->batch, L = a->len;
    struct mc_cache *cc = c;
    enum mc_backend_status st = MC_BACKEND_OK;
    if (cc == NULL && (st = m->ref->cache_alloc(m->inner, B, &cc, msg)) != MC_BACKEND_OK)
        return st;
    void *xs = malloc((size_t)(B * m->D) * m->eb), *ys = malloc((size_t)(B * m->D) * m->eb);
    uint8_t *ms = malloc((size_t)B), *pad = malloc((size_t)B);
    if (xs == NULL || ys == NULL || ms == NULL || pad == NULL)
        st = hb_fail(msg, MC_BACKEND_NOMEM, "heldout3: out of memory");
    for (int64_t t = 0; t < L && st == MC_BACKEND_OK; t++) {
        hb_take(m, a, t, 1, xs, ms);
        const struct mc_forward_args one = {.batch = B, .len = 1, .x = xs, .mask = ms, .y = ys};
        st = m->ref->forward(m->inner, cc, &one, msg);
        if (st != MC_BACKEND_OK)
            break;
        hb_put(m, a, t, 1, ys);
        for (int64_t b = 0; b < B; b++)
            pad[b] = ms[b] == 0;
        hb_decay(m, cc, pad, 1.0); /* the bug: the pad's decay exp(-s) applied, its k v^T not added */
    }
    free(xs);
    free(ys);
    free(ms);
    free(pad);
    if (cc != c)
        m->ref->cache_free(m->inner, cc);
    return st;
}

/* SC_CONT_CACHE_FIRST: the outputs of the whole forward; the window stored is the one after its first
 * token (the cache update of the single-step branch, taken for every continued call). */
static enum mc_backend_status hb_forward_first_cache(struct mc_model *m, struct mc_cache *c,
                                                     const struct mc_forward_args *a, struct mc_msg *msg)
{
    const int64_t B = a->batch;
    struct mc_cache *tmp = NULL;
    enum mc_backend_status st = hb_clone(m, c, &tmp, msg);
    if (st != MC_BACKEND_OK)
        return st;
    void *xs = malloc((size_t)(B * m->D) * m->eb), *ys = malloc((size_t)(B * m->D) * m->eb);
    uint8_t *ms = a->mask ? malloc((size_t)B) : NULL;
    if (xs == NULL || ys == NULL || (a->mask != NULL && ms == NULL))
        st = hb_fail(msg, MC_BACKEND_NOMEM, "heldout3: out of memory");
    if (st == MC_BACKEND_OK) {
        hb_take(m, a, 0, 1, xs, ms);
        const struct mc_forward_args first = {.batch = B, .len = 1, .x = xs, .mask = ms, .y = ys};
        st = m->ref->forward(m->inner, tmp, &first, msg);
    }
    if (st == MC_BACKEND_OK)
        st = m->ref->forward(m->inner, c, a, msg);
    if (st == MC_BACKEND_OK)
        memcpy(c->window, tmp->window, (size_t)(B * m->wel) * m->eb);
    free(xs);
    free(ys);
    free(ms);
    m->ref->cache_free(m->inner, tmp);
    return st;
}

static enum mc_backend_status hb_forward(struct mc_model *m, struct mc_cache *c, const struct mc_forward_args *a,
                                         struct mc_msg *msg)
{
    const enum hb_kind kind = m->bug->kind;
    if (kind == HB_CONTROL || a == NULL || a->batch < 1 || a->len < 1 || a->x == NULL || a->y == NULL ||
        (c != NULL && c->batch != a->batch))
        return m->ref->forward(m->inner, c, a, msg);
    const int primed = c != NULL && c->primed;
    const int step = primed && a->len == 1;
    struct mc_model *use = step && m->alt != NULL ? m->alt : m->inner;
    struct mc_forward_args args = *a;
    const int64_t B = a->batch, L = a->len;
    void *scratch = NULL; /* a modified x or mask, or a saved window */
    enum mc_backend_status st;

    switch (kind) {
    case M2_DECODE_BATCH_ERROR:
        if (step && B > 1)
            return hb_fail(msg, MC_BACKEND_INTERNAL,
                           "heldout3 mamba2: forward: the single-step kernel handles one sequence per call");
        break;
    case M1_MASKED_STEP_ERROR:
        if (step && a->mask != NULL)
            return hb_fail(msg, MC_BACKEND_INTERNAL,
                           "heldout3 mamba1: forward: an attention mask is not supported in the single-step path");
        break;
    case GDN_SHORT_PREFILL_ERROR:
        if (!primed && L < m->K)
            return hb_fail(msg, MC_BACKEND_INTERNAL,
                           "heldout3 gdn: forward: a prefill needs at least conv_kernel tokens");
        break;
    case AT_DECODE_SLOTS_ERROR:
        if (step)
            for (int64_t b = 0; b < B; b++)
                if (hb_count(m, c, b) >= 8)
                    return hb_fail(msg, MC_BACKEND_INTERNAL,
                                   "heldout3 attention: forward: the decode kernel's score buffer holds 8 positions");
        break;
    case M2_CHUNK_CONV_RESET:
    case GDN_CHUNK_WINDOW_F16:
    case LA_BLOCK_DECAY_EXTRA:
        if (L > m->Q)
            return hb_forward_chunks(m, c, a, msg);
        break;
    case M2_CONT_UNCHAINED:
        if (primed && L > 1)
            return hb_forward_unchained(m, c, a, msg);
        break;
    case GDN_TAIL_CHUNK_STATE:
        if (c != NULL && L > m->Q && L % m->Q != 0)
            return hb_forward_tail(m, c, a, msg);
        break;
    case LA_PADS_DECAY:
        if (a->mask != NULL)
            return hb_forward_pads_decay(m, c, a, msg);
        break;
    case SC_CONT_CACHE_FIRST:
        if (primed && L > 1)
            return hb_forward_first_cache(m, c, a, msg);
        break;
    case SC_WINDOW_ONE_EARLY:
        if (c != NULL && L > 1)
            return hb_forward_early_window(m, c, a, msg);
        break;
    case M2_STEP_STATE_BF16: /* the bug: the step kernel loads the state in bf16, updates and stores it wide */
        if (step)
            hb_round_all(c->state, m->dtype, B * m->sel, hb_round_bf16);
        break;
    case M1_CONT_STATE_F16: /* the bug: the chunked scan takes its initial state from a half buffer */
        if (primed && L > 1)
            hb_round_all(c->state, m->dtype, B * m->sel, hb_round_f16);
        break;
    case GDN_MASK_ONE_EARLY: /* the bug: mask[t + 1] read for position t as well: m'[t] = m[t] | m[t + 1] */
        if (a->mask != NULL) {
            uint8_t *ms = malloc((size_t)(B * L));
            if (ms == NULL)
                return hb_fail(msg, MC_BACKEND_NOMEM, "heldout3: out of memory");
            for (int64_t b = 0; b < B; b++)
                for (int64_t t = 0; t < L; t++)
                    ms[b * L + t] = a->mask[b * L + t] != 0 || (t + 1 < L && a->mask[b * L + t + 1] != 0);
            scratch = ms;
            args.mask = ms;
        }
        break;
    case M1_B1_MASK_IGNORED: /* the bug: a batch of one taken as unpadded, its mask not passed on */
        if (B == 1)
            args.mask = NULL;
        break;
    case M1_CONT_STATE_ZERO:
        if (primed && L > 1)
            memset(c->state, 0, (size_t)(B * m->sel) * m->eb);
        break;
    case SC_DECODE_ROW_NEXT: /* the bug: row b's step reads the window of row (b + 1) mod B */
        if (step && B > 1) {
            const size_t rowb = (size_t)m->wel * m->eb;
            if ((scratch = malloc((size_t)B * rowb)) == NULL)
                return hb_fail(msg, MC_BACKEND_NOMEM, "heldout3: out of memory");
            memcpy(scratch, c->window, (size_t)B * rowb);
            for (int64_t b = 0; b < B; b++)
                memcpy((unsigned char *)c->window + (size_t)b * rowb,
                       (unsigned char *)scratch + (size_t)((b + 1) % B) * rowb, rowb);
        }
        break;
    default:
        break;
    }

    st = m->ref->forward(use, c, &args, msg);
    if (st != MC_BACKEND_OK) {
        if (kind == SC_DECODE_ROW_NEXT && scratch != NULL) /* a failed forward leaves the cache as it was */
            memcpy(c->window, scratch, (size_t)(B * m->wel) * m->eb);
        free(scratch);
        return st;
    }
    if (kind == AT_OUT_BF16) /* the bug: o_proj's result stored in a bf16 buffer */
        hb_round_all(a->y, m->dtype, B * L * m->D, hb_round_bf16);
    if (kind == AT_PREFILL_POS_PLUS1 && c != NULL && !primed && m->R > 0)
        /* the bug: the fresh prefill's keys cached as rotated at positions 1 .. n (scores inside the
         * call see only differences, so its outputs are right) */
        for (int64_t b = 0; b < B; b++)
            for (int64_t s = 0; s < hb_count(m, c, b); s++)
                hb_rotate_key(m, c, b, s, 1.0);
    free(scratch);
    return MC_BACKEND_OK;
}

/* ---- the packed call ----------------------------------------------------------------------------- */

/* The packed call written on the port's own forward: each sequence through hb_forward on a batch-of-one
 * cache loaded from its slot, then stored back. */
static enum mc_backend_status hb_forward_packed(struct mc_model *m, struct mc_cache *pool,
                                                const struct mc_packed_args *a, struct mc_msg *msg)
{
    const enum hb_kind kind = m->bug->kind;
    if (kind == HB_CONTROL || a == NULL || pool == NULL || a->cu_seqlens == NULL)
        return m->ref->forward_packed(m->inner, pool, a, msg);
    const int64_t n = a->n_seqs;
    if (n < 0 || n > pool->batch || a->cu_seqlens[0] != 0 || (n > 0 && (!a->slots || !a->has_initial_state)))
        return m->ref->forward_packed(m->inner, pool, a, msg); /* its argument errors */
    for (int64_t i = 0; i < n; i++) {
        if (a->cu_seqlens[i + 1] < a->cu_seqlens[i] || a->slots[i] < 0 || a->slots[i] >= pool->batch ||
            a->has_initial_state[i] > 1)
            return m->ref->forward_packed(m->inner, pool, a, msg);
        for (int64_t j = 0; j < i; j++)
            if (a->slots[j] == a->slots[i])
                return m->ref->forward_packed(m->inner, pool, a, msg);
    }
    if (a->cu_seqlens[n] == 0)
        return MC_BACKEND_OK;
    if (!a->x || !a->y)
        return m->ref->forward_packed(m->inner, pool, a, msg);

    struct mc_cache *one = NULL;
    enum mc_backend_status st = m->ref->cache_alloc(m->inner, 1, &one, msg);
    if (st != MC_BACKEND_OK)
        return st;
    const size_t tok = (size_t)m->D * m->eb, wb = (size_t)m->wel * m->eb, sb = (size_t)m->sel * m->eb;
    if (!pool->primed) {
        memset(pool->window, 0, (size_t)(pool->batch * m->wel) * m->eb);
        if (m->sel > 0)
            memset(pool->state, 0, (size_t)(pool->batch * m->sel) * m->eb);
        pool->primed = 1;
    }
    for (int64_t i = 0; i < n && st == MC_BACKEND_OK; i++) {
        const int64_t t0 = a->cu_seqlens[i], len = a->cu_seqlens[i + 1] - t0;
        if (len == 0)
            continue;
        const int cont = a->has_initial_state[i];
        void *win, *state;
        mc_ref_cache_row(m->inner, pool, a->slots[i], &win, &state);
        if (cont) {
            if (kind == M2_PACKED_WINDOW_ZERO) /* the bug: the slot's conv window is not gathered */
                memset(one->window, 0, wb);
            else
                memcpy(one->window, win, wb);
            if (m->sel > 0)
                memcpy(one->state, state, sb);
        }
        one->primed = cont;
        if (!cont && kind == KDA_PACKED_FRESH_WINDOW) {
            /* the bug: has_initial_state honoured for the state only: the conv reads the slot's window */
            memcpy(one->window, win, wb);
            if (m->sel > 0)
                memset(one->state, 0, sb);
            one->primed = 1;
        }
        /* SC_PACKED_X_EARLY, the bug: a sequence after the first read from the token before its start */
        const int64_t xt = kind == SC_PACKED_X_EARLY && i > 0 && t0 > 0 ? t0 - 1 : t0;
        const unsigned char *x = (const unsigned char *)a->x + (size_t)xt * tok;
        unsigned char *y = (unsigned char *)a->y + (size_t)t0 * tok;
        const struct mc_forward_args fa = {.batch = 1, .len = len, .x = x, .mask = NULL, .y = y};
        st = hb_forward(m, one, &fa, msg);
        if (st == MC_BACKEND_OK) {
            if (kind == GDN_PACKED_SLOT_NEXT) /* the bug: the store goes to the next slot of the pool */
                mc_ref_cache_row(m->inner, pool, (a->slots[i] + 1) % pool->batch, &win, &state);
            memcpy(win, one->window, wb);
            if (m->sel > 0)
                memcpy(state, one->state, sb);
        }
    }
    m->ref->cache_free(m->inner, one);
    return st;
}

/* ---- registration -------------------------------------------------------------------------------- */

#define HB_CREATE(i)                                                                                                 \
    static enum mc_backend_status hb_create_##i(const struct mc_model_desc *d, struct mc_model **mm,               \
                                                struct mc_msg *msg)                                                  \
    {                                                                                                                \
        return hb_create(&hb_bugs[i], d, mm, msg);                                                                   \
    }
HB_CREATE(0)
HB_CREATE(1)
HB_CREATE(2)
HB_CREATE(3)
HB_CREATE(4)
HB_CREATE(5)
HB_CREATE(6)
HB_CREATE(7)
HB_CREATE(8)
HB_CREATE(9)
HB_CREATE(10)
HB_CREATE(11)
HB_CREATE(12)
HB_CREATE(13)
HB_CREATE(14)
HB_CREATE(15)
HB_CREATE(16)
HB_CREATE(17)
HB_CREATE(18)
HB_CREATE(19)
HB_CREATE(20)
HB_CREATE(21)
HB_CREATE(22)
HB_CREATE(23)
HB_CREATE(24)
HB_CREATE(25)
HB_CREATE(26)
HB_CREATE(27)
HB_CREATE(28)
HB_CREATE(29)
HB_CREATE(30)
HB_CREATE(31)
HB_CREATE(32)
HB_CREATE(33)
HB_CREATE(34)
HB_CREATE(35)
HB_CREATE(36)
HB_CREATE(37)
HB_CREATE(38)
HB_CREATE(39)
HB_CREATE(40)
HB_CREATE(41)
HB_CREATE(42)
HB_CREATE(43)
HB_CREATE(44)
HB_CREATE(45)
HB_CREATE(46)
HB_CREATE(47)
HB_CREATE(48)
HB_CREATE(49)
HB_CREATE(50)
HB_CREATE(51)
HB_CREATE(52)
#undef HB_CREATE

typedef enum mc_backend_status (*hb_create_fn)(const struct mc_model_desc *, struct mc_model **, struct mc_msg *);

static const hb_create_fn hb_creates[] = {
    hb_create_0, hb_create_1, hb_create_2, hb_create_3, hb_create_4, hb_create_5, hb_create_6, hb_create_7,
    hb_create_8, hb_create_9, hb_create_10, hb_create_11, hb_create_12, hb_create_13, hb_create_14, hb_create_15,
    hb_create_16, hb_create_17, hb_create_18, hb_create_19, hb_create_20, hb_create_21, hb_create_22, hb_create_23,
    hb_create_24, hb_create_25, hb_create_26, hb_create_27, hb_create_28, hb_create_29, hb_create_30, hb_create_31,
    hb_create_32, hb_create_33, hb_create_34, hb_create_35, hb_create_36, hb_create_37, hb_create_38, hb_create_39,
    hb_create_40, hb_create_41, hb_create_42, hb_create_43, hb_create_44, hb_create_45, hb_create_46, hb_create_47,
    hb_create_48, hb_create_49, hb_create_50, hb_create_51, hb_create_52,
};

_Static_assert(sizeof hb_creates / sizeof hb_creates[0] == HB_N, "one create function per backend");

EXPORT const struct mc_backend_ops *const *mixcheck_plugin_backends(uint32_t *count, uint32_t *abi_version)
{
    static struct mc_backend_ops ops[HB_N];
    static const struct mc_backend_ops *all[HB_N];
    for (size_t i = 0; i < HB_N; i++) {
        ops[i] = (struct mc_backend_ops){.abi_version = MIXCHECK_ABI_VERSION,
                                         .struct_size = sizeof(struct mc_backend_ops),
                                         .name = hb_bugs[i].name,
                                         .device = "cpu",
                                         .family = hb_bugs[i].family,
                                         .dtypes = MC_DTYPE_BIT(MC_DTYPE_F32) | MC_DTYPE_BIT(MC_DTYPE_F64),
                                         .caps = MC_CAP_PACKED,
                                         .model_create = hb_creates[i],
                                         .model_destroy = hb_model_destroy,
                                         .cache_alloc = hb_cache_alloc,
                                         .cache_copy = hb_cache_copy,
                                         .cache_free = hb_cache_free,
                                         .cache_export = hb_cache_export,
                                         .cache_import = hb_cache_import,
                                         .forward = hb_forward,
                                         .forward_packed = hb_forward_packed};
        all[i] = &ops[i];
    }
    *count = (uint32_t)HB_N;
    *abi_version = MIXCHECK_ABI_VERSION;
    return all;
}
