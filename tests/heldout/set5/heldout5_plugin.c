/*
 * heldout5_plugin.c — a fifth held-out set of broken mixer ports, the ground truth of each in manifest.json
 * next to this file (family, style, what is wrong, the closest bug class, the answer to score against).
 * Each backend `heldout5.<name>` is the reference mixer of one family (mc_reference_<family>_ops(),
 * compiled into this library) behind its own model handle, with ONE planted bug, written the way a port
 * author could get it wrong. The bugs are emulated exactly with the reference's own calls:
 *
 *   - a constant, a layout or a weight's precision read wrongly: the model is created from an edited
 *     configuration or from edited / permuted / rounded weights;
 *   - one path that computes another function: a second reference model, made from edited weights or
 *     configuration (or by the l2-norm switch, heldout5_l2kda.c), serves the primed L == 1 forwards (the
 *     port's decode kernel) on the same cache;
 *   - a multi-token forward on a primed cache that takes the single-step branch's dt: the reference's own
 *     source compiled again with its switch MC_REF_M2_DT_FIRST / MC_REF_M1_DT_FIRST (heldout5_m2dt.c,
 *     heldout5_m1dt.c), set only around those forwards; a continued forward that starts from a zero state
 *     or a zero window (the cache edited before the reference's call), that advances the cache by its
 *     first token only (a second reference forward on a copy of the cache), or whose tokens are each
 *     stepped from the cache as it was (a copy of it restored before every token);
 *   - the q/k l2 norm of GDN and KDA written x / (||x|| + eps): the reference's source compiled again with
 *     its switch MC_REF_L2NORM_ADD (heldout5_l2gdn.c, heldout5_l2kda.c);
 *   - a forward split where the port's kernel splits it (chunks of the model's chunk length whose carried
 *     state goes through an f32 buffer, a tail chunk started from a zero state);
 *   - attention over a subset of the cached positions (a KV cache evicted by the chunked-prefill kernel):
 *     each token stepped on a one-row cache holding only the visible keys and values, the keys rotated
 *     (RoPE composes: R(a) R(b) = R(a + b)) so that every score sees the distance it would;
 *   - a cache copied, exported, imported or allocated wrongly, a packed call that stores to the wrong
 *     slot or mishandles has_initial_state (hooks around the reference calls on the reference cache, whose
 *     layout ref_common.h gives);
 *   - an error in one kind of call: an error status, an abort(), NaN outputs.
 *
 * heldout5.control-<family> is the same wrapper with no bug: it must pass every bundled case.
 *
 * The wrapper plumbing (descriptor copies, rounding helpers, key rotation, the visible-window forward and
 * the packed call written on the port's own forward) follows tests/heldout/set4/heldout4_plugin.c; the
 * bugs are this set's own. The backends declare f32 and f64 and no optional capability except the packed
 * call (no stage probes). Written without the diagnosis: test_heldout_caught.py checks only that every bug
 * is caught and every control passes.
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

/* the reference mixers compiled again with a switch (heldout5_m2dt.c, heldout5_m1dt.c, heldout5_l2gdn.c,
 * heldout5_l2kda.c) */
const struct mc_backend_ops *hb5_dtfirst_mamba2_ops(void);
const struct mc_backend_ops *hb5_dtfirst_mamba1_ops(void);
const struct mc_backend_ops *hb5_l2add_gdn_ops(void);
const struct mc_backend_ops *hb5_l2add_kda_ops(void);

/* The switch of the dt-first copies: nonzero only around a multi-token forward on a primed cache of the
 * dt-first bugs (mixcheck calls a backend from one thread). */
extern int hb5_dt_first;
int hb5_dt_first = 0;

/* ---- the bugs ----------------------------------------------------------------------------------- */

enum hb_kind {
    HB_CONTROL,
    /* mamba2 */
    M2_CONT_DT_FIRST,        /* a continued multi-token forward uses the first token's dt for every token */
    M2_CONT_DT_FIRST_ZERO,   /* the same, and it starts from a zero state */
    M2_DECODE_NO_CONVBIAS,   /* the single-step path forgets conv1d.bias */
    M2_CONT_WINDOW_BF16,     /* a continued multi-token forward loads the conv window through bf16 */
    M2_COPY_WINDOW_ONLY,     /* cache_copy copies the window, not the state */
    M2_ZX_SWAPPED,           /* in_proj's z and x row blocks read for each other */
    M2_CHUNK_WINDOW_EARLY,   /* the conv window handed to the next chunk ends one token early */
    M2_LEFTPAD_FIRST_DROPPED,/* the mask read as mask[t] && mask[t-1]: a row's first real token after pads dropped */
    /* mamba1 */
    M1_CONT_DT_FIRST,        /* a continued multi-token forward uses the first token's dt for every token */
    M1_DECODE_DTBIAS_TWICE,  /* the single-step path adds dt_proj.bias twice */
    M1_IMPORT_NOT_PRIMED,    /* cache_import does not mark the cache primed */
    M1_PACKED_STORE_SLOT_I,  /* the packed call stores sequence i into pool row i */
    M1_XZ_SWAPPED,           /* in_proj's x and z row blocks read for each other */
    M1_PACKED_MANY_ERROR,    /* the packed call refuses more than 4 sequences */
    M1_DECODE_STATE_F32,     /* the single-step kernel reads the state through an f32 buffer (f64 models) */
    /* gdn */
    GDN_CONT_STATE_ZERO,     /* a continued multi-token forward starts from a zero state */
    GDN_L2NORM_ADD,          /* q/k l2 norm x / (||x|| + eps), every path */
    GDN_DECODE_NORM_EPS,     /* the single-step path's gated norm uses eps 1e-5 */
    GDN_COPY_ARGS_SWAPPED,   /* cache_copy copies dst into src */
    GDN_DTBIAS_NEGATED,      /* dt_bias subtracted */
    GDN_DECODE_BATCH_NAN,    /* a single-token step of B > 1 rows leaves the last row's output NaN */
    GDN_CHUNK_STATE_F32,     /* the state carried between chunks goes through f32 (f64 models) */
    GDN_MASK_ONE_LATE,       /* the mask read one position late: the first pad after a real token is real */
    /* shortconv */
    SC_DECODE_TAPS_REVERSED, /* the single-step path applies the conv taps in reverse order */
    SC_DECODE_WINDOW_F32,    /* the single-step kernel reads the window through an f32 buffer (f64 models) */
    SC_IMPORT_ROW0_ALL,      /* cache_import writes row 0's window into every row */
    SC_XC_SWAPPED,           /* in_proj's output split B | x | C instead of B | C | x */
    SC_IMPORT_BATCH_ERROR,   /* cache_import refuses a cache of more than one row */
    SC_CONT_WINDOW_ZERO,     /* a continued multi-token forward starts from a zero window */
    /* attention */
    AT_DECODE_THETA_DEFAULT, /* the single-step path rotates with rope_theta 10000 */
    AT_DECODE_KV_F32,        /* the single-step kernel reads the KV cache through an f32 buffer (f64 models) */
    AT_ALLOC_DIRTY_COUNT,    /* cache_alloc leaves the position counts uninitialised */
    AT_PACKED_FRESH_STALE,   /* the packed call continues every sequence from its slot */
    AT_KV_HEADS_REVERSED,    /* k_proj / v_proj heads read in reverse order */
    AT_LEFTPAD_ABORT,        /* abort() on a fresh forward whose first position is a pad */
    AT_CONT_WINDOW8,         /* a continued multi-token forward sees only the newest 7 cached positions */
    AT_DECODE_RING12,        /* the decode kernel's KV ring of 12 slots: the step sees the newest 11 only */
    /* lightning */
    LA_CONT_CACHE_FIRST,     /* a continued multi-token forward advances the cache by its first token only */
    LA_DECODE_LAYER0,        /* the single-step path computes the slopes for layer 0 */
    LA_DECODE_BATCH_ABORT,   /* abort() on a single-token step of B > 1 rows */
    LA_STATE_F16,            /* the state stored in f16 between calls */
    LA_NORM_NO_WEIGHT,       /* the output norm applied without norm.weight */
    LA_IMPORT_ROW_SHIFT,     /* cache_import writes row b into row (b + 1) mod B */
    LA_CONT_DECAY_EXTRA,     /* a continued multi-token forward decays the cached state one step too many */
    /* kda */
    KDA_CONT_UNCHAINED,      /* a continued multi-token forward steps every token from the cache as it was */
    KDA_L2NORM_ADD,          /* q/k l2 norm x / (||x|| + eps), every path */
    KDA_DECODE_L2NORM_ADD,   /* the same in the single-step path only */
    KDA_EXPORT_WINDOW_BF16,  /* cache_export stages the window in bf16 */
    KDA_PACKED_CONT_FRESH,   /* the packed call starts every sequence fresh */
    KDA_TAIL_STATE_ZERO,     /* the partial tail chunk of a long forward starts from a zero state */
    KDA_DECODE_NO_MASK,      /* the single-step path ignores the mask */
    KDA_SHORT_PREFILL_NAN,   /* a fresh prefill of fewer than K real tokens outputs NaN in that row */
};

struct hb_bug {
    const char *name;
    enum mc_family family;
    enum hb_kind kind;
};

static const struct hb_bug hb_bugs[] = {
    {"heldout5.control-mamba2", MC_FAMILY_MAMBA2, HB_CONTROL},
    {"heldout5.control-mamba1", MC_FAMILY_MAMBA1, HB_CONTROL},
    {"heldout5.control-gdn", MC_FAMILY_GDN, HB_CONTROL},
    {"heldout5.control-shortconv", MC_FAMILY_SHORTCONV, HB_CONTROL},
    {"heldout5.control-attention", MC_FAMILY_ATTENTION, HB_CONTROL},
    {"heldout5.control-lightning", MC_FAMILY_LIGHTNING, HB_CONTROL},
    {"heldout5.control-kda", MC_FAMILY_KDA, HB_CONTROL},

    {"heldout5.m2-continued-dt-first", MC_FAMILY_MAMBA2, M2_CONT_DT_FIRST},
    {"heldout5.m2-continued-dt-first-state-zero", MC_FAMILY_MAMBA2, M2_CONT_DT_FIRST_ZERO},
    {"heldout5.m2-decode-no-convbias", MC_FAMILY_MAMBA2, M2_DECODE_NO_CONVBIAS},
    {"heldout5.m2-continued-window-bf16", MC_FAMILY_MAMBA2, M2_CONT_WINDOW_BF16},
    {"heldout5.m2-copy-window-only", MC_FAMILY_MAMBA2, M2_COPY_WINDOW_ONLY},
    {"heldout5.m2-zx-swapped", MC_FAMILY_MAMBA2, M2_ZX_SWAPPED},
    {"heldout5.m2-chunk-window-early", MC_FAMILY_MAMBA2, M2_CHUNK_WINDOW_EARLY},
    {"heldout5.m2-leftpad-first-dropped", MC_FAMILY_MAMBA2, M2_LEFTPAD_FIRST_DROPPED},

    {"heldout5.m1-continued-dt-first", MC_FAMILY_MAMBA1, M1_CONT_DT_FIRST},
    {"heldout5.m1-decode-dtbias-twice", MC_FAMILY_MAMBA1, M1_DECODE_DTBIAS_TWICE},
    {"heldout5.m1-import-not-primed", MC_FAMILY_MAMBA1, M1_IMPORT_NOT_PRIMED},
    {"heldout5.m1-packed-store-slot-i", MC_FAMILY_MAMBA1, M1_PACKED_STORE_SLOT_I},
    {"heldout5.m1-xz-swapped", MC_FAMILY_MAMBA1, M1_XZ_SWAPPED},
    {"heldout5.m1-packed-many-error", MC_FAMILY_MAMBA1, M1_PACKED_MANY_ERROR},
    {"heldout5.m1-decode-state-f32", MC_FAMILY_MAMBA1, M1_DECODE_STATE_F32},

    {"heldout5.gdn-continued-state-zero", MC_FAMILY_GDN, GDN_CONT_STATE_ZERO},
    {"heldout5.gdn-l2norm-add", MC_FAMILY_GDN, GDN_L2NORM_ADD},
    {"heldout5.gdn-decode-norm-eps", MC_FAMILY_GDN, GDN_DECODE_NORM_EPS},
    {"heldout5.gdn-copy-args-swapped", MC_FAMILY_GDN, GDN_COPY_ARGS_SWAPPED},
    {"heldout5.gdn-dtbias-negated", MC_FAMILY_GDN, GDN_DTBIAS_NEGATED},
    {"heldout5.gdn-decode-batch-nan", MC_FAMILY_GDN, GDN_DECODE_BATCH_NAN},
    {"heldout5.gdn-chunk-state-f32", MC_FAMILY_GDN, GDN_CHUNK_STATE_F32},
    {"heldout5.gdn-mask-one-late", MC_FAMILY_GDN, GDN_MASK_ONE_LATE},

    {"heldout5.sc-decode-taps-reversed", MC_FAMILY_SHORTCONV, SC_DECODE_TAPS_REVERSED},
    {"heldout5.sc-decode-window-f32", MC_FAMILY_SHORTCONV, SC_DECODE_WINDOW_F32},
    {"heldout5.sc-import-row0-all", MC_FAMILY_SHORTCONV, SC_IMPORT_ROW0_ALL},
    {"heldout5.sc-xc-swapped", MC_FAMILY_SHORTCONV, SC_XC_SWAPPED},
    {"heldout5.sc-import-batch-error", MC_FAMILY_SHORTCONV, SC_IMPORT_BATCH_ERROR},
    {"heldout5.sc-continued-window-zero", MC_FAMILY_SHORTCONV, SC_CONT_WINDOW_ZERO},

    {"heldout5.attn-decode-theta-default", MC_FAMILY_ATTENTION, AT_DECODE_THETA_DEFAULT},
    {"heldout5.attn-decode-kv-f32", MC_FAMILY_ATTENTION, AT_DECODE_KV_F32},
    {"heldout5.attn-alloc-dirty-count", MC_FAMILY_ATTENTION, AT_ALLOC_DIRTY_COUNT},
    {"heldout5.attn-packed-fresh-stale", MC_FAMILY_ATTENTION, AT_PACKED_FRESH_STALE},
    {"heldout5.attn-kv-heads-reversed", MC_FAMILY_ATTENTION, AT_KV_HEADS_REVERSED},
    {"heldout5.attn-leftpad-abort", MC_FAMILY_ATTENTION, AT_LEFTPAD_ABORT},
    {"heldout5.attn-continued-window-8", MC_FAMILY_ATTENTION, AT_CONT_WINDOW8},
    {"heldout5.attn-decode-ring-12", MC_FAMILY_ATTENTION, AT_DECODE_RING12},

    {"heldout5.la-continued-cache-first", MC_FAMILY_LIGHTNING, LA_CONT_CACHE_FIRST},
    {"heldout5.la-decode-layer0-slopes", MC_FAMILY_LIGHTNING, LA_DECODE_LAYER0},
    {"heldout5.la-decode-batch-abort", MC_FAMILY_LIGHTNING, LA_DECODE_BATCH_ABORT},
    {"heldout5.la-state-f16", MC_FAMILY_LIGHTNING, LA_STATE_F16},
    {"heldout5.la-norm-no-weight", MC_FAMILY_LIGHTNING, LA_NORM_NO_WEIGHT},
    {"heldout5.la-import-row-shift", MC_FAMILY_LIGHTNING, LA_IMPORT_ROW_SHIFT},
    {"heldout5.la-continued-decay-extra", MC_FAMILY_LIGHTNING, LA_CONT_DECAY_EXTRA},

    {"heldout5.kda-continued-unchained", MC_FAMILY_KDA, KDA_CONT_UNCHAINED},
    {"heldout5.kda-l2norm-add", MC_FAMILY_KDA, KDA_L2NORM_ADD},
    {"heldout5.kda-decode-l2norm-add", MC_FAMILY_KDA, KDA_DECODE_L2NORM_ADD},
    {"heldout5.kda-export-window-bf16", MC_FAMILY_KDA, KDA_EXPORT_WINDOW_BF16},
    {"heldout5.kda-packed-continued-fresh", MC_FAMILY_KDA, KDA_PACKED_CONT_FRESH},
    {"heldout5.kda-tail-chunk-state-zero", MC_FAMILY_KDA, KDA_TAIL_STATE_ZERO},
    {"heldout5.kda-decode-no-mask", MC_FAMILY_KDA, KDA_DECODE_NO_MASK},
    {"heldout5.kda-short-prefill-nan", MC_FAMILY_KDA, KDA_SHORT_PREFILL_NAN},
};

#define HB_N (sizeof hb_bugs / sizeof hb_bugs[0])

/* ---- the wrapper model ---------------------------------------------------------------------------- */

struct mc_model {
    const struct hb_bug *bug;
    const struct mc_backend_ops *ref;     /* the ops of inner (and of every cache) */
    const struct mc_backend_ops *alt_ref; /* the ops of alt */
    struct mc_model *inner; /* the reference model the port's multi-token path amounts to */
    struct mc_model *alt;   /* the one its single-step path amounts to (NULL: the same) */
    enum mc_dtype dtype;
    size_t eb;              /* bytes per element of weights, x, y and the cache */
    int64_t D;              /* hidden size */
    int64_t wel, sel;       /* window and state elements per cache row */
    int64_t K;              /* conv width */
    int64_t Q;              /* the chunk length of the port's prefill kernel */
    int64_t Hkv, Lmax, hd;  /* attention */
    int mla;                /* attention: multi-head latent attention (another cache layout) */
    int64_t R;              /* rotary dims (0 without RoPE) */
    double *inv_freq;       /* [R/2] */
    int64_t H;              /* lightning: heads (state [H][hd][hd] per row) */
    double *decay;          /* lightning: [H] exp(-s_h), the per-token decay of each head */
};

static const struct mc_backend_ops *hb_ref_ops(const struct hb_bug *bug)
{
    switch (bug->family) {
    case MC_FAMILY_MAMBA2:
        return bug->kind == M2_CONT_DT_FIRST || bug->kind == M2_CONT_DT_FIRST_ZERO ? hb5_dtfirst_mamba2_ops()
                                                                                  : mc_reference_mamba2_ops();
    case MC_FAMILY_MAMBA1:
        return bug->kind == M1_CONT_DT_FIRST ? hb5_dtfirst_mamba1_ops() : mc_reference_mamba1_ops();
    case MC_FAMILY_GDN:
        return bug->kind == GDN_L2NORM_ADD ? hb5_l2add_gdn_ops() : mc_reference_gdn_ops();
    case MC_FAMILY_SHORTCONV:
        return mc_reference_shortconv_ops();
    case MC_FAMILY_ATTENTION:
        return mc_reference_attention_ops();
    case MC_FAMILY_LIGHTNING:
        return mc_reference_lightning_ops();
    case MC_FAMILY_KDA:
        return bug->kind == KDA_L2NORM_ADD ? hb5_l2add_kda_ops() : mc_reference_kda_ops();
    default:
        return NULL;
    }
}

#include "../heldout_scaffold.h" /* hb_fail, element access and rounding, the editable descriptor */

/* v rounded to float32, as a double (the f32 staging buffer of an f64 model) */
static double hb_round_f32(double v)
{
    return (double)(float)v;
}

/* Rows [r0, r0 + n) of a [rows][cols] matrix exchanged with rows [r1, r1 + n). */
static void hb_swap_rows(void *p, enum mc_dtype dt, int64_t cols, int64_t r0, int64_t r1, int64_t n)
{
    for (int64_t i = 0; i < n * cols; i++) {
        const double a = hb_get(p, dt, r0 * cols + i), b = hb_get(p, dt, r1 * cols + i);
        hb_set(p, dt, r0 * cols + i, b);
        hb_set(p, dt, r1 * cols + i, a);
    }
}

/* Row blocks [r0, r0 + n) and [r1, r1 + n) of weight `name` (a matrix or a bias) exchanged. */
static void hb_swap_weight_rows(struct hb_desc *h, const char *name, int64_t r0, int64_t r1, int64_t n)
{
    const enum mc_dtype dt = h->d.dtype;
    struct mc_weight *w = hb_edit(h, name, dt == MC_DTYPE_F64 ? 8 : 4);
    if (w == NULL || w->ndim < 1 || r0 + n > w->dims[0] || r1 + n > w->dims[0])
        return;
    const int64_t cols = hb_elems(w) / w->dims[0];
    hb_swap_rows((void *)w->data, dt, cols, r0, r1, n);
}

/* AT_KV_HEADS_REVERSED: the blocks of `stride` rows of weight `name` in reverse order. */
static void hb_reverse_blocks(struct hb_desc *h, const char *name, int64_t stride)
{
    const enum mc_dtype dt = h->d.dtype;
    struct mc_weight *w = hb_edit(h, name, dt == MC_DTYPE_F64 ? 8 : 4);
    if (w == NULL || w->ndim < 1 || stride < 1)
        return;
    const int64_t nb = w->dims[0] / stride, cols = hb_elems(w) / w->dims[0];
    for (int64_t i = 0; i < nb / 2; i++)
        hb_swap_rows((void *)w->data, dt, cols, i * stride, (nb - 1 - i) * stride, stride);
}

/* The edits shared by both paths of the port: its reading of the configuration and the weights. */
static void hb_edit_common(const struct hb_bug *bug, struct hb_desc *h)
{
    const enum mc_dtype dt = h->d.dtype;
    switch (bug->kind) {
    case M2_ZX_SWAPPED: { /* in_proj rows [z I | x I | ...] read as [x | z | ...] */
        const int64_t I = h->cfg.m2.num_heads * h->cfg.m2.head_dim;
        hb_swap_weight_rows(h, "in_proj.weight", 0, I, I);
        hb_swap_weight_rows(h, "in_proj.bias", 0, I, I);
        break;
    }
    case M1_XZ_SWAPPED: { /* in_proj rows [x I | z I] read as [z | x] */
        const int64_t I = h->cfg.m1.intermediate_size;
        hb_swap_weight_rows(h, "in_proj.weight", 0, I, I);
        hb_swap_weight_rows(h, "in_proj.bias", 0, I, I);
        break;
    }
    case GDN_DTBIAS_NEGATED: /* the bug: softplus(a - dt_bias) */
        hb_affine(h, "dt_bias", dt, -1.0, 0.0);
        break;
    case SC_XC_SWAPPED: { /* in_proj rows [B D | C D | x D] read as [B | x | C] */
        const int64_t D = h->cfg.sc.hidden_size;
        hb_swap_weight_rows(h, "in_proj.weight", D, 2 * D, D);
        hb_swap_weight_rows(h, "in_proj.bias", D, 2 * D, D);
        break;
    }
    case AT_KV_HEADS_REVERSED: { /* the bug: kv head j read from head Hkv-1-j's rows of k_proj and v_proj */
        const struct mc_attention_config *c = &h->cfg.at;
        if (c->kv_lora_rank > 0)
            break;
        hb_reverse_blocks(h, "k_proj.weight", c->head_dim);
        hb_reverse_blocks(h, "k_proj.bias", c->head_dim);
        hb_reverse_blocks(h, "v_proj.weight", c->head_dim);
        hb_reverse_blocks(h, "v_proj.bias", c->head_dim);
        break;
    }
    case LA_NORM_NO_WEIGHT:
        hb_affine(h, "norm.weight", dt, 0.0, 1.0);
        break;
    default:
        break;
    }
}

/* The edits of the single-step path only; returns 1 when it has any. */
static int hb_edit_step(const struct hb_bug *bug, struct hb_desc *h)
{
    const enum mc_dtype dt = h->d.dtype;
    switch (bug->kind) {
    case M2_DECODE_NO_CONVBIAS:
        if (hb_find(&h->d, "conv1d.bias") == NULL)
            return 0;
        hb_affine(h, "conv1d.bias", dt, 0.0, 0.0);
        return 1;
    case M1_DECODE_DTBIAS_TWICE:
        hb_affine(h, "dt_proj.bias", dt, 2.0, 0.0);
        return 1;
    case GDN_DECODE_NORM_EPS:
        if (h->cfg.gdn.rms_norm_eps == 1e-5)
            return 0;
        h->cfg.gdn.rms_norm_eps = 1e-5;
        return 1;
    case SC_DECODE_TAPS_REVERSED: { /* conv.weight [D][1][K]: tap k taken from K-1-k */
        struct mc_weight *w = hb_edit(h, "conv.weight", dt == MC_DTYPE_F64 ? 8 : 4);
        if (w == NULL)
            return 0;
        const int64_t K = w->dims[w->ndim - 1], rows = hb_elems(w) / K;
        for (int64_t r = 0; r < rows; r++)
            for (int64_t k = 0; k < K / 2; k++) {
                const double a = hb_get(w->data, dt, r * K + k), b = hb_get(w->data, dt, r * K + K - 1 - k);
                hb_set((void *)w->data, dt, r * K + k, b);
                hb_set((void *)w->data, dt, r * K + K - 1 - k, a);
            }
        return 1;
    }
    case AT_DECODE_THETA_DEFAULT:
        if (h->cfg.at.no_rope || h->cfg.at.rope_theta == 10000.0)
            return 0;
        h->cfg.at.rope_theta = 10000.0;
        return 1;
    case LA_DECODE_LAYER0:
        if (h->cfg.la.layer_idx == 0)
            return 0;
        h->cfg.la.layer_idx = 0;
        return 1;
    case KDA_DECODE_L2NORM_ADD:
        return 1; /* no edit: the step model is made by the l2-add ops */
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
        m->alt_ref->model_destroy(m->alt);
    free(m->inv_freq);
    free(m->decay);
    free(m);
}

/* A reference model (made by ops) from the descriptor with the common edits and, when `step`, the step
 * edits; *edited says whether the step edits changed anything. */
static enum mc_backend_status hb_make(const struct hb_bug *bug, const struct mc_backend_ops *ops,
                                      const struct mc_model_desc *desc, int step, struct mc_model **out, int *edited,
                                      struct mc_msg *msg)
{
    struct hb_desc h;
    *edited = 0;
    if (hb_desc_init(&h, desc) != 0) {
        hb_desc_free(&h);
        return hb_fail(msg, MC_BACKEND_NOMEM, "heldout5: out of memory");
    }
    hb_edit_common(bug, &h);
    if (step)
        *edited = hb_edit_step(bug, &h);
    const enum mc_backend_status st = ops->model_create(&h.d, out, msg);
    hb_desc_free(&h);
    return st;
}

static enum mc_backend_status hb_create(const struct hb_bug *bug, const struct mc_model_desc *desc,
                                        struct mc_model **out, struct mc_msg *msg)
{
    if (desc == NULL || out == NULL)
        return hb_fail(msg, MC_BACKEND_INVALID, "heldout5: model_create needs a descriptor and an output handle");
    *out = NULL;
    if (desc->family != bug->family || desc->config == NULL)
        return hb_fail(msg, MC_BACKEND_INVALID, "heldout5: descriptor of another family or without configuration");
    if (desc->dtype != MC_DTYPE_F32 && desc->dtype != MC_DTYPE_F64)
        return hb_fail(msg, MC_BACKEND_UNSUPPORTED, "heldout5: f32 and f64 only");
    struct mc_model *m = calloc(1, sizeof *m);
    if (m == NULL)
        return hb_fail(msg, MC_BACKEND_NOMEM, "heldout5: out of memory");
    m->bug = bug;
    m->ref = hb_ref_ops(bug);
    m->alt_ref = bug->kind == KDA_DECODE_L2NORM_ADD ? hb5_l2add_kda_ops() : m->ref;
    m->dtype = desc->dtype;
    m->eb = desc->dtype == MC_DTYPE_F64 ? 8 : 4;

    /* inner: the common edits; alt: common + step edits, kept only when the step edits change it */
    int stp = 0;
    enum mc_backend_status st = hb_make(bug, m->ref, desc, 0, &m->inner, &stp, msg);
    if (st == MC_BACKEND_OK) {
        struct mc_model *alt = NULL;
        st = hb_make(bug, m->alt_ref, desc, 1, &alt, &stp, msg);
        if (st == MC_BACKEND_OK && stp)
            m->alt = alt;
        else if (alt != NULL)
            m->alt_ref->model_destroy(alt);
    }
    if (st != MC_BACKEND_OK) {
        hb_model_destroy(m);
        return st;
    }

    const struct mc_ref_model *rm = (const struct mc_ref_model *)(const void *)m->inner;
    m->D = rm->hidden;
    m->wel = rm->window_elems;
    m->sel = rm->state_elems;
    m->K = 1;
    switch (bug->family) {
    case MC_FAMILY_MAMBA2: {
        const struct mc_mamba2_config *c = desc->config;
        m->K = c->conv_kernel;
        m->Q = desc->chunk_size > 0 ? desc->chunk_size : c->chunk_size;
        break;
    }
    case MC_FAMILY_MAMBA1:
        m->K = ((const struct mc_mamba1_config *)desc->config)->conv_kernel;
        break;
    case MC_FAMILY_GDN: {
        const struct mc_gdn_config *c = desc->config;
        m->K = c->conv_kernel;
        m->Q = desc->chunk_size > 0 ? desc->chunk_size : c->chunk_size;
        break;
    }
    case MC_FAMILY_SHORTCONV:
        m->K = ((const struct mc_shortconv_config *)desc->config)->conv_kernel;
        break;
    case MC_FAMILY_LIGHTNING: {
        const struct mc_lightning_config *c = desc->config;
        m->Q = desc->chunk_size > 0 ? desc->chunk_size : c->block_size;
        m->H = c->num_attention_heads;
        m->hd = c->head_dim;
        m->decay = malloc((size_t)(m->H + 1) * sizeof *m->decay);
        if (m->decay == NULL) {
            hb_model_destroy(m);
            return hb_fail(msg, MC_BACKEND_NOMEM, "heldout5: out of memory");
        }
        /* the slopes of docs/semantics.md §13: 2^(-8(h+1)/H) times the layer's depth factor */
        const double depth = 1.0 - (double)c->layer_idx / ((double)c->num_hidden_layers - 1.0 + 1e-5) + 1e-5;
        for (int64_t h = 0; h < m->H; h++)
            m->decay[h] = exp(-pow(2.0, -8.0 * (double)(h + 1) / (double)m->H) * depth);
        break;
    }
    case MC_FAMILY_KDA: {
        const struct mc_kda_config *c = desc->config;
        m->K = c->conv_kernel;
        m->Q = desc->chunk_size > 0 ? desc->chunk_size : c->chunk_size;
        break;
    }
    default: {
        const struct mc_attention_config *c = desc->config;
        m->mla = c->kv_lora_rank > 0;
        m->Hkv = c->num_key_value_heads;
        m->Lmax = c->cache_length;
        m->hd = c->head_dim;
        m->R = c->no_rope || m->mla ? 0 : (int64_t)((double)c->head_dim * c->partial_rotary_factor);
        m->inv_freq = malloc((size_t)(m->R / 2 + 1) * sizeof *m->inv_freq);
        if (m->inv_freq == NULL) {
            hb_model_destroy(m);
            return hb_fail(msg, MC_BACKEND_NOMEM, "heldout5: out of memory");
        }
        for (int64_t i = 0; i < m->R / 2; i++)
            m->inv_freq[i] = pow(c->rope_theta, -(double)(2 * i) / (double)m->R);
        break;
    }
    }
    if (m->Q < 1)
        m->Q = 64;
    *out = m;
    return MC_BACKEND_OK;
}

/* ---- caches: the reference's own ------------------------------------------------------------------ */

static enum mc_backend_status hb_cache_alloc(struct mc_model *m, int64_t batch, struct mc_cache **out,
                                             struct mc_msg *msg)
{
    const enum mc_backend_status st = m->ref->cache_alloc(m->inner, batch, out, msg);
    if (st != MC_BACKEND_OK || *out == NULL)
        return st;
    struct mc_cache *c = *out;
    if (m->bug->kind == AT_ALLOC_DIRTY_COUNT) {
        /* the bug: the KV blocks calloc'ed, the count array malloc'ed (a fixed small count stands for the
         * leftover memory), and no 'fresh' flag: the port takes the cache as holding history */
        memset(c->window, 0, (size_t)(batch * m->wel) * m->eb);
        memset(c->state, 0, (size_t)(batch * m->sel) * m->eb);
        for (int64_t b = 0; b < batch; b++)
            hb_set(c->window, m->dtype, b, (double)((b % 3) + 1 < m->Lmax ? (b % 3) + 1 : 0));
        c->primed = 1;
    }
    return st;
}

static void hb_cache_free(struct mc_model *m, struct mc_cache *c)
{
    m->ref->cache_free(m->inner, c);
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

static enum mc_backend_status hb_cache_copy(struct mc_model *m, struct mc_cache *dst, const struct mc_cache *src,
                                            struct mc_msg *msg)
{
    const enum hb_kind kind = m->bug->kind;
    if (dst == NULL || src == NULL || dst == src || dst->batch != src->batch)
        return m->ref->cache_copy(m->inner, dst, src, msg);
    if (kind == GDN_COPY_ARGS_SWAPPED) /* the bug: memcpy(src, dst, ...) — the source overwritten */
        return m->ref->cache_copy(m->inner, (struct mc_cache *)(uintptr_t)src, dst, msg);
    if (kind == M2_COPY_WINDOW_ONLY && m->sel > 0) { /* the bug: the state buffer is not copied */
        const size_t sb = (size_t)(dst->batch * m->sel) * m->eb;
        void *keep = malloc(sb);
        if (keep == NULL)
            return hb_fail(msg, MC_BACKEND_NOMEM, "heldout5: out of memory");
        const int was = dst->primed;
        memcpy(keep, dst->state, sb);
        const enum mc_backend_status st = m->ref->cache_copy(m->inner, dst, src, msg);
        if (st == MC_BACKEND_OK) {
            if (was)
                memcpy(dst->state, keep, sb);
            else
                memset(dst->state, 0, sb); /* a fresh destination's state reads as zeros */
        }
        free(keep);
        return st;
    }
    return m->ref->cache_copy(m->inner, dst, src, msg);
}

static enum mc_backend_status hb_cache_export(struct mc_model *m, const struct mc_cache *c, void *conv, void *state,
                                              struct mc_msg *msg)
{
    const enum mc_backend_status st = m->ref->cache_export(m->inner, c, conv, state, msg);
    if (st == MC_BACKEND_OK && c != NULL && conv != NULL && m->bug->kind == KDA_EXPORT_WINDOW_BF16)
        hb_round_all(conv, m->dtype, c->batch * m->wel, hb_round_bf16); /* the bug: a bf16 staging buffer */
    return st;
}

static enum mc_backend_status hb_cache_import(struct mc_model *m, struct mc_cache *c, const void *conv,
                                              const void *state, struct mc_msg *msg)
{
    const enum hb_kind kind = m->bug->kind;
    if (kind == SC_IMPORT_BATCH_ERROR && c != NULL && c->batch > 1) /* the bug: a per-sequence import only */
        return hb_fail(msg, MC_BACKEND_INVALID, "heldout5 shortconv: cache_import: one sequence at a time (batch 1)");
    if (c == NULL || conv == NULL || (kind != SC_IMPORT_ROW0_ALL && kind != LA_IMPORT_ROW_SHIFT)) {
        const enum mc_backend_status st = m->ref->cache_import(m->inner, c, conv, state, msg);
        if (st == MC_BACKEND_OK && c != NULL && kind == M1_IMPORT_NOT_PRIMED)
            c->primed = 0; /* the bug: the 'has history' flag is not set: the next forward starts fresh */
        return st;
    }
    const int64_t B = c->batch;
    const size_t wr = (size_t)m->wel * m->eb, sr = (size_t)m->sel * m->eb;
    unsigned char *tw = malloc((size_t)B * wr + 1), *ts = malloc((size_t)B * sr + 1);
    if (tw == NULL || ts == NULL) {
        free(tw);
        free(ts);
        return hb_fail(msg, MC_BACKEND_NOMEM, "heldout5: out of memory");
    }
    const unsigned char *cw = conv, *cs = state;
    for (int64_t b = 0; b < B; b++) {
        /* the imported row that lands in row b */
        const int64_t o = kind == SC_IMPORT_ROW0_ALL ? 0 : (b - 1 + B) % B;
        memcpy(tw + (size_t)b * wr, cw + (size_t)o * wr, wr);
        if (cs != NULL && sr > 0)
            memcpy(ts + (size_t)b * sr, cs + (size_t)o * sr, sr);
    }
    const enum mc_backend_status st = m->ref->cache_import(m->inner, c, tw, cs != NULL ? ts : NULL, msg);
    free(tw);
    free(ts);
    return st;
}

/* ---- attention: rotating cached keys (RoPE composes: R(a) R(b) = R(a + b)) ---------------------- */

static void hb_rotate_key(struct mc_model *m, struct mc_cache *c, int64_t b, int64_t slot, double delta)
{
    void *win, *st;
    if (m->R < 2 || delta == 0.0)
        return;
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

/* Slot s of row sb of cache src (key and value of every kv head) into slot d of row db of dst. */
static void hb_kv_move(struct mc_model *m, struct mc_cache *dst, int64_t db, int64_t d, struct mc_cache *src, int64_t sb,
                       int64_t s)
{
    void *dw, *ds, *sw, *ss;
    mc_ref_cache_row(m->inner, dst, db, &dw, &ds);
    mc_ref_cache_row(m->inner, src, sb, &sw, &ss);
    for (int64_t j = 0; j < 2 * m->Hkv; j++)
        memcpy((unsigned char *)ds + (size_t)((j * m->Lmax + d) * m->hd) * m->eb,
               (const unsigned char *)ss + (size_t)((j * m->Lmax + s) * m->hd) * m->eb, (size_t)m->hd * m->eb);
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

/* AT_CONT_WINDOW8 / AT_DECODE_RING12: every token of every row stepped alone on a one-row cache holding
 * only the newest `keep` of the n cached positions (all of them when n <= keep). Those keys are rotated by
 * |sel| - n so that the query, at position |sel| there, sees each at its true distance; the new key is
 * rotated back to position n and appended to the row with its value. */
static enum mc_backend_status hb_forward_visible(struct mc_model *m, struct mc_cache *c, const struct mc_forward_args *a,
                                                 int64_t keep, struct mc_msg *msg)
{
    const int64_t B = a->batch, L = a->len;
    struct mc_cache *one = NULL;
    enum mc_backend_status st = m->ref->cache_alloc(m->inner, 1, &one, msg);
    if (st != MC_BACKEND_OK)
        return st;
    const size_t tok = (size_t)m->D * m->eb;
    for (int64_t b = 0; b < B && st == MC_BACKEND_OK; b++)
        for (int64_t t = 0; t < L && st == MC_BACKEND_OK; t++) {
            const int64_t n = hb_count(m, c, b);
            const uint8_t real = a->mask == NULL || a->mask[b * L + t] != 0;
            if (real && n >= m->Lmax) {
                st = hb_fail(msg, MC_BACKEND_INVALID, "heldout5 attention: forward: the KV cache is full");
                break;
            }
            memset(one->window, 0, (size_t)m->wel * m->eb);
            memset(one->state, 0, (size_t)m->sel * m->eb);
            one->primed = 1;
            int64_t ns = 0;
            for (int64_t s = 0; s < n; s++)
                if (n <= keep || s >= n - keep)
                    hb_kv_move(m, one, 0, ns++, c, b, s);
            for (int64_t j = 0; j < ns; j++)
                hb_rotate_key(m, one, 0, j, (double)(ns - n));
            hb_set(one->window, m->dtype, 0, (double)ns);
            const uint8_t mk = real;
            const struct mc_forward_args fa = {.batch = 1,
                                               .len = 1,
                                               .x = (const unsigned char *)a->x + (size_t)(b * L + t) * tok,
                                               .mask = a->mask != NULL ? &mk : NULL,
                                               .y = (unsigned char *)a->y + (size_t)(b * L + t) * tok};
            st = m->ref->forward(m->inner, one, &fa, msg);
            if (st == MC_BACKEND_OK && real) {
                hb_rotate_key(m, one, 0, ns, (double)(n - ns));
                hb_kv_move(m, c, b, n, one, 0, ns);
                hb_set(c->window, m->dtype, b, (double)(n + 1));
            }
        }
    m->ref->cache_free(m->inner, one);
    return st;
}

/* LA_CONT_CACHE_FIRST: the outputs of the whole forward (computed on a copy of the cache), and the cache
 * advanced by each row's first real token only. */
static enum mc_backend_status hb_forward_cache_first(struct mc_model *m, struct mc_cache *c,
                                                     const struct mc_forward_args *a, struct mc_msg *msg)
{
    const int64_t B = a->batch, L = a->len;
    struct mc_cache *tmp = NULL;
    enum mc_backend_status st = hb_clone(m, c, &tmp, msg);
    if (st != MC_BACKEND_OK)
        return st;
    void *ys = malloc((size_t)(B * L * m->D) * m->eb);
    uint8_t *ms = calloc((size_t)(B * L), 1);
    if (ys == NULL || ms == NULL)
        st = hb_fail(msg, MC_BACKEND_NOMEM, "heldout5: out of memory");
    if (st == MC_BACKEND_OK)
        st = m->ref->forward(m->inner, tmp, a, msg);
    if (st == MC_BACKEND_OK) {
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t < L; t++)
                if (a->mask == NULL || a->mask[b * L + t]) {
                    ms[b * L + t] = 1;
                    break;
                }
        const struct mc_forward_args first = {.batch = B, .len = L, .x = a->x, .mask = ms, .y = ys};
        st = m->ref->forward(m->inner, c, &first, msg);
    }
    free(ys);
    free(ms);
    m->ref->cache_free(m->inner, tmp);
    return st;
}

/* KDA_CONT_UNCHAINED: token t of every row stepped alone from the cache as it was before the call (a copy
 * restored before every token); the cache keeps the last token's step. */
static enum mc_backend_status hb_forward_unchained(struct mc_model *m, struct mc_cache *c,
                                                   const struct mc_forward_args *a, struct mc_msg *msg)
{
    const int64_t B = a->batch, L = a->len;
    struct mc_cache *orig = NULL;
    enum mc_backend_status st = hb_clone(m, c, &orig, msg);
    if (st != MC_BACKEND_OK)
        return st;
    void *xs = malloc((size_t)(B * m->D) * m->eb), *ys = malloc((size_t)(B * m->D) * m->eb);
    uint8_t *ms = a->mask != NULL ? malloc((size_t)B) : NULL;
    if (xs == NULL || ys == NULL || (a->mask != NULL && ms == NULL))
        st = hb_fail(msg, MC_BACKEND_NOMEM, "heldout5: out of memory");
    for (int64_t t = 0; t < L && st == MC_BACKEND_OK; t++) {
        if (t > 0 && (st = m->ref->cache_copy(m->inner, c, orig, msg)) != MC_BACKEND_OK)
            break;
        hb_take(m, a, t, 1, xs, ms);
        const struct mc_forward_args one = {.batch = B, .len = 1, .x = xs, .mask = ms, .y = ys};
        st = m->ref->forward(m->inner, c, &one, msg);
        if (st == MC_BACKEND_OK)
            hb_put(m, a, t, 1, ys);
    }
    free(xs);
    free(ys);
    free(ms);
    m->ref->cache_free(m->inner, orig);
    return st;
}

/* GDN_CHUNK_STATE_F32 / KDA_TAIL_STATE_ZERO / M2_CHUNK_WINDOW_EARLY: the forward run in chunks of Q tokens
 * along L: the state entering every chunk after the first is rounded to f32 (gdn), the partial tail chunk
 * starts from a zero state (kda: the whole chunks as one call, then the tail), or the conv window handed
 * from each chunk to the next is the one before the chunk's last token (mamba2: a copy of the cache run
 * on the chunk's first n - 1 tokens). */
static enum mc_backend_status hb_forward_chunks(struct mc_model *m, struct mc_cache *c, const struct mc_forward_args *a,
                                                struct mc_msg *msg)
{
    const enum hb_kind kind = m->bug->kind;
    const int64_t B = a->batch, L = a->len, D = m->D, Q = m->Q;
    struct mc_cache *cc = c;
    enum mc_backend_status st = MC_BACKEND_OK;
    if (cc == NULL && (st = m->ref->cache_alloc(m->inner, B, &cc, msg)) != MC_BACKEND_OK)
        return st;
    void *xs = malloc((size_t)(B * L * D) * m->eb), *ys = malloc((size_t)(B * L * D) * m->eb);
    uint8_t *ms = a->mask ? malloc((size_t)(B * L)) : NULL;
    if (xs == NULL || ys == NULL || (a->mask != NULL && ms == NULL)) {
        st = hb_fail(msg, MC_BACKEND_NOMEM, "heldout5: out of memory");
        goto done;
    }
    const int64_t whole = L / Q * Q;
    for (int64_t t0 = 0; t0 < L && st == MC_BACKEND_OK;) {
        int64_t n = L - t0 < Q ? L - t0 : Q;
        if (kind == KDA_TAIL_STATE_ZERO)
            n = t0 == 0 ? whole : L - whole;
        hb_take(m, a, t0, n, xs, ms);
        if (t0 > 0 && cc->primed && m->sel > 0) {
            if (kind == GDN_CHUNK_STATE_F32) /* the bug: the carried state staged in f32 */
                hb_round_all(cc->state, m->dtype, B * m->sel, hb_round_f32);
            else /* the bug: the tail kernel launched without the initial state */
                memset(cc->state, 0, (size_t)(B * m->sel) * m->eb);
        }
        struct mc_cache *early = NULL;
        if (kind == M2_CHUNK_WINDOW_EARLY && t0 + n < L && n > 1 &&
            (st = hb_clone(m, cc, &early, msg)) != MC_BACKEND_OK)
            break;
        const struct mc_forward_args sub = {.batch = B, .len = n, .x = xs, .mask = ms, .y = ys};
        st = m->ref->forward(m->inner, cc, &sub, msg);
        if (st == MC_BACKEND_OK)
            hb_put(m, a, t0, n, ys);
        if (early != NULL) { /* the bug: the window is sliced from the chunk's conv input one token early */
            const struct mc_forward_args head = {.batch = B, .len = n - 1, .x = xs, .mask = ms, .y = ys};
            if (st == MC_BACKEND_OK && ms != NULL) /* the first n - 1 tokens of each row: its mask, restrided */
                for (int64_t b = 1; b < B; b++)
                    memmove(ms + b * (n - 1), ms + b * n, (size_t)(n - 1));
            if (st == MC_BACKEND_OK && B > 1) /* and its tokens, restrided to n - 1 per row */
                for (int64_t b = 1; b < B; b++)
                    memmove((unsigned char *)xs + (size_t)(b * (n - 1) * D) * m->eb,
                            (unsigned char *)xs + (size_t)(b * n * D) * m->eb, (size_t)((n - 1) * D) * m->eb);
            if (st == MC_BACKEND_OK)
                st = m->ref->forward(m->inner, early, &head, msg);
            if (st == MC_BACKEND_OK)
                memcpy(cc->window, early->window, (size_t)(B * m->wel) * m->eb);
            m->ref->cache_free(m->inner, early);
        }
        t0 += n;
    }
done:
    free(xs);
    free(ys);
    free(ms);
    if (cc != c)
        m->ref->cache_free(m->inner, cc);
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
    const int cont = primed && a->len > 1;
    const int use_alt = step && m->alt != NULL;
    struct mc_forward_args args = *a;
    const int64_t B = a->batch, L = a->len;
    uint8_t nan_rows[64] = {0};
    int any_nan = 0;
    uint8_t *mask = NULL; /* a modified mask */

    switch (kind) {
    case M2_CONT_DT_FIRST:
    case M2_CONT_DT_FIRST_ZERO:
    case M1_CONT_DT_FIRST:
        if (cont) { /* the bug: the single-step branch's dt (and, for one, its fresh state) for every token */
            if (kind == M2_CONT_DT_FIRST_ZERO)
                memset(c->state, 0, (size_t)(B * m->sel) * m->eb);
            hb5_dt_first = 1;
            const enum mc_backend_status st = m->ref->forward(m->inner, c, a, msg);
            hb5_dt_first = 0;
            return st;
        }
        break;
    case GDN_CONT_STATE_ZERO: /* the bug: the chunked kernel called with initial_state=None */
        if (cont)
            memset(c->state, 0, (size_t)(B * m->sel) * m->eb);
        break;
    case SC_CONT_WINDOW_ZERO: /* the bug: the conv of a continued forward padded with zeros, not the cache */
        if (cont)
            memset(c->window, 0, (size_t)(B * m->wel) * m->eb);
        break;
    case LA_CONT_CACHE_FIRST:
        if (cont)
            return hb_forward_cache_first(m, c, a, msg);
        break;
    case KDA_CONT_UNCHAINED:
        if (cont)
            return hb_forward_unchained(m, c, a, msg);
        break;
    case AT_CONT_WINDOW8: /* the bug: the chunked-prefill kernel reads a KV window of 8 slots */
        if (cont && !m->mla)
            return hb_forward_visible(m, c, a, 7, msg);
        break;
    case AT_DECODE_RING12: /* the bug: the decode kernel keeps the newest 11 positions and the new one */
        if (step && !m->mla)
            return hb_forward_visible(m, c, a, 11, msg);
        break;
    case AT_LEFTPAD_ABORT: /* the bug: the varlen prefill kernel asserts that every row starts with a token */
        if (!primed && a->mask != NULL)
            for (int64_t b = 0; b < B; b++)
                if (a->mask[b * L] == 0) {
                    fprintf(stderr, "heldout5 attention: prefill: assertion 'seq_start_loc[b] valid' failed\n");
                    abort();
                }
        break;
    case LA_DECODE_BATCH_ABORT: /* the bug: the decode kernel asserts one sequence */
        if (step && B > 1) {
            fprintf(stderr, "heldout5 lightning: decode: assertion 'batch == 1' failed\n");
            abort();
        }
        break;
    case GDN_CHUNK_STATE_F32:
        if (L > m->Q && m->dtype == MC_DTYPE_F64)
            return hb_forward_chunks(m, c, a, msg);
        break;
    case KDA_TAIL_STATE_ZERO:
        if (L > m->Q && L % m->Q != 0)
            return hb_forward_chunks(m, c, a, msg);
        break;
    case M2_CHUNK_WINDOW_EARLY:
        if (L > m->Q)
            return hb_forward_chunks(m, c, a, msg);
        break;
    case GDN_MASK_ONE_LATE: /* the bug: position t is real when mask[t] or mask[t-1] is */
    case M2_LEFTPAD_FIRST_DROPPED: /* the bug: position t is real when mask[t] and mask[t-1] are */
        if (a->mask != NULL) {
            if ((mask = malloc((size_t)(B * L))) == NULL)
                return hb_fail(msg, MC_BACKEND_NOMEM, "heldout5: out of memory");
            for (int64_t b = 0; b < B; b++)
                for (int64_t t = 0; t < L; t++)
                    mask[b * L + t] = kind == GDN_MASK_ONE_LATE
                                          ? a->mask[b * L + t] != 0 || (t > 0 && a->mask[b * L + t - 1] != 0)
                                          : a->mask[b * L + t] != 0 && (t == 0 || a->mask[b * L + t - 1] != 0);
            args.mask = mask;
        }
        break;
    case LA_CONT_DECAY_EXTRA: /* the bug: the cached state decayed by lambda^(n+1) for the slice's n-th token */
        if (cont)
            for (int64_t b = 0; b < B; b++)
                for (int64_t h = 0; h < m->H; h++)
                    for (int64_t i = 0; i < m->hd * m->hd; i++) {
                        const int64_t k = b * m->sel + h * m->hd * m->hd + i;
                        hb_set(c->state, m->dtype, k, m->decay[h] * hb_get(c->state, m->dtype, k));
                    }
        break;
    case M1_DECODE_STATE_F32: /* the bug: the step kernel reads the state from a float buffer */
    case AT_DECODE_KV_F32:     /* the bug: the step kernel reads the KV cache from a float buffer */
        if (step && m->dtype == MC_DTYPE_F64)
            hb_round_all(c->state, m->dtype, B * m->sel, hb_round_f32);
        break;
    case SC_DECODE_WINDOW_F32: /* the bug: the step kernel reads the window from a float buffer */
        if (step && m->dtype == MC_DTYPE_F64)
            hb_round_all(c->window, m->dtype, B * m->wel, hb_round_f32);
        break;
    case M2_CONT_WINDOW_BF16: /* the bug: the chunked kernel's initial conv states loaded through bf16 */
        if (cont)
            hb_round_all(c->window, m->dtype, B * m->wel, hb_round_bf16);
        break;
    case KDA_DECODE_NO_MASK: /* the bug: the decode kernel takes no mask */
        if (step)
            args.mask = NULL;
        break;
    case KDA_SHORT_PREFILL_NAN: /* the bug: the conv of a short fresh prefill reads an unwritten pad (NaN) */
        if (!primed)
            for (int64_t b = 0; b < B && b < 64; b++) {
                int64_t n = 0;
                for (int64_t t = 0; t < L; t++)
                    n += a->mask == NULL || a->mask[b * L + t] != 0;
                nan_rows[b] = n > 0 && n < m->K;
                any_nan |= nan_rows[b];
            }
        break;
    case GDN_DECODE_BATCH_NAN: /* the bug: the decode grid launched for B - 1 rows */
        if (step && B > 1 && B <= 64) {
            nan_rows[B - 1] = 1;
            any_nan = 1;
        }
        break;
    default:
        break;
    }

    const enum mc_backend_status st =
        use_alt ? m->alt_ref->forward(m->alt, c, &args, msg) : m->ref->forward(m->inner, c, &args, msg);
    free(mask);
    if (st != MC_BACKEND_OK)
        return st;
    if (kind == LA_STATE_F16 && c != NULL) /* the bug: the state kept in a half buffer */
        hb_round_all(c->state, m->dtype, B * m->sel, hb_round_f16);
    if (any_nan)
        for (int64_t b = 0; b < B && b < 64; b++)
            if (nan_rows[b])
                for (int64_t i = 0; i < L * m->D; i++)
                    hb_set(a->y, m->dtype, b * L * m->D + i, NAN);
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
    if (kind == M1_PACKED_MANY_ERROR && n > 4) /* the bug: a fixed table of 4 sequence descriptors */
        return hb_fail(msg, MC_BACKEND_INTERNAL, "heldout5 mamba1: forward_packed: at most 4 sequences per call");
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
        if (len <= 0)
            continue;
        int cont = a->has_initial_state[i];
        if (kind == AT_PACKED_FRESH_STALE) /* the bug: the flag never read: every slot taken as holding history */
            cont = 1;
        if (kind == KDA_PACKED_CONT_FRESH) /* the bug: the flag never read: every sequence starts fresh */
            cont = 0;
        void *win, *state;
        mc_ref_cache_row(m->inner, pool, a->slots[i], &win, &state);
        if (cont) {
            memcpy(one->window, win, wb);
            if (m->sel > 0)
                memcpy(one->state, state, sb);
        }
        one->primed = cont;
        /* M1_PACKED_STORE_SLOT_I, the bug: the final cache stored to row i, not slots[i] */
        mc_ref_cache_row(m->inner, pool, kind == M1_PACKED_STORE_SLOT_I ? i : a->slots[i], &win, &state);
        const unsigned char *x = (const unsigned char *)a->x + (size_t)t0 * tok;
        unsigned char *y = (unsigned char *)a->y + (size_t)t0 * tok;
        const struct mc_forward_args fa = {.batch = 1, .len = len, .x = x, .mask = NULL, .y = y};
        st = hb_forward(m, one, &fa, msg);
        if (st == MC_BACKEND_OK) {
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
HB_CREATE(53)
HB_CREATE(54)
HB_CREATE(55)
HB_CREATE(56)
HB_CREATE(57)
HB_CREATE(58)
#undef HB_CREATE

typedef enum mc_backend_status (*hb_create_fn)(const struct mc_model_desc *, struct mc_model **, struct mc_msg *);

static const hb_create_fn hb_creates[] = {
    hb_create_0, hb_create_1, hb_create_2, hb_create_3, hb_create_4, hb_create_5, hb_create_6, hb_create_7,
    hb_create_8, hb_create_9, hb_create_10, hb_create_11, hb_create_12, hb_create_13, hb_create_14, hb_create_15,
    hb_create_16, hb_create_17, hb_create_18, hb_create_19, hb_create_20, hb_create_21, hb_create_22, hb_create_23,
    hb_create_24, hb_create_25, hb_create_26, hb_create_27, hb_create_28, hb_create_29, hb_create_30, hb_create_31,
    hb_create_32, hb_create_33, hb_create_34, hb_create_35, hb_create_36, hb_create_37, hb_create_38, hb_create_39,
    hb_create_40, hb_create_41, hb_create_42, hb_create_43, hb_create_44, hb_create_45, hb_create_46, hb_create_47,
    hb_create_48, hb_create_49, hb_create_50, hb_create_51, hb_create_52, hb_create_53, hb_create_54, hb_create_55,
    hb_create_56, hb_create_57, hb_create_58,
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
