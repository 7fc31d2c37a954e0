/*
 * heldout_plugin.c — a held-out set of broken mixer ports, the ground truth of each in manifest.json
 * (family, style, what is wrong, the closest bug class). Each backend `heldout.<name>` is the reference
 * mixer of one family (mc_reference_<family>_ops(), compiled into this library) behind its own model
 * handle, with ONE planted bug, written the way a port author could get it wrong:
 *
 *   - a constant or a default taken from the wrong place (the model is created from an edited
 *     configuration);
 *   - a wrong weight layout / index (the model is created from edited or permuted weights, the exact
 *     equivalent of the port reading them the wrong way);
 *   - a single-step (decode) path that differs from the prefill path (a second reference model, made
 *     from edited weights or configuration, serves the primed L == 1 forwards on the same cache);
 *   - a cache that is stored, exported, imported, copied or allocated wrongly, a precision lost
 *     between calls, or a packed call that reads the wrong slot (hooks around the reference calls on
 *     the reference cache, whose layout ref_common.h gives);
 *   - an error or a crash in one call.
 *
 * heldout.control-<family> is the same wrapper with no bug: it must pass every bundled case.
 *
 * The caches handed to the harness are the reference's own (struct mc_cache of ref_common.h). The
 * backends declare f32 and f64 (what the reference computes) and no optional capability except the
 * packed call: no stage probes (the reference's would describe the unbroken model, not the port). A
 * bug's packed call runs each sequence through the port's own forward (hb_forward_packed), so a
 * single-step bug shows there too; the controls use the reference's packed call.
 *
 * Written apart from the diagnosis (harness/src/diagnosis/) and the mutants (tests/mutants/): which
 * class a failure is named is not tested here, only that every bug is caught (test_heldout_caught.py).
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
    M2_NORM_EPS,          /* gated-norm epsilon hard-coded to 1e-6 */
    M2_GROUPWISE_NORM,    /* norm_group_size ignored: the gated norm always per group (I / n_groups) */
    M2_DECODE_NO_CLAMP,   /* the single-step path does not clamp dt to time_step_limit */
    M2_DECODE_DOUBLE_D,   /* the single-step path adds the D skip twice */
    M2_CONV_SKIP_OLDEST,  /* conv loop from k = 1: the oldest tap is never applied */
    M2_STATE_F16,         /* the recurrent state is kept in f16 between calls */
    M2_EXPORT_RING,       /* cache_export reads the conv ring buffer one slot late */
    M2_PACKED_FRESH,      /* forward_packed resets a fresh sequence's conv window but not its state */
    M2_BATCH_MASK_ERROR,  /* forward refuses a masked batch of more than one row */
    /* mamba1 */
    M1_BC_SWAPPED,        /* x_proj output split as dt | C | B */
    M1_DECODE_NO_DTBIAS,  /* the single-step path forgets dt_proj.bias */
    M1_PREFILL_NO_MASK,   /* multi-token forwards ignore the mask (padding reaches the cache) */
    M1_A_BF16,            /* A = -exp(A_log) precomputed at load and kept in bf16 */
    M1_IMPORT_FRESH_ERR,  /* cache_import fails on a cache that no forward has written */
    M1_COPY_ROW0,         /* cache_copy copies only row 0 */
    M1_WINDOW_KM1,        /* the cache keeps K-1 conv inputs: the oldest column is zero after each call */
    /* gdn */
    GDN_NORM_1PW,         /* gated norm with (1 + w), the zero-centred form of the attention q/k norm */
    GDN_DECODE_NO_DTBIAS, /* the single-step path forgets dt_bias in the decay */
    GDN_NORM_EPS,         /* gated-norm epsilon hard-coded to 1e-5 */
    GDN_DECODE_ROW_SHIFT, /* a batched decode step writes row b's new state into row b+1 */
    GDN_BA_SWAPPED,       /* beta read from the a projection and the decay input from the b one */
    GDN_WINDOW_BF16,      /* the conv window is kept in bf16 between calls */
    GDN_PACKED_SLOT_SEQ,  /* forward_packed uses slot i for sequence i instead of slots[i] */
    GDN_MULTI_AS_STEP,    /* a multi-token forward on a primed cache takes the single-step branch */
    /* shortconv */
    SC_CONV_REVERSED,     /* conv taps applied in reverse order (true convolution) */
    SC_SHORT_LEFT_ALIGN,  /* a prefill shorter than K leaves its inputs at the left of the window */
    SC_DECODE_NO_MASK,    /* the single-token path ignores the mask */
    SC_OUT_F16,           /* the output rounded to f16 */
    SC_ALLOC_DIRTY,       /* cache_alloc does not zero its window (and has no "fresh" flag) */
    SC_DECODE_BIAS_TWICE, /* the single-step path adds conv.bias twice */
    /* attention */
    AT_GATE_SWAPPED,      /* per head q_proj rows read as gate | query instead of query | gate */
    AT_THETA_DEFAULT,     /* rope_theta hard-coded to 10000 */
    AT_ROTARY_FREQ_HD,    /* inverse frequencies over head_dim, not the rotary dims: theta^(-2i/hd) */
    AT_DECODE_POS_PLUS1,  /* the single-step path uses position n + 1 */
    AT_CACHE_PADDED_POS,  /* keys written to the cache rotated at the padded index */
    AT_QKNORM_PLAIN,      /* zero-centred q/k norm applied as plain w */
    AT_KV_BF16,           /* KV cache kept in bf16 */
    AT_PACKED_CRASH,      /* forward_packed with more than two sequences writes through NULL */
};

struct hb_bug {
    const char *name;
    enum mc_family family;
    enum hb_kind kind;
};

static const struct hb_bug hb_bugs[] = {
    {"heldout.control-mamba2", MC_FAMILY_MAMBA2, HB_CONTROL},
    {"heldout.control-mamba1", MC_FAMILY_MAMBA1, HB_CONTROL},
    {"heldout.control-gdn", MC_FAMILY_GDN, HB_CONTROL},
    {"heldout.control-shortconv", MC_FAMILY_SHORTCONV, HB_CONTROL},
    {"heldout.control-attention", MC_FAMILY_ATTENTION, HB_CONTROL},

    {"heldout.m2-norm-eps", MC_FAMILY_MAMBA2, M2_NORM_EPS},
    {"heldout.m2-groupwise-norm", MC_FAMILY_MAMBA2, M2_GROUPWISE_NORM},
    {"heldout.m2-decode-no-clamp", MC_FAMILY_MAMBA2, M2_DECODE_NO_CLAMP},
    {"heldout.m2-decode-double-d", MC_FAMILY_MAMBA2, M2_DECODE_DOUBLE_D},
    {"heldout.m2-conv-skip-oldest", MC_FAMILY_MAMBA2, M2_CONV_SKIP_OLDEST},
    {"heldout.m2-state-f16", MC_FAMILY_MAMBA2, M2_STATE_F16},
    {"heldout.m2-export-ring", MC_FAMILY_MAMBA2, M2_EXPORT_RING},
    {"heldout.m2-packed-fresh", MC_FAMILY_MAMBA2, M2_PACKED_FRESH},
    {"heldout.m2-batch-mask-error", MC_FAMILY_MAMBA2, M2_BATCH_MASK_ERROR},

    {"heldout.m1-bc-swapped", MC_FAMILY_MAMBA1, M1_BC_SWAPPED},
    {"heldout.m1-decode-no-dtbias", MC_FAMILY_MAMBA1, M1_DECODE_NO_DTBIAS},
    {"heldout.m1-prefill-no-mask", MC_FAMILY_MAMBA1, M1_PREFILL_NO_MASK},
    {"heldout.m1-a-bf16", MC_FAMILY_MAMBA1, M1_A_BF16},
    {"heldout.m1-import-fresh-error", MC_FAMILY_MAMBA1, M1_IMPORT_FRESH_ERR},
    {"heldout.m1-copy-row0", MC_FAMILY_MAMBA1, M1_COPY_ROW0},
    {"heldout.m1-window-k-minus-1", MC_FAMILY_MAMBA1, M1_WINDOW_KM1},

    {"heldout.gdn-norm-one-plus-w", MC_FAMILY_GDN, GDN_NORM_1PW},
    {"heldout.gdn-decode-no-dtbias", MC_FAMILY_GDN, GDN_DECODE_NO_DTBIAS},
    {"heldout.gdn-norm-eps", MC_FAMILY_GDN, GDN_NORM_EPS},
    {"heldout.gdn-decode-row-shift", MC_FAMILY_GDN, GDN_DECODE_ROW_SHIFT},
    {"heldout.gdn-ba-swapped", MC_FAMILY_GDN, GDN_BA_SWAPPED},
    {"heldout.gdn-window-bf16", MC_FAMILY_GDN, GDN_WINDOW_BF16},
    {"heldout.gdn-packed-slot-seq", MC_FAMILY_GDN, GDN_PACKED_SLOT_SEQ},
    {"heldout.gdn-multi-as-step", MC_FAMILY_GDN, GDN_MULTI_AS_STEP},

    {"heldout.sc-conv-reversed", MC_FAMILY_SHORTCONV, SC_CONV_REVERSED},
    {"heldout.sc-short-left-align", MC_FAMILY_SHORTCONV, SC_SHORT_LEFT_ALIGN},
    {"heldout.sc-decode-no-mask", MC_FAMILY_SHORTCONV, SC_DECODE_NO_MASK},
    {"heldout.sc-out-f16", MC_FAMILY_SHORTCONV, SC_OUT_F16},
    {"heldout.sc-alloc-dirty", MC_FAMILY_SHORTCONV, SC_ALLOC_DIRTY},
    {"heldout.sc-decode-bias-twice", MC_FAMILY_SHORTCONV, SC_DECODE_BIAS_TWICE},

    {"heldout.attn-gate-swapped", MC_FAMILY_ATTENTION, AT_GATE_SWAPPED},
    {"heldout.attn-theta-default", MC_FAMILY_ATTENTION, AT_THETA_DEFAULT},
    {"heldout.attn-rotary-freq-hd", MC_FAMILY_ATTENTION, AT_ROTARY_FREQ_HD},
    {"heldout.attn-decode-pos-plus1", MC_FAMILY_ATTENTION, AT_DECODE_POS_PLUS1},
    {"heldout.attn-cache-padded-pos", MC_FAMILY_ATTENTION, AT_CACHE_PADDED_POS},
    {"heldout.attn-qknorm-plain", MC_FAMILY_ATTENTION, AT_QKNORM_PLAIN},
    {"heldout.attn-kv-bf16", MC_FAMILY_ATTENTION, AT_KV_BF16},
    {"heldout.attn-packed-crash", MC_FAMILY_ATTENTION, AT_PACKED_CRASH},
};

#define HB_N (sizeof hb_bugs / sizeof hb_bugs[0])

/* ---- the wrapper model ---------------------------------------------------------------------------- */

struct mc_model {
    const struct hb_bug *bug;
    const struct mc_backend_ops *ref;
    struct mc_model *inner; /* the reference model the port's prefill path amounts to */
    struct mc_model *alt;   /* the one its single-step path amounts to (NULL: the same) */
    enum mc_dtype dtype;
    size_t eb;              /* bytes per element of weights, x, y and the cache */
    int64_t D;              /* hidden size */
    int64_t wel, sel;       /* window and state elements per cache row */
    int64_t K, C;           /* conv width and channels */
    /* attention */
    int64_t Hkv, hd, Lmax, R;
    double *inv_freq;       /* [R/2] */
    void *out_bias;         /* [D] copy of the output projection's bias, or NULL */
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

/* The edits shared by both paths of the port: its reading of the configuration and the weights. */
static void hb_edit_common(const struct hb_bug *bug, struct hb_desc *h)
{
    const enum mc_dtype dt = h->d.dtype;
    const size_t eb = dt == MC_DTYPE_F64 ? 8 : 4;
    switch (bug->kind) {
    case M2_NORM_EPS:
        h->cfg.m2.layer_norm_epsilon = 1e-6;
        break;
    case M2_GROUPWISE_NORM:
        h->cfg.m2.norm_group_size = h->cfg.m2.num_heads * h->cfg.m2.head_dim / h->cfg.m2.n_groups;
        break;
    case M2_CONV_SKIP_OLDEST: { /* conv1d.weight [C][1][K]: tap 0 (the oldest input) never used */
        struct mc_weight *w = hb_edit(h, "conv1d.weight", eb);
        if (w != NULL)
            for (int64_t c = 0; c < w->dims[0]; c++)
                hb_set((void *)w->data, dt, c * w->dims[2], 0.0);
        break;
    }
    case M1_BC_SWAPPED: { /* x_proj.weight [R+2N][I]: the port's B rows are the C rows and back */
        struct mc_weight *w = hb_edit(h, "x_proj.weight", eb);
        if (w == NULL)
            break;
        const int64_t R = h->cfg.m1.time_step_rank, N = h->cfg.m1.state_size, I = w->dims[1];
        unsigned char *p = (void *)w->data;
        unsigned char *tmp = malloc((size_t)(N * I) * eb);
        if (tmp == NULL)
            break;
        memcpy(tmp, p + (size_t)(R * I) * eb, (size_t)(N * I) * eb);
        memcpy(p + (size_t)(R * I) * eb, p + (size_t)((R + N) * I) * eb, (size_t)(N * I) * eb);
        memcpy(p + (size_t)((R + N) * I) * eb, tmp, (size_t)(N * I) * eb);
        free(tmp);
        break;
    }
    case M1_A_BF16: { /* the reference's A = -exp(A_log) then equals the port's bf16 table */
        struct mc_weight *w = hb_edit(h, "A_log", eb);
        if (w != NULL)
            for (int64_t i = 0; i < hb_elems(w); i++)
                hb_set((void *)w->data, dt, i, log(hb_round_bf16(exp(hb_get(w->data, dt, i)))));
        break;
    }
    case GDN_NORM_1PW:
        hb_affine(h, "norm.weight", dt, 1.0, 1.0);
        break;
    case GDN_NORM_EPS:
        h->cfg.gdn.rms_norm_eps = 1e-5;
        break;
    case GDN_BA_SWAPPED: {
        if (h->cfg.gdn.layout == MC_GDN_LAYOUT_QWEN3_5) { /* the two tables taken for each other */
            struct mc_weight *wb = NULL, *wa = NULL;
            for (int i = 0; i < h->d.n_weights; i++) {
                if (strcmp(h->w[i].name, "in_proj_b.weight") == 0)
                    wb = &h->w[i];
                if (strcmp(h->w[i].name, "in_proj_a.weight") == 0)
                    wa = &h->w[i];
            }
            if (wb != NULL && wa != NULL) {
                const void *t = wb->data;
                wb->data = wa->data;
                wa->data = t;
            }
            break;
        }
        /* Qwen3-Next in_proj_ba: per key head [b_j (r rows) | a_j (r rows)], the halves swapped */
        struct mc_weight *w = hb_edit(h, "in_proj_ba.weight", eb);
        if (w == NULL)
            break;
        const int64_t Hk = h->cfg.gdn.num_key_heads, r = h->cfg.gdn.num_value_heads / Hk;
        const size_t half = (size_t)(r * w->dims[1]) * eb;
        unsigned char *p = (void *)w->data, *tmp = malloc(half);
        if (tmp == NULL)
            break;
        for (int64_t j = 0; j < Hk; j++) {
            unsigned char *bj = p + (size_t)(2 * j) * half, *aj = bj + half;
            memcpy(tmp, bj, half);
            memcpy(bj, aj, half);
            memcpy(aj, tmp, half);
        }
        free(tmp);
        break;
    }
    case SC_CONV_REVERSED: { /* conv.weight [D][1][K] */
        struct mc_weight *w = hb_edit(h, "conv.weight", eb);
        if (w == NULL)
            break;
        const int64_t K = w->dims[2];
        for (int64_t c = 0; c < w->dims[0]; c++)
            for (int64_t k = 0; k < K / 2; k++) {
                const double a = hb_get(w->data, dt, c * K + k), b = hb_get(w->data, dt, c * K + K - 1 - k);
                hb_set((void *)w->data, dt, c * K + k, b);
                hb_set((void *)w->data, dt, c * K + K - 1 - k, a);
            }
        break;
    }
    case AT_GATE_SWAPPED: { /* q_proj [Hq][2hd][D] (+ bias [Hq][2hd]) with the output gate */
        if (!h->cfg.at.attn_output_gate)
            break;
        const int64_t Hq = h->cfg.at.num_attention_heads, hd = h->cfg.at.head_dim;
        struct mc_weight *ws[2] = {hb_edit(h, "q_proj.weight", eb),
                                   h->cfg.at.attention_bias ? hb_edit(h, "q_proj.bias", eb) : NULL};
        for (int k = 0; k < 2; k++) {
            struct mc_weight *w = ws[k];
            if (w == NULL)
                continue;
            const size_t half = (size_t)(hd * (w->ndim > 1 ? w->dims[1] : 1)) * eb;
            unsigned char *p = (void *)w->data, *tmp = malloc(half);
            if (tmp == NULL)
                break;
            for (int64_t hh = 0; hh < Hq; hh++) {
                unsigned char *qh = p + (size_t)(2 * hh) * half, *gh = qh + half;
                memcpy(tmp, qh, half);
                memcpy(qh, gh, half);
                memcpy(gh, tmp, half);
            }
            free(tmp);
        }
        break;
    }
    case AT_THETA_DEFAULT:
        h->cfg.at.rope_theta = 10000.0;
        break;
    case AT_ROTARY_FREQ_HD: { /* theta^(-2i/hd) = (theta^(R/hd))^(-2i/R): the same as another base */
        const double R = (double)(int64_t)((double)h->cfg.at.head_dim * h->cfg.at.partial_rotary_factor);
        if (R < (double)h->cfg.at.head_dim)
            h->cfg.at.rope_theta = pow(h->cfg.at.rope_theta, R / (double)h->cfg.at.head_dim);
        break;
    }
        break;
    case AT_QKNORM_PLAIN:
        if (h->cfg.at.qk_norm == MC_QK_NORM_ZERO_CENTRED)
            h->cfg.at.qk_norm = MC_QK_NORM_RMS;
        break;
    default:
        break;
    }
}

/* The edits of the single-step path only; returns 0 when that path is the prefill's. */
static int hb_edit_step(const struct hb_bug *bug, struct hb_desc *h)
{
    const enum mc_dtype dt = h->d.dtype;
    switch (bug->kind) {
    case M2_DECODE_NO_CLAMP:
        h->cfg.m2.time_step_limit[0] = 0.0;
        h->cfg.m2.time_step_limit[1] = INFINITY;
        return 1;
    case M2_DECODE_DOUBLE_D:
        hb_affine(h, "D", dt, 2.0, 0.0);
        return 1;
    case M1_DECODE_NO_DTBIAS:
        hb_affine(h, "dt_proj.bias", dt, 0.0, 0.0);
        return 1;
    case GDN_DECODE_NO_DTBIAS:
        hb_affine(h, "dt_bias", dt, 0.0, 0.0);
        return 1;
    case SC_DECODE_BIAS_TWICE:
        hb_affine(h, "conv.bias", dt, 2.0, 0.0);
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
    free(m->out_bias);
    free(m);
}

static enum mc_backend_status hb_create(const struct hb_bug *bug, const struct mc_model_desc *desc,
                                        struct mc_model **out, struct mc_msg *msg)
{
    if (desc == NULL || out == NULL)
        return hb_fail(msg, MC_BACKEND_INVALID, "heldout: model_create needs a descriptor and an output handle");
    *out = NULL;
    if (desc->family != bug->family || desc->config == NULL)
        return hb_fail(msg, MC_BACKEND_INVALID, "heldout: descriptor of another family or without configuration");
    if (desc->dtype != MC_DTYPE_F32 && desc->dtype != MC_DTYPE_F64)
        return hb_fail(msg, MC_BACKEND_UNSUPPORTED, "heldout: f32 and f64 only");
    if ((bug->kind == AT_DECODE_POS_PLUS1 || bug->kind == AT_CACHE_PADDED_POS) &&
        ((const struct mc_attention_config *)desc->config)->kv_lora_rank > 0)
        /* their emulations edit the cache's plain key / value layout: a port of plain attention, written before
         * the attention family had MLA, says it has none (run on an MLA case they corrupted the heap) */
        return hb_fail(msg, MC_BACKEND_UNSUPPORTED,
                       "heldout attention: multi-head latent attention (kv_lora_rank > 0) is not implemented");
    struct mc_model *m = calloc(1, sizeof *m);
    if (m == NULL)
        return hb_fail(msg, MC_BACKEND_NOMEM, "heldout: out of memory");
    m->bug = bug;
    m->ref = hb_ref_ops(bug->family);
    m->dtype = desc->dtype;
    m->eb = desc->dtype == MC_DTYPE_F64 ? 8 : 4;

    struct hb_desc h;
    enum mc_backend_status st = MC_BACKEND_NOMEM;
    if (hb_desc_init(&h, desc) != 0) {
        hb_desc_free(&h);
        hb_model_destroy(m);
        return hb_fail(msg, st, "heldout: out of memory");
    }
    hb_edit_common(bug, &h);
    st = m->ref->model_create(&h.d, &m->inner, msg);
    if (st == MC_BACKEND_OK && hb_edit_step(bug, &h))
        st = m->ref->model_create(&h.d, &m->alt, msg);
    hb_desc_free(&h);
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
        m->hd = c->head_dim;
        m->Lmax = c->cache_length;
        m->R = (int64_t)((double)c->head_dim * c->partial_rotary_factor);
        m->inv_freq = malloc((size_t)(m->R / 2 + 1) * sizeof *m->inv_freq);
        if (m->inv_freq == NULL) {
            hb_model_destroy(m);
            return hb_fail(msg, MC_BACKEND_NOMEM, "heldout: out of memory");
        }
        for (int64_t i = 0; i < m->R / 2; i++)
            m->inv_freq[i] = pow(c->rope_theta, -(double)(2 * i) / (double)m->R);
        out_bias = "o_proj.bias";
        break;
    }
    }
    m->C = m->wel / m->K;
    const struct mc_weight *ob = out_bias ? hb_find(desc, out_bias) : NULL;
    if (ob != NULL) {
        m->out_bias = malloc((size_t)m->D * m->eb);
        if (m->out_bias == NULL) {
            hb_model_destroy(m);
            return hb_fail(msg, MC_BACKEND_NOMEM, "heldout: out of memory");
        }
        memcpy(m->out_bias, ob->data, (size_t)m->D * m->eb);
    }
    *out = m;
    return MC_BACKEND_OK;
}

/* ---- caches: the reference's own ------------------------------------------------------------------ */

static enum mc_backend_status hb_cache_alloc(struct mc_model *m, int64_t batch, struct mc_cache **out,
                                             struct mc_msg *msg)
{
    enum mc_backend_status st = m->ref->cache_alloc(m->inner, batch, out, msg);
    if (st != MC_BACKEND_OK || m->bug->kind != SC_ALLOC_DIRTY)
        return st;
    /* the bug: malloc'ed window holding what the allocator had there (here a fixed pattern), and the
     * port treats every cache as one to continue from */
    struct mc_cache *c = *out;
    for (int64_t i = 0; i < batch * m->wel; i++)
        hb_set(c->window, m->dtype, i, 0.5 * sin(0.7 * (double)i + 0.3));
    c->primed = 1;
    return st;
}

static void hb_cache_free(struct mc_model *m, struct mc_cache *c)
{
    m->ref->cache_free(m->inner, c);
}

static enum mc_backend_status hb_cache_copy(struct mc_model *m, struct mc_cache *dst, const struct mc_cache *src,
                                            struct mc_msg *msg)
{
    if (m->bug->kind != M1_COPY_ROW0 || dst == NULL || src == NULL || dst->batch != src->batch)
        return m->ref->cache_copy(m->inner, dst, src, msg);
    /* the bug: one row's bytes, the batch factor forgotten */
    memcpy(dst->window, src->window, (size_t)m->wel * m->eb);
    if (m->sel > 0)
        memcpy(dst->state, src->state, (size_t)m->sel * m->eb);
    dst->primed = src->primed;
    return MC_BACKEND_OK;
}

static enum mc_backend_status hb_cache_export(struct mc_model *m, const struct mc_cache *c, void *conv, void *state,
                                              struct mc_msg *msg)
{
    enum mc_backend_status st = m->ref->cache_export(m->inner, c, conv, state, msg);
    if (st != MC_BACKEND_OK || m->bug->kind != M2_EXPORT_RING || conv == NULL)
        return st;
    /* the bug: the ring buffer is read starting one slot past its head: out[k] = window[(k+1) % K] */
    const int64_t K = m->K;
    double *tmp = malloc((size_t)K * sizeof *tmp);
    if (tmp == NULL)
        return hb_fail(msg, MC_BACKEND_NOMEM, "heldout: out of memory");
    for (int64_t row = 0; row < c->batch * m->C; row++) {
        for (int64_t k = 0; k < K; k++)
            tmp[k] = hb_get(conv, m->dtype, row * K + (k + 1) % K);
        for (int64_t k = 0; k < K; k++)
            hb_set(conv, m->dtype, row * K + k, tmp[k]);
    }
    free(tmp);
    return st;
}

static enum mc_backend_status hb_cache_import(struct mc_model *m, struct mc_cache *c, const void *conv,
                                              const void *state, struct mc_msg *msg)
{
    if (m->bug->kind == M1_IMPORT_FRESH_ERR && c != NULL && !c->primed)
        return hb_fail(msg, MC_BACKEND_INTERNAL,
                       "heldout mamba1: cache_import: the cache has no device buffers yet (run a forward first)");
    return m->ref->cache_import(m->inner, c, conv, state, msg);
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
            const double a = delta * m->inv_freq[i], cs = cos(a), sn = sin(a);
            const double x1 = hb_get(st, m->dtype, base + i), x2 = hb_get(st, m->dtype, base + i + half);
            hb_set(st, m->dtype, base + i, x1 * cs - x2 * sn);
            hb_set(st, m->dtype, base + i + half, x2 * cs + x1 * sn);
        }
    }
}

/* Row b's cached-position count, clamped to [0, Lmax] (the reference refuses a count that is not). */
static int64_t hb_count(struct mc_model *m, const struct mc_cache *c, int64_t b)
{
    const double v = hb_get(c->window, m->dtype, b);
    return !(v > 0.0) ? 0 : v > (double)m->Lmax ? m->Lmax : (int64_t)v;
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

/* GDN_MULTI_AS_STEP: the cached branch steps token 0 of each row and leaves the other outputs zero. */
static enum mc_backend_status hb_step_first_only(struct mc_model *m, struct mc_cache *c,
                                                 const struct mc_forward_args *a, struct mc_msg *msg)
{
    const int64_t B = a->batch, L = a->len, D = m->D;
    const size_t tok = (size_t)D * m->eb;
    unsigned char *x0 = malloc((size_t)B * tok), *y0 = malloc((size_t)B * tok);
    uint8_t *mask0 = a->mask ? malloc((size_t)B) : NULL;
    enum mc_backend_status st = MC_BACKEND_NOMEM;
    if (x0 == NULL || y0 == NULL || (a->mask != NULL && mask0 == NULL)) {
        hb_fail(msg, st, "heldout: out of memory");
        goto done;
    }
    for (int64_t b = 0; b < B; b++) {
        memcpy(x0 + (size_t)b * tok, (const unsigned char *)a->x + (size_t)(b * L) * tok, tok);
        if (mask0)
            mask0[b] = a->mask[b * L];
    }
    const struct mc_forward_args one = {.batch = B, .len = 1, .x = x0, .mask = mask0, .y = y0};
    st = m->ref->forward(m->alt ? m->alt : m->inner, c, &one, msg);
    if (st != MC_BACKEND_OK)
        goto done;
    memset(a->y, 0, (size_t)(B * L) * tok);
    for (int64_t b = 0; b < B; b++)
        memcpy((unsigned char *)a->y + (size_t)(b * L) * tok, y0 + (size_t)b * tok, tok);
done:
    free(x0);
    free(y0);
    free(mask0);
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
    const int64_t B = a->batch, L = a->len, n_tok = B * L;
    int64_t *n0 = NULL;
    enum mc_backend_status st;

    switch (kind) {
    case M2_BATCH_MASK_ERROR:
        if (B > 1 && a->mask != NULL)
            return hb_fail(msg, MC_BACKEND_INTERNAL,
                           "heldout mamba2: forward: per-row masks in a batch are not implemented (varlen kernel)");
        break;
    case M1_PREFILL_NO_MASK:
        if (L > 1)
            args.mask = NULL;
        break;
    case SC_DECODE_NO_MASK:
        if (step)
            args.mask = NULL;
        break;
    case GDN_MULTI_AS_STEP:
        if (primed && L > 1)
            return hb_step_first_only(m, c, a, msg);
        break;
    case AT_DECODE_POS_PLUS1: /* cached keys one position further back = the new token one further on */
        if (step)
            for (int64_t b = 0; b < B; b++)
                for (int64_t s = 0; s < hb_count(m, c, b); s++)
                    hb_rotate_key(m, c, b, s, -1.0);
        break;
    case AT_CACHE_PADDED_POS:
    case SC_SHORT_LEFT_ALIGN:
        if (c != NULL) {
            n0 = malloc((size_t)B * sizeof *n0);
            if (n0 == NULL)
                return hb_fail(msg, MC_BACKEND_NOMEM, "heldout: out of memory");
            for (int64_t b = 0; b < B; b++)
                n0[b] = kind == AT_CACHE_PADDED_POS ? (primed ? hb_count(m, c, b) : 0) : primed;
        }
        break;
    default:
        break;
    }

    st = m->ref->forward(use, c, &args, msg);
    if (st != MC_BACKEND_OK) {
        if (kind == AT_DECODE_POS_PLUS1 && step) /* a failed forward leaves the cache as it was */
            for (int64_t b = 0; b < B; b++)
                for (int64_t s = 0; s < hb_count(m, c, b); s++)
                    hb_rotate_key(m, c, b, s, 1.0);
        free(n0);
        return st;
    }

    switch (kind) {
    case AT_KV_BF16:
        if (c != NULL)
            hb_round_all(c->state, m->dtype, B * m->sel, hb_round_bf16);
        break;
    case M2_STATE_F16:
        if (c != NULL)
            hb_round_all(c->state, m->dtype, B * m->sel, hb_round_f16);
        break;
    case GDN_WINDOW_BF16:
        if (c != NULL)
            hb_round_all(c->window, m->dtype, B * m->wel, hb_round_bf16);
        break;
    case M1_WINDOW_KM1:
        if (c != NULL)
            for (int64_t row = 0; row < B * m->C; row++)
                hb_set(c->window, m->dtype, row * m->K, 0.0);
        break;
    case M1_PREFILL_NO_MASK:
    case SC_DECODE_NO_MASK:
        if (args.mask == NULL)
            hb_pad_rows_bias(m, a);
        break;
    case SC_OUT_F16:
        hb_round_all(a->y, m->dtype, n_tok * m->D, hb_round_f16);
        break;
    case GDN_DECODE_ROW_SHIFT:
        if (step && B > 1) { /* row b's new state lands in row (b + 1) % B */
            const size_t row = (size_t)m->sel * m->eb;
            unsigned char *tmp = malloc((size_t)B * row);
            if (tmp == NULL)
                return hb_fail(msg, MC_BACKEND_NOMEM, "heldout: out of memory");
            memcpy(tmp, c->state, (size_t)B * row);
            for (int64_t b = 0; b < B; b++)
                memcpy((unsigned char *)c->state + (size_t)((b + 1) % B) * row, tmp + (size_t)b * row, row);
            free(tmp);
        }
        break;
    case AT_DECODE_POS_PLUS1:
        if (step)
            for (int64_t b = 0; b < B; b++) {
                /* the old keys back where they were; the new one (if any) as the port stored it, one on */
                for (int64_t s = 0; s < hb_count(m, c, b); s++)
                    hb_rotate_key(m, c, b, s, 1.0);
            }
        break;
    case AT_CACHE_PADDED_POS:
        if (n0 != NULL && a->mask != NULL)
            for (int64_t b = 0; b < B; b++) {
                int64_t j = 0; /* real tokens so far: the reference wrote the j-th to slot n0 + j */
                for (int64_t t = 0; t < L; t++)
                    if (a->mask[b * L + t]) {
                        if (t != j)
                            hb_rotate_key(m, c, b, n0[b] + j, (double)(t - j));
                        j++;
                    }
            }
        break;
    case SC_SHORT_LEFT_ALIGN:
        if (n0 != NULL)
            for (int64_t b = 0; b < B; b++) {
                if (n0[b]) /* the cache was primed: not a fresh prefill */
                    continue;
                int64_t r = 0;
                for (int64_t t = 0; t < L; t++)
                    r += !a->mask || a->mask[b * L + t];
                if (r >= m->K)
                    continue;
                /* the port copies the r inputs to columns 0..r-1 instead of K-r..K-1 */
                for (int64_t ch = 0; ch < m->C; ch++) {
                    const int64_t base = (b * m->C + ch) * m->K;
                    for (int64_t k = 0; k < m->K; k++)
                        hb_set(c->window, m->dtype, base + k,
                               k < r ? hb_get(c->window, m->dtype, base + m->K - r + k) : 0.0);
                }
            }
        break;
    default:
        break;
    }
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
    if (kind == AT_PACKED_CRASH) {
        /* the bug: per-sequence scratch set up for at most two sequences; the third is a NULL entry */
        int64_t *volatile scratch[3] = {NULL, NULL, NULL};
        int64_t first[1], second[1];
        scratch[0] = first;
        scratch[1] = second;
        if (a != NULL)
            for (int64_t i = 0; i < a->n_seqs && i < 3; i++)
                *scratch[i] = a->cu_seqlens[i + 1] - a->cu_seqlens[i];
        return m->ref->forward_packed(m->inner, pool, a, msg);
    }
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
    if (!pool->primed) {
        memset(pool->window, 0, (size_t)(pool->batch * m->wel) * m->eb);
        if (m->sel > 0)
            memset(pool->state, 0, (size_t)(pool->batch * m->sel) * m->eb);
        pool->primed = 1;
    }
    const size_t tok = (size_t)m->D * m->eb, wb = (size_t)m->wel * m->eb, sb = (size_t)m->sel * m->eb;
    for (int64_t i = 0; i < n && st == MC_BACKEND_OK; i++) {
        const int64_t t0 = a->cu_seqlens[i], len = a->cu_seqlens[i + 1] - t0;
        if (len == 0)
            continue;
        const int64_t slot = kind == GDN_PACKED_SLOT_SEQ ? i : a->slots[i];
        const int cont = a->has_initial_state[i];
        void *win, *state;
        mc_ref_cache_row(m->inner, pool, slot, &win, &state);
        if (cont) {
            memcpy(one->window, win, wb);
            if (m->sel > 0)
                memcpy(one->state, state, sb);
        }
        one->primed = cont;
        if (!cont && kind == M2_PACKED_FRESH && m->sel > 0) { /* the bug: only the window is reset */
            memset(one->window, 0, wb);
            memcpy(one->state, state, sb);
            one->primed = 1;
        }
        const struct mc_forward_args fa = {.batch = 1,
                                           .len = len,
                                           .x = (const unsigned char *)a->x + (size_t)t0 * tok,
                                           .mask = NULL,
                                           .y = (unsigned char *)a->y + (size_t)t0 * tok};
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
#undef HB_CREATE

typedef enum mc_backend_status (*hb_create_fn)(const struct mc_model_desc *, struct mc_model **, struct mc_msg *);

static const hb_create_fn hb_creates[] = {
    hb_create_0,  hb_create_1,  hb_create_2,  hb_create_3,  hb_create_4,  hb_create_5,  hb_create_6,
    hb_create_7,  hb_create_8,  hb_create_9,  hb_create_10, hb_create_11, hb_create_12, hb_create_13,
    hb_create_14, hb_create_15, hb_create_16, hb_create_17, hb_create_18, hb_create_19, hb_create_20,
    hb_create_21, hb_create_22, hb_create_23, hb_create_24, hb_create_25, hb_create_26, hb_create_27,
    hb_create_28, hb_create_29, hb_create_30, hb_create_31, hb_create_32, hb_create_33, hb_create_34,
    hb_create_35, hb_create_36, hb_create_37, hb_create_38, hb_create_39, hb_create_40, hb_create_41,
    hb_create_42,
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
