/*
 * heldout2_plugin.c — a second held-out set of broken mixer ports, the ground truth of each in
 * manifest.json next to this file (family, style, what is wrong, the closest bug class). Each backend
 * `heldout2.<name>` is the reference mixer of one family (mc_reference_<family>_ops(), compiled into
 * this library) behind its own model handle, with ONE planted bug, written the way a port author could
 * get it wrong. The bugs are emulated exactly with the reference's own calls:
 *
 *   - a constant or a layout read wrongly: the model is created from an edited configuration or from
 *     edited / permuted weights (the exact equivalent of the port reading them that way);
 *   - one path that computes another function: a second reference model, made from edited weights or
 *     configuration, serves either the primed L == 1 forwards (the port's decode kernel) or the other
 *     forwards (its prefill kernel) on the same cache;
 *   - a forward split where the port's kernel splits it (chunks of the model's chunk length with the
 *     state dropped between them), or its cache edited before or after the reference's call (a window
 *     read one column off, a window not rolled, a window not written back);
 *   - a cache exported, imported or copied wrongly, a precision lost between calls, a packed call that
 *     mishandles a sequence (hooks around the reference calls on the reference cache, whose layout
 *     ref_common.h gives);
 *   - an error in one kind of call.
 *
 * heldout2.control-<family> is the same wrapper with no bug: it must pass every bundled case.
 *
 * The wrapper scaffolding (descriptor copies, rounding helpers, the packed call written on the port's
 * own forward) follows tests/heldout/heldout_plugin.c; the bugs are this set's own. The backends declare
 * f32 and f64 and no optional capability except the packed call (no stage probes). Written without the
 * diagnosis: test_heldout_caught.py checks only that every bug is caught and every control passes.
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
    M2_MASKED_CONT_ERROR,   /* a masked multi-token forward on a primed cache returns an error */
    M2_D_HEAD0,             /* D read as one scalar: D[0] for every head */
    M2_DECODE_DTBIAS_TWICE, /* the single-step kernel adds dt_bias on top of an already biased dt */
    M2_PREFILL_NO_DTLIMIT,  /* multi-token forwards skip the time_step_limit clamp; decode clamps */
    M2_CONV_SHIFT_CONT,     /* a continued multi-token forward reads the cached window from column 1 */
    M2_CHUNK_STATE_DROP,    /* inside one forward the state is not passed from chunk to chunk */
    M2_EXPORT_STALE,        /* cache_export returns the cache as it was before the last forward */
    M2_IMPORT_ROW0,         /* cache_import writes batch row 0 only */
    M2_PACKED_STATE_EARLY,  /* the packed call stores each sequence's state before its last token */
    M2_CHUNK_STATE_F16,     /* inside one forward the state passed from chunk to chunk is f16 */
    /* mamba1 */
    M1_NO_PROJ_BIAS,        /* the projection-bias flag read from the wrong key: no in_proj / out_proj bias */
    M1_DECODE_NO_CONVBIAS,  /* the single-step path forgets conv1d.bias */
    M1_PAD_ZEROED,          /* padding zeroed and run as real tokens instead of skipped */
    M1_EXPORT_STATE_T,      /* cache_export writes each row's state [I][N] as [N][I] */
    M1_IMPORT_WIN_REV,      /* cache_import reads conv_state newest column first */
    M1_DECODE_NO_ROLL,      /* a decode step overwrites the newest window column instead of rolling */
    M1_DECODE_Y_BF16,       /* the single-step output goes through a bf16 buffer */
    M1_LONG_ERROR,          /* a 256-token scratch buffer: longer forwards return an error */
    /* gdn */
    GDN_QKVZ_CONTIGUOUS,    /* Qwen3-Next's per-key-head interleaved in_proj_qkvz read as contiguous */
    GDN_DECODE_NO_NORMW,    /* the single-step path applies the gated norm without its weight */
    GDN_CONT_WINDOW_ZERO,   /* a continued multi-token forward starts its conv from a zero window */
    GDN_EXPORT_STATE_T,     /* cache_export writes each head's state [dk][dv] as [dv][dk] */
    GDN_PACKED_CONV_LEAK,   /* a fresh sequence of a packed call convolves over the previous one's tail */
    GDN_POOL_STATE_F16,     /* the packed call's state pool holds f16 */
    GDN_PACKED_CONT_ERROR,  /* the packed call refuses a continued sequence of more than one token */
    GDN_SHORT_PREFILL_LEFT, /* a fresh prefill shorter than K stores its inputs one column too far left */
    GDN_COPY_STATE_ONLY,    /* cache_copy copies the recurrent state but not the conv window */
    /* shortconv */
    SC_BC_SWAPPED,          /* in_proj output split as C | B | x instead of B | C | x */
    SC_DECODE_WINDOW_STALE, /* a decode step does not write the rolled window back */
    SC_PREFILL_NO_CONVBIAS, /* multi-token forwards forget conv.bias; decode adds it */
    SC_COPY_SHORT,          /* cache_copy copies B*C*(K-1) window elements */
    SC_RIGHTPAD_WINDOW,     /* the cached window is the last K positions of the row, pads included */
    SC_PACKED_Y_F16,        /* the packed call's output goes through an f16 buffer */
    SC_PACKED_FLAG_NEXT,    /* the packed call reads sequence i's has_initial_state at index i + 1 */
    SC_CONT_ERROR,          /* a multi-token forward on a primed cache returns an error */
    /* attention */
    AT_SCALE_INV_HD,        /* scores scaled by 1/head_dim instead of the configured scale */
    AT_EXPORT_VK,           /* cache_export writes the values before the keys */
    AT_DECODE_GQA_MOD,      /* the single-step kernel maps query head h to kv head h % Hkv */
    AT_IMPORT_BLOCK_ERROR,  /* cache_import refuses a position count that is not a multiple of 4 */
    AT_CONT_POS_MINUS1,     /* a continued multi-token forward numbers its tokens from n - 1 */
};

struct hb_bug {
    const char *name;
    enum mc_family family;
    enum hb_kind kind;
};

static const struct hb_bug hb_bugs[] = {
    {"heldout2.control-mamba2", MC_FAMILY_MAMBA2, HB_CONTROL},
    {"heldout2.control-mamba1", MC_FAMILY_MAMBA1, HB_CONTROL},
    {"heldout2.control-gdn", MC_FAMILY_GDN, HB_CONTROL},
    {"heldout2.control-shortconv", MC_FAMILY_SHORTCONV, HB_CONTROL},
    {"heldout2.control-attention", MC_FAMILY_ATTENTION, HB_CONTROL},

    {"heldout2.m2-masked-continued-error", MC_FAMILY_MAMBA2, M2_MASKED_CONT_ERROR},
    {"heldout2.m2-d-head0", MC_FAMILY_MAMBA2, M2_D_HEAD0},
    {"heldout2.m2-decode-dtbias-twice", MC_FAMILY_MAMBA2, M2_DECODE_DTBIAS_TWICE},
    {"heldout2.m2-prefill-no-dtlimit", MC_FAMILY_MAMBA2, M2_PREFILL_NO_DTLIMIT},
    {"heldout2.m2-conv-shift-continued", MC_FAMILY_MAMBA2, M2_CONV_SHIFT_CONT},
    {"heldout2.m2-chunk-state-drop", MC_FAMILY_MAMBA2, M2_CHUNK_STATE_DROP},
    {"heldout2.m2-export-stale", MC_FAMILY_MAMBA2, M2_EXPORT_STALE},
    {"heldout2.m2-import-row0", MC_FAMILY_MAMBA2, M2_IMPORT_ROW0},
    {"heldout2.m2-packed-state-early", MC_FAMILY_MAMBA2, M2_PACKED_STATE_EARLY},
    {"heldout2.m2-chunk-states-f16", MC_FAMILY_MAMBA2, M2_CHUNK_STATE_F16},

    {"heldout2.m1-no-proj-bias", MC_FAMILY_MAMBA1, M1_NO_PROJ_BIAS},
    {"heldout2.m1-decode-no-convbias", MC_FAMILY_MAMBA1, M1_DECODE_NO_CONVBIAS},
    {"heldout2.m1-pad-zeroed", MC_FAMILY_MAMBA1, M1_PAD_ZEROED},
    {"heldout2.m1-export-state-transposed", MC_FAMILY_MAMBA1, M1_EXPORT_STATE_T},
    {"heldout2.m1-import-window-reversed", MC_FAMILY_MAMBA1, M1_IMPORT_WIN_REV},
    {"heldout2.m1-decode-no-roll", MC_FAMILY_MAMBA1, M1_DECODE_NO_ROLL},
    {"heldout2.m1-decode-y-bf16", MC_FAMILY_MAMBA1, M1_DECODE_Y_BF16},
    {"heldout2.m1-long-error", MC_FAMILY_MAMBA1, M1_LONG_ERROR},

    {"heldout2.gdn-qkvz-contiguous", MC_FAMILY_GDN, GDN_QKVZ_CONTIGUOUS},
    {"heldout2.gdn-decode-no-normw", MC_FAMILY_GDN, GDN_DECODE_NO_NORMW},
    {"heldout2.gdn-continued-window-zero", MC_FAMILY_GDN, GDN_CONT_WINDOW_ZERO},
    {"heldout2.gdn-export-state-transposed", MC_FAMILY_GDN, GDN_EXPORT_STATE_T},
    {"heldout2.gdn-packed-conv-leak", MC_FAMILY_GDN, GDN_PACKED_CONV_LEAK},
    {"heldout2.gdn-pool-state-f16", MC_FAMILY_GDN, GDN_POOL_STATE_F16},
    {"heldout2.gdn-packed-continued-error", MC_FAMILY_GDN, GDN_PACKED_CONT_ERROR},
    {"heldout2.gdn-short-prefill-left", MC_FAMILY_GDN, GDN_SHORT_PREFILL_LEFT},
    {"heldout2.gdn-copy-state-only", MC_FAMILY_GDN, GDN_COPY_STATE_ONLY},

    {"heldout2.sc-bc-swapped", MC_FAMILY_SHORTCONV, SC_BC_SWAPPED},
    {"heldout2.sc-decode-window-stale", MC_FAMILY_SHORTCONV, SC_DECODE_WINDOW_STALE},
    {"heldout2.sc-prefill-no-convbias", MC_FAMILY_SHORTCONV, SC_PREFILL_NO_CONVBIAS},
    {"heldout2.sc-copy-short", MC_FAMILY_SHORTCONV, SC_COPY_SHORT},
    {"heldout2.sc-rightpad-window", MC_FAMILY_SHORTCONV, SC_RIGHTPAD_WINDOW},
    {"heldout2.sc-packed-y-f16", MC_FAMILY_SHORTCONV, SC_PACKED_Y_F16},
    {"heldout2.sc-packed-flag-next", MC_FAMILY_SHORTCONV, SC_PACKED_FLAG_NEXT},
    {"heldout2.sc-continued-error", MC_FAMILY_SHORTCONV, SC_CONT_ERROR},

    {"heldout2.attn-scale-inv-hd", MC_FAMILY_ATTENTION, AT_SCALE_INV_HD},
    {"heldout2.attn-export-vk", MC_FAMILY_ATTENTION, AT_EXPORT_VK},
    {"heldout2.attn-decode-gqa-modulo", MC_FAMILY_ATTENTION, AT_DECODE_GQA_MOD},
    {"heldout2.attn-import-block-error", MC_FAMILY_ATTENTION, AT_IMPORT_BLOCK_ERROR},
    {"heldout2.attn-continued-pos-minus1", MC_FAMILY_ATTENTION, AT_CONT_POS_MINUS1},
};

#define HB_N (sizeof hb_bugs / sizeof hb_bugs[0])

/* ---- the wrapper model ---------------------------------------------------------------------------- */

/* A cache's contents as they were before its last forward (M2_EXPORT_STALE). */
struct hb_snap {
    const struct mc_cache *cache;
    void *window, *state;
};

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
    int64_t Hv, dk, dv;     /* gdn */
    int64_t Hkv, Lmax, hd;  /* attention */
    int64_t R;              /* rotary dims (0 without RoPE) */
    double *inv_freq;       /* [R/2] */
    void *out_bias;         /* [D] copy of the output projection's bias, or NULL */
    struct hb_snap *snaps;
    int n_snaps, cap_snaps;
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
    default:
        return NULL;
    }
}

static enum mc_backend_status hb_fail(struct mc_msg *msg, enum mc_backend_status st, const char *text)
{
    if (msg != NULL)
        snprintf(msg->text, sizeof msg->text, "%s", text);
    return st;
}

/* ---- element access and rounding ------------------------------------------------------------------ */

static double hb_get(const void *p, enum mc_dtype dt, int64_t i)
{
    return dt == MC_DTYPE_F64 ? ((const double *)p)[i] : (double)((const float *)p)[i];
}

static void hb_set(void *p, enum mc_dtype dt, int64_t i, double v)
{
    if (dt == MC_DTYPE_F64)
        ((double *)p)[i] = v;
    else
        ((float *)p)[i] = (float)v;
}

/* v rounded to bfloat16 (round to nearest even), as a double. */
static double hb_round_bf16(double v)
{
    float f = (float)v;
    if (!isfinite(f))
        return f;
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    bits += 0x7FFFu + ((bits >> 16) & 1u);
    bits &= 0xFFFF0000u;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* v rounded to IEEE binary16 (round to nearest even, subnormals, overflow to infinity). */
static double hb_round_f16(double v)
{
    if (v == 0.0 || !isfinite(v))
        return v;
    int e;
    (void)frexp(v, &e); /* |v| in [2^(e-1), 2^e) */
    const int q = e - 1 < -14 ? -24 : e - 11; /* the quantum's exponent */
    const double r = ldexp(nearbyint(ldexp(v, -q)), q);
    return fabs(r) > 65504.0 ? copysign(INFINITY, v) : r;
}

static void hb_round_all(void *p, enum mc_dtype dt, int64_t n, double (*rnd)(double))
{
    for (int64_t i = 0; i < n; i++)
        hb_set(p, dt, i, rnd(hb_get(p, dt, i)));
}

/* ---- model creation: an edited copy of the descriptor ------------------------------------------ */

union hb_config {
    struct mc_mamba2_config m2;
    struct mc_mamba1_config m1;
    struct mc_gdn_config gdn;
    struct mc_shortconv_config sc;
    struct mc_attention_config at;
};

#define HB_MAX_EDITS 8

/* A descriptor whose configuration and weight table are copies; edited weights get their own data. */
struct hb_desc {
    struct mc_model_desc d;
    union hb_config cfg;
    struct mc_weight *w;
    void *owned[HB_MAX_EDITS];
    int n_owned;
};

static void hb_desc_free(struct hb_desc *h)
{
    for (int i = 0; i < h->n_owned; i++)
        free(h->owned[i]);
    free(h->w);
    h->w = NULL;
    h->n_owned = 0;
}

static size_t hb_config_size(enum mc_family f)
{
    switch (f) {
    case MC_FAMILY_MAMBA2:
        return sizeof(struct mc_mamba2_config);
    case MC_FAMILY_MAMBA1:
        return sizeof(struct mc_mamba1_config);
    case MC_FAMILY_GDN:
        return sizeof(struct mc_gdn_config);
    case MC_FAMILY_SHORTCONV:
        return sizeof(struct mc_shortconv_config);
    default:
        return sizeof(struct mc_attention_config);
    }
}

static int hb_desc_init(struct hb_desc *h, const struct mc_model_desc *src)
{
    memset(h, 0, sizeof *h);
    h->d = *src;
    memcpy(&h->cfg, src->config, hb_config_size(src->family));
    h->d.config = &h->cfg;
    if (src->n_weights > 0) {
        h->w = malloc((size_t)src->n_weights * sizeof *h->w);
        if (h->w == NULL)
            return -1;
        memcpy(h->w, src->weights, (size_t)src->n_weights * sizeof *h->w);
    }
    h->d.weights = h->w;
    return 0;
}

static int64_t hb_elems(const struct mc_weight *w)
{
    int64_t n = 1;
    for (int i = 0; i < w->ndim; i++)
        n *= w->dims[i];
    return n;
}

/* The weight `name`, its data replaced by an owned, writable copy; NULL when absent. */
static struct mc_weight *hb_edit(struct hb_desc *h, const char *name, size_t eb)
{
    for (int i = 0; i < h->d.n_weights; i++) {
        struct mc_weight *w = &h->w[i];
        if (strcmp(w->name, name) != 0)
            continue;
        if (h->n_owned == HB_MAX_EDITS)
            return NULL;
        const size_t bytes = (size_t)hb_elems(w) * eb;
        void *copy = malloc(bytes > 0 ? bytes : 1);
        if (copy == NULL)
            return NULL;
        memcpy(copy, w->data, bytes);
        h->owned[h->n_owned++] = copy;
        w->data = copy;
        return w;
    }
    return NULL;
}

static const struct mc_weight *hb_find(const struct mc_model_desc *d, const char *name)
{
    for (int i = 0; i < d->n_weights; i++)
        if (d->weights[i].name != NULL && strcmp(d->weights[i].name, name) == 0)
            return &d->weights[i];
    return NULL;
}

/* every element of weight `name` becomes a*v + b */
static void hb_affine(struct hb_desc *h, const char *name, enum mc_dtype dt, double a, double b)
{
    struct mc_weight *w = hb_edit(h, name, dt == MC_DTYPE_F64 ? 8 : 4);
    if (w == NULL)
        return;
    for (int64_t i = 0; i < hb_elems(w); i++)
        hb_set((void *)w->data, dt, i, a * hb_get(w->data, dt, i) + b);
}

/* Blocks of `rows` leading-dimension rows of weight w reordered: new block j = old block perm[j]. */
static void hb_permute_blocks(struct mc_weight *w, size_t eb, int64_t nblocks, const int64_t *perm)
{
    const size_t blk = (size_t)(hb_elems(w) / nblocks) * eb;
    unsigned char *p = (void *)w->data, *tmp = malloc((size_t)nblocks * blk);
    if (tmp == NULL)
        return;
    memcpy(tmp, p, (size_t)nblocks * blk);
    for (int64_t j = 0; j < nblocks; j++)
        memcpy(p + (size_t)j * blk, tmp + (size_t)perm[j] * blk, blk);
    free(tmp);
}

/* The edits shared by both paths of the port: its reading of the configuration and the weights. */
static void hb_edit_common(const struct hb_bug *bug, struct hb_desc *h)
{
    const size_t eb = h->d.dtype == MC_DTYPE_F64 ? 8 : 4;
    switch (bug->kind) {
    case SC_BC_SWAPPED: { /* in_proj [3D][D] (+ bias [3D]): blocks B | C | x read as C | B | x */
        const int64_t perm[3] = {1, 0, 2};
        struct mc_weight *w = hb_edit(h, "in_proj.weight", eb);
        if (w != NULL)
            hb_permute_blocks(w, eb, 3, perm);
        if (hb_find(&h->d, "in_proj.bias") != NULL && (w = hb_edit(h, "in_proj.bias", eb)) != NULL)
            hb_permute_blocks(w, eb, 3, perm);
        break;
    }
    case AT_SCALE_INV_HD:
        h->cfg.at.softmax_scale = 1.0 / (double)h->cfg.at.head_dim;
        break;
    case M2_D_HEAD0: { /* D [H] */
        struct mc_weight *w = hb_edit(h, "D", eb);
        if (w != NULL)
            for (int64_t i = 1; i < hb_elems(w); i++)
                hb_set((void *)w->data, h->d.dtype, i, hb_get(w->data, h->d.dtype, 0));
        break;
    }
    case GDN_QKVZ_CONTIGUOUS: { /* in_proj_qkvz [Hk][2dk + 2r*dv][D] as [q (Hk*dk) | k | v (Hv*dv) | z] */
        if (h->cfg.gdn.layout != MC_GDN_LAYOUT_QWEN3_NEXT)
            break;
        struct mc_weight *w = hb_edit(h, "in_proj_qkvz.weight", eb);
        if (w == NULL)
            break;
        const int64_t Hk = h->cfg.gdn.num_key_heads, dk = h->cfg.gdn.key_head_dim;
        const int64_t rdv = h->cfg.gdn.num_value_heads / Hk * h->cfg.gdn.value_head_dim;
        const int64_t kd = Hk * dk, vd = Hk * rdv, blk = 2 * dk + 2 * rdv;
        const size_t row = (size_t)w->dims[1] * eb;
        unsigned char *p = (void *)w->data, *orig = malloc((size_t)w->dims[0] * row);
        if (orig == NULL)
            break;
        memcpy(orig, p, (size_t)w->dims[0] * row);
        /* the reference's de-interleaving of the edited table gives the original rows in their order */
        for (int64_t j = 0; j < Hk; j++) {
            memcpy(p + (size_t)(j * blk) * row, orig + (size_t)(j * dk) * row, (size_t)dk * row);
            memcpy(p + (size_t)(j * blk + dk) * row, orig + (size_t)(kd + j * dk) * row, (size_t)dk * row);
            memcpy(p + (size_t)(j * blk + 2 * dk) * row, orig + (size_t)(2 * kd + j * rdv) * row, (size_t)rdv * row);
            memcpy(p + (size_t)(j * blk + 2 * dk + rdv) * row, orig + (size_t)(2 * kd + vd + j * rdv) * row,
                   (size_t)rdv * row);
        }
        free(orig);
        break;
    }
    case M1_NO_PROJ_BIAS:
        hb_affine(h, "in_proj.bias", h->d.dtype, 0.0, 0.0);
        hb_affine(h, "out_proj.bias", h->d.dtype, 0.0, 0.0);
        break;
    default:
        break;
    }
}

/* The edits of the multi-token (prefill) path only; returns 1 when it has any. */
static int hb_edit_prefill(const struct hb_bug *bug, struct hb_desc *h)
{
    switch (bug->kind) {
    case M2_PREFILL_NO_DTLIMIT:
        h->cfg.m2.time_step_limit[0] = 0.0;
        h->cfg.m2.time_step_limit[1] = INFINITY;
        return 1;
    case SC_PREFILL_NO_CONVBIAS:
        hb_affine(h, "conv.bias", h->d.dtype, 0.0, 0.0);
        return 1;
    default:
        return 0;
    }
}

/* The edits of the single-step path only; returns 1 when it has any. */
static int hb_edit_step(const struct hb_bug *bug, struct hb_desc *h)
{
    const enum mc_dtype dt = h->d.dtype;
    const size_t eb = dt == MC_DTYPE_F64 ? 8 : 4;
    switch (bug->kind) {
    case M2_DECODE_DTBIAS_TWICE:
        hb_affine(h, "dt_bias", dt, 2.0, 0.0);
        return 1;
    case M1_DECODE_NO_CONVBIAS:
        hb_affine(h, "conv1d.bias", dt, 0.0, 0.0);
        return 1;
    case GDN_DECODE_NO_NORMW:
        hb_affine(h, "norm.weight", dt, 0.0, 1.0);
        return 1;
    case AT_DECODE_GQA_MOD: {
        /* head j of the reference reads kv head j / r; giving it the weights of the port's head
         * s(j) = (j % r) * Hkv + j / r makes the port's head h read kv head h % Hkv */
        const int64_t Hq = h->cfg.at.num_attention_heads, Hkv = h->cfg.at.num_key_value_heads, r = Hq / Hkv;
        if (Hkv < 2 || r < 2)
            return 0;
        int64_t *perm = malloc((size_t)Hq * sizeof *perm);
        if (perm == NULL)
            return 0;
        for (int64_t j = 0; j < Hq; j++)
            perm[j] = (j % r) * Hkv + j / r;
        struct mc_weight *w = hb_edit(h, "q_proj.weight", eb);
        if (w != NULL)
            hb_permute_blocks(w, eb, Hq, perm);
        if (hb_find(&h->d, "q_proj.bias") != NULL && (w = hb_edit(h, "q_proj.bias", eb)) != NULL)
            hb_permute_blocks(w, eb, Hq, perm);
        /* o_proj [D][Hq*hd]: the column blocks, row by row */
        if ((w = hb_edit(h, "o_proj.weight", eb)) != NULL) {
            const int64_t rows = w->dims[0], hd = w->dims[1] / Hq;
            unsigned char *p = (void *)w->data, *tmp = malloc((size_t)w->dims[1] * eb);
            if (tmp != NULL) {
                for (int64_t i = 0; i < rows; i++) {
                    unsigned char *row = p + (size_t)(i * w->dims[1]) * eb;
                    memcpy(tmp, row, (size_t)w->dims[1] * eb);
                    for (int64_t j = 0; j < Hq; j++)
                        memcpy(row + (size_t)(j * hd) * eb, tmp + (size_t)(perm[j] * hd) * eb, (size_t)hd * eb);
                }
                free(tmp);
            }
        }
        free(perm);
        return 1;
    }
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
    for (int i = 0; i < m->n_snaps; i++) {
        free(m->snaps[i].window);
        free(m->snaps[i].state);
    }
    free(m->snaps);
    free(m->inv_freq);
    free(m->out_bias);
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
        return hb_fail(msg, MC_BACKEND_NOMEM, "heldout2: out of memory");
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
        return hb_fail(msg, MC_BACKEND_INVALID, "heldout2: model_create needs a descriptor and an output handle");
    *out = NULL;
    if (desc->family != bug->family || desc->config == NULL)
        return hb_fail(msg, MC_BACKEND_INVALID, "heldout2: descriptor of another family or without configuration");
    if (desc->dtype != MC_DTYPE_F32 && desc->dtype != MC_DTYPE_F64)
        return hb_fail(msg, MC_BACKEND_UNSUPPORTED, "heldout2: f32 and f64 only");
    if (bug->kind == AT_CONT_POS_MINUS1 && ((const struct mc_attention_config *)desc->config)->kv_lora_rank > 0)
        /* its emulation edits the cache's plain key / value layout: a port of plain attention, written before
         * the attention family had MLA, says it has none (run on an MLA case it corrupted the heap) */
        return hb_fail(msg, MC_BACKEND_UNSUPPORTED,
                       "heldout2 attention: multi-head latent attention (kv_lora_rank > 0) is not implemented");
    struct mc_model *m = calloc(1, sizeof *m);
    if (m == NULL)
        return hb_fail(msg, MC_BACKEND_NOMEM, "heldout2: out of memory");
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
    const char *out_bias = NULL;
    switch (bug->family) {
    case MC_FAMILY_MAMBA2: {
        const struct mc_mamba2_config *c = desc->config;
        m->K = c->conv_kernel;
        m->Q = desc->chunk_size > 0 ? desc->chunk_size : c->chunk_size;
        out_bias = "out_proj.bias";
        break;
    }
    case MC_FAMILY_MAMBA1: {
        const struct mc_mamba1_config *c = desc->config;
        m->K = c->conv_kernel;
        out_bias = "out_proj.bias";
        break;
    }
    case MC_FAMILY_GDN: {
        const struct mc_gdn_config *c = desc->config;
        m->K = c->conv_kernel;
        m->Hv = c->num_value_heads;
        m->dk = c->key_head_dim;
        m->dv = c->value_head_dim;
        break;
    }
    case MC_FAMILY_SHORTCONV: {
        const struct mc_shortconv_config *c = desc->config;
        m->K = c->conv_kernel;
        out_bias = "out_proj.bias";
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
            return hb_fail(msg, MC_BACKEND_NOMEM, "heldout2: out of memory");
        }
        for (int64_t i = 0; i < m->R / 2; i++)
            m->inv_freq[i] = pow(c->rope_theta, -(double)(2 * i) / (double)m->R);
        out_bias = "o_proj.bias";
        break;
    }
    }
    if (m->Q < 1)
        m->Q = 64;
    m->C = m->wel / m->K;
    const struct mc_weight *ob = out_bias ? hb_find(desc, out_bias) : NULL;
    if (ob != NULL && bug->kind != M1_NO_PROJ_BIAS) {
        m->out_bias = malloc((size_t)m->D * m->eb);
        if (m->out_bias == NULL) {
            hb_model_destroy(m);
            return hb_fail(msg, MC_BACKEND_NOMEM, "heldout2: out of memory");
        }
        memcpy(m->out_bias, ob->data, (size_t)m->D * m->eb);
    }
    *out = m;
    return MC_BACKEND_OK;
}

/* ---- snapshots of a cache before its last forward (M2_EXPORT_STALE) ----------------------------- */

static struct hb_snap *hb_snap_find(struct mc_model *m, const struct mc_cache *c)
{
    for (int i = 0; i < m->n_snaps; i++)
        if (m->snaps[i].cache == c)
            return &m->snaps[i];
    return NULL;
}

static void hb_snap_drop(struct mc_model *m, const struct mc_cache *c)
{
    struct hb_snap *s = hb_snap_find(m, c);
    if (s == NULL)
        return;
    free(s->window);
    free(s->state);
    *s = m->snaps[--m->n_snaps];
}

/* Records c's window and state (zeros when unprimed) as the port's host copy. */
static int hb_snap_take(struct mc_model *m, const struct mc_cache *c)
{
    struct hb_snap *s = hb_snap_find(m, c);
    if (s == NULL) {
        if (m->n_snaps == m->cap_snaps) {
            const int cap = m->cap_snaps ? 2 * m->cap_snaps : 8;
            struct hb_snap *n = realloc(m->snaps, (size_t)cap * sizeof *n);
            if (n == NULL)
                return -1;
            m->snaps = n;
            m->cap_snaps = cap;
        }
        s = &m->snaps[m->n_snaps++];
        s->cache = c;
        s->window = calloc((size_t)(c->batch * m->wel) + 1, m->eb);
        s->state = calloc((size_t)(c->batch * m->sel) + 1, m->eb);
        if (s->window == NULL || s->state == NULL) {
            hb_snap_drop(m, c);
            return -1;
        }
    }
    if (c->primed) {
        memcpy(s->window, c->window, (size_t)(c->batch * m->wel) * m->eb);
        if (m->sel > 0)
            memcpy(s->state, c->state, (size_t)(c->batch * m->sel) * m->eb);
    } else {
        memset(s->window, 0, (size_t)(c->batch * m->wel) * m->eb);
        memset(s->state, 0, (size_t)(c->batch * m->sel) * m->eb);
    }
    return 0;
}

/* ---- caches: the reference's own ------------------------------------------------------------------ */

static enum mc_backend_status hb_cache_alloc(struct mc_model *m, int64_t batch, struct mc_cache **out,
                                             struct mc_msg *msg)
{
    return m->ref->cache_alloc(m->inner, batch, out, msg);
}

static void hb_cache_free(struct mc_model *m, struct mc_cache *c)
{
    hb_snap_drop(m, c);
    m->ref->cache_free(m->inner, c);
}

static enum mc_backend_status hb_cache_copy(struct mc_model *m, struct mc_cache *dst, const struct mc_cache *src,
                                            struct mc_msg *msg)
{
    const enum hb_kind kind = m->bug->kind;
    hb_snap_drop(m, dst);
    if ((kind != GDN_COPY_STATE_ONLY && kind != SC_COPY_SHORT) || dst == NULL || src == NULL ||
        dst->batch != src->batch || dst == src)
        return m->ref->cache_copy(m->inner, dst, src, msg);
    if (kind == GDN_COPY_STATE_ONLY) { /* the bug: the conv window buffer is not part of the copy */
        if (m->sel > 0)
            memcpy(dst->state, src->state, (size_t)(src->batch * m->sel) * m->eb);
    } else { /* the bug: the window's byte count with K - 1 columns */
        memcpy(dst->window, src->window, (size_t)(src->batch * m->C * (m->K - 1)) * m->eb);
    }
    dst->primed = src->primed;
    return MC_BACKEND_OK;
}

static enum mc_backend_status hb_cache_export(struct mc_model *m, const struct mc_cache *c, void *conv, void *state,
                                              struct mc_msg *msg)
{
    const enum hb_kind kind = m->bug->kind;
    enum mc_backend_status st = m->ref->cache_export(m->inner, c, conv, state, msg);
    if (st != MC_BACKEND_OK || c == NULL)
        return st;
    const int64_t B = c->batch;
    switch (kind) {
    case M2_EXPORT_STALE: { /* the bug: the host copy, taken when the last forward started */
        const struct hb_snap *s = hb_snap_find(m, c);
        if (s == NULL)
            break;
        if (conv != NULL)
            memcpy(conv, s->window, (size_t)(B * m->wel) * m->eb);
        if (state != NULL && m->sel > 0)
            memcpy(state, s->state, (size_t)(B * m->sel) * m->eb);
        break;
    }
    case M1_EXPORT_STATE_T:
    case GDN_EXPORT_STATE_T:
    case AT_EXPORT_VK: {
        if (state == NULL || m->sel == 0)
            break;
        /* per block of rows x cols (mamba1: a batch row [I][N]; gdn: a head [dk][dv]) written transposed;
         * attention: the two halves of a batch row (keys, values) swapped */
        int64_t rows, cols, blocks;
        if (kind == M1_EXPORT_STATE_T) {
            rows = m->C;
            cols = m->sel / m->C;
            blocks = B;
        } else if (kind == GDN_EXPORT_STATE_T) {
            rows = m->dk;
            cols = m->dv;
            blocks = B * m->Hv;
        } else {
            rows = 2;
            cols = m->sel / 2;
            blocks = B;
        }
        const size_t blk = (size_t)(rows * cols) * m->eb;
        unsigned char *tmp = malloc(blk);
        if (tmp == NULL)
            return hb_fail(msg, MC_BACKEND_NOMEM, "heldout2: out of memory");
        for (int64_t b = 0; b < blocks; b++) {
            unsigned char *p = (unsigned char *)state + (size_t)b * blk;
            memcpy(tmp, p, blk);
            if (kind == AT_EXPORT_VK) {
                memcpy(p, tmp + blk / 2, blk / 2);
                memcpy(p + blk / 2, tmp, blk / 2);
                continue;
            }
            for (int64_t i = 0; i < rows; i++)
                for (int64_t j = 0; j < cols; j++)
                    hb_set(p, m->dtype, j * rows + i, hb_get(tmp, m->dtype, i * cols + j));
        }
        free(tmp);
        break;
    }
    default:
        break;
    }
    return st;
}

static enum mc_backend_status hb_cache_import(struct mc_model *m, struct mc_cache *c, const void *conv,
                                              const void *state, struct mc_msg *msg)
{
    const enum hb_kind kind = m->bug->kind;
    if (c != NULL)
        hb_snap_drop(m, c);
    if (kind == AT_IMPORT_BLOCK_ERROR && c != NULL && conv != NULL)
        for (int64_t b = 0; b < c->batch; b++)
            if (fmod(hb_get(conv, m->dtype, b), 4.0) != 0.0)
                return hb_fail(msg, MC_BACKEND_INTERNAL,
                               "heldout2 attention: cache_import: the position count must be a whole number of "
                               "4-position KV blocks");
    if (c == NULL || conv == NULL || (kind != M1_IMPORT_WIN_REV && kind != M2_IMPORT_ROW0))
        return m->ref->cache_import(m->inner, c, conv, state, msg);
    const int64_t B = c->batch;
    if (kind == M1_IMPORT_WIN_REV) { /* the bug: conv_state taken as newest column first */
        void *rev = malloc((size_t)(B * m->wel) * m->eb + 1);
        if (rev == NULL)
            return hb_fail(msg, MC_BACKEND_NOMEM, "heldout2: out of memory");
        for (int64_t row = 0; row < B * m->C; row++)
            for (int64_t k = 0; k < m->K; k++)
                hb_set(rev, m->dtype, row * m->K + k, hb_get(conv, m->dtype, row * m->K + m->K - 1 - k));
        const enum mc_backend_status st = m->ref->cache_import(m->inner, c, rev, state, msg);
        free(rev);
        return st;
    }
    /* M2_IMPORT_ROW0: the bug: one row's worth of each buffer is written, the others keep what they held */
    struct mc_cache *tmp = NULL;
    enum mc_backend_status st = m->ref->cache_alloc(m->inner, B, &tmp, msg);
    if (st != MC_BACKEND_OK)
        return st;
    st = m->ref->cache_import(m->inner, tmp, conv, state, msg);
    if (st == MC_BACKEND_OK) {
        if (!c->primed) {
            memset(c->window, 0, (size_t)(B * m->wel) * m->eb);
            if (m->sel > 0)
                memset(c->state, 0, (size_t)(B * m->sel) * m->eb);
        }
        memcpy(c->window, tmp->window, (size_t)m->wel * m->eb);
        if (m->sel > 0)
            memcpy(c->state, tmp->state, (size_t)m->sel * m->eb);
        c->primed = 1;
    }
    m->ref->cache_free(m->inner, tmp);
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

/* Every cached key of every row (the first n[b] slots) rotated by delta positions. */
static void hb_rotate_cached(struct mc_model *m, struct mc_cache *c, const int64_t *n, double delta)
{
    for (int64_t b = 0; b < c->batch; b++)
        for (int64_t s = 0; s < n[b]; s++)
            hb_rotate_key(m, c, b, s, delta);
}

/* ---- forward ------------------------------------------------------------------------------------- */

/* Output rows at padding tokens become the output projection's bias (what the reference writes). */
static void hb_pad_rows_bias(struct mc_model *m, const struct mc_forward_args *a)
{
    if (a->mask == NULL)
        return;
    for (int64_t r = 0; r < a->batch * a->len; r++)
        if (!a->mask[r])
            for (int64_t j = 0; j < m->D; j++)
                hb_set(a->y, m->dtype, r * m->D + j, m->out_bias ? hb_get(m->out_bias, m->dtype, j) : 0.0);
}

/* M2_CHUNK_STATE_DROP / M2_CHUNK_STATE_F16: the forward run in chunks of Q tokens along L, the
 * recurrent state entering every chunk after the first zeroed or rounded to f16 (the conv window
 * carried as it is). */
static enum mc_backend_status hb_forward_chunks(struct mc_model *m, struct mc_model *use, struct mc_cache *c,
                                                const struct mc_forward_args *a, struct mc_msg *msg)
{
    const int64_t B = a->batch, L = a->len, D = m->D, Q = m->Q;
    const size_t eb = m->eb;
    struct mc_cache *cc = c;
    enum mc_backend_status st = MC_BACKEND_OK;
    if (cc == NULL && (st = m->ref->cache_alloc(m->inner, B, &cc, msg)) != MC_BACKEND_OK)
        return st;
    unsigned char *xs = malloc((size_t)(B * Q * D) * eb), *ys = malloc((size_t)(B * Q * D) * eb);
    uint8_t *ms = a->mask ? malloc((size_t)(B * Q)) : NULL;
    if (xs == NULL || ys == NULL || (a->mask != NULL && ms == NULL)) {
        st = hb_fail(msg, MC_BACKEND_NOMEM, "heldout2: out of memory");
        goto done;
    }
    for (int64_t t0 = 0; t0 < L && st == MC_BACKEND_OK; t0 += Q) {
        const int64_t n = L - t0 < Q ? L - t0 : Q;
        for (int64_t b = 0; b < B; b++) {
            memcpy(xs + (size_t)(b * n * D) * eb, (const unsigned char *)a->x + (size_t)((b * L + t0) * D) * eb,
                   (size_t)(n * D) * eb);
            if (ms != NULL)
                memcpy(ms + b * n, a->mask + b * L + t0, (size_t)n);
        }
        if (t0 > 0 && cc->primed && m->sel > 0) {
            if (m->bug->kind == M2_CHUNK_STATE_DROP) /* the bug: the chunk's initial state is not passed */
                memset(cc->state, 0, (size_t)(B * m->sel) * eb);
            else /* the bug: the chunk states are written to a half-precision buffer */
                hb_round_all(cc->state, m->dtype, B * m->sel, hb_round_f16);
        }
        const struct mc_forward_args sub = {.batch = B, .len = n, .x = xs, .mask = ms, .y = ys};
        st = m->ref->forward(use, cc, &sub, msg);
        if (st != MC_BACKEND_OK)
            break;
        for (int64_t b = 0; b < B; b++)
            memcpy((unsigned char *)a->y + (size_t)((b * L + t0) * D) * eb, ys + (size_t)(b * n * D) * eb,
                   (size_t)(n * D) * eb);
    }
done:
    free(xs);
    free(ys);
    free(ms);
    if (cc != c)
        m->ref->cache_free(m->inner, cc);
    return st;
}

/* SC_RIGHTPAD_WINDOW: the window of c after the forward as if no position of x were padding. */
static enum mc_backend_status hb_unmasked_window(struct mc_model *m, const struct mc_cache *c,
                                                 const struct mc_forward_args *a, void *window, struct mc_msg *msg)
{
    struct mc_cache *tmp = NULL;
    enum mc_backend_status st = m->ref->cache_alloc(m->inner, c->batch, &tmp, msg);
    if (st != MC_BACKEND_OK)
        return st;
    void *y = malloc((size_t)(a->batch * a->len * m->D) * m->eb);
    if (y == NULL) {
        m->ref->cache_free(m->inner, tmp);
        return hb_fail(msg, MC_BACKEND_NOMEM, "heldout2: out of memory");
    }
    st = m->ref->cache_copy(m->inner, tmp, c, msg);
    const struct mc_forward_args un = {.batch = a->batch, .len = a->len, .x = a->x, .mask = NULL, .y = y};
    if (st == MC_BACKEND_OK)
        st = m->ref->forward(m->inner, tmp, &un, msg);
    if (st == MC_BACKEND_OK)
        memcpy(window, tmp->window, (size_t)(c->batch * m->wel) * m->eb);
    free(y);
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
    const int64_t B = a->batch, L = a->len, D = m->D, K = m->K;
    void *scratch = NULL; /* a modified x, or a saved window */
    int64_t *n0 = NULL;   /* AT_CONT_POS_MINUS1: each row's cached count before the call */
    enum mc_backend_status st;

    switch (kind) {
    case M1_LONG_ERROR:
        if (L > 256)
            return hb_fail(msg, MC_BACKEND_INTERNAL,
                           "heldout2 mamba1: forward: sequence longer than the 256-token scan workspace");
        break;
    case M2_MASKED_CONT_ERROR:
        if (primed && L > 1 && a->mask != NULL)
            return hb_fail(msg, MC_BACKEND_INTERNAL,
                           "heldout2 mamba2: forward: an attention mask with a cache holding history is not supported");
        break;
    case SC_CONT_ERROR:
        if (primed && L > 1)
            return hb_fail(msg, MC_BACKEND_INTERNAL,
                           "heldout2 shortconv: forward: multi-token input on a cache that holds history");
        break;
    case M2_CHUNK_STATE_DROP:
    case M2_CHUNK_STATE_F16:
        if (L > m->Q)
            return hb_forward_chunks(m, use, c, a, msg);
        break;
    case M2_EXPORT_STALE:
        if (c != NULL && hb_snap_take(m, c) != 0)
            return hb_fail(msg, MC_BACKEND_NOMEM, "heldout2: out of memory");
        break;
    case M2_CONV_SHIFT_CONT: /* the window read from column 1: the oldest input lost, the newest twice */
        if (primed && L > 1)
            for (int64_t row = 0; row < B * m->C; row++)
                for (int64_t k = 0; k + 1 < K; k++)
                    hb_set(c->window, m->dtype, row * K + k, hb_get(c->window, m->dtype, row * K + k + 1));
        break;
    case AT_CONT_POS_MINUS1:
        /* new tokens one position early = the cached keys one position later (scores see differences) */
        if (primed && L > 1 && m->R > 0) {
            if ((n0 = malloc((size_t)B * sizeof *n0)) == NULL)
                return hb_fail(msg, MC_BACKEND_NOMEM, "heldout2: out of memory");
            for (int64_t b = 0; b < B; b++)
                n0[b] = hb_count(m, c, b);
            hb_rotate_cached(m, c, n0, 1.0);
        }
        break;
    case GDN_SHORT_PREFILL_LEFT: /* each row's real-token count of a fresh prefill */
        if (c != NULL && !primed) {
            if ((n0 = malloc((size_t)B * sizeof *n0)) == NULL)
                return hb_fail(msg, MC_BACKEND_NOMEM, "heldout2: out of memory");
            for (int64_t b = 0; b < B; b++) {
                n0[b] = 0;
                for (int64_t t = 0; t < L; t++)
                    n0[b] += !a->mask || a->mask[b * L + t];
            }
        }
        break;
    case GDN_CONT_WINDOW_ZERO:
        if (primed && L > 1)
            memset(c->window, 0, (size_t)(B * m->wel) * m->eb);
        break;
    case M1_DECODE_NO_ROLL: /* pre-shifted so that the reference's roll leaves the old columns in place */
        if (step)
            for (int64_t row = 0; row < B * m->C; row++) {
                for (int64_t k = K - 1; k > 0; k--)
                    hb_set(c->window, m->dtype, row * K + k, hb_get(c->window, m->dtype, row * K + k - 1));
                hb_set(c->window, m->dtype, row * K, 0.0);
            }
        break;
    case SC_DECODE_WINDOW_STALE:
        if (step) {
            if ((scratch = malloc((size_t)(B * m->wel) * m->eb)) == NULL)
                return hb_fail(msg, MC_BACKEND_NOMEM, "heldout2: out of memory");
            memcpy(scratch, c->window, (size_t)(B * m->wel) * m->eb);
        }
        break;
    case M1_PAD_ZEROED: /* x * mask, then every position through the conv and the scan */
        if (a->mask != NULL) {
            if ((scratch = malloc((size_t)(B * L * D) * m->eb)) == NULL)
                return hb_fail(msg, MC_BACKEND_NOMEM, "heldout2: out of memory");
            memcpy(scratch, a->x, (size_t)(B * L * D) * m->eb);
            for (int64_t r = 0; r < B * L; r++)
                if (!a->mask[r])
                    memset((unsigned char *)scratch + (size_t)(r * D) * m->eb, 0, (size_t)D * m->eb);
            args.x = scratch;
            args.mask = NULL;
        }
        break;
    case SC_RIGHTPAD_WINDOW:
        if (c != NULL && a->mask != NULL) {
            if ((scratch = malloc((size_t)(B * m->wel) * m->eb)) == NULL)
                return hb_fail(msg, MC_BACKEND_NOMEM, "heldout2: out of memory");
            st = hb_unmasked_window(m, c, a, scratch, msg);
            if (st != MC_BACKEND_OK) {
                free(scratch);
                return st;
            }
        }
        break;
    default:
        break;
    }

    st = m->ref->forward(use, c, &args, msg);
    if (st != MC_BACKEND_OK) {
        if (kind == SC_DECODE_WINDOW_STALE && scratch != NULL)
            memcpy(c->window, scratch, (size_t)(B * m->wel) * m->eb);
        if (n0 != NULL && kind == AT_CONT_POS_MINUS1) /* a failed forward leaves the cache as it was */
            hb_rotate_cached(m, c, n0, -1.0);
        free(scratch);
        free(n0);
        return st;
    }

    switch (kind) {
    case M1_DECODE_Y_BF16:
        if (step)
            hb_round_all(a->y, m->dtype, B * L * D, hb_round_bf16);
        break;
    case M1_PAD_ZEROED:
        if (a->mask != NULL)
            hb_pad_rows_bias(m, a);
        break;
    case SC_DECODE_WINDOW_STALE:
    case SC_RIGHTPAD_WINDOW:
        if (scratch != NULL)
            memcpy(c->window, scratch, (size_t)(B * m->wel) * m->eb);
        break;
    case GDN_SHORT_PREFILL_LEFT:
        /* the bug: the r < K inputs written from column K-1-r (not K-r): the newest column stays zero */
        if (n0 != NULL)
            for (int64_t b = 0; b < B; b++) {
                if (n0[b] >= K || n0[b] == 0)
                    continue;
                for (int64_t ch = 0; ch < m->C; ch++) {
                    const int64_t base = (b * m->C + ch) * K;
                    for (int64_t k = 0; k + 1 < K; k++)
                        hb_set(c->window, m->dtype, base + k, hb_get(c->window, m->dtype, base + k + 1));
                    hb_set(c->window, m->dtype, base + K - 1, 0.0);
                }
            }
        break;
    case AT_CONT_POS_MINUS1:
        if (n0 != NULL) {
            /* the old keys back where they were; the new ones as the port rotated them, one position early */
            hb_rotate_cached(m, c, n0, -1.0);
            for (int64_t b = 0; b < B; b++)
                for (int64_t s = n0[b]; s < hb_count(m, c, b); s++)
                    hb_rotate_key(m, c, b, s, -1.0);
        }
        break;
    default:
        break;
    }
    free(scratch);
    free(n0);
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
    if (kind == GDN_PACKED_CONT_ERROR)
        for (int64_t i = 0; i < n; i++)
            if (a->has_initial_state[i] && a->cu_seqlens[i + 1] - a->cu_seqlens[i] > 1)
                return hb_fail(msg, MC_BACKEND_INTERNAL,
                               "heldout2 gdn: forward_packed: a continued sequence of more than one token "
                               "needs the chunked kernel with an initial state (not built)");

    struct mc_cache *one = NULL;
    enum mc_backend_status st = m->ref->cache_alloc(m->inner, 1, &one, msg);
    if (st != MC_BACKEND_OK)
        return st;
    const size_t tok = (size_t)m->D * m->eb, wb = (size_t)m->wel * m->eb, sb = (size_t)m->sel * m->eb;
    unsigned char *prev_win = malloc(wb + 1), *early = malloc(sb + 1);
    int have_prev = 0;
    if (prev_win == NULL || early == NULL) {
        st = hb_fail(msg, MC_BACKEND_NOMEM, "heldout2: out of memory");
        goto done;
    }
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
        /* SC_PACKED_FLAG_NEXT, the bug: the flags indexed like cu_seqlens (from 1), a 0 past the last */
        const int cont = kind != SC_PACKED_FLAG_NEXT ? a->has_initial_state[i]
                         : i + 1 < n                 ? a->has_initial_state[i + 1]
                                                     : 0;
        void *win, *state;
        mc_ref_cache_row(m->inner, pool, a->slots[i], &win, &state);
        if (cont) {
            memcpy(one->window, win, wb);
            if (m->sel > 0)
                memcpy(one->state, state, sb);
        }
        one->primed = cont;
        if (!cont && kind == GDN_PACKED_CONV_LEAK && have_prev) {
            /* the bug: the conv of a fresh sequence reads the packed tokens before it as its context */
            memcpy(one->window, prev_win, wb);
            if (m->sel > 0)
                memset(one->state, 0, sb);
            one->primed = 1;
        }
        const unsigned char *x = (const unsigned char *)a->x + (size_t)t0 * tok;
        unsigned char *y = (unsigned char *)a->y + (size_t)t0 * tok;
        if (kind == M2_PACKED_STATE_EARLY) {
            /* the bug: the state stored is the one at index len - 2 of the sequence (its initial state
             * for a single token); the window is stored right */
            if (len > 1) {
                const struct mc_forward_args head = {.batch = 1, .len = len - 1, .x = x, .mask = NULL, .y = y};
                st = hb_forward(m, one, &head, msg);
            }
            if (st == MC_BACKEND_OK && m->sel > 0) {
                if (one->primed)
                    memcpy(early, one->state, sb);
                else
                    memset(early, 0, sb);
            }
            const struct mc_forward_args last = {.batch = 1,
                                                 .len = 1,
                                                 .x = x + (size_t)(len - 1) * tok,
                                                 .mask = NULL,
                                                 .y = y + (size_t)(len - 1) * tok};
            if (st == MC_BACKEND_OK)
                st = hb_forward(m, one, &last, msg);
            if (st == MC_BACKEND_OK && m->sel > 0)
                memcpy(one->state, early, sb);
        } else {
            const struct mc_forward_args fa = {.batch = 1, .len = len, .x = x, .mask = NULL, .y = y};
            st = hb_forward(m, one, &fa, msg);
        }
        if (st == MC_BACKEND_OK) {
            if (kind == SC_PACKED_Y_F16)
                hb_round_all(y, m->dtype, len * m->D, hb_round_f16);
            if (kind == GDN_POOL_STATE_F16)
                hb_round_all(one->state, m->dtype, m->sel, hb_round_f16);
            memcpy(win, one->window, wb);
            if (m->sel > 0)
                memcpy(state, one->state, sb);
            memcpy(prev_win, one->window, wb);
            have_prev = 1;
        }
    }
done:
    free(prev_win);
    free(early);
    hb_snap_drop(m, one);
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
#undef HB_CREATE

typedef enum mc_backend_status (*hb_create_fn)(const struct mc_model_desc *, struct mc_model **, struct mc_msg *);

static const hb_create_fn hb_creates[] = {
    hb_create_0,  hb_create_1,  hb_create_2,  hb_create_3,  hb_create_4,  hb_create_5,  hb_create_6,
    hb_create_7,  hb_create_8,  hb_create_9,  hb_create_10, hb_create_11, hb_create_12, hb_create_13,
    hb_create_14, hb_create_15, hb_create_16, hb_create_17, hb_create_18, hb_create_19, hb_create_20,
    hb_create_21, hb_create_22, hb_create_23, hb_create_24, hb_create_25, hb_create_26, hb_create_27,
    hb_create_28, hb_create_29, hb_create_30, hb_create_31, hb_create_32, hb_create_33, hb_create_34,
    hb_create_35, hb_create_36, hb_create_37, hb_create_38, hb_create_39, hb_create_40, hb_create_41,
    hb_create_42, hb_create_43, hb_create_44,
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
