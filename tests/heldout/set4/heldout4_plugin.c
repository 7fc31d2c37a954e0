/*
 * heldout4_plugin.c — a fourth held-out set of broken mixer ports, the ground truth of each in
 * manifest.json next to this file (family, style, what is wrong, the closest bug class). Each backend
 * `heldout4.<name>` is the reference mixer of one family (mc_reference_<family>_ops(), compiled into
 * this library) behind its own model handle, with ONE planted bug, written the way a port author could
 * get it wrong. The bugs are emulated exactly with the reference's own calls:
 *
 *   - a constant or a layout read wrongly: the model is created from an edited configuration or from
 *     edited / permuted weights (the exact equivalent of the port reading them that way);
 *   - one path that computes another function: a second reference model, made from edited weights or
 *     configuration, serves the primed L == 1 forwards (the port's decode kernel) on the same cache;
 *   - the q/k l2 norm of GDN and KDA written x / max(||x||, eps): the reference's own source compiled
 *     again with its switch MC_REF_L2NORM_MAX (heldout4_l2gdn.c, heldout4_l2kda.c), serving every path or
 *     the decode path only;
 *   - a forward split where the port's kernel splits it (chunks of the model's chunk length whose carried
 *     state is the one before the chunk's last token, chunks that overlap by one token, a tail chunk that
 *     is skipped, a lightning state rounded to bf16 between blocks), a second reference forward on a copy
 *     of the cache for what the port exports (the cache one real token behind), the cache edited or
 *     rounded before or after the reference's call (a window or a state read in f16);
 *   - attention over a subset of the cached positions (a sliding window, a decode kernel that evicts the
 *     middle of the cache): each token stepped on a one-row cache holding only the visible keys and
 *     values, the keys rotated (RoPE composes: R(a) R(b) = R(a + b)) so that every score sees the
 *     positions it would; GPT-J-style (interleaved) RoPE as NeoX RoPE on q/k dims permuted within each
 *     head, the exported and imported keys permuted back;
 *   - a cache exported, imported or allocated wrongly, a packed call that mishandles a length, a slot,
 *     a sequence count, the positions or its pool's precision (hooks around the reference calls on the
 *     reference cache, whose layout ref_common.h gives);
 *   - an error in one kind of call: an error status, an abort(), NaN outputs.
 *
 * heldout4.control-<family> is the same wrapper with no bug: it must pass every bundled case.
 *
 * The wrapper scaffolding (descriptor copies, rounding helpers, key rotation, the chunked forward and
 * the packed call written on the port's own forward) follows tests/heldout/set3/heldout3_plugin.c; the
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

/* the reference GDN and KDA mixers with the l2 norm x / max(||x||, eps) (heldout4_l2gdn.c, heldout4_l2kda.c) */
const struct mc_backend_ops *hb4_l2max_gdn_ops(void);
const struct mc_backend_ops *hb4_l2max_kda_ops(void);

/* ---- the bugs ----------------------------------------------------------------------------------- */

enum hb_kind {
    HB_CONTROL,
    /* mamba2 */
    M2_DECODE_NO_D,          /* the single-step path drops the D skip */
    M2_DECODE_NORM_EPS,      /* the single-step path's gated norm uses eps 1e-6 */
    M2_CHUNK_CARRY_EARLY,    /* the state carried into the next chunk misses the chunk's last token */
    M2_EXPORT_TOKEN_BEHIND,  /* cache_export returns the cache before each row's last real token */
    M2_RAGGED_ABORT,         /* abort() on a prefill longer than a chunk and not a multiple of it */
    M2_CONV_WEIGHT_KC,       /* conv1d.weight [C][1][K] read as [K][C] */
    M2_DECODE_WINDOW_F16,    /* the single-step kernel reads the conv window through an f16 buffer */
    M2_PACKED_LAST_DROPPED,  /* the packed call's loop stops one sequence early */
    M2_ALLOC_DIRTY_STATE,    /* cache_alloc leaves the state buffer uninitialised */
    /* mamba1 */
    M1_DECODE_NO_D,          /* the single-step path drops the D skip */
    M1_DECODE_NORM_EPS,      /* the single-step path's inner norms use eps 1e-5 */
    M1_PACKED_LEN_MINUS1,    /* the packed call takes each length as cu[i+1] - cu[i] - 1 */
    M1_NAN_LONG,             /* outputs of tokens 256 and later are NaN */
    M1_D_SHIFTED,            /* D read one channel late */
    M1_EXPORT_STATE_BF16,    /* cache_export writes the state through a bf16 buffer */
    M1_IMPORT_ROWS_PAIRED,   /* cache_import writes row b into row b ^ 1 */
    /* gdn */
    GDN_L2NORM_MAX,          /* q/k l2 norm x / max(||x||, eps), every path */
    GDN_DECODE_L2NORM_MAX,   /* the same in the single-step path only */
    GDN_CHUNK_STRIDE_OVERLAP,/* chunks advance by Q - 1 tokens: each boundary token is run twice */
    GDN_A_F16,               /* A = -exp(A_log) tabulated in f16 */
    GDN_MASK_ABORT,          /* abort() on a forward with padding */
    GDN_CONV_QK_SWAPPED,     /* the conv taps of the q and k channel blocks exchanged */
    GDN_PACKED_SLOT_MINUS1,  /* the packed call addresses slot slots[i] - 1 (1-based ids) */
    GDN_IMPORT_STATE_T,      /* cache_import reads each head's state [dk][dv] as [dv][dk] */
    /* shortconv */
    SC_DECODE_NO_OUTBIAS,    /* the single-step path forgets out_proj.bias */
    SC_OUTPROJ_TRANSPOSED,   /* out_proj.weight read transposed */
    SC_WINDOW_F16,           /* the window stored in f16 between calls */
    SC_REFUSE_LONG,          /* forward refuses calls longer than 128 tokens */
    SC_MASK_ROW0,            /* row 0's mask used for every row of the batch */
    SC_IMPORT_SHIFT,         /* cache_import reads window column k from column k + 1 */
    /* attention */
    AT_SLIDING_WINDOW,       /* a sliding window of 8 positions in every path */
    AT_DECODE_EVICT_SINK,    /* the decode kernel attends to position 0 and the last 7 only */
    AT_DECODE_NO_QKNORM_W,   /* the single-step path applies the q/k norms without their weights */
    AT_IMPORT_KV_SWAPPED,    /* cache_import reads the keys from the values half and back */
    AT_PACKED_POS_OFFSET,    /* the packed call's positions are the tokens' packed indices */
    AT_REFUSE_GQA,           /* model_create refuses Hkv < Hq */
    AT_ROPE_GPTJ,            /* RoPE rotating interleaved pairs (2i, 2i+1) */
    AT_PACKED_KV_BF16,       /* the packed call's pool holds keys and values in bf16 */
    /* lightning */
    LA_DECODE_NORM_EPS,      /* the single-step path's output norm uses eps 1e-5 */
    LA_BLOCK_STATE_BF16,     /* the state entering each later block rounded to bf16 */
    LA_QKV_SPLIT_GLOBAL,     /* qkv_proj read as [q all heads | k | v] */
    LA_PACKED_READ_SLOT_I,   /* the packed call loads a continued sequence from slot i */
    LA_ALLOC_DIRTY,          /* cache_alloc leaves the state buffer uninitialised */
    LA_DECODE_NAN_16,        /* a decode step on a row of 16 or more tokens outputs NaN */
    LA_EXPORT_COUNT_PLUS1,   /* cache_export writes the token count plus one */
    /* kda */
    KDA_L2NORM_MAX,          /* q/k l2 norm x / max(||x||, eps), every path */
    KDA_DECODE_NO_DTBIAS,    /* the single-step path drops forget_gate.dt_bias */
    KDA_TAIL_CHUNK_SKIPPED,  /* the partial tail chunk of a long forward is not run */
    KDA_IMPORT_QK_WIN_SWAP,  /* cache_import exchanges the q and k channel blocks of the window */
    KDA_GATE_LOWRANK_SWAP,   /* the forget gate's and the output gate's low-rank weights exchanged */
    KDA_ALLOC_DIRTY_WINDOW,  /* cache_alloc leaves the window buffer uninitialised */
    KDA_DECODE_STATE_F16,    /* the single-step kernel reads the state through an f16 buffer */
    KDA_REFUSE_ODD_HD,       /* model_create refuses a head_dim that is not a multiple of 4 */
};

struct hb_bug {
    const char *name;
    enum mc_family family;
    enum hb_kind kind;
};

static const struct hb_bug hb_bugs[] = {
    {"heldout4.control-mamba2", MC_FAMILY_MAMBA2, HB_CONTROL},
    {"heldout4.control-mamba1", MC_FAMILY_MAMBA1, HB_CONTROL},
    {"heldout4.control-gdn", MC_FAMILY_GDN, HB_CONTROL},
    {"heldout4.control-shortconv", MC_FAMILY_SHORTCONV, HB_CONTROL},
    {"heldout4.control-attention", MC_FAMILY_ATTENTION, HB_CONTROL},
    {"heldout4.control-lightning", MC_FAMILY_LIGHTNING, HB_CONTROL},
    {"heldout4.control-kda", MC_FAMILY_KDA, HB_CONTROL},

    {"heldout4.m2-decode-no-d", MC_FAMILY_MAMBA2, M2_DECODE_NO_D},
    {"heldout4.m2-decode-norm-eps", MC_FAMILY_MAMBA2, M2_DECODE_NORM_EPS},
    {"heldout4.m2-chunk-carry-early", MC_FAMILY_MAMBA2, M2_CHUNK_CARRY_EARLY},
    {"heldout4.m2-export-token-behind", MC_FAMILY_MAMBA2, M2_EXPORT_TOKEN_BEHIND},
    {"heldout4.m2-ragged-abort", MC_FAMILY_MAMBA2, M2_RAGGED_ABORT},
    {"heldout4.m2-conv-weight-kc", MC_FAMILY_MAMBA2, M2_CONV_WEIGHT_KC},
    {"heldout4.m2-decode-window-f16", MC_FAMILY_MAMBA2, M2_DECODE_WINDOW_F16},
    {"heldout4.m2-packed-last-dropped", MC_FAMILY_MAMBA2, M2_PACKED_LAST_DROPPED},
    {"heldout4.m2-alloc-dirty-state", MC_FAMILY_MAMBA2, M2_ALLOC_DIRTY_STATE},

    {"heldout4.m1-decode-no-d", MC_FAMILY_MAMBA1, M1_DECODE_NO_D},
    {"heldout4.m1-decode-norm-eps", MC_FAMILY_MAMBA1, M1_DECODE_NORM_EPS},
    {"heldout4.m1-packed-len-minus1", MC_FAMILY_MAMBA1, M1_PACKED_LEN_MINUS1},
    {"heldout4.m1-nan-long", MC_FAMILY_MAMBA1, M1_NAN_LONG},
    {"heldout4.m1-d-shifted", MC_FAMILY_MAMBA1, M1_D_SHIFTED},
    {"heldout4.m1-export-state-bf16", MC_FAMILY_MAMBA1, M1_EXPORT_STATE_BF16},
    {"heldout4.m1-import-rows-paired", MC_FAMILY_MAMBA1, M1_IMPORT_ROWS_PAIRED},

    {"heldout4.gdn-l2norm-max", MC_FAMILY_GDN, GDN_L2NORM_MAX},
    {"heldout4.gdn-decode-l2norm-max", MC_FAMILY_GDN, GDN_DECODE_L2NORM_MAX},
    {"heldout4.gdn-chunk-stride-overlap", MC_FAMILY_GDN, GDN_CHUNK_STRIDE_OVERLAP},
    {"heldout4.gdn-a-f16", MC_FAMILY_GDN, GDN_A_F16},
    {"heldout4.gdn-mask-abort", MC_FAMILY_GDN, GDN_MASK_ABORT},
    {"heldout4.gdn-conv-qk-swapped", MC_FAMILY_GDN, GDN_CONV_QK_SWAPPED},
    {"heldout4.gdn-packed-slot-minus1", MC_FAMILY_GDN, GDN_PACKED_SLOT_MINUS1},
    {"heldout4.gdn-import-state-transposed", MC_FAMILY_GDN, GDN_IMPORT_STATE_T},

    {"heldout4.sc-decode-no-outbias", MC_FAMILY_SHORTCONV, SC_DECODE_NO_OUTBIAS},
    {"heldout4.sc-outproj-transposed", MC_FAMILY_SHORTCONV, SC_OUTPROJ_TRANSPOSED},
    {"heldout4.sc-window-f16", MC_FAMILY_SHORTCONV, SC_WINDOW_F16},
    {"heldout4.sc-refuse-long", MC_FAMILY_SHORTCONV, SC_REFUSE_LONG},
    {"heldout4.sc-mask-row0", MC_FAMILY_SHORTCONV, SC_MASK_ROW0},
    {"heldout4.sc-import-shift", MC_FAMILY_SHORTCONV, SC_IMPORT_SHIFT},

    {"heldout4.attn-sliding-window", MC_FAMILY_ATTENTION, AT_SLIDING_WINDOW},
    {"heldout4.attn-decode-evict-sink", MC_FAMILY_ATTENTION, AT_DECODE_EVICT_SINK},
    {"heldout4.attn-decode-qknorm-noweight", MC_FAMILY_ATTENTION, AT_DECODE_NO_QKNORM_W},
    {"heldout4.attn-import-kv-swapped", MC_FAMILY_ATTENTION, AT_IMPORT_KV_SWAPPED},
    {"heldout4.attn-packed-pos-offset", MC_FAMILY_ATTENTION, AT_PACKED_POS_OFFSET},
    {"heldout4.attn-refuse-gqa", MC_FAMILY_ATTENTION, AT_REFUSE_GQA},
    {"heldout4.attn-rope-gptj", MC_FAMILY_ATTENTION, AT_ROPE_GPTJ},
    {"heldout4.attn-packed-kv-bf16", MC_FAMILY_ATTENTION, AT_PACKED_KV_BF16},

    {"heldout4.la-decode-norm-eps", MC_FAMILY_LIGHTNING, LA_DECODE_NORM_EPS},
    {"heldout4.la-block-state-bf16", MC_FAMILY_LIGHTNING, LA_BLOCK_STATE_BF16},
    {"heldout4.la-qkv-split-global", MC_FAMILY_LIGHTNING, LA_QKV_SPLIT_GLOBAL},
    {"heldout4.la-packed-read-slot-i", MC_FAMILY_LIGHTNING, LA_PACKED_READ_SLOT_I},
    {"heldout4.la-alloc-dirty", MC_FAMILY_LIGHTNING, LA_ALLOC_DIRTY},
    {"heldout4.la-decode-nan-16", MC_FAMILY_LIGHTNING, LA_DECODE_NAN_16},
    {"heldout4.la-export-count-plus1", MC_FAMILY_LIGHTNING, LA_EXPORT_COUNT_PLUS1},

    {"heldout4.kda-l2norm-max", MC_FAMILY_KDA, KDA_L2NORM_MAX},
    {"heldout4.kda-decode-no-dtbias", MC_FAMILY_KDA, KDA_DECODE_NO_DTBIAS},
    {"heldout4.kda-tail-chunk-skipped", MC_FAMILY_KDA, KDA_TAIL_CHUNK_SKIPPED},
    {"heldout4.kda-import-qk-window-swapped", MC_FAMILY_KDA, KDA_IMPORT_QK_WIN_SWAP},
    {"heldout4.kda-gate-lowrank-swapped", MC_FAMILY_KDA, KDA_GATE_LOWRANK_SWAP},
    {"heldout4.kda-alloc-dirty-window", MC_FAMILY_KDA, KDA_ALLOC_DIRTY_WINDOW},
    {"heldout4.kda-decode-state-f16", MC_FAMILY_KDA, KDA_DECODE_STATE_F16},
    {"heldout4.kda-refuse-odd-headdim", MC_FAMILY_KDA, KDA_REFUSE_ODD_HD},
};

#define HB_N (sizeof hb_bugs / sizeof hb_bugs[0])

/* ---- the wrapper model ---------------------------------------------------------------------------- */

/* M2_EXPORT_TOKEN_BEHIND: what the port's export staging buffer holds for one cache. */
#define HB_MAX_SHADOWS 64
struct hb_shadow {
    const struct mc_cache *c;
    struct mc_cache *behind;
};

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
    int64_t K, C;           /* conv width and channels */
    int64_t Q;              /* the chunk length of the port's prefill kernel */
    int64_t Hkv, Lmax, hd;  /* attention */
    int64_t R;              /* rotary dims (0 without RoPE) */
    double *inv_freq;       /* [R/2] */
    int64_t H;              /* lightning, kda: heads (state [H][hd][hd] per row) */
    int64_t split;          /* gdn: q channels (Hk*dk); kda: H*d; mamba1: I */
    struct hb_shadow shadow[HB_MAX_SHADOWS];
};

static const struct mc_backend_ops *hb_ref_ops(const struct hb_bug *bug)
{
    switch (bug->family) {
    case MC_FAMILY_MAMBA2:
        return mc_reference_mamba2_ops();
    case MC_FAMILY_MAMBA1:
        return mc_reference_mamba1_ops();
    case MC_FAMILY_GDN:
        return bug->kind == GDN_L2NORM_MAX ? hb4_l2max_gdn_ops() : mc_reference_gdn_ops();
    case MC_FAMILY_SHORTCONV:
        return mc_reference_shortconv_ops();
    case MC_FAMILY_ATTENTION:
        return mc_reference_attention_ops();
    case MC_FAMILY_LIGHTNING:
        return mc_reference_lightning_ops();
    case MC_FAMILY_KDA:
        return bug->kind == KDA_L2NORM_MAX ? hb4_l2max_kda_ops() : mc_reference_kda_ops();
    default:
        return NULL;
    }
}

#include "../heldout_scaffold.h" /* hb_fail, element access and rounding, the editable descriptor */

/* Rows [r0, r0 + n) of a [rows][cols] matrix exchanged with rows [r1, r1 + n). */
static void hb_swap_rows(void *p, enum mc_dtype dt, int64_t cols, int64_t r0, int64_t r1, int64_t n)
{
    for (int64_t i = 0; i < n * cols; i++) {
        const double a = hb_get(p, dt, r0 * cols + i), b = hb_get(p, dt, r1 * cols + i);
        hb_set(p, dt, r0 * cols + i, b);
        hb_set(p, dt, r1 * cols + i, a);
    }
}

/* AT_ROPE_GPTJ: within every block of `stride` rows (a head's rows of q_proj / k_proj, their bias, a q/k
 * norm weight), the first R rows reordered so that NeoX's pair (i, i + R/2) is the port's (2i, 2i + 1):
 * new row i = old row 2i, new row i + R/2 = old row 2i + 1. */
static void hb_permute_rope(struct hb_desc *h, const char *name, int64_t stride, int64_t R)
{
    const enum mc_dtype dt = h->d.dtype;
    struct mc_weight *w = hb_edit(h, name, dt == MC_DTYPE_F64 ? 8 : 4);
    if (w == NULL || R < 2)
        return;
    const int64_t cols = w->ndim >= 2 ? w->dims[1] : 1, rows = w->dims[0];
    double *tmp = malloc((size_t)(R * cols) * sizeof *tmp);
    if (tmp == NULL)
        return;
    for (int64_t base = 0; base + R <= rows; base += stride) {
        for (int64_t i = 0; i < R * cols; i++)
            tmp[i] = hb_get(w->data, dt, base * cols + i);
        for (int64_t i = 0; i < R / 2; i++)
            for (int64_t j = 0; j < cols; j++) {
                hb_set((void *)w->data, dt, (base + i) * cols + j, tmp[(2 * i) * cols + j]);
                hb_set((void *)w->data, dt, (base + i + R / 2) * cols + j, tmp[(2 * i + 1) * cols + j]);
            }
    }
    free(tmp);
}

/* The edits shared by both paths of the port: its reading of the configuration and the weights. */
static void hb_edit_common(const struct hb_bug *bug, struct hb_desc *h)
{
    const enum mc_dtype dt = h->d.dtype;
    const size_t eb = dt == MC_DTYPE_F64 ? 8 : 4;
    switch (bug->kind) {
    case M2_CONV_WEIGHT_KC: { /* conv1d.weight [C][1][K]: w[c][k] read at offset k*C + c */
        struct mc_weight *w = hb_edit(h, "conv1d.weight", eb);
        if (w == NULL)
            break;
        const int64_t C = w->dims[0], K = w->dims[w->ndim - 1];
        double *tmp = malloc((size_t)(C * K) * sizeof *tmp);
        if (tmp == NULL)
            break;
        for (int64_t i = 0; i < C * K; i++)
            tmp[i] = hb_get(w->data, dt, i);
        for (int64_t c = 0; c < C; c++)
            for (int64_t k = 0; k < K; k++)
                hb_set((void *)w->data, dt, c * K + k, tmp[k * C + c]);
        free(tmp);
        break;
    }
    case M1_D_SHIFTED: { /* D [I]: channel c reads D[(c + 1) mod I] */
        struct mc_weight *w = hb_edit(h, "D", eb);
        if (w == NULL)
            break;
        const int64_t n = hb_elems(w);
        const double first = hb_get(w->data, dt, 0);
        for (int64_t i = 0; i + 1 < n; i++)
            hb_set((void *)w->data, dt, i, hb_get(w->data, dt, i + 1));
        hb_set((void *)w->data, dt, n - 1, first);
        break;
    }
    case GDN_A_F16: { /* the table A = -exp(A_log) kept in f16: A_log' = log(f16(exp(A_log))) */
        struct mc_weight *w = hb_edit(h, "A_log", eb);
        if (w != NULL)
            for (int64_t i = 0; i < hb_elems(w); i++)
                hb_set((void *)w->data, dt, i, log(hb_round_f16(exp(hb_get(w->data, dt, i)))));
        break;
    }
    case GDN_CONV_QK_SWAPPED: { /* conv1d.weight rows [0, Hk*dk) (q) and [Hk*dk, 2 Hk*dk) (k) exchanged */
        struct mc_weight *w = hb_edit(h, "conv1d.weight", eb);
        const int64_t kd = h->cfg.gdn.num_key_heads * h->cfg.gdn.key_head_dim;
        if (w != NULL)
            hb_swap_rows((void *)w->data, dt, w->dims[w->ndim - 1], 0, kd, kd);
        break;
    }
    case SC_OUTPROJ_TRANSPOSED: { /* out_proj.weight [D][D] read as its transpose */
        struct mc_weight *w = hb_edit(h, "out_proj.weight", eb);
        if (w == NULL || w->dims[0] != w->dims[1])
            break;
        const int64_t n = w->dims[0];
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = i + 1; j < n; j++) {
                const double a = hb_get(w->data, dt, i * n + j), b = hb_get(w->data, dt, j * n + i);
                hb_set((void *)w->data, dt, i * n + j, b);
                hb_set((void *)w->data, dt, j * n + i, a);
            }
        break;
    }
    case LA_QKV_SPLIT_GLOBAL: { /* qkv_proj [3 H hd][D]: head h's part p read at rows p*H*hd + h*hd */
        struct mc_weight *w = hb_edit(h, "qkv_proj.weight", eb);
        const int64_t H = h->cfg.la.num_attention_heads, hd = h->cfg.la.head_dim;
        if (w == NULL)
            break;
        const int64_t cols = w->dims[1], rows = w->dims[0];
        double *tmp = malloc((size_t)(rows * cols) * sizeof *tmp);
        if (tmp == NULL)
            break;
        for (int64_t i = 0; i < rows * cols; i++)
            tmp[i] = hb_get(w->data, dt, i);
        for (int64_t hh = 0; hh < H; hh++)
            for (int64_t p = 0; p < 3; p++)
                for (int64_t i = 0; i < hd; i++)
                    for (int64_t j = 0; j < cols; j++)
                        hb_set((void *)w->data, dt, ((3 * hh + p) * hd + i) * cols + j,
                               tmp[((p * H + hh) * hd + i) * cols + j]);
        free(tmp);
        break;
    }
    case KDA_GATE_LOWRANK_SWAP:
        hb_swap_data(h, "forget_gate.f_a_proj.weight", "g_a_proj.weight");
        hb_swap_data(h, "forget_gate.f_b_proj.weight", "g_b_proj.weight");
        break;
    case AT_ROPE_GPTJ: {
        const struct mc_attention_config *c = &h->cfg.at;
        const int64_t hd = c->head_dim, R = c->no_rope ? 0 : (int64_t)((double)hd * c->partial_rotary_factor);
        const int64_t qstride = c->attn_output_gate ? 2 * hd : hd;
        hb_permute_rope(h, "q_proj.weight", qstride, R);
        hb_permute_rope(h, "q_proj.bias", qstride, R);
        hb_permute_rope(h, "k_proj.weight", hd, R);
        hb_permute_rope(h, "k_proj.bias", hd, R);
        hb_permute_rope(h, "q_norm.weight", hd, R);
        hb_permute_rope(h, "k_norm.weight", hd, R);
        break;
    }
    default:
        break;
    }
}

/* The edits of the single-step path only; returns 1 when it has any. */
static int hb_edit_step(const struct hb_bug *bug, struct hb_desc *h)
{
    const enum mc_dtype dt = h->d.dtype;
    switch (bug->kind) {
    case M2_DECODE_NO_D:
    case M1_DECODE_NO_D:
        hb_affine(h, "D", dt, 0.0, 0.0);
        return 1;
    case M2_DECODE_NORM_EPS:
        h->cfg.m2.layer_norm_epsilon = 1e-6;
        return 1;
    case M1_DECODE_NORM_EPS:
        if (h->cfg.m1.inner_norms == MC_M1_INNER_NORMS_NONE)
            return 0;
        h->cfg.m1.mixer_rms_eps = 1e-5;
        return 1;
    case SC_DECODE_NO_OUTBIAS:
        if (hb_find(&h->d, "out_proj.bias") == NULL)
            return 0;
        hb_affine(h, "out_proj.bias", dt, 0.0, 0.0);
        return 1;
    case AT_DECODE_NO_QKNORM_W:
        if (h->cfg.at.qk_norm == MC_QK_NORM_RMS) {
            hb_affine(h, "q_norm.weight", dt, 0.0, 1.0);
            hb_affine(h, "k_norm.weight", dt, 0.0, 1.0);
            return 1;
        }
        if (h->cfg.at.qk_norm == MC_QK_NORM_ZERO_CENTRED) { /* x * (1 + w) without w */
            hb_affine(h, "q_norm.weight", dt, 0.0, 0.0);
            hb_affine(h, "k_norm.weight", dt, 0.0, 0.0);
            return 1;
        }
        return 0;
    case LA_DECODE_NORM_EPS:
        h->cfg.la.norm_eps = 1e-5;
        return 1;
    case KDA_DECODE_NO_DTBIAS:
        hb_affine(h, "forget_gate.dt_bias", dt, 0.0, 0.0);
        return 1;
    case GDN_DECODE_L2NORM_MAX:
        return 1; /* no edit: the step model is made by the l2-max ops */
    default:
        return 0;
    }
}

static void hb_model_destroy(struct mc_model *m)
{
    if (m == NULL)
        return;
    for (int i = 0; i < HB_MAX_SHADOWS; i++)
        if (m->shadow[i].behind != NULL)
            m->ref->cache_free(m->inner, m->shadow[i].behind);
    if (m->inner != NULL)
        m->ref->model_destroy(m->inner);
    if (m->alt != NULL)
        m->alt_ref->model_destroy(m->alt);
    free(m->inv_freq);
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
        return hb_fail(msg, MC_BACKEND_NOMEM, "heldout4: out of memory");
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
        return hb_fail(msg, MC_BACKEND_INVALID, "heldout4: model_create needs a descriptor and an output handle");
    *out = NULL;
    if (desc->family != bug->family || desc->config == NULL)
        return hb_fail(msg, MC_BACKEND_INVALID, "heldout4: descriptor of another family or without configuration");
    if (desc->dtype != MC_DTYPE_F32 && desc->dtype != MC_DTYPE_F64)
        return hb_fail(msg, MC_BACKEND_UNSUPPORTED, "heldout4: f32 and f64 only");
    if ((bug->kind == AT_SLIDING_WINDOW || bug->kind == AT_DECODE_EVICT_SINK || bug->kind == AT_PACKED_POS_OFFSET ||
         bug->kind == AT_ROPE_GPTJ) &&
        ((const struct mc_attention_config *)desc->config)->kv_lora_rank > 0)
        /* these emulations step a one-row cache of plain keys and values, or permute the rotary rows of q_proj /
         * k_proj: a port of plain attention, written before the attention family had MLA, says it has none
         * (run on an MLA case they corrupted the heap) */
        return hb_fail(msg, MC_BACKEND_UNSUPPORTED,
                       "heldout4 attention: multi-head latent attention (kv_lora_rank > 0) is not implemented");
    if (bug->kind == AT_REFUSE_GQA) { /* the bug: a kernel written for one kv head per query head */
        const struct mc_attention_config *c = desc->config;
        if (c->num_key_value_heads != c->num_attention_heads)
            return hb_fail(msg, MC_BACKEND_INVALID,
                           "heldout4 attention: model_create: num_key_value_heads must equal num_attention_heads");
    }
    if (bug->kind == KDA_REFUSE_ODD_HD) { /* the bug: a kernel vectorised by 4 channels */
        const struct mc_kda_config *c = desc->config;
        if (c->head_dim % 4 != 0)
            return hb_fail(msg, MC_BACKEND_INVALID, "heldout4 kda: model_create: head_dim must be a multiple of 4");
    }
    struct mc_model *m = calloc(1, sizeof *m);
    if (m == NULL)
        return hb_fail(msg, MC_BACKEND_NOMEM, "heldout4: out of memory");
    m->bug = bug;
    m->ref = hb_ref_ops(bug);
    m->alt_ref = bug->kind == GDN_DECODE_L2NORM_MAX ? hb4_l2max_gdn_ops() : m->ref;
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
        m->H = c->num_value_heads;
        m->hd = c->key_head_dim;
        m->Hkv = c->value_head_dim; /* gdn: dv */
        m->split = c->num_key_heads * c->key_head_dim;
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
        break;
    }
    case MC_FAMILY_KDA: {
        const struct mc_kda_config *c = desc->config;
        m->K = c->conv_kernel;
        m->H = c->num_heads;
        m->hd = c->head_dim;
        m->Q = desc->chunk_size > 0 ? desc->chunk_size : c->chunk_size;
        m->split = c->num_heads * c->head_dim;
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
            return hb_fail(msg, MC_BACKEND_NOMEM, "heldout4: out of memory");
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

/* ---- M2_EXPORT_TOKEN_BEHIND: the export staging copy of each cache ------------------------------- */

static struct hb_shadow *hb_shadow_of(struct mc_model *m, const struct mc_cache *c)
{
    for (int i = 0; i < HB_MAX_SHADOWS; i++)
        if (m->shadow[i].behind != NULL && m->shadow[i].c == c)
            return &m->shadow[i];
    return NULL;
}

static void hb_shadow_drop(struct mc_model *m, const struct mc_cache *c)
{
    struct hb_shadow *s = hb_shadow_of(m, c);
    if (s != NULL) {
        m->ref->cache_free(m->inner, s->behind);
        s->behind = NULL;
        s->c = NULL;
    }
}

/* behind becomes c's staging copy (owned by the table; freed when the table is full) */
static void hb_shadow_set(struct mc_model *m, const struct mc_cache *c, struct mc_cache *behind)
{
    hb_shadow_drop(m, c);
    for (int i = 0; i < HB_MAX_SHADOWS; i++)
        if (m->shadow[i].behind == NULL) {
            m->shadow[i].c = c;
            m->shadow[i].behind = behind;
            return;
        }
    m->ref->cache_free(m->inner, behind);
}

/* ---- caches: the reference's own ------------------------------------------------------------------ */

/* a fixed non-zero pattern standing for the memory a malloc hands back */
static void hb_dirty(void *p, enum mc_dtype dt, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        hb_set(p, dt, i, 0.0625 * (double)((i * 7) % 11 - 5));
}

static enum mc_backend_status hb_cache_alloc(struct mc_model *m, int64_t batch, struct mc_cache **out,
                                             struct mc_msg *msg)
{
    const enum mc_backend_status st = m->ref->cache_alloc(m->inner, batch, out, msg);
    if (st != MC_BACKEND_OK || *out == NULL)
        return st;
    struct mc_cache *c = *out;
    const enum hb_kind kind = m->bug->kind;
    if (kind == M2_ALLOC_DIRTY_STATE || kind == LA_ALLOC_DIRTY || kind == KDA_ALLOC_DIRTY_WINDOW) {
        /* the bug: one buffer malloc'ed, the other zeroed, and no 'fresh' flag: the port takes the cache as
         * holding history */
        memset(c->window, 0, (size_t)(batch * m->wel) * m->eb);
        if (m->sel > 0)
            memset(c->state, 0, (size_t)(batch * m->sel) * m->eb);
        if (kind == KDA_ALLOC_DIRTY_WINDOW)
            hb_dirty(c->window, m->dtype, batch * m->wel);
        else
            hb_dirty(c->state, m->dtype, batch * m->sel);
        c->primed = 1;
    }
    return st;
}

static void hb_cache_free(struct mc_model *m, struct mc_cache *c)
{
    hb_shadow_drop(m, c);
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
    const enum mc_backend_status st = m->ref->cache_copy(m->inner, dst, src, msg);
    if (st != MC_BACKEND_OK || m->bug->kind != M2_EXPORT_TOKEN_BEHIND || dst == src || dst == NULL || src == NULL)
        return st;
    /* the port's staging copy travels with the cache */
    struct hb_shadow *s = hb_shadow_of(m, src);
    struct mc_cache *b = NULL;
    if (s == NULL)
        hb_shadow_drop(m, dst);
    else if (hb_clone(m, s->behind, &b, NULL) == MC_BACKEND_OK)
        hb_shadow_set(m, dst, b);
    return st;
}

/* AT_ROPE_GPTJ: the rotary dims of every cached key of a state buffer [B][2 Hkv][Lmax][hd] between the
 * emulation's order (NeoX pairs (i, i + R/2)) and the port's (pairs (2i, 2i + 1)): to_port 1 maps the
 * former to the latter. */
static void hb_keys_gptj(const struct mc_model *m, void *state, int64_t B, int to_port)
{
    const int64_t h2 = m->R / 2;
    double tmp[1024];
    if (m->R > 1024)
        return;
    for (int64_t b = 0; b < B; b++)
        for (int64_t j = 0; j < m->Hkv; j++)
            for (int64_t s = 0; s < m->Lmax; s++) {
                const int64_t base = b * m->sel + (j * m->Lmax + s) * m->hd;
                for (int64_t i = 0; i < m->R; i++)
                    tmp[i] = hb_get(state, m->dtype, base + i);
                for (int64_t i = 0; i < h2; i++) {
                    if (to_port) {
                        hb_set(state, m->dtype, base + 2 * i, tmp[i]);
                        hb_set(state, m->dtype, base + 2 * i + 1, tmp[i + h2]);
                    } else {
                        hb_set(state, m->dtype, base + i, tmp[2 * i]);
                        hb_set(state, m->dtype, base + i + h2, tmp[2 * i + 1]);
                    }
                }
            }
}

static enum mc_backend_status hb_cache_export(struct mc_model *m, const struct mc_cache *c, void *conv, void *state,
                                              struct mc_msg *msg)
{
    const enum hb_kind kind = m->bug->kind;
    if (kind == M2_EXPORT_TOKEN_BEHIND && c != NULL) { /* the bug: the staging copy written one token behind */
        struct hb_shadow *s = hb_shadow_of(m, c);
        if (s != NULL && s->behind->batch == c->batch)
            return m->ref->cache_export(m->inner, s->behind, conv, state, msg);
    }
    enum mc_backend_status st = m->ref->cache_export(m->inner, c, conv, state, msg);
    if (st != MC_BACKEND_OK || c == NULL)
        return st;
    const int64_t B = c->batch;
    if (kind == M1_EXPORT_STATE_BF16 && state != NULL) /* the bug: the state staged in a bf16 buffer */
        hb_round_all(state, m->dtype, B * m->sel, hb_round_bf16);
    if (kind == LA_EXPORT_COUNT_PLUS1 && conv != NULL) /* the bug: the count exported as the next index */
        for (int64_t b = 0; b < B; b++)
            hb_set(conv, m->dtype, b, hb_get(conv, m->dtype, b) + 1.0);
    if (kind == AT_ROPE_GPTJ && state != NULL)
        hb_keys_gptj(m, state, B, 1);
    return st;
}

static enum mc_backend_status hb_cache_import(struct mc_model *m, struct mc_cache *c, const void *conv,
                                              const void *state, struct mc_msg *msg)
{
    const enum hb_kind kind = m->bug->kind;
    if (kind == M2_EXPORT_TOKEN_BEHIND)
        hb_shadow_drop(m, c);
    if (c == NULL || conv == NULL ||
        (kind != M1_IMPORT_ROWS_PAIRED && kind != GDN_IMPORT_STATE_T && kind != SC_IMPORT_SHIFT &&
         kind != AT_IMPORT_KV_SWAPPED && kind != KDA_IMPORT_QK_WIN_SWAP && kind != AT_ROPE_GPTJ))
        return m->ref->cache_import(m->inner, c, conv, state, msg);
    const int64_t B = c->batch;
    const size_t wb = (size_t)(B * m->wel) * m->eb, sb = (size_t)(B * m->sel) * m->eb;
    unsigned char *tw = malloc(wb + 1), *ts = malloc(sb + 1);
    if (tw == NULL || ts == NULL) {
        free(tw);
        free(ts);
        return hb_fail(msg, MC_BACKEND_NOMEM, "heldout4: out of memory");
    }
    memcpy(tw, conv, wb);
    if (state != NULL)
        memcpy(ts, state, sb);
    const enum mc_dtype dt = m->dtype;
    switch (kind) {
    case M1_IMPORT_ROWS_PAIRED: /* the bug: row b written into row b ^ 1 (pairs of rows exchanged) */
        for (int64_t b = 0; b < B; b++) {
            const int64_t o = (b ^ 1) < B ? (b ^ 1) : b;
            memcpy(tw + (size_t)(b * m->wel) * m->eb, (const unsigned char *)conv + (size_t)(o * m->wel) * m->eb,
                   (size_t)m->wel * m->eb);
            if (state != NULL)
                memcpy(ts + (size_t)(b * m->sel) * m->eb, (const unsigned char *)state + (size_t)(o * m->sel) * m->eb,
                       (size_t)m->sel * m->eb);
        }
        break;
    case GDN_IMPORT_STATE_T: /* the bug: each head's [dk][dv] read as [dv][dk] */
        if (state != NULL) {
            const int64_t dk = m->hd, dv = m->Hkv;
            for (int64_t b = 0; b < B; b++)
                for (int64_t h = 0; h < m->H; h++) {
                    const int64_t base = b * m->sel + h * dk * dv;
                    for (int64_t i = 0; i < dk; i++)
                        for (int64_t j = 0; j < dv; j++)
                            hb_set(ts, dt, base + i * dv + j, hb_get(state, dt, base + j * dk + i));
                }
        }
        break;
    case SC_IMPORT_SHIFT: /* the bug: column k read from column k + 1 (the newest twice, the oldest lost) */
        for (int64_t r = 0; r < B * m->C; r++)
            for (int64_t k = 0; k < m->K; k++)
                hb_set(tw, dt, r * m->K + k, hb_get(conv, dt, r * m->K + (k + 1 < m->K ? k + 1 : k)));
        break;
    case AT_IMPORT_KV_SWAPPED: /* the bug: keys read from the values half and values from the keys half */
        if (state != NULL) {
            const size_t half = (size_t)(m->sel / 2) * m->eb, rowb = (size_t)m->sel * m->eb;
            for (int64_t b = 0; b < B; b++) {
                memcpy(ts + (size_t)b * rowb, (const unsigned char *)state + (size_t)b * rowb + half, half);
                memcpy(ts + (size_t)b * rowb + half, (const unsigned char *)state + (size_t)b * rowb, half);
            }
        }
        break;
    case KDA_IMPORT_QK_WIN_SWAP: /* the bug: channel blocks q [0, H d) and k [H d, 2 H d) exchanged */
        for (int64_t b = 0; b < B; b++)
            hb_swap_rows(tw + (size_t)(b * m->wel) * m->eb, dt, m->K, 0, m->split, m->split);
        break;
    case AT_ROPE_GPTJ:
        if (state != NULL)
            hb_keys_gptj(m, ts, B, 0);
        break;
    default:
        break;
    }
    const enum mc_backend_status st = m->ref->cache_import(m->inner, c, tw, state != NULL ? ts : NULL, msg);
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

/* AT_SLIDING_WINDOW / AT_DECODE_EVICT_SINK: every token of every row stepped alone on a one-row cache
 * holding only the cached positions it sees: the first `sink` and the last `keep` of the n cached (all of
 * them when n <= sink + keep). Those keys are rotated by |sel| - n so that the query, at position |sel|
 * there, sees each at its true distance; the new key is rotated back to position n and appended to the
 * row with its value. */
static enum mc_backend_status hb_forward_visible(struct mc_model *m, struct mc_cache *c, const struct mc_forward_args *a,
                                                 int64_t sink, int64_t keep, struct mc_msg *msg)
{
    const int64_t B = a->batch, L = a->len;
    struct mc_cache *cc = c, *one = NULL;
    enum mc_backend_status st = MC_BACKEND_OK;
    if (cc == NULL && (st = m->ref->cache_alloc(m->inner, B, &cc, msg)) != MC_BACKEND_OK)
        return st;
    if ((st = m->ref->cache_alloc(m->inner, 1, &one, msg)) != MC_BACKEND_OK) {
        if (cc != c)
            m->ref->cache_free(m->inner, cc);
        return st;
    }
    if (!cc->primed) {
        memset(cc->window, 0, (size_t)(B * m->wel) * m->eb);
        memset(cc->state, 0, (size_t)(B * m->sel) * m->eb);
        cc->primed = 1;
    }
    const size_t tok = (size_t)m->D * m->eb;
    for (int64_t b = 0; b < B && st == MC_BACKEND_OK; b++)
        for (int64_t t = 0; t < L && st == MC_BACKEND_OK; t++) {
            const int64_t n = hb_count(m, cc, b);
            const uint8_t real = a->mask == NULL || a->mask[b * L + t] != 0;
            if (real && n >= m->Lmax) {
                st = hb_fail(msg, MC_BACKEND_INVALID, "heldout4 attention: forward: the KV cache is full");
                break;
            }
            memset(one->window, 0, (size_t)m->wel * m->eb);
            memset(one->state, 0, (size_t)m->sel * m->eb);
            one->primed = 1;
            int64_t ns = 0;
            for (int64_t s = 0; s < n; s++)
                if (n <= sink + keep || s < sink || s >= n - keep)
                    hb_kv_move(m, one, 0, ns++, cc, b, s);
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
                hb_kv_move(m, cc, b, n, one, 0, ns);
                hb_set(cc->window, m->dtype, b, (double)(n + 1));
            }
        }
    m->ref->cache_free(m->inner, one);
    if (cc != c)
        m->ref->cache_free(m->inner, cc);
    return st;
}

/* M2_CHUNK_CARRY_EARLY / GDN_CHUNK_STRIDE_OVERLAP / LA_BLOCK_STATE_BF16: the forward run in chunks of Q
 * tokens along L: the state carried out of every chunk but the last is the one before its last token
 * (mamba2), the chunks start Q - 1 tokens apart so each boundary token is run again as the first of the
 * next chunk (gdn; the later run's output is the one kept), or the state entering every chunk after the
 * first is rounded to bf16 (lightning). */
static enum mc_backend_status hb_forward_chunks(struct mc_model *m, struct mc_cache *c, const struct mc_forward_args *a,
                                                struct mc_msg *msg)
{
    const enum hb_kind kind = m->bug->kind;
    const int64_t B = a->batch, L = a->len, D = m->D, Q = m->Q;
    const size_t eb = m->eb;
    struct mc_cache *cc = c;
    enum mc_backend_status st = MC_BACKEND_OK;
    if (cc == NULL && (st = m->ref->cache_alloc(m->inner, B, &cc, msg)) != MC_BACKEND_OK)
        return st;
    void *xs = malloc((size_t)(B * Q * D) * eb), *ys = malloc((size_t)(B * Q * D) * eb);
    void *xe = malloc((size_t)(B * Q * D) * eb), *ye = malloc((size_t)(B * Q * D) * eb);
    uint8_t *ms = a->mask ? malloc((size_t)(B * Q)) : NULL, *me = a->mask ? malloc((size_t)(B * Q)) : NULL;
    if (xs == NULL || ys == NULL || xe == NULL || ye == NULL || (a->mask != NULL && (ms == NULL || me == NULL))) {
        st = hb_fail(msg, MC_BACKEND_NOMEM, "heldout4: out of memory");
        goto done;
    }
    for (int64_t t0 = 0; st == MC_BACKEND_OK;) {
        const int64_t n = L - t0 < Q ? L - t0 : Q;
        const int last = t0 + n >= L;
        hb_take(m, a, t0, n, xs, ms);
        if (kind == LA_BLOCK_STATE_BF16 && t0 > 0 && cc->primed) /* the bug: the carried state staged in bf16 */
            hb_round_all(cc->state, m->dtype, B * m->sel, hb_round_bf16);
        struct mc_cache *early = NULL;
        if (kind == M2_CHUNK_CARRY_EARLY && !last && n > 1 && (st = hb_clone(m, cc, &early, msg)) != MC_BACKEND_OK)
            break;
        const struct mc_forward_args sub = {.batch = B, .len = n, .x = xs, .mask = ms, .y = ys};
        st = m->ref->forward(m->inner, cc, &sub, msg);
        if (st == MC_BACKEND_OK)
            hb_put(m, a, t0, n, ys);
        if (early != NULL) {
            /* the bug: the state handed to the next chunk is the one after the chunk's second-to-last token */
            hb_take(m, a, t0, n - 1, xe, me);
            const struct mc_forward_args head = {.batch = B, .len = n - 1, .x = xe, .mask = me, .y = ye};
            if (st == MC_BACKEND_OK)
                st = m->ref->forward(m->inner, early, &head, msg);
            if (st == MC_BACKEND_OK)
                memcpy(cc->state, early->state, (size_t)(B * m->sel) * eb);
            m->ref->cache_free(m->inner, early);
        }
        if (last)
            break;
        t0 += kind == GDN_CHUNK_STRIDE_OVERLAP ? Q - 1 : Q;
    }
done:
    free(xs);
    free(ys);
    free(xe);
    free(ye);
    free(ms);
    free(me);
    if (cc != c)
        m->ref->cache_free(m->inner, cc);
    return st;
}

/* KDA_TAIL_CHUNK_SKIPPED: only the whole chunks of the forward are run; the tail's outputs are not
 * written and its tokens never reach the cache. */
static enum mc_backend_status hb_forward_no_tail(struct mc_model *m, struct mc_cache *c, const struct mc_forward_args *a,
                                                 struct mc_msg *msg)
{
    const int64_t B = a->batch, Lc = a->len / m->Q * m->Q;
    void *xs = malloc((size_t)(B * Lc * m->D) * m->eb), *ys = malloc((size_t)(B * Lc * m->D) * m->eb);
    uint8_t *ms = a->mask ? malloc((size_t)(B * Lc)) : NULL;
    enum mc_backend_status st = MC_BACKEND_OK;
    if (xs == NULL || ys == NULL || (a->mask != NULL && ms == NULL))
        st = hb_fail(msg, MC_BACKEND_NOMEM, "heldout4: out of memory");
    if (st == MC_BACKEND_OK) {
        hb_take(m, a, 0, Lc, xs, ms);
        const struct mc_forward_args head = {.batch = B, .len = Lc, .x = xs, .mask = ms, .y = ys};
        st = m->ref->forward(m->inner, c, &head, msg);
        if (st == MC_BACKEND_OK)
            hb_put(m, a, 0, Lc, ys);
    }
    free(xs);
    free(ys);
    free(ms);
    return st;
}

/* M2_EXPORT_TOKEN_BEHIND: the forward on c, and on a copy of c the same forward with each row's last
 * real token masked out: that copy is what the port's export staging buffer holds. */
static enum mc_backend_status hb_forward_behind(struct mc_model *m, struct mc_cache *c, const struct mc_forward_args *a,
                                                struct mc_msg *msg)
{
    const int64_t B = a->batch, L = a->len;
    struct mc_cache *tmp = NULL;
    enum mc_backend_status st = hb_clone(m, c, &tmp, msg);
    if (st != MC_BACKEND_OK)
        return st;
    void *ys = malloc((size_t)(B * L * m->D) * m->eb);
    uint8_t *ms = malloc((size_t)(B * L));
    if (ys == NULL || ms == NULL)
        st = hb_fail(msg, MC_BACKEND_NOMEM, "heldout4: out of memory");
    if (st == MC_BACKEND_OK) {
        for (int64_t i = 0; i < B * L; i++)
            ms[i] = a->mask == NULL || a->mask[i] != 0;
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = L - 1; t >= 0; t--)
                if (ms[b * L + t]) {
                    ms[b * L + t] = 0;
                    break;
                }
        const struct mc_forward_args behind = {.batch = B, .len = L, .x = a->x, .mask = ms, .y = ys};
        st = m->ref->forward(m->inner, tmp, &behind, msg);
    }
    if (st == MC_BACKEND_OK)
        st = m->ref->forward(m->inner, c, a, msg);
    free(ys);
    free(ms);
    if (st == MC_BACKEND_OK)
        hb_shadow_set(m, c, tmp);
    else
        m->ref->cache_free(m->inner, tmp);
    return st;
}

static int hb_has_pad(const struct mc_forward_args *a)
{
    if (a->mask != NULL)
        for (int64_t i = 0; i < a->batch * a->len; i++)
            if (a->mask[i] == 0)
                return 1;
    return 0;
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
    const int use_alt = step && m->alt != NULL;
    struct mc_forward_args args = *a;
    const int64_t B = a->batch, L = a->len;
    uint8_t *mask = NULL; /* a modified mask */
    uint8_t nan_rows[64] = {0};

    switch (kind) {
    case M2_RAGGED_ABORT: /* the bug: the chunked prefill kernel asserts whole chunks */
        if (!primed && L > m->Q && L % m->Q != 0) {
            fprintf(stderr, "heldout4 mamba2: chunked scan: assertion 'seqlen %% chunk_size == 0' failed\n");
            abort();
        }
        break;
    case GDN_MASK_ABORT: /* the bug: the kernel asserts an unpadded batch */
        if (hb_has_pad(a)) {
            fprintf(stderr, "heldout4 gdn: forward: assertion 'attention_mask is None' failed\n");
            abort();
        }
        break;
    case SC_REFUSE_LONG:
        if (L > 128)
            return hb_fail(msg, MC_BACKEND_INVALID,
                           "heldout4 shortconv: forward: sequences longer than 128 tokens are not supported");
        break;
    case M2_CHUNK_CARRY_EARLY:
    case LA_BLOCK_STATE_BF16:
        if (L > m->Q)
            return hb_forward_chunks(m, c, a, msg);
        break;
    case GDN_CHUNK_STRIDE_OVERLAP:
        if (L > m->Q && m->Q >= 2)
            return hb_forward_chunks(m, c, a, msg);
        break;
    case KDA_TAIL_CHUNK_SKIPPED:
        if (L > m->Q && L % m->Q != 0)
            return hb_forward_no_tail(m, c, a, msg);
        break;
    case M2_EXPORT_TOKEN_BEHIND:
        if (c != NULL)
            return hb_forward_behind(m, c, a, msg);
        break;
    case AT_SLIDING_WINDOW: /* the bug: a window of 8 positions (7 cached and the token itself) */
        return hb_forward_visible(m, c, a, 0, 7, msg);
    case AT_DECODE_EVICT_SINK: /* the bug: the decode kernel keeps position 0 and the newest 6 */
        if (step)
            return hb_forward_visible(m, c, a, 1, 6, msg);
        break;
    case M2_DECODE_WINDOW_F16: /* the bug: the step kernel reads the window from a half buffer */
        if (step)
            hb_round_all(c->window, m->dtype, B * m->wel, hb_round_f16);
        break;
    case KDA_DECODE_STATE_F16: /* the bug: the step kernel reads the state from a half buffer */
        if (step)
            hb_round_all(c->state, m->dtype, B * m->sel, hb_round_f16);
        break;
    case SC_MASK_ROW0: /* the bug: the mask's row stride taken as 0 */
        if (a->mask != NULL && B > 1) {
            if ((mask = malloc((size_t)(B * L))) == NULL)
                return hb_fail(msg, MC_BACKEND_NOMEM, "heldout4: out of memory");
            for (int64_t b = 0; b < B; b++)
                memcpy(mask + b * L, a->mask, (size_t)L);
            args.mask = mask;
        }
        break;
    case LA_DECODE_NAN_16: /* the bug: a 16-entry table read past its end */
        if (step)
            for (int64_t b = 0; b < B && b < 64; b++)
                nan_rows[b] = hb_get(c->window, m->dtype, b) >= 16.0;
        break;
    default:
        break;
    }

    const enum mc_backend_status st =
        use_alt ? m->alt_ref->forward(m->alt, c, &args, msg) : m->ref->forward(m->inner, c, &args, msg);
    free(mask);
    if (st != MC_BACKEND_OK)
        return st;
    const size_t tok = (size_t)m->D;
    if (kind == SC_WINDOW_F16 && c != NULL) /* the bug: the window kept in a half buffer */
        hb_round_all(c->window, m->dtype, B * m->wel, hb_round_f16);
    if (kind == M1_NAN_LONG && L > 256) /* the bug: a 256-token output staging buffer, the rest never written */
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < (L - 256) * (int64_t)tok; i++)
                hb_set(a->y, m->dtype, (b * L + 256) * (int64_t)tok + i, NAN);
    if (kind == LA_DECODE_NAN_16)
        for (int64_t b = 0; b < B && b < 64; b++)
            if (nan_rows[b])
                for (int64_t i = 0; i < (int64_t)tok; i++)
                    hb_set(a->y, m->dtype, b * (int64_t)tok + i, NAN);
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
    const int64_t P = pool->batch;
    if (!pool->primed) {
        memset(pool->window, 0, (size_t)(pool->batch * m->wel) * m->eb);
        if (m->sel > 0)
            memset(pool->state, 0, (size_t)(pool->batch * m->sel) * m->eb);
        pool->primed = 1;
    }
    const int64_t nrun = kind == M2_PACKED_LAST_DROPPED ? n - 1 : n; /* the bug: `i < n_seqs - 1` */
    for (int64_t i = 0; i < nrun && st == MC_BACKEND_OK; i++) {
        const int64_t t0 = a->cu_seqlens[i];
        int64_t len = a->cu_seqlens[i + 1] - t0;
        if (kind == M1_PACKED_LEN_MINUS1) /* the bug: the end offset taken as inclusive */
            len -= 1;
        if (len <= 0)
            continue;
        const int cont = a->has_initial_state[i];
        int64_t slot = a->slots[i];
        if (kind == GDN_PACKED_SLOT_MINUS1) /* the bug: slot ids taken as 1-based */
            slot = (slot - 1 + P) % P;
        void *win, *state;
        mc_ref_cache_row(m->inner, pool, kind == LA_PACKED_READ_SLOT_I && cont ? i : slot, &win, &state);
        if (cont) {
            memcpy(one->window, win, wb);
            if (m->sel > 0)
                memcpy(one->state, state, sb);
        }
        one->primed = cont;
        mc_ref_cache_row(m->inner, pool, slot, &win, &state);
        const unsigned char *x = (const unsigned char *)a->x + (size_t)t0 * tok;
        unsigned char *y = (unsigned char *)a->y + (size_t)t0 * tok;
        const struct mc_forward_args fa = {.batch = 1, .len = len, .x = x, .mask = NULL, .y = y};
        /* AT_PACKED_POS_OFFSET, the bug: token j at position t0 + j (its packed index) instead of n0 + j */
        const int64_t n0 = kind == AT_PACKED_POS_OFFSET && cont ? hb_count(m, one, 0) : 0;
        const double delta = kind == AT_PACKED_POS_OFFSET ? (double)(t0 - n0) : 0.0;
        if (!cont && kind == AT_PACKED_POS_OFFSET) {
            memset(one->window, 0, wb);
            memset(one->state, 0, sb);
            one->primed = 1;
        }
        for (int64_t s = 0; s < n0; s++)
            hb_rotate_key(m, one, 0, s, -delta);
        st = hb_forward(m, one, &fa, msg);
        if (st == MC_BACKEND_OK && delta != 0.0)
            for (int64_t s = 0; s < hb_count(m, one, 0); s++)
                hb_rotate_key(m, one, 0, s, delta);
        if (st == MC_BACKEND_OK) {
            memcpy(win, one->window, wb);
            if (m->sel > 0)
                memcpy(state, one->state, sb);
            if (kind == AT_PACKED_KV_BF16) /* the bug: the pool's KV blocks in bf16 */
                hb_round_all(state, m->dtype, m->sel, hb_round_bf16);
        }
    }
    hb_shadow_drop(m, one);
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
HB_CREATE(59)
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
    hb_create_56, hb_create_57, hb_create_58, hb_create_59,
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
